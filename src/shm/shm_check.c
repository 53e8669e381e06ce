/*
 * shm_check.c - srl__shm_check, the invariant checker behind srl_check and
 * `rlctl check`: the header against the private geometry, each bucket's
 * mutex kind, tags, identities, key lengths and states, and duplicates.
 *
 * The invariants are the table's (listed at the top of shm_table.c).  It
 * only reads and reports; a bucket is taken with srl__shm_lock, so a bucket
 * whose owner died is repaired first, like any locker would.  It is kept
 * apart from the table so that the table, the locks and the segment code do
 * not call each other in a loop (tools/dev/callgraph-cycles).
 */
#include "shm.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct report {
    srl_report_fn fn;
    void *ctx;
    int64_t n;
};

static void problem(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(struct report *r, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    r->n++;
    if (r->fn != NULL)
        r->fn(r->ctx, line);
}

static void check_header(struct srl__shm *s, struct report *r)
{
    const struct srl__shm_header *h = srl__shm_hdr(s);
    if (memcmp(h->magic, SRL__SHM_MAGIC, 8) != 0)
        problem(r, "header: bad magic");
    if (h->version != SRL__SHM_VERSION || h->abi != srl__shm_abi_word())
        problem(r, "header: version %u / ABI %#llx differ from this library's", h->version,
                (unsigned long long)h->abi);
    if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != SRL__SHM_READY)
        problem(r, "header: state %u is not READY", h->state);
    if (h->buckets != s->buckets || h->capacity != s->buckets * SRL__SHM_SLOTS ||
        h->bucket_bytes != s->bucket_bytes || h->slot_bytes != s->slot_bytes ||
        h->state_bytes != s->state_bytes || h->total_bytes != s->map_bytes ||
        h->key_display != s->key_display || h->header_sum != s->header_sum ||
        h->tier_count != s->lim.tier_count || h->tier_pad != 0)
        problem(r, "header: geometry, policy or tier table changed since open");
    /* Layout 6: the policy now, in its copy (the header keeps the one at
     * creation; header_sum above covers that). */
    uint32_t gen = __atomic_load_n(&srl__shm_live(s)->policy_gen, __ATOMIC_ACQUIRE);
    struct srl__shm_policy c;
    char why[256];
    if (srl__shm_policy_read(s, gen, &c, why, sizeof why) != 0)
        problem(r, "%s", why);
    uint32_t pd = SRL__SHM_ONCE(srl__shm_live(s)->policy_damage);
    if (pd != 0)
        problem(r, "header: %u decisions refused a policy generation (policy_gen went back "
                   "behind one a worker had seen, or a worker had built %u generations): a "
                   "process other than srl_policy_change wrote the segment; destroy the "
                   "segment and recreate it (rlctl destroy, rlctl create)",
                pd, SRL__SHM_POL_VIEWS);
    uint32_t lf = __atomic_load_n(&srl__shm_live(s)->lf_open, __ATOMIC_RELAXED);
    if (lf > SRL__SHM_LF_LATER)
        problem(r, "header: lf_open is %u, not 0, 1 or 2 (it is read as \"lock-free "
                   "deciders may exist\": decisions stay exact, only slower)", lf);
}

