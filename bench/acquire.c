/*
 * acquire.c - per-decision cost of srl_acquire on each store.
 *
 * One cell = one algorithm, one store, one key count, one distribution:
 *   1. open a table with room for the keys (capacity 1.25 x keys, so no
 *      timed request finds its buckets full; untracked decisions are
 *      counted and reported anyway);
 *   2. warm it: one request for every key, so every key is live, then one
 *      untimed pass over the sequence so caches and TLBs hold what the
 *      timed passes will touch;
 *   3. time srl_acquire (cost 1) over the pre-generated sequence with
 *      bench_time_batches, counting allowed and untracked decisions.
 *
 * Policies: "allow" ones never deny during a run (1e9 permits per hour);
 * sliding_log cannot have a huge limit (its state is 8 B per permit), so it
 * gets 8 permits per 10 us, which admits most requests of a uniform run and
 * denies the hottest Zipf keys; its allowed fraction is printed next to its
 * cost.  "deny" policies admit one request per key per hour, so after the
 * warm-up every timed decision is a denial.
 *
 * Shared segments are created under a fresh name and unlinked as soon as
 * they are open: the mapping stays valid (it is a real /dev/shm segment),
 * forked children inherit it, and no run leaves a segment behind.
 *
 * Concurrency: single process (scaling.c forks).
 */
#include "bench.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

const char *bench_store_name(bench_store s)
{
    switch (s) {
    case BENCH_SHARED: return "shared";
    case BENCH_LOCAL: return "local";
    case BENCH_SHARED_GLOBAL: return "shared+global lock";
    }
    return "?";
}

srl_policy bench_policy_allow(srl_algorithm a)
{
    if (a == SRL_SLIDING_LOG)
        return (srl_policy){a, 8, 10000ull};
    return (srl_policy){a, 1000000000u, 3600ull * 1000000000ull};
}

srl_policy bench_policy_deny(srl_algorithm a)
{
    return (srl_policy){a, 1, 3600ull * 1000000000ull};
}

uint64_t bench_capacity_for(uint64_t nkeys)
{
    return nkeys + nkeys / 4 + 64;
}

int bench_open(bench_store s, const srl_config *cfg, srl_limiter **out)
{
    if (s == BENCH_LOCAL)
        return srl_open_local(cfg, out);
#ifndef SRL_BENCH_SHARED
    *out = NULL;
    return SRL_ENOTSUP;
#else
    char name[64];
    snprintf(name, sizeof name, "/srl-bench-%d-%08x%08x", (int)getpid(),
             randombytes_random(), randombytes_random());
    int rc = srl_open_shared(name, cfg, SRL_CREATE | SRL_EXCL, out);
    if (rc == 0)
        srl_unlink(name);
    return rc;
#endif
}

struct acq_ctx {
    srl_limiter *lim;
    bench_global_lock *g;     /* non-NULL: wrap each call in the global lock */
    const bench_keys *k;
    const uint32_t *idx;
    uint64_t allowed, untracked, total;
    int rc;
};

static uint64_t batch_acquire(void *ctx, uint64_t start, uint64_t count)
{
    struct acq_ctx *c = ctx;
    srl_decision d;
    uint64_t allowed = 0, untracked = 0;
    for (uint64_t i = 0; i < count; i++) {
        const unsigned char *key = bench_key(c->k, c->idx[start + i]);
        int rc = srl_acquire(c->lim, key, BENCH_KEY_LEN, 1, &d);
        if (rc != 0 && c->rc == 0)
            c->rc = rc;
        allowed += (uint64_t)d.allowed;
        untracked += (d.flags & SRL_DECISION_UNTRACKED) != 0;
    }
    c->allowed += allowed;
    c->untracked += untracked;
    c->total += count;
    return allowed;
}

