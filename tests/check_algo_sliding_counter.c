/*
 * check_algo_sliding_counter.c - the sliding window counter, through the pure core.
 *
 * A fixed 10/min trace, decision by decision, including the edge: denied at 69 s with
 * a wait of exactly 6 s + 1 ns (at exactly 75 s the estimate is 10, not
 * below), allowed at 75.001 s.  Then boundary tables: waits that reach into
 * the next window, cost > 1, cost == permits, errors and denials that
 * change nothing, years idle, a ticker going backwards, the largest permits
 * and window, exact waits found by search, at-rest and validity.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "srl.h"
#include "testutil.h"
#include "algotest.h"

/* The documented layout (algo_sliding_counter.c). */
struct sc_state {
    uint64_t window_start;
    uint32_t prev;
    uint32_t curr;
};

static const srl_policy ten_per_min = {.algorithm = SRL_SLIDING_COUNTER, .permits = 10, .window_ns = 60 * SEC};

START_TEST(sliding_counter_follows_the_trace_at_ten_per_minute)
{
    struct sc_state s;
    ck_assert_uint_eq(srl_state_size(&ten_per_min), sizeof s);
    srl_state_init(&ten_per_min, &s, 0);
    for (uint32_t i = 0; i < 8; i++)
        ck_allowed(acq(&ten_per_min, &s, 50 * SEC, 1), 9 - i);
    ck_allowed(acq(&ten_per_min, &s, 69 * SEC, 1), 3);   /* estimate 6.8 */
    ck_allowed(acq(&ten_per_min, &s, 69 * SEC, 1), 2);   /* 7.8 */
    ck_allowed(acq(&ten_per_min, &s, 69 * SEC, 1), 1);   /* 8.8 */
    ck_allowed(acq(&ten_per_min, &s, 69 * SEC, 1), 0);   /* 9.8 */
    srl_decision d = acq(&ten_per_min, &s, 69 * SEC, 1); /* 10.8 */
    ck_denied(d, 6 * SEC + 1);
    ck_assert_uint_eq(d.retry_after_ns, 6000000001ull);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_int_eq(peek(&ten_per_min, &s, 75 * SEC, 1).allowed, 0);      /* exactly 10 */
    ck_assert_int_eq(peek(&ten_per_min, &s, 75 * SEC + 1, 1).allowed, 1);  /* a hair under */
    ck_allowed(acq(&ten_per_min, &s, 75 * SEC + 1 * MS, 1), 0);
    ck_assert_uint_eq(s.window_start, 60 * SEC);
    ck_assert_uint_eq(s.prev, 8);
    ck_assert_uint_eq(s.curr, 5);
}
END_TEST

START_TEST(sliding_counter_reports_exact_remaining_and_reset_after)
{
    struct sc_state s;
    srl_state_init(&ten_per_min, &s, 0);
    srl_decision d = acq(&ten_per_min, &s, 45 * SEC, 1);
    ck_assert_uint_eq(d.reset_after_ns, 75 * SEC);     /* both counts 0 at 120 s */
    acq(&ten_per_min, &s, 45 * SEC, 9);
    /* at 90 s: estimate 10 * 30/60 = 5; a request of 1 leaves ceil(10-5-1) = 4 */
    d = peek(&ten_per_min, &s, 90 * SEC, 1);
    ck_allowed(d, 4);
    ck_assert_uint_eq(d.reset_after_ns, 90 * SEC);
    /* a denied request at 90 s: 5 may still pass (cost 1 each), cost 6 may not */
    d = peek(&ten_per_min, &s, 90 * SEC, 6);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.remaining, 5);
    ck_assert_uint_eq(d.reset_after_ns, 30 * SEC);     /* only prev is left: gone at 120 s */
    /* 10 * (60 - e)/60 + 5 < 10  <=>  e > 30 s */
    ck_assert_uint_eq(d.retry_after_ns, 1);
    ck_allowed(peek(&ten_per_min, &s, 90 * SEC + 1, 6), 0);
}
END_TEST

