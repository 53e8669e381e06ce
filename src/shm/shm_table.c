/*
 * shm_table.c - the bucketed table: hashing, taking bucket locks (with
 * crash repair), lookup, the decisions (srl_acquire, srl_reserve,
 * srl_enter, srl_leave, srl_peek, srl_refund and srl__shm_apply), and the
 * insert, relocation and reclaim a decision on a new key may need.
 * The other files of the table (shm.h has the map):
 *   shm_slot.c   a slot's rules: lookup in a locked bucket, making a slot
 *                current (conversion on touch), repair's check and reset of
 *                a slot; a slot's one-line accessors, freeze and thaw, and a
 *                fingerprint's buckets and tag are static inline in shm.h,
 *                so the decision path below calls no other file for them
 *   shm_walk.c   the walks (srl_evict_idle, srl_foreach, table init) and the
 *                calls on one key that decide nothing (srl_key_state,
 *                srl_reset_key, srl_tier_get)
 *   shm_check.c  the invariant check (srl_check)
 * This file calls shm_slot.c; shm_walk.c calls both; neither is called back.
 *
 * Identity: fp = SipHash-2-4 with 128-bit output (crypto_shorthash_
 * siphashx24) of the key under the segment's random key.  The two candidate
 * buckets are fastrange(fp[0..8)) and fastrange(fp[8..16)) (a 128-bit
 * product, no modulo bias, any bucket count); if they coincide the second
 * is the next bucket.  The tag is fp[0] forced nonzero (fastrange uses the
 * high bits of each half, so the tag is nearly independent of the bucket).
 * Both rules are srl__shm_fp_buckets and srl__shm_fp_tag (shm.h).
 *
 * Invariants (srl__shm_check verifies them):
 *   - a slot is occupied iff its tag is nonzero, and then tag == fp's tag,
 *     its bucket is one of fp's candidates, 1 <= key_len <= SRL_KEY_MAX (when
 *     key_display > 0; otherwise no key_len is stored) and its state is valid;
 *   - a key occupies at most one slot of the table;
 *   - undo_slot is 0 whenever the bucket's lock is free;
 *   - a slot's generation (its meta word, layout 6) is the current policy
 *     generation or the one before; a state of the one before is converted
 *     on its next touch (srl__shm_slot_current), under the lock and the undo
 *     record, before anything reads it.
 *
 * Locking (see shm.h): a key's decision is made under the lock of the
 * bucket that holds it, with the time read after the lock was taken.  The
 * fast path reads tags without a lock (relaxed/acquire loads, a hint) and
 * verifies the whole fp under the lock.  A miss takes both candidate locks
 * in index order (lower first), searches both and inserts: two first
 * requests for one key therefore always meet under the same pair of locks
 * and create one state.  Relocation takes a third bucket with trylock only.
 * An insert writes the slot's contents first and its tag last (release), so
 * a lock-free tag reader never sees a tag before the fp it stands for.
 * A lock-free handle (shm_lockfree.c) on a segment not created with the
 * flag passes every bucket's lock once, at its first lock-free decision
 * (lf_pass, layout 8), holding no other lock.
 */
#include "shm.h"
#include "prefetch.h"
#include "proc.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ hashing */

void srl__shm_key_of_fp(const struct srl__shm *s, struct srl__shm_key *k)
{
    srl__shm_fp_buckets(s, k->fp, &k->b1, &k->b2);
    k->tag = srl__shm_fp_tag(k->fp);
    k->home1 = (uint8_t)srl__shm_home_of(k->fp[1]);
    k->home2 = (uint8_t)srl__shm_home_of(k->fp[9]);
}

unsigned srl__shm_fp_home(const struct srl__shm *s, const uint8_t fp[SRL__SHM_FP_BYTES], uint64_t b)
{
    uint64_t c1, c2;
    srl__shm_fp_buckets(s, fp, &c1, &c2);
    return srl__shm_home_of(b == c1 ? fp[1] : fp[9]);
}

/* Prefetch every line of a home window (2 or 3 lines for two 56-byte
 * token-bucket slots; buckets are 64-byte aligned, so lines are too). */
static void prefetch_home(const struct srl__shm *s, uint64_t b, unsigned home)
{
    const unsigned char *bk = (const unsigned char *)srl__shm_bucket(s, b);
    size_t first = s->slots_off + (size_t)home * s->slot_bytes;
    size_t last = first + (size_t)s->slot_bytes * SRL__SHM_HOME_SLOTS - 1;
    for (size_t line = first & ~(size_t)63; line <= last; line += 64)
        srl__prefetch_w(bk + line);
}

void srl__shm_hash_only(const struct srl__shm *s, const void *key, size_t len,
                        struct srl__shm_key *k)
{
    crypto_shorthash_siphashx24(k->fp, key, len, s->hash_key);
    srl__shm_key_of_fp(s, k);
}

void srl__shm_prefetch(const struct srl__shm *s, const struct srl__shm_key *k)
{
    /* Start every miss a hit needs at once, before anything reads the
     * table: both heads (mutex and tags; the key is in b2 for about half
     * the keys, found after b1's tags missed) and both home windows (the
     * slot itself for most keys, known without reading any tag).  Each
     * then overlaps the others instead of following them.  A prefetch
     * never faults. */
    const unsigned char *h1 = (const unsigned char *)srl__shm_bucket(s, k->b1);
    const unsigned char *h2 = (const unsigned char *)srl__shm_bucket(s, k->b2);
    srl__prefetch_w(h1);
    srl__prefetch_w(h2);
    srl__prefetch_w(h1 + 64);   /* counters and undo copy: written by every hit */
    srl__prefetch_w(h2 + 64);
    prefetch_home(s, k->b1, k->home1);
    prefetch_home(s, k->b2, k->home2);
}

void srl__shm_hash(const struct srl__shm *s, const void *key, size_t len, struct srl__shm_key *k)
{
    srl__shm_hash_only(s, key, len, k);
    srl__shm_prefetch(s, k);
}

/* ------------------------------------------------ a slot at rest, counting */

/* The slot rules are in shm_slot.c.  These stay with the decision path
 * they serve: slot_at_rest is reclaim's (a call into another file would
 * cost one per slot it scans), count runs on every decision (static here,
 * the compiler may specialise it for its callers), and
 * srl__shm_count_denied is count's twin for the flood cache's denials. */

/* Whether slot i is at rest, judged frozen: a lock-free admission cannot
 * land between this answer and the caller's eviction.  The caller thaws
 * the slot (after clearing its tag, or not). */
static bool slot_at_rest(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b, unsigned i,
                         uint64_t now)
{
    const struct srl__compound *c = srl__shm_slot_current(s, p, b, i, now);
    if (srl__shm_slot_kept(s, b, i, now))
        return false;   /* exempt, banned by hand, own limits: never reclaimed */
    unsigned char st[s->state_bytes] __attribute__((aligned(16)));   /* read once (shm.h) */
    srl__shm_state_load(s, b, i, st);
    return srl__compound_at_rest(c, st, now);
}


