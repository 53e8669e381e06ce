/*
 * local_control.c - operator control of one key in the in-process store
 * (srl_open_local; local_store.h has the structs and the rules every file
 * keeps): exemption, ban by hand, per-key limits stored and per call, their
 * reading back, and the decision of a key that has any of them.  The
 * semantics are srl.h's ("operator control", "per-key limits"), the same as
 * the shared store's (src/shm/shm_control.c, shm_keylim.c, shm_keyset.c).
 *
 * WHAT IT HOLDS
 *   - srl__local_key_control (exempt, unexempt, ban, unban, get) and
 *     srl__local_key_limits (set, clear, get), each one node lock taken once,
 *     an untracked key inserted first for exempt, ban and set.
 *   - srl__local_ctl_decide: the decision of a node whose n->ctl is not 0,
 *     or of a call with its own limits (srl_acquire_limits).
 *   - The handle's tables: l->keylim (the distinct limit sets keys name, at
 *     most CTL_KEYLIMS) and l->reasons (the ban reasons, CTL_REASONS).
 *
 * INVARIANTS
 *   - n->ctl is 0 for a key nobody controls (an insert zeroes it), and the
 *     decision path (local.c) then reads nothing of this file: one load of
 *     a word on the node's first line.
 *   - n->ctl, the state and the ban record (struct lcold) change only under
 *     the node's lock, the node live.  CTL_IDX names the set the state is in
 *     (with CTL_OWN or CTL_CALL; else the handle's policy): a change of
 *     limits converts the state as a tier change does (srl__tier_convert),
 *     so the key keeps its use; equal limits only move the word.
 *   - An entry of l->keylim or l->reasons is claimed once under ctl_lock,
 *     published with release, never changed nor freed before close: a node
 *     that names one can always be decided, and readers take no lock.
 *   - A key with own limits, exempt, or banned is never evicted (ctl_kept,
 *     local_store.h; srl__local_evict_if_at_rest_locked honours it).
 *
 * LOCK-FREE
 *   A lock-free handle's deciders CAS the state word without the node's
 *   lock, having read n->ctl == 0 inside their read-side section.  An
 *   exemption or ban is set under the lock, and the setter then waits for a
 *   grace period (synchronize_rcu) before it returns: every lock-free
 *   decision that read 0 has landed by then, and every later one reads the
 *   flag and takes the locked path, which decides here.  Per-key limits are
 *   refused on such a handle (one GCRA word decides every key there; a
 *   conversion under a concurrent CAS could not be exact).
 *
 * LOCKS
 *   One node's lock at a time (lock_live); ctl_lock innermost, held only to
 *   claim a table entry.  synchronize_rcu with no lock and outside any
 *   read-side section.
 *
 * MAY TOUCH
 *   A node's ctl, state and ban record under its lock; the shards' exempt;
 *   l->keylim, l->reasons.  Calls local_index.c (insert, pool wait) and
 *   local_lockfree.c (a state's copy), never local.c or local_walk.c.
 */
#include "local_store.h"
#include "errdetail.h"

#include <stdlib.h>

/* ------------------------------------------------------------ tables */

/* The 1-based index of reason text in l->reasons (claimed if new), 0 for no
 * text, SRL_ENOSPC when CTL_REASONS are in use, or SRL_ENOMEM. */
static int reason_index(struct local *l, const char *text)
{
    if (text == NULL || text[0] == '\0')
        return 0;
    char want[CTL_REASON_TEXT] = {0};
    size_t n = strlen(text);   /* at most SRL_BAN_REASON_MAX (limiter.c) */
    memcpy(want, text, n < sizeof want - 1 ? n : sizeof want - 1);
    pthread_mutex_lock(&l->ctl_lock);
    int r = SRL_ENOSPC;
    if (l->reasons == NULL)
        l->reasons = calloc(CTL_REASONS, sizeof *l->reasons);
    if (l->reasons == NULL) {
        r = SRL_ENOMEM;
    } else {
        for (uint32_t i = 0; i < l->reason_count; i++)
            if (memcmp(l->reasons[i], want, sizeof want) == 0) {
                r = (int)i + 1;
                break;
            }
        if (r == SRL_ENOSPC && l->reason_count < CTL_REASONS) {
            memcpy(l->reasons[l->reason_count], want, sizeof want);
            r = (int)++l->reason_count;
        }
    }
    pthread_mutex_unlock(&l->ctl_lock);
    return r;
}

/* The index of the limit set equal to lims (canonical), claimed if new; or
 * SRL_EPOLICY, SRL_ENOTSUP, SRL_ENOSPC, SRL_ENOMEM, with srl_last_error. */
