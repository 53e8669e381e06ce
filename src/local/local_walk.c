/*
 * local_walk.c - the in-process store's walks of the pool (local_store.h has the
 * structs, the rules every file keeps, and the map of the files).
 *
 * WHAT IT HOLDS
 *   - The walks of the pool: srl_evict_idle (which retires at-rest nodes
 *     through srl__local_evict_if_at_rest_locked, local_index.c),
 *     srl_stats, srl_foreach; and srl_info, which walks nothing.
 *   A node's retirement and the reclamation of a full table are in
 *   local_index.c: an insert reclaims, and reclaiming unlinks, so they
 *   live with the index (tools/dev/callgraph-cycles refuses a loop between
 *   files).
 *
 * INVARIANTS
 *   - Walks go over the pool, not the index: a walk sees each node once
 *     even while a relocation moves its entry, and costs the homes (one
 *     node per key of capacity, local_index.c) plus the overflow nodes the
 *     keys ever took.  srl_evict_idle, srl_foreach
 *     (and an insert's reclamation) visit LIVE nodes only (a DEAD one's grace period may
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
 *   A node's lock (with the timeout), released before the
 *   node is unlinked, since unlinking takes stripe locks; retire_lock for
 *   stats, with no node lock.  Time is read inside the node's lock.
 *
 * MAY TOUCH
 *   A node's life word and state, under its lock; its counters, read
 *   atomically; the shards.  Never the index or the pool's lists but
 *   through srl__local_unlink_node.
 */
#include "local_store.h"

#include <stdlib.h>
#include <unistd.h>

static int evict_visit(struct local *l, struct lnode *n, void *arg)
{
    int64_t *evicted = arg;
    /* Best effort, as in the shared store: a node whose lock cannot be
     * had is skipped (its timeout counted); the others are still swept. */
    if (node_lock(l, n) != 0) {
        node_done(n);
        return 0;
    }
    bool gone = srl__local_evict_if_at_rest_locked(l, n);
    node_unlock(n);
    if (gone) {
        srl__local_unlink_node(l, n);
        (*evicted)++;
    } else {
        node_done(n);
    }
    return 0;
}

/* Walks the whole pool under one read-side critical section: it delays
 * reclamation (not other threads) until it ends.  Each node's lock is taken
 * once, briefly, and time is read inside it. */
int64_t srl__local_evict_idle(srl_limiter *lim)
{
    struct local *l = local_of(lim);
    int64_t evicted = 0;
    rcu_read_lock();
    srl__local_pool_walk(l, 0, UINT64_MAX, evict_visit, &evicted);
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
    pthread_mutex_lock(&l->retire_lock);
    uint64_t fresh = __atomic_load_n(&l->fresh, __ATOMIC_ACQUIRE);
    for (uint64_t i = 0; i < fresh; i++) {
        /* LIVE or DEAD cannot become FREE (nor be reused) while we hold
         * retire_lock; a NEW node has counted nothing yet. */
        struct lnode *n = node_at(l, (uint32_t)i);
        unsigned st = __atomic_load_n(&n->life, __ATOMIC_ACQUIRE);
        if (st == NODE_LIVE || st == NODE_DEAD) {
            uint64_t c = __atomic_load_n(&n->counts, __ATOMIC_RELAXED);
            s.allowed += counts_allowed(c);
            s.denied += counts_denied(c);
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
        s.evicted_active += __atomic_load_n(&sh->evicted_active, __ATOMIC_RELAXED);
        s.timeouts += __atomic_load_n(&sh->timeouts, __ATOMIC_RELAXED);
        s.reclaimed += __atomic_load_n(&sh->reclaimed, __ATOMIC_RELAXED);
        s.would_deny += __atomic_load_n(&sh->would_deny, __ATOMIC_RELAXED);
        s.exempt += __atomic_load_n(&sh->exempt, __ATOMIC_RELAXED);
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
        .flags = l->lockfree ? SRL_CONFIG_LOCKFREE : 0u,
    };
    return 0;
}

struct foreach_ctx {
    srl_foreach_fn fn;
    void *ctx;
    void *copy;        /* one state, handed to fn */
    int64_t visited;
    int rc;
};

static int foreach_visit(struct local *l, struct lnode *n, void *arg)
{
    struct foreach_ctx *c = arg;
    srl_entry e = {0};
    if (node_lock(l, n) != 0) {
        node_done(n);
        c->rc = SRL_ETIMEDOUT;   /* as the shared store: a walk does not skip keys silently */
        return 1;
    }
    if (node_dead(n)) {
        node_unlock(n);
        node_done(n);
        return 0;
    }
    uint64_t now = srl__now(&l->lim);
    uint64_t counts = __atomic_load_n(&n->counts, __ATOMIC_RELAXED);
    e.allowed = counts_allowed(counts);
    e.denied = counts_denied(counts);
    /* One read of the state (lock-free deciders may move it on). */
    srl__local_state_copy(l, n, c->copy);
    /* The state is in the key's own limits' compound if it has them. */
    unsigned ctl = __atomic_load_n(&n->ctl, __ATOMIC_RELAXED);
    const struct srl__compound *cmp = ctl_cmp(l, ctl);
    e.last_ns = srl__compound_last_ns(cmp, c->copy);
    srl__compound_decide(cmp, c->copy, now, 1, 0, &e.now);
    e.at_rest = srl__compound_at_rest(cmp, c->copy, now);
    e.inflight = srl__compound_inflight(cmp, c->copy);
    if (ctl != 0)
        e.control = srl__local_ctl_flags(l, n, ctl, now, &e.ban_left_ns);
    if (e.control & SRL_KEY_BANNED)   /* what a request would get now */
        srl__decision_banned(&e.now, e.ban_left_ns);
    if (srl__compound_banned_ns(cmp, c->copy, now) != 0)
        e.control |= SRL_KEY_PENALTY;
    e.state = c->copy;   /* fn runs outside the node's lock: it gets a copy */
    node_unlock(n);
    e.key_len = n->key_len;
    e.display = node_display(l, n);
    e.display_len = e.key_len < l->key_display ? e.key_len : l->key_display;
    memcpy(e.fingerprint, n->fp, sizeof e.fingerprint);
    c->visited++;
    int stop = c->fn(&e, c->ctx);
    node_done(n);
    return stop;
}

/* fn is called outside the node's lock (it may take its time) but inside
 * the read-side critical section, which keeps e.display valid. */
int64_t srl__local_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx)
{
    struct local *l = local_of(lim);
    struct foreach_ctx c = {fn, ctx, malloc(l->state_bytes), 0, 0};
    if (c.copy == NULL)
        return SRL_ENOMEM;
    rcu_read_lock();
    srl__local_pool_walk(l, 0, UINT64_MAX, foreach_visit, &c);
    rcu_read_unlock();
    free(c.copy);
    return c.rc != 0 ? c.rc : c.visited;
}
