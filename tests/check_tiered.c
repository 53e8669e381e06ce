/*
 * check_tiered.c - srl_open_tiered: the fleet's limit on a real
 * redis-server (started by each test on a unix socket in a mkdtemp
 * directory, stopped by pid), with the host segment answering the fleet's
 * denials locally.
 *
 *   - 8 "hosts" (processes, each with its own tiered limiter on its own
 *     segment) on one key of limit 1000, started together and run until
 *     each has answered 200 requests locally: exactly 1000 admitted fleet
 *     wide, one Redis denial per host, in every one of 5 trials; the same
 *     on a three-master Redis Cluster for a key on each master;
 *   - a flood (4 workers of one host, one key at 100x its limit): exactly
 *     the limit admitted, Redis's EVALSHA count (INFO commandstats) at most
 *     limit + workers (docs/design.md's bound), every other decision local;
 *   - cost: a ban learnt for cost c answers cost >= c, a smaller cost goes to
 *     Redis (a table of steps, each checked against the server's count);
 *   - the local retry_after is Redis's minus the host time elapsed, and the
 *     ban ends at T; srl_stats/srl_info of a tiered limiter; the host
 *     segment checks clean and an ended ban is evicted;
 *   - srl_reset_key, srl_refund and a reset on the host segment (rlctl's)
 *     clear the host's memory;
 *   - Redis stopped: the bans are still answered, other keys degrade;
 *   - a garbage ban in the segment is not answered; a segment of another
 *     policy is refused (SRL_EMISMATCH);
 *   - each test's broken variant (testhooks.h SRL__TIERED_TEST_*) fails it.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_cluster.h"   /* srl__keyslot: which master holds a key */
#include "redis_testutil.h"
#include "shm_testutil.h"
#include "shm.h"
#include "testhooks.h"
#include "testutil.h"

static char dir[64];
static char sock[96];
static char uri[200];

static pid_t setup_server(void)
{
    snprintf(dir, sizeof dir, "/tmp/srl-tiered-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    snprintf(uri, sizeof uri, "unix://%s?timeout_ms=200", sock);
    return redis_server_start(dir, sock, NULL);
}

/* The uri with another key prefix: a fresh fleet on the same server. */
static void use_prefix(const char *prefix)
{
    snprintf(uri, sizeof uri, "unix://%s?timeout_ms=200&prefix=%s", sock, prefix);
}

static void teardown_server(pid_t pid)
{
    redis_server_stop(pid);
    unlink(sock);
    rmdir(dir);
}

/* GCRA, T = window / permits: 20 days / 1000 refills nothing while a test runs. */
static srl_config gcra_cfg(uint32_t permits)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_GCRA, .permits = permits,
                              .window_ns = 20ull * 86400 * SEC};
    cfg.capacity = 1024;
    return cfg;
}

/* The server's count of EVALSHA commands: one per decision that reached Redis. */
static long long evalsha_calls(void)
{
    return redis_command_calls(sock, "evalsha");
}

static srl_limiter *open_tiered(const char *name, const char *u, const srl_config *cfg,
                                unsigned broken)
{
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_tiered(name, u, cfg, SRL_CREATE, &lim), 0);
    if (broken != 0)
        ck_assert_int_eq(srl__tiered_set_test_flags(lim, broken), 0);
    return lim;
}

/* ------------------------------------------------------ 8 hosts, one key */

struct host_result {
    unsigned admitted, local, redis_denied;
    int bad;
};

/* One trial: 8 processes, each its own limiter on its own segment ("host"),
 * start together and acquire "hot" until each answered 200 locally (the
 * fleet's limit is spent by then: nothing refills). */
static void eight_hosts_on(const char *u, const char *key, unsigned broken,
                           struct host_result *sum, unsigned *per_host_redis_denied_max)
{
    enum { N = 8, LOCAL_STOP = 200 };
    int go[2], res[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(res), 0);
    pid_t kids[N];
    for (int i = 0; i < N; i++) {
        kids[i] = test_fork();
        if (kids[i] == 0) {
            close(go[1]);
            struct host_result r = {0};
            srl_config cfg = gcra_cfg(1000);
            const char *name = unique_name("host");
            srl_limiter *lim = NULL;
            if (srl_open_tiered(name, u, &cfg, SRL_CREATE, &lim) != 0 ||
                (broken && srl__tiered_set_test_flags(lim, broken) != 0))
                r.bad = 1;
            char c;
            (void)!read(go[0], &c, 1);   /* EOF: everyone starts together */
            srl_decision d;
            while (!r.bad && r.local < LOCAL_STOP && r.redis_denied < 100000) {
                if (srl_acquire(lim, key, strlen(key), 1, &d) != 0) {
                    r.bad = 1;
                    break;
                }
                if (d.allowed)
                    r.admitted++;
                else if (d.flags & SRL_DECISION_LOCAL)
                    r.local++;
                else
                    r.redis_denied++;
            }
            srl_stats st;
            if (!r.bad && (srl_stats_get(lim, &st) != 0 || st.local_denied != r.local))
                r.bad = 1;
            srl_close(lim);
            srl_unlink(name);
            (void)!write(res[1], &r, sizeof r);
            _exit(0);
        }
    }
    close(go[0]);
    close(go[1]);
    *sum = (struct host_result){0};
    *per_host_redis_denied_max = 0;
    for (int i = 0; i < N; i++) {
        struct host_result r;
        ck_assert_int_eq(read(res[0], &r, sizeof r), (ssize_t)sizeof r);
        sum->admitted += r.admitted;
        sum->local += r.local;
        sum->redis_denied += r.redis_denied;
        sum->bad |= r.bad;
        if (r.redis_denied > *per_host_redis_denied_max)
            *per_host_redis_denied_max = r.redis_denied;
    }
    for (int i = 0; i < N; i++)
        waitpid(kids[i], NULL, 0);
    close(res[0]);
    close(res[1]);
}

