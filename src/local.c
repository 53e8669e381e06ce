/*
 * local.c - the in-process store: per-key states in liburcu's lock-free
 * hash table (srl_open_local).
 *
 * WHAT IT HOLDS
 *   One struct lnode per tracked key, in a cds_lfht (urcu-bp flavour: a
 *   library cannot make the application register its threads, and the
 *   "bulletproof" flavour registers them lazily on first use).  A node is
 *   one malloc block: table link, rcu_head, the state's own mutex, a dead
 *   flag, per-key counters, then the algorithm's state (8-byte aligned) and
 *   a copy of the key (length-prefixed by key_len) for exact matching.
 *   Nodes are found by a keyed hash of the key bytes (libsodium
 *   crypto_shorthash, SipHash-2-4, a random key per limiter: clients choose
 *   keys, so an unkeyed hash would let them pile every key into one chain).
 *
 * INVARIANTS
 *   - key_len and the key bytes never change once a node is published.
 *   - dead goes 0 -> 1 exactly once, under the node's lock, by the thread
 *     that will then cds_lfht_del() it and hand it to call_rcu.  A dead node
 *     is never matched by a lookup or by cds_lfht_add_unique, so a new live
 *     node for the same key may be inserted before the dead one is unlinked.
 *   - At most one live (not dead) node per key: creation goes through
 *     cds_lfht_add_unique, whose match function ignores dead nodes.
 *   - l->used counts live nodes and never exceeds l->capacity: a slot is
 *     reserved (CAS loop) before a node is inserted and released when the
 *     node is marked dead or loses the insertion race.
 *
 * CONCURRENCY
 *   - Every table access (lookup, insert, delete, walk) runs inside
 *     rcu_read_lock; nodes are freed only through call_rcu, so a node found
 *     under the read lock stays valid memory until rcu_read_unlock.
 *   - A state, its counters and its dead flag are read and written under
 *     the node's mutex (dead and the counters are also accessed with relaxed
 *     atomics, so lookups may peek at dead without the lock, and a broken
 *     test variant may run without it and still be well-defined C).
 *   - Time is read (srl__now) inside the node's lock, so a thread that
 *     waited for the lock never decides with a stale time.
 *   - The closed orphan race: an evictor marks a node dead under its lock
 *     before unlinking it.  An acquirer that found the node and then locked
 *     it sees dead, unlocks and looks the key up again; it never decides on
 *     an orphan, so eviction never admits an extra request.
 *   - No shared line is written on the hit path.  l->used is written only
 *     on insert and delete; the full/evicted/retired counters live in
 *     cache-line shards picked by the current CPU and are written only on
 *     the full, evict and delete paths.  srl_stats adds them up.
 *
 * FORK
 *   Create the limiter after fork, in the process that uses it.  liburcu's
 *   grace periods, its call_rcu worker and the table's resize worker are
 *   per process; urcu-bp does not install pthread_atfork handlers (the
 *   application would have to call urcu_bp_before_fork() and friends), and
 *   a node's mutex held by another thread at fork stays locked forever in
 *   the child.  In a child, a limiter inherited from the parent counts
 *   separately from the parent, may hang on a key that was locked at fork,
 *   and never frees evicted states.  srl_close() in such a child (detected
 *   by pid) frees nothing and returns, rather than wait forever in
 *   rcu_barrier() for a call_rcu worker that does not exist there; the
 *   memory goes away with the process.  See docs/design.md, "The in-process store".
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
#include <time.h>
#include <unistd.h>

#include <sodium.h>
#include <urcu-bp.h>
#include <urcu/rculfhash.h>

/*
 * ThreadSanitizer cannot see liburcu's memory ordering: its atomics are
 * inline assembly in an uninstrumented library.  These annotations tell it
 * the two orderings liburcu really provides, and nothing more:
 *   - publication: a node's initialising writes happen before any lookup
 *     that finds it (cds_lfht_add* has release semantics, lookups acquire).
 *     Released on &node->key_len before insertion, acquired on the same
 *     address by every lookup or walk that reaches the node.
 *   - reclamation: every reader's use of a node happens before call_rcu's
 *     callback frees it (the grace period).  Each reader releases on
 *     &node->rcu when it is done with the node; the callback acquires it.
 * The two addresses differ so that readers never acquire each other's
 * releases (which would hide a real race between two readers).  In a
 * normal build the macros are empty.
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

struct lnode {
    struct cds_lfht_node ht;  /* written only by liburcu */
    struct rcu_head rcu;
    pthread_mutex_t lock;     /* guards dead, the counters and the state */
    int dead;                 /* 0 -> 1 once, under lock; peeked atomically */
    uint32_t key_len;         /* immutable once published */
    uint64_t allowed;         /* this key's decisions (under lock) */
    uint64_t denied;
    uint64_t data[];          /* state (state_bytes), then the key bytes */
};

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
    struct cds_lfht *ht;
    size_t state_bytes;       /* algo->size rounded up to 8 */
    uint64_t capacity;
    uint32_t key_display;
