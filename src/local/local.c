/*
 * local.c - the in-process store (srl_open_local): its ops, open and close.
 * The structs, the rules every file keeps and the map of the files are in
 * local_store.h; the pool and the index in local_index.c, the lock-free GCRA word
 * in local_lockfree.c, retirement and the walks in local_walk.c.
 *
 * WHAT IT HOLDS
 *   - The decision (local_decide: srl_acquire, srl_reserve, srl_enter) and
 *     the other ops on one key (leave, peek, key_state, refund, reset): look
 *     the key up inside rcu_read_lock, creating it on a miss, then lock its
 *     node (or, on a lock-free handle, CAS its word), decide, count.
 *   - The store's ops table, srl_open_local (geometry, the index, the chunk
 *     table) and close.
 *
 * INVARIANTS
 *   - Time is read (srl__now) inside the node's lock, so a thread that
 *     waited for the lock never decides with a stale time.
 *   - The closed orphan race: an evictor marks a node dead under its lock
 *     before clearing its entry.  An acquirer that found the node and then
 *     locked it sees dead, unlocks and looks the key up again; it never
 *     decides on an orphan, so eviction never admits an extra request.
 *     This holds for an active key that on_full=evict takes as for one at
 *     rest: its evictor holds its lock from judging it to its death, and
 *     the acquirer's retry finds no node and inserts the key afresh (an
 *     evicted key starts fresh; srl.h).
 *   - The decision path: on a hit it calls nothing of the other files
 *     (local_store.h, HOT PATH).  No test-only code: the broken variants and
 *     the test hooks are tests/mutants/local.c.patch, applied to the test
 *     copy of the library only.
 *
 * MAY TOUCH
 *   A found node's state and counters under its lock (or its word, see
 *   local_lockfree.c), the shards; the index and the pool only through
 *   local_index.c, a node's death only through srl__local_retire_locked.
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
#include "local_store.h"
#include "proc.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define NO_LOCK_MAX_WORDS 64 /* the no-lock variant copies states up to 512 B */
#define CHUNK_SHIFT_MIN 6   /* 64 nodes */
#define CHUNK_SHIFT_MAX 17  /* 128k nodes (8 MiB of 64-byte nodes) */

/* One decision in n's counts.  On a lock-free handle the lock-free
 * deciders count without the lock, so every count is atomic (on the node's
 * own line, which the decision has just written or read). */
static inline void count_decision(const struct local *l, struct lnode *n, bool allowed)
{
    count_node(n, allowed ? COUNT_ALLOWED : COUNT_DENIED, l->lockfree);
}

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
    srl__compound_enter(&l->lim.cmp, node_state(n), now, &me, srl__proc_alive, NULL, d, &entry,
                        &gen, &freed);
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

/* srl_acquire (lease NULL), srl_reserve (lease NULL, max_wait > 0),
 * srl_enter, and srl_acquire_limits (own: l->keylim[own_idx]). */
