/*
 * check_redis_sentinel.c - the Redis store behind Redis Sentinel
 * (redis-sentinel://): real processes started by the fixture on loopback
 * TCP ports, files in a mkdtemp directory, stopped by pid: a master, its
 * replica and three redis-sentinel (quorum 2, down-after-milliseconds 500,
 * failover-timeout 2000).
 *
 *   - failover: 8 forked workers (test_fork) decide on the store; the
 *     master is SIGKILLed under their load; the test waits (bounded, by
 *     asking every sentinel) until the sentinels name the replica; then the
 *     workers decide on a fresh key until each has 30 answers: exactly the
 *     limit admitted, every answer Redis's (flags 0).  What the failover
 *     lost (admissions the old master acknowledged and had not replicated)
 *     is measured against the new master's state and printed;
 *   - a sentinel that is not one (a plain redis-server, which refuses the
 *     SENTINEL command) is skipped for the next one, and with only it,
 *     srl_last_error names it and what it answered;
 *   - a sentinel (the test's own) that names the replica first: the
 *     -READONLY reply makes the store ask again, within the same call.
 */
#include <check.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define NSENT 3
#define WORKERS 8
#define POST_LIMIT 100u
#define POST_ANSWERS 30u

static struct {
    char dir[64];
    int master_port, replica_port, sent_port[NSENT];
    pid_t master, replica, sent[NSENT];
} fx;

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        abort();
    close(fd);
    return ntohs(a.sin_port);
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void stop(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
}

static void fixture_down(void)
{
    stop(&fx.master);
    stop(&fx.replica);
    for (int i = 0; i < NSENT; i++)
        stop(&fx.sent[i]);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", fx.dir);
    if (fx.dir[0] != '\0' && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", fx.dir);
}

static void undo(void *p)
{
    (void)p;
    fixture_down();
}

/* Set-up failures stop what was started, then abort (an unchecked fixture). */
static void die(const char *what)
{
    fprintf(stderr, "sentinel fixture: %s\n", what);
    fixture_down();
    abort();
}

static redisContext *conn(int port)
{
    struct timeval tv = {2, 0};
    redisContext *k = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (k != NULL && k->err != 0) {
        redisFree(k);
        return NULL;
    }
    if (k != NULL)
        redisSetTimeout(k, tv);
    return k;
}

/* argv[] run with stdout/stderr to /dev/null; its pid. */
static pid_t spawn(const char *const *argv)
{
    pid_t pid = test_fork_undo(undo, NULL);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static void wait_up(int port, pid_t pid, const char *what)
{
    redisContext *k;
    uint64_t t0 = now_ms();
    while ((k = conn(port)) == NULL) {
        if (waitpid(pid, NULL, WNOHANG) != 0 || now_ms() - t0 > 10000)
            die(what);
        nap_ms(5);
    }
    redisFree(k);
}

/* 1 if the reply to cmd on port holds needle (a string reply), else 0. */
static int says(int port, const char *cmd, const char *needle)
{
    redisContext *k = conn(port);
    if (k == NULL)
        return 0;
    redisReply *r = redisCommand(k, cmd);
    int ok = r != NULL && r->type == REDIS_REPLY_STRING && strstr(r->str, needle) != NULL;
    freeReplyObject(r);
    redisFree(k);
    return ok;
}

/* The number of elements of an array reply to cmd on port, -1 if none. */
static long count_of(int port, const char *cmd)
{
    redisContext *k = conn(port);
    if (k == NULL)
        return -1;
    redisReply *r = redisCommand(k, cmd);
    long n = r != NULL && r->type == REDIS_REPLY_ARRAY ? (long)r->elements : -1;
    freeReplyObject(r);
    redisFree(k);
    return n;
}

/* The master's port as sentinel i names it, -1 if it does not answer. */
static int named_port(int i)
{
    redisContext *k = conn(fx.sent_port[i]);
    if (k == NULL)
        return -1;
    redisReply *r = redisCommand(k, "SENTINEL get-master-addr-by-name mymaster");
    int p = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                    r->element[1]->type == REDIS_REPLY_STRING
                ? atoi(r->element[1]->str) : -1;
    freeReplyObject(r);
    redisFree(k);
    return p;
}

static void fixture_up(void)
{
    memset(&fx, 0, sizeof fx);
    snprintf(fx.dir, sizeof fx.dir, "/tmp/srl-sentinel-XXXXXX");
    if (mkdtemp(fx.dir) == NULL)
        die("mkdtemp");
    fx.master_port = free_port();
    fx.replica_port = free_port();
    char mp[16], rp[16];
    snprintf(mp, sizeof mp, "%d", fx.master_port);
    snprintf(rp, sizeof rp, "%d", fx.replica_port);
    const char *m[] = {"redis-server", "--port", mp, "--bind", "127.0.0.1", "--save", "",
                       "--appendonly", "no", "--dir", fx.dir, NULL};
    fx.master = spawn(m);
    wait_up(fx.master_port, fx.master, "the master did not start");
    const char *r[] = {"redis-server", "--port", rp, "--bind", "127.0.0.1", "--save", "",
                       "--appendonly", "no", "--dir", fx.dir, "--replicaof", "127.0.0.1", mp,
                       NULL};
    fx.replica = spawn(r);
    wait_up(fx.replica_port, fx.replica, "the replica did not start");
    for (int i = 0; i < NSENT; i++) {
        fx.sent_port[i] = free_port();
        char conf[128];
        snprintf(conf, sizeof conf, "%s/sentinel-%d.conf", fx.dir, i);
        FILE *f = fopen(conf, "w");
        if (f == NULL)
            die("sentinel config");
        fprintf(f, "port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\n"
                   "sentinel monitor mymaster 127.0.0.1 %d 2\n"
                   "sentinel down-after-milliseconds mymaster 500\n"
                   "sentinel failover-timeout mymaster 2000\n"
                   "sentinel parallel-syncs mymaster 1\n",
                fx.sent_port[i], fx.dir, fx.master_port);
        fclose(f);
        const char *s[] = {"redis-sentinel", conf, NULL};
        fx.sent[i] = spawn(s);
        wait_up(fx.sent_port[i], fx.sent[i], "a sentinel did not start");
    }
    /* Ready: the replica in sync, and every sentinel knows the replica
     * and the two other sentinels (their hello messages, every 2 s). */
    uint64_t t0 = now_ms();
    for (;;) {
        int ok = says(fx.replica_port, "INFO replication", "master_link_status:up");
        for (int i = 0; i < NSENT && ok; i++)
            ok = count_of(fx.sent_port[i], "SENTINEL replicas mymaster") == 1 &&
                 count_of(fx.sent_port[i], "SENTINEL sentinels mymaster") == NSENT - 1;
        if (ok)
            break;
        if (now_ms() - t0 > 30000)
            die("the sentinels did not all see the replica and each other within 30 s");
        nap_ms(50);
    }
}

static void sentinel_uri(char *u, size_t n, const char *prefix)
{
    snprintf(u, n, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/mymaster"
                   "?timeout_ms=500&prefix=%s",
             fx.sent_port[0], fx.sent_port[1], fx.sent_port[2], prefix);
}

static srl_config cfg_of(const char *policy)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse(policy, &cfg.policy), 0);
    cfg.on_full = SRL_ON_FULL_DENY;
    return cfg;
}

