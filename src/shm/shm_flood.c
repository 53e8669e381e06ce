/*
 * shm_flood.c - the denial-flood cache of a shared-memory handle (issue 17,
 * item 5): a key denied under its bucket lock is remembered, per handle and
 * per thread, with a private copy of its state; a later plain srl_acquire of
 * the same key and tier is answered from that copy, with no lock taken and
 * no byte of the segment written, as long as the bucket's gen word says no
 * slot of the bucket changed since.  docs/design.md, "The denial-flood
 * cache (issue 17, item 5)", has the argument; the rules in short:
 *
 * WHAT IT HOLDS
 *   struct srl__shm_flood: FLOOD_SHARDS shards, a thread uses shard
 *   (its thread number % FLOOD_SHARDS).  A shard holds FLOOD_WAYS entries,
 *   direct-mapped by a fingerprint byte.  An entry: the key's fingerprint,
 *   its bucket, the tier, the bucket's gen and the slot's whole state as they
 *   were under the lock right after a denial, the end of its validity
 *   (`until`), and `pending`: denials answered here and not yet added to the
 *   segment's counters.
 *
 * INVARIANTS
 *   - An entry answers only (fingerprint, tier) equal to its own, while
 *     now < until and the bucket's gen equals the entry's.  Every write
 *     that can change what a slot of the bucket decides bumps gen under the
 *     bucket lock (shm.h, struct srl__shm_bucket.gen; shm_table.c,
 *     shm_slot.c, shm_walk.c), so gen equal means the slot still holds the
 *     copied state, bit for bit.
 *   - It answers only what the locked path would: srl__compound_decide on a
 *     private copy of that state, at the same ticker's now, and only if that
 *     is a denial that leaves the copy unchanged (a denial that writes, a
 *     ban starting, goes to the lock).  The answer is therefore the pure
 *     decision function's on the slot's state: every field exact.
 *   - until <= the recording time + min(retry_after, FLOOD_MAX_AGE_NS): the
 *     32-bit gen cannot wrap back to an entry's value in that time by real
 *     bumps (each takes a lock), and a garbage gen cannot keep an old copy
 *     answering for longer.
 *   - pending < FLOOD_PENDING_MAX; reaching it sends the next request to the
 *     lock, which flushes.  pending is added to the segment under the
 *     bucket's lock: on this thread's next locked decision in that bucket,
 *     on srl_stats_get or srl_foreach of any shared handle of the process
 *     (every cache of the process, every shard: the registry below), at
 *     srl_close (that handle's).  A key no longer in its bucket then gets
 *     only the bucket's part.
 *
 * LOCKS
 *   Each shard has a lock word, only ever taken with one compare-and-swap
 *   (never waited for on the decision path): a busy shard means "no cache"
 *   for that request.  A thread holding a bucket lock may try a shard, never
 *   wait for one; the flush (stats, close) waits for a shard and then takes
 *   bucket locks.  Nobody waits for a shard while holding a bucket, so the
 *   two cannot deadlock.  The word holds the fork epoch of its holder: a
 *   child (pthread_atfork bumps the epoch) takes over a word held by a
 *   parent's thread (which does not exist in the child) and clears the
 *   shard, whose pending counts are the parent's to flush.
 *   The probe before the lock reads one entry's `hint` word, a relaxed
 *   atomic, so a thread whose key is not cached takes no lock at all.
 */
#include "shm.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define FLOOD_SHARDS 8u
#define FLOOD_WAYS 8u                       /* entries per shard, a power of two */
#define SRL__FLOOD_STATE_MAX 256u           /* a bigger state is not cached */
#define FLOOD_MAX_AGE_NS 1000000000ull      /* an entry lives at most 1 s */
#define FLOOD_PENDING_MAX 65536u

