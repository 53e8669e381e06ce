/*
 * check_redis.c - the Redis store (srl_open_redis) against a real
 * redis-server that each test starts itself (unix socket in a mkdtemp
 * directory, no persistence) and stops by pid.
 *
 *   - exact decisions: a GCRA trace with the ticker's time passed to the
 *     script (test hook srl__redis_fixed_time) equals the pure core's
 *     srl_state_acquire/peek, decision by decision; keys carry a PTTL;
 *   - policy stored per prefix (SRL_EMISMATCH), ENOTSUP cases, ENOENT;
 *   - 8 forked processes on one key, started together, each acquiring until
 *     denied: exactly `permits` admitted in total (the script is atomic);
 *   - SIGSTOP: a call returns SRL_ETIMEDOUT with on_full's DEGRADED answer;
 *     SIGCONT: it recovers;  SIGKILL + restart on the same socket: ESYS
 *     DEGRADED, then the store reconnects and works again.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "srl.h"
#include "redis_cluster.h"
#include "redis_testutil.h"
#include "testutil.h"

int srl__redis_fixed_time(srl_limiter *lim, int on);
int srl__redis_broken_no_pid_check(srl_limiter *lim, int on);

static char dir[64];
static char sock[96];
static char uri[160];
static const char *srv_extra[5];   /* more redis-server arguments, NULL-ended */

static pid_t server_start(void)
{
    return redis_server_start(dir, sock, srv_extra);
}

static void server_stop(pid_t pid)
{
    redis_server_stop(pid);
}

static pid_t setup_server(void)
{
    snprintf(dir, sizeof dir, "/tmp/srl-redis-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    snprintf(uri, sizeof uri, "unix://%s", sock);
    return server_start();
}

static void teardown_server(pid_t pid)
{
    server_stop(pid);
    unlink(sock);
    rmdir(dir);
}

static srl_config gcra_cfg(uint32_t permits, uint64_t window)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_GCRA, .permits = permits, .window_ns = window};
    return cfg;
}

/* The cluster of the trace's cluster case (its unchecked fixture). */
static struct redis_cluster cluster;

static void cluster_up(void)
{
    redis_cluster_start(&cluster);
}

static void cluster_down(void)
{
    redis_cluster_stop(&cluster);
}

/* PTTL of key on the server, or (on a cluster) on the master of its slot. */
static long long pttl_on(const char *key, int on_cluster)
{
    redisContext *c;
    if (on_cluster) {
        int o = redis_cluster_owner(&cluster, srl__keyslot(key, strlen(key)));
        ck_assert_int_ge(o, 0);
        c = redisConnect("127.0.0.1", cluster.port[o]);
    } else {
        c = redisConnectUnix(sock);
    }
    ck_assert(c != NULL && c->err == 0);
    redisReply *r = redisCommand(c, "PTTL %s", key);
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

static void same(const srl_decision *a, const srl_decision *b, int step)
{
    ck_assert_msg(a->allowed == b->allowed && a->remaining == b->remaining &&
                      a->retry_after_ns == b->retry_after_ns &&
                      a->reset_after_ns == b->reset_after_ns && a->limit == b->limit &&
                      a->flags == b->flags,
                  "step %d: redis %d/%u/%llu/%llu, core %d/%u/%llu/%llu", step, a->allowed,
                  a->remaining, (unsigned long long)a->retry_after_ns,
                  (unsigned long long)a->reset_after_ns, b->allowed, b->remaining,
                  (unsigned long long)b->retry_after_ns, (unsigned long long)b->reset_after_ns);
}

/* A differential trace's policy and start: permits per window, costs
 * 1..cost_max, the ticker's first time (an epoch that far back), and
 * whether the trace must see many denials, refunds and a state at rest
 * (the default trace; a large policy's may not). */
struct trace_form {
    uint32_t permits, cost_max, burst;   /* burst: the token bucket's and GCRA's only */
    uint64_t window, start;
    int strict;
};

/* The differential trace of one algorithm and policy on the store at u
 * (keys under prefix; on_cluster: u names a cluster). */
static void trace_form_run(const char *u, const char *prefix, int on_cluster, srl_algorithm algo,
                           const struct trace_form *f)
{
    fake_clock clk = {.now = f->start};
    srl_config cfg = gcra_cfg(f->permits, f->window);
    cfg.policy.algorithm = algo;
    if (algo == SRL_TOKEN_BUCKET || algo == SRL_GCRA)
        cfg.policy.burst = f->burst;
    const uint64_t W = f->window;
    /* Costs and refunds within the capacity; a state rests at most twice the
     * longest refill (a burst above the permits refills over more than W). */
    const uint32_t cap = cfg.policy.burst ? cfg.policy.burst : cfg.policy.permits;
    const uint32_t cost_max = f->cost_max < cap ? f->cost_max : cap;
    uint64_t longest = (uint64_t)(((unsigned __int128)cap * W + f->permits - 1) / f->permits);
    longest = longest > W ? longest : W;
    cfg.ticker = fake_ticker(&clk);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), 0);
    ck_assert_int_eq(srl__redis_fixed_time(lim, 1), 0);

    srl_decision d, e;
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), SRL_ENOENT);
    ck_assert_int_eq(srl_reset_key(lim, "k", 1), SRL_ENOENT);

    static uint64_t state[SRL_SLIDING_LOG_PERMITS_MAX + 16], fresh[SRL_SLIDING_LOG_PERMITS_MAX + 16];
    ck_assert_uint_le(srl_state_size(&cfg.policy), sizeof state);
    ck_assert_int_eq(srl_state_init(&cfg.policy, state, clk.now), 0);
    uint64_t seed = 12345;
    unsigned allowed = 0, denied = 0, refunds = 0, missing = 0;
    for (int i = 0; i < 300; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        /* Mostly bursts, sometimes long gaps; odd ns values. */
        uint64_t step = (seed >> 60) % 4 == 0 ? (seed >> 8) % (2 * W / 3) : (seed >> 8) % (W / 15);
        /* Often land exactly where the last denial said to retry: the
         * boundaries (an entry exactly one window old, a refill that just
         * completes) are where an off-by-one shows. */
        if (i > 0 && !d.allowed && (seed >> 40) % 2 == 0)
            step = d.retry_after_ns;
        clk.now += step;
        /* (The default trace draws from the top bits, as it always did.) */
        uint32_t cost = 1 + (uint32_t)((f->cost_max <= 16384 ? seed >> 50 : seed >> 24) % cost_max);
        if (i > 0) {
            ck_assert_int_eq(srl_state_peek(&cfg.policy, state, clk.now, cost, &e), 0);
            int prc = srl_peek(lim, "k", 1, cost, &d);
            if (prc == SRL_ENOENT) {
                /* Deleted at rest (after a refund): the core's state must
                 * then decide as a fresh one. */
                ck_assert_int_eq(srl_state_init(&cfg.policy, fresh, clk.now), 0);
                ck_assert_int_eq(srl_state_peek(&cfg.policy, fresh, clk.now, cost, &d), 0);
                missing++;
            } else {
                ck_assert_int_eq(prc, 0);
            }
            same(&d, &e, i);
        }
        ck_assert_int_eq(srl_acquire(lim, "k", 1, cost, &d), 0);
        ck_assert_int_eq(srl_state_acquire(&cfg.policy, state, clk.now, cost, &e), 0);
        same(&d, &e, i);
        allowed += d.allowed;
        denied += !d.allowed;
        /* Sometimes the request turns out free: refund 1..permits. */
        if (d.allowed && (seed >> 30) % 5 == 0) {
            uint32_t back = 1 + (uint32_t)((seed >> 20) % cap);
            ck_assert_int_eq(srl_refund(lim, "k", 1, back), 0);
            ck_assert_int_eq(srl_state_refund(&cfg.policy, state, clk.now, back), 0);
            refunds++;
        }
    }
    ck_assert_uint_gt(allowed, 20);
    ck_assert_uint_gt(denied, f->strict ? 20 : f->burst ? 0 : 5);
    ck_assert_uint_gt(refunds, f->strict ? 10 : 0);
    if (f->strict)
        ck_assert_uint_gt(missing, 0);   /* some refund brought the state to rest */

    /* The key's entry expires, at the latest when its state is at rest. */
    char kname[64];
    snprintf(kname, sizeof kname, "%s:k:k", prefix);
    long long t = pttl_on(kname, on_cluster);
    int gone = !f->strict && t == -2;   /* a large refund brought the last state to rest */
    if (gone)
        t = 1;
    ck_assert_int_gt(t, 0);
    ck_assert_int_le(t, (long long)(2 * longest / MS) + 1);

    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.allowed, allowed);
    ck_assert_uint_eq(st.denied, denied);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_int_eq(info.kind, SRL_STORE_REDIS);
    ck_assert_str_eq(info.name, prefix);
    /* Redis drops each state when it comes to rest: nothing to evict. */
    ck_assert_int_eq(srl_evict_idle(lim), 0);

    ck_assert_int_eq(srl_reset_key(lim, "k", 1), gone ? SRL_ENOENT : 0);
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), SRL_ENOENT);
    srl_close(lim);
}