int srl__local_keylim_find(struct local *l, const srl_limits *lims)
{
    if (l->lim.cmp.conc >= 0) {
        srl__err_set("this store's policy holds a concurrency limit: its keys cannot have "
                     "limits of their own");
        return SRL_ENOTSUP;
    }
    if (l->lockfree) {
        srl__err_set("a lock-free in-process store (SRL_CONFIG_LOCKFREE) decides every key by "
                     "its one GCRA word: open it without that flag for per-key limits");
        return SRL_ENOTSUP;
    }
    /* Judged on the stack: srl_acquire_limits comes here on every call. */
    srl_limits canon;
    struct srl__compound c;
    if (srl__limits_canonical(lims, &canon) != 0 || srl__compound_init(&c, &canon) != 0) {
        srl__err_set("the key's limits are not a valid policy");
        return SRL_EPOLICY;
    }
    if (c.conc >= 0) {
        srl__err_set("a key's own limits cannot hold a concurrency limit");
        return SRL_EPOLICY;
    }
    if (c.state_bytes > l->state_bytes) {
        srl__err_set("the key's limits need a state of %u bytes; this in-process store's nodes "
                     "hold at most %u (its policy's state): open it with a policy whose state "
                     "is at least that large", c.state_bytes, (unsigned)l->state_bytes);
        return SRL_EPOLICY;
    }
    /* Entries fill from 0 and are never freed: the first NULL ends them.
     * Looked for without the lock, then again under it before a claim. */
    for (int locked = 0; locked < 2; locked++) {
        if (locked)
            pthread_mutex_lock(&l->ctl_lock);
        for (unsigned r = 0; r < CTL_KEYLIMS; r++) {
            struct srl__compound *e = __atomic_load_n(&l->keylim[r], __ATOMIC_ACQUIRE);
            if (e != NULL && memcmp(&e->limits, &c.limits, sizeof c.limits) == 0) {
                if (locked)
                    pthread_mutex_unlock(&l->ctl_lock);
                return (int)r;
            }
            if (e != NULL)
                continue;
            if (!locked)
                break;
            struct srl__compound *mine = malloc(sizeof *mine);
            if (mine == NULL || srl__compound_init(mine, &canon) != 0) {
                pthread_mutex_unlock(&l->ctl_lock);
                free(mine);
                return SRL_ENOMEM;
            }
            __atomic_store_n(&l->keylim[r], mine, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&l->ctl_lock);
            return (int)r;
        }
    }
    pthread_mutex_unlock(&l->ctl_lock);
    srl__err_set("the store's table of per-key limit sets is full (%u distinct sets, kept "
                 "until close): give keys one of the sets in use", CTL_KEYLIMS);
    return SRL_ENOSPC;
}

void srl__local_ctl_free(struct local *l)
{
    for (unsigned r = 0; r < CTL_KEYLIMS; r++)
        free(l->keylim[r]);
    free(l->reasons);
    pthread_mutex_destroy(&l->ctl_lock);
}

/* ------------------------------------------------------------ one key */

/* Enter a read-side section and lock key's live node, inserting the key
 * first when it is missing and insert is set: 0 with *n locked (release
 * with unlock_node), else an error with nothing held (SRL_ENOENT, SRL_ENOSPC
 * when there is no room, SRL_ETIMEDOUT, SRL_ENOMEM).  A fresh insert may be
 * evicted as idle before it is locked: tried a few times, as the shared
 * store does. */
static int lock_node(struct local *l, const void *key, size_t len, bool insert,
                     struct lnode **n)
{
    struct lkey k;
    key_of(l, key, len, &k);
    rcu_read_lock();
    for (int tries = 0;; tries++) {
        int rc = lock_live(l, &k, n);
        if (rc != SRL_ENOENT || !insert || tries == 4) {
            if (rc != 0)
                rcu_read_unlock();
            return rc;
        }
        struct lnode *m;
        rc = srl__local_find_or_insert(l, &k, &m);
        if (rc == INSERT_OK) {
            node_done(m);
            continue;
        }
        rcu_read_unlock();
        if (rc == INSERT_WAIT && srl__local_pool_wait(l)) {
            rcu_read_lock();
            continue;
        }
        return rc == INSERT_FULL || rc == INSERT_WAIT ? SRL_ENOSPC : rc;
    }
}

static void unlock_node(struct lnode *n)
{
    node_unlock(n);
    node_done(n);
    rcu_read_unlock();
}

