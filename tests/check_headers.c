/*
 * check_headers.c - Retry-After, RateLimit-Policy and RateLimit field values.
 *
 * Exact strings, seconds always rounded up (6.000000001 s is "7"), the
 * exact length returned, SRL_ENOBUFS with the buffer untouched when it is
 * one byte short, and name validation.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "srl.h"
#include "testutil.h"

static srl_decision denied(uint64_t retry_ns)
{
    srl_decision d = {.allowed = 0, .limit = 10, .remaining = 0,
                      .retry_after_ns = retry_ns, .reset_after_ns = retry_ns + SEC};
    return d;
}

START_TEST(retry_after_is_whole_seconds_rounded_up)
{
    static const struct {
        uint64_t ns;
        const char *text;
    } cases[] = {
        {0, "0"}, {1, "1"}, {SEC - 1, "1"}, {SEC, "1"}, {SEC + 1, "2"},
        {6 * SEC, "6"}, {6000000001ull, "7"}, {200 * MS, "1"},
        {UINT64_MAX, "18446744074"},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        srl_decision d = denied(cases[i].ns);
        int n = srl_format_retry_after(&d, buf, sizeof buf);
        ck_assert_int_eq(n, (int)strlen(cases[i].text));
        ck_assert_str_eq(buf, cases[i].text);
    }
}
END_TEST

START_TEST(retry_after_of_an_allowed_decision_is_zero)
{
    srl_decision d = {.allowed = 1, .limit = 5, .remaining = 4, .retry_after_ns = 5 * SEC,
                      .reset_after_ns = 3 * SEC};
    char buf[8];
    ck_assert_int_eq(srl_format_retry_after(&d, buf, sizeof buf), 1);
    ck_assert_str_eq(buf, "0");
}
END_TEST

START_TEST(ratelimit_policy_gives_quota_and_window_in_seconds)
{
    static const struct {
        srl_policy p;
        const char *name;
        const char *text;
    } cases[] = {
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 100, .window_ns = 60 * SEC}, NULL, "\"default\";q=100;w=60"},
        {{.algorithm = SRL_GCRA, .permits = 10, .window_ns = 1 * SEC}, "api", "\"api\";q=10;w=1"},
        {{.algorithm = SRL_SLIDING_LOG, .permits = 5, .window_ns = 15 * 60 * SEC}, "login.v2-x_y", "\"login.v2-x_y\";q=5;w=900"},
        {{.algorithm = SRL_SLIDING_COUNTER, .permits = 3, .window_ns = 1500 * MS}, NULL, "\"default\";q=3;w=2"},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 3, .window_ns = 1}, NULL, "\"default\";q=3;w=1"},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = UINT32_MAX, .window_ns = SRL_WINDOW_MAX_NS}, NULL,
         "\"default\";q=4294967295;w=316224000"},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        int n = srl_format_ratelimit_policy(&cases[i].p, cases[i].name, buf, sizeof buf);
        ck_assert_int_eq(n, (int)strlen(cases[i].text));
        ck_assert_str_eq(buf, cases[i].text);
    }
}
END_TEST

START_TEST(ratelimit_gives_remaining_and_seconds_to_reset_or_to_retry)
{
    char buf[64];
    srl_decision ok = {.allowed = 1, .limit = 100, .remaining = 42, .retry_after_ns = 0,
                       .reset_after_ns = 16 * SEC + 1};
    ck_assert_int_eq(srl_format_ratelimit(&ok, NULL, buf, sizeof buf), (int)strlen("\"default\";r=42;t=17"));
    ck_assert_str_eq(buf, "\"default\";r=42;t=17");
    srl_decision no = denied(6000000001ull);
    ck_assert_int_eq(srl_format_ratelimit(&no, "api", buf, sizeof buf), (int)strlen("\"api\";r=0;t=7"));
    ck_assert_str_eq(buf, "\"api\";r=0;t=7");
    srl_decision rest = {.allowed = 1, .limit = 5, .remaining = 5, .reset_after_ns = 0};
    ck_assert_int_eq(srl_format_ratelimit(&rest, NULL, buf, sizeof buf), (int)strlen("\"default\";r=5;t=0"));
    ck_assert_str_eq(buf, "\"default\";r=5;t=0");
}
END_TEST

START_TEST(header_helpers_return_enobufs_one_byte_short_and_leave_the_buffer_untouched)
{
    srl_policy p = {.algorithm = SRL_TOKEN_BUCKET, .permits = 100, .window_ns = 60 * SEC};
    srl_decision ok = {.allowed = 1, .remaining = 42, .reset_after_ns = 17 * SEC};
    srl_decision no = denied(6000000001ull);
    char buf[64];
    /* exact fit = strlen + 1 works, anything less fails */
    size_t need[3] = {strlen("7") + 1, strlen("\"default\";q=100;w=60") + 1,
                      strlen("\"default\";r=42;t=17") + 1};
    for (int k = 0; k < 3; k++) {
        for (size_t len = 0; len < need[k]; len++) {
            memset(buf, '#', sizeof buf);
            int rc = k == 0   ? srl_format_retry_after(&no, buf, len)
                     : k == 1 ? srl_format_ratelimit_policy(&p, NULL, buf, len)
                              : srl_format_ratelimit(&ok, NULL, buf, len);
            ck_assert_int_eq(rc, SRL_ENOBUFS);
            for (size_t i = 0; i < sizeof buf; i++)
                ck_assert_int_eq(buf[i], '#');
        }
        int rc = k == 0   ? srl_format_retry_after(&no, buf, need[k])
                 : k == 1 ? srl_format_ratelimit_policy(&p, NULL, buf, need[k])
                          : srl_format_ratelimit(&ok, NULL, buf, need[k]);
        ck_assert_int_eq(rc, (int)need[k] - 1);
        ck_assert_int_eq(buf[need[k] - 1], '\0');
    }
}
END_TEST