/* The default trace: 7 per minute (T = ceil(60 s / 7), not a whole
 * number of ms), costs 1..3, from time 0. */
static void trace_run(const char *u, const char *prefix, int on_cluster, srl_algorithm algo)
{
    const struct trace_form f = {.permits = 7, .cost_max = 3, .window = 60 * SEC, .strict = 1};
    trace_form_run(u, prefix, on_cluster, algo, &f);
}

/* Policies whose products pass 2^53 (permits * window up to 2^32 * 2^58),
 * from epochs 60 days and 10 years back (times past 2^53 ns): the scripts'
 * arithmetic must stay exact.  Costs up to half the permits, so denials
 * come within a few requests.  The sliding log's permits are capped
 * (its list is one Redis entry per permit). */
#define DAY (86400 * SEC)
static const struct trace_form large_forms[] = {
    {.permits = 100000, .cost_max = 50000, .window = 60 * SEC, .start = 60 * DAY},
    {.permits = 100000, .cost_max = 50000, .window = 60 * SEC, .start = 3660 * DAY},
    {.permits = SRL_PERMITS_MAX, .cost_max = SRL_PERMITS_MAX / 2, .window = SRL_WINDOW_MAX_NS,
     .start = 3660 * DAY},
    {.permits = 4096, .cost_max = 2048, .window = SRL_WINDOW_MAX_NS, .start = 60 * DAY},
    {.permits = 1000003, .cost_max = 500000, .window = 7 * DAY + 13, .start = 3660 * DAY + 7},
    /* burst= (a capacity apart from the rate): above and below the permits. */
    {.permits = 10, .cost_max = 20, .burst = 25, .window = 60 * SEC + 7, .start = 60 * DAY},
    {.permits = 100, .cost_max = 1000, .burst = 2000, .window = 60 * SEC, .start = 3660 * DAY},
    {.permits = 1000, .cost_max = 200000, .burst = 400000, .window = 3600 * SEC, .start = 3660 * DAY},
};
#define N_LARGE (sizeof large_forms / sizeof large_forms[0])

/* _i: algorithm * N_LARGE + form. */
START_TEST(trace_matches_core_large)
{
    pid_t srv = setup_server();
    srl_algorithm algo = (srl_algorithm)(SRL_TOKEN_BUCKET + _i / (int)N_LARGE);
    struct trace_form f = large_forms[_i % (int)N_LARGE];
    if (algo == SRL_SLIDING_LOG && f.permits > 300) {
        f.permits = 300 + (uint32_t)_i;   /* a list of a few hundred: seconds, not minutes */
        f.cost_max = f.permits / 2;
    }
    char u[200];
    snprintf(u, sizeof u, "%s?prefix=large%d", uri, _i);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "large%d", _i);
    trace_form_run(u, prefix, 0, algo, &f);
    teardown_server(srv);
}
END_TEST

/* _i: the algorithm (loop test over all four). */
START_TEST(trace_matches_core)
{
    pid_t srv = setup_server();
    trace_run(uri, "srl", 0, (srl_algorithm)_i);
    teardown_server(srv);
}
END_TEST

