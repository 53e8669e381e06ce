/*
 * check_policy.c - policy text: parse, validate, format, algorithm names.
 *
 * Every malformed or invalid text is SRL_EPOLICY with the output untouched
 * (a table-driven loop test); every valid policy survives format -> parse
 * unchanged; the formatter picks the largest unit that divides the window.
 * srl_policy_parse_ex names the bad part of each refused text: offset,
 * length and the exact message (a table).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "srl.h"
#include "testutil.h"

static const struct {
    const char *text;
    srl_algorithm algorithm;
    uint32_t permits;
    uint64_t window_ns;
} good[] = {
    {"token_bucket:100/1m", SRL_TOKEN_BUCKET, 100, 60 * SEC},
    {"100/1m", SRL_TOKEN_BUCKET, 100, 60 * SEC},
    {"sliding_log:5/15m", SRL_SLIDING_LOG, 5, 15 * 60 * SEC},
    {"sliding_counter:10/m", SRL_SLIDING_COUNTER, 10, 60 * SEC},
    {"gcra:10/1s", SRL_GCRA, 10, SEC},
    {"5/s", SRL_TOKEN_BUCKET, 5, SEC},
    {"5/500ms", SRL_TOKEN_BUCKET, 5, 500 * MS},
    {"1/1ns", SRL_TOKEN_BUCKET, 1, 1},
    {"1/ns", SRL_TOKEN_BUCKET, 1, 1},
    {"3/250us", SRL_TOKEN_BUCKET, 3, 250000},
    {"7/2h", SRL_TOKEN_BUCKET, 7, 2 * 3600 * SEC},
    {"7/3d", SRL_TOKEN_BUCKET, 7, 3 * 86400 * SEC},
    {"4294967295/1s", SRL_TOKEN_BUCKET, UINT32_MAX, SEC},
    {"007/01s", SRL_TOKEN_BUCKET, 7, SEC},
    {"1/3660d", SRL_TOKEN_BUCKET, 1, SRL_WINDOW_MAX_NS},
    {"1/316224000000000000ns", SRL_TOKEN_BUCKET, 1, SRL_WINDOW_MAX_NS},
    {"sliding_log:4096/1s", SRL_SLIDING_LOG, 4096, SEC},
    {"sliding_counter:4294967295/3660d", SRL_SLIDING_COUNTER, UINT32_MAX, SRL_WINDOW_MAX_NS},
};

START_TEST(policy_parse_accepts_every_documented_form)
{
    srl_policy p;
    memset(&p, 0xee, sizeof p);
    ck_assert_msg(srl_policy_parse(good[_i].text, &p) == 0, "rejected %s", good[_i].text);
    ck_assert_int_eq(p.algorithm, good[_i].algorithm);
    ck_assert_uint_eq(p.permits, good[_i].permits);
    ck_assert_uint_eq(p.window_ns, good[_i].window_ns);
}
END_TEST

static const char *const bad[] = {
    "",
    "0/1s",
    "5/0s",
    "5/",
    "/1s",
    "5/1x",
    "abc:5/1s",
    "5/1s ",
    " 5/1s",
    "5 /1s",
    "5/ 1s",
    "-5/1s",
    "+5/1s",
    "5/-1s",
    "5/+1s",
    "4294967296/1s",
    "99999999999999999999/1s",
    "5/99999999999999999999ns",
    "5/3661d",
    "5/316224000000000001ns",
    "5/213503982334601d",        /* count * unit overflows 64 bits */
    "5/18446744073709552us",     /* ... and would wrap to 384 ns if unchecked */
    "4294967301/1s",             /* 2^32 + 5: would truncate to 5 */
    "18446744073709551621/1s",   /* 2^64 + 5: would wrap to 5 */
    "5/18446744073709551615d",
    "sliding_log:4097/1s",
    "sliding_log:4294967295/1s",
    "token_bucket:/1s",
    "token_bucket5/1s",
    ":5/1s",
    "gcra::5/1s",
    "Gcra:5/1s",
    "token_bucket:5/1s:",
    "5",
    "5/1",
    "5//1s",
    "5/1s1",
    "5/1S",
    "5/1sec",
    "5/1mss",
    "5/0",
    "5/00s",
    "1.5/1s",
    "5/1.5s",
    "0x10/1s",
    "5/1s\n",
};

