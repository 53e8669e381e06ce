/*
 * check_reserve.c - srl_state_reserve / srl_limits_state_reserve (the pure
 * core of waiting instead of refusing), against boundary tables.
 *
 *   acquire:    max_wait 0 is srl_state_acquire exactly, every algorithm:
 *               same decision, same state bytes, over random traces.
 *   the bound:  from drained states, for every cost: the wait W is the
 *               dry retry_after; max_wait = W is admitted with wait_ns W
 *               and leaves byte for byte the state srl_state_acquire at
 *               now + W leaves; max_wait = W - 1 is denied with retry 1 and
 *               writes nothing.
 *   refund:     srl_state_refund right after a reservation decides again
 *               exactly as the state before it (every cost, many later
 *               times), also when the state was in debt already.
 *   queue:      reservations at one instant line up at the exact refill
 *               instants, and the first beyond max_wait is denied.
 *   compound:   every limit taken at the one (largest) wait; over the bound
 *               none is; a ban is never queued past.
 *   refusals:   SRL_ENOTSUP (algorithms that cannot wait), SRL_EINVAL
 *               (max_wait above SRL_WAIT_MAX_NS), SRL_ECOST; nothing written.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "algotest.h"
#include "srl.h"
#include "testutil.h"

#define STATE_MAX 512

typedef struct {
    uint64_t w[STATE_MAX / 8];
} state_buf;

static srl_policy pol(srl_algorithm a, uint32_t n, uint64_t w, uint32_t burst, uint64_t pen)
{
    return (srl_policy){.algorithm = a, .permits = n, .window_ns = w, .burst = burst,
                        .penalty_ns = pen};
}

/* The policies that wait: exact and rounded intervals, bursts, a penalty. */
static srl_policy waiting(int i)
{
    switch (i) {
    case 0: return pol(SRL_TOKEN_BUCKET, 1, SEC, 0, 0);
    case 1: return pol(SRL_TOKEN_BUCKET, 5, SEC, 0, 0);
    case 2: return pol(SRL_TOKEN_BUCKET, 7, 999, 0, 0);
    case 3: return pol(SRL_TOKEN_BUCKET, 7, 999, 3, 0);
    case 4: return pol(SRL_TOKEN_BUCKET, 100, 60 * SEC, 20, 0);
    case 5: return pol(SRL_GCRA, 1, SEC, 0, 0);
    case 6: return pol(SRL_GCRA, 5, SEC, 0, 0);
    case 7: return pol(SRL_GCRA, 7, 999, 0, 0);
    case 8: return pol(SRL_GCRA, 7, 999, 3, 0);
    case 9: return pol(SRL_TOKEN_BUCKET, 5, SEC, 0, 10 * SEC);
    default: return pol(SRL_GCRA, 5, SEC, 0, 10 * SEC);
    }
}
#define N_WAITING 11

static uint32_t cap_of(const srl_policy *p)
{
    return p->burst ? p->burst : p->permits;
}

static srl_decision rsv(const srl_policy *p, void *s, uint64_t now, uint32_t cost, uint64_t mw)
{
    srl_decision d;
    memset(&d, 0x5a, sizeof d);
    ck_assert_int_eq(srl_state_reserve(p, s, now, cost, mw, &d), 0);
    return d;
}

/* a and b decide alike for every cost at t, a few ns after, and at twenty
 * later times reaching past the longest debt of the tables. */
static void ck_same(const srl_policy *p, const state_buf *a, const state_buf *b, uint64_t t,
                    const char *what)
{
    for (unsigned j = 0; j < 24; j++) {
        uint64_t at = j < 4 ? t + j : t + (j - 4) * (p->window_ns / 7 + 1);
        for (uint32_t c = 1; c <= cap_of(p); c++) {
            srl_decision x = peek(p, a, at, c), y = peek(p, b, at, c);
            ck_assert_msg(decision_eq(&x, &y),
                          "%s: %s %u/%llu burst %u: cost %u at t+%llu: allowed %d/%d "
                          "remaining %u/%u retry %llu/%llu reset %llu/%llu",
                          what, srl_algorithm_name(p->algorithm), p->permits,
                          (unsigned long long)p->window_ns, p->burst, c,
                          (unsigned long long)(at - t), x.allowed, y.allowed, x.remaining,
                          y.remaining, (unsigned long long)x.retry_after_ns,
                          (unsigned long long)y.retry_after_ns,
                          (unsigned long long)x.reset_after_ns,
                          (unsigned long long)y.reset_after_ns);
        }
    }
}