/* SRL_CONFIG_DRY_RUN on Redis: the script decides and counts as without
 * it (P:stats counts the denial), the facade turns the answer, and the
 * would-be denials are counted in P:stats too (srl_stats.would_deny): every
 * handle on the prefix reads the fleet's. */
START_TEST(dry_run_allows_and_counts_the_fleets_would_be_denials)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(3, 3600 * SEC), dry_cfg = cfg;
    dry_cfg.flags = SRL_CONFIG_DRY_RUN;
    srl_limiter *enf = NULL, *dry = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &enf), 0);
    ck_assert_int_eq(srl_open_redis(uri, &dry_cfg, &dry), 0);   /* the flag is not compared */
    srl_decision d;
    for (unsigned i = 0; i < 5; i++) {
        ck_assert_int_eq(srl_acquire(dry, "k", 1, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.flags, i < 3 ? 0 : SRL_DECISION_WOULD_DENY);
        if (i >= 3)
            ck_assert_uint_gt(d.retry_after_ns, 0);   /* the denial's wait, kept */
    }
    ck_assert_int_eq(srl_acquire(enf, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(dry, &st), 0);
    ck_assert_uint_eq(st.allowed, 3);
    ck_assert_uint_eq(st.denied, 3);
    ck_assert_uint_eq(st.would_deny, 2);
    ck_assert_int_eq(srl_stats_get(enf, &st), 0);
    ck_assert_uint_eq(st.would_deny, 2);                     /* the fleet's */
    srl_close(dry);
    srl_close(enf);
    teardown_server(srv);
}
END_TEST

/* The same traces on a three-master cluster (a prefix per algorithm). */
START_TEST(trace_matches_core_on_a_cluster)
{
    char u[300], prefix[16];
    snprintf(prefix, sizeof prefix, "trace%d", _i);
    snprintf(u, sizeof u, "%s?prefix=%s", cluster.uri, prefix);
    trace_run(u, prefix, 1, (srl_algorithm)_i);
}
END_TEST

START_TEST(policy_per_prefix)
{
    pid_t srv = setup_server();
    srl_config a = gcra_cfg(10, 60 * SEC), b = gcra_cfg(11, 60 * SEC);
    srl_limiter *l1 = NULL, *l2 = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &a, &l1), 0);
    ck_assert_int_eq(srl_open_redis(uri, &b, &l2), SRL_EMISMATCH);
    ck_assert_ptr_null(l2);
    ck_assert_int_eq(srl_open_redis(uri, &a, &l2), 0);   /* same policy: fine */
    srl_close(l2);
    char other[200];
    snprintf(other, sizeof other, "%s?prefix=other", uri);
    ck_assert_int_eq(srl_open_redis(other, &b, &l2), 0);
    srl_close(l2);

    srl_config tb = a;
    tb.policy.algorithm = SRL_TOKEN_BUCKET;
    /* Another algorithm under the same prefix is another policy. */
    ck_assert_int_eq(srl_open_redis(uri, &tb, &l2), SRL_EMISMATCH);
    /* Any permits and window: the scripts' arithmetic is exact (the
     * decisions of such policies: trace_matches_core_large). */
    srl_config tbbig = gcra_cfg(100000, 86400 * SEC);
    tbbig.policy.algorithm = SRL_TOKEN_BUCKET;
    snprintf(other, sizeof other, "%s?prefix=tbbig", uri);
    ck_assert_int_eq(srl_open_redis(other, &tbbig, &l2), 0);
    srl_close(l2);
    srl_config big = gcra_cfg(1, 30ull * 86400 * SEC);   /* tau: 30 days, past 2^53 ns products */
    snprintf(other, sizeof other, "%s?prefix=big", uri);
    ck_assert_int_eq(srl_open_redis(other, &big, &l2), 0);
    srl_close(l2);
    srl_config conc = gcra_cfg(4, 0);
    conc.policy.algorithm = SRL_CONCURRENCY;
    snprintf(other, sizeof other, "%s?prefix=conc", uri);
    ck_assert_int_eq(srl_open_redis(other, &conc, &l2), 0);   /* concurrency.lua */
    srl_close(l2);
    /* In a compound: no script holds both yet (check_redis_conc). */
    srl_config cc = gcra_cfg(10, 60 * SEC);
    cc.limits.count = 2;
    cc.limits.limit[0] = cc.policy;
    cc.limits.limit[1] = conc.policy;
    snprintf(other, sizeof other, "%s?prefix=cc", uri);
    ck_assert_int_eq(srl_open_redis(other, &cc, &l2), SRL_ENOTSUP);
    srl_config fw = gcra_cfg(10, 60 * SEC);   /* no fixed_window script yet */
    fw.policy.algorithm = SRL_FIXED_WINDOW;
    snprintf(other, sizeof other, "%s?prefix=fw", uri);
    ck_assert_int_eq(srl_open_redis(other, &fw, &l2), SRL_ENOTSUP);
    ck_assert_int_eq(srl_open_redis("http://x", &a, &l2), SRL_EINVAL);
    ck_assert_int_eq(srl_open_redis("redis://", &a, &l2), SRL_EINVAL);
    ck_assert_int_eq(srl_open_redis("redis://h:99999", &a, &l2), SRL_EINVAL);
    ck_assert_int_eq(srl_open_redis(NULL, &a, &l2), SRL_EINVAL);
    srl_close(l1);
    teardown_server(srv);
}
END_TEST

/* Each of 8 children counts its admissions until its first denial
 * (redis_fork_flood); returns the total, or UINT32_MAX if any child saw an
 * error. */
static unsigned forked_total(srl_limiter *lim)
{
    srl_decision d;
    /* The parent's connection is in use before the fork: each child must
     * make its own (pid check), or replies would interleave. */
    ck_assert_int_eq(srl_peek(lim, "hot", 3, 1, &d), SRL_ENOENT);
    return redis_fork_flood(lim, "hot");
}

