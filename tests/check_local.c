/*
 * check_local.c - the in-process store (srl_open_local), single-threaded.
 *
 * What this store adds, driven by a fake ticker (the fixed traces through
 * the limiter, run on every store, are in check_trace.c): capacity and
 * on_full, reclaiming at-rest states when full, reset_key, peek, stats, foreach, info, check, argument errors, exact key matching,
 * freeing every state at close, and closing a limiter inherited by fork.
 * Race tests are in check_local_race.c.
 */
#include <check.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "decision_assert.h"
#include "srl.h"
#include "testutil.h"

static srl_limiter *open_local(srl_algorithm algo, uint32_t permits, uint64_t window_ns,
                               uint64_t capacity, srl_on_full on_full, fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = algo, .permits = permits, .window_ns = window_ns};
    cfg.capacity = capacity;
    cfg.on_full = on_full;
    cfg.key_display = 4;
    cfg.ticker = fake_ticker(clock);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    ck_assert_ptr_nonnull(lim);
    return lim;
}

/* token_bucket:permits/1s on a clock that never moves (from 0). */
static srl_limiter *open_frozen_tb(uint32_t permits, uint64_t capacity, srl_on_full on_full)
{
    return open_local(SRL_TOKEN_BUCKET, permits, SEC, capacity, on_full, fake_clock_shared(0));
}

static srl_decision acq(srl_limiter *lim, const char *key)
{
    srl_decision d;
    memset(&d, 0xa5, sizeof d);
    ck_assert_int_eq(srl_acquire(lim, key, strlen(key), 1, &d), 0);
    return d;
}

static srl_stats stats(srl_limiter *lim)
{
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    return st;
}

static uint64_t used(srl_limiter *lim)
{
    return stats(lim).used;
}

/* ------------------------------------------------- capacity, on_full */

START_TEST(a_full_table_allows_an_untracked_key_and_counts_it)
{
    srl_limiter *lim = open_frozen_tb(5, 2, SRL_ON_FULL_ALLOW);
    ck_allowed(acq(lim, "a"), 4);
    ck_allowed(acq(lim, "b"), 4);
    srl_decision d = acq(lim, "c");
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.flags, SRL_DECISION_UNTRACKED);
    ck_assert_uint_eq(d.limit, 5);
    ck_assert_uint_eq(d.retry_after_ns, 0);
    ck_assert_int_eq(srl_peek(lim, "c", 1, 1, &d), SRL_ENOENT);
    /* Tracked keys are still decided by their states. */
    ck_allowed(acq(lim, "a"), 3);
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.capacity, 2);
    ck_assert_uint_eq(st.used, 2);
    ck_assert_uint_eq(st.full, 1);
    ck_assert_uint_eq(st.allowed, 4);  /* on_full decisions count too */
    ck_assert_uint_eq(st.denied, 0);
    ck_assert_uint_eq(st.evicted, 0);
    srl_close(lim);
}
END_TEST

START_TEST(a_full_table_denies_an_untracked_key_when_on_full_is_deny)
{
    srl_limiter *lim = open_frozen_tb(5, 1, SRL_ON_FULL_DENY);
    ck_allowed(acq(lim, "a"), 4);
    for (int i = 0; i < 3; i++) {
        srl_decision d = acq(lim, "b");
        ck_assert_int_eq(d.allowed, 0);
        ck_assert_uint_eq(d.flags, SRL_DECISION_UNTRACKED);
        ck_assert_uint_eq(d.retry_after_ns, SEC); /* one window */
    }
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.full, 3);
    ck_assert_uint_eq(st.denied, 3);
    ck_assert_uint_eq(st.allowed, 1);
    srl_close(lim);
}
END_TEST

START_TEST(an_insert_into_a_full_table_reclaims_states_at_rest)
{
    fake_clock *c = fake_clock_shared(0);
    srl_limiter *lim = open_local(SRL_TOKEN_BUCKET, 5, SEC, 3, SRL_ON_FULL_DENY, c);
    ck_allowed(acq(lim, "a"), 4);
    ck_allowed(acq(lim, "b"), 4);
    for (int i = 0; i < 5; i++)
        acq(lim, "busy");                  /* empty: far from rest */
    c->now = 400 * MS;                     /* a, b: 4 + 2 = 5 at rest; busy: 2 */
    ck_allowed(acq(lim, "new"), 4);        /* reclaims a and b, not busy */
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.evicted, 2);
    ck_assert_uint_eq(st.used, 2);
    ck_assert_uint_eq(st.full, 0);
    srl_decision d;
    ck_assert_int_eq(srl_peek(lim, "a", 1, 1, &d), SRL_ENOENT);
    ck_assert_int_eq(srl_peek(lim, "busy", 4, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 1);     /* 2 tokens, peek of cost 1 */
    /* a returns as a fresh key: nothing it had was lost. */
    ck_allowed(acq(lim, "a"), 4);
    /* Table full again (busy, new, a) and nothing at rest: denied. */
    d = acq(lim, "x");
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.flags, SRL_DECISION_UNTRACKED);
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------ reset, peek, stats */

