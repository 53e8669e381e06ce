/*
 * check_limits.c - compound policies (srl_limits) in the pure core.
 *
 * The compound is checked against models written here, not the library's
 * compound code:
 *   - per-limit model: each limit runs on its own state through the
 *     single-limit srl_state_* calls (tested exactly elsewhere); the model
 *     admits only when every limit admits, then takes from all, and picks
 *     the binding limit itself;
 *   - timestamp model: for sliding_log compounds, an independent model that
 *     keeps the admitted timestamps and admits iff, for every limit, the
 *     admissions in (now - window, now] plus cost fit in N.
 * Random traces from a fixed seed; the text round trip and its errors.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "srl.h"
#include "testutil.h"
#include "algotest.h"

#define STATE_BYTES (SRL_LIMITS_MAX * (8 + 8 * 64) + 64)

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return rng_state >> 33;
}

static srl_limits random_limits(int only_log)
{
    srl_limits l;
    memset(&l, 0, sizeof l);
    l.count = 1 + (uint32_t)(rnd() % SRL_LIMITS_MAX);
    for (uint32_t i = 0; i < l.count; i++) {
        l.limit[i].algorithm = only_log ? SRL_SLIDING_LOG : (srl_algorithm)(rnd() % 4);
        l.limit[i].permits = 1 + (uint32_t)(rnd() % 12);
        l.limit[i].window_ns = (1 + rnd() % 20) * 100 * MS;
    }
    return l;
}

static uint32_t min_permits(const srl_limits *l)
{
    uint32_t m = UINT32_MAX;
    for (uint32_t i = 0; i < l->count; i++)
        if (l->limit[i].permits < m)
            m = l->limit[i].permits;
    return m;
}

/* The per-limit model's decision for one request. */
static srl_decision model_step(const srl_limits *l, uint64_t (*st)[STATE_BYTES / 8],
                               uint64_t now, uint32_t cost)
{
    srl_decision e[SRL_LIMITS_MAX] = {0};   /* count >= 1: e[0] is always set */
    int all = 1;
    for (uint32_t i = 0; i < l->count; i++) {
        e[i] = peek(&l->limit[i], st[i], now, cost);
        all = all && e[i].allowed;
    }
    if (all)
        for (uint32_t i = 0; i < l->count; i++)
            e[i] = acq(&l->limit[i], st[i], now, cost);
    uint32_t b = 0;
    for (uint32_t i = 1; i < l->count; i++) {
        int more;
        if (e[i].allowed != e[b].allowed)
            more = !e[i].allowed;
        else if (!e[i].allowed)
            more = e[i].retry_after_ns > e[b].retry_after_ns;
        else
            more = e[i].remaining < e[b].remaining;
        if (more)
            b = i;
    }
    srl_decision d = e[b];
    d.binding = b;
    for (uint32_t i = 0; i < l->count; i++) {
        if (e[i].remaining < d.remaining)
            d.remaining = e[i].remaining;
        if (e[i].reset_after_ns > d.reset_after_ns)
            d.reset_after_ns = e[i].reset_after_ns;
    }
    d.allowed = all;
    return d;
}

START_TEST(compound_equals_the_per_limit_model_on_random_traces)
{
    rng_state = 12345 + (uint64_t)_i;
    for (int trial = 0; trial < 200; trial++) {
        srl_limits l = random_limits(0);
        ck_assert_int_eq(srl_limits_validate(&l), 0);
        size_t size = srl_limits_state_size(&l);
        ck_assert_uint_le(size, STATE_BYTES);
        ck_assert_uint_eq(size % 8, 0);
        static uint64_t st[STATE_BYTES / 8];
        static uint64_t model[SRL_LIMITS_MAX][STATE_BYTES / 8];
        uint64_t now = 1000 * SEC;
        ck_assert_int_eq(srl_limits_state_init(&l, st, now), 0);
        for (uint32_t i = 0; i < l.count; i++)
            ck_assert_int_eq(srl_state_init(&l.limit[i], model[i], now), 0);
        uint32_t cmax = min_permits(&l);
        int admitted = 0, denied = 0;
        for (int step = 0; step < 300; step++) {
            now += rnd() % 4 == 0 ? rnd() % (500 * MS) : rnd() % (20 * MS);
            uint32_t cost = 1 + (uint32_t)(rnd() % (cmax < 3 ? cmax : 3));
            srl_decision want = model_step(&l, model, now, cost);
            unsigned char before[STATE_BYTES];
            memcpy(before, st, size);
            srl_decision got;
            memset(&got, 0x5a, sizeof got);
            ck_assert_int_eq(srl_limits_state_acquire(&l, st, now, cost, &got), 0);
            ck_assert_msg(decision_eq(&got, &want) && got.binding == want.binding,
                          "trial %d step %d: got allowed=%d rem=%u retry=%llu bind=%u, "
                          "want allowed=%d rem=%u retry=%llu bind=%u", trial, step,
                          got.allowed, got.remaining, (unsigned long long)got.retry_after_ns,
                          got.binding, want.allowed, want.remaining,
                          (unsigned long long)want.retry_after_ns, want.binding);
            if (!got.allowed) {
                denied++;
                ck_assert_int_eq(memcmp(before, st, size), 0); /* took from none */
            } else {
                admitted++;
            }
            /* each limit's slice equals the model's own state */
            for (uint32_t i = 0; i < l.count; i++)
                ck_assert_int_eq(memcmp((char *)st + srl_limits_state_offset(&l, i), model[i],
                                        srl_state_size(&l.limit[i])), 0);
            ck_assert_int_eq(srl_limits_state_valid(&l, st, now), 1);
        }
        ck_assert_int_gt(admitted, 0);
        if (l.count > 1)
            ck_assert_int_gt(admitted + denied, 0);
    }
}
END_TEST