START_TEST(forked_exact_count)
{
    pid_t srv = setup_server();
    /* T = 1728 s: nothing refills while the test runs. */
    srl_config cfg = gcra_cfg(1000, 20ull * 86400 * SEC);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    srl_decision d;
    unsigned total = forked_total(lim);
    ck_assert_uint_eq(total, 1000);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.allowed, 1000);
    ck_assert_uint_eq(st.denied, 8);
    ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

/* _i: the algorithm.  A policy past every product the old double-only
 * scripts could hold (2000 per SRL_WINDOW_MAX_NS: window * permits > 2^62),
 * on the server's own TIME: 8 processes on one key admit exactly the
 * permits, as the host store does (nothing refills within the test: one
 * permit per 1.8 days). */
START_TEST(forked_exact_count_large)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(2000, SRL_WINDOW_MAX_NS);
    cfg.policy.algorithm = (srl_algorithm)_i;
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    ck_assert_uint_eq(forked_total(lim), 2000);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.allowed, 2000);
    ck_assert_uint_eq(st.denied, 8);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_uint_gt(d.retry_after_ns, 0);
    ck_assert_uint_le(d.reset_after_ns, 2 * SRL_WINDOW_MAX_NS);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

/* The broken variant (children keep the parent's socket) is caught: replies
 * go to the wrong process, so counts or the protocol break. */
START_TEST(forked_broken_variant_caught)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(1000, 20ull * 86400 * SEC);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    ck_assert_int_eq(srl__redis_broken_no_pid_check(lim, 1), 0);
    unsigned total = forked_total(lim);
    ck_assert_uint_ne(total, 1000);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

struct worker {
    srl_limiter *lim;
    pthread_barrier_t *start;
    unsigned n;
    int rc;
};

static void *worker_run(void *p)
{
    struct worker *w = p;
    srl_decision d;
    pthread_barrier_wait(w->start);
    while ((w->rc = srl_acquire(w->lim, "t", 1, 1, &d)) == 0 && d.allowed)
        w->n++;
    return NULL;
}

/* Threads share the one connection (under the store's mutex): exact too. */
START_TEST(threads_exact_count)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(500, 20ull * 86400 * SEC);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    enum { NT = 4 };
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NT);
    struct worker w[NT];
    pthread_t t[NT];
    for (int i = 0; i < NT; i++) {
        w[i] = (struct worker){.lim = lim, .start = &start};
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
    }
    unsigned total = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(w[i].rc, 0);
        total += w[i].n;
    }
    ck_assert_uint_eq(total, 500);
    pthread_barrier_destroy(&start);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

START_TEST(stopped_server_degrades)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(100, 60 * SEC);
    cfg.lock_timeout_ms = 200;
    cfg.on_full = SRL_ON_FULL_DENY;
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 99);

    ck_assert_int_eq(kill(srv, SIGSTOP), 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ETIMEDOUT);
    ck_assert_int_eq(d.allowed, 0);            /* on_full: deny */
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), SRL_ETIMEDOUT);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    srl_stats st;
    ck_assert_int_eq(kill(srv, SIGCONT), 0);

    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.flags, 0);
    /* The timed-out acquire may or may not have reached the server. */
    ck_assert(d.remaining == 98 || d.remaining == 97);
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.timeouts, 2);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

START_TEST(killed_server_reconnects)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(100, 60 * SEC);
    cfg.lock_timeout_ms = 500;
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 99);

    server_stop(srv);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ESYS);
    ck_assert_int_eq(d.allowed, 1);            /* on_full: allow (default) */
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ESYS);  /* still down */
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);

    srv = server_start();   /* same socket, empty: config and script are gone */
    /* The store may still be in its reconnect backoff (10 ms doubling):
     * calls fail fast with the last connect's code until it retries. */
    int rc;
    while ((rc = srl_acquire(lim, "k", 1, 1, &d)) == SRL_ESYS) {
        ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
        usleep(2000);
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_uint_eq(d.remaining, 99);        /* a fresh state on a fresh server */
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 98);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

/* A loopback TCP port nothing listens on now (bound, read, closed). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* The server of an open-while-down case: not started; _i 0 a unix
 * socket, 1 loopback TCP (the server, once started, listens on both). */
static char tcp_port[16];
static void down_setup(int tcp)
{
    snprintf(dir, sizeof dir, "/tmp/srl-redis-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    srv_extra[0] = NULL;
    if (tcp) {
        snprintf(tcp_port, sizeof tcp_port, "%d", free_port());
        srv_extra[0] = "--port";
        srv_extra[1] = tcp_port;
        srv_extra[2] = NULL;
        snprintf(uri, sizeof uri, "redis://127.0.0.1:%s", tcp_port);
    } else {
        snprintf(uri, sizeof uri, "unix://%s", sock);
    }
}

/* The first call that reaches the server after an open without one: until
 * then every call is the connect's failure, decided by on_full. */
static int acquire_until_up(srl_limiter *lim, srl_decision *d, int deny)
{
    int rc;
    while ((rc = srl_acquire(lim, "k", 1, 1, d)) == SRL_ESYS) {
        ck_assert_int_eq(d->allowed, !deny);
        ck_assert_uint_eq(d->flags, SRL_DECISION_DEGRADED);
        usleep(2000);   /* the reconnect backoff's next step (10 ms doubling) */
    }
    return rc;
}

/* Issue 42 item 4: a worker opened during an outage gets a limiter, which
 * decides by on_full while Redis is down and exactly from Redis (policy
 * created then) once it answers. */
START_TEST(open_while_down_then_limits_when_up)
{
    down_setup(_i);
    srl_config cfg = gcra_cfg(5, 60 * SEC);
    cfg.lock_timeout_ms = 300;
    cfg.on_full = SRL_ON_FULL_DENY;
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    srl_decision d;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ESYS);
        ck_assert_int_eq(d.allowed, 0);   /* on_full: deny */
        ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    }
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), SRL_ESYS);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);

    pid_t srv = server_start();
    ck_assert_int_eq(acquire_until_up(lim, &d, 1), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_uint_eq(d.remaining, 4);
    for (uint64_t left = 3; left != UINT64_MAX; left--) {
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.remaining, left);
    }
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);        /* exact: the sixth of 5/min */
    ck_assert_uint_eq(d.flags, 0);

    /* The policy check ran then: P:cfg holds this limiter's policy, and a
     * second handle (opened normally) shares the key's state. */
    srl_limiter *two = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &two), 0);
    ck_assert_int_eq(srl_acquire(two, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    srl_config other = gcra_cfg(7, 60 * SEC);
    srl_limiter *bad = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &other, &bad), SRL_EMISMATCH);
    srl_close(two);
    srl_close(lim);
    teardown_server(srv);
    srv_extra[0] = NULL;
}
END_TEST

