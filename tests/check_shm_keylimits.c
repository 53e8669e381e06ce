/*
 * check_shm_keylimits.c - per-key limits on a segment (layout 9, issue 41
 * item 5), on the shared (named) and the anonymous store (each test runs
 * on both: _i).
 *
 *   - Stored (srl_key_set_limits): a limit of 3 on one key and 10 on
 *     another in one segment whose policy says 100, 8 processes hammering
 *     both at once: exactly 3 and 10 admitted.
 *   - Per call (srl_acquire_limits): the same, each process passing the
 *     limits with every request.
 *   - A change of a key's limits keeps its use (stored, per call, and the
 *     clear back to the default tier), exactly, on a still clock.
 *   - Equal limits share one entry of the table; 256 distinct sets fill
 *     it and the next is SRL_ENOSPC with the sentence that says so.
 *   - Limits whose state exceeds the segment's slots: SRL_EPOLICY, and
 *     srl_last_error names the state asked and the segment's largest.
 *   - A stored key survives eviction passes at rest; a per-call key does not.
 *
 * The clock stands still during the races (a fake ticker in a shared
 * page), so "exactly N admitted" is the whole truth: no refill can admit
 * one more.  Workers report through a shared_zeroed() page.
 */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srl.h"
#include "testutil.h"
#include "store_testutil.h"

#define WORKERS 8
#define STEPS 40

static srl_config config(const char *policy, uint64_t capacity, fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_limits_parse_ex(policy, &cfg.limits, NULL), 0);
    cfg.capacity = capacity;
    cfg.ticker = fake_ticker(clock);
    return cfg;
}

static srl_limits limits(const char *text)
{
    srl_limits l;
    ck_assert_int_eq(srl_limits_parse_ex(text, &l, NULL), 0);
    return l;
}

struct race {
    uint32_t ready, go;
    uint32_t admitted[2], errors;
};

/* 8 workers, each STEPS requests of "small" and of "big", started
 * together (a barrier in the shared page); per_call: srl_acquire_limits
 * with the limits given, else srl_acquire (the stored limits decide). */
static void race(const struct store *st, const srl_config *cfg, int per_call, struct race *r)
{
    static const char *keys[2] = {"small", "big"};
    srl_limits own[2] = {limits("token_bucket:3/1h"), limits("token_bucket:10/1h")};
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] != 0)
            continue;
        srl_limiter *lim = store_worker(st, cfg);
        __atomic_add_fetch(&r->ready, 1, __ATOMIC_ACQ_REL);
        while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE))
            sched_yield();
        for (int n = 0; n < STEPS; n++) {
            for (int k = 0; k < 2; k++) {
                srl_decision d;
                int rc = per_call ? srl_acquire_limits(lim, keys[k], strlen(keys[k]), &own[k], 1, &d)
                                  : srl_acquire(lim, keys[k], strlen(keys[k]), 1, &d);
                if (rc != 0)
                    __atomic_add_fetch(&r->errors, 1, __ATOMIC_RELAXED);
                else if (d.allowed)
                    __atomic_add_fetch(&r->admitted[k], 1, __ATOMIC_RELAXED);
            }
        }
        _exit(0);
    }
    while (__atomic_load_n(&r->ready, __ATOMIC_ACQUIRE) < WORKERS)
        sched_yield();
    __atomic_store_n(&r->go, 1, __ATOMIC_RELEASE);
    store_reap(pids, WORKERS);
}

START_TEST(stored_limits_of_3_and_10_under_8_processes_admit_exactly_3_and_10)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:100/1h", 1024, clock);
    struct store st;
    store_open(&st, _i, "keylim", &cfg);
    srl_limits l3 = limits("token_bucket:3/1h"), l10 = limits("token_bucket:10/1h");
    ck_assert_int_eq(srl_key_set_limits(st.lim, "small", 5, &l3), 0);
    ck_assert_int_eq(srl_key_set_limits(st.lim, "big", 3, &l10), 0);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(st.lim, "small", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_OWN_LIMITS);
    srl_limits got;
    ck_assert_int_eq(srl_key_get_limits(st.lim, "big", 3, &got), 0);
    ck_assert_mem_eq(&got, &l10, sizeof got);
    struct race *r = shared_zeroed(sizeof *r);
    race(&st, &cfg, 0, r);
    ck_assert_uint_eq(r->errors, 0);
    ck_assert_uint_eq(r->admitted[0], 3);
    ck_assert_uint_eq(r->admitted[1], 10);
    /* A key without limits of its own is its tier's. */
    ck_assert_int_eq(srl_key_get_limits(st.lim, "small", 5, &got), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(st.lim, "other", 5, 1, &d), 0);
    ck_assert_int_eq(srl_key_get_limits(st.lim, "other", 5, &got), SRL_ENOENT);
    ck_assert_int_eq(srl_check(st.lim, NULL, NULL), 0);
    store_close(&st);
}
END_TEST

