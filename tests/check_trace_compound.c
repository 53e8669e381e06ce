/*
 * check_trace_compound.c - compound policies (several limits on a key, all
 * or nothing) decide on every store exactly as the host's core does
 * (srl_limits_state_*) on the same trace:
 *   - a differential trace per form: 300 requests of costs 1..a few, with
 *     bursts, long gaps and retries landing exactly where a denial said,
 *     peeks and refunds, each decision equal field by field (allowed,
 *     remaining, retry_after, reset_after, limit, binding, flags), P:stats
 *     equal to the trace's counts; ban periods too ("penalty=": a ban is
 *     not extended by the requests it refuses);
 *   - 8 forked processes (test_fork) flooding one key at a shared fake
 *     time, round after round with the time moved between rounds: the
 *     stores admit exactly what the core admits (a limit that takes a
 *     permit for a request another limit denies admits fewer).
 * Stores (loop index): STORE_SHARED (a named segment), STORE_REDIS
 * (srl_open_redis on a redis-server the test starts on a unix socket),
 * STORE_TIERED (srl_open_tiered: Redis fronted by a host segment; its
 * local answers, flagged SRL_DECISION_LOCAL, must deny as the core does
 * with the same retry_after).  The Redis handles take the ticker's time
 * (test hooks srl__redis_fixed_time, srl__tiered_redis), so the core and
 * the server see the same clock.
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

/* A compound form: its text, the trace's shortest and longest window (for
 * the steps), the largest cost, the ticker's first time (an epoch that far
 * back: 0, 60 days, 10 years). */
struct form {
    const char *text;
    uint64_t short_w, long_w;
    uint32_t cost_max;
    uint64_t start;
};

static const struct form forms[] = {
    {"token_bucket:10/1s + token_bucket:60/1h", SEC, 3600 * SEC, 3, 0},
    {"gcra:5/1s + sliding_counter:20/1m", SEC, 60 * SEC, 2, 60 * DAY},
    {"sliding_log:7/1m + token_bucket:3/10s,burst=6", 10 * SEC, 60 * SEC, 3, 3660 * DAY},
    {"sliding_counter:9/10s + gcra:4/3s,burst=8 + sliding_log:30/5m", 3 * SEC, 300 * SEC, 2, 0},
    {"token_bucket:200/1m + gcra:1000003/7d + sliding_counter:500/1h + sliding_log:300/1h",
     60 * SEC, 7 * DAY, 100, 3660 * DAY},
    /* ban periods: a single limit's (decided by the compound script) and
     * a compound's, each limit its own */
    {"token_bucket:5/1s,penalty=2s", SEC, 10 * SEC, 2, 60 * DAY},
    {"gcra:5/1s,penalty=2s + sliding_log:30/1m,penalty=20s + sliding_counter:50/5m", SEC,
     300 * SEC, 3, 3660 * DAY},
};
#define N_FORMS (int)(sizeof forms / sizeof forms[0])