/* What the workers share with the test. */
struct board {
    volatile uint32_t phase;           /* 0 load on "pre", 1 stop "pre", 2 decide "post" */
    volatile uint32_t pre_acked;       /* admissions on "pre" Redis acknowledged (atomic) */
    volatile uint32_t ready;           /* workers that opened their limiters (atomic) */
    struct {
        uint32_t post_admitted, post_denied, post_bad_flags, post_errors, post_timed_out;
        uint32_t pre_errors, open_failed;
    } w[WORKERS];
};

/* The "pre" store: 1000000 permits over 3650 days (one refills in ~5 min:
 * none during the test), so its remaining counts exactly what it took. */
#define PRE_POLICY "token_bucket:1000000/3650d"
#define PRE_PERMITS 1000000u

static void worker(struct board *b, int me, const char *pre_uri, const char *post_uri)
{
    srl_config pre = cfg_of(PRE_POLICY), post = cfg_of("gcra:100/3650d");
    srl_limiter *a = NULL, *z = NULL;
    if (srl_open_redis(pre_uri, &pre, &a) != 0 || srl_open_redis(post_uri, &post, &z) != 0)
        b->w[me].open_failed = 1;
    __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
    srl_decision d;
    while (a != NULL && __atomic_load_n(&b->phase, __ATOMIC_SEQ_CST) == 0) {
        if (srl_acquire(a, "pre", 3, 1, &d) == 0 && d.allowed) {
            __atomic_add_fetch(&b->pre_acked, 1, __ATOMIC_SEQ_CST);
        } else {
            b->w[me].pre_errors++;
            nap_ms(1);   /* the outage: leave the cores to the sentinels */
        }
    }
    while (z != NULL && __atomic_load_n(&b->phase, __ATOMIC_SEQ_CST) < 2)
        nap_ms(1);   /* the test's promotion check: asked of the sentinels */
    uint64_t t0 = now_ms();
    uint32_t answers = 0;
    while (z != NULL && answers < POST_ANSWERS) {
        if (now_ms() - t0 > 30000) {
            b->w[me].post_timed_out = 1;
            break;
        }
        if (srl_acquire(z, "post", 4, 1, &d) != 0) {
            b->w[me].post_errors++;   /* a reconnect backoff step: ask again */
            nap_ms(2);
            continue;
        }
        answers++;
        b->w[me].post_bad_flags += d.flags != 0;
        if (d.allowed)
            b->w[me].post_admitted++;
        else
            b->w[me].post_denied++;
    }
    srl_close(a);
    srl_close(z);
}

