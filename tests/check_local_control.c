/*
 * check_local_control.c - operator control on the in-process store
 * (srl_open_local; src/local/local_control.c): exemption, ban by hand,
 * per-key limits stored and per call, with 8 threads racing one key.
 *
 *   - An exempt key: 8 threads x 50 requests on a policy of 3 are all
 *     admitted, counted in srl_stats.exempt; its state is untouched (3
 *     admitted exactly after the exemption is taken back), and it is not
 *     evicted at rest.  A key beside it admits exactly 3.
 *   - A banned key: 8 threads x 50 requests, none admitted, each told
 *     retry_after = the ban's time left exactly (an injected ticker that
 *     stands still), then less after the ticker moves on; past the ban the
 *     key is admitted again and the ban reads as none.
 *   - Per-key limits of 3 and 10 on two keys of a policy of 100, stored or
 *     passed per call, 8 threads on both: exactly 3 and 10 admitted.
 *   - A ban lifted mid-run: 8 threads stop at a barrier between phases;
 *     banned (0 admitted), unbanned (every request admitted), banned again
 *     (0 admitted), exactly.
 *   - A ban on a lock-free handle while a lock-free decider that read the
 *     key's operator word 0 is parked before its CAS (srl__local_park):
 *     srl_key_ban returns only after that admission landed.
 * Exempt, ban and lift run on a locked handle and on a lock-free one
 * (SRL_CONFIG_LOCKFREE, one GCRA word): _i 0 and 1.  Plus the errors a
 * caller relies on: the sentence of a refused set, ENOENT, ENOSPC.
 *
 * The ticker stands still during every race, so "exactly N admitted" is
 * the whole truth.  Threads report through their own slots; only the main
 * thread asserts.  Nothing timed is asserted.
 */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "srl.h"
#include "testutil.h"
#include "testhooks.h"   /* srl__local_park: the test copy of the library */

#define THREADS 8
#define HOUR (3600ull * SEC)

/* A frozen-clock handle: policy (token_bucket or, lockfree, gcra of the
 * same rate) on a lock-free handle when lockfree is 1. */
static srl_limiter *open_local(const char *policy, int lockfree, fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    char text[64];
    snprintf(text, sizeof text, "%s:%s", lockfree ? "gcra" : "token_bucket", policy);
    ck_assert_int_eq(srl_limits_parse_ex(text, &cfg.limits, NULL), 0);
    cfg.capacity = 1024;
    cfg.ticker = fake_ticker(clock);
    if (lockfree)
        cfg.flags |= SRL_CONFIG_LOCKFREE;
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_uint_eq(info.flags & SRL_CONFIG_LOCKFREE, lockfree ? SRL_CONFIG_LOCKFREE : 0);
    return lim;
}

static srl_limits limits(const char *text)
{
    srl_limits l;
    ck_assert_int_eq(srl_limits_parse_ex(text, &l, NULL), 0);
    return l;
}

/* ------------------------------------------------------------ the race */

enum { KEYS_MAX = 2 };

struct racer {
    srl_limiter *lim;
    pthread_barrier_t *go;      /* every phase starts and ends here */
    int phases, steps, nkeys;
    const char *keys[KEYS_MAX];
    const srl_limits *per_call[KEYS_MAX]; /* NULL: srl_acquire */
    uint64_t want_retry;        /* nonzero: every denial must say this */
    /* per phase and key */
    uint32_t admitted[3][KEYS_MAX];
    uint32_t denied[3][KEYS_MAX];
    uint32_t errors, bad_retry;
};

