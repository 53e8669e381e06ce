/*
 * check_shm_control.c - operator control of one key on a segment (layout 9,
 * issue 41): exemptions and bans by hand, under 8 racing processes, on the
 * shared (named) and the anonymous store (each test runs on both: _i).
 *
 *   - An exempt key under a flood of 8 processes that churn the table full
 *     (every churn key at rest at once: the fake clock moves an hour a
 *     step, so srl_evict_idle and every insert's reclaim want its slot) is
 *     never refused and never evicted, and every decision of it is counted
 *     (its own allowed, srl_stats.exempt).
 *   - A ban and an unban raced by 8 processes: the ban is in place
 *     (srl_key_control_get says so) before the racers' window opens; every
 *     decision that ended before the unban began is a denial with
 *     retry_after = the ban's time left, exactly (the clock stands still);
 *     every decision begun after the unban returned is an admission.
 *
 * Ordering is arranged, not hoped for: shared counters and phase words in
 * a shared_zeroed() page; the parent waits for progress counts.
 */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srl.h"
#include "testutil.h"

#define WORKERS 8

static srl_config config(const char *policy, uint64_t capacity, fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse(policy, &cfg.policy), 0);
    cfg.capacity = capacity;
    cfg.ticker = fake_ticker(clock);
    return cfg;
}

/* The store under test: 0 anonymous (inherited by the workers), 1 shared
 * (each worker opens it by name). */
struct store {
    int named;
    const char *name;
    srl_limiter *lim;
};

static void store_open(struct store *st, int named, const srl_config *cfg)
{
    st->named = named;
    st->name = named ? unique_name("control") : NULL;
    if (named)
        ck_assert_int_eq(srl_open_shared(st->name, cfg, SRL_CREATE, &st->lim), 0);
    else
        ck_assert_int_eq(srl_open_anonymous(cfg, &st->lim), 0);
}

static srl_limiter *worker_lim(const struct store *st, const srl_config *cfg)
{
    if (!st->named)
        return st->lim;
    srl_limiter *lim;
    if (srl_open_shared(st->name, cfg, SRL_ADOPT, &lim) != 0)
        _exit(1);
    return lim;
}

static void store_close(struct store *st)
{
    srl_close(st->lim);
    if (st->named)
        ck_assert_int_eq(srl_unlink(st->name), 0);
}

static void reap(const pid_t pids[WORKERS])
{
    for (int w = 0; w < WORKERS; w++) {
        int status;
        ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker %d: status %d", w,
                      status);
    }
}

/* ------------------------------------------------------------ exempt */

#define FLOOD_STEPS 300

struct flood {
    uint32_t probe_denied, probe_errors, churn_errors;
    uint64_t evicted;
};