static int local_decide(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                        uint64_t max_wait, srl_lease *lease, const struct srl__compound *own,
                        unsigned own_idx, srl_decision *d)
{
    struct local *l = local_of(lim);
    struct lkey k;
    key_of(l, key, len, &k);
    for (;;) {
        rcu_read_lock();
        struct lnode *n = find(l, &k);
        if (n == NULL) {
            int rc = srl__local_find_or_insert(l, &k, &n);
            if (rc != INSERT_OK) {
                rcu_read_unlock();
                if (rc == INSERT_WAIT && srl__local_pool_wait(l))
                    continue;
                if (rc != INSERT_FULL && rc != INSERT_WAIT)
                    return rc;
                srl__decide_on_full(lim, SRL_DECISION_UNTRACKED, d);
                count_full(l, d);
                return 0;
            }
        }
        if (l->lockfree && lease == NULL && max_wait == 0 &&
            __atomic_load_n(&n->ctl, __ATOMIC_RELAXED) == 0) {
            /* The lock-free path: one CAS on the word.  The node was found
             * (or created) inside this read-side section, so it is not
             * reused before the section ends; if it was retired, the word
             * says so and the locked path below retries the lookup.  A key
             * an operator controls takes the locked path (ctl is read
             * inside this section: local_control.c, LOCK-FREE). */
            int wr = word_update(l, n, WORD_DECIDE, cost, 0, d);
            if (wr != WORD_RETIRED) {
                if (wr != WORD_COUNTED) {
                    count_decision(l, n, d->allowed);
                }
                node_done(n);
                rcu_read_unlock();
                return 0;
            }
        }
        if (node_lock(l, n) != 0) {
            node_done(n);
            rcu_read_unlock();
            srl__decide_on_full(lim, SRL_DECISION_DEGRADED, d);
            return SRL_ETIMEDOUT;
        }
        if (node_dead(n)) {
            /* Evicted (or reset) between our lookup and our lock: deciding
             * on it would admit requests that the key's next state will
             * admit again.  Look the key up afresh. */
            node_unlock(n);
            node_done(n);
            rcu_read_unlock();
            continue;
        }
        if (lease == NULL && (own != NULL || __atomic_load_n(&n->ctl, __ATOMIC_RELAXED) != 0)) {
            /* An operator's key, or a call's limits: local_control.c. */
            int rc = srl__local_ctl_decide(l, n, own, own_idx, cost, max_wait, d);
            node_unlock(n);
            node_done(n);
            rcu_read_unlock();
            return rc;
        }
        bool counted = false;   /* by word_update's CAS */
        if (l->lockfree) {
            /* lease == NULL (no concurrency limit); live under the lock, so
             * not retired: a CAS, since lock-free deciders do not lock. */
            int wr = word_update(l, n, max_wait != 0 ? WORD_RESERVE : WORD_DECIDE, cost,
                                 max_wait, d);
            if (wr == WORD_RETIRED) {
                node_unlock(n); /* cannot happen: retired => dead */
                node_done(n);
                rcu_read_unlock();
                continue;
            }
            counted = wr == WORD_COUNTED;
        } else {
            uint64_t now = srl__now(lim);
            if (lease == NULL && max_wait != 0)
                srl__compound_reserve(&lim->cmp, node_state(n), now, cost, max_wait, d);
            else if (lease == NULL)
                srl__compound_decide(&lim->cmp, node_state(n), now, cost, 1, d);
            else
                enter_locked(l, n, now, lease, d);
        }
        if (!counted)
            count_decision(l, n, d->allowed);
        count_would_deny(l, d);
        node_unlock(n);
        node_done(n);
        rcu_read_unlock();
        return 0;
    }
}

static int local_acquire(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                         srl_decision *d)
{
    return local_decide(lim, key, len, cost, 0, NULL, NULL, 0, d);
}

/* srl_acquire_limits: the call's set in the handle's table, then decided
 * as the key's (local_control.c converts its state to it). */
static int local_acquire_limits(srl_limiter *lim, const void *key, size_t len,
                                const srl_limits *lims, uint32_t cost, srl_decision *d)
{
    struct local *l = local_of(lim);
    int idx = srl__local_keylim_find(l, lims);
    if (idx < 0)
        return idx;
    const struct srl__compound *c = l->keylim[idx];
    if (cost > c->min_permits)
        return SRL_ECOST;
    return local_decide(lim, key, len, cost, 0, NULL, c, (unsigned)idx, d);
}

static int local_reserve(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                         uint64_t max_wait, srl_decision *d)
{
    return local_decide(lim, key, len, cost, max_wait, NULL, NULL, 0, d);
}

static int local_enter(srl_limiter *lim, const void *key, size_t len, srl_lease *lease,
                       srl_decision *d)
{
    return local_decide(lim, key, len, 1, 0, lease, NULL, 0, d);
}

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
    rc = srl__compound_leave(&lim->cmp, node_state(n), lease->entry, lease->gen, (int32_t)getpid());
    node_unlock(n);
    node_done(n);
    rcu_read_unlock();
    return rc;
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
    node_unlock(n);
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
        srl__compound_decide(&lim->cmp, &w, srl__now(lim), cost, 0, d);
    } else {
        /* In the limits the key's state is in (its own, local_control.c). */
        const struct srl__compound *c = ctl_cmp(l, __atomic_load_n(&n->ctl, __ATOMIC_RELAXED));
        if (cost > c->min_permits) {
            unlock_key(n);
            return SRL_ECOST;
        }
        srl__compound_decide(c, node_state(n), srl__now(lim), cost, 0, d);
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
    srl__local_state_copy(local_of(lim), n, buf);
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
    if (l->lockfree) {
        (void)word_update(l, n, WORD_REFUND, cost, 0, NULL); /* locked, live: not retired */
    } else {
        const struct srl__compound *c = ctl_cmp(l, __atomic_load_n(&n->ctl, __ATOMIC_RELAXED));
        if (cost > c->min_permits) {
            unlock_key(n);
            return SRL_ECOST;
        }
        srl__compound_refund(c, node_state(n), srl__now(lim), cost);
    }
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
        (void)srl__local_word_retire(l, n, 0, false);
    srl__local_retire_locked(l, n);
    node_unlock(n);
    srl__local_unlink_node(l, n);
    rcu_read_unlock();
    return 0;
}

