/*
 * shm_keylim.c - the key-limits table of a segment's operator area
 * (layout 9, shm.h "Layout 9, operator control"): the limit sets that keys
 * decided by their own limits name (srl_key_set_limits, srl_acquire_limits),
 * and this handle's resolved compounds of them.
 *
 * WHAT IT HOLDS
 *   - srl__shm_keylim_find: the index of a limit set (canonical bytes
 *     compared, so equal limits share one entry), claimed when new.
 *   - srl__shm_keylim_cmp: entry idx's compound, resolved once per handle
 *     and kept (s->keylim_cmp) until close.
 *
 * INVARIANTS
 *   - An entry goes FREE -> BUSY -> READY once (CAS, fill, seal, release)
 *     and is never freed while the segment lives: a slot that names it can
 *     always be decided, and a handle's compound of it never goes stale.
 *     So the table holds at most SRL__SHM_KEYLIMS distinct sets over a
 *     segment's life (srl.h says so).
 *   - An entry is untrusted: it is used only from a private copy whose sum,
 *     state word, canonical form and state size (within the segment's
 *     slots) were checked.  A bad one is absent (NULL): the slot naming it
 *     is damage (shm_slot.c resets it and counts it).
 *   - A BUSY entry whose claimer died stays BUSY: one entry lost, never a
 *     wrong limit (no one reads a BUSY entry).
 *
 * LOCKS
 *   None: the table is claimed by CAS, the per-handle cache filled by CAS
 *   (a loser frees its copy).  Callers may hold a bucket lock.
 *
 * MAY TOUCH
 *   The key-limits table's entries (claiming only), s->keylim_cmp.  Calls
 *   only compound.c and errdetail.c: shm_slot.c and shm_keyset.c call it.
 */
#include "shm.h"
#include "errdetail.h"

#include <stdlib.h>
#include <string.h>

static struct srl__shm_keylim *keylim_table(const struct srl__shm *s)
{
    return (struct srl__shm_keylim *)(s->base + s->map_bytes - SRL__SHM_OP_BYTES);
}

/* FNV-1a 64 over the entry with state and sum taken as 0. */
uint64_t srl__shm_keylim_sum(const struct srl__shm_keylim *e)
{
    struct srl__shm_keylim c;
    memcpy(&c, e, sizeof c);
    c.state = 0;
    c.sum = 0;
    const unsigned char *p = (const unsigned char *)&c;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof c; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Resolve a private copy of an entry as untrusted input: 0 with *c set,
 * else nonzero (the entry is absent). */
static int keylim_resolve(const struct srl__shm *s, const struct srl__shm_keylim *copy,
                          struct srl__compound *c)
{
    srl_limits canon;
    if (copy->sum != srl__shm_keylim_sum(copy) || srl__limits_canonical(&copy->limits, &canon) != 0 ||
        memcmp(&canon, &copy->limits, sizeof canon) != 0 || srl__compound_init(c, &canon) != 0)
        return -1;
    if (c->state_bytes != copy->state_bytes || c->state_bytes > s->state_bytes || c->conc >= 0)
        return -1;
    return 0;
}

const struct srl__compound *srl__shm_keylim_cmp(struct srl__shm *s, unsigned idx)
{
    if (idx >= SRL__SHM_KEYLIMS)
        return NULL;
    struct srl__compound *have = __atomic_load_n(&s->keylim_cmp[idx], __ATOMIC_ACQUIRE);
    if (have != NULL)
        return have;
    const struct srl__shm_keylim *e = &keylim_table(s)[idx];
    if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != SRL__OP_READY)
        return NULL;
    struct srl__shm_keylim copy;   /* read once (shm.h): judged and used as this copy */
    memcpy(&copy, e, sizeof copy);
    struct srl__compound *c = malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    if (keylim_resolve(s, &copy, c) != 0) {
        free(c);
        return NULL;
    }
    struct srl__compound *none = NULL;
    if (!__atomic_compare_exchange_n(&s->keylim_cmp[idx], &none, c, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        free(c);   /* another thread of the handle resolved it first */
        return none;
    }
    return c;
}

int srl__shm_keylim_find(struct srl__shm *s, const srl_limits *l)
{
    struct srl__shm_keylim want;
    memset(&want, 0, sizeof want);
    if (srl__limits_canonical(l, &want.limits) != 0) {
        srl__err_set("the key's limits are not a valid policy");
        return SRL_EPOLICY;
    }
    struct srl__compound c;
    if (srl__compound_init(&c, &want.limits) != 0) {
        srl__err_set("the key's limits are not a valid policy");
        return SRL_EPOLICY;
    }
    if (c.conc >= 0) {
        srl__err_set("a key's own limits cannot hold a concurrency limit");
        return SRL_EPOLICY;
    }
    if (c.state_bytes > s->state_bytes) {
        srl__err_set("the key's limits need a state of %u bytes; this segment's slots hold at "
                     "most %u (its largest state): create the segment with that policy in a tier",
                     c.state_bytes, s->state_bytes);
        return SRL_EPOLICY;
    }
    want.state_bytes = c.state_bytes;
    want.sum = srl__shm_keylim_sum(&want);
    struct srl__shm_keylim *t = keylim_table(s);
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned r = 0; r < SRL__SHM_KEYLIMS; r++) {
            uint32_t st = __atomic_load_n(&t[r].state, __ATOMIC_ACQUIRE);
            if (st == SRL__OP_READY) {
                /* Equal canonical bytes: the same set (and only a valid
                 * entry is taken: a forged one that matches is still
                 * judged by srl__shm_keylim_cmp before any use). */
                if (memcmp(&t[r].limits, &want.limits, sizeof want.limits) == 0 &&
                    srl__shm_keylim_cmp(s, r) != NULL)
                    return (int)r;
                continue;
            }
            uint32_t free_st = SRL__OP_FREE;
            if (pass == 1 && st == SRL__OP_FREE &&
                __atomic_compare_exchange_n(&t[r].state, &free_st, SRL__OP_BUSY, false,
                                            __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                t[r].state_bytes = want.state_bytes;
                memcpy(&t[r].limits, &want.limits, sizeof want.limits);
                t[r].sum = want.sum;
                __atomic_store_n(&t[r].state, SRL__OP_READY, __ATOMIC_RELEASE);
                return srl__shm_keylim_cmp(s, r) != NULL ? (int)r : SRL_ENOMEM;
            }
        }
    }
    srl__err_set("the segment's table of per-key limit sets is full (%u distinct sets, kept "
                 "while the segment lives): give keys one of the sets in use, or recreate the "
                 "segment", SRL__SHM_KEYLIMS);
    return SRL_ENOSPC;
}

void srl__shm_keylim_free(struct srl__shm *s)
{
    for (unsigned r = 0; r < SRL__SHM_KEYLIMS; r++) {
        free(s->keylim_cmp[r]);
        s->keylim_cmp[r] = NULL;
    }
}