static void eight_hosts(const char *u, unsigned broken, struct host_result *sum,
                        unsigned *per_host_redis_denied_max)
{
    eight_hosts_on(u, "hot", broken, sum, per_host_redis_denied_max);
}

START_TEST(eight_hosts_admit_exactly_the_fleet_limit_in_every_trial)
{
    pid_t srv = setup_server();
    for (int trial = 0; trial < 5; trial++) {
        char u[260];
        snprintf(u, sizeof u, "%s&prefix=t%d", uri, trial);
        struct host_result sum;
        unsigned maxd;
        eight_hosts(u, 0, &sum, &maxd);
        ck_assert_msg(!sum.bad, "trial %d: a host saw an error", trial);
        ck_assert_msg(sum.admitted == 1000, "trial %d: %u admitted fleet wide", trial,
                      sum.admitted);
        /* Each host asks Redis until its first denial, then answers itself. */
        ck_assert_uint_eq(sum.redis_denied, 8);
        ck_assert_uint_eq(maxd, 1);
        ck_assert_uint_eq(sum.local, 8 * 200);
    }
    teardown_server(srv);
}
END_TEST

/* The same 8 hosts on a three-master Redis Cluster, once for a key on each
 * master (found by its slot: srl__keyslot of "P:k:KEY", the slot's owner
 * from CLUSTER SLOTS), 2 trials each: exactly 1000 admitted fleet wide. */
static struct redis_cluster cluster;
static void cluster_up(void) { redis_cluster_start(&cluster); }
static void cluster_down(void) { redis_cluster_stop(&cluster); }

START_TEST(eight_hosts_on_a_cluster_admit_exactly_the_fleet_limit_for_a_key_on_each_master)
{
    for (int master = 0; master < REDIS_CLUSTER_N; master++) {
        char key[32] = "";
        for (int i = 0; i < 1000 && key[0] == '\0'; i++) {
            char full[64], k[32];
            snprintf(k, sizeof k, "hot%d", i);
            int n = snprintf(full, sizeof full, "c%d:k:%s", master, k);
            if (redis_cluster_owner(&cluster, srl__keyslot(full, (size_t)n)) == master)
                memcpy(key, k, sizeof k);
        }
        ck_assert_msg(key[0] != '\0', "no key found on master %d", master);
        for (int trial = 0; trial < 2; trial++) {
            char u[300];
            snprintf(u, sizeof u, "%s?prefix=c%d&timeout_ms=2000", cluster.uri, master);
            if (trial == 1) {
                srl_limiter *lim = NULL;   /* a fresh fleet: the key starts over */
                ck_assert_int_eq(srl_open_redis(u, NULL, &lim), 0);
                ck_assert_int_eq(srl_reset_key(lim, key, strlen(key)), 0);
                srl_close(lim);
            }
            struct host_result sum;
            unsigned maxd;
            eight_hosts_on(u, key, 0, &sum, &maxd);
            ck_assert_msg(!sum.bad, "master %d trial %d: a host saw an error", master, trial);
            ck_assert_msg(sum.admitted == 1000, "master %d (key %s) trial %d: %u admitted",
                          master, key, trial, sum.admitted);
            ck_assert_uint_eq(sum.redis_denied, 8);
            ck_assert_uint_eq(sum.local, 8 * 200);
        }
    }
}
END_TEST

/* Broken: each host spends Redis's `remaining` once more on its own. */
START_TEST(eight_hosts_broken_local_admission_is_caught)
{
    pid_t srv = setup_server();
    char u[260];
    snprintf(u, sizeof u, "%s&prefix=broken", uri);
    struct host_result sum;
    unsigned maxd;
    eight_hosts(u, SRL__TIERED_TEST_LOCAL_ALLOW, &sum, &maxd);
    ck_assert(!sum.bad);
    ck_assert_uint_gt(sum.admitted, 1000);
    teardown_server(srv);
}
END_TEST

/* ---------------------------------------------------------------- flood */

struct flood {
    unsigned admitted, local, redis;
    long long evalsha;
    uint64_t local_denied;       /* srl_stats of the host, after */
};

