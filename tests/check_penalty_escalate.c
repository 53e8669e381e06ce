/*
 * check_penalty_escalate.c - escalating penalties (",penalty=MIN..MAX",
 * issue 41 item 3) and SRL_DECISION_BAN_STARTED (item 4), on the local,
 * anonymous and shared stores (each store test runs on all three: _i).
 *
 *   - On an injected ticker, each ban that starts while the last one is
 *     remembered (within MAX of its end) lasts exactly twice the one
 *     before: 1m, 2m, 4m, 8m, then MAX (10m) and MAX again; the decision
 *     that starts each ban, and only it, carries BAN_STARTED with
 *     retry_after = the ban exactly; srl_key_control_get's repeat counts the
 *     bans remembered.  A ban past the memory window starts again at MIN;
 *     srl_key_unban and srl_reset_key forget the offences.
 *   - 8 processes offending at once against one key, started together on
 *     a still clock: exactly one decision starts the ban, the key counts
 *     one offence, not eight, and the ban is MIN exactly; a second round
 *     after it ended: one start again, two offences, a ban of 2 MIN.
 *   - The grammar: MIN..MAX round-trips through srl_policy_format, and bad
 *     forms are refused with the message naming what is wrong.
 *
 * Overlap is arranged: the workers wait on a shared start word until all
 * 8 are ready; the clock stands still while they run, so every count and
 * time is exact whatever the interleaving.
 */
#include <check.h>
#include <sched.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srl.h"
#include "testutil.h"

#define WORKERS 8
#define OFFENCES 50   /* requests each worker makes in a round */

static srl_config config(const char *policy, fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse(policy, &cfg.policy), 0);
    cfg.capacity = 64;
    cfg.ticker = fake_ticker(clock);
    return cfg;
}

/* 0 local, 1 anonymous, 2 shared. */
static srl_limiter *open_store(int kind, const srl_config *cfg, const char **name)
{
    srl_limiter *lim = NULL;
    *name = NULL;
    if (kind == 0)
        ck_assert_int_eq(srl_open_local(cfg, &lim), 0);
    else if (kind == 1)
        ck_assert_int_eq(srl_open_anonymous(cfg, &lim), 0);
    else {
        *name = unique_name("escalate");
        ck_assert_int_eq(srl_open_shared(*name, cfg, SRL_CREATE, &lim), 0);
    }
    return lim;
}

static void close_store(srl_limiter *lim, const char *name)
{
    srl_close(lim);
    if (name != NULL)
        ck_assert_int_eq(srl_unlink(name), 0);
}

/* One offence at the clock's now: the key's one token admitted, then a
 * denial that must start a ban of exactly want_ns; then, while banned, a
 * denial that starts nothing and says the time left. */
static void offend(srl_limiter *lim, fake_clock *clock, uint64_t want_ns, uint32_t repeat,
                   int kind)
{
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_msg(d.allowed, "the key's token after its ban (want a ban of %llus next)",
                  (unsigned long long)(want_ns / SEC));
    ck_assert_uint_eq(d.flags & SRL_DECISION_BAN_STARTED, 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_msg(d.flags & SRL_DECISION_BAN_STARTED, "the denial that bans: flags %#x", d.flags);
    ck_assert_msg(d.retry_after_ns == want_ns, "ban %llus, want %llus",
                  (unsigned long long)(d.retry_after_ns / SEC),
                  (unsigned long long)(want_ns / SEC));
    clock->now += SEC;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.flags & SRL_DECISION_BAN_STARTED, 0);
    ck_assert_uint_eq(d.retry_after_ns, want_ns - SEC);
    if (kind != 0) {   /* the local store has no operator control yet */
        srl_key_control kc;
        ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), 0);
        ck_assert_uint_eq(kc.flags, SRL_KEY_PENALTY);
        ck_assert_uint_eq(kc.penalty_left_ns, want_ns - SEC);
        ck_assert_uint_eq(kc.ban_left_ns, 0);
        ck_assert_msg(kc.repeat == repeat, "repeat %u, want %u", kc.repeat, repeat);
    }
    clock->now += want_ns - SEC;   /* the ban's end exactly */
}