/* Independent model for sliding_log compounds: the admitted timestamps. */
START_TEST(sliding_log_compound_equals_the_timestamp_model)
{
    rng_state = 777 + (uint64_t)_i;
    int total_denied = 0, bind_nonzero = 0;
    for (int trial = 0; trial < 200; trial++) {
        srl_limits l = random_limits(1);
        static uint64_t st[STATE_BYTES / 8];
        static uint64_t at[4000];
        static uint32_t costs[4000];
        int n = 0;
        uint64_t now = 50 * SEC;
        ck_assert_int_eq(srl_limits_state_init(&l, st, now), 0);
        uint32_t cmax = min_permits(&l);
        for (int step = 0; step < 300; step++) {
            now += rnd() % 4 == 0 ? rnd() % (500 * MS) : rnd() % (20 * MS);
            uint32_t cost = 1 + (uint32_t)(rnd() % (cmax < 2 ? cmax : 2));
            int want = 1;
            for (uint32_t i = 0; i < l.count; i++) {
                uint64_t used = 0;
                for (int k = 0; k < n; k++)
                    if (at[k] + l.limit[i].window_ns > now)
                        used += costs[k];
                if (used + cost > l.limit[i].permits)
                    want = 0;
            }
            srl_decision d;
            ck_assert_int_eq(srl_limits_state_acquire(&l, st, now, cost, &d), 0);
            ck_assert_int_eq(d.allowed, want);
            ck_assert_uint_lt(d.binding, l.count);
            if (want) {
                at[n] = now;
                costs[n] = cost;
                n++;
            } else {
                total_denied++;
                bind_nonzero += d.binding != 0;
                ck_assert_uint_eq(d.limit, l.limit[d.binding].permits);
                ck_assert_uint_gt(d.retry_after_ns, 0);
            }
        }
    }
    ck_assert_int_gt(total_denied, 100);
    ck_assert_int_gt(bind_nonzero, 10); /* the binding index really varies */
}
END_TEST