/* A policy mismatch found at the first connection, not at open: every
 * decision is then SRL_EMISMATCH, by on_full, counted in stats.full, and
 * the stored policy is left as it is. */
START_TEST(open_while_down_finds_a_mismatch_late)
{
    down_setup(_i);
    srl_config cfg = gcra_cfg(5, 60 * SEC);
    cfg.lock_timeout_ms = 300;
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ESYS);

    pid_t srv = server_start();
    srl_config other = gcra_cfg(7, 60 * SEC);
    srl_limiter *owner = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &other, &owner), 0);   /* P:cfg: 7/min */

    ck_assert_int_eq(acquire_until_up(lim, &d, 0), SRL_EMISMATCH);
    ck_assert_int_eq(d.allowed, 1);   /* on_full: allow (default) */
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_EMISMATCH);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.full, 2);
    ck_assert_uint_eq(st.allowed, 0);   /* nothing reached the script */

    ck_assert_int_eq(srl_acquire(owner, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 6);   /* the owner's policy, untouched */
    srl_close(owner);
    srl_close(lim);
    teardown_server(srv);
    srv_extra[0] = NULL;
}
END_TEST

/* A listener on a loopback port that answers every connection as an HTTP
 * server would, then closes it: a port that is not Redis. */
static pid_t http_listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 8), 0);   /* connects queue from here on */
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    pid_t pid = test_fork();
    if (pid == 0) {
        static const char http[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        for (;;) {
            int c = accept(fd, NULL, NULL);
            if (c < 0)
                _exit(0);
            (void)!write(c, http, sizeof http - 1);
            close(c);
        }
    }
    close(fd);
    return pid;
}

static void detail_is(const char *want)
{
    char got[256];
    ck_assert_uint_eq(srl_last_error(got, sizeof got), strlen(want));
    ck_assert_str_eq(got, want);
}

/* Issue 42 item 5: srl_last_error names the server and what happened. */
START_TEST(errors_name_the_server_and_the_cause)
{
    srl_config cfg = gcra_cfg(5, 60 * SEC);
    cfg.lock_timeout_ms = 500;
    srl_limiter *lim = NULL;
    char u[200], want[256];

    int port = free_port();
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", port);
    ck_assert_int_eq(srl_open_redis(u, NULL, &lim), SRL_ESYS);   /* adopt: no deferral */
    snprintf(want, sizeof want, "connect 127.0.0.1:%d: connection refused", port);
    detail_is(want);

    pid_t http = http_listener(&port);
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", port);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), SRL_ESYS);
    snprintf(want, sizeof want, "reply from 127.0.0.1:%d is not RESP: is it Redis?", port);
    detail_is(want);
    kill(http, SIGKILL);
    waitpid(http, NULL, 0);

    srv_extra[0] = "--requirepass";
    srv_extra[1] = "right";
    srv_extra[2] = NULL;
    pid_t srv = setup_server();
    snprintf(u, sizeof u, "unix://:wrong@%s", sock);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), SRL_EACCES);
    snprintf(want, sizeof want,
             "AUTH on %s: WRONGPASS invalid username-password pair or user is disabled.", sock);
    detail_is(want);
    snprintf(u, sizeof u, "unix://%s", sock);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), SRL_EACCES);
    snprintf(want, sizeof want, "%s: NOAUTH Authentication required.", sock);
    detail_is(want);
    srv_extra[0] = NULL;
    teardown_server(srv);
}
END_TEST

/* A server with --requirepass (and an ACL user): the uri's credentials are
 * sent on every connect; wrong or missing ones are SRL_EACCES at open. */
START_TEST(auth_and_db)
{
    srv_extra[0] = "--requirepass";
    srv_extra[1] = "s3cr@t";
    pid_t srv = setup_server();
    srv_extra[0] = NULL;
    srl_config cfg = gcra_cfg(3, 60 * SEC);
    srl_limiter *lim = NULL;
    char u[300];

    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), SRL_EACCES);   /* NOAUTH */
    ck_assert_ptr_null(lim);
    snprintf(u, sizeof u, "unix://:wrong@%s", sock);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), SRL_EACCES);     /* WRONGPASS */
    ck_assert_ptr_null(lim);
    snprintf(u, sizeof u, "unix://nobody:s3cr%%40t@%s", sock);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), SRL_EACCES);     /* no such user */

    /* Right password, db 5: the keys live in db 5 only. */
    snprintf(u, sizeof u, "unix://:s3cr%%40t@%s?db=5", sock);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 2);
    redisContext *c = redisConnectUnix(sock);
    ck_assert(c != NULL && c->err == 0);
    redisReply *r = redisCommand(c, "AUTH s3cr@t");
    ck_assert_int_eq(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = redisCommand(c, "EXISTS srl:k:k");
    ck_assert_int_eq(r->integer, 0);      /* not in db 0 */
    freeReplyObject(r);
    r = redisCommand(c, "SELECT 5");
    freeReplyObject(r);
    r = redisCommand(c, "EXISTS srl:k:k");
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    /* An ACL user with a password of its own, by userinfo and by option. */
    r = redisCommand(c, "ACL SETUSER app on >apppw ~* +@all");
    ck_assert_int_eq(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(c);
    srl_limiter *l2 = NULL;
    snprintf(u, sizeof u, "unix://app:apppw@%s?db=5", sock);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &l2), 0);
    srl_close(l2);
    snprintf(u, sizeof u, "unix://%s?db=5&user=app&password=apppw", sock);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &l2), 0);
    ck_assert_int_eq(srl_acquire(l2, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 1);     /* the same state as lim's */
    srl_close(l2);
    snprintf(u, sizeof u, "unix://app:wrong@%s?db=5", sock);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &l2), SRL_EACCES);
    /* A db the server does not have. */
    snprintf(u, sizeof u, "unix://:s3cr%%40t@%s?db=99", sock);
    ck_assert_int_eq(srl_open_redis(u, &cfg, &l2), SRL_EINVAL);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

