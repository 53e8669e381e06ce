/*
 * check_algo_gcra.c - GCRA, through the pure core.
 *
 * Where the emission interval T = W / permits is exact, GCRA must decide
 * exactly like the token bucket: the token bucket's 5/s
 * two-key trace (values spelled out),
 * and long random traces compared field by field.  Then boundary tables:
 * a T that rounds up (burst still exactly permits), cost > 1, cost ==
 * permits, errors and denials that change nothing, years idle, a ticker
 * going backwards, the largest permits and window, at-rest and validity.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "srl.h"
#include "testutil.h"
#include "algotest.h"

static const srl_policy five_per_s = {.algorithm = SRL_GCRA, .permits = 5, .window_ns = 1 * SEC};

START_TEST(gcra_follows_the_token_bucket_trace_at_five_per_second)
{
    uint64_t alice, bob;
    ck_assert_uint_eq(srl_state_size(&five_per_s), 8);
    srl_state_init(&five_per_s, &alice, 0);
    for (uint32_t i = 0; i < 5; i++)
        ck_allowed(acq(&five_per_s, &alice, 0, 1), 4 - i);
    ck_denied(acq(&five_per_s, &alice, 0, 1), 200 * MS);
    ck_denied(acq(&five_per_s, &alice, 100 * MS, 1), 100 * MS);
    ck_allowed(acq(&five_per_s, &alice, 300 * MS, 1), 0);
    ck_denied(acq(&five_per_s, &alice, 300 * MS, 1), 100 * MS);
    srl_state_init(&five_per_s, &bob, 300 * MS);
    ck_allowed(acq(&five_per_s, &bob, 300 * MS, 1), 4);
    ck_allowed(acq(&five_per_s, &alice, 1300 * MS, 1), 4);
    ck_assert_int_eq(srl_state_at_rest(&five_per_s, &bob, 1300 * MS), 1);
    ck_assert_int_eq(srl_state_at_rest(&five_per_s, &alice, 1300 * MS), 0);
    ck_assert_int_eq(srl_state_at_rest(&five_per_s, &alice, 1500 * MS - 1), 0);
    ck_assert_int_eq(srl_state_at_rest(&five_per_s, &alice, 1500 * MS), 1);
}
END_TEST

START_TEST(gcra_decides_exactly_like_the_token_bucket_when_the_interval_is_exact)
{
    static const struct {
        uint32_t permits;
        uint64_t window;
    } ps[] = {{5, SEC}, {1, 1}, {1000, 1000}, {64, 64 * 999983}, {3, 3 * SEC},
              {1u << 20, (1ull << 20) * 1000003}, {UINT32_MAX, (uint64_t)UINT32_MAX * 73000000}};
    uint64_t seed = 0x2545f4914f6cdd1dull;
    for (unsigned k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        srl_policy g = {.algorithm = SRL_GCRA, .permits = ps[k].permits, .window_ns = ps[k].window};
        srl_policy t = {.algorithm = SRL_TOKEN_BUCKET, .permits = ps[k].permits, .window_ns = ps[k].window};
        ck_assert_int_eq(srl_policy_validate(&g), 0);
        uint64_t gs[1], ts[3];
        uint64_t now = 777;
        srl_state_init(&g, gs, now);
        srl_state_init(&t, ts, now);
        unsigned denials = 0;
        for (int i = 0; i < 5000; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            uint32_t cost = 1 + (uint32_t)(seed % (ps[k].permits < 4 ? ps[k].permits : ps[k].permits / 3));
            if (seed & 1)
                now += (seed >> 8) % (ps[k].window / 3 + 1) % (1ull << 50);
            srl_decision a = acq(&g, gs, now, cost), b = acq(&t, ts, now, cost);
            ck_assert_int_eq(a.allowed, b.allowed);
            ck_assert_uint_eq(a.remaining, b.remaining);
            ck_assert_uint_eq(a.retry_after_ns, b.retry_after_ns);
            ck_assert_uint_eq(a.reset_after_ns, b.reset_after_ns);
            ck_assert_int_eq(srl_state_at_rest(&g, gs, now), srl_state_at_rest(&t, ts, now));
            denials += !a.allowed;
        }
        ck_assert_uint_gt(denials, 100);
    }
}
END_TEST

START_TEST(gcra_rounds_the_interval_up_and_keeps_the_burst_exact)
{
    srl_policy p = {.algorithm = SRL_GCRA, .permits = 3, .window_ns = 1 * SEC};   /* T = 333333334 ns, tau = 1000000002 ns */
    uint64_t s;
    srl_state_init(&p, &s, 0);
    ck_allowed(acq(&p, &s, 0, 1), 2);
    ck_allowed(acq(&p, &s, 0, 1), 1);
    srl_decision d = acq(&p, &s, 0, 1);
    ck_allowed(d, 0);
    ck_assert_uint_eq(d.reset_after_ns, 1000000002);
    ck_denied(acq(&p, &s, 0, 1), 333333334);
    ck_assert_int_eq(peek(&p, &s, 333333333, 1).allowed, 0);
    ck_assert_int_eq(peek(&p, &s, 333333334, 1).allowed, 1);
    ck_assert_int_eq(srl_state_at_rest(&p, &s, 1000000001), 0);
    ck_assert_int_eq(srl_state_at_rest(&p, &s, 1000000002), 1);
}
END_TEST

