/*
 * check_algo_sliding_log.c - the sliding window log, through the pure core.
 *
 * A fixed 3/s trace, decision by decision (half-open window: an entry one window old
 * is out), then boundary tables: cost > 1 and which entry sets the wait,
 * cost == permits, errors and denials that change nothing, years idle, a
 * ticker going backwards, the largest log and window, ring wrap-around,
 * exact waits, at-rest and validity.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "srl.h"
#include "testutil.h"
#include "algotest.h"

/* The documented layout (algo_sliding_log.c). */
struct sl_state {
    uint32_t count;
    uint32_t head;
    uint64_t ts[];
};

static struct sl_state *new_state(const srl_policy *p, uint64_t now)
{
    size_t n = srl_state_size(p);
    ck_assert_uint_eq(n, 8 + 8 * (size_t)p->permits);
    struct sl_state *s = aligned_alloc(8, n);
    memset(s, 0xcd, n);
    ck_assert_int_eq(srl_state_init(p, s, now), 0);
    return s;
}

static const srl_policy three_per_s = {.algorithm = SRL_SLIDING_LOG, .permits = 3, .window_ns = 1 * SEC};

START_TEST(sliding_log_follows_the_trace_at_three_per_second)
{
    struct sl_state *s = new_state(&three_per_s, 0);
    ck_allowed(acq(&three_per_s, s, 0, 1), 2);
    ck_allowed(acq(&three_per_s, s, 400 * MS, 1), 1);
    ck_allowed(acq(&three_per_s, s, 800 * MS, 1), 0);
    ck_denied(acq(&three_per_s, s, 900 * MS, 1), 100 * MS);
    ck_allowed(acq(&three_per_s, s, 1000 * MS, 1), 0);   /* the 0 ms entry is exactly one window old: out */
    ck_denied(acq(&three_per_s, s, 1050 * MS, 1), 350 * MS);
    free(s);
}
END_TEST

START_TEST(sliding_log_window_is_half_open_at_the_nanosecond)
{
    struct sl_state *s = new_state(&three_per_s, 0);
    acq(&three_per_s, s, 5, 3);
    ck_denied(peek(&three_per_s, s, 5 + SEC - 1, 1), 1);
    ck_allowed(peek(&three_per_s, s, 5 + SEC, 3), 0);
    free(s);
}
END_TEST

START_TEST(sliding_log_reports_exact_remaining_and_reset_after)
{
    struct sl_state *s = new_state(&three_per_s, 0);
    srl_decision d = acq(&three_per_s, s, 100 * MS, 1);
    ck_assert_uint_eq(d.reset_after_ns, 1 * SEC);
    d = acq(&three_per_s, s, 700 * MS, 1);
    ck_assert_uint_eq(d.reset_after_ns, 1 * SEC);
    d = peek(&three_per_s, s, 900 * MS, 1);
    ck_allowed(d, 0);
    d = peek(&three_per_s, s, 900 * MS, 2);
    ck_denied_leaving(d, 1, 200 * MS);                    /* the 100 ms entry must leave */
    ck_assert_uint_eq(d.remaining, 1);
    ck_assert_uint_eq(d.reset_after_ns, 800 * MS); /* the 700 ms entry leaves at 1700 ms */
    free(s);
}
END_TEST

START_TEST(sliding_log_cost_above_one_waits_for_the_entry_that_makes_room)
{
    srl_policy p = {.algorithm = SRL_SLIDING_LOG, .permits = 5, .window_ns = 1 * SEC};
    struct sl_state *s = new_state(&p, 0);
    ck_allowed(acq(&p, s, 0, 3), 2);
    ck_allowed(acq(&p, s, 100 * MS, 2), 0);          /* log: 0,0,0,100,100 */
    size_t n = srl_state_size(&p);
    void *before = malloc(n);
    memcpy(before, s, n);
    ck_denied(acq(&p, s, 150 * MS, 1), 850 * MS);     /* first entry leaves */
    ck_denied(acq(&p, s, 150 * MS, 3), 850 * MS);     /* three at 0 leave together */
    ck_denied(acq(&p, s, 150 * MS, 4), 950 * MS);     /* needs the fourth, a 100 ms entry */
    ck_denied(acq(&p, s, 150 * MS, 5), 950 * MS);
    ck_assert_mem_eq(s, before, n);
    ck_allowed(acq(&p, s, 1000 * MS, 3), 0);
    ck_denied(acq(&p, s, 1000 * MS, 1), 100 * MS);
    free(before);
    free(s);
}
END_TEST