START_TEST(the_master_is_killed_the_replica_is_promoted_and_decisions_continue_exactly)
{
    char pre_uri[256], post_uri[256];
    sentinel_uri(pre_uri, sizeof pre_uri, "pre");
    sentinel_uri(post_uri, sizeof post_uri, "post");
    struct board *b = shared_zeroed(sizeof *b);
    pid_t kids[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        kids[i] = test_fork();
        if (kids[i] == 0) {
            worker(b, i, pre_uri, post_uri);
            _exit(0);
        }
    }
    /* The load runs: every worker open, and Redis has acknowledged 2000. */
    uint64_t t0 = now_ms();
    while (__atomic_load_n(&b->ready, __ATOMIC_SEQ_CST) < WORKERS ||
           __atomic_load_n(&b->pre_acked, __ATOMIC_SEQ_CST) < 2000) {
        ck_assert_msg(now_ms() - t0 < 30000, "the workers' load did not reach 2000 admissions "
                      "in 30 s (%u)", b->pre_acked);
        nap_ms(2);
    }
    stop(&fx.master);   /* SIGKILL under load */
    uint64_t killed = now_ms();
    for (;;) {
        int promoted = 1;
        for (int i = 0; i < NSENT; i++)
            promoted &= named_port(i) == fx.replica_port;
        if (promoted)
            break;
        ck_assert_msg(now_ms() - killed < 30000, "the sentinels did not promote the replica "
                      "(port %d) within 30 s of the kill: they name %d, %d, %d",
                      fx.replica_port, named_port(0), named_port(1), named_port(2));
        nap_ms(20);
    }
    printf("failover: the sentinels named the replica %llu ms after the kill\n",
           (unsigned long long)(now_ms() - killed));
    __atomic_store_n(&b->phase, 1, __ATOMIC_SEQ_CST);
    /* What the new master knows of "pre", against what was acknowledged. */
    srl_config pre = cfg_of(PRE_POLICY);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(pre_uri, &pre, &lim), 0);
    srl_decision d;
    int rc;
    t0 = now_ms();
    while ((rc = srl_peek(lim, "pre", 3, 1, &d)) == SRL_ESYS || rc == SRL_ETIMEDOUT) {
        ck_assert_msg(now_ms() - t0 < 10000, "no peek on the new master in 10 s: %s",
                      srl_strerror(rc));
        nap_ms(10);
    }
    ck_assert_msg(rc == 0 || rc == SRL_ENOENT, "peek on the new master: %s", srl_strerror(rc));
    uint32_t known = rc == SRL_ENOENT ? 0 : PRE_PERMITS - d.remaining;
    uint32_t acked = __atomic_load_n(&b->pre_acked, __ATOMIC_SEQ_CST);
    printf("failover lost %u of %u acknowledged admissions (the new master counts %u: the "
           "writes the old master had not yet replicated)\n",
           acked > known ? acked - known : 0, acked, known);
    srl_close(lim);
    __atomic_store_n(&b->phase, 2, __ATOMIC_SEQ_CST);

    for (int i = 0; i < WORKERS; i++)
        waitpid(kids[i], NULL, 0);
    uint32_t admitted = 0, denied = 0, bad = 0, errors = 0;
    for (int i = 0; i < WORKERS; i++) {
        ck_assert_msg(!b->w[i].open_failed, "worker %d could not open", i);
        ck_assert_msg(!b->w[i].post_timed_out, "worker %d: no %u answers in 30 s", i,
                      POST_ANSWERS);
        admitted += b->w[i].post_admitted;
        denied += b->w[i].post_denied;
        bad += b->w[i].post_bad_flags;
        errors += b->w[i].post_errors;
    }
    printf("after the failover: %u admitted, %u denied (limit %u), %u calls retried in the "
           "reconnect backoff\n", admitted, denied, POST_LIMIT, errors);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(admitted, POST_LIMIT);
    ck_assert_uint_eq(denied, WORKERS * POST_ANSWERS - POST_LIMIT);
}
END_TEST