/* A state at t0 with k admissions of cost 1 at t (k <= capacity). */
static void drained(const srl_policy *p, state_buf *s, uint64_t t0, uint64_t t, uint32_t k)
{
    memset(s, 0, sizeof *s);
    ck_assert_int_eq(srl_state_init(p, s, t0), 0);
    for (uint32_t i = 0; i < k; i++)
        ck_assert_int_eq(acq(p, s, t, 1).allowed, 1);
}

START_TEST(reserve_with_max_wait_zero_is_acquire_exactly)
{
    const srl_policy all[] = {
        waiting(1), waiting(3), waiting(7), waiting(9), pol(SRL_SLIDING_LOG, 5, SEC, 0, 0),
        pol(SRL_SLIDING_COUNTER, 5, SEC, 0, 0), pol(SRL_SLIDING_LOG, 3, 999, 0, 5000),
        pol(SRL_TOKEN_BUCKET, 4000, 1000, 0, 0),   /* cannot wait, but 0 is acquire */
    };
    srandom(12);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const srl_policy *p = &all[i];
        size_t n = srl_state_size(p);
        state_buf a, b;
        memset(&a, 0, sizeof a);
        srl_state_init(p, &a, 0);
        b = a;
        uint64_t t = 0;
        for (int step = 0; step < 3000; step++) {
            t += (uint64_t)random() % (p->window_ns / 3 + 1);
            uint32_t cost = 1 + (uint32_t)random() % cap_of(p);
            srl_decision x = acq(p, &a, t, cost), y = rsv(p, &b, t, cost, 0);
            ck_assert(decision_eq(&x, &y));
            ck_assert_uint_eq(y.wait_ns, 0);
            ck_assert_uint_eq(y.reserved[0] | y.reserved[1], 0);
            ck_assert_uint_eq(x.wait_ns, 0);
            ck_assert_msg(memcmp(&a, &b, n) == 0, "policy %zu step %d: bytes differ", i, step);
        }
    }
}
END_TEST

START_TEST(reserve_exactly_at_the_bound_is_an_acquire_at_now_plus_wait)
{
    const srl_policy p = waiting(_i);
    size_t n = srl_state_size(&p);
    const uint64_t t0 = 3 * SEC, t = t0 + p.window_ns / 5;
    for (uint32_t k = 0; k <= cap_of(&p); k++)
        for (uint32_t c = 1; c <= cap_of(&p); c++) {
            state_buf s, keep, at;
            drained(&p, &s, t0, t, k);
            srl_decision dry = peek(&p, &s, t, c);
            if (dry.allowed)
                continue;   /* no wait: the acquire table covers it */
            uint64_t w = dry.retry_after_ns;
            ck_assert_uint_gt(w, 0);
            /* just above the bound: denied, retry 1 ns, nothing written
             * (a penalty bans instead: srl_acquire's denial) */
            keep = s;
            srl_decision no = rsv(&p, &keep, t, c, w - 1);
            ck_assert_int_eq(no.allowed, 0);
            ck_assert_uint_eq(no.retry_after_ns, p.penalty_ns ? p.penalty_ns : 1);
            ck_assert_uint_eq(no.wait_ns, 0);
            ck_assert_int_eq(memcmp(&s, &keep, n) == 0, p.penalty_ns == 0);
            /* at the bound: admitted, waiting w, the acquire at t + w */
            at = s;
            srl_decision ref = acq(&p, &at, t + w, c);
            ck_assert_int_eq(ref.allowed, 1);
            srl_decision yes = rsv(&p, &s, t, c, w);
            ck_assert_int_eq(yes.allowed, 1);
            ck_assert_uint_eq(yes.wait_ns, w);
            ck_assert_uint_eq(yes.retry_after_ns, 0);
            ck_assert_uint_eq(yes.remaining, 0);
            ck_assert_uint_eq(yes.reset_after_ns, w + ref.reset_after_ns);
            ck_assert_msg(memcmp(&s, &at, n) == 0, "k %u cost %u: not the acquire at t+w", k, c);
            ck_assert_int_eq(srl_state_valid(&p, &s, t), 1);
            ck_assert_int_eq(srl_state_at_rest(&p, &s, t), 0);
        }
}
END_TEST