START_TEST(per_call_limits_of_3_and_10_under_8_processes_admit_exactly_3_and_10)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:100/1h", 1024, clock);
    struct store st;
    store_open(&st, _i, "keylim", &cfg);
    struct race *r = shared_zeroed(sizeof *r);
    race(&st, &cfg, 1, r);
    ck_assert_uint_eq(r->errors, 0);
    ck_assert_uint_eq(r->admitted[0], 3);
    ck_assert_uint_eq(r->admitted[1], 10);
    /* Per call, not stored: no flag, no stored limits. */
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(st.lim, "small", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, 0);
    ck_assert_int_eq(srl_check(st.lim, NULL, NULL), 0);
    store_close(&st);
}
END_TEST

START_TEST(a_change_of_a_keys_limits_keeps_its_use)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:100/1h", 1024, clock);
    struct store st;
    store_open(&st, _i, "keylim", &cfg);
    srl_limits l10 = limits("token_bucket:10/1h"), l20 = limits("token_bucket:20/1h");
    /* Stored: 4 used of 10, then 20: one more leaves 20 - 5. */
    ck_assert_int_eq(srl_key_set_limits(st.lim, "k", 1, &l10), 0);
    for (int n = 0; n < 4; n++)
        left_after_one(st.lim, "k", NULL);
    ck_assert_int_eq(srl_key_set_limits(st.lim, "k", 1, &l20), 0);
    ck_assert_uint_eq(left_after_one(st.lim, "k", NULL), 15);
    /* A call's limits do not override the stored ones. */
    ck_assert_uint_eq(left_after_one(st.lim, "k", &l10), 14);
    /* Cleared: back to the default tier (100), 7 used with this one. */
    ck_assert_int_eq(srl_key_clear_limits(st.lim, "k", 1), 0);
    ck_assert_uint_eq(left_after_one(st.lim, "k", NULL), 93);
    ck_assert_int_eq(srl_key_clear_limits(st.lim, "k", 1), 0);   /* none: still 0 */
    ck_assert_int_eq(srl_key_clear_limits(st.lim, "nokey", 5), SRL_ENOENT);
    /* Per call: 4 of 10, then 20, then the default tier by a plain call. */
    for (int n = 0; n < 4; n++)
        left_after_one(st.lim, "c", &l10);
    ck_assert_uint_eq(left_after_one(st.lim, "c", &l20), 15);
    ck_assert_uint_eq(left_after_one(st.lim, "c", &l20), 14);
    ck_assert_uint_eq(left_after_one(st.lim, "c", NULL), 93);
    ck_assert_int_eq(srl_check(st.lim, NULL, NULL), 0);
    store_close(&st);
}
END_TEST

START_TEST(equal_limits_share_an_entry_and_a_full_table_says_so)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:100/1h", 1024, clock);
    struct store st;
    store_open(&st, _i, "keylim", &cfg);
    /* 256 distinct sets (one key re-set each time), each set twice. */
    for (int n = 1; n <= 256; n++) {
        char text[64];
        snprintf(text, sizeof text, "token_bucket:%d/1h", n);
        srl_limits l = limits(text);
        ck_assert_int_eq(srl_key_set_limits(st.lim, "k", 1, &l), 0);
        ck_assert_int_eq(srl_key_set_limits(st.lim, "j", 1, &l), 0);
    }
    srl_limits again = limits("token_bucket:7/1h");
    ck_assert_int_eq(srl_key_set_limits(st.lim, "k", 1, &again), 0);
    srl_limits more = limits("token_bucket:257/1h");
    ck_assert_int_eq(srl_key_set_limits(st.lim, "k", 1, &more), SRL_ENOSPC);
    char msg[256];
    srl_last_error(msg, sizeof msg);
    ck_assert_str_eq(msg, "the segment's table of per-key limit sets is full (256 distinct sets, "
                          "kept while the segment lives): give keys one of the sets in use, or "
                          "recreate the segment");
    srl_decision d;
    ck_assert_int_eq(srl_acquire_limits(st.lim, "x", 1, &more, 1, &d), SRL_ENOSPC);
    /* Refused: the key's limits are still the ones set last. */
    srl_limits got;
    ck_assert_int_eq(srl_key_get_limits(st.lim, "k", 1, &got), 0);
    ck_assert_mem_eq(&got, &again, sizeof got);
    store_close(&st);
}
END_TEST

