/*
 * check_rlctl_control_race.c - suite "rlctl_control_race": rlctl ban and
 * unban against 4 forked workers (test_fork) deciding one key "hot" on a
 * segment the test creates (issue 41 item 2; tools/rlctl_control.c).
 *
 *   between phases  the parent opens each phase with a byte per worker on
 *                   its go pipe and waits for 4 bytes on done: phase 0
 *                   admitted, rlctl ban, phase 1 all denied, rlctl unban,
 *                   phase 2 all admitted (exact counts, 2000 per worker)
 *   while hammering each worker has decided 100 times (a byte on the
 *                   started pipe) before rlctl ban runs; once it returns
 *                   the parent raises a flag, and every decision a worker
 *                   starts after seeing it (2000 each) is denied
 *
 * The policies hold far more permits than the workers use: only the ban
 * denies.  No sleeps: pipes and a flag in a shared page order everything.
 * Workers report through shared_zeroed() pages and their exit status,
 * never Check (testutil.h).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rlctl_assert.h"
#include "srl.h"
#include "testutil.h"

#define WORKERS 4
#define PHASES 3
#define PER_PHASE 2000u

struct tally {
    unsigned allowed[WORKERS][PHASES], denied[WORKERS][PHASES];
    uint64_t min_retry_denied[WORKERS][PHASES];
    int failed[WORKERS];   /* an srl call failed: its code */
};

/* A forked worker's own handle on the segment; on failure the code goes
 * to *failed (the shared page) and the worker exits 1 (no Check in a child). */
static srl_limiter *child_open(const char *name, int *failed)
{
    srl_config cfg;
    srl_config_init(&cfg);
    srl_limiter *lim;
    int rc = srl_open_shared(name, &cfg, SRL_ADOPT, &lim);
    if (rc != 0) {
        *failed = rc;
        _exit(1);
    }
    return lim;
}

/* A worker: per phase, wait for the parent's byte on go, decide PER_PHASE
 * requests of "hot", say done.  Reports only through the shared page. */
static void worker(const char *name, int w, int go, int done, struct tally *t)
{
    srl_limiter *lim = child_open(name, &t->failed[w]);
    int rc;
    for (int p = 0; p < PHASES; p++) {
        char b;
        if (read(go, &b, 1) != 1)
            _exit(2);
        uint64_t min_retry = UINT64_MAX;
        for (unsigned i = 0; i < PER_PHASE; i++) {
            srl_decision d;
            rc = srl_acquire(lim, "hot", 3, 1, &d);
            if (rc != 0) {
                t->failed[w] = rc;
                _exit(3);
            }
            if (d.allowed) {
                t->allowed[w][p]++;
            } else {
                t->denied[w][p]++;
                if (d.retry_after_ns < min_retry)
                    min_retry = d.retry_after_ns;
            }
        }
        t->min_retry_denied[w][p] = min_retry;
        if (write(done, "d", 1) != 1)
            _exit(4);
    }
    srl_close(lim);
    _exit(0);
}

/* Open phase p for every worker and wait until all have finished it. */
static void run_phase(int go[WORKERS][2], int done)
{
    for (int w = 0; w < WORKERS; w++)
        ck_assert_int_eq(write(go[w][1], "g", 1), 1);
    for (int w = 0; w < WORKERS; w++) {
        char b;
        ssize_t n;
        while ((n = read(done, &b, 1)) < 0 && errno == EINTR)
            ;
        ck_assert_msg(n == 1, "a worker died in the phase");
    }
}

