/*
 * check_trace_reserve.c - srl_reserve (waiting, max_wait > 0) decides on
 * the Redis and tiered stores exactly as the host's core does
 * (srl_limits_state_reserve) on the same trace, token bucket and GCRA, one
 * limit or a compound, burst= and penalty=:
 *   - a differential trace per form: 300 requests mixing reservations
 *     (max_wait below, at and above the wait they need, and the longest,
 *     SRL_WAIT_MAX_NS), plain acquires, peeks and refunds (a refund of a
 *     reservation not yet due walks the token bucket's debt back), with the
 *     time moved by exactly the wait a reservation was given now and then;
 *     each decision equal field by field (allowed, remaining, retry_after,
 *     reset_after, wait, limit, binding, flags), P:stats equal to the
 *     trace's counts, one EVALSHA per call, a reserved state's PTTL its
 *     reset_after; the ticker's epoch 0, 60 days and 10 years back;
 *   - 8 forked processes (test_fork) reserving on one key at a shared fake
 *     time, round after round: the store admits exactly as many as the
 *     core, and gives out exactly the core's waits (as a multiset: which
 *     child gets which is the race's);
 *   - dry run on Redis: would_deny counted for the fleet (in P:stats), so
 *     every handle on the prefix reads the sum of every handle's;
 *   - srl_acquire_wait on the server's own TIME sleeps the wait it named.
 * Stores (loop index): STORE_SHARED (a named segment: the reference the
 * others must equal), STORE_REDIS (srl_open_redis on a redis-server the
 * test starts on a unix socket), STORE_TIERED (srl_open_tiered; its local
 * answers, flagged SRL_DECISION_LOCAL, must deny as the core does with a
 * retry_after no longer than the core's).  The Redis handles take the
 * ticker's time (test hooks srl__redis_fixed_time, srl__tiered_redis).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_testutil.h"
#include "shm_testutil.h"
#include "srl.h"
#include "testutil.h"
#include "trace_stores.h"

#define DAY (86400 * SEC)

/* A form: its text, the step scale (the shortest window), the largest
 * cost, the ticker's first time. */
struct form {
    const char *text;
    uint64_t short_w;
    uint32_t cost_max;
    uint64_t start;
};

static const struct form forms[] = {
    {"token_bucket:10/1s", SEC, 3, 0},
    {"gcra:5/1s,burst=8", SEC, 2, 60 * DAY},
    {"token_bucket:3/10s,burst=6 + gcra:20/1m", 10 * SEC, 3, 3660 * DAY},
    {"token_bucket:100000/1m", 100 * MS, 5000, 3660 * DAY},
    {"gcra:1000003/7d + token_bucket:7/1s", SEC, 4, 60 * DAY},
    /* ban periods: a reservation is refused while banned, and its refusal
     * starts a ban as an acquire's does */
    {"token_bucket:5/1s,penalty=2s", SEC, 2, 0},
    {"gcra:5/1s,penalty=3s + token_bucket:30/1m", SEC, 3, 3660 * DAY},
};
#define N_FORMS (int)(sizeof forms / sizeof forms[0])

/* The max_wait of step i: 0 (an acquire), the longest, or one near the
 * wait the last refusal or reservation named (below, at, above it). */
static uint64_t pick_max_wait(uint64_t seed, const srl_decision *last, uint64_t short_w)
{
    uint64_t hint = last->allowed ? last->wait_ns : last->retry_after_ns;
    switch ((seed >> 33) % 8) {
    case 0:
        return 0;
    case 1:
        return SRL_WAIT_MAX_NS;
    case 2:
        return hint > 1 ? hint - 1 : 1;
    case 3:
        return hint > 0 ? hint : 1;
    case 4:
        return hint + 1;
    default:
        return 1 + (seed >> 8) % (2 * short_w);
    }
}

