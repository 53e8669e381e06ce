/*
 * check_shm_race.c - exactness of the shared store under real multi-process
 * races, and proof that these tests catch a broken store.
 *
 *   exactness:   8 processes x 2,000 tries on one key, 1,000 permits, frozen
 *                time (a fake ticker in a shared page): exactly 1,000
 *                admitted in every one of 20 trials, for each algorithm.
 *   one state:   5,000 rounds; in each, 8 processes send a new key's first
 *                request together, 1 permit: exactly one is admitted.
 *   relocation:  8 processes hammer 1,000 keys in a 1,024-slot table, so
 *                inserts relocate entries while others look them up: every
 *                key still has one state (what it admitted is what its state lost).
 *   broken:      the same harnesses over test-only broken variants of the
 *                store (SRL__SHM_TEST_NOLOCK_DECIDE: decide without the
 *                bucket lock; SRL__SHM_TEST_GET_THEN_PUT: search, unlock,
 *                insert) must over-admit at least once; the real store,
 *                run in the same test, never does.
 *
 * Workers are forked once per test and step through trials or rounds
 * together on a barrier in a shared page; their counts come back through
 * the same page.  Each worker opens the segment by name itself.
 *
 * Why a spinning barrier rather than pthread_barrier_wait: a futex barrier
 * wakes its sleepers tens of microseconds after the last arrival, while a
 * first request takes well under one, so on a 2-core machine the released
 * workers would almost never overlap and the race test would prove nothing.
 * Spinning waiters (yielding the CPU between polls, as 8 workers share 2
 * cores) leave the barrier within nanoseconds of each other.
 */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"
#include "srl.h"
#include "testutil.h"
#include "shm_testutil.h"

#define WORKERS 8
#define TRIALS 20
#define TRIES 2000
#define PERMITS 1000
#define ROUNDS 5000

struct area {
    struct spin_barrier barrier;
    uint32_t admitted[ROUNDS];      /* per trial or per round */
    uint32_t errors;
    uint32_t untracked;
};

static void area_free(struct area *a)
{
    munmap(a, sizeof *a);
}

/* All WORKERS wait here; the last to arrive releases the others. */
static void barrier_wait(struct area *a)
{
    spin_barrier_wait(&a->barrier, WORKERS);
}

static srl_config race_config(srl_algorithm algo, uint32_t permits, uint64_t capacity,
                              fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = algo, .permits = permits, .window_ns = 60 * SEC};
    cfg.capacity = capacity;
    cfg.ticker = fake_ticker(clock);
    cfg.lock_timeout_ms = 10000;   /* a slow sanitizer run is not a stuck owner */
    return cfg;
}

typedef void (*work_fn)(srl_limiter *lim, int worker, struct area *a);

/* Fork WORKERS processes; each opens name (creating it if it is first) with
 * test_flags set, runs fn, and exits.  Returns when all have exited 0. */
static void run_workers(const char *name, const srl_config *cfg, unsigned test_flags,
                        work_fn fn, struct area *a)
{
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] == 0) {
            srl_limiter *lim = NULL;
            if (srl_open_shared(name, cfg, SRL_CREATE, &lim) != 0)
                _exit(2);
            srl__shm_set_test_flags(lim, test_flags);
            fn(lim, w, a);
            srl_close(lim);
            _exit(0);
        }
    }
    for (int w = 0; w < WORKERS; w++) {
        int status;
        ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "worker %d ended with status %#x", w, status);
    }
    ck_assert_uint_eq(a->errors, 0);
}

/* ------------------------------------------------------- exactness */

static void hammer_one_key(srl_limiter *lim, int worker, struct area *a)
{
    (void)worker;
    for (int t = 0; t < TRIALS; t++) {
        char key[32];
        snprintf(key, sizeof key, "trial-%d", t);
        barrier_wait(a);
        uint32_t mine = 0;
        for (int i = 0; i < TRIES; i++) {
            srl_decision d = {0};
            if (srl_acquire(lim, key, strlen(key), 1, &d) != 0)
                __atomic_fetch_add(&a->errors, 1, __ATOMIC_RELAXED);
            mine += (uint32_t)d.allowed;
        }
        __atomic_fetch_add(&a->admitted[t], mine, __ATOMIC_RELAXED);
    }
}

