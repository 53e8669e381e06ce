/*
 * check_shm_inflight.c - in-flight limits (srl_enter/srl_leave) and compound
 * policies on the shared and anonymous stores, with real forked processes.
 *
 *   table:     inflight_testutil.h's tables on a named and an anonymous
 *              segment (concurrency alone, and with a rate limit).
 *   race:      8 processes enter/leave one key of limit 4, started together
 *              on a spinning barrier, each holding its unit for a few
 *              yields: a shared counter of those inside never exceeds 4,
 *              every process gets all its rounds in, and afterwards nothing
 *              is in flight.  5 trials.  The same harness with
 *              SRL__SHM_TEST_NOLOCK_ENTER (enter on a copy, without the
 *              bucket lock) is caught: more than 4 inside, or units left
 *              over, in some trial.
 *   kill:      workers SIGKILLed at random moments while they enter, hold
 *              and leave (inside srl_enter and srl_leave too), 200 kills;
 *              then srl_evict_idle reclaims the dead holders' units:
 *              nothing in flight, srl_check clean, exactly 4 admitted next.
 *   liveness:  a unit whose recorded start time no longer matches its pid
 *              (the pid was reused) is reclaimed when the key is full; a
 *              SIGSTOPped holder keeps its units until it dies; max_hold
 *              frees a unit held too long even though its holder lives.
 *   compound:  a segment stores every limit of its policy (adopted by an
 *              opener without a config, another compound is a mismatch),
 *              and 8 processes on one key of "token_bucket:1000/1h +
 *              sliding_log:300/1h" get exactly 300 admissions, every denial
 *              naming limit 1; 10 trials.
 */
#include <check.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inflight_testutil.h"
#include "shm.h"
#include "shm_testutil.h"
#include "srl.h"
#include "testhooks.h"
#include "testutil.h"

#define WORKERS 8
#define UNITS 4
#define ROUNDS 400
#define TRIALS 5

static srl_config config_text(const char *policy, fake_clock *c)
{
    srl_config cfg;
    srl_config_init(&cfg);
    srl_policy_error pe;
    ck_assert_msg(srl_limits_parse_ex(policy, &cfg.limits, &pe) == 0, "%s: %s", policy,
                  pe.message);
    cfg.capacity = 64;
    if (c != NULL)
        cfg.ticker = fake_ticker(c);
    cfg.lock_timeout_ms = 10000;   /* a slow sanitizer run is not a stuck owner */
    return cfg;
}

/* ------------------------------------------------------------ tables */

START_TEST(named_and_anonymous_segments_hold_units_exactly)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_config cfg = config_text("concurrency:4", c);
    char nm[128];
    strcpy(nm, unique_name("inflight"));
    srl_limiter *lim, *other, *anon;
    ck_assert_int_eq(srl_open_shared(nm, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    ck_assert_int_eq(srl_open_shared(nm, &cfg, 0, &other), 0);
    inflight_store_table(lim, other);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_close(other);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(nm), 0);
    ck_assert_int_eq(srl_open_anonymous(&cfg, &anon), 0);
    ck_assert_int_eq(srl_open_anonymous(&cfg, &other), 0);
    inflight_store_table(anon, other);
    srl_close(other);
    srl_close(anon);
}
END_TEST

START_TEST(a_unit_and_a_rate_limit_are_taken_together_or_not_at_all)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_config cfg = config_text("concurrency:2 + token_bucket:3/1h", c);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    inflight_compound_table(lim);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_close(lim);
}
END_TEST

START_TEST(enter_on_a_rate_limiter_and_acquire_on_a_unit_limiter_are_not_supported)
{
    srl_config cfg = config_text("token_bucket:5/1s", NULL);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_lease l;
    srl_decision d;
    ck_assert_int_eq(srl_enter(lim, "k", 1, &l, &d), SRL_ENOTSUP);
    ck_assert_int_eq(srl_leave(lim, &l), SRL_ENOTSUP);
    srl_close(lim);
    /* Two unit limits in one compound: one lease cannot name both. */
    srl_limits two;
    ck_assert_int_eq(srl_limits_parse_ex("concurrency:2 + concurrency:3", &two, NULL),
                     SRL_EPOLICY);
}
END_TEST

