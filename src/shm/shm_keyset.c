/*
 * shm_keyset.c - per-key limits on a segment (layout 9, issue 41 item 5):
 * srl_key_set_limits / srl_key_clear_limits / srl_key_get_limits (stored:
 * the slot's OWN flag) and srl_acquire_limits (per call: the CALL flag).
 *
 * A key decided by its own limits names an entry of the key-limits table
 * (shm_keylim.c) in its tier word's low byte.  Setting, clearing or
 * changing them converts the key's state as a tier change does
 * (srl__tier_convert, tiers.c): its use is kept.  The decisions themselves
 * are shm_table.c's (decide_slot reads the flag; srl__shm_decide_own
 * carries a call's limits); the slot rules (shm_slot.c) judge the entry a
 * slot names before it is used.
 *
 * Locks: one bucket lock at a time (srl__shm_locate_or_insert), the slot
 * frozen and under the undo record while its state and tier word change,
 * then the bucket's gen bumped (a flood cache's copy and a lock-free CAS
 * of the bucket are void).
 */
#include "shm.h"
#include "errdetail.h"

#include <string.h>

/* Convert slot b/i (locked, frozen by srl__shm_slot_current) from `from`
 * into `to` and write its tier word (tier, flags); thaws the slot. */
static void convert_slot(struct srl__shm *s, uint64_t b, unsigned i,
                         const struct srl__compound *from, const struct srl__compound *to,
                         unsigned tier, unsigned flags, uint64_t now)
{
    srl__shm_undo_begin(s, b, i);
    if (memcmp(&from->limits, &to->limits, sizeof to->limits) != 0) {
        unsigned char old[s->state_bytes] __attribute__((aligned(16)));
        unsigned char cur[s->state_bytes] __attribute__((aligned(16)));
        srl__shm_state_load(s, b, i, old);
        srl__tier_convert(from, old, to, cur, now);
        srl__shm_state_store(s, b, i, cur);
    }
    srl__shm_slot_tier_set(s, b, i, tier, flags);
    srl__shm_undo_end(s, b);
    srl__shm_slot_thaw(s, b, i);
    srl__shm_gen_bump(s, b);
}

int srl__shm_key_limits(srl_limiter *lim, const void *key, size_t len, const srl_limits *l,
                        srl_limits *get)
{
    struct srl__shm *s = lim->impl;
    int idx = 0;
    if (l != NULL) {
        if (lim->cmp.conc >= 0) {
            srl__err_set("this segment's policy holds a concurrency limit: its keys cannot have "
                         "limits of their own");
            return SRL_ENOTSUP;
        }
        idx = srl__shm_keylim_find(s, l);
        if (idx < 0)
            return idx;
    }
    uint64_t b;
    int i;
    int rc = srl__shm_locate_or_insert(s, key, len, l != NULL, &b, &i);
    if (rc != 0)
        return rc;
    unsigned u = (unsigned)i;
    const struct srl__shm_pol *p = srl__shm_pol_get(s, true);
    if (p == NULL) {
        srl__shm_unlock(s, b);
        return SRL_ECORRUPT;
    }
    uint64_t now = srl__now(lim);
    const struct srl__compound *from = srl__shm_slot_current(s, p, b, u, now);
    unsigned w = srl__shm_slot_tierword(s, b, u);   /* read once (shm.h) */
    unsigned keep = w & ~(SRL__SLOT_TIER_MASK | SRL__SLOT_F_LIMITS);
    if (get != NULL || (l == NULL && !(w & SRL__SLOT_F_OWN))) {
        bool own = (w & SRL__SLOT_F_OWN) != 0;
        if (get != NULL && own)
            memcpy(get, &from->limits, sizeof *get);
        srl__shm_slot_thaw(s, b, u);
        srl__shm_unlock(s, b);
        if (get != NULL && !own) {
            srl__err_set("the key has no limits of its own (its tier's decide it)");
            return SRL_ENOENT;
        }
        return 0;
    }
    if (l == NULL)   /* cleared: back to the default tier, its use kept */
        convert_slot(s, b, u, from, &p->cmp[0], 0, keep, now);
    else
        convert_slot(s, b, u, from, srl__shm_keylim_cmp(s, (unsigned)idx), (unsigned)idx,
                     keep | SRL__SLOT_F_OWN, now);
    srl__shm_unlock(s, b);
    return 0;
}

int srl__shm_acquire_limits(srl_limiter *lim, const void *key, size_t len, const srl_limits *l,
                            uint32_t cost, srl_decision *d)
{
    struct srl__shm *s = lim->impl;
    if (lim->cmp.conc >= 0) {
        srl__err_set("this segment's policy holds a concurrency limit: srl_enter decides it");
        return SRL_ENOTSUP;
    }
    int idx = srl__shm_keylim_find(s, l);
    if (idx < 0)
        return idx;
    const struct srl__compound *c = srl__shm_keylim_cmp(s, (unsigned)idx);
    if (cost > c->min_permits)
        return srl__cost_refused(c, cost);
    return srl__shm_decide_own(lim, key, len, c, (unsigned)idx, cost, d);
}
