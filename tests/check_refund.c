/*
 * check_refund.c - srl_state_refund, per algorithm, against boundary tables.
 *
 *   exact:      for every k (admissions of cost 1 at one time) and every
 *               refund cost, the refunded state decides exactly as the
 *               state after max(k - cost, 0) admissions: every cost, at
 *               ten later times; byte for byte where both are the same
 *               representation (all but GCRA's "full" TAT at now vs 0).
 *   fresh:      a refund on a fresh or at-rest state changes no byte.
 *   never above fresh: random traces of admissions, refunds (more than
 *               was taken, too) and time steps; after each refund the state
 *               is valid and at the same instant admits at most permits
 *               requests of cost 1, as a fresh state does.
 *   errors:     cost 0 or above permits is SRL_ECOST, an invalid policy
 *               SRL_EPOLICY, NULL SRL_EINVAL; nothing is written.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "algotest.h"
#include "srl.h"
#include "testutil.h"

#define STATE_MAX (8 + 8 * 64)

/* Policies per algorithm: 1 permit, a few, and a window that permits do
 * not divide (GCRA's T rounds up, the bucket keeps a partial token). */
static const srl_policy policies[] = {
    {.algorithm = SRL_TOKEN_BUCKET, .permits = 1, .window_ns = SEC},        {.algorithm = SRL_TOKEN_BUCKET, .permits = 5, .window_ns = SEC},
    {.algorithm = SRL_TOKEN_BUCKET, .permits = 7, .window_ns = 999},        {.algorithm = SRL_GCRA, .permits = 1, .window_ns = SEC},
    {.algorithm = SRL_GCRA, .permits = 5, .window_ns = SEC},                {.algorithm = SRL_GCRA, .permits = 7, .window_ns = 999},
    {.algorithm = SRL_SLIDING_LOG, .permits = 1, .window_ns = SEC},         {.algorithm = SRL_SLIDING_LOG, .permits = 5, .window_ns = SEC},
    {.algorithm = SRL_SLIDING_LOG, .permits = 7, .window_ns = 999},         {.algorithm = SRL_SLIDING_COUNTER, .permits = 1, .window_ns = SEC},
    {.algorithm = SRL_SLIDING_COUNTER, .permits = 5, .window_ns = SEC},     {.algorithm = SRL_SLIDING_COUNTER, .permits = 7, .window_ns = 999},
};
#define N_POLICIES (sizeof policies / sizeof policies[0])

typedef struct {
    uint64_t w[STATE_MAX / 8];
} state_buf;

/* init at t0, then k admissions of cost 1 at t (each must be admitted). */
static void after_k(const srl_policy *p, state_buf *s, uint64_t t0, uint64_t t, uint32_t k)
{
    memset(s, 0, sizeof *s);
    ck_assert_int_eq(srl_state_init(p, s, t0), 0);
    for (uint32_t i = 0; i < k; i++)
        ck_assert_int_eq(acq(p, s, t, 1).allowed, 1);
}

/* a and b decide alike for every cost at t and nine later times. */
static void ck_same_decisions(const srl_policy *p, const state_buf *a, const state_buf *b,
                              uint64_t t, const char *what)
{
    for (unsigned j = 0; j < 10; j++) {
        uint64_t at = t + j * (p->window_ns / 4 + 1);
        for (uint32_t c = 1; c <= p->permits; c++) {
            srl_decision x = peek(p, a, at, c), y = peek(p, b, at, c);
            ck_assert_msg(decision_eq(&x, &y), "%s: %s/%u/%llu: cost %u at +%u: allowed %d/%d "
                          "remaining %u/%u retry %llu/%llu reset %llu/%llu", what,
                          srl_algorithm_name(p->algorithm), p->permits,
                          (unsigned long long)p->window_ns, c, j, x.allowed, y.allowed,
                          x.remaining, y.remaining, (unsigned long long)x.retry_after_ns,
                          (unsigned long long)y.retry_after_ns,
                          (unsigned long long)x.reset_after_ns,
                          (unsigned long long)y.reset_after_ns);
        }
        ck_assert_int_eq(srl_state_at_rest(p, a, at), srl_state_at_rest(p, b, at));
    }
}

