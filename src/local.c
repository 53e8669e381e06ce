/*
 * local.c - the in-process store: per-key states in a pool of nodes,
 * found through a bucketed index of 64-byte buckets (srl_open_local).
 *
 * WHAT IT HOLDS
 *   - A pool of fixed-size nodes (struct lnode, node_bytes apart, 64-byte
 *     aligned) in chunks of 2^chunk_shift nodes, allocated as keys arrive
 *     (chunks of 2 MiB and more are advised onto transparent huge pages) and
 *     never freed before srl_close.  A node is one key: its 128-bit
 *     fingerprint, its lock, its counters, then the algorithm's state inline
 *     and the display copy of the key (key_display bytes).  Free nodes are
 *     kept on a free list and reused; no malloc on any decision path.
 *   - The index: nbuckets buckets of 8 entries, one cache line each.  An
 *     entry is 0 (empty) or tag << 32 | (node index + 1), the tag being 32
 *     bits of the fingerprint.  A key lives in one of two candidate buckets
 *     chosen by the fingerprint (as the shared table, src/shm_table.c), the
 *     first one when it has room.  The index has 2 entries per key of
 *     capacity (sized at open, lazily zeroed, never resized).
 *   Identity is the fingerprint: SipHash-2-4 with 128-bit output of the key
 *   under a random key per limiter (crypto_shorthash_siphashx24), as in the
 *   shared store; clients choose keys, so an unkeyed hash would let them pile
 *   keys into a few buckets.  The key bytes themselves are not kept (only the
 *   display copy), so a key costs the same whatever its length.
 *
 * INVARIANTS
 *   - A node's fp and key_len never change while any index entry points to
 *     it, nor until a grace period after the last entry was cleared.
 *   - dead goes 0 -> 1 exactly once per use of a node, under the node's
 *     lock, by the thread that will then clear its index entry and hand it
 *     to call_rcu, whose callback puts it back on the free list: a node is
 *     reused only after a grace period that began after it left the index.
 *     A dead node is never matched by a lookup or an insert, so a new live
 *     node for the same key may be inserted before the dead one is cleared.
 *   - At most one live (not dead) node per key: inserts search both
 *     candidate buckets again under both buckets' stripe locks.
 *   - An index entry is written only under the stripe locks of the buckets
 *     it is in and moves to: insert (both candidates), delete (both
 *     candidates of the node), relocation (the source and the node's other
 *     candidate, the latter taken with trylock).  Relocation writes the new
 *     entry before clearing the old one, so a node is never out of the index
 *     while it is live; a lock-free lookup that runs into a relocation may
 *     miss a key, and then finds it under the locks on the insert path.
 *   - l->used counts live nodes and never exceeds l->capacity: a slot is
 *     reserved (CAS loop) before a node is inserted and released when the
 *     node is marked dead or loses the insertion race.
 *
 * CONCURRENCY
 *   - Every index access (lookup, insert, delete, walk) runs inside
 *     rcu_read_lock (urcu-bp: a library cannot make the application register
 *     its threads, and the "bulletproof" flavour registers them lazily).
 *     Entries are loaded with acquire and stored with release, so a node's
 *     initialising writes happen before any lookup that finds it.
 *   - A state, its counters and its dead flag are read and written under
 *     the node's mutex (dead and the counters are also accessed with relaxed
 *     atomics, so lookups may peek at dead without the lock, and a broken
 *     test variant may run without it and still be well-defined C).
 *     Except on a lock-free handle (LOCK-FREE GCRA below), whose state word
 *     and counters are also written without the lock, atomically.
 *   - A dead node's counts stay in it until its call_rcu callback moves
 *     them to the shards (under retire_lock, which a stats walk holds): a
 *     walk counts every node once, live or dead, and a count added by a
 *     lock-free decider after the node died is not lost.
 *   - Lock order: stripe locks in increasing stripe order (a third one only
 *     with trylock); a node's lock is never taken while a stripe lock is
 *     held, nor a stripe lock while a node's lock is held.  The pool mutex
 *     is innermost and held for a few instructions.
 *   - Time is read (srl__now) inside the node's lock, so a thread that
 *     waited for the lock never decides with a stale time.
 *   - The closed orphan race: an evictor marks a node dead under its lock
 *     before clearing its entry.  An acquirer that found the node and then
 *     locked it sees dead, unlocks and looks the key up again; it never
 *     decides on an orphan, so eviction never admits an extra request.
 *   - The pool bound: at most 4 x capacity nodes (+ 4 chunks) exist, live
 *     or awaiting their grace period.  An insert that finds none free waits
 *     for the pending grace periods (pool_wait: rcu_barrier, outside the
 *     read-side section) and tries again; it never answers on_full for it,
 *     since the table is not full (docs/design.md, "The pool bound race":
 *     a sweep churning fresh states once made a key of 8 permits admit 256).
 *   - No shared line is written on the hit path.  l->used is written only
 *     on insert and delete; the full/evicted/retired counters live in
 *     cache-line shards picked by the current CPU and are written only on
 *     the full, evict and delete paths.  srl_stats adds them up.
 *   - Walks (stats, foreach, evict_idle, reclaim) go over the index; a walk
 *     that overlaps a relocation (rare: both candidate buckets full) may see
 *     that key twice or not at all, as any walk of a table in motion.
 *
 * LOCK-FREE GCRA (SRL_CONFIG_LOCKFREE; l->lockfree)
 *   On a handle whose policy is one GCRA limit (no ban word, not dry run)
 *   the state is one 64-bit word, the TAT, and srl_acquire on a node found
 *   (or just created) is one compare-and-swap from the value it decided on
 *   (word_update): no node lock, nothing to undo, a denial writes nothing.
 *   Invariants, and why a CAS never lands where it must not:
 *   - Reuse: the decider found the node through the index inside its
 *     read-side section, and a node goes back to the pool only from its
 *     call_rcu callback, after a grace period that began after its entry
 *     was cleared.  So until the decider's section ends the node holds this
 *     key's state or this key's retired state, never another key's.
 *   - Retirement: reset, eviction and reclamation CAS the word to
 *     WORD_TOMB (word_retire) under the node's lock, eviction only from a
 *     value at rest, and then set dead.  WORD_TOMB is never a TAT and is
 *     never overwritten before reuse, so a decider's CAS from any TAT fails
 *     once the state is retired; the decider then takes the locked path,
 *     sees dead and looks the key up again (the closed eviction race, as
 *     for locked deciders).  An eviction that loses its CAS to a decider
 *     re-reads the word and finds it no longer at rest.
 *   - Every other write of the word after publication is a CAS too, made
 *     under the node's lock (srl_reserve with a wait, srl_refund, the
 *     first decision of a new key only if it comes through the locked
 *     path), and every read is atomic (peek, key_state, foreach): the
 *     lock still orders those against retirement, not against deciders.
 *   - Counts: a decider counts with an atomic add after its CAS, inside
 *     its read-side section, so after the node's grace period no count can
 *     arrive; free_node_rcu moves the counts then.  Stats are exact once
 *     the deciders have returned, whatever was retired meanwhile.
 *   Not lock-free (the lock as before): srl_enter, srl_reserve with a
 *   wait, srl_refund, srl_peek, key_state, every other policy.
 *
 * FORK
 *   Create the limiter after fork, in the process that uses it.  liburcu's
 *   grace periods and its call_rcu worker are per process; urcu-bp does not
 *   install pthread_atfork handlers (the application would have to call
 *   urcu_bp_before_fork() and friends), and a node's mutex held by another
 *   thread at fork stays locked forever in the child.  In a child, a
 *   limiter inherited from the parent counts separately from the parent,
 *   may hang on a key that was locked at fork, and never reuses evicted
 *   states.  srl_close() in such a child (detected by pid) frees nothing
 *   and returns, rather than wait forever in rcu_barrier() for a call_rcu
 *   worker that does not exist there; the memory goes away with the
 *   process.  See docs/design.md, "The in-process store".
 */
#include "limiter.h"
#include "proc.h"
#include "testhooks.h"

#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>
#include <urcu-bp.h>

/*
 * ThreadSanitizer cannot see liburcu's grace periods: its atomics are
 * inline assembly in an uninstrumented library.  These annotations tell it
 * the one ordering liburcu really provides, and nothing more: every
 * reader's use of a node happens before call_rcu's callback puts it back
 * on the free list (the grace period).  Each reader releases on &node->rcu
 * when it is done with the node; the callback acquires it.  (Publication
 * needs no annotation: index entries are C11 atomics, which it sees.)
 * In a normal build the macros are empty.
 */