#ifdef SRL_MUTANTS
    unsigned broken;          /* SRL__LOCAL_BROKEN_* (testhooks.h) */
#endif
    pid_t creator_pid;
    uint64_t created_unix_ns;
    unsigned char hash_key[crypto_shorthash_KEYBYTES];
    /* Written on insert and delete only, on a line of its own. */
    uint64_t used __attribute__((aligned(CACHE_LINE)));
    struct shard shards[NSHARDS];
};

/* What a lookup compares against: the key, and where a node keeps its copy
 * (after state_bytes of state), since the match function gets no limiter. */
struct lkey {
    const void *key;
    size_t len;
    size_t state_bytes;
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

static inline const unsigned char *node_key(const struct local *l, const struct lnode *n)
{
    return (const unsigned char *)n->data + l->state_bytes;
}

static inline bool node_dead(const struct lnode *n)
{
    return __atomic_load_n(&n->dead, __ATOMIC_RELAXED) != 0;
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

static unsigned long key_hash(const struct local *l, const void *key, size_t len)
{
    unsigned char out[crypto_shorthash_BYTES];
    crypto_shorthash(out, key, len, l->hash_key);
    uint64_t h;
    memcpy(&h, out, sizeof h);
    return (unsigned long)h;
}

/* A node first reached by a walk (not through node_match): see TSAN_*. */
static inline void node_visit(struct lnode *n)
{
    TSAN_ACQUIRE(&n->key_len);
    (void)n;
}

/* This thread is done with n for this read-side critical section. */
static inline void node_done(struct lnode *n)
{
    TSAN_RELEASE(&n->rcu);
    (void)n;
}

/* cds_lfht match function: the same key bytes and length, and not dead.
 * Called by liburcu inside the caller's rcu_read_lock, without n->lock:
 * the key is immutable and dead is read atomically (a node that dies right
 * after is caught under its lock by the caller). */
static int node_match(struct cds_lfht_node *ht_node, const void *arg)
{
    struct lnode *n = caa_container_of(ht_node, struct lnode, ht);
    const struct lkey *k = arg;
    TSAN_ACQUIRE(&n->key_len);
    int same = n->key_len == k->len && !node_dead(n) &&
               memcmp((const unsigned char *)n->data + k->state_bytes, k->key, k->len) == 0;
    node_done(n);
    return same;
}

/* The live node for k, or NULL.  Call inside rcu_read_lock. */
static struct lnode *find(struct local *l, unsigned long hash, const struct lkey *k)
{
    struct cds_lfht_iter it;
    cds_lfht_lookup(l->ht, hash, node_match, k, &it);
    struct cds_lfht_node *hn = cds_lfht_iter_get_node(&it);
    return hn ? caa_container_of(hn, struct lnode, ht) : NULL;
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

static void free_node(struct lnode *n)
{
    pthread_mutex_destroy(&n->lock);
    free(n);
}

/* call_rcu callback: every reader that could see n has left its read-side
 * critical section. */
static void free_node_rcu(struct rcu_head *head)
{
    struct lnode *n = caa_container_of(head, struct lnode, rcu);
    TSAN_ACQUIRE(&n->rcu);
    free_node(n);
}

/* Mark n dead and retire its counters.  Call with n->lock held and n not
 * dead; the caller then unlocks and calls unlink_node. */
static void retire_locked(struct local *l, struct lnode *n)
{
    __atomic_store_n(&n->dead, 1, __ATOMIC_RELAXED);
    struct shard *s = my_shard(l);
    shard_add(&s->retired_allowed, __atomic_load_n(&n->allowed, __ATOMIC_RELAXED));
    shard_add(&s->retired_denied, __atomic_load_n(&n->denied, __ATOMIC_RELAXED));
    unreserve(l);
}

/* Unlink a node this thread marked dead and free it after a grace period.
 * Call inside rcu_read_lock, without n->lock. */
static void unlink_node(struct local *l, struct lnode *n)
{
    int rc = cds_lfht_del(l->ht, &n->ht);
    assert(rc == 0); /* only the thread that marked it dead deletes it */
    (void)rc;
    node_done(n);
    call_rcu(&n->rcu, free_node_rcu);
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
    if (!srl__cmp_at_rest(&l->lim.cmp, node_state(n), now))
        return false;
    retire_locked(l, n);
    return true;
}

/*
 * The table is full: reclaim at-rest states among the first RECLAIM_SCAN
 * nodes in table order (keyed-hash order, so a random sample of keys).
 * Busy nodes are skipped with trylock: a locked state is in use, hence
 * rarely at rest, and an insert must not wait on other keys.  Returns the
 * number reclaimed.  Call inside rcu_read_lock.
 */
static uint64_t reclaim_some(struct local *l)
{
    struct cds_lfht_iter it;
    struct lnode *n;
    uint64_t reclaimed = 0, visited = 0;
    cds_lfht_for_each_entry(l->ht, &it, n, ht) {
        if (visited++ == RECLAIM_SCAN)
            break;
        node_visit(n);
        if (pthread_mutex_trylock(&n->lock) != 0) {
            node_done(n);
            continue;
        }
        bool evicted = evict_if_at_rest_locked(l, n);
        pthread_mutex_unlock(&n->lock);
        if (evicted) {
            unlink_node(l, n);
            reclaimed++;
        } else {
            node_done(n);
        }
    }
    if (reclaimed)
        shard_add(&my_shard(l)->evicted, reclaimed);
    return reclaimed;
}

enum { INSERT_OK = 0, INSERT_FULL = 1 };

/*
 * Find or create the live node for k.  Returns INSERT_OK with *out set,
 * INSERT_FULL when no slot is free even after reclaiming, or SRL_ENOMEM.
 * Call inside rcu_read_lock.
 */
static int find_or_insert(struct local *l, unsigned long hash, const struct lkey *k,
                          struct lnode **out)
{
    if (!reserve(l)) {
        if (reclaim_some(l) == 0 || !reserve(l)) {
            /* Another thread may have created this very key meanwhile. */
            struct lnode *n = find(l, hash, k);
            if (n == NULL)
                return INSERT_FULL;
            *out = n;
            return INSERT_OK;
        }
    }
    struct lnode *cand = malloc(sizeof *cand + l->state_bytes + k->len);
    if (cand == NULL) {
        unreserve(l);
        return SRL_ENOMEM;
    }
    cds_lfht_node_init(&cand->ht);
    pthread_mutex_init(&cand->lock, NULL);
    cand->dead = 0;
    cand->key_len = (uint32_t)k->len;
    cand->allowed = cand->denied = 0;
    memset(node_state(cand), 0, l->state_bytes);
    /* A fresh state needs a time; reading it outside any lock is harmless:
     * every later reader takes the lock after this node is published, so
     * it reads a time no earlier than this one. */
    srl__cmp_state_init(&l->lim.cmp, node_state(cand), srl__now(&l->lim));
    if (l->lim.cmp.conc >= 0)   /* see the shared store's insert */
        srl__conc_seed(srl__cmp_conc_state(&l->lim.cmp, node_state(cand)), randombytes_random());
    memcpy((unsigned char *)cand->data + l->state_bytes, k->key, k->len);
    TSAN_RELEASE(&cand->key_len); /* publication, see TSAN_* */

#ifdef SRL_MUTANTS
    if (__builtin_expect(l->broken & SRL__LOCAL_BROKEN_GET_THEN_PUT, 0)) {
        /* Broken on purpose: the check (find, in the caller) and the act
         * (this add) are two steps, so two first requests add two nodes. */
        cds_lfht_add(l->ht, hash, &cand->ht);
        *out = cand;
        return INSERT_OK;
    }
#endif
    struct cds_lfht_node *won = cds_lfht_add_unique(l->ht, hash, node_match, k, &cand->ht);
    if (won != &cand->ht) {
        /* Lost the race: the winner's node is the key's state.  Ours was
         * never visible to anyone, so it is freed at once. */
        unreserve(l);
        free_node(cand);
        *out = caa_container_of(won, struct lnode, ht);
        return INSERT_OK;
    }
    *out = cand;
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
static void enter_locked(struct local *l, struct lnode *n, unsigned long hash, uint64_t now,
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
        /* The node by address and hash: srl_leave finds it again only if
         * it is still in the table (a lookup, never a dereference of a
         * node that may have been freed). */
        lease->owner = l->lim.lease_owner;
        lease->where[0] = (uint64_t)hash;
        lease->where[1] = (uint64_t)(uintptr_t)n;
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
    const struct lkey k = {key, len, l->state_bytes};
    unsigned long hash = key_hash(l, key, len);
    for (;;) {
        rcu_read_lock();
        struct lnode *n = find(l, hash, &k);
        if (n == NULL) {
            int rc = find_or_insert(l, hash, &k, &n);
            if (rc != INSERT_OK) {
                rcu_read_unlock();
                if (rc != INSERT_FULL)
                    return rc;
                srl__decide_on_full(lim, SRL_DECISION_UNTRACKED, d);
                count_full(l, d);
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
        uint64_t now = srl__now(lim);
        if (lease == NULL && max_wait != 0)
            srl__cmp_reserve(&lim->cmp, node_state(n), now, cost, max_wait, d);
        else if (lease == NULL)
            srl__cmp_decide(&lim->cmp, node_state(n), now, cost, 1, d);
        else
            enter_locked(l, n, hash, now, lease, d);
        count_one(d->allowed ? &n->allowed : &n->denied);
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

/* cds_lfht match function for srl_leave: this very node, live.  The
 * address is compared before anything of the node is read. */
static int node_is(struct cds_lfht_node *ht_node, const void *arg)
{
    struct lnode *n = caa_container_of(ht_node, struct lnode, ht);
    if (n != arg)
        return 0;
    TSAN_ACQUIRE(&n->key_len);
    int live = !node_dead(n);
    node_done(n);
    return live;
}

static int local_leave(srl_limiter *lim, srl_lease *lease)
{
    struct local *l = local_of(lim);
    struct cds_lfht_iter it;
    rcu_read_lock();
    cds_lfht_lookup(l->ht, (unsigned long)lease->where[0], node_is,
                    (const void *)(uintptr_t)lease->where[1], &it);
    struct cds_lfht_node *hn = cds_lfht_iter_get_node(&it);
    if (hn == NULL) {
        rcu_read_unlock();
        return SRL_ENOENT;   /* the key is gone: its units were reclaimed */
    }
    struct lnode *n = caa_container_of(hn, struct lnode, ht);
    TSAN_ACQUIRE(&n->key_len);
    if (node_lock(l, n) != 0) {
        node_done(n);
        rcu_read_unlock();
        return SRL_ETIMEDOUT;
    }
    int rc = node_dead(n) ? SRL_ENOENT
                          : srl__cmp_leave(&lim->cmp, node_state(n), lease->entry, lease->gen,
                                           (int32_t)getpid());
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
static int lock_live(struct local *l, unsigned long hash, const struct lkey *k,
                     struct lnode **out)
{
    for (;;) {
        struct lnode *n = find(l, hash, k);
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
    const struct lkey k = {key, len, l->state_bytes};
    rcu_read_lock();
    int rc = lock_live(l, key_hash(l, key, len), &k, n);
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
    struct lnode *n = NULL;
    int rc = lock_key(local_of(lim), key, len, &n);
    if (rc != 0)
        return rc;
    srl__cmp_decide(&lim->cmp, node_state(n), srl__now(lim), cost, 0, d);
    unlock_key(n);
    return 0;
}

static int local_key_state(srl_limiter *lim, const void *key, size_t len, void *buf)
{
    struct lnode *n = NULL;
    int rc = lock_key(local_of(lim), key, len, &n);
    if (rc != 0)
        return rc;
    memcpy(buf, node_state(n), local_of(lim)->state_bytes);
    unlock_key(n);
    return 0;
}

/* Under the node's lock, as an admission. */
static int local_refund(srl_limiter *lim, const void *key, size_t len, uint32_t cost)
{
    struct lnode *n = NULL;
    int rc = lock_key(local_of(lim), key, len, &n);
    if (rc != 0)
        return rc;
    srl__cmp_refund(&lim->cmp, node_state(n), srl__now(lim), cost);
    unlock_key(n);
    return 0;
}

static int local_reset_key(srl_limiter *lim, const void *key, size_t len)
{
    struct local *l = local_of(lim);
    const struct lkey k = {key, len, l->state_bytes};
    rcu_read_lock();
    struct lnode *n = NULL;
    int rc = lock_live(l, key_hash(l, key, len), &k, &n);
    if (rc != 0) {
        rcu_read_unlock();
        return rc;
    }
    retire_locked(l, n);
    pthread_mutex_unlock(&n->lock);
    unlink_node(l, n);
    rcu_read_unlock();
    return 0;
}

/* Walks the whole table under one read-side critical section: it delays
 * reclamation (not other threads) until it ends.  Each node's lock is taken
 * once, briefly, and time is read inside it. */
static int64_t local_evict_idle(srl_limiter *lim)
{
    struct local *l = local_of(lim);
    struct cds_lfht_iter it;
    struct lnode *n;
    int64_t evicted = 0;
    rcu_read_lock();
    cds_lfht_for_each_entry(l->ht, &it, n, ht) {
        node_visit(n);
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

/* Sums per-node counters (each under its lock) and the shards.  Under
 * concurrent traffic the sum is a snapshot of no single instant. */
static int local_stats(srl_limiter *lim, srl_stats *out)
{
    struct local *l = local_of(lim);
    srl_stats s = {0};
    s.capacity = l->capacity;
    s.used = __atomic_load_n(&l->used, __ATOMIC_RELAXED);
    struct cds_lfht_iter it;
    struct lnode *n;
    rcu_read_lock();
    cds_lfht_for_each_entry(l->ht, &it, n, ht) {
        node_visit(n);
        /* The counters are relaxed atomics: a busy node is summed without
         * its lock rather than waited for (a snapshot either way). */
        bool locked = pthread_mutex_trylock(&n->lock) == 0;
        if (!node_dead(n)) {
            s.allowed += __atomic_load_n(&n->allowed, __ATOMIC_RELAXED);
            s.denied += __atomic_load_n(&n->denied, __ATOMIC_RELAXED);
        }
        if (locked)
            pthread_mutex_unlock(&n->lock);
        node_done(n);
    }
    rcu_read_unlock();
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
        .slots_per_bucket = 0,  /* no fixed buckets: the table resizes */
        .buckets = 0,
        .segment_bytes = 0,
        .slot_bytes = (uint32_t)(sizeof(struct lnode) + l->state_bytes), /* + key */
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
    struct cds_lfht_iter it;
    struct lnode *n;
    int64_t visited = 0;
    void *copy = malloc(l->state_bytes);
    if (copy == NULL)
        return SRL_ENOMEM;
    rcu_read_lock();
    cds_lfht_for_each_entry(l->ht, &it, n, ht) {
        node_visit(n);
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
        e.last_ns = srl__cmp_last_ns(&lim->cmp, node_state(n));
        srl__cmp_decide(&lim->cmp, node_state(n), now, 1, 0, &e.now);
        e.at_rest = srl__cmp_at_rest(&lim->cmp, node_state(n), now);
        e.inflight = srl__cmp_inflight(&lim->cmp, node_state(n));
        memcpy(copy, node_state(n), l->state_bytes);
        e.state = copy;   /* fn runs outside the node's lock: it gets a copy */
        pthread_mutex_unlock(&n->lock);
        e.key_len = n->key_len;
        e.display = node_key(l, n);
        e.display_len = e.key_len < l->key_display ? e.key_len : l->key_display;
        crypto_shorthash_siphashx24(e.fingerprint, node_key(l, n), e.key_len, l->hash_key);
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

/* Must not race other calls on lim (srl.h).  See FORK above for the
 * child case. */
static void local_close(srl_limiter *lim)
{
    struct local *l = local_of(lim);
    if (getpid() != l->creator_pid)
        return; /* inherited across fork: liburcu cannot run here */
    struct cds_lfht_iter it;
    struct lnode *n;
    rcu_read_lock();
    cds_lfht_for_each_entry(l->ht, &it, n, ht) {
        node_visit(n);
        int rc = cds_lfht_del(l->ht, &n->ht);
        assert(rc == 0);
        (void)rc;
        node_done(n);
        call_rcu(&n->rcu, free_node_rcu);
    }
    rcu_read_unlock();
    rcu_barrier(); /* every free_node_rcu has run */
    int rc = cds_lfht_destroy(l->ht, NULL);
    assert(rc == 0); /* the table is empty */
    (void)rc;
    free(l);
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

static unsigned long pow2_at_least(uint64_t v)
{
    unsigned long p = 1;
    while (p < v && p < (1ul << 32))
        p <<= 1;
    return p;
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
    l->capacity = cfg->capacity;
    l->key_display = cfg->key_display;
    l->creator_pid = getpid();
    l->created_unix_ns = srl__clock_ns(CLOCK_REALTIME);
    randombytes_buf(l->hash_key, sizeof l->hash_key);

    /* Start small and let the table grow with the live keys; it never needs
     * more buckets than keys.  No CDS_LFHT_ACCOUNTING: with it, growth is
     * driven by split node counts resized from call_rcu's worker and lagged
     * far behind the key count (bench: ~1.6 us per decision at 1M keys, long
     * chains); without it, chain length triggers the resize on insert
     * (~0.9 us, the pointer chase of the split-ordered list).  The table
     * then never shrinks, which costs 16 B per bucket at the high-water mark. */
    unsigned long max_buckets = pow2_at_least(cfg->capacity);
    if (max_buckets < 64)
        max_buckets = 64;
    unsigned long init = max_buckets < 1024 ? max_buckets : 1024;
    l->ht = cds_lfht_new(init, 64, max_buckets, CDS_LFHT_AUTO_RESIZE,
                         NULL);
    if (l->ht == NULL) {
        free(l);
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
    local_of(lim)->broken = flags;
    return 0;
}
#endif
