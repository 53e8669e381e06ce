/*
 * check_shm_live.c - live policy changes on a shared segment (srl.h, LIVE
 * POLICY CHANGES; docs/design.md, "Live policy changes (layout 6)").
 *
 *   conversion: the exact count a key gets after a change (10 of 10 used,
 *               limit 20: exactly 10 more), another algorithm starts fresh,
 *               a change of one tier leaves the others, a key two changes
 *               behind is still carried (the changer's sweep).
 *   load:       6 forked workers hammer 1000 keys (frozen fake time) while
 *               a changer raises and lowers the limit; each key's count
 *               stays within the stated bound, srl_check finds nothing.
 *               A change racing with new keys and with eviction.
 *   crash:      a changer SIGKILLed at random steps leaves a consistent
 *               segment with the old policy or the new, never a mix.
 *   fork:       one handle opened before fork, two forked changers: one
 *               parked inside the flock (SRL__SHM_TEST_CHANGE_PARK), the
 *               other must wait for it (seen blocked in /proc/locks); the
 *               broken variant that flocks the shared fd lets both in.
 *   refusals:   what cannot change (state size, capacity, key_display,
 *               tiers, concurrency, anonymous, local) with the exact code
 *               and message.
 *   openers:    SRL_CHANGE, SRL_ADOPT and a plain opener.
 *   hostile:    garbage in each policy copy (raw and resealed), in
 *               policy_gen and in a slot's generation.
 *
 * Broken variants: SRL_LIVE_MUTANT=0x.. in the environment sets those
 * SRL__SHM_TEST_* flags (src/base/testhooks.h) on every handle a test opens
 * through open_live, to show a test fails without the rule it checks
 * (docs/design.md lists what failed).
 */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"
#include "srl.h"
#include "shm_testutil.h"
#include "testhooks.h"
#include "testutil.h"

static unsigned mutant(void)
{
    const char *m = getenv("SRL_LIVE_MUTANT");
    return m != NULL ? (unsigned)strtoul(m, NULL, 0) : 0;
}

static srl_config config_of(const char *text, uint64_t capacity, fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_limits_parse_ex(text, &cfg.limits, NULL), 0);
    cfg.capacity = capacity;
    /* These races are about changes, not stuck holders: a bucket lock's
     * holder descheduled on a loaded 2-core machine must not turn a call
     * into SRL_ETIMEDOUT (seen at load 10-15 with the default 1000 ms:
     * 1 to 6 calls of the eviction race). */
    cfg.lock_timeout_ms = 60000;
    if (clock != NULL)
        cfg.ticker = fake_ticker(clock);
    return cfg;
}

static srl_limits limits_of(const char *text)
{
    srl_limits l;
    ck_assert_int_eq(srl_limits_parse_ex(text, &l, NULL), 0);
    return l;
}

static srl_limiter *open_live(const char *name, const srl_config *cfg, unsigned flags)
{
    srl_limiter *lim;
    int rc = srl_open_shared(name, cfg, flags, &lim);
    ck_assert_msg(rc == 0, "open %s: %d (%s)", name, rc, srl_err_name(rc));
    srl__shm_set_test_flags(lim, mutant());
    return lim;
}

static int admit_tier(srl_limiter *lim, uint32_t tier, const char *key, int tries)
{
    int n = 0;
    for (int i = 0; i < tries; i++) {
        srl_decision d;
        int rc = srl_acquire_tier(lim, tier, key, strlen(key), 1, &d);
        ck_assert_msg(rc == 0, "acquire %s: %d (%s)", key, rc, srl_err_name(rc));
        n += d.allowed;
    }
    return n;
}

static int admit(srl_limiter *lim, const char *key, int tries)
{
    return admit_tier(lim, 0, key, tries);
}

static uint32_t gen_of(srl_limiter *lim)
{
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    return info.policy_gen;
}

static void change(srl_limiter *lim, const char *text)
{
    srl_limits l = limits_of(text);
    char msg[512];
    int rc = srl_policy_change_tier(lim, 0, &l, msg, sizeof msg);
    ck_assert_msg(rc == 1, "change to %s: %d (%s): %s", text, rc, srl_err_name(rc), msg);
}

/* ------------------------------------------------------------ conversion */

struct conv {
    const char *from;
    int used;
    const char *to;
    int more;          /* exactly what the key gets after the change */
};

static const struct conv convs[] = {
    {"token_bucket:10/1h", 10, "token_bucket:20/1h", 10},   /* issue 13's e2e case */
    {"token_bucket:100/1h", 50, "token_bucket:10/1h", 0},
    {"token_bucket:100/1h", 5, "token_bucket:10/1h", 5},
    {"token_bucket:10/1h", 0, "token_bucket:20/1h", 20},
    {"gcra:10/1h", 4, "gcra:30/1h", 26},
    {"sliding_counter:10/1h", 10, "sliding_counter:12/1h", 2},
    {"token_bucket:10/1h", 10, "gcra:5/1h", 5},             /* another algorithm: fresh */
    {"sliding_counter:10/1h", 10, "gcra:15/1h", 15},
    {"token_bucket:10/1h + gcra:100/1d", 7, "token_bucket:10/1h", 10},   /* another shape */
};