/* A fake server: answers open's two commands as Redis would, then sends
 * half of the decision's reply and closes the socket.  The store must
 * return SRL_ESYS with a degraded decision, not hang or crash. */
START_TEST(closed_mid_reply)
{
    snprintf(dir, sizeof dir, "/tmp/srl-redis-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/fake.sock", dir);
    snprintf(uri, sizeof uri, "unix://%s", sock);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(lfd, 1), 0);
    pid_t pid = test_fork();
    if (pid == 0) {
        int fd = accept(lfd, NULL, NULL);
        static const char *const replies[] = {
            "*4\r\n:1\r\n$1\r\nx\r\n$1\r\n0\r\n$1\r\n0\r\n",            /* EVAL open_lua */
            "$40\r\n0123456789012345678901234567890123456789\r\n",    /* SCRIPT LOAD */
            "*4\r\n:1\r\n:9",                                          /* EVALSHA, cut */
        };
        char buf[65536];
        for (int i = 0; i < 3; i++) {
            /* One command per read: the client waits for each reply. */
            if (read(fd, buf, sizeof buf) <= 0)
                _exit(1);
            if (write(fd, replies[i], strlen(replies[i])) < 0)
                _exit(1);
        }
        close(fd);
        _exit(0);
    }
    close(lfd);
    srl_config cfg = gcra_cfg(10, 60 * SEC);
    cfg.lock_timeout_ms = 5000;   /* a hang would be 5 s, then ETIMEDOUT: not this */
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ESYS);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_int_eq(d.allowed, 1);   /* on_full: allow */
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* Nobody listens now: still an error, never a hang. */
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ESYS);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    srl_close(lim);
    unlink(sock);
    rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------ walks */

static long long redis_int(redisContext *c, const char *fmt, const char *arg)
{
    redisReply *r = redisCommand(c, fmt, arg);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* The server's count of SCAN commands (INFO commandstats). */
static long long scan_calls(void)
{
    return redis_command_calls(sock, "scan");
}

struct seen {
    unsigned char *hits;      /* per key index */
    unsigned n;               /* callbacks */
    unsigned stop_at;         /* return 1 on this callback (0: never) */
    uint32_t want_remaining;
    int bad;                  /* an entry not as expected */
};

/* Keys are "key-%05u"; anything else is a bad entry. */
static int count_visit(const srl_entry *e, void *ctx)
{
    struct seen *s = ctx;
    char k[16] = {0};
    unsigned i;
    s->n++;
    if (e->key_len != 9 || e->display_len != 9 || e->at_rest != 0 || e->allowed != 0 ||
        e->denied != 0 || e->last_ns != 0 || e->now.allowed != 1 ||
        e->now.remaining != s->want_remaining || e->now.flags != 0)
        s->bad++;
    memcpy(k, e->display, e->display_len < 15 ? e->display_len : 15);
    if (sscanf(k, "key-%05u", &i) != 1 || i >= 100000)
        s->bad++;
    else
        s->hits[i]++;
    return s->stop_at != 0 && s->n == s->stop_at;
}

/* One walk with fresh counts; srl_foreach's result. */
static int64_t walk_count(srl_limiter *lim, struct seen *s, unsigned nkeys, unsigned stop_at)
{
    memset(s->hits, 0, nkeys);
    s->n = 0;
    s->stop_at = stop_at;
    return srl_foreach(lim, count_visit, s);
}

static srl_limiter *walk_open(const char *u, srl_algorithm algo, fake_clock *clk)
{
    srl_config cfg = gcra_cfg(100, 3600 * SEC);
    cfg.policy.algorithm = algo;
    cfg.ticker = fake_ticker(clk);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), 0);
    ck_assert_int_eq(srl__redis_fixed_time(lim, 1), 0);
    return lim;
}

/* n keys key-00000.., each acquired twice. */
static void walk_fill(srl_limiter *lim, unsigned n)
{
    srl_decision d;
    for (unsigned i = 0; i < n; i++) {
        char k[16];
        snprintf(k, sizeof k, "key-%05u", i);
        for (int j = 0; j < 2; j++) {
            ck_assert_int_eq(srl_acquire(lim, k, 9, 1, &d), 0);
            ck_assert_int_eq(d.allowed, 1);
        }
    }
}

/* _i: the algorithm.  2500 keys, each taken twice, span many SCAN batches
 * of 100; the walk visits each exactly once with the peek of cost 1
 * (100 - 2 taken - 1 peeked = 97 remaining, for every algorithm at a fixed
 * time), and skips what is not a state: keys of other prefixes (one whose
 * name is a glob matching this one's if MATCH were not escaped), and
 * values under P:k: the script cannot read. */
START_TEST(walk_visits_every_key_once_over_many_batches)
{
    pid_t srv = setup_server();
    fake_clock clk = {.now = 1000 * SEC};
    enum { N = 2500 };
    char u[300];
    snprintf(u, sizeof u, "%s?prefix=a%%2A", uri);   /* prefix "a*" */
    srl_limiter *lim = walk_open(u, (srl_algorithm)_i, &clk);
    walk_fill(lim, N);
    snprintf(u, sizeof u, "%s?prefix=ab", uri);      /* "ab:k:..." matches a*:k:* unescaped */
    srl_limiter *other = walk_open(u, (srl_algorithm)_i, &clk);
    walk_fill(other, 7);
    redisContext *c = redisConnectUnix(sock);
    ck_assert(c != NULL && c->err == 0);
    freeReplyObject(redisCommand(c, "SET a*:k:bad notanumber"));
    freeReplyObject(redisCommand(c, "HSET a*:k:hash f v"));
    redisFree(c);

    long long scans = scan_calls();
    struct seen s = {.hits = calloc(N, 1), .want_remaining = 97};
    ck_assert_int_eq(srl_foreach(lim, count_visit, &s), N);
    long long batches = scan_calls() - scans;
    ck_assert_uint_eq(s.n, N);
    ck_assert_int_eq(s.bad, 0);
    for (unsigned i = 0; i < N; i++)
        ck_assert_msg(s.hits[i] == 1, "key-%05u visited %u times", i, s.hits[i]);
    /* SCAN's COUNT 100 over a table of >= 2500 keys: many batches. */
    ck_assert_int_ge(batches, 10);
    /* The walk only peeked: nothing was counted, no state changed. */
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.allowed, 2 * N);
    ck_assert_uint_eq(st.denied, 0);
    ck_assert_int_eq(walk_count(lim, &s, N, 0), N);
    ck_assert_int_eq(s.bad, 0);

    /* The other prefix sees its own 7. */
    ck_assert_int_eq(walk_count(other, &s, N, 0), 7);
    ck_assert_int_eq(s.bad, 0);
    free(s.hits);
    ck_assert_int_eq(srl_evict_idle(lim), 0);
    srl_close(other);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