START_TEST(sliding_log_cost_equal_to_permits_needs_an_empty_window)
{
    srl_policy p = {.algorithm = SRL_SLIDING_LOG, .permits = 4, .window_ns = 1 * SEC};
    struct sl_state *s = new_state(&p, 0);
    ck_allowed(acq(&p, s, 0, 4), 0);
    ck_denied(acq(&p, s, 10, 4), SEC - 10);
    ck_allowed(acq(&p, s, SEC, 1), 3);
    ck_denied_leaving(acq(&p, s, SEC + 1, 4), 3, SEC - 1);
    ck_allowed(acq(&p, s, 2 * SEC, 4), 0);
    free(s);
}
END_TEST

START_TEST(sliding_log_cost_zero_or_above_permits_is_ecost_and_writes_nothing)
{
    struct sl_state *s = new_state(&three_per_s, 0);
    acq(&three_per_s, s, 0, 1);
    unsigned char before[8 + 24];
    memcpy(before, s, sizeof before);
    srl_decision d, dbefore;
    memset(&d, 0x11, sizeof d);
    dbefore = d;
    ck_assert_int_eq(srl_state_acquire(&three_per_s, s, 1, 0, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_acquire(&three_per_s, s, 1, 4, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_peek(&three_per_s, s, 1, 4, &d), SRL_ECOST);
    ck_assert_mem_eq(s, before, sizeof before);
    ck_assert_mem_eq(&d, &dbefore, sizeof d);
    free(s);
}
END_TEST

START_TEST(sliding_log_denied_request_and_peek_leave_state_bytes_identical)
{
    struct sl_state *s = new_state(&three_per_s, 0);
    acq(&three_per_s, s, 0, 1);
    acq(&three_per_s, s, 500 * MS, 2);
    unsigned char before[8 + 24];
    memcpy(before, s, sizeof before);
    for (uint64_t t = 500 * MS; t < 1000 * MS; t += 10 * MS)
        ck_assert_int_eq(acq(&three_per_s, s, t, 1).allowed, 0);
    /* expired entries are dropped only by an admission, never by a peek */
    ck_assert_int_eq(peek(&three_per_s, s, 10 * SEC, 3).allowed, 1);
    ck_assert_mem_eq(s, before, sizeof before);
    free(s);
}
END_TEST

START_TEST(sliding_log_idle_for_years_forgets_everything_and_caps)
{
    struct sl_state *s = new_state(&three_per_s, 0);
    acq(&three_per_s, s, 0, 3);
    uint64_t later = (1ull << 62) + 999;
    ck_assert_int_eq(srl_state_at_rest(&three_per_s, s, later), 1);
    ck_allowed(acq(&three_per_s, s, later, 3), 0);
    ck_denied(acq(&three_per_s, s, later, 1), SEC);
    ck_allowed(acq(&three_per_s, s, UINT64_MAX - 1, 3), 0);
    ck_assert_int_eq(srl_state_valid(&three_per_s, s, UINT64_MAX - 1), 1);
    free(s);
}
END_TEST

START_TEST(sliding_log_clock_going_backwards_keeps_the_log_sorted_and_frees_nothing)
{
    struct sl_state *s = new_state(&three_per_s, 0);
    acq(&three_per_s, s, 10 * SEC, 2);
    /* 5 s "earlier": the entries still count, their wait is from 10 s */
    ck_denied_leaving(peek(&three_per_s, s, 5 * SEC, 2), 1, 6 * SEC);
    srl_decision d = acq(&three_per_s, s, 5 * SEC, 1);
    ck_allowed(d, 0);
    ck_assert_uint_eq(d.reset_after_ns, 6 * SEC);   /* stamped 10 s, not 5 s */
    ck_assert_uint_eq(s->ts[2], 10 * SEC);
    ck_assert_int_eq(srl_state_valid(&three_per_s, s, 10 * SEC), 1);
    ck_denied(peek(&three_per_s, s, 11 * SEC - 1, 1), 1);
    ck_allowed(peek(&three_per_s, s, 11 * SEC, 3), 0);
    free(s);
}
END_TEST

START_TEST(sliding_log_largest_log_and_window_do_not_overflow)
{
    srl_policy p = {.algorithm = SRL_SLIDING_LOG, .permits = SRL_SLIDING_LOG_PERMITS_MAX, .window_ns = SRL_WINDOW_MAX_NS};
    struct sl_state *s = new_state(&p, 0);
    uint32_t admitted = 0;
    for (uint32_t chunk = 1000; admitted < p.permits;) {
        uint32_t c = p.permits - admitted < chunk ? p.permits - admitted : chunk;
        srl_decision d = acq(&p, s, admitted, c);   /* 1 ns apart per request */
        ck_assert_int_eq(d.allowed, 1);
        admitted += c;
        ck_assert_uint_eq(d.remaining, p.permits - admitted);
    }
    ck_assert_uint_eq(admitted, SRL_SLIDING_LOG_PERMITS_MAX);
    ck_denied(acq(&p, s, 5000, 1), SRL_WINDOW_MAX_NS - 5000);
    ck_denied(peek(&p, s, SRL_WINDOW_MAX_NS - 1, 1), 1);
    /* at W the first chunk (stamped 0) has left: 1000 fit, 0 spare beyond them */
    ck_allowed(peek(&p, s, SRL_WINDOW_MAX_NS, 1000), 0);
    ck_denied_leaving(peek(&p, s, SRL_WINDOW_MAX_NS, 1001), 1000, 1000);
    ck_allowed(acq(&p, s, SRL_WINDOW_MAX_NS + 5000, SRL_SLIDING_LOG_PERMITS_MAX), 0);
    free(s);
}
END_TEST

START_TEST(sliding_log_ring_wraps_around_many_times)
{
    struct sl_state *s = new_state(&three_per_s, 0);
    for (uint64_t k = 0; k < 1000; k++) {
        uint64_t t = k * 334 * MS;
        /* at t, the entries of k-1 and k-2 are live (668 ms old), k-3 left (1002 ms) */
        ck_allowed(acq(&three_per_s, s, t, 1), k >= 2 ? 0 : 2 - k);
        if (k >= 2)
            ck_denied(acq(&three_per_s, s, t, 1), 332 * MS);
        ck_assert_int_eq(srl_state_valid(&three_per_s, s, t), 1);
        ck_assert_uint_lt(s->head, 3);
    }
    free(s);
}
END_TEST

START_TEST(sliding_log_retry_after_is_the_exact_first_passing_time)
{
    static const srl_policy ps[] = {
        {.algorithm = SRL_SLIDING_LOG, .permits = 3, .window_ns = 1 * SEC}, {.algorithm = SRL_SLIDING_LOG, .permits = 7, .window_ns = 1000003},
        {.algorithm = SRL_SLIDING_LOG, .permits = 1, .window_ns = 1}, {.algorithm = SRL_SLIDING_LOG, .permits = 64, .window_ns = 999},
    };
    uint64_t seed = 88172645463325252ull;
    for (unsigned k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        const srl_policy *p = &ps[k];
        struct sl_state *s = new_state(p, 0);
        uint64_t now = 1000;
        for (int i = 0; i < 3000; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            uint32_t cost = 1 + (uint32_t)(seed % p->permits);
            if (seed & 1)
                now += (seed >> 8) % (p->window_ns / 3 + 1);
            /* one request in eight comes from a ticker that lags behind */
            uint64_t back = (seed >> 24) % 8 == 0 ? (seed >> 3) % (p->window_ns + 1) : 0;
            uint64_t t = now > back ? now - back : 0;
            srl_decision d = acq(p, s, t, cost);
            ck_assert_int_eq(srl_state_valid(p, s, now), 1);
            if (d.allowed) {
                ck_assert_int_eq(srl_state_at_rest(p, s, t + d.reset_after_ns), 1);
                ck_assert_int_eq(srl_state_at_rest(p, s, t + d.reset_after_ns - 1), 0);
                continue;
            }
            ck_assert_int_eq(peek(p, s, t + d.retry_after_ns - 1, cost).allowed, 0);
            ck_assert_int_eq(peek(p, s, t + d.retry_after_ns, cost).allowed, 1);
        }
        free(s);
    }
}
END_TEST

START_TEST(sliding_log_is_at_rest_exactly_when_it_decides_like_a_fresh_state)
{
    struct sl_state *s = new_state(&three_per_s, 0);
    struct sl_state *fresh = new_state(&three_per_s, 0);
    acq(&three_per_s, s, 0, 1);
    acq(&three_per_s, s, 300 * MS, 1);
    for (uint64_t t = 1300 * MS - 2; t <= 1300 * MS + 2; t++) {
        srl_state_init(&three_per_s, fresh, t);
        srl_decision a = peek(&three_per_s, s, t, 3), b = peek(&three_per_s, fresh, t, 3);
        ck_assert_int_eq(srl_state_at_rest(&three_per_s, s, t), t >= 1300 * MS);
        ck_assert_int_eq(decision_eq(&a, &b), t >= 1300 * MS);
    }
    free(fresh);
    free(s);
}
END_TEST

START_TEST(sliding_log_valid_rejects_every_corrupted_field)
{
    srl_policy p = {.algorithm = SRL_SLIDING_LOG, .permits = 4, .window_ns = 1 * SEC};
    struct sl_state *s = new_state(&p, 0);
    acq(&p, s, 100, 1);
    acq(&p, s, 200, 1);
    acq(&p, s, 300, 1);
    ck_assert_int_eq(srl_state_valid(&p, s, 300), 1);
    size_t n = srl_state_size(&p);
    struct sl_state *b = malloc(n);
    for (int k = 0; k < 5; k++) {
        memcpy(b, s, n);
        switch (k) {
        case 0: b->count = 5; break;                 /* more than permits */
        case 1: b->head = 4; break;                  /* head out of range */
        case 2: b->ts[1] = 50; break;                /* unsorted */
        case 3: b->ts[2] = 301; break;               /* in the future */
        case 4: b->head = 1; break;                  /* wraps: 200, 300, then the empty 0 slot */
        }
        ck_assert_msg(srl_state_valid(&p, b, 300) == 0, "corruption %d accepted", k);
    }
    ck_assert_uint_eq(srl__algo_sliding_log.last_ns(&p, s), 300);
    srl_state_init(&p, b, 0);
    ck_assert_uint_eq(srl__algo_sliding_log.last_ns(&p, b), 0);
    free(b);
    free(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("algo_sliding_log");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, sliding_log_follows_the_trace_at_three_per_second);
    tcase_add_test(tc, sliding_log_window_is_half_open_at_the_nanosecond);
    tcase_add_test(tc, sliding_log_reports_exact_remaining_and_reset_after);
    tcase_add_test(tc, sliding_log_cost_above_one_waits_for_the_entry_that_makes_room);
    tcase_add_test(tc, sliding_log_cost_equal_to_permits_needs_an_empty_window);
    tcase_add_test(tc, sliding_log_cost_zero_or_above_permits_is_ecost_and_writes_nothing);
    tcase_add_test(tc, sliding_log_denied_request_and_peek_leave_state_bytes_identical);
    tcase_add_test(tc, sliding_log_idle_for_years_forgets_everything_and_caps);
    tcase_add_test(tc, sliding_log_clock_going_backwards_keeps_the_log_sorted_and_frees_nothing);
    tcase_add_test(tc, sliding_log_largest_log_and_window_do_not_overflow);
    tcase_add_test(tc, sliding_log_ring_wraps_around_many_times);
    tcase_add_test(tc, sliding_log_retry_after_is_the_exact_first_passing_time);
    tcase_add_test(tc, sliding_log_is_at_rest_exactly_when_it_decides_like_a_fresh_state);
    tcase_add_test(tc, sliding_log_valid_rejects_every_corrupted_field);
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
