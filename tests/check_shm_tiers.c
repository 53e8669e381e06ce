/*
 * check_shm_tiers.c - tiers in the shared and anonymous stores (srl.h,
 * TIERS): several named policies in one segment, a key's tier recorded in
 * its slot, conversion when a key changes tier, and the tier table and a
 * slot's tier word as untrusted input.
 *
 *   exactness:  8 processes hammer keys of two tiers (frozen fake time):
 *               each key admits exactly its own tier's limit, every trial.
 *   conversion: a table of (old tier, use, new tier) rows, each with the
 *               exact count the key gets under its new tier.
 *               srl_peek_tier foretells each row's first decision, and
 *               writes nothing.
 *   api:        names, lookups, bad tables, ECOST per tier, mismatch and
 *               adoption of another table, stores without tiers,
 *               srl_peek_tier's errors.
 *   hostile:    garbage in each field of the header's tier table (resealed
 *               with a valid checksum, as an attacker could) is refused
 *               with SRL_ECORRUPT; a slot's tier beyond the table is named
 *               by srl_check, reset by the next touch and counted.
 */
#include <check.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"
#include "srl.h"
#include "shm_testutil.h"
#include "testutil.h"

#define WORKERS 8
#define TRIALS 5
#define KEYS 40             /* per trial: even keys tier 0, odd keys tier 1 */
#define TRIES 120           /* per worker, per key */
#define FREE_LIMIT 50
#define PAID_LIMIT 300

static srl_tier tier_of(const char *name, const char *text)
{
    srl_tier t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    ck_assert_int_eq(srl_limits_parse_ex(text, &t.limits, NULL), 0);
    return t;
}

static srl_config tiered_config(const char *base, const srl_tier *tiers, uint32_t n,
                                fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_limits_parse_ex(base, &cfg.limits, NULL), 0);
    cfg.capacity = 1024;
    cfg.tiers = tiers;
    cfg.tier_count = n;
    if (clock != NULL)
        cfg.ticker = fake_ticker(clock);
    return cfg;
}

/* ------------------------------------------------------------ exactness */

struct area {
    struct spin_barrier barrier;
    uint32_t admitted[TRIALS][KEYS];
    uint32_t errors;
};

static void worker(const char *name, const srl_config *cfg, struct area *a)
{
    srl_limiter *lim;
    if (srl_open_shared(name, cfg, 0, &lim) != 0) {
        __atomic_add_fetch(&a->errors, 1, __ATOMIC_RELAXED);
        _exit(1);
    }
    int paid = srl_tier_find(lim, "paid");
    for (int t = 0; t < TRIALS; t++) {
        spin_barrier_wait(&a->barrier, WORKERS);
        for (int r = 0; r < TRIES; r++) {
            for (int k = 0; k < KEYS; k++) {
                char key[32];
                int n = snprintf(key, sizeof key, "t%d-k%d", t, k);
                srl_decision d;
                int rc = srl_acquire_tier(lim, k % 2 ? (uint32_t)paid : 0, key, (size_t)n, 1, &d);
                if (rc != 0 || (d.flags & SRL_DECISION_UNTRACKED))
                    __atomic_add_fetch(&a->errors, 1, __ATOMIC_RELAXED);
                else if (d.allowed)
                    __atomic_add_fetch(&a->admitted[t][k], 1, __ATOMIC_RELAXED);
            }
        }
    }
    srl_close(lim);
    _exit(0);
}

/* srl_foreach: keys per tier in ctx[0..1], any other tier in ctx[2]. */
static int count_tier(const srl_entry *e, void *ctx)
{
    ((uint64_t *)ctx)[e->tier < 2 ? e->tier : 2]++;
    return 0;
}

