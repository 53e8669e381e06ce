/*
 * check_trace_tiers.c - tiers (tier.NAME) decide on the Redis store exactly
 * as on the host store (a shared segment) on the same trace:
 *   - a differential trace per tier table and epoch (0, 60 days, 10 years
 *     back): 400 steps over three keys, each request naming a tier drawn
 *     at random, so keys move between tiers of the same shape (their use
 *     carried, capped at the new capacity), of equal limits (the state kept
 *     as it is) and of another shape (a fresh start), bans in force when
 *     they move; each acquire_tier, peek (the key's own tier), peek_tier
 *     (another tier's view, nothing written) and refund equal field by
 *     field (allowed, remaining, retry_after, reset_after, limit, binding,
 *     flags), and the stores' counts equal at the end;
 *   - 8 forked processes (test_fork) flooding one key at a shared fake
 *     time, each round under another tier: the Redis store admits exactly
 *     what the host store admits in every round;
 *   - the stored config (P:cfg) holds the tiers: a host with another table
 *     (another tier's limits, a tier more, another name) is SRL_EMISMATCH,
 *     one with the same table opens, and adopting (cfg NULL) takes them;
 *   - the fronted store (srl_open_fronted) runs the trace too, beside the
 *     other two: every answer Redis gives it equals the host's, and every
 *     answer its host segment gives (SRL_DECISION_LOCAL) is a denial the
 *     host store gives too (a ban of the key's old tier answering after a
 *     move would admit less: a denial where the host allows).
 * The Redis handles take the ticker's time (test hooks
 * srl__redis_fixed_time, srl__tiered_redis), so the host and the server see
 * one clock.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis_testutil.h"
#include "shm_testutil.h"
#include "srl.h"
#include "testutil.h"
#include "trace_stores.h"

#define DAY (86400 * SEC)

int srl__redis_fixed_time(srl_limiter *lim, int on);
srl_limiter *srl__tiered_redis(srl_limiter *lim);

/* A tier table: the policy (tier 0) and up to four tiers, the trace's
 * shortest and longest window, the largest cost. */
struct table {
    const char *spec;   /* srl_config_parse text */
    uint64_t short_w, long_w;
    uint32_t cost_max;
};

static const struct table tables[] = {
    /* same shape (more, fewer), equal limits, another algorithm */
    {"token_bucket:10/1s tier.paid=token_bucket:50/1h tier.same=token_bucket:10/1s "
     "tier.other=gcra:20/1s tier.low=token_bucket:4/1s",
     SEC, 10 * SEC, 3},
    /* compounds of the same shape, and another shape (one limit) */
    {"gcra:5/1s + sliding_counter:20/1m tier.paid=gcra:20/1s + sliding_counter:100/1m "
     "tier.log=sliding_log:7/1m tier.tight=gcra:2/1s + sliding_counter:8/1m",
     SEC, 60 * SEC, 2},
    /* sliding logs and bursts; bans in force when a key moves */
    {"sliding_log:7/1m + token_bucket:3/10s,burst=6 "
     "tier.big=sliding_log:30/1m + token_bucket:10/10s,burst=12 "
     "tier.ban=sliding_log:7/1m,penalty=20s + token_bucket:3/10s,burst=6,penalty=5s",
     10 * SEC, 60 * SEC, 3},
    /* large numbers: products past 2^53 */
    {"gcra:1000003/7d + token_bucket:200/1m tier.big=gcra:3000017/7d + token_bucket:900/1m "
     "tier.small=gcra:100/7d + token_bucket:50/1m",
     60 * SEC, 7 * DAY, 40},
};
#define N_TABLES (int)(sizeof tables / sizeof tables[0])
static const uint64_t epochs[] = {0, 60 * DAY, 3660 * DAY};
#define N_EPOCHS (int)(sizeof epochs / sizeof epochs[0])

static srl_config config_of(const char *spec, fake_clock *clk)
{
    srl_config cfg;
    srl_policy_error pe;
    srl_config_init(&cfg);
    ck_assert_msg(srl_config_parse(&cfg, spec, &pe) == 0, "%s: %s", spec, pe.message);
    cfg.capacity = 100;
    cfg.ticker = fake_ticker(clk);
    return cfg;
}

