/*
 * shm_lockfree.c - the lock-free found-key path of GCRA in the shared and
 * anonymous stores (issue 17, item 2; layout 7).  docs/design.md,
 * "Lock-free GCRA (layout 7)", has the argument; the rules in short:
 *
 * WHAT TAKES IT
 *   A handle opened with SRL_CONFIG_LOCKFREE, on a segment whose slots are
 *   16-aligned (srl__shm_geometry: the creation policy has a GCRA limit in
 *   some tier), on a CPU with a 16-byte CAS (x86-64 cmpxchg16b; elsewhere
 *   the path is off).  Per request: a plain srl_acquire / srl_acquire_tier
 *   (no lease, no wait, no apply), not a dry-run handle, of a key found in
 *   one of its buckets whose tier's compound is one GCRA limit with no ban
 *   period (srl__shm_lf_tier, kept per tier in the view's lf_tiers when
 *   the view is built, not asked per request), whose slot's meta word
 *   names that tier and the generation of the handle's newest policy
 *   view, which is the segment's policy_gen.  Both home windows are tried
 *   before the tag words are scanned (shm.h, "Home slots").
 *   Everything else (a miss, an insert, a tier change, a conversion, a
 *   stale view, an odd seq that stays odd, a CAS lost too often) returns 0
 *   and the caller takes the locked path, which decides it exactly as
 *   before.
 *
 * INVARIANTS
 *   - Slot bytes 16..32 are {meta = {tier, seq, gen}, TAT}.  A lock-free
 *     decider writes nothing but the TAT, and only by one 16-byte CAS whose
 *     expected meta is the one it read with seq even; the new meta is the
 *     same, so it never changes seq, tier or gen.
 *   - Every locked writer of a slot's fp, tag, tier, gen or state makes
 *     seq odd (then a full fence) before it reads what it will write from,
 *     and even, one past, after (release): srl__shm_slot_current
 *     (shm_slot.c), srl__shm_slot_freeze / thaw (shm.h).  seq only grows:
 *     an insert or a relocation into a slot keeps the slot's own seq.  So between a decider's read
 *     and its CAS no writer can have begun or ended on the slot without
 *     changing seq, and the CAS fails: a TAT can only land on the key and
 *     the state the decider read (the fp was read under the same even seq).
 *     The one hole is seq wrapping: 32768 complete locked writes of the
 *     slot while one decider sits between read and CAS, and then the TAT
 *     equal too.
 *   - A denial writes no state (GCRA): it is decided on a snapshot of
 *     {meta, fp, TAT} that read the same even meta before and after.
 *   - Counters: bucket allowed / denied and gen, per-key allowed / denied
 *     are atomic adds on both paths on a 16-aligned segment whose lf_open
 *     is set (SRL__SHM_SHARED_ADD, srl__shm_sat_add32, srl__shm_lf_live;
 *     plain adds elsewhere), so srl_stats stays exact.  lf_open (layout 8)
 *     is set by a creator with the flag before READY, or by a later opener
 *     with the flag, which then passes every bucket lock before its first
 *     lock-free decision (lf_pass, shm_table.c): a locked writer that read
 *     it unset under its bucket lock cannot overlap a lock-free decision of
 *     that bucket.  An admission bumps the bucket's gen after
 *     its CAS, as a locked admission does after its write: the flood cache
 *     (shm_flood.c) sees the state changed.
 *   - The clock is read before the snapshot: a decision is made with a now
 *     no later than the moment it commits, so a racing pair may commit in
 *     the opposite order of their clock reads; GCRA then computes the
 *     later commit with an older now, which can only deny, never admit
 *     beyond the limit.
 *
 * LOCKS
 *   None.  Never waits: an odd seq (a locked writer at work, or a dead one
 *   whose repair has not come yet) is re-read at most LF_TRIES times, then
 *   the locked path takes the bucket lock, whose robust-mutex recovery
 *   makes the seq even (repair in shm_table.c).
 *
 * CRASH
 *   A decider killed anywhere leaves either the old TAT or the new one
 *   (the CAS is atomic) and at most its own counter adds undone: nothing to
 *   repair.
 *
 * Per-key counters (srl_foreach) are added after the CAS, guarded by the
 * slot still holding the key (its meta word unchanged since the CAS, one
 * load; else its tag and fp, still_k); a decider preempted between its
 * CAS and that add while the key is relocated may lose its one count (the
 * copy was taken before), and one preempted between the check and the add
 * while the slot is also reused by another key may add it to that key.
 * srl_stats's bucket counters are exact regardless.  (No cheap fix: the
 * counters are outside the CAS's 16 bytes; design.md, "Counters".)
 */
#include "cas16.h"
#include "shm.h"

#include <sched.h>
#include <string.h>

#define LF_TRIES 4u

#define LF_CPU SRL__CAS16

bool srl__shm_lf_aligned(const struct srl__shm *s)
{
    return s->slot_bytes % 16u == 0 && s->slots_off % 16u == 0 && s->bucket_bytes % 16u == 0 &&
           SRL__SHM_HEADER_BYTES % 16u == 0 && SRL__SLOT_META % 16u == 0;
}