/* Bucket b is locked. */
static void check_bucket(struct srl__shm *s, uint64_t b, uint64_t now, struct report *r)
{
    const struct srl__shm_pol *p = srl__shm_pol_get(s, true);
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    unsigned char st[s->state_bytes] __attribute__((aligned(16)));
    unsigned undo = SRL__SHM_ONCE(bk->undo_slot);   /* each read once (shm.h) */
    if (undo != 0)
        problem(r, "bucket %llu: pending undo record (slot %u)", (unsigned long long)b, undo);
    unsigned moving = SRL__SHM_ONCE(bk->moving_slot);
    if (moving != 0)
        problem(r, "bucket %llu: pending relocation of slot %u", (unsigned long long)b, moving);
    for (unsigned i = 0; i < SRL__SHM_SLOTS; i++) {
        uint8_t tag = SRL__SHM_ONCE(bk->tags[i]);
        if (tag == 0)
            continue;
        /* The fingerprint is one snapshot too: its buckets, tag and the
         * duplicate searches below all judge the same 16 bytes. */
        uint8_t fp[SRL__SHM_FP_BYTES];
        memcpy(fp, srl__shm_slot(s, b, i), sizeof fp);
        uint64_t c1, c2;
        srl__shm_fp_buckets(s, fp, &c1, &c2);
        if (tag != srl__shm_fp_tag(fp))
            problem(r, "bucket %llu slot %u: tag %#x does not match its fingerprint",
                    (unsigned long long)b, i, tag);
        if (b != c1 && b != c2)
            problem(r, "bucket %llu slot %u: key is not in one of its buckets (%llu, %llu)",
                    (unsigned long long)b, i, (unsigned long long)c1, (unsigned long long)c2);
        uint16_t len = s->key_display > 0 ? SRL__SHM_ONCE(*srl__shm_slot_key_len(s, b, i)) : 1;
        if (len < 1 || len > SRL_KEY_MAX)
            problem(r, "bucket %llu slot %u: key length %u out of range", (unsigned long long)b,
                    i, len);
        /* The tier indexes a table only once it is in range; a slot with a
         * bad meta word, or of a generation that is neither the current nor
         * the previous one, is reset to tier 0 by its next user (counted in
         * srl_stats.reset_slots).  p NULL: the copy is reported above. */
        unsigned word = srl__shm_slot_tierword(s, b, i);   /* read once */
        unsigned tier = word & SRL__SLOT_TIER_MASK;
        uint32_t g = srl__shm_slot_gen(s, b, i);
        const struct srl__shm_pol *of = p == NULL ? NULL : g == p->gen ? p
                                        : g == p->gen - 1u ? p->prev : NULL;
        if (p == NULL)
            ;
        else if (of == NULL)
            problem(r, "bucket %llu slot %u: policy generation %u is neither the current (%u) "
                       "nor a previous one still readable",
                    (unsigned long long)b, i, g, p->gen);
        else if (word & ~(SRL__SLOT_TIER_MASK | SRL__SLOT_F_KNOWN))
            problem(r, "bucket %llu slot %u: tier word 0x%04x has unknown flag bits",
                    (unsigned long long)b, i, word);
        else if ((word & SRL__SLOT_F_LIMITS) == SRL__SLOT_F_LIMITS)
            problem(r, "bucket %llu slot %u: tier word 0x%04x has both OWN and CALL",
                    (unsigned long long)b, i, word);
        else if ((word & SRL__SLOT_F_LIMITS) && srl__shm_keylim_cmp(s, tier) == NULL)
            problem(r, "bucket %llu slot %u: key-limits entry %u is not a valid limit set",
                    (unsigned long long)b, i, tier);
        else if (!(word & SRL__SLOT_F_LIMITS) && tier >= of->tier_count)
            problem(r, "bucket %llu slot %u: tier %u beyond the table (%u tiers)",
                    (unsigned long long)b, i, tier, of->tier_count);
        else if (SRL__SHM_ONCE(*srl__shm_slot_seq(s, b, i)) & 1u)
            problem(r, "bucket %llu slot %u: sequence word odd with no writer (a write cut "
                       "short without a lock owner; reset by its next user)",
                    (unsigned long long)b, i);
        else {
            srl__shm_state_load(s, b, i, st);   /* one snapshot (shm.h) */
            const struct srl__compound *c = (word & SRL__SLOT_F_LIMITS)
                                                ? srl__shm_keylim_cmp(s, tier)
                                                : &of->cmp[tier];
            if (!srl__compound_valid(c, st, now))
                problem(r, "bucket %llu slot %u: invalid state (tier %u)", (unsigned long long)b,
                        i, tier);
        }
        for (unsigned j = i + 1; j < SRL__SHM_SLOTS; j++)
            if (bk->tags[j] != 0 && memcmp(srl__shm_slot(s, b, j), fp, SRL__SHM_FP_BYTES) == 0)
                problem(r, "bucket %llu: slots %u and %u hold the same key",
                        (unsigned long long)b, i, j);
        /* A duplicate in the other candidate bucket: checked from the lower
         * bucket, taking the higher one second (index order). */
        uint64_t other = b == c1 ? c2 : c1;
        if ((b == c1 || b == c2) && other > b) {
            struct timespec deadline = SRL__SHM_NO_DEADLINE;
            int rc = srl__shm_lock(s, other, &deadline);
            if (rc == 0) {
                const struct srl__shm_bucket *ob = srl__shm_bucket(s, other);
                for (unsigned j = 0; j < SRL__SHM_SLOTS; j++)
                    if (ob->tags[j] != 0 && memcmp(srl__shm_slot(s, other, j), fp, SRL__SHM_FP_BYTES) == 0)
                        problem(r, "key in bucket %llu slot %u is also in bucket %llu slot %u",
                                (unsigned long long)b, i, (unsigned long long)other, j);
                srl__shm_unlock(s, other);
            } else if (rc != SRL_ECORRUPT) {
                /* A bad mutex kind is not reported here: the walk reports
                 * it once, when it gets to `other` (after b). */
                problem(r, "bucket %llu: lock not available", (unsigned long long)other);
            }
        }
    }
}

int64_t srl__shm_check(srl_limiter *lim, srl_report_fn fn, void *ctx)
{
    struct srl__shm *s = lim->impl;
    struct report r = {fn, ctx, 0};
    /* A truncated file: read only what is still backed by it (touching the
     * rest would raise SIGBUS here too). */
    uint64_t walk = s->buckets;
    uint64_t file = s->kind == SRL_STORE_SHARED ? srl__shm_file_bytes(s) : s->map_bytes;
    if (file < SRL__SHM_HEADER_BYTES) {
        problem(&r, "file: %llu bytes, shorter than the header page: it was truncated; "
                    "destroy the segment and restart its workers", (unsigned long long)file);
        return r.n;
    }
    check_header(s, &r);
    r.n += srl__shm_check_header(s, fn, ctx);
    if (file < s->map_bytes)
        walk = file <= SRL__SHM_HEADER_BYTES ? 0 : (file - SRL__SHM_HEADER_BYTES) / s->bucket_bytes;
    if (walk > s->buckets)
        walk = s->buckets;   /* layout 9: the operator area follows the table */
    for (uint64_t b = 0; b < walk; b++) {
        /* Before the lock: glibc aborts on some kind words. */
        unsigned found, want;
        if (srl__shm_mutex_kind_check(s, b, &found, &want) == SRL_ECORRUPT) {
            problem(&r, "bucket %llu: mutex kind 0x%x is not srl's (expected 0x%x)",
                    (unsigned long long)b, found, want);
            continue;
        }
        struct timespec deadline = SRL__SHM_NO_DEADLINE;
        if (srl__shm_lock(s, b, &deadline) != 0) {
            problem(&r, "bucket %llu: lock not available", (unsigned long long)b);
            continue;
        }
        check_bucket(s, b, srl__now(lim), &r);
        srl__shm_unlock(s, b);
    }
    return r.n;
}