/* The host store: a shared segment with cfg. */
static struct trace_store host_open(const srl_config *cfg, const char *tag)
{
    struct trace_store st = {.kind = STORE_SHARED};
    strcpy(st.name, unique_name(tag));
    ck_assert_int_eq(srl_open_shared(st.name, cfg, SRL_CREATE | SRL_EXCL, &st.lim), 0);
    return st;
}

static void uri_of(const struct trace_store *st, const char *prefix, char *uri, size_t n)
{
    snprintf(uri, n, "unix://%s?prefix=%s", st->sock, prefix);
}

/* The Redis store with cfg on a server of its own, deciding on cfg's ticker. */
static struct trace_store redis_open(const srl_config *cfg, const char *prefix)
{
    struct trace_store st = {.kind = STORE_REDIS};
    trace_server_start(&st, "ttier");
    char uri[160];
    uri_of(&st, prefix, uri, sizeof uri);
    int rc = srl_open_redis(uri, cfg, &st.lim);
    char why[256];
    srl_last_error(why, sizeof why);
    ck_assert_msg(rc == 0, "srl_open_redis: %d (%s)", rc, why);
    ck_assert_int_eq(srl__redis_fixed_time(st.lim, 1), 0);
    return st;
}

/* The fronted store with cfg: its host segment, and Redis on a server of
 * its own, deciding on cfg's ticker. */
static struct trace_store fronted_open(const srl_config *cfg, const char *prefix)
{
    struct trace_store st = {.kind = STORE_TIERED};
    trace_server_start(&st, "ttier");
    char uri[160];
    uri_of(&st, prefix, uri, sizeof uri);
    strcpy(st.name, unique_name("ttier"));
    int rc = srl_open_fronted(st.name, uri, cfg, SRL_CREATE | SRL_EXCL, &st.lim);
    char why[256];
    srl_last_error(why, sizeof why);
    ck_assert_msg(rc == 0, "srl_open_fronted: %d (%s)", rc, why);
    srl_limiter *r = srl__tiered_redis(st.lim);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(srl__redis_fixed_time(r, 1), 0);
    return st;
}

/* The least capacity over every tier of lim. */
static uint32_t min_capacity(srl_limiter *lim)
{
    srl_info in;
    ck_assert_int_eq(srl_info_get(lim, &in), 0);
    uint32_t m = UINT32_MAX;
    for (uint32_t t = 0; t < in.tier_count; t++) {
        srl_tier tr;
        ck_assert_int_eq(srl_tier_get(lim, t, &tr), 0);
        uint32_t c = trace_min_capacity(&tr.limits);
        m = c < m ? c : m;
    }
    return m;
}

/* A peek that Redis answers SRL_ENOENT (a state at rest is deleted, tier
 * and all) against the host's: the host's is a fresh state's of the tier
 * it decides by, which the fresh state of that tier's limits must give. */
static void peek_same(srl_limiter *host, int kind, int rc_redis, int rc_host,
                      const srl_decision *dr, const srl_decision *dh, uint32_t tier, uint32_t cost,
                      uint64_t now, int step, const char *what)
{
    if (rc_redis == SRL_ENOENT && rc_host == 0) {
        srl_tier t;
        ck_assert_int_eq(srl_tier_get(host, tier, &t), 0);
        uint64_t st[64];
        ck_assert_uint_le(srl_limits_state_size(&t.limits), sizeof st);
        srl_decision f;
        ck_assert_int_eq(srl_limits_state_init(&t.limits, st, now), 0);
        ck_assert_int_eq(srl_limits_state_peek(&t.limits, st, now, cost, &f), 0);
        trace_same(STORE_REDIS, &f, dh, step, what);
        return;
    }
    ck_assert_msg(rc_redis == rc_host, "step %d %s: rc host %d, store %d", step, what, rc_host,
                  rc_redis);
    if (rc_host == 0)
        trace_same(kind, dr, dh, step, what);
}