START_TEST(denied_by_the_second_limit_takes_from_the_first_too_nothing)
{
    srl_limits l;
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:10/1s + token_bucket:3/1d", &l, NULL), 0);
    static uint64_t st[STATE_BYTES / 8];
    ck_assert_int_eq(srl_limits_state_init(&l, st, 0), 0);
    srl_decision d;
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(srl_limits_state_acquire(&l, st, 0, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.remaining, 2 - (uint32_t)k);
        ck_assert_uint_eq(d.binding, 1);
        ck_assert_uint_eq(d.limit, 3);
    }
    ck_assert_int_eq(srl_limits_state_acquire(&l, st, 0, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.binding, 1);
    ck_assert_uint_eq(d.retry_after_ns, 86400 * SEC / 3);
    /* the first limit still has 7 of 10 (6 after a peeked cost 1): the
     * denial took nothing from it */
    srl_decision one = peek(&l.limit[0], st, 0, 1);
    ck_assert_uint_eq(one.remaining, 6);
    ck_assert_int_eq(srl_limits_state_acquire(&l, st, 0, 11, &d), SRL_ECOST);
    ck_assert_int_eq(srl_limits_state_acquire(&l, st, 0, 4, &d), SRL_ECOST);
    ck_assert_int_eq(srl_limits_state_refund(&l, st, 0, 2), 0);
    one = peek(&l.limit[0], st, 0, 1);
    ck_assert_uint_eq(one.remaining, 8);
    ck_assert_int_eq(srl_limits_state_peek(&l, st, 0, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 1);
    ck_assert_uint_eq(d.binding, 1);
}
END_TEST

START_TEST(text_round_trips_canonically)
{
    static const char *in[][2] = {
        {"10/1s", "token_bucket:10/1s"},
        {"token_bucket:10/1s + token_bucket:1000/1d", "token_bucket:10/1s + token_bucket:1000/1d"},
        {"gcra:5/1000ms+sliding_log:100/60m", "gcra:5/1s + sliding_log:100/1h"},
        {"  1/1s +2/2s+ 3/3s +   sliding_counter:4/4s ",
         "token_bucket:1/1s + token_bucket:2/2s + token_bucket:3/3s + sliding_counter:4/4s"},
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        srl_limits l, again;
        srl_policy_error err;
        ck_assert_int_eq(srl_limits_parse_ex(in[i][0], &l, &err), 0);
        ck_assert_str_eq(err.message, "");
        char buf[SRL_LIMITS_TEXT_MAX];
        int n = srl_limits_format(&l, buf, sizeof buf);
        ck_assert_int_eq(n, (int)strlen(in[i][1]));
        ck_assert_str_eq(buf, in[i][1]);
        ck_assert_int_eq(srl_limits_parse_ex(buf, &again, NULL), 0);
        ck_assert_int_eq(memcmp(&l, &again, sizeof l), 0);
        ck_assert_int_eq(srl_limits_format(&l, buf, (size_t)n), SRL_ENOBUFS);
    }
}
END_TEST

START_TEST(text_errors_name_the_bad_part_in_the_whole_text)
{
    static const struct { const char *text; uint32_t off, len; const char *msg; } cases[] = {
        {"10/1s + tokenbucket:5/1s", 8, 11, "unknown algorithm 'tokenbucket'"},
        {"10/1s + ", 8, 0, "empty limit"},
        {"+10/1s", 0, 0, "empty limit"},
        {"10/1s + 5/1min", 11, 3, "unknown unit 'min'"},
        {"1/1s+2/1s+3/1s+4/1s+5/1s", 20, 4, "more than 4 limits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        srl_limits l;
        memset(&l, 0x77, sizeof l);
        srl_limits keep = l;
        srl_policy_error err;
        ck_assert_int_eq(srl_limits_parse_ex(cases[i].text, &l, &err), SRL_EPOLICY);
        ck_assert_msg(strstr(err.message, cases[i].msg) != NULL, "%s: %s", cases[i].text,
                      err.message);
        ck_assert_uint_eq(err.offset, cases[i].off);
        ck_assert_uint_eq(err.length, cases[i].len);
        ck_assert_int_eq(memcmp(&l, &keep, sizeof l), 0);
    }
    ck_assert_int_eq(srl_limits_parse_ex(NULL, NULL, NULL), SRL_EINVAL);
    srl_limits bad;
    memset(&bad, 0, sizeof bad);
    ck_assert_int_eq(srl_limits_validate(&bad), SRL_EPOLICY);
    ck_assert_uint_eq(srl_limits_state_size(&bad), 0);
    bad.count = SRL_LIMITS_MAX + 1;
    ck_assert_int_eq(srl_limits_validate(&bad), SRL_EPOLICY);
}
END_TEST

START_TEST(header_helpers_emit_one_item_per_limit_and_the_binding_one)
{
    srl_limits l;
    char buf[512];
    ck_assert_int_eq(srl_limits_parse_ex("10/1s + gcra:1000/1d", &l, NULL), 0);
    int n = srl_format_ratelimit_policies(&l, "api", buf, sizeof buf);
    ck_assert_str_eq(buf, "\"api.0\";q=10;w=1, \"api.1\";q=1000;w=86400");
    ck_assert_int_eq(n, (int)strlen(buf));
    ck_assert_int_eq(srl_format_ratelimit_policies(&l, "api", buf, (size_t)n), SRL_ENOBUFS);
    srl_decision d = {.allowed = 0, .limit = 1000, .remaining = 0, .retry_after_ns = 1500 * MS,
                      .binding = 1};
    ck_assert_int_eq(srl_format_ratelimit_binding(&l, &d, NULL, buf, sizeof buf), 19);
    ck_assert_str_eq(buf, "\"default.1\";r=0;t=2");
    d.binding = 2;
    ck_assert_int_eq(srl_format_ratelimit_binding(&l, &d, NULL, buf, sizeof buf), SRL_EINVAL);
    ck_assert_int_eq(srl_limits_parse_ex("10/1m", &l, NULL), 0);
    ck_assert_int_gt(srl_format_ratelimit_policies(&l, NULL, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "\"default\";q=10;w=60");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, compound_equals_the_per_limit_model_on_random_traces, 0, 4);
    tcase_add_loop_test(tc, sliding_log_compound_equals_the_timestamp_model, 0, 4);
    tcase_add_test(tc, denied_by_the_second_limit_takes_from_the_first_too_nothing);
    tcase_add_test(tc, text_round_trips_canonically);
    tcase_add_test(tc, header_helpers_emit_one_item_per_limit_and_the_binding_one);
    tcase_add_test(tc, text_errors_name_the_bad_part_in_the_whole_text);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