/* A server, a limiter at a fixed time with nkeys keys, and a visit log. */
struct walk_fx {
    pid_t srv;
    fake_clock clk;
    srl_limiter *lim;
    struct seen s;
};

static void walk_setup(struct walk_fx *f, const char *opts, srl_algorithm algo, unsigned nkeys)
{
    f->srv = setup_server();
    f->clk.now = 5 * SEC;
    char u[300];
    snprintf(u, sizeof u, "%s%s", uri, opts);
    f->lim = walk_open(u, algo, &f->clk);
    f->s = (struct seen){.hits = calloc(nkeys, 1), .want_remaining = 97};
    ck_assert_int_eq(srl_foreach(f->lim, count_visit, &f->s), 0);   /* nothing yet */
    walk_fill(f->lim, nkeys);
}

static void walk_teardown(struct walk_fx *f)
{
    free(f->s.hits);
    srl_close(f->lim);
    teardown_server(f->srv);
}

/* fn's nonzero return stops the walk: within the first batch, and deep in
 * a later one; the count returned includes the stopping entry. */
START_TEST(walk_stops_when_fn_says_so)
{
    struct walk_fx f;
    walk_setup(&f, "", SRL_GCRA, 1000);
    unsigned stops[] = {1, 7, 450};
    for (size_t t = 0; t < sizeof stops / sizeof stops[0]; t++) {
        ck_assert_int_eq(walk_count(f.lim, &f.s, 1000, stops[t]), stops[t]);
        ck_assert_uint_eq(f.s.n, stops[t]);
        ck_assert_int_eq(f.s.bad, 0);
    }
    /* A key reset is no longer visited; the others are. */
    ck_assert_int_eq(srl_reset_key(f.lim, "key-00003", 9), 0);
    ck_assert_int_eq(walk_count(f.lim, &f.s, 1000, 0), 999);
    ck_assert_uint_eq(f.s.hits[3], 0);
    ck_assert_uint_eq(f.s.hits[4], 1);
    walk_teardown(&f);
}
END_TEST

/* A stopped server: the walk returns SRL_ETIMEDOUT within the timeout (no
 * hang), counted in stats; resumed, the walk is whole again. */
START_TEST(walk_on_a_stopped_server_times_out)
{
    struct walk_fx f;
    walk_setup(&f, "?timeout_ms=200", SRL_TOKEN_BUCKET, 300);
    ck_assert_int_eq(kill(f.srv, SIGSTOP), 0);
    ck_assert_int_eq(walk_count(f.lim, &f.s, 300, 0), SRL_ETIMEDOUT);
    ck_assert_uint_eq(f.s.n, 0);
    srl_stats st;
    ck_assert_int_eq(kill(f.srv, SIGCONT), 0);
    ck_assert_int_eq(srl_stats_get(f.lim, &st), 0);
    ck_assert_uint_eq(st.timeouts, 1);
    ck_assert_int_eq(walk_count(f.lim, &f.s, 300, 0), 300);
    ck_assert_int_eq(f.s.bad, 0);
    walk_teardown(&f);
}
END_TEST

/* cfg NULL adopts the prefix's stored policy (rlctl's way in); a prefix
 * with none is SRL_ENOENT and is not created; a stored text that is no
 * policy is SRL_ECORRUPT, one this store cannot run SRL_ENOTSUP. */
/* srl_reserve on the server's TIME: max_wait 0 is srl_acquire; a wait
 * beyond max_wait is refused, taking nothing; within it, taken (the exact
 * values against the core: check_trace_reserve). */
START_TEST(reserve_is_acquire_at_zero_and_waits_beyond)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(2, 60 * SEC);   /* T = 30 s */
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    srl_decision d;
    ck_assert_int_eq(srl_reserve(lim, "k", 1, 1, 0, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 1);
    ck_assert_uint_eq(d.wait_ns, 0);
    ck_assert_int_eq(srl_reserve(lim, "k", 1, 1, SEC, &d), 0);
    ck_assert(d.allowed && d.wait_ns == 0 && d.remaining == 0);   /* free now */
    ck_assert_int_eq(srl_reserve(lim, "k", 1, 1, SEC, &d), 0);
    ck_assert_int_eq(d.allowed, 0);   /* 30 s to wait, less the time since */
    ck_assert(d.retry_after_ns > 28 * SEC && d.retry_after_ns <= 29 * SEC);
    ck_assert_int_eq(srl_reserve(lim, "k", 1, 1, 40 * SEC, &d), 0);
    ck_assert(d.allowed && d.remaining == 0);
    ck_assert(d.wait_ns > 28 * SEC && d.wait_ns <= 30 * SEC);
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);   /* taken: the next waits a T more */
    ck_assert_uint_gt(d.retry_after_ns, 58 * SEC);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