START_TEST(sliding_counter_full_current_window_waits_into_the_next_one)
{
    struct sc_state s;
    srl_state_init(&ten_per_min, &s, 0);
    acq(&ten_per_min, &s, 10 * SEC, 10);
    /* at 60 s prev = 10 at full weight: 10, not below; one ns later it is */
    ck_denied(acq(&ten_per_min, &s, 10 * SEC, 1), 50 * SEC + 1);
    ck_assert_int_eq(peek(&ten_per_min, &s, 60 * SEC, 1).allowed, 0);
    ck_assert_int_eq(peek(&ten_per_min, &s, 60 * SEC + 1, 1).allowed, 1);
    /* cost 10 needs 10 * (W - e)/W < 1: e > 54 s - 0.1 ns, i.e. e >= 54 s + 1 ns */
    uint64_t m = (60 * SEC - 1) / 10;
    ck_denied(acq(&ten_per_min, &s, 10 * SEC, 10), 50 * SEC + (60 * SEC - m));
    ck_assert_uint_eq(60 * SEC - m, 54 * SEC + 1);
    ck_assert_int_eq(peek(&ten_per_min, &s, 114 * SEC, 10).allowed, 0);
    ck_assert_int_eq(peek(&ten_per_min, &s, 114 * SEC + 1, 10).allowed, 1);
}
END_TEST

START_TEST(sliding_counter_cost_equal_to_permits_and_two_windows_later_everything_is_gone)
{
    srl_policy p = {.algorithm = SRL_SLIDING_COUNTER, .permits = 4, .window_ns = 1};   /* a 1 ns window: the coarsest case */
    struct sc_state s;
    srl_state_init(&p, &s, 0);
    ck_allowed(acq(&p, &s, 0, 4), 0);
    /* at 1 ns prev = 4 at weight 1, so nothing passes until 2 ns */
    ck_denied(acq(&p, &s, 0, 4), 2);
    ck_denied(acq(&p, &s, 0, 1), 2);
    ck_assert_int_eq(peek(&p, &s, 1, 1).allowed, 0);
    ck_allowed(acq(&p, &s, 2, 4), 0);
    ck_assert_uint_eq(s.window_start, 2);
    ck_assert_uint_eq(s.prev, 0);
}
END_TEST

START_TEST(sliding_counter_cost_zero_or_above_permits_is_ecost_and_writes_nothing)
{
    struct sc_state s, before;
    srl_state_init(&ten_per_min, &s, 0);
    acq(&ten_per_min, &s, 0, 3);
    before = s;
    srl_decision d, dbefore;
    memset(&d, 0x21, sizeof d);
    dbefore = d;
    ck_assert_int_eq(srl_state_acquire(&ten_per_min, &s, 70 * SEC, 0, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_acquire(&ten_per_min, &s, 70 * SEC, 11, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_peek(&ten_per_min, &s, 70 * SEC, 11, &d), SRL_ECOST);
    ck_assert_mem_eq(&s, &before, sizeof s);
    ck_assert_mem_eq(&d, &dbefore, sizeof d);
}
END_TEST

START_TEST(sliding_counter_denied_request_and_peek_leave_state_bytes_identical)
{
    struct sc_state s, before;
    srl_state_init(&ten_per_min, &s, 0);
    acq(&ten_per_min, &s, 50 * SEC, 8);
    acq(&ten_per_min, &s, 69 * SEC, 4);  /* rolled: window 60 s, prev 8, curr 4 */
    before = s;
    for (uint64_t t = 69 * SEC; t <= 75 * SEC; t += 100 * MS)
        ck_assert_int_eq(acq(&ten_per_min, &s, t, 1).allowed, 0);
    /* a peek that would roll two windows forward writes nothing */
    ck_assert_int_eq(peek(&ten_per_min, &s, 500 * SEC, 10).allowed, 1);
    ck_assert_mem_eq(&s, &before, sizeof s);
}
END_TEST

START_TEST(sliding_counter_idle_for_years_forgets_both_windows)
{
    struct sc_state s;
    srl_state_init(&ten_per_min, &s, 0);
    acq(&ten_per_min, &s, 0, 10);
    uint64_t later = (1ull << 62) + 777;
    ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &s, later), 1);
    ck_allowed(acq(&ten_per_min, &s, later, 10), 0);
    ck_assert_uint_eq(s.window_start, later - later % (60 * SEC));
    ck_assert_uint_eq(s.prev, 0);
    ck_assert_uint_eq(s.curr, 10);
    ck_assert_int_eq(acq(&ten_per_min, &s, later, 1).allowed, 0);
    ck_assert_int_eq(srl_state_valid(&ten_per_min, &s, later), 1);
}
END_TEST

