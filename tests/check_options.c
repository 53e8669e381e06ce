/*
 * check_options.c - the options of a limit: a burst apart from the rate
 * ("token_bucket:100/1m,burst=20") and a ban period (",penalty=10m"), in the
 * pure core, in compounds and in the stores.
 *
 *   text:        parse, canonical form (burst=N is no burst), every error.
 *   equivalence: N/W,burst=B decides exactly as B/(W*B/N) when that window
 *                is a whole number of ns (the documented equivalence): 40
 *                random traces of 500 requests and refunds per algorithm,
 *                decision field by field and state byte for byte.
 *   trace:       token_bucket:100/1m,burst=20 from a fresh key: 20 at once,
 *                the 21st waits exactly 600 ms, one more every 600 ms, a cost
 *                above the burst is SRL_ECOST; the same on a shared segment.
 *   penalty:     sliding_log:3/1m,penalty=10m: the 4th request bans the key
 *                for 10 min from that denial (retry_after says so) although
 *                the window frees a permit after 1 min; a peek never bans;
 *                a refund never lifts a ban; at rest only once it is over;
 *                in a compound only the limit that denied bans, and no
 *                other limit's state changes; the same on both stores.
 */
#include <check.h>
#include <string.h>

#include "srl.h"
#include "testutil.h"

static srl_policy parse(const char *text)
{
    srl_policy p;
    srl_policy_error e;
    ck_assert_msg(srl_policy_parse_ex(text, &p, &e) == 0, "%s: %s", text, e.message);
    return p;
}

static void refused(const char *text, const char *message)
{
    srl_policy p;
    srl_policy_error e;
    ck_assert_int_eq(srl_policy_parse_ex(text, &p, &e), SRL_EPOLICY);
    ck_assert_msg(strstr(e.message, message) != NULL, "%s: '%s'", text, e.message);
}

START_TEST(burst_is_parsed_formatted_canonically_and_refused_where_it_means_nothing)
{
    char buf[SRL_POLICY_TEXT_MAX];
    srl_policy p = parse("token_bucket:100/1m,burst=20");
    ck_assert_uint_eq(p.permits, 100);
    ck_assert_uint_eq(p.burst, 20);
    ck_assert_int_ge(srl_policy_format(&p, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "token_bucket:100/1m,burst=20");
    p = parse("gcra:10/1s,burst=500");
    ck_assert_int_ge(srl_policy_format(&p, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "gcra:10/1s,burst=500");
    p = parse("gcra:10/1s,burst=10");   /* the same as no burst */
    ck_assert_uint_eq(p.burst, 0);
    ck_assert_int_ge(srl_policy_format(&p, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "gcra:10/1s");
    refused("sliding_log:5/1m,burst=2", "burst= is for token_bucket and gcra");
    refused("sliding_counter:5/1m,burst=2", "burst= is for token_bucket and gcra");
    refused("token_bucket:5/1m,burst=0", "burst 0 must be 1..4294967295");
    refused("token_bucket:5/1m,burst=", "expected a number after 'burst='");
    refused("token_bucket:1/3660d,burst=2", "takes longer than 3660d to refill");
    refused("token_bucket:5/1m,burst=3,x", "trailing text ',x'");
    srl_policy bad = {.algorithm = SRL_SLIDING_LOG, .permits = 5, .window_ns = SEC, .burst = 2};
    ck_assert_int_eq(srl_policy_validate(&bad), SRL_EPOLICY);
    bad = (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = 5, .window_ns = SEC,
                       .penalty_max_s = 1};
    ck_assert_int_eq(srl_policy_validate(&bad), SRL_EPOLICY);
    srl_limits l;
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:10/1s,burst=3 + gcra:100/1h,burst=7", &l,
                                         NULL), 0);
    ck_assert_int_ge(srl_limits_format(&l, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "token_bucket:10/1s,burst=3 + gcra:100/1h,burst=7");
}
END_TEST

static uint64_t rng = 0x62757273ull;
static uint64_t rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return rng >> 33;
}

START_TEST(a_burst_decides_exactly_as_the_rate_scaled_to_its_window)
{
    static const char *const pairs[][2] = {
        {"token_bucket:100/1m,burst=20", "token_bucket:20/12s"},
        {"gcra:100/1m,burst=20", "gcra:20/12s"},
        {"token_bucket:4/1s,burst=10", "token_bucket:10/2500ms"},
        {"gcra:4/1s,burst=10", "gcra:10/2500ms"},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        srl_policy a = parse(pairs[k][0]), b = parse(pairs[k][1]);
        uint32_t cap = a.burst;
        for (int trace = 0; trace < 40; trace++) {
            uint64_t sa[4], sb[4], now = 1000 * SEC;
            ck_assert_int_eq(srl_state_init(&a, sa, now), 0);
            ck_assert_int_eq(srl_state_init(&b, sb, now), 0);
            for (int step = 0; step < 500; step++) {
                now += rnd() % 4 == 0 ? 0 : rnd() % (2 * SEC);
                uint32_t cost = 1 + (uint32_t)(rnd() % cap);
                srl_decision da, db;
                if (rnd() % 10 == 0) {
                    ck_assert_int_eq(srl_state_refund(&a, sa, now, cost), 0);
                    ck_assert_int_eq(srl_state_refund(&b, sb, now, cost), 0);
                } else {
                    ck_assert_int_eq(srl_state_acquire(&a, sa, now, cost, &da), 0);
                    ck_assert_int_eq(srl_state_acquire(&b, sb, now, cost, &db), 0);
                    ck_assert_msg(da.allowed == db.allowed && da.limit == db.limit &&
                                      da.remaining == db.remaining &&
                                      da.retry_after_ns == db.retry_after_ns &&
                                      da.reset_after_ns == db.reset_after_ns,
                                  "%s vs %s, trace %d step %d", pairs[k][0], pairs[k][1], trace,
                                  step);
                }
                /* The token bucket's frac is in units of its own window, so
                 * states differ by the scale; GCRA's one word is equal. */
                if (a.algorithm == SRL_GCRA)
                    ck_assert_int_eq(memcmp(sa, sb, 8), 0);
                ck_assert_int_eq(srl_state_at_rest(&a, sa, now), srl_state_at_rest(&b, sb, now));
            }
        }
    }
}
END_TEST

static void burst_trace(srl_limiter *lim, fake_clock *c)
{
    srl_decision d;
    for (uint32_t i = 0; i < 20; i++) {
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.limit, 20);
        ck_assert_uint_eq(d.remaining, 19 - i);
    }
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 600 * MS);
    ck_assert_uint_eq(d.reset_after_ns, 12 * SEC);
    c->now += 600 * MS;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 21, &d), SRL_ECOST);   /* above the burst */
    ck_assert_int_eq(srl_acquire(lim, "other", 5, 20, &d), 0);       /* the whole burst */
    ck_assert_int_eq(d.allowed, 1);
}

