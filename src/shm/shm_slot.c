/*
 * shm_slot.c - the rules of one slot of the shared table (shm.h has the
 * slot layout, the structs and the map of the shm_* files).
 *
 * WHAT IT HOLDS
 *   - srl__shm_find_locked: the slot of a key in a locked bucket, by tag
 *     and whole fingerprint.
 *   - srl__shm_slot_current: every use of an occupied slot's state starts
 *     there; it freezes the slot, converts a state of the previous policy
 *     generation (the tier conversion rule, tiers.c) and resets a slot
 *     whose meta word, generation or seq is damage (slot_fresh).
 *   - Repair's check and reset of a slot (srl__shm_slot_valid,
 *     srl__shm_slot_reset), and whether key_len is sound
 *     (srl__shm_slot_len_ok): srl__shm_repair_bucket (shm_table.c) and
 *     srl_check (shm_check.c) judge slots by them.
 *   A slot's one-line accessors (counters, key_len, display copy, tier,
 *   gen, seq) and its freeze and thaw are static inline in shm.h, as are the
 *   fingerprint's candidate buckets and tag: the decision path
 *   (shm_table.c) uses them on every request, and a call into this file
 *   would add a call there.  Repair itself stays in shm_table.c: taking a
 *   lock repairs and repair takes locks (a cut short move's trylock), so the
 *   two share a file.  Counting a decision (count, srl__shm_count_denied)
 *   stays with the decision path too.
 *
 * INVARIANTS (all of the table's are listed at the top of shm_table.c)
 *   - A slot's generation (its meta word, layout 6) is the current policy
 *     generation or the one before; a state of the one before is converted
 *     on its next touch (srl__shm_slot_current), under the lock and the
 *     undo record, before anything reads it, with the generation word
 *     written last.
 *   - Nothing indexes the private policy with a word of the segment
 *     unchecked: a tier beyond the table, a generation neither current nor
 *     previous, a seq found odd under the lock is damage, reset to a fresh
 *     tier-0 state and counted (reset_slots), as repair would.  Each word is
 *     read once (the rule at the top of shm.h): a writer may store into the
 *     segment between two reads even under the lock, so the checked local
 *     is what indexes, and a state is judged and converted on a private
 *     snapshot.
 *   - seq (layout 7, shm.h): a writer freezes the slot (seq odd, then a
 *     full fence where lock-free deciders may exist) before it reads what
 *     it will write from, and thaws it (even, one past, release) last;
 *     srl__shm_slot_current leaves the slot frozen, and its caller thaws it
 *     before the lock is released.
 *
 * LOCKS
 *   Every function here runs with the slot's bucket lock held (taken by the
 *   caller, srl__shm_lock in shm_table.c; repair's callers hold it from
 *   EOWNERDEAD on).  None takes, waits for or releases a lock, and none
 *   reads the clock: `now` is the caller's, read after the lock was taken.
 *
 * MAY TOUCH
 *   One slot of a locked bucket: its meta word and state (the state of a
 *   live key only inside the undo record, srl__shm_undo_begin/end of
 *   shm_lock.c), its tag (srl__shm_slot_reset frees a slot whose identity
 *   is damaged); the bucket's reset_slots and gen.  Calls nothing of
 *   shm_table.c or shm_walk.c: they call it (tools/dev/callgraph-cycles
 *   refuses a loop between files).
 */
#include "shm.h"

#include <string.h>

/* key_len is in range, or is not stored at all (key_display 0). */
bool srl__shm_slot_len_ok(const struct srl__shm *s, uint64_t b, unsigned i)
{
    if (s->key_display == 0)
        return true;
    uint16_t len = SRL__SHM_ONCE(*srl__shm_slot_key_len(s, b, i));
    return len >= 1 && len <= SRL_KEY_MAX;
}