/* _i: table * N_EPOCHS + epoch. */
START_TEST(tier_trace_equals_the_host)
{
    const struct table *tb = &tables[_i / N_EPOCHS];
    fake_clock *clk = fake_clock_shared(epochs[_i % N_EPOCHS]);
    srl_config cfg = config_of(tb->spec, clk);
    char prefix[16];
    snprintf(prefix, sizeof prefix, "tier%d", _i);
    struct trace_store st[3] = {host_open(&cfg, "ttier"), redis_open(&cfg, prefix),
                                fronted_open(&cfg, prefix)};
    uint32_t ntier = cfg.tier_count + 1;
    uint32_t cap = min_capacity(st[0].lim);
    uint32_t cost_max = tb->cost_max < cap ? tb->cost_max : cap;
    static const char *const keys[] = {"k0", "k1", "k2"};
    uint64_t seed = 4242 + (uint64_t)_i;
    unsigned allowed = 0, denied = 0, moves = 0, refunds = 0, bans = 0, reserves = 0, local = 0;
    uint32_t last[3] = {0, 0, 0};
    srl_decision d[3] = {{0}, {0}, {0}};
    for (int i = 0; i < 400; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t step = (seed >> 59) % 16 == 0  ? (seed >> 8) % (tb->long_w / 4)
                        : (seed >> 60) % 4 == 0 ? (seed >> 8) % tb->short_w
                                                : (seed >> 8) % (tb->short_w / 20);
        if (i > 0 && !d[0].allowed && (seed >> 40) % 2 == 0)
            step = d[0].retry_after_ns;   /* exactly where a denial said to retry */
        clk->now += step;
        int k = (int)((seed >> 33) % 3);
        /* mostly the key's tier, else another: keys move often */
        uint32_t tier = (seed >> 36) % 3 == 0 ? last[k] : (uint32_t)((seed >> 44) % ntier);
        uint32_t cost = 1 + (uint32_t)((seed >> 24) % cost_max);
        char what[64];
        snprintf(what, sizeof what, "%s tier %u cost %u", keys[k], tier, cost);
        if ((seed >> 50) % 4 == 0) {
            /* what the request would get, and the key's own view: equal,
             * and neither writes (the acquire below tells) */
            int rc[3];
            char pw[128];
            for (int s = 0; s < 3; s++)
                rc[s] = srl_peek_tier(st[s].lim, tier, keys[k], 2, cost, &d[s]);
            snprintf(pw, sizeof pw, "peek_tier %s", what);
            for (int s = 1; s < 3; s++)
                peek_same(st[0].lim, st[s].kind, rc[s], rc[0], &d[s], &d[0], tier, cost,
                          clk->now, i, pw);
            for (int s = 0; s < 3; s++)
                rc[s] = srl_peek(st[s].lim, keys[k], 2, 1, &d[s]);
            snprintf(pw, sizeof pw, "peek (own tier %u) %s", last[k], what);
            for (int s = 1; s < 3; s++)
                peek_same(st[0].lim, st[s].kind, rc[s], rc[0], &d[s], &d[0], last[k], 1,
                          clk->now, i, pw);
        }
        int rc[3] = {0, 0, 0};
        if ((seed >> 54) % 8 == 0) {
            /* srl_reserve is tier 0's (the key moves there), where tier 0
             * can wait (token bucket, GCRA); else SRL_ENOTSUP on both */
            tier = 0;
            snprintf(what, sizeof what, "%s reserve cost %u", keys[k], cost);
            for (int s = 0; s < 3; s++)
                rc[s] = srl_reserve(st[s].lim, keys[k], 2, cost, tb->short_w, &d[s]);
            ck_assert_msg(rc[0] == rc[1] && rc[0] == rc[2],
                          "step %d %s: rc host %d, redis %d, fronted %d", i, what, rc[0], rc[1],
                          rc[2]);
            reserves += rc[0] == 0;
        } else {
            for (int s = 0; s < 3; s++)
                rc[s] = srl_acquire_tier(st[s].lim, tier, keys[k], 2, cost, &d[s]);
            ck_assert_int_eq(rc[0], 0);
            ck_assert_int_eq(rc[1], 0);
            ck_assert_int_eq(rc[2], 0);
        }
        if (rc[0] != 0) {
            d[0].allowed = 1;   /* (no retry_after to follow) */
            continue;
        }
        trace_same(STORE_REDIS, &d[1], &d[0], i, what);
        trace_same(STORE_TIERED, &d[2], &d[0], i, what);
        local += (d[2].flags & SRL_DECISION_LOCAL) != 0;
        moves += tier != last[k];
        last[k] = tier;
        allowed += d[0].allowed;
        denied += !d[0].allowed;
        bans += (d[0].flags & SRL_DECISION_BAN_STARTED) != 0;
        if (d[0].allowed && (seed >> 30) % 5 == 0) {
            int rc[3];
            for (int s = 0; s < 3; s++)
                rc[s] = srl_refund(st[s].lim, keys[k], 2, 1);
            /* (Redis deletes a state at rest: SRL_ENOENT where the host
             * refunds a slot that has nothing to give back) */
            for (int s = 1; s < 3; s++)
                ck_assert_msg(rc[0] == rc[s] || (rc[s] == SRL_ENOENT && rc[0] == 0),
                              "step %d %s: refund rc host %d, store %d: %d", i, what, rc[0], s,
                              rc[s]);
            refunds++;
        }
    }
    /* The trace is worth something: both outcomes, moves, refunds. */
    ck_assert_uint_gt(allowed, 40);
    ck_assert_uint_gt(denied, 10);
    ck_assert_uint_gt(moves, 100);
    ck_assert_uint_gt(refunds, 5);
    if (strstr(tb->spec, "penalty") != NULL)
        ck_assert_uint_gt(bans, 0);
    if (_i / N_EPOCHS == 0 || _i / N_EPOCHS == 3)   /* tier 0 can wait */
        ck_assert_uint_gt(reserves, 5);
    (void)local;   /* (some tables' traces move keys too often to leave a ban: see below) */
    srl_stats s0, s1, s2;
    ck_assert_int_eq(srl_stats_get(st[0].lim, &s0), 0);
    ck_assert_int_eq(srl_stats_get(st[1].lim, &s1), 0);
    ck_assert_int_eq(srl_stats_get(st[2].lim, &s2), 0);
    ck_assert_uint_eq(s1.allowed, allowed);
    ck_assert_uint_eq(s1.denied, denied);
    ck_assert_uint_eq(s2.allowed, allowed);
    ck_assert_uint_eq(s2.denied + s2.local_denied, denied);
    for (int s = 0; s < 3; s++)
        trace_store_close(&st[s]);
    srl_config_free(&cfg);
}
END_TEST