START_TEST(policy_parse_rejects_malformed_text_with_epolicy_and_leaves_out_untouched)
{
    srl_policy p, before;
    memset(&p, 0xab, sizeof p);
    before = p;
    ck_assert_msg(srl_policy_parse(bad[_i], &p) == SRL_EPOLICY, "accepted \"%s\"", bad[_i]);
    ck_assert_mem_eq(&p, &before, sizeof p);
}
END_TEST

/* Each refusal names its part: where (offset, length) and why (message). */
static const struct {
    const char *text;
    uint32_t offset, length;
    const char *message;
} why[] = {
    {"", 0, 0, "empty policy: expected ALGO:N/WINDOW, e.g. token_bucket:100/1m"},
    {"tokenbucket:10/1s", 0, 11, "unknown algorithm 'tokenbucket' (did you mean token_bucket?)"},
    {"sliding_counte:10/1s", 0, 14, "unknown algorithm 'sliding_counte' (did you mean sliding_counter?)"},
    {"slidinglog:10/1s", 0, 10, "unknown algorithm 'slidinglog' (did you mean sliding_log?)"},
    {"Gcra:5/1s", 0, 4, "unknown algorithm 'Gcra' (did you mean gcra?)"},
    {"abc:5/1s", 0, 3,
     "unknown algorithm 'abc' (algorithms: token_bucket sliding_log sliding_counter gcra concurrency fixed_window)"},
    {":5/1s", 0, 0, "missing algorithm before ':' (algorithms: token_bucket sliding_log "
                    "sliding_counter gcra concurrency fixed_window)"},
    {"gcra;5/1s", 4, 1, "expected ':' after the algorithm, e.g. token_bucket:100/1m"},
    {"token_bucket:/1s", 13, 1, "expected N, a number 1..4294967295, e.g. 100/1m"},
    {"-5/1s", 0, 1, "expected N, a number 1..4294967295, e.g. 100/1m"},
    {"4294967296/1s", 0, 10, "N 4294967296 above 4294967295"},
    {"gcra:99999999999999999999/1s", 5, 20, "N 99999999999999999999 above 4294967295"},
    {"0/1s", 0, 1, "N must be 1 or more"},
    {"sliding_log:000/1s", 12, 3, "N must be 1 or more"},
    {"sliding_log:4097/1s", 12, 4, "sliding_log N 4097 above 4096 (its state is 8 bytes per permit)"},
    {"5", 1, 0, "expected '/' after N, e.g. 100/1m"},
    {"1.5/1s", 1, 1, "expected '/' after N, e.g. 100/1m"},
    {"5/", 2, 0, "expected a window after '/', e.g. 1m or 500ms"},
    {"5/ 1s", 2, 1, "expected a window after '/', e.g. 1m or 500ms"},
    {"5/0s", 2, 1, "window must be 1ns or more"},
    {"5/1", 3, 0, "missing unit after the count (units: ns us ms s m h d)"},
    {"5/1.5s", 2, 4, "the count in '1.5s' must be a whole number: write 1500ms"},
    {"10/0.25m", 3, 5, "the count in '0.25m' must be a whole number: write 15s"},
    {"10/1.0000000001s", 3, 13, "the count in '1.0000000001s' must be a whole number, e.g. 1500ms"},
    {"10/1min", 4, 3, "unknown unit 'min' (write 1m; units: ns us ms s m h d)"},
    {"100/minute", 4, 6, "unknown unit 'minute' (write 1m; units: ns us ms s m h d)"},
    {"100/2minutes", 5, 7, "unknown unit 'minutes' (write 2m; units: ns us ms s m h d)"},
    {"100 per minute", 3, 11, "expected '/' after N: srl writes '100 per ...' as 100/1m"},
    {"100 per 2 hours", 3, 12, "expected '/' after N: srl writes '100 per ...' as 100/2h"},
    {"100 per fortnight", 3, 1, "expected '/' after N, e.g. 100/1m"},
    {"10/1s,burts=5", 6, 5, "unknown option 'burts' (did you mean burst?)"},
    {"gcra:10/1s,penalt=1m", 11, 6, "unknown option 'penalt' (did you mean penalty?)"},
    {"10/1s,foo=1", 6, 3, "unknown option 'foo' (options: burst= penalty=)"},
    {"10/1s,penalty=1m,burst=5", 16, 8,
     "option 'burst' given twice or out of order (burst= comes before penalty=)"},
    {"concurrency:4,max_hold=1s,maxhold=2s", 26, 7, "unknown option 'maxhold' (did you mean max_hold?)"},
    {"concurrency:4,max_hold=1s,max_hold=2s", 25, 12, "option 'max_hold' given twice"},
    {"10/1s,x", 5, 2, "trailing text ',x' after the policy"},
    {"10/S", 3, 1, "unknown unit 'S' (units: ns us ms s m h d)"},
    {"5/3661d", 2, 5, "window 3661d above 3660d"},
    {"5/316224000000000001ns", 2, 20, "window 316224000000000001ns above 3660d"},
    {"5/213503982334601d", 2, 16, "window 213503982334601d above 3660d"},
    {"5/99999999999999999999999999999999999ns", 2, 37,
     "window 99999999999999999999999999999999... above 3660d"},
    {"5/1s ", 4, 1, "trailing text ' ' after the policy"},
    {"token_bucket:5/1s:x", 17, 2, "trailing text ':x' after the policy"},
    {"5/1s\n", 4, 1, "trailing text '\\x0a' after the policy"},
    {"5/1s1", 4, 1, "trailing text '1' after the policy"},
};

