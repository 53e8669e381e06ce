/*
 * redis_compound.c - a compound policy on Redis: srl's Redis store against
 * the script a user would write by hand for the same limits, on the
 * benchmark's private redis-server (redis.c starts it and calls this).
 *
 * What it holds: the policy COMPOUND (two token buckets that never deny in
 * a run) decided by srl_open_redis (one compound script call per decision,
 * all limits of a key in one Redis key) and by hand_lua below (two token
 * buckets in one Lua script over one Redis hash, all or nothing, floats:
 * what redis-cell's README or a blog post shows), one client, one request
 * per round trip, the same server, the same key sequence (the benchmark's
 * keys, redis.c's sequence, each repetition from its own offset, both
 * subjects from the same one).  A third subject, srl with the compound's
 * first limit alone, says what the second limit costs srl.  Timed by the
 * wall clock: a round trip waits for the server, so this thread's CPU time
 * (--cpu-time) would not see it.  The subjects alternate (in order in even
 * repetitions, reversed in odd ones) so that a neighbour's load falls on
 * all; the median rate is reported.  Then, for each subject, exactly RT_N decisions
 * (quick: RT_N_QUICK) between two INFO commandstats (the server's EVALSHA
 * calls and the time it spent in them) while a MONITOR connection watches:
 * the commands the subject sent (on the decision path neither hiredis nor
 * srl pipelines, so each is one round trip) and those its script ran.
 * First, a concurrency policy: srl_enter + srl_leave on srl's Redis store
 * against hand_conc_lua's enter and leave (one pair per request, each
 * key entered and left at once, so nothing is ever full), timed the same
 * way, then exactly rt_n pairs between two INFO commandstats.
 *
 * Invariants: only the public API (srl.h) and hiredis; srl's keys live
 * under prefixes bench-c, bench-c1 (one limit) and bench-cc (the
 * concurrency open), the
 * script's under bench-h:k:, the decision keys expiring at rest; the
 * server is the benchmark's own and goes with it.  Nothing here is
 * asserted on time: a count that is not what it must be (a denial, a
 * failed call) is reported, never hidden.
 */
#include "redis_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define COMPOUND "token_bucket:1000000000/1s + token_bucket:1000000000/1d"
#define CONCURRENCY "concurrency:100"
enum { RT_N = 10000, RT_N_QUICK = 1000, REPS_MAX = 9 };

/* Two token buckets over one hash: ts (us, server TIME) and each bucket's
 * level; both admit or nothing is taken.  ARGV: cost, then permits and
 * window (us) of each bucket.  The key expires when both are full again. */
static const char hand_lua[] =
    "local cost = tonumber(ARGV[1])\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local s = redis.call('HMGET', KEYS[1], 'ts', 'b1', 'b2')\n"
    "local last = tonumber(s[1]) or now\n"
    "local el = now > last and now - last or 0\n"
    "local lvl, ok, ttl = {}, true, 0\n"
    "for i = 1, 2 do\n"
    "  local cap, win = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])\n"
    "  lvl[i] = math.min(cap, (tonumber(s[i + 1]) or cap) + el * cap / win)\n"
    "  if lvl[i] < cost then ok = false end\n"
    "end\n"
    "for i = 1, 2 do\n"
    "  local cap, win = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])\n"
    "  if ok then lvl[i] = lvl[i] - cost end\n"
    "  local full = (cap - lvl[i]) * win / cap\n"
    "  if full > ttl then ttl = full end\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'ts', string.format('%.0f', now),\n"
    "           'b1', string.format('%.3f', lvl[1]), 'b2', string.format('%.3f', lvl[2]))\n"
    "redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000) + 1)\n"
    "return {ok and 1 or 0, math.floor(math.min(lvl[1], lvl[2]))}\n";

/* In-flight units over one hash per key: field = the holder's id, value
 * its expiry (us, server TIME).  ARGV: 'e' or 'l', N, lease (us), id.
 * Enter drops expired holders and admits if fewer than N remain; leave
 * deletes the holder.  What a user would write by hand (no host id, pid
 * or start time: a dead holder comes back only by its lease). */