START_TEST(an_exempt_key_under_a_flood_of_8_processes_is_never_refused_nor_evicted)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:3/1h", 32, clock);
    struct store st;
    store_open(&st, _i, &cfg);
    ck_assert_int_eq(srl_key_exempt(st.lim, "probe", 5, 1), 0);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(st.lim, "probe", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_EXEMPT);
    struct flood *f = shared_zeroed(sizeof *f);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] != 0)
            continue;
        srl_limiter *lim = worker_lim(&st, &cfg);
        for (int n = 0; n < FLOOD_STEPS; n++) {
            srl_decision d;
            if (srl_acquire(lim, "probe", 5, 1, &d) != 0)
                __atomic_add_fetch(&f->probe_errors, 1, __ATOMIC_RELAXED);
            else if (!d.allowed)
                __atomic_add_fetch(&f->probe_denied, 1, __ATOMIC_RELAXED);
            /* An hour a step: every churn key is at rest again at once. */
            __atomic_add_fetch(&clock->now, 3600 * SEC, __ATOMIC_RELAXED);
            char key[32];
            int len = snprintf(key, sizeof key, "churn-%d-%d", w, n);
            if (srl_acquire(lim, key, (size_t)len, 1, &d) != 0)
                __atomic_add_fetch(&f->churn_errors, 1, __ATOMIC_RELAXED);
            if (n % 16 == 0) {
                int64_t e = srl_evict_idle(lim);
                if (e > 0)
                    __atomic_add_fetch(&f->evicted, (uint64_t)e, __ATOMIC_RELAXED);
            }
        }
        _exit(0);
    }
    reap(pids);
    ck_assert_uint_eq(f->probe_errors, 0);
    ck_assert_uint_eq(f->churn_errors, 0);
    ck_assert_uint_eq(f->probe_denied, 0);
    /* The churn did want slots: 8 * 300 keys went through 32 slots. */
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(st.lim, &s), 0);
    ck_assert_uint_ge(s.evicted, WORKERS * FLOOD_STEPS - 32);
    ck_assert_uint_eq(s.exempt, WORKERS * FLOOD_STEPS);
    /* Never evicted: still exempt, and its own count holds every decision
     * (an eviction and return would have started it at 1 again). */
    ck_assert_int_eq(srl_key_control_get(st.lim, "probe", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_EXEMPT);
    ck_assert_int_eq(srl_evict_idle(st.lim) >= 0, 1);
    ck_assert_int_eq(srl_key_control_get(st.lim, "probe", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_EXEMPT);
    /* Unexempted: its policy again, from the state it had (never written). */
    ck_assert_int_eq(srl_key_exempt(st.lim, "probe", 5, 0), 0);
    srl_decision d;
    for (int n = 0; n < 3; n++) {
        ck_assert_int_eq(srl_acquire(st.lim, "probe", 5, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
    }
    ck_assert_int_eq(srl_acquire(st.lim, "probe", 5, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    store_close(&st);
}
END_TEST

/* ------------------------------------------------------------ ban */

#define BAN_STEPS 200

enum { PH_BANNED = 1, PH_UNBANNING = 2, PH_UNBANNED = 3, PH_STOP = 4 };

struct race {
    uint32_t ready, phase;
    uint32_t in_ban[WORKERS], after[WORKERS];   /* decisions made in each window */
    uint32_t admitted_in_ban, denied_in_ban, wrong_retry, denied_after, errors;
};

START_TEST(eight_processes_racing_a_ban_and_an_unban_never_admit_during_the_ban)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);   /* stands still */
    srl_config cfg = config("gcra:1000000/1s", 1024, clock);
    cfg.flags |= SRL_CONFIG_LOCKFREE | SRL_CONFIG_FLOOD_CACHE;   /* paths that skip the lock */
    struct store st;
    store_open(&st, _i, &cfg);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(st.lim, "k", 1, 1, &d), 0);   /* tracked, lock-free eligible */
    ck_assert_int_eq(d.allowed, 1);
    struct race *r = shared_zeroed(sizeof *r);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] != 0)
            continue;
        srl_limiter *lim = worker_lim(&st, &cfg);
        __atomic_add_fetch(&r->ready, 1, __ATOMIC_RELEASE);
        while (__atomic_load_n(&r->phase, __ATOMIC_ACQUIRE) < PH_BANNED)
            sched_yield();
        for (;;) {
            uint32_t p0 = __atomic_load_n(&r->phase, __ATOMIC_ACQUIRE);
            if (p0 == PH_STOP)
                break;
            /* Each worker makes exactly BAN_STEPS decisions after the
             * unban: a worker that ran on while a descheduled one caught up
             * would spend the key's whole burst (the clock stands still)
             * and be denied for that, not for the ban. */
            if (p0 == PH_UNBANNED && __atomic_load_n(&r->after[w], __ATOMIC_ACQUIRE) >= BAN_STEPS) {
                sched_yield();
                continue;
            }
            int rc = srl_acquire(lim, "k", 1, 1, &d);
            uint32_t p1 = __atomic_load_n(&r->phase, __ATOMIC_ACQUIRE);
            if (rc != 0) {
                __atomic_add_fetch(&r->errors, 1, __ATOMIC_RELAXED);
                continue;
            }
            if (p1 == PH_BANNED) {   /* wholly before the unban began */
                if (d.allowed)
                    __atomic_add_fetch(&r->admitted_in_ban, 1, __ATOMIC_RELAXED);
                else
                    __atomic_add_fetch(&r->denied_in_ban, 1, __ATOMIC_RELAXED);
                if (!d.allowed && d.retry_after_ns != 3600 * SEC)
                    __atomic_add_fetch(&r->wrong_retry, 1, __ATOMIC_RELAXED);
                __atomic_add_fetch(&r->in_ban[w], 1, __ATOMIC_RELEASE);
            } else if (p0 == PH_UNBANNED) {   /* wholly after the unban returned */
                if (!d.allowed)
                    __atomic_add_fetch(&r->denied_after, 1, __ATOMIC_RELAXED);
                __atomic_add_fetch(&r->after[w], 1, __ATOMIC_RELEASE);
            }
        }
        if (st.named)
            srl_close(lim);
        _exit(0);
    }
    while (__atomic_load_n(&r->ready, __ATOMIC_ACQUIRE) < WORKERS)
        sched_yield();
    ck_assert_int_eq(srl_key_ban(st.lim, "k", 1, 3600 * SEC, "abuse report 17"), 0);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(st.lim, "k", 1, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_BANNED);
    ck_assert_uint_eq(kc.ban_left_ns, 3600 * SEC);
    ck_assert_str_eq(kc.reason, "abuse report 17");
    __atomic_store_n(&r->phase, PH_BANNED, __ATOMIC_RELEASE);
    for (int w = 0; w < WORKERS; w++)
        while (__atomic_load_n(&r->in_ban[w], __ATOMIC_ACQUIRE) < BAN_STEPS)
            sched_yield();
    __atomic_store_n(&r->phase, PH_UNBANNING, __ATOMIC_RELEASE);
    ck_assert_int_eq(srl_key_unban(st.lim, "k", 1), 0);
    __atomic_store_n(&r->phase, PH_UNBANNED, __ATOMIC_RELEASE);
    for (int w = 0; w < WORKERS; w++)
        while (__atomic_load_n(&r->after[w], __ATOMIC_ACQUIRE) < BAN_STEPS)
            sched_yield();
    __atomic_store_n(&r->phase, PH_STOP, __ATOMIC_RELEASE);
    reap(pids);
    ck_assert_uint_eq(r->errors, 0);
    ck_assert_uint_eq(r->admitted_in_ban, 0);
    ck_assert_uint_ge(r->denied_in_ban, WORKERS * BAN_STEPS);
    ck_assert_uint_eq(r->wrong_retry, 0);
    ck_assert_uint_eq(r->denied_after, 0);
    ck_assert_int_eq(srl_key_control_get(st.lim, "k", 1, &kc), 0);
    ck_assert_uint_eq(kc.flags, 0);
    store_close(&st);
}
END_TEST