/* ------------------------------------------------------------ race */

struct race_area {
    struct spin_barrier barrier;
    uint32_t inside;                /* processes between enter and leave */
    uint32_t max_inside;
    uint32_t entered;               /* admissions, all processes */
    uint32_t errors;
    uint32_t stop;                  /* a worker saw the limit broken: all stop */
};

static void race_worker(srl_limiter *lim, struct race_area *a)
{
    spin_barrier_wait(&a->barrier, WORKERS);
    for (int r = 0; r < ROUNDS && !__atomic_load_n(&a->stop, __ATOMIC_RELAXED); r++) {
        srl_lease l;
        srl_decision d;
        /* Every enter eventually succeeds: retry until admitted.  A broken
         * store can leak units for good (none would ever be free again):
         * after far more tries than a correct one ever needs, give up and
         * report it. */
        for (long tries = 0;; tries++) {
            if (srl_enter(lim, "hot", 3, &l, &d) != 0 || tries == 200000 ||
                __atomic_load_n(&a->stop, __ATOMIC_RELAXED)) {
                __atomic_add_fetch(&a->errors, 1, __ATOMIC_RELAXED);
                __atomic_store_n(&a->stop, 1, __ATOMIC_RELAXED);
                _exit(2);
            }
            if (d.allowed)
                break;
            sched_yield();
        }
        uint32_t now = __atomic_add_fetch(&a->inside, 1, __ATOMIC_ACQ_REL);
        if (now > UNITS)
            __atomic_store_n(&a->stop, 1, __ATOMIC_RELAXED);
        uint32_t seen = __atomic_load_n(&a->max_inside, __ATOMIC_RELAXED);
        while (now > seen &&
               !__atomic_compare_exchange_n(&a->max_inside, &seen, now, false, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED)) {
        }
        __atomic_add_fetch(&a->entered, 1, __ATOMIC_RELAXED);
        sched_yield();   /* hold the unit while others try */
        __atomic_sub_fetch(&a->inside, 1, __ATOMIC_ACQ_REL);
        if (srl_leave(lim, &l) != 0) {
            __atomic_add_fetch(&a->errors, 1, __ATOMIC_RELAXED);
            __atomic_store_n(&a->stop, 1, __ATOMIC_RELAXED);
        }
    }
    _exit(0);
}

/* One trial; returns 1 if it saw the limit broken (more than UNITS inside,
 * a failed leave, or units left in flight). */
static int race_trial(unsigned test_flags, int trial)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_config cfg = config_text("concurrency:4", c);
    char nm[128];
    snprintf(nm, sizeof nm, "%s", unique_name("inflight-race"));
    srl_limiter *lim;
    ck_assert_int_eq(srl__shm_open(nm, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    srl__shm_set_test_flags(lim, test_flags);
    /* The key exists before the race: the broken variant applies to an
     * existing key (an insert always runs under both locks). */
    srl_lease l;
    srl_decision d;
    ck_assert_int_eq(srl_enter(lim, "hot", 3, &l, &d), 0);
    ck_assert_int_eq(srl_leave(lim, &l), 0);
    struct race_area *a = shared_zeroed(sizeof *a);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] == 0)
            race_worker(lim, a);
    }
    int failed_workers = 0;
    for (int w = 0; w < WORKERS; w++) {
        int st;
        ck_assert_int_eq(waitpid(pids[w], &st, 0), pids[w]);
        failed_workers += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    uint64_t left = inflight_total(lim);
    int broken = a->max_inside > UNITS || a->errors != 0 || left != 0 || failed_workers != 0;
    if (test_flags == 0) {
        ck_assert_msg(!broken, "trial %d: max inside %u, errors %u, left %llu, failed %d", trial,
                      a->max_inside, a->errors, (unsigned long long)left, failed_workers);
        ck_assert_uint_eq(a->entered, WORKERS * ROUNDS);
        ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    }
    munmap(a, sizeof *a);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(nm), 0);
    return broken;
}

