/*
 * check_trace.c - fixed request traces through the whole limiter, the same
 * trace and the same exact decisions on every store:
 *   - token bucket 5/s, two keys, with evict_idle at 1.3 s and 1.5 s;
 *   - sliding log 3/s (half-open window: an entry one window old is out);
 *   - sliding counter 10/min: denied at 69 s for exactly 6 s + 1 ns, still
 *     denied at 75 s (the estimate is exactly 10), allowed at 75.001 s;
 *   - fixed window 3/min: the window opens at the first hit (7 s), denials
 *     count nothing, a new window opens at exactly 67 s; another key its own.
 * Driven by a fake ticker in a shared page.  Some requests are decided
 * "elsewhere": by a second handle on the same name (named segment), by a
 * forked child (anonymous mapping), by the same handle (local store, which
 * a fork must not use).  Then foreach and info on the two shared stores.
 *
 * Loop index _i: STORE_SHARED, STORE_ANONYMOUS, STORE_LOCAL, STORE_REDIS.
 * The argument "shared", "local" or "redis" runs only those stores (meson
 * registers them as separate tests, so the ThreadSanitizer build, which
 * runs suite local, never sees process-shared mutexes it cannot model);
 * none runs all but Redis.  The Redis store (built with -DTRACE_REDIS, as
 * check_trace_redis) runs on a redis-server the test starts on a unix
 * socket, with the ticker's time passed to its scripts (test hook
 * srl__redis_fixed_time); "elsewhere" is a second handle on the same
 * prefix.  It runs the traces that do not evict (Redis expires states
 * itself), need no fixed_window script, nor read the segment's geometry.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "decision_assert.h"
#include "srl.h"
#include "testutil.h"
#include "shm_testutil.h"
#ifdef TRACE_REDIS
#include "redis_testutil.h"
int srl__redis_fixed_time(srl_limiter *lim, int on);
#endif

enum { STORE_SHARED, STORE_ANONYMOUS, STORE_LOCAL, STORE_REDIS, STORES };

struct store {
    srl_limiter *a;      /* the handle the test drives */
    srl_limiter *b;      /* a second handle on the same segment (shared, redis) */
    int kind;
    char name[128];
    pid_t server;        /* redis: the redis-server, its dir and socket */
    char dir[64], sock[96];
};

static struct store open_store(int kind, srl_algorithm algo, uint32_t permits,
                               uint64_t window_ns, fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = algo, .permits = permits, .window_ns = window_ns};
    cfg.capacity = 100;
    cfg.key_display = 8;
    cfg.ticker = fake_ticker(clock);
    struct store st = {.kind = kind};
    if (kind == STORE_SHARED) {
        strcpy(st.name, unique_name("trace"));
        ck_assert_int_eq(srl_open_shared(st.name, &cfg, SRL_CREATE | SRL_EXCL, &st.a), 0);
        ck_assert_int_eq(srl_open_shared(st.name, &cfg, 0, &st.b), 0);
    } else if (kind == STORE_ANONYMOUS) {
        ck_assert_int_eq(srl_open_anonymous(&cfg, &st.a), 0);
    } else if (kind == STORE_REDIS) {
#ifdef TRACE_REDIS
        snprintf(st.dir, sizeof st.dir, "/tmp/srl-trace-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(st.dir));
        snprintf(st.sock, sizeof st.sock, "%s/redis.sock", st.dir);
        st.server = redis_server_start(st.dir, st.sock, NULL);
        char uri[160];
        snprintf(uri, sizeof uri, "unix://%s?prefix=trace", st.sock);
        ck_assert_int_eq(srl_open_redis(uri, &cfg, &st.a), 0);
        ck_assert_int_eq(srl_open_redis(uri, &cfg, &st.b), 0);
        ck_assert_int_eq(srl__redis_fixed_time(st.a, 1), 0);
        ck_assert_int_eq(srl__redis_fixed_time(st.b, 1), 0);
#else
        ck_abort_msg("check_trace: the Redis store needs the TRACE_REDIS build");
#endif
    } else {
        ck_assert_int_eq(srl_open_local(&cfg, &st.a), 0);
    }
    return st;
}

static void close_store(struct store *st)
{
    srl_close(st->a);
    srl_close(st->b);
    if (st->name[0] != '\0')
        ck_assert_int_eq(srl_unlink(st->name), 0);
#ifdef TRACE_REDIS
    if (st->server > 0) {
        redis_server_stop(st->server);
        unlink(st->sock);
        rmdir(st->dir);
    }
#endif
}

static srl_decision acq(srl_limiter *lim, const char *key)
{
    srl_decision d;
    memset(&d, 0xa5, sizeof d);
    ck_assert_int_eq(srl_acquire(lim, key, strlen(key), 1, &d), 0);
    return d;
}

/* The other handle of a named store, a forked child for an anonymous one,
 * the same handle for a local one: returns the decision that one got. */
