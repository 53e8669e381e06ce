/*
 * baselines.c - what srl is measured against, in the same run.
 *
 * The floor.  The least work any host-wide keyed limiter must do per
 * decision: a keyed hash of the key (SipHash-x24 from libsodium, 128 bits,
 * as srl's fingerprint), one cache-line-aligned entry picked by that hash
 * in a table of the same byte size as srl's segment, a robust
 * process-shared mutex locked and unlocked in that entry, and one read and
 * one write of every word of a slot-sized block next to the mutex.  No
 * clock, no algorithm, no probing of a second bucket, no key comparison.
 * The table is an anonymous MAP_SHARED mapping: shmem pages, like a
 * /dev/shm segment's, so TLB and page costs match.
 *
 * The global lock.  The simplest correct design: one robust process-shared mutex
 * (in its own MAP_SHARED page, so forked workers share it) held around
 * every srl_acquire.  It costs one extra lock per decision in one process;
 * in several it serialises every decision of the host.
 *
 * The components.  Hot-cache costs of the clock read, the hash, the mutex
 * and each algorithm's srl_state_acquire, to explain where a decision's
 * nanoseconds go; and the hash, the clock and a locked CAS back to back,
 * the least a decision of a precise-clock policy does.  Then one dependent
 * miss in tables of three sizes (the chase): what a miss costs grows with
 * the table it is in.
 *
 * Invariants: an entry's mutex and slot never straddle two entries; the
 * entry index is below f->entries (multiply-shift reduction).
 * Concurrency: a floor entry's slot is read and written only under that
 * entry's mutex; any number of forked processes may run floor ops at once.
 */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <sodium.h>

int bench_robust_mutex_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) != 0)
        return SRL_ESYS;
    int rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return rc == 0 ? 0 : SRL_ESYS;
}

int bench_robust_lock(pthread_mutex_t *m)
{
    int rc = pthread_mutex_lock(m);
    if (rc == EOWNERDEAD) {
        /* Only a killed benchmark child leaves this; nothing to repair. */
        pthread_mutex_consistent(m);
        rc = 0;
    }
    return rc;
}

/* ------------------------------------------------------------- floor */

#define FLOOR_SLOT_OFF ((sizeof(pthread_mutex_t) + 7) & ~(size_t)7)

int bench_floor_make(bench_floor *f, uint64_t table_bytes, uint32_t slot_bytes)
{
    memset(f, 0, sizeof *f);
    if (slot_bytes < 8)
        slot_bytes = 8;
    f->slot_bytes = slot_bytes & ~7u;
    f->entry_bytes = (FLOOR_SLOT_OFF + f->slot_bytes + 63) & ~(size_t)63;
    f->entries = table_bytes / f->entry_bytes;
    if (f->entries == 0)
        f->entries = 1;
    f->map_bytes = f->entries * f->entry_bytes;
    f->map = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        return SRL_ENOMEM;
    }
    randombytes_buf(f->hkey, sizeof f->hkey);
    for (uint64_t i = 0; i < f->entries; i++) {
        int rc = bench_robust_mutex_init(
            (pthread_mutex_t *)((char *)f->map + i * f->entry_bytes));
        if (rc != 0) {
            bench_floor_free(f);
            return rc;
        }
    }
    return 0;
}

void bench_floor_free(bench_floor *f)
{
    if (f->map != NULL)
        munmap(f->map, f->map_bytes);
    f->map = NULL;
}

uint64_t bench_floor_op(bench_floor *f, const unsigned char *key, size_t len)
{
    uint64_t h[2];
    crypto_shorthash_siphashx24((unsigned char *)h, key, len, f->hkey);
    uint64_t i = (uint64_t)(((unsigned __int128)h[0] * f->entries) >> 64);
    char *e = (char *)f->map + i * f->entry_bytes;
    pthread_mutex_t *m = (pthread_mutex_t *)e;
    uint64_t *w = (uint64_t *)(e + FLOOR_SLOT_OFF);
    uint32_t nw = f->slot_bytes / 8;
    bench_robust_lock(m);
    uint64_t acc = h[1];
    for (uint32_t j = 0; j < nw; j++)
        acc += w[j];
    for (uint32_t j = 0; j < nw; j++)
        w[j] = acc + j;
    pthread_mutex_unlock(m);
    return acc;
}