START_TEST(eight_processes_admit_each_key_exactly_its_own_tiers_limit_in_every_trial)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);   /* frozen: no refill */
    srl_tier paid = tier_of("paid", "token_bucket:300/1h");
    srl_config cfg = tiered_config("token_bucket:50/1h", &paid, 1, clock);
    const char *name = unique_name("tiers");
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    struct area *a = shared_zeroed(sizeof *a);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] == 0)
            worker(name, &cfg, a);
    }
    for (int w = 0; w < WORKERS; w++) {
        int st;
        ck_assert_int_eq(waitpid(pids[w], &st, 0), pids[w]);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    ck_assert_uint_eq(a->errors, 0);
    for (int t = 0; t < TRIALS; t++)
        for (int k = 0; k < KEYS; k++)
            ck_assert_msg(a->admitted[t][k] == (k % 2 ? PAID_LIMIT : FREE_LIMIT),
                          "trial %d key %d (tier %d): admitted %u, want %u", t, k, k % 2,
                          a->admitted[t][k], k % 2 ? PAID_LIMIT : FREE_LIMIT);
    /* Every key's slot records its tier. */
    uint64_t per[3] = {0, 0, 0};
    int64_t n = srl_foreach(lim, count_tier, per);
    ck_assert_int_eq(n, TRIALS * KEYS);
    ck_assert_uint_eq(per[0], TRIALS * KEYS / 2);
    ck_assert_uint_eq(per[1], TRIALS * KEYS / 2);
    ck_assert_uint_eq(per[2], 0);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    munmap(a, sizeof *a);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------------ conversion */

struct row {
    const char *from;       /* tier 0 */
    uint32_t used;          /* admitted under tier 0 first */
    const char *to;         /* tier 1 ("to") */
    uint32_t then;          /* exactly this many admitted under tier 1 */
};

static const struct row rows[] = {
    /* The same algorithm carries the use over, capped at the new capacity. */
    {"token_bucket:10/1h", 10, "token_bucket:20/1h", 10},   /* 10 of 10, then 10 more */
    {"token_bucket:10/1h", 3, "token_bucket:20/1h", 17},
    {"token_bucket:100/1h", 50, "token_bucket:10/1h", 0},   /* never above a fresh key */
    {"token_bucket:100/1h", 5, "token_bucket:10/1h", 5},
    {"token_bucket:10/1h", 0, "token_bucket:20/1h", 20},
    {"token_bucket:10/1h,burst=4", 4, "token_bucket:10/1h", 6},
    {"gcra:10/1h", 10, "gcra:20/1h", 10},
    {"gcra:20/1h", 8, "gcra:10/1h", 2},
    {"sliding_log:10/1h", 4, "sliding_log:20/1h", 16},
    {"sliding_log:20/1h", 15, "sliding_log:10/1h", 0},
    {"sliding_counter:10/1h", 4, "sliding_counter:5/1h", 1},
    {"sliding_counter:10/1h", 4, "sliding_counter:30/1h", 26},
    /* Compounds of the same shape: limit by limit. */
    {"token_bucket:10/1m + token_bucket:100/1d", 6, "token_bucket:20/1m + token_bucket:8/1d", 2},
    /* Another algorithm, or another shape: the key starts fresh. */
    {"token_bucket:10/1h", 10, "gcra:20/1h", 20},
    {"gcra:10/1h", 10, "sliding_log:5/1h", 5},
    {"token_bucket:10/1h", 10, "token_bucket:20/1h + token_bucket:30/1d", 20},
};

/* What a caller reads of a decision. */
static bool same_decision(const srl_decision *a, const srl_decision *b)
{
    return a->allowed == b->allowed && a->remaining == b->remaining && a->limit == b->limit &&
           a->retry_after_ns == b->retry_after_ns && a->reset_after_ns == b->reset_after_ns;
}

START_TEST(a_key_that_changes_tier_keeps_its_use_by_the_conversion_table)
{
    const struct row *r = &rows[_i];
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_tier to = tier_of("to", r->to);
    srl_config cfg = tiered_config(r->from, &to, 1, clock);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_decision d;
    for (uint32_t i = 0; i < r->used; i++) {
        ck_assert_int_eq(srl_acquire_tier(lim, 0, "k", 1, 1, &d), 0);
        ck_assert_msg(d.allowed, "row %d: use %u of %s denied", _i, i, r->from);
    }
    /* srl_peek_tier foretells the conversion's first decision exactly,
     * and writes nothing: the key is still tier 0's, its state as it was. */
    srl_decision seen = {0}, own_before = {0}, own_after = {0}, again = {0};
    int tracked = r->used > 0;
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &own_before), tracked ? 0 : SRL_ENOENT);
    ck_assert_int_eq(srl_peek_tier(lim, 1, "k", 1, 1, &seen), tracked ? 0 : SRL_ENOENT);
    ck_assert_int_eq(srl_peek_tier(lim, 1, "k", 1, 1, &again), tracked ? 0 : SRL_ENOENT);
    ck_assert(same_decision(&seen, &again));
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &own_after), tracked ? 0 : SRL_ENOENT);
    ck_assert(same_decision(&own_before, &own_after));
    again = (srl_decision){0};
    ck_assert_int_eq(srl_peek_tier(lim, 0, "k", 1, 1, &again), tracked ? 0 : SRL_ENOENT);
    ck_assert(same_decision(&own_before, &again));
    uint32_t got = 0;
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(srl_acquire_tier(lim, 1, "k", 1, 1, &d), 0);
        if (i == 0 && tracked) {
            ck_assert_msg(same_decision(&d, &seen),
                          "row %d: peek_tier said %d %u/%u retry %llu reset %llu, the "
                          "request got %d %u/%u retry %llu reset %llu",
                          _i, seen.allowed, seen.remaining, seen.limit,
                          (unsigned long long)seen.retry_after_ns,
                          (unsigned long long)seen.reset_after_ns, d.allowed, d.remaining,
                          d.limit, (unsigned long long)d.retry_after_ns,
                          (unsigned long long)d.reset_after_ns);
        }
        got += d.allowed != 0;
    }
    ck_assert_msg(got == r->then, "row %d: %s used %u -> %s admitted %u, want %u", _i, r->from,
                  r->used, r->to, got, r->then);
    /* The slot now records tier 1, and srl_peek reads it under tier 1;
     * srl_key_control_get says so (rlctl get decodes its rows by it). */
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), 0);
    ck_assert_uint_eq(kc.tier, 1);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_close(lim);
}
END_TEST

