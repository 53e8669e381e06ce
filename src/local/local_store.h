/*
 * local_store.h - the in-process store (srl_open_local), internal: the node, the
 * index bucket, the handle, and the helpers more than one of its files
 * needs.  Only the files of src/local/ include it.
 *
 * Files (each opens with the design of what it holds):
 *   local.c           the ops: the decision (srl_acquire, srl_reserve,
 *                     srl_enter), leave, peek, key_state, refund, reset;
 *                     open and close (and FORK); the test hooks
 *   local_index.c     the pool of nodes (get, put, the grace-period free, the
 *                     wait at its bound), the bucketed index (stripe locks,
 *                     insert, relocation, unlink), and a node's retirement
 *                     and eviction, with the reclamation an insert into a
 *                     full table runs (insert and reclamation call each
 *                     other, so they share a file); its INVARIANTS
 *   local_lock.c      a node's lock when it must wait or wake (a futex word;
 *                     the uncontended path is node_lock, inline here)
 *   local_lockfree.c  the lock-free GCRA state word (SRL_CONFIG_LOCKFREE):
 *                     why a CAS never lands where it must not; retirement
 *                     of the word and its atomic copy
 *   local_walk.c      the walks of the pool (evict_idle, stats, foreach), and
 *                     info; calls into local_index.c, never the reverse
 *   local_control.c   operator control (exempt, ban, per-key limits) and the
 *                     decision of a key that has any (n->ctl not 0); calls
 *                     local_index.c and local_lockfree.c, never local.c
 *
 * WHAT IT HOLDS
 *   - struct lnode: one key.  Its 128-bit fingerprint, its lock, its
 *     counts, then the algorithm's state inline and the display copy of
 *     the key (key_display bytes): one line for the usual states, whose
 *     hit touches nothing else; node_bytes apart, 64-byte aligned, in the
 *     pool's chunks (local_index.c), in one of the key's home windows when
 *     one had a free node at its insert (node_homes; local_index.c, HOMES).
 *     Its struct lcold (retirement's words) sits apart, beside its chunk.
 *   - struct lbucket: a line of the index, 8 entries.  An entry is 0
 *     (empty) or tag << 32 | (node index + 1), the tag being 32 bits of the
 *     fingerprint.  A key lives in one of two candidate buckets chosen by
 *     the fingerprint (key_place, as the shared table, src/shm/shm_table.c).
 *   - struct local, the handle, and struct shard, its rarely written
 *     counters; struct lkey, a key as lookups see it.
 *   - The helpers that several files share, and those of the decision path
 *     (HOT PATH below), static inline; the srl__local_* functions one file
 *     defines for the others, declared at the end (all else is static).
 *   Identity is the fingerprint: SipHash-2-4 with 128-bit output of the key
 *   under a random key per limiter (crypto_shorthash_siphashx24), as in the
 *   shared store; clients choose keys, so an unkeyed hash would let them pile
 *   keys into a few buckets.  The key bytes themselves are not kept (only the
 *   display copy), so a key costs the same whatever its length.
 *
 * CONCURRENCY (every file keeps to it)
 *   - Every index access (lookup, insert, delete, walk) runs inside
 *     rcu_read_lock (urcu-bp: a library cannot make the application register
 *     its threads, and the "bulletproof" flavour registers them lazily).
 *     Entries are loaded with acquire and stored with release, so a node's
 *     initialising writes happen before any lookup that finds it.
 *   - A state, its counters and its life word are read and written under
 *     the node's lock (life and the counters are also accessed with relaxed
 *     atomics, so lookups may peek at life without the lock, and a broken
 *     test variant may run without it and still be well-defined C).
 *     Except on a lock-free handle (local_lockfree.c), whose state word
 *     and counters are also written without the lock, atomically.
 *   - Lock order: stripe locks in increasing stripe order (a third one only
 *     with trylock); a node's lock is never taken while a stripe lock is
 *     held, nor a stripe lock while a node's lock is held.  A second node's
 *     lock only with trylock (the on_full=evict scan holds its best victim
 *     while it tries others: local_index.c).  The pool mutex
 *     is innermost and held for a few instructions; retire_lock is taken
 *     alone (a stats walk, free_node_rcu).
 *   - No shared line is written on the hit path.  l->used is written only
 *     on insert and delete; the full, evicted (and evicted_active) and
 *     retired counters live in cache-line shards picked by the current CPU
 *     and are written only on the full, evict and delete paths.  srl_stats
 *     adds them up.
 *
 * HOT PATH
 *   local_decide (local.c) on a key it finds, that no operator controls
 *   (n->ctl 0, one load on the node's first line), calls no function of another
 *   file: what it needs is here, static inline (find and scan, node_lock,
 *   word_update, the counters), or in local.c.  Only a miss calls out
 *   (srl__local_find_or_insert; srl__local_pool_wait at the pool's bound),
 *   on a path that already takes the pool's and two stripe locks.
 *   Test-only code is not here: the patches of tests/mutants (its README).
 */
