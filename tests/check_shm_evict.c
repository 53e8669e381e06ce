/*
 * check_shm_evict.c - on_full=evict (layout 9, issue 41 item 7) on the
 * shared (named) and the anonymous store (each test runs on both: _i).
 *
 * A table that is full all the time: 8 processes each ask for a stream of
 * new keys, while every one of them also hammers 8 keys with limits of
 * their own, 4 plain keys whose limit is used up, and an exempt probe.
 * Asserted, exactly:
 *   - every new key is admitted by a state (never UNTRACKED, never on_full):
 *     srl_stats.full stays 0;
 *   - the own-limits keys admit exactly their 5 each, the used-up plain
 *     keys none more (so none of them was evicted: a fresh state would
 *     admit again), the exempt probe is never refused and is still tracked
 *     and exempt at the end;
 *   - every insert past the free slots evicted one active key, counted:
 *     srl_stats.evicted_active == evicted == inserts - free slots, and the
 *     same number in the metrics text (srl_evicted_active_total).
 * The clock moves 1 ms a step (a shared fake ticker): no token comes back
 * in the test's span (one per 12 minutes), so "exactly" is the whole truth.
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
#define STEPS 150
#define OWN 8
#define HOT 4
#define KEPT (OWN + 1)   /* own-limits keys and the probe */

struct tally {
    uint32_t ready, go;
    uint32_t own_admitted[OWN], hot_admitted[HOT];
    uint32_t probe_denied, new_refused, new_untracked, errors;
};

static void key_of(char *buf, size_t n, const char *tag, int i)
{
    snprintf(buf, n, "%s-%d", tag, i);
}

START_TEST(a_full_table_with_on_full_evict_under_8_processes_stays_exact_and_admits_new_keys)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("token_bucket:5/1h", &cfg.policy), 0);
    cfg.capacity = 32;
    cfg.on_full = SRL_ON_FULL_EVICT;
    cfg.ticker = fake_ticker(clock);
    struct store st;
    store_open(&st, _i, "evict", &cfg);
    srl_info info;
    ck_assert_int_eq(srl_info_get(st.lim, &info), 0);
    ck_assert_int_eq(info.on_full, SRL_ON_FULL_EVICT);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(st.lim, &s), 0);
    uint64_t capacity = s.capacity;
    srl_limits own;
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:5/1h", &own, NULL), 0);
    char key[32];
    for (int k = 0; k < OWN; k++) {
        key_of(key, sizeof key, "own", k);
        ck_assert_int_eq(srl_key_set_limits(st.lim, key, strlen(key), &own), 0);
    }
    ck_assert_int_eq(srl_key_exempt(st.lim, "probe", 5, 1), 0);
    srl_decision d;
    for (int k = 0; k < HOT; k++) {   /* used up before the race */
        key_of(key, sizeof key, "hot", k);
        for (int n = 0; n < 5; n++) {
            ck_assert_int_eq(srl_acquire(st.lim, key, strlen(key), 1, &d), 0);
            ck_assert_int_eq(d.allowed, 1);
        }
    }
    struct tally *t = shared_zeroed(sizeof *t);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] != 0)
            continue;
        srl_limiter *lim = store_worker(&st, &cfg);
        __atomic_add_fetch(&t->ready, 1, __ATOMIC_ACQ_REL);
        while (!__atomic_load_n(&t->go, __ATOMIC_ACQUIRE))
            sched_yield();
        for (int n = 0; n < STEPS; n++) {
            char k[32];
            key_of(k, sizeof k, "own", (w + n) % OWN);
            if (srl_acquire(lim, k, strlen(k), 1, &d) != 0)
                __atomic_add_fetch(&t->errors, 1, __ATOMIC_RELAXED);
            else if (d.allowed)
                __atomic_add_fetch(&t->own_admitted[(w + n) % OWN], 1, __ATOMIC_RELAXED);
            key_of(k, sizeof k, "hot", n % HOT);
            if (srl_acquire(lim, k, strlen(k), 1, &d) != 0)
                __atomic_add_fetch(&t->errors, 1, __ATOMIC_RELAXED);
            else if (d.allowed)
                __atomic_add_fetch(&t->hot_admitted[n % HOT], 1, __ATOMIC_RELAXED);
            if (srl_acquire(lim, "probe", 5, 1, &d) != 0)
                __atomic_add_fetch(&t->errors, 1, __ATOMIC_RELAXED);
            else if (!d.allowed)
                __atomic_add_fetch(&t->probe_denied, 1, __ATOMIC_RELAXED);
            int len = snprintf(k, sizeof k, "new-%d-%d", w, n);
            if (srl_acquire(lim, k, (size_t)len, 1, &d) != 0)
                __atomic_add_fetch(&t->errors, 1, __ATOMIC_RELAXED);
            else if (!d.allowed)
                __atomic_add_fetch(&t->new_refused, 1, __ATOMIC_RELAXED);
            else if (d.flags & SRL_DECISION_UNTRACKED)
                __atomic_add_fetch(&t->new_untracked, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&clock->now, 1000000, __ATOMIC_RELAXED);   /* 1 ms */
        }
        _exit(0);
    }
    while (__atomic_load_n(&t->ready, __ATOMIC_ACQUIRE) < WORKERS)
        sched_yield();
    __atomic_store_n(&t->go, 1, __ATOMIC_RELEASE);
    store_reap(pids, WORKERS);
    ck_assert_uint_eq(t->errors, 0);
    ck_assert_uint_eq(t->new_refused, 0);
    ck_assert_uint_eq(t->new_untracked, 0);
    ck_assert_uint_eq(t->probe_denied, 0);
    for (int k = 0; k < OWN; k++)
        ck_assert_msg(t->own_admitted[k] == 5, "own-%d admitted %u", k, t->own_admitted[k]);
    for (int k = 0; k < HOT; k++)
        ck_assert_msg(t->hot_admitted[k] == 0, "hot-%d admitted %u more", k, t->hot_admitted[k]);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(st.lim, "probe", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_EXEMPT);
    ck_assert_int_eq(srl_stats_get(st.lim, &s), 0);
    uint64_t inserts = (uint64_t)WORKERS * STEPS;
    uint64_t free_slots = capacity - KEPT - HOT;
    ck_assert_uint_eq(s.full, 0);
    ck_assert_uint_eq(s.used, capacity);
    ck_assert_uint_eq(s.evicted_active, inserts - free_slots);
    ck_assert_uint_eq(s.evicted, s.evicted_active);
    ck_assert_int_eq(srl_check(st.lim, NULL, NULL), 0);
    store_close(&st);
}
END_TEST