static void exact_table(const srl_policy *p, uint64_t t0, uint64_t t, int bytes)
{
    size_t n = srl_state_size(p);
    for (uint32_t k = 0; k <= p->permits; k++)
        for (uint32_t cost = 1; cost <= p->permits; cost++) {
            state_buf a, b;
            after_k(p, &a, t0, t, k);
            ck_assert_int_eq(srl_state_refund(p, &a, t, cost), 0);
            after_k(p, &b, t0, t, k > cost ? k - cost : 0);
            ck_assert_int_eq(srl_state_valid(p, &a, t), 1);
            ck_same_decisions(p, &a, &b, t, "refund vs fewer admissions");
            /* GCRA: a TAT moved back to now means "full" as tat = 0 does */
            int same_repr = p->algorithm != SRL_GCRA || k > cost;
            if (bytes && same_repr)
                ck_assert_msg(memcmp(&a, &b, n) == 0, "%s/%u: k %u cost %u: bytes differ",
                              srl_algorithm_name(p->algorithm), p->permits, k, cost);
        }
}

START_TEST(refund_after_k_admissions_is_exactly_k_minus_cost_admissions)
{
    const srl_policy *p = &policies[_i];
    /* admissions at the init time: the states are byte for byte equal */
    exact_table(p, 5 * SEC, 5 * SEC, 1);
    /* admissions long after init, mid-window: equal in every decision */
    exact_table(p, 0, 7 * p->window_ns + p->window_ns / 3, 0);
}
END_TEST

START_TEST(refund_on_a_fresh_or_at_rest_state_changes_nothing)
{
    const srl_policy *p = &policies[_i];
    size_t n = srl_state_size(p);
    state_buf a, before;
    after_k(p, &a, 3 * SEC, 3 * SEC, 0);
    before = a;
    for (uint32_t cost = 1; cost <= p->permits; cost++) {
        ck_assert_int_eq(srl_state_refund(p, &a, 3 * SEC, cost), 0);
        ck_assert_int_eq(srl_state_refund(p, &a, 3 * SEC + 5 * p->window_ns, cost), 0);
    }
    ck_assert_mem_eq(&a, &before, n);
    /* a used state that has come to rest: refunds give nothing more */
    after_k(p, &a, 3 * SEC, 3 * SEC, p->permits);
    uint64_t rest = 3 * SEC + 3 * p->window_ns;
    ck_assert_int_eq(srl_state_at_rest(p, &a, rest), 1);
    before = a;
    ck_assert_int_eq(srl_state_refund(p, &a, rest, p->permits), 0);
    ck_assert_mem_eq(&a, &before, n);
}
END_TEST