START_TEST(a_key_keeps_its_use_across_a_change_by_the_conversion_rule_exactly)
{
    const struct conv *c = &convs[_i];
    fake_clock *clock = fake_clock_shared(1000 * SEC);   /* frozen: no refill */
    srl_config cfg = config_of(c->from, 64, clock);
    const char *name = unique_name("live");
    srl_limiter *worker = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    ck_assert_int_eq(admit(worker, "k", c->used), c->used);
    /* The change comes from another handle (another process would do the
     * same): the worker's handle sees it on its next decision. */
    srl_limiter *ctl = open_live(name, &cfg, SRL_ADOPT);   /* the same clock */
    change(ctl, c->to);
    ck_assert_uint_eq(gen_of(ctl), 1);
    int got = admit(worker, "k", 200);
    ck_assert_msg(got == c->more, "used %d of %s -> %s: admitted %d more, want %d", c->used,
                  c->from, c->to, got, c->more);
    /* A key first seen after the change gets the new policy whole. */
    srl_limits to = limits_of(c->to);
    uint32_t cap = to.limit[0].burst ? to.limit[0].burst : to.limit[0].permits;
    for (uint32_t i = 1; i < to.count; i++) {
        uint32_t ci = to.limit[i].burst ? to.limit[i].burst : to.limit[i].permits;
        cap = ci < cap ? ci : cap;
    }
    ck_assert_int_eq(admit(worker, "new", 200), (int)cap);
    ck_assert_int_eq(srl_check(ctl, NULL, NULL), 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(ctl, &st), 0);
    ck_assert_uint_eq(st.reset_slots, 0);
    srl_close(ctl);
    srl_close(worker);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_change_of_one_tier_converts_its_keys_and_leaves_the_other_tiers_alone)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_tier paid;
    memset(&paid, 0, sizeof paid);
    snprintf(paid.name, sizeof paid.name, "paid");
    paid.limits = limits_of("token_bucket:20/1h");
    srl_config cfg = config_of("token_bucket:10/1h", 64, clock);
    cfg.tiers = &paid;
    cfg.tier_count = 1;
    const char *name = unique_name("live");
    srl_limiter *lim = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    ck_assert_int_eq(admit_tier(lim, 0, "free", 50), 10);
    ck_assert_int_eq(admit_tier(lim, 1, "paid", 50), 20);
    srl_limits thirty = limits_of("token_bucket:30/1h");
    char msg[512];
    ck_assert_int_eq(srl_policy_change_tier(lim, 1, &thirty, msg, sizeof msg), 1);
    ck_assert_uint_eq(gen_of(lim), 1);
    srl_tier t;
    ck_assert_int_eq(srl_tier_get(lim, 1, &t), 0);
    ck_assert_str_eq(t.name, "paid");
    ck_assert_uint_eq(t.limits.limit[0].permits, 30);
    ck_assert_int_eq(srl_tier_get(lim, 0, &t), 0);
    ck_assert_uint_eq(t.limits.limit[0].permits, 10);
    ck_assert_int_eq(admit_tier(lim, 1, "paid", 50), 10);   /* 20 used of 30 */
    ck_assert_int_eq(admit_tier(lim, 0, "free", 50), 0);    /* its tier did not change */
    /* A tier beyond the table is refused, naming the range. */
    ck_assert_int_eq(srl_policy_change_tier(lim, 2, &thirty, msg, sizeof msg), SRL_EINVAL);
    ck_assert_str_eq(msg, "tier 2: the segment has tiers 0..1");
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* The changer's sweep: a key untouched through two changes is still
 * carried, since each change converts every key still one behind before
 * it overwrites that generation's copy. */
START_TEST(a_key_untouched_through_two_changes_keeps_its_use)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config_of("token_bucket:10/1h", 64, clock);
    const char *name = unique_name("live");
    srl_limiter *worker = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    ck_assert_int_eq(admit(worker, "k", 10), 10);
    srl_limiter *ctl = open_live(name, &cfg, SRL_ADOPT);   /* the same clock */
    change(ctl, "token_bucket:15/1h");
    change(ctl, "token_bucket:25/1h");
    change(ctl, "token_bucket:12/1h");
    ck_assert_uint_eq(gen_of(worker), 3);
    ck_assert_int_eq(admit(worker, "k", 100), 2);   /* 10 used of 12 */
    ck_assert_int_eq(srl_check(ctl, NULL, NULL), 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(ctl, &st), 0);
    ck_assert_uint_eq(st.reset_slots, 0);
    srl_close(ctl);
    srl_close(worker);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------------ under load */

#define WORKERS 6
#define LOAD_KEYS 1000
#define STEPS 6

/* Capacities per generation: raised and lowered. */
static const uint32_t caps[STEPS] = {10, 20, 5, 30, 10, 40};

struct load {
    struct spin_barrier barrier;
    uint32_t stop;
    uint32_t started;
    uint64_t progress[WORKERS];        /* decisions made, per worker */
    uint32_t admitted[LOAD_KEYS];
    uint32_t errors;
    uint32_t why[4];                   /* the eviction race's errors by kind: call, degraded,
                                          over 80, evict */
    int first_rc;                      /* the first failed call's code */
};

/* In a forked worker: its own handle on the segment, with the mutant's
 * flags, then counted in *started (the parent waits for all).  A worker
 * that cannot open exits 1, which reap_workers reports. */
static srl_limiter *worker_open(const char *name, const srl_config *cfg, uint32_t *started)
{
    srl_limiter *lim;
    if (srl_open_shared(name, cfg, SRL_ADOPT, &lim) != 0)
        _exit(1);
    srl__shm_set_test_flags(lim, mutant());
    __atomic_add_fetch(started, 1, __ATOMIC_RELEASE);
    return lim;
}

/* Until all WORKERS have counted themselves in *started. */
static void wait_started(uint32_t *started)
{
    while (__atomic_load_n(started, __ATOMIC_ACQUIRE) < WORKERS)
        sched_yield();
}

/* Every worker exited, and with 0. */
static void reap_workers(const pid_t pids[WORKERS])
{
    for (int w = 0; w < WORKERS; w++) {
        int st;
        ck_assert_int_eq(waitpid(pids[w], &st, 0), pids[w]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d: status %#x", w, st);
    }
}

static void load_worker(const char *name, const srl_config *cfg, struct load *a, int w)
{
    srl_limiter *lim = worker_open(name, cfg, &a->started);
    uint32_t k = (uint32_t)w * 167;
    while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
        char key[16];
        int n = snprintf(key, sizeof key, "k%u", k % LOAD_KEYS);
        srl_decision d;
        int rc = srl_acquire(lim, key, (size_t)n, 1, &d);
        if (rc != 0 || (d.flags & (SRL_DECISION_UNTRACKED | SRL_DECISION_DEGRADED)))
            __atomic_add_fetch(&a->errors, 1, __ATOMIC_RELAXED);
        else if (d.allowed)
            __atomic_add_fetch(&a->admitted[k % LOAD_KEYS], 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&a->progress[w], 1, __ATOMIC_RELEASE);
        k += 7;
    }
    srl_close(lim);
    _exit(0);
}

/* Until every worker made `n` more decisions than in `since`. */
static void wait_progress(struct load *a, const uint64_t since[WORKERS], uint64_t n)
{
    for (int w = 0; w < WORKERS; w++)
        while (__atomic_load_n(&a->progress[w], __ATOMIC_ACQUIRE) < since[w] + n)
            sched_yield();
}