START_TEST(sliding_counter_clock_going_backwards_counts_as_no_time)
{
    srl_policy p = {.algorithm = SRL_SLIDING_COUNTER, .permits = 2, .window_ns = 60 * SEC};
    struct sc_state s;
    srl_state_init(&p, &s, 0);
    acq(&p, &s, 70 * SEC, 1);   /* window 60 s, curr 1 */
    ck_assert_uint_eq(s.window_start, 60 * SEC);
    /* at 30 s the state is read as at 60 s (zero elapsed), and stays in its window */
    srl_decision d = acq(&p, &s, 30 * SEC, 1);
    ck_allowed(d, 0);
    ck_assert_uint_eq(d.reset_after_ns, 30 * SEC + 120 * SEC);
    ck_assert_uint_eq(s.window_start, 60 * SEC);
    ck_assert_uint_eq(s.curr, 2);
    /* full window: prev' = 2 at full weight at 120 s, passes 1 ns later */
    ck_denied(acq(&p, &s, 30 * SEC, 1), 90 * SEC + 1);
    ck_assert_int_eq(peek(&p, &s, 120 * SEC, 1).allowed, 0);
    ck_assert_int_eq(peek(&p, &s, 120 * SEC + 1, 1).allowed, 1);
    ck_assert_int_eq(srl_state_at_rest(&p, &s, 30 * SEC), 0);
}
END_TEST

START_TEST(sliding_counter_largest_permits_and_window_do_not_overflow)
{
    static const uint64_t windows[] = {365ull * 86400 * SEC, SRL_WINDOW_MAX_NS};
    for (unsigned w = 0; w < 2; w++) {
        uint64_t W = windows[w];
        srl_policy p = {.algorithm = SRL_SLIDING_COUNTER, .permits = UINT32_MAX, .window_ns = W};
        struct sc_state s;
        srl_state_init(&p, &s, 0);
        uint32_t chunk = 1u << 31;
        ck_allowed(acq(&p, &s, 0, chunk), UINT32_MAX - chunk);
        ck_allowed(acq(&p, &s, 0, UINT32_MAX - chunk), 0);
        ck_assert_uint_eq(s.curr, UINT32_MAX);
        /* cost 1, next window: (2^32-1) * (W - e) < (2^32-1) * W  <=>  e >= 1 ns */
        ck_denied(acq(&p, &s, 0, 1), W + 1);
        ck_assert_int_eq(peek(&p, &s, W, 1).allowed, 0);
        ck_assert_int_eq(peek(&p, &s, W + 1, 1).allowed, 1);
        /* cost = permits: (2^32-1) * (W - e) < W  <=>  e >= W - floor((W-1)/(2^32-1)) */
        uint64_t retry = W + (W - (W - 1) / UINT32_MAX);
        ck_denied(peek(&p, &s, 0, UINT32_MAX), retry);
        ck_assert_int_eq(peek(&p, &s, retry - 1, UINT32_MAX).allowed, 0);
        ck_assert_int_eq(peek(&p, &s, retry, UINT32_MAX).allowed, 1);
        ck_allowed(peek(&p, &s, 2 * W, UINT32_MAX), 0);
    }
}
END_TEST

START_TEST(sliding_counter_retry_after_is_the_exact_first_passing_time)
{
    static const srl_policy ps[] = {
        {.algorithm = SRL_SLIDING_COUNTER, .permits = 10, .window_ns = 60 * SEC}, {.algorithm = SRL_SLIDING_COUNTER, .permits = 7, .window_ns = 1000003},
        {.algorithm = SRL_SLIDING_COUNTER, .permits = 1, .window_ns = 1}, {.algorithm = SRL_SLIDING_COUNTER, .permits = 1000, .window_ns = 999},
        {.algorithm = SRL_SLIDING_COUNTER, .permits = 3, .window_ns = 7}, {.algorithm = SRL_SLIDING_COUNTER, .permits = UINT32_MAX, .window_ns = SRL_WINDOW_MAX_NS},
    };
    uint64_t seed = 88172645463325252ull;
    unsigned denials = 0, next_window = 0;
    for (unsigned k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        const srl_policy *p = &ps[k];
        struct sc_state s;
        uint64_t now = 12345;
        srl_state_init(p, &s, now);
        for (int i = 0; i < 4000; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            uint32_t cost = 1 + (uint32_t)(seed % (p->permits < 8 ? p->permits : p->permits / 4));
            if (seed & 1)
                now += (seed >> 8) % (p->window_ns / 4 + 1) % (1ull << 50);
            /* one request in eight comes from a ticker that lags behind */
            uint64_t back = (seed >> 24) % 8 == 0 ? (seed >> 3) % (p->window_ns + 1) : 0;
            uint64_t t = now > back ? now - back : 0;
            srl_decision d = acq(p, &s, t, cost);
            ck_assert_int_eq(srl_state_valid(p, &s, now), 1);
            if (d.allowed) {
                ck_assert_int_eq(srl_state_at_rest(p, &s, t + d.reset_after_ns), 1);
                ck_assert_int_eq(srl_state_at_rest(p, &s, t + d.reset_after_ns - 1), 0);
                continue;
            }
            denials++;
            if (t % p->window_ns + d.retry_after_ns >= p->window_ns)
                next_window++;
            ck_assert_int_eq(peek(p, &s, t + d.retry_after_ns - 1, cost).allowed, 0);
            ck_assert_int_eq(peek(p, &s, t + d.retry_after_ns, cost).allowed, 1);
            if (d.reset_after_ns) {
                ck_assert_int_eq(srl_state_at_rest(p, &s, t + d.reset_after_ns), 1);
                ck_assert_int_eq(srl_state_at_rest(p, &s, t + d.reset_after_ns - 1), 0);
            }
        }
    }
    /* both kinds of wait were exercised */
    ck_assert_uint_gt(denials, 1000);
    ck_assert_uint_gt(next_window, 100);
    ck_assert_uint_gt(denials - next_window, 100);
}
END_TEST