/* _i: store * N_FORMS + form. */
START_TEST(reserve_trace_equals_the_core)
{
    int kind = _i / N_FORMS;
    const struct form *f = &forms[_i % N_FORMS];
    srl_limits l = trace_parse(f->text);
    fake_clock *clk = fake_clock_shared(f->start);
    char prefix[16];
    snprintf(prefix, sizeof prefix, "rsv%d", _i);
    struct trace_store st = trace_store_open(kind, &l, clk, "trsv", prefix);
    size_t size = srl_limits_state_size(&l);
    uint64_t *state = calloc(1, size), *fresh = calloc(1, size);
    ck_assert_int_eq(srl_limits_state_init(&l, state, clk->now), 0);
    uint32_t cap = trace_min_capacity(&l), cost_max = f->cost_max < cap ? f->cost_max : cap;
    srl_decision d = {0}, e;
    uint64_t seed = 4242 + (uint64_t)(_i % N_FORMS);   /* each store the same trace */
    unsigned allowed = 0, denied = 0, waited = 0, refused = 0, debts = 0, local = 0, ttls = 0;
    unsigned calls = 0;   /* srl_peek, srl_reserve, srl_refund: one EVALSHA each on Redis */
    char rkey[32];
    snprintf(rkey, sizeof rkey, "rsv%d:k:k", _i);
    for (int i = 0; i < 300; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t step = (seed >> 59) % 8 == 0  ? (seed >> 8) % (4 * f->short_w)
                        : (seed >> 60) % 4 == 0 ? (seed >> 8) % f->short_w
                                                : (seed >> 8) % (f->short_w / 20);
        if (i > 0 && (seed >> 40) % 3 == 0)
            step = d.allowed ? d.wait_ns : d.retry_after_ns;   /* exactly when it said */
        clk->now += step;
        uint32_t cost = 1 + (uint32_t)((seed >> 24) % cost_max);
        if ((seed >> 45) % 4 == 0) {
            ck_assert_int_eq(srl_limits_state_peek(&l, state, clk->now, cost, &e), 0);
            srl_decision p;
            int prc = srl_peek(st.lim, "k", 1, cost, &p);
            calls++;
            if (prc == SRL_ENOENT) {   /* at rest and dropped: a fresh key's */
                ck_assert_int_eq(srl_limits_state_init(&l, fresh, clk->now), 0);
                ck_assert_int_eq(srl_limits_state_peek(&l, fresh, clk->now, cost, &p), 0);
            } else {
                ck_assert_int_eq(prc, 0);
            }
            trace_same(kind, &p, &e, i, "peek");
        }
        uint64_t mw = pick_max_wait(seed, &d, f->short_w);
        uint64_t t0 = srl_monotonic_ns(NULL);
        ck_assert_int_eq(srl_reserve(st.lim, "k", 1, cost, mw, &d), 0);
        calls++;
        ck_assert_int_eq(srl_limits_state_reserve(&l, state, clk->now, cost, mw, &e), 0);
        trace_same(kind, &d, &e, i, "reserve");
        if (d.allowed && d.wait_ns > mw)
            ck_abort_msg("step %d: waits %llu > max_wait %llu", i,
                         (unsigned long long)d.wait_ns, (unsigned long long)mw);
        allowed += d.allowed;
        denied += !d.allowed;
        waited += d.allowed && d.wait_ns > 0;
        refused += !d.allowed && mw > 0;
        local += (d.flags & SRL_DECISION_LOCAL) != 0;
        long long want = (long long)((d.reset_after_ns + MS - 1) / MS);
        if (kind != STORE_SHARED && d.allowed && d.wait_ns > 0 && want > 100) {
            /* The state lives until it comes to rest after the wait: its
             * reset_after, less the server's real time since the SET, which
             * is at most this step's (+ 2 ms of the server's rounding). */
            long long t = trace_pttl(st.sock, rkey);
            long long took = (long long)((srl_monotonic_ns(NULL) - t0) / MS) + 2;
            ck_assert_msg(t <= want && t >= want - took,
                          "step %d: PTTL %lld ms, reset_after %lld ms, %lld ms since", i, t,
                          want, took);
            ttls++;
        }
        if (d.allowed && (seed >> 30) % 4 == 0) {
            uint32_t back = 1 + (uint32_t)((seed >> 20) % cost_max);
            debts += d.wait_ns > 0;
            ck_assert_int_eq(srl_refund(st.lim, "k", 1, back), 0);
            calls++;
            ck_assert_int_eq(srl_limits_state_refund(&l, state, clk->now, back), 0);
        }
    }
    /* The trace is worth something: admissions now and later, refusals of
     * reservations, refunds of reservations not yet due. */
    ck_assert_uint_gt(allowed, 30);
    ck_assert_uint_gt(waited, 10);
    ck_assert_uint_gt(refused, 5);
    ck_assert_uint_gt(debts, 3);
    if (kind != STORE_SHARED)
        ck_assert_uint_gt(ttls, 3);
    if (kind == STORE_REDIS)   /* one round trip per decision, a reservation's too */
        ck_assert_int_eq(redis_command_calls(st.sock, "evalsha"), calls);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(st.lim, &s), 0);
    ck_assert_uint_eq(s.allowed, allowed);
    ck_assert_uint_eq(s.denied + s.local_denied, denied);
    ck_assert_uint_eq(s.local_denied, local);
    free(state);
    free(fresh);
    trace_store_close(&st);
}
END_TEST

/* The flood's forms and max_wait: nothing refills between a round's
 * requests (one fake time per round), so each admission waits longer than
 * the one before, until the wait passes max_wait. */