#ifndef SRL_LOCAL_H
#define SRL_LOCAL_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <sodium.h>
#include <urcu-bp.h>

#include "cas16.h"
#include "local_lock.h"
#include "prefetch.h"
#include "limiter.h"
#include "testhooks.h"

/*
 * ThreadSanitizer cannot see liburcu's grace periods: its atomics are
 * inline assembly in an uninstrumented library.  These annotations tell it
 * the orderings liburcu really provides, and nothing more: every
 * reader's use of a node happens before call_rcu's callback puts it back
 * on the free list (the grace period), and what the caller of call_rcu
 * wrote before it happens before the callback.  Each reader releases on
 * the node's address when it is done with the node, the unlinker on the
 * rcu_head; the callback acquires both.  (Publication needs no
 * annotation: index entries are C11 atomics, which it sees.)
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

/* The broken variants (SRL__LOCAL_BROKEN_*, srl__local_set_broken) are
 * declared in testhooks.h and written in tests/mutants/local*.patch, which
 * only the test copy of the library applies. */

#define CACHE_LINE 64
#define NSHARDS 16          /* counter shards, by CPU; power of two */
#define BUCKET_ENTRIES 8    /* one 64-byte line of 8-byte entries */
#define NSTRIPES 256        /* index write locks, by bucket; power of two */
#define HOME_WINDOW 2       /* adjacent nodes per home window (local_index.c) */

/* n->ctl, operator control (local_control.c): a key's own limits index in
 * the low byte (l->keylim), and flags.  0 for a key nobody controls: the
 * decision path then looks at nothing else. */
#define CTL_IDX 0xffu             /* l->keylim index, with CTL_OWN or CTL_CALL */
#define CTL_OWN 0x100u            /* stored limits (srl_key_set_limits) */
#define CTL_CALL 0x200u           /* state in a call's limits (srl_acquire_limits) */
#define CTL_EXEMPT 0x400u
#define CTL_BANNED 0x800u         /* banned by hand until node_cold()->ban_until */
#define CTL_KEYLIMS 256u          /* distinct limit sets per handle, as a segment */
#define CTL_REASONS 64u           /* distinct ban reasons per handle, as a segment */
#define CTL_REASON_TEXT (SRL_BAN_REASON_MAX + 1)

/* One line holds all a hit touches: what a lookup compares, the lock, the
 * counts and the state (whole for a token bucket, GCRA or sliding counter:
 * 40 + 24 bytes at most), so that a node of those is one line, a hit
 * waits for one line per node it looks at, and key_of prefetches one line
 * per home node (l->hot_lines: more only for a bigger state).  The display
 * copy follows the state.  What only a retirement and the grace period
 * need is apart, in the node's struct lcold (node_cold). */