static void *racer_run(void *p)
{
    struct racer *r = p;
    for (int ph = 0; ph < r->phases; ph++) {
        pthread_barrier_wait(r->go);   /* the main thread has set the phase up */
        for (int n = 0; n < r->steps; n++)
            for (int k = 0; k < r->nkeys; k++) {
                srl_decision d;
                size_t len = strlen(r->keys[k]);
                int rc = r->per_call[k] != NULL
                             ? srl_acquire_limits(r->lim, r->keys[k], len, r->per_call[k], 1, &d)
                             : srl_acquire(r->lim, r->keys[k], len, 1, &d);
                if (rc != 0) {
                    r->errors++;
                } else if (d.allowed) {
                    r->admitted[ph][k]++;
                } else {
                    r->denied[ph][k]++;
                    if (r->want_retry != 0 && d.retry_after_ns != r->want_retry)
                        r->bad_retry++;
                }
            }
        pthread_barrier_wait(r->go);   /* the phase is over */
    }
    return NULL;
}

/* A race of THREADS racers like proto; between phases the main thread
 * runs between(ctx, phase) with every racer stopped at the barrier.  The
 * sums over the threads land in *sum. */
static void race(const struct racer *proto, void (*between)(void *, int), void *ctx,
                 struct racer *sum)
{
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, THREADS + 1);
    pthread_t t[THREADS];
    struct racer r[THREADS];
    for (int i = 0; i < THREADS; i++) {
        r[i] = *proto;
        r[i].go = &go;
        ck_assert_int_eq(pthread_create(&t[i], NULL, racer_run, &r[i]), 0);
    }
    for (int ph = 0; ph < proto->phases; ph++) {
        if (between != NULL)
            between(ctx, ph);
        pthread_barrier_wait(&go);   /* start */
        pthread_barrier_wait(&go);   /* every racer done with this phase */
    }
    *sum = *proto;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        sum->errors += r[i].errors;
        sum->bad_retry += r[i].bad_retry;
        for (int ph = 0; ph < 3; ph++)
            for (int k = 0; k < KEYS_MAX; k++) {
                sum->admitted[ph][k] += r[i].admitted[ph][k];
                sum->denied[ph][k] += r[i].denied[ph][k];
            }
    }
    pthread_barrier_destroy(&go);
}

/* ------------------------------------------------------------ exempt */

START_TEST(an_exempt_key_under_8_threads_is_never_refused_nor_evicted)
{
    fake_clock clock = {.now = 1000 * SEC};
    srl_limiter *lim = open_local("3/1h", _i, &clock);
    ck_assert_int_eq(srl_key_exempt(lim, "probe", 5, 1), 0);   /* inserts it */
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(lim, "probe", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_EXEMPT);
    struct racer proto = {.lim = lim, .phases = 1, .steps = 50, .nkeys = 2,
                          .keys = {"probe", "client"}};
    struct racer sum;
    race(&proto, NULL, NULL, &sum);
    ck_assert_uint_eq(sum.errors, 0);
    ck_assert_uint_eq(sum.admitted[0][0], THREADS * 50);
    ck_assert_uint_eq(sum.denied[0][0], 0);
    ck_assert_uint_eq(sum.admitted[0][1], 3);   /* the key beside it: its policy */
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);
    ck_assert_uint_eq(s.exempt, THREADS * 50);
    ck_assert_uint_eq(s.allowed, THREADS * 50 + 3);
    ck_assert_uint_eq(s.denied, THREADS * 50 - 3);
    /* At rest (its state untouched by 400 admissions), and not evicted;
     * the other key is not at rest yet. */
    ck_assert_int_eq(srl_evict_idle(lim), 0);
    ck_assert_int_eq(srl_key_control_get(lim, "probe", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_EXEMPT);
    /* Taken back, on the same still clock: its policy decides it, from
     * the state it had before the 400 (3 permits, none used). */
    ck_assert_int_eq(srl_key_exempt(lim, "probe", 5, 0), 0);
    int admitted = 0;
    for (int n = 0; n < 10; n++) {
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, "probe", 5, 1, &d), 0);
        admitted += d.allowed;
    }
    ck_assert_int_eq(admitted, 3);
    ck_assert_int_eq(srl_key_control_get(lim, "probe", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, 0);
    /* No longer kept: both evicted once at rest. */
    clock.now += 2 * HOUR;
    ck_assert_int_eq(srl_evict_idle(lim), 2);
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------------------ ban */

START_TEST(a_banned_key_under_8_threads_is_denied_with_the_bans_time_left)
{
    fake_clock clock = {.now = 1000 * SEC};
    srl_limiter *lim = open_local("100/1h", _i, &clock);
    ck_assert_int_eq(srl_key_ban(lim, "k", 1, 10 * SEC, "abuse report 17"), 0);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_BANNED);
    ck_assert_uint_eq(kc.ban_left_ns, 10 * SEC);
    ck_assert_str_eq(kc.reason, "abuse report 17");
    struct racer proto = {.lim = lim, .phases = 1, .steps = 50, .nkeys = 1, .keys = {"k"},
                          .want_retry = 10 * SEC};
    struct racer sum;
    race(&proto, NULL, NULL, &sum);
    ck_assert_uint_eq(sum.errors, 0);
    ck_assert_uint_eq(sum.admitted[0][0], 0);
    ck_assert_uint_eq(sum.denied[0][0], THREADS * 50);
    ck_assert_uint_eq(sum.bad_retry, 0);
    /* 4 s on: 6 s left, said by the decision and by control_get. */
    clock.now += 4 * SEC;
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 6 * SEC);
    ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), 0);
    ck_assert_uint_eq(kc.ban_left_ns, 6 * SEC);
    /* A banned key is kept at rest. */
    clock.now += 5 * SEC;
    ck_assert_int_eq(srl_evict_idle(lim), 0);
    /* The ban is over: admitted, and none shown. */
    clock.now += SEC;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), 0);
    ck_assert_uint_eq(kc.flags, 0);
    ck_assert_str_eq(kc.reason, "");
    srl_close(lim);
}
END_TEST