/* Runs the exactness harness; returns the largest admitted count of any trial. */
static uint32_t exactness_run(srl_algorithm algo, unsigned test_flags, uint32_t *smallest)
{
    fake_clock *c = fake_clock_shared(5 * SEC);   /* frozen: nothing refills */
    const char *name = unique_name("exact");
    char nm[128];
    strcpy(nm, name);
    srl_config cfg = race_config(algo, PERMITS, 64, c);
    struct area *a = shared_zeroed(sizeof *a);
    run_workers(nm, &cfg, test_flags, hammer_one_key, a);
    uint32_t most = 0, least = UINT32_MAX;
    for (int t = 0; t < TRIALS; t++) {
        most = a->admitted[t] > most ? a->admitted[t] : most;
        least = a->admitted[t] < least ? a->admitted[t] : least;
    }
    if (test_flags == 0) {
        /* The segment's own totals agree with what the workers saw. */
        srl_limiter *lim;
        ck_assert_int_eq(srl_open_shared(nm, &cfg, 0, &lim), 0);
        srl_stats st;
        ck_assert_int_eq(srl_stats_get(lim, &st), 0);
        ck_assert_uint_eq(st.allowed, (uint64_t)PERMITS * TRIALS);
        ck_assert_uint_eq(st.allowed + st.denied, (uint64_t)WORKERS * TRIES * TRIALS);
        ck_assert_uint_eq(st.used, TRIALS);
        ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
        srl_close(lim);
    }
    ck_assert_int_eq(srl_unlink(nm), 0);
    area_free(a);
    *smallest = least;
    return most;
}

START_TEST(eight_processes_admit_exactly_1000_of_16000_in_every_trial)
{
    uint32_t least;
    uint32_t most = exactness_run((srl_algorithm)_i, 0, &least);
    ck_assert_uint_eq(most, PERMITS);
    ck_assert_uint_eq(least, PERMITS);
}
END_TEST

START_TEST(deciding_without_the_bucket_lock_over_admits_and_the_test_sees_it)
{
    /* Repeat the broken run a few times: one over-admission anywhere is
     * enough to show the harness can tell. */
    uint32_t most = 0, least;
    for (int run = 0; run < 5 && most <= PERMITS; run++) {
        uint32_t m = exactness_run(SRL_TOKEN_BUCKET, SRL__SHM_TEST_NOLOCK_DECIDE, &least);
        most = m > most ? m : most;
    }
    fprintf(stderr, "broken (no lock): worst trial admitted %u of %u permits\n", most, PERMITS);
    ck_assert_uint_gt(most, PERMITS);
    /* The real store, same harness: exact. */
    ck_assert_uint_eq(exactness_run(SRL_TOKEN_BUCKET, 0, &least), PERMITS);
    ck_assert_uint_eq(least, PERMITS);
}
END_TEST

/* ------------------------------------------------------- one state */

static void first_requests(srl_limiter *lim, int worker, struct area *a)
{
    (void)worker;
    for (int r = 0; r < ROUNDS; r++) {
        char key[32];
        snprintf(key, sizeof key, "new-key-%d", r);
        barrier_wait(a);
        srl_decision d = {0};
        if (srl_acquire(lim, key, strlen(key), 1, &d) != 0)
            __atomic_fetch_add(&a->errors, 1, __ATOMIC_RELAXED);
        if (d.flags != 0)   /* the broken variant's duplicates can fill the table */
            __atomic_fetch_add(&a->untracked, 1, __ATOMIC_RELAXED);
        if (d.allowed)
            __atomic_fetch_add(&a->admitted[r], 1, __ATOMIC_RELAXED);
    }
}

/* Returns how many rounds admitted more than one request. */
static int registry_run(unsigned test_flags, int *zero_rounds)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    char nm[128];
    strcpy(nm, unique_name("registry"));
    /* Room for every round's key: a full table would hide the race. */
    srl_config cfg = race_config(SRL_TOKEN_BUCKET, 1, 4 * ROUNDS, c);
    struct area *a = shared_zeroed(sizeof *a);
    run_workers(nm, &cfg, test_flags, first_requests, a);
    int over = 0, zero = 0;
    for (int r = 0; r < ROUNDS; r++) {
        over += a->admitted[r] > 1;
        zero += a->admitted[r] == 0;
    }
    if (test_flags == 0) {
        ck_assert_uint_eq(a->untracked, 0);
        srl_limiter *lim;
        ck_assert_int_eq(srl_open_shared(nm, &cfg, 0, &lim), 0);
        srl_stats st;
        ck_assert_int_eq(srl_stats_get(lim, &st), 0);
        ck_assert_uint_eq(st.used, ROUNDS);          /* one state per key */
        ck_assert_uint_eq(st.allowed, ROUNDS);
        ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
        srl_close(lim);
    }
    ck_assert_int_eq(srl_unlink(nm), 0);
    area_free(a);
    *zero_rounds = zero;
    return over;
}

