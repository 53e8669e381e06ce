/*
 * check_shm_reserve.c - srl_reserve on the shared stores: eight processes
 * reserving from one key keep the policy's rate in the instants they act.
 *
 *   eight processes: 8 forked workers reserve cost 1 (max_wait 1 s) from
 *     one key of an anonymous segment whose ticker is a clock in a shared
 *     page.  Each worker's ticker remembers the time it returned (read
 *     under the key's lock), so a worker knows the exact `now` of its
 *     decision and records its action instant now + wait_ns.  The parent
 *     advances the clock by 37 ms only after every worker was refused at
 *     the current time (the queue then reaches a full max_wait ahead, and
 *     all eight competed), up to 5 s.  Then, over all processes:
 *       - every window holds no more than the policy allows: for every
 *         pair of sorted instants a_i <= a_j, j - i + 1 <= B + floor((a_j -
 *         a_i) * permits / W) (the token bucket's conformance bound; GCRA
 *         with T = W / permits the same), so no sliding window is missed;
 *       - the instants are exactly the ideal schedule of a saturated
 *         limit: B at the start, then one every W / permits ns, and the
 *         count is what the rate allows up to the last one, whose wait
 *         reached the horizon.
 *     For the token bucket, GCRA, and a compound (each limit's bound).
 *   local store: the same decisions as the pure core (random reservations
 *     and refunds on one key of srl_open_local and of srl_open_anonymous).
 *   srl_acquire_wait: sleeps the wait, whatever signals interrupt it (a
 *     lower bound only: the kernel never wakes an absolute sleep early).
 *   refusals: SRL_ENOTSUP (sliding log, concurrency), SRL_EINVAL.
 */
#include <check.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "algotest.h"
#include "srl.h"
#include "testutil.h"

#define WORKERS 8
#define PER_WORKER 2048
#define MAX_WAIT (SEC)
#define STEP (37 * SEC / 1000)
#define T0 (1000 * SEC)
#define HORIZON (5 * SEC)

struct shared {
    _Atomic uint64_t clock;
    _Atomic uint64_t refused_at[WORKERS];   /* each worker's latest `now` of a refusal */
    _Atomic int stop;
    _Atomic int errors;
    _Atomic int ready;             /* workers started: they begin together */
    uint32_t n[WORKERS];
    uint64_t at[WORKERS][PER_WORKER];
};

static uint64_t last_now;   /* per process: the time the ticker last gave */

static uint64_t shared_ticker(void *ctx)
{
    struct shared *sh = ctx;
    last_now = atomic_load(&sh->clock);
    return last_now;
}

static void worker(srl_limiter *lim, struct shared *sh, int w)
{
    atomic_fetch_add(&sh->ready, 1);
    while (atomic_load(&sh->ready) < WORKERS)
        sched_yield();
    while (!atomic_load(&sh->stop)) {
        srl_decision d;
        if (srl_reserve(lim, "payment-api", 11, 1, MAX_WAIT, &d) != 0 ||
            d.wait_ns > MAX_WAIT || (d.flags & (SRL_DECISION_DEGRADED | SRL_DECISION_UNTRACKED))) {
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
        if (d.allowed) {
            if (sh->n[w] == PER_WORKER) {
                atomic_fetch_add(&sh->errors, 1);
                break;
            }
            sh->at[w][sh->n[w]++] = last_now + d.wait_ns;
        } else {
            atomic_store(&sh->refused_at[w], last_now);
        }
    }
    _exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Every window of the sorted instants a[0..n) within limit p's bound. */
static void ck_windows(const srl_policy *p, const uint64_t *a, size_t n)
{
    uint32_t B = p->burst ? p->burst : p->permits;
    /* GCRA's interval is rounded up: its rate is 1 / ceil(W / permits) */
    uint64_t T = p->window_ns / p->permits + (p->window_ns % p->permits != 0);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++) {
            uint64_t span = a[j] - a[i];
            unsigned __int128 allowed =
                B + (p->algorithm == SRL_GCRA ? span / T
                                              : (unsigned __int128)span * p->permits / p->window_ns);
            ck_assert_msg(j - i + 1 <= allowed, "%zu actions in [%llu, %llu] (%llu ns): at most %llu",
                          j - i + 1, (unsigned long long)(a[i] - T0),
                          (unsigned long long)(a[j] - T0), (unsigned long long)span,
                          (unsigned long long)allowed);
        }
}

/* Run the eight workers on a fresh anonymous limiter of `policy`; returns
 * the sorted instants (malloc'd) and their count; *end the final clock. */
static uint64_t *run_eight(const char *policy, size_t *count, uint64_t *end)
{
    struct shared *sh = shared_zeroed(sizeof *sh);
    atomic_store(&sh->clock, T0);
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_limits_parse_ex(policy, &cfg.limits, NULL), 0);
    cfg.capacity = 64;
    cfg.ticker = (srl_ticker){shared_ticker, sh};
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] == 0)
            worker(lim, sh, w);
    }
    /* Advance only once the queue is full at the current time, and every
     * worker has been there (so all eight compete at every step). */
    for (;;) {
        uint64_t c = atomic_load(&sh->clock);
        for (int w = 0; w < WORKERS; w++)
            while (atomic_load(&sh->refused_at[w]) < c && atomic_load(&sh->errors) == 0)
                sched_yield();
        if (c >= T0 + HORIZON || atomic_load(&sh->errors) != 0)
            break;
        atomic_store(&sh->clock, c + STEP);
    }
    *end = atomic_load(&sh->clock);
    atomic_store(&sh->stop, 1);
    for (int w = 0; w < WORKERS; w++) {
        int status;
        ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    ck_assert_int_eq(atomic_load(&sh->errors), 0);
    size_t n = 0;
    for (int w = 0; w < WORKERS; w++)
        n += sh->n[w];
    uint64_t *a = malloc(n * sizeof *a);
    ck_assert_ptr_nonnull(a);
    n = 0;
    int took_part = 0;
    for (int w = 0; w < WORKERS; w++) {
        took_part += sh->n[w] > 0;
        memcpy(a + n, sh->at[w], sh->n[w] * sizeof *a);
        n += sh->n[w];
    }
    /* they overlapped (all start together; a descheduled one may win none) */
    ck_assert_int_ge(took_part, 2);
    qsort(a, n, sizeof *a, cmp_u64);
    srl_close(lim);
    munmap(sh, sizeof *sh);
    *count = n;
    return a;
}