/* ------------------------------------------------------- global lock */

int bench_global_lock_make(bench_global_lock *g)
{
    void *p = mmap(NULL, sizeof(pthread_mutex_t), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return SRL_ENOMEM;
    g->m = p;
    int rc = bench_robust_mutex_init(g->m);
    if (rc != 0)
        bench_global_lock_free(g);
    return rc;
}

void bench_global_lock_free(bench_global_lock *g)
{
    if (g->m != NULL)
        munmap(g->m, sizeof(pthread_mutex_t));
    g->m = NULL;
}

int bench_global_acquire(bench_global_lock *g, srl_limiter *lim,
                         const void *key, size_t len, srl_decision *d)
{
    bench_robust_lock(g->m);
    int rc = srl_acquire(lim, key, len, 1, d);
    pthread_mutex_unlock(g->m);
    return rc;
}

/* -------------------------------------------------------- components */

struct comp_ctx {
    const bench_keys *k;
    unsigned char hkey[16];
    pthread_mutex_t m;
    srl_policy p;
    uint64_t state[16];       /* big enough for every allow policy's state */
    uint64_t now;
};

static uint64_t batch_clock(void *ctx, uint64_t start, uint64_t count)
{
    (void)ctx;
    (void)start;
    uint64_t acc = 0;
    for (uint64_t i = 0; i < count; i++)
        acc += srl_monotonic_ns(NULL);
    return acc;
}

static uint64_t batch_coarse(void *ctx, uint64_t start, uint64_t count)
{
    (void)ctx;
    (void)start;
    uint64_t acc = 0;
    for (uint64_t i = 0; i < count; i++)
        acc += srl_monotonic_coarse_ns(NULL);
    return acc;
}

/* The first word of key i's SipHash-x24 (the floor's and srl's hash). */
static uint64_t key_hash(const struct comp_ctx *c, uint64_t i)
{
    uint64_t h[2];
    crypto_shorthash_siphashx24((unsigned char *)h, bench_key(c->k, i & 1023), BENCH_KEY_LEN,
                                c->hkey);
    return h[0];
}

static uint64_t batch_siphash(void *ctx, uint64_t start, uint64_t count)
{
    struct comp_ctx *c = ctx;
    uint64_t acc = 0;
    for (uint64_t i = 0; i < count; i++)
        acc += key_hash(c, start + i);
    return acc;
}

/* The steps no decision of a precise-clock policy can skip, in the order
 * the lock-free GCRA path takes them: hash the key, read the clock, and
 * (batch_hash_clock_cas) swap one hot word with a locked compare-and-swap.
 * What a decision costs above these is the table, the algorithm and the
 * counting (BENCHMARKS.md, "The least a decision costs"). */
static uint64_t batch_hash_clock(void *ctx, uint64_t start, uint64_t count)
{
    struct comp_ctx *c = ctx;
    uint64_t acc = 0;
    for (uint64_t i = 0; i < count; i++)
        acc += key_hash(c, start + i) + srl_monotonic_ns(NULL);
    return acc;
}

static uint64_t batch_hash_clock_cas(void *ctx, uint64_t start, uint64_t count)
{
    struct comp_ctx *c = ctx;
    uint64_t acc = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t h = key_hash(c, start + i), now = srl_monotonic_ns(NULL);
        uint64_t *w = &c->state[h & 15];
        uint64_t old = __atomic_load_n(w, __ATOMIC_RELAXED);
        __atomic_compare_exchange_n(w, &old, old + now, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
        acc += old;
    }
    return acc;
}

static uint64_t batch_mutex(void *ctx, uint64_t start, uint64_t count)
{
    struct comp_ctx *c = ctx;
    (void)start;
    for (uint64_t i = 0; i < count; i++) {
        bench_robust_lock(&c->m);
        pthread_mutex_unlock(&c->m);
    }
    return count;
}

static uint64_t batch_mutex_clock(void *ctx, uint64_t start, uint64_t count)
{
    struct comp_ctx *c = ctx;
    (void)start;
    struct timespec far = {(time_t)1 << 40, 0};
    for (uint64_t i = 0; i < count; i++) {
        pthread_mutex_clocklock(&c->m, CLOCK_MONOTONIC, &far);
        pthread_mutex_unlock(&c->m);
    }
    return count;
}

static uint64_t batch_algo(void *ctx, uint64_t start, uint64_t count)
{
    struct comp_ctx *c = ctx;
    (void)start;
    uint64_t acc = 0;
    srl_decision d;
    for (uint64_t i = 0; i < count; i++) {
        /* 1 us apart: the log and the counters see real time pass. */
        c->now += 1000;
        srl_state_acquire(&c->p, c->state, c->now, 1, &d);
        acc += (uint64_t)d.allowed;
    }
    return acc;
}

/* One dependent load at a time around a random cycle through every line of
 * a shared anonymous mapping (a segment's kind of memory): the cost of one
 * miss the prefetcher cannot guess, in a table of that size. */
struct chase_ctx {
    uint64_t *m;
    uint64_t at;
};

static uint64_t batch_chase(void *ctx, uint64_t start, uint64_t count)
{
    struct chase_ctx *c = ctx;
    (void)start;
    uint64_t p = c->at;
    for (uint64_t i = 0; i < count; i++)
        p = c->m[p];
    c->at = p;
    return p;
}

static double chase_ns(const bench_opts *q, size_t bytes)
{
    size_t lines = bytes / 64, words = 64 / sizeof(uint64_t);
    uint64_t *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    uint32_t *order = malloc(lines * sizeof *order);
    if (m == MAP_FAILED || order == NULL) {
        if (m != MAP_FAILED)
            munmap(m, bytes);
        free(order);
        return -1;
    }
    /* Sattolo's shuffle: one cycle through all the lines. */
    bench_rng r = {0x5eed};
    for (size_t i = 0; i < lines; i++)
        order[i] = (uint32_t)i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = (size_t)(bench_rng_next(&r) % i);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        m[(size_t)order[i] * words] = (uint64_t)order[(i + 1) % lines] * words;
    struct chase_ctx c = {m, (uint64_t)order[0] * words};
    free(order);
    double ns = bench_time_batches(q, batch_chase, &c, 1u << 20);
    munmap(m, bytes);
    return ns;
}

void bench_components_measure(const bench_opts *o, bench_components *out)
{
    bench_opts q = *o;
    q.seconds = o->seconds / 2;
    struct comp_ctx c;
    memset(&c, 0, sizeof c);
    bench_keys k;
    if (bench_keys_make(&k, 1024) != 0) {
        memset(out, 0, sizeof *out);
        return;
    }
    c.k = &k;
    randombytes_buf(c.hkey, sizeof c.hkey);
    bench_robust_mutex_init(&c.m);
    out->clock_ns = bench_time_batches(&q, batch_clock, &c, 1u << 20);
    out->coarse_ns = bench_time_batches(&q, batch_coarse, &c, 1u << 20);
    out->siphash_ns = bench_time_batches(&q, batch_siphash, &c, 1u << 20);
    out->hash_clock_ns = bench_time_batches(&q, batch_hash_clock, &c, 1u << 20);
    out->hash_clock_cas_ns = bench_time_batches(&q, batch_hash_clock_cas, &c, 1u << 20);
    out->mutex_ns = bench_time_batches(&q, batch_mutex, &c, 1u << 20);
    out->mutex_clock_ns = bench_time_batches(&q, batch_mutex_clock, &c, 1u << 20);
    for (int a = 0; a < 4; a++) {
        c.p = bench_policy_allow((srl_algorithm)a);
        c.now = 1000000000ull;
        if (srl_state_size(&c.p) > sizeof c.state ||
            srl_state_init(&c.p, c.state, c.now) != 0) {
            out->algo_ns[a] = -1;
            continue;
        }
        out->algo_ns[a] = bench_time_batches(&q, batch_algo, &c, 1u << 20);
    }
    for (int i = 0; i < BENCH_CHASE_SIZES; i++)
        out->chase_ns[i] = chase_ns(&q, (size_t)BENCH_CHASE_MIB[i] << 20);
    pthread_mutex_destroy(&c.m);
    bench_keys_free(&k);
}