START_TEST(six_workers_hammering_1000_keys_stay_within_the_bound_while_the_limit_changes)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);   /* frozen: counts are exact */
    char first[32];
    snprintf(first, sizeof first, "token_bucket:%u/1h", caps[0]);
    srl_config cfg = config_of(first, 2048, clock);
    const char *name = unique_name("live");
    srl_limiter *ctl = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    struct load *a = shared_zeroed(sizeof *a);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] == 0)
            load_worker(name, &cfg, a, w);
    }
    wait_started(&a->started);
    /* Each change is made while every worker runs: it starts after each
     * has decided 500 times since the last change, and the next waits for
     * 500 more (so each generation is decided on by every worker). */
    uint64_t since[WORKERS] = {0};
    for (int g = 1; g < STEPS; g++) {
        wait_progress(a, since, 500);
        char text[32];
        snprintf(text, sizeof text, "token_bucket:%u/1h", caps[g]);
        change(ctl, text);
        for (int w = 0; w < WORKERS; w++)
            since[w] = __atomic_load_n(&a->progress[w], __ATOMIC_ACQUIRE);
    }
    /* Long enough under the last policy for every key to be used up. */
    wait_progress(a, since, 8 * LOAD_KEYS);
    __atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
    reap_workers(pids);
    ck_assert_uint_eq(a->errors, 0);
    /* The bound (srl.h): C0 + the raises; and at least the last capacity,
     * with the key used up under it. */
    uint32_t bound = caps[0];
    for (int g = 1; g < STEPS; g++)
        bound += caps[g] > caps[g - 1] ? caps[g] - caps[g - 1] : 0;
    ck_assert_uint_eq(bound, 75);
    for (int k = 0; k < LOAD_KEYS; k++) {
        ck_assert_msg(a->admitted[k] <= bound && a->admitted[k] >= caps[STEPS - 1],
                      "key k%d admitted %u, bound %u..%u", k, a->admitted[k], caps[STEPS - 1],
                      bound);
        char key[16];
        snprintf(key, sizeof key, "k%d", k);
        ck_assert_int_eq(admit(ctl, key, 1), 0);   /* used up under the last policy */
    }
    ck_assert_uint_eq(gen_of(ctl), STEPS - 1);
    struct check_lines l;
    memset(&l, 0, sizeof l);
    ck_assert_msg(srl_check(ctl, check_lines_collect, &l) == 0, "check: %s", l.last);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(ctl, &st), 0);
    ck_assert_uint_eq(st.reset_slots, 0);
    munmap(a, sizeof *a);
    srl_close(ctl);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* New keys are created, and old ones evicted (the clock moves a window at
 * each change, so every earlier key is at rest), while the policy changes:
 * no error, no damage, and each key within its bound. */
START_TEST(a_change_races_with_new_keys_and_with_eviction)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config_of("token_bucket:10/1m", 64, clock);
    const char *name = unique_name("live");
    srl_limiter *ctl = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    struct load *a = shared_zeroed(sizeof *a);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] != 0)
            continue;
        srl_limiter *lim = worker_open(name, &cfg, &a->started);
        for (uint32_t n = 0; !__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE); n++) {
            char key[32];
            int len = snprintf(key, sizeof key, "w%d-%u", w, n);   /* a new key each time */
            uint32_t got = 0;
            for (int r = 0; r < 45; r++) {
                srl_decision d;
                int rc = srl_acquire(lim, key, (size_t)len, 1, &d);
                if (rc != 0 || (d.flags & SRL_DECISION_DEGRADED)) {
                    __atomic_add_fetch(&a->errors, 1, __ATOMIC_RELAXED);
                    __atomic_add_fetch(&a->why[rc != 0 ? 0 : 1], 1, __ATOMIC_RELAXED);
                    int none = 0;
                    if (rc != 0)
                        __atomic_compare_exchange_n(&a->first_rc, &none, rc, false,
                                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
                }
                got += d.allowed && !(d.flags & SRL_DECISION_UNTRACKED);
            }
            /* One change and one refill at most can fall in these 45
             * requests: 40 + 40 is the most any key can get. */
            if (got > 80) {
                __atomic_add_fetch(&a->errors, 1, __ATOMIC_RELAXED);
                __atomic_add_fetch(&a->why[2], 1, __ATOMIC_RELAXED);
            }
            if (n % 8 == 7 && srl_evict_idle(lim) < 0) {
                __atomic_add_fetch(&a->errors, 1, __ATOMIC_RELAXED);
                __atomic_add_fetch(&a->why[3], 1, __ATOMIC_RELAXED);
            }
            __atomic_add_fetch(&a->progress[w], 1, __ATOMIC_RELEASE);
        }
        srl_close(lim);
        _exit(0);
    }
    wait_started(&a->started);
    uint64_t since[WORKERS] = {0};
    static const char *const texts[] = {"token_bucket:20/1m", "token_bucket:5/1m",
                                        "token_bucket:40/1m", "token_bucket:10/1m",
                                        "token_bucket:30/1m", "token_bucket:15/1m"};
    for (size_t g = 0; g < sizeof texts / sizeof texts[0]; g++) {
        wait_progress(a, since, 20);   /* 20 new keys each: the table of 64 turns over */
        clock->now += 61 * SEC;        /* every earlier key is at rest: evictable */
        change(ctl, texts[g]);
        for (int w = 0; w < WORKERS; w++)
            since[w] = __atomic_load_n(&a->progress[w], __ATOMIC_ACQUIRE);
    }
    wait_progress(a, since, 20);
    __atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
    reap_workers(pids);
    ck_assert_msg(a->errors == 0, "%u errors: %u calls failed (the first: %s), %u degraded, "
                  "%u keys over 80, %u evictions failed", a->errors, a->why[0],
                  srl_strerror(a->first_rc), a->why[1], a->why[2], a->why[3]);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(ctl, &st), 0);
    ck_assert_uint_gt(st.evicted, 0);
    ck_assert_uint_eq(st.reset_slots, 0);
    struct check_lines l;
    memset(&l, 0, sizeof l);
    ck_assert_msg(srl_check(ctl, check_lines_collect, &l) == 0, "check: %s", l.last);
    ck_assert_uint_eq(gen_of(ctl), 6);
    munmap(a, sizeof *a);
    srl_close(ctl);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* Many processes apply one change at once (a server's workers after a
 * restart): all are held at a start line and let go together, so their
 * calls overlap.  Exactly one is told it changed the policy (1), the
 * others that it was current already (0), and there is one new generation:
 * what mod_srl's "exactly one child logs the change" rests on. */
