/*
 * check_algo_fixed_window.c - the fixed window counter, through the pure core.
 *
 * 10/min: ten pass in a window opened by the first hit at 7 s, the eleventh
 * waits exactly to 67 s; at 67 s - 1 ns still denied, at 67 s a new window
 * opens at 67 s (not at a multiple of 60 s).  Then: denials count nothing
 * and write nothing, cost > 1 and cost == permits, reset_after, refunds,
 * the ticker going backwards, years idle and the largest window and
 * permits, at-rest, validity, the policy text, and the tier conversion rule.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "srl.h"
#include "testutil.h"
#include "algotest.h"

/* The documented layout (algo_fixed_window.c). */
struct fw_state {
    uint64_t start;
    uint32_t count;
    uint32_t zero;
};

static const srl_policy ten_per_min = {.algorithm = SRL_FIXED_WINDOW, .permits = 10, .window_ns = 60 * SEC};

START_TEST(fixed_window_opens_at_the_first_hit_and_ends_exactly_w_later)
{
    struct fw_state s;
    ck_assert_uint_eq(srl_state_size(&ten_per_min), sizeof s);
    srl_state_init(&ten_per_min, &s, 0);
    for (uint32_t i = 0; i < 10; i++) {
        srl_decision d = acq(&ten_per_min, &s, 7 * SEC + i * SEC, 1);
        ck_allowed(d, 9 - i);
        ck_assert_uint_eq(d.reset_after_ns, 60 * SEC - i * SEC);   /* the window ends at 67 s */
        ck_assert_uint_eq(d.limit, 10);
    }
    ck_assert_uint_eq(s.start, 7 * SEC);
    ck_assert_uint_eq(s.count, 10);
    srl_decision d = acq(&ten_per_min, &s, 30 * SEC, 1);
    ck_denied(d, 37 * SEC);
    ck_assert_uint_eq(d.reset_after_ns, 37 * SEC);
    ck_denied(acq(&ten_per_min, &s, 67 * SEC - 1, 1), 1);
    ck_assert_uint_eq(s.count, 10);   /* denials counted nothing */
    d = acq(&ten_per_min, &s, 67 * SEC, 1);
    ck_allowed(d, 9);
    ck_assert_uint_eq(d.reset_after_ns, 60 * SEC);
    ck_assert_uint_eq(s.start, 67 * SEC);
    ck_assert_uint_eq(s.count, 1);
    /* The next window opens at its own first hit, long after 127 s. */
    d = acq(&ten_per_min, &s, 1000 * SEC + 3, 4);
    ck_allowed(d, 6);
    ck_assert_uint_eq(s.start, 1000 * SEC + 3);
    ck_assert_uint_eq(s.count, 4);
}
END_TEST