struct lnode {
    uint8_t fp[16];           /* the key's fingerprint; fixed while indexed */
    uint16_t key_len;         /* likewise (SRL_KEY_MAX fits) */
    uint16_t life;            /* NODE_*: LIVE -> DEAD under lock; atomic */
    uint32_t idx;             /* this node's index in the pool; fixed */
    uint32_t lock;            /* guards life, the counts and the state
                                 (node_lock: 0 free, 1 held, 2 held, maybe awaited) */
    uint32_t ctl;             /* operator control (CTL_* below, local_control.c);
                                 written under the lock, read atomically */
    /* The counts sit 16-aligned just before the state: a lock-free
     * admission CASes the two as one pair (l->lf_pair, NODE_PAIR_OK). */
    uint64_t counts;          /* allowed (low 32 bits) and denied (high 32), each
                                 saturating, as a slot's are: COUNT_* below */
    uint64_t data[];          /* the state (state_bytes), then the display copy */
};
_Static_assert(sizeof(struct lnode) == 40, "a token bucket's state ends the node's first line");

/* A node's words for its retirement, one per node, beside its chunk's
 * nodes (l->colds, node_cold), written by the thread that unlinks it and
 * read by the call_rcu callback, which finds the node by them. */
struct lcold {
    struct rcu_head rcu;      /* from unlink to the callback */
    struct local *owner;
    uint32_t idx;             /* the node's index (node_at) */
    uint32_t free_next;       /* on the free list: next index + 1, or 0 */
    /* The operator's ban (CTL_BANNED, local_control.c), under the node's
     * lock: apart from the node's line, read only for a banned key. */
    uint64_t ban_until;       /* ticker time the hand ban ends */
    uint32_t reason;          /* l->reasons index + 1, 0: none */
};

/* n->counts: allowed in the low half, denied in the high half. */
#define COUNT_ALLOWED 1ull
#define COUNT_DENIED (1ull << 32)
static inline uint64_t counts_allowed(uint64_t c)
{
    return (uint32_t)c;
}
static inline uint64_t counts_denied(uint64_t c)
{
    return c >> 32;
}
/* c plus one of one (COUNT_ALLOWED or COUNT_DENIED), saturating: a half
 * at UINT32_MAX stays there and never carries. */
static inline uint64_t counts_plus(uint64_t c, uint64_t one)
{
    uint32_t half = one == COUNT_ALLOWED ? (uint32_t)c : (uint32_t)(c >> 32);
    return half == UINT32_MAX ? c : c + one;
}

/* Whether a node's counts and its first state word make one
 * 16-aligned pair (nodes are 64-aligned, so the offset decides): true
 * wherever struct lnode has no padding.  A target where it is not keeps
 * the CAS and the add (lf_pair false). */
#define NODE_PAIR_OK                                                              \
    (offsetof(struct lnode, counts) % 16 == 0 &&                                  \
     offsetof(struct lnode, data) == offsetof(struct lnode, counts) + sizeof(uint64_t))

/* n->life.  A node is reachable by walks (of the pool) only while LIVE,
 * by lookups (through the index) only from just before its entry is
 * stored (LIVE is stored first, with release) until a grace period after
 * the entry is cleared.  FREE is 0: the home region (local_index.c) is
 * mapped zeroed, so a home never taken reads FREE without being written
 * (and costs no memory until it is).  FREE is stored only under pool_lock,
 * once the node is ready to be taken: pool_get takes a home it reads FREE.
 * GOING is a node whose counts free_node_rcu has moved to the shards, on
 * its way to pool_put. */
enum { NODE_FREE = 0, NODE_LIVE = 1, NODE_DEAD = 2, NODE_NEW = 3, NODE_GOING = 4 };

struct lbucket {
    uint64_t e[BUCKET_ENTRIES]; /* 0, or tag << 32 | (node index + 1); atomics */
} __attribute__((aligned(CACHE_LINE)));

