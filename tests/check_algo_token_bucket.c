/*
 * check_algo_token_bucket.c - the token bucket, through the public pure core.
 *
 * A fixed 5/s trace of two keys, alice and bob, decision by decision (including when bob and alice come to rest),
 * then boundary tables: cost > 1, cost == permits, errors that change
 * nothing, denials that change nothing, years of idleness, a ticker going
 * backwards, the largest permits and window, exact waits, at-rest and
 * validity.  States are plain bytes, so "unchanged" is checked with memcmp.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "srl.h"
#include "testutil.h"
#include "algotest.h"

/* The documented layout (algo_token_bucket.c), to build corrupt states. */
struct tb_state {
    uint64_t last_ns;
    uint64_t frac;
    uint32_t tokens;
    uint32_t pad;
};

static const srl_policy five_per_s = {.algorithm = SRL_TOKEN_BUCKET, .permits = 5, .window_ns = 1 * SEC};

START_TEST(token_bucket_follows_the_two_key_trace_at_five_per_second)
{
    struct tb_state alice, bob;
    ck_assert_uint_eq(srl_state_size(&five_per_s), sizeof alice);
    ck_assert_int_eq(srl_state_init(&five_per_s, &alice, 0), 0);
    for (uint32_t i = 0; i < 5; i++) {
        srl_decision d = acq(&five_per_s, &alice, 0, 1);
        ck_allowed(d, 4 - i);
        ck_assert_uint_eq(d.limit, 5);
        ck_assert_uint_eq(d.flags, 0);
    }
    ck_denied(acq(&five_per_s, &alice, 0, 1), 200 * MS);          /* #6 */
    ck_denied(acq(&five_per_s, &alice, 100 * MS, 1), 100 * MS);   /* #7 */
    ck_allowed(acq(&five_per_s, &alice, 300 * MS, 1), 0);         /* #8 */
    ck_denied(acq(&five_per_s, &alice, 300 * MS, 1), 100 * MS);   /* #9 */
    ck_assert_int_eq(srl_state_init(&five_per_s, &bob, 300 * MS), 0);
    ck_allowed(acq(&five_per_s, &bob, 300 * MS, 1), 4);           /* bob #1 */
    ck_allowed(acq(&five_per_s, &alice, 1300 * MS, 1), 4);        /* #10 */
    ck_assert_int_eq(srl_state_at_rest(&five_per_s, &bob, 1300 * MS), 1);
    ck_assert_int_eq(srl_state_at_rest(&five_per_s, &alice, 1300 * MS), 0);
    ck_assert_int_eq(srl_state_at_rest(&five_per_s, &alice, 1500 * MS - 1), 0);
    ck_assert_int_eq(srl_state_at_rest(&five_per_s, &alice, 1500 * MS), 1);
}
END_TEST

START_TEST(token_bucket_reports_exact_reset_after_and_remaining)
{
    struct tb_state s;
    srl_state_init(&five_per_s, &s, 0);
    srl_decision d = acq(&five_per_s, &s, 0, 1);
    ck_assert_uint_eq(d.reset_after_ns, 200 * MS);
    d = acq(&five_per_s, &s, 0, 4);
    ck_allowed(d, 0);
    ck_assert_uint_eq(d.reset_after_ns, 1 * SEC);
    /* half a token at 100 ms: 0 remaining, 900 ms to full, 100 ms to one */
    d = peek(&five_per_s, &s, 100 * MS, 1);
    ck_denied(d, 100 * MS);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_uint_eq(d.reset_after_ns, 900 * MS);
    /* cost 3 at 100 ms waits for 2.5 more tokens */
    ck_denied(peek(&five_per_s, &s, 100 * MS, 3), 500 * MS);
    /* a fresh bucket is full: nothing to reset */
    srl_state_init(&five_per_s, &s, 7);
    d = peek(&five_per_s, &s, 7, 1);
    ck_allowed(d, 4);
    ck_assert_uint_eq(d.reset_after_ns, 200 * MS);
}
END_TEST

