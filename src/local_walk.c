/*
 * local_walk.c - the in-process store's retirement, reclamation and walks
 * (local.h has the structs, the rules every file keeps, and the map of the
 * files).
 *
 * WHAT IT HOLDS
 *   - srl__local_retire_locked: a node's death (dead 0 -> 1, its capacity
 *     slot released), under its lock, for reset (local.c), eviction and
 *     reclamation; the caller then unlinks it (local_index.c).
 *   - Eviction of an at-rest state (after reclaiming a concurrency limit's
 *     dead and expired holders), and srl__local_reclaim_some: an insert
 *     into a full table evicts among the next RECLAIM_SCAN nodes of the
 *     pool.
 *   - The walks of the pool: srl_evict_idle, srl_stats, srl_foreach; and
 *     srl_info, which walks nothing.
 *
 * INVARIANTS
 *   - Walks go over the pool, not the index: a walk sees each node once
 *     even while a relocation moves its entry, and costs what the keys ever
 *     held, not what the capacity could hold.  srl_evict_idle, srl_foreach
 *     and reclamation visit LIVE nodes only (a DEAD one's grace period may
 *     have begun before the walk's read-side section); a key inserted or
 *     retired during a walk may or may not be seen.
 *   - A dead node's counts stay in it until its call_rcu callback
 *     (free_node_rcu, local_index.c) moves them to the shards, under
 *     retire_lock, which a stats walk holds: a walk counts every node once,
 *     live or dead, and a count added by a lock-free decider after the node
 *     died is not lost.
 *   - An eviction marks a node dead under its lock, and only then clears
 *     its entry: an acquirer that found the node sees dead once it has the
 *     lock, and looks the key up again (the closed orphan race, local.c).
 *     On a lock-free handle the word is retired first
 *     (srl__local_word_retire).
 *
 * LOCKS
 *   A node's lock (trylock when reclaiming for an insert, which must not
 *   wait on other keys; with the timeout elsewhere), released before the
 *   node is unlinked, since unlinking takes stripe locks; retire_lock for
 *   stats, with no node lock.  Time is read inside the node's lock.
 *
 * MAY TOUCH
 *   A node's dead flag and state, under its lock; its counters, read
 *   atomically; the shards.  Never the index or the pool's lists but
 *   through srl__local_unlink_node.
 */
#include "local.h"
#include "proc.h"

#include <stdlib.h>
#include <unistd.h>

#define RECLAIM_SCAN 64     /* nodes an insert into a full table may visit */

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
 * caller then unlocks and calls srl__local_unlink_node. */
void srl__local_retire_locked(struct local *l, struct lnode *n)
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
    if (l->lockfree ? !srl__local_word_retire(l, n, now, true)
                    : !srl__cmp_at_rest(&l->lim.cmp, node_state(n), now))
        return false;
    srl__local_retire_locked(l, n);
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
            srl__local_unlink_node(l, n);
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
uint64_t srl__local_reclaim_some(struct local *l)
{
    struct reclaim_ctx c = {0, 0};
    uint64_t from = __atomic_load_n(&l->reclaim_cursor, __ATOMIC_RELAXED);
    uint64_t went = pool_walk(l, from, UINT64_MAX, reclaim_visit, &c);
    __atomic_store_n(&l->reclaim_cursor, from + went, __ATOMIC_RELAXED);
    if (c.reclaimed)
        shard_add(&my_shard(l)->evicted, c.reclaimed);
    return c.reclaimed;
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
int64_t srl__local_evict_idle(srl_limiter *lim)
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
            srl__local_unlink_node(l, n);
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
int srl__local_stats(srl_limiter *lim, srl_stats *out)
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

int srl__local_info(srl_limiter *lim, srl_info *out)
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
int64_t srl__local_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx)
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
        srl__local_state_copy(l, n, copy);
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