/* _i: store * N_FORMS + form. */
START_TEST(compound_trace_equals_the_core)
{
    int kind = _i / N_FORMS;
    const struct form *f = &forms[_i % N_FORMS];
    srl_limits l = trace_parse(f->text);
    fake_clock *clk = fake_clock_shared(f->start);
    char prefix[16];
    snprintf(prefix, sizeof prefix, "cmp%d", _i);
    struct trace_store st = trace_store_open(kind, &l, clk, "tcmp", prefix);
    size_t size = srl_limits_state_size(&l);
    uint64_t *state = calloc(1, size), *fresh = calloc(1, size);
    ck_assert_int_eq(srl_limits_state_init(&l, state, clk->now), 0);
    uint32_t cap = trace_min_capacity(&l), cost_max = f->cost_max < cap ? f->cost_max : cap;
    srl_decision d, e;
    ck_assert_int_eq(srl_peek(st.lim, "k", 1, 1, &d), SRL_ENOENT);
    uint64_t seed = 777 + (uint64_t)(_i % N_FORMS);   /* each store the same trace */
    unsigned allowed = 0, denied = 0, refunds = 0, bindings = 0;
    for (int i = 0; i < 300; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t step = (seed >> 59) % 16 == 0  ? (seed >> 8) % (f->long_w / 4)
                        : (seed >> 60) % 4 == 0 ? (seed >> 8) % f->short_w
                                                : (seed >> 8) % (f->short_w / 20);
        if (i > 0 && !d.allowed && (seed >> 40) % 2 == 0)
            step = d.retry_after_ns;   /* exactly where a denial said to retry */
        clk->now += step;
        uint32_t cost = 1 + (uint32_t)((seed >> 24) % cost_max);
        if (i > 0) {
            ck_assert_int_eq(srl_limits_state_peek(&l, state, clk->now, cost, &e), 0);
            int prc = srl_peek(st.lim, "k", 1, cost, &d);
            if (prc == SRL_ENOENT) {
                /* at rest and dropped: the core must decide as a fresh key */
                ck_assert_int_eq(srl_limits_state_init(&l, fresh, clk->now), 0);
                ck_assert_int_eq(srl_limits_state_peek(&l, fresh, clk->now, cost, &d), 0);
            } else {
                ck_assert_int_eq(prc, 0);
            }
            trace_same(kind, &d, &e, i, "");
        }
        ck_assert_int_eq(srl_acquire(st.lim, "k", 1, cost, &d), 0);
        ck_assert_int_eq(srl_limits_state_acquire(&l, state, clk->now, cost, &e), 0);
        trace_same(kind, &d, &e, i, "");
        allowed += d.allowed;
        denied += !d.allowed;
        bindings |= 1u << e.binding;
        if (d.allowed && (seed >> 30) % 5 == 0) {
            uint32_t back = 1 + (uint32_t)((seed >> 20) % cost_max);
            ck_assert_int_eq(srl_refund(st.lim, "k", 1, back), 0);
            ck_assert_int_eq(srl_limits_state_refund(&l, state, clk->now, back), 0);
            refunds++;
        }
    }
    /* The trace is worth something: both outcomes, refunds, and more than
     * one limit binding. */
    ck_assert_uint_gt(allowed, 20);
    ck_assert_uint_gt(denied, 5);
    ck_assert_uint_gt(refunds, 5);
    if (l.count > 1)
        ck_assert_uint_ne(bindings & (bindings - 1), 0);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(st.lim, &s), 0);
    ck_assert_uint_eq(s.allowed, allowed);
    ck_assert_uint_eq(s.denied + s.local_denied, denied);
    if (kind != STORE_SHARED) {
        /* Every limit at rest, then one admission: the key's entry lives
         * until its last limit comes to rest (the decision's reset_after,
         * the longest), not its first. */
        clk->now += 2 * f->long_w;
        ck_assert_int_eq(srl_acquire(st.lim, "k", 1, 1, &d), 0);
        ck_assert(d.allowed);
        long long want = (long long)((d.reset_after_ns + MS - 1) / MS);
        char key[32];
        snprintf(key, sizeof key, "cmp%d:k:k", _i);
        long long t = trace_pttl(st.sock, key);
        /* (want is a minute or more in every form: half of it is no race
         * with the server's clock, and an entry kept for the first limit's
         * rest alone lives well under that.) */
        ck_assert_msg(t <= want && t > want / 2, "PTTL %lld ms, reset_after %lld ms", t, want);
    }
    free(state);
    free(fresh);
    trace_store_close(&st);
}
END_TEST

/* The flood's forms: nothing refills between a round's requests (one fake
 * time per round), and the limits bind in turn as rounds go by. */
static const char *const flood_forms[] = {
    "token_bucket:100/1s + token_bucket:1000/1h",
    "gcra:50/1s + sliding_log:300/1h + sliding_counter:400/1h",
    /* banned for 2.5 s by the first round's denials: rounds 1 and 2 admit
     * nothing (their refusals do not extend the ban), round 3 again */
    "token_bucket:100/1s,penalty=2500ms + token_bucket:1000/1h",
};
#define N_FLOOD (int)(sizeof flood_forms / sizeof flood_forms[0])
#define ROUNDS 6

/* _i: store * N_FLOOD + form. */
START_TEST(eight_processes_admit_what_the_core_admits)
{
    int kind = _i / N_FLOOD;
    srl_limits l = trace_parse(flood_forms[_i % N_FLOOD]);
    fake_clock *clk = fake_clock_shared(5 * SEC);
    char prefix[16];
    snprintf(prefix, sizeof prefix, "cmp%d", 100 + _i);
    struct trace_store st = trace_store_open(kind, &l, clk, "tcmp", prefix);
    uint64_t *state = calloc(1, srl_limits_state_size(&l));
    ck_assert_int_eq(srl_limits_state_init(&l, state, clk->now), 0);
    unsigned total = 0, want_total = 0;
    for (int round = 0; round < ROUNDS; round++) {
        /* The core: admissions until the first denial; the other seven
         * denials change nothing (all or nothing). */
        srl_decision e;
        unsigned want = 0;
        while (srl_limits_state_acquire(&l, state, clk->now, 1, &e) == 0 && e.allowed)
            want++;
        unsigned got = redis_fork_flood(st.lim, "hot");
        ck_assert_msg(got == want, "round %d: the store admitted %u, the core %u", round, got,
                      want);
        total += got;
        want_total += want;
        clk->now += SEC;   /* the short limits refill, the long ones barely */
    }
    ck_assert_uint_gt(want_total, 0);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(st.lim, &s), 0);
    ck_assert_uint_eq(s.allowed, total);
    ck_assert_uint_eq(s.denied + s.local_denied, 8 * ROUNDS);
    free(state);
    trace_store_close(&st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace_compound");
    TCase *tc = tcase_create("compound");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, compound_trace_equals_the_core, 0, STORES * N_FORMS);
    tcase_add_loop_test(tc, eight_processes_admit_what_the_core_admits, 0, STORES * N_FLOOD);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"tcmp"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