START_TEST(token_bucket_cost_above_one_takes_that_many_tokens)
{
    srl_policy p = {.algorithm = SRL_TOKEN_BUCKET, .permits = 10, .window_ns = 1 * SEC};
    struct tb_state s, before;
    srl_state_init(&p, &s, 0);
    ck_allowed(acq(&p, &s, 0, 4), 6);
    before = s;
    srl_decision d = acq(&p, &s, 0, 7);
    ck_denied_leaving(d, 6, 100 * MS);            /* one token short, 10 per second */
    ck_assert_uint_eq(d.remaining, 6);
    ck_assert_mem_eq(&s, &before, sizeof s);
    ck_allowed(acq(&p, &s, 0, 6), 0);
    ck_denied(acq(&p, &s, 0, 10), 1 * SEC);
}
END_TEST

START_TEST(token_bucket_cost_equal_to_permits_passes_only_when_full)
{
    srl_policy p = {.algorithm = SRL_TOKEN_BUCKET, .permits = 8, .window_ns = 8 * SEC};
    struct tb_state s;
    srl_state_init(&p, &s, 0);
    ck_allowed(acq(&p, &s, 0, 8), 0);
    ck_denied(acq(&p, &s, 1, 8), 8 * SEC - 1);
    ck_denied_leaving(acq(&p, &s, 8 * SEC - 1, 8), 7, 1);
    ck_allowed(acq(&p, &s, 8 * SEC, 8), 0);
}
END_TEST