START_TEST(fixed_window_cost_above_what_is_left_is_denied_and_writes_nothing)
{
    struct fw_state s, before;
    srl_state_init(&ten_per_min, &s, 0);
    acq(&ten_per_min, &s, 5 * SEC, 7);
    memcpy(&before, &s, sizeof s);
    ck_denied_leaving(acq(&ten_per_min, &s, 6 * SEC, 4), 3, 59 * SEC);
    ck_denied_leaving(peek(&ten_per_min, &s, 6 * SEC, 4), 3, 59 * SEC);
    ck_allowed(peek(&ten_per_min, &s, 6 * SEC, 3), 0);
    ck_assert_int_eq(memcmp(&s, &before, sizeof s), 0);
    srl_decision d;
    ck_assert_int_eq(srl_state_acquire(&ten_per_min, &s, 6 * SEC, 0, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_acquire(&ten_per_min, &s, 6 * SEC, 11, &d), SRL_ECOST);
    ck_assert_int_eq(memcmp(&s, &before, sizeof s), 0);
    ck_allowed(acq(&ten_per_min, &s, 6 * SEC, 3), 0);
    /* cost == permits on a fresh window */
    ck_allowed(acq(&ten_per_min, &s, 65 * SEC, 10), 0);
    ck_assert_uint_eq(s.start, 65 * SEC);
}
END_TEST

START_TEST(fixed_window_refund_gives_back_in_the_open_window_only)
{
    struct fw_state s;
    srl_state_init(&ten_per_min, &s, 0);
    acq(&ten_per_min, &s, 10 * SEC, 10);
    ck_assert_int_eq(srl_state_refund(&ten_per_min, &s, 20 * SEC, 3), 0);
    ck_assert_uint_eq(s.count, 7);
    ck_assert_uint_eq(s.start, 10 * SEC);   /* the window keeps its end */
    ck_assert_int_eq(srl_state_refund(&ten_per_min, &s, 20 * SEC, 9), 0);
    ck_assert_uint_eq(s.count, 0);
    acq(&ten_per_min, &s, 30 * SEC, 2);   /* count 0: a new window at 30 s */
    ck_assert_uint_eq(s.start, 30 * SEC);
    struct fw_state before = s;
    ck_assert_int_eq(srl_state_refund(&ten_per_min, &s, 90 * SEC, 1), 0);   /* ended */
    ck_assert_int_eq(memcmp(&s, &before, sizeof s), 0);
}
END_TEST

START_TEST(fixed_window_ticker_going_back_counts_as_no_time)
{
    struct fw_state s;
    srl_state_init(&ten_per_min, &s, 0);
    acq(&ten_per_min, &s, 100 * SEC, 10);
    srl_decision d = acq(&ten_per_min, &s, 90 * SEC, 1);
    ck_denied(d, 70 * SEC);   /* 10 s behind + the 60 s window */
    ck_assert_uint_eq(s.start, 100 * SEC);
    /* a fresh state seen from before its start opens no window before it */
    srl_state_init(&ten_per_min, &s, 100 * SEC);
    d = acq(&ten_per_min, &s, 40 * SEC, 1);
    ck_allowed(d, 9);
    ck_assert_uint_eq(d.reset_after_ns, 120 * SEC);
    ck_assert_uint_eq(s.start, 100 * SEC);
}
END_TEST

START_TEST(fixed_window_largest_permits_and_window_do_not_overflow)
{
    const srl_policy big = {.algorithm = SRL_FIXED_WINDOW, .permits = SRL_PERMITS_MAX,
                            .window_ns = SRL_WINDOW_MAX_NS};
    struct fw_state s;
    uint64_t t0 = UINT64_MAX - SRL_WINDOW_MAX_NS / 2;
    srl_state_init(&big, &s, t0);
    ck_allowed(acq(&big, &s, t0, SRL_PERMITS_MAX - 1), 1);
    ck_allowed(acq(&big, &s, t0 + 1, 1), 0);
    srl_decision d = acq(&big, &s, UINT64_MAX, 1);
    ck_denied(d, SRL_WINDOW_MAX_NS - SRL_WINDOW_MAX_NS / 2);   /* ends at t0 + W */
    ck_assert_uint_eq(s.count, SRL_PERMITS_MAX);
    ck_assert_int_eq(srl_state_valid(&big, &s, UINT64_MAX), 1);
}
END_TEST

START_TEST(fixed_window_retry_after_is_the_first_passing_time)
{
    const srl_policy p = {.algorithm = SRL_FIXED_WINDOW, .permits = 3, .window_ns = 1000};
    for (uint64_t first = 0; first < 50; first += 7)
        for (uint64_t at = first; at < first + 1000; at += 97) {
            struct fw_state s;
            srl_state_init(&p, &s, 0);
            acq(&p, &s, first, 3);
            srl_decision d = peek(&p, &s, at, 1);
            ck_assert_int_eq(d.allowed, 0);
            ck_assert_uint_eq(d.retry_after_ns, first + 1000 - at);
            ck_assert_int_eq(peek(&p, &s, at + d.retry_after_ns - 1, 1).allowed, 0);
            ck_assert_int_eq(peek(&p, &s, at + d.retry_after_ns, 1).allowed, 1);
        }
}
END_TEST

START_TEST(fixed_window_is_at_rest_exactly_when_no_window_is_open)
{
    struct fw_state s;
    srl_state_init(&ten_per_min, &s, 5 * SEC);
    ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &s, 5 * SEC), 1);
    ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &s, 4 * SEC), 0);
    acq(&ten_per_min, &s, 5 * SEC, 1);
    ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &s, 65 * SEC - 1), 0);
    ck_assert_int_eq(srl_state_at_rest(&ten_per_min, &s, 65 * SEC), 1);
}
END_TEST

START_TEST(fixed_window_valid_rejects_every_corrupted_field)
{
    struct fw_state s;
    srl_state_init(&ten_per_min, &s, 0);
    acq(&ten_per_min, &s, 5 * SEC, 10);
    ck_assert_int_eq(srl_state_valid(&ten_per_min, &s, 5 * SEC), 1);
    struct fw_state bad = s;
    bad.count = 11;
    ck_assert_int_eq(srl_state_valid(&ten_per_min, &bad, 5 * SEC), 0);
    bad = s;
    bad.zero = 1;
    ck_assert_int_eq(srl_state_valid(&ten_per_min, &bad, 5 * SEC), 0);
    bad = s;
    bad.start = 6 * SEC;
    ck_assert_int_eq(srl_state_valid(&ten_per_min, &bad, 5 * SEC), 0);
}
END_TEST