/* n's state (locked) from `from` into `to`, its use kept (tiers.c). */
static void convert(struct local *l, struct lnode *n, const struct srl__compound *from,
                    const struct srl__compound *to, uint64_t now)
{
    if (memcmp(&from->limits, &to->limits, sizeof to->limits) == 0)
        return;   /* equal limits: the state is theirs as it is */
    unsigned char old[l->state_bytes] __attribute__((aligned(16)));
    memcpy(old, node_state(n), l->state_bytes);
    srl__tier_convert(from, old, to, node_state(n), now);
}

unsigned srl__local_ctl_flags(const struct local *l, const struct lnode *n, unsigned ctl,
                              uint64_t now, uint64_t *ban_left)
{
    unsigned f = 0;
    if (ctl & CTL_EXEMPT)
        f |= SRL_KEY_EXEMPT;
    if (ctl & CTL_OWN)
        f |= SRL_KEY_OWN_LIMITS;
    uint64_t until = node_cold(l, n->idx)->ban_until;
    if ((ctl & CTL_BANNED) && until > now) {
        f |= SRL_KEY_BANNED;
        *ban_left = until - now;
    }
    return f;
}

int srl__local_key_control(srl_limiter *lim, const void *key, size_t len, int op, uint64_t for_ns,
                           const char *reason, srl_key_control *out)
{
    struct local *l = local_of(lim);
    int r = 0;
    if (op == SRL__CTL_BAN && (r = reason_index(l, reason)) < 0)
        return r;
    struct lnode *n;
    int rc = lock_node(l, key, len, op == SRL__CTL_EXEMPT || op == SRL__CTL_BAN, &n);
    if (rc != 0)
        return rc;
    uint64_t now = srl__now(lim);
    unsigned ctl = __atomic_load_n(&n->ctl, __ATOMIC_RELAXED);
    const struct srl__compound *c = ctl_cmp(l, ctl);
    struct lcold *cold = node_cold(l, n->idx);
    if (op == SRL__CTL_GET) {
        memset(out, 0, sizeof *out);
        out->flags = srl__local_ctl_flags(l, n, ctl, now, &out->ban_left_ns);
        if ((out->flags & SRL_KEY_BANNED) && cold->reason != 0) {
            _Static_assert(sizeof out->reason == CTL_REASON_TEXT, "a reason fits");
            memcpy(out->reason, l->reasons[cold->reason - 1], sizeof out->reason);
        }
        unsigned char st[l->state_bytes] __attribute__((aligned(16)));
        srl__local_state_copy(l, n, st);
        out->penalty_left_ns = srl__compound_banned_ns(c, st, now);
        if (out->penalty_left_ns != 0)
            out->flags |= SRL_KEY_PENALTY;
        out->repeat = srl__compound_offences(c, st, now);
        unlock_node(n);
        return 0;
    }
    switch (op) {
    case SRL__CTL_EXEMPT:
        ctl |= CTL_EXEMPT;
        break;
    case SRL__CTL_UNEXEMPT:
        ctl &= ~CTL_EXEMPT;
        break;
    case SRL__CTL_BAN:
        ctl |= CTL_BANNED;
        cold->ban_until = now + for_ns;
        cold->reason = (uint32_t)r;
        break;
    default:   /* SRL__CTL_UNBAN: the hand ban, and the penalty's with its offences */
        if (c->penalty)   /* never on a lock-free handle (srl_open_local) */
            srl__compound_forgive(c, node_state(n));
        ctl &= ~CTL_BANNED;
        cold->ban_until = 0;
        cold->reason = 0;
        break;
    }
    __atomic_store_n(&n->ctl, ctl, __ATOMIC_RELAXED);
    unlock_node(n);
    if (l->lockfree && (op == SRL__CTL_EXEMPT || op == SRL__CTL_BAN))
        synchronize_rcu();   /* LOCK-FREE above */
    return 0;
}