START_TEST(changers_racing_with_one_change_exactly_one_is_told_it_changed_it)
{
    srl_config cfg = config_of("token_bucket:10/1h", 64, NULL);
    const char *name = unique_name("live");
    srl_limiter *ctl = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    struct race {
        uint32_t ready, go;
        int rc[WORKERS];
    } *r = shared_zeroed(sizeof *r);
    srl_limits twenty = limits_of("token_bucket:20/1h");   /* here: children skip Check */
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] != 0)
            continue;
        srl_limiter *lim = worker_open(name, &cfg, &r->ready);
        while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE))
            ;
        r->rc[w] = srl_policy_change_tier(lim, 0, &twenty, NULL, 0);
        srl_close(lim);
        _exit(0);
    }
    wait_started(&r->ready);
    __atomic_store_n(&r->go, 1, __ATOMIC_RELEASE);
    reap_workers(pids);
    int ones = 0, zeros = 0;
    for (int w = 0; w < WORKERS; w++) {
        ones += r->rc[w] == 1;
        zeros += r->rc[w] == 0;
    }
    ck_assert_int_eq(ones, 1);
    ck_assert_int_eq(zeros, WORKERS - 1);
    ck_assert_uint_eq(gen_of(ctl), 1);
    ck_assert_int_eq(admit(ctl, "k", 30), 20);
    munmap(r, sizeof *r);
    srl_close(ctl);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------------ crash */