START_TEST(open_without_config_adopts_the_stored_policy)
{
    pid_t srv = setup_server();
    srl_limiter *lim = NULL, *ad = NULL;
    ck_assert_int_eq(srl_open_redis(uri, NULL, &ad), SRL_ENOENT);
    ck_assert_ptr_null(ad);
    redisContext *c = redisConnectUnix(sock);
    ck_assert(c != NULL && c->err == 0);
    ck_assert_int_eq(redis_int(c, "EXISTS %s", "srl:cfg"), 0);
    srl_config cfg = gcra_cfg(7, 60 * SEC);
    cfg.policy.algorithm = SRL_SLIDING_LOG;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    ck_assert_int_eq(srl_open_redis(uri, NULL, &ad), 0);
    srl_info a, b;
    ck_assert_int_eq(srl_info_get(lim, &a), 0);
    ck_assert_int_eq(srl_info_get(ad, &b), 0);
    ck_assert_int_eq(b.policy.algorithm, SRL_SLIDING_LOG);
    ck_assert_uint_eq(b.policy.permits, 7);
    ck_assert_uint_eq(b.policy.window_ns, 60 * SEC);
    /* Both report when P:cfg was made, by the server's clock. */
    ck_assert_uint_eq(a.created_unix_ns, b.created_unix_ns);
    ck_assert_uint_gt(b.created_unix_ns, 1600000000ull * SEC);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(srl_peek(ad, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 5);
    srl_close(ad);
    freeReplyObject(redisCommand(c, "HSET srl:cfg policy nonsense"));
    ck_assert_int_eq(srl_open_redis(uri, NULL, &ad), SRL_ECORRUPT);
    /* concurrency alone runs (concurrency.lua): adopted. */
    freeReplyObject(redisCommand(c, "HSET srl:cfg policy concurrency:3"));
    ck_assert_int_eq(srl_open_redis(uri, NULL, &ad), 0);
    ck_assert_int_eq(srl_info_get(ad, &b), 0);
    ck_assert_int_eq(b.policy.algorithm, SRL_CONCURRENCY);
    ck_assert_uint_eq(b.policy.permits, 3);
    srl_close(ad);
    /* Policies this store cannot run (yet) are SRL_ENOTSUP, not damage. */
    freeReplyObject(redisCommand(c, "HSET srl:cfg policy %s",
                                 "token_bucket:10/1s + concurrency:3"));
    ck_assert_int_eq(srl_open_redis(uri, NULL, &ad), SRL_ENOTSUP);
    freeReplyObject(redisCommand(c, "HSET srl:cfg policy %s", "fixed_window:10/1s"));
    ck_assert_int_eq(srl_open_redis(uri, NULL, &ad), SRL_ENOTSUP);
    ck_assert_ptr_null(ad);
    /* A ban period runs: adopted, a denial bans for it. */
    freeReplyObject(redisCommand(c, "HSET srl:cfg policy %s", "token_bucket:1/1s,penalty=1m"));
    ck_assert_int_eq(srl_open_redis(uri, NULL, &ad), 0);
    ck_assert_int_eq(srl_acquire(ad, "p", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_acquire(ad, "p", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 60 * SEC);
    srl_close(ad);
    /* burst= runs: adopted with its capacity. */
    freeReplyObject(redisCommand(c, "HSET srl:cfg policy %s", "token_bucket:10/1s,burst=20"));
    ck_assert_int_eq(srl_open_redis(uri, NULL, &ad), 0);
    ck_assert_int_eq(srl_info_get(ad, &b), 0);
    ck_assert_uint_eq(b.policy.burst, 20);
    ck_assert_int_eq(srl_acquire(ad, "b", 1, 20, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.limit, 20);
    srl_close(ad);
    /* A compound runs: adopted with every limit; the second binds. */
    freeReplyObject(redisCommand(c, "HSET srl:cfg policy %s",
                                 "token_bucket:10/1s + token_bucket:3/1d"));
    ck_assert_int_eq(srl_open_redis(uri, NULL, &ad), 0);
    ck_assert_int_eq(srl_info_get(ad, &b), 0);
    ck_assert_uint_eq(b.limits.count, 2);
    ck_assert_uint_eq(b.limits.limit[1].permits, 3);
    ck_assert_int_eq(srl_acquire(ad, "c", 1, 3, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.binding, 1);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_uint_eq(d.limit, 3);
    srl_close(ad);
    redisFree(c);
    srl_close(lim);
    teardown_server(srv);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redis");
    TCase *tc = tcase_create("redis");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, trace_matches_core, SRL_TOKEN_BUCKET, SRL_GCRA + 1);
    tcase_add_loop_test(tc, trace_matches_core_large, 0, (int)(4 * N_LARGE));
    tcase_add_test(tc, policy_per_prefix);
    tcase_add_test(tc, dry_run_allows_and_counts_the_fleets_would_be_denials);
    tcase_add_test(tc, forked_exact_count);
    tcase_add_loop_test(tc, forked_exact_count_large, SRL_TOKEN_BUCKET, SRL_GCRA + 1);
    tcase_add_test(tc, forked_broken_variant_caught);
    tcase_add_test(tc, threads_exact_count);
    tcase_add_test(tc, stopped_server_degrades);
    tcase_add_test(tc, killed_server_reconnects);
    tcase_add_test(tc, auth_and_db);
    tcase_add_test(tc, errors_name_the_server_and_the_cause);
    tcase_add_loop_test(tc, open_while_down_then_limits_when_up, 0, 2);
    tcase_add_loop_test(tc, open_while_down_finds_a_mismatch_late, 0, 2);
    tcase_add_test(tc, closed_mid_reply);
    tcase_add_loop_test(tc, walk_visits_every_key_once_over_many_batches, SRL_TOKEN_BUCKET,
                        SRL_GCRA + 1);
    tcase_add_test(tc, walk_stops_when_fn_says_so);
    tcase_add_test(tc, walk_on_a_stopped_server_times_out);
    tcase_add_test(tc, open_without_config_adopts_the_stored_policy);
    tcase_add_test(tc, reserve_is_acquire_at_zero_and_waits_beyond);
    suite_add_tcase(s, tc);
    TCase *cl = tcase_create("cluster");
    tcase_set_timeout(cl, 60);
    tcase_add_unchecked_fixture(cl, cluster_up, cluster_down);
    tcase_add_loop_test(cl, trace_matches_core_on_a_cluster, SRL_TOKEN_BUCKET, SRL_GCRA + 1);
    suite_add_tcase(s, cl);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
