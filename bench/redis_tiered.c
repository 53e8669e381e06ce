/*
 * redis_tiered.c - the host tier against the plain Redis store, on the
 * benchmark's private redis-server (redis.c starts it and calls this).
 *
 * What it holds: two scenarios, each run once through srl_open_redis and
 * once through srl_open_tiered (host segment /srl-bench-tiered-<pid>,
 * unlinked after), each on a fresh key prefix of the same server, one
 * client process, one request per round trip:
 *   flood     one key, FLOOD_LIMIT permits (gcra:200/20d: nothing refills),
 *             100 x FLOOD_LIMIT requests: the abusive client;
 *   distinct  DISTINCT_KEYS keys, one request each, all admitted: what the
 *             host tier costs when it has nothing to answer.
 * Measured: decisions/s, the server's EVALSHA count per decision (INFO
 * commandstats, before and after), admitted and locally answered counts.
 * Each cell runs REPS times, the two stores alternating (so a neighbour's
 * load on this shared machine falls on both), and reports the median
 * rate; the counts are the same in every repetition (asserted: a rep that
 * differs is reported as an error).
 *
 * Invariants: only the public API (srl.h) and hiredis for INFO; the host
 * segment is unlinked on every path after it was created.
 */
#include "redis_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { FLOOD_LIMIT = 200, DISTINCT_KEYS = 20000, REPS = 3 };
_Static_assert(REPS == 3, "the median below is of three");

static long long evalsha_calls(redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO commandstats");
    long long n = -1;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *at = strstr(r->str, "cmdstat_evalsha:calls=");
        n = at != NULL ? atoll(at + 22) : 0;
    }
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

/* One run: scenario sc (0 flood, 1 distinct) on store st (0 redis, 1
 * tiered), repetition r (its own prefix: every run starts fresh). */
static int run_one(redisContext *c, const char *sock, int sc, int st, int r,
                   bench_tiered_cell *out)
{
    char uri[200], host[64], key[32];
    snprintf(uri, sizeof uri, "unix://%s?prefix=bench-t%d-%d-%d&timeout_ms=2000", sock, sc, st,
             r);
    snprintf(host, sizeof host, "/srl-bench-tiered-%d", (int)getpid());
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_GCRA, .permits = FLOOD_LIMIT,
                              .window_ns = 20ull * 86400 * SRL_NS_PER_S};
    cfg.capacity = DISTINCT_KEYS + 1024;
    srl_limiter *lim = NULL;
    int rc = st ? srl_open_tiered(host, uri, &cfg, SRL_CREATE, &lim)
                : srl_open_redis(uri, &cfg, &lim);
    if (rc != 0)
        return rc;
    uint64_t n = sc == 0 ? 100u * FLOOD_LIMIT : DISTINCT_KEYS;
    srl_decision d;
    (void)srl_peek(lim, "warm", 4, 1, &d);   /* the connection, before the clock starts */
    long long before = evalsha_calls(c);
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        int len = sc == 0 ? snprintf(key, sizeof key, "abuser")
                          : snprintf(key, sizeof key, "k%llu", (unsigned long long)i);
        rc = srl_acquire(lim, key, (size_t)len, 1, &d);
        out->admitted += d.allowed;
        out->local += (d.flags & SRL_DECISION_LOCAL) != 0;
    }
    uint64_t t1 = bench_now_ns();
    long long after = evalsha_calls(c);
    *out = (bench_tiered_cell){.admitted = out->admitted, .local = out->local};
    out->decisions = n;
    out->rate = (double)n * 1e9 / (double)(t1 - t0);
    out->evalsha_per_decision = (double)(after - before) / (double)n;
    srl_close(lim);
    if (st)
        srl_unlink(host);
    return rc;
}

void bench_tiered_run(redisContext *c, const char *sock, bench_tiered_result *out)
{
    memset(out, 0, sizeof *out);
    out->flood_limit = FLOOD_LIMIT;
    out->distinct_keys = DISTINCT_KEYS;
    for (int sc = 0; sc < 2; sc++) {
        double rates[2][REPS];
        for (int r = 0; r < REPS; r++)
            for (int st = 0; st < 2; st++) {
                bench_tiered_cell one = {0};
                int rc = run_one(c, sock, sc, st, r, &one);
                bench_tiered_cell *cell = &out->cell[sc][st];
                if (rc == 0 && r > 0 && (one.admitted != cell->admitted ||
                                         one.local != cell->local))
                    rc = SRL_ECORRUPT;   /* a count that moved between reps */
                if (rc != 0) {
                    snprintf(out->why, sizeof out->why, "%s: %s",
                             st ? "srl_open_tiered" : "srl_open_redis", srl_strerror(rc));
                    return;
                }
                rates[st][r] = one.rate;
                *cell = one;
            }
        for (int st = 0; st < 2; st++) {   /* the median of REPS (3) */
            double *v = rates[st];
            double lo = v[0] < v[1] ? v[0] : v[1], hi = v[0] < v[1] ? v[1] : v[0];
            out->cell[sc][st].rate = v[2] < lo ? lo : (v[2] > hi ? hi : v[2]);
        }
    }
    out->available = 1;
}
