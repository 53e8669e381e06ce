/*
 * check_local_lock.c - the in-process store bounds every lock wait by
 * lock_timeout_ms, as the shared store does.
 *
 * A holder is made to stall inside a key's lock (its ticker, which srl reads
 * inside the lock, blocks until the test lets it go), so the overlap is
 * arranged, not hoped for: the stalled thread says it is inside before the
 * main thread asks.  Then every call that needs that key's lock answers
 * SRL_ETIMEDOUT within the timeout instead of hanging, srl_acquire gives
 * on_full's answer flagged DEGRADED, the timeouts are counted, and once the
 * holder goes the key works again with its state intact.
 */
#include <check.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>

#include "srl.h"
#include "testutil.h"

struct stall {
    sem_t inside;             /* posted by the ticker when it blocks */
    sem_t release;            /* posted by the test to let it go */
    volatile int armed;       /* the next ticker read blocks */
};

static uint64_t stalling_ticker(void *ctx)
{
    struct stall *st = ctx;
    if (__atomic_exchange_n(&st->armed, 0, __ATOMIC_ACQ_REL)) {
        sem_post(&st->inside);
        while (sem_wait(&st->release) != 0) {
        }
    }
    return 5 * SEC;
}

static srl_limiter *open_stalling(struct stall *st, srl_on_full on_full)
{
    sem_init(&st->inside, 0, 0);
    sem_init(&st->release, 0, 0);
    st->armed = 0;
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = 3, .window_ns = 60 * SEC};
    cfg.capacity = 16;
    cfg.on_full = on_full;
    cfg.lock_timeout_ms = 50;
    cfg.ticker = (srl_ticker){stalling_ticker, st};
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    return lim;
}

struct holder {
    srl_limiter *lim;
    int rc;
    srl_decision d;
};

static void *hold(void *arg)
{
    struct holder *h = arg;
    h->rc = srl_acquire(h->lim, "k", 1, 1, &h->d);
    return NULL;
}

/* Start a thread whose acquire of "k" stalls inside k's lock. */
static void stall_holder(struct stall *st, struct holder *h, pthread_t *t)
{
    __atomic_store_n(&st->armed, 1, __ATOMIC_RELEASE);
    ck_assert_int_eq(pthread_create(t, NULL, hold, h), 0);
    while (sem_wait(&st->inside) != 0) {
    }
}

START_TEST(acquire_on_a_stuck_key_times_out_with_on_full_and_counts_it)
{
    struct stall st;
    srl_limiter *lim = open_stalling(&st, (srl_on_full)_i);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);   /* k exists: 2 left */

    struct holder h = {lim, -99, {0}};
    pthread_t t;
    stall_holder(&st, &h, &t);
    memset(&d, 0xa5, sizeof d);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ETIMEDOUT);
    ck_assert_int_eq(d.allowed, _i == SRL_ON_FULL_ALLOW);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), SRL_ETIMEDOUT);
    ck_assert_int_eq(srl_reset_key(lim, "k", 1), SRL_ETIMEDOUT);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);
    ck_assert_uint_eq(s.timeouts, 3);
    /* Another key is not held up by k's stuck holder. */
    ck_assert_int_eq(srl_acquire(lim, "other", 5, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);

    sem_post(&st.release);
    pthread_join(t, NULL);
    ck_assert_int_eq(h.rc, 0);
    ck_assert_int_eq(h.d.allowed, 1);
    ck_assert_uint_eq(h.d.remaining, 1);
    /* The timed-out calls took nothing: exactly one permit is left. */
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    srl_close(lim);
}
END_TEST

static int count_entry(const srl_entry *e, void *ctx)
{
    (void)e;
    ++*(int *)ctx;
    return 0;
}

START_TEST(walks_on_a_stuck_key_are_bounded)
{
    struct stall st;
    srl_limiter *lim = open_stalling(&st, SRL_ON_FULL_ALLOW);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    struct holder h = {lim, -99, {0}};
    pthread_t t;
    stall_holder(&st, &h, &t);

    int seen = 0;
    ck_assert_int_eq(srl_foreach(lim, count_entry, &seen), SRL_ETIMEDOUT);
    ck_assert_int_eq(srl_evict_idle(lim), 0);          /* skipped, not waited for */
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);       /* summed without waiting */
    ck_assert_uint_eq(s.allowed, 1);
    ck_assert_uint_eq(s.timeouts, 2);                  /* foreach, evict */

    sem_post(&st.release);
    pthread_join(t, NULL);
    seen = 0;
    ck_assert_int_eq(srl_foreach(lim, count_entry, &seen), 1);
    ck_assert_int_eq(seen, 1);
    srl_close(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("local store lock waits");
    TCase *tc = tcase_create("bounded");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, acquire_on_a_stuck_key_times_out_with_on_full_and_counts_it,
                        SRL_ON_FULL_ALLOW, SRL_ON_FULL_DENY + 1);
    tcase_add_test(tc, walks_on_a_stuck_key_are_bounded);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