/* Frees everything, with no node DEAD or in use (rcu_barrier has run). */
static void free_local(struct local *l)
{
    /* Every callback's pool_put released pool_lock: taking it orders their
     * writes before ours (rcu_barrier does too, but TSan cannot see it). */
    pthread_mutex_lock(&l->pool_lock);
    pthread_mutex_unlock(&l->pool_lock);
    /* The homes' chunks are slices of home_map (homes_end is 0 without). */
    for (uint64_t c = l->homes_end >> l->chunk_shift; l->chunks != NULL && c < l->max_chunks; c++)
        free(l->chunks[c]);
    if (l->home_map != NULL)
        munmap(l->home_map, l->home_bytes);
    free(l->chunks);
    free(l->colds);
    if (l->index != NULL)
        munmap(l->index, l->index_bytes);
    for (unsigned i = 0; i < NSTRIPES; i++)
        pthread_mutex_destroy(&l->stripes[i]);
    pthread_mutex_destroy(&l->pool_lock);
    pthread_mutex_destroy(&l->retire_lock);
    srl__local_ctl_free(l);
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
    .evict_idle = srl__local_evict_idle,
    .stats = srl__local_stats,
    .info = srl__local_info,
    .foreach = srl__local_foreach,
    .check = NULL, /* srl_check: SRL_ENOTSUP, as srl.h documents */
    .enter = local_enter,
    .leave = local_leave,
    .key_state = local_key_state,
    .key_control = srl__local_key_control,
    .key_limits = srl__local_key_limits,
    .acquire_limits = local_acquire_limits,
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
#if SRL__CAS16
    l->lf_pair = l->lockfree && NODE_PAIR_OK && srl__cpu_has_cas16();
#endif
    l->capacity = cfg->capacity;
    l->key_display = cfg->key_display;
    l->creator_pid = getpid();
    l->created_unix_ns = srl__clock_ns(CLOCK_REALTIME);
    randombytes_buf(l->hash_key, sizeof l->hash_key);
    l->hot_lines = (unsigned)((sizeof(struct lnode) + l->state_bytes + CACHE_LINE - 1) / CACHE_LINE);
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
    /* The homes come first: one node per key of capacity, in whole chunks
     * of one zeroed mapping (local_index.c, "Homes"); the pool's other
     * nodes follow them.  None if that would not fit 32-bit node indexes
     * or the mapping is refused: then every node is an overflow node, as
     * before homes existed. */
    uint64_t chunk = 1ull << l->chunk_shift;
    l->homes_end = (cfg->capacity + chunk - 1) / chunk * chunk;
    if (l->homes_end + pool_max <= UINT32_MAX) {
        l->home_bytes = (size_t)l->homes_end * (l->node_bytes + sizeof(struct lcold));
        l->home_map = srl__local_map(l->home_bytes);
    }
    if (l->home_map != NULL) {
        l->homes = cfg->capacity < HOME_WINDOW ? HOME_WINDOW : cfg->capacity;
        pool_max += l->homes_end;
    } else {
        l->home_bytes = 0;
        l->homes_end = 0;
    }
    if (pool_max > UINT32_MAX)
        pool_max = UINT32_MAX; /* node indexes are 32-bit */
    l->max_chunks = (uint32_t)(pool_max >> l->chunk_shift);
    l->chunks = calloc(l->max_chunks, sizeof *l->chunks);
    l->colds = calloc(l->max_chunks, sizeof *l->colds);
    /* The homes' nodes, then their struct lcold, all of one mapping: the
     * cold part is touched only by retirements. */
    if (l->home_map != NULL && l->chunks != NULL && l->colds != NULL) {
        struct lcold *home_colds =
            (struct lcold *)(l->home_map + (size_t)l->homes_end * l->node_bytes);
        for (uint64_t c = 0; c < l->homes_end >> l->chunk_shift; c++) {
            l->chunks[c] = l->home_map + (size_t)(c << l->chunk_shift) * l->node_bytes;
            l->colds[c] = home_colds + (c << l->chunk_shift);
        }
    }
    l->fresh = l->homes_end;   /* the bump allocator starts after the homes */
    l->index_bytes = l->nbuckets * sizeof(struct lbucket);
    l->index = srl__local_map(l->index_bytes);
    pthread_mutex_init(&l->pool_lock, NULL);
    pthread_mutex_init(&l->retire_lock, NULL);
    pthread_mutex_init(&l->ctl_lock, NULL);
    for (unsigned i = 0; i < NSTRIPES; i++)
        pthread_mutex_init(&l->stripes[i], NULL);
    if (l->chunks == NULL || l->colds == NULL || l->index == NULL) {
        free_local(l);
        return SRL_ENOMEM;
    }
    *out = &l->lim;
    return 0;
}