struct flood_entry {
    uint64_t hint;          /* fp[0..8) while the copy may answer, else 0; read unlocked */
    uint8_t fp[SRL__SHM_FP_BYTES];
    uint64_t bucket;
    uint64_t until;         /* answers while now < until */
    uint32_t gen;           /* the bucket's gen when the copy was taken */
    const struct srl__shm_pol *pol; /* the policy view it was decided under (a
                                       handle's views live until close) */
    uint32_t pending;       /* local denials not yet in the segment */
    uint16_t tier;
    uint16_t used;          /* fp/bucket meaningful (a copy, or pending counts) */
    unsigned char state[SRL__FLOOD_STATE_MAX] __attribute__((aligned(8)));
};

struct flood_shard {
    uint32_t lock;          /* 0 free, else holder's fork epoch << 1 | 1 */
    uint32_t epoch;         /* fork epoch the contents belong to */
    uint32_t pending;       /* entries with pending > 0 (written under the lock,
                               read without it as a hint) */
    struct flood_entry e[FLOOD_WAYS];
} __attribute__((aligned(64)));

struct srl__shm_flood {
    struct flood_shard shard[FLOOD_SHARDS];
    struct srl__shm *owner;
    struct srl__shm_flood *next;    /* the process's registry (reg_mu) */
};

/* Every open cache of this process, so that srl_stats_get on any handle
 * flushes all of them: within one process the counts are then exact
 * whichever handle reads them.  Lock order: reg_mu, a shard, a bucket. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct srl__shm_flood *reg_head;

/* Bumped in a forked child: contents and locks of an older epoch are the
 * parent's. */
static uint32_t fork_epoch;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_prepare(void)
{
    pthread_mutex_lock(&reg_mu);
}

static void on_fork_parent(void)
{
    pthread_mutex_unlock(&reg_mu);
}

static void on_fork_child(void)
{
    __atomic_add_fetch(&fork_epoch, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&reg_mu);
}

static void register_atfork(void)
{
    pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
}

/* This thread's number, 1 on: shards are picked from it. */
static __thread uint32_t thread_no;
static uint32_t threads_seen;

static struct flood_shard *my_shard(struct srl__shm_flood *f)
{
    uint32_t n = thread_no;
    if (n == 0)
        n = thread_no = __atomic_add_fetch(&threads_seen, 1, __ATOMIC_RELAXED);
    return &f->shard[n % FLOOD_SHARDS];
}

static uint64_t hint_of(const uint8_t fp[SRL__SHM_FP_BYTES])
{
    uint64_t h;
    memcpy(&h, fp, sizeof h);
    return h;
}

static struct flood_entry *way(struct flood_shard *sh, const uint8_t fp[SRL__SHM_FP_BYTES])
{
    return &sh->e[fp[SRL__SHM_FP_BYTES - 1] & (FLOOD_WAYS - 1)];
}

/* One attempt.  A word held under an older fork epoch belongs to a thread
 * of the parent that is not in this process: taken over. */