#if defined(__SANITIZE_THREAD__)
#define SRL__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SRL__TSAN 1
#endif
#endif
#ifdef SRL__TSAN
#include <sanitizer/tsan_interface.h>
#define TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#define TSAN_RELEASE(p) __tsan_release((void *)(p))
#else
#define TSAN_ACQUIRE(p) ((void)0)
#define TSAN_RELEASE(p) ((void)0)
#endif

/* The broken variants (SRL__LOCAL_BROKEN_*, srl__local_set_broken) are in
 * testhooks.h, compiled only into the test copy (SRL_MUTANTS). */

#define CACHE_LINE 64
#define NSHARDS 16          /* counter shards, by CPU; power of two */
#define RECLAIM_SCAN 64     /* nodes an insert into a full table may visit */
#define NO_LOCK_MAX_WORDS 64 /* the no-lock variant copies states up to 512 B */
#define BUCKET_ENTRIES 8    /* one 64-byte line of 8-byte entries */
#define NSTRIPES 256        /* index write locks, by bucket; power of two */
#define HUGE_PAGE (2u << 20)
#define INDEX_HUGE_MAX (256ull << 20) /* larger indexes are sparse: no THP */
#define CHUNK_SHIFT_MIN 6   /* 64 nodes */
#define CHUNK_SHIFT_MAX 17  /* 128k nodes (16 MiB of 128-byte nodes) */

/* Line 0: what a lookup compares, and the lock; then the counters, the
 * free-time fields and the state (a token bucket's node is 128 bytes). */
struct lnode {
    uint8_t fp[16];           /* the key's fingerprint; fixed while indexed */
    uint16_t key_len;         /* likewise (SRL_KEY_MAX fits) */
    uint16_t dead;            /* NODE_*: live 0 -> dead 1 under lock; atomic */
    uint32_t idx;             /* this node's index in the pool; fixed */
    pthread_mutex_t lock;     /* guards dead, the counters and the state */
    uint64_t allowed;         /* this key's decisions (under lock) */
    uint64_t denied;
    struct local *owner;      /* for the call_rcu callback */
    union {
        struct rcu_head rcu;  /* from unlink to the callback */
        uint32_t free_next;   /* on the free list: next index + 1, or 0 */
    } u;
    uint64_t data[];          /* state (state_bytes), then the display copy */
};

/* n->dead.  A node is reachable by walks (of the pool) only while LIVE,
 * by lookups (through the index) only from just before its entry is
 * stored (LIVE is stored first, with release) until a grace period after
 * the entry is cleared. */
enum { NODE_LIVE = 0, NODE_DEAD = 1, NODE_FREE = 2, NODE_NEW = 3 };

struct lbucket {
    uint64_t e[BUCKET_ENTRIES]; /* 0, or tag << 32 | (node index + 1); atomics */
} __attribute__((aligned(CACHE_LINE)));

/* Rarely written per-limiter counters, one shard per CPU (modulo NSHARDS). */
struct shard {
    uint64_t full_allowed;    /* on_full decisions, allowed */
    uint64_t full_denied;     /* on_full decisions, denied */
    uint64_t evicted;         /* at-rest states reclaimed */
    uint64_t retired_allowed; /* counters of deleted states */
    uint64_t retired_denied;
    uint64_t timeouts;        /* node lock waits that ran past lock_timeout_ms */
    uint64_t reclaimed;       /* in-flight units of dead or expired holders freed */
    uint64_t would_deny;      /* dry run: denials turned into admissions (limiter.c) */
} __attribute__((aligned(CACHE_LINE)));

struct local {
    srl_limiter lim;          /* lim.impl points back here */
    /* Read-only after open: read by every request, written by none. */
    struct lbucket *index;
    uint64_t nbuckets;
    unsigned char **chunks;   /* chunk c holds nodes c << chunk_shift ...; set once */
    unsigned chunk_shift;
    size_t node_bytes;        /* sizeof(struct lnode) + state + display, to 64 */
    size_t state_bytes;       /* algo->size rounded up to 8 */
    uint64_t capacity;
    uint32_t key_display;
    uint32_t max_chunks;
    bool lockfree;            /* SRL_CONFIG_LOCKFREE on a one-word GCRA policy */
#ifdef SRL_MUTANTS
    unsigned broken;          /* SRL__LOCAL_BROKEN_* (testhooks.h) */
    uint64_t lf_conflicts, lf_tombstones, lf_late; /* srl__local_lf_counts */
#endif
    pid_t creator_pid;
    uint64_t created_unix_ns;
    size_t index_bytes;       /* the index mapping (mmap) */
    unsigned char hash_key[crypto_shorthash_siphashx24_KEYBYTES];
    /* Written on insert and delete only, on a line of its own. */
    uint64_t used __attribute__((aligned(CACHE_LINE)));
    uint64_t reclaim_cursor;  /* next pool index reclaim_some looks at */
    /* The pool: taken on insert, and by the call_rcu worker on free. */
    pthread_mutex_t pool_lock __attribute__((aligned(CACHE_LINE)));
    uint32_t free_head;       /* free list: node index + 1, or 0 */
    uint64_t fresh;           /* nodes ever handed out by the bump allocator */
    pthread_mutex_t stripes[NSTRIPES];
    /* Held by a stats walk, and by call_rcu's callback while it moves a
     * dead node's counts into the shards: a walk counts a node once. */
    pthread_mutex_t retire_lock __attribute__((aligned(CACHE_LINE)));
    struct shard shards[NSHARDS];
};

/* A key as lookups see it: fingerprint, its tag and candidate buckets. */
struct lkey {
    const void *key;          /* the key bytes (NULL when known by fp only) */
    uint8_t fp[16];
    uint32_t tag;
    uint32_t len;
    uint64_t b1, b2;
};

/* ------------------------------------------------------------ helpers */

static inline struct local *local_of(srl_limiter *lim)
{
    return lim->impl;
}

static inline void *node_state(struct lnode *n)
{
    return n->data;
}

static inline const unsigned char *node_display(const struct local *l, const struct lnode *n)
{
    return (const unsigned char *)n->data + l->state_bytes;
}

static inline bool node_dead(const struct lnode *n)
{
    return __atomic_load_n(&n->dead, __ATOMIC_RELAXED) != 0;
}

static inline struct lnode *node_at(const struct local *l, uint32_t idx)
{
    unsigned char *c = l->chunks[idx >> l->chunk_shift];
    return (struct lnode *)(c + (size_t)(idx & ((1u << l->chunk_shift) - 1)) * l->node_bytes);
}

/* One more in a counter whose writers are serialised (by the node's lock):
 * a plain load and store, atomic only so that unlocked readers are defined. */
static inline void count_one(uint64_t *c)
{
    uint64_t v = __atomic_load_n(c, __ATOMIC_RELAXED);
    if (v != UINT64_MAX)
        __atomic_store_n(c, v + 1, __ATOMIC_RELAXED);
}

static inline struct shard *my_shard(struct local *l)
{
    int cpu = sched_getcpu();
    return &l->shards[(unsigned)(cpu < 0 ? 0 : cpu) & (NSHARDS - 1)];
}

static inline void shard_add(uint64_t *c, uint64_t v)
{
    __atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

/* One decision in n's counters.  On a lock-free handle the lock-free
 * deciders count without the lock, so every count is an atomic add (on the
 * node's own line, which the decision has just written or read). */
static inline void count_decision(const struct local *l, struct lnode *n, bool allowed)
{
    uint64_t *c = allowed ? &n->allowed : &n->denied;
    if (l->lockfree)
        __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
    else
        count_one(c);
}

#ifdef SRL_MUTANTS
#define LF_SAW(l, field) __atomic_fetch_add(&(l)->field, 1, __ATOMIC_RELAXED)
#else
#define LF_SAW(l, field) ((void)0)
#endif

/* Take n's lock, waiting at most lock_timeout_ms.  0, or SRL_ETIMEDOUT
 * (counted).  A node's lock is held only for one decision, so a wait this
 * long means a holder that is stuck (a ticker that blocks, a thread stopped
 * in a debugger): the caller gets on_full's answer instead of hanging.  The
 * deadline is CLOCK_REALTIME because pthread_mutex_timedlock is what
 * ThreadSanitizer intercepts (clocklock is not): a step of the wall clock
 * can shorten or stretch one such wait, never make it unbounded.  The
 * uncontended path is one trylock and reads no clock. */
static int node_lock(struct local *l, struct lnode *n)
{
    if (pthread_mutex_trylock(&n->lock) == 0)
        return 0;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    uint64_t ns = (uint64_t)dl.tv_nsec + (uint64_t)l->lim.lock_timeout_ms * 1000000ull;
    dl.tv_sec += (time_t)(ns / SRL_NS_PER_S);
    dl.tv_nsec = (long)(ns % SRL_NS_PER_S);
    if (pthread_mutex_timedlock(&n->lock, &dl) == 0)
        return 0;
    shard_add(&my_shard(l)->timeouts, 1);
    return SRL_ETIMEDOUT;
}

static uint64_t fastrange(uint64_t x, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)x * n) >> 64);
}