START_TEST(a_changer_killed_at_any_step_leaves_the_old_policy_or_the_new_never_damage)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config_of("token_bucket:10/1h", 256, clock);   /* 16 buckets */
    const char *name = unique_name("live");
    srl_limiter *lim = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    uint64_t seed = 0x5eed;
    int old_seen = 0, new_seen = 0;
    /* Steps: 16 buckets, then before / in the middle of / after the copy,
     * then after publishing (20 in all); each is hit at least once. */
    for (int trial = 0; trial < 40; trial++) {
        uint32_t gen = gen_of(lim);
        uint32_t cap = 10 + 10 * (gen % 2);   /* 10 at even generations, 20 at odd */
        char key[32];
        snprintf(key, sizeof key, "t%d", trial);
        for (int k = 0; k < 40; k++) {   /* keys in most buckets, used up */
            char other[40];
            snprintf(other, sizeof other, "%s-%d", key, k);
            ck_assert_int_eq(admit(lim, other, (int)cap), (int)cap);
        }
        ck_assert_int_eq(admit(lim, key, (int)cap), (int)cap);
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        unsigned die_at = trial < 20 ? (unsigned)trial + 1 : 1 + (unsigned)((seed >> 33) % 20);
        srl_limits next = limits_of(cap == 10 ? "token_bucket:20/1h" : "token_bucket:10/1h");
        pid_t pid = test_fork();
        if (pid == 0) {
            srl_limiter *c;
            if (srl_open_shared(name, &cfg, SRL_ADOPT, &c) != 0)   /* the fake clock */
                _exit(1);
            srl__shm_set_test_flags(c, SRL__SHM_TEST_CHANGE_DIE);
            srl__shm_set_test_die(c, die_at);
            srl_policy_change_tier(c, 0, &next, NULL, 0);
            _exit(2);   /* not reached: it dies first */
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "die_at %u: status %#x", die_at,
                      st);
        uint32_t after = gen_of(lim);
        ck_assert_msg(after == gen || after == gen + 1, "die_at %u: generation %u after %u",
                      die_at, after, gen);
        old_seen += after == gen;
        new_seen += after == gen + 1;
        /* Only the publication makes the change: dying at step 20 (after
         * it) is the only step that leaves the new policy. */
        ck_assert_uint_eq(after, die_at == 20 ? gen + 1 : gen);
        struct check_lines l;
        memset(&l, 0, sizeof l);
        ck_assert_msg(srl_check(lim, check_lines_collect, &l) == 0, "die_at %u: %s", die_at,
                      l.last);
        /* Decisions as the policy in force says: used cap of cap; under the
         * new one, the difference (or nothing when it went down). */
        uint32_t now_cap = after == gen ? cap : (cap == 10 ? 20 : 10);
        ck_assert_int_eq(admit(lim, key, 50), now_cap > cap ? (int)(now_cap - cap) : 0);
        /* And the flock died with the changer: the next change goes through. */
        change(lim, now_cap == 10 ? "token_bucket:20/1h" : "token_bucket:10/1h");
        ck_assert_uint_eq(gen_of(lim), after + 1);
        ck_assert_int_eq(admit(lim, key, 50), now_cap == 10 ? 10 : 0);
        ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
        /* The clock is frozen (nothing comes to rest): make room. */
        ck_assert_int_eq(srl_reset_key(lim, key, strlen(key)), 0);
        for (int k = 0; k < 40; k++) {
            char other[40];
            snprintf(other, sizeof other, "%s-%d", key, k);
            ck_assert_int_eq(srl_reset_key(lim, other, strlen(other)), 0);
        }
    }
    ck_assert_int_gt(old_seen, 0);
    ck_assert_int_gt(new_seen, 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_gt(st.recovered, 0);   /* some died holding a bucket lock */
    ck_assert_uint_eq(st.reset_slots, 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------------ fork
 *
 * A pre-forked server (mod_srl) opens the segment in its parent and forks:
 * every child shares the handle's open file description, and flock treats
 * all holders of one description as one owner.  Two children changing the
 * policy through that handle must still run one at a time.  Arranged, not
 * hoped for: changer A parks holding the flock, after reading the
 * generation (SRL__SHM_TEST_CHANGE_PARK); changer B is started only then,
 * and A is let go only once B is seen waiting for the flock (a "->" line
 * of /proc/locks with B's pid) or has returned without waiting (the bug).
 */

enum { CHANGER_A, CHANGER_B };

struct forked_change {
    uint32_t park[2];        /* srl__shm_set_test_park: A parked, go */
    int rc[2];               /* each changer's srl_policy_change */
    char msg[2][256];
};

struct forked_result {
    int rc[2];
    char msg[2][256];
    bool b_waited;           /* B was seen blocked on the flock while A held it */
    uint32_t gen;
    srl_policy policy;
};

/* Is pid waiting for a flock: a blocked request ("N: -> FLOCK ADVISORY
 * WRITE pid ...") in /proc/locks? */
static bool waits_for_flock(pid_t pid)
{
    FILE *f = fopen("/proc/locks", "r");
    if (f == NULL)
        return false;
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        const char *arrow = strstr(line, "->");
        char type[16], mode[16], rw[16];
        long who;
        found = arrow != NULL &&
                sscanf(arrow + 2, "%15s %15s %15s %ld", type, mode, rw, &who) == 4 &&
                strcmp(type, "FLOCK") == 0 && who == (long)pid;
    }
    fclose(f);
    return found;
}

/* A forked changer: srl_policy_change through the inherited handle, with
 * `flags` (and the suite's mutant) on this process's copy of it. */
static pid_t fork_changer(srl_limiter *lim, const srl_config *to, unsigned flags,
                          struct forked_change *pg, int who)
{
    pid_t pid = test_fork();
    if (pid != 0)
        return pid;
    srl__shm_set_test_park(lim, pg->park);
    srl__shm_set_test_flags(lim, mutant() | flags);
    pg->rc[who] = srl_policy_change(lim, to, pg->msg[who], sizeof pg->msg[who]);
    srl_close(lim);
    _exit(0);
}

/* A changer's end: it exited, with 0. */
static void reap_changer(pid_t pid, const char *who)
{
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "changer %s: status %#x", who, st);
}

/* Gives up on the scenario: no changer is left parked, then the failure. */
static void abandon(pid_t a, pid_t b, const char *why)
{
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    if (b > 0) {
        kill(b, SIGKILL);
        waitpid(b, NULL, 0);
    }
    ck_abort_msg("%s", why);
}

/* The scenario, both changers with `broken` (0: the library as shipped). */
static void forked_changers_run(unsigned broken, struct forked_result *r)
{
    const int patience_ms = 60000;   /* a safety net: the normal path waits for events */
    srl_config p0 = config_of("gcra:10/1h", 64, NULL);
    srl_config p1 = config_of("gcra:20/1h", 64, NULL);
    const char *name = unique_name("live");
    srl_limiter *lim = open_live(name, &p0, SRL_CREATE | SRL_EXCL);   /* the one handle */
    struct forked_change *pg = shared_zeroed(sizeof *pg);
    pid_t a = fork_changer(lim, &p1, SRL__SHM_TEST_CHANGE_PARK | broken, pg, CHANGER_A);
    int waited = 0;
    while (__atomic_load_n(&pg->park[0], __ATOMIC_ACQUIRE) == 0) {
        if (waitpid(a, NULL, WNOHANG) == a)   /* it must park, not finish */
            ck_abort_msg("changer A returned without parking: %d (%s)", pg->rc[CHANGER_A],
                         pg->msg[CHANGER_A]);
        if (waited++ == patience_ms)
            abandon(a, -1, "changer A did not park in the flock in 60 s");
        usleep(1000);
    }
    pid_t b = fork_changer(lim, &p1, broken, pg, CHANGER_B);
    bool b_done = false;
    for (waited = 0; !(b_done = waitpid(b, NULL, WNOHANG) == b) && !waits_for_flock(b);
         waited++) {
        if (waited == patience_ms)
            abandon(a, b, "changer B neither waited for the flock nor returned in 60 s");
        usleep(1000);
    }
    r->b_waited = !b_done;
    __atomic_store_n(&pg->park[1], 1, __ATOMIC_RELEASE);
    reap_changer(a, "A");
    if (!b_done)
        reap_changer(b, "B");
    for (int w = CHANGER_A; w <= CHANGER_B; w++) {
        r->rc[w] = pg->rc[w];
        memcpy(r->msg[w], pg->msg[w], sizeof r->msg[w]);
    }
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    r->gen = info.policy_gen;
    r->policy = info.policy;
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    munmap(pg, sizeof *pg);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}

START_TEST(a_change_through_a_handle_shared_across_fork_waits_for_the_other_changer)
{
    struct forked_result r;
    forked_changers_run(0, &r);
    ck_assert_msg(r.b_waited, "changer B returned %d (%s) while A held the flock: it did not "
                  "wait", r.rc[CHANGER_B], r.msg[CHANGER_B]);
    /* A made generation 1; B, let in after it, found P1 current. */
    ck_assert_msg(r.rc[CHANGER_A] == 1 && r.rc[CHANGER_B] == 0,
                  "A returned %d (%s), B %d (%s): exactly one changer makes the new generation",
                  r.rc[CHANGER_A], r.msg[CHANGER_A], r.rc[CHANGER_B], r.msg[CHANGER_B]);
    ck_assert_uint_eq(r.gen, 1);
    ck_assert_int_eq(r.policy.algorithm, SRL_GCRA);
    ck_assert_uint_eq(r.policy.permits, 20);
}
END_TEST

/* The same with the flock on the shared fd (the code before 976668a): B
 * gets in while A holds it, and both make "generation 1" (ci9's two
 * children).  Shows the test above catches that bug. */
START_TEST(a_flock_on_the_fd_shared_across_fork_lets_both_changers_in_and_the_test_sees_it)
{
    struct forked_result r;
    forked_changers_run(SRL__SHM_TEST_CHANGE_SHARED_FD, &r);
    ck_assert_msg(!r.b_waited && r.rc[CHANGER_A] == 1 && r.rc[CHANGER_B] == 1,
                  "the shared-fd flock was not caught: B %s, A returned %d, B %d",
                  r.b_waited ? "waited" : "did not wait", r.rc[CHANGER_A], r.rc[CHANGER_B]);
    ck_assert_uint_eq(r.gen, 1);
}
END_TEST

/* ------------------------------------------------------------ refusals */

START_TEST(what_cannot_change_is_refused_with_its_code_and_a_message_saying_what_to_do)
{
    srl_config cfg = config_of("token_bucket:10/1h", 100, NULL);
    const char *name = unique_name("live");
    srl_limiter *lim = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    char msg[512];
    srl_limits big = limits_of("sliding_log:100/1h");
    ck_assert_int_eq(srl_policy_change_tier(lim, 0, &big, msg, sizeof msg), SRL_EMISMATCH);
    ck_assert_str_eq(msg, "size: the segment's slots hold 24 bytes of state (made for "
                          "token_bucket:10/1h), sliding_log:100/1h needs 808: make a bigger "
                          "segment under another name, e.g. rlctl create NEWNAME --policy "
                          "'sliding_log:100/1h' --capacity 112, move the workers to it and "
                          "destroy this one");
    srl_config other = cfg;
    other.capacity = 1000;
    ck_assert_int_eq(srl_policy_change(lim, &other, msg, sizeof msg), SRL_EMISMATCH);
    ck_assert_str_eq(msg, "capacity: the segment holds 112 slots, this config asks for 1000 "
                          "keys (1008 slots): capacity cannot change live; ask for 112, or "
                          "make a new segment (rlctl create)");
    other = cfg;
    other.key_display = 16;
    ck_assert_int_eq(srl_policy_change(lim, &other, msg, sizeof msg), SRL_EMISMATCH);
    ck_assert_str_eq(msg, "key_display: the segment keeps 0 bytes per key, this config asks "
                          "for 16: it is part of the slot size and cannot change live; use 0");
    srl_tier t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "paid");
    t.limits = limits_of("token_bucket:20/1h");
    other = cfg;
    other.tiers = &t;
    other.tier_count = 1;
    ck_assert_int_eq(srl_policy_change(lim, &other, msg, sizeof msg), SRL_EMISMATCH);
    ck_assert_str_eq(msg, "tiers: the segment has 1, this config asks for 2: tiers cannot be "
                          "added or removed live (their indices are in use); change a tier's "
                          "policy instead");
    srl_limits conc = limits_of("concurrency:5");
    ck_assert_int_eq(srl_policy_change_tier(lim, 0, &conc, msg, sizeof msg), SRL_EPOLICY);
    ck_assert_str_eq(msg, "policy: a concurrency limit cannot change live (its units name "
                          "their holders); make a new segment (rlctl create)");
    ck_assert_int_eq(srl_policy_change(lim, NULL, msg, sizeof msg), SRL_EINVAL);
    /* Nothing changed. */
    ck_assert_uint_eq(gen_of(lim), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_uint_eq(info.policy.permits, 10);
    /* The same policy again: no new generation. */
    ck_assert_int_eq(srl_policy_change(lim, &cfg, msg, sizeof msg), 0);
    ck_assert_uint_eq(gen_of(lim), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);

    /* Stores that cannot change live. */
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    ck_assert_int_eq(srl_policy_change(lim, &cfg, msg, sizeof msg), SRL_ENOTSUP);
    ck_assert_str_eq(msg, "an anonymous segment's policy cannot change (no file to serialise "
                          "changers); create a new one");
    srl_close(lim);
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    ck_assert_int_eq(srl_policy_change(lim, &cfg, msg, sizeof msg), SRL_ENOTSUP);
    ck_assert_str_eq(msg, "this store's policy cannot change live (only a shared segment's)");
    srl_close(lim);
}
END_TEST

START_TEST(a_segment_with_a_concurrency_limit_keeps_it)
{
    srl_config cfg = config_of("concurrency:4", 64, NULL);
    const char *name = unique_name("live");
    srl_limiter *lim = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    char msg[512];
    srl_limits tb = limits_of("token_bucket:10/1h");
    ck_assert_int_eq(srl_policy_change_tier(lim, 0, &tb, msg, sizeof msg), SRL_EPOLICY);
    ck_assert_ptr_nonnull(strstr(msg, "concurrency limit cannot change live"));
    ck_assert_uint_eq(gen_of(lim), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* Layout 8 refuses a layout-7, 6 (and 5) segment, and layout-7 code, which
 * wants version 7 exactly, refuses 8: the same equality check, seen from
 * there.  9 stands for the next one. */
START_TEST(a_layout_6_segment_is_refused_as_another_layout_version)
{
    ck_assert_uint_eq(SRL__SHM_VERSION, 8);
    srl_config cfg = config_of("token_bucket:10/1h", 64, NULL);
    const char *name = unique_name("live");
    srl_limiter *lim = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    srl_close(lim);
    const uint32_t others[] = {5, 6, 7, 9};
    for (size_t j = 0; j < 4; j++) {
        shm_poke32(name, offsetof(struct srl__shm_header, version), others[j]);
        ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &lim), SRL_EVERSION);
        ck_assert_int_eq(srl_open_shared(name, NULL, 0, &lim), SRL_EVERSION);
        ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CHANGE, &lim), SRL_EVERSION);
    }
    shm_poke32(name, offsetof(struct srl__shm_header, version), 8);
    lim = open_live(name, &cfg, 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_uint_eq(info.layout_version, 8);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------------ openers */

START_TEST(srl_change_changes_srl_adopt_takes_and_a_plain_opener_refuses)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config ten = config_of("token_bucket:10/1h", 64, clock);
    srl_config twenty = config_of("token_bucket:20/1h", 64, clock);
    const char *name = unique_name("live");
    srl_limiter *worker = open_live(name, &ten, SRL_CREATE | SRL_EXCL);
    ck_assert_int_eq(admit(worker, "k", 10), 10);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &twenty, 0, &lim), SRL_EMISMATCH);
    ck_assert_ptr_null(lim);
    ck_assert_int_eq(srl_open_shared(name, &twenty, SRL_CREATE, &lim), SRL_EMISMATCH);
    ck_assert_int_eq(srl_open_shared(name, &twenty, SRL_ADOPT, &lim), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_uint_eq(info.policy.permits, 10);   /* the segment's */
    srl_close(lim);
    ck_assert_int_eq(srl_open_shared(name, &twenty, SRL_CHANGE | SRL_ADOPT, &lim), SRL_EINVAL);
    ck_assert_int_eq(srl_open_shared(name, NULL, SRL_CHANGE, &lim), SRL_EINVAL);
    /* What cannot change is refused by SRL_CHANGE too, and changes nothing. */
    srl_config wide = twenty;
    wide.capacity = 1000;
    ck_assert_int_eq(srl_open_shared(name, &wide, SRL_CHANGE, &lim), SRL_EMISMATCH);
    ck_assert_uint_eq(gen_of(worker), 0);
    /* A graceful restart with a raised limit: the key keeps its use. */
    ck_assert_int_eq(srl_open_shared(name, &twenty, SRL_CHANGE | SRL_CREATE, &lim), 0);
    ck_assert_uint_eq(gen_of(lim), 1);
    ck_assert_int_eq(srl_info_get(worker, &info), 0);
    ck_assert_uint_eq(info.policy.permits, 20);
    ck_assert_int_eq(admit(worker, "k", 50), 10);
    srl_close(lim);
    /* The same config again: opened, no new generation; now a plain opener
     * with the new policy is accepted and one with the old is refused. */
    ck_assert_int_eq(srl_open_shared(name, &twenty, SRL_CHANGE, &lim), 0);
    ck_assert_uint_eq(gen_of(lim), 1);
    srl_close(lim);
    ck_assert_int_eq(srl_open_shared(name, &twenty, 0, &lim), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_open_shared(name, &ten, 0, &lim), SRL_EMISMATCH);
    srl_close(worker);
    ck_assert_int_eq(srl_unlink(name), 0);
    /* SRL_CHANGE | SRL_CREATE on a missing name creates it. */
    ck_assert_int_eq(srl_open_shared(name, &twenty, SRL_CHANGE | SRL_CREATE, &lim), 0);
    ck_assert_uint_eq(gen_of(lim), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------------ hostile */

static size_t copy_off(unsigned c)
{
    return SRL__SHM_POLICY_OFFSET(c);
}

static void read_copy(const char *name, unsigned c, struct srl__shm_policy *out)
{
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &lim), 0);
    struct srl__shm *s = lim->impl;
    memcpy(out, s->base + copy_off(c), sizeof *out);
    srl_close(lim);
}