/* Count one decision on bucket b, slot i (lock held). */
static void count(struct srl__shm *s, uint64_t b, unsigned i, const srl_decision *d)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    if (d->allowed) {
        SRL__SHM_SHARED_ADD(s, bk->allowed, 1);
        srl__shm_sat_add32(s, srl__shm_slot_allowed(s, b, i), 1);
    } else {
        SRL__SHM_SHARED_ADD(s, bk->denied, 1);
        if (s->lim.dry_run)
            SRL__SHM_COUNT(bk->would_deny, 1);   /* the facade turns it (limiter.c) */
        srl__shm_sat_add32(s, srl__shm_slot_denied(s, b, i), 1);
    }
}

void srl__shm_count_denied(struct srl__shm *s, uint64_t b, const uint8_t fp[SRL__SHM_FP_BYTES],
                           uint32_t n)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    SRL__SHM_SHARED_ADD(s, bk->denied, n);
    if (s->lim.dry_run)
        SRL__SHM_COUNT(bk->would_deny, n);
    struct srl__shm_key k;
    memcpy(k.fp, fp, SRL__SHM_FP_BYTES);
    k.tag = srl__shm_fp_tag(fp);
    int i = srl__shm_find_locked(s, b, &k);
    if (i >= 0)   /* else evicted or moved meanwhile: the per-key part is dropped */
        srl__shm_sat_add32(s, srl__shm_slot_denied(s, b, (unsigned)i), n);
}

/* One request: an admission of `cost` (srl_acquire; srl_reserve when
 * max_wait > 0), or one unit for the caller (srl_enter: lease != NULL,
 * filled on admission). */
struct shm_req {
    uint32_t cost;
    srl_lease *lease;
    srl__shm_apply_fn apply;        /* srl__shm_apply: fn instead of a decision */
    void *ctx;
    uint64_t max_wait;              /* srl__shm_reserve: the most it may wait */
    uint32_t tier;                  /* srl_acquire_tier's (0 for every other call) */
    const struct srl__compound *own; /* srl_acquire_limits's limits (shm_keyset.c), or NULL */
    unsigned own_idx;               /* ... and their key-limits entry */
};

/* Count rq's outcome: a decision always; an apply only when it says so
 * (d->allowed = 0: it answered the key as a denial). */
static void count_req(struct srl__shm *s, uint64_t b, unsigned i, const struct shm_req *rq,
                      const srl_decision *d)
{
    if (rq->apply == NULL || !d->allowed)
        count(s, b, i, d);
}

/* Decide rq on state, the private snapshot of b/i's state (bucket b
 * locked, undo record open), at now; the caller stores it back. */
static void decide_state(struct srl__shm *s, uint64_t b, unsigned i, const struct srl__compound *c,
                         void *state, uint64_t now, const struct shm_req *rq, srl_decision *d)
{
    if (rq->apply != NULL) {
        d->allowed = !rq->apply(state, now, rq->ctx);
        return;
    }
    if (rq->lease == NULL) {
        if (rq->max_wait == 0)
            srl__compound_decide(c, state, now, rq->cost, 1, d);
        else
            srl__compound_reserve(c, state, now, rq->cost, rq->max_wait, d);
        return;
    }
    struct srl__proc me;
    srl__proc_self(&me);
    uint32_t entry, gen, freed;
    srl__compound_enter(&s->lim.cmp, state, now, &me, srl__proc_alive, NULL, d, &entry, &gen,
                        &freed);
    if (freed > 0)
        __atomic_add_fetch(&srl__shm_live(s)->reclaimed, freed, __ATOMIC_RELAXED);
    if (gen != 0) {
        rq->lease->owner = s->lim.lease_owner;
        memcpy(rq->lease->where, srl__shm_slot(s, b, i) + SRL__SLOT_FP, SRL__SHM_FP_BYTES);
        rq->lease->entry = entry;
        rq->lease->gen = gen;
    }
}

/* rq against the policy of generation p (a bucket lock held, so p is what
 * the segment names now): the permits the facade could not check, since
 * the policy may have changed since open.  0, SRL_ECOST or SRL_ENOTSUP. */
static int req_fits(const struct srl__shm_pol *p, const struct shm_req *rq)
{
    if (rq->apply != NULL || rq->lease != NULL)
        return 0;
    const struct srl__compound *c = rq->own != NULL ? rq->own : &p->cmp[rq->tier];
    if (rq->cost > c->min_permits)
        return srl__cost_refused(c, rq->cost);
    return rq->max_wait > 0 && !c->reserve ? SRL_ENOTSUP : 0;
}

/* The current view under a bucket lock, and rq checked against it. */
static int req_pol(struct srl__shm *s, const struct shm_req *rq, const struct srl__shm_pol **p)
{
    *p = srl__shm_pol_get(s, true);
    return *p == NULL ? SRL_ECORRUPT : req_fits(*p, rq);
}

/* What a locked decision decided with: its time and the policy view. */
struct decided {
    uint64_t now;
    const struct srl__shm_pol *pol;
};

/* Layout 9: a plain decision (no lease, no apply) of an exempt or banned
 * key (flags: the tier word, read once by the caller), slot frozen.
 * Returns true when it decided: banned until after now (denied, the ban's
 * time left), else exempt (admitted, counted in exempt).  Neither writes
 * the key's state: d's other numbers are its policy's, peeked.  A ban
 * found over is cleared here (the flag; the record stays for the reader). */
static bool control_decide(struct srl__shm *s, uint64_t b, unsigned i, unsigned flags,
                           const struct srl__compound *c, uint64_t now, const struct shm_req *rq,
                           srl_decision *d)
{
    unsigned char st[s->state_bytes] __attribute__((aligned(16)));   /* read once (shm.h) */
    if (flags & SRL__SLOT_F_BANNED) {
        uint64_t until = SRL__SHM_ONCE(*srl__shm_slot_ban_until(s, b, i));
        if (until > now) {
            srl__shm_state_load(s, b, i, st);
            srl__compound_decide(c, st, now, rq->cost, 0, d);
            srl__decision_banned(d, until - now);
            d->wait_ns = 0;
            return true;
        }
        flags &= ~SRL__SLOT_F_BANNED;
        srl__shm_slot_tier_set(s, b, i, flags, flags);
        srl__shm_gen_bump(s, b);
    }
    if (!(flags & SRL__SLOT_F_EXEMPT))
        return false;
    srl__shm_state_load(s, b, i, st);
    srl__compound_decide(c, st, now, rq->cost, 0, d);
    d->allowed = 1;
    d->retry_after_ns = 0;
    d->wait_ns = 0;
    __atomic_add_fetch(&srl__shm_live(s)->exempt, 1, __ATOMIC_RELAXED);
    return true;
}

