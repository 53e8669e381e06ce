/*
 * check_redis_conc.c - concurrency:N on the Redis store (concurrency.lua,
 * src/redis/redis_lease.c) against a real redis-server each test starts
 * itself (unix socket in a mkdtemp directory, no persistence), stopped by
 * pid.
 *
 *   - 8 forked processes enter one key of concurrency:3 together and hold
 *     (pipes: all have answered before any leaves): exactly 3 admitted;
 *     then every unit comes back by srl_leave, once;
 *   - a lease is left once: a second leave, a lease with another unit's
 *     generation, and a stale lease whose generation another process now
 *     holds (the key deleted in between) are SRL_ENOENT and leave the
 *     other units alone;
 *   - a holder SIGKILLed gives its unit back at the next srl_enter from
 *     this host (the script names this host's holders, the caller judges
 *     them by pid and start time);
 *   - a holder of another host (written raw, as a host that stopped
 *     renewing would have left it) counts until its expiry, then is
 *     dropped; a live holder past a short max_hold is dropped too (bounded
 *     poll, no timed assertion);
 *   - a Redis Cluster of three masters: keys over several slots, each
 *     admitting exactly N, the stats summed over the slot hashes;
 *   - hostile: concurrency.lua's reply parsed as untrusted
 *     (srl__conc_reply, hand-built replies; and a fake Redis,
 *     tests/fake_redis.py, answering srl_enter with replies no script
 *     gives), and a key holding a state of another form answers
 *     SRL_ECORRUPT with on_full's DEGRADED decision.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "redis_lease.h"
#include "redis_testutil.h"
#include "srl.h"
#include "testutil.h"

static char dir[64];
static char sock[96];
static char uri[160];

static pid_t setup_server(void)
{
    snprintf(dir, sizeof dir, "/tmp/srl-rconc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    snprintf(uri, sizeof uri, "unix://%s", sock);
    return redis_server_start(dir, sock, NULL);
}

static void teardown_server(pid_t pid)
{
    redis_server_stop(pid);
    unlink(sock);
    rmdir(dir);
}

static srl_limiter *open_conc(uint32_t n, uint64_t max_hold)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_CONCURRENCY, .permits = n, .window_ns = max_hold};
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    return lim;
}

/* A raw command on the test's own connection; the reply (caller frees). */
static redisReply *raw(const char *fmt, ...)
{
    redisContext *c = redisConnectUnix(sock);
    ck_assert(c != NULL && c->err == 0);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_ptr_nonnull(r);
    redisFree(c);
    return r;
}