/* W workers of one host (one segment), LIMIT * 100 requests of "abuser" in
 * all, started together; the server's EVALSHA count around the flood. */
static struct flood flood_run(unsigned broken)
{
    enum { W = 4, LIMIT = 100, PER = LIMIT * 100 / W };
    srl_config cfg = gcra_cfg(LIMIT);
    const char *name = unique_name("flood");
    srl_limiter *lim = open_tiered(name, uri, &cfg, 0);
    int go[2], ready[2], res[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(res), 0);
    pid_t kids[W];
    for (int i = 0; i < W; i++) {
        kids[i] = test_fork();
        if (kids[i] == 0) {
            close(go[1]);
            struct flood f = {0};
            srl_limiter *mine = NULL;
            int bad = srl_open_tiered(name, uri, &cfg, 0, &mine) != 0 ||
                      (broken && srl__tiered_set_test_flags(mine, broken) != 0);
            srl_decision d;
            /* One peek opens the connection (and loads the script) before
             * the count starts. */
            (void)srl_peek(mine, "warm", 4, 1, &d);
            (void)!write(ready[1], "r", 1);
            char c;
            (void)!read(go[0], &c, 1);
            for (unsigned n = 0; !bad && n < PER; n++) {
                if (srl_acquire(mine, "abuser", 6, 1, &d) != 0)
                    bad = 1;
                else if (d.allowed)
                    f.admitted++;
                else if (d.flags & SRL_DECISION_LOCAL)
                    f.local++;
                f.redis = n + 1 - f.local;
            }
            if (bad)
                f.admitted = 1u << 30;
            srl_close(mine);
            (void)!write(res[1], &f, sizeof f);
            _exit(0);
        }
    }
    close(go[0]);
    for (int i = 0; i < W; i++) {
        char c;
        ck_assert_int_eq(read(ready[0], &c, 1), 1);
    }
    long long before = evalsha_calls();
    close(go[1]);
    struct flood sum = {0};
    for (int i = 0; i < W; i++) {
        struct flood f;
        ck_assert_int_eq(read(res[0], &f, sizeof f), (ssize_t)sizeof f);
        sum.admitted += f.admitted;
        sum.local += f.local;
        sum.redis += f.redis;
    }
    for (int i = 0; i < W; i++)
        waitpid(kids[i], NULL, 0);
    sum.evalsha = evalsha_calls() - before;
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    sum.local_denied = st.local_denied;
    srl_close(lim);
    srl_unlink(name);
    close(ready[0]);
    close(ready[1]);
    close(res[0]);
    close(res[1]);
    return sum;
}

START_TEST(a_flood_is_answered_on_the_host_without_an_extra_admission)
{
    pid_t srv = setup_server();
    struct flood f = flood_run(0);
    ck_assert_uint_eq(f.admitted, 100);
    /* Bound (design.md): the limit's admissions, then at most one Redis
     * denial per worker before it finds the ban it wrote or another wrote. */
    ck_assert_int_le(f.evalsha, 100 + 4);
    ck_assert_int_ge(f.evalsha, 100 + 1);
    ck_assert_int_eq(f.evalsha, (long long)f.redis);
    ck_assert_uint_eq(f.local + f.redis, 10000);
    ck_assert_uint_eq(f.local_denied, f.local);
    fprintf(stderr, "flood: %u of 10000 decisions local (%.2f %%), %lld EVALSHA\n", f.local,
            f.local / 100.0, f.evalsha);
    teardown_server(srv);
}
END_TEST

START_TEST(a_flood_broken_variants_are_caught)
{
    pid_t srv = setup_server();
    struct flood f = flood_run(SRL__TIERED_TEST_LOCAL_ALLOW);
    ck_assert_uint_gt(f.admitted, 100);   /* an extra admission */
    f = flood_run(SRL__TIERED_TEST_NO_MEMORY);
    ck_assert_uint_eq(f.admitted, 0);     /* the prefix was spent by the first run */
    ck_assert_int_gt(f.evalsha, 100 + 4); /* every decision went to Redis */
    ck_assert_uint_eq(f.local, 0);
    teardown_server(srv);
}
END_TEST

/* ------------------------------------------------------------------ cost */

struct step {
    uint32_t cost;
    int allowed;
    int local;      /* answered by the host: no EVALSHA */
};

/* gcra:10/20d (burst 10): 4 + 4 admitted, 2 left. */
static const struct step cost_table[] = {
    {4, 1, 0}, {4, 1, 0},
    {3, 0, 0},      /* Redis denies 3: the host remembers (3, T) */
    {3, 0, 1},      /* the same cost: local */
    {7, 0, 1},      /* a larger cost: local */
    {2, 1, 0},      /* a smaller cost: Redis, and it passes (0 left) */
    {1, 0, 0},      /* Redis denies 1: (1, T') replaces (3, T) */
    {1, 0, 1}, {3, 0, 1}, {10, 0, 1},
};