START_TEST(token_bucket_cost_zero_or_above_permits_is_ecost_and_writes_nothing)
{
    struct tb_state s, before;
    srl_state_init(&five_per_s, &s, 0);
    acq(&five_per_s, &s, 0, 2);
    before = s;
    srl_decision d, dbefore;
    memset(&d, 0x77, sizeof d);
    dbefore = d;
    ck_assert_int_eq(srl_state_acquire(&five_per_s, &s, 10, 0, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_acquire(&five_per_s, &s, 10, 6, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_acquire(&five_per_s, &s, 10, UINT32_MAX, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_peek(&five_per_s, &s, 10, 6, &d), SRL_ECOST);
    ck_assert_mem_eq(&s, &before, sizeof s);
    ck_assert_mem_eq(&d, &dbefore, sizeof d);
}
END_TEST

START_TEST(token_bucket_denied_request_and_peek_leave_state_bytes_identical)
{
    struct tb_state s, before;
    srl_state_init(&five_per_s, &s, 0);
    acq(&five_per_s, &s, 0, 5);
    acq(&five_per_s, &s, 300 * MS, 1);   /* 0 tokens, half a token of frac */
    before = s;
    for (uint64_t t = 300 * MS; t < 400 * MS; t += 7 * MS)
        ck_assert_int_eq(acq(&five_per_s, &s, t, 1).allowed, 0);
    ck_assert_mem_eq(&s, &before, sizeof s);
    /* peek of an allowed request changes nothing either */
    ck_assert_int_eq(peek(&five_per_s, &s, 10 * SEC, 5).allowed, 1);
    ck_assert_mem_eq(&s, &before, sizeof s);
}
END_TEST

START_TEST(token_bucket_idle_for_years_still_caps_at_permits)
{
    srl_policy p = {.algorithm = SRL_TOKEN_BUCKET, .permits = 1000, .window_ns = 1 * SEC};
    struct tb_state s;
    srl_state_init(&p, &s, 0);
    acq(&p, &s, 0, 1000);
    uint64_t later = (1ull << 62) + 12345;
    ck_allowed(acq(&p, &s, later, 1000), 0);
    ck_denied(acq(&p, &s, later, 1), 1 * MS);
    /* and again, at the end of the clock's range */
    ck_allowed(acq(&p, &s, UINT64_MAX - 1, 1000), 0);
    ck_denied(acq(&p, &s, UINT64_MAX - 1, 1), 1 * MS);
    ck_assert_int_eq(srl_state_valid(&p, &s, UINT64_MAX - 1), 1);
}
END_TEST

START_TEST(token_bucket_clock_going_backwards_counts_as_no_time_and_gives_no_tokens)
{
    struct tb_state s, before;
    srl_state_init(&five_per_s, &s, 10 * SEC);
    acq(&five_per_s, &s, 10 * SEC, 5);
    before = s;
    /* no refill until the ticker passes 10 s again: waits are in ticker time */
    srl_decision d = acq(&five_per_s, &s, 5 * SEC, 1);
    ck_denied(d, 5 * SEC + 200 * MS);
    ck_assert_uint_eq(d.reset_after_ns, 5 * SEC + 1 * SEC);
    ck_denied(acq(&five_per_s, &s, 0, 1), 10 * SEC + 200 * MS);
    ck_denied(peek(&five_per_s, &s, 10 * SEC + 200 * MS - 1, 1), 1);
    ck_assert_mem_eq(&s, &before, sizeof s);
    /* 200 ms after the last refill: exactly one token, not the 5 s "earned" going back */
    ck_allowed(acq(&five_per_s, &s, 10 * SEC + 200 * MS, 1), 0);
    ck_denied(acq(&five_per_s, &s, 10 * SEC + 200 * MS, 1), 200 * MS);
    /* an admission at an earlier time does not move last_ns back */
    struct tb_state t;
    srl_state_init(&five_per_s, &t, 10 * SEC);
    d = acq(&five_per_s, &t, 3 * SEC, 1);
    ck_allowed(d, 4);
    ck_assert_uint_eq(d.reset_after_ns, 7 * SEC + 200 * MS);
    ck_assert_uint_eq(t.last_ns, 10 * SEC);
    ck_assert_uint_eq(t.tokens, 4);
    /* a full bucket whose last_ns is ahead is not at rest until the ticker catches up */
    ck_assert_int_eq(srl_state_at_rest(&five_per_s, &before, 9 * SEC), 0);
}
END_TEST

START_TEST(token_bucket_largest_permits_and_window_do_not_overflow)
{
    static const uint64_t windows[] = {365ull * 86400 * SEC, SRL_WINDOW_MAX_NS};
    for (unsigned w = 0; w < 2; w++) {
        srl_policy p = {.algorithm = SRL_TOKEN_BUCKET, .permits = UINT32_MAX, .window_ns = windows[w]};
        struct tb_state s;
        srl_state_init(&p, &s, 0);
        uint64_t admitted = 0;
        uint32_t chunk = 1u << 31;
        srl_decision d = acq(&p, &s, 0, chunk);
        ck_allowed(d, UINT32_MAX - chunk);
        admitted += chunk;
        d = acq(&p, &s, 0, UINT32_MAX - chunk);
        ck_allowed(d, 0);
        admitted += UINT32_MAX - chunk;
        ck_assert_uint_eq(admitted, UINT32_MAX);
        ck_assert_uint_eq(d.reset_after_ns, windows[w]);
        d = acq(&p, &s, 0, 1);
        /* one token is W / (2^32-1) ns, rounded up */
        ck_denied(d, windows[w] / UINT32_MAX + (windows[w] % UINT32_MAX != 0));
        d = peek(&p, &s, 0, UINT32_MAX);
        ck_denied(d, windows[w]);
        /* a whole window later it is exactly full again */
        ck_allowed(acq(&p, &s, windows[w], UINT32_MAX), 0);
        ck_assert_int_eq(srl_state_valid(&p, &s, windows[w]), 1);
    }
}
END_TEST

START_TEST(token_bucket_retry_after_is_the_exact_first_passing_time)
{
    /* windows not divisible by permits, so every wait rounds */
    static const srl_policy ps[] = {
        {.algorithm = SRL_TOKEN_BUCKET, .permits = 3, .window_ns = 1 * SEC}, {.algorithm = SRL_TOKEN_BUCKET, .permits = 7, .window_ns = 1000003}, {.algorithm = SRL_TOKEN_BUCKET, .permits = 1, .window_ns = 1},
        {.algorithm = SRL_TOKEN_BUCKET, .permits = 1000, .window_ns = 999}, {.algorithm = SRL_TOKEN_BUCKET, .permits = UINT32_MAX, .window_ns = SRL_WINDOW_MAX_NS},
    };
    uint64_t seed = 88172645463325252ull;
    for (unsigned k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        const srl_policy *p = &ps[k];
        struct tb_state s;
        uint64_t now = 1000;
        srl_state_init(p, &s, now);
        for (int i = 0; i < 2000; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            uint32_t cost = 1 + (uint32_t)(seed % p->permits);
            if (seed & 1)
                now += (seed >> 8) % (p->window_ns / 2 + 1) % (1ull << 51); /* stays below 2^62 */
            /* one request in eight comes from a ticker that lags behind */
            uint64_t back = (seed >> 24) % 8 == 0 ? (seed >> 3) % (p->window_ns + 1) : 0;
            uint64_t t = now > back ? now - back : 0;
            srl_decision d = acq(p, &s, t, cost);
            if (d.allowed) {
                ck_assert_msg(srl_state_at_rest(p, &s, t + d.reset_after_ns) == 1, "k=%u i=%d t=%llu reset=%llu tokens=%u frac=%llu last=%llu", k, i, (unsigned long long)t, (unsigned long long)d.reset_after_ns, s.tokens, (unsigned long long)s.frac, (unsigned long long)s.last_ns);
                if (d.reset_after_ns > 0)
                    ck_assert_int_eq(srl_state_at_rest(p, &s, t + d.reset_after_ns - 1), 0);
                continue;
            }
            ck_assert_uint_gt(d.retry_after_ns, 0);
            ck_assert_int_eq(peek(p, &s, t + d.retry_after_ns - 1, cost).allowed, 0);
            ck_assert_int_eq(peek(p, &s, t + d.retry_after_ns, cost).allowed, 1);
            ck_assert_int_eq(srl_state_valid(p, &s, now), 1);
        }
    }
}
END_TEST

START_TEST(token_bucket_is_at_rest_exactly_when_it_decides_like_a_fresh_state)
{
    srl_policy p = {.algorithm = SRL_TOKEN_BUCKET, .permits = 4, .window_ns = 4 * SEC};
    struct tb_state s, fresh;
    srl_state_init(&p, &s, 0);
    acq(&p, &s, 0, 1);
    uint64_t rest = 1 * SEC;
    for (uint64_t t = rest - 2; t <= rest + 2; t++) {
        srl_state_init(&p, &fresh, t);
        srl_decision a = peek(&p, &s, t, 4), b = peek(&p, &fresh, t, 4);
        int same = decision_eq(&a, &b);
        ck_assert_int_eq(srl_state_at_rest(&p, &s, t), t >= rest);
        ck_assert_int_eq(same, t >= rest);
    }
    /* fresh is at rest; a stored last_ns in the future is not */
    srl_state_init(&p, &fresh, 100);
    ck_assert_int_eq(srl_state_at_rest(&p, &fresh, 100), 1);
    ck_assert_int_eq(srl_state_at_rest(&p, &fresh, 99), 0);
}
END_TEST

START_TEST(token_bucket_valid_rejects_every_corrupted_field)
{
    struct tb_state s;
    srl_state_init(&five_per_s, &s, 0);
    ck_assert_int_eq(srl_state_valid(&five_per_s, &s, 0), 1);
    struct tb_state bad[4] = {s, s, s, s};
    bad[0].tokens = 6;
    bad[1].tokens = 2, bad[1].frac = 1 * SEC;
    bad[2].frac = 1;               /* full, yet a partial token */
    bad[3].pad = 1;
    for (int i = 0; i < 4; i++)
        ck_assert_msg(srl_state_valid(&five_per_s, &bad[i], 0) == 0, "corruption %d accepted", i);
    s.tokens = 2, s.frac = 1 * SEC - 1;
    ck_assert_int_eq(srl_state_valid(&five_per_s, &s, 0), 1);
}
END_TEST

START_TEST(token_bucket_last_ns_is_the_last_admitted_request)
{
    struct tb_state s;
    srl_state_init(&five_per_s, &s, 50);
    ck_assert_uint_eq(srl__algo_token_bucket.last_ns(&five_per_s, &s), 0);
    acq(&five_per_s, &s, 70, 1);
    ck_assert_uint_eq(srl__algo_token_bucket.last_ns(&five_per_s, &s), 70);
    acq(&five_per_s, &s, 90, 4);
    acq(&five_per_s, &s, 95, 1); /* denied */
    ck_assert_uint_eq(srl__algo_token_bucket.last_ns(&five_per_s, &s), 90);
}
END_TEST

/* The refill and the waits by the definition, in plain 128-bit arithmetic
 * (what the library computed before it divided with srl__div128_64). */
static void model_level(const srl_policy *p, const struct tb_state *s, uint64_t now,
                        uint32_t *tokens, uint64_t *frac)
{
    uint64_t elapsed = now > s->last_ns ? now - s->last_ns : 0;
    srl__u128 units = (srl__u128)s->frac + (srl__u128)elapsed * p->permits;
    srl__u128 add = units / p->window_ns;
    if (s->tokens >= p->permits || add >= (srl__u128)(p->permits - s->tokens)) {
        *tokens = p->permits;
        *frac = 0;
    } else {
        *tokens = s->tokens + (uint32_t)add;
        *frac = (uint64_t)(units % p->window_ns);
    }
}

static uint64_t model_wait(const srl_policy *p, uint32_t tokens, uint64_t frac, uint32_t want)
{
    if (tokens >= want)
        return 0;
    srl__u128 missing = (srl__u128)(want - tokens) * p->window_ns - frac;
    srl__u128 q = missing / p->permits + (missing % p->permits != 0);
    return q > UINT64_MAX ? UINT64_MAX : (uint64_t)q;
}

START_TEST(token_bucket_refill_and_waits_match_plain_128_bit_arithmetic_at_every_magnitude)
{
    /* Elapsed times from 1 ns to 2^62 ns against permits and windows up to
     * the largest, so units fall below 2^64, above it with the quotient
     * below 2^64, and above W * 2^64 (a refill of >= 2^64 tokens). */
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 20000; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        uint32_t permits = (seed & 1) ? UINT32_MAX - (uint32_t)(seed >> 40) % 3
                                      : 1 + (uint32_t)((seed >> 8) % ((1ull << (seed >> 58 & 31)) + 1));
        uint64_t window = 1 + (((seed >> 3) % SRL_WINDOW_MAX_NS) >> ((seed >> 20 & 63) % 60));
        srl_policy p = {.algorithm = SRL_TOKEN_BUCKET, .permits = permits, .window_ns = window};
        struct tb_state s = {.last_ns = 1u << 20, .frac = (seed >> 5) % window,
                             .tokens = (uint32_t)((seed >> 11) % permits), .pad = 0};
        if (srl_state_valid(&p, &s, s.last_ns) != 1)
            continue;   /* frac != 0 with a full bucket, say: not a state it makes */
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        uint64_t now = s.last_ns + ((seed >> 2) >> (seed & 63) % 62);
        uint32_t tokens;
        uint64_t frac;
        model_level(&p, &s, now, &tokens, &frac);
        uint32_t cost = 1 + (uint32_t)((seed >> 9) % permits);
        struct tb_state before = s;
        srl_decision d = acq(&p, &s, now, cost);
        ck_assert_msg(d.allowed == (tokens >= cost), "i=%d permits=%u window=%llu", i, permits,
                      (unsigned long long)window);
        ck_assert_uint_eq(d.remaining, d.allowed ? tokens - cost : tokens);
        if (d.allowed) {
            ck_assert_uint_eq(s.tokens, tokens - cost);
            ck_assert_uint_eq(s.frac, frac);
            ck_assert_uint_eq(d.reset_after_ns, model_wait(&p, tokens - cost, frac, permits));
        } else {
            ck_assert_int_eq(memcmp(&s, &before, sizeof s), 0);
            ck_assert_uint_eq(d.retry_after_ns, model_wait(&p, tokens, frac, cost));
            ck_assert_uint_eq(d.reset_after_ns, model_wait(&p, tokens, frac, permits));
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("algo_token_bucket");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, token_bucket_follows_the_two_key_trace_at_five_per_second);
    tcase_add_test(tc, token_bucket_reports_exact_reset_after_and_remaining);
    tcase_add_test(tc, token_bucket_cost_above_one_takes_that_many_tokens);
    tcase_add_test(tc, token_bucket_cost_equal_to_permits_passes_only_when_full);
    tcase_add_test(tc, token_bucket_cost_zero_or_above_permits_is_ecost_and_writes_nothing);
    tcase_add_test(tc, token_bucket_denied_request_and_peek_leave_state_bytes_identical);
    tcase_add_test(tc, token_bucket_idle_for_years_still_caps_at_permits);
    tcase_add_test(tc, token_bucket_clock_going_backwards_counts_as_no_time_and_gives_no_tokens);
    tcase_add_test(tc, token_bucket_largest_permits_and_window_do_not_overflow);
    tcase_add_test(tc, token_bucket_retry_after_is_the_exact_first_passing_time);
    tcase_add_test(tc, token_bucket_refill_and_waits_match_plain_128_bit_arithmetic_at_every_magnitude);
    tcase_add_test(tc, token_bucket_is_at_rest_exactly_when_it_decides_like_a_fresh_state);
    tcase_add_test(tc, token_bucket_valid_rejects_every_corrupted_field);
    tcase_add_test(tc, token_bucket_last_ns_is_the_last_admitted_request);
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