static long long hlen(const char *key)
{
    redisReply *r = raw("HLEN srl:k:%s", key);
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* Units in flight on key, as srl_peek says (N - remaining of an admission
 * it would make, or N when full). */
static uint32_t in_flight(srl_limiter *lim, const char *key, uint32_t n)
{
    srl_decision d;
    int rc = srl_peek(lim, key, strlen(key), 1, &d);
    if (rc == SRL_ENOENT)
        return 0;
    ck_assert_int_eq(rc, 0);
    return d.allowed ? n - d.remaining - 1 : n;
}

START_TEST(eight_processes_three_units)
{
    enum { KIDS = 8, N = 3 };
    pid_t srv = setup_server();
    srl_limiter *lim = open_conc(N, 0);
    int go[2], res[2], hold[2], left[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(res), 0);
    ck_assert_int_eq(pipe(hold), 0);
    ck_assert_int_eq(pipe(left), 0);
    pid_t kid[KIDS];
    for (int i = 0; i < KIDS; i++) {
        kid[i] = test_fork();
        if (kid[i] == 0) {
            close(go[1]);
            close(hold[1]);
            char c;
            (void)!read(go[0], &c, 1);   /* EOF: everyone starts together */
            srl_lease l;
            srl_decision d;
            int rc = srl_enter(lim, "hot", 3, &l, &d);
            int out[3] = {rc, rc == 0 && d.allowed, (int)d.remaining};
            (void)!write(res[1], out, sizeof out);
            (void)!read(hold[0], &c, 1);   /* EOF: the parent has every answer */
            int lrc = out[1] ? srl_leave(lim, &l) : 99;
            int again = out[1] ? srl_leave(lim, &l) : 99;
            int two[2] = {lrc, again};
            (void)!write(left[1], two, sizeof two);
            _exit(0);
        }
    }
    close(go[0]);
    close(hold[0]);
    close(go[1]);
    int admitted = 0, denied = 0;
    for (int i = 0; i < KIDS; i++) {
        int out[3];
        ck_assert_int_eq(read(res[0], out, sizeof out), (ssize_t)sizeof out);
        ck_assert_int_eq(out[0], 0);
        admitted += out[1];
        denied += !out[1];
        if (!out[1])
            ck_assert_int_eq(out[2], 0);
    }
    /* All 8 hold or were refused, none has left: exactly N in flight. */
    ck_assert_int_eq(admitted, N);
    ck_assert_int_eq(denied, KIDS - N);
    ck_assert_uint_eq(in_flight(lim, "hot", N), N);
    ck_assert_int_eq(hlen("hot"), N + 1);   /* N holders and the generation */
    close(hold[1]);
    for (int i = 0; i < KIDS; i++) {
        int two[2];
        ck_assert_int_eq(read(left[0], two, sizeof two), (ssize_t)sizeof two);
        if (two[0] != 99) {
            ck_assert_int_eq(two[0], 0);
            ck_assert_int_eq(two[1], SRL_ENOENT);
        }
    }
    for (int i = 0; i < KIDS; i++)
        ck_assert_int_eq(waitpid(kid[i], NULL, 0), kid[i]);
    ck_assert_uint_eq(in_flight(lim, "hot", N), 0);
    ck_assert_int_eq(hlen("hot"), 1);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.allowed, N);
    ck_assert_uint_eq(st.denied, KIDS - N);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

/* srl_foreach's callback: counts the keys, keeps the last one's view. */
struct seen {
    int n;
    char key[16];
    srl_decision now;
};

static int see(const srl_entry *e, void *ctx)
{
    struct seen *s = ctx;
    s->n++;
    snprintf(s->key, sizeof s->key, "%.*s", (int)e->key_len, (const char *)e->display);
    s->now = e->now;
    return 0;
}

START_TEST(leave_gives_back_exactly_once)
{
    pid_t srv = setup_server();
    srl_limiter *lim = open_conc(3, 0);
    srl_lease a, b, forged;
    srl_decision d;
    ck_assert_int_eq(srl_enter(lim, "k", 1, &a, &d), 0);
    ck_assert(d.allowed);
    ck_assert_uint_eq(d.remaining, 2);
    ck_assert_uint_eq(d.limit, 3);
    ck_assert_uint_eq(d.retry_after_ns, 0);
    ck_assert(d.reset_after_ns > 0 && d.reset_after_ns <= SRL_REDIS_LEASE_DEFAULT_NS);
    ck_assert_int_eq(srl_enter(lim, "k", 1, &b, &d), 0);
    ck_assert(d.allowed);
    ck_assert_uint_eq(d.remaining, 1);
    ck_assert_uint_ne(a.gen, b.gen);
    /* A peek of cost c: are c units free (as on the host store)? */
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), 0);
    ck_assert(d.allowed);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_int_eq(srl_peek(lim, "k", 1, 2, &d), 0);
    ck_assert(!d.allowed);
    ck_assert_uint_eq(d.remaining, 1);
    /* The walk sees the key as a peek does: one more unit free. */
    struct seen sn = {0};
    ck_assert_int_eq(srl_foreach(lim, see, &sn), 1);
    ck_assert_int_eq(sn.n, 1);
    ck_assert_str_eq(sn.key, "k");
    ck_assert(sn.now.allowed);
    ck_assert_uint_eq(sn.now.remaining, 0);
    /* a's slot with b's generation: not a lease this handle gave. */
    forged = a;
    forged.gen = b.gen;
    ck_assert_int_eq(srl_leave(lim, &forged), SRL_ENOENT);
    ck_assert_uint_eq(in_flight(lim, "k", 3), 2);
    srl_lease copy = a;
    ck_assert_int_eq(srl_leave(lim, &a), 0);
    ck_assert_int_eq(srl_leave(lim, &a), SRL_ENOENT);
    ck_assert_int_eq(srl_leave(lim, &copy), SRL_ENOENT);   /* a copy: its slot is free */
    ck_assert_uint_eq(in_flight(lim, "k", 3), 1);
    ck_assert_int_eq(srl_leave(lim, &b), 0);
    ck_assert_uint_eq(in_flight(lim, "k", 3), 0);

    /* A stale lease whose generation another process holds now: the key
     * deleted (reset; as if it expired) restarts the generations, so a
     * child's new unit has c's generation.  c's leave must not free it. */
    srl_lease c;
    ck_assert_int_eq(srl_enter(lim, "s", 1, &c, &d), 0);
    ck_assert(d.allowed);
    ck_assert_int_eq(srl_reset_key(lim, "s", 1), 0);
    int p[2], q[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(pipe(q), 0);
    pid_t kid = test_fork();
    if (kid == 0) {
        close(q[1]);
        srl_lease l;
        srl_decision e;
        uint32_t g = srl_enter(lim, "s", 1, &l, &e) == 0 && e.allowed ? l.gen : 0;
        (void)!write(p[1], &g, sizeof g);
        char ch;
        (void)!read(q[0], &ch, 1);
        _exit(0);
    }
    close(q[0]);
    uint32_t g;
    ck_assert_int_eq(read(p[0], &g, sizeof g), (ssize_t)sizeof g);
    ck_assert_uint_eq(g, c.gen);
    ck_assert_int_eq(srl_leave(lim, &c), SRL_ENOENT);   /* another holder's */
    ck_assert_uint_eq(in_flight(lim, "s", 3), 1);
    close(q[1]);
    ck_assert_int_eq(waitpid(kid, NULL, 0), kid);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

START_TEST(killed_holder_comes_back_at_next_enter)
{
    pid_t srv = setup_server();
    srl_limiter *lim = open_conc(1, 0);   /* default lease: 60 s, far past the test */
    int p[2], q[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(pipe(q), 0);
    pid_t kid = test_fork();
    if (kid == 0) {
        srl_lease l;
        srl_decision d;
        int ok = srl_enter(lim, "one", 3, &l, &d) == 0 && d.allowed;
        (void)!write(p[1], &ok, sizeof ok);
        char c;
        (void)!read(q[0], &c, 1);   /* held until killed */
        _exit(0);
    }
    int ok;
    ck_assert_int_eq(read(p[0], &ok, sizeof ok), (ssize_t)sizeof ok);
    ck_assert_int_eq(ok, 1);
    srl_lease l;
    srl_decision d;
    ck_assert_int_eq(srl_enter(lim, "one", 3, &l, &d), 0);
    ck_assert(!d.allowed);   /* a live holder keeps its unit */
    ck_assert_uint_eq(l.gen, 0);
    ck_assert(d.retry_after_ns > 0 && d.retry_after_ns <= SRL_REDIS_LEASE_DEFAULT_NS);
    ck_assert_int_eq(kill(kid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(kid, NULL, 0), kid);
    ck_assert_int_eq(srl_enter(lim, "one", 3, &l, &d), 0);
    ck_assert_msg(d.allowed, "the dead holder's unit did not come back");
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_int_eq(hlen("one"), 2);   /* ours only */
    ck_assert_int_eq(srl_leave(lim, &l), 0);
    close(q[1]);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

START_TEST(foreign_host_unit_comes_back_after_its_lease)
{
    pid_t srv = setup_server();
    srl_limiter *lim = open_conc(1, 0);
    srl_lease l;
    srl_decision d;
    ck_assert_int_eq(srl_enter(lim, "f", 1, &l, &d), 0);   /* makes P:cfg, the key */
    ck_assert_int_eq(srl_leave(lim, &l), 0);
    /* Another host's holder, far from expiry, its pid dead here: counts,
     * a foreign pid is not judged on this host. */
    freeReplyObject(raw("HSET srl:k:f 77 %s", "otherhost 999999 5 999999999999999999999 1"));
    ck_assert_int_eq(srl_enter(lim, "f", 1, &l, &d), 0);
    ck_assert(!d.allowed);
    ck_assert_int_eq(hlen("f"), 2);
    /* The host stopped renewing: its unit's expiry is past. */
    freeReplyObject(raw("HSET srl:k:f 77 %s", "otherhost 999999 5 1 1"));
    ck_assert_int_eq(srl_enter(lim, "f", 1, &l, &d), 0);
    ck_assert_msg(d.allowed, "an expired foreign unit still counts");
    redisReply *r = raw("HEXISTS srl:k:f 77");
    ck_assert_int_eq(r->integer, 0);   /* dropped */
    freeReplyObject(r);
    ck_assert_int_eq(srl_leave(lim, &l), 0);
    srl_close(lim);

    /* A live holder past a short max_hold: dropped once it passes (a
     * bounded poll for the server's clock, no timed assertion). */
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_CONCURRENCY, .permits = 1,
                              .window_ns = 300 * 1000000ull};
    char u2[200];
    snprintf(u2, sizeof u2, "%s?prefix=short", uri);
    ck_assert_int_eq(srl_open_redis(u2, &cfg, &lim), 0);
    srl_lease held, other;
    ck_assert_int_eq(srl_enter(lim, "h", 1, &held, &d), 0);
    ck_assert(d.allowed);
    ck_assert(d.reset_after_ns > 0 && d.reset_after_ns <= 300 * 1000000ull);
    ck_assert_int_eq(srl_enter(lim, "h", 1, &other, &d), 0);
    ck_assert(!d.allowed);
    ck_assert(d.retry_after_ns > 0 && d.retry_after_ns <= 300 * 1000000ull);
    int got = 0;
    for (int i = 0; i < 200 && !got; i++) {   /* up to ~10 s */
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
        ck_assert_int_eq(srl_enter(lim, "h", 1, &other, &d), 0);
        got = d.allowed;
    }
    ck_assert_msg(got, "a unit past max_hold never came back");
    ck_assert_int_eq(srl_leave(lim, &held), SRL_ENOENT);   /* abandoned, and dropped */
    ck_assert_int_eq(srl_leave(lim, &other), 0);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

/* ------------------------------------------------ hostile replies */

static redisReply *r_int(long long v)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_INTEGER;
    r->integer = v;
    return r;
}

static redisReply *r_str(const char *s)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_STRING;
    r->str = strdup(s);
    r->len = strlen(s);
    return r;
}

/* An array reply of n elements from a format: 'i' integer, 's' string. */
static redisReply *arr(const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_ARRAY;
    r->elements = strlen(types);
    r->element = calloc(r->elements ? r->elements : 1, sizeof *r->element);
    for (size_t i = 0; i < r->elements; i++)
        r->element[i] = types[i] == 'i' ? r_int(va_arg(ap, long long)) : r_str(va_arg(ap, char *));
    va_end(ap);
    return r;
}

#define LEASE (60 * SEC)
static int parse(redisReply *r, int peek, srl_decision *d, uint32_t *gen, char *dead)
{
    dead[0] = '\0';
    int ok = srl__conc_reply(r, 3, LEASE, peek, d, gen, dead, 64);
    freeReplyObject(r);
    return ok;
}

START_TEST(hostile_replies_are_refused)
{
    srl_decision d;
    uint32_t g;
    char dead[64];
    /* The good forms. */
    ck_assert_int_eq(parse(arr("iissi", 1LL, 2LL, "0", "60000000000", 7LL), 0, &d, &g, dead), 1);
    ck_assert(d.allowed);
    ck_assert_uint_eq(d.remaining, 2);
    ck_assert_uint_eq(g, 7);
    ck_assert_int_eq(parse(arr("iissis", 0LL, 0LL, "5", "5", 0LL, "9 1 1"), 0, &d, &g, dead), 1);
    ck_assert(!d.allowed);
    ck_assert_uint_eq(d.retry_after_ns, 5);
    ck_assert_uint_eq(g, 0);
    /* pid 999999 1: no such process here, so judged dead. */
    ck_assert_int_eq(parse(arr("iissis", 0LL, 0LL, "5", "5", 0LL, "9 999999 1"), 0, &d, &g, dead),
                     1);
    ck_assert_str_eq(dead, "9");
    /* The hostile ones. */
    ck_assert_int_eq(parse(r_int(1), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iiss", 1LL, 2LL, "0", "1"), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 2LL, 2LL, "0", "1", 7LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", -1LL, 2LL, "0", "1", 7LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 1LL, 3LL, "0", "1", 7LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 1LL, -1LL, "0", "1", 7LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 1LL, 2LL, "1", "1", 7LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 1LL, 2LL, "0", "60000000001", 7LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 1LL, 2LL, "0", "1x", 7LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 1LL, 2LL, "0", "", 7LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 1LL, 2LL, "0", "99999999999999999999999", 7LL), 0, &d,
                               &g, dead), 0);
    ck_assert_int_eq(parse(arr("iisii", 1LL, 2LL, "0", 1LL, 7LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 1LL, 2LL, "0", "1", 0LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 1LL, 2LL, "0", "1", 4294967296LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 0LL, 0LL, "5", "5", 7LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 0LL, 1LL, "5", "5", 0LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 0LL, 0LL, "0", "5", 0LL), 0, &d, &g, dead), 0);
    ck_assert_int_eq(parse(arr("iissi", 1LL, 2LL, "0", "1", 7LL), 1, &d, &g, dead), 0);  /* peek */
    ck_assert_int_eq(parse(arr("iissis", 1LL, 2LL, "0", "1", 7LL, "9 1 1"), 0, &d, &g, dead), 0);
    const char *bad_holders[] = {"9 1", "9 1 1 1", "x 1 1", "0 1 1", "9 0 1", "9 1 1 ",
                                 " 9 1 1", "9  1 1", "4294967296 1 1", "9 2147483648 1", "",
                                 "09 1 1", "9 01 1", "9 1 01"};
    for (size_t i = 0; i < sizeof bad_holders / sizeof *bad_holders; i++)
        ck_assert_msg(parse(arr("iissis", 0LL, 0LL, "5", "5", 0LL, bad_holders[i]), 0, &d, &g,
                            dead) == 0, "holder '%s' taken", bad_holders[i]);
    /* More holders than N. */
    ck_assert_int_eq(parse(arr("iississss", 0LL, 0LL, "5", "5", 0LL, "1 1 1", "2 1 1", "3 1 1",
                               "4 1 1"), 0, &d, &g, dead), 0);
}
END_TEST

START_TEST(a_state_of_another_form_is_corrupt)
{
    pid_t srv = setup_server();
    srl_limiter *lim = open_conc(2, 0);
    srl_lease l;
    srl_decision d;
    ck_assert_int_eq(srl_enter(lim, "x", 1, &l, &d), 0);
    ck_assert_int_eq(srl_leave(lim, &l), 0);
    /* A holder of no known form, a field that is no generation, a string
     * where the hash was, a generation counter that is no number. */
    const char *bad[][3] = {{"HSET", "5", "garbage"}, {"HSET", "abc", "h 1 1 9 1"},
                            {"SET", "1", NULL}, {"HSET", "#", "x"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        freeReplyObject(raw("DEL srl:k:x"));
        if (bad[i][2] != NULL)
            freeReplyObject(raw("%s srl:k:x %s %s", bad[i][0], bad[i][1], bad[i][2]));
        else
            freeReplyObject(raw("%s srl:k:x %s", bad[i][0], bad[i][1]));
        memset(&d, 0, sizeof d);
        ck_assert_msg(srl_enter(lim, "x", 1, &l, &d) == SRL_ECORRUPT, "case %zu", i);
        ck_assert_uint_eq(l.gen, 0);
        ck_assert(d.allowed);   /* on_full's default: allow */
        ck_assert(d.flags & SRL_DECISION_DEGRADED);
    }
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

/* The hostile fake Redis (tests/fake_redis.py) answering srl_enter's
 * EVALSHA: every reply no script gives is refused (SRL_ECORRUPT, a reply
 * too slow SRL_ETIMEDOUT) with on_full's answer (deny here), flagged
 * DEGRADED, and no unit recorded; a valid one (concok) is taken. */
START_TEST(hostile_server_replies)
{
    static const struct {
        const char *mode;
        int rc;
    } cases[] = {{"normal", SRL_ECORRUPT},      {"allowed", SRL_ECORRUPT},
                 {"remaining", SRL_ECORRUPT},   {"retry", SRL_ECORRUPT},
                 {"wrongtype", SRL_ECORRUPT},   {"concnogen", SRL_ECORRUPT},
                 {"concholders", SRL_ECORRUPT}, {"slow", SRL_ETIMEDOUT},
                 {"concok", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct fake_redis f;
        fake_redis_start(&f, cases[i].mode, 0);
        char u[128];
        snprintf(u, sizeof u, "redis://127.0.0.1:%d?timeout_ms=300", f.port);
        srl_config cfg;
        srl_config_init(&cfg);
        cfg.policy = (srl_policy){.algorithm = SRL_CONCURRENCY, .permits = 1};
        cfg.on_full = SRL_ON_FULL_DENY;
        srl_limiter *lim = NULL;
        ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), 0);
        srl_lease l;
        srl_decision d;
        memset(&d, 0xa5, sizeof d);
        int rc = srl_enter(lim, "k", 1, &l, &d);
        ck_assert_msg(rc == cases[i].rc, "%s: %s, want %s", cases[i].mode, srl_err_name(rc),
                      srl_err_name(cases[i].rc));
        if (rc != 0) {
            ck_assert_uint_eq(l.gen, 0);
            ck_assert_int_eq(d.allowed, 0);
            ck_assert_uint_eq(d.flags & SRL_DECISION_DEGRADED, SRL_DECISION_DEGRADED);
        } else {
            ck_assert(d.allowed);
            ck_assert_uint_eq(l.gen, 7);
        }
        srl_close(lim);
        fake_redis_stop(&f);
    }
}
END_TEST

/* A Redis Cluster (three masters, an unchecked fixture so the servers are
 * stopped by pid whatever a test does): each key's units in its own slot,
 * the script's other keys the slot hash (its epoch and counters). */
static struct redis_cluster cluster;

static void cluster_up(void)
{
    redis_cluster_start(&cluster);
}

static void cluster_down(void)
{
    redis_cluster_stop(&cluster);
}

START_TEST(units_on_a_cluster)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_CONCURRENCY, .permits = 2};
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(cluster.uri, &cfg, &lim), 0);
    enum { KEYS = 12 };
    srl_lease l[KEYS][3];
    srl_decision d;
    for (int k = 0; k < KEYS; k++) {   /* keys over several slots and masters */
        char key[16];
        int n = snprintf(key, sizeof key, "user%d", k);
        for (int i = 0; i < 3; i++) {
            ck_assert_int_eq(srl_enter(lim, key, (size_t)n, &l[k][i], &d), 0);
            ck_assert_int_eq(d.allowed, i < 2);
        }
        ck_assert_int_eq(srl_leave(lim, &l[k][0]), 0);
        ck_assert_int_eq(srl_enter(lim, key, (size_t)n, &l[k][2], &d), 0);
        ck_assert(d.allowed);
    }
    for (int k = 0; k < KEYS; k++) {
        ck_assert_int_eq(srl_leave(lim, &l[k][1]), 0);
        ck_assert_int_eq(srl_leave(lim, &l[k][2]), 0);
        ck_assert_int_eq(srl_leave(lim, &l[k][2]), SRL_ENOENT);
    }
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);   /* summed over the slot hashes */
    ck_assert_uint_eq(st.allowed, 3 * KEYS);
    ck_assert_uint_eq(st.denied, KEYS);
    srl_close(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redis_conc");
    TCase *tc = tcase_create("redis_conc");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, eight_processes_three_units);
    tcase_add_test(tc, leave_gives_back_exactly_once);
    tcase_add_test(tc, killed_holder_comes_back_at_next_enter);
    tcase_add_test(tc, foreign_host_unit_comes_back_after_its_lease);
    tcase_add_test(tc, hostile_replies_are_refused);
    tcase_add_test(tc, a_state_of_another_form_is_corrupt);
    tcase_add_test(tc, hostile_server_replies);
    suite_add_tcase(s, tc);
    TCase *cl = tcase_create("cluster");
    tcase_set_timeout(cl, 60);
    tcase_add_unchecked_fixture(cl, cluster_up, cluster_down);
    tcase_add_test(cl, units_on_a_cluster);
    suite_add_tcase(s, cl);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