START_TEST(fixed_window_policy_text_parses_formats_and_names_itself)
{
    srl_policy p;
    ck_assert_int_eq(srl_policy_parse("fixed_window:12/1h", &p), 0);
    ck_assert_int_eq(p.algorithm, SRL_FIXED_WINDOW);
    ck_assert_uint_eq(p.permits, 12);
    ck_assert_uint_eq(p.window_ns, 3600 * SEC);
    char buf[SRL_POLICY_TEXT_MAX];
    ck_assert_int_eq(srl_policy_format(&p, buf, sizeof buf), 18);
    ck_assert_str_eq(buf, "fixed_window:12/1h");
    ck_assert_str_eq(srl_algorithm_name(SRL_FIXED_WINDOW), "fixed_window");
    ck_assert_int_eq(srl_policy_parse("fixed_window:4294967295/90s,penalty=1m", &p), 0);
    ck_assert_int_eq(srl_policy_format(&p, buf, sizeof buf), 38);
    ck_assert_str_eq(buf, "fixed_window:4294967295/90s,penalty=1m");
    srl_policy_error e;
    ck_assert_int_eq(srl_policy_parse_ex("fixed_window:10/1m,burst=5", &p, &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "burst= is for token_bucket and gcra (a fixed_window has no "
                                "capacity apart from its rate)");
    ck_assert_int_eq(srl_policy_parse_ex("fixedwindow:10/1m", &p, &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "unknown algorithm 'fixedwindow' (did you mean fixed_window?)");
    ck_assert_int_eq(srl_policy_parse_ex("x:10/1m", &p, &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "unknown algorithm 'x' (algorithms: token_bucket sliding_log "
                                "sliding_counter gcra concurrency fixed_window)");
    srl_decision d;
    struct fw_state s;
    ck_assert_int_eq(srl_state_reserve(&ten_per_min, &s, 0, 1, 1, &d), SRL_ENOTSUP);
}
END_TEST

START_TEST(fixed_window_tier_conversion_keeps_the_open_window)
{
    srl_policy a, b, c;
    ck_assert_int_eq(srl_policy_parse("fixed_window:10/1m", &a), 0);
    ck_assert_int_eq(srl_policy_parse("fixed_window:4/2m", &b), 0);
    ck_assert_int_eq(srl_policy_parse("fixed_window:100/30s", &c), 0);
    struct fw_state s, out;
    srl_state_init(&a, &s, 0);
    acq(&a, &s, 10 * SEC, 6);
    srl__fw_convert(&a, &s, &b, &out, 20 * SEC);
    ck_assert_uint_eq(out.start, 10 * SEC);   /* ends at 130 s now */
    ck_assert_uint_eq(out.count, 4);          /* capped at the new N */
    ck_denied(peek(&b, &out, 20 * SEC, 1), 110 * SEC);
    srl__fw_convert(&a, &s, &c, &out, 20 * SEC);
    ck_assert_uint_eq(out.start, 10 * SEC);
    ck_assert_uint_eq(out.count, 6);
    srl__fw_convert(&a, &s, &c, &out, 40 * SEC);   /* 30 s ended it */
    ck_assert_uint_eq(out.count, 0);
    ck_assert_int_eq(srl_state_at_rest(&c, &out, 40 * SEC), 1);
}
END_TEST

/* The same rule through a real store: an anonymous segment with a second
 * tier, a key moved to it by srl_acquire_tier (tiers.c's srl__tier_convert). */
START_TEST(fixed_window_key_moved_to_another_tier_keeps_its_window_in_a_store)
{
    fake_clock *c = fake_clock_shared(10 * SEC);
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("fixed_window:10/1m", &cfg.policy), 0);
    srl_tier tier;
    memset(&tier, 0, sizeof tier);
    strcpy(tier.name, "small");
    srl_policy_error e;
    ck_assert_int_eq(srl_limits_parse_ex("fixed_window:4/2m", &tier.limits, &e), 0);
    cfg.tiers = &tier;
    cfg.tier_count = 1;
    cfg.capacity = 16;
    cfg.ticker = fake_ticker(c);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_decision d;
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_allowed(d, 4);
    c->now = 20 * SEC;
    ck_assert_int_eq(srl_acquire_tier(lim, 1, "k", 1, 1, &d), 0);
    ck_denied(d, 110 * SEC);   /* 4 of 4 used; the window [10 s, 130 s) */
    c->now = 130 * SEC;
    ck_assert_int_eq(srl_acquire_tier(lim, 1, "k", 1, 1, &d), 0);
    ck_allowed(d, 3);
    srl_close(lim);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("algo_fixed_window");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, fixed_window_opens_at_the_first_hit_and_ends_exactly_w_later);
    tcase_add_test(tc, fixed_window_cost_above_what_is_left_is_denied_and_writes_nothing);
    tcase_add_test(tc, fixed_window_refund_gives_back_in_the_open_window_only);
    tcase_add_test(tc, fixed_window_ticker_going_back_counts_as_no_time);
    tcase_add_test(tc, fixed_window_largest_permits_and_window_do_not_overflow);
    tcase_add_test(tc, fixed_window_retry_after_is_the_first_passing_time);
    tcase_add_test(tc, fixed_window_is_at_rest_exactly_when_no_window_is_open);
    tcase_add_test(tc, fixed_window_valid_rejects_every_corrupted_field);
    tcase_add_test(tc, fixed_window_policy_text_parses_formats_and_names_itself);
    tcase_add_test(tc, fixed_window_tier_conversion_keeps_the_open_window);
    tcase_add_test(tc, fixed_window_key_moved_to_another_tier_keeps_its_window_in_a_store);
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