START_TEST(reset_key_forgets_a_key_and_keeps_its_counts_in_stats)
{
    srl_limiter *lim = open_frozen_tb(2, 10, SRL_ON_FULL_ALLOW);
    ck_allowed(acq(lim, "k"), 1);
    ck_allowed(acq(lim, "k"), 0);
    ck_denied(acq(lim, "k"), 500 * MS);
    ck_assert_int_eq(srl_reset_key(lim, "k", 1), 0);
    ck_assert_uint_eq(used(lim), 0);
    ck_assert_int_eq(srl_reset_key(lim, "k", 1), SRL_ENOENT);
    ck_assert_int_eq(srl_reset_key(lim, "never", 5), SRL_ENOENT);
    ck_allowed(acq(lim, "k"), 1);          /* fresh, though no time passed */
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.allowed, 3);
    ck_assert_uint_eq(st.denied, 1);
    ck_assert_uint_eq(st.evicted, 0);      /* a reset is not an eviction */
    ck_assert_uint_eq(st.used, 1);
    ck_assert_uint_eq(st.recovered, 0);
    ck_assert_uint_eq(st.reset_slots, 0);
    ck_assert_uint_eq(st.timeouts, 0);
    srl_close(lim);
}
END_TEST

START_TEST(peek_changes_nothing_and_reports_an_untracked_key_as_enoent)
{
    srl_limiter *lim = open_frozen_tb(3, 10, SRL_ON_FULL_ALLOW);
    srl_decision d;
    ck_assert_int_eq(srl_peek(lim, "p", 1, 1, &d), SRL_ENOENT);
    ck_assert_uint_eq(used(lim), 0);       /* peek creates nothing */
    ck_allowed(acq(lim, "p"), 2);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(srl_peek(lim, "p", 1, 2, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.remaining, 0);
    }
    ck_assert_int_eq(srl_peek(lim, "p", 1, 3, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_allowed(acq(lim, "p"), 1);
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.allowed, 2);      /* peeks are not decisions */
    ck_assert_uint_eq(st.denied, 0);
    srl_close(lim);
}
END_TEST

START_TEST(keys_are_matched_on_every_byte_and_their_length)
{
    srl_limiter *lim = open_frozen_tb(1, 10, SRL_ON_FULL_ALLOW);
    static unsigned char big[SRL_KEY_MAX];
    memset(big, 'x', sizeof big);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, big, sizeof big, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_acquire(lim, big, sizeof big - 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);        /* a prefix is another key */
    big[sizeof big - 1] = 'y';
    ck_assert_int_eq(srl_acquire(lim, big, sizeof big, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);        /* so is a last-byte change */
    ck_assert_int_eq(srl_acquire(lim, "a\0b", 3, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_acquire(lim, "a\0c", 3, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);        /* bytes after a NUL count */
    ck_assert_int_eq(srl_acquire(lim, "a\0b", 3, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);        /* the same key again */
    ck_assert_uint_eq(used(lim), 5);
    ck_assert_int_eq(srl_acquire(lim, big, SRL_KEY_MAX + 1, 1, &d), SRL_EKEY);
    ck_assert_int_eq(srl_acquire(lim, "", 0, 1, &d), SRL_EKEY);
    ck_assert_int_eq(srl_acquire(lim, "a", 1, 2, &d), SRL_ECOST);
    ck_assert_uint_eq(used(lim), 5);       /* errors changed nothing */
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------- foreach, info, check */

struct seen {
    int n;
    int stop_after;
    char keys[8][8];
    uint64_t allowed[8], denied[8];
    uint32_t key_len[8], display_len[8];
    int at_rest[8];
    int now_allowed[8];
    uint64_t last_ns[8];
};

static int collect(const srl_entry *e, void *ctx)
{
    struct seen *s = ctx;
    if (s->n < 8) {
        memcpy(s->keys[s->n], e->display, e->display_len);
        s->keys[s->n][e->display_len] = 0;
        s->allowed[s->n] = e->allowed;
        s->denied[s->n] = e->denied;
        s->key_len[s->n] = e->key_len;
        s->display_len[s->n] = e->display_len;
        s->at_rest[s->n] = e->at_rest;
        s->now_allowed[s->n] = e->now.allowed;
        s->last_ns[s->n] = e->last_ns;
    }
    s->n++;
    return s->stop_after && s->n >= s->stop_after;
}

static int find_seen(const struct seen *s, const char *display)
{
    for (int i = 0; i < s->n && i < 8; i++)
        if (strcmp(s->keys[i], display) == 0)
            return i;
    return -1;
}

START_TEST(foreach_visits_every_key_with_its_counts_and_display_prefix)
{
    fake_clock *c = fake_clock_shared(0);
    srl_limiter *lim = open_local(SRL_TOKEN_BUCKET, 2, SEC, 10, SRL_ON_FULL_ALLOW, c);
    c->now = 7 * MS;
    acq(lim, "ab");
    acq(lim, "ab");
    acq(lim, "ab");                         /* 2 allowed, 1 denied */
    acq(lim, "longkey");                    /* display: 4 bytes, "long" */
    struct seen s = {0};
    ck_assert_int_eq(srl_foreach(lim, collect, &s), 2);
    ck_assert_int_eq(s.n, 2);
    int i = find_seen(&s, "ab"), j = find_seen(&s, "long");
    ck_assert_int_ge(i, 0);
    ck_assert_int_ge(j, 0);
    ck_assert_uint_eq(s.allowed[i], 2);
    ck_assert_uint_eq(s.denied[i], 1);
    ck_assert_uint_eq(s.key_len[i], 2);
    ck_assert_uint_eq(s.display_len[i], 2);
    ck_assert_int_eq(s.at_rest[i], 0);
    ck_assert_int_eq(s.now_allowed[i], 0);  /* peek of cost 1: empty */
    ck_assert_uint_eq(s.last_ns[i], 7 * MS);
    ck_assert_uint_eq(s.allowed[j], 1);
    ck_assert_uint_eq(s.key_len[j], 7);
    ck_assert_uint_eq(s.display_len[j], 4);
    ck_assert_int_eq(s.now_allowed[j], 1);  /* one token left */
    c->now = 2 * SEC;
    struct seen r = {0};
    ck_assert_int_eq(srl_foreach(lim, collect, &r), 2);
    ck_assert_int_eq(r.at_rest[0], 1);
    ck_assert_int_eq(r.at_rest[1], 1);
    struct seen one = {.stop_after = 1};
    ck_assert_int_eq(srl_foreach(lim, collect, &one), 1); /* fn stopped it */
    ck_assert_int_eq(srl_foreach(lim, NULL, NULL), SRL_EINVAL);
    srl_close(lim);
}
END_TEST

static int fingerprint_of(const srl_entry *e, void *ctx)
{
    memcpy(ctx, e->fingerprint, 16);
    return 1;
}

START_TEST(foreach_gives_a_key_the_same_fingerprint_every_visit)
{
    srl_limiter *lim = open_frozen_tb(2, 10, SRL_ON_FULL_ALLOW);
    acq(lim, "k1");
    uint8_t f1[16], f2[16], zero[16] = {0};
    ck_assert_int_eq(srl_foreach(lim, fingerprint_of, f1), 1);
    ck_assert_int_eq(srl_foreach(lim, fingerprint_of, f2), 1);
    ck_assert_mem_eq(f1, f2, 16);
    ck_assert(memcmp(f1, zero, 16) != 0);
    ck_assert_int_eq(srl_reset_key(lim, "k1", 2), 0);
    acq(lim, "k2");
    ck_assert_int_eq(srl_foreach(lim, fingerprint_of, f2), 1);
    ck_assert(memcmp(f1, f2, 16) != 0);
    srl_close(lim);
}
END_TEST

START_TEST(info_describes_a_local_store_and_check_is_not_supported)
{
    srl_limiter *lim = open_local(SRL_SLIDING_COUNTER, 7, 60 * SEC, 1234, SRL_ON_FULL_DENY,
                                  fake_clock_shared(0));
    srl_info in;
    memset(&in, 0x5a, sizeof in);
    ck_assert_int_eq(srl_info_get(lim, &in), 0);
    ck_assert_int_eq(in.kind, SRL_STORE_LOCAL);
    ck_assert_int_eq(in.policy.algorithm, SRL_SLIDING_COUNTER);
    ck_assert_uint_eq(in.policy.permits, 7);
    ck_assert_uint_eq(in.policy.window_ns, 60 * SEC);
    ck_assert_int_eq(in.on_full, SRL_ON_FULL_DENY);
    ck_assert_uint_eq(in.capacity, 1234);
    ck_assert_uint_eq(in.key_display, 4);
    ck_assert_uint_eq(in.segment_bytes, 0);
    ck_assert_int_eq(in.creator_pid, getpid());
    ck_assert_str_eq(in.name, "");
    ck_assert_int_eq(srl_check(lim, NULL, NULL), SRL_ENOTSUP);
    srl_close(lim);
}
END_TEST

START_TEST(open_rejects_bad_arguments_and_leaves_out_null)
{
    srl_config cfg;
    srl_config_init(&cfg);
    srl_limiter *lim = (srl_limiter *)&cfg; /* must be overwritten with NULL */
    ck_assert_int_eq(srl_open_local(NULL, &lim), SRL_EINVAL);
    ck_assert_ptr_null(lim);
    ck_assert_int_eq(srl_open_local(&cfg, NULL), SRL_EINVAL);
    cfg.policy.permits = 0;
    lim = (srl_limiter *)&cfg;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), SRL_EPOLICY);
    ck_assert_ptr_null(lim);
    srl_config_init(&cfg);
    cfg.capacity = 0;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), SRL_EINVAL);
    cfg.capacity = SRL_CAPACITY_MAX + 1;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), SRL_EINVAL);
    srl_config_init(&cfg);
    cfg.key_display = SRL_KEY_DISPLAY_MAX + 1;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), SRL_EINVAL);
    srl_config_init(&cfg);
    cfg.on_full = (srl_on_full)7;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), SRL_EINVAL);
    ck_assert_ptr_null(lim);
    srl_close(NULL);                          /* a no-op */
    /* The largest capacity opens: the table starts small and grows. */
    srl_config_init(&cfg);
    cfg.capacity = SRL_CAPACITY_MAX;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    srl_close(lim);
}
END_TEST