/* The saturated schedule of one limit: B at T0, then one every T ns. */
static void ck_schedule(const srl_policy *p, const uint64_t *a, size_t n, uint64_t end)
{
    uint32_t B = p->burst ? p->burst : p->permits;
    uint64_t T = p->window_ns / p->permits;
    ck_assert_uint_eq(p->window_ns % p->permits, 0);
    for (size_t k = 0; k < n; k++) {
        uint64_t want = k < B ? T0 : T0 + (k - B + 1) * T;
        ck_assert_msg(a[k] == want, "action %zu at T0+%llu, the rate allows it at T0+%llu", k,
                      (unsigned long long)(a[k] - T0), (unsigned long long)(want - T0));
    }
    /* the count is what the rate allows: the queue reached the horizon */
    ck_assert_uint_gt(a[n - 1] + T, end + MAX_WAIT);
    ck_assert_uint_le(a[n - 1], end + MAX_WAIT);
    ck_assert_uint_eq(n, B + (a[n - 1] - T0) / T);
}

START_TEST(eight_processes_reserving_act_at_exactly_the_token_bucket_rate)
{
    srl_policy p;
    ck_assert_int_eq(srl_policy_parse("token_bucket:10/1s,burst=4", &p), 0);
    size_t n;
    uint64_t end;
    uint64_t *a = run_eight("token_bucket:10/1s,burst=4", &n, &end);
    ck_windows(&p, a, n);
    ck_schedule(&p, a, n, end);
    free(a);
}
END_TEST

START_TEST(eight_processes_reserving_act_at_exactly_the_gcra_rate)
{
    srl_policy p;
    ck_assert_int_eq(srl_policy_parse("gcra:20/1s", &p), 0);
    size_t n;
    uint64_t end;
    uint64_t *a = run_eight("gcra:20/1s", &n, &end);
    ck_windows(&p, a, n);
    ck_schedule(&p, a, n, end);
    free(a);
}
END_TEST

START_TEST(eight_processes_reserving_keep_every_limit_of_a_compound)
{
    const char *text = "token_bucket:10/1s + gcra:40/5s";
    srl_limits l;
    ck_assert_int_eq(srl_limits_parse_ex(text, &l, NULL), 0);
    size_t n;
    uint64_t end;
    uint64_t *a = run_eight(text, &n, &end);
    ck_windows(&l.limit[0], a, n);
    ck_windows(&l.limit[1], a, n);
    /* saturated: as many as the tighter limit allows up to the last one
     * (the bucket's 10 + 10/s, or the gcra's 40 + 8/s), give or take one */
    uint64_t span = a[n - 1] - T0;
    uint64_t tb = 10 + span * 10 / SEC, gc = 40 + span * 8 / SEC;
    ck_assert_uint_ge(n + 1, tb < gc ? tb : gc);
    free(a);
}
END_TEST