START_TEST(gcra_cost_above_one_and_equal_to_permits)
{
    srl_policy p = {.algorithm = SRL_GCRA, .permits = 10, .window_ns = 1 * SEC};   /* T = 100 ms */
    uint64_t s, before;
    srl_state_init(&p, &s, 0);
    ck_allowed(acq(&p, &s, 0, 4), 6);
    before = s;
    ck_denied_leaving(acq(&p, &s, 0, 7), 6, 100 * MS);
    ck_denied_leaving(acq(&p, &s, 0, 10), 6, 400 * MS);
    ck_assert_uint_eq(s, before);
    ck_allowed(acq(&p, &s, 0, 6), 0);
    ck_denied(acq(&p, &s, 0, 10), 1 * SEC);
    ck_allowed(acq(&p, &s, 1 * SEC, 10), 0);
}
END_TEST

START_TEST(gcra_cost_zero_or_above_permits_is_ecost_and_writes_nothing)
{
    uint64_t s, before;
    srl_state_init(&five_per_s, &s, 0);
    acq(&five_per_s, &s, 0, 2);
    before = s;
    srl_decision d, dbefore;
    memset(&d, 0x44, sizeof d);
    dbefore = d;
    ck_assert_int_eq(srl_state_acquire(&five_per_s, &s, 1, 0, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_acquire(&five_per_s, &s, 1, 6, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_peek(&five_per_s, &s, 1, 6, &d), SRL_ECOST);
    ck_assert_uint_eq(s, before);
    ck_assert_mem_eq(&d, &dbefore, sizeof d);
}
END_TEST

START_TEST(gcra_denied_request_and_peek_leave_state_bytes_identical)
{
    uint64_t s, before;
    srl_state_init(&five_per_s, &s, 0);
    acq(&five_per_s, &s, 0, 5);
    before = s;
    for (uint64_t t = 0; t < 200 * MS; t += 3 * MS)
        ck_assert_int_eq(acq(&five_per_s, &s, t, 1).allowed, 0);
    ck_assert_int_eq(peek(&five_per_s, &s, 10 * SEC, 5).allowed, 1);
    ck_assert_uint_eq(s, before);
}
END_TEST

START_TEST(gcra_idle_for_years_still_caps_at_permits)
{
    uint64_t s;
    srl_state_init(&five_per_s, &s, 0);
    acq(&five_per_s, &s, 0, 5);
    uint64_t later = (1ull << 62) + 5;
    ck_allowed(acq(&five_per_s, &s, later, 5), 0);
    ck_denied(acq(&five_per_s, &s, later, 1), 200 * MS);
    ck_allowed(acq(&five_per_s, &s, UINT64_MAX - 2 * SEC, 5), 0);
    ck_denied(acq(&five_per_s, &s, UINT64_MAX - 2 * SEC, 1), 200 * MS);
    ck_assert_int_eq(srl_state_valid(&five_per_s, &s, UINT64_MAX - 2 * SEC), 1);
}
END_TEST

START_TEST(gcra_clock_going_backwards_gives_no_capacity)
{
    uint64_t s, before;
    srl_state_init(&five_per_s, &s, 10 * SEC);
    acq(&five_per_s, &s, 10 * SEC, 5);
    before = s;
    /* 5 s earlier the key is not "fresher": one word cannot tell a step back
     * from a used burst, so it fails closed; the wait is exact in ticker time */
    ck_denied(acq(&five_per_s, &s, 5 * SEC, 1), 5 * SEC + 200 * MS);
    ck_assert_int_eq(peek(&five_per_s, &s, 10 * SEC + 200 * MS - 1, 1).allowed, 0);
    ck_assert_uint_eq(s, before);
    ck_allowed(acq(&five_per_s, &s, 10 * SEC + 200 * MS, 1), 0);
    ck_denied(acq(&five_per_s, &s, 10 * SEC + 200 * MS, 1), 200 * MS);
    /* an admission at an earlier time never moves tat back */
    uint64_t t;
    srl_state_init(&five_per_s, &t, 10 * SEC);
    ck_allowed(acq(&five_per_s, &t, 10 * SEC, 1), 4);
    ck_allowed(acq(&five_per_s, &t, 9900 * MS, 1), 2);  /* 0.3 s of burst seen as used */
    ck_assert_uint_eq(t, 10 * SEC + 400 * MS);
    /* a fresh state does not depend on the time it was made at */
    srl_state_init(&five_per_s, &t, 10 * SEC);
    ck_allowed(acq(&five_per_s, &t, 3 * SEC, 5), 0);
}
END_TEST

START_TEST(gcra_largest_permits_and_window_do_not_overflow)
{
    static const uint64_t windows[] = {365ull * 86400 * SEC, SRL_WINDOW_MAX_NS};
    for (unsigned w = 0; w < 2; w++) {
        srl_policy p = {.algorithm = SRL_GCRA, .permits = UINT32_MAX, .window_ns = windows[w]};
        uint64_t T = windows[w] / UINT32_MAX + (windows[w] % UINT32_MAX != 0);
        uint64_t s;
        srl_state_init(&p, &s, 0);
        uint32_t chunk = 1u << 31;
        ck_allowed(acq(&p, &s, 0, chunk), UINT32_MAX - chunk);
        srl_decision d = acq(&p, &s, 0, UINT32_MAX - chunk);
        ck_allowed(d, 0);
        ck_assert_uint_eq(d.reset_after_ns, (uint64_t)UINT32_MAX * T);
        ck_denied(acq(&p, &s, 0, 1), T);
        ck_denied(peek(&p, &s, 0, UINT32_MAX), (uint64_t)UINT32_MAX * T);
        ck_allowed(acq(&p, &s, (uint64_t)UINT32_MAX * T, UINT32_MAX), 0);
    }
}
END_TEST

START_TEST(gcra_is_at_rest_exactly_when_it_decides_like_a_fresh_state)
{
    srl_policy p = {.algorithm = SRL_GCRA, .permits = 4, .window_ns = 4 * SEC};
    uint64_t s, fresh;
    srl_state_init(&p, &s, 0);
    acq(&p, &s, 0, 1);
    for (uint64_t t = SEC - 2; t <= SEC + 2; t++) {
        srl_state_init(&p, &fresh, t);
        srl_decision a = peek(&p, &s, t, 4), b = peek(&p, &fresh, t, 4);
        ck_assert_int_eq(srl_state_at_rest(&p, &s, t), t >= SEC);
        ck_assert_int_eq(decision_eq(&a, &b), t >= SEC);
    }
}
END_TEST

START_TEST(gcra_valid_rejects_a_tat_beyond_one_burst_and_the_longest_reservation_ahead)
{
    srl_policy p = {.algorithm = SRL_GCRA, .permits = 5, .window_ns = SEC};
    /* now + tau + SRL_WAIT_MAX_NS: drained, with the longest reservation queue */
    uint64_t s = 1 * SEC + 1 * SEC + SRL_WAIT_MAX_NS;
    ck_assert_int_eq(srl_state_valid(&p, &s, 1 * SEC), 1);
    s++;
    ck_assert_int_eq(srl_state_valid(&p, &s, 1 * SEC), 0);
    s = UINT64_MAX;
    ck_assert_int_eq(srl_state_valid(&p, &s, 1 * SEC), 0);
    ck_assert_int_eq(srl_state_valid(&p, &s, UINT64_MAX - 1), 1);   /* saturating bound */
    ck_assert_uint_eq(srl__algo_gcra.last_ns(&p, &s), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("algo_gcra");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, gcra_follows_the_token_bucket_trace_at_five_per_second);
    tcase_add_test(tc, gcra_decides_exactly_like_the_token_bucket_when_the_interval_is_exact);
    tcase_add_test(tc, gcra_rounds_the_interval_up_and_keeps_the_burst_exact);
    tcase_add_test(tc, gcra_cost_above_one_and_equal_to_permits);
    tcase_add_test(tc, gcra_cost_zero_or_above_permits_is_ecost_and_writes_nothing);
    tcase_add_test(tc, gcra_denied_request_and_peek_leave_state_bytes_identical);
    tcase_add_test(tc, gcra_idle_for_years_still_caps_at_permits);
    tcase_add_test(tc, gcra_clock_going_backwards_gives_no_capacity);
    tcase_add_test(tc, gcra_largest_permits_and_window_do_not_overflow);
    tcase_add_test(tc, gcra_is_at_rest_exactly_when_it_decides_like_a_fresh_state);
    tcase_add_test(tc, gcra_valid_rejects_a_tat_beyond_one_burst_and_the_longest_reservation_ahead);
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