static const char hand_conc_lua[] =
    "if ARGV[1] == 'l' then return redis.call('HDEL', KEYS[1], ARGV[4]) end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local all = redis.call('HGETALL', KEYS[1])\n"
    "local held = 0\n"
    "for i = 1, #all, 2 do\n"
    "  if tonumber(all[i + 1]) <= now then redis.call('HDEL', KEYS[1], all[i])\n"
    "  else held = held + 1 end\n"
    "end\n"
    "if held >= tonumber(ARGV[2]) then return 0 end\n"
    "redis.call('HSET', KEYS[1], ARGV[4], string.format('%.0f', now + tonumber(ARGV[3])))\n"
    "redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3]) / 1000))\n"
    "return 1\n";

/* The server's counts from INFO commandstats: EVALSHA calls and the
 * microseconds the server spent in them. */
static int evalsha_counts(redisContext *c, long long *calls, long long *usec)
{
    redisReply *r = redisCommand(c, "INFO commandstats");
    int rc = -1;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *at = strstr(r->str, "cmdstat_evalsha:calls=");
        *calls = 0;
        *usec = 0;
        if (at != NULL) {
            *calls = atoll(at + 22);
            const char *u = strstr(at, ",usec=");
            *usec = u != NULL ? atoll(u + 6) : 0;
        }
        rc = 0;
    }
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

/* A MONITOR connection on sock: every command the server runs from now on
 * is a line on it, those a script runs marked "[db lua]".  NULL on error. */
static redisContext *monitor_open(const char *sock)
{
    struct timeval tv = {5, 0};
    redisContext *m = redisConnectUnixWithTimeout(sock, tv);
    if (m == NULL || m->err != 0) {
        if (m != NULL)
            redisFree(m);
        return NULL;
    }
    redisReply *r = redisCommand(m, "MONITOR");
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (r != NULL)
        freeReplyObject(r);
    if (!ok) {
        redisFree(m);
        return NULL;
    }
    redisSetTimeout(m, tv);
    return m;
}

#define MARK "srl-bench-round-trips-end"

/* After ECHO MARK was sent: read m's lines up to MARK's, counting the
 * commands a client sent (not a script's, not INFO or the ECHO) into *top
 * and a script's into *inner.  0, or -1 (a read failed or timed out). */
static int monitor_count(redisContext *m, long long *top, long long *inner)
{
    *top = *inner = 0;
    for (;;) {
        redisReply *r = NULL;
        if (redisGetReply(m, (void **)&r) != REDIS_OK || r == NULL)
            return -1;
        int done = 0;
        if (r->type == REDIS_REPLY_STATUS) {
            const char *src = strchr(r->str, '[');
            const char *cmd = src != NULL ? strstr(src, "] \"") : NULL;
            const char *sp = src != NULL ? strchr(src, ' ') : NULL;
            if (strstr(r->str, "\"" MARK "\"") != NULL)
                done = 1;
            else if (cmd != NULL && sp != NULL && strncmp(sp + 1, "lua]", 4) == 0)
                ++*inner;
            else if (cmd != NULL && strncasecmp(cmd + 3, "INFO\"", 5) != 0)
                ++*top;
        }
        freeReplyObject(r);
        if (done)
            return 0;
    }
}

struct subject {
    int hand;                 /* 0: srl's Redis store, 1: the hand-written script */
    int conc;                 /* the concurrency pair (enter + leave) instead */
    srl_limiter *lim;
    redisContext *c;          /* the script's: redis.c's connection (INFO goes on it too) */
    const char *sha;
    const srl_limits *l;
};

/* One enter + leave pair on key (the concurrency subjects): 1 entered,
 * 0 denied, -1 error (why filled). */