/* fp's candidate buckets and tag, as the shared table derives them: the
 * buckets from the high bits of each half, the tag from low bits. */
static void key_place(const struct local *l, struct lkey *k)
{
    uint64_t lo, hi;
    memcpy(&lo, k->fp, 8);
    memcpy(&hi, k->fp + 8, 8);
    k->b1 = fastrange(lo, l->nbuckets);
    k->b2 = fastrange(hi, l->nbuckets);
    if (k->b2 == k->b1)
        k->b2 = (k->b1 + 1) % l->nbuckets;
    k->tag = (uint32_t)lo;
}

static void key_of(const struct local *l, const void *key, size_t len, struct lkey *k)
{
    crypto_shorthash_siphashx24(k->fp, key, len, l->hash_key);
    k->key = key;
    k->len = (uint32_t)len;
    key_place(l, k);
    /* The key is in b2 only when b1 was full at its insert (a few percent
     * of keys at full capacity); the prefetch costs bandwidth, not a wait,
     * and saves a dependent miss for those. */
    __builtin_prefetch(&l->index[k->b2], 0, 3);
}

/* This thread is done with n for this read-side critical section. */
static inline void node_done(struct lnode *n)
{
    TSAN_RELEASE(&n->u.rcu);
    (void)n;
}

static inline uint64_t entry_load(const uint64_t *e)
{
    return __atomic_load_n(e, __ATOMIC_ACQUIRE);
}

static inline void entry_store(uint64_t *e, uint64_t v)
{
    __atomic_store_n(e, v, __ATOMIC_RELEASE);
}

/* The live node for k in bucket b, or NULL.  Call inside rcu_read_lock.
 * Without any lock: fp is fixed while indexed, and dead is read
 * atomically (a node that dies right after is caught under its lock by
 * the caller). */
static struct lnode *scan(const struct local *l, uint64_t b, const struct lkey *k)
{
    uint64_t *e = l->index[b].e;
    for (unsigned i = 0; i < BUCKET_ENTRIES; i++) {
        uint64_t v = entry_load(&e[i]);
        if ((uint32_t)(v >> 32) != k->tag || (uint32_t)v == 0)
            continue;
        struct lnode *n = node_at(l, (uint32_t)v - 1);
        /* The state's line is read after the lock, which is a locked
         * instruction: start its miss now, with the fingerprint's. */
        __builtin_prefetch((const unsigned char *)n + CACHE_LINE, 1, 3);
        if (memcmp(n->fp, k->fp, sizeof n->fp) == 0 && !node_dead(n))
            return n;
        node_done(n);
    }
    return NULL;
}

/* The live node for k, or NULL.  Call inside rcu_read_lock. */
static struct lnode *find(const struct local *l, const struct lkey *k)
{
    struct lnode *n = scan(l, k->b1, k);
    return n != NULL ? n : scan(l, k->b2, k);
}

/* ------------------------------------------- the state word (lock-free) */

/*
 * On a lock-free handle (l->lockfree: one GCRA limit, see srl_open_local) a
 * node's state is one 64-bit word, the TAT, and every access to it after
 * the node is published is atomic: a decision is a compare-and-swap from
 * the value it decided on, with or without the node's lock.  WORD_TOMB is
 * the version that retires a state: reset, eviction and reclamation CAS it
 * in (under the node's lock, before they set dead), and nothing ever
 * writes the word again until the node is reused after its grace period.
 * A TAT never equals it: a commit that would store UINT64_MAX (a TAT
 * saturated 584 years from 0) stores UINT64_MAX - 1, which decides alike.
 */
#define WORD_TOMB UINT64_MAX

static inline uint64_t *node_word(struct lnode *n)
{
    return (uint64_t *)n->data;
}

enum word_op { WORD_DECIDE, WORD_RESERVE, WORD_REFUND };

/* The lock-free decision (and, under the lock, reserve and refund) on n's
 * word: read the word, then the time, decide on a copy, and CAS the copy
 * in; on a lost CAS start again from the value that won (and a new time).
 * A decision that writes nothing (a denial) takes effect at its read.
 * Returns false, deciding nothing, if the state is retired (WORD_TOMB):
 * the caller takes the locked path, which sees the node dead and looks the
 * key up again.  Call inside rcu_read_lock, n found live through the index:
 * n is not reused before the section ends. */