/* Bad arguments change nothing and say which. */
START_TEST(bad_control_arguments_are_refused)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:3/1h", 64, clock);
    struct store st;
    store_open(&st, _i, &cfg);
    char longer[SRL_BAN_REASON_MAX + 2];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    ck_assert_int_eq(srl_key_ban(st.lim, "k", 1, 0, NULL), SRL_EINVAL);
    ck_assert_int_eq(srl_key_ban(st.lim, "k", 1, SEC, longer), SRL_EINVAL);
    ck_assert_int_eq(srl_key_ban(st.lim, "k", 1, SEC, "a\nb"), SRL_EINVAL);
    ck_assert_int_eq(srl_key_exempt(st.lim, "k", 1, 2), SRL_EINVAL);
    ck_assert_int_eq(srl_key_exempt(st.lim, "", 0, 1), SRL_EKEY);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(st.lim, "k", 1, &kc), SRL_ENOENT);
    ck_assert_int_eq(srl_key_unban(st.lim, "k", 1), SRL_ENOENT);
    /* A ban ends by itself: at its end the key is its policy's again. */
    ck_assert_int_eq(srl_key_ban(st.lim, "k", 1, 10 * SEC, NULL), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(st.lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 10 * SEC);
    clock->now += 10 * SEC;
    ck_assert_int_eq(srl_acquire(st.lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_key_control_get(st.lim, "k", 1, &kc), 0);
    ck_assert_uint_eq(kc.flags, 0);
    /* (The in-process store's operator control: check_local_control.) */
    store_close(&st);
}
END_TEST

/* srl_enter decides a limiter with a concurrency limit and reads no
 * exemption nor ban: setting one is refused, not reported done. */
START_TEST(exempt_and_ban_are_refused_where_srl_enter_decides)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("concurrency:2", 64, clock);
    struct store st;
    store_open(&st, _i, &cfg);
    char why[256];
    ck_assert_int_eq(srl_key_exempt(st.lim, "k", 1, 1), SRL_ENOTSUP);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "this policy has an in-flight (concurrency) limit, whose "
                     "srl_enter reads no exemption or ban: set them on a rate-limit segment "
                     "its requests pass first");
    ck_assert_int_eq(srl_key_ban(st.lim, "k", 1, SEC, "x"), SRL_ENOTSUP);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(st.lim, "k", 1, &kc), SRL_ENOENT);   /* nothing stored */
    ck_assert_int_eq(srl_key_exempt(st.lim, "k", 1, 0), SRL_ENOENT);   /* taking back: allowed (untracked) */
    ck_assert_uint_eq(srl_last_error(why, sizeof why), 0);   /* each setting call clears it */
    ck_assert_int_eq(srl_key_unban(st.lim, "k", 1), SRL_ENOENT);
    store_close(&st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("control");
    TCase *tc = tcase_create("control");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, an_exempt_key_under_a_flood_of_8_processes_is_never_refused_nor_evicted,
                        0, 2);
    tcase_add_loop_test(tc, eight_processes_racing_a_ban_and_an_unban_never_admit_during_the_ban,
                        0, 2);
    tcase_add_loop_test(tc, bad_control_arguments_are_refused, 0, 2);
    tcase_add_loop_test(tc, exempt_and_ban_are_refused_where_srl_enter_decides, 0, 2);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