static int conc_pair(const struct subject *s, const unsigned char *key, char *why, size_t whylen)
{
    if (!s->hand) {
        srl_decision d;
        srl_lease l;
        int rc = srl_enter(s->lim, key, BENCH_KEY_LEN, &l, &d);
        if (rc == 0 && d.allowed)
            rc = srl_leave(s->lim, &l);
        if (rc != 0) {
            char last[160];
            srl_last_error(last, sizeof last);
            snprintf(why, whylen, "srl_enter/srl_leave: %s (%s)", srl_err_name(rc), last);
            return -1;
        }
        return d.allowed != 0;
    }
    static unsigned long long id;
    char k[64] = "bench-hc:k:", hid[32];
    memcpy(k + 11, key, BENCH_KEY_LEN);
    snprintf(hid, sizeof hid, "%llu", ++id);
    const srl_policy *p = &s->l->limit[0];
    unsigned long long lease = (p->window_ns ? p->window_ns : SRL_REDIS_LEASE_DEFAULT_NS) / 1000;
    int ok = -1;
    for (int step = 0; step < 2; step++) {
        redisReply *r = redisCommand(s->c, "EVALSHA %s 1 %b %s %u %llu %s", s->sha, k,
                                     (size_t)(11 + BENCH_KEY_LEN), step ? "l" : "e",
                                     p->permits, lease, hid);
        int good = r != NULL && r->type == REDIS_REPLY_INTEGER;
        if (!good)
            snprintf(why, whylen, "EVALSHA: %s",
                     r == NULL ? s->c->errstr
                               : (r->type == REDIS_REPLY_ERROR ? r->str : "bad reply"));
        if (good && step == 0)
            ok = r->integer == 1;
        if (r != NULL)
            freeReplyObject(r);
        if (!good)
            return -1;
        if (ok == 0)
            break;   /* denied: nothing to leave */
    }
    return ok;
}