struct lift {
    srl_limiter *lim;
};

/* Phase 0 banned, phase 1 lifted, phase 2 banned again: run by the main
 * thread while every racer waits at the barrier. */
static void lift_between(void *ctx, int phase)
{
    struct lift *f = ctx;
    if (phase == 1)
        ck_assert_int_eq(srl_key_unban(f->lim, "k", 1), 0);
    else
        ck_assert_int_eq(srl_key_ban(f->lim, "k", 1, HOUR, NULL), 0);
}

START_TEST(a_ban_lifted_and_set_again_at_a_barrier_admits_exactly_between)
{
    fake_clock clock = {.now = 1000 * SEC};
    srl_limiter *lim = open_local("1000/1h", _i, &clock);
    struct lift f = {lim};
    struct racer proto = {.lim = lim, .phases = 3, .steps = 20, .nkeys = 1, .keys = {"k"}};
    struct racer sum;
    race(&proto, lift_between, &f, &sum);
    ck_assert_uint_eq(sum.errors, 0);
    ck_assert_uint_eq(sum.admitted[0][0], 0);
    ck_assert_uint_eq(sum.admitted[1][0], THREADS * 20);
    ck_assert_uint_eq(sum.admitted[2][0], 0);
    ck_assert_uint_eq(sum.denied[2][0], THREADS * 20);
    /* The bans denied without using the key's permits: 160 of 1000. */
    ck_assert_int_eq(srl_key_unban(lim, "k", 1), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 1000 - THREADS * 20 - 1);
    srl_close(lim);
}
END_TEST

struct parked {
    srl_limiter *lim;
    pid_t tid;                  /* atomic */
    int done;                   /* atomic */
    int rc;
    srl_decision d;
    uint64_t allowed_at_return; /* the banner's srl_stats.allowed when srl_key_ban returned */
};