/* Decide for the existing key in b/i, in place, under the undo record
 * (bucket b locked); *out (may be NULL) gets the time and view it used.
 * 0, or an error of req_pol (nothing decided).  The bucket's gen is bumped
 * whenever the slot may now decide otherwise: an admission, a state a
 * denial wrote (a ban), a tier conversion (shm_flood.c relies on it). */
static int decide_slot(struct srl__shm *s, uint64_t b, unsigned i, const struct shm_req *rq,
                       srl_decision *d, struct decided *out)
{
    const struct srl__shm_pol *p;
    int rc = req_pol(s, rq, &p);
    if (rc != 0)
        return rc;
    uint64_t now = srl__now(&s->lim);
    const struct srl__compound *from = srl__shm_slot_current(s, p, b, i, now);
    unsigned flags = srl__shm_slot_tierword(s, b, i);   /* read once (shm.h) */
    /* Layout 9: a key with stored limits is decided by them whatever the
     * call names; else srl_acquire_limits's limits, else the tier's. */
    const struct srl__compound *to = (flags & SRL__SLOT_F_OWN) ? from
                                     : rq->own != NULL        ? rq->own
                                                              : &p->cmp[rq->tier];
    if ((flags & SRL__SLOT_F_OWN) && rq->apply == NULL && rq->lease == NULL &&
        (rq->cost > to->min_permits || (rq->max_wait > 0 && !to->reserve))) {
        srl__shm_slot_thaw(s, b, i);   /* req_fits, against the key's own limits */
        return rq->cost > to->min_permits ? srl__cost_refused(to, rq->cost) : SRL_ENOTSUP;
    }
    if ((flags & (SRL__SLOT_F_EXEMPT | SRL__SLOT_F_BANNED)) && rq->apply == NULL &&
        rq->lease == NULL && control_decide(s, b, i, flags, from, now, rq, d)) {
        srl__shm_slot_thaw(s, b, i);
        count(s, b, i, d);
        if (out != NULL) {
            out->now = now;
            out->pol = p;
        }
        return 0;
    }
    srl__shm_undo_begin(s, b, i);
    /* The decision reads and writes a private snapshot, stored back whole
     * (the read-once rule, shm.h). */
    unsigned char st[s->state_bytes] __attribute__((aligned(16)));
    srl__shm_state_load(s, b, i, st);
    /* from is &p->cmp[the slot's tier] (srl__shm_slot_current judged the
     * word once): comparing compounds reads nothing of the segment again. */
    bool moved = from != to;
    /* Two entries (or tiers) of equal limits: the state is theirs as it
     * is, only the tier word moves (a conversion could only lose). */
    bool changed = moved && memcmp(&from->limits, &to->limits, sizeof to->limits) != 0;
    if (changed) {
        /* The key changes tier: its state is converted (tiers.c) from the
         * old state into the new one; the tier word is written after the
         * state, so a crash before it leaves old state and old tier (the
         * undo record restores the state). */
        unsigned char old[s->state_bytes] __attribute__((aligned(16)));
        memcpy(old, st, s->state_bytes);
        srl__tier_convert(from, old, to, st, now);
    }
    decide_state(s, b, i, to, st, now, rq, d);
    /* The undo copy still holds the state before: a denial that wrote
     * nothing leaves the slot and gen alone, so other processes' cached
     * denials of the bucket stay valid. */
    if (moved || d->allowed ||
        memcmp((unsigned char *)srl__shm_bucket(s, b) + s->undo_off, st, s->state_bytes) != 0) {
        srl__shm_state_store(s, b, i, st);
        srl__shm_gen_bump(s, b);
    }
    if (moved) {
        /* The operator's flags stay; CALL follows the limits decided by. */
        unsigned keep = srl__shm_slot_tierword(s, b, i) & ~(SRL__SLOT_TIER_MASK | SRL__SLOT_F_CALL);
        if (rq->own != NULL)
            srl__shm_slot_tier_set(s, b, i, rq->own_idx, keep | SRL__SLOT_F_CALL);
        else
            srl__shm_slot_tier_set(s, b, i, rq->tier, keep);
    }
    srl__shm_undo_end(s, b);
    srl__shm_slot_thaw(s, b, i);
    count_req(s, b, i, rq, d);
    if (out != NULL) {
        out->now = now;
        out->pol = p;
    }
    return 0;
}


/* Fill free slot i of bucket b with key k and decide its first request
 * (bucket b locked).  The tag is stored last: until then the slot is free,
 * so a crash here leaves nothing to repair. */
static void insert(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b, unsigned i,
                   const struct srl__shm_key *k, const void *key, size_t len, uint64_t now,
                   const struct shm_req *rq, srl_decision *d)
{
    unsigned char *slot = srl__shm_slot(s, b, i);
    /* The slot is free, but a lock-free decider that found its previous
     * key may still hold its old meta: seq goes on from where it was. */
    srl__shm_slot_freeze(s, b, i);
    uint16_t seq = *srl__shm_slot_seq(s, b, i);
    memset(slot, 0, s->slot_bytes);
    *srl__shm_slot_seq(s, b, i) = seq;
    memcpy(slot + SRL__SLOT_FP, k->fp, SRL__SHM_FP_BYTES);
    if (s->key_display > 0) {
        *srl__shm_slot_key_len(s, b, i) = (uint16_t)len;
        size_t shown = len < s->key_display ? len : s->key_display;
        memcpy(srl__shm_slot_display(s, b, i), key, shown);
    }
    /* srl_acquire_limits's key names its limits' entry (layout 9). */
    const struct srl__compound *c = rq->own != NULL ? rq->own : &p->cmp[rq->tier];
    uint16_t tier = (uint16_t)(rq->own != NULL ? rq->own_idx | SRL__SLOT_F_CALL : rq->tier);
    memcpy(slot + SRL__SLOT_TIER, &tier, sizeof tier);
    memcpy(slot + SRL__SLOT_GEN, &p->gen, sizeof p->gen);
    unsigned char st[s->state_bytes] __attribute__((aligned(16)));   /* read once (shm.h) */
    memset(st, 0, s->state_bytes);
    srl__compound_state_init(c, st, now);
    if (s->lim.cmp.conc >= 0)
        /* Generations start anywhere, so a lease kept across the key's
         * eviction and return is unlikely to name a new unit (srl_leave
         * also checks the holder's pid). */
        srl__conc_seed(srl__compound_conc_state(&s->lim.cmp, st), randombytes_random());
    decide_state(s, b, i, c, st, now, rq, d);
    srl__shm_state_store(s, b, i, st);
    srl__shm_slot_thaw(s, b, i);
    count_req(s, b, i, rq, d);
    srl__shm_gen_bump(s, b);
    srl__shm_tag_store(srl__shm_bucket(s, b), i, k->tag);
}

static int free_slot(const struct srl__shm *s, uint64_t b)
{
    const struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    for (unsigned i = 0; i < SRL__SHM_SLOTS; i++)
        if (bk->tags[i] == 0)
            return (int)i;
    return -1;
}