START_TEST(header_helpers_reject_bad_names_invalid_policies_and_nulls)
{
    static const char *const bad_names[] = {"", "a b", "q\"", "x;y", "a,b", "caf\xc3\xa9", "t=1"};
    srl_policy p = {.algorithm = SRL_TOKEN_BUCKET, .permits = 100, .window_ns = 60 * SEC};
    srl_decision d = {.allowed = 1, .remaining = 1};
    char buf[64];
    memset(buf, '#', sizeof buf);
    for (unsigned i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        ck_assert_int_eq(srl_format_ratelimit_policy(&p, bad_names[i], buf, sizeof buf), SRL_EINVAL);
        ck_assert_int_eq(srl_format_ratelimit(&d, bad_names[i], buf, sizeof buf), SRL_EINVAL);
    }
    srl_policy bad = {.algorithm = SRL_TOKEN_BUCKET, .permits = 0, .window_ns = SEC};
    ck_assert_int_eq(srl_format_ratelimit_policy(&bad, NULL, buf, sizeof buf), SRL_EPOLICY);
    ck_assert_int_eq(srl_format_ratelimit_policy(NULL, NULL, buf, sizeof buf), SRL_EINVAL);
    ck_assert_int_eq(srl_format_ratelimit_policy(&p, NULL, NULL, 10), SRL_EINVAL);
    ck_assert_int_eq(srl_format_ratelimit(NULL, NULL, buf, sizeof buf), SRL_EINVAL);
    ck_assert_int_eq(srl_format_ratelimit(&d, NULL, NULL, 10), SRL_EINVAL);
    ck_assert_int_eq(srl_format_retry_after(NULL, buf, sizeof buf), SRL_EINVAL);
    ck_assert_int_eq(srl_format_retry_after(&d, NULL, 10), SRL_EINVAL);
    for (size_t i = 0; i < sizeof buf; i++)
        ck_assert_int_eq(buf[i], '#');
}
END_TEST

START_TEST(header_values_follow_a_real_decision)
{
    srl_policy p = {.algorithm = SRL_SLIDING_COUNTER, .permits = 10, .window_ns = 60 * SEC};
    uint64_t st[2];
    srl_state_init(&p, st, 0);
    srl_decision d;
    for (int i = 0; i < 8; i++)
        srl_state_acquire(&p, st, 50 * SEC, 1, &d);
    for (int i = 0; i < 5; i++)
        srl_state_acquire(&p, st, 69 * SEC, 1, &d);
    ck_assert_int_eq(d.allowed, 0);
    char buf[64];
    ck_assert_int_eq(srl_format_retry_after(&d, buf, sizeof buf), 1);
    ck_assert_str_eq(buf, "7");   /* 6.000000001 s */
    ck_assert_int_eq(srl_format_ratelimit(&d, NULL, buf, sizeof buf), (int)strlen("\"default\";r=0;t=7"));
    ck_assert_str_eq(buf, "\"default\";r=0;t=7");
}
END_TEST