static void write_copy(const char *name, unsigned c, const struct srl__shm_policy *p, bool seal)
{
    struct srl__shm_policy w = *p;
    if (seal)
        w.sum = srl__shm_policy_sum(&w);
    shm_poke(name, copy_off(c), &w, sizeof w);
}

enum edit { E_SUM, E_GEN, E_TIERS0, E_TIERS17, E_ALGO, E_PERMITS0, E_RESERVED, E_BIG,
            E_TIERNAME, E_CONC, E_LIMITS5, E_N };

static const char *const edit_names[] = {"sum", "gen", "tier_count 0", "tier_count 17",
                                         "algorithm 99", "permits 0", "a reserved word",
                                         "a state too big", "a tier added", "a concurrency limit",
                                         "limits count 5"};

static void damage(struct srl__shm_policy *p, enum edit e)
{
    switch (e) {
    case E_SUM: p->sum ^= 1; break;
    case E_GEN: p->gen += 2; break;
    case E_TIERS0: p->tier_count = 0; break;
    case E_TIERS17: p->tier_count = 17; break;
    case E_ALGO: p->limits.limit[0].algorithm = 99; break;
    case E_PERMITS0: p->limits.limit[0].permits = 0; break;
    case E_RESERVED: p->limits.limit[0].penalty_max_s = 1; break;
    case E_BIG: p->limits = limits_of("sliding_log:100/1h"); break;
    case E_TIERNAME:
        p->tier_count = 2;
        snprintf(p->tiers[0].name, sizeof p->tiers[0].name, "paid");
        p->tiers[0].limits = limits_of("token_bucket:5/1h");
        break;
    case E_CONC: p->limits = limits_of("concurrency:3"); break;
    case E_LIMITS5: p->limits.count = 5; break;
    case E_N: break;
    }
}