/* A free slot of the home window starting at `home` in bucket b, or -1. */
static int free_home_slot(const struct srl__shm *s, uint64_t b, unsigned home)
{
    const struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    for (unsigned i = home; i < home + SRL__SHM_HOME_SLOTS; i++)
        if (bk->tags[i] == 0)
            return (int)i;
    return -1;
}

/* Where a key with home window `home` goes in bucket b: a free home slot,
 * else the first free slot, else -1.  The preference is a hint for the
 * lookup's prefetch, never a rule a lookup relies on. */
static int free_slot_for(const struct srl__shm *s, uint64_t b, unsigned home)
{
    int i = free_home_slot(s, b, home);
    return i >= 0 ? i : free_slot(s, b);
}

static unsigned free_count(const struct srl__shm *s, uint64_t b)
{
    const struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    unsigned n = 0;
    for (unsigned i = 0; i < SRL__SHM_SLOTS; i++)
        n += bk->tags[i] == 0;
    return n;
}

/* Free an at-rest slot of bucket b (locked) and return it, or -1. */
static int reclaim(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b, uint64_t now)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    for (unsigned i = 0; i < SRL__SHM_SLOTS; i++) {
        if (bk->tags[i] == 0)
            continue;
        bool rest = slot_at_rest(s, p, b, i, now);
        if (rest) {
            srl__shm_tag_store(bk, i, 0);
            SRL__SHM_COUNT(bk->evicted, 1);
            srl__shm_gen_bump(s, b);
        }
        srl__shm_slot_thaw(s, b, i);
        if (rest)
            return (int)i;
    }
    return -1;
}

/* One-hop relocation: move an entry of b1 or b2 (both locked) to its other
 * candidate bucket, taken with trylock so the lock order is never violated.
 * The copy is complete and tagged before the old tag is cleared, under the
 * source bucket's moving_slot marker.  Returns 1 with the freed slot in *fb
 * and *fi, or 0. */