START_TEST(after_rlctl_ban_returns_every_decision_is_denied)
{
    char name[160];
    seg_name(name, sizeof name, "race");
    /* Far more than 3 phases' requests: only the ban can deny. */
    seg_create(name, "token_bucket:1000000/1h", "64", "16");
    struct tally *t = shared_zeroed(sizeof *t);
    int go[WORKERS][2], done[2];
    ck_assert_int_eq(pipe(done), 0);
    pid_t pid[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        ck_assert_int_eq(pipe(go[w]), 0);
        pid[w] = test_fork();
        if (pid[w] == 0) {
            close(done[0]);
            worker(name, w, go[w][0], done[1], t);
        }
        close(go[w][0]);
    }
    close(done[1]);
    run_result r;
    run_phase(go, done[0]);                  /* 0: admitted */
    RUN(&r, 0, "ban", name, "hot", "--for", "1h");
    run_free(&r);
    run_phase(go, done[0]);                  /* 1: banned */
    RUN(&r, 0, "unban", name, "hot");
    run_free(&r);
    run_phase(go, done[0]);                  /* 2: admitted again */
    for (int w = 0; w < WORKERS; w++) {
        int st;
        ck_assert_int_eq(waitpid(pid[w], &st, 0), pid[w]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d: status %d, srl %d", w,
                      st, t->failed[w]);
        close(go[w][1]);
    }
    close(done[0]);
    unsigned allowed[PHASES] = {0}, denied[PHASES] = {0};
    for (int w = 0; w < WORKERS; w++)
        for (int p = 0; p < PHASES; p++) {
            allowed[p] += t->allowed[w][p];
            denied[p] += t->denied[w][p];
        }
    ck_assert_uint_eq(allowed[0], WORKERS * PER_PHASE);
    ck_assert_uint_eq(denied[0], 0);
    ck_assert_uint_eq(allowed[1], 0);
    ck_assert_uint_eq(denied[1], WORKERS * PER_PHASE);
    ck_assert_uint_eq(allowed[2], WORKERS * PER_PHASE);
    ck_assert_uint_eq(denied[2], 0);
    for (int w = 0; w < WORKERS; w++)
        ck_assert_uint_gt(t->min_retry_denied[w][1], 3500 * SEC);
    seg_destroy(name);
}
END_TEST

/* The ban lands while the workers hammer: each worker has decided (and
 * said so on the started pipe) before rlctl ban runs; once it returns the
 * parent raises a flag, and every decision a worker starts after seeing
 * the flag (PER_PHASE each) must be denied.  Decisions before the flag may
 * go either way (the ban lands somewhere among them). */
struct hammer {
    int flag;   /* 0, then 1 once rlctl ban has returned (atomic) */
    unsigned before[WORKERS], after_allowed[WORKERS], after_denied[WORKERS];
    int failed[WORKERS];
};

static void hammer_worker(const char *name, int w, int started, struct hammer *h)
{
    srl_limiter *lim = child_open(name, &h->failed[w]);
    int rc;
    unsigned after = 0;
    while (after < PER_PHASE) {
        int seen = __atomic_load_n(&h->flag, __ATOMIC_ACQUIRE);
        srl_decision d;
        rc = srl_acquire(lim, "hot", 3, 1, &d);
        if (rc != 0) {
            h->failed[w] = rc;
            _exit(3);
        }
        if (!seen) {
            if (++h->before[w] == 100 && write(started, "s", 1) != 1)
                _exit(4);
            continue;
        }
        after++;
        if (d.allowed)
            h->after_allowed[w]++;
        else
            h->after_denied[w]++;
    }
    srl_close(lim);
    _exit(0);
}

START_TEST(a_ban_that_lands_while_workers_hammer_denies_all_after_it_returns)
{
    char name[160];
    seg_name(name, sizeof name, "hammer");
    /* Only the ban can deny: far more permits than the workers can use. */
    seg_create(name, "token_bucket:100000000/1h", "64", "16");
    struct hammer *h = shared_zeroed(sizeof *h);
    int started[2];
    ck_assert_int_eq(pipe(started), 0);
    pid_t pid[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pid[w] = test_fork();
        if (pid[w] == 0) {
            close(started[0]);
            hammer_worker(name, w, started[1], h);
        }
    }
    close(started[1]);
    for (int w = 0; w < WORKERS; w++) {   /* all four are deciding */
        char b;
        ssize_t n;
        while ((n = read(started[0], &b, 1)) < 0 && errno == EINTR)
            ;
        ck_assert_msg(n == 1, "a worker died before deciding");
    }
    run_result r;
    RUN(&r, 0, "ban", name, "hot", "--for", "1h");
    run_free(&r);
    __atomic_store_n(&h->flag, 1, __ATOMIC_RELEASE);
    unsigned allowed = 0, denied = 0;
    for (int w = 0; w < WORKERS; w++) {
        int st;
        ck_assert_int_eq(waitpid(pid[w], &st, 0), pid[w]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d: status %d, srl %d", w,
                      st, h->failed[w]);
        ck_assert_uint_ge(h->before[w], 100);
        allowed += h->after_allowed[w];
        denied += h->after_denied[w];
    }
    close(started[0]);
    ck_assert_uint_eq(allowed, 0);
    ck_assert_uint_eq(denied, WORKERS * PER_PHASE);
    seg_destroy(name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlctl_control_race");
    TCase *tc = tcase_create("race");
    tcase_add_unchecked_fixture(tc, seg_prefix_init, seg_prefix_cleanup);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, after_rlctl_ban_returns_every_decision_is_denied);
    tcase_add_test(tc, a_ban_that_lands_while_workers_hammer_denies_all_after_it_returns);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