/* The pure core as the model of a store's key. */
static void ck_store_is_the_core(srl_limiter *lim, fake_clock *clk, const srl_limits *l)
{
    uint64_t model[64];
    memset(model, 0, sizeof model);
    srl_limits_state_init(l, model, fake_clock_read(clk));
    srandom(7);
    for (int i = 0; i < 2000; i++) {
        clk->now += (uint64_t)random() % (SEC / 4);
        uint64_t now = fake_clock_read(clk);
        uint64_t mw = (uint64_t)random() % (3 * SEC);
        srl_decision x, y;
        if (random() % 4 == 0) {
            ck_assert_int_eq(srl_refund(lim, "k", 1, 1), 0);
            ck_assert_int_eq(srl_limits_state_refund(l, model, now, 1), 0);
            continue;
        }
        ck_assert_int_eq(srl_reserve(lim, "k", 1, 1, mw, &x), 0);
        ck_assert_int_eq(srl_limits_state_reserve(l, model, now, 1, mw, &y), 0);
        ck_assert(decision_eq(&x, &y));
        ck_assert_uint_eq(x.wait_ns, y.wait_ns);
    }
}

START_TEST(the_stores_reserve_as_the_pure_core)
{
    for (int kind = 0; kind < 2; kind++) {
        fake_clock *clk = fake_clock_shared(5 * SEC);
        srl_config cfg;
        srl_config_init(&cfg);
        ck_assert_int_eq(srl_limits_parse_ex("token_bucket:5/1s + gcra:20/10s", &cfg.limits, NULL), 0);
        cfg.capacity = 64;
        cfg.ticker = fake_ticker(clk);
        srl_limiter *lim;
        ck_assert_int_eq(kind ? srl_open_local(&cfg, &lim) : srl_open_anonymous(&cfg, &lim), 0);
        /* the first reservation inserts the key: the model starts there */
        srl_decision d;
        ck_assert_int_eq(srl_reserve(lim, "k", 1, 1, 0, &d), 0);
        ck_assert_int_eq(srl_refund(lim, "k", 1, 1), 0);
        ck_store_is_the_core(lim, clk, &cfg.limits);
        srl_close(lim);
    }
}
END_TEST

static void on_alarm(int sig)
{
    (void)sig;
}

START_TEST(acquire_wait_sleeps_the_whole_wait_through_signals)
{
    struct sigaction sa = {.sa_handler = on_alarm};   /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("token_bucket:10/1s", &cfg.policy), 0);
    cfg.capacity = 64;
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_decision d;
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    /* interrupt the sleep every 5 ms */
    struct itimerval it = {{0, 5000}, {0, 5000}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (int i = 0; i < 3; i++) {
        uint64_t t = srl_monotonic_ns(NULL);
        ck_assert_int_eq(srl_acquire_wait(lim, "k", 1, 1, SEC, &d), 0);
        uint64_t slept = srl_monotonic_ns(NULL) - t;
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_gt(d.wait_ns, 0);
        ck_assert_uint_ge(slept, d.wait_ns);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    /* beyond max_wait: refused at once, no sleep, nothing taken */
    ck_assert_int_eq(srl_acquire_wait(lim, "k", 1, 5, 1000, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.wait_ns, 0);
    srl_close(lim);
}
END_TEST

START_TEST(stores_refuse_what_cannot_wait)
{
    const char *cannot[] = {"sliding_log:5/1s", "sliding_counter:5/1s", "concurrency:2"};
    for (int i = 0; i < 3; i++) {
        srl_config cfg;
        srl_config_init(&cfg);
        ck_assert_int_eq(srl_limits_parse_ex(cannot[i], &cfg.limits, NULL), 0);
        cfg.capacity = 64;
        srl_limiter *lim;
        ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
        srl_decision d;
        ck_assert_int_eq(srl_reserve(lim, "k", 1, 1, SEC, &d), SRL_ENOTSUP);
        ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), SRL_ENOENT);   /* nothing inserted */
        ck_assert_int_eq(srl_reserve(lim, "k", 1, 1, 0, &d), i == 2 ? SRL_ENOTSUP : 0);
        srl_close(lim);
    }
    srl_config cfg;
    srl_config_init(&cfg);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_decision d;
    ck_assert_int_eq(srl_reserve(lim, "k", 1, 1, SRL_WAIT_MAX_NS + 1, &d), SRL_EINVAL);
    ck_assert_int_eq(srl_reserve(lim, "k", 0, 1, SEC, &d), SRL_EKEY);
    ck_assert_int_eq(srl_reserve(lim, "k", 1, 0, SEC, &d), SRL_ECOST);
    ck_assert_int_eq(srl_reserve(NULL, "k", 1, 1, SEC, &d), SRL_EINVAL);
    srl_close(lim);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_reserve");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, eight_processes_reserving_act_at_exactly_the_token_bucket_rate);
    tcase_add_test(tc, eight_processes_reserving_act_at_exactly_the_gcra_rate);
    tcase_add_test(tc, eight_processes_reserving_keep_every_limit_of_a_compound);
    tcase_add_test(tc, the_stores_reserve_as_the_pure_core);
    tcase_add_test(tc, acquire_wait_sleeps_the_whole_wait_through_signals);
    tcase_add_test(tc, stores_refuse_what_cannot_wait);
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