int srl__shm_find_locked(const struct srl__shm *s, uint64_t b, const struct srl__shm_key *k)
{
    /* 8 tags per comparison; each flagged slot is verified on its tag byte
     * (the SWAR mask may flag a neighbour of a match) and its whole fp. */
    const struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    for (unsigned w = 0; w < SRL__SHM_SLOTS / 8; w++) {
        uint64_t m = srl__shm_tag_match(srl__shm_tag_word(bk, w), k->tag);
        for (; m != 0; m &= m - 1) {
            unsigned i = w * 8 + srl__shm_tag_byte(m);
            if (bk->tags[i] == k->tag && memcmp(srl__shm_slot(s, b, i), k->fp, SRL__SHM_FP_BYTES) == 0)
                return (int)i;
        }
    }
    return -1;
}

/* A fresh tier-0 state of generation p, for a slot whose meta word or
 * generation is damage (lock held, slot frozen: seq is left as it is). */
static void slot_fresh(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b, unsigned i,
                       uint64_t now)
{
    unsigned char *slot = srl__shm_slot(s, b, i);
    /* The operator's exemption and ban survive (they are no state of the
     * policy); own limits do not: tier 0 is what the slot is now. */
    unsigned w = srl__shm_slot_tierword(s, b, i);   /* read once (shm.h) */
    unsigned flags = srl__shm_tier_of(w) == SRL_TIERS_MAX
                         ? 0u   /* the word itself is the damage: no flag of it is kept */
                         : w & (SRL__SLOT_F_EXEMPT | SRL__SLOT_F_BANNED);
    srl__shm_slot_tier_set(s, b, i, 0, flags);
    memcpy(slot + SRL__SLOT_GEN, &p->gen, sizeof p->gen);
    srl__compound_state_init(&p->cmp[0], srl__shm_slot_state(s, b, i), now);
}

/* The compound of a slot decided by its own limits (tier word w, read
 * once, flags OWN or CALL): the key-limits entry its low byte names, or
 * NULL when that is damage (both flags, a bad entry). */
static const struct srl__compound *own_cmp(struct srl__shm *s, unsigned w)
{
    if ((w & SRL__SLOT_F_LIMITS) == SRL__SLOT_F_LIMITS)
        return NULL;
    return srl__shm_keylim_cmp(s, w & SRL__SLOT_TIER_MASK);
}

/* Every use of an occupied slot's state starts here (lock held).  A state
 * of the previous generation is converted to the current one by the tier
 * conversion rule (tiers.c), limit by limit within its own tier, from the
 * undo copy, with the generation word written last: a worker killed before
 * that leaves the old state (the undo record restores it) on the old
 * generation.  Damage (a generation neither current nor previous, a tier
 * beyond the table, a stray flag) resets the slot to a fresh tier-0 state
 * and is counted, as repair would, so no index from the segment is ever
 * used unchecked. */