static bool shard_trylock(struct flood_shard *sh)
{
    uint32_t ep = __atomic_load_n(&fork_epoch, __ATOMIC_RELAXED);
    uint32_t mine = ep << 1 | 1u;
    uint32_t w = __atomic_load_n(&sh->lock, __ATOMIC_RELAXED);
    if (w != 0 && w >> 1 == (ep & 0x7fffffffu))
        return false;
    if (!__atomic_compare_exchange_n(&sh->lock, &w, mine, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return false;
    if (sh->epoch != ep) {
        /* A forked child's first use: the entries and their pending counts
         * are the parent's (it flushes them itself). */
        for (unsigned j = 0; j < FLOOD_WAYS; j++) {
            __atomic_store_n(&sh->e[j].hint, 0, __ATOMIC_RELAXED);
            sh->e[j].used = 0;
            sh->e[j].pending = 0;
        }
        __atomic_store_n(&sh->pending, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&sh->epoch, ep, __ATOMIC_RELAXED);
    }
    return true;
}

static void shard_unlock(struct flood_shard *sh)
{
    __atomic_store_n(&sh->lock, 0, __ATOMIC_RELEASE);
}

int srl__shm_flood_open(struct srl__shm *s, const srl_config *cfg)
{
    s->flood = NULL;
    if (cfg == NULL || !(cfg->flags & SRL_CONFIG_FLOOD_CACHE) || s->lim.cmp.conc >= 0 ||
        s->state_bytes > SRL__FLOOD_STATE_MAX)
        return 0;
    pthread_once(&atfork_once, register_atfork);
    struct srl__shm_flood *f = aligned_alloc(64, sizeof *f);
    if (f == NULL)
        return SRL_ENOMEM;
    memset(f, 0, sizeof *f);
    uint32_t ep = __atomic_load_n(&fork_epoch, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < FLOOD_SHARDS; i++)
        f->shard[i].epoch = ep;
    f->owner = s;
    s->flood = f;
    pthread_mutex_lock(&reg_mu);
    f->next = reg_head;
    __atomic_store_n(&reg_head, f, __ATOMIC_RELEASE);   /* flush peeks without reg_mu */
    pthread_mutex_unlock(&reg_mu);
    return 0;
}

/* Add e's pending denials to bucket b, which the caller holds. */
static void flush_entry(struct srl__shm *s, struct flood_shard *sh, struct flood_entry *e)
{
    if (e->pending == 0)
        return;
    srl__shm_count_denied(s, e->bucket, e->fp, e->pending);
    e->pending = 0;
    __atomic_store_n(&sh->pending, sh->pending - 1, __ATOMIC_RELAXED);
}

/* Forget e's copy (its counts stay until flushed). */
static void drop_copy(struct flood_entry *e)
{
    __atomic_store_n(&e->hint, 0, __ATOMIC_RELAXED);
    if (e->pending == 0)
        e->used = 0;
}

/*
 * THE validity check of an entry (bucket b, gen, until) at now: the one
 * place that says whether a remembered copy may still answer.  Today: the
 * bucket's gen word unchanged, the segment's policy generation the one the
 * copy was decided under, and now before until.  A live policy change
 * (srl_policy_change) makes a key decide otherwise without writing its
 * bucket: policy_gen, one word of the header page that only a changer
 * writes, so reading it bounces no line.  Both words are untrusted: only
 * compared for equality, and until bounds how long an equal-by-chance
 * garbage value can keep a copy answering (design.md).
 */
static bool srl__shm_flood_valid(const struct srl__shm *s, const struct flood_entry *e,
                                 uint64_t now)
{
    return now < e->until &&
           __atomic_load_n(&srl__shm_bucket(s, e->bucket)->gen, __ATOMIC_ACQUIRE) == e->gen &&
           __atomic_load_n(&srl__shm_live(s)->policy_gen, __ATOMIC_ACQUIRE) == e->pol->gen;
}

/* 1 with *d if this thread's entry for k answers (tier, cost) exactly. */
static int answer(struct srl__shm *s, struct flood_shard *sh, const struct srl__shm_key *k,
                  uint32_t tier, uint32_t cost, srl_decision *d)
{
    struct flood_entry *e = way(sh, k->fp);
    /* The one probe an uncached key pays: a private word, no lock. */
    if (__atomic_load_n(&e->hint, __ATOMIC_RELAXED) != hint_of(k->fp))
        return 0;
    if (!shard_trylock(sh))
        return 0;
    int answered = 0;
    if (__atomic_load_n(&e->hint, __ATOMIC_RELAXED) != hint_of(k->fp) ||
        memcmp(e->fp, k->fp, SRL__SHM_FP_BYTES) != 0 || e->tier != tier)
        goto out;
    /* The clock first, then gen: if gen is still the entry's, the slot held
     * the copy at a moment after this clock read, and a writer not seen
     * bumps gen later, so it orders after this answer (design.md). */
    uint64_t now = srl__now(&s->lim);
    if (!srl__shm_flood_valid(s, e, now) || cost > e->pol->cmp[tier].min_permits ||
        e->pending >= FLOOD_PENDING_MAX - 1) {
        drop_copy(e);
        goto out;
    }
    unsigned char copy[SRL__FLOOD_STATE_MAX] __attribute__((aligned(8)));
    memcpy(copy, e->state, s->state_bytes);
    srl__compound_decide(&e->pol->cmp[tier], copy, now, cost, 1, d);
    if (d->allowed || memcmp(copy, e->state, s->state_bytes) != 0) {
        /* An admission, or a denial that writes (a ban begins): the lock's. */
        drop_copy(e);
        goto out;
    }
    if (e->pending++ == 0)
        __atomic_store_n(&sh->pending, sh->pending + 1, __ATOMIC_RELAXED);
    answered = 1;
out:
    shard_unlock(sh);
    return answered;
}

/* After the table zeroed some of the counts handed to it: recount. */
static void settle(struct flood_shard *sh)
{
    uint32_t n = 0;
    for (unsigned j = 0; j < FLOOD_WAYS; j++) {
        struct flood_entry *e = &sh->e[j];
        if (e->used && e->pending == 0 && __atomic_load_n(&e->hint, __ATOMIC_RELAXED) == 0)
            e->used = 0;
        n += e->used && e->pending > 0;
    }
    __atomic_store_n(&sh->pending, n, __ATOMIC_RELAXED);
}

/* Remember k's denial (shard held): the copy the table made under the lock. */
static void remember(struct srl__shm *s, struct flood_shard *sh, const struct srl__shm_key *k,
                     uint32_t tier, const srl_decision *d, const struct srl__shm_flood_io *io)
{
    struct flood_entry *e = way(sh, k->fp);
    if (e->used && e->pending > 0 && memcmp(e->fp, k->fp, SRL__SHM_FP_BYTES) != 0) {
        /* Another key's counts hold the way: flushed if its bucket is free
         * now (not waited for), else k is not remembered this time. */
        if (srl__shm_trylock(s, e->bucket) != 0)
            return;
        flush_entry(s, sh, e);
        srl__shm_unlock(s, e->bucket);
    }
    if (e->used && e->pending > 0 && e->bucket != io->bucket) {
        /* k's own counts, but k moved bucket: they go with the old one. */
        if (srl__shm_trylock(s, e->bucket) != 0)
            return;
        flush_entry(s, sh, e);
        srl__shm_unlock(s, e->bucket);
    }
    uint64_t age = d->retry_after_ns < FLOOD_MAX_AGE_NS ? d->retry_after_ns : FLOOD_MAX_AGE_NS;
    __atomic_store_n(&e->hint, 0, __ATOMIC_RELAXED);
    memcpy(e->fp, k->fp, SRL__SHM_FP_BYTES);
    e->bucket = io->bucket;
    e->tier = (uint16_t)tier;
    e->until = srl__sat_add(io->now, age);
    e->gen = io->gen;
    e->pol = io->pol;
    memcpy(e->state, io->state, s->state_bytes);
    e->used = 1;
    __atomic_store_n(&e->hint, hint_of(k->fp), __ATOMIC_RELAXED);
}

int srl__shm_flood_acquire_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                                uint32_t cost, srl_decision *d)
{
    struct srl__shm *s = lim->impl;
    if (s->flood == NULL)
        return srl__shm_acquire_tier(lim, tier, key, len, cost, d);
    struct srl__shm_key k;
    srl__shm_hash_only(s, key, len, &k);
    struct flood_shard *sh = my_shard(s->flood);
    if (answer(s, sh, &k, tier, cost, d))
        return 0;
    /* Only now: a write prefetch of the bucket would take its lines from
     * the other workers answering the same flood from their caches. */
    srl__shm_prefetch(s, &k);
    unsigned char state[SRL__FLOOD_STATE_MAX] __attribute__((aligned(8)));
    struct srl__shm_flood_io io;   /* only what the table reads is set */
    io.n = 0;
    io.recorded = 0;
    io.state = state;
    /* Pending counts ride along (the shard held across the decision, so
     * the pointers stay good): the bucket the decision locks takes its own.
     * A busy shard: they wait for another time. */
    bool held = __atomic_load_n(&sh->pending, __ATOMIC_RELAXED) > 0 && shard_trylock(sh);
    if (held)
        for (unsigned j = 0; j < FLOOD_WAYS; j++) {
            struct flood_entry *e = &sh->e[j];
            if (e->used && e->pending > 0) {
                io.pend_bucket[io.n] = e->bucket;
                io.pend_fp[io.n] = e->fp;
                io.pend_count[io.n] = &e->pending;
                io.n++;
            }
        }
    int rc = srl__shm_decide_plain(lim, &k, key, len, tier, cost, &io, d);
    if (held)
        settle(sh);
    if (rc != 0 || (!io.recorded && __atomic_load_n(&way(sh, k.fp)->hint, __ATOMIC_RELAXED) !=
                                         hint_of(k.fp))) {
        /* Nothing to remember and nothing to forget: the admission path of
         * an uncached key takes no shard lock. */
        if (held)
            shard_unlock(sh);
        return rc;
    }
    if (!held && !shard_trylock(sh))
        return rc;
    if (io.recorded)
        remember(s, sh, &k, tier, d, &io);
    else if (memcmp(way(sh, k.fp)->fp, k.fp, SRL__SHM_FP_BYTES) == 0)
        drop_copy(way(sh, k.fp));   /* admitted (or not tracked): the copy is stale */
    shard_unlock(sh);
    return rc;
}

int srl__shm_flood_acquire(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                           srl_decision *d)
{
    return srl__shm_flood_acquire_tier(lim, 0, key, len, cost, d);
}

/* Wait for shard sh (never called with a bucket lock held). */
static void shard_lock(struct flood_shard *sh)
{
    while (!shard_trylock(sh))
        sched_yield();
}

static void flush_one(struct srl__shm *s)
{
    for (unsigned i = 0; i < FLOOD_SHARDS; i++) {
        struct flood_shard *sh = &s->flood->shard[i];
        if (__atomic_load_n(&sh->pending, __ATOMIC_RELAXED) == 0 &&
            __atomic_load_n(&sh->epoch, __ATOMIC_RELAXED) ==
                __atomic_load_n(&fork_epoch, __ATOMIC_RELAXED))
            continue;
        shard_lock(sh);
        for (unsigned j = 0; j < FLOOD_WAYS && sh->pending > 0; j++) {
            struct flood_entry *e = &sh->e[j];
            if (!e->used || e->pending == 0)
                continue;
            struct timespec deadline = SRL__SHM_NO_DEADLINE;
            if (srl__shm_lock(s, e->bucket, &deadline) != 0)
                continue;   /* a stuck or damaged bucket: the counts wait */
            flush_entry(s, sh, e);
            srl__shm_unlock(s, e->bucket);
            if (__atomic_load_n(&e->hint, __ATOMIC_RELAXED) == 0)
                e->used = 0;
        }
        shard_unlock(sh);
    }
}

void srl__shm_flood_flush(void)
{
    /* Most processes have no cache (it is opt-in): then srl_stats_get,
     * foreach and evict take no process-wide mutex.  A cache registered
     * after this peek has no counts to flush yet; one being closed flushes
     * itself (srl__shm_flood_close). */
    if (__atomic_load_n(&reg_head, __ATOMIC_ACQUIRE) == NULL)
        return;
    pthread_mutex_lock(&reg_mu);
    for (struct srl__shm_flood *f = reg_head; f != NULL; f = f->next)
        flush_one(f->owner);
    pthread_mutex_unlock(&reg_mu);
}

void srl__shm_flood_close(struct srl__shm *s)
{
    if (s->flood == NULL)
        return;
    pthread_mutex_lock(&reg_mu);
    for (struct srl__shm_flood **p = &reg_head; *p != NULL; p = &(*p)->next)
        if (*p == s->flood) {
            __atomic_store_n(p, s->flood->next, __ATOMIC_RELEASE);
            break;
        }
    pthread_mutex_unlock(&reg_mu);
    flush_one(s);
    free(s->flood);
    s->flood = NULL;
}