static void *parked_acquire(void *p)
{
    struct parked *a = p;
    a->rc = srl_acquire(a->lim, "k", 1, 1, &a->d);
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *banner(void *p)
{
    struct parked *a = p;
    __atomic_store_n(&a->tid, gettid(), __ATOMIC_RELEASE);
    a->rc = srl_key_ban(a->lim, "k", 1, HOUR, NULL);
    srl_stats s = {0};
    if (a->rc == 0)
        a->rc = srl_stats_get(a->lim, &s);
    a->allowed_at_return = s.allowed;
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Wall time bounds the waits below, so that a broken build fails instead
 * of hanging; nothing is asserted on it. */
static uint64_t wall_ns(void)
{
    return srl_monotonic_ns(NULL);
}

static void poll_pause(void)
{
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* The banner has returned, or sleeps (waiting for the grace period) for
 * 20 polls in a row. */
static void wait_returned_or_asleep(struct parked *b)
{
    uint64_t deadline = wall_ns() + 60 * SEC;
    for (int still = 0; still < 20;) {
        pid_t tid = __atomic_load_n(&b->tid, __ATOMIC_ACQUIRE);
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
        bool there = __atomic_load_n(&b->done, __ATOMIC_ACQUIRE) ||
                     (tid != 0 && proc_stat_state(path) == 'S');
        still = there ? still + 1 : 0;
        ck_assert_msg(wall_ns() < deadline, "the banner neither returned nor slept");
        poll_pause();
    }
}

START_TEST(a_ban_on_a_lockfree_handle_returns_after_every_admission_that_missed_it)
{
    fake_clock clock = {.now = 1000 * SEC};
    srl_limiter *lim = open_local("100/1h", 1, &clock);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);   /* the key exists */
    ck_assert_int_eq(d.allowed, 1);
    /* A decider reads the key's operator word (0) and parks before its CAS. */
    ck_assert_int_eq(srl__local_park(lim, SRL__LOCAL_PARK_LF_CTL, SRL__LOCAL_PARK_ARM), 0);
    struct parked a = {.lim = lim}, b = {.lim = lim};
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, parked_acquire, &a), 0);
    uint64_t deadline = wall_ns() + 60 * SEC;
    while (srl__local_park(lim, SRL__LOCAL_PARK_LF_CTL, SRL__LOCAL_PARK_ASK) != 1) {
        ck_assert_msg(wall_ns() < deadline, "the decider never parked");
        poll_pause();
    }
    /* The ban, meanwhile: it may not return while that decision is out. */
    ck_assert_int_eq(pthread_create(&tb, NULL, banner, &b), 0);
    wait_returned_or_asleep(&b);
    ck_assert_int_eq(srl__local_park(lim, SRL__LOCAL_PARK_LF_CTL, SRL__LOCAL_PARK_RELEASE), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_int_eq(a.rc, 0);
    ck_assert_int_eq(b.rc, 0);
    ck_assert_int_eq(a.d.allowed, 1);   /* it read the word before the ban */
    /* ... and landed before srl_key_ban returned: 2 admitted by then. */
    ck_assert_uint_eq(b.allowed_at_return, 2);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, HOUR);
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------------------ per-key limits */

START_TEST(per_key_limits_of_3_and_10_under_8_threads_admit_exactly_3_and_10)
{
    /* _i 0: stored (srl_key_set_limits), 1: per call (srl_acquire_limits). */
    fake_clock clock = {.now = 1000 * SEC};
    srl_limiter *lim = open_local("100/1h", 0, &clock);
    srl_limits l3 = limits("token_bucket:3/1h"), l10 = limits("token_bucket:10/1h");
    struct racer proto = {.lim = lim, .phases = 1, .steps = 40, .nkeys = 2,
                          .keys = {"small", "big"}};
    if (_i == 0) {
        ck_assert_int_eq(srl_key_set_limits(lim, "small", 5, &l3), 0);
        ck_assert_int_eq(srl_key_set_limits(lim, "big", 3, &l10), 0);
        srl_limits got;
        ck_assert_int_eq(srl_key_get_limits(lim, "big", 3, &got), 0);
        ck_assert_mem_eq(&got, &l10, sizeof got);
    } else {
        proto.per_call[0] = &l3;
        proto.per_call[1] = &l10;
    }
    struct racer sum;
    race(&proto, NULL, NULL, &sum);
    ck_assert_uint_eq(sum.errors, 0);
    ck_assert_uint_eq(sum.admitted[0][0], 3);
    ck_assert_uint_eq(sum.admitted[0][1], 10);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(lim, "small", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, _i == 0 ? SRL_KEY_OWN_LIMITS : 0u);
    /* Stored limits keep the key at rest; a call's do not. */
    clock.now += 2 * HOUR;
    ck_assert_int_eq(srl_evict_idle(lim), _i == 0 ? 0 : 2);
    srl_close(lim);
}
END_TEST

START_TEST(a_change_of_a_keys_limits_keeps_its_use)
{
    fake_clock clock = {.now = 1000 * SEC};
    srl_limiter *lim = open_local("100/1h", 0, &clock);
    srl_limits l10 = limits("token_bucket:10/1h"), l20 = limits("token_bucket:20/1h");
    ck_assert_int_eq(srl_key_set_limits(lim, "k", 1, &l10), 0);
    for (int n = 0; n < 4; n++)
        left_after_one(lim, "k", NULL);
    ck_assert_int_eq(srl_key_set_limits(lim, "k", 1, &l20), 0);
    ck_assert_uint_eq(left_after_one(lim, "k", NULL), 15);
    ck_assert_uint_eq(left_after_one(lim, "k", &l10), 14);   /* the stored set wins */
    ck_assert_int_eq(srl_key_clear_limits(lim, "k", 1), 0);
    ck_assert_uint_eq(left_after_one(lim, "k", NULL), 93);
    ck_assert_int_eq(srl_key_clear_limits(lim, "k", 1), 0);
    ck_assert_int_eq(srl_key_clear_limits(lim, "nokey", 5), SRL_ENOENT);
    srl_limits got;
    ck_assert_int_eq(srl_key_get_limits(lim, "k", 1, &got), SRL_ENOENT);
    for (int n = 0; n < 4; n++)
        left_after_one(lim, "c", &l10);
    ck_assert_uint_eq(left_after_one(lim, "c", &l20), 15);
    ck_assert_uint_eq(left_after_one(lim, "c", NULL), 94);   /* 6 used of 100 */
    /* Refund and peek read the key's own limits (a GCRA, beside a policy
     * of token buckets): 4 used of 10, one given back, 4 used with the next;
     * a cost of 11 is more than the key ever takes. */
    srl_limits g10 = limits("gcra:10/1h");
    ck_assert_int_eq(srl_key_set_limits(lim, "r", 1, &g10), 0);
    for (int n = 0; n < 4; n++)
        left_after_one(lim, "r", NULL);
    ck_assert_int_eq(srl_refund(lim, "r", 1, 1), 0);
    ck_assert_uint_eq(left_after_one(lim, "r", NULL), 6);
    srl_decision d;
    ck_assert_int_eq(srl_peek(lim, "r", 1, 11, &d), SRL_ECOST);
    ck_assert_int_eq(srl_peek(lim, "r", 1, 1, &d), 0);
    ck_assert_uint_eq(d.limit, 10);
    srl_close(lim);
}
END_TEST

START_TEST(refused_limits_say_why)
{
    fake_clock clock = {.now = 1000 * SEC};
    srl_limiter *lim = open_local("100/1h", 0, &clock);
    char msg[256];
    srl_decision d;
    srl_limits big = limits("sliding_log:50/1m");
    ck_assert_int_eq(srl_key_set_limits(lim, "k", 1, &big), SRL_EPOLICY);
    srl_last_error(msg, sizeof msg);
    ck_assert_str_eq(msg, "the key's limits need a state of 408 bytes; this in-process store's "
                          "nodes hold at most 24 (its policy's state): open it with a policy "
                          "whose state is at least that large");
    ck_assert_int_eq(srl_acquire_limits(lim, "k", 1, &big, 1, &d), SRL_EPOLICY);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), SRL_ENOENT);   /* not inserted */
    /* 256 distinct sets fill the table; the next says so. */
    for (int n = 1; n <= 256; n++) {
        char text[64];
        snprintf(text, sizeof text, "token_bucket:%d/1h", n);
        srl_limits l = limits(text);
        ck_assert_int_eq(srl_key_set_limits(lim, "k", 1, &l), 0);
        ck_assert_int_eq(srl_key_set_limits(lim, "j", 1, &l), 0);
    }
    srl_limits more = limits("token_bucket:257/1h");
    ck_assert_int_eq(srl_acquire_limits(lim, "x", 1, &more, 1, &d), SRL_ENOSPC);
    srl_last_error(msg, sizeof msg);
    ck_assert_str_eq(msg, "the store's table of per-key limit sets is full (256 distinct sets, "
                          "kept until close): give keys one of the sets in use");
    srl_close(lim);
    /* A lock-free handle has one GCRA word per key: none of its own. */
    lim = open_local("100/1h", 1, &clock);
    srl_limits l3 = limits("gcra:3/1h");
    ck_assert_int_eq(srl_key_set_limits(lim, "k", 1, &l3), SRL_ENOTSUP);
    srl_last_error(msg, sizeof msg);
    ck_assert_str_eq(msg, "a lock-free in-process store (SRL_CONFIG_LOCKFREE) decides every key "
                          "by its one GCRA word: open it without that flag for per-key limits");
    ck_assert_int_eq(srl_acquire_limits(lim, "k", 1, &l3, 1, &d), SRL_ENOTSUP);
    srl_close(lim);
}
END_TEST