static const struct {
    const char *text;
    uint64_t max_wait;
} flood_forms[] = {
    {"token_bucket:50/1s", SEC},
    {"gcra:20/1s,burst=10 + token_bucket:100/1m", 500 * MS},
    /* each round's first refusal bans the key for 1.5 s: the next round
     * admits nothing, the one after again */
    {"token_bucket:40/1s,penalty=1500ms", 200 * MS},
};
#define N_FLOOD (int)(sizeof flood_forms / sizeof flood_forms[0])
#define ROUNDS 4
#define KIDS 8
#define WAITS_MAX 512   /* a round's admissions, at most */

/* What the children report: every wait they were given, and a failure. */
struct flood_out {
    uint64_t wait[WAITS_MAX];
    unsigned n;      /* atomic: the next free wait[] */
    unsigned failed; /* a call that did not return 0, or too many admissions */
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* KIDS forked processes, started together by a pipe's EOF, each reserving
 * cost 1 on key until its first refusal; their waits into *out. */
static void reserve_flood(srl_limiter *lim, uint64_t max_wait, struct flood_out *out)
{
    memset(out, 0, sizeof *out);
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t kids[KIDS];
    for (int i = 0; i < KIDS; i++) {
        kids[i] = test_fork();
        if (kids[i] == 0) {
            close(go[1]);
            char c;
            (void)!read(go[0], &c, 1);
            srl_decision d;
            int rc;
            while ((rc = srl_reserve(lim, "hot", 3, 1, max_wait, &d)) == 0 && d.allowed) {
                unsigned at = __atomic_fetch_add(&out->n, 1, __ATOMIC_RELAXED);
                if (at >= WAITS_MAX) {
                    __atomic_store_n(&out->failed, 1, __ATOMIC_RELAXED);
                    break;
                }
                out->wait[at] = d.wait_ns;
            }
            if (rc != 0)
                __atomic_store_n(&out->failed, 1, __ATOMIC_RELAXED);
            _exit(0);
        }
    }
    close(go[0]);
    close(go[1]);
    for (int i = 0; i < KIDS; i++) {
        int status;
        ck_assert_int_eq(waitpid(kids[i], &status, 0), kids[i]);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

/* _i: store * N_FLOOD + form. */
START_TEST(eight_processes_reserve_what_the_core_reserves)
{
    int kind = _i / N_FLOOD;
    srl_limits l = trace_parse(flood_forms[_i % N_FLOOD].text);
    uint64_t mw = flood_forms[_i % N_FLOOD].max_wait;
    fake_clock *clk = fake_clock_shared(5 * SEC);
    char prefix[16];
    snprintf(prefix, sizeof prefix, "rsv%d", 100 + _i);
    struct trace_store st = trace_store_open(kind, &l, clk, "trsv", prefix);
    uint64_t *state = calloc(1, srl_limits_state_size(&l));
    ck_assert_int_eq(srl_limits_state_init(&l, state, clk->now), 0);
    struct flood_out *out = shared_zeroed(sizeof *out);
    unsigned total = 0, waiting = 0;
    for (int round = 0; round < ROUNDS; round++) {
        /* The core: reservations until the first refusal; the other seven
         * refusals change nothing (a ban is not extended by them). */
        uint64_t want[WAITS_MAX];
        unsigned n = 0;
        srl_decision e;
        while (srl_limits_state_reserve(&l, state, clk->now, 1, mw, &e) == 0 && e.allowed) {
            ck_assert_uint_lt(n, WAITS_MAX);
            want[n++] = e.wait_ns;
        }
        for (int k = 1; k < KIDS; k++) {
            ck_assert_int_eq(srl_limits_state_reserve(&l, state, clk->now, 1, mw, &e), 0);
            ck_assert(!e.allowed);
        }
        reserve_flood(st.lim, mw, out);
        ck_assert_uint_eq(out->failed, 0);
        ck_assert_msg(out->n == n, "round %d: the store admitted %u, the core %u", round, out->n,
                      n);
        qsort(out->wait, n, sizeof out->wait[0], cmp_u64);
        for (unsigned j = 0; j < n; j++)
            ck_assert_msg(out->wait[j] == want[j], "round %d: wait %u is %llu, the core's %llu",
                          round, j, (unsigned long long)out->wait[j],
                          (unsigned long long)want[j]);
        total += n;
        waiting += n > 0 && want[n - 1] > 0;
        clk->now += SEC;
    }
    ck_assert_uint_gt(total, 0);
    ck_assert_uint_gt(waiting, 0);   /* some admissions were reservations */
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(st.lim, &s), 0);
    ck_assert_uint_eq(s.allowed, total);
    ck_assert_uint_eq(s.denied + s.local_denied, KIDS * ROUNDS);
    free(state);
    trace_store_close(&st);
}
END_TEST

/* Dry run on Redis: two handles (two hosts) and a fronted one on one
 * prefix; each handle's stats count every handle's would-be denials,
 * reservations' refusals too. */
START_TEST(dry_run_counts_would_deny_for_the_fleet)
{
    struct trace_store st = {0};
    trace_server_start(&st, "trsv");
    char uri[160];
    snprintf(uri, sizeof uri, "unix://%s?prefix=dry", st.sock);
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("token_bucket:3/1h", &cfg.policy), 0);
    cfg.flags = SRL_CONFIG_DRY_RUN;
    srl_limiter *a, *b, *c;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &a), 0);
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &b), 0);
    strcpy(st.name, unique_name("trsv"));
    ck_assert_int_eq(srl_open_tiered(st.name, uri, &cfg, SRL_CREATE | SRL_EXCL, &c), 0);
    srl_decision d;
    unsigned flagged = 0;
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(srl_acquire(a, "k", 1, 1, &d), 0);
        ck_assert(d.allowed);
        flagged += (d.flags & SRL_DECISION_WOULD_DENY) != 0;
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(srl_reserve(b, "k", 1, 1, SEC, &d), 0);   /* 20 min to wait */
        ck_assert(d.allowed && d.wait_ns == 0);
        flagged += (d.flags & SRL_DECISION_WOULD_DENY) != 0;
    }
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(srl_acquire(c, "k", 1, 1, &d), 0);
        ck_assert(d.allowed && d.flags == SRL_DECISION_WOULD_DENY);   /* Redis's, not the host's */
        flagged++;
    }
    ck_assert_uint_eq(flagged, 8);
    srl_stats s;
    srl_limiter *h[] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(srl_stats_get(h[i], &s), 0);
        ck_assert_uint_eq(s.allowed, 3);
        ck_assert_uint_eq(s.denied, 8);
        ck_assert_uint_eq(s.would_deny, 8);
    }
    srl_close(a);
    srl_close(b);
    srl_close(c);
    trace_store_close(&st);
}
END_TEST