START_TEST(eight_processes_never_have_more_than_four_inside_and_every_enter_succeeds)
{
    for (int t = 0; t < TRIALS; t++)
        race_trial(0, t);
}
END_TEST

START_TEST(the_race_catches_enter_without_the_bucket_lock)
{
    int caught = 0;
    for (int t = 0; t < 40 && !caught; t++)   /* run until caught (Check's timeout bounds it) */
        caught = race_trial(SRL__SHM_TEST_NOLOCK_ENTER, t);
    ck_assert_msg(caught, "enter without the lock was never caught in 40 trials");
}
END_TEST

/* ------------------------------------------------------------ kill */

struct kill_area {
    uint32_t admitted;              /* enters admitted, all workers */
};

static void kill_worker(srl_limiter *lim, struct kill_area *a)
{
    for (;;) {
        srl_lease l;
        srl_decision d;
        if (srl_enter(lim, "victim", 6, &l, &d) != 0)
            _exit(2);
        if (!d.allowed) {
            sched_yield();
            continue;
        }
        __atomic_add_fetch(&a->admitted, 1, __ATOMIC_RELAXED);
        for (int i = 0; i < 20; i++)
            sched_yield();   /* hold it: most kills find a unit held */
        int rc = srl_leave(lim, &l);
        if (rc != 0)
            _exit(3);        /* a live holder's unit is never taken from it */
    }
}

START_TEST(workers_killed_holding_units_are_reclaimed_and_nothing_is_released_twice)
{
    srl_config cfg = config_text("concurrency:4", NULL);
    char nm[128];
    snprintf(nm, sizeof nm, "%s", unique_name("inflight-kill"));
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(nm, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    struct kill_area *a = shared_zeroed(sizeof *a);
    enum { LIVE = 3, KILLS = 200 };
    pid_t pids[LIVE];
    for (int w = 0; w < LIVE; w++) {
        pids[w] = test_fork();
        if (pids[w] == 0)
            kill_worker(lim, a);
    }
    uint64_t seed = 0x6b696c6cull;
    for (int k = 0; k < KILLS; k++) {
        /* Let the victim make progress (an admission since the last kill),
         * then kill it after a random few hundred microseconds. */
        uint32_t before = __atomic_load_n(&a->admitted, __ATOMIC_RELAXED);
        while (__atomic_load_n(&a->admitted, __ATOMIC_RELAXED) == before)
            sched_yield();
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        struct timespec ts = {0, (long)((seed >> 33) % 400000)};
        nanosleep(&ts, NULL);
        int w = (int)((seed >> 20) % LIVE);
        ck_assert_int_eq(kill(pids[w], SIGKILL), 0);
        int st;
        ck_assert_int_eq(waitpid(pids[w], &st, 0), pids[w]);
        ck_assert_msg(WIFSIGNALED(st), "worker exited by itself (status %d): a leave failed", st);
        pids[w] = test_fork();
        if (pids[w] == 0)
            kill_worker(lim, a);
    }
    for (int w = 0; w < LIVE; w++) {
        kill(pids[w], SIGKILL);
        waitpid(pids[w], NULL, 0);
    }
    srl_stats before;
    ck_assert_int_eq(srl_stats_get(lim, &before), 0);
    /* Every holder is dead now: the sweep frees all their units. */
    srl_evict_idle(lim);
    ck_assert_uint_eq(inflight_total(lim), 0);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_stats after;
    ck_assert_int_eq(srl_stats_get(lim, &after), 0);
    ck_assert_uint_gt(after.reclaimed, 0);
    ck_assert_uint_le(after.reclaimed, (uint64_t)KILLS * UNITS);
    /* Exactly four fit again: no unit was lost or freed twice. */
    srl_lease l[UNITS];
    for (int i = 0; i < UNITS; i++)
        l[i] = inflight_enter_ok(lim, "victim", UNITS - 1 - (uint32_t)i);
    inflight_enter_denied(lim, "victim", 0, 1000000000ull);
    for (int i = 0; i < UNITS; i++)
        ck_assert_int_eq(srl_leave(lim, &l[i]), 0);
    munmap(a, sizeof *a);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(nm), 0);
}
END_TEST