/* An anonymous segment of policy base (tier 0) and one tier, name = text,
 * on a frozen fake clock (the table is copied at open). */
static srl_limiter *anonymous_two_tiers(const char *base, const char *name, const char *text)
{
    srl_tier t = tier_of(name, text);
    srl_config cfg = tiered_config(base, &t, 1, fake_clock_shared(1000 * SEC));
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    return lim;
}

/* Back and forth: each move carries the use again, capped at the capacity
 * of the tier it moves to, so what a cap drops is not charged again. */
START_TEST(moving_back_and_forth_caps_the_use_at_each_tiers_capacity)
{
    srl_limiter *lim = anonymous_two_tiers("token_bucket:10/1h", "big", "token_bucket:20/1h");
    srl_decision d;
    uint32_t got[4] = {0};
    for (int phase = 0; phase < 4; phase++)
        for (int i = 0; i < 30; i++) {
            ck_assert_int_eq(srl_acquire_tier(lim, (uint32_t)(phase % 2), "k", 1, 1, &d), 0);
            got[phase] += d.allowed != 0;
        }
    ck_assert_uint_eq(got[0], 10);
    ck_assert_uint_eq(got[1], 10);   /* 20 - the 10 used */
    ck_assert_uint_eq(got[2], 0);    /* used 20, capped at 10: none left */
    ck_assert_uint_eq(got[3], 10);   /* the cap forgot 10 of the 20: see design.md */
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------------------ api */

/* srl_peek_tier's edges: an untracked key (SRL_ENOENT, as srl_peek), a
 * tier beyond the table (SRL_EINVAL), a cost above the tier's permits
 * (SRL_ECOST naming them), a store without tiers (tier 0 is srl_peek). */
START_TEST(peek_tier_refuses_what_acquire_tier_refuses_and_a_store_without_tiers_has_tier_0)
{
    srl_limiter *lim = anonymous_two_tiers("token_bucket:2/1h", "paid", "token_bucket:5/1h");
    srl_decision d;
    char why[256];
    ck_assert_int_eq(srl_peek_tier(lim, 1, "k", 1, 1, &d), SRL_ENOENT);
    ck_assert_int_eq(srl_acquire_tier(lim, 1, "k", 1, 3, &d), 0);
    ck_assert_int_eq(srl_peek_tier(lim, 2, "k", 1, 1, &d), SRL_EINVAL);
    ck_assert_int_eq(srl_peek_tier(lim, 0, "k", 1, 3, &d), SRL_ECOST);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "cost 3: 'token_bucket:2/1h' allows 2 at most");
    ck_assert_int_eq(srl_peek_tier(lim, 1, "k", 1, 3, &d), 0);   /* paid's: 2 left */
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(srl_peek_tier(lim, 0, "k", 1, 1, &d), 0);   /* 3 used, capped at 2 */
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.limit, 2);
    ck_assert_uint_eq(d.retry_after_ns, 1800 * SEC);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.allowed, 1);   /* the peeks counted nothing */
    ck_assert_uint_eq(st.denied, 0);
    srl_close(lim);

    srl_config one;
    srl_config_init(&one);
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:2/1h", &one.limits, NULL), 0);
    one.ticker = fake_ticker(fake_clock_shared(1000 * SEC));
    ck_assert_int_eq(srl_open_local(&one, &lim), 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    srl_decision p;
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &p), 0);
    ck_assert_int_eq(srl_peek_tier(lim, 0, "k", 1, 1, &d), 0);
    ck_assert(same_decision(&p, &d));
    ck_assert_int_eq(srl_peek_tier(lim, 1, "k", 1, 1, &d), SRL_EINVAL);
    srl_close(lim);
}
END_TEST