/* One decision on key; 1 admitted, 0 denied, -1 error (why filled). */
static int decide(const struct subject *s, const unsigned char *key, char *why, size_t whylen)
{
    if (s->conc)
        return conc_pair(s, key, why, whylen);
    if (!s->hand) {
        srl_decision d;
        int rc = srl_acquire(s->lim, key, BENCH_KEY_LEN, 1, &d);
        if (rc != 0) {
            char last[160];
            srl_last_error(last, sizeof last);
            snprintf(why, whylen, "srl_acquire: %s (%s)", srl_err_name(rc), last);
            return -1;
        }
        return d.allowed != 0;
    }
    char k[64] = "bench-h:k:";
    memcpy(k + 10, key, BENCH_KEY_LEN);
    const srl_policy *a = &s->l->limit[0], *b = &s->l->limit[1];
    redisReply *r = redisCommand(s->c, "EVALSHA %s 1 %b 1 %llu %llu %llu %llu", s->sha, k,
                                 (size_t)(10 + BENCH_KEY_LEN), (unsigned long long)a->permits,
                                 (unsigned long long)(a->window_ns / 1000),
                                 (unsigned long long)b->permits,
                                 (unsigned long long)(b->window_ns / 1000));
    int ok = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        ok = r->element[0]->integer == 1;
    else
        snprintf(why, whylen, "EVALSHA: %s",
                 r == NULL ? s->c->errstr
                           : (r->type == REDIS_REPLY_ERROR ? r->str : "bad reply"));
    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

/* Decisions for budget_ns from seq[offset..], or exactly n of them when n
 * > 0 (then budget_ns is ignored).  Returns 0, or -1 with why filled. */
static int run(const struct subject *s, const bench_keys *k, const bench_seq *seq,
               uint64_t offset, uint64_t budget_ns, uint64_t n, bench_compound_cell *out,
               char *why, size_t whylen)
{
    uint64_t done = 0, ok = 0, pos = offset % seq->len;
    uint64_t t0 = bench_now_ns(), t1 = t0;
    while (n > 0 ? done < n : t1 - t0 < budget_ns) {
        for (int b = 0; b < 64 && (n == 0 || done < n); b++) {
            const unsigned char *key = bench_key_at(k, seq->idx, pos, seq->len);
            if (++pos == seq->len)
                pos = 0;
            int a = decide(s, key, why, whylen);
            if (a < 0)
                return -1;
            ok += (uint64_t)a;
            done++;
        }
        t1 = bench_now_ns();
    }
    out->decisions += done;
    out->admitted += ok;
    out->rate = (double)done * 1e9 / (double)(t1 - t0);
    return 0;
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)   /* insertion sort: n <= REPS_MAX */
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The concurrency subjects: srl_open_redis of CONCURRENCY (its answer in
 * out->conc_rc, conc_why), then, if it opened, srl and hand_conc_lua timed
 * as the compound's subjects are (alternating repetitions, median), and
 * exactly conc_rt_n pairs each between two INFO commandstats. */
static void run_concurrency(const bench_opts *o, const bench_keys *k, const bench_seq *seq,
                            redisContext *c, const char *sock, bench_compound_result *out)
{
    char uri[200];
    snprintf(uri, sizeof uri, "unix://%s?prefix=bench-cc&timeout_ms=2000", sock);
    srl_config cfg;
    srl_config_init(&cfg);
    snprintf(out->conc_policy, sizeof out->conc_policy, "%s", CONCURRENCY);
    out->conc_rc = srl_limits_parse_ex(CONCURRENCY, &cfg.limits, NULL);
    if (out->conc_rc != 0) {
        snprintf(out->conc_why, sizeof out->conc_why, "srl_limits_parse_ex: %s",
                 srl_err_name(out->conc_rc));
        return;
    }
    srl_limiter *lim = NULL;
    out->conc_rc = srl_open_redis(uri, &cfg, &lim);
    srl_last_error(out->conc_why, sizeof out->conc_why);
    if (out->conc_rc != 0)
        return;
    char sha[64];
    if (bench_redis_script_load(c, hand_conc_lua, sha, sizeof sha, out->conc_why,
                                sizeof out->conc_why) != 0) {
        srl_close(lim);
        return;
    }
    struct subject sub[2] = {{.hand = 0, .conc = 1, .lim = lim, .l = &cfg.limits},
                             {.hand = 1, .conc = 1, .c = c, .sha = sha, .l = &cfg.limits}};
    int reps = o->reps < REPS_MAX ? o->reps : REPS_MAX;
    uint64_t budget = (uint64_t)((o->seconds < 2.0 ? o->seconds : 2.0) * 1e9);
    double rates[2][REPS_MAX];
    bench_compound_cell warm[2] = {{0}};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = run(&sub[i], k, seq, 0, 0, 64, &warm[i], out->conc_why, sizeof out->conc_why);
    for (int rep = 0; rep < reps && rc == 0; rep++)
        for (int j = 0; j < 2 && rc == 0; j++) {
            int i = rep % 2 ? 1 - j : j;
            uint64_t offset = (uint64_t)(rep + 1) * (seq->len / (uint64_t)(reps + 2));
            rc = run(&sub[i], k, seq, offset, budget, 0, &out->conc[i], out->conc_why,
                     sizeof out->conc_why);
            rates[i][rep] = out->conc[i].rate;
        }
    out->conc_rt_n = o->quick ? RT_N_QUICK : RT_N;
    for (int i = 0; i < 2 && rc == 0; i++) {
        long long e0 = 0, u0 = 0, e1 = 0, u1 = 0;
        bench_compound_cell rt = {0};
        if (evalsha_counts(c, &e0, &u0) != 0 ||
            run(&sub[i], k, seq, seq->len / 2, 0, out->conc_rt_n, &rt, out->conc_why,
                sizeof out->conc_why) != 0 ||
            evalsha_counts(c, &e1, &u1) != 0) {
            rc = -1;
            break;
        }
        out->conc_evalsha[i] = e1 - e0;
        out->conc_usec[i] = u1 - u0;
    }
    srl_close(lim);
    if (rc != 0)
        return;
    for (int i = 0; i < 2; i++)
        out->conc[i].rate = median(rates[i], reps);
    out->conc_why[0] = '\0';
    out->conc_available = 1;
}

void bench_compound_run(const bench_opts *o, const bench_keys *k, const bench_seq *seq,
                        redisContext *c, const char *sock, bench_compound_result *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->policy, sizeof out->policy, "%s", COMPOUND);
    run_concurrency(o, k, seq, c, sock, out);

    srl_config cfg;
    srl_config_init(&cfg);
    srl_policy_error perr;
    int rc = srl_limits_parse_ex(COMPOUND, &cfg.limits, &perr);
    if (rc != 0 || cfg.limits.count != 2) {
        snprintf(out->why, sizeof out->why, "srl_limits_parse_ex(\"%s\"): %s", COMPOUND,
                 srl_err_name(rc));
        out->rc = rc ? rc : SRL_EPOLICY;
        return;
    }
    char uri[200];
    snprintf(uri, sizeof uri, "unix://%s?prefix=bench-c&timeout_ms=2000", sock);
    srl_config one = cfg;   /* the compound's first limit alone */
    (void)srl_limits_of(&cfg.limits.limit[0], &one.limits);   /* valid: parsed above */
    (void)srl_policy_format(&one.limits.limit[0], out->one, sizeof out->one);
    struct subject sub[BENCH_COMPOUND_SUBJECTS] = {{.hand = 0, .l = &cfg.limits},
                                                   {.hand = 1, .l = &cfg.limits, .c = c},
                                                   {.hand = 0, .l = &one.limits}};
    rc = srl_open_redis(uri, &cfg, &sub[0].lim);
    snprintf(uri, sizeof uri, "unix://%s?prefix=bench-c1&timeout_ms=2000", sock);
    if (rc == 0 && (rc = srl_open_redis(uri, &one, &sub[2].lim)) != 0)
        srl_close(sub[0].lim);
    if (rc != 0) {
        char last[160];
        srl_last_error(last, sizeof last);
        snprintf(out->why, sizeof out->why, "srl_open_redis: %s (%s)", srl_err_name(rc), last);
        out->rc = rc;
        return;
    }
    char sha[64];
    if (bench_redis_script_load(c, hand_lua, sha, sizeof sha, out->why, sizeof out->why) != 0) {
        srl_close(sub[0].lim);
        srl_close(sub[2].lim);
        return;
    }
    sub[1].sha = sha;

    out->reps = o->reps < REPS_MAX ? o->reps : REPS_MAX;
    out->seconds = o->seconds < 2.0 ? o->seconds : 2.0;
    uint64_t budget = (uint64_t)(out->seconds * 1e9);
    double rates[BENCH_COMPOUND_SUBJECTS][REPS_MAX];
    /* Warm-up: the connections, the scripts loaded, the first keys. */
    bench_compound_cell warm[BENCH_COMPOUND_SUBJECTS] = {{0}};
    for (int i = 0; i < BENCH_COMPOUND_SUBJECTS && rc == 0; i++)
        rc = run(&sub[i], k, seq, 0, 0, 64, &warm[i], out->why, sizeof out->why);
    for (int rep = 0; rep < out->reps && rc == 0; rep++)
        for (int j = 0; j < BENCH_COMPOUND_SUBJECTS && rc == 0; j++) {
            int i = rep % 2 ? BENCH_COMPOUND_SUBJECTS - 1 - j : j;
            uint64_t offset = (uint64_t)(rep + 1) * (seq->len / (uint64_t)(out->reps + 2));
            rc = run(&sub[i], k, seq, offset, budget, 0, &out->cell[i], out->why,
                     sizeof out->why);
            rates[i][rep] = out->cell[i].rate;
        }
    /* Round trips: exactly rt_n decisions between two INFO commandstats
     * (EVALSHA calls and time), watched by MONITOR (every command the
     * subject sent, none pipelined on this path: one round trip each). */
    out->rt_n = o->quick ? RT_N_QUICK : RT_N;
    for (int i = 0; i < BENCH_COMPOUND_SUBJECTS && rc == 0; i++) {
        long long e0 = 0, u0 = 0, e1 = 0, u1 = 0;
        bench_compound_cell rt = {0};
        redisContext *m = monitor_open(sock);
        if (m == NULL || evalsha_counts(c, &e0, &u0) != 0) {
            snprintf(out->why, sizeof out->why, "MONITOR or INFO commandstats failed");
            rc = -1;
        }
        if (rc == 0)
            rc = run(&sub[i], k, seq, seq->len / 2, 0, out->rt_n, &rt, out->why,
                     sizeof out->why);
        if (rc == 0 && evalsha_counts(c, &e1, &u1) != 0) {
            snprintf(out->why, sizeof out->why, "INFO commandstats: %s", c->errstr);
            rc = -1;
        }
        redisReply *r2 = rc == 0 ? redisCommand(c, "ECHO %s", MARK) : NULL;
        if (r2 != NULL)
            freeReplyObject(r2);
        if (rc == 0 && (r2 == NULL ||
                        monitor_count(m, &out->rt_sent[i], &out->rt_inner[i]) != 0)) {
            snprintf(out->why, sizeof out->why, "MONITOR: %s", m->errstr);
            rc = -1;
        }
        if (m != NULL)
            redisFree(m);
        if (rc == 0) {
            out->rt_evalsha[i] = e1 - e0;
            out->rt_usec[i] = u1 - u0;
            out->rt_admitted[i] = rt.admitted;
        }
    }
    srl_close(sub[0].lim);
    srl_close(sub[2].lim);
    if (rc != 0) {
        out->rc = rc < 0 ? SRL_ESYS : rc;
        return;
    }
    for (int i = 0; i < BENCH_COMPOUND_SUBJECTS; i++)
        out->cell[i].rate = median(rates[i], out->reps);
    out->available = 1;
}