START_TEST(sliding_counter_is_at_rest_only_when_both_counts_are_gone)
{
    struct sc_state s, fresh;
    srl_state_init(&ten_per_min, &s, 0);
    acq(&ten_per_min, &s, 50 * SEC, 10);
    ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &s, 50 * SEC), 0);
    ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &s, 119 * SEC), 0);
    ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &s, 120 * SEC - 1), 0);
    /* shortly before rest the old count still changes decisions */
    srl_state_init(&ten_per_min, &fresh, 114 * SEC);
    srl_decision a = peek(&ten_per_min, &s, 114 * SEC, 1), b = peek(&ten_per_min, &fresh, 114 * SEC, 1);
    ck_assert_uint_eq(a.remaining, 8);
    ck_assert_uint_eq(b.remaining, 9);
    /* at rest: every cost decides exactly like a fresh state */
    for (uint64_t t = 120 * SEC; t < 120 * SEC + 3; t++) {
        ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &s, t), 1);
        srl_state_init(&ten_per_min, &fresh, t);
        for (uint32_t c = 1; c <= 10; c++) {
            a = peek(&ten_per_min, &s, t, c);
            b = peek(&ten_per_min, &fresh, t, c);
            ck_assert(decision_eq(&a, &b));
        }
    }
    srl_state_init(&ten_per_min, &fresh, 61 * SEC);
    ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &fresh, 61 * SEC), 1);
    ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &fresh, 59 * SEC), 0); /* window ahead of now */
}
END_TEST

START_TEST(sliding_counter_valid_rejects_every_corrupted_field)
{
    struct sc_state s;
    srl_state_init(&ten_per_min, &s, 0);
    acq(&ten_per_min, &s, 70 * SEC, 3);
    ck_assert_int_eq(srl_state_valid(&ten_per_min, &s, 70 * SEC), 1);
    struct sc_state bad[4] = {s, s, s, s};
    bad[0].prev = 11;
    bad[1].curr = 11;
    bad[2].window_start = 61 * SEC;   /* not aligned */
    bad[3].window_start = 120 * SEC;  /* after now */
    for (int i = 0; i < 4; i++)
        ck_assert_msg(srl_state_valid(&ten_per_min, &bad[i], 70 * SEC) == 0, "corruption %d accepted", i);
    s.prev = 10, s.curr = 10;
    ck_assert_int_eq(srl_state_valid(&ten_per_min, &s, 70 * SEC), 1);
    ck_assert_uint_eq(srl__algo_sliding_counter.last_ns(&ten_per_min, &s), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("algo_sliding_counter");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, sliding_counter_follows_the_trace_at_ten_per_minute);
    tcase_add_test(tc, sliding_counter_reports_exact_remaining_and_reset_after);
    tcase_add_test(tc, sliding_counter_full_current_window_waits_into_the_next_one);
    tcase_add_test(tc, sliding_counter_cost_equal_to_permits_and_two_windows_later_everything_is_gone);
    tcase_add_test(tc, sliding_counter_cost_zero_or_above_permits_is_ecost_and_writes_nothing);
    tcase_add_test(tc, sliding_counter_denied_request_and_peek_leave_state_bytes_identical);
    tcase_add_test(tc, sliding_counter_idle_for_years_forgets_both_windows);
    tcase_add_test(tc, sliding_counter_clock_going_backwards_counts_as_no_time);
    tcase_add_test(tc, sliding_counter_largest_permits_and_window_do_not_overflow);
    tcase_add_test(tc, sliding_counter_retry_after_is_the_exact_first_passing_time);
    tcase_add_test(tc, sliding_counter_is_at_rest_only_when_both_counts_are_gone);
    tcase_add_test(tc, sliding_counter_valid_rejects_every_corrupted_field);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