/* Rarely written per-limiter counters, one shard per CPU (modulo NSHARDS). */
struct shard {
    uint64_t full_allowed;    /* on_full decisions, allowed */
    uint64_t full_denied;     /* on_full decisions, denied */
    uint64_t evicted;         /* states reclaimed: at rest, and active ones below */
    uint64_t evicted_active;  /* keys not at rest whose slot a new key took (on_full=evict) */
    uint64_t retired_allowed; /* counters of deleted states */
    uint64_t retired_denied;
    uint64_t timeouts;        /* node lock waits that ran past lock_timeout_ms */
    uint64_t reclaimed;       /* in-flight units of dead or expired holders freed */
    uint64_t would_deny;      /* dry run: denials turned into admissions (limiter.c) */
    uint64_t exempt;          /* decisions of exempt keys (local_control.c) */
} __attribute__((aligned(CACHE_LINE)));

struct local {
    srl_limiter lim;          /* lim.impl points back here */
    /* Read-only after open: read by every request, written by none. */
    struct lbucket *index;
    uint64_t nbuckets;
    unsigned char **chunks;   /* chunk c holds nodes c << chunk_shift ...; set once */
    unsigned chunk_shift;
    struct lcold **colds;     /* chunk c's nodes' struct lcold; set with chunks[c] */
    size_t node_bytes;        /* sizeof(struct lnode) + state + display, to 64 */
    size_t state_bytes;       /* algo->size rounded up to 8 */
    unsigned hot_lines;       /* lines of a node a hit touches: struct lnode and the state */
    uint64_t capacity;
    uint64_t homes;           /* nodes 0 .. homes-1 are homes (local_index.c); 0: none */
    uint64_t homes_end;       /* homes rounded up to whole chunks; overflow starts here */
    unsigned char *home_map;  /* their mapping (chunks[0 ..] point into it) */
    size_t home_bytes;
    uint32_t key_display;
    uint32_t max_chunks;
    bool lockfree;            /* SRL_CONFIG_LOCKFREE on a one-word GCRA policy */
    bool lf_pair;             /* lockfree, and an admission is one 16-byte CAS */
    pid_t creator_pid;
    uint64_t created_unix_ns;
    size_t index_bytes;       /* the index mapping (mmap) */
    unsigned char hash_key[crypto_shorthash_siphashx24_KEYBYTES];
    /* Written on insert and delete only, on a line of its own. */
    uint64_t used __attribute__((aligned(CACHE_LINE)));
    uint64_t reclaim_cursor;  /* next pool index an insert's reclamation looks at */
    /* The pool: taken on insert, and by the call_rcu worker on free. */
    pthread_mutex_t pool_lock __attribute__((aligned(CACHE_LINE)));
    uint32_t free_head;       /* free list: node index + 1, or 0 */
    uint64_t fresh;           /* nodes ever handed out by the bump allocator */
    pthread_mutex_t stripes[NSTRIPES];
    /* Held by a stats walk, and by call_rcu's callback while it moves a
     * dead node's counts into the shards: a walk counts a node once. */
    pthread_mutex_t retire_lock __attribute__((aligned(CACHE_LINE)));
    struct shard shards[NSHARDS];
    /* Operator control (local_control.c): the per-key limit sets and the
     * ban reasons, each entry claimed once under ctl_lock, published with
     * release and kept until close; read without the lock. */
    pthread_mutex_t ctl_lock;
    struct srl__compound *keylim[CTL_KEYLIMS];
    char (*reasons)[CTL_REASON_TEXT];   /* CTL_REASONS entries, or NULL until a reason */
    uint32_t reason_count;
};

/* A key as lookups see it: fingerprint, its tag and candidate buckets. */
struct lkey {
    const void *key;          /* the key bytes (NULL when known by fp only) */
    uint8_t fp[16];
    uint32_t tag;
    uint32_t len;
    uint64_t b1, b2;
    uint32_t home[2];         /* node_homes, when the store has homes (key_of) */
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
    return __atomic_load_n(&n->life, __ATOMIC_RELAXED) != NODE_LIVE;
}