void srl__shm_lf_open(struct srl__shm *s, const srl_config *cfg)
{
    s->lockfree = false;
#if LF_CPU
    bool want = cfg != NULL && (cfg->flags & SRL_CONFIG_LOCKFREE);
#ifdef SRL_FORCE_LOCKFREE
    want = true;   /* a build that runs every suite with the path on */
#endif
    /* A dry-run handle decides under the lock (its answers are turned by
     * the facade, and the path below would count them as enforced): off,
     * so that srl_info.flags says so. */
    s->lockfree = want && !s->lim.dry_run && srl__shm_lf_aligned(s) && srl__cpu_has_cas16();
    /* Not BIRTH: the first lock-free decision passes every bucket lock
     * first (lf_pass, shm_table.c); never here, at open. */
    uint32_t at_birth = __atomic_load_n(&srl__shm_live(s)->lf_open, __ATOMIC_ACQUIRE);
    s->lf_pending = s->lockfree && at_birth != SRL__SHM_LF_BIRTH ? SRL__SHM_LF_PASS
                                                                 : SRL__SHM_LF_READY;
#else
    (void)cfg;
#endif
}

_Static_assert(SRL_TIERS_MAX <= 32, "srl__shm_pol.lf_tiers has a bit per tier");

bool srl__shm_lf_tier(const struct srl__compound *c)
{
    return c->count == 1 && c->algo[0] == &srl__algo_gcra && !c->penalty && c->conc < 0 &&
           c->off[0] == 0;
}

#if LF_CPU

static uint64_t load64(const unsigned char *p, int order)
{
    return __atomic_load_n((const uint64_t *)p, order);
}

/* The meta word as the CAS compares it: tier, seq, gen, little-endian in
 * one word (what a 64-bit load of bytes 16..24 gives). */
static uint16_t meta_seq(uint64_t m)
{
    uint16_t v;
    memcpy(&v, (const unsigned char *)&m + 2, sizeof v);
    return v;
}

static uint16_t meta_tier(uint64_t m)
{
    uint16_t v;
    memcpy(&v, &m, sizeof v);
    return v;
}

static uint32_t meta_gen(uint64_t m)
{
    uint32_t v;
    memcpy(&v, (const unsigned char *)&m + 4, sizeof v);
    return v;
}

static uint32_t *slot_ctr(const struct srl__shm *s, uint64_t b, unsigned i, unsigned which)
{
    return (uint32_t *)(srl__shm_slot(s, b, i) + s->counters_off + which);
}

/* The slot still holds k (its tag and fp): where its per-key counter goes.
 * Not seq: a locked decision of the key in between changes seq and the
 * count is still the key's. */
static bool still_here(const struct srl__shm *s, uint64_t b, unsigned i,
                       const struct srl__shm_key *k)
{
    const unsigned char *slot = srl__shm_slot(s, b, i);
    if (__atomic_load_n(&srl__shm_bucket(s, b)->tags[i], __ATOMIC_ACQUIRE) != k->tag)
        return false;
    uint64_t f0 = load64(slot + SRL__SLOT_FP, __ATOMIC_RELAXED);
    uint64_t f1 = load64(slot + SRL__SLOT_FP + 8, __ATOMIC_RELAXED);
    return memcmp(&f0, k->fp, 8) == 0 && memcmp(&f1, k->fp + 8, 8) == 0;
}

/* The slot still holds k, known cheaply: its meta word is still m, the one
 * the CAS or the snapshot compared (no locked writer has frozen the slot
 * since, so fp and tag are the ones read), or else by tag and fp. */
static bool still_k(const struct srl__shm *s, uint64_t b, unsigned i, const struct srl__shm_key *k,
                    uint64_t m)
{
    return load64(srl__shm_slot(s, b, i) + SRL__SLOT_META, __ATOMIC_ACQUIRE) == m ||
           still_here(s, b, i, k);
}

/* Outcomes of one try on one slot. */
enum { LF_DONE, LF_OTHER, LF_RETRY, LF_LOCKED };