/* 8 forked processes on key, all with tier: what they admit together. */
static unsigned flood(srl_limiter *lim, uint32_t tier, const char *key)
{
    unsigned n = redis_fork_flood_tier(lim, tier, key);
    ck_assert_msg(n != UINT32_MAX, "a worker's acquire failed");
    return n;
}

/* Tiers by round: 0 (100), paid (300: +200), 0 (down: the excess
 * forgotten), same (equal limits: as it is), paid again, log (another
 * algorithm: fresh), 0 again. */
static const uint32_t round_tier[] = {0, 1, 0, 2, 1, 3, 0, 1};
#define ROUNDS (int)(sizeof round_tier / sizeof round_tier[0])

START_TEST(eight_processes_admit_what_the_host_admits)
{
    fake_clock *clk = fake_clock_shared(epochs[_i] + 5 * SEC);
    srl_config cfg = config_of("token_bucket:100/1h tier.paid=token_bucket:300/1h "
                               "tier.same=token_bucket:100/1h tier.log=sliding_log:150/1h",
                               clk);
    char prefix[16];
    snprintf(prefix, sizeof prefix, "tflood%d", _i);
    struct trace_store st[2] = {host_open(&cfg, "ttier"), redis_open(&cfg, prefix)};
    unsigned total[2] = {0, 0};
    for (int round = 0; round < ROUNDS; round++) {
        unsigned got[2];
        for (int s = 0; s < 2; s++) {
            got[s] = flood(st[s].lim, round_tier[round], "hot");
            total[s] += got[s];
        }
        ck_assert_msg(got[1] == got[0], "round %d (tier %u): redis admitted %u, the host %u",
                      round, round_tier[round], got[1], got[0]);
        clk->now += SEC;   /* 1 s of 1 h: at most one permit back per round */
    }
    /* The host's own numbers, so the comparison is not of two nothings. */
    ck_assert_uint_gt(total[0], 500);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(st[1].lim, &s), 0);
    ck_assert_uint_eq(s.allowed, total[0]);
    ck_assert_uint_eq(s.denied, 8 * ROUNDS);
    trace_store_close(&st[0]);
    trace_store_close(&st[1]);
    srl_config_free(&cfg);
}
END_TEST

/* srl_foreach: the tier of key "a" (ctx: uint32_t, UINT32_MAX if not seen). */
static int tier_of_a(const srl_entry *e, void *ctx)
{
    if (e->key_len == 1 && e->display[0] == 'a')
        *(uint32_t *)ctx = e->tier;
    return 0;
}

static const char base_spec[] = "token_bucket:10/1s tier.paid=token_bucket:50/1h tier.b=gcra:5/1s";