START_TEST(policy_parse_ex_names_the_bad_part_and_why)
{
    srl_policy p, before;
    srl_policy_error e;
    memset(&p, 0xab, sizeof p);
    before = p;
    memset(&e, 0xcd, sizeof e);
    ck_assert_int_eq(srl_policy_parse_ex(why[_i].text, &p, &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, why[_i].message);
    ck_assert_msg(e.offset == why[_i].offset && e.length == why[_i].length,
                  "\"%s\": span %u+%u, want %u+%u", why[_i].text, e.offset, e.length,
                  why[_i].offset, why[_i].length);
    ck_assert_mem_eq(&p, &before, sizeof p);
    for (unsigned k = 0; k < 4; k++)
        ck_assert_uint_eq(e.reserved[k], 0);
    /* the plain call refuses it the same way */
    ck_assert_int_eq(srl_policy_parse(why[_i].text, &p), SRL_EPOLICY);
}
END_TEST

/* Every malformed text of the table above gets a message of its own, never
 * the empty string, and a span inside the text. */
START_TEST(policy_parse_ex_explains_every_malformed_text)
{
    srl_policy p;
    srl_policy_error e;
    ck_assert_int_eq(srl_policy_parse_ex(bad[_i], &p, &e), SRL_EPOLICY);
    ck_assert_msg(e.message[0] != '\0', "no message for \"%s\"", bad[_i]);
    ck_assert_uint_le((uint64_t)e.offset + e.length, strlen(bad[_i]));
    for (const char *c = e.message; *c; c++)
        ck_assert_msg(*c >= 0x20 && *c < 0x7f, "control byte in message for \"%s\"", bad[_i]);
}
END_TEST

START_TEST(policy_parse_ex_clears_the_error_on_success_and_quotes_long_parts_safely)
{
    srl_policy p;
    srl_policy_error e;
    memset(&e, 0xcd, sizeof e);
    ck_assert_int_eq(srl_policy_parse_ex("gcra:10/1s", &p, &e), 0);
    ck_assert_str_eq(e.message, "");
    ck_assert_uint_eq(e.offset, 0);
    ck_assert_uint_eq(e.length, 0);
    ck_assert_int_eq(srl_policy_parse_ex("gcra:10/1s", &p, NULL), 0);
    ck_assert_int_eq(srl_policy_parse_ex("gcra:0/1s", &p, NULL), SRL_EPOLICY);
    ck_assert_int_eq(srl_policy_parse_ex(NULL, &p, &e), SRL_EINVAL);
    ck_assert_str_eq(e.message, "no policy text given");
    ck_assert_int_eq(srl_policy_parse_ex("5/1s", NULL, &e), SRL_EINVAL);
    /* a part of 4000 bytes of 0xff: quoted short, escaped, NUL-terminated */
    char *text = malloc(4008);
    ck_assert_ptr_nonnull(text);
    memcpy(text, "5/1s", 4);
    memset(text + 4, 0xff, 4000);
    text[4004] = '\0';
    ck_assert_int_eq(srl_policy_parse_ex(text, &p, &e), SRL_EPOLICY);
    ck_assert_uint_eq(e.offset, 4);
    ck_assert_uint_eq(e.length, 4000);
    ck_assert_uint_lt(strlen(e.message), sizeof e.message);
    ck_assert_ptr_nonnull(strstr(e.message, "trailing text '\\xff\\xff"));
    free(text);
    /* an algorithm-like word longer than the suggester looks at */
    char word[200];
    memset(word, 'a', sizeof word);
    memcpy(word + 150, ":5/1s", 6);
    ck_assert_int_eq(srl_policy_parse_ex(word, &p, &e), SRL_EPOLICY);
    ck_assert_uint_eq(e.length, 150);
    ck_assert_str_eq(e.message, "unknown algorithm 'aaaaaaaaaaaaaaaa...' "
                                "(algorithms: token_bucket sliding_log sliding_counter gcra concurrency fixed_window)");
}
END_TEST

START_TEST(policy_parse_with_null_arguments_is_einval)
{
    srl_policy p;
    ck_assert_int_eq(srl_policy_parse(NULL, &p), SRL_EINVAL);
    ck_assert_int_eq(srl_policy_parse("5/1s", NULL), SRL_EINVAL);
}
END_TEST

START_TEST(policy_validate_enforces_every_limit)
{
    static const struct {
        srl_policy p;
        int rc;
    } cases[] = {
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 1, .window_ns = 1}, 0},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 0, .window_ns = SEC}, SRL_EPOLICY},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 5, .window_ns = 0}, SRL_EPOLICY},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 5, .window_ns = SRL_WINDOW_MAX_NS}, 0},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 5, .window_ns = SRL_WINDOW_MAX_NS + 1}, SRL_EPOLICY},
        {{.algorithm = SRL_GCRA, .permits = UINT32_MAX, .window_ns = UINT64_MAX}, SRL_EPOLICY},
        {{.algorithm = SRL_SLIDING_LOG, .permits = SRL_SLIDING_LOG_PERMITS_MAX, .window_ns = SEC}, 0},
        {{.algorithm = SRL_SLIDING_LOG, .permits = SRL_SLIDING_LOG_PERMITS_MAX + 1, .window_ns = SEC}, SRL_EPOLICY},
        {{.algorithm = SRL_SLIDING_COUNTER, .permits = SRL_SLIDING_LOG_PERMITS_MAX + 1, .window_ns = SEC}, 0},
        {{.algorithm = SRL_CONCURRENCY, .permits = 4, .window_ns = 0}, 0},
        {{.algorithm = SRL_CONCURRENCY, .permits = SRL_CONCURRENCY_MAX, .window_ns = SRL_WINDOW_MAX_NS}, 0},
        {{.algorithm = SRL_CONCURRENCY, .permits = SRL_CONCURRENCY_MAX + 1, .window_ns = 0}, SRL_EPOLICY},
        {{.algorithm = SRL_CONCURRENCY, .permits = 0, .window_ns = 0}, SRL_EPOLICY},
        {{.algorithm = SRL_CONCURRENCY, .permits = 4, .window_ns = SRL_WINDOW_MAX_NS + 1}, SRL_EPOLICY},
        {{.algorithm = SRL_FIXED_WINDOW, .permits = UINT32_MAX, .window_ns = SRL_WINDOW_MAX_NS}, 0},
        {{.algorithm = SRL_FIXED_WINDOW, .permits = 5, .window_ns = 0}, SRL_EPOLICY},
        {{.algorithm = SRL_FIXED_WINDOW, .permits = 5, .window_ns = SEC, .burst = 5}, SRL_EPOLICY},
        {{.algorithm = (srl_algorithm)6, .permits = 5, .window_ns = SEC}, SRL_EPOLICY},
        {{.algorithm = (srl_algorithm)-1, .permits = 5, .window_ns = SEC}, SRL_EPOLICY},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(srl_policy_validate(&cases[i].p) == cases[i].rc, "case %u", i);
    ck_assert_int_eq(srl_policy_validate(NULL), SRL_EINVAL);
}
END_TEST