/* Each kind of damage to the current copy, raw and resealed (an attacker
 * with write access can reseal): a handle that read the copy before keeps
 * deciding on its private, validated view (as it keeps the header's
 * geometry), srl_check names the copy, and whoever would read it now (an
 * opener, a changer, a handle meeting a new generation) gets SRL_ECORRUPT
 * and decides nothing on it; restoring it heals all. */
START_TEST(garbage_in_the_current_policy_copy_is_refused_even_with_a_valid_checksum)
{
    enum edit e = (enum edit)(_i / 2);
    bool seal = _i % 2;
    if (e == E_SUM && seal)
        return;   /* resealing undoes that one */
    srl_config cfg = config_of("token_bucket:10/1h", 64, NULL);
    const char *name = unique_name("live");
    srl_limiter *lim = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    ck_assert_int_eq(admit(lim, "k", 3), 3);
    struct srl__shm_policy orig, bad;
    read_copy(name, 0, &orig);
    bad = orig;
    damage(&bad, e);
    write_copy(name, 0, &bad, seal);
    ck_assert_int_eq(admit(lim, "k", 2), 2);   /* the private view: 5 of 10 used */
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_uint_eq(info.policy.permits, 10);
    /* Whoever reads the copy now refuses it. */
    struct srl__shm *s = lim->impl;
    struct srl__shm_policy tmp;
    ck_assert_int_eq(srl__shm_policy_read(s, 0, &tmp, NULL, 0), SRL_ECORRUPT);
    struct check_lines l;
    memset(&l, 0, sizeof l);
    ck_assert_int_ge(srl_check(lim, check_lines_collect, &l), 1);
    ck_assert_msg(strncmp(l.last, "policy copy A (generation 0): ", 30) == 0, "%s: %s",
                  edit_names[e], l.last);
    srl_limiter *other;
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &other), SRL_ECORRUPT);
    ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &other), SRL_ECORRUPT);
    char msg[512];
    srl_limits twenty = limits_of("token_bucket:20/1h");
    ck_assert_int_eq(srl_policy_change_tier(lim, 0, &twenty, msg, sizeof msg), SRL_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg, "destroy the segment and recreate it"));
    /* Restored, it all works again, as before. */
    write_copy(name, 0, &orig, false);
    ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &other), 0);
    ck_assert_int_eq(admit(other, "k", 20), 5);
    srl_close(other);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* The previous generation's copy is read only for a key still on it:
 * damaged, such a key is reset (counted, named by srl_check), never read
 * through the damaged copy.  Once nothing is on it, it is not read at all. */
