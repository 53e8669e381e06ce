/*
 * compound.h - a limiter's limits, resolved once at open: the calls every
 * store makes on one key's state (internal).
 *
 * A store holds one srl__compound in its limiter head (limiter.h) and never
 * looks at an algorithm itself: it hands the key's state bytes and `now` to
 * these calls under the key's lock.  One limit is a compound of one whose
 * state sits at offset 0, so a single-limit store decides through one
 * vtable call (the fast path below), with no loop and no second pass.
 *
 * All or nothing (several limits): a state of up to 256 bytes is committed
 * limit by limit from a stack copy that a denial restores (one decide per
 * limit); a larger one (long sliding logs) decides every limit with commit
 * = 0 first and only if all admit does each decide again with commit = 1.
 * decide() is a pure function of (state, now), so either way a denial
 * leaves every byte as it was (a ban period aside, which is the point of
 * one: see penalty.c).
 *
 * A concurrency limit (at most one per compound) takes part in srl__compound_enter
 * only: its units need a holder.  srl__compound_decide with commit on a compound
 * holding one is a caller bug (the facade refuses srl_acquire with
 * SRL_ENOTSUP before any store is reached).
 *
 * No locks, no I/O, no clock: the caller serialises access to the state and
 * passes the time (and, for enter, the liveness test of a holder).
 */
#ifndef SRL_COMPOUND_H
#define SRL_COMPOUND_H

#include <stdbool.h>
#include <stdint.h>

#include "algo.h"

struct srl__compound {
    srl_limits limits;                          /* validated, canonical */
    const struct srl__algo *algo[SRL_LIMITS_MAX];
    uint32_t off[SRL_LIMITS_MAX];               /* limit i's state at off[i] */
    uint32_t count;
    uint32_t state_bytes;                       /* sum of 8-aligned sizes */
    uint32_t min_permits;                       /* the largest cost every limit takes */
    int32_t conc;                               /* index of the concurrency limit, -1 none */
    int penalty;                                /* some limit has a ban period */
    int reserve;                                /* every limit can wait (srl_reserve) */
};

/* *out = l's used limits (limit[0..count)) with every other byte zero: the
 * form segments store and compare.  0 or SRL_EPOLICY (l invalid). */
int srl__limits_canonical(const srl_limits *l, srl_limits *out);

/* Resolve a validated srl_limits (srl_limits_validate == 0, at most one
 * concurrency limit).  Returns 0 or SRL_EPOLICY. */
int srl__compound_init(struct srl__compound *c, const srl_limits *l);

void srl__compound_state_init(const struct srl__compound *c, void *state, uint64_t now);

/* The compound decision (srl_limits_state_acquire describes it); commit = 0
 * writes nothing.  cost is 1..min_permits. */
void srl__compound_decide(const struct srl__compound *c, void *state, uint64_t now, uint32_t cost,
                          int commit, srl_decision *d);

/* srl__compound_decide of a compound of one limit with no ban period, inline: the
 * one vtable call and the fields a compound decision sets.  The lock-free
 * paths' tiers are all of this kind (they check it when the view is built),
 * and so is srl__compound_decide's own common case. */
static inline void srl__compound_decide_one(const struct srl__compound *c, void *state,
                                            uint64_t now, uint32_t cost, int commit,
                                            srl_decision *d)
{
    c->algo[0]->decide(&c->limits.limit[0], state, now, cost, commit, d);
    d->binding = 0;
    d->wait_ns = 0;
    d->reserved[0] = d->reserved[1] = 0;
}

/* srl_reserve on one key (srl_limits_state_reserve describes it), always
 * committing.  max_wait 0 is srl__compound_decide with commit; max_wait > 0
 * needs c->reserve.  Reservable compounds hold only token buckets and
 * GCRAs, so a state fits the one-pass stack copy. */
void srl__compound_reserve(const struct srl__compound *c, void *state, uint64_t now, uint32_t cost,
                           uint64_t max_wait, srl_decision *d);
void srl__compound_refund(const struct srl__compound *c, void *state, uint64_t now, uint32_t cost);
bool srl__compound_at_rest(const struct srl__compound *c, const void *state, uint64_t now);
bool srl__compound_valid(const struct srl__compound *c, const void *state, uint64_t now);
/* The key's ",penalty=" side at now: the most bans any limit remembers
 * (escalation), the longest ban still running (0: none), and forgiving
 * both (srl_key_unban; the algorithms' states untouched). */
uint32_t srl__compound_offences(const struct srl__compound *c, const void *state, uint64_t now);
uint64_t srl__compound_banned_ns(const struct srl__compound *c, const void *state, uint64_t now);
void srl__compound_forgive(const struct srl__compound *c, void *state);
/* The latest last_ns over the limits (0: none known). */
uint64_t srl__compound_last_ns(const struct srl__compound *c, const void *state);

/* The concurrency limit's state inside a compound state (c->conc >= 0). */
static inline void *srl__compound_conc_state(const struct srl__compound *c, void *state)
{
    return (char *)state + c->off[c->conc];
}

/* srl_enter on one key: reclaim the concurrency limit's dead or expired
 * units if it is full, then admit only if every limit admits (cost 1), and
 * then take one unit for `who` and one permit from every rate limit.  On
 * admission *entry and *gen name the unit (gen != 0), else *gen = 0 and nothing
 * was taken.  *reclaimed: units freed as dead or abandoned. */
void srl__compound_enter(const struct srl__compound *c, void *state, uint64_t now,
                         const struct srl__proc *who, srl__conc_alive_fn alive, void *ctx,
                         srl_decision *d, uint32_t *entry, uint32_t *gen, uint32_t *reclaimed);
/* srl_leave: release unit (entry, gen) if `pid` holds it.  0, or
 * SRL_ENOENT (left already, reclaimed, or another process's unit). */
int srl__compound_leave(const struct srl__compound *c, void *state, uint32_t entry, uint32_t gen,
                        int32_t pid);
/* Units in flight (0 without a concurrency limit). */
uint32_t srl__compound_inflight(const struct srl__compound *c, const void *state);

#endif