START_TEST(tiers_are_named_found_and_reported)
{
    srl_tier t[2] = {tier_of("paid", "token_bucket:1000/1m"),
                     tier_of("bulk-2_x", "sliding_log:64/1s")};
    srl_config cfg = tiered_config("token_bucket:100/1m", t, 2, NULL);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    ck_assert_int_eq(srl_tier_find(lim, "default"), 0);
    ck_assert_int_eq(srl_tier_find(lim, "paid"), 1);
    ck_assert_int_eq(srl_tier_find(lim, "bulk-2_x"), 2);
    ck_assert_int_eq(srl_tier_find(lim, "pai"), SRL_ENOENT);
    ck_assert_int_eq(srl_tier_find(lim, "paidx"), SRL_ENOENT);
    ck_assert_int_eq(srl_tier_find(lim, NULL), SRL_EINVAL);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_uint_eq(info.tier_count, 3);
    ck_assert_uint_eq(info.layout_version, SRL__SHM_VERSION);
    ck_assert_uint_eq(info.state_bytes, srl_limits_state_size(&t[1].limits));
    srl_tier got;
    ck_assert_int_eq(srl_tier_get(lim, 0, &got), 0);
    ck_assert_str_eq(got.name, "default");
    ck_assert_uint_eq(got.limits.limit[0].permits, 100);
    ck_assert_int_eq(srl_tier_get(lim, 2, &got), 0);
    ck_assert_str_eq(got.name, "bulk-2_x");
    ck_assert_int_eq(got.limits.limit[0].algorithm, SRL_SLIDING_LOG);
    ck_assert_int_eq(srl_tier_get(lim, 3, &got), SRL_EINVAL);
    srl_decision d;
    ck_assert_int_eq(srl_acquire_tier(lim, 3, "k", 1, 1, &d), SRL_EINVAL);
    /* Cost within the tier's permits: 64 for bulk, 1000 for paid. */
    char why[256];
    ck_assert_int_eq(srl_acquire_tier(lim, 2, "k", 1, 65, &d), SRL_ECOST);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "cost 65: 'sliding_log:64/1s' allows 64 at most");
    ck_assert_int_eq(srl_acquire_tier(lim, 1, "k", 1, 1000, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_acquire(lim, "j", 1, 101, &d), SRL_ECOST);   /* tier 0: 100 */
    /* peek and refund take the key's own tier. */
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1000, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(srl_refund(lim, "k", 1, 1000), 0);
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1000, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_acquire_tier(lim, 2, "b", 1, 1, &d), 0);
    ck_assert_int_eq(srl_peek(lim, "b", 1, 100, &d), SRL_ECOST);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "cost 100: 'sliding_log:64/1s' allows 64 at most");
    ck_assert_int_eq(srl_refund(lim, "b", 1, 100), SRL_ECOST);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "cost 100: 'sliding_log:64/1s' allows 64 at most");
    unsigned char buf[4096];
    ck_assert_int_eq(srl_key_state(lim, "b", 1, buf, info.state_bytes - 8), SRL_ENOBUFS);
    ck_assert_int_eq(srl_key_state(lim, "b", 1, buf, info.state_bytes), 0);
    srl_close(lim);
}
END_TEST