/* ------------------------------------------------------------ liveness */

/* Holder entry i of the concurrency state at the start of a key's state
 * (algo_concurrency.c: a 16-byte head, then 32-byte entries of pid, gen,
 * start, pidns, since_ns). */
static uint64_t *entry_start(void *state, unsigned i)
{
    return (uint64_t *)((char *)state + 16 + 32 * i + 8);
}

/* The state of the (only) key in the segment itself: srl_entry.state is a
 * copy (srl.h), and the test writes the segment (white-box, shm.h). */
static int grab_fp(const srl_entry *e, void *ctx)
{
    memcpy(ctx, e->fingerprint, SRL__SHM_FP_BYTES);
    return 1;
}

static void *mapped_state(srl_limiter *lim)
{
    uint8_t fp[SRL__SHM_FP_BYTES];
    ck_assert_int_eq(srl_foreach(lim, grab_fp, fp), 1);
    struct srl__shm *s = lim->impl;
    for (uint64_t b = 0; b < s->buckets; b++)
        for (unsigned i = 0; i < SRL__SHM_SLOTS; i++)
            if (srl__shm_bucket(s, b)->tags[i] != 0 &&
                memcmp(srl__shm_slot(s, b, i), fp, sizeof fp) == 0)
                return srl__shm_slot_state(s, b, i);
    ck_abort_msg("the key is not in the table");
    return NULL;
}

START_TEST(a_unit_whose_pid_now_names_another_process_is_reclaimed_when_the_key_is_full)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_config cfg = config_text("concurrency:4", c);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_lease old = inflight_enter_ok(lim, "k", 3);
    /* Our pid, another start time: the process that held it is gone and
     * its pid was reused (by us).  The segment is ours to write in a test. */
    *entry_start(mapped_state(lim), old.entry) += 1;
    srl_lease l1 = inflight_enter_ok(lim, "k", 2);
    srl_lease l2 = inflight_enter_ok(lim, "k", 1);
    srl_lease l3 = inflight_enter_ok(lim, "k", 0);
    /* Full: the stale unit is reclaimed before a denial, ours are not. */
    srl_lease l4 = inflight_enter_ok(lim, "k", 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.reclaimed, 1);
    ck_assert_uint_eq(inflight_total(lim), 4);
    inflight_enter_denied(lim, "k", 0, 1000000000ull);
    ck_assert_int_eq(srl_leave(lim, &old), SRL_ENOENT);
    ck_assert_int_eq(srl_leave(lim, &l1), 0);
    ck_assert_int_eq(srl_leave(lim, &l2), 0);
    ck_assert_int_eq(srl_leave(lim, &l3), 0);
    ck_assert_int_eq(srl_leave(lim, &l4), 0);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_close(lim);
}
END_TEST

START_TEST(a_stopped_holder_keeps_its_units_until_it_dies)
{
    srl_config cfg = config_text("concurrency:4", NULL);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    pid_t p = test_fork();
    if (p == 0) {
        for (int i = 0; i < UNITS; i++) {
            srl_lease l;
            srl_decision d;
            if (srl_enter(lim, "k", 1, &l, &d) != 0 || !d.allowed)
                _exit(1);
        }
        raise(SIGSTOP);
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(p, &st, WUNTRACED), p);
    ck_assert(WIFSTOPPED(st));
    inflight_enter_denied(lim, "k", 0, 1000000000ull);
    ck_assert_int_eq(srl_evict_idle(lim), 0);
    ck_assert_uint_eq(inflight_total(lim), 4);
    ck_assert_int_eq(kill(p, SIGKILL), 0);
    ck_assert_int_eq(waitpid(p, &st, 0), p);
    srl_lease l = inflight_enter_ok(lim, "k", 3);   /* the dead holder's 4 freed, 1 taken */
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);
    ck_assert_uint_eq(s.reclaimed, 4);
    ck_assert_int_eq(srl_leave(lim, &l), 0);
    srl_close(lim);
}
END_TEST

