/*
 * local_index.c - the in-process store's pool of nodes and its bucketed
 * index (local_store.h has the structs, the rules every file keeps, and the map
 * of the files).
 *
 * WHAT IT HOLDS
 *   - The pool: fixed-size nodes (struct lnode, node_bytes apart, 64-byte
 *     aligned) in chunks of 2^chunk_shift nodes, each chunk's nodes followed
 *     by their struct lcold (l->colds), never freed before srl_close: first
 *     the homes (HOMES below), one zeroed mapping made at open, then
 *     overflow chunks allocated as keys need them (chunks of 2 MiB and more
 *     are advised onto transparent huge pages).  Free overflow nodes are
 *     kept on a free list (linked through their lcold) and reused; no
 *     malloc on any decision path.  pool_get, pool_put, the call_rcu callback
 *     free_node_rcu, and srl__local_pool_wait at the pool's bound.
 *   - The index: nbuckets buckets of 8 entries, one cache line each, a key
 *     in the first of its two candidate buckets when it has room.  The
 *     index has 2 entries per key of capacity (sized at open, lazily zeroed
 *     by srl__local_map, never resized).  Its stripe locks, the
 *     insert (srl__local_find_or_insert), the one-step relocation and the
 *     delete (srl__local_unlink_node).
 *   - Retirement and reclamation: srl__local_retire_locked (a node's death:
 *     LIVE -> DEAD, its capacity slot released, under its lock; for reset,
 *     eviction and reclamation, the caller then unlinks it), eviction of an
 *     at-rest state (srl__local_evict_if_at_rest_locked, after freeing a
 *     concurrency limit's dead and expired holders), and reclaim_some: an
 *     insert into a full table evicts among the next RECLAIM_SCAN nodes of
 *     the pool, skipping busy ones with trylock (an insert must not wait on
 *     other keys); with on_full=evict, when none is at rest, the same scan
 *     takes the active node that used the least of its limit (evict_active;
 *     docs/design.md, "on_full=evict in the in-process store").  Here
 *     rather than with the walks because insert and reclamation call each
 *     other.
 *
 * HOMES
 *   A hit needs two misses: the bucket, then the node its entry names.  To
 *   overlap them, nodes 0 .. capacity-1 are homes: a key has two home
 *   windows of HOME_WINDOW adjacent nodes, chosen from its fingerprint
 *   (node_homes, local_store.h), and pool_get gives an insert the first free
 *   node of them, else an overflow node (free list, then bump).  A lookup
 *   prefetches the windows' nodes beside the buckets (key_of, local.c); the
 *   index still says where the key is, so a key out of its homes is found
 *   as before, one dependent miss later.  Homes are taken and given back
 *   under pool_lock like any node (a home is FREE, not on the free list:
 *   its key finds it), and only after their grace period.  The mapping is
 *   zeroed and NODE_FREE is 0: a home never taken costs no memory and needs
 *   no initialising; a taken one gets its idx then.  The price: memory
 *   grows toward capacity x node_bytes as keys spread over the homes (as a
 *   shared segment's does at once), and walks of the pool visit every home.
 *   At full capacity about 85 % of keys are at home, at half 98 %
 *   (tests/check_local_homes.c).
 *   If 32-bit node indexes cannot hold homes and the pool's bound, or the
 *   mapping is refused, there are no homes (homes == 0).
 *
 * INVARIANTS
 *   - A node's fp and key_len never change while any index entry points to
 *     it, nor until a grace period after the last entry was cleared.
 *   - life goes LIVE -> DEAD exactly once per use of a node, under the node's
 *     lock, by the thread that will then clear its index entry and hand it
 *     to call_rcu, whose callback puts it back on the free list: a node is
 *     reused only after a grace period that began after it left the index.
 *     A dead node is never matched by a lookup or an insert, so a new live
 *     node for the same key may be inserted before the dead one is cleared.
 *     The eviction of an active node (on_full=evict) is no exception: its
 *     evictor holds its lock from judging it to marking it dead (its word
 *     tombstoned first on a lock-free handle), so a decider that found it
 *     either decided before (on the old state, counted there) or sees it
 *     dead and looks the key up again; only the victim's state is touched,
 *     so every key that is not evicted stays exact.
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
 *     reserved (CAS loop) under the stripe locks of a key found absent
 *     there, just before its node is published, and released when the
 *     node is marked dead (or, rarely, when no index entry was free).  So
 *     a slot is never held by a thread that will lose an insertion race.
 *     One exception, on_full=evict: the slot of a node a full-table insert
 *     evicted (active, or the first it found at rest) is not released but
 *     passed to that insert (held in srl__local_find_or_insert), which
 *     publishes its node in it or releases it (the key came meanwhile, no
 *     entry free, the pool at its bound); so used is live nodes plus slots
 *     in passage, at most one per inserting thread, and still at most the
 *     capacity.  Released and reserved again, the slot could go to another
 *     insert in between, and the evicting one would answer on_full.
 *   - The scan of a full table may hold one node's lock (its best victim
 *     so far) while it takes others, only with trylock, never a stripe
 *     lock: it lets the victim go before it unlinks anything.
 *   - The pool bound: besides the homes, at most 4 x capacity overflow
 *     nodes (+ 4 chunks) exist, live or awaiting their grace period.  An
 *     insert that finds none free waits
 *     for the pending grace periods (srl__local_pool_wait: rcu_barrier,
 *     outside the read-side section) and tries again; it never answers
 *     on_full for it, since the table is not full (docs/design.md, "The pool bound race":
 *     a sweep churning fresh states once made a key of 8 permits admit 256).
 *
 * MAY TOUCH
 *   The index's entries and the pool's free list and chunks, under their
 *   locks; a node's fields only while no lookup can reach it (from pool_get
 *   to its publication, and from free_node_rcu on), and, while it is
 *   indexed, its fp and idx, which are fixed.  Never a live node's state or
 *   lock, but to retire one (dead, under its lock, which retirement and
 *   reclamation take); states belong to the ops (local.c) and the walks
 *   (local_walk.c).
 */