START_TEST(limits_whose_state_exceeds_the_slots_are_refused_by_name)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:100/1h", 1024, clock);
    struct store st;
    store_open(&st, _i, "keylim", &cfg);
    srl_info info;
    ck_assert_int_eq(srl_info_get(st.lim, &info), 0);
    srl_limits big = limits("sliding_log:50/1m");
    ck_assert_int_eq(srl_key_set_limits(st.lim, "k", 1, &big), SRL_EPOLICY);
    char msg[256], want[256];
    srl_last_error(msg, sizeof msg);
    snprintf(want, sizeof want,
             "the key's limits need a state of 408 bytes; this segment's slots hold at most %u "
             "(its largest state): create the segment with that policy in a tier",
             (unsigned)info.state_bytes);
    ck_assert_str_eq(msg, want);
    ck_assert_uint_eq(info.state_bytes, 24);
    srl_decision d;
    ck_assert_int_eq(srl_acquire_limits(st.lim, "k", 1, &big, 1, &d), SRL_EPOLICY);
    srl_last_error(msg, sizeof msg);
    ck_assert_str_eq(msg, want);
    /* Nothing was inserted for the refused set. */
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(st.lim, "k", 1, &kc), SRL_ENOENT);
    store_close(&st);
}
END_TEST

START_TEST(a_stored_key_survives_eviction_a_per_call_key_does_not)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg = config("token_bucket:100/1h", 1024, clock);
    struct store st;
    store_open(&st, _i, "keylim", &cfg);
    srl_limits l3 = limits("token_bucket:3/1h");
    ck_assert_int_eq(srl_key_set_limits(st.lim, "kept", 4, &l3), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire_limits(st.lim, "call", 4, &l3, 1, &d), 0);
    __atomic_add_fetch(&clock->now, 10 * 3600 * SEC, __ATOMIC_RELAXED);   /* both at rest */
    ck_assert_int_eq(srl_evict_idle(st.lim), 1);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(st.lim, "kept", 4, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_OWN_LIMITS);
    ck_assert_int_eq(srl_key_control_get(st.lim, "call", 4, &kc), SRL_ENOENT);
    store_close(&st);
}
END_TEST

START_TEST(per_key_limits_elsewhere_say_not_supported)
{
    /* A lock-free in-process handle (the in-process store's others have
     * them: check_local_control). */
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("gcra:10/1s", &cfg.policy), 0);
    cfg.capacity = 64;
    cfg.flags |= SRL_CONFIG_LOCKFREE;
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    srl_limits l = limits("gcra:3/1h");
    ck_assert_int_eq(srl_key_set_limits(lim, "k", 1, &l), SRL_ENOTSUP);
    char msg[256];
    srl_last_error(msg, sizeof msg);
    ck_assert_str_eq(msg, "a lock-free in-process store (SRL_CONFIG_LOCKFREE) decides every key "
                          "by its one GCRA word: open it without that flag for per-key limits");
    srl_decision d;
    ck_assert_int_eq(srl_acquire_limits(lim, "k", 1, &l, 1, &d), SRL_ENOTSUP);
    srl_close(lim);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_keylimits");
    TCase *tc = tcase_create("keylimits");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, stored_limits_of_3_and_10_under_8_processes_admit_exactly_3_and_10, 0, 2);
    tcase_add_loop_test(tc, per_call_limits_of_3_and_10_under_8_processes_admit_exactly_3_and_10, 0, 2);
    tcase_add_loop_test(tc, a_change_of_a_keys_limits_keeps_its_use, 0, 2);
    tcase_add_loop_test(tc, equal_limits_share_an_entry_and_a_full_table_says_so, 0, 2);
    tcase_add_loop_test(tc, limits_whose_state_exceeds_the_slots_are_refused_by_name, 0, 2);
    tcase_add_loop_test(tc, a_stored_key_survives_eviction_a_per_call_key_does_not, 0, 2);
    tcase_add_test(tc, per_key_limits_elsewhere_say_not_supported);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