/* Run the table; the number of steps that differ, the first in *why. */
static int cost_table_run(unsigned broken, char *why, size_t n)
{
    srl_config cfg = gcra_cfg(10);
    const char *name = unique_name("cost");
    srl_limiter *lim = open_tiered(name, uri, &cfg, broken);
    int bad = 0;
    for (size_t i = 0; i < sizeof cost_table / sizeof cost_table[0]; i++) {
        const struct step *s = &cost_table[i];
        long long before = evalsha_calls();
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, "k", 1, s->cost, &d), 0);
        int local = (d.flags & SRL_DECISION_LOCAL) != 0;
        long long calls = evalsha_calls() - before;
        if (d.allowed != s->allowed || local != s->local || calls != !s->local ||
            (local && (d.remaining != 0 || d.retry_after_ns == 0))) {
            if (bad++ == 0)
                snprintf(why, n, "step %zu (cost %u): allowed %d local %d evalsha %lld", i,
                         s->cost, d.allowed, local, calls);
        }
    }
    srl_close(lim);
    srl_unlink(name);
    return bad;
}

START_TEST(a_ban_for_cost_c_answers_c_and_more_and_a_smaller_cost_asks_redis)
{
    pid_t srv = setup_server();
    char why[160] = "";
    ck_assert_msg(cost_table_run(0, why, sizeof why) == 0, "%s", why);
    teardown_server(srv);
}
END_TEST

START_TEST(a_ban_answering_smaller_costs_is_caught)
{
    pid_t srv = setup_server();
    char why[160] = "";
    ck_assert_int_gt(cost_table_run(SRL__TIERED_TEST_ANY_COST, why, sizeof why), 0);
    ck_assert_str_eq(why, "step 5 (cost 2): allowed 0 local 1 evalsha 0");
    teardown_server(srv);
}
END_TEST

/* -------------------------------------------------------- time of a ban */

START_TEST(the_local_retry_after_is_the_fleet_s_minus_host_time_elapsed)
{
    pid_t srv = setup_server();
    fake_clock clk = {.now = 100 * SEC};
    srl_config cfg = gcra_cfg(1);
    cfg.ticker = fake_ticker(&clk);   /* the host's clock; Redis keeps its own */
    const char *name = unique_name("time");
    srl_limiter *lim = open_tiered(name, uri, &cfg, 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.flags, 0);
    uint64_t R = d.retry_after_ns;
    ck_assert_uint_gt(R, 86400 * SEC);
    clk.now += 7 * SEC;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.flags, SRL_DECISION_LOCAL);
    ck_assert_uint_eq(d.retry_after_ns, R - 7 * SEC);
    ck_assert_uint_eq(d.reset_after_ns, R - 7 * SEC);
    ck_assert_uint_eq(d.limit, 1);
    ck_assert_int_eq(srl_peek(lim, "k", 1, 1, &d), 0);   /* a peek too, uncounted */
    ck_assert_uint_eq(d.flags, SRL_DECISION_LOCAL);
    clk.now += R - 7 * SEC - 1;   /* 1 ns before T: still local */
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.flags, SRL_DECISION_LOCAL);
    ck_assert_uint_eq(d.retry_after_ns, 1);
    clk.now += 1;                 /* at T: Redis again (its own clock: still denied) */
    long long before = evalsha_calls();
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(evalsha_calls() - before, 1);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.local_denied, 2);   /* the peek is not a decision */
    ck_assert_uint_eq(st.allowed, 1);
    ck_assert_uint_eq(st.denied, 2);
    ck_assert_uint_eq(st.used, 1);
    srl_info in;
    ck_assert_int_eq(srl_info_get(lim, &in), 0);
    ck_assert_int_eq(in.kind, SRL_STORE_TIERED);
    ck_assert_str_eq(in.name, name);
    ck_assert_uint_eq(in.policy.permits, 1);
    ck_assert_uint_eq(in.layout_version, SRL__SHM_VERSION);
    /* The host segment checks clean; a ban that ended is at rest: evicted. */
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    ck_assert_int_eq(srl_evict_idle(lim), 0);
    clk.now += 30ull * 86400 * SEC;
    ck_assert_int_eq(srl_evict_idle(lim), 1);
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.used, 0);
    ck_assert_uint_eq(st.evicted, 1);
    srl_close(lim);
    srl_unlink(name);
    teardown_server(srv);
}
END_TEST

/* ----------------------------------------------------------------- reset */

/* Spend "k" (limit 1), get the ban, then `clear`; 1 if the next request
 * went to Redis (no local answer), else 0. */