/* ---------------------------------------------------------- lifetime */

/* Fill, evict, reset, leave the rest and close: every state must be freed.
 * Under the ASan build LeakSanitizer checks that at the child's exit (a
 * leak fails the test); every build checks the counts on the way. */
START_TEST(close_frees_every_state)
{
    fake_clock *c = fake_clock_shared(0);
    srl_limiter *lim = open_local(SRL_TOKEN_BUCKET, 2, SEC, 4096, SRL_ON_FULL_ALLOW, c);
    char key[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        acq(lim, key);
        if (i % 2)
            acq(lim, key);                 /* odd keys: empty buckets */
    }
    ck_assert_uint_eq(used(lim), 3000);
    c->now = 500 * MS;                     /* even keys at rest again */
    ck_assert_int_eq(srl_evict_idle(lim), 1500);
    for (int i = 1; i < 3000; i += 4) {
        snprintf(key, sizeof key, "key-%d", i);
        ck_assert_int_eq(srl_reset_key(lim, key, strlen(key)), 0);
    }
    ck_assert_uint_eq(used(lim), 750);
    srl_close(lim);
}
END_TEST

/* A local limiter must be created after fork; one inherited by a child
 * is closed there without touching liburcu, which would otherwise wait
 * forever in rcu_barrier() for a call_rcu worker the child does not have. */
