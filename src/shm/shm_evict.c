/*
 * shm_evict.c - on_full=evict (layout 9, issue 41 item 7): the slot a new
 * key takes when neither of its buckets has a free slot, a state at rest
 * (shm_table.c's reclaim comes first) or room by relocation.
 *
 * The victim is the occupied slot of the two candidate buckets that has
 * used the smallest share of its limit (a peek: limit - remaining, over
 * limit), ties to the oldest last admission (srl__compound_last_ns): least
 * recently used, as nginx's and HAProxy's tables drop theirs, but judged
 * by use first.  Why: an evicted key returns fresh, so what an eviction
 * costs is exactly the use it forgets; the key with the least is the
 * cheapest to forget, and a key that is being refused (all of its limit
 * used, and no admission lately, so plain LRU would pick it first) is the
 * last to be let off.  Never a kept slot (srl__shm_slot_kept: exempt,
 * banned by hand, own limits).
 *
 * Locks: both candidate buckets are held by the caller (decide_k's pair),
 * nothing else is taken.  Each slot is judged frozen (srl__shm_slot_current,
 * so its state is current and no lock-free CAS lands while it is read) and
 * thawed; the victim is frozen again while its tag is cleared, as
 * reclaim's eviction is, so a lock-free decider's CAS on it fails.
 *
 * May touch: the victim's tag, the bucket's evicted and gen, the header
 * page's evicted_active.  Calls only shm_slot.c and compound.c.
 */
#include "shm.h"

int srl__shm_evict_lru(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b1,
                       uint64_t b2, uint64_t now, uint64_t *fb)
{
    uint64_t cand[2] = {b1, b2};
    uint64_t best_b = 0, best_last = UINT64_MAX, best_used = 0, best_limit = 1;
    int best_i = -1;
    for (int c = 0; c < (b1 == b2 ? 1 : 2); c++) {
        uint64_t b = cand[c];
        struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
        for (unsigned i = 0; i < SRL__SHM_SLOTS; i++) {
            if (bk->tags[i] == 0)
                continue;
            const struct srl__compound *cmp = srl__shm_slot_current(s, p, b, i, now);
            if (!srl__shm_slot_kept(s, b, i, now)) {
                unsigned char st[s->state_bytes] __attribute__((aligned(16)));   /* read once */
                srl__shm_state_load(s, b, i, st);
                uint64_t last = srl__compound_last_ns(cmp, st);
                srl_decision d;
                srl__compound_decide(cmp, st, now, 1, 0, &d);   /* a peek: writes nothing */
                uint64_t limit = d.limit > 0 ? d.limit : 1;
                uint64_t left = d.allowed ? (uint64_t)d.remaining + 1 : 0;
                uint64_t used = left < limit ? limit - left : 0;
                /* used / limit < best_used / best_limit, in integers (each
                 * at most 2^32: the products fit 64 bits). */
                uint64_t a = used * best_limit, z = best_used * limit;
                if (best_i < 0 || a < z || (a == z && last < best_last)) {
                    best_b = b;
                    best_i = (int)i;
                    best_last = last;
                    best_used = used;
                    best_limit = limit;
                }
            }
            srl__shm_slot_thaw(s, b, i);
        }
    }
    if (best_i < 0)
        return -1;   /* every slot is kept: on_full decides (as allow) */
    unsigned i = (unsigned)best_i;
    struct srl__shm_bucket *bk = srl__shm_bucket(s, best_b);
    srl__shm_slot_freeze(s, best_b, i);
    srl__shm_tag_store(bk, i, 0);
    SRL__SHM_COUNT(bk->evicted, 1);
    __atomic_add_fetch(&srl__shm_live(s)->evicted_active, 1, __ATOMIC_RELAXED);
    srl__shm_gen_bump(s, best_b);
    srl__shm_slot_thaw(s, best_b, i);
    *fb = best_b;
    return best_i;
}