/* A holder killed while its parent has not reaped it is a zombie: it has
 * exited, and its unit is reclaimed at once, not after the reaping. */
START_TEST(a_killed_holder_not_yet_reaped_is_dead)
{
    srl_config cfg = config_text("concurrency:1", NULL);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    pid_t p = test_fork();
    if (p == 0) {
        srl_lease l;
        srl_decision d;
        if (srl_enter(lim, "k", 1, &l, &d) != 0 || !d.allowed)
            _exit(1);
        raise(SIGKILL);
    }
    /* Arranged, not hoped for: wait (unreaped) until it is a zombie. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
    while (proc_stat_state(path) != 'Z')
        sched_yield();
    srl_lease l = inflight_enter_ok(lim, "k", 0);   /* the zombie's unit was freed */
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.reclaimed, 1);
    ck_assert_int_eq(srl_leave(lim, &l), 0);
    ck_assert_int_eq(waitpid(p, NULL, 0), p);
    srl_close(lim);
}
END_TEST

START_TEST(a_unit_held_past_max_hold_is_freed_although_its_holder_lives)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_config cfg = config_text("concurrency:2,max_hold=10s", c);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_lease a = inflight_enter_ok(lim, "k", 1);
    c->now += 4 * SEC;
    srl_lease b = inflight_enter_ok(lim, "k", 0);
    inflight_enter_denied(lim, "k", 0, 6 * SEC);   /* a passes max_hold in 6 s */
    c->now += 6 * SEC;
    srl_lease n = inflight_enter_ok(lim, "k", 0);  /* a freed, b still held */
    ck_assert_int_eq(srl_leave(lim, &a), SRL_ENOENT);
    ck_assert_int_eq(srl_leave(lim, &b), 0);
    ck_assert_int_eq(srl_leave(lim, &n), 0);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);
    ck_assert_uint_eq(s.reclaimed, 1);
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------------------ compound */