static uint64_t rng(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

START_TEST(refunds_never_lift_a_state_above_a_fresh_one)
{
    const srl_policy *p = &policies[_i];
    uint64_t seed = 0x243f6a8885a308d3ull + _i, now = 10 * SEC;
    state_buf s;
    after_k(p, &s, now, now, 0);
    unsigned refunds = 0;
    for (int step = 0; step < 20000; step++) {
        uint64_t r = rng(&seed);
        uint32_t cost = 1 + (uint32_t)((r >> 8) % p->permits);
        switch (r % 4) {
        case 0:
            now += (r >> 20) % (p->window_ns / 2 + 1);
            break;
        case 1:
            (void)acq(p, &s, now, cost);
            break;
        default:
            ck_assert_int_eq(srl_state_refund(p, &s, now, cost), 0);
            refunds++;
            ck_assert_int_eq(srl_state_valid(p, &s, now), 1);
            state_buf t = s;
            uint32_t admitted = 0;
            for (uint32_t i = 0; i <= p->permits; i++)
                admitted += (uint32_t)acq(p, &t, now, 1).allowed;
            ck_assert_uint_le(admitted, p->permits);
            srl_decision d = peek(p, &s, now, 1);
            ck_assert_uint_le(d.remaining, p->permits);
            break;
        }
    }
    ck_assert_uint_gt(refunds, 5000);
}
END_TEST

START_TEST(refund_errors_write_nothing)
{
    const srl_policy *p = &policies[_i];
    size_t n = srl_state_size(p);
    state_buf s, before;
    after_k(p, &s, SEC, SEC, p->permits);
    before = s;
    ck_assert_int_eq(srl_state_refund(p, &s, SEC, 0), SRL_ECOST);
    ck_assert_int_eq(srl_state_refund(p, &s, SEC, p->permits + 1), SRL_ECOST);
    srl_policy bad = *p;
    bad.window_ns = 0;
    ck_assert_int_eq(srl_state_refund(&bad, &s, SEC, 1), SRL_EPOLICY);
    ck_assert_int_eq(srl_state_refund(NULL, &s, SEC, 1), SRL_EINVAL);
    ck_assert_int_eq(srl_state_refund(p, NULL, SEC, 1), SRL_EINVAL);
    ck_assert_mem_eq(&s, &before, n);
}
END_TEST

/* The boundaries named in srl.h, with numbers. */
START_TEST(refund_boundaries_by_algorithm)
{
    srl_decision d;
    /* token bucket 5/1s: 5 taken at t, 400 ms later 2 are back; refund 4
     * gives 5 (capped), not 6, and the partial token is dropped */
    srl_policy tb = {.algorithm = SRL_TOKEN_BUCKET, .permits = 5, .window_ns = SEC};
    state_buf s;
    after_k(&tb, &s, 0, SEC, 5);
    ck_assert_int_eq(srl_state_refund(&tb, &s, SEC + 400 * MS, 4), 0);
    d = peek(&tb, &s, SEC + 400 * MS, 1);
    ck_assert_uint_eq(d.remaining, 4);
    ck_assert_uint_eq(d.reset_after_ns, 200 * MS);
    ck_assert_int_eq(srl_state_at_rest(&tb, &s, SEC + 400 * MS), 1);
    /* GCRA 5/1s (T = 200 ms): 5 taken at t, tat = t + 1 s; refund 2 at
     * t + 100 ms -> tat = t + 600 ms; refund 5 -> tat = now, not before */
    srl_policy g = {.algorithm = SRL_GCRA, .permits = 5, .window_ns = SEC};
    after_k(&g, &s, 0, SEC, 5);
    ck_assert_int_eq(srl_state_refund(&g, &s, SEC + 100 * MS, 2), 0);
    ck_assert_uint_eq(s.w[0], SEC + 600 * MS);
    ck_assert_int_eq(srl_state_refund(&g, &s, SEC + 100 * MS, 5), 0);
    ck_assert_uint_eq(s.w[0], SEC + 100 * MS);
    ck_assert_uint_eq(peek(&g, &s, SEC + 100 * MS, 1).remaining, 4);
    /* sliding log 3/1s: entries at 0, 0.5 s, 0.9 s; at 1.2 s the first has
     * left; refund 3 drops the two live ones only */
    srl_policy sl = {.algorithm = SRL_SLIDING_LOG, .permits = 3, .window_ns = SEC};
    after_k(&sl, &s, 0, 0, 1);
    ck_assert_int_eq(acq(&sl, &s, 500 * MS, 1).allowed, 1);
    ck_assert_int_eq(acq(&sl, &s, 900 * MS, 1).allowed, 1);
    ck_assert_int_eq(srl_state_refund(&sl, &s, 1200 * MS, 1), 0);
    d = peek(&sl, &s, 1200 * MS, 1);
    ck_assert_uint_eq(d.remaining, 1);          /* 0.5 s live: 3 - 1 - 1 */
    ck_denied_leaving(peek(&sl, &s, 1200 * MS, 3), 2, 300 * MS); /* until 0.5 s leaves */
    ck_assert_int_eq(srl_state_refund(&sl, &s, 1200 * MS, 3), 0);
    ck_assert_int_eq(srl_state_at_rest(&sl, &s, 1200 * MS), 1);
    /* sliding counter 4/1s: 3 in window [0,1s), 1 in [1s,2s); at 1.5 s a
     * refund of 4 takes the current window's 1 only */
    srl_policy sc = {.algorithm = SRL_SLIDING_COUNTER, .permits = 4, .window_ns = SEC};
    after_k(&sc, &s, 0, 100 * MS, 3);
    ck_assert_int_eq(acq(&sc, &s, 1200 * MS, 1).allowed, 1);
    ck_assert_int_eq(srl_state_refund(&sc, &s, 1500 * MS, 4), 0);
    /* estimate = 3 * 0.5 + 0 = 1.5: remaining ceil(4 - 1.5 - 1) = 2 */
    ck_assert_uint_eq(peek(&sc, &s, 1500 * MS, 1).remaining, 2);
    state_buf t;
    after_k(&sc, &t, 0, 100 * MS, 3);
    ck_assert_uint_eq(peek(&sc, &t, 1500 * MS, 1).remaining, 2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("refund");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, refund_after_k_admissions_is_exactly_k_minus_cost_admissions, 0,
                        N_POLICIES);
    tcase_add_loop_test(tc, refund_on_a_fresh_or_at_rest_state_changes_nothing, 0, N_POLICIES);
    tcase_add_loop_test(tc, refunds_never_lift_a_state_above_a_fresh_one, 0, N_POLICIES);
    tcase_add_loop_test(tc, refund_errors_write_nothing, 0, N_POLICIES);
    tcase_add_test(tc, refund_boundaries_by_algorithm);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