/* A "sentinel" that is a plain redis-server (the replica) answers the
 * SENTINEL command with an error: srl asks the next one; alone, it is
 * named in srl_last_error with its answer, and the store decides by
 * on_full (SRL_ESYS). */
START_TEST(a_server_that_is_not_a_sentinel_is_named_and_the_next_one_asked)
{
    char u[300];
    snprintf(u, sizeof u, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d/mymaster"
                          "?timeout_ms=500&prefix=notsent", fx.replica_port, fx.sent_port[1]);
    srl_config cfg = cfg_of("gcra:10/1h");
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_int_eq(d.allowed, 1);
    srl_close(lim);
    snprintf(u, sizeof u, "redis-sentinel://127.0.0.1:%d/mymaster?timeout_ms=500&prefix=ns",
             fx.replica_port);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), 0);   /* opens: no server reached */
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ESYS);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_int_eq(d.allowed, 0);
    char why[256], want[256];
    srl_last_error(why, sizeof why);
    snprintf(want, sizeof want, "sentinels of 'mymaster': 127.0.0.1:%d answered 'ERR unknown "
             "command 'SENTINEL'", fx.replica_port);
    ck_assert_msg(strncmp(why, want, strlen(want)) == 0, "srl_last_error: '%s'", why);
    srl_close(lim);
}
END_TEST

/* A sentinel of the test's own, on a loopback port: it answers each
 * get-master-addr-by-name with the next port of ports[] (the last one
 * again when they are used up) and writes how many it answered to
 * answered_fd at exit (SIGTERM).  Its pid; *port its port. */
static int fake_answered;
static void fake_done(int sig)
{
    (void)sig;
    _exit(fake_answered);
}

static pid_t fake_sentinel(const int *ports, int n, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    *port = ntohs(a.sin_port);
    pid_t pid = test_fork();
    if (pid == 0) {
        signal(SIGTERM, fake_done);
        alarm(60);   /* gone even if the test fails before its SIGTERM */
        for (;;) {
            int c = accept(fd, NULL, NULL);
            if (c < 0)
                continue;
            char req[512] = "";
            size_t got = 0;
            while (got < sizeof req - 1 && strstr(req, "mymaster\r\n") == NULL) {
                ssize_t k = read(c, req + got, sizeof req - 1 - got);
                if (k <= 0)
                    break;
                got += (size_t)k;
                req[got] = '\0';
            }
            char p[8], rep[64];
            snprintf(p, sizeof p, "%d", ports[fake_answered < n ? fake_answered : n - 1]);
            int len = snprintf(rep, sizeof rep, "*2\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n",
                               strlen(p), p);
            fake_answered++;
            (void)!write(c, rep, (size_t)len);
            close(c);
        }
    }
    close(fd);
    return pid;
}

/* A sentinel that names the replica first (as one may for a moment around
 * a failover): the store's first command there gets -READONLY, and it asks
 * again and goes to the master, within the same call: the open succeeds
 * and decisions are the master's. */
START_TEST(a_readonly_reply_makes_the_store_ask_the_sentinels_again)
{
    int ports[] = {fx.replica_port, fx.master_port}, sport;
    pid_t fake = fake_sentinel(ports, 2, &sport);
    char u[200];
    snprintf(u, sizeof u, "redis-sentinel://127.0.0.1:%d/mymaster?timeout_ms=1000&prefix=ro",
             sport);
    srl_config cfg = cfg_of("gcra:10/1h");
    srl_limiter *lim = NULL;
    int rc = srl_open_redis(u, &cfg, &lim);
    char why[256] = "";
    srl_last_error(why, sizeof why);
    ck_assert_msg(rc == 0, "open: %s (%s)", srl_strerror(rc), why);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 9);
    srl_close(lim);
    kill(fake, SIGTERM);
    int st;
    ck_assert_int_eq(waitpid(fake, &st, 0), fake);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "the sentinel answered %d times, "
                  "not twice (the replica, then the master)", WEXITSTATUS(st));
    /* The master holds the state: the replica got it by replication only. */
    ck_assert_int_eq(count_of(fx.master_port, "KEYS ro:k:*"), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redis_sentinel");
    TCase *tc = tcase_create("sentinel");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, fixture_up, fixture_down);
    tcase_add_test(tc, a_server_that_is_not_a_sentinel_is_named_and_the_next_one_asked);
    tcase_add_test(tc, a_readonly_reply_makes_the_store_ask_the_sentinels_again);
    tcase_add_test(tc, the_master_is_killed_the_replica_is_promoted_and_decisions_continue_exactly);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