/* Cancel: the state after reserve + refund decides as the state before. */
static void ck_cancel(const srl_policy *p, const state_buf *before, uint64_t t, uint32_t c,
                      uint64_t mw, const char *what)
{
    state_buf s = *before;
    srl_decision d = rsv(p, &s, t, c, mw);
    if (!d.allowed)
        return;
    ck_assert_int_eq(srl_state_refund(p, &s, t, c), 0);
    ck_assert_int_eq(srl_state_valid(p, &s, t), 1);
    ck_same(p, &s, before, t, what);
}

START_TEST(refund_after_reserve_restores_the_state_before_it)
{
    const srl_policy p = waiting(_i);
    const uint64_t t0 = 3 * SEC, t = t0 + p.window_ns / 5;
    const uint64_t mw = 3 * p.window_ns;
    uint32_t cap = cap_of(&p);
    /* The one inexact case (srl.h): a token bucket's whole capacity, which
     * it reaches in mid-nanosecond; that refund is only never looser. */
    int whole_inexact = p.algorithm == SRL_TOKEN_BUCKET;
    for (uint32_t k = 0; k <= cap; k++)
        for (uint32_t c = 1; c <= cap; c++) {
            if (c == cap && whole_inexact)
                continue;
            state_buf s;
            drained(&p, &s, t0, t, k);
            ck_cancel(&p, &s, t, c, mw, "from a drained state");
            /* from a state in debt: one reservation queued already */
            state_buf debt = s;
            srl_decision q = rsv(&p, &debt, t, cap, mw);
            ck_assert_int_eq(q.allowed, 1);
            ck_cancel(&p, &debt, t, c, mw, "from a state in debt");
            ck_cancel(&p, &debt, t + q.wait_ns / 2, c, mw, "from a state in debt, later");
        }
}
END_TEST

START_TEST(refund_of_a_whole_capacity_reservation_is_never_looser)
{
    const srl_policy p = waiting(2);   /* token_bucket:7/999: a token every 142.7 ns */
    const uint64_t t = 3 * SEC;
    state_buf before, s;
    drained(&p, &before, t, t, 1);     /* 6 left: the 7th arrives in mid-ns */
    s = before;
    ck_assert_int_eq(rsv(&p, &s, t, 7, SEC).allowed, 1);
    ck_assert_int_eq(srl_state_refund(&p, &s, t, 7), 0);
    for (uint64_t at = t; at < t + 2000; at++)
        for (uint32_t c = 1; c <= 7; c++) {
            srl_decision x = peek(&p, &s, at, c), y = peek(&p, &before, at, c);
            ck_assert(x.allowed <= y.allowed);
            ck_assert(x.retry_after_ns >= y.retry_after_ns);
        }
}
END_TEST