static int lf_try(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b, unsigned i,
                  const struct srl__shm_key *k, uint32_t tier, uint32_t cost,
                  struct srl__shm_flood_io *io, srl_decision *d)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    unsigned char *slot = srl__shm_slot(s, b, i);
    unsigned char *meta = slot + SRL__SLOT_META;
    /* Clock, then the flood cache's gen, then the snapshot: the snapshot
     * is of a moment after both (header comment; shm_flood.c). */
    uint64_t now = srl__now(&s->lim);
    uint32_t gen0 = __atomic_load_n(&bk->gen, __ATOMIC_ACQUIRE);
    uint64_t m1 = load64(meta, __ATOMIC_ACQUIRE);
    if (meta_seq(m1) & 1u)
        return LF_RETRY;   /* a locked writer at work (or dead: the lock repairs) */
    uint8_t tag = __atomic_load_n(&bk->tags[i], __ATOMIC_RELAXED);
    uint64_t f0 = load64(slot + SRL__SLOT_FP, __ATOMIC_RELAXED);
    uint64_t f1 = load64(slot + SRL__SLOT_FP + 8, __ATOMIC_RELAXED);
    uint64_t tat = load64(slot + SRL__SLOT_STATE, __ATOMIC_RELAXED);
    SRL__SHM_FENCE(__ATOMIC_ACQUIRE);
    if (load64(meta, __ATOMIC_RELAXED) != m1)
        return LF_RETRY;
    if (tag != k->tag || memcmp(&f0, k->fp, 8) != 0 || memcmp(&f1, k->fp + 8, 8) != 0)
        return LF_OTHER;
    if (meta_tier(m1) != tier || meta_gen(m1) != p->gen)
        return LF_LOCKED;   /* a tier change or a conversion: the lock's */
    uint64_t st = tat;
    srl__compound_decide_one(&p->cmp[tier], &st, now, cost, 1, d);   /* lf_tiers: one GCRA */
    if (!d->allowed) {
        /* Nothing written: counted, and handed to the flood cache as the
         * locked path would (the state the snapshot read, gen before it). */
        SRL__SHM_SHARED_ADD(s, bk->denied, 1);
        if (still_k(s, b, i, k, m1))
            srl__shm_sat_add32(s, slot_ctr(s, b, i, SRL__CTR_DENIED), 1);
        if (io != NULL && d->retry_after_ns > 0) {
            io->recorded = 1;
            io->bucket = b;
            io->gen = gen0;
            io->now = now;
            io->pol = p;
            memset(io->state, 0, s->state_bytes);
            memcpy(io->state, &tat, sizeof tat);
        }
        return LF_DONE;
    }
    uint64_t exp_m = m1, exp_t = tat;
    if (!srl__cas16(meta, &exp_m, &exp_t, m1, st))
        return LF_RETRY;
    srl__shm_gen_bump(s, b);
    SRL__SHM_SHARED_ADD(s, bk->allowed, 1);
    if (still_k(s, b, i, k, m1))
        srl__shm_sat_add32(s, slot_ctr(s, b, i, SRL__CTR_ALLOWED), 1);
    return LF_DONE;
}

/* Slot i of bucket b, tried until it answers: 1 decided, 0 for the locked
 * path, -1 not k's slot. */
static int lf_slot(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b, unsigned i,
                   const struct srl__shm_key *k, uint32_t tier, uint32_t cost,
                   struct srl__shm_flood_io *io, srl_decision *d)
{
    for (unsigned t = 0;; t++) {
        int r = lf_try(s, p, b, i, k, tier, cost, io, d);
        if (r == LF_DONE)
            return 1;
        if (r == LF_LOCKED || t + 1 >= LF_TRIES)
            return 0;
        if (r == LF_OTHER)
            return -1;
        __builtin_ia32_pause();
    }
}
#endif

int srl__shm_lf_decide(struct srl__shm *s, const struct srl__shm_key *k, uint32_t tier,
                       uint32_t cost, struct srl__shm_flood_io *io, srl_decision *d)
{
#if LF_CPU
    const struct srl__shm_pol *p = __atomic_load_n(&s->pol, __ATOMIC_ACQUIRE);
    if (p == NULL || tier >= SRL_TIERS_MAX || !((p->lf_tiers >> tier) & 1u) ||
        cost > p->cmp[tier].min_permits ||
        __atomic_load_n(&srl__shm_live(s)->policy_gen, __ATOMIC_ACQUIRE) != p->gen)
        return 0;
    int nb = k->b1 == k->b2 ? 1 : 2;
    uint64_t cand[2] = {k->b1, k->b2};
    unsigned home[2] = {k->home1, k->home2};
    /* Both home windows first (shm.h): where an insert put the key when it
     * could, found by a byte compare per slot, no tag word scanned. */
    for (int c = 0; c < nb; c++) {
        const struct srl__shm_bucket *bk = srl__shm_bucket(s, cand[c]);
        for (unsigned i = home[c]; i < home[c] + SRL__SHM_HOME_SLOTS; i++)
            if (__atomic_load_n(&bk->tags[i], __ATOMIC_RELAXED) == k->tag) {
                int r = lf_slot(s, p, cand[c], i, k, tier, cost, io, d);
                if (r >= 0)
                    return r;
            }
    }
    /* Then every slot of both (a home slot again only on a tag collision). */
    for (int c = 0; c < nb; c++) {
        const struct srl__shm_bucket *bk = srl__shm_bucket(s, cand[c]);
        for (unsigned w = 0; w < SRL__SHM_SLOTS / 8; w++) {
            uint64_t m = srl__shm_tag_match(srl__shm_tag_word(bk, w), k->tag);
            for (; m != 0; m &= m - 1) {
                int r = lf_slot(s, p, cand[c], w * 8 + srl__shm_tag_byte(m), k, tier, cost, io, d);
                if (r >= 0)
                    return r;
            }
        }
    }
    return 0;
#else
    (void)s;
    (void)k;
    (void)tier;
    (void)cost;
    (void)io;
    (void)d;
    return 0;
#endif
}