static int ban_then(unsigned broken, int clear)
{
    srl_config cfg = gcra_cfg(1);
    const char *name = unique_name("reset");
    srl_limiter *lim = open_tiered(name, uri, &cfg, broken);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.flags, SRL_DECISION_LOCAL);
    int want_allowed = 0;
    if (clear == 0) {
        ck_assert_int_eq(srl_reset_key(lim, "k", 1), 0);
        want_allowed = 1;
    } else if (clear == 1) {
        ck_assert_int_eq(srl_refund(lim, "k", 1, 1), 0);
        want_allowed = 1;
    } else {
        /* rlctl reset on the host segment: an ordinary segment, adopted;
         * the key is named there with its Redis prefix ("host:k"). */
        srl_limiter *host = NULL;
        ck_assert_int_eq(srl_open_shared(name, NULL, 0, &host), 0);
        ck_assert_int_eq(srl_peek(host, "k", 1, 1, &d), SRL_ENOENT);
        ck_assert_int_eq(srl_peek(host, "host:k", 6, 1, &d), 0);   /* rlctl get: banned */
        ck_assert_int_eq(d.allowed, 0);
        ck_assert_uint_gt(d.retry_after_ns, 0);
        ck_assert_int_eq(srl_reset_key(host, "host:k", 6), 0);
        srl_close(host);
    }
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    int asked = !(d.flags & SRL_DECISION_LOCAL);
    if (asked)
        ck_assert_int_eq(d.allowed, want_allowed);
    srl_close(lim);
    srl_unlink(name);
    return asked;
}

START_TEST(reset_refund_and_a_host_reset_clear_the_host_memory)
{
    pid_t srv = setup_server();
    const char *prefix[] = {"reset", "refund", "host"};
    for (int clear = 0; clear < 3; clear++) {
        use_prefix(prefix[clear]);
        ck_assert_msg(ban_then(0, clear) == 1, "clear %d: the ban outlived it", clear);
    }
    teardown_server(srv);
}
END_TEST

START_TEST(a_ban_that_outlives_a_reset_is_caught)
{
    pid_t srv = setup_server();
    ck_assert_int_eq(ban_then(SRL__TIERED_TEST_RESET_KEEPS, 0), 0);
    use_prefix("refund");
    ck_assert_int_eq(ban_then(SRL__TIERED_TEST_RESET_KEEPS, 1), 0);
    teardown_server(srv);
}
END_TEST

/* ---------------------------------------------------------------- faults */

START_TEST(redis_stopped_bans_still_answered_other_keys_degrade)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(1);
    cfg.on_full = SRL_ON_FULL_DENY;
    const char *name = unique_name("down");
    srl_limiter *lim = open_tiered(name, uri, &cfg, 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    kill(srv, SIGSTOP);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.flags, SRL_DECISION_LOCAL);
    ck_assert_int_eq(srl_acquire(lim, "other", 5, 1, &d), SRL_ETIMEDOUT);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_int_eq(d.allowed, 0);
    /* A degraded denial is not remembered: the next call asks Redis again
     * (which may have run the timed-out command meanwhile: either answer). */
    kill(srv, SIGCONT);
    long long before = evalsha_calls();
    ck_assert_int_eq(srl_acquire(lim, "other", 5, 1, &d), 0);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_int_eq(evalsha_calls() - before, 1);
    srl_close(lim);
    srl_unlink(name);
    teardown_server(srv);
}
END_TEST

/* Issue 42 item 4: a fronted limiter opened while Redis is down opens,
 * decides by on_full (DEGRADED, never remembered as a ban), and exactly
 * from Redis once it is started. */
START_TEST(opened_while_redis_is_down_serves_then_limits)
{
    snprintf(dir, sizeof dir, "/tmp/srl-tiered-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    /* A socket file that is not there is refused at once, whatever the
     * bound; the bound only has to outlast a loaded machine's scheduling
     * once the server is up (200 ms timed out at load 19). */
    snprintf(uri, sizeof uri, "unix://%s?timeout_ms=20000", sock);
    srl_config cfg = gcra_cfg(2);
    cfg.on_full = SRL_ON_FULL_DENY;
    const char *name = unique_name("late");
    srl_limiter *lim = open_tiered(name, uri, &cfg, 0);
    srl_decision d;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ESYS);
        ck_assert_int_eq(d.allowed, 0);
        ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    }
    pid_t srv = redis_server_start(dir, sock, NULL);
    int rc;
    while ((rc = srl_acquire(lim, "k", 1, 1, &d)) == SRL_ESYS) {
        ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
        usleep(2000);   /* the reconnect backoff's next step */
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 1);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.flags, 0);   /* Redis's denial, now remembered */
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.flags, SRL_DECISION_LOCAL);
    srl_close(lim);
    srl_unlink(name);
    teardown_server(srv);
}
END_TEST

/* ---------------------------------------------------------------- hostile */

/* ctx: the two words to write; an end of 0 is written as now + 1 h (a ban
 * in force, but for its garbage cost word). */
static int write_garbage(void *state, uint64_t now, void *ctx)
{
    uint64_t w[2];
    memcpy(w, ctx, sizeof w);
    if (w[1] == 0)
        w[1] = now + 3600 * SEC;
    memcpy(state, w, sizeof w);
    return 0;
}

