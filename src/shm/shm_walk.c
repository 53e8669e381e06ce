/*
 * shm_walk.c - the shared table's walks, and its calls on one key that
 * decide nothing (shm.h has the layout, the structs and the map of the
 * shm_* files).
 *
 * WHAT IT HOLDS
 *   - The walks of every bucket: srl_evict_idle (srl__shm_evict_idle, which
 *     also frees a concurrency limit's units of dead or expired holders
 *     before it judges a key at rest) and srl_foreach (srl__shm_foreach);
 *     and the creator's srl__shm_table_init (every bucket's mutex).
 *   - The calls on one existing key that are not decisions: srl_key_state
 *     (srl__shm_key_state), srl_reset_key (srl__shm_reset_key); and
 *     srl_tier_get (srl__shm_tier_get), which reads the policy view only.
 *   The decisions (acquire, reserve, enter, leave, peek, refund, apply) and
 *   what they need (lookup, insert, relocation, reclaim, locking with crash
 *   repair) are in shm_table.c, the slot rules in shm_slot.c.  This file
 *   calls into both, never the reverse (tools/dev/callgraph-cycles refuses
 *   a loop between files).
 *
 * INVARIANTS (the table's, listed at the top of shm_table.c)
 *   - A walk keeps them as a decision does: a slot is made current
 *     (srl__shm_slot_current, which freezes it) before its state is read,
 *     and thawed before its bucket's lock is released; an eviction clears
 *     the tag, counts `evicted` and bumps the bucket's gen, so the flood
 *     cache (shm_flood.c) drops its copy.
 *   - A walk reads the tags without a lock to skip empty buckets (a hint);
 *     a key inserted, moved or evicted meanwhile may be missed, and a
 *     moved one seen twice.
 *
 * LOCKS
 *   One bucket at a time, with srl__shm_lock (the handle's timeout; a dead
 *   owner's bucket is repaired first), the time read after the lock was
 *   taken.  srl_evict_idle skips a bucket whose lock it cannot have (its
 *   timeout is counted), srl_foreach returns the error; srl_foreach calls
 *   fn with the bucket locked (srl_entry.state is valid while fn runs).
 *   srl_key_state and srl_reset_key find the key with srl__shm_locate
 *   (shm_table.c), which returns with only the key's bucket locked.
 *   srl__shm_table_init runs before READY, on a mapping no one else sees.
 *
 * MAY TOUCH
 *   Slots of a locked bucket: a state (a concurrency reclaim, inside the
 *   undo record), a tag (an eviction, srl_reset_key); the bucket's evicted
 *   and gen; the header page's `reclaimed`.  Never inserts or moves a key.
 */
#include "shm.h"
#include "proc.h"

#include <string.h>

int srl__shm_key_state(srl_limiter *lim, const void *key, size_t len, void *buf)
{
    struct srl__shm *s = lim->impl;
    struct srl__shm_key k;
    uint64_t b;
    int i;
    int rc = srl__shm_locate(s, key, len, &k, &b, &i);
    if (rc != 0)
        return rc;
    /* The state as the current policy reads it (srl_info.limits). */
    const struct srl__shm_pol *p = srl__shm_pol_get(s, true);
    if (p == NULL) {
        srl__shm_unlock(s, b);
        return SRL_ECORRUPT;
    }
    srl__shm_slot_current(s, p, b, (unsigned)i, srl__now(lim));
    srl__shm_state_load(s, b, (unsigned)i, buf);
    srl__shm_slot_thaw(s, b, (unsigned)i);
    srl__shm_unlock(s, b);
    return 0;
}

int srl__shm_reset_key(srl_limiter *lim, const void *key, size_t len)
{
    struct srl__shm *s = lim->impl;
    struct srl__shm_key k;
    uint64_t b;
    int i;
    int rc = srl__shm_locate(s, key, len, &k, &b, &i);
    if (rc != 0)
        return rc;
    srl__shm_slot_freeze(s, b, (unsigned)i);
    srl__shm_tag_store(srl__shm_bucket(s, b), (unsigned)i, 0);
    srl__shm_slot_thaw(s, b, (unsigned)i);
    srl__shm_gen_bump(s, b);
    srl__shm_unlock(s, b);
    return 0;
}

/* ------------------------------------------------------------ walks */

int64_t srl__shm_evict_idle(srl_limiter *lim)
{
    struct srl__shm *s = lim->impl;
    int64_t n = 0;
    for (uint64_t b = 0; b < s->buckets; b++) {
        struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
        bool any = false;
        for (unsigned i = 0; i < SRL__SHM_SLOTS && !any; i++)
            any = __atomic_load_n(&bk->tags[i], __ATOMIC_RELAXED) != 0;
        if (!any)
            continue;
        struct timespec deadline = SRL__SHM_NO_DEADLINE;
        /* Best effort: a bucket whose lock cannot be had is skipped (and its
         * timeout counted); the others are still swept. */
        if (srl__shm_lock(s, b, &deadline) != 0)
            continue;
        const struct srl__shm_pol *p = srl__shm_pol_get(s, true);
        if (p == NULL) {
            srl__shm_unlock(s, b);
            return SRL_ECORRUPT;
        }
        uint64_t now = srl__now(lim);
        for (unsigned i = 0; i < SRL__SHM_SLOTS; i++) {
            if (bk->tags[i] == 0)
                continue;
            /* Frozen from here to the end: current, reclaimed, judged. */
            const struct srl__compound *c = srl__shm_slot_current(s, p, b, i, now);
            unsigned char st[s->state_bytes] __attribute__((aligned(16)));
            srl__shm_state_load(s, b, i, st);   /* read once (shm.h) */
            if (lim->cmp.conc >= 0) {
                /* Dead holders' and max_hold-expired units first (undo
                 * record: a crash mid-reclaim restores the whole state). */
                srl__shm_undo_begin(s, b, i);
                uint32_t freed = srl__conc_reclaim(&lim->cmp.limits.limit[lim->cmp.conc],
                                                   srl__compound_conc_state(&lim->cmp, st), now,
                                                   srl__proc_alive, NULL);
                if (freed > 0)
                    srl__shm_state_store(s, b, i, st);
                srl__shm_undo_end(s, b);
                if (freed > 0) {
                    __atomic_add_fetch(&srl__shm_live(s)->reclaimed, freed, __ATOMIC_RELAXED);
                    srl__shm_gen_bump(s, b);
                }
            }
            if (!srl__shm_slot_kept(s, b, i, now) && srl__compound_at_rest(c, st, now)) {
                srl__shm_tag_store(bk, i, 0);
                SRL__SHM_COUNT(bk->evicted, 1);
                srl__shm_gen_bump(s, b);
                n++;
            }
            srl__shm_slot_thaw(s, b, i);
        }
        srl__shm_unlock(s, b);
    }
    return n;
}