START_TEST(escalation_doubles_exactly_on_an_injected_ticker_up_to_max)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:1/1s,penalty=1m..10m", clock);
    const char *name;
    srl_limiter *lim = open_store(_i, &cfg, &name);
    static const uint64_t ladder[] = {60, 120, 240, 480, 600, 600};
    for (uint32_t n = 0; n < sizeof ladder / sizeof ladder[0]; n++)
        offend(lim, clock, ladder[n] * SEC, n + 1, _i);

    /* Past the memory window (MAX after the last ban's end): MIN again. */
    clock->now += 600 * SEC;
    offend(lim, clock, 60 * SEC, 1, _i);
    /* Just inside it (1 ns before MAX has passed): doubled. */
    clock->now += 600 * SEC - 1;
    offend(lim, clock, 120 * SEC, 2, _i);
    offend(lim, clock, 240 * SEC, 3, _i);

    if (_i != 0) {
        /* unban forgives the offences: MIN again at once. */
        ck_assert_int_eq(srl_key_unban(lim, "k", 1), 0);
        srl_key_control kc;
        ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), 0);
        ck_assert_uint_eq(kc.repeat, 0);
        ck_assert_uint_eq(kc.flags, 0);
        offend(lim, clock, 60 * SEC, 1, _i);
        offend(lim, clock, 120 * SEC, 2, _i);
        /* unban lifts a ban running now, too. */
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert_uint_eq(d.retry_after_ns, 240 * SEC);
        ck_assert_int_eq(srl_key_unban(lim, "k", 1), 0);
        clock->now += SEC;   /* the token refills; no ban left */
        offend(lim, clock, 60 * SEC, 1, _i);
    }
    /* srl_reset_key forgets them as well (the next ban was 2m after the
     * unban above, 8m on the local store, which has no unban). */
    if (_i != 0)
        offend(lim, clock, 120 * SEC, 2, _i);
    else
        offend(lim, clock, 480 * SEC, 4, _i);
    ck_assert_int_eq(srl_reset_key(lim, "k", 1), 0);
    offend(lim, clock, 60 * SEC, 1, _i);
    close_store(lim, name);
}
END_TEST

START_TEST(a_plain_penalty_never_escalates)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:1/1s,penalty=1m", clock);
    const char *name;
    srl_limiter *lim = open_store(_i, &cfg, &name);
    for (int n = 0; n < 4; n++)
        offend(lim, clock, 60 * SEC, 0, _i);
    close_store(lim, name);
}
END_TEST

/* ------------------------------------------------------- 8 processes */

struct race {
    uint32_t ready, go;
    uint32_t started, denied, allowed, errors;
    uint64_t started_retry;   /* retry_after of the decision that started it */
};

static void round_of_8(const char *name, const srl_config *cfg, struct race *r)
{
    memset(r, 0, sizeof *r);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] != 0)
            continue;
        srl_limiter *lim;
        if (srl_open_shared(name, cfg, SRL_ADOPT, &lim) != 0)
            _exit(1);
        __atomic_add_fetch(&r->ready, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE))
            sched_yield();
        for (int n = 0; n < OFFENCES; n++) {
            srl_decision d;
            if (srl_acquire(lim, "k", 1, 1, &d) != 0) {
                __atomic_add_fetch(&r->errors, 1, __ATOMIC_RELAXED);
                continue;
            }
            __atomic_add_fetch(d.allowed ? &r->allowed : &r->denied, 1, __ATOMIC_RELAXED);
            if (d.flags & SRL_DECISION_BAN_STARTED) {
                __atomic_add_fetch(&r->started, 1, __ATOMIC_RELAXED);
                __atomic_store_n(&r->started_retry, d.retry_after_ns, __ATOMIC_RELAXED);
            }
        }
        srl_close(lim);
        _exit(0);
    }
    while (__atomic_load_n(&r->ready, __ATOMIC_ACQUIRE) < WORKERS)
        sched_yield();
    __atomic_store_n(&r->go, 1, __ATOMIC_RELEASE);
    for (int w = 0; w < WORKERS; w++) {
        int status;
        ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker %d: status %d", w,
                      status);
    }
}

START_TEST(eight_processes_offending_at_once_count_one_offence_per_ban)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:1/1s,penalty=1m..1h", clock);
    const char *name = unique_name("escalate8");
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE, &lim), 0);
    struct race *r = shared_zeroed(sizeof *r);
    for (uint32_t round = 1; round <= 3; round++) {
        round_of_8(name, &cfg, r);
        uint64_t want = (60ull << (round - 1)) * SEC;
        ck_assert_uint_eq(r->errors, 0);
        ck_assert_uint_eq(r->allowed, 1);   /* the one token; the clock stands still */
        ck_assert_uint_eq(r->denied, WORKERS * OFFENCES - 1);
        ck_assert_msg(r->started == 1, "round %u: %u decisions started a ban, want 1", round,
                      r->started);
        ck_assert_uint_eq(r->started_retry, want);
        srl_key_control kc;
        ck_assert_int_eq(srl_key_control_get(lim, "k", 1, &kc), 0);
        ck_assert_msg(kc.repeat == round, "round %u: %u offences counted", round, kc.repeat);
        ck_assert_uint_eq(kc.flags, SRL_KEY_PENALTY);
        ck_assert_uint_eq(kc.penalty_left_ns, want);
        clock->now += want;   /* the ban's end: the token is back too */
    }
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------------ grammar */

static void refused(const char *text, const char *message)
{
    srl_policy p;
    srl_policy_error e;
    ck_assert_int_eq(srl_policy_parse_ex(text, &p, &e), SRL_EPOLICY);
    ck_assert_msg(strstr(e.message, message) != NULL, "%s: '%s', want '%s'", text, e.message,
                  message);
}