START_TEST(policy_format_writes_the_canonical_text_with_the_largest_exact_unit)
{
    static const struct {
        srl_policy p;
        const char *text;
    } cases[] = {
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 100, .window_ns = 60 * SEC}, "token_bucket:100/1m"},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 100, .window_ns = 90 * SEC}, "token_bucket:100/90s"},
        {{.algorithm = SRL_GCRA, .permits = 10, .window_ns = 1500 * MS}, "gcra:10/1500ms"},
        {{.algorithm = SRL_SLIDING_LOG, .permits = 5, .window_ns = 15 * 60 * SEC}, "sliding_log:5/15m"},
        {{.algorithm = SRL_SLIDING_COUNTER, .permits = 1, .window_ns = 86400 * SEC}, "sliding_counter:1/1d"},
        {{.algorithm = SRL_SLIDING_COUNTER, .permits = 1, .window_ns = 2 * 86400 * SEC + 3600 * SEC}, "sliding_counter:1/49h"},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 3, .window_ns = 1}, "token_bucket:3/1ns"},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 3, .window_ns = 1001}, "token_bucket:3/1001ns"},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = 3, .window_ns = 2000}, "token_bucket:3/2us"},
        {{.algorithm = SRL_TOKEN_BUCKET, .permits = UINT32_MAX, .window_ns = SRL_WINDOW_MAX_NS}, "token_bucket:4294967295/3660d"},
        {{.algorithm = SRL_SLIDING_COUNTER, .permits = UINT32_MAX, .window_ns = SRL_WINDOW_MAX_NS - 1},
         "sliding_counter:4294967295/316223999999999999ns"},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[SRL_POLICY_TEXT_MAX];
        int n = srl_policy_format(&cases[i].p, buf, sizeof buf);
        ck_assert_int_eq(n, (int)strlen(cases[i].text));
        ck_assert_str_eq(buf, cases[i].text);
    }
}
END_TEST