START_TEST(bad_control_arguments_and_untracked_keys_are_refused)
{
    fake_clock clock = {.now = 1000 * SEC};
    srl_limiter *lim = open_local("100/1h", _i, &clock);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_ban(lim, "k", 1, 0, NULL), SRL_EINVAL);
    ck_assert_int_eq(srl_key_ban(lim, "k", 1, SEC, "a\nb"), SRL_EINVAL);
    ck_assert_int_eq(srl_key_exempt(lim, "k", 1, 2), SRL_EINVAL);
    ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), SRL_ENOENT);
    ck_assert_int_eq(srl_key_unban(lim, "k", 1), SRL_ENOENT);
    ck_assert_int_eq(srl_key_exempt(lim, "k", 1, 0), SRL_ENOENT);
    /* 64 distinct reasons fill the handle's table; a 65th is refused and
     * changes nothing, a reason in use is still taken. */
    for (int n = 0; n < 64; n++) {
        char why[32];
        snprintf(why, sizeof why, "reason %d", n);
        ck_assert_int_eq(srl_key_ban(lim, "k", 1, SEC, why), 0);
    }
    ck_assert_int_eq(srl_key_ban(lim, "k", 1, HOUR, "reason 64"), SRL_ENOSPC);
    ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), 0);
    ck_assert_uint_eq(kc.ban_left_ns, SEC);
    ck_assert_str_eq(kc.reason, "reason 63");
    ck_assert_int_eq(srl_key_ban(lim, "k", 1, HOUR, "reason 7"), 0);
    ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), 0);
    ck_assert_str_eq(kc.reason, "reason 7");
    /* reset forgets everything set on the key. */
    ck_assert_int_eq(srl_reset_key(lim, "k", 1), 0);
    ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), SRL_ENOENT);
    srl_close(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("local_control");
    TCase *tc = tcase_create("local_control");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, an_exempt_key_under_8_threads_is_never_refused_nor_evicted, 0, 2);
    tcase_add_loop_test(tc, a_banned_key_under_8_threads_is_denied_with_the_bans_time_left, 0, 2);
    tcase_add_loop_test(tc, a_ban_lifted_and_set_again_at_a_barrier_admits_exactly_between, 0, 2);
    tcase_add_loop_test(tc, per_key_limits_of_3_and_10_under_8_threads_admit_exactly_3_and_10, 0,
                        2);
    tcase_add_test(tc, a_ban_on_a_lockfree_handle_returns_after_every_admission_that_missed_it);
    tcase_add_test(tc, a_change_of_a_keys_limits_keeps_its_use);
    tcase_add_test(tc, refused_limits_say_why);
    tcase_add_loop_test(tc, bad_control_arguments_and_untracked_keys_are_refused, 0, 2);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