int srl__local_key_limits(srl_limiter *lim, const void *key, size_t len, const srl_limits *lims,
                          srl_limits *get)
{
    struct local *l = local_of(lim);
    int idx = 0;
    if (lims != NULL && (idx = srl__local_keylim_find(l, lims)) < 0)
        return idx;
    struct lnode *n;
    int rc = lock_node(l, key, len, lims != NULL, &n);
    if (rc != 0)
        return rc;
    unsigned ctl = __atomic_load_n(&n->ctl, __ATOMIC_RELAXED);
    const struct srl__compound *from = ctl_cmp(l, ctl);
    bool own = (ctl & CTL_OWN) != 0;
    if (get != NULL || (lims == NULL && !own)) {
        if (get != NULL && own)
            memcpy(get, &from->limits, sizeof *get);
        unlock_node(n);
        if (get != NULL && !own) {
            srl__err_set("the key has no limits of its own (the store's policy decides it)");
            return SRL_ENOENT;
        }
        return 0;
    }
    unsigned keep = ctl & ~(CTL_IDX | CTL_OWN | CTL_CALL);
    if (lims == NULL) {   /* cleared: back to the policy, its use kept */
        convert(l, n, from, &l->lim.cmp, srl__now(lim));
        ctl = keep;
    } else {
        convert(l, n, from, l->keylim[idx], srl__now(lim));
        ctl = keep | CTL_OWN | (unsigned)idx;
    }
    __atomic_store_n(&n->ctl, ctl, __ATOMIC_RELAXED);
    unlock_node(n);
    return 0;
}

/* ------------------------------------------------------------ deciding */

/* The decision of an exempt or banned key (ctl: its n->ctl; c: the
 * compound its state is in), n locked.  True when it decided: banned until
 * after now (denied, retry_after at least the ban's time left), else exempt
 * (admitted, counted in exempt).  Neither writes the state: d's other
 * numbers are its limits', peeked.  A ban found over is cleared here. */
static bool control_decide(struct local *l, struct lnode *n, unsigned ctl,
                           const struct srl__compound *c, uint64_t now, uint32_t cost,
                           srl_decision *d)
{
    unsigned char st[l->state_bytes] __attribute__((aligned(16)));
    if (ctl & CTL_BANNED) {
        uint64_t until = node_cold(l, n->idx)->ban_until;
        if (until > now) {
            srl__local_state_copy(l, n, st);
            srl__compound_decide(c, st, now, cost, 0, d);
            srl__decision_banned(d, until - now);
            d->wait_ns = 0;
            return true;
        }
        ctl &= ~CTL_BANNED;
        __atomic_store_n(&n->ctl, ctl, __ATOMIC_RELAXED);
    }
    if (!(ctl & CTL_EXEMPT))
        return false;
    srl__local_state_copy(l, n, st);
    srl__compound_decide(c, st, now, cost, 0, d);
    d->allowed = 1;
    d->retry_after_ns = 0;
    d->wait_ns = 0;
    shard_add(&my_shard(l)->exempt, 1);
    return true;
}

int srl__local_ctl_decide(struct local *l, struct lnode *n, const struct srl__compound *own,
                          unsigned own_idx, uint32_t cost, uint64_t max_wait, srl_decision *d)
{
    unsigned ctl = __atomic_load_n(&n->ctl, __ATOMIC_RELAXED);
    uint64_t now = srl__now(&l->lim);
    const struct srl__compound *from = ctl_cmp(l, ctl);
    /* Stored limits decide whatever the call names; else the call's, else
     * the policy's. */
    const struct srl__compound *to = (ctl & CTL_OWN) ? from : own != NULL ? own : &l->lim.cmp;
    if (cost > to->min_permits)
        return SRL_ECOST;
    if (max_wait > 0 && !to->reserve)
        return SRL_ENOTSUP;
    bool counted = false;   /* by word_update's CAS */
    if ((ctl & (CTL_EXEMPT | CTL_BANNED)) && control_decide(l, n, ctl, from, now, cost, d)) {
        /* decided */
    } else if (l->lockfree) {
        /* No own limits here (srl__local_keylim_find): the word, by CAS,
         * since lock-free deciders that read ctl 0 may still land. */
        int wr = word_update(l, n, max_wait != 0 ? WORD_RESERVE : WORD_DECIDE, cost, max_wait, d);
        counted = wr == WORD_COUNTED;   /* locked and live: never WORD_RETIRED */
    } else {
        if (from != to) {
            convert(l, n, from, to, now);
            unsigned keep = ctl & ~(CTL_IDX | CTL_OWN | CTL_CALL);   /* OWN: from == to */
            __atomic_store_n(&n->ctl, own != NULL ? keep | CTL_CALL | own_idx : keep,
                             __ATOMIC_RELAXED);
        }
        if (max_wait != 0)
            srl__compound_reserve(to, node_state(n), now, cost, max_wait, d);
        else
            srl__compound_decide(to, node_state(n), now, cost, 1, d);
    }
    if (!counted)
        count_node(n, d->allowed ? COUNT_ALLOWED : COUNT_DENIED, l->lockfree);
    if (!d->allowed && l->lim.dry_run)
        shard_add(&my_shard(l)->would_deny, 1);
    return 0;
}