START_TEST(a_segment_stores_every_limit_and_another_compound_is_a_mismatch)
{
    srl_config cfg = config_text("token_bucket:10/1s + gcra:100/1h", NULL);
    char nm[128];
    strcpy(nm, unique_name("compound"));
    srl_limiter *lim, *again;
    ck_assert_int_eq(srl_open_shared(nm, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    ck_assert_int_eq(srl_open_shared(nm, NULL, 0, &again), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(again, &info), 0);
    char text[SRL_LIMITS_TEXT_MAX];
    ck_assert_int_ge(srl_limits_format(&info.limits, text, sizeof text), 0);
    ck_assert_str_eq(text, "token_bucket:10/1s + gcra:100/1h");
    ck_assert_uint_eq(info.layout_version, SRL__SHM_VERSION);
    ck_assert_uint_eq(info.state_bytes, 24 + 8);
    ck_assert_uint_eq(info.policy.permits, 10);
    srl_close(again);
    srl_config one = config_text("token_bucket:10/1s", NULL);
    ck_assert_int_eq(srl_open_shared(nm, &one, 0, &again), SRL_EMISMATCH);
    srl_config swapped = config_text("gcra:100/1h + token_bucket:10/1s", NULL);
    ck_assert_int_eq(srl_open_shared(nm, &swapped, 0, &again), SRL_EMISMATCH);
    srl_config same = config_text("token_bucket:10/1s+gcra:100/1h", NULL);
    ck_assert_int_eq(srl_open_shared(nm, &same, 0, &again), 0);
    srl_close(again);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(nm), 0);
}
END_TEST

struct compound_area {
    struct spin_barrier barrier;
    uint32_t admitted;
    uint32_t wrong_binding;
    uint32_t errors;
};

START_TEST(eight_processes_on_a_compound_get_exactly_the_tightest_limit)
{
    for (int t = 0; t < 10; t++) {
        fake_clock *c = fake_clock_shared(5 * SEC);
        srl_config cfg = config_text("token_bucket:1000/1h + sliding_log:300/1h", c);
        char nm[128];
        snprintf(nm, sizeof nm, "%s", unique_name("compound-race"));
        srl_limiter *lim;
        ck_assert_int_eq(srl_open_shared(nm, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
        struct compound_area *a = shared_zeroed(sizeof *a);
        pid_t pids[WORKERS];
        for (int w = 0; w < WORKERS; w++) {
            pids[w] = test_fork();
            if (pids[w] == 0) {
                spin_barrier_wait(&a->barrier, WORKERS);
                for (int i = 0; i < 100; i++) {
                    srl_decision d;
                    if (srl_acquire(lim, "k", 1, 1, &d) != 0)
                        __atomic_add_fetch(&a->errors, 1, __ATOMIC_RELAXED);
                    else if (d.allowed)
                        __atomic_add_fetch(&a->admitted, 1, __ATOMIC_RELAXED);
                    else if (d.binding != 1)
                        __atomic_add_fetch(&a->wrong_binding, 1, __ATOMIC_RELAXED);
                }
                _exit(0);
            }
        }
        for (int w = 0; w < WORKERS; w++)
            ck_assert_int_eq(waitpid(pids[w], NULL, 0), pids[w]);
        ck_assert_uint_eq(a->errors, 0);
        ck_assert_uint_eq(a->admitted, 300);
        ck_assert_uint_eq(a->wrong_binding, 0);
        /* All or nothing: the token bucket lost exactly 300, not 800. */
        srl_decision d;
        ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), 0);
        ck_assert_uint_eq(d.remaining, 0);
        srl_limits tb;
        ck_assert_int_eq(srl_limits_parse_ex("token_bucket:1000/1h", &tb, NULL), 0);
        ck_assert_int_eq(srl_limits_state_peek(&tb, mapped_state(lim), c->now, 1, &d), 0);
        ck_assert_uint_eq(d.remaining, 699);   /* 700 left, less this peek's cost of 1 */
        ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
        munmap(a, sizeof *a);
        srl_close(lim);
        ck_assert_int_eq(srl_unlink(nm), 0);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("inflight");
    TCase *tc = tcase_create("shared");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, named_and_anonymous_segments_hold_units_exactly);
    tcase_add_test(tc, a_unit_and_a_rate_limit_are_taken_together_or_not_at_all);
    tcase_add_test(tc, enter_on_a_rate_limiter_and_acquire_on_a_unit_limiter_are_not_supported);
    tcase_add_test(tc, eight_processes_never_have_more_than_four_inside_and_every_enter_succeeds);
    tcase_add_test(tc, the_race_catches_enter_without_the_bucket_lock);
    tcase_add_test(tc, workers_killed_holding_units_are_reclaimed_and_nothing_is_released_twice);
    tcase_add_test(tc, a_unit_whose_pid_now_names_another_process_is_reclaimed_when_the_key_is_full);
    tcase_add_test(tc, a_stopped_holder_keeps_its_units_until_it_dies);
    tcase_add_test(tc, a_killed_holder_not_yet_reaped_is_dead);
    tcase_add_test(tc, a_unit_held_past_max_hold_is_freed_although_its_holder_lives);
    tcase_add_test(tc, a_segment_stores_every_limit_and_another_compound_is_a_mismatch);
    tcase_add_test(tc, eight_processes_on_a_compound_get_exactly_the_tightest_limit);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    const char *tags[] = {"inflight", "inflight-race", "inflight-kill", "compound",
                          "compound-race"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? 0 : 1;
}