static bool word_update(struct local *l, struct lnode *n, enum word_op op, uint32_t cost,
                        uint64_t max_wait, srl_decision *d)
{
    uint64_t *w = node_word(n);
    uint64_t old = __atomic_load_n(w, __ATOMIC_RELAXED);
    for (;;) {
        if (old == WORD_TOMB) {
            LF_SAW(l, lf_tombstones);
            return false;
        }
        uint64_t now = srl__now(&l->lim), nw = old;
        if (op == WORD_DECIDE)
            srl__cmp_decide(&l->lim.cmp, &nw, now, cost, 1, d);
        else if (op == WORD_RESERVE)
            srl__cmp_reserve(&l->lim.cmp, &nw, now, cost, max_wait, d);
        else
            srl__cmp_refund(&l->lim.cmp, &nw, now, cost);
        if (nw == WORD_TOMB)
            nw = WORD_TOMB - 1;
        if (nw == old)
            return true;
        if (SRL__MUTANT(l->broken, SRL__LOCAL_BROKEN_YIELD))
            sched_yield();   /* the amplifier: a preemption between read and CAS */
#ifdef SRL_MUTANTS
        if (l->broken & SRL__LOCAL_BROKEN_LF_BLIND_STORE) {
            /* Broken on purpose: a write that ignores what happened since
             * the read (an exchange, so the lost update can be counted). */
            if (__atomic_exchange_n(w, nw, __ATOMIC_RELAXED) != old)
                LF_SAW(l, lf_conflicts);
            return true;
        }
#endif
        if (__atomic_compare_exchange_n(w, &old, nw, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return true;
        LF_SAW(l, lf_conflicts);
    }
}

/* Retire n's word: CAS in WORD_TOMB, if only_at_rest only from a value at
 * rest at now.  True if retired.  Call with n's lock held, n not dead (so
 * the word is not WORD_TOMB); the caller then marks n dead. */
static bool word_retire(struct local *l, struct lnode *n, uint64_t now, bool only_at_rest)
{
    uint64_t *w = node_word(n);
    uint64_t old = __atomic_load_n(w, __ATOMIC_RELAXED);
    do {
        if (only_at_rest && !srl__cmp_at_rest(&l->lim.cmp, &old, now))
            return false;
        if (SRL__MUTANT(l->broken, SRL__LOCAL_BROKEN_LF_NO_TOMBSTONE))
            return true;   /* broken on purpose: the version is not written */
    } while (!__atomic_compare_exchange_n(w, &old, WORD_TOMB, false, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return true;
}

/* A copy of n's state as one read sees it (atomic on a lock-free handle,
 * whose word may change under the lock).  Call with n's lock held. */
static void state_copy(const struct local *l, struct lnode *n, void *buf)
{
    if (l->lockfree) {
        uint64_t v = __atomic_load_n(node_word(n), __ATOMIC_RELAXED);
        memcpy(buf, &v, sizeof v);
    } else {
        memcpy(buf, node_state(n), l->state_bytes);
    }
}

/* Reserve one live-key slot; false if the table is full.  Relaxed: the
 * counter orders nothing, it only bounds the number of live nodes. */
static bool reserve(struct local *l)
{
    uint64_t cur = __atomic_load_n(&l->used, __ATOMIC_RELAXED);
    do {
        if (cur >= l->capacity)
            return false;
    } while (!__atomic_compare_exchange_n(&l->used, &cur, cur + 1, true,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return true;
}

static void unreserve(struct local *l)
{
    __atomic_fetch_sub(&l->used, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ the pool */

/* INSERT_WAIT: the pool is at its bound with nodes awaiting their grace
 * period; the caller leaves its read-side section, waits for them
 * (pool_wait) and tries again. */
enum { INSERT_OK = 0, INSERT_FULL = 1, INSERT_WAIT = 2 };

/* A chunk of 2^chunk_shift nodes, on huge pages when it spans them. */
static unsigned char *chunk_alloc(const struct local *l)
{
    size_t bytes = ((size_t)1 << l->chunk_shift) * l->node_bytes;
    size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 4096;
    bytes = (bytes + align - 1) / align * align;
    unsigned char *c = aligned_alloc(align, bytes);
    if (c != NULL && align == HUGE_PAGE)
        (void)madvise(c, bytes, MADV_HUGEPAGE); /* a hint: fewer TLB misses */
    return c;
}

/* A node for a new key, uninitialised but for its idx: 0 with *out set,
 * SRL_ENOMEM (no memory for a new chunk), or INSERT_WAIT (the pool is at
 * its bound, see srl_open_local: live nodes are at most the capacity, so
 * the rest, 3 x capacity and more, await their grace period). */
static int pool_get(struct local *l, struct lnode **out)
{
    int rc = 0;
    pthread_mutex_lock(&l->pool_lock);
    if (l->free_head != 0) {
        *out = node_at(l, l->free_head - 1);
        l->free_head = (*out)->u.free_next;
        __atomic_store_n(&(*out)->dead, NODE_NEW, __ATOMIC_RELAXED);
    } else {
        uint64_t c = l->fresh >> l->chunk_shift;
        if (c >= l->max_chunks) {
            rc = INSERT_WAIT;
        } else {
            if (l->chunks[c] == NULL)
                __atomic_store_n(&l->chunks[c], chunk_alloc(l), __ATOMIC_RELEASE);
            if (l->chunks[c] == NULL) {
                rc = SRL_ENOMEM;
            } else {
                *out = node_at(l, (uint32_t)l->fresh);
                (*out)->idx = (uint32_t)l->fresh;
                __atomic_store_n(&(*out)->dead, NODE_NEW, __ATOMIC_RELAXED);
                __atomic_store_n(&l->fresh, l->fresh + 1, __ATOMIC_RELEASE);
            }
        }
    }
    pthread_mutex_unlock(&l->pool_lock);
    return rc;
}

/* Back on the free list: nobody can reach n any more (never indexed, or a
 * grace period has passed since its entry was cleared). */
static void pool_put(struct local *l, struct lnode *n)
{
    pthread_mutex_destroy(&n->lock);
    pthread_mutex_lock(&l->pool_lock);
    __atomic_store_n(&n->dead, NODE_FREE, __ATOMIC_RELAXED);
    n->u.free_next = l->free_head;
    l->free_head = n->idx + 1;
    pthread_mutex_unlock(&l->pool_lock);
}

/* call_rcu callback: every reader that could see n has left its read-side
 * critical section, so n's counts are final (a lock-free decider counts
 * after its CAS, inside its section): they move to the shards now, under
 * retire_lock so that a stats walk counts them once, in the node or in the
 * shards. */
static void free_node_rcu(struct rcu_head *head)
{
    struct lnode *n = caa_container_of(head, struct lnode, u.rcu);
    TSAN_ACQUIRE(&n->u.rcu);
    struct local *l = n->owner;
#ifdef SRL_MUTANTS
    /* call_rcu's worker may run while a test switches variants. */
    bool early = __atomic_load_n(&l->broken, __ATOMIC_RELAXED) & SRL__LOCAL_BROKEN_LF_RETIRE_EARLY;
#else
    bool early = false;
#endif
    pthread_mutex_lock(&l->retire_lock);
    if (!early) {
        struct shard *s = my_shard(l);
        shard_add(&s->retired_allowed, __atomic_load_n(&n->allowed, __ATOMIC_RELAXED));
        shard_add(&s->retired_denied, __atomic_load_n(&n->denied, __ATOMIC_RELAXED));
    }
    __atomic_store_n(&n->dead, NODE_FREE, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&l->retire_lock);
    pool_put(l, n);
}

/*
 * The pool is at its bound: wait until the nodes that await their grace
 * period are back on the free list.  Call outside any read-side section
 * and without any lock.  Returns true after waiting, false when this
 * thread cannot wait: it is inside the application's own urcu-bp read-side
 * section (rcu_barrier would return at once, or a grace period would wait
 * for this very thread), or in a child that inherited the limiter (no
 * call_rcu worker runs there; see FORK).  Then the request is decided
 * untracked, as before this wait existed.
 *
 * Why wait rather than answer on_full: the table is not full (the live
 * keys are within the capacity), reclamation is only behind.  A thread
 * that creates and deletes keys faster than the call_rcu worker frees them
 * (a sweep evicting fresh states under the feet of their acquirers, on a
 * machine busy enough that the worker waits for a CPU) once answered every
 * new key from on_full -- with the default SRL_ON_FULL_ALLOW, admitting
 * every request of a key whose limit was a handful (docs/design.md, "The
 * pool bound race").  Waiting is the back-pressure: the churner slows to
 * the rate at which grace periods end.
 */
static bool pool_wait(struct local *l)
{
    if (rcu_read_ongoing() || getpid() != l->creator_pid)
        return false;
    rcu_barrier();   /* every call_rcu queued before it has run: pool_put */
    return true;
}

/* ------------------------------------------------------------ the index */

static pthread_mutex_t *stripe(struct local *l, uint64_t b)
{
    return &l->stripes[b & (NSTRIPES - 1)];
}

/* Lock the stripes of buckets a and b, lower stripe first (once if the
 * same). */
static void lock_pair(struct local *l, uint64_t a, uint64_t b)
{
    unsigned sa = (unsigned)(a & (NSTRIPES - 1)), sb = (unsigned)(b & (NSTRIPES - 1));
    if (sa > sb) {
        unsigned t = sa;
        sa = sb;
        sb = t;
    }
    pthread_mutex_lock(&l->stripes[sa]);
    if (sb != sa)
        pthread_mutex_lock(&l->stripes[sb]);
}

static void unlock_pair(struct local *l, uint64_t a, uint64_t b)
{
    pthread_mutex_unlock(stripe(l, a));
    if (stripe(l, b) != stripe(l, a))
        pthread_mutex_unlock(stripe(l, b));
}

static int free_entry(const struct local *l, uint64_t b)
{
    for (unsigned i = 0; i < BUCKET_ENTRIES; i++)
        if (__atomic_load_n(&l->index[b].e[i], __ATOMIC_RELAXED) == 0)
            return (int)i;
    return -1;
}

/*
 * Both of k's buckets are full: move one of their nodes to its other
 * candidate bucket, if that one has room and its stripe is free (trylock:
 * the lock order allows no wait for a third stripe).  The copy is written
 * before the old entry is cleared, so the node stays findable.  Returns
 * the freed entry of k->b1 or k->b2 (in *b), or -1.  Call with both of k's
 * stripes held, inside rcu_read_lock.
 */
static int relocate_one(struct local *l, const struct lkey *k, uint64_t *b)
{
    const uint64_t src[2] = {k->b1, k->b2};
    for (unsigned s = 0; s < 2; s++) {
        for (unsigned i = 0; i < BUCKET_ENTRIES; i++) {
            uint64_t v = __atomic_load_n(&l->index[src[s]].e[i], __ATOMIC_RELAXED);
            struct lnode *m = node_at(l, (uint32_t)v - 1);
            struct lkey mk;
            memcpy(mk.fp, m->fp, sizeof mk.fp);
            node_done(m);
            key_place(l, &mk);
            uint64_t alt = mk.b1 == src[s] ? mk.b2 : mk.b1;
            if (alt == k->b1 || alt == k->b2)
                continue;   /* full too */
            pthread_mutex_t *st = stripe(l, alt);
            bool held = st == stripe(l, k->b1) || st == stripe(l, k->b2);
            if (!held && pthread_mutex_trylock(st) != 0)
                continue;
            int j = free_entry(l, alt);
            if (j >= 0) {
                entry_store(&l->index[alt].e[j], v);
                entry_store(&l->index[src[s]].e[i], 0);
            }
            if (!held)
                pthread_mutex_unlock(st);
            if (j >= 0) {
                *b = src[s];
                return (int)i;
            }
        }
    }
    return -1;
}

/* Clear the entry of n (marked dead by this thread) and free it after a
 * grace period.  Call inside rcu_read_lock, without n->lock. */
static void unlink_node(struct local *l, struct lnode *n)
{
    struct lkey k;
    memcpy(k.fp, n->fp, sizeof k.fp);
    key_place(l, &k);
    uint32_t idx = n->idx;
    lock_pair(l, k.b1, k.b2);
    bool found = false;
    const uint64_t bs[2] = {k.b1, k.b2};
    for (unsigned s = 0; s < 2 && !found; s++)
        for (unsigned i = 0; i < BUCKET_ENTRIES && !found; i++)
            if ((uint32_t)__atomic_load_n(&l->index[bs[s]].e[i], __ATOMIC_RELAXED) == idx + 1) {
                entry_store(&l->index[bs[s]].e[i], 0);
                found = true;
            }
    unlock_pair(l, k.b1, k.b2);
    assert(found); /* only the thread that marked it dead clears it */
    (void)found;
    node_done(n);
    call_rcu(&n->u.rcu, free_node_rcu);
}

/* Visit the pool's LIVE nodes (acquire: their fields are initialised),
 * `count` indexes from `from` (wrapping), calling fn on each until it
 * returns nonzero.  Call inside rcu_read_lock: a node seen LIVE is not
 * reused before the section ends (had its grace period begun before the
 * section, the section would see it DEAD).  A DEAD node is skipped: its
 * grace period may have begun before this section, so it is not ours to
 * touch.  Returns indexes visited.
 * A walk of the pool, not of the index, sees each node once even while a
 * relocation moves its entry, and costs what the keys ever held, not what
 * the capacity could hold. */
static uint64_t pool_walk(struct local *l, uint64_t from, uint64_t count,
                          int (*fn)(struct local *, struct lnode *, void *), void *ctx)
{
    uint64_t fresh = __atomic_load_n(&l->fresh, __ATOMIC_ACQUIRE), seen = 0;
    if (fresh == 0)
        return 0;
    uint64_t i = from % fresh;
    if (count > fresh)
        count = fresh;
    while (seen < count) {
        seen++;
        struct lnode *n = node_at(l, (uint32_t)i);
        if (++i == fresh)
            i = 0;
        unsigned st = __atomic_load_n(&n->dead, __ATOMIC_ACQUIRE);
        if (st == NODE_LIVE && fn(l, n, ctx) != 0)
            break;
    }
    return seen;
}

/* Mark n dead and release its capacity slot (its counts stay in it, and
 * in stats walks, until free_node_rcu moves them).  Call with n->lock held
 * and n not dead (on a lock-free handle, its word already WORD_TOMB); the
 * caller then unlocks and calls unlink_node. */
static void retire_locked(struct local *l, struct lnode *n)
{
    __atomic_store_n(&n->dead, NODE_DEAD, __ATOMIC_RELEASE);
#ifdef SRL_MUTANTS
    if (l->broken & SRL__LOCAL_BROKEN_LF_RETIRE_EARLY) {
        /* Broken on purpose: counted at death, so a lock-free decision that
         * counts after this (its CAS came first) is lost. */
        struct shard *s = my_shard(l);
        shard_add(&s->retired_allowed, __atomic_load_n(&n->allowed, __ATOMIC_RELAXED));
        shard_add(&s->retired_denied, __atomic_load_n(&n->denied, __ATOMIC_RELAXED));
    }
#endif
    unreserve(l);
}

/* If n is live and at rest, mark it dead; returns true if it did.  Call
 * with n->lock held; the caller unlinks after unlocking. */
static bool evict_if_at_rest_locked(struct local *l, struct lnode *n)
{
    if (node_dead(n))
        return false;
    uint64_t now = srl__now(&l->lim);
    if (l->lim.cmp.conc >= 0) {
        /* Dead holders' and max_hold-expired units first. */
        uint32_t freed = srl__conc_reclaim(&l->lim.cmp.limits.limit[l->lim.cmp.conc],
                                           srl__cmp_conc_state(&l->lim.cmp, node_state(n)), now,
                                           srl__proc_alive, NULL);
        if (freed > 0)
            shard_add(&my_shard(l)->reclaimed, freed);
    }
    if (l->lockfree ? !word_retire(l, n, now, true)
                    : !srl__cmp_at_rest(&l->lim.cmp, node_state(n), now))
        return false;
    retire_locked(l, n);
    return true;
}

struct reclaim_ctx {
    uint64_t visited, reclaimed;
};

static int reclaim_visit(struct local *l, struct lnode *n, void *arg)
{
    struct reclaim_ctx *c = arg;
    if (pthread_mutex_trylock(&n->lock) != 0) {
        node_done(n);
    } else {
        bool evicted = evict_if_at_rest_locked(l, n);
        pthread_mutex_unlock(&n->lock);
        if (evicted) {
            unlink_node(l, n);
            c->reclaimed++;
        } else {
            node_done(n);
        }
    }
    return ++c->visited == RECLAIM_SCAN;
}

/*
 * The table is full: reclaim at-rest states among the next RECLAIM_SCAN
 * nodes of the pool from a cursor that moves on each time (so a different
 * sample at each call, in the order keys first arrived).  Busy
 * nodes are skipped with trylock: a locked state is in use, hence rarely
 * at rest, and an insert must not wait on other keys.  Returns the number
 * reclaimed.  Call inside rcu_read_lock.
 */
static uint64_t reclaim_some(struct local *l)
{
    struct reclaim_ctx c = {0, 0};
    uint64_t from = __atomic_load_n(&l->reclaim_cursor, __ATOMIC_RELAXED);
    uint64_t went = pool_walk(l, from, UINT64_MAX, reclaim_visit, &c);
    __atomic_store_n(&l->reclaim_cursor, from + went, __ATOMIC_RELAXED);
    if (c.reclaimed)
        shard_add(&my_shard(l)->evicted, c.reclaimed);
    return c.reclaimed;
}

/*
 * Find or create the live node for k.  Returns INSERT_OK with *out set,
 * INSERT_FULL when no slot is free even after reclaiming (or, rarely, when
 * both candidate buckets and their one-step relocations are full),
 * INSERT_WAIT when the pool is at its bound (see pool_wait), or
 * SRL_ENOMEM.  Call inside rcu_read_lock.
 */
static int find_or_insert(struct local *l, const struct lkey *k, struct lnode **out)
{
    if (!reserve(l)) {
        if (reclaim_some(l) == 0 || !reserve(l)) {
            /* Another thread may have created this very key meanwhile. */
            struct lnode *n = find(l, k);
            if (n == NULL)
                return INSERT_FULL;
            *out = n;
            return INSERT_OK;
        }
    }
    struct lnode *cand = NULL;
    int prc = pool_get(l, &cand);
    if (prc != 0) {
        unreserve(l);
        return prc;
    }
    memcpy(cand->fp, k->fp, sizeof cand->fp);
    cand->key_len = k->len;
    pthread_mutex_init(&cand->lock, NULL);
    cand->allowed = cand->denied = 0;
    cand->owner = l;
    memset(node_state(cand), 0, l->node_bytes - sizeof *cand);
    /* A fresh state needs a time; reading it outside any lock is harmless:
     * every later reader takes the lock after this node is published, so
     * it reads a time no earlier than this one. */
    srl__cmp_state_init(&l->lim.cmp, node_state(cand), srl__now(&l->lim));
    if (l->lim.cmp.conc >= 0)   /* see the shared store's insert */
        srl__conc_seed(srl__cmp_conc_state(&l->lim.cmp, node_state(cand)), randombytes_random());
    if (l->key_display > 0)
        memcpy((unsigned char *)node_state(cand) + l->state_bytes, k->key,
               k->len < l->key_display ? k->len : l->key_display);

    lock_pair(l, k->b1, k->b2);
    struct lnode *won = NULL;
#ifdef SRL_MUTANTS
    /* Broken on purpose (GET_THEN_PUT): the check (find, in the caller) and
     * the act (this insert) are two steps, so two first requests add two
     * nodes. */
    if (!(l->broken & SRL__LOCAL_BROKEN_GET_THEN_PUT))
#endif
        won = find(l, k);
    int at = -1;
    uint64_t b = k->b1;
    if (won == NULL) {
        at = free_entry(l, k->b1);
        if (at < 0) {
            b = k->b2;
            at = free_entry(l, b);
        }
        if (at < 0)
            at = relocate_one(l, k, &b);
        if (at >= 0) {
            /* Live before indexed: a pool walk that sees LIVE (acquire)
             * sees the node initialised, and finds its entry once it can
             * take these stripes. */
            __atomic_store_n(&cand->dead, NODE_LIVE, __ATOMIC_RELEASE);
            entry_store(&l->index[b].e[at], (uint64_t)k->tag << 32 | (cand->idx + 1));
        }
    }
    unlock_pair(l, k->b1, k->b2);
    if (at >= 0) {
        *out = cand;
        return INSERT_OK;
    }
    /* Lost the race (the winner's node is the key's state), or no entry
     * free.  Ours was never visible to anyone: back to the pool at once. */
    unreserve(l);
    pool_put(l, cand);
    if (won == NULL)
        return INSERT_FULL;
    *out = won;
    return INSERT_OK;
}
#ifdef SRL_MUTANTS
/* Broken on purpose (SRL__LOCAL_BROKEN_NO_LOCK): decide on a copy of the
 * state read and written back word by word with relaxed atomics, without
 * the node's lock: concurrent acquirers lose each other's updates (two
 * read the same level, both admit, one write wins), while staying defined C (and clean
 * for ThreadSanitizer, which tests the real path).  States larger than
 * NO_LOCK_MAX_WORDS words are decided under the lock as usual. */
static bool acquire_unlocked_broken(struct local *l, struct lnode *n, uint32_t cost,
                                    srl_decision *d)
{
    size_t words = l->state_bytes / sizeof(uint64_t);
    if (words > NO_LOCK_MAX_WORDS)
        return false;
    uint64_t copy[NO_LOCK_MAX_WORDS];
    uint64_t *st = node_state(n);
    for (size_t i = 0; i < words; i++)
        copy[i] = __atomic_load_n(&st[i], __ATOMIC_RELAXED);
    srl__cmp_decide(&l->lim.cmp, copy, srl__now(&l->lim), cost, 1, d);
    if (d->allowed)
        for (size_t i = 0; i < words; i++)
            __atomic_store_n(&st[i], copy[i], __ATOMIC_RELAXED);
    count_one(d->allowed ? &n->allowed : &n->denied);
    return true;
}
#endif

static void count_full(struct local *l, const srl_decision *d)
{
    struct shard *s = my_shard(l);
    shard_add(d->allowed ? &s->full_allowed : &s->full_denied, 1);
    if (!d->allowed && l->lim.dry_run)
        shard_add(&s->would_deny, 1);
}

/* A dry-run handle's would-be denial (node locked, counted denied too):
 * in the shard, since a node's counters die with it and would_deny is
 * rare enough not to need a per-key count. */
static void count_would_deny(struct local *l, const srl_decision *d)
{
    if (!d->allowed && l->lim.dry_run)
        shard_add(&my_shard(l)->would_deny, 1);
}

/* ------------------------------------------------------------ the ops */

/* srl_enter's part of a decision (node locked): one unit for this process. */
static void enter_locked(struct local *l, struct lnode *n, uint64_t now,
                         srl_lease *lease, srl_decision *d)
{
    struct srl__proc me;
    srl__proc_self(&me);
    uint32_t entry, gen, freed;
    srl__cmp_enter(&l->lim.cmp, node_state(n), now, &me, srl__proc_alive, NULL, d, &entry, &gen,
                   &freed);
    if (freed > 0)
        shard_add(&my_shard(l)->reclaimed, freed);
    if (gen != 0) {
        /* The key by its fingerprint, as the shared store: srl_leave finds
         * its live node again by a lookup, never by an address that may
         * have been reused (a new state of the key has another holder
         * generation). */
        lease->owner = l->lim.lease_owner;
        memcpy(&lease->where[0], n->fp, 8);
        memcpy(&lease->where[1], n->fp + 8, 8);
        lease->entry = entry;
        lease->gen = gen;
    }
}

/* srl_acquire (lease NULL), srl_reserve (lease NULL, max_wait > 0) and
 * srl_enter. */
static int local_decide(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                        uint64_t max_wait, srl_lease *lease, srl_decision *d)
{
    struct local *l = local_of(lim);
    struct lkey k;
    key_of(l, key, len, &k);
    for (;;) {
        rcu_read_lock();
        struct lnode *n = find(l, &k);
        if (n == NULL) {
            int rc = find_or_insert(l, &k, &n);
            if (rc != INSERT_OK) {
                rcu_read_unlock();
                if (rc == INSERT_WAIT && !SRL__MUTANT(l->broken, SRL__LOCAL_BROKEN_NO_POOL_WAIT) &&
                    pool_wait(l))
                    continue;
                if (rc != INSERT_FULL && rc != INSERT_WAIT)
                    return rc;
                srl__decide_on_full(lim, SRL_DECISION_UNTRACKED, d);
                count_full(l, d);
                return 0;
            }
        }
        if (l->lockfree && lease == NULL && max_wait == 0) {
            /* The lock-free path: one CAS on the word.  The node was found
             * (or created) inside this read-side section, so it is not
             * reused before the section ends; if it was retired, the word
             * says so and the locked path below retries the lookup. */
            if (word_update(l, n, WORD_DECIDE, cost, 0, d)) {
                if (SRL__MUTANT(l->broken, SRL__LOCAL_BROKEN_YIELD))
                    sched_yield();   /* the amplifier: a retirement before we count */
                count_decision(l, n, d->allowed);
#ifdef SRL_MUTANTS
                if (node_dead(n) || __atomic_load_n(node_word(n), __ATOMIC_RELAXED) == WORD_TOMB)
                    LF_SAW(l, lf_late);   /* counted on a state retired meanwhile */
#endif
                node_done(n);
                rcu_read_unlock();
                return 0;
            }
        }
#ifdef SRL_MUTANTS
        if (__builtin_expect(l->broken & SRL__LOCAL_BROKEN_NO_LOCK, 0) && lease == NULL && max_wait == 0 &&
            acquire_unlocked_broken(l, n, cost, d)) {
            node_done(n);
            rcu_read_unlock();
            return 0;
        }
#endif
        if (SRL__MUTANT(l->broken, SRL__LOCAL_BROKEN_YIELD))
            sched_yield();
        if (node_lock(l, n) != 0) {
            node_done(n);
            rcu_read_unlock();
            srl__decide_on_full(lim, SRL_DECISION_DEGRADED, d);
            return SRL_ETIMEDOUT;
        }
        if (node_dead(n) && !SRL__MUTANT(l->broken, SRL__LOCAL_BROKEN_NO_DEAD_RETRY)) {
            /* Evicted (or reset) between our lookup and our lock: deciding
             * on it would admit requests that the key's next state will
             * admit again.  Look the key up afresh. */
            pthread_mutex_unlock(&n->lock);
            node_done(n);
            rcu_read_unlock();
            continue;
        }
        if (l->lockfree) {
            /* lease == NULL (no concurrency limit); live under the lock, so
             * not retired: a CAS, since lock-free deciders do not lock. */
            if (!word_update(l, n, max_wait != 0 ? WORD_RESERVE : WORD_DECIDE, cost,
                             max_wait, d)) {
                pthread_mutex_unlock(&n->lock); /* cannot happen: retired => dead */
                node_done(n);
                rcu_read_unlock();
                continue;
            }
        } else {
            uint64_t now = srl__now(lim);
            if (lease == NULL && max_wait != 0)
                srl__cmp_reserve(&lim->cmp, node_state(n), now, cost, max_wait, d);
            else if (lease == NULL)
                srl__cmp_decide(&lim->cmp, node_state(n), now, cost, 1, d);
            else
                enter_locked(l, n, now, lease, d);
        }
        count_decision(l, n, d->allowed);
        count_would_deny(l, d);
        pthread_mutex_unlock(&n->lock);
        node_done(n);
        rcu_read_unlock();
        return 0;
    }
}

static int local_acquire(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                         srl_decision *d)
{
    return local_decide(lim, key, len, cost, 0, NULL, d);
}

static int local_reserve(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                         uint64_t max_wait, srl_decision *d)
{
    return local_decide(lim, key, len, cost, max_wait, NULL, d);
}

static int local_enter(srl_limiter *lim, const void *key, size_t len, srl_lease *lease,
                       srl_decision *d)
{
    return local_decide(lim, key, len, 1, 0, lease, d);
}

static int lock_live(struct local *l, const struct lkey *k, struct lnode **out);

static int local_leave(srl_limiter *lim, srl_lease *lease)
{
    struct local *l = local_of(lim);
    struct lkey k = {.key = NULL, .len = 0};
    memcpy(k.fp, &lease->where[0], 8);
    memcpy(k.fp + 8, &lease->where[1], 8);
    key_place(l, &k);
    struct lnode *n = NULL;
    rcu_read_lock();
    int rc = lock_live(l, &k, &n);
    if (rc != 0) {
        rcu_read_unlock();
        return rc;   /* SRL_ENOENT: the key is gone, its units were reclaimed */
    }
    rc = srl__cmp_leave(&lim->cmp, node_state(n), lease->entry, lease->gen, (int32_t)getpid());
    pthread_mutex_unlock(&n->lock);
    node_done(n);
    rcu_read_unlock();
    return rc;
}

/* The key's live node, locked, in *out: 0, or SRL_ENOENT if the key is not
 * tracked, or SRL_ETIMEDOUT.  Call inside rcu_read_lock; returns still
 * inside it (with (*out)->lock held on 0).  A node found dead (evicted or
 * reset between lookup and lock) is let go and the lookup retried, outside
 * the read-side section for a moment, since a live successor may exist. */
static int lock_live(struct local *l, const struct lkey *k, struct lnode **out)
{
    for (;;) {
        struct lnode *n = find(l, k);
        if (n == NULL)
            return SRL_ENOENT;
        if (node_lock(l, n) != 0) {
            node_done(n);
            return SRL_ETIMEDOUT;
        }
        if (!node_dead(n)) {
            *out = n;
            return 0;
        }
        pthread_mutex_unlock(&n->lock);
        node_done(n);
        rcu_read_unlock();
        rcu_read_lock();
    }
}

/* Enter a read-side section and lock key's live node: 0 with *n locked,
 * or an error with nothing held.  unlock_key() leaves both. */
static int lock_key(struct local *l, const void *key, size_t len, struct lnode **n)
{
    struct lkey k;
    key_of(l, key, len, &k);
    rcu_read_lock();
    int rc = lock_live(l, &k, n);
    if (rc != 0)
        rcu_read_unlock();
    return rc;
}

static void unlock_key(struct lnode *n)
{
    pthread_mutex_unlock(&n->lock);
    node_done(n);
    rcu_read_unlock();
}

static int local_peek(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                      srl_decision *d)
{
    struct local *l = local_of(lim);
    struct lnode *n = NULL;
    int rc = lock_key(l, key, len, &n);
    if (rc != 0)
        return rc;
    if (l->lockfree) {
        uint64_t w = __atomic_load_n(node_word(n), __ATOMIC_RELAXED);
        srl__cmp_decide(&lim->cmp, &w, srl__now(lim), cost, 0, d);
    } else {
        srl__cmp_decide(&lim->cmp, node_state(n), srl__now(lim), cost, 0, d);
    }
    unlock_key(n);
    return 0;
}

static int local_key_state(srl_limiter *lim, const void *key, size_t len, void *buf)
{
    struct lnode *n = NULL;
    int rc = lock_key(local_of(lim), key, len, &n);
    if (rc != 0)
        return rc;
    state_copy(local_of(lim), n, buf);
    unlock_key(n);
    return 0;
}

/* Under the node's lock, as an admission. */
static int local_refund(srl_limiter *lim, const void *key, size_t len, uint32_t cost)
{
    struct local *l = local_of(lim);
    struct lnode *n = NULL;
    int rc = lock_key(l, key, len, &n);
    if (rc != 0)
        return rc;
    if (l->lockfree)
        (void)word_update(l, n, WORD_REFUND, cost, 0, NULL); /* locked, live: not retired */
    else
        srl__cmp_refund(&lim->cmp, node_state(n), srl__now(lim), cost);
    unlock_key(n);
    return 0;
}

static int local_reset_key(srl_limiter *lim, const void *key, size_t len)
{
    struct local *l = local_of(lim);
    struct lkey k;
    key_of(l, key, len, &k);
    rcu_read_lock();
    struct lnode *n = NULL;
    int rc = lock_live(l, &k, &n);
    if (rc != 0) {
        rcu_read_unlock();
        return rc;
    }
    if (l->lockfree)
        (void)word_retire(l, n, 0, false);
    retire_locked(l, n);
    pthread_mutex_unlock(&n->lock);
    unlink_node(l, n);
    rcu_read_unlock();
    return 0;
}

/* The LIVE node at pool index i (acquire: initialised), or NULL.  Call
 * inside rcu_read_lock with i below an acquire-load of l->fresh; see
 * pool_walk for why only LIVE ones. */
static struct lnode *live_at(const struct local *l, uint64_t i)
{
    struct lnode *n = node_at(l, (uint32_t)i);
    return __atomic_load_n(&n->dead, __ATOMIC_ACQUIRE) == NODE_LIVE ? n : NULL;
}

/* Walks the whole pool under one read-side critical section: it delays
 * reclamation (not other threads) until it ends.  Each node's lock is taken
 * once, briefly, and time is read inside it. */
static int64_t local_evict_idle(srl_limiter *lim)
{
    struct local *l = local_of(lim);
    int64_t evicted = 0;
    rcu_read_lock();
    uint64_t fresh = __atomic_load_n(&l->fresh, __ATOMIC_ACQUIRE);
    for (uint64_t i = 0; i < fresh; i++) {
        struct lnode *n = live_at(l, i);
        if (n == NULL)
            continue;
        /* Best effort, as in the shared store: a node whose lock cannot be
         * had is skipped (its timeout counted); the others are still swept. */
        if (node_lock(l, n) != 0) {
            node_done(n);
            continue;
        }
        bool gone = evict_if_at_rest_locked(l, n);
        pthread_mutex_unlock(&n->lock);
        if (gone) {
            unlink_node(l, n);
            evicted++;
        } else {
            node_done(n);
        }
    }
    rcu_read_unlock();
    if (evicted)
        shard_add(&my_shard(l)->evicted, (uint64_t)evicted);
    return evicted;
}

/* Sums the counts of live nodes, of dead nodes still awaiting their grace
 * period (their counts move to the shards only in free_node_rcu, which
 * waits for retire_lock: each node is counted once, in itself or in the
 * shards), and the shards.  The counters are relaxed atomics, summed
 * without the nodes' locks.  Under concurrent traffic the sum is a
 * snapshot of no single instant; once the deciders are done it is exact. */
static int local_stats(srl_limiter *lim, srl_stats *out)
{
    struct local *l = local_of(lim);
    srl_stats s = {0};
    s.capacity = l->capacity;
    s.used = __atomic_load_n(&l->used, __ATOMIC_RELAXED);
    bool early = SRL__MUTANT(l->broken, SRL__LOCAL_BROKEN_LF_RETIRE_EARLY);
    pthread_mutex_lock(&l->retire_lock);
    uint64_t fresh = __atomic_load_n(&l->fresh, __ATOMIC_ACQUIRE);
    for (uint64_t i = 0; i < fresh; i++) {
        /* LIVE or DEAD cannot become FREE (nor be reused) while we hold
         * retire_lock; a NEW node has counted nothing yet. */
        struct lnode *n = node_at(l, (uint32_t)i);
        unsigned st = __atomic_load_n(&n->dead, __ATOMIC_ACQUIRE);
        if (st == NODE_LIVE || (st == NODE_DEAD && !early)) {
            s.allowed += __atomic_load_n(&n->allowed, __ATOMIC_RELAXED);
            s.denied += __atomic_load_n(&n->denied, __ATOMIC_RELAXED);
        }
    }
    for (unsigned i = 0; i < NSHARDS; i++) {
        const struct shard *sh = &l->shards[i];
        uint64_t fa = __atomic_load_n(&sh->full_allowed, __ATOMIC_RELAXED);
        uint64_t fd = __atomic_load_n(&sh->full_denied, __ATOMIC_RELAXED);
        s.full += fa + fd;
        s.allowed += fa + __atomic_load_n(&sh->retired_allowed, __ATOMIC_RELAXED);
        s.denied += fd + __atomic_load_n(&sh->retired_denied, __ATOMIC_RELAXED);
        s.evicted += __atomic_load_n(&sh->evicted, __ATOMIC_RELAXED);
        s.timeouts += __atomic_load_n(&sh->timeouts, __ATOMIC_RELAXED);
        s.reclaimed += __atomic_load_n(&sh->reclaimed, __ATOMIC_RELAXED);
        s.would_deny += __atomic_load_n(&sh->would_deny, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&l->retire_lock);
    /* recovered, reset_slots: no crash repair exists in one process (a
     * thread cannot die holding a node's lock without its process). */
    *out = s;
    return 0;
}

static int local_info(srl_limiter *lim, srl_info *out)
{
    struct local *l = local_of(lim);
    *out = (srl_info){
        .kind = SRL_STORE_LOCAL,
        .policy = lim->cmp.limits.limit[0],
        .limits = lim->cmp.limits,
        .state_bytes = (uint32_t)l->state_bytes,
        .on_full = lim->on_full,
        .capacity = l->capacity,
        .key_display = l->key_display,
        .slots_per_bucket = 0,  /* no segment: the index is private */
        .buckets = 0,
        .segment_bytes = 0,
        .slot_bytes = (uint32_t)l->node_bytes, /* a node of the pool */
        .mode = 0,
        .owner_uid = (uint32_t)getuid(),
        .creator_pid = (int32_t)l->creator_pid,
        .created_unix_ns = l->created_unix_ns,
        .name = "",
    };
    return 0;
}

/* fn is called outside the node's lock (it may take its time) but inside
 * the read-side critical section, which keeps e.display valid. */
static int64_t local_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx)
{
    struct local *l = local_of(lim);
    int64_t visited = 0;
    void *copy = malloc(l->state_bytes);
    if (copy == NULL)
        return SRL_ENOMEM;
    rcu_read_lock();
    uint64_t fresh = __atomic_load_n(&l->fresh, __ATOMIC_ACQUIRE);
    for (uint64_t i = 0; i < fresh; i++) {
        struct lnode *n = live_at(l, i);
        if (n == NULL)
            continue;
        srl_entry e = {0};
        if (node_lock(l, n) != 0) {
            node_done(n);
            rcu_read_unlock();
            free(copy);
            return SRL_ETIMEDOUT;   /* as the shared store: a walk does not skip keys silently */
        }
        if (node_dead(n)) {
            pthread_mutex_unlock(&n->lock);
            node_done(n);
            continue;
        }
        uint64_t now = srl__now(lim);
        e.allowed = __atomic_load_n(&n->allowed, __ATOMIC_RELAXED);
        e.denied = __atomic_load_n(&n->denied, __ATOMIC_RELAXED);
        /* One read of the state (lock-free deciders may move it on). */
        state_copy(l, n, copy);
        e.last_ns = srl__cmp_last_ns(&lim->cmp, copy);
        srl__cmp_decide(&lim->cmp, copy, now, 1, 0, &e.now);
        e.at_rest = srl__cmp_at_rest(&lim->cmp, copy, now);
        e.inflight = srl__cmp_inflight(&lim->cmp, copy);
        e.state = copy;   /* fn runs outside the node's lock: it gets a copy */
        pthread_mutex_unlock(&n->lock);
        e.key_len = n->key_len;
        e.display = node_display(l, n);
        e.display_len = e.key_len < l->key_display ? e.key_len : l->key_display;
        memcpy(e.fingerprint, n->fp, sizeof e.fingerprint);
        visited++;
        int stop = fn(&e, ctx);
        node_done(n);
        if (stop)
            break;
    }
    rcu_read_unlock();
    free(copy);
    return visited;
}

/* Frees everything, with no node DEAD or in use (rcu_barrier has run). */
static void free_local(struct local *l)
{
    /* Every callback's pool_put released pool_lock: taking it orders their
     * writes before ours (rcu_barrier does too, but TSan cannot see it). */
    pthread_mutex_lock(&l->pool_lock);
    pthread_mutex_unlock(&l->pool_lock);
    uint64_t fresh = l->fresh;
    for (uint64_t i = 0; i < fresh; i++) {
        struct lnode *n = node_at(l, (uint32_t)i);
        if (n->dead == NODE_LIVE)
            pthread_mutex_destroy(&n->lock);
    }
    for (uint32_t c = 0; l->chunks != NULL && c < l->max_chunks; c++)
        free(l->chunks[c]);
    free(l->chunks);
    if (l->index != NULL)
        munmap(l->index, l->index_bytes);
    for (unsigned i = 0; i < NSTRIPES; i++)
        pthread_mutex_destroy(&l->stripes[i]);
    pthread_mutex_destroy(&l->pool_lock);
    pthread_mutex_destroy(&l->retire_lock);
    free(l);
}

/* Must not race other calls on lim (srl.h).  See FORK above for the
 * child case. */
static void local_close(srl_limiter *lim)
{
    struct local *l = local_of(lim);
    if (getpid() != l->creator_pid)
        return; /* inherited across fork: liburcu cannot run here */
    rcu_barrier(); /* every free_node_rcu has run: no node is DEAD */
    free_local(l);
}

static const struct srl__store_ops local_ops = {
    .acquire = local_acquire,
    .peek = local_peek,
    .refund = local_refund,
    .reserve = local_reserve,
    .reset_key = local_reset_key,
    .evict_idle = local_evict_idle,
    .stats = local_stats,
    .info = local_info,
    .foreach = local_foreach,
    .check = NULL, /* srl_check: SRL_ENOTSUP, as srl.h documents */
    .enter = local_enter,
    .leave = local_leave,
    .key_state = local_key_state,
    .close = local_close,
};

/* ------------------------------------------------------------ open */

static unsigned log2_at_least(uint64_t v)
{
    unsigned s = 0;
    while (s < 63 && (1ull << s) < v)
        s++;
    return s;
}

/* The index: lazily zeroed anonymous memory (a huge capacity costs address
 * space, not memory, until keys arrive), on huge pages when it is small
 * enough to be filled. */
static struct lbucket *index_alloc(size_t bytes, size_t *mapped)
{
    bool huge = bytes >= HUGE_PAGE && bytes <= INDEX_HUGE_MAX;
    size_t len = bytes + (huge ? HUGE_PAGE : 0);
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (huge) {
        /* Trim to a 2 MiB-aligned start so that every 2 MiB of it can be a
         * huge page. */
        uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
        size_t head = (size_t)(a - (uintptr_t)p), tail = len - head - bytes;
        if (head)
            munmap(p, head);
        if (tail)
            munmap((unsigned char *)a + bytes, tail);
        p = (unsigned char *)a;
        (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: fewer TLB misses */
    }
    *mapped = bytes;
    return (struct lbucket *)p;
}

int srl_open_local(const srl_config *cfg, srl_limiter **out)
{
    srl_config unused;
    int rc = srl__open_prologue(cfg, 0, &unused, &cfg, out);
    if (rc == 0 && cfg->tier_count > 0)
        return SRL_ENOTSUP;   /* tiers: the shared and anonymous stores only */
    if (rc != 0)
        return rc;

    size_t bytes = (sizeof(struct local) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    struct local *l = aligned_alloc(CACHE_LINE, bytes);
    if (l == NULL)
        return SRL_ENOMEM;
    memset(l, 0, sizeof *l);
    if (srl__limiter_init(&l->lim, &local_ops, cfg) != 0) {
        free(l);
        return SRL_EPOLICY;
    }
    l->lim.impl = l;
    l->state_bytes = l->lim.cmp.state_bytes;
    /* The lock-free path needs a state of one word that a decision alone
     * writes: one GCRA limit, no ban word, no dry run (kept locked). */
    const struct srl__compound *c = &l->lim.cmp;
    l->lockfree = (cfg->flags & SRL_CONFIG_LOCKFREE) != 0 && c->count == 1 &&
                  c->limits.limit[0].algorithm == SRL_GCRA && !c->penalty && c->conc < 0 &&
                  c->state_bytes == sizeof(uint64_t) && !l->lim.dry_run;
    l->capacity = cfg->capacity;
    l->key_display = cfg->key_display;
    l->creator_pid = getpid();
    l->created_unix_ns = srl__clock_ns(CLOCK_REALTIME);
    randombytes_buf(l->hash_key, sizeof l->hash_key);
    l->node_bytes = (sizeof(struct lnode) + l->state_bytes + l->key_display + CACHE_LINE - 1) /
                    CACHE_LINE * CACHE_LINE;

    /* Two index entries per key of capacity: the first candidate bucket
     * has room for nearly every key (a bucket of 8 at an average of 4 at
     * full capacity), and both are full for too few keys to fail a
     * one-step relocation. */
    l->nbuckets = (cfg->capacity + BUCKET_ENTRIES / 2 - 1) / (BUCKET_ENTRIES / 2);
    if (l->nbuckets < 2)
        l->nbuckets = 2;
    /* Chunks of about capacity/16 nodes (at most 1/16 of the capacity's
     * nodes allocated and not used), and room for 4 x capacity nodes: the
     * live ones and those awaiting their grace period. */
    l->chunk_shift = log2_at_least(cfg->capacity / 16);
    if (l->chunk_shift < CHUNK_SHIFT_MIN)
        l->chunk_shift = CHUNK_SHIFT_MIN;
    if (l->chunk_shift > CHUNK_SHIFT_MAX)
        l->chunk_shift = CHUNK_SHIFT_MAX;
    uint64_t pool_max = 4 * cfg->capacity + (4ull << l->chunk_shift);
    if (pool_max > UINT32_MAX)
        pool_max = UINT32_MAX; /* node indexes are 32-bit */
    l->max_chunks = (uint32_t)(pool_max >> l->chunk_shift);
    l->chunks = calloc(l->max_chunks, sizeof *l->chunks);
    l->index = index_alloc(l->nbuckets * sizeof(struct lbucket), &l->index_bytes);
    pthread_mutex_init(&l->pool_lock, NULL);
    pthread_mutex_init(&l->retire_lock, NULL);
    for (unsigned i = 0; i < NSTRIPES; i++)
        pthread_mutex_init(&l->stripes[i], NULL);
    if (l->chunks == NULL || l->index == NULL) {
        free_local(l);
        return SRL_ENOMEM;
    }
    *out = &l->lim;
    return 0;
}

#ifdef SRL_MUTANTS
/* Test hook (testhooks.h). */
int srl__local_set_broken(srl_limiter *lim, unsigned flags)
{
    if (lim == NULL || lim->ops != &local_ops || (flags & ~SRL__LOCAL_BROKEN_ALL) != 0)
        return SRL_EINVAL;
    __atomic_store_n(&local_of(lim)->broken, flags, __ATOMIC_RELAXED);
    return 0;
}

int srl__local_lf_counts(srl_limiter *lim, struct srl__local_lf_counts *out)
{
    if (lim == NULL || lim->ops != &local_ops || out == NULL)
        return SRL_EINVAL;
    struct local *l = local_of(lim);
    out->conflicts = __atomic_load_n(&l->lf_conflicts, __ATOMIC_RELAXED);
    out->tombstones = __atomic_load_n(&l->lf_tombstones, __ATOMIC_RELAXED);
    out->late = __atomic_load_n(&l->lf_late, __ATOMIC_RELAXED);
    return 0;
}
#endif