static uint64_t batch_acquire_global(void *ctx, uint64_t start, uint64_t count)
{
    struct acq_ctx *c = ctx;
    srl_decision d;
    uint64_t allowed = 0, untracked = 0;
    for (uint64_t i = 0; i < count; i++) {
        const unsigned char *key = bench_key(c->k, c->idx[start + i]);
        int rc = bench_global_acquire(c->g, c->lim, key, BENCH_KEY_LEN, &d);
        if (rc != 0 && c->rc == 0)
            c->rc = rc;
        allowed += (uint64_t)d.allowed;
        untracked += (d.flags & SRL_DECISION_UNTRACKED) != 0;
    }
    c->allowed += allowed;
    c->untracked += untracked;
    c->total += count;
    return allowed;
}

uint64_t bench_coarse_ns(void *ignored)
{
    (void)ignored;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void bench_acquire_cell(const bench_opts *o, bench_store s, srl_policy p,
                        const bench_keys *k, uint64_t nkeys,
                        const bench_seq *seq, bench_cell *out)
{
    bench_acquire_cell_ticker(o, s, p, (srl_ticker){NULL, NULL}, k, nkeys, seq, out);
}

void bench_acquire_cell_ticker(const bench_opts *o, bench_store s, srl_policy p,
                               srl_ticker ticker, const bench_keys *k, uint64_t nkeys,
                               const bench_seq *seq, bench_cell *out)
{
    memset(out, 0, sizeof *out);
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = p;
    cfg.ticker = ticker;
    cfg.capacity = bench_capacity_for(nkeys);
    srl_limiter *lim = NULL;
    bench_global_lock g = {NULL};
    int rc = bench_open(s, &cfg, &lim);
    if (rc == 0 && s == BENCH_SHARED_GLOBAL)
        rc = bench_global_lock_make(&g);
    if (rc != 0) {
        out->rc = rc;
        srl_close(lim);
        return;
    }
    srl_info info;
    if (srl_info_get(lim, &info) == 0) {
        out->segment_bytes = info.segment_bytes;
        out->slot_bytes = info.slot_bytes;
    }
    struct acq_ctx c = {lim, g.m ? &g : NULL, k, seq->idx, 0, 0, 0, 0};
    srl_decision d;
    for (uint64_t i = 0; i < nkeys; i++) {
        rc = srl_acquire(lim, bench_key(k, i), BENCH_KEY_LEN, 1, &d);
        if (rc != 0 && c.rc == 0)
            c.rc = rc;
    }
    /* The local store grows its hash table in liburcu's worker thread after
     * the inserts; let that finish rather than time it. */
    usleep(50000);
    bench_batch_fn fn = c.g ? batch_acquire_global : batch_acquire;
    uint64_t warm = seq->len < (1u << 21) ? seq->len : (1u << 21);
    for (uint64_t pos = 0; pos + BENCH_BATCH <= warm; pos += BENCH_BATCH)
        fn(&c, pos, BENCH_BATCH);
    c.allowed = c.untracked = c.total = 0;
    out->ns = bench_time_batches(o, fn, &c, seq->len);
    out->allowed_frac = c.total ? (double)c.allowed / (double)c.total : 0;
    out->untracked = c.untracked;
    out->rc = c.rc;
    bench_global_lock_free(&g);
    srl_close(lim);
}

struct floor_ctx {
    bench_floor *f;
    const bench_keys *k;
    const uint32_t *idx;
};

static uint64_t batch_floor(void *ctx, uint64_t start, uint64_t count)
{
    struct floor_ctx *c = ctx;
    uint64_t acc = 0;
    for (uint64_t i = 0; i < count; i++)
        acc += bench_floor_op(c->f, bench_key(c->k, c->idx[start + i]),
                              BENCH_KEY_LEN);
    return acc;
}

double bench_floor_cell(const bench_opts *o, bench_floor *f, const bench_keys *k,
                        const bench_seq *seq)
{
    struct floor_ctx c = {f, k, seq->idx};
    uint64_t warm = seq->len < (1u << 21) ? seq->len : (1u << 21);
    for (uint64_t pos = 0; pos + BENCH_BATCH <= warm; pos += BENCH_BATCH)
        batch_floor(&c, pos, BENCH_BATCH);
    return bench_time_batches(o, batch_floor, &c, seq->len);
}