START_TEST(a_burst_of_20_refills_one_every_600ms_in_the_core_and_on_a_segment)
{
    srl_policy p = parse("token_bucket:100/1m,burst=20");
    uint64_t st[4];
    srl_decision d;
    ck_assert_int_eq(srl_state_init(&p, st, 0), 0);
    ck_assert_int_eq(srl_state_acquire(&p, st, 0, 21, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_acquire(&p, st, 0, 20, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.reset_after_ns, 12 * SEC);
    ck_assert_int_eq(srl_state_acquire(&p, st, 600 * MS - 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 1);
    for (int store = 0; store < 2; store++) {
        fake_clock *c = fake_clock_shared(5 * SEC);
        srl_config cfg;
        srl_config_init(&cfg);
        cfg.policy = p;
        cfg.capacity = 64;
        cfg.ticker = fake_ticker(c);
        srl_limiter *lim;
        ck_assert_int_eq(store == 0 ? srl_open_anonymous(&cfg, &lim) : srl_open_local(&cfg, &lim),
                         0);
        burst_trace(lim, c);
        srl_info info;
        ck_assert_int_eq(srl_info_get(lim, &info), 0);
        ck_assert_uint_eq(info.policy.burst, 20);
        srl_close(lim);
    }
}
END_TEST

START_TEST(penalty_is_parsed_formatted_and_refused_on_a_unit_limit)
{
    char buf[SRL_POLICY_TEXT_MAX];
    srl_policy p = parse("sliding_log:3/1m,penalty=10m");
    ck_assert_uint_eq(p.penalty_ns, 600 * SEC);
    ck_assert_int_ge(srl_policy_format(&p, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "sliding_log:3/1m,penalty=10m");
    p = parse("gcra:10/1s,burst=20,penalty=90s");
    ck_assert_int_ge(srl_policy_format(&p, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "gcra:10/1s,burst=20,penalty=90s");
    ck_assert_uint_eq(srl_state_size(&p), 8 + 8);   /* the ban's end follows the state */
    refused("token_bucket:5/1m,penalty=", "expected a penalty time, e.g. 15m");
    refused("token_bucket:5/1m,penalty=5x", "unknown unit 'x'");
    refused("token_bucket:5/1m,penalty=3661d", "penalty 3661d above 3660d");
    refused("concurrency:4,penalty=1m", "expected ',max_hold=WINDOW' or the end");
    srl_policy bad = {.algorithm = SRL_CONCURRENCY, .permits = 4, .penalty_ns = SEC};
    ck_assert_int_eq(srl_policy_validate(&bad), SRL_EPOLICY);
}
END_TEST

/* The ban on one state: the core through srl_state_*, or a store. */
static void penalty_trace_core(void)
{
    srl_policy p = parse("sliding_log:3/1m,penalty=10m");
    uint64_t st[8];
    srl_decision d;
    uint64_t t0 = 100 * SEC;
    ck_assert_int_eq(srl_state_init(&p, st, t0), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(srl_state_acquire(&p, st, t0, 1, &d), 0);
    ck_assert_int_eq(srl_state_peek(&p, st, t0, 1, &d), 0);   /* a peek never bans */
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 60 * SEC);
    ck_assert_int_eq(srl_state_acquire(&p, st, t0 + SEC, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 600 * SEC);
    ck_assert_int_eq(srl_state_acquire(&p, st, t0 + 120 * SEC, 1, &d), 0);  /* window free */
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 481 * SEC);              /* the ban is not extended */
    ck_assert_int_eq(srl_state_refund(&p, st, t0 + 120 * SEC, 3), 0);
    ck_assert_int_eq(srl_state_peek(&p, st, t0 + 120 * SEC, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);                              /* a refund lifts no ban */
    ck_assert_int_eq(srl_state_at_rest(&p, st, t0 + 600 * SEC), 0);
    ck_assert_int_eq(srl_state_at_rest(&p, st, t0 + 601 * SEC), 1);
    ck_assert_int_eq(srl_state_acquire(&p, st, t0 + 601 * SEC, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_state_valid(&p, st, t0 + 601 * SEC), 1);
}

static void penalty_trace_store(srl_limiter *lim, fake_clock *c)
{
    srl_decision d;
    uint64_t t0 = c->now;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
    }
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.binding, 1);
    ck_assert_uint_eq(d.retry_after_ns, 300 * SEC);
    c->now = t0 + 120 * SEC;   /* the log's window has passed: only the ban denies */
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 180 * SEC);
    /* The token bucket took exactly the 2 admitted: its slice is untouched by the ban. */
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    unsigned char st[256];
    ck_assert_int_eq(srl_key_state(lim, "k", 1, st, sizeof st), 0);
    ck_assert_int_eq(srl_state_peek(&info.limits.limit[0], st, t0, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 97);
    c->now = t0 + 300 * SEC;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(info.state_bytes, 24 + 8 + 8 * 2 + 8);
}

START_TEST(a_denial_bans_the_key_for_the_penalty_in_the_core_in_a_compound_and_in_stores)
{
    penalty_trace_core();
    for (int store = 0; store < 2; store++) {
        fake_clock *c = fake_clock_shared(50 * SEC);
        srl_config cfg;
        srl_config_init(&cfg);
        ck_assert_int_eq(srl_limits_parse_ex("token_bucket:100/1h + sliding_log:2/1m,penalty=5m",
                                             &cfg.limits, NULL), 0);
        cfg.capacity = 64;
        cfg.ticker = fake_ticker(c);
        srl_limiter *lim;
        ck_assert_int_eq(store == 0 ? srl_open_anonymous(&cfg, &lim) : srl_open_local(&cfg, &lim),
                         0);
        penalty_trace_store(lim, c);
        if (store == 0)
            ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
        srl_close(lim);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, burst_is_parsed_formatted_canonically_and_refused_where_it_means_nothing);
    tcase_add_test(tc, a_burst_decides_exactly_as_the_rate_scaled_to_its_window);
    tcase_add_test(tc, a_burst_of_20_refills_one_every_600ms_in_the_core_and_on_a_segment);
    tcase_add_test(tc, penalty_is_parsed_formatted_and_refused_on_a_unit_limit);
    tcase_add_test(tc, a_denial_bans_the_key_for_the_penalty_in_the_core_in_a_compound_and_in_stores);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