#include "local_store.h"
#include "proc.h"

#include <assert.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE (2u << 20)
#define MAP_HUGE_MAX (256ull << 20) /* larger maps are sparse: no THP */

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

/* ------------------------------------------------------------ the pool */

/* A chunk of 2^chunk_shift nodes and then their struct lcold, on huge
 * pages when it spans them. */
static unsigned char *chunk_alloc(const struct local *l)
{
    size_t bytes = ((size_t)1 << l->chunk_shift) * (l->node_bytes + sizeof(struct lcold));
    size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 4096;
    bytes = (bytes + align - 1) / align * align;
    unsigned char *c = aligned_alloc(align, bytes);
    if (c != NULL && align == HUGE_PAGE)
        (void)madvise(c, bytes, MADV_HUGEPAGE); /* a hint: fewer TLB misses */
    return c;
}

/* A node for the new key k, uninitialised but for its idx: the first free
 * node of k's home windows (k->home, from key_of), else an overflow node.
 * 0 with *out set, SRL_ENOMEM (no memory for a new chunk), or INSERT_WAIT
 * (the pool is at its bound, see srl_open_local: live nodes are at most
 * the capacity, so the rest, 3 x capacity and more, await their grace
 * period). */
static int pool_get(struct local *l, const struct lkey *k, struct lnode **out)
{
    int rc = 0;
    pthread_mutex_lock(&l->pool_lock);
    struct lnode *home = NULL;
    bool homes = l->homes > 0;
    for (unsigned c = 0; homes && c < 2 * HOME_WINDOW && home == NULL; c++) {
        uint32_t i = k->home[c / HOME_WINDOW] + c % HOME_WINDOW;
        struct lnode *n = node_at(l, i);
        if (__atomic_load_n(&n->life, __ATOMIC_RELAXED) == NODE_FREE) {
            home = n;
            home->idx = i;   /* 0 in a home never taken before */
        }
    }
    if (home != NULL) {
        *out = home;
        __atomic_store_n(&home->life, NODE_NEW, __ATOMIC_RELAXED);
    } else if (l->free_head != 0) {
        *out = node_at(l, l->free_head - 1);
        l->free_head = node_cold(l, l->free_head - 1)->free_next;
        __atomic_store_n(&(*out)->life, NODE_NEW, __ATOMIC_RELAXED);
    } else {
        uint64_t c = l->fresh >> l->chunk_shift;
        if (c >= l->max_chunks) {
            rc = INSERT_WAIT;
        } else {
            if (l->chunks[c] == NULL) {
                unsigned char *chunk = chunk_alloc(l);
                if (chunk != NULL)
                    l->colds[c] = (struct lcold *)(chunk + ((size_t)1 << l->chunk_shift) *
                                                               l->node_bytes);
                __atomic_store_n(&l->chunks[c], chunk, __ATOMIC_RELEASE);
            }
            if (l->chunks[c] == NULL) {
                rc = SRL_ENOMEM;
            } else {
                *out = node_at(l, (uint32_t)l->fresh);
                (*out)->idx = (uint32_t)l->fresh;
                __atomic_store_n(&(*out)->life, NODE_NEW, __ATOMIC_RELAXED);
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
    pthread_mutex_lock(&l->pool_lock);
    __atomic_store_n(&n->life, NODE_FREE, __ATOMIC_RELAXED);
    if (n->idx >= l->homes) {   /* a home is found by its key, not a list */
        node_cold(l, n->idx)->free_next = l->free_head;
        l->free_head = n->idx + 1;
    }
    pthread_mutex_unlock(&l->pool_lock);
}

/* call_rcu callback: every reader that could see n has left its read-side
 * critical section, so n's counts are final (a lock-free decider counts
 * after its CAS, inside its section): they move to the shards now, under
 * retire_lock so that a stats walk counts them once, in the node or in the
 * shards. */
static void free_node_rcu(struct rcu_head *head)
{
    TSAN_ACQUIRE(head);
    struct lcold *cold = caa_container_of(head, struct lcold, rcu);
    struct local *l = cold->owner;
    struct lnode *n = node_at(l, cold->idx);
    TSAN_ACQUIRE(n);
    bool early = false, free_early = false;
    pthread_mutex_lock(&l->retire_lock);
    if (!early) {
        struct shard *s = my_shard(l);
        uint64_t c = __atomic_load_n(&n->counts, __ATOMIC_RELAXED);
        shard_add(&s->retired_allowed, counts_allowed(c));
        shard_add(&s->retired_denied, counts_denied(c));
    }
    /* Not FREE yet: a home read FREE is taken (pool_get), and pool_put,
     * which stores FREE, has yet to run: it would free the new key's node
     * under it. */
    __atomic_store_n(&n->life, free_early ? NODE_FREE : NODE_GOING, __ATOMIC_RELAXED);
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
 * call_rcu worker runs there; see FORK in local.c).  Then the request is
 * decided untracked, as before this wait existed.
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
bool srl__local_pool_wait(struct local *l)
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
void srl__local_unlink_node(struct local *l, struct lnode *n)
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
    struct lcold *cold = node_cold(l, idx);
    cold->owner = l;
    cold->idx = idx;
    TSAN_RELEASE(&cold->rcu);   /* call_rcu hands the head to its worker */
    node_done(n);
    call_rcu(&cold->rcu, free_node_rcu);
}

/* ------------------------------------------------ retirement and reclamation */

#define RECLAIM_SCAN 64     /* nodes an insert into a full table may visit */
#define EVICT_SCANS 4       /* scans an on_full=evict insert may make finding none */

/* Visit the pool's LIVE nodes (acquire: their fields are initialised),
 * `count` indexes from `from` (wrapping), calling fn on each until it
 * returns nonzero.  Call inside rcu_read_lock: a node seen LIVE is not
 * reused before the section ends (had its grace period begun before the
 * section, the section would see it DEAD).  A DEAD node is skipped: its
 * grace period may have begun before this section, so it is not ours to
 * touch.  Returns indexes visited.
 * A walk of the pool, not of the index, sees each node once even while a
 * relocation moves its entry, and costs the homes plus the overflow nodes
 * the keys ever took. */
uint64_t srl__local_pool_walk(struct local *l, uint64_t from, uint64_t count,
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
        unsigned st = __atomic_load_n(&n->life, __ATOMIC_ACQUIRE);
        if (st == NODE_LIVE && fn(l, n, ctx) != 0)
            break;
    }
    return seen;
}

/* n's death, LIVE -> DEAD (release: a pool walk that sees DEAD skips it).
 * Call with n->lock held, n not dead; its slot is the caller's to release
 * (srl__local_retire_locked) or to pass on (evict_active). */
static void mark_dead(struct local *l, struct lnode *n)
{
    (void)l;
    __atomic_store_n(&n->life, NODE_DEAD, __ATOMIC_RELEASE);
}

/* Mark n dead and release its capacity slot (its counts stay in it, and
 * in stats walks, until free_node_rcu moves them).  Call with n->lock held
 * and n not dead (on a lock-free handle, its word already WORD_TOMB); the
 * caller then unlocks and calls srl__local_unlink_node. */
void srl__local_retire_locked(struct local *l, struct lnode *n)
{
    mark_dead(l, n);
    unreserve(l);
}

/* Whether n is live, at rest and not kept by its operator (after freeing a
 * concurrency limit's dead and expired holders; on a lock-free handle its
 * word is then retired, WORD_TOMB).  Call with n->lock held; if true, the
 * caller marks it dead. */
static bool at_rest_locked(struct local *l, struct lnode *n)
{
    if (node_dead(n))
        return false;
    uint64_t now = srl__now(&l->lim);
    if (l->lim.cmp.conc >= 0) {
        /* Dead holders' and max_hold-expired units first. */
        uint32_t freed = srl__conc_reclaim(&l->lim.cmp.limits.limit[l->lim.cmp.conc],
                                           srl__compound_conc_state(&l->lim.cmp, node_state(n)),
                                           now, srl__proc_alive, NULL);
        if (freed > 0)
            shard_add(&my_shard(l)->reclaimed, freed);
    }
    /* An operator's key is kept: exempt, banned, own limits. */
    unsigned ctl = __atomic_load_n(&n->ctl, __ATOMIC_RELAXED);
    if (ctl != 0 && ctl_kept(l, n, ctl, now))
        return false;
    return l->lockfree ? srl__local_word_retire(l, n, now, true)
                       : srl__compound_at_rest(ctl_cmp(l, ctl), node_state(n), now);
}

/* If n is live and at rest, mark it dead; returns true if it did.  Call
 * with n->lock held; the caller unlinks after unlocking. */
bool srl__local_evict_if_at_rest_locked(struct local *l, struct lnode *n)
{
    if (!at_rest_locked(l, n))
        return false;
    srl__local_retire_locked(l, n);
    return true;
}

struct reclaim_ctx {
    uint64_t visited, reclaimed;
    bool evict;               /* on_full=evict: judge the active nodes too */
    bool keep;                /* on_full=evict: pass the first freed slot on */
    struct lnode *best;       /* the active node to evict so far, held locked */
    uint64_t best_used, best_limit, best_last;
};

/*
 * Whether n (locked, live, not at rest) may be evicted though active
 * (on_full=evict), and if so how much of its limit it has used, as a peek
 * sees it (*used of *limit, the binding limit's), and its last admission
 * (srl__compound_last_ns; 0 where the algorithm keeps none).  Never a key
 * its operator keeps (ctl_kept: exempt, own limits, banned by hand), nor
 * one that no decision has counted yet: such a node is fresh, so at rest
 * and the at-rest reclaim's to take, or its inserter is about to lock it
 * for its first decision, which eviction would only send round again.
 */
static bool active_use(struct local *l, struct lnode *n, uint64_t *used, uint64_t *limit,
                       uint64_t *last)
{
    if (__atomic_load_n(&n->counts, __ATOMIC_RELAXED) == 0)
        return false;
    uint64_t now = srl__now(&l->lim);
    unsigned ctl = __atomic_load_n(&n->ctl, __ATOMIC_RELAXED);
    if (ctl != 0 && ctl_kept(l, n, ctl, now))
        return false;
    const struct srl__compound *c = ctl_cmp(l, ctl);
    unsigned char st[l->state_bytes] __attribute__((aligned(16)));   /* read once */
    srl__local_state_copy(l, n, st);
    srl_decision d;
    srl__compound_decide(c, st, now, 1, 0, &d);   /* a peek of the copy */
    *limit = d.limit > 0 ? d.limit : 1;
    uint64_t left = d.allowed ? (uint64_t)d.remaining + 1 : 0;
    *used = left < *limit ? *limit - left : 0;
    *last = srl__compound_last_ns(c, st);
    return true;
}

/* Let go of the node held as the best victim, if any. */
static void drop_best(struct reclaim_ctx *c)
{
    if (c->best != NULL) {
        node_unlock(c->best);
        node_done(c->best);
        c->best = NULL;
    }
}

static int reclaim_visit(struct local *l, struct lnode *n, void *arg)
{
    struct reclaim_ctx *c = arg;
    if (!node_trylock(n)) {
        node_done(n);
    } else {
        uint64_t used, limit, last;
        if (at_rest_locked(l, n)) {
            /* A slot freed at rest: no active key need go.  On a full
             * table that evicts, the first such slot passes to the caller
             * as an active key's does (evict_active), so that no other
             * insert takes it meanwhile.  The held victim is let go before
             * unlinking, which takes stripe locks (never under a node's
             * lock). */
            if (c->keep) {
                mark_dead(l, n);
                c->keep = false;
            } else {
                srl__local_retire_locked(l, n);
            }
            c->evict = false;
            drop_best(c);
            node_unlock(n);
            srl__local_unlink_node(l, n);
            c->reclaimed++;
        } else if (c->evict && !node_dead(n) && active_use(l, n, &used, &limit, &last) &&
                   (c->best == NULL || used * c->best_limit < c->best_used * limit ||
                    (used * c->best_limit == c->best_used * limit && last < c->best_last))) {
            /* Less of its limit used than the best so far (used / limit,
             * compared in integers: each at most 2^32, the products fit),
             * ties to the oldest last admission.  Kept locked, so that no
             * other evictor takes it and no decision changes it (but a
             * lock-free one) before it goes. */
            drop_best(c);
            c->best = n;
            c->best_used = used;
            c->best_limit = limit;
            c->best_last = last;
        } else {
            node_unlock(n);
            node_done(n);
        }
    }
    return ++c->visited == RECLAIM_SCAN;
}

/*
 * The active node c->best (locked, live; on_full=evict, nothing at rest
 * found) goes so that a new key takes its slot: retired as any eviction
 * is (its word tombstoned first on a lock-free handle, whatever it holds;
 * LIVE -> DEAD under its lock, so a decider that found it retries on a
 * fresh node), but its capacity slot is not released: it passes to the
 * caller's insert (*held), so that no other insert takes it meanwhile.
 * Counted in evicted and evicted_active.  Call inside rcu_read_lock.
 */
static void evict_active(struct local *l, struct reclaim_ctx *c, bool *held)
{
    struct lnode *n = c->best;
    c->best = NULL;
    if (l->lockfree)
        (void)srl__local_word_retire(l, n, 0, false);
    mark_dead(l, n);
    node_unlock(n);
    srl__local_unlink_node(l, n);
    struct shard *s = my_shard(l);
    shard_add(&s->evicted, 1);
    shard_add(&s->evicted_active, 1);
    *held = true;
}

/*
 * The table is full: reclaim at-rest states among the next RECLAIM_SCAN
 * nodes of the pool from a cursor that moves on each time (so a different
 * sample at each call, in the order keys first arrived).  Busy
 * nodes are skipped with trylock: a locked state is in use, hence rarely
 * at rest, and an insert must not wait on other keys.  Returns the number
 * reclaimed.  With on_full=evict and held not NULL, when none is at rest,
 * the same scan picks the active node that used the least of its limit
 * (ties: the oldest) and evicts it, its slot passed to the caller (*held
 * true; evict_active).  Call inside rcu_read_lock.
 */
static uint64_t reclaim_some(struct local *l, bool *held)
{
    bool evict = held != NULL && l->lim.on_full == SRL_ON_FULL_EVICT;
    for (unsigned scan = 1;; scan++) {
        struct reclaim_ctx c = {.evict = evict, .keep = evict};
        uint64_t from = __atomic_load_n(&l->reclaim_cursor, __ATOMIC_RELAXED);
        uint64_t went = srl__local_pool_walk(l, from, UINT64_MAX, reclaim_visit, &c);
        __atomic_store_n(&l->reclaim_cursor, from + went, __ATOMIC_RELAXED);
        if (c.reclaimed)
            shard_add(&my_shard(l)->evicted, c.reclaimed);
        if (evict && !c.keep)
            *held = true;   /* an at-rest slot, passed on */
        /* A scan preempted while other threads churned through the table
         * saw the nodes live as it passed them: mostly those that stay,
         * the kept and the used-up ones.  So when it found nothing to take,
         * or only a key that used all of its limit (the dearest to forget),
         * look again, a bounded number of times, before taking that or
         * answering on_full. */
        bool again = !*held && scan < EVICT_SCANS &&
                     (c.best == NULL || c.best_used >= c.best_limit);
        if (c.best != NULL && again)
            drop_best(&c);
        if (c.best != NULL)
            evict_active(l, &c, held);
        if (!evict || c.reclaimed > 0 || *held || scan == EVICT_SCANS)
            return c.reclaimed;
    }
}

/* No slot free (a relaxed look: only a shortcut, reserve() decides). */
static bool table_full(const struct local *l)
{
    return __atomic_load_n(&l->used, __ATOMIC_RELAXED) >= l->capacity;
}

/* The key's node if another thread created it meanwhile, else INSERT_FULL. */
static int found_or_full(const struct local *l, const struct lkey *k, struct lnode **out)
{
    struct lnode *n = find(l, k);
    if (n == NULL)
        return INSERT_FULL;
    *out = n;
    return INSERT_OK;
}

/*
 * Find or create the live node for k.  Returns INSERT_OK with *out set,
 * INSERT_FULL when no slot is free even after reclaiming (or, rarely, when
 * both candidate buckets and their one-step relocations are full),
 * INSERT_WAIT when the pool is at its bound (see srl__local_pool_wait), or
 * SRL_ENOMEM.  Call inside rcu_read_lock.
 *
 * The slot is reserved under k's stripe locks, once the search there found
 * k absent: a slot counts a node about to be published, never a thread
 * racing others for the same new key.  Reserved before the locks, N
 * threads inserting one key held N slots until they got the locks, and a
 * table of 13 with 5 live keys answered the next new key from on_full
 * (docs/design.md, "Slots reserved by racers").
 */
int srl__local_find_or_insert(struct local *l, const struct lkey *k, struct lnode **out)
{
    bool held = false;   /* a slot passed on by an active key's eviction */
    /* A full table: reclaim before paying for a node, so that a flood of
     * new keys into a full table costs no pool traffic. */
    if (table_full(l) && reclaim_some(l, &held) == 0 && !held && table_full(l))
        return found_or_full(l, k, out);
    struct lnode *cand = NULL;
    int prc = pool_get(l, k, &cand);
    if (prc != 0) {
        if (held)
            unreserve(l);
        return prc;
    }
    memcpy(cand->fp, k->fp, sizeof cand->fp);
    cand->key_len = k->len;
    cand->lock = 0;
    cand->counts = 0;
    cand->ctl = 0;   /* no operator's control (local_control.c) */
    node_cold(l, cand->idx)->ban_until = 0;
    node_cold(l, cand->idx)->reason = 0;
    memset(node_state(cand), 0, l->node_bytes - sizeof *cand);
    /* A fresh state needs a time; reading it outside any lock is harmless:
     * every later reader takes the lock after this node is published, so
     * it reads a time no earlier than this one. */
    srl__compound_state_init(&l->lim.cmp, node_state(cand), srl__now(&l->lim));
    if (l->lim.cmp.conc >= 0)   /* see the shared store's insert */
        srl__conc_seed(srl__compound_conc_state(&l->lim.cmp, node_state(cand)),
                       randombytes_random());
    if (l->key_display > 0)
        memcpy((unsigned char *)node_state(cand) + l->state_bytes, k->key,
               k->len < l->key_display ? k->len : l->key_display);

    for (bool reclaimed = false;;) {
        lock_pair(l, k->b1, k->b2);
        struct lnode *won = NULL;
            won = find(l, k);
        int at = -1;
        bool room = won == NULL && (held || reserve(l));
        if (won != NULL && held)
            unreserve(l);   /* the key came meanwhile: the slot goes back */
        held = false;
        if (room) {
            uint64_t b = k->b1;
            at = free_entry(l, b);
            if (at < 0) {
                b = k->b2;
                at = free_entry(l, b);
            }
            if (at < 0)
                at = relocate_one(l, k, &b);
            if (at >= 0) {
                /* Live before indexed: a pool walk that sees LIVE (acquire)
                 * sees the node initialised, and finds its entry once it
                 * can take these stripes. */
                __atomic_store_n(&cand->life, NODE_LIVE, __ATOMIC_RELEASE);
                entry_store(&l->index[b].e[at], (uint64_t)k->tag << 32 | (cand->idx + 1));
            } else {
                unreserve(l);   /* no entry free */
            }
        }
        unlock_pair(l, k->b1, k->b2);
        if (at >= 0) {
            *out = cand;
            return INSERT_OK;
        }
        /* Reclaim (it takes other stripes) with none of ours held, once. */
        if (won == NULL && !room && !reclaimed && (reclaim_some(l, &held) > 0 || held)) {
            reclaimed = true;
            continue;
        }
        /* Ours was never visible to anyone: back to the pool at once. */
        pool_put(l, cand);
        if (won == NULL)
            return INSERT_FULL;
        *out = won;
        return INSERT_OK;
    }
}


/* The index: lazily zeroed anonymous memory (a huge capacity costs address
 * space, not memory, until keys arrive), on huge pages when it is small
 * enough to be filled. */
void *srl__local_map(size_t bytes)
{
    bool huge = bytes >= HUGE_PAGE && bytes <= MAP_HUGE_MAX;
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
    return p;
}