START_TEST(the_min_max_form_round_trips_and_bad_forms_are_refused)
{
    static const char *const canon[] = {
        "token_bucket:10/1s,penalty=1m..1d",
        "sliding_log:5/1m,penalty=500ms..2s",
        "gcra:10/1s,burst=3,penalty=15m..7d",
        "fixed_window:3/1m,penalty=1s..3660d",
    };
    for (size_t i = 0; i < sizeof canon / sizeof canon[0]; i++) {
        srl_policy p;
        char buf[SRL_POLICY_TEXT_MAX];
        ck_assert_int_eq(srl_policy_parse(canon[i], &p), 0);
        ck_assert_int_ge(srl_policy_format(&p, buf, sizeof buf), 0);
        ck_assert_str_eq(buf, canon[i]);
    }
    srl_policy p;
    ck_assert_int_eq(srl_policy_parse("token_bucket:10/1s,penalty=60s..86400s", &p), 0);
    ck_assert_uint_eq(p.penalty_ns, 60 * SEC);
    ck_assert_uint_eq(p.penalty_max_s, 86400);
    char buf[SRL_POLICY_TEXT_MAX];
    ck_assert_int_ge(srl_policy_format(&p, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "token_bucket:10/1s,penalty=1m..1d");

    refused("token_bucket:10/1s,penalty=1m..1m", "the longest ban '1m' must be longer than "
                                                 "the first");
    refused("token_bucket:10/1s,penalty=1h..1m", "must be longer than the first");
    refused("token_bucket:10/1s,penalty=1s..1500ms", "the longest ban '1500ms' must be whole "
                                                     "seconds");
    refused("token_bucket:10/1s,penalty=1m..", "expected a longest ban time");
    refused("token_bucket:10/1s,penalty=1m..3661d", "longest ban 3661d above 3660d");
    refused("token_bucket:10/1s,penalty=1m..1x", "unknown unit 'x'");

    srl_policy bad = {.algorithm = SRL_TOKEN_BUCKET, .permits = 5, .window_ns = SEC,
                      .penalty_ns = 60 * SEC, .penalty_max_s = 60};
    ck_assert_int_eq(srl_policy_validate(&bad), SRL_EPOLICY);   /* MAX = MIN */
    bad.penalty_max_s = 61;
    ck_assert_int_eq(srl_policy_validate(&bad), 0);
    bad.penalty_ns = 0;
    ck_assert_int_eq(srl_policy_validate(&bad), SRL_EPOLICY);   /* MAX with no MIN */
}
END_TEST

/* A state of an escalating limit with a doubling count no ban leaves is
 * not valid (crash repair resets it); at rest only once forgotten. */
START_TEST(escalation_state_is_checked_and_kept_while_remembered)
{
    srl_policy p;
    ck_assert_int_eq(srl_policy_parse("token_bucket:1/1s,penalty=1m..10m", &p), 0);
    size_t n = srl_state_size(&p);
    ck_assert_uint_eq(n % 8, 0);
    unsigned char st[256] __attribute__((aligned(8)));
    ck_assert_uint_le(n, sizeof st);
    uint64_t now = 1000 * SEC;
    ck_assert_int_eq(srl_state_init(&p, st, now), 0);
    srl_decision d;
    ck_assert_int_eq(srl_state_acquire(&p, st, now, 1, &d), 0);
    ck_assert_int_eq(srl_state_acquire(&p, st, now, 1, &d), 0);
    ck_assert_uint_eq(d.flags, SRL_DECISION_BAN_STARTED);
    ck_assert_int_eq(srl_state_valid(&p, st, now), 1);
    /* Ended, but remembered for MAX after its end: not at rest. */
    ck_assert_int_eq(srl_state_at_rest(&p, st, now + 60 * SEC + 600 * SEC - 1), 0);
    ck_assert_int_eq(srl_state_at_rest(&p, st, now + 60 * SEC + 600 * SEC), 1);
    uint64_t k;
    memcpy(&k, st + n - 8, 8);
    ck_assert_uint_eq(k, 0);
    k = 64;   /* beyond any doubling kept */
    memcpy(st + n - 8, &k, 8);
    ck_assert_int_eq(srl_state_valid(&p, st, now), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("penalty_escalate");
    TCase *tc = tcase_create("escalate");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, escalation_doubles_exactly_on_an_injected_ticker_up_to_max, 0, 3);
    tcase_add_loop_test(tc, a_plain_penalty_never_escalates, 0, 3);
    tcase_add_test(tc, eight_processes_offending_at_once_count_one_offence_per_ban);
    tcase_add_test(tc, the_min_max_form_round_trips_and_bad_forms_are_refused);
    tcase_add_test(tc, escalation_state_is_checked_and_kept_while_remembered);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