static inline struct lnode *node_at(const struct local *l, uint32_t idx)
{
    unsigned char *c = l->chunks[idx >> l->chunk_shift];
    return (struct lnode *)(c + (size_t)(idx & ((1u << l->chunk_shift) - 1)) * l->node_bytes);
}

static inline struct lcold *node_cold(const struct local *l, uint32_t idx)
{
    return l->colds[idx >> l->chunk_shift] + (idx & ((1u << l->chunk_shift) - 1));
}

/* One more allowed or denied (one: COUNT_*) in n's counts.  Where every
 * writer holds the node's lock: a plain load and store, atomic only so that
 * unlocked readers are defined.  On a lock-free handle, whose deciders
 * count without the lock (local_lockfree.c): a CAS loop. */
static inline void count_node(struct lnode *n, uint64_t one, bool lockfree)
{
    uint64_t v = __atomic_load_n(&n->counts, __ATOMIC_RELAXED);
    if (!lockfree)
        __atomic_store_n(&n->counts, counts_plus(v, one), __ATOMIC_RELAXED);
    else
        while (!__atomic_compare_exchange_n(&n->counts, &v, counts_plus(v, one), true,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
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

#define LF_SAW(l, field) ((void)0)

/* A node's lock (n->lock), a futex word (local_lock.c has its design):
 * 0 free, 1 held, 2 held and perhaps awaited.  Four bytes, so that the
 * lock shares its line with the fingerprint and the state: a pthread
 * mutex took 40 and pushed the state onto a second line, one more miss
 * per hit at a million keys.  The uncontended path is one CAS to take
 * and one exchange to give back, inline; waiting and waking call out. */

static inline bool node_trylock(struct lnode *n)
{
    uint32_t free_ = 0;
    return __atomic_compare_exchange_n(&n->lock, &free_, 1, false, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}

/* Take n's lock, waiting at most lock_timeout_ms.  0, or SRL_ETIMEDOUT
 * (counted).  A node's lock is held only for one decision, so a wait this
 * long means a holder that is stuck (a ticker that blocks, a thread stopped
 * in a debugger): the caller gets on_full's answer instead of hanging.
 * The uncontended path is one CAS and reads no clock. */
static inline int node_lock(struct local *l, struct lnode *n)
{
    if (__builtin_expect(node_trylock(n), 1))
        return 0;
    int rc = srl__local_node_wait(&n->lock, l->lim.lock_timeout_ms);
    if (rc != 0)
        shard_add(&my_shard(l)->timeouts, 1);
    return rc;
}

static inline void node_unlock(struct lnode *n)
{
    if (__builtin_expect(__atomic_exchange_n(&n->lock, 0, __ATOMIC_RELEASE) == 2, 0))
        srl__local_node_wake(&n->lock);
}

static inline uint64_t fastrange(uint64_t x, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)x * n) >> 64);
}

/* The first nodes of fp's two home windows, HOME_WINDOW adjacent nodes
 * each, where an insert puts the key when one is free (local_index.c,
 * "HOMES"): from fp's middle bytes (the buckets take the high bits of
 * each half, the tag the low ones).  Call only with l->homes > 0. */
static inline void node_homes(const struct local *l, const uint8_t fp[16], uint32_t h[2])
{
    uint64_t v, n = l->homes - HOME_WINDOW + 1;
    memcpy(&v, fp + 4, 8);
    h[0] = (uint32_t)fastrange(v, n);
    h[1] = (uint32_t)fastrange(v * 0x9e3779b97f4a7c15ull, n);   /* an odd multiplier */
}

/* fp's candidate buckets and tag, as the shared table derives them: the
 * buckets from the high bits of each half, the tag from low bits. */
static inline void key_place(const struct local *l, struct lkey *k)
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

/* This thread is done with n for this read-side critical section (the
 * node's address stands for its grace period: free_node_rcu acquires it). */
static inline void node_done(struct lnode *n)
{
    TSAN_RELEASE(n);
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
 * Without any lock: fp is fixed while indexed, and life is read
 * atomically (a node that dies right after is caught under its lock by
 * the caller). */
static inline struct lnode *scan(const struct local *l, uint64_t b, const struct lkey *k)
{
    uint64_t *e = l->index[b].e;
    for (unsigned i = 0; i < BUCKET_ENTRIES; i++) {
        uint64_t v = entry_load(&e[i]);
        if ((uint32_t)(v >> 32) != k->tag || (uint32_t)v == 0)
            continue;
        struct lnode *n = node_at(l, (uint32_t)v - 1);
        /* A state past the first line is read after the lock, which is a
         * locked instruction: start its miss now, with the fingerprint's. */
        if (l->hot_lines > 1)
            srl__prefetch_w((const unsigned char *)n + CACHE_LINE);
        if (memcmp(n->fp, k->fp, sizeof n->fp) == 0 && !node_dead(n))
            return n;
        node_done(n);
    }
    return NULL;
}

/* The live node for k, or NULL.  Call inside rcu_read_lock. */
static inline struct lnode *find(const struct local *l, const struct lkey *k)
{
    struct lnode *n = scan(l, k->b1, k);
    return n != NULL ? n : scan(l, k->b2, k);
}

/* k for key: its fingerprint, buckets and homes (prefetched). */
static inline void key_of(const struct local *l, const void *key, size_t len, struct lkey *k)
{
    crypto_shorthash_siphashx24(k->fp, key, len, l->hash_key);
    k->key = key;
    k->len = (uint32_t)len;
    key_place(l, k);
    /* The key is in b2 only when b1 was full at its insert (a few percent
     * of keys at full capacity); the prefetch costs bandwidth, not a wait,
     * and saves a dependent miss for those. */
    __builtin_prefetch(&l->index[k->b2], 0, 3);
    /* Most keys live in a node of their home windows (local_index.c,
     * HOMES): start those misses now, beside the buckets', instead of
     * after the bucket names the node.  A node's first line holds all a
     * hit needs (the fingerprint, the lock, the counts and the state) but
     * for a state of more than 24 bytes (local_store.h, struct lnode), whose
     * second line is prefetched too (and, past that, the state's end is
     * one dependent miss later). */
    if (l->homes > 0) {
        node_homes(l, k->fp, k->home);
        const bool two = l->hot_lines > 1;
        for (unsigned c = 0; c < 2 * HOME_WINDOW; c++) {
            uint32_t i = k->home[c / HOME_WINDOW] + c % HOME_WINDOW;
            const unsigned char *n = l->home_map + (size_t)i * l->node_bytes;
            srl__prefetch_w(n);
            if (two)
                srl__prefetch_w(n + CACHE_LINE);
        }
    }
}

/* The key's live node, locked, in *out: 0, or SRL_ENOENT if the key is not
 * tracked, or SRL_ETIMEDOUT.  Call inside rcu_read_lock; returns still
 * inside it (with (*out)->lock held on 0).  A node found dead (evicted or
 * reset between lookup and lock) is let go and the lookup retried, outside
 * the read-side section for a moment, since a live successor may exist. */
static inline int lock_live(struct local *l, const struct lkey *k, struct lnode **out)
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
        node_unlock(n);
        node_done(n);
        rcu_read_unlock();
        rcu_read_lock();
    }
}