static int relocate(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b1, uint64_t b2,
                    uint64_t now, uint64_t *fb, unsigned *fi)
{
    uint64_t src[2] = {b1, b2};
    for (int side = 0; side < (b1 == b2 ? 1 : 2); side++) {
        uint64_t b = src[side];
        struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
        for (unsigned i = 0; i < SRL__SHM_SLOTS; i++) {
            uint8_t tag = bk->tags[i];
            if (tag == 0)
                continue;
            uint64_t c1, c2;
            srl__shm_fp_buckets(s, srl__shm_slot(s, b, i), &c1, &c2);
            uint64_t other = b == c1 ? c2 : c1;
            if (other == b1 || other == b2)
                continue;
            if (srl__shm_trylock(s, other) != 0)
                continue;
            if (__atomic_load_n(&srl__shm_live(s)->policy_gen, __ATOMIC_ACQUIRE) != p->gen) {
                /* p was current when b1 and b2 were locked, and stays
                 * valid there: no changer can sweep them for the next
                 * change while they are held.  But a change may have been
                 * published since (its sweep had passed b1 and b2), and
                 * `other` may be swept for the one after already: a state
                 * moved or reclaimed there under p would be two
                 * generations behind once that one is published (a reset
                 * in 1 of ~15 runs of a_change_races_with_new_keys_and_
                 * with_eviction).  Rare (a change inside this call): no
                 * relocation this time. */
                srl__shm_unlock(s, other);
                return 0;
            }
            int j = free_slot_for(s, other, srl__shm_fp_home(s, srl__shm_slot(s, b, i), other));
            if (j < 0)
                j = reclaim(s, p, other, now);
            if (j >= 0) {
                /* The key is made current before it moves: a changer may
                 * have swept `other` already and not yet b, and a state of
                 * the previous generation moved behind its sweep would be
                 * two generations behind after the next change (found by
                 * a_change_races_with_new_keys_and_with_eviction). */
                /* It also freezes the source (seq odd): a lock-free CAS
                 * on it lands before the copy below reads it, or fails. */
                srl__shm_slot_current(s, p, b, i, now);
                /* The marker lets repair of b resolve a move cut short
                 * between the two tag stores (srl__shm_repair_bucket). */
                __atomic_store_n(&bk->moving_slot, (uint8_t)(i + 1), __ATOMIC_RELEASE);
                /* The destination keeps its own seq, frozen while written. */
                srl__shm_slot_freeze(s, other, (unsigned)j);
                uint16_t seq = *srl__shm_slot_seq(s, other, (unsigned)j);
                memcpy(srl__shm_slot(s, other, (unsigned)j), srl__shm_slot(s, b, i), s->slot_bytes);
                *srl__shm_slot_seq(s, other, (unsigned)j) = seq;
                srl__shm_slot_thaw(s, other, (unsigned)j);
                srl__shm_tag_store(srl__shm_bucket(s, other), (unsigned)j, tag);
                srl__shm_tag_store(bk, i, 0);
                srl__shm_slot_thaw(s, b, i);
                __atomic_store_n(&bk->moving_slot, 0, __ATOMIC_RELEASE);
                srl__shm_gen_bump(s, b);
                srl__shm_gen_bump(s, other);
            }
            srl__shm_unlock(s, other);
            if (j >= 0) {
                *fb = b;
                *fi = i;
                return 1;
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------ locking and repair */

/* Taking a bucket lock repairs the bucket when its owner died (see
 * shm_lock.c for the outcomes, the nesting rule and the undo record).  It
 * lives here, not in shm_lock.c, because repair validates slots by the
 * slot rules (srl__shm_slot_valid, srl__shm_slot_reset, shm_slot.c), which
 * use shm_lock.c's undo record: kept here, shm_lock.c stays plain mutex
 * handling and no two files call each other.  Repair cannot go to
 * shm_slot.c either: it takes locks (resolve_move's trylock) as taking a
 * lock repairs, so the two share this file. */
static int trylock_at(struct srl__shm *s, uint64_t b, bool nested);

/* A relocation out of b (locked) was cut short: its source slot i and
 * maybe a complete, tagged copy in the key's other bucket both exist.  If
 * the copy is there the source is dropped; if not, the source stays (the
 * copy was never made visible).  If the other bucket is busy both copies
 * may stay; lookups then always use the same one and srl_check reports
 * the duplicate. */
static void resolve_move(struct srl__shm *s, uint64_t b, unsigned i)
{
    const uint8_t *fp = srl__shm_slot(s, b, i);
    uint64_t c1, c2;
    srl__shm_fp_buckets(s, fp, &c1, &c2);
    if (b != c1 && b != c2)
        return;                 /* damaged identity: validation frees it */
    uint64_t other = b == c1 ? c2 : c1;
    if (other == b)
        return;
    /* Only tried, never waited for: the caller may already hold other
     * locks (the slow path's pair, a relocation's three), and a wait here
     * could close a cycle or wait on a lock this thread owns.  A dead
     * owner of `other` is repaired nested, without resolving its own move,
     * so the depth stays one whatever the segment says. */
    if (trylock_at(s, other, true) != 0)
        return;
    struct srl__shm_bucket *ob = srl__shm_bucket(s, other);
    uint8_t tag = srl__shm_bucket(s, b)->tags[i];
    for (unsigned j = 0; j < SRL__SHM_SLOTS; j++) {
        if (ob->tags[j] == tag && memcmp(srl__shm_slot(s, other, j), fp, SRL__SHM_FP_BYTES) == 0) {
            srl__shm_tag_store(srl__shm_bucket(s, b), i, 0);
            break;
        }
    }
    srl__shm_unlock(s, other);
}

/* nested: called from resolve_move of another bucket's repair; then a cut
 * short move out of b is not resolved (that would lock a third bucket). */
static void repair(struct srl__shm *s, uint64_t b, uint64_t now, bool nested)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    /* Cleared before resolving: once b is consistent no repair would come
     * back for it, and a nested repair leaves both copies (check finds them). */
    unsigned moving = __atomic_load_n(&bk->moving_slot, __ATOMIC_ACQUIRE);
    __atomic_store_n(&bk->moving_slot, 0, __ATOMIC_RELEASE);
    if (!nested && moving >= 1 && moving <= SRL__SHM_SLOTS && bk->tags[moving - 1] != 0)
        resolve_move(s, b, moving - 1);
    /* The bucket is locked: the view read here is the current one. */
    const struct srl__shm_pol *p = srl__shm_pol_get(s, true);
    unsigned undo = __atomic_load_n(&bk->undo_slot, __ATOMIC_ACQUIRE);
    if (undo >= 1 && undo <= SRL__SHM_SLOTS && bk->tags[undo - 1] != 0)
        memcpy(srl__shm_slot_state(s, b, undo - 1), (unsigned char *)bk + s->undo_off,
               s->state_bytes);
    /* An out-of-range undo_slot is itself damage: drop it, then validate. */
    __atomic_store_n(&bk->undo_slot, 0, __ATOMIC_RELEASE);
    /* The dead owner may have left a slot frozen (seq odd): its state is
     * restored above (or was never written: an eviction, an insert before
     * its tag), so it is made even, one past, for the lock-free path. */
    for (unsigned i = 0; i < SRL__SHM_SLOTS; i++)
        if (__atomic_load_n(srl__shm_slot_seq(s, b, i), __ATOMIC_RELAXED) & 1u)
            srl__shm_slot_thaw(s, b, i);
    for (unsigned i = 0; i < SRL__SHM_SLOTS; i++) {
        if (__atomic_load_n(&bk->tags[i], __ATOMIC_RELAXED) == 0)
            continue;
        if (!srl__shm_slot_valid(s, p, b, i, now)) {
            srl__shm_slot_reset(s, p, b, i, now);
            SRL__SHM_COUNT(bk->reset_slots, 1);
        }
    }
    /* Whatever repair restored, reset or freed, every cached denial of the
     * bucket is void (its gen is untrusted like the rest: any value is as
     * good a start as another, only a change is read). */
    srl__shm_gen_bump(s, b);
    /* Rare by nature: one atomic add to the header page, not a bucket word. */
    __atomic_add_fetch(&srl__shm_live(s)->recovered, 1, __ATOMIC_RELAXED);
}

void srl__shm_repair_bucket(struct srl__shm *s, uint64_t b, uint64_t now)
{
    repair(s, b, now, false);
}

/* Common tail of lock and trylock for a nonzero pthread result. */
static int after_lock(struct srl__shm *s, uint64_t b, int e, bool nested)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    switch (e) {
    case EOWNERDEAD:
        repair(s, b, srl__now(&s->lim), nested);
        if (pthread_mutex_consistent(&bk->mu) != 0) {
            pthread_mutex_unlock(&bk->mu);
            return SRL_ENOTRECOVERABLE;
        }
        return 0;
    case ETIMEDOUT:
        __atomic_fetch_add(&bk->timeouts, 1, __ATOMIC_RELAXED);
        return SRL_ETIMEDOUT;
    case ENOTRECOVERABLE:
        return SRL_ENOTRECOVERABLE;
    default:
        errno = e;
        return SRL_ESYS;
    }
}

/* One attempt without waiting.  Not pthread_mutex_trylock: glibc's (2.36)
 * robust trylock, on a mutex in the ENOTRECOVERABLE state, returns that code
 * but leaves the lock word held by the caller, so every later locker would
 * time out instead of hearing ENOTRECOVERABLE.  A clocklock whose deadline
 * has passed tries the same compare-and-swap and handles that state right. */
static int try_once(pthread_mutex_t *mu)
{
    static const struct timespec past = {0, 0};
    return pthread_mutex_clocklock(mu, CLOCK_MONOTONIC, &past);
}

/* The kind check of shm_lock.c, its common case inline: the word equals
 * the one this handle computed at open.  Anything else (or no glibc, or no
 * kind known) takes the full check, which says what it found. */
static int kind_check(const struct srl__shm *s, uint64_t b)
{
#ifdef __GLIBC__
    if (s->mutex_kind >= 0 &&
        __atomic_load_n(&srl__shm_bucket(s, b)->mu.__data.__kind, __ATOMIC_RELAXED) ==
            s->mutex_kind)
        return 0;
#endif
    return srl__shm_mutex_kind_check(s, b, NULL, NULL);
}

int srl__shm_lock(struct srl__shm *s, uint64_t b, struct timespec *deadline)
{
    pthread_mutex_t *mu = &srl__shm_bucket(s, b)->mu;
    int rc = kind_check(s, b);
    if (rc != 0)
        return rc;
    /* Uncontended (the common case): no clock read for the deadline. */
    int e = try_once(mu);
    if (e == ETIMEDOUT) {
        if (deadline->tv_nsec < 0)
            *deadline = srl__shm_deadline(s);
        e = pthread_mutex_clocklock(mu, CLOCK_MONOTONIC, deadline);
    }
    return e == 0 ? 0 : after_lock(s, b, e, false);
}

/* nested: inside another bucket's repair (see repair). */
static int trylock_at(struct srl__shm *s, uint64_t b, bool nested)
{
    int rc = kind_check(s, b);
    if (rc != 0)
        return rc;
    int e = try_once(&srl__shm_bucket(s, b)->mu);
    if (e == 0)
        return 0;
    if (e == ETIMEDOUT)
        return 1;       /* busy: not a timed-out wait, not counted */
    return after_lock(s, b, e, nested);
}

int srl__shm_trylock(struct srl__shm *s, uint64_t b)
{
    return trylock_at(s, b, false);
}

void srl__shm_unlock(struct srl__shm *s, uint64_t b)
{
    pthread_mutex_unlock(&srl__shm_bucket(s, b)->mu);
}


/* ------------------------------------------------------------ lookup */

/* Fast path: look for k in its buckets by tag without a lock; on a tag
 * match lock that bucket and verify.  Returns 0 with the bucket locked and
 * *slot >= 0, 0 with nothing locked and *slot = -1, or a lock error. */
static int find_fast(struct srl__shm *s, const struct srl__shm_key *k,
                     struct timespec *deadline, uint64_t *bucket, int *slot)
{
    uint64_t cand[2] = {k->b1, k->b2};
    *slot = -1;
    for (int c = 0; c < (k->b1 == k->b2 ? 1 : 2); c++) {
        /* A hint only (no lock): any tag of the bucket equal to k's, 8 at a
         * time; the lock and srl__shm_find_locked decide. */
        const struct srl__shm_bucket *bk = srl__shm_bucket(s, cand[c]);
        uint64_t hint = 0;
        for (unsigned w = 0; w < SRL__SHM_SLOTS / 8; w++)
            hint |= srl__shm_tag_match(srl__shm_tag_word(bk, w), k->tag);
        if (hint == 0)
            continue;
        int rc = srl__shm_lock(s, cand[c], deadline);
        if (rc != 0)
            return rc;
        int i = srl__shm_find_locked(s, cand[c], k);
        if (i >= 0) {
            *bucket = cand[c];
            *slot = i;
            return 0;
        }
        srl__shm_unlock(s, cand[c]);
    }
    return 0;
}

/* Lock both candidate buckets, lower index first. */
static int lock_pair(struct srl__shm *s, const struct srl__shm_key *k,
                     struct timespec *deadline)
{
    uint64_t lo = k->b1 < k->b2 ? k->b1 : k->b2, hi = k->b1 < k->b2 ? k->b2 : k->b1;
    int rc = srl__shm_lock(s, lo, deadline);
    if (rc != 0 || hi == lo)
        return rc;
    rc = srl__shm_lock(s, hi, deadline);
    if (rc != 0)
        srl__shm_unlock(s, lo);
    return rc;
}

static void unlock_pair(struct srl__shm *s, const struct srl__shm_key *k)
{
    srl__shm_unlock(s, k->b1);
    if (k->b2 != k->b1)
        srl__shm_unlock(s, k->b2);
}

/* Under both locks: the bucket/slot holding k, or -1. */
static int find_pair(const struct srl__shm *s, const struct srl__shm_key *k, uint64_t *bucket)
{
    int i = srl__shm_find_locked(s, k->b1, k);
    *bucket = k->b1;
    if (i < 0 && k->b2 != k->b1) {
        i = srl__shm_find_locked(s, k->b2, k);
        *bucket = k->b2;
    }
    return i;
}

/* ------------------------------------------------------------ acquire */

static int degraded(struct srl__shm *s, int rc, srl_decision *d)
{
    srl__decide_on_full(&s->lim, SRL_DECISION_DEGRADED, d);
    return rc;
}


/* The flood cache's part of a locked plain decision on bucket b, slot i
 * (shm.h, struct srl__shm_flood_io): add the caller's pending counts of b,
 * and copy the slot's state and the bucket's gen out after a denial. */
static void flood_io_locked(struct srl__shm *s, uint64_t b, unsigned i, const struct decided *dd,
                            const srl_decision *d, struct srl__shm_flood_io *io)
{
    for (unsigned j = 0; j < io->n; j++) {
        if (io->pend_bucket[j] == b && *io->pend_count[j] > 0) {
            srl__shm_count_denied(s, b, io->pend_fp[j], *io->pend_count[j]);
            *io->pend_count[j] = 0;
        }
    }
    if (d->allowed || d->retry_after_ns == 0)
        return;
    if (srl__shm_slot_tierword(s, b, i) & SRL__SLOT_F_LIMITS)
        return;   /* decided by its own limits: the cache answers by tier only */
    io->recorded = 1;
    io->bucket = b;
    io->now = dd->now;
    io->pol = dd->pol;
    io->gen = __atomic_load_n(&srl__shm_bucket(s, b)->gen, __ATOMIC_RELAXED);
    memcpy(io->state, srl__shm_slot_state(s, b, i), s->state_bytes);
}

/* Layout 8: a lock-free handle's first lock-free decision on a segment not
 * created with the flag.  Say in lf_open that lock-free deciders may
 * exist, then take and drop every bucket's lock, so that no locked writer
 * that read NONE is still at work: one that read it held its bucket's lock
 * before we took it; one that locks after we drop it reads our store
 * (shm.h, srl__shm_lf_live).  Here, at the first decision and not at open,
 * so that a process that opens and never decides never locks (mod_srl's
 * root parent: docs/design.md, "Trust model").  Threads of the handle may both
 * pass: harmless.  A lock that cannot be had (a holder past
 * lock_timeout_ms, a damaged mutex) leaves the handle on the locked path
 * for good (FAILED: srl_info.flags drops SRL_CONFIG_LOCKFREE) and lf_open
 * set, which costs locked writers their atomics and nothing else.  On a
 * 1M-key segment: 65536 uncontended lock/unlock pairs, once, touching
 * every bucket's page. */
__attribute__((cold, noinline)) static bool lf_pass(struct srl__shm *s)
{
    uint8_t now = __atomic_load_n(&s->lf_pending, __ATOMIC_ACQUIRE);
    if (now != SRL__SHM_LF_PASS)
        return now == SRL__SHM_LF_READY;
    uint32_t *w = &srl__shm_live(s)->lf_open;
    if (__atomic_load_n(w, __ATOMIC_RELAXED) == SRL__SHM_LF_NONE)
        __atomic_store_n(w, SRL__SHM_LF_LATER, __ATOMIC_SEQ_CST);
    for (uint64_t b = 0; b < s->buckets; b++) {
        struct timespec deadline = SRL__SHM_NO_DEADLINE;
        if (srl__shm_lock(s, b, &deadline) != 0) {
            __atomic_store_n(&s->lf_pending, SRL__SHM_LF_FAILED, __ATOMIC_RELEASE);
            return false;
        }
        srl__shm_unlock(s, b);
    }
    __atomic_store_n(&s->lf_pending, SRL__SHM_LF_READY, __ATOMIC_RELEASE);
    return true;
}

/* Whether this lock-free handle may decide without the lock now: READY
 * (one load of the handle's own byte), else lf_pass. */
static inline bool lf_ready(struct srl__shm *s)
{
    return __builtin_expect(__atomic_load_n(&s->lf_pending, __ATOMIC_ACQUIRE) == SRL__SHM_LF_READY,
                            1) ||
           lf_pass(s);
}

/* srl_acquire and srl_enter: find or insert the key k (hashed), decide rq
 * on it.  io: a plain admission's flood-cache exchange, or NULL. */
static int decide_k(srl_limiter *lim, const struct srl__shm_key *k, const void *key, size_t len,
                    const struct shm_req *rq, struct srl__shm_flood_io *io, srl_decision *d)
{
    struct srl__shm *s = lim->impl;
    struct timespec deadline = SRL__SHM_NO_DEADLINE;


    /* A plain admission of a found key under an all-GCRA tier: one CAS,
     * no lock (shm_lockfree.c), when this handle asked for it; anything
     * it does not take comes down here. */
    if (s->lockfree && rq->lease == NULL && rq->apply == NULL && rq->max_wait == 0 &&
        rq->own == NULL && lf_ready(s) && srl__shm_lf_decide(s, k, rq->tier, rq->cost, io, d))
        return 0;

    uint64_t b;
    int i;
    int rc = find_fast(s, k, &deadline, &b, &i);
    if (rc != 0)
        return degraded(s, rc, d);
    if (i >= 0) {
        struct decided dd;
        rc = decide_slot(s, b, (unsigned)i, rq, d, &dd);
        if (rc == 0 && io != NULL && (io->n > 0 || !d->allowed))   /* else nothing to do */
            flood_io_locked(s, b, (unsigned)i, &dd, d, io);
        srl__shm_unlock(s, b);
        return rc == SRL_ECORRUPT ? degraded(s, rc, d) : rc;
    }

    rc = lock_pair(s, k, &deadline);
    if (rc != 0)
        return degraded(s, rc, d);
    i = find_pair(s, k, &b);
    if (i >= 0) {
        struct decided dd;
        rc = decide_slot(s, b, (unsigned)i, rq, d, &dd);
        if (rc == 0 && io != NULL && (io->n > 0 || !d->allowed))   /* else nothing to do */
            flood_io_locked(s, b, (unsigned)i, &dd, d, io);
        unlock_pair(s, k);
        return rc == SRL_ECORRUPT ? degraded(s, rc, d) : rc;
    }
    const struct srl__shm_pol *p;
    rc = req_pol(s, rq, &p);
    if (rc != 0) {
        unlock_pair(s, k);
        return rc == SRL_ECORRUPT ? degraded(s, rc, d) : rc;
    }
    uint64_t now = srl__now(lim);
    unsigned f1 = free_count(s, k->b1), f2 = k->b2 != k->b1 ? free_count(s, k->b2) : 0;
    if (f1 > 0 || f2 > 0) {
        /* The emptier bucket (two choices keep the buckets even, which is
         * what lets the table fill); on a tie, the one with a free home
         * slot, so that later hits find the key where they prefetched. */
        b = f1 >= f2 ? k->b1 : k->b2;
        unsigned home = b == k->b1 ? k->home1 : k->home2;
        if (f1 == f2 && k->b2 != k->b1 && free_home_slot(s, b, home) < 0 &&
            free_home_slot(s, b == k->b1 ? k->b2 : k->b1, b == k->b1 ? k->home2 : k->home1) >= 0) {
            b = b == k->b1 ? k->b2 : k->b1;
            home = b == k->b1 ? k->home1 : k->home2;
        }
        i = free_slot_for(s, b, home);
    } else if ((i = reclaim(s, p, k->b1, now)) >= 0) {
        b = k->b1;
    } else if (k->b2 != k->b1 && (i = reclaim(s, p, k->b2, now)) >= 0) {
        b = k->b2;
    } else {
        unsigned fi;
        if (relocate(s, p, k->b1, k->b2, now, &b, &fi))
            i = (int)fi;
        else if (lim->on_full == SRL_ON_FULL_EVICT)   /* the full table's slow path only */
            i = srl__shm_evict_lru(s, p, k->b1, k->b2, now, &b);
    }
    if (i < 0) {
        /* Table full: on_full decides, and the decision is counted like any
         * other (in b1, whose lock we hold), plus once in `full`. */
        struct srl__shm_bucket *bk = srl__shm_bucket(s, k->b1);
        srl__decide_on_full(lim, SRL_DECISION_UNTRACKED, d);
        if (rq->apply != NULL) {   /* not a decision: nothing to count */
            unlock_pair(s, k);
            return SRL_ENOSPC;
        }
        SRL__SHM_COUNT(bk->full, 1);
        if (d->allowed)
            SRL__SHM_SHARED_ADD(s, bk->allowed, 1);
        else
            SRL__SHM_SHARED_ADD(s, bk->denied, 1);
        if (!d->allowed && s->lim.dry_run)
            SRL__SHM_COUNT(bk->would_deny, 1);
        unlock_pair(s, k);
        return 0;
    }
    insert(s, p, b, (unsigned)i, k, key, len, now, rq, d);
    unlock_pair(s, k);
    return 0;
}

static int decide_key(srl_limiter *lim, const void *key, size_t len, const struct shm_req *rq,
                      srl_decision *d)
{
    struct srl__shm_key k;
    srl__shm_hash(lim->impl, key, len, &k);
    return decide_k(lim, &k, key, len, rq, NULL, d);
}

int srl__shm_decide_plain(srl_limiter *lim, const struct srl__shm_key *k, const void *key,
                          size_t len, uint32_t tier, uint32_t cost, struct srl__shm_flood_io *io,
                          srl_decision *d)
{
    struct shm_req rq = {.cost = cost, .tier = tier};
    return decide_k(lim, k, key, len, &rq, io, d);
}

int srl__shm_acquire(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                     srl_decision *d)
{
    struct shm_req rq = {.cost = cost};
    return decide_key(lim, key, len, &rq, d);
}

int srl__shm_reserve(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                     uint64_t max_wait, srl_decision *d)
{
    struct shm_req rq = {.cost = cost, .max_wait = max_wait};
    return decide_key(lim, key, len, &rq, d);
}

int srl__shm_decide_own(srl_limiter *lim, const void *key, size_t len,
                        const struct srl__compound *own, unsigned own_idx, uint32_t cost,
                        srl_decision *d)
{
    struct shm_req rq = {.cost = cost, .own = own, .own_idx = own_idx};
    return decide_key(lim, key, len, &rq, d);
}

int srl__shm_acquire_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                          uint32_t cost, srl_decision *d)
{
    struct shm_req rq = {.cost = cost, .tier = tier};
    return decide_key(lim, key, len, &rq, d);
}

int srl__shm_enter(srl_limiter *lim, const void *key, size_t len, srl_lease *lease,
                   srl_decision *d)
{
    struct shm_req rq = {.cost = 1, .lease = lease};
    return decide_key(lim, key, len, &rq, d);
}

/* Lock the bucket holding k; 0 with it locked and *slot >= 0; 0 with
 * nothing locked and *slot = -1 if absent; or a lock error. */
static int locate_k(struct srl__shm *s, const struct srl__shm_key *k, uint64_t *bucket,
                    int *slot)
{
    struct timespec deadline = SRL__SHM_NO_DEADLINE;
    int rc = find_fast(s, k, &deadline, bucket, slot);
    if (rc != 0 || *slot >= 0)
        return rc;
    /* The tags missed; a relocation may have been moving it.  Look again
     * under both locks, where nothing can move. */
    rc = lock_pair(s, k, &deadline);
    if (rc != 0)
        return rc;
    *slot = find_pair(s, k, bucket);
    if (*slot < 0) {
        unlock_pair(s, k);
        return 0;
    }
    /* Keep only the lock of the bucket that holds it. */
    uint64_t other = *bucket == k->b1 ? k->b2 : k->b1;
    if (other != *bucket)
        srl__shm_unlock(s, other);
    return 0;
}

/* The key's slot, its bucket locked; SRL_ENOENT with nothing locked if the
 * key is not there, or a lock error.  For the calls that change or read one
 * existing key (refund, reset, state, peek, apply without insert). */
int srl__shm_locate(struct srl__shm *s, const void *key, size_t len, struct srl__shm_key *k,
                    uint64_t *bucket, int *slot)
{
    srl__shm_hash(s, key, len, k);
    int rc = locate_k(s, k, bucket, slot);
    return rc == 0 && *slot < 0 ? SRL_ENOENT : rc;
}

/* The lease names its key by fingerprint, so the key is found wherever
 * relocation moved it; the unit by (entry, gen) and its holder's pid. */
int srl__shm_leave(srl_limiter *lim, srl_lease *lease)
{
    struct srl__shm *s = lim->impl;
    struct srl__shm_key k;
    memcpy(k.fp, lease->where, SRL__SHM_FP_BYTES);
    srl__shm_key_of_fp(s, &k);
    uint64_t b;
    int i;
    int rc = locate_k(s, &k, &b, &i);
    if (rc != 0)
        return rc;
    if (i < 0)
        return SRL_ENOENT;   /* the key is gone: its units were reclaimed */
    srl__shm_slot_freeze(s, b, (unsigned)i);
    srl__shm_undo_begin(s, b, (unsigned)i);
    unsigned char st[s->state_bytes] __attribute__((aligned(16)));   /* read once (shm.h) */
    srl__shm_state_load(s, b, (unsigned)i, st);
    rc = srl__compound_leave(&lim->cmp, st, lease->entry, lease->gen, (int32_t)getpid());
    srl__shm_state_store(s, b, (unsigned)i, st);
    srl__shm_gen_bump(s, b);
    srl__shm_undo_end(s, b);
    srl__shm_slot_thaw(s, b, (unsigned)i);
    srl__shm_unlock(s, b);
    return rc;
}

int srl__shm_apply(srl_limiter *lim, const void *key, size_t len, int insert,
                   srl__shm_apply_fn fn, void *ctx)
{
    srl_decision d;
    if (insert) {
        struct shm_req rq = {.cost = 1, .apply = fn, .ctx = ctx};
        return decide_key(lim, key, len, &rq, &d);
    }
    struct srl__shm *s = lim->impl;
    struct srl__shm_key k;
    uint64_t b;
    int i;
    int rc = srl__shm_locate(s, key, len, &k, &b, &i);
    if (rc != 0)
        return rc;
    struct shm_req rq = {.cost = 1, .apply = fn, .ctx = ctx};
    rc = decide_slot(s, b, (unsigned)i, &rq, &d, NULL);
    srl__shm_unlock(s, b);
    return rc;
}

/* A peek under tier `tier`, or the key's own tier for SRL__SHM_OWN_TIER:
 * what decide_slot would decide for it, written nowhere.  A key of another
 * tier is judged on its state converted as decide_slot converts it (into
 * a private copy); a key with stored limits is decided by them whatever
 * the tier, as its requests are. */
static int peek_as(srl_limiter *lim, uint32_t tier, const void *key, size_t len, uint32_t cost,
                   srl_decision *d)
{
    struct srl__shm *s = lim->impl;
    struct srl__shm_key k;
    uint64_t b;
    int i;
    int rc = srl__shm_locate(s, key, len, &k, &b, &i);
    if (rc == SRL_ENOENT)
        return rc;
    if (rc != 0)
        return degraded(s, rc, d);
    const struct srl__shm_pol *p = srl__shm_pol_get(s, true);
    if (p == NULL) {
        srl__shm_unlock(s, b);
        return degraded(s, SRL_ECORRUPT, d);
    }
    uint64_t now = srl__now(lim);
    const struct srl__compound *c = srl__shm_slot_current(s, p, b, (unsigned)i, now);
    unsigned flags = srl__shm_slot_tierword(s, b, (unsigned)i);   /* read once (shm.h) */
    const struct srl__compound *to =
        tier == SRL__SHM_OWN_TIER || (flags & SRL__SLOT_F_OWN) ? c : &p->cmp[tier];
    if (cost > to->min_permits) {   /* the tier takes less (srl_acquire_tier) */
        srl__shm_slot_thaw(s, b, (unsigned)i);
        srl__shm_unlock(s, b);
        return srl__cost_refused(to, cost);
    }
    unsigned char st[s->state_bytes] __attribute__((aligned(16)));   /* read once (shm.h) */
    srl__shm_state_load(s, b, (unsigned)i, st);
    if (to != c && memcmp(&c->limits, &to->limits, sizeof to->limits) != 0) {
        unsigned char old[s->state_bytes] __attribute__((aligned(16)));
        memcpy(old, st, s->state_bytes);
        srl__tier_convert(c, old, to, st, now);
    }
    srl__compound_decide(to, st, now, cost, 0, d);
    srl__shm_slot_thaw(s, b, (unsigned)i);
    srl__shm_unlock(s, b);
    return 0;
}

int srl__shm_peek(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                  srl_decision *d)
{
    return peek_as(lim, SRL__SHM_OWN_TIER, key, len, cost, d);
}

int srl__shm_peek_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                       uint32_t cost, srl_decision *d)
{
    return peek_as(lim, tier, key, len, cost, d);
}