int64_t srl__shm_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx)
{
    struct srl__shm *s = lim->impl;
    int64_t n = 0;
    unsigned char shown[SRL_KEY_DISPLAY_MAX];
    unsigned char state[s->state_bytes] __attribute__((aligned(16)));
    for (uint64_t b = 0; b < s->buckets; b++) {
        struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
        bool any = false;
        for (unsigned i = 0; i < SRL__SHM_SLOTS && !any; i++)
            any = __atomic_load_n(&bk->tags[i], __ATOMIC_RELAXED) != 0;
        if (!any)
            continue;
        struct timespec deadline = SRL__SHM_NO_DEADLINE;
        int rc = srl__shm_lock(s, b, &deadline);
        if (rc != 0)
            return rc;
        const struct srl__shm_pol *p = srl__shm_pol_get(s, true);
        if (p == NULL) {
            srl__shm_unlock(s, b);
            return SRL_ECORRUPT;
        }
        uint64_t now = srl__now(lim);
        int stop = 0;
        for (unsigned i = 0; i < SRL__SHM_SLOTS && !stop; i++) {
            if (bk->tags[i] == 0)
                continue;
            const struct srl__compound *c = srl__shm_slot_current(s, p, b, i, now);
            /* Read once (shm.h): the tier is the one slot_current judged,
             * the state a private snapshot, the length one load. */
            srl__shm_state_load(s, b, i, state);
            srl_entry e;
            memset(&e, 0, sizeof e);
            /* A key decided by its own limits (layout 9) shows tier 0:
             * SRL_KEY_OWN_LIMITS below says whose limits decide it. */
            e.tier = c >= p->cmp && c < p->cmp + p->tier_count ? (uint32_t)(c - p->cmp) : 0;
            /* Without a display copy the length is not stored: key_len 0
             * means "unknown" (a stored key is never empty). */
            if (s->key_display > 0) {
                e.key_len = SRL__SHM_ONCE(*srl__shm_slot_key_len(s, b, i));
                e.display_len = e.key_len < s->key_display ? e.key_len : s->key_display;
                memcpy(shown, srl__shm_slot_display(s, b, i), e.display_len);
            }
            e.display = shown;
            memcpy(e.fingerprint, srl__shm_slot(s, b, i), SRL__SHM_FP_BYTES);
            e.allowed = __atomic_load_n(srl__shm_slot_allowed(s, b, i), __ATOMIC_RELAXED);
            e.denied = __atomic_load_n(srl__shm_slot_denied(s, b, i), __ATOMIC_RELAXED);
            e.last_ns = srl__compound_last_ns(c, state);
            srl__compound_decide(c, state, now, 1, 0, &e.now);
            e.at_rest = srl__compound_at_rest(c, state, now);
            e.inflight = srl__compound_inflight(c, state);
            e.state = state;   /* the snapshot: valid while fn runs */
            {   /* layout 9: each word once; a past ban shows as none */
                unsigned f = srl__shm_slot_tierword(s, b, i);
                uint64_t until = SRL__SHM_ONCE(*srl__shm_slot_ban_until(s, b, i));
                if (f & SRL__SLOT_F_EXEMPT)
                    e.control |= SRL_KEY_EXEMPT;
                if ((f & SRL__SLOT_F_BANNED) && until > now) {
                    /* What a request would get now: the ban's denial. */
                    e.control |= SRL_KEY_BANNED;
                    e.ban_left_ns = until - now;
                    srl__decision_banned(&e.now, e.ban_left_ns);
                }
                if (f & SRL__SLOT_F_OWN)
                    e.control |= SRL_KEY_OWN_LIMITS;
                if (srl__compound_banned_ns(c, state, now) != 0)
                    e.control |= SRL_KEY_PENALTY;   /* its time left: e.now's retry_after */
            }
            n++;
            stop = fn(&e, ctx);
            srl__shm_slot_thaw(s, b, i);
        }
        srl__shm_unlock(s, b);
        if (stop)
            break;
    }
    return n;
}

int srl__shm_tier_get(srl_limiter *lim, uint32_t t, srl_tier *out)
{
    const struct srl__shm_pol *p = srl__shm_pol_get(lim->impl, false);
    if (p == NULL)
        return SRL_ECORRUPT;
    if (t >= p->tier_count)
        return SRL_EINVAL;
    *out = p->def[t];
    return 0;
}

int srl__shm_table_init(struct srl__shm *s)
{
    for (uint64_t b = 0; b < s->buckets; b++) {
        int rc = srl__shm_mutex_init(&srl__shm_bucket(s, b)->mu);
        if (rc != 0)
            return rc;
    }
    return 0;
}