START_TEST(item_names_are_at_most_79_bytes_and_numbers_print_in_full)
{
    /* A single limit's item is the name itself, a compound's "name.i":
     * either may be 79 bytes, not 80 (SRL_ENOBUFS, the buffer untouched). */
    char name[81], buf[512];
    memset(name, 'n', sizeof name - 1);
    name[80] = '\0';
    srl_limits one = {.count = 1}, two = {.count = 2};
    one.limit[0] = (srl_policy){.algorithm = SRL_GCRA, .permits = 10, .window_ns = SEC};
    two.limit[0] = one.limit[0];
    two.limit[1] = (srl_policy){.algorithm = SRL_GCRA, .permits = 1000, .window_ns = 86400 * SEC};
    srl_decision d = {.allowed = 0, .remaining = 0, .retry_after_ns = SEC / 2, .binding = 1};
    memset(buf, '#', sizeof buf);
    ck_assert_int_eq(srl_format_ratelimit_policies(&one, name, buf, sizeof buf), SRL_ENOBUFS);
    ck_assert_int_eq(srl_format_ratelimit_policies(&two, name + 2, buf, sizeof buf), SRL_ENOBUFS);
    ck_assert_int_eq(srl_format_ratelimit_binding(&two, &d, name + 2, buf, sizeof buf), SRL_ENOBUFS);
    ck_assert_int_eq(buf[0], '#');
    ck_assert_int_eq(srl_format_ratelimit_policies(&one, name + 1, buf, sizeof buf), 90);   /* "n*79";q=10;w=1 */
    ck_assert_int_eq(srl_format_ratelimit_policies(&two, name + 3, buf, sizeof buf),
                     188);   /* "n*77.0";q=10;w=1, "n*77.1";q=1000;w=86400 */
    ck_assert_int_eq(srl_format_ratelimit_binding(&two, &d, name + 3, buf, sizeof buf), 89);
    ck_assert_str_eq(buf + 77 + 1, ".1\";r=0;t=1");
    ck_assert_int_eq(srl_format_ratelimit_policies(&two, "api", buf, sizeof buf),
                     (int)strlen("\"api.0\";q=10;w=1, \"api.1\";q=1000;w=86400"));
    ck_assert_str_eq(buf, "\"api.0\";q=10;w=1, \"api.1\";q=1000;w=86400");
    /* the widest numbers: every digit */
    srl_decision wide = {.allowed = 0, .remaining = UINT32_MAX, .retry_after_ns = UINT64_MAX};
    ck_assert_int_eq(srl_format_ratelimit(&wide, "w", buf, sizeof buf),
                     (int)strlen("\"w\";r=4294967295;t=18446744074"));
    ck_assert_str_eq(buf, "\"w\";r=4294967295;t=18446744074");
    ck_assert_int_eq(srl_format_retry_after(&wide, buf, sizeof buf), 11);
    ck_assert_str_eq(buf, "18446744074");
    srl_decision zero = {.allowed = 1};
    ck_assert_int_eq(srl_format_ratelimit(&zero, "z", buf, sizeof buf), (int)strlen("\"z\";r=0;t=0"));
    ck_assert_str_eq(buf, "\"z\";r=0;t=0");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("headers");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, retry_after_is_whole_seconds_rounded_up);
    tcase_add_test(tc, retry_after_of_an_allowed_decision_is_zero);
    tcase_add_test(tc, ratelimit_policy_gives_quota_and_window_in_seconds);
    tcase_add_test(tc, ratelimit_gives_remaining_and_seconds_to_reset_or_to_retry);
    tcase_add_test(tc, header_helpers_return_enobufs_one_byte_short_and_leave_the_buffer_untouched);
    tcase_add_test(tc, header_helpers_reject_bad_names_invalid_policies_and_nulls);
    tcase_add_test(tc, header_values_follow_a_real_decision);
    tcase_add_test(tc, item_names_are_at_most_79_bytes_and_numbers_print_in_full);
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