static srl_decision acq_elsewhere(struct store *st, const char *key)
{
    if (st->kind == STORE_SHARED || st->kind == STORE_REDIS)
        return acq(st->b, key);
    if (st->kind == STORE_LOCAL)
        return acq(st->a, key);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = test_fork();
    if (pid == 0) {
        srl_decision d;
        memset(&d, 0, sizeof d);
        int rc = srl_acquire(st->a, key, strlen(key), 1, &d);
        if (rc != 0 || write(fds[1], &d, sizeof d) != (ssize_t)sizeof d)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    srl_decision d;
    ck_assert_int_eq(read(fds[0], &d, sizeof d), (ssize_t)sizeof d);
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return d;
}

/* srl_check on a shared store finds nothing wrong; a local or Redis one
 * has no check. */
static void ck_healthy(const struct store *st)
{
    ck_assert_int_eq(srl_check(st->a, NULL, NULL),
                     st->kind >= STORE_LOCAL ? SRL_ENOTSUP : 0);
}

static srl_stats stats(srl_limiter *lim)
{
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    return st;
}

START_TEST(token_bucket_two_key_trace_with_evict_idle)
{
    fake_clock *c = fake_clock_shared(0);
    struct store st = open_store(_i, SRL_TOKEN_BUCKET, 5, SEC, c);
    for (uint32_t i = 0; i < 5; i++)
        ck_allowed(acq(st.a, "alice"), 4 - i);          /* #1..#5 */
    ck_denied(acq_elsewhere(&st, "alice"), 200 * MS);   /* #6, another process */
    c->now = 100 * MS;
    ck_denied(acq(st.a, "alice"), 100 * MS);            /* #7: half a token */
    c->now = 300 * MS;
    ck_allowed(acq_elsewhere(&st, "alice"), 0);         /* #8: 1.5 tokens */
    ck_denied(acq(st.a, "alice"), 100 * MS);            /* #9 */
    ck_allowed(acq_elsewhere(&st, "bob"), 4);           /* bob #1: new, full */
    c->now = 1300 * MS;
    ck_allowed(acq(st.a, "alice"), 4);                  /* #10: capped at 5 */
    ck_assert_int_eq(srl_evict_idle(st.a), 1);          /* bob: 4 + 5 earned */
    ck_assert_uint_eq(stats(st.a).used, 1);
    srl_decision d;
    ck_assert_int_eq(srl_peek(st.a, "bob", 3, 1, &d), SRL_ENOENT);
    ck_assert_int_eq(srl_peek(st.a, "alice", 5, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 3);
    c->now = 1500 * MS;
    ck_assert_int_eq(srl_evict_idle(st.a), 1);          /* alice: 4 + 1 = 5 */
    srl_stats s = stats(st.a);
    ck_assert_uint_eq(s.used, 0);
    ck_assert_uint_eq(s.allowed, 8);                    /* alice 7, bob 1 */
    ck_assert_uint_eq(s.denied, 3);
    ck_assert_uint_eq(s.evicted, 2);
    ck_assert_uint_eq(s.full, 0);
    ck_assert_uint_eq(s.recovered, 0);
    ck_allowed(acq(st.a, "alice"), 4);                  /* back, fresh */
    ck_healthy(&st);
    close_store(&st);
}
END_TEST

START_TEST(sliding_log_trace_frees_a_permit_exactly_one_window_later)
{
    fake_clock *c = fake_clock_shared(0);
    struct store st = open_store(_i, SRL_SLIDING_LOG, 3, SEC, c);
    ck_allowed(acq(st.a, "alice"), 2);
    c->now = 400 * MS;
    ck_allowed(acq_elsewhere(&st, "alice"), 1);
    c->now = 800 * MS;
    ck_allowed(acq(st.a, "alice"), 0);
    c->now = 900 * MS;
    ck_denied(acq_elsewhere(&st, "alice"), 100 * MS);   /* until 0 ms leaves */
    c->now = 1000 * MS;
    ck_allowed(acq(st.a, "alice"), 0);                  /* half-open window */
    c->now = 1050 * MS;
    ck_denied(acq(st.a, "alice"), 350 * MS);            /* oldest live: 400 ms */
    ck_healthy(&st);
    close_store(&st);
}
END_TEST

START_TEST(sliding_counter_trace_turns_allowed_just_after_75_s)
{
    fake_clock *c = fake_clock_shared(50 * SEC);
    struct store st = open_store(_i, SRL_SLIDING_COUNTER, 10, 60 * SEC, c);
    for (uint32_t i = 0; i < 8; i++)
        ck_allowed(acq(st.a, "alice"), 9 - i);          /* window [0 s, 60 s) */
    c->now = 69 * SEC;
    ck_allowed(acq(st.a, "alice"), 3);                  /* estimate 6.8 before */
    ck_allowed(acq_elsewhere(&st, "alice"), 2);         /* 7.8 */
    ck_allowed(acq(st.a, "alice"), 1);                  /* 8.8 */
    ck_allowed(acq(st.a, "alice"), 0);                  /* 9.8 */
    ck_denied(acq_elsewhere(&st, "alice"), 6 * SEC + 1);/* 10.8 */
    c->now = 75 * SEC;
    ck_denied(acq(st.a, "alice"), 1);                   /* exactly 10 at 75 s */
    c->now = 75 * SEC + 1 * MS;
    ck_allowed(acq(st.a, "alice"), 0);                  /* a hair under 10 */
    ck_healthy(&st);
    close_store(&st);
}
END_TEST

START_TEST(fixed_window_trace_opens_its_window_at_the_first_hit)
{
    fake_clock *c = fake_clock_shared(7 * SEC);
    struct store st = open_store(_i, SRL_FIXED_WINDOW, 3, 60 * SEC, c);
    srl_decision d = acq(st.a, "alice");                /* window [7 s, 67 s) */
    ck_allowed(d, 2);
    ck_assert_uint_eq(d.reset_after_ns, 60 * SEC);
    c->now = 30 * SEC;
    ck_allowed(acq_elsewhere(&st, "alice"), 1);
    ck_allowed(acq(st.a, "alice"), 0);
    ck_allowed(acq(st.a, "bob"), 2);                    /* bob's window [30 s, 90 s) */
    ck_denied(acq_elsewhere(&st, "alice"), 37 * SEC);   /* counts nothing */
    c->now = 67 * SEC - 1;
    ck_denied(acq(st.a, "alice"), 1);
    c->now = 67 * SEC;
    d = acq_elsewhere(&st, "alice");                    /* window [67 s, 127 s) */
    ck_allowed(d, 2);
    ck_assert_uint_eq(d.reset_after_ns, 60 * SEC);
    ck_allowed(acq(st.a, "bob"), 1);                    /* bob's still open */
    ck_healthy(&st);
    close_store(&st);
}
END_TEST

struct seen {
    int n;
    int alice_at_rest;
    uint64_t alice_allowed, alice_denied, alice_remaining;
};

static int visit(const srl_entry *e, void *ctx)
{
    struct seen *s = ctx;
    s->n++;
    if (e->key_len == 5 && e->display_len == 5 && memcmp(e->display, "alice", 5) == 0) {
        s->alice_at_rest = e->at_rest;
        s->alice_allowed = e->allowed;
        s->alice_denied = e->denied;
        s->alice_remaining = e->now.remaining;
    }
    return 0;
}

START_TEST(foreach_shows_display_counts_and_a_peek_decision)
{
    fake_clock *c = fake_clock_shared(0);
    struct store st = open_store(_i, SRL_TOKEN_BUCKET, 5, SEC, c);
    for (int i = 0; i < 7; i++)
        acq(st.a, "alice");                              /* 5 allowed, 2 denied */
    acq(st.a, "a-much-longer-key-than-the-display");
    struct seen s = {0};
    ck_assert_int_eq(srl_foreach(st.a, visit, &s), 2);
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(s.alice_at_rest, 0);
    ck_assert_uint_eq(s.alice_allowed, 5);
    ck_assert_uint_eq(s.alice_denied, 2);
    ck_assert_uint_eq(s.alice_remaining, 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(st.a, &info), 0);
    ck_assert_int_eq(info.kind, _i == STORE_SHARED ? SRL_STORE_SHARED : SRL_STORE_ANONYMOUS);
    ck_assert_uint_eq(info.capacity, 112);               /* 100 -> 7 buckets of 16 */
    ck_assert_uint_eq(info.buckets, 7);
    ck_assert_uint_eq(info.slots_per_bucket, 16);
    ck_assert_uint_eq(info.key_display, 8);
    ck_assert_int_eq(info.creator_pid, getpid());
    ck_assert_str_eq(info.name, _i == STORE_SHARED ? st.name : "");
    close_store(&st);
}
END_TEST

static Suite *suite(int first, int end)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("traces");
    tcase_set_timeout(tc, 30);
    if (first < STORE_REDIS)   /* evict_idle: Redis expires states itself */
        tcase_add_loop_test(tc, token_bucket_two_key_trace_with_evict_idle, first,
                            end < STORE_REDIS ? end : STORE_REDIS);
    tcase_add_loop_test(tc, sliding_log_trace_frees_a_permit_exactly_one_window_later, first, end);
    tcase_add_loop_test(tc, sliding_counter_trace_turns_allowed_just_after_75_s, first, end);
    if (first < STORE_REDIS)   /* fixed_window: no Redis script yet */
        tcase_add_loop_test(tc, fixed_window_trace_opens_its_window_at_the_first_hit, first,
                            end < STORE_REDIS ? end : STORE_REDIS);
    /* geometry and creator as the shared stores report them */
    if (first < STORE_LOCAL)
        tcase_add_loop_test(tc, foreach_shows_display_counts_and_a_peek_decision, STORE_SHARED,
                            STORE_LOCAL);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    int first = 0, end = STORE_REDIS;
    if (argc > 1 && strcmp(argv[1], "shared") == 0)
        end = STORE_LOCAL;
    else if (argc > 1 && strcmp(argv[1], "local") == 0)
        first = STORE_LOCAL;
    else if (argc > 1 && strcmp(argv[1], "redis") == 0)
        first = STORE_REDIS, end = STORES;
    else if (argc > 1) {
        fprintf(stderr, "usage: check_trace [shared|local|redis]\n");
        return 2;
    }
    SRunner *sr = srunner_create(suite(first, end));
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"trace"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