const struct srl__compound *srl__shm_slot_current(struct srl__shm *s, const struct srl__shm_pol *p,
                                                  uint64_t b, unsigned i, uint64_t now)
{
    if (srl__shm_slot_freeze(s, b, i)) {
        /* Odd under the lock: no writer is mid-write (a dead one was
         * repaired when the lock was taken), so the bytes are damage. */
        slot_fresh(s, p, b, i, now);
        SRL__SHM_COUNT(srl__shm_bucket(s, b)->reset_slots, 1);
        srl__shm_gen_bump(s, b);
    }
    /* Read once (shm.h): the tier and the generation are loaded into
     * locals, judged there, and only the locals index the views. */
    uint32_t g = srl__shm_slot_gen(s, b, i);
    unsigned w = srl__shm_slot_tierword(s, b, i);
    unsigned t = srl__shm_tier_of(w);
    if ((w & SRL__SLOT_F_LIMITS) && t != SRL_TIERS_MAX) {
        const struct srl__compound *own = own_cmp(s, w);
        if (own != NULL && (g == p->gen || g == p->gen - 1u)) {
            /* Its own limits are no generation's: a change converts
             * nothing, only the generation word follows. */
            if (g != p->gen)
                memcpy(srl__shm_slot(s, b, i) + SRL__SLOT_GEN, &p->gen, sizeof p->gen);
            return own;
        }
        slot_fresh(s, p, b, i, now);   /* a bad entry, both flags, a bad generation */
        SRL__SHM_COUNT(srl__shm_bucket(s, b)->reset_slots, 1);
        srl__shm_gen_bump(s, b);
        return &p->cmp[0];
    }
    if (g != p->gen) {
        const struct srl__shm_pol *from = g == p->gen - 1u ? p->prev : NULL;
        if (from != NULL && t < from->tier_count && t < p->tier_count) {
            srl__shm_undo_begin(s, b, i);
            /* From a private snapshot into a private state, stored back
             * whole (the read-once rule, shm.h): the conversion sees one
             * state whatever the mapping does meanwhile. */
            unsigned char old[s->state_bytes] __attribute__((aligned(16)));
            unsigned char cur[s->state_bytes] __attribute__((aligned(16)));
            srl__shm_state_load(s, b, i, old);
            memcpy(cur, old, s->state_bytes);
            srl__tier_convert(&from->cmp[t], old, &p->cmp[t], cur, now);
            srl__shm_state_store(s, b, i, cur);
            memcpy(srl__shm_slot(s, b, i) + SRL__SLOT_GEN, &p->gen, sizeof p->gen);
            srl__shm_undo_end(s, b);
        } else {
            slot_fresh(s, p, b, i, now);
            t = 0;
            SRL__SHM_COUNT(srl__shm_bucket(s, b)->reset_slots, 1);
        }
    }
    if (t >= p->tier_count) {
        slot_fresh(s, p, b, i, now);
        t = 0;
        SRL__SHM_COUNT(srl__shm_bucket(s, b)->reset_slots, 1);
        srl__shm_gen_bump(s, b);
    }
    return &p->cmp[t];
}

/* Repair's check of a slot: identity, and (when the policy could be read,
 * p != NULL) its generation, meta word and state under that generation. */
bool srl__shm_slot_valid(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b,
                         unsigned i, uint64_t now)
{
    const uint8_t *fp = srl__shm_slot(s, b, i);
    uint64_t c1, c2;
    srl__shm_fp_buckets(s, fp, &c1, &c2);
    if (SRL__SHM_ONCE(srl__shm_bucket(s, b)->tags[i]) != srl__shm_fp_tag(fp) ||
        (b != c1 && b != c2) || !srl__shm_slot_len_ok(s, b, i))
        return false;
    if (p == NULL)
        return true;   /* no valid policy: every decision says SRL_ECORRUPT anyway */
    uint32_t g = srl__shm_slot_gen(s, b, i);     /* each read once (shm.h) */
    unsigned w = srl__shm_slot_tierword(s, b, i);
    unsigned t = srl__shm_tier_of(w);
    const struct srl__shm_pol *of = g == p->gen ? p : g == p->gen - 1u ? p->prev : NULL;
    const struct srl__compound *c;
    if ((w & SRL__SLOT_F_LIMITS) && t != SRL_TIERS_MAX)
        c = g == p->gen || g == p->gen - 1u ? own_cmp(s, w) : NULL;
    else
        c = of != NULL && t < of->tier_count ? &of->cmp[t] : NULL;
    if (c == NULL)
        return false;
    unsigned char state[s->state_bytes] __attribute__((aligned(16)));
    srl__shm_state_load(s, b, i, state);
    return srl__compound_valid(c, state, now);
}

/* Repair's reset: p is the current view, or NULL (then identity only). */
void srl__shm_slot_reset(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b, unsigned i,
                         uint64_t now)
{
    const uint8_t *fp = srl__shm_slot(s, b, i);
    uint64_t c1, c2;
    srl__shm_fp_buckets(s, fp, &c1, &c2);
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    if (bk->tags[i] != srl__shm_fp_tag(fp) || (b != c1 && b != c2) || !srl__shm_slot_len_ok(s, b, i)) {
        /* The identity itself is damaged: the slot is freed, which is the
         * same as a fresh state for whichever key comes next. */
        srl__shm_tag_store(bk, i, 0);
        return;
    }
    /* A reset state is tier 0's of the current generation, whatever the
     * meta word said (seq was made even by repair before). */
    if (p != NULL)
        slot_fresh(s, p, b, i, now);
}
