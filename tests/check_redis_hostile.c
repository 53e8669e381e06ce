/*
 * check_redis_hostile.c - the Redis store against a hostile server: a fake
 * Redis (tests/fake_redis.py, started by each test on a loopback port and
 * gone with it) that answers srl's commands slowly, hugely, with
 * redirections to a foreign host, with a SCAN that never ends, or with
 * numbers and types no script of srl gives.  Each test asserts the exact
 * outcome a caller relies on:
 *
 *   - a call's whole time is bounded by timeout_ms, the wait for the
 *     store's mutex included: SRL_ETIMEDOUT with on_full's DEGRADED
 *     decision (elapsed time checked only against a generous 3x bound);
 *   - a reply larger than the store's bound is refused as it arrives
 *     (SRL_ESYS, errno EMSGSIZE; the fake could not send it all), the
 *     connection is dropped and the next call makes a new one;
 *   - MOVED/ASK to a node outside the slot map is not followed (SRL_ESYS,
 *     errno EPROTO): the foreign listener receives nothing, not even a
 *     connection, so never the AUTH;
 *   - a walk whose SCAN cursor never returns to 0 ends with SRL_ESYS,
 *     errno EPROTO; one whose pipelined replies are over the bound
 *     together (each under it), errno EMSGSIZE;
 *   - a decision out of the policy's range, or of the wrong type, is
 *     SRL_ECORRUPT with on_full's DEGRADED decision, never taken as given;
 *     so is a reservation's wait beyond max_wait, with permits left, or on
 *     a denial.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "srl.h"
#include "redis_testutil.h"
#include "testutil.h"

#define TIMEOUT_MS 300

static struct fake_redis fake;
static char uri[256];

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

/* The fake in mode, and a limiter on it (gcra:10/1s, on_full deny: so an
 * on_full decision, denied, differs from every answer the fake gives). */
static srl_limiter *open_on(const char *mode, int once, int cluster)
{
    fake_redis_start(&fake, mode, once);
    if (cluster)
        snprintf(uri, sizeof uri,
                 "redis-cluster://alice:s3cret@127.0.0.1:%d?timeout_ms=%d", fake.port,
                 TIMEOUT_MS);
    else
        snprintf(uri, sizeof uri, "redis://alice:s3cret@127.0.0.1:%d?timeout_ms=%d",
                 fake.port, TIMEOUT_MS);
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("gcra:10/1s", &cfg.policy), 0);
    cfg.on_full = SRL_ON_FULL_DENY;
    srl_limiter *lim = NULL;
    int rc = srl_open_redis(uri, &cfg, &lim);
    ck_assert_msg(rc == 0, "open %s: %s; fake said: %s", uri, srl_strerror(rc), fake.log);
    return lim;
}

/* d is on_full's answer (deny), flagged degraded. */
static void assert_on_full(const srl_decision *d)
{
    ck_assert_int_eq(d->allowed, 0);
    ck_assert_uint_eq(d->flags & SRL_DECISION_DEGRADED, SRL_DECISION_DEGRADED);
}

/* One acquire expected to fail with rc (and errno e, if e != 0), giving
 * on_full's decision; *d starts as garbage so an untouched one shows. */
static void acquire_fails(srl_limiter *lim, int rc, int e)
{
    srl_decision d;
    memset(&d, 0xa5, sizeof d);
    errno = 0;
    int got = srl_acquire(lim, "k", 1, 1, &d);
    int saved = errno;
    ck_assert_msg(got == rc, "acquire: %s (%d), want %s; errno %s", srl_strerror(got), got,
                  srl_strerror(rc), strerror(saved));
    if (e != 0)
        ck_assert_msg(saved == e, "errno %s, want %s", strerror(saved), strerror(e));
    assert_on_full(&d);
}

/* The fake answers normally again (--once): the next call makes a new
 * connection and is decided by the fake's valid reply.  Stops the fake
 * (which printed "conn" before it answered). */
static void next_call_reconnects(srl_limiter *lim)
{
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 9);
    ck_assert_uint_eq(d.flags, 0);
    fake_redis_stop(&fake);
    ck_assert_int_eq(fake_redis_saw(&fake, "conn"), 2);
}

/* ------------------------------------------------------------ N4: time */

START_TEST(slow_reply_is_bounded_by_timeout)
{
    srl_limiter *lim = open_on("slow", 1, 0);
    uint64_t t0 = mono_ns();
    acquire_fails(lim, SRL_ETIMEDOUT, 0);
    uint64_t took = mono_ns() - t0;
    /* The reply takes ~2.6 s to trickle in; the call gives up at 300 ms. */
    ck_assert_msg(took < 3 * TIMEOUT_MS * MS, "the call took %llu ms",
                  (unsigned long long)(took / MS));
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.timeouts, 1);
    next_call_reconnects(lim);
    srl_close(lim);
    fake_redis_stop(&fake);
}
END_TEST

struct slow_call {
    srl_limiter *lim;
    int rc;
};

static void *slow_thread(void *arg)
{
    struct slow_call *c = arg;
    srl_decision d;
    c->rc = srl_acquire(c->lim, "k", 1, 1, &d);
    return NULL;
}

/* A second thread's call while the first waits on the slow server: its
 * whole call, the wait for the store's mutex included, is bounded by its
 * own timeout_ms. */
START_TEST(mutex_wait_is_bounded_by_timeout)
{
    srl_limiter *lim = open_on("slow", 0, 0);
    struct slow_call a = {lim, 1};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, slow_thread, &a), 0);
    ck_assert(fake_redis_wait(&fake, "evalsha"));   /* a is in its call, on the socket */
    uint64_t t0 = mono_ns();
    acquire_fails(lim, SRL_ETIMEDOUT, 0);
    uint64_t took = mono_ns() - t0;
    ck_assert_msg(took < 3 * TIMEOUT_MS * MS, "the second call took %llu ms",
                  (unsigned long long)(took / MS));
    pthread_join(t, NULL);
    ck_assert_int_eq(a.rc, SRL_ETIMEDOUT);
    srl_close(lim);
    fake_redis_stop(&fake);
}
END_TEST