START_TEST(garbage_in_the_previous_copy_resets_only_the_keys_still_on_it)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config_of("token_bucket:10/1h", 64, clock);
    const char *name = unique_name("live");
    srl_limiter *ctl = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    ck_assert_int_eq(admit(ctl, "old", 10), 10);
    change(ctl, "token_bucket:20/1h");   /* "old" stays on generation 0 */
    struct srl__shm_policy a;
    read_copy(name, 0, &a);
    struct srl__shm_policy bad = a;
    damage(&bad, E_PERMITS0);
    write_copy(name, 0, &bad, true);
    /* A fresh handle: it cannot read generation 0. */
    srl_limiter *lim = open_live(name, &cfg, SRL_ADOPT);   /* fresh: reads copy A anew */
    struct check_lines l;
    memset(&l, 0, sizeof l);
    ck_assert_int_eq(srl_check(lim, check_lines_collect, &l), 1);
    ck_assert_msg(strstr(l.last, ": policy generation 0 is neither the current (1) nor a "
                                 "previous one still readable") != NULL, "%s", l.last);
    ck_assert_int_eq(admit(lim, "old", 50), 20);   /* reset: fresh under 20 */
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.reset_slots, 1);
    ck_assert_int_eq(admit(lim, "new", 50), 20);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    /* The next change overwrites that copy: healed. */
    change(lim, "token_bucket:30/1h");
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    ck_assert_int_eq(admit(lim, "new", 50), 10);
    srl_close(lim);
    srl_close(ctl);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(garbage_in_policy_gen_is_refused_never_followed)
{
    static const uint32_t gens[] = {1, 2, 7, 0x80000000u, UINT32_MAX};
    srl_config cfg = config_of("token_bucket:10/1h", 64, NULL);
    const char *name = unique_name("live");
    srl_limiter *lim = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    ck_assert_int_eq(admit(lim, "k", 4), 4);
    size_t at = SRL__SHM_LIVE_OFFSET + offsetof(struct srl__shm_live, policy_gen);
    for (size_t i = 0; i < sizeof gens / sizeof gens[0]; i++) {
        shm_poke32(name, at, gens[i]);
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ECORRUPT);
        ck_assert(d.flags & SRL_DECISION_DEGRADED);
        struct check_lines l;
        memset(&l, 0, sizeof l);
        ck_assert_int_ge(srl_check(lim, check_lines_collect, &l), 1);
        char want[128];
        snprintf(want, sizeof want, "policy copy %c (generation %u): ", gens[i] & 1 ? 'B' : 'A',
                 gens[i]);
        ck_assert_msg(strncmp(l.last, want, strlen(want)) == 0, "%s", l.last);
        srl_limiter *other;
        ck_assert_int_eq(srl_open_shared(name, NULL, 0, &other), SRL_ECORRUPT);
    }
    shm_poke32(name, at, 0);
    ck_assert_int_eq(admit(lim, "k", 20), 6);
    /* lf_open beside it (layout 8): a value that is none of its three is
     * named by srl_check, and read as "lock-free deciders may exist" (the
     * safe direction: decisions stay exact). */
    shm_poke32(name, at + 4, 0xdead);
    struct check_lines l;
    memset(&l, 0, sizeof l);
    ck_assert_int_eq(srl_check(lim, check_lines_collect, &l), 1);
    ck_assert_str_eq(l.last, "header: lf_open is 57005, not 0, 1 or 2 (it is read as \"lock-free "
                             "deciders may exist\": decisions stay exact, only slower)");
    ck_assert_int_eq(admit(lim, "k", 20), 0);   /* nothing earned back: exact */
    shm_poke32(name, at + 4, 2);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* A slot's generation that is neither the current nor the previous one:
 * named by srl_check, reset by the next touch of any kind, counted. */
START_TEST(a_slot_generation_out_of_range_is_named_then_reset_and_counted)
{
    static const uint32_t gens[] = {2, 5, 0x10000, UINT32_MAX - 1};
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config_of("token_bucket:10/1h", 16, clock);   /* one bucket */
    const char *name = unique_name("live");
    srl_limiter *lim = open_live(name, &cfg, SRL_CREATE | SRL_EXCL);
    change(lim, "token_bucket:12/1h");   /* generation 1: 0 is the previous one */
    struct srl__shm *s = lim->impl;
    for (size_t i = 0; i < sizeof gens / sizeof gens[0]; i++) {
        srl_reset_key(lim, "k", 1);
        ck_assert_int_eq(admit(lim, "k", 12), 12);
        /* The one key's slot: inserts prefer a home slot chosen from the
         * fingerprint, so it is not always slot 0. */
        unsigned si = SRL__SHM_SLOTS, used = 0;
        for (unsigned j = 0; j < SRL__SHM_SLOTS; j++)
            if (srl__shm_bucket(s, 0)->tags[j] != 0)
                si = j, used++;
        ck_assert_uint_eq(used, 1);
        uint32_t g = gens[i];
        memcpy(srl__shm_slot(s, 0, si) + SRL__SLOT_GEN, &g, sizeof g);
        struct check_lines l;
        memset(&l, 0, sizeof l);
        ck_assert_int_eq(srl_check(lim, check_lines_collect, &l), 1);
        char want[160];
        snprintf(want, sizeof want, "bucket 0 slot %u: policy generation %u is neither the "
                                    "current (1) nor a previous one still readable", si, g);
        ck_assert_str_eq(l.last, want);
        srl_stats before, after;
        ck_assert_int_eq(srl_stats_get(lim, &before), 0);
        switch (i % 3) {   /* each kind of touch resets it */
        case 0: ck_assert_int_eq(admit(lim, "k", 20), 12); break;
        case 1: {
            srl_decision d;
            ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), 0);
            ck_assert_uint_eq(d.remaining, 11);
            break;
        }
        default: ck_assert_int_ge(srl_evict_idle(lim), 1); break;   /* fresh = at rest */
        }
        ck_assert_int_eq(srl_stats_get(lim, &after), 0);
        ck_assert_uint_eq(after.reset_slots, before.reset_slots + 1);
        ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    }
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_live");
    TCase *tc = tcase_create("conversion");
    tcase_add_loop_test(tc, a_key_keeps_its_use_across_a_change_by_the_conversion_rule_exactly, 0,
                        (int)(sizeof convs / sizeof convs[0]));
    tcase_add_test(tc, a_change_of_one_tier_converts_its_keys_and_leaves_the_other_tiers_alone);
    tcase_add_test(tc, a_key_untouched_through_two_changes_keeps_its_use);
    suite_add_tcase(s, tc);
    tc = tcase_create("load");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, six_workers_hammering_1000_keys_stay_within_the_bound_while_the_limit_changes);
    tcase_add_test(tc, a_change_races_with_new_keys_and_with_eviction);
    tcase_add_test(tc, changers_racing_with_one_change_exactly_one_is_told_it_changed_it);
    suite_add_tcase(s, tc);
    tc = tcase_create("crash");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_changer_killed_at_any_step_leaves_the_old_policy_or_the_new_never_damage);
    suite_add_tcase(s, tc);
    tc = tcase_create("fork");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, a_change_through_a_handle_shared_across_fork_waits_for_the_other_changer);
    tcase_add_test(tc,
        a_flock_on_the_fd_shared_across_fork_lets_both_changers_in_and_the_test_sees_it);
    suite_add_tcase(s, tc);
    tc = tcase_create("refusals");
    tcase_add_test(tc, what_cannot_change_is_refused_with_its_code_and_a_message_saying_what_to_do);
    tcase_add_test(tc, a_segment_with_a_concurrency_limit_keeps_it);
    tcase_add_test(tc, a_layout_6_segment_is_refused_as_another_layout_version);
    tcase_add_test(tc, srl_change_changes_srl_adopt_takes_and_a_plain_opener_refuses);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile");
    tcase_add_loop_test(tc, garbage_in_the_current_policy_copy_is_refused_even_with_a_valid_checksum,
                        0, 2 * E_N);
    tcase_add_test(tc, garbage_in_the_previous_copy_resets_only_the_keys_still_on_it);
    tcase_add_test(tc, garbage_in_policy_gen_is_refused_never_followed);
    tcase_add_test(tc, a_slot_generation_out_of_range_is_named_then_reset_and_counted);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"live"};
    shm_sweep_leftovers(tags, 1);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