/* Release a live-key slot taken by reserve() (local_index.c): a node that
 * lost its insertion race, or one marked dead. */
static inline void unreserve(struct local *l)
{
    __atomic_fetch_sub(&l->used, 1, __ATOMIC_RELAXED);
}

/* INSERT_WAIT: the pool is at its bound with nodes awaiting their grace
 * period; the caller leaves its read-side section, waits for them
 * (srl__local_pool_wait) and tries again. */
enum { INSERT_OK = 0, INSERT_FULL = 1, INSERT_WAIT = 2 };

/* ------------------------------------------- the state word (lock-free) */

/*
 * On a lock-free handle (l->lockfree: one GCRA limit, see srl_open_local) a
 * node's state is one 64-bit word, the TAT, and every access to it after
 * the node is published is atomic: a decision is a compare-and-swap from
 * the value it decided on, with or without the node's lock.  WORD_TOMB is
 * the version that retires a state: reset, eviction and reclamation CAS it
 * in (under the node's lock, before they mark the node DEAD), and nothing ever
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

/* What word_update did.  WORD_COUNTED: an admission whose count it added
 * to n->counts in the same CAS (l->lf_pair); the caller counts every
 * other decision itself. */
enum { WORD_RETIRED = 0, WORD_DONE = 1, WORD_COUNTED = 2 };