START_TEST(stored_config_holds_the_tiers)
{
    fake_clock *clk = fake_clock_shared(0);
    srl_config cfg = config_of(base_spec, clk);
    struct trace_store st = redis_open(&cfg, "tcfg");
    ck_assert_int_eq(srl__redis_fixed_time(st.lim, 0), 0);
    char uri[160];
    uri_of(&st, "tcfg", uri, sizeof uri);
    static const char *const others[] = {
        "token_bucket:10/1s tier.paid=token_bucket:51/1h tier.b=gcra:5/1s",   /* a limit */
        "token_bucket:10/1s tier.paid=token_bucket:50/1h",                    /* a tier less */
        "token_bucket:10/1s tier.paid=token_bucket:50/1h tier.b=gcra:5/1s tier.c=5/1s",
        "token_bucket:10/1s tier.gold=token_bucket:50/1h tier.b=gcra:5/1s",   /* a name */
        "token_bucket:10/1s tier.b=gcra:5/1s tier.paid=token_bucket:50/1h",   /* the order */
        "token_bucket:10/1s",                                                 /* none */
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        srl_config o = config_of(others[i], clk);
        srl_limiter *l = NULL;
        ck_assert_msg(srl_open_redis(uri, &o, &l) == SRL_EMISMATCH, "%s opened", others[i]);
        char why[512];
        srl_last_error(why, sizeof why);
        ck_assert_msg(strstr(why, "holds another policy") != NULL, "%s: %s", others[i], why);
        srl_config_free(&o);
    }
    /* The same table opens; adopting takes it, names and limits. */
    srl_limiter *same = NULL, *adopted = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &same), 0);
    ck_assert_int_eq(srl_open_redis(uri, NULL, &adopted), 0);
    srl_info in;
    ck_assert_int_eq(srl_info_get(adopted, &in), 0);
    ck_assert_uint_eq(in.tier_count, 3);
    ck_assert_int_eq(srl_tier_find(adopted, "paid"), 1);
    ck_assert_int_eq(srl_tier_find(adopted, "b"), 2);
    srl_tier t;
    ck_assert_int_eq(srl_tier_get(adopted, 1, &t), 0);
    char text[SRL_LIMITS_TEXT_MAX];
    ck_assert_int_ge(srl_limits_format(&t.limits, text, sizeof text), 0);
    ck_assert_str_eq(text, "token_bucket:50/1h");
    /* and decides by them: 50 under paid (on the server's clock, as
     * `same`: one permit comes back in 72 s) */
    srl_decision d;
    unsigned n = 0;
    while (srl_acquire_tier(adopted, 1, "a", 1, 1, &d) == 0 && d.allowed)
        n++;
    ck_assert_uint_eq(n, 50);
    /* A peek of the key's own tier (paid) sees none left. */
    ck_assert_int_eq(srl_peek(same, "a", 1, 1, &d), 0);
    ck_assert(!d.allowed);
    ck_assert_uint_eq(d.limit, 50);
    /* A walk names the key's tier. */
    uint32_t seen = UINT32_MAX;
    ck_assert_int_eq(srl_foreach(same, tier_of_a, &seen), 1);
    ck_assert_uint_eq(seen, 1);
    srl_close(same);
    srl_close(adopted);
    trace_store_close(&st);
    srl_config_free(&cfg);
}
END_TEST

/* A stored value whose tier is beyond the table (a hand-written or
 * damaged key) is refused, not indexed: SRL_ECORRUPT with on_full's
 * decision, nothing written. */
START_TEST(a_stored_tier_beyond_the_table_is_refused)
{
    fake_clock *clk = fake_clock_shared(0);
    srl_config cfg = config_of(base_spec, clk);
    struct trace_store st = redis_open(&cfg, "tbad");
    static const char *const bad[] = {"3@", "99@1 0 5", "x@", "1 0 5", "-1@1 0 5", "@1 0 5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisContext *c = redisConnectUnix(st.sock);
        ck_assert(c != NULL && c->err == 0);
        redisReply *r = redisCommand(c, "SET tbad:k:k %s", bad[i]);
        ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
        srl_decision d;
        ck_assert_msg(srl_acquire_tier(st.lim, 1, "k", 1, 1, &d) == SRL_ECORRUPT, "%s", bad[i]);
        ck_assert(d.flags & SRL_DECISION_DEGRADED);
        r = redisCommand(c, "GET tbad:k:k");
        ck_assert(r != NULL && r->type == REDIS_REPLY_STRING);
        ck_assert_str_eq(r->str, bad[i]);
        freeReplyObject(r);
        redisFree(c);
    }
    trace_store_close(&st);
    srl_config_free(&cfg);
}
END_TEST