START_TEST(reservations_at_one_instant_queue_at_the_exact_refill_instants)
{
    /* 5/s, full at t: five now, then one every 200 ms up to 3 s ahead */
    const srl_policy tb = waiting(1), gc = waiting(6);
    const srl_policy *ps[] = {&tb, &gc};
    for (int i = 0; i < 2; i++) {
        const srl_policy *p = ps[i];
        state_buf s;
        drained(p, &s, SEC, SEC, 0);
        for (uint32_t j = 0; j < 20; j++) {
            srl_decision d = rsv(p, &s, SEC, 1, 3 * SEC);
            ck_assert_int_eq(d.allowed, 1);
            ck_assert_uint_eq(d.wait_ns, j < 5 ? 0 : (j - 4) * (SEC / 5));
        }
        state_buf keep = s;
        srl_decision d = rsv(p, &s, SEC, 1, 3 * SEC);
        ck_assert_int_eq(d.allowed, 0);
        ck_assert_uint_eq(d.retry_after_ns, SEC / 5);   /* 3.2 s wait - 3 s */
        ck_assert_int_eq(memcmp(&s, &keep, srl_state_size(p)), 0);
        /* a plain acquire waits for the whole queue */
        ck_assert_uint_eq(peek(p, &s, SEC, 1).retry_after_ns, 16 * SEC / 5);
        /* 200 ms later one more fits */
        ck_assert_uint_eq(rsv(p, &s, SEC + SEC / 5, 1, 3 * SEC).wait_ns, 3 * SEC);
    }
}
END_TEST

