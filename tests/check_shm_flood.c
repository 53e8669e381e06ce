/*
 * check_shm_flood.c - the denial-flood cache of the shared store (issue 17,
 * item 5; src/shm/shm_flood.c, docs/design.md "The denial-flood cache").
 *
 *   traces:   every algorithm (and a compound, a penalty, a burst, a dry-run
 *             handle, a tier change): two cached handles on one segment and
 *             two handles without SRL_CONFIG_FLOOD_CACHE on another, the same
 *             random trace of acquires (costs 1..3, three keys, both
 *             handles), clock steps, resets, refunds and evictions; every
 *             decision equal field by field, the stats and per-key counts
 *             equal after the run, and the cache answered some denials
 *             (counted by the segment's denied counter not moving).
 *   silence:  a flood of denials on a cached handle leaves every byte of the
 *             segment as it was; an uncached handle's does not.
 *   8 procs:  one key, frozen time, 8 forked workers at 100x the limit:
 *             exactly the limit admitted, allowed + denied == requests in
 *             srl_stats and in the key's own counts once they closed.
 *   others:   a reset, a refund, an eviction then re-creation by another
 *             process are seen by a worker holding a cached denial on its
 *             very next request; fork does not count the parent's pending
 *             denials twice; 4 threads on one handle count exactly; a
 *             garbage gen only sends requests to the lock, and a gen forged
 *             back to the cached value answers no longer than `until`.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"
#include "shm_testutil.h"
#include "srl.h"
#include "testutil.h"

static const char *const policies[] = {
    "token_bucket:10/10s",
    "gcra:10/10s",
    "sliding_log:10/10s",
    "sliding_counter:10/10s",
    "token_bucket:5/10s + sliding_log:20/1m",
    "gcra:10/10s,penalty=30s",
    "token_bucket:10/10s,burst=15",
    "sliding_counter:10/10s,penalty=5s",
};
#define NPOL (int)(sizeof policies / sizeof policies[0])

static srl_config config_of(const char *policy, fake_clock *c, uint32_t flags)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_limits_parse_ex(policy, &cfg.limits, NULL), 0);
    cfg.capacity = 64;
    cfg.ticker = fake_ticker(c);
    cfg.lock_timeout_ms = 10000;
    cfg.flags = flags;
    return cfg;
}

static struct srl__shm *shm_of(srl_limiter *lim)
{
    return lim->impl;
}

/* The segment's denied counters summed without flushing any cache. */
static uint64_t raw_denied(srl_limiter *lim)
{
    struct srl__shm *s = shm_of(lim);
    uint64_t n = 0;
    for (uint64_t b = 0; b < s->buckets; b++)
        n += __atomic_load_n(&srl__shm_bucket(s, b)->denied, __ATOMIC_RELAXED);
    return n;
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void assert_same(const srl_decision *a, const srl_decision *b, int step)
{
    if (a->allowed != b->allowed || a->limit != b->limit || a->remaining != b->remaining ||
        a->retry_after_ns != b->retry_after_ns || a->reset_after_ns != b->reset_after_ns ||
        a->flags != b->flags || a->binding != b->binding || a->wait_ns != b->wait_ns ||
        a->reserved[0] != b->reserved[0] || a->reserved[1] != b->reserved[1])
        ck_abort_msg("step %d: cached {allowed %d remaining %u retry %llu reset %llu flags %u "
                     "binding %u} != locked {allowed %d remaining %u retry %llu reset %llu "
                     "flags %u binding %u}",
                     step, a->allowed, a->remaining, (unsigned long long)a->retry_after_ns,
                     (unsigned long long)a->reset_after_ns, a->flags, a->binding, b->allowed,
                     b->remaining, (unsigned long long)b->retry_after_ns,
                     (unsigned long long)b->reset_after_ns, b->flags, b->binding);
}

struct counts {
    uint64_t allowed[3], denied[3];
};

static int collect(const srl_entry *e, void *ctx)
{
    struct counts *c = ctx;
    /* keys "k0".."k2": the display holds them (key_display 8) */
    if (e->display_len == 2 && e->display[0] == 'k') {
        c->allowed[e->display[1] - '0'] += e->allowed;
        c->denied[e->display[1] - '0'] += e->denied;
    }
    return 0;
}

/* One random trace on (a1, a2) cached and (b1, b2) uncached; time from ca
 * and cb.  Returns how many denials the cache answered. */
static uint64_t run_trace(const char *policy, uint32_t flags, uint64_t seed, int steps,
                          int tiers)
{
    fake_clock *ca = fake_clock_shared(5 * SEC), *cb = fake_clock_shared(5 * SEC);
    srl_config cfa = config_of(policy, ca, flags | SRL_CONFIG_FLOOD_CACHE),
               cfb = config_of(policy, cb, flags);
    cfa.key_display = cfb.key_display = 8;
    srl_tier tier[1];
    if (tiers) {
        memset(tier, 0, sizeof tier);
        strcpy(tier[0].name, "paid");
        ck_assert_int_eq(srl_limits_parse_ex("gcra:20/10s", &tier[0].limits, NULL), 0);
        cfa.tiers = cfb.tiers = tier;
        cfa.tier_count = cfb.tier_count = 1;
    }
    srl_limiter *a1, *a2, *b1, *b2;
    char na[128], nb[128];
    strcpy(na, unique_name("flood"));
    strcpy(nb, unique_name("flood"));
    ck_assert_int_eq(srl_open_shared(na, &cfa, SRL_CREATE | SRL_EXCL, &a1), 0);
    ck_assert_int_eq(srl_open_shared(na, &cfa, 0, &a2), 0);
    ck_assert_int_eq(srl_open_shared(nb, &cfb, SRL_CREATE | SRL_EXCL, &b1), 0);
    ck_assert_int_eq(srl_open_shared(nb, &cfb, 0, &b2), 0);
    ck_assert_ptr_nonnull(shm_of(a2)->flood);
    ck_assert_ptr_null(shm_of(b2)->flood);
    uint64_t cached = 0;
    uint32_t maxcost = srl__tier_cmp(a1, 0)->min_permits < 3 ? srl__tier_cmp(a1, 0)->min_permits : 3;
    for (int i = 0; i < steps; i++) {
        uint64_t r = rnd(&seed);
        char key[3] = {'k', (char)('0' + r % 3), 0};
        r /= 3;
        unsigned op = (unsigned)(r % 100);
        r /= 100;
        int which = (int)(r % 2);
        r /= 2;
        srl_limiter *la = which ? a2 : a1, *lb = which ? b2 : b1;
        if (op < 80) {
            uint32_t cost = 1 + (uint32_t)(r % maxcost);
            r /= maxcost;
            uint32_t t = tiers && r % 8 == 0 ? 1 : 0;
            srl_decision da, db;
            uint64_t before = raw_denied(la);
            int rca = srl_acquire_tier(la, t, key, 2, cost, &da);
            int rcb = srl_acquire_tier(lb, t, key, 2, cost, &db);
            ck_assert_int_eq(rca, rcb);
            assert_same(&da, &db, i);
            if (rca == 0 && (!da.allowed || (da.flags & SRL_DECISION_WOULD_DENY)) &&
                raw_denied(la) == before)
                cached++;
        } else if (op < 92) {
            uint64_t step = (r % 4 == 0) ? (r / 4) % (3 * SEC) : (r / 4) % (200 * MS);
            ca->now += step;
            cb->now += step;
        } else if (op < 95) {
            ck_assert_int_eq(srl_reset_key(la, key, 2), srl_reset_key(lb, key, 2));
        } else if (op < 98) {
            ck_assert_int_eq(srl_refund(la, key, 2, 1), srl_refund(lb, key, 2, 1));
        } else {
            ck_assert_int_eq(srl_evict_idle(la), srl_evict_idle(lb));
        }
    }
    srl_stats sa, sb;
    ck_assert_int_eq(srl_stats_get(a1, &sa), 0);
    ck_assert_int_eq(srl_stats_get(b1, &sb), 0);
    ck_assert_uint_eq(sa.allowed, sb.allowed);
    ck_assert_uint_eq(sa.denied, sb.denied);
    ck_assert_uint_eq(sa.would_deny, sb.would_deny);
    ck_assert_uint_eq(sa.evicted, sb.evicted);
    struct counts ka = {{0}, {0}}, kb = {{0}, {0}};
    ck_assert_int_ge(srl_foreach(a1, collect, &ka), 0);
    ck_assert_int_ge(srl_foreach(b1, collect, &kb), 0);
    ck_assert_mem_eq(&ka, &kb, sizeof ka);
    ck_assert_int_eq(srl_check(a1, NULL, NULL), 0);
    srl_close(a1);
    srl_close(a2);
    srl_close(b1);
    srl_close(b2);
    srl_unlink(na);
    srl_unlink(nb);
    return cached;
}

START_TEST(cached_and_uncached_handles_decide_identically_on_random_traces)
{
    uint64_t cached = 0;
    for (uint64_t seed = 1; seed <= 6; seed++)
        cached += run_trace(policies[_i], 0, seed * 0x9e3779b97f4a7c15ull + (uint64_t)_i, 3000, 0);
    ck_assert_uint_gt(cached, 100);   /* the cache really answered */
}
END_TEST

START_TEST(a_dry_run_handle_is_cached_exactly_too)
{
    uint64_t cached = 0;
    for (uint64_t seed = 1; seed <= 4; seed++)
        cached += run_trace(policies[_i], SRL_CONFIG_DRY_RUN, seed * 7919 + (uint64_t)_i, 2000, 0);
    ck_assert_uint_gt(cached, 50);
}
END_TEST

START_TEST(a_key_changing_tier_is_decided_exactly)
{
    uint64_t cached = 0;
    for (uint64_t seed = 1; seed <= 4; seed++)
        cached += run_trace("token_bucket:10/10s", 0, seed * 104729, 2000, 1);
    ck_assert_uint_gt(cached, 50);
}
END_TEST

/* ------------------------------------------------------- silence */

START_TEST(a_flood_of_denials_writes_no_byte_of_the_segment)
{
    for (int nocache = 0; nocache <= 1; nocache++) {
        fake_clock *c = fake_clock_shared(5 * SEC);
        srl_config cfg = config_of(policies[_i], c, nocache ? 0 : SRL_CONFIG_FLOOD_CACHE);
        srl_limiter *lim;
        ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
        srl_decision d;
        uint64_t n = 0;
        do {   /* drain, then one more locked denial (and its ban, if any) */
            ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
            n++;
        } while (d.allowed);
        ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
        n++;
        struct srl__shm *s = shm_of(lim);
        unsigned char *copy = malloc(s->map_bytes);
        ck_assert_ptr_nonnull(copy);
        memcpy(copy, s->base, s->map_bytes);
        for (int i = 0; i < 1000; i++) {
            c->now += 1000;   /* 1 us a request: 1 ms in all, inside every copy's until */
            ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
            ck_assert_int_eq(d.allowed, 0);
        }
        if (nocache)
            ck_assert(memcmp(copy, s->base, s->map_bytes) != 0);
        else
            ck_assert_msg(memcmp(copy, s->base, s->map_bytes) == 0, "%s: a cached denial wrote",
                          policies[_i]);
        srl_stats st;
        ck_assert_int_eq(srl_stats_get(lim, &st), 0);   /* flushed: exact */
        ck_assert_uint_eq(st.allowed + st.denied, n + 1000);
        ck_assert_uint_eq(st.denied, n + 1000 - st.allowed);
        free(copy);
        srl_close(lim);
    }
}
END_TEST

/* ------------------------------------------------------- processes */

#define WORKERS 8
#define REQUESTS 20000
#define LIMIT 1000

START_TEST(eight_processes_flooding_one_key_are_counted_exactly)
{
    for (int trial = 0; trial < 3; trial++) {
        fake_clock *c = fake_clock_shared(5 * SEC);
        srl_config cfg = config_of(_i ? "gcra:1000/1h" : "token_bucket:1000/1h", c, SRL_CONFIG_FLOOD_CACHE);
        cfg.key_display = 8;
        char nm[128];
        strcpy(nm, unique_name("flood"));
        srl_limiter *lim;
        ck_assert_int_eq(srl_open_shared(nm, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
        struct spin_barrier *bar = shared_zeroed(4096);
        uint64_t *admitted = (uint64_t *)(bar + 1);
        pid_t pid[WORKERS];
        for (int w = 0; w < WORKERS; w++) {
            pid[w] = test_fork();
            if (pid[w] == 0) {
                srl_limiter *me;
                if (srl_open_shared(nm, &cfg, 0, &me) != 0)
                    _exit(2);
                spin_barrier_wait(bar, WORKERS);
                uint64_t ok = 0;
                for (int i = 0; i < REQUESTS; i++) {
                    srl_decision d;
                    if (srl_acquire(me, "hot", 3, 1, &d) != 0)
                        _exit(3);
                    ok += d.allowed;
                }
                __atomic_add_fetch(admitted, ok, __ATOMIC_RELAXED);
                srl_close(me);   /* flushes its cached denials */
                _exit(0);
            }
        }
        for (int w = 0; w < WORKERS; w++) {
            int st;
            ck_assert_int_eq(waitpid(pid[w], &st, 0), pid[w]);
            ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        srl_stats st;
        ck_assert_int_eq(srl_stats_get(lim, &st), 0);
        ck_assert_uint_eq(*admitted, LIMIT);
        ck_assert_uint_eq(st.allowed, LIMIT);
        ck_assert_uint_eq(st.allowed + st.denied, (uint64_t)WORKERS * REQUESTS);
        struct counts k = {{0}, {0}};
        ck_assert_int_ge(srl_foreach(lim, collect, &k), 0);   /* "hot" is not k0..k2 */
        srl_close(lim);
        srl_unlink(nm);
        munmap(bar, 4096);
    }
}
END_TEST

/* A worker denied (cached) on "hot", then told to ask again after the
 * parent changed the key: its answer comes back through a pipe. */
struct helper {
    pid_t pid;
    int go[2], back[2];
};

static void helper_start(struct helper *h, const char *nm, const srl_config *cfg)
{
    ck_assert_int_eq(pipe(h->go), 0);
    ck_assert_int_eq(pipe(h->back), 0);
    h->pid = test_fork();
    if (h->pid == 0) {
        srl_limiter *me;
        if (srl_open_shared(nm, cfg, 0, &me) != 0)
            _exit(2);
        char cmd;
        while (read(h->go[0], &cmd, 1) == 1) {
            if (cmd == 'q')
                break;
            srl_decision d;
            memset(&d, 0, sizeof d);
            if (srl_acquire(me, "hot", 3, 1, &d) != 0)
                _exit(3);
            if (write(h->back[1], &d, sizeof d) != (ssize_t)sizeof d)
                _exit(4);
        }
        srl_close(me);
        _exit(0);
    }
}

static srl_decision helper_ask(struct helper *h)
{
    srl_decision d;
    ck_assert_int_eq(write(h->go[1], "a", 1), 1);
    ck_assert_int_eq(read(h->back[0], &d, sizeof d), (ssize_t)sizeof d);
    return d;
}

static void helper_stop(struct helper *h)
{
    ck_assert_int_eq(write(h->go[1], "q", 1), 1);
    int st;
    ck_assert_int_eq(waitpid(h->pid, &st, 0), h->pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The cache is opt-in: another process's plain handle puts every denial in
 * the segment's counters at once (what rlctl and metrics read); one with
 * SRL_CONFIG_FLOOD_CACHE holds all but the first (locked) one until it
 * flushes (here: its close).  _i: 0 plain, 1 with the flag. */
START_TEST(only_a_handle_with_the_flag_defers_its_denials_counts)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_config cfg = config_of("token_bucket:10/10s", c, _i ? SRL_CONFIG_FLOOD_CACHE : 0);
    char nm[128];
    strcpy(nm, unique_name("flood"));
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(nm, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    struct helper h;
    helper_start(&h, nm, &cfg);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(helper_ask(&h).allowed, 1);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(helper_ask(&h).allowed, 0);
    ck_assert_uint_eq(raw_denied(lim), _i ? 1 : 5);
    helper_stop(&h);   /* its close flushes */
    ck_assert_uint_eq(raw_denied(lim), 5);
    srl_close(lim);
    srl_unlink(nm);
}
END_TEST

/* _i: 0 reset, 1 refund, 2 evict and re-create. */
START_TEST(a_change_by_another_process_is_seen_on_the_next_request)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_config cfg = config_of("token_bucket:10/10s", c, SRL_CONFIG_FLOOD_CACHE);
    char nm[128];
    strcpy(nm, unique_name("flood"));
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(nm, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    struct helper h;
    helper_start(&h, nm, &cfg);
    srl_decision d;
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(helper_ask(&h).allowed, 1);
    for (int i = 0; i < 5; i++) {   /* denied: the first under the lock, then cached */
        d = helper_ask(&h);
        ck_assert_int_eq(d.allowed, 0);
        ck_assert_uint_eq(d.retry_after_ns, SEC);
    }
    uint64_t denied_raw = raw_denied(lim);
    d = helper_ask(&h);   /* cached: the segment's count does not move */
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(raw_denied(lim), denied_raw);
    if (_i == 0) {
        ck_assert_int_eq(srl_reset_key(lim, "hot", 3), 0);
        d = helper_ask(&h);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.remaining, 9);
    } else if (_i == 1) {
        ck_assert_int_eq(srl_refund(lim, "hot", 3, 2), 0);
        d = helper_ask(&h);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.remaining, 1);
    } else {
        c->now += 10 * SEC;   /* at rest: evicted, then re-created and drained by us */
        ck_assert_int_eq(srl_evict_idle(lim), 1);
        for (int i = 0; i < 10; i++) {
            ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
            ck_assert_int_eq(d.allowed, 1);
        }
        c->now += 500 * MS;
        d = helper_ask(&h);   /* the old copy would admit at this time; the new state denies */
        ck_assert_int_eq(d.allowed, 0);
        ck_assert_uint_eq(d.retry_after_ns, 500 * MS);
    }
    helper_stop(&h);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.allowed + st.denied, _i == 2 ? 27 : 17);
    srl_close(lim);
    srl_unlink(nm);
}
END_TEST

START_TEST(a_fork_does_not_count_the_parents_pending_denials_twice)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_config cfg = config_of("gcra:10/10s", c, SRL_CONFIG_FLOOD_CACHE);
    char nm[128];
    strcpy(nm, unique_name("flood"));
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(nm, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    srl_decision d;
    for (int i = 0; i < 110; i++)
        ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
    ck_assert_uint_lt(raw_denied(lim), 100);   /* most are pending in the cache */
    pid_t pid = test_fork();
    if (pid == 0) {
        /* The child's own: 5 more denials, then close (flushes only these). */
        for (int i = 0; i < 5; i++)
            if (srl_acquire(lim, "hot", 3, 1, &d) != 0 || d.allowed)
                _exit(3);
        srl_stats st;
        if (srl_stats_get(lim, &st) != 0)
            _exit(4);
        srl_close(lim);
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);
    ck_assert_uint_eq(s.allowed, 10);
    ck_assert_uint_eq(s.denied, 105);
    srl_close(lim);
    srl_unlink(nm);
}
END_TEST

#define THREADS 16   /* two per shard: threads share shards */
struct thr {
    srl_limiter *lim;
    uint64_t ok;
};

static void *thread_flood(void *arg)
{
    struct thr *t = arg;
    for (int i = 0; i < REQUESTS; i++) {
        srl_decision d;
        ck_assert_int_eq(srl_acquire(t->lim, "hot", 3, 1, &d), 0);
        t->ok += d.allowed;
    }
    return NULL;
}

START_TEST(threads_on_one_handle_are_counted_exactly)
{
    for (int trial = 0; trial < 3; trial++) {
        fake_clock *c = fake_clock_shared(5 * SEC);
        srl_config cfg = config_of("token_bucket:1000/1h", c, SRL_CONFIG_FLOOD_CACHE);
        srl_limiter *lim;
        ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
        pthread_t th[THREADS];
        struct thr t[THREADS];
        for (int i = 0; i < THREADS; i++) {
            t[i] = (struct thr){lim, 0};
            ck_assert_int_eq(pthread_create(&th[i], NULL, thread_flood, &t[i]), 0);
        }
        uint64_t ok = 0;
        for (int i = 0; i < THREADS; i++) {
            ck_assert_int_eq(pthread_join(th[i], NULL), 0);
            ok += t[i].ok;
        }
        srl_stats st;
        ck_assert_int_eq(srl_stats_get(lim, &st), 0);
        ck_assert_uint_eq(ok, LIMIT);
        ck_assert_uint_eq(st.allowed, LIMIT);
        ck_assert_uint_eq(st.denied, (uint64_t)THREADS * REQUESTS - LIMIT);
        srl_close(lim);
    }
}
END_TEST

/* ------------------------------------------------------- hostile gen */

START_TEST(a_garbage_gen_only_sends_requests_to_the_lock_and_a_forged_one_ends_at_until)
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    /* A 30 s ban: the copy itself would deny for 30 s, so only `until`
     * (at most 1 s after the denial) ends a forged gen's answers. */
    srl_config cfg = config_of("token_bucket:10/10s,penalty=30s", c, SRL_CONFIG_FLOOD_CACHE);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    struct srl__shm *s = shm_of(lim);
    srl_decision d;
    for (int i = 0; i < 11; i++)
        ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    /* Garbage in every bucket's gen: the next request is decided under
     * the lock (the counter moves) and exactly. */
    for (uint64_t b = 0; b < s->buckets; b++)
        srl__shm_bucket(s, b)->gen ^= 0xa5a5a5a5u;
    uint64_t before = raw_denied(lim);
    ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 30 * SEC);
    ck_assert_uint_gt(raw_denied(lim), before);
    /* Now cached again.  A writer that resets the key and forges gen back
     * (it could as well have written the state): the copy answers, but only
     * until `until` = the denial's time + its retry_after. */
    uint32_t g[64];
    ck_assert_uint_le(s->buckets, 64);
    for (uint64_t b = 0; b < s->buckets; b++)
        g[b] = srl__shm_bucket(s, b)->gen;
    ck_assert_int_eq(srl_reset_key(lim, "hot", 3), 0);
    for (uint64_t b = 0; b < s->buckets; b++)
        srl__shm_bucket(s, b)->gen = g[b];
    ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);   /* the forged gen is believed ... */
    ck_assert_uint_eq(d.retry_after_ns, 30 * SEC);
    c->now += SEC;                    /* ... until `until`: 1 s after the denial */
    ck_assert_int_eq(srl_acquire(lim, "hot", 3, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 9);   /* the reset state's answer, not the copy's */
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_close(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shm_flood");
    TCase *tc = tcase_create("flood");
    tcase_set_timeout(tc, 280);
    tcase_add_loop_test(tc, cached_and_uncached_handles_decide_identically_on_random_traces, 0,
                        NPOL);
    tcase_add_loop_test(tc, a_dry_run_handle_is_cached_exactly_too, 0, NPOL);
    tcase_add_test(tc, a_key_changing_tier_is_decided_exactly);
    tcase_add_loop_test(tc, a_flood_of_denials_writes_no_byte_of_the_segment, 0, NPOL);
    tcase_add_loop_test(tc, eight_processes_flooding_one_key_are_counted_exactly, 0, 2);
    tcase_add_loop_test(tc, a_change_by_another_process_is_seen_on_the_next_request, 0, 3);
    tcase_add_loop_test(tc, only_a_handle_with_the_flag_defers_its_denials_counts, 0, 2);
    tcase_add_test(tc, a_fork_does_not_count_the_parents_pending_denials_twice);
    tcase_add_test(tc, threads_on_one_handle_are_counted_exactly);
    tcase_add_test(tc, a_garbage_gen_only_sends_requests_to_the_lock_and_a_forged_one_ends_at_until);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"flood"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