START_TEST(policy_format_needs_room_for_the_nul_and_writes_nothing_when_short)
{
    srl_policy p = {.algorithm = SRL_TOKEN_BUCKET, .permits = 100, .window_ns = 60 * SEC};   /* "token_bucket:100/1m", 19 chars */
    char buf[32];
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(srl_policy_format(&p, buf, 19), SRL_ENOBUFS);
    ck_assert_int_eq(srl_policy_format(&p, buf, 0), SRL_ENOBUFS);
    for (unsigned i = 0; i < sizeof buf; i++)
        ck_assert_int_eq(buf[i], 'x');
    ck_assert_int_eq(srl_policy_format(&p, buf, 20), 19);
    ck_assert_str_eq(buf, "token_bucket:100/1m");
    srl_policy bad = {.algorithm = SRL_TOKEN_BUCKET, .permits = 0, .window_ns = SEC};
    ck_assert_int_eq(srl_policy_format(&bad, buf, sizeof buf), SRL_EPOLICY);
    ck_assert_int_eq(srl_policy_format(NULL, buf, sizeof buf), SRL_EINVAL);
    ck_assert_int_eq(srl_policy_format(&p, NULL, 10), SRL_EINVAL);
}
END_TEST

START_TEST(policy_format_then_parse_returns_the_same_policy)
{
    /* windows built from every unit, awkward counts, and the extremes */
    static const uint64_t windows[] = {
        1, 2, 999, 1000, 1001, 999999, 1000000, 1500 * MS, SEC, 59 * SEC, 60 * SEC, 61 * SEC,
        90 * SEC, 3600 * SEC, 86400 * SEC, 86400 * SEC + 1, 365ull * 86400 * SEC,
        SRL_WINDOW_MAX_NS - 1, SRL_WINDOW_MAX_NS,
    };
    static const uint32_t permits[] = {1, 2, 3, 1000, 4096, 4097, 1u << 31, UINT32_MAX};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    unsigned checked = 0;
    for (int a = 0; a < 4; a++)
        for (unsigned w = 0; w < sizeof windows / sizeof windows[0] + 200; w++)
            for (unsigned k = 0; k < sizeof permits / sizeof permits[0]; k++) {
                uint64_t win;
                if (w < sizeof windows / sizeof windows[0]) {
                    win = windows[w];
                } else {
                    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
                    win = 1 + seed % SRL_WINDOW_MAX_NS;
                }
                srl_policy p = {.algorithm = (srl_algorithm)a, .permits = permits[k], .window_ns = win}, q;
                if (srl_policy_validate(&p) != 0) {
                    ck_assert(a == SRL_SLIDING_LOG && permits[k] > SRL_SLIDING_LOG_PERMITS_MAX);
                    continue;
                }
                char buf[SRL_POLICY_TEXT_MAX];
                int n = srl_policy_format(&p, buf, sizeof buf);
                ck_assert_int_gt(n, 0);
                ck_assert_int_eq(srl_policy_parse(buf, &q), 0);
                ck_assert_int_eq(q.algorithm, p.algorithm);
                ck_assert_uint_eq(q.permits, p.permits);
                ck_assert_uint_eq(q.window_ns, p.window_ns);
                checked++;
            }
    ck_assert_uint_gt(checked, 3000);
}
END_TEST