START_TEST(a_garbage_ban_in_the_segment_is_not_answered)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(10);
    const char *name = unique_name("garbage");
    srl_limiter *lim = open_tiered(name, uri, &cfg, 0);
    srl_limiter *host = NULL;
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &host), 0);
    const uint64_t bad[][2] = {
        {0, UINT64_MAX / 2},         /* cost 0: no Redis denial leaves it */
        {1, UINT64_MAX},             /* an end past the longest window */
        {1 | 200ull << 32, 0},       /* a tier beyond the table (it has one) */
    };
    for (size_t i = 0; i < 3; i++) {
        char key[8];
        int n = snprintf(key, sizeof key, "srl:g%zu", i);   /* "P:key" */
        ck_assert_int_eq(srl__shm_apply(host, key, (size_t)n, 1, write_garbage, (void *)bad[i]), 0);
        srl_decision d;
        /* a plain look takes a ban of any tier: Redis has never seen the key */
        ck_assert_msg(srl_peek(lim, key + 4, (size_t)n - 4, 1, &d) == SRL_ENOENT,
                      "garbage %zu answered a look", i);
        ck_assert_int_eq(srl_acquire(lim, key + 4, (size_t)n - 4, 1, &d), 0);
        ck_assert_msg(d.allowed == 1 && d.flags == 0, "garbage %zu answered", i);
    }
    srl_close(host);
    srl_close(lim);
    srl_unlink(name);
    teardown_server(srv);
}
END_TEST

/* Two fleets (prefixes) on one host segment: one's ban never answers the
 * other's key of the same name. */
START_TEST(two_prefixes_on_one_host_segment_keep_their_bans_apart)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(1);
    const char *name = unique_name("shared");
    use_prefix("fleetA");
    srl_limiter *a = open_tiered(name, uri, &cfg, 0);
    use_prefix("fleetB");
    srl_limiter *b = open_tiered(name, uri, &cfg, 0);
    srl_decision d;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(srl_acquire(a, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.flags, SRL_DECISION_LOCAL);
    ck_assert_int_eq(srl_acquire(b, "k", 1, 1, &d), 0);
    ck_assert_msg(d.allowed == 1 && d.flags == 0, "fleet B's key answered by fleet A's ban");
    srl_close(a);
    srl_close(b);
    srl_unlink(name);
    teardown_server(srv);
}
END_TEST

/* ------------------------------------------------------------- long keys */

static int die_holding_the_lock(void *state, uint64_t now, void *ctx)
{
    (void)state, (void)now, (void)ctx;
    _exit(0);   /* the bucket's lock is left owner-dead: the next taker repairs */
}

struct shown {
    int n;
    uint32_t key_len, display_len;
    char display[256];
};

static int show_fn(const srl_entry *e, void *ctx)
{
    struct shown *sh = ctx;
    sh->n++;
    sh->key_len = e->key_len;
    sh->display_len = e->display_len;
    memcpy(sh->display, e->display, e->display_len);
    sh->display[e->display_len] = '\0';
    return 0;
}

/* The host segment's one entry, as rlctl list sees it (srl_foreach). */
static struct shown host_entry(const char *name)
{
    srl_limiter *host = NULL;
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &host), 0);
    struct shown sh = {0};
    ck_assert_int_eq(srl_foreach(host, show_fn, &sh), 1);
    srl_close(host);
    return sh;
}

/* A 4096-byte key (the longest there is) is stored as "srl:" + key fitted
 * to SRL_KEY_MAX: banned, the segment checks clean, a repair of its bucket
 * keeps the ban, and another 4096-byte key differing in its last byte has
 * its own count.  With the default display and with key_display 32. */
