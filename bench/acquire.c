/*
 * acquire.c - per-decision cost of srl_acquire on each store.
 *
 * One subject = one algorithm on one store, over one key count and one
 * request sequence:
 *   1. open a table with room for the keys (capacity 1.25 x keys, so no
 *      timed request finds its buckets full; untracked decisions are
 *      counted and reported anyway);
 *   2. warm it: one request for every key, so every key is live, then one
 *      untimed pass over the sequence so caches and TLBs hold what the
 *      timed passes will touch;
 *   3. main.c times it with the floor and the other stores of its group
 *      (bench_time_interleaved), counting allowed and untracked decisions.
 *
 * The policies, capacities and store openers are in setup.c.  Policies:
 * "allow" ones never deny during a run (1e9 permits per hour);
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

static uint64_t batch_acquire(void *ctx, uint64_t start, uint64_t count)
{
    bench_acq *c = ctx;
    srl_decision d;
    uint64_t allowed = 0, untracked = 0;
    for (uint64_t i = 0; i < count; i++) {
        const unsigned char *key = bench_key_at(c->k, c->idx + start, i, count);
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
    bench_acq *c = ctx;
    srl_decision d;
    uint64_t allowed = 0, untracked = 0;
    for (uint64_t i = 0; i < count; i++) {
        const unsigned char *key = bench_key_at(c->k, c->idx + start, i, count);
        int rc = bench_global_acquire(&c->g, c->lim, key, BENCH_KEY_LEN, &d);
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

static int acq_open(bench_acq *a, bench_store s, const srl_limits *l, srl_ticker ticker,
                    uint32_t flags, const bench_keys *k, uint64_t nkeys, const bench_seq *seq);

int bench_acq_open_flags(bench_acq *a, bench_store s, srl_policy p, srl_ticker ticker,
                         uint32_t flags, const bench_keys *k, uint64_t nkeys,
                         const bench_seq *seq)
{
    srl_limits l;
    if (srl_limits_of(&p, &l) != 0) {
        memset(a, 0, sizeof *a);
        return a->rc = SRL_EPOLICY;
    }
    return acq_open(a, s, &l, ticker, flags, k, nkeys, seq);
}

int bench_acq_open(bench_acq *a, bench_store s, srl_policy p, srl_ticker ticker,
                   const bench_keys *k, uint64_t nkeys, const bench_seq *seq)
{
    return bench_acq_open_flags(a, s, p, ticker, 0, k, nkeys, seq);
}

int bench_acq_open_limits(bench_acq *a, bench_store s, const srl_limits *l, srl_ticker ticker,
                          const bench_keys *k, uint64_t nkeys, const bench_seq *seq)
{
    return acq_open(a, s, l, ticker, 0, k, nkeys, seq);
}

static int acq_open(bench_acq *a, bench_store s, const srl_limits *l, srl_ticker ticker,
                    uint32_t flags, const bench_keys *k, uint64_t nkeys, const bench_seq *seq)
{
    memset(a, 0, sizeof *a);
    a->k = k;
    a->idx = seq->idx;
    a->seq_len = seq->len;
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.limits = *l;
    cfg.capacity = bench_capacity_for(nkeys);
    cfg.ticker = ticker;
    cfg.flags = flags;
    int rc = bench_open(s, &cfg, &a->lim);
    if (rc == 0 && s == BENCH_SHARED_GLOBAL)
        rc = bench_global_lock_make(&a->g);
    if (rc == 0)
        rc = srl_info_get(a->lim, &a->info);
    if (rc != 0) {
        a->rc = rc;
        bench_acq_close(a);
        return rc;
    }
    srl_decision d;
    for (uint64_t i = 0; i < nkeys; i++) {
        rc = srl_acquire(a->lim, bench_key(k, i), BENCH_KEY_LEN, 1, &d);
        if (rc != 0 && a->rc == 0)
            a->rc = rc;
    }
    /* The local store grows its hash table in liburcu's worker thread after
     * the inserts; let that finish rather than time it. */
    usleep(50000);
    bench_batch_fn fn = a->g.m ? batch_acquire_global : batch_acquire;
    uint64_t warm = seq->len / 4;
    for (uint64_t pos = 0; pos + BENCH_BATCH <= warm; pos += BENCH_BATCH)
        fn(a, pos, BENCH_BATCH);
    a->allowed = a->untracked = a->total = 0;
    return a->rc;
}

void bench_acq_close(bench_acq *a)
{
    bench_global_lock_free(&a->g);
    srl_close(a->lim);
    a->lim = NULL;
}

bench_subject bench_acq_subject(bench_acq *a)
{
    bench_subject sub = {NULL, a, a->seq_len, 0};
    if (a->lim != NULL && a->rc == 0)
        sub.fn = a->g.m ? batch_acquire_global : batch_acquire;
    return sub;
}

void bench_acq_cell(const bench_acq *a, const bench_subject *sub, bench_cell *out)
{
    memset(out, 0, sizeof *out);
    out->rc = a->rc != 0 ? a->rc : (sub->fn == NULL ? SRL_EINVAL : 0);
    out->ns = sub->ns;
    out->allowed_frac = a->total ? (double)a->allowed / (double)a->total : 0;
    out->untracked = a->untracked;
    out->segment_bytes = a->info.segment_bytes;
    out->slot_bytes = a->info.slot_bytes;
}

static uint64_t batch_floor(void *ctx, uint64_t start, uint64_t count)
{
    bench_floor_run *c = ctx;
    uint64_t acc = 0;
    for (uint64_t i = 0; i < count; i++)
        acc += bench_floor_op(c->f, bench_key_at(c->k, c->idx + start, i, count), BENCH_KEY_LEN);
    return acc;
}

bench_subject bench_floor_subject(bench_floor_run *r, const bench_seq *seq)
{
    bench_subject sub = {batch_floor, r, seq->len, 0};
    uint64_t warm = seq->len / 4;
    for (uint64_t pos = 0; pos + BENCH_BATCH <= warm; pos += BENCH_BATCH)
        batch_floor(r, pos, BENCH_BATCH);
    return sub;
}