START_TEST(on_full_evict_is_parsed_shown_and_evicts_on_the_in_process_store)
{
    srl_config cfg;
    srl_config_init(&cfg);
    srl_policy_error err;
    ck_assert_int_eq(srl_config_parse(&cfg, "token_bucket:1/1h on_full=evict", &err), 0);
    ck_assert_int_eq(cfg.on_full, SRL_ON_FULL_EVICT);
    char text[512];
    ck_assert_int_ge(srl_config_format(&cfg, text, sizeof text), 0);
    ck_assert_msg(strstr(text, " on_full=evict") != NULL, "%s", text);
    ck_assert_int_ne(srl_config_parse(&cfg, "token_bucket:1/1h on_full=drop", &err), 0);
    ck_assert_msg(strstr(err.message, "allow, deny or evict") != NULL, "%s", err.message);
    /* The in-process store evicts too (tests/check_local_evict.c has the
     * rest): one more key is tracked, in an active key's slot. */
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("token_bucket:1/1h", &cfg.policy), 0);
    cfg.capacity = 1;
    cfg.on_full = SRL_ON_FULL_EVICT;
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);
    srl_decision d;
    char key[32];
    for (uint64_t n = 0; n < s.capacity; n++) {
        int len = snprintf(key, sizeof key, "k%llu", (unsigned long long)n);
        ck_assert_int_eq(srl_acquire(lim, key, (size_t)len, 1, &d), 0);
    }
    ck_assert_int_eq(srl_acquire(lim, "one-more", 8, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.flags & SRL_DECISION_UNTRACKED, 0);
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);
    ck_assert_uint_eq(s.evicted_active, 1);
    ck_assert_uint_eq(s.full, 0);
    srl_close(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shm_evict");
    TCase *tc = tcase_create("evict");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc,
                        a_full_table_with_on_full_evict_under_8_processes_stays_exact_and_admits_new_keys,
                        0, 2);
    tcase_add_test(tc, on_full_evict_is_parsed_shown_and_evicts_on_the_in_process_store);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