/* The fronted store's host memory and tiers, step by step beside the host
 * store: a denial under tier 0 is answered locally for tier 0 only; a move
 * to paid (fast) goes to Redis; after paid's refill a move back to tier 0
 * is admitted (a ban kept from before the move would deny it: LOCAL where
 * the host allows); a look under paid is Redis's, a plain look the ban's. */
START_TEST(a_fronted_ban_answers_its_own_tier_and_a_move_forgets_it)
{
    fake_clock *clk = fake_clock_shared(1000 * SEC);
    srl_config cfg = config_of("token_bucket:2/1d tier.paid=token_bucket:60/1m", clk);
    struct trace_store st[2] = {host_open(&cfg, "ttier"), fronted_open(&cfg, "tfront")};
    srl_decision d[2];
    int step = 0;
#define BOTH(call, what)                                                                         \
    do {                                                                                         \
        for (int s_ = 0; s_ < 2; s_++) {                                                         \
            srl_limiter *lim = st[s_].lim;                                                       \
            srl_decision *dd = &d[s_];                                                           \
            ck_assert_int_eq(call, 0);                                                           \
        }                                                                                        \
        trace_same(STORE_TIERED, &d[1], &d[0], step++, what);                                    \
    } while (0)
    for (int i = 0; i < 3; i++)
        BOTH(srl_acquire_tier(lim, 0, "k", 1, 1, dd), "tier 0");
    ck_assert_int_eq(d[1].allowed, 0);
    ck_assert_uint_eq(d[1].flags, 0);   /* Redis's denial: remembered */
    BOTH(srl_acquire_tier(lim, 0, "k", 1, 1, dd), "tier 0 again");
    ck_assert_uint_eq(d[1].flags, SRL_DECISION_LOCAL);
    clk->now += 10 * SEC;
    BOTH(srl_acquire_tier(lim, 1, "k", 1, 1, dd), "paid: a move");
    ck_assert_int_eq(d[1].allowed, 1);
    clk->now += 70 * SEC;   /* paid refills all; converted back, tier 0 has room */
    BOTH(srl_acquire_tier(lim, 0, "k", 1, 1, dd), "tier 0 after paid's refill");
    ck_assert_int_eq(d[1].allowed, 1);
    ck_assert_uint_eq(d[1].flags, 0);
    BOTH(srl_acquire_tier(lim, 0, "k", 1, 1, dd), "tier 0");
    BOTH(srl_acquire_tier(lim, 0, "k", 1, 1, dd), "tier 0: denied, remembered");
    ck_assert_int_eq(d[1].allowed, 0);
    ck_assert_uint_eq(d[1].flags, 0);
    BOTH(srl_peek_tier(lim, 1, "k", 1, 1, dd), "a look under paid");
    ck_assert_int_eq(d[1].allowed, 1);
    ck_assert_uint_eq(d[1].flags, 0);
    BOTH(srl_peek(lim, "k", 1, 1, dd), "a plain look");
    ck_assert_uint_eq(d[1].flags, SRL_DECISION_LOCAL);
    BOTH(srl_acquire_tier(lim, 0, "k", 1, 1, dd), "the look forgot nothing");
    ck_assert_uint_eq(d[1].flags, SRL_DECISION_LOCAL);
#undef BOTH
    srl_info in;
    ck_assert_int_eq(srl_info_get(st[1].lim, &in), 0);
    ck_assert_uint_eq(in.tier_count, 2);
    ck_assert_int_eq(srl_tier_find(st[1].lim, "paid"), 1);
    for (int s = 0; s < 2; s++)
        trace_store_close(&st[s]);
    srl_config_free(&cfg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace_tiers");
    TCase *tc = tcase_create("tiers");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, tier_trace_equals_the_host, 0, N_TABLES * N_EPOCHS);
    tcase_add_loop_test(tc, eight_processes_admit_what_the_host_admits, 0, N_EPOCHS);
    tcase_add_test(tc, stored_config_holds_the_tiers);
    tcase_add_test(tc, a_stored_tier_beyond_the_table_is_refused);
    tcase_add_test(tc, a_fronted_ban_answers_its_own_tier_and_a_move_forgets_it);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"ttier"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