START_TEST(a_4096_byte_key_is_banned_and_its_ban_survives_check_and_repair)
{
    pid_t srv = setup_server();
    static char key[SRL_KEY_MAX], other[SRL_KEY_MAX];
    memset(key, 'k', sizeof key);
    memcpy(other, key, sizeof key);
    other[SRL_KEY_MAX - 1] = 'o';
    const uint32_t displays[] = {32, 0};
    for (unsigned v = 0; v < 2; v++) {
        use_prefix(displays[v] == 0 ? "srl" : "d32");
        srl_config cfg = gcra_cfg(1);
        cfg.key_display = displays[v];
        const char *name = unique_name("long");
        srl_limiter *lim = open_tiered(name, uri, &cfg, 0);
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, key, sizeof key, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_int_eq(srl_acquire(lim, key, sizeof key, 1, &d), 0);
        ck_assert(d.allowed == 0 && d.flags == 0);   /* Redis's denial, remembered */
        ck_assert_int_eq(srl_acquire(lim, key, sizeof key, 1, &d), 0);
        ck_assert(d.allowed == 0 && d.flags == SRL_DECISION_LOCAL);
        struct check_lines cl = {0};
        ck_assert_msg(srl_check(lim, check_lines_collect, &cl) == 0 && cl.n == 0,
                      "display %u: check: %d problems, last: %s", displays[v], cl.n, cl.last);
        /* rlctl list: "P:KEY", the fitted name's first bytes. */
        struct shown sh = host_entry(name);
        uint32_t want_display = displays[v] != 0 ? displays[v] : 64;
        ck_assert_uint_eq(sh.key_len, SRL_KEY_MAX);
        ck_assert_uint_eq(sh.display_len, want_display);
        const char *p = displays[v] == 0 ? "srl:" : "d32:";
        ck_assert_mem_eq(sh.display, p, 4);
        ck_assert_mem_eq(sh.display + 4, key, want_display - 4);
        /* A worker dies holding the ban's bucket lock (on the ban's own
         * name: the callback runs only for a stored key). */
        pid_t kid = test_fork();
        if (kid == 0) {
            srl_limiter *host = NULL;
            static char raw[4 + SRL_KEY_MAX];
            static unsigned char fit[SRL_KEY_MAX];
            memcpy(raw, p, 4);
            memcpy(raw + 4, key, sizeof key);
            size_t hlen = sizeof raw;
            const void *hk = srl_key_fit(raw, &hlen, fit);
            if (srl_open_shared(name, NULL, 0, &host) != 0)
                _exit(2);
            (void)srl__shm_apply(host, hk, hlen, 0, die_holding_the_lock, NULL);
            _exit(3);   /* not found under that name */
        }
        int status;
        ck_assert_int_eq(waitpid(kid, &status, 0), kid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
        /* The next decision repairs the bucket and still answers the ban. */
        ck_assert_int_eq(srl_acquire(lim, key, sizeof key, 1, &d), 0);
        ck_assert_msg(d.allowed == 0 && d.flags == SRL_DECISION_LOCAL,
                      "display %u: the repair dropped the ban (allowed %d, flags %u)",
                      displays[v], d.allowed, d.flags);
        srl_stats st;
        ck_assert_int_eq(srl_stats_get(lim, &st), 0);
        ck_assert_uint_eq(st.recovered, 1);
        ck_assert_uint_eq(st.used, 1);
        cl = (struct check_lines){0};
        ck_assert_msg(srl_check(lim, check_lines_collect, &cl) == 0 && cl.n == 0,
                      "after repair: %d problems, last: %s", cl.n, cl.last);
        ck_assert_int_eq(srl_acquire(lim, other, sizeof other, 1, &d), 0);
        ck_assert(d.allowed == 1 && d.flags == 0);   /* its own count */
        srl_close(lim);
        srl_unlink(name);
    }
    teardown_server(srv);
}
END_TEST

/* A short key is shown as "P:KEY" by default; a host segment made without
 * a display copy (an earlier srl's) is adopted as it is. */
START_TEST(the_host_segment_shows_prefix_and_key_and_one_without_a_display_is_adopted)
{
    pid_t srv = setup_server();
    use_prefix("api");
    srl_config cfg = gcra_cfg(1);
    const char *name = unique_name("show");
    srl_limiter *lim = open_tiered(name, uri, &cfg, 0);
    srl_decision d;
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(srl_acquire(lim, "alice", 5, 1, &d), 0);
    ck_assert(d.allowed == 0 && d.flags == 0);
    struct shown sh = host_entry(name);
    ck_assert_uint_eq(sh.key_len, 9);
    ck_assert_str_eq(sh.display, "api:alice");
    srl_close(lim);
    srl_unlink(name);

    srl_config old;
    srl_config_init(&old);
    ck_assert_int_eq(srl_policy_parse("gcra:1/3660d,penalty=3660d", &old.policy), 0);
    old.capacity = cfg.capacity;
    srl_limiter *plain = NULL;
    ck_assert_int_eq(srl_open_shared(name, &old, SRL_CREATE, &plain), 0);
    lim = open_tiered(name, uri, &cfg, 0);
    srl_info in;
    ck_assert_int_eq(srl_info_get(plain, &in), 0);
    ck_assert_uint_eq(in.key_display, 0);
    ck_assert_int_eq(srl_acquire(lim, "alice", 5, 1, &d), 0);   /* banned: Redis again */
    ck_assert(d.allowed == 0 && d.flags == 0);
    ck_assert_int_eq(srl_acquire(lim, "alice", 5, 1, &d), 0);
    ck_assert(d.allowed == 0 && d.flags == SRL_DECISION_LOCAL);
    /* An explicit display other than the segment's is still a mismatch. */
    cfg.key_display = 16;
    srl_limiter *no = NULL;
    ck_assert_int_eq(srl_open_tiered(name, uri, &cfg, SRL_CREATE, &no), SRL_EMISMATCH);
    srl_close(plain);
    srl_close(lim);
    srl_unlink(name);
    teardown_server(srv);
}
END_TEST

START_TEST(a_segment_of_another_policy_is_refused)
{
    pid_t srv = setup_server();
    srl_config cfg = gcra_cfg(10);
    char name[128];   /* a copy: unique_name's buffer is reused below ("other2") */
    snprintf(name, sizeof name, "%s", unique_name("other"));
    srl_limiter *plain = NULL, *lim = NULL;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE, &plain), 0);
    ck_assert_int_eq(srl_open_tiered(name, uri, &cfg, 0, &lim), SRL_EMISMATCH);
    ck_assert_int_eq(srl_open_tiered(name, uri, &cfg, SRL_ADOPT, &lim), SRL_EMISMATCH);
    ck_assert_ptr_null(lim);
    ck_assert_int_eq(srl_open_tiered(name, uri, NULL, 0, &lim), SRL_EINVAL);
    srl_close(plain);
    srl_unlink(name);
    /* Redis's own mismatch (another policy under the prefix) is Redis's,
     * whatever host segment is named. */
    lim = open_tiered(name, uri, &cfg, 0);
    srl_config other = gcra_cfg(11);
    srl_limiter *no = NULL;
    ck_assert_int_eq(srl_open_tiered(unique_name("other2"), uri, &other, SRL_CREATE, &no),
                     SRL_EMISMATCH);
    ck_assert_ptr_null(no);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);   /* the host segment open_tiered made */
    /* A concurrency limit alone: the Redis store itself, no host segment
     * (units are Redis's to give back); in a compound: refused, saying so,
     * and nothing made. */
    srl_config c;
    srl_policy_error pe;
    char seg[128], why[256], curi[300];
    snprintf(curi, sizeof curi, "%s&prefix=conc", uri);   /* a prefix of its own */
    srl_config_init(&c);
    ck_assert_int_eq(srl_config_parse(&c, "concurrency:2", &pe), 0);
    snprintf(seg, sizeof seg, "%s", unique_name("conc"));
    ck_assert_int_eq(srl_open_fronted(seg, curi, &c, SRL_CREATE, &no), 0);
    srl_info in;
    ck_assert_int_eq(srl_info_get(no, &in), 0);
    ck_assert_int_eq(in.kind, SRL_STORE_REDIS);
    srl_lease ls[3];
    srl_decision d;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(srl_enter(no, "c", 1, &ls[i], &d), 0);
        ck_assert_int_eq(d.allowed, i < 2);
    }
    ck_assert_int_eq(srl_leave(no, &ls[0]), 0);
    ck_assert_int_eq(srl_enter(no, "c", 1, &ls[2], &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    for (int i = 1; i < 3; i++)
        ck_assert_int_eq(srl_leave(no, &ls[i]), 0);
    srl_close(no);
    no = NULL;
    ck_assert_int_eq(srl_unlink(seg), SRL_ENOENT);
    srl_config_free(&c);
    srl_config_init(&c);
    ck_assert_int_eq(srl_config_parse(&c, "5/1s + concurrency:2", &pe), 0);
    snprintf(seg, sizeof seg, "%s", unique_name("conc"));
    ck_assert_int_eq(srl_open_fronted(seg, curi, &c, SRL_CREATE, &no), SRL_ENOTSUP);
    ck_assert_ptr_null(no);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "a concurrency limit in a compound is not taken by the fronted store "
                          "(nor by Redis yet): give it a limiter of its own, or use a segment");
    ck_assert_int_eq(srl_unlink(seg), SRL_ENOENT);
    srl_config_free(&c);
    teardown_server(srv);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tiered");
    TCase *tc = tcase_create("tiered");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, eight_hosts_admit_exactly_the_fleet_limit_in_every_trial);
    tcase_add_test(tc, eight_hosts_broken_local_admission_is_caught);
    tcase_add_test(tc, a_flood_is_answered_on_the_host_without_an_extra_admission);
    tcase_add_test(tc, a_flood_broken_variants_are_caught);
    tcase_add_test(tc, a_ban_for_cost_c_answers_c_and_more_and_a_smaller_cost_asks_redis);
    tcase_add_test(tc, a_ban_answering_smaller_costs_is_caught);
    tcase_add_test(tc, the_local_retry_after_is_the_fleet_s_minus_host_time_elapsed);
    tcase_add_test(tc, reset_refund_and_a_host_reset_clear_the_host_memory);
    tcase_add_test(tc, a_ban_that_outlives_a_reset_is_caught);
    tcase_add_test(tc, redis_stopped_bans_still_answered_other_keys_degrade);
    tcase_add_test(tc, opened_while_redis_is_down_serves_then_limits);
    tcase_add_test(tc, a_garbage_ban_in_the_segment_is_not_answered);
    tcase_add_test(tc, two_prefixes_on_one_host_segment_keep_their_bans_apart);
    tcase_add_test(tc, a_segment_of_another_policy_is_refused);
    tcase_add_test(tc, a_4096_byte_key_is_banned_and_its_ban_survives_check_and_repair);
    tcase_add_test(tc, the_host_segment_shows_prefix_and_key_and_one_without_a_display_is_adopted);
    suite_add_tcase(s, tc);
    TCase *cl = tcase_create("cluster");
    tcase_set_timeout(cl, 240);
    tcase_add_unchecked_fixture(cl, cluster_up, cluster_down);
    tcase_add_test(cl, eight_hosts_on_a_cluster_admit_exactly_the_fleet_limit_for_a_key_on_each_master);
    suite_add_tcase(s, cl);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