START_TEST(a_compound_takes_every_limit_at_the_largest_wait_or_none)
{
    srl_limits l;
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:4/1s + gcra:10/1m", &l, NULL), 0);
    size_t n = srl_limits_state_size(&l);
    state_buf s, keep, at;
    memset(&s, 0, sizeof s);
    srl_limits_state_init(&l, &s, 0);
    srl_decision d;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(srl_limits_state_acquire(&l, &s, 0, 1, &d), 0);
    /* token bucket: 250 ms; gcra (T = 6 s, tau 60 s, TAT 24 s): none */
    ck_assert_int_eq(srl_limits_state_reserve(&l, &s, 0, 1, SEC, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.wait_ns, SEC / 4);
    ck_assert_uint_eq(d.binding, 0);
    ck_assert_uint_eq(d.limit, 4);
    for (int i = 0; i < 4; i++) {   /* TAT 30 s -> 54 s */
        ck_assert_int_eq(srl_limits_state_acquire(&l, &s, 2 * SEC, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
    }
    ck_assert_int_eq(srl_limits_state_acquire(&l, &s, 4 * SEC, 1, &d), 0);   /* TAT 60 s */
    ck_assert_int_eq(d.allowed, 1);
    keep = s;
    srl_decision dry;
    ck_assert_int_eq(srl_limits_state_peek(&l, &s, 4 * SEC, 1, &dry), 0);
    ck_assert_int_eq(dry.allowed, 0);
    ck_assert_uint_eq(dry.binding, 1);
    uint64_t w = dry.retry_after_ns;
    ck_assert_uint_eq(w, 2 * SEC);
    /* one ns too little: neither limit is taken */
    ck_assert_int_eq(srl_limits_state_reserve(&l, &s, 4 * SEC, 1, w - 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 1);
    ck_assert_int_eq(memcmp(&s, &keep, n), 0);
    /* enough: both limits taken at 4 s + w, as the compound acquire there */
    at = s;
    ck_assert_int_eq(srl_limits_state_acquire(&l, &at, 4 * SEC + w, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_limits_state_reserve(&l, &s, 4 * SEC, 1, w, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.wait_ns, w);
    ck_assert_uint_eq(d.binding, 1);
    ck_assert_uint_eq(d.limit, 10);
    ck_assert_int_eq(memcmp(&s, &at, n), 0);
    /* a refund gives the binding limit back exactly (the bucket, taken
     * after it had refilled, comes back stricter: srl.h) */
    ck_assert_int_eq(srl_limits_state_refund(&l, &s, 4 * SEC, 1), 0);
    ck_assert_int_eq(srl_limits_state_peek(&l, &s, 4 * SEC, 1, &d), 0);
    ck_assert_uint_eq(d.retry_after_ns, w);
    ck_assert_uint_eq(d.binding, 1);
}
END_TEST

START_TEST(a_banned_key_is_refused_not_queued_and_a_refusal_bans)
{
    const srl_policy p = waiting(9);   /* token_bucket:5/1s,penalty=10s */
    state_buf s;
    drained(&p, &s, 0, 0, 5);
    srl_decision d = rsv(&p, &s, 0, 1, SEC);   /* 200 ms: fits */
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.wait_ns, SEC / 5);
    d = rsv(&p, &s, 0, 5, SEC / 2);           /* 1.2 s: refused, and banned 10 s */
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 10 * SEC);
    d = rsv(&p, &s, SEC, 1, 3 * SEC);          /* banned: no queue past the ban */
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 9 * SEC);
    d = rsv(&p, &s, 10 * SEC, 1, 3 * SEC);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.wait_ns, 0);
}
END_TEST

START_TEST(reserve_refusals_write_nothing)
{
    const srl_policy cannot[] = {
        pol(SRL_SLIDING_LOG, 5, SEC, 0, 0), pol(SRL_SLIDING_COUNTER, 5, SEC, 0, 0),
        pol(SRL_TOKEN_BUCKET, 4000, 1000, 0, 0),   /* four tokens a ns */
    };
    for (size_t i = 0; i < 3; i++) {
        state_buf s, keep;
        drained(&cannot[i], &s, 0, 0, 0);
        keep = s;
        srl_decision d;
        memset(&d, 0x5a, sizeof d);
        srl_decision dk = d;
        ck_assert_int_eq(srl_state_reserve(&cannot[i], &s, 0, 1, 1, &d), SRL_ENOTSUP);
        ck_assert_int_eq(memcmp(&s, &keep, sizeof s), 0);
        ck_assert_int_eq(memcmp(&d, &dk, sizeof d), 0);
    }
    srl_policy conc = {.algorithm = SRL_CONCURRENCY, .permits = 2};
    state_buf s;
    memset(&s, 0, sizeof s);
    srl_state_init(&conc, &s, 0);
    srl_decision d;
    ck_assert_int_eq(srl_state_reserve(&conc, &s, 0, 1, 0, &d), SRL_ENOTSUP);
    ck_assert_int_eq(srl_state_reserve(&conc, &s, 0, 1, SEC, &d), SRL_ENOTSUP);
    const srl_policy p = waiting(1);
    drained(&p, &s, 0, 0, 0);
    state_buf keep = s;
    ck_assert_int_eq(srl_state_reserve(&p, &s, 0, 1, SRL_WAIT_MAX_NS + 1, &d), SRL_EINVAL);
    ck_assert_int_eq(srl_state_reserve(&p, &s, 0, 1, SRL_WAIT_MAX_NS, &d), 0);
    s = keep;
    ck_assert_int_eq(srl_state_reserve(&p, &s, 0, 0, SEC, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_reserve(&p, &s, 0, 6, SEC, &d), SRL_ECOST);
    ck_assert_int_eq(srl_state_reserve(&p, &s, 0, 1, SEC, NULL), SRL_EINVAL);
    ck_assert_int_eq(srl_state_reserve(&p, NULL, 0, 1, SEC, &d), SRL_EINVAL);
    ck_assert_int_eq(memcmp(&s, &keep, sizeof s), 0);
    srl_limits l;
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:5/1s + sliding_log:5/1s", &l, NULL), 0);
    srl_limits_state_init(&l, &s, 0);
    ck_assert_int_eq(srl_limits_state_reserve(&l, &s, 0, 1, SEC, &d), SRL_ENOTSUP);
    ck_assert_int_eq(srl_limits_state_reserve(&l, &s, 0, 1, 0, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reserve");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reserve_with_max_wait_zero_is_acquire_exactly);
    tcase_add_loop_test(tc, reserve_exactly_at_the_bound_is_an_acquire_at_now_plus_wait, 0,
                        N_WAITING);
    tcase_add_loop_test(tc, refund_after_reserve_restores_the_state_before_it, 0, N_WAITING);
    tcase_add_test(tc, refund_of_a_whole_capacity_reservation_is_never_looser);
    tcase_add_test(tc, reservations_at_one_instant_queue_at_the_exact_refill_instants);
    tcase_add_test(tc, a_compound_takes_every_limit_at_the_largest_wait_or_none);
    tcase_add_test(tc, a_banned_key_is_refused_not_queued_and_a_refusal_bans);
    tcase_add_test(tc, reserve_refusals_write_nothing);
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
