/*
 * check_local_inflight.c - in-flight limits and compounds on the in-process
 * store (srl_open_local), with real threads.
 *
 *   table:   inflight_testutil.h's tables (concurrency alone, and with a
 *            rate limit), and max_hold on a fake clock.
 *   race:    8 threads enter/leave one key of limit 4, 400 rounds each,
 *            started together: a counter of those inside never exceeds 4,
 *            every thread gets all its rounds in, nothing is left in
 *            flight.  5 trials.  ThreadSanitizer runs this suite (local).
 *   evict:   a key with units in flight is never evicted; once they are
 *            left it is, and a lease kept from before is SRL_ENOENT.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>

#include "inflight_testutil.h"
#include "srl.h"
#include "testutil.h"

#define THREADS 8
#define UNITS 4
#define ROUNDS 400

static srl_limiter *open_text(const char *policy, fake_clock *c)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_limits_parse_ex(policy, &cfg.limits, NULL), 0);
    cfg.capacity = 64;
    if (c != NULL)
        cfg.ticker = fake_ticker(c);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    return lim;
}

START_TEST(a_local_limiter_holds_units_exactly)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_text("concurrency:4", c);
    srl_limiter *other = open_text("concurrency:4", c);
    inflight_store_table(lim, other);
    srl_close(other);
    srl_close(lim);
}
END_TEST

START_TEST(a_local_unit_and_rate_limit_are_taken_together_or_not_at_all)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_text("concurrency:2 + token_bucket:3/1h", c);
    inflight_compound_table(lim);
    srl_close(lim);
}
END_TEST

START_TEST(a_local_unit_held_past_max_hold_is_freed)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_text("concurrency:1,max_hold=2s", c);
    srl_lease a = inflight_enter_ok(lim, "k", 0);
    inflight_enter_denied(lim, "k", 0, 2 * SEC);
    c->now += 2 * SEC;
    srl_lease b = inflight_enter_ok(lim, "k", 0);
    ck_assert_int_eq(srl_leave(lim, &a), SRL_ENOENT);
    ck_assert_int_eq(srl_leave(lim, &b), 0);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);
    ck_assert_uint_eq(s.reclaimed, 1);
    srl_close(lim);
}
END_TEST

START_TEST(a_key_with_units_in_flight_is_not_evicted_and_a_lease_outliving_it_is_stale)
{
    srl_limiter *lim = open_text("concurrency:2", NULL);
    srl_lease a = inflight_enter_ok(lim, "k", 1);
    ck_assert_int_eq(srl_evict_idle(lim), 0);
    srl_lease keep = a;
    ck_assert_int_eq(srl_leave(lim, &a), 0);
    ck_assert_int_eq(srl_evict_idle(lim), 1);
    ck_assert_int_eq(srl_leave(lim, &keep), SRL_ENOENT);
    srl_lease b = inflight_enter_ok(lim, "k", 1);   /* a fresh state */
    ck_assert_int_eq(srl_leave(lim, &keep), SRL_ENOENT);
    ck_assert_int_eq(srl_leave(lim, &b), 0);
    srl_close(lim);
}
END_TEST

struct race {
    srl_limiter *lim;
    pthread_barrier_t go;
    uint32_t inside, max_inside, entered, errors;
};

static void *race_thread(void *arg)
{
    struct race *r = arg;
    pthread_barrier_wait(&r->go);
    for (int i = 0; i < ROUNDS; i++) {
        srl_lease l;
        srl_decision d;
        for (;;) {
            if (srl_enter(r->lim, "hot", 3, &l, &d) != 0) {
                __atomic_add_fetch(&r->errors, 1, __ATOMIC_RELAXED);
                return NULL;
            }
            if (d.allowed)
                break;
            sched_yield();
        }
        uint32_t now = __atomic_add_fetch(&r->inside, 1, __ATOMIC_ACQ_REL);
        uint32_t seen = __atomic_load_n(&r->max_inside, __ATOMIC_RELAXED);
        while (now > seen && !__atomic_compare_exchange_n(&r->max_inside, &seen, now, false,
                                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
        __atomic_add_fetch(&r->entered, 1, __ATOMIC_RELAXED);
        sched_yield();
        __atomic_sub_fetch(&r->inside, 1, __ATOMIC_ACQ_REL);
        if (srl_leave(r->lim, &l) != 0)
            __atomic_add_fetch(&r->errors, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

START_TEST(eight_threads_never_have_more_than_four_inside)
{
    for (int t = 0; t < 5; t++) {
        struct race r;
        memset(&r, 0, sizeof r);
        r.lim = open_text("concurrency:4", NULL);
        pthread_barrier_init(&r.go, NULL, THREADS);
        pthread_t th[THREADS];
        for (int i = 0; i < THREADS; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL, race_thread, &r), 0);
        for (int i = 0; i < THREADS; i++)
            pthread_join(th[i], NULL);
        ck_assert_uint_le(r.max_inside, UNITS);
        ck_assert_uint_eq(r.errors, 0);
        ck_assert_uint_eq(r.entered, THREADS * ROUNDS);
        ck_assert_uint_eq(inflight_total(r.lim), 0);
        pthread_barrier_destroy(&r.go);
        srl_close(r.lim);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("local_inflight");
    TCase *tc = tcase_create("local");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_local_limiter_holds_units_exactly);
    tcase_add_test(tc, a_local_unit_and_rate_limit_are_taken_together_or_not_at_all);
    tcase_add_test(tc, a_local_unit_held_past_max_hold_is_freed);
    tcase_add_test(tc, a_key_with_units_in_flight_is_not_evicted_and_a_lease_outliving_it_is_stale);
    tcase_add_test(tc, eight_threads_never_have_more_than_four_inside);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
