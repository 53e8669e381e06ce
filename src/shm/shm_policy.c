/*
 * shm_policy.c - the live policy of a segment (layout 6): its two copies in
 * header pages 1 and 2, and each handle's resolved views of them.
 *
 * Holds: the copy's checksum and sealing (srl__shm_policy_sum, _fill), the
 * validation of a copy as untrusted input (srl__shm_policy_read), and the
 * handle's views (struct srl__shm_pol: srl__shm_pol_get, _of, _free).
 *
 * Invariants.  policy_gen (struct srl__shm_live) names the current
 * generation g; copy g & 1 holds it, and copy (g - 1) & 1 holds g - 1 until
 * a changer, having converted every slot still on g - 1 (shm_change.c),
 * overwrites it with g + 1 and then publishes policy_gen = g + 1.  So a
 * reader that loaded g under a bucket lock can read copy g & 1 (and g - 1's
 * copy if a slot of that bucket still needs it) without racing a writer:
 * the changer that would overwrite either must first take that bucket's
 * lock in its sweep.  A copy is checked before any use: its sum, its
 * generation equal to the one asked for, its table by srl__tiers_valid,
 * tier names and count as the header's (indices given out by srl_tier_find
 * stay valid), a concurrency limit only as the header has it (units name
 * their holders and cannot be converted), every tier's state within the
 * segment's state_bytes.  Anything else is SRL_ECORRUPT.
 *
 * Views: private, immutable once published through s->pol (atomic
 * pointer), never freed before srl_close since other threads of the handle
 * may still read one.  Building is serialised per handle by s->pol_mu, a
 * leaf lock (taken under a bucket lock, never the other way round).
 *
 * Forward only: policy_gen is untrusted like every word of the segment.  A
 * generation behind the newest view the handle built (its copy valid: an
 * invalid one is SRL_ECORRUPT anyway) is never built again
 * (a writer flipping the word between two valid copies would otherwise
 * make a view per decision and reset every key the newer generation had
 * converted), and a handle builds at most SRL__SHM_POL_VIEWS views.  Both
 * refusals are SRL_ECORRUPT for the call and are counted in the header
 * page's policy_damage, which srl_check reports.
 */
#include "shm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t srl__shm_policy_sum(const struct srl__shm_policy *c)
{
    struct srl__shm_policy t;
    memcpy(&t, c, sizeof t);
    t.sum = 0;
    const unsigned char *b = (const unsigned char *)&t;
    uint64_t x = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof t; i++)
        x = (x ^ b[i]) * 0x100000001b3ull;
    return x;
}

void srl__shm_policy_fill(struct srl__shm_policy *c, uint32_t gen, const srl_limits *limits,
                          const srl_tier *tiers, uint32_t tier_count)
{
    memset(c, 0, sizeof *c);
    c->gen = gen;
    c->tier_count = tier_count;
    c->limits = *limits;
    if (tier_count > 1)
        memcpy(c->tiers, tiers, (tier_count - 1) * sizeof *tiers);
    c->sum = srl__shm_policy_sum(c);
}

static const struct srl__shm_policy *copy_at(const struct srl__shm *s, uint32_t gen)
{
    return (const struct srl__shm_policy *)(s->base + SRL__SHM_POLICY_OFFSET(gen & 1u));
}

static bool has_conc(const srl_limits *l)
{
    for (uint32_t i = 0; i < l->count && i < SRL_LIMITS_MAX; i++)
        if (l->limit[i].algorithm == SRL_CONCURRENCY)
            return true;
    return false;
}

static int bad(char *msg, size_t len, uint32_t gen, const char *why)
{
    if (msg != NULL && len > 0)
        snprintf(msg, len,
                 "policy copy %c (generation %u): %s: the segment's current policy is damaged; "
                 "destroy the segment and recreate it (rlctl destroy, rlctl create)",
                 (gen & 1u) ? 'B' : 'A', gen, why);
    return SRL_ECORRUPT;
}

int srl__shm_policy_read(const struct srl__shm *s, uint32_t gen, struct srl__shm_policy *out,
                         char *msg, size_t len)
{
    memcpy(out, copy_at(s, gen), sizeof *out);   /* one snapshot: untrusted */
    if (out->sum != srl__shm_policy_sum(out))
        return bad(msg, len, gen, "checksum does not match its fields");
    if (out->gen != gen)
        return bad(msg, len, gen, "it holds another generation");
    srl_limits canon;
    if (srl_limits_validate(&out->limits) != 0 ||
        srl__limits_canonical(&out->limits, &canon) != 0 ||
        memcmp(&canon, &out->limits, sizeof canon) != 0)
        return bad(msg, len, gen, "tier 0's limits are not valid");
    if (out->tier_count < 1 || out->tier_count > SRL_TIERS_MAX ||
        !srl__tiers_valid(&out->limits, out->tiers, out->tier_count - 1))
        return bad(msg, len, gen, "the tier table is not valid");
    /* The header is validated at open and covered by its checksum; the
     * handle holds the private tier names (s->lim.tier_def), which the
     * copy must keep: srl_tier_find's indices are for the segment's life. */
    if (out->tier_count != s->lim.tier_count)
        return bad(msg, len, gen, "its number of tiers differs from the segment's");
    for (uint32_t t = 1; t < out->tier_count; t++)
        if (memcmp(out->tiers[t - 1].name, s->lim.tier_def[t - 1].name,
                   sizeof out->tiers[0].name) != 0)
            return bad(msg, len, gen, "a tier name differs from the segment's");
    /* The header's limits as validated at open, not the mapped header
     * (writable by anyone who can write the segment): for a segment with a
     * concurrency limit they are its only policy ever. */
    const srl_limits *mine = &s->created;
    if (has_conc(&out->limits) != has_conc(mine) ||
        (has_conc(mine) && memcmp(&out->limits, mine, sizeof canon) != 0))
        return bad(msg, len, gen, "a concurrency limit differs from the segment's");
    if (srl_limits_state_size(&out->limits) > s->state_bytes)
        return bad(msg, len, gen, "tier 0's state does not fit the slots");
    for (uint32_t t = 1; t < out->tier_count; t++)
        if (srl_limits_state_size(&out->tiers[t - 1].limits) > s->state_bytes)
            return bad(msg, len, gen, "a tier's state does not fit the slots");
    return 0;
}