/* The state is written in place under the bucket lock and the undo record,
 * as an admission is: a worker killed mid-refund leaves the state as it was
 * before the refund for the next locker to restore. */
int srl__shm_refund(srl_limiter *lim, const void *key, size_t len, uint32_t cost)
{
    struct srl__shm *s = lim->impl;
    struct srl__shm_key k;
    uint64_t b;
    int i;
    int rc = srl__shm_locate(s, key, len, &k, &b, &i);
    if (rc != 0)
        return rc;
    const struct srl__shm_pol *p = srl__shm_pol_get(s, true);
    if (p == NULL) {
        srl__shm_unlock(s, b);
        return SRL_ECORRUPT;
    }
    uint64_t now = srl__now(lim);
    const struct srl__compound *c = srl__shm_slot_current(s, p, b, (unsigned)i, now);
    if (cost > c->min_permits) {
        srl__shm_slot_thaw(s, b, (unsigned)i);
        srl__shm_unlock(s, b);
        return srl__cost_refused(c, cost);
    }
    srl__shm_undo_begin(s, b, (unsigned)i);
    unsigned char st[s->state_bytes] __attribute__((aligned(16)));   /* read once (shm.h) */
    srl__shm_state_load(s, b, (unsigned)i, st);
    srl__compound_refund(c, st, now, cost);
    srl__shm_state_store(s, b, (unsigned)i, st);
    srl__shm_gen_bump(s, b);
    srl__shm_undo_end(s, b);
    srl__shm_slot_thaw(s, b, (unsigned)i);
    srl__shm_unlock(s, b);
    return 0;
}