/* srl_acquire_wait on the server's TIME (no fixed time): a key drained,
 * the wait Redis names is slept through (CLOCK_MONOTONIC: never short), a
 * wait beyond max_wait refused at once.  _i: STORE_REDIS, STORE_TIERED. */
START_TEST(acquire_wait_sleeps_the_wait_redis_names)
{
    int kind = _i == 0 ? STORE_REDIS : STORE_TIERED;
    struct trace_store st = {.kind = kind};
    trace_server_start(&st, "trsv");
    char uri[160];
    snprintf(uri, sizeof uri, "unix://%s?prefix=aw", st.sock);
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("gcra:10/1s", &cfg.policy), 0);   /* T = 100 ms */
    if (kind == STORE_REDIS) {
        ck_assert_int_eq(srl_open_redis(uri, &cfg, &st.lim), 0);
    } else {
        strcpy(st.name, unique_name("trsv"));
        ck_assert_int_eq(srl_open_tiered(st.name, uri, &cfg, SRL_CREATE | SRL_EXCL, &st.lim), 0);
    }
    srl_decision d;
    int n = 0;
    while (srl_acquire(st.lim, "k", 1, 1, &d) == 0 && d.allowed && n < 10000)
        n++;
    ck_assert(!d.allowed && d.retry_after_ns > 0 && d.retry_after_ns <= 100 * MS);
    ck_assert_int_eq(srl_acquire_wait(st.lim, "k", 1, 1, 1, &d), 0);   /* 1 ns: too short */
    ck_assert(!d.allowed && d.wait_ns == 0);
    uint64_t t0 = srl_monotonic_ns(NULL);
    ck_assert_int_eq(srl_acquire_wait(st.lim, "k", 1, 1, SEC, &d), 0);
    uint64_t slept = srl_monotonic_ns(NULL) - t0;
    ck_assert(d.allowed && d.remaining == 0 && d.wait_ns > 0 && d.wait_ns <= 200 * MS);
    ck_assert_msg(slept >= d.wait_ns, "slept %llu ns of a %llu ns wait",
                  (unsigned long long)slept, (unsigned long long)d.wait_ns);
    trace_store_close(&st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace_reserve");
    TCase *tc = tcase_create("reserve");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, reserve_trace_equals_the_core, 0, STORES * N_FORMS);
    tcase_add_loop_test(tc, eight_processes_reserve_what_the_core_reserves, 0, STORES * N_FLOOD);
    tcase_add_test(tc, dry_run_counts_would_deny_for_the_fleet);
    tcase_add_loop_test(tc, acquire_wait_sleeps_the_wait_redis_names, 0, 2);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"trsv"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