/* Resolve a validated copy into a view. */
static struct srl__shm_pol *view_new(struct srl__shm *s, const struct srl__shm_policy *c)
{
    struct srl__shm_pol *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->gen = c->gen;
    p->tier_count = c->tier_count;
    memcpy(p->def[0].name, "default", sizeof "default");
    p->def[0].limits = c->limits;
    for (uint32_t t = 1; t < c->tier_count; t++)
        p->def[t] = c->tiers[t - 1];
    for (uint32_t t = 0; t < c->tier_count; t++) {
        if (srl__compound_init(&p->cmp[t], &p->def[t].limits) != 0) {   /* validated: cannot */
            free(p);
            return NULL;
        }
        if (srl__shm_lf_tier(&p->cmp[t]))
            p->lf_tiers |= 1u << t;
    }
    p->next_free = s->pols;
    s->pols = p;
    s->pol_count++;
    return p;
}

/* Build (s->pol_mu held) the view of gen, with gen - 1's as prev.
 * *damage: gen is behind the newest view (policy_gen went backwards: an
 * honest changer only ever moves it forward, so an older generation is a
 * writer's doing; building its view again would judge every key the newer
 * one converted as damage and reset it), or the views would pass
 * SRL__SHM_POL_VIEWS (a writer forging generation after generation would
 * grow the handle by a view per decision). */
static const struct srl__shm_pol *build(struct srl__shm *s, uint32_t gen, bool *damage)
{
    struct srl__shm_pol *cur = __atomic_load_n(&s->pol, __ATOMIC_ACQUIRE);
    if (cur != NULL && cur->gen == gen)
        return cur;   /* another thread built it meanwhile */
    /* A copy that is not valid is SRL_ECORRUPT as it stands (srl_check
     * names the copy); only a valid one can be a generation gone back. */
    struct srl__shm_policy c;
    if (srl__shm_policy_read(s, gen, &c, NULL, 0) != 0)
        return NULL;
    if (cur != NULL && (int32_t)(gen - cur->gen) < 0) {
        *damage = true;
        return NULL;
    }
    uint32_t need = cur != NULL && cur->gen == gen - 1u ? 1 : 2;
    if (s->pol_count + need > SRL__SHM_POL_VIEWS) {
        *damage = true;
        return NULL;
    }
    struct srl__shm_pol *p = view_new(s, &c);
    if (p == NULL)
        return NULL;
    if (cur != NULL && cur->gen == gen - 1u) {
        p->prev = cur;
    } else if (srl__shm_policy_read(s, gen - 1u, &c, NULL, 0) == 0) {
        /* Its copy may already hold gen + 1 (a changer between its sweep
         * and its publication): then no slot is on gen - 1 any more, and
         * prev stays NULL. */
        p->prev = view_new(s, &c);
    }
    __atomic_store_n(&s->pol, p, __ATOMIC_RELEASE);
    return p;
}

static const struct srl__shm_pol *pol_of(struct srl__shm *s, uint32_t gen, bool *damage)
{
    const struct srl__shm_pol *p = __atomic_load_n(&s->pol, __ATOMIC_ACQUIRE);
    if (p != NULL && p->gen == gen)
        return p;
    pthread_mutex_lock(&s->pol_mu);
    p = build(s, gen, damage);
    pthread_mutex_unlock(&s->pol_mu);
    return p;
}

const struct srl__shm_pol *srl__shm_pol_of(struct srl__shm *s, uint32_t gen)
{
    bool damage = false;
    return pol_of(s, gen, &damage);
}

uint32_t srl__shm_pol_count(struct srl__shm *s)
{
    pthread_mutex_lock(&s->pol_mu);
    uint32_t n = s->pol_count;
    pthread_mutex_unlock(&s->pol_mu);
    return n;
}

const struct srl__shm_pol *srl__shm_pol_get(struct srl__shm *s, bool locked)
{
    uint32_t *g = &srl__shm_live(s)->policy_gen;
    for (int tries = 0;; tries++) {
        uint32_t gen = __atomic_load_n(g, __ATOMIC_ACQUIRE);   /* read once (shm.h) */
        bool damage = false;
        const struct srl__shm_pol *p = pol_of(s, gen, &damage);
        if (p != NULL)
            return p;
        /* Without a bucket lock, a changer may have rewritten the copy
         * between the load and the read; and with one or without, another
         * thread of this handle may have built the next generation after
         * our load (then the word has moved on too): ask again if the word
         * moved.  Under a bucket lock a copy cannot change while held, so a
         * NULL for a word that stayed is the answer. */
        uint32_t again = __atomic_load_n(g, __ATOMIC_ACQUIRE);
        if (again != gen && tries < 3 && (!locked || damage))
            continue;
        if (damage)
            __atomic_add_fetch(&srl__shm_live(s)->policy_damage, 1, __ATOMIC_RELAXED);
        return NULL;
    }
}

void srl__shm_pol_free(struct srl__shm *s)
{
    for (struct srl__shm_pol *p = s->pols, *n; p != NULL; p = n) {
        n = p->next_free;
        free(p);
    }
    s->pols = NULL;
    s->pol = NULL;
    s->pol_count = 0;
}