START_TEST(algorithm_names_match_the_parser_and_unknown_values_are_null)
{
    ck_assert_str_eq(srl_algorithm_name(SRL_TOKEN_BUCKET), "token_bucket");
    ck_assert_str_eq(srl_algorithm_name(SRL_SLIDING_LOG), "sliding_log");
    ck_assert_str_eq(srl_algorithm_name(SRL_SLIDING_COUNTER), "sliding_counter");
    ck_assert_str_eq(srl_algorithm_name(SRL_GCRA), "gcra");
    ck_assert_str_eq(srl_algorithm_name(SRL_CONCURRENCY), "concurrency");
    ck_assert_str_eq(srl_algorithm_name(SRL_FIXED_WINDOW), "fixed_window");
    ck_assert_ptr_null(srl_algorithm_name((srl_algorithm)6));
    ck_assert_ptr_null(srl_algorithm_name((srl_algorithm)-1));
    ck_assert_ptr_eq(srl__algo_get(SRL_TOKEN_BUCKET), &srl__algo_token_bucket);
    ck_assert_ptr_eq(srl__algo_get(SRL_SLIDING_LOG), &srl__algo_sliding_log);
    ck_assert_ptr_eq(srl__algo_get(SRL_SLIDING_COUNTER), &srl__algo_sliding_counter);
    ck_assert_ptr_eq(srl__algo_get(SRL_GCRA), &srl__algo_gcra);
    ck_assert_ptr_eq(srl__algo_get(SRL_CONCURRENCY), &srl__algo_concurrency);
    ck_assert_ptr_eq(srl__algo_get(SRL_FIXED_WINDOW), &srl__algo_fixed_window);
    ck_assert_ptr_null(srl__algo_get((srl_algorithm)6));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, policy_parse_accepts_every_documented_form, 0,
                        sizeof good / sizeof good[0]);
    tcase_add_loop_test(tc, policy_parse_rejects_malformed_text_with_epolicy_and_leaves_out_untouched,
                        0, sizeof bad / sizeof bad[0]);
    tcase_add_loop_test(tc, policy_parse_ex_names_the_bad_part_and_why, 0,
                        sizeof why / sizeof why[0]);
    tcase_add_loop_test(tc, policy_parse_ex_explains_every_malformed_text, 0,
                        sizeof bad / sizeof bad[0]);
    tcase_add_test(tc, policy_parse_ex_clears_the_error_on_success_and_quotes_long_parts_safely);
    tcase_add_test(tc, policy_parse_with_null_arguments_is_einval);
    tcase_add_test(tc, policy_validate_enforces_every_limit);
    tcase_add_test(tc, policy_format_writes_the_canonical_text_with_the_largest_exact_unit);
    tcase_add_test(tc, policy_format_needs_room_for_the_nul_and_writes_nothing_when_short);
    tcase_add_test(tc, policy_format_then_parse_returns_the_same_policy);
    tcase_add_test(tc, algorithm_names_match_the_parser_and_unknown_values_are_null);
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