START_TEST(a_limiter_inherited_by_fork_closes_in_the_child_without_hanging)
{
    srl_limiter *lim = open_frozen_tb(2, 16, SRL_ON_FULL_ALLOW);
    acq(lim, "x");
    ck_assert_int_eq(srl_reset_key(lim, "x", 1), 0); /* starts call_rcu's worker */
    acq(lim, "y");
    pid_t pid = test_fork();
    if (pid == 0) {
        srl_close(lim);
        _exit(0);
    }
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 1000 && got == 0; i++) {   /* up to ~10 s */
        got = waitpid(pid, &status, WNOHANG);
        if (got == 0)
            usleep(10000);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    ck_assert_msg(got == pid, "srl_close hung in the child");
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The parent's limiter is untouched. */
    ck_allowed(acq(lim, "y"), 0);
    srl_close(lim);
}
END_TEST

static Suite *local_suite(void)
{
    Suite *s = suite_create("local");
    TCase *tc = tcase_create("local");
    tcase_add_test(tc, a_full_table_allows_an_untracked_key_and_counts_it);
    tcase_add_test(tc, a_full_table_denies_an_untracked_key_when_on_full_is_deny);
    tcase_add_test(tc, an_insert_into_a_full_table_reclaims_states_at_rest);
    tcase_add_test(tc, reset_key_forgets_a_key_and_keeps_its_counts_in_stats);
    tcase_add_test(tc, peek_changes_nothing_and_reports_an_untracked_key_as_enoent);
    tcase_add_test(tc, keys_are_matched_on_every_byte_and_their_length);
    tcase_add_test(tc, foreach_visits_every_key_with_its_counts_and_display_prefix);
    tcase_add_test(tc, foreach_gives_a_key_the_same_fingerprint_every_visit);
    tcase_add_test(tc, info_describes_a_local_store_and_check_is_not_supported);
    tcase_add_test(tc, open_rejects_bad_arguments_and_leaves_out_null);
    tcase_add_test(tc, close_frees_every_state);
    tcase_add_test(tc, a_limiter_inherited_by_fork_closes_in_the_child_without_hanging);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(local_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