START_TEST(a_bad_tier_table_is_refused_before_anything_is_made)
{
    srl_limiter *lim = (srl_limiter *)1;
    struct { const char *name, *text; int want; } bad[] = {
        {"", "token_bucket:1/1s", SRL_EINVAL},
        {"default", "token_bucket:1/1s", SRL_EINVAL},
        {"has space", "token_bucket:1/1s", SRL_EINVAL},
        {"dot.ted", "token_bucket:1/1s", SRL_EINVAL},
        {"ok", "concurrency:4", SRL_EPOLICY},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srl_tier t;
        memset(&t, 0, sizeof t);
        snprintf(t.name, sizeof t.name, "%s", bad[i].name);
        ck_assert_int_eq(srl_limits_parse_ex(bad[i].text, &t.limits, NULL), 0);
        srl_config cfg = tiered_config("token_bucket:1/1s", &t, 1, NULL);
        ck_assert_msg(srl_open_anonymous(&cfg, &lim) == bad[i].want, "case %zu", i);
        ck_assert_ptr_null(lim);
    }
    srl_tier dup[2] = {tier_of("a", "token_bucket:1/1s"), tier_of("a", "token_bucket:2/1s")};
    srl_config cfg = tiered_config("token_bucket:1/1s", dup, 2, NULL);
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), SRL_EINVAL);
    /* A name filling all 32 bytes has no NUL. */
    memset(dup[0].name, 'a', sizeof dup[0].name);
    cfg.tier_count = 1;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), SRL_EINVAL);
    /* Junk after the NUL. */
    dup[0] = tier_of("a", "token_bucket:1/1s");
    dup[0].name[5] = 'x';
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), SRL_EINVAL);
    cfg.tiers = NULL;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), SRL_EINVAL);
    srl_tier many[SRL_TIERS_MAX];
    for (unsigned i = 0; i < SRL_TIERS_MAX; i++) {
        char n[8];
        snprintf(n, sizeof n, "t%u", i);
        many[i] = tier_of(n, "token_bucket:1/1s");
    }
    cfg = tiered_config("token_bucket:1/1s", many, SRL_TIERS_MAX, NULL);
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), SRL_EINVAL);
    cfg.tier_count = SRL_TIERS_MAX - 1;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_uint_eq(info.tier_count, SRL_TIERS_MAX);
    srl_close(lim);
    /* Tier 0 may not hold a concurrency limit in a tiered config either. */
    cfg = tiered_config("concurrency:4", many, 1, NULL);
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), SRL_EPOLICY);
    /* The local store has no tiers. */
    cfg = tiered_config("token_bucket:1/1s", many, 1, NULL);
    ck_assert_int_eq(srl_open_local(&cfg, &lim), SRL_ENOTSUP);
    ck_assert_ptr_null(lim);
    cfg.tier_count = 0;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire_tier(lim, 0, "k", 1, 1, &d), 0);
    ck_assert_int_eq(srl_acquire_tier(lim, 1, "k", 1, 1, &d), SRL_EINVAL);
    srl_close(lim);
}
END_TEST