START_TEST(eight_first_requests_for_a_new_key_create_one_state_in_5000_rounds)
{
    int zero;
    ck_assert_int_eq(registry_run(0, &zero), 0);
    ck_assert_int_eq(zero, 0);    /* and exactly one: the first is always allowed */
}
END_TEST

START_TEST(get_then_put_admits_a_second_first_request_and_the_test_sees_it)
{
    int zero, over = 0;
    for (int run = 0; run < 5 && over == 0; run++)
        over = registry_run(SRL__SHM_TEST_GET_THEN_PUT, &zero);
    fprintf(stderr, "broken (get-then-put): %d of %d rounds admitted twice or more\n", over, ROUNDS);
    ck_assert_int_gt(over, 0);
    ck_assert_int_eq(registry_run(0, &zero), 0);
    ck_assert_int_eq(zero, 0);
}
END_TEST

/* ------------------------------------------------------- relocation */

#define DENSE_KEYS 1000     /* of 1024 slots: two-choice alone overflows, relocation runs */
#define DENSE_PERMITS 5
#define DENSE_PASSES 8

static void dense_requests(srl_limiter *lim, int worker, struct area *a)
{
    barrier_wait(a);
    for (int pass = 0; pass < DENSE_PASSES; pass++) {
        for (int j = 0; j < DENSE_KEYS; j++) {
            /* Each worker walks the keys in its own order. */
            int key_no = (j * 7 + worker * 131 + pass * 17) % DENSE_KEYS;
            char key[32];
            snprintf(key, sizeof key, "dense-%d", key_no);
            srl_decision d = {0};
            if (srl_acquire(lim, key, strlen(key), 1, &d) != 0)
                __atomic_fetch_add(&a->errors, 1, __ATOMIC_RELAXED);
            if (d.allowed)
                __atomic_fetch_add(&a->admitted[key_no], 1, __ATOMIC_RELAXED);
        }
    }
}

START_TEST(keys_moved_by_relocation_keep_one_state_under_concurrent_requests)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    char nm[128];
    strcpy(nm, unique_name("dense"));
    srl_config cfg = race_config(SRL_TOKEN_BUCKET, DENSE_PERMITS, 1024, c);
    cfg.on_full = SRL_ON_FULL_DENY;   /* an untracked request must not count as admitted */
    struct area *a = shared_zeroed(sizeof *a);
    run_workers(nm, &cfg, 0, dense_requests, a);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(nm, &cfg, 0, &lim), 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    uint64_t total = 0;
    for (int k = 0; k < DENSE_KEYS; k++) {
        ck_assert_uint_le(a->admitted[k], DENSE_PERMITS);
        total += a->admitted[k];
        char key[32];
        snprintf(key, sizeof key, "dense-%d", k);
        srl_decision d;
        int rc = srl_peek(lim, key, strlen(key), 1, &d);
        if (rc == 0) {
            /* Tracked: what it admitted is exactly what its one state lost
             * (a key first found the table full is inserted later, so it
             * may have fewer tries left than permits). */
            uint32_t left = d.allowed ? d.remaining + 1 : 0;
            ck_assert_uint_eq(a->admitted[k], DENSE_PERMITS - left);
        } else {
            ck_assert_int_eq(rc, SRL_ENOENT);
            ck_assert_uint_eq(a->admitted[k], 0);   /* never got a slot */
        }
    }
    fprintf(stderr, "dense table: %llu of %d keys tracked, %llu requests found it full\n",
            (unsigned long long)st.used, DENSE_KEYS, (unsigned long long)st.full);
    ck_assert_uint_eq(st.allowed, total);
    ck_assert_uint_ge(st.used, DENSE_KEYS * 95 / 100);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);   /* no duplicate anywhere */
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(nm), 0);
    area_free(a);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_race");
    TCase *tc = tcase_create("race");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, eight_processes_admit_exactly_1000_of_16000_in_every_trial, 0, 4);
    tcase_add_test(tc, deciding_without_the_bucket_lock_over_admits_and_the_test_sees_it);
    tcase_add_test(tc, eight_first_requests_for_a_new_key_create_one_state_in_5000_rounds);
    tcase_add_test(tc, get_then_put_admits_a_second_first_request_and_the_test_sees_it);
    tcase_add_test(tc, keys_moved_by_relocation_keep_one_state_under_concurrent_requests);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"exact", "registry", "dense"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