/* ------------------------------------------------------------ N5: size */

/* The fake's modes of a huge reply: a 64 MiB bulk string, a 64 MiB status
 * line, an array of 2,000,000 integers. */
static const char *const huge_modes[] = {"bulk", "line", "array"};

START_TEST(huge_reply_is_refused)
{
    srl_limiter *lim = open_on(huge_modes[_i], 1, 0);
    acquire_fails(lim, SRL_ESYS, EMSGSIZE);
    /* Refused as it arrived: the fake could not write the whole reply. */
    ck_assert(fake_redis_wait(&fake, "sent "));
    unsigned long long sent = 0, total = 0;
    const char *at = strstr(fake.log, "sent ");
    ck_assert_int_eq(sscanf(at, "sent %llu of %llu", &sent, &total), 2);
    ck_assert_msg(sent < total, "the whole %llu-byte reply was read", total);
    next_call_reconnects(lim);
    srl_close(lim);
    fake_redis_stop(&fake);
}
END_TEST

/* ------------------------------------------------------------ N6: redirections */

static const char *const redirect_modes[] = {"moved", "ask"};

START_TEST(redirection_outside_the_map_is_not_followed)
{
    srl_limiter *lim = open_on(redirect_modes[_i], 0, 1);
    acquire_fails(lim, SRL_ESYS, EPROTO);
    srl_close(lim);
    fake_redis_stop(&fake);
    ck_assert_msg(fake_redis_saw(&fake, "foreign") == 0, "the foreign host heard: %s",
                  fake.log);
}
END_TEST

/* ------------------------------------------------------------ N7: walks */

static int count_entry(const srl_entry *e, void *ctx)
{
    (void)e;
    ++*(int *)ctx;
    return 0;
}

/* A walk that cannot end well ends with SRL_ESYS and errno: a SCAN cursor
 * that never returns to 0 (EPROTO); a batch whose pipelined peeks are each
 * under the bound of one reply but over it together (EMSGSIZE: they share
 * one bound, so a batch of 100 keys cannot hold 100 replies' worth). */
static const struct {
    const char *mode;
    int e;
} walk_cases[] = {{"scanloop", EPROTO}, {"walkhuge", EMSGSIZE}};

START_TEST(hostile_walk_ends_with_an_error)
{
    srl_limiter *lim = open_on(walk_cases[_i].mode, 0, 0);
    int seen = 0;
    errno = 0;
    int64_t n = srl_foreach(lim, count_entry, &seen);
    int e = errno;
    ck_assert_msg(n == SRL_ESYS, "foreach: %lld", (long long)n);
    ck_assert_msg(e == walk_cases[_i].e, "errno %s, want %s", strerror(e),
                  strerror(walk_cases[_i].e));
    ck_assert_int_eq(seen, 0);
    srl_close(lim);
    fake_redis_stop(&fake);
}
END_TEST

/* ------------------------------------------------------------ N10: values */

/* remaining above the limit, a retry_after of 292 years, allowed = 2, a
 * bulk string instead of the decision's array. */
static const char *const refused_modes[] = {"remaining", "retry", "allowed", "wrongtype"};

/* A reservation's wait beyond max_wait, with permits left, or on a denial:
 * replies no script gives.  The plain acquire on the same fake is fine. */
static const char *const refused_wait_modes[] = {"waitlong", "waitfree", "waitdenied"};

START_TEST(reservation_out_of_range_is_on_full)
{
    srl_limiter *lim = open_on(refused_wait_modes[_i], 0, 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert(d.allowed && d.wait_ns == 0);
    memset(&d, 0xa5, sizeof d);
    ck_assert_int_eq(srl_reserve(lim, "k", 1, 1, SEC, &d), SRL_ECORRUPT);
    assert_on_full(&d);
    ck_assert_uint_eq(d.wait_ns, 0);
    srl_close(lim);
    fake_redis_stop(&fake);
}
END_TEST

START_TEST(reply_out_of_range_or_type_is_on_full)
{
    srl_limiter *lim = open_on(refused_modes[_i], 0, 0);
    acquire_fails(lim, SRL_ECORRUPT, 0);
    srl_decision d;
    memset(&d, 0xa5, sizeof d);
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), SRL_ECORRUPT);
    assert_on_full(&d);
    srl_close(lim);
    fake_redis_stop(&fake);
}
END_TEST

/* A test case of s, 30 s to run (a case that hangs fails, never the suite). */
static TCase *add_case(Suite *s, const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return tc;
}

static Suite *suite(void)
{
    Suite *s = suite_create("redis_hostile");
    TCase *tc = add_case(s, "time");
    tcase_add_test(tc, slow_reply_is_bounded_by_timeout);
    tcase_add_test(tc, mutex_wait_is_bounded_by_timeout);
    tcase_add_loop_test(add_case(s, "size"), huge_reply_is_refused, 0, 3);
    tcase_add_loop_test(add_case(s, "redirect"), redirection_outside_the_map_is_not_followed, 0,
                        2);
    tcase_add_loop_test(add_case(s, "walk"), hostile_walk_ends_with_an_error, 0, 2);
    tcase_add_loop_test(add_case(s, "values"), reply_out_of_range_or_type_is_on_full, 0, 4);
    tcase_add_loop_test(add_case(s, "wait"), reservation_out_of_range_is_on_full, 0, 3);
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