START_TEST(another_tier_table_is_a_mismatch_and_adopt_takes_the_segments)
{
    srl_tier t[2] = {tier_of("paid", "token_bucket:1000/1m"), tier_of("vip", "gcra:9/1s")};
    srl_config cfg = tiered_config("token_bucket:100/1m", t, 2, NULL);
    const char *name = unique_name("tiers");
    srl_limiter *lim, *other;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    srl_config c2 = cfg;
    c2.tier_count = 1;
    ck_assert_int_eq(srl_open_shared(name, &c2, 0, &other), SRL_EMISMATCH);
    srl_info seg_info;
    ck_assert_int_eq(srl_info_get(lim, &seg_info), 0);
    char why[512];
    ck_assert_int_eq(srl_mismatch_explain(&c2, &seg_info, why, sizeof why), 1);
    ck_assert_str_eq(why, "tiers: the segment has 3 (its policy and 2 named), this config asks "
                          "for 2 (pass the segment's table: rlctl info lists it)");
    ck_assert_int_eq(srl_mismatch_explain(&cfg, &seg_info, why, sizeof why), 0);
    srl_tier t2[2] = {t[0], tier_of("vip", "gcra:10/1s")};
    c2 = cfg;
    c2.tiers = t2;
    ck_assert_int_eq(srl_open_shared(name, &c2, 0, &other), SRL_EMISMATCH);
    srl_tier t3[2] = {t[0], tier_of("VIP", "gcra:9/1s")};
    c2.tiers = t3;
    ck_assert_int_eq(srl_open_shared(name, &c2, 0, &other), SRL_EMISMATCH);
    /* The same table in another spelling (burst=permits is no burst) matches. */
    srl_tier t4[2] = {t[0], tier_of("vip", "gcra:9/1s,burst=9")};
    c2.tiers = t4;
    ck_assert_int_eq(srl_open_shared(name, &c2, 0, &other), 0);
    srl_close(other);
    c2.tier_count = 0;
    ck_assert_int_eq(srl_open_shared(name, &c2, SRL_ADOPT, &other), 0);
    ck_assert_int_eq(srl_tier_find(other, "vip"), 2);
    srl_decision d;
    ck_assert_int_eq(srl_acquire_tier(other, 2, "k", 1, 9, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_acquire_tier(lim, 2, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    srl_close(other);
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &other), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(other, &info), 0);
    ck_assert_uint_eq(info.tier_count, 3);
    srl_close(other);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------------ hostile */

#define TIER_OFF(i, field) (offsetof(struct srl__shm_header, tiers) + \
                            (size_t)(i) * sizeof(srl_tier) + offsetof(srl_tier, field))

static void reseal(const char *name)
{
    struct srl__shm_header h;
    int fd = shm_open(name, O_RDONLY, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    close(fd);
    shm_poke64(name, offsetof(struct srl__shm_header, header_sum), srl__shm_header_sum(&h));
}

struct damage {
    const char *what;
    size_t off;
    uint32_t value;     /* written as 4 bytes, or 1 if one_byte */
    int one_byte;
    int want;           /* with SRL_ADOPT */
};

static const struct damage damages[] = {
    {"tier_count 0", offsetof(struct srl__shm_header, tier_count), 0, 0, SRL_ECORRUPT},
    {"tier_count 17", offsetof(struct srl__shm_header, tier_count), 17, 0, SRL_ECORRUPT},
    {"tier_count past the used entries", offsetof(struct srl__shm_header, tier_count), 4, 0,
     SRL_ECORRUPT},
    {"tier_count 0xffffffff", offsetof(struct srl__shm_header, tier_count), 0xffffffffu, 0,
     SRL_ECORRUPT},
    {"tier_pad", offsetof(struct srl__shm_header, tier_pad), 1, 0, SRL_ECORRUPT},
    {"a name's bad byte", TIER_OFF(0, name), '!', 1, SRL_ECORRUPT},
    {"a name made empty", TIER_OFF(1, name), 0, 1, SRL_ECORRUPT},
    {"junk after a name's NUL", TIER_OFF(0, name) + 30, 'x', 1, SRL_ECORRUPT},
    {"a name without a NUL", TIER_OFF(0, name) + 31, 'x', 1, SRL_ECORRUPT},
    {"a duplicate name", TIER_OFF(1, name), 0, 1, SRL_ECORRUPT},   /* "pip" -> "paid": below */
    {"an unknown algorithm", TIER_OFF(0, limits.limit[0].algorithm), 99, 0, SRL_ECORRUPT},
    {"a concurrency tier", TIER_OFF(0, limits.limit[0].algorithm), SRL_CONCURRENCY, 0,
     SRL_ECORRUPT},
    {"non-canonical limits (burst = permits)", TIER_OFF(0, limits.limit[0].burst), 200, 0,
     SRL_ECORRUPT},
    {"a limit count of 0", TIER_OFF(0, limits.count), 0, 0, SRL_ECORRUPT},
    {"a limit count of 5", TIER_OFF(0, limits.count), 5, 0, SRL_ECORRUPT},
    {"a reserved word", TIER_OFF(0, limits.reserved0), 1, 0, SRL_ECORRUPT},
    {"an unused entry not zero", TIER_OFF(7, name), 'x', 1, SRL_ECORRUPT},
    {"an unused entry's limits not zero", TIER_OFF(14, limits.count), 1, 0, SRL_ECORRUPT},
    /* Valid and canonical, but a bigger state than the slots hold. */
    {"a tier whose state needs a bigger slot", TIER_OFF(1, limits.limit[0].permits), 100, 0,
     SRL_ECORRUPT},
    /* Valid, canonical, same state size: a consistent table at creation.
     * Layout 6 keeps the policy in use in its copy (page 1), so both
     * openers get the copy's table: 0 (check_shm_live tests the copies). */
    {"another permits count", TIER_OFF(0, limits.limit[0].permits), 201, 0, 0},
};

START_TEST(garbage_in_the_tier_table_is_refused_even_with_a_valid_checksum)
{
    const struct damage *dm = &damages[_i];
    /* tiers[0] "paid" token_bucket:200/1h; tiers[1] "pip" sliding_log:8/1h
     * (the largest state: 64 bytes, so 100 permits would not fit). */
    srl_tier t[2] = {tier_of("paid", "token_bucket:200/1h"), tier_of("pip", "sliding_log:8/1h")};
    srl_config cfg = tiered_config("token_bucket:100/1h", t, 2, NULL);
    const char *name = unique_name("tiers");
    srl_limiter *lim, *seen;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &seen), 0);
    if (strcmp(dm->what, "a duplicate name") == 0) {
        shm_poke(name, TIER_OFF(1, name), "paid", 4);    /* "pip" -> "paid" */
    } else if (dm->one_byte) {
        uint8_t v = (uint8_t)dm->value;
        shm_poke(name, dm->off, &v, 1);
    } else {
        shm_poke32(name, dm->off, dm->value);
    }
    reseal(name);
    int rc = srl_open_shared(name, NULL, 0, &lim);
    ck_assert_msg(rc == dm->want, "%s: adopt gave %d (%s), want %d", dm->what, rc,
                  srl_err_name(rc), dm->want);
    if (rc == 0)
        srl_close(lim);
    else
        ck_assert_ptr_null(lim);
    rc = srl_open_shared(name, &cfg, 0, &lim);
    ck_assert_msg(rc == dm->want, "%s: open with cfg gave %d", dm->what, rc);
    if (rc == 0)
        srl_close(lim);
    /* A handle opened before the damage sees it in srl_check. */
    struct check_lines l;
    memset(&l, 0, sizeof l);
    ck_assert_int_ge(srl_check(seen, check_lines_collect, &l), 1);
    srl_close(seen);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

static unsigned char *slot_of_key(srl_limiter *lim, const char *key)
{
    struct srl__shm *s = (struct srl__shm *)lim;
    struct srl__shm_key k;
    srl__shm_hash(s, key, strlen(key), &k);
    for (uint64_t b = 0; b < s->buckets; b++)
        for (unsigned i = 0; i < SRL__SHM_SLOTS; i++)
            if (srl__shm_bucket(s, b)->tags[i] != 0 &&
                memcmp(srl__shm_slot(s, b, i), k.fp, SRL__SHM_FP_BYTES) == 0)
                return srl__shm_slot(s, b, i);
    ck_abort_msg("key %s not found", key);
    return NULL;
}

static int expect_fresh_tier0(const srl_entry *e, void *ctx)
{
    (void)ctx;
    ck_assert_uint_eq(e->tier, 0);
    ck_assert_uint_eq(e->now.remaining, 9);   /* the peek of cost 1 leaves 9 of 10 */
    return 0;
}

static int touch_acquire(srl_limiter *x)
{
    srl_decision e;
    return srl_acquire(x, "k", 1, 1, &e);
}

static int touch_peek(srl_limiter *x)
{
    srl_decision e;
    return srl_peek(x, "k", 1, 1, &e);
}

static int touch_refund(srl_limiter *x)
{
    return srl_refund(x, "k", 1, 1);
}

static int touch_evict(srl_limiter *x)
{
    return srl_evict_idle(x) >= 0 ? 0 : -1;
}

START_TEST(a_slot_tier_beyond_the_table_is_named_then_reset_and_counted)
{
    static const uint16_t bad[] = {2, 3, 15, 16, 255, 0x8000, 0xffff};
    uint16_t tier = bad[_i];
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_tier paid = tier_of("paid", "token_bucket:20/1h");
    srl_config cfg = tiered_config("token_bucket:10/1h", &paid, 1, clock);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_decision d;
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(srl_acquire_tier(lim, 1, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    unsigned char *slot = slot_of_key(lim, "k");
    memcpy(slot + SRL__SLOT_TIER, &tier, sizeof tier);
    struct check_lines l;
    memset(&l, 0, sizeof l);
    ck_assert_int_eq(srl_check(lim, check_lines_collect, &l), 1);
    char want[64];
    if (tier & ~(SRL__SLOT_TIER_MASK | SRL__SLOT_F_KNOWN))   /* layout 9: flags byte */
        snprintf(want, sizeof want, "tier word 0x%04x has unknown flag bits", tier);
    else
        snprintf(want, sizeof want, "tier %u beyond the table (2 tiers)", tier);
    ck_assert_msg(strstr(l.last, want) != NULL, "check said: %s", l.last);
    /* Every reader copes; the first one resets the slot to a fresh tier-0 state. */
    ck_assert_int_eq(srl_foreach(lim, expect_fresh_tier0, NULL), 1);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.reset_slots, 1);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    /* Back in tier 1 the fresh tier-0 state converts: 20 (a fresh paid key). */
    uint32_t got = 0;
    for (int i = 0; i < 40; i++) {
        ck_assert_int_eq(srl_acquire_tier(lim, 1, "k", 1, 1, &d), 0);
        got += d.allowed != 0;
    }
    ck_assert_uint_eq(got, 20);
    /* Each kind of touch repairs: acquire, peek, refund, at-rest eviction. */
    int (*touch[])(srl_limiter *) = {touch_acquire, touch_peek, touch_refund, touch_evict};
    for (size_t t = 0; t < sizeof touch / sizeof touch[0]; t++) {
        ck_assert_int_eq(srl_acquire_tier(lim, 1, "k", 1, 1, &d), 0);   /* exists again */
        memcpy(slot_of_key(lim, "k") + SRL__SLOT_TIER, &tier, sizeof tier);
        ck_assert_int_eq(touch[t](lim), 0);
        ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
        ck_assert_int_eq(srl_stats_get(lim, &st), 0);
        ck_assert_uint_eq(st.reset_slots, 2 + t);
    }
    srl_close(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shm_tiers");
    TCase *tc = tcase_create("tiers");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, eight_processes_admit_each_key_exactly_its_own_tiers_limit_in_every_trial);
    tcase_add_loop_test(tc, a_key_that_changes_tier_keeps_its_use_by_the_conversion_table, 0,
                        (int)(sizeof rows / sizeof rows[0]));
    tcase_add_test(tc, moving_back_and_forth_caps_the_use_at_each_tiers_capacity);
    tcase_add_test(tc, tiers_are_named_found_and_reported);
    tcase_add_test(tc, peek_tier_refuses_what_acquire_tier_refuses_and_a_store_without_tiers_has_tier_0);
    tcase_add_test(tc, a_bad_tier_table_is_refused_before_anything_is_made);
    tcase_add_test(tc, another_tier_table_is_a_mismatch_and_adopt_takes_the_segments);
    tcase_add_loop_test(tc, garbage_in_the_tier_table_is_refused_even_with_a_valid_checksum, 0,
                        (int)(sizeof damages / sizeof damages[0]));
    tcase_add_loop_test(tc, a_slot_tier_beyond_the_table_is_named_then_reset_and_counted, 0, 7);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"tiers"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