/* The lock-free decision (and, under the lock, reserve and refund) on n's
 * word: read the word, then the time, decide on a copy, and CAS the copy
 * in; on a lost CAS start again from the value that won (and a new time).
 * A decision that writes nothing (a denial) takes effect at its read.
 * On an lf_pair handle an admission (WORD_DECIDE) CASes {counts, word}
 * as one 16-byte pair, count and state in one locked instruction; a count
 * moved meanwhile (another admission, under the lock or not) fails it
 * like a moved word.  Returns WORD_RETIRED, deciding nothing, if the state
 * is retired (WORD_TOMB): the caller takes the locked path, which sees the
 * node dead and looks the key up again.  Call inside rcu_read_lock, n
 * found live through the index: n is not reused before the section ends. */
static inline int word_update(struct local *l, struct lnode *n, enum word_op op, uint32_t cost,
                              uint64_t max_wait, srl_decision *d)
{
    uint64_t *w = node_word(n);
#if SRL__CAS16
    uint64_t seen = __atomic_load_n(&n->counts, __ATOMIC_RELAXED);
#endif
    uint64_t old = __atomic_load_n(w, __ATOMIC_RELAXED);
    for (;;) {
        if (old == WORD_TOMB) {
            LF_SAW(l, lf_tombstones);
            return WORD_RETIRED;
        }
        uint64_t now = srl__now(&l->lim), nw = old;
        if (op == WORD_DECIDE)
            srl__compound_decide(&l->lim.cmp, &nw, now, cost, 1, d);
        else if (op == WORD_RESERVE)
            srl__compound_reserve(&l->lim.cmp, &nw, now, cost, max_wait, d);
        else
            srl__compound_refund(&l->lim.cmp, &nw, now, cost);
        if (nw == WORD_TOMB)
            nw = WORD_TOMB - 1;
        if (nw == old)
            return WORD_DONE;
#if SRL__CAS16
        if (l->lf_pair && op == WORD_DECIDE) {   /* an admission: nw != old */
            uint64_t found = old;
            if (srl__cas16(&n->counts, &seen, &found, counts_plus(seen, COUNT_ALLOWED), nw))
                return WORD_COUNTED;
            if (found == old)
                continue;   /* only the count moved: seen has it; decide again */
            old = found;
            LF_SAW(l, lf_conflicts);
            continue;
        }
#endif
        if (__atomic_compare_exchange_n(w, &old, nw, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return WORD_DONE;
        LF_SAW(l, lf_conflicts);
    }
}

/* ------------------------------------------------- across the files */

/* local_index.c */
/* The live node for k, found or created (INSERT_OK, *out set), or
 * INSERT_FULL, INSERT_WAIT, SRL_ENOMEM.  Call inside rcu_read_lock. */
int srl__local_find_or_insert(struct local *l, const struct lkey *k, struct lnode **out);
/* Wait for the nodes awaiting their grace period; false if this thread
 * cannot.  Call outside any read-side section, with no lock held. */
bool srl__local_pool_wait(struct local *l);
/* Clear the entry of n, marked dead by this thread, and free n after a
 * grace period.  Call inside rcu_read_lock, without n->lock. */
void srl__local_unlink_node(struct local *l, struct lnode *n);
/* A zeroed mapping of bytes for the index or the homes (open), on huge
 * pages where that pays; NULL if the system refuses it. */
void *srl__local_map(size_t bytes);
/* Mark n dead and release its slot.  Call with n's lock held, n not dead;
 * then unlock and srl__local_unlink_node. */
void srl__local_retire_locked(struct local *l, struct lnode *n);
/* If n is live and at rest (after freeing a concurrency limit's dead and
 * expired holders), retire it; true if it did.  Call with n's lock held. */
bool srl__local_evict_if_at_rest_locked(struct local *l, struct lnode *n);
/* Visit the pool's LIVE nodes, count indexes from `from` (wrapping; 0 and
 * UINT64_MAX: all), until fn returns nonzero; indexes visited.  fn gets a
 * node it must hand back with node_done.  Call inside rcu_read_lock. */
uint64_t srl__local_pool_walk(struct local *l, uint64_t from, uint64_t count,
                             int (*fn)(struct local *, struct lnode *, void *), void *ctx);

/* local_control.c */
/* The compound n's state is in (ctl: n->ctl, read once). */
static inline const struct srl__compound *ctl_cmp(const struct local *l, unsigned ctl)
{
    return (ctl & (CTL_OWN | CTL_CALL))
               ? __atomic_load_n(&l->keylim[ctl & CTL_IDX], __ATOMIC_ACQUIRE)
               : &l->lim.cmp;
}
/* The decision for a controlled node or one call's limits (own: NULL or
 * l->keylim[own_idx]), under n's lock, n live, no lease: 0 with *d, or
 * SRL_ECOST / SRL_ENOTSUP (nothing decided).  Counts the decision. */
int srl__local_ctl_decide(struct local *l, struct lnode *n, const struct srl__compound *own,
                          unsigned own_idx, uint32_t cost, uint64_t max_wait, srl_decision *d);
/* The srl_entry.control flags of n (locked; ctl its n->ctl) but
 * SRL_KEY_PENALTY, and its hand ban's time left in *ban_left. */
unsigned srl__local_ctl_flags(const struct local *l, const struct lnode *n, unsigned ctl,
                              uint64_t now, uint64_t *ban_left);
/* Whether n (locked; ctl its n->ctl) is kept by its operator, never
 * evicted: exempt, own limits, or banned until after now. */
static inline bool ctl_kept(const struct local *l, const struct lnode *n, unsigned ctl,
                            uint64_t now)
{
    if (ctl & (CTL_EXEMPT | CTL_OWN))
        return true;
    return (ctl & CTL_BANNED) && node_cold(l, n->idx)->ban_until > now;
}
/* Store ops (struct srl__store_ops), and close's part. */
int srl__local_key_control(srl_limiter *lim, const void *key, size_t len, int op, uint64_t for_ns,
                           const char *reason, srl_key_control *out);
int srl__local_key_limits(srl_limiter *lim, const void *key, size_t len, const srl_limits *lims,
                          srl_limits *get);
int srl__local_keylim_find(struct local *l, const srl_limits *lims);
void srl__local_ctl_free(struct local *l);

/* local_lockfree.c */
/* CAS n's word to WORD_TOMB (if only_at_rest, only from a value at rest
 * at now); true if retired.  Call with n's lock held, n not dead. */
bool srl__local_word_retire(struct local *l, struct lnode *n, uint64_t now, bool only_at_rest);
/* n's state as one read sees it.  Call with n's lock held. */
void srl__local_state_copy(const struct local *l, struct lnode *n, void *buf);

/* local_walk.c */
/* Store ops (struct srl__store_ops). */
int64_t srl__local_evict_idle(srl_limiter *lim);
int srl__local_stats(srl_limiter *lim, srl_stats *out);
int srl__local_info(srl_limiter *lim, srl_info *out);
int64_t srl__local_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx);

#endif
