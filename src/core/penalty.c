/*
 * penalty.c - one limit with its ban period (",penalty=15m"): the calls that
 * decide a single limit, used by compound.c and state.c for every limit.
 *
 * A limit without a penalty is its algorithm and nothing else: each call
 * here is then one branch and the vtable call (algo.h).  With a penalty the
 * limit's state is the algorithm's state, rounded up to 8 bytes, then one
 * u64 `until`: the end of the ban, 0 (or any time <= now) for none.
 *
 *   - A denial that commits (srl_acquire, not srl_peek) bans the key until
 *     now + penalty: the algorithm's state is untouched (a denial takes
 *     nothing), only `until` is written.
 *   - While banned, every request is denied with retry_after = until - now
 *     (at least the algorithm's own wait), and nothing is written.
 *   - A refund gives permits back to the algorithm and never lifts a ban.
 *   - At rest: not banned and the algorithm at rest.  Valid: the
 *     algorithm's state is valid and until <= now + penalty.
 * mod_evasive's DOSBlockingPeriod and HAProxy's gpc + expire pattern, in
 * the key's own state, under the key's lock like everything else.
 * No locks, no clock: pure functions of (policy, state, now).
 */
#include "algo.h"

#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)

static uint64_t *until_of(const srl_policy *p, const void *state)
{
    return (uint64_t *)((char *)state + ALIGN8(srl__algo_get(p->algorithm)->size(p)));
}

size_t srl__limit_size(const srl_policy *p)
{
    size_t n = srl__algo_get(p->algorithm)->size(p);
    return p->penalty_ns == 0 ? n : ALIGN8(n) + sizeof(uint64_t);
}

void srl__limit_init(const srl_policy *p, void *state, uint64_t now)
{
    srl__algo_get(p->algorithm)->init(p, state, now);
    if (p->penalty_ns != 0)
        *until_of(p, state) = 0;
}

void srl__limit_decide(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                       int commit, srl_decision *d)
{
    const struct srl__algo *a = srl__algo_get(p->algorithm);
    if (p->penalty_ns == 0) {
        a->decide(p, state, now, cost, commit, d);
        return;
    }
    uint64_t *until = until_of(p, state);
    a->decide(p, state, now, cost, commit && *until <= now, d);
    if (*until > now) {   /* banned: denied whatever the algorithm would say */
        uint64_t left = *until - now;
        d->allowed = 0;
        d->remaining = 0;
        if (d->retry_after_ns < left)
            d->retry_after_ns = left;
        if (d->reset_after_ns < left)
            d->reset_after_ns = left;
        return;
    }
    if (!d->allowed && commit)
        srl__limit_ban(p, state, now, d);
}

void srl__limit_ban(const srl_policy *p, void *state, uint64_t now, srl_decision *d)
{
    if (p->penalty_ns == 0 || *until_of(p, state) > now)
        return;   /* no ban period, or banned already: a ban is not extended */
    uint64_t end = srl__sat_add(now, p->penalty_ns);
    *until_of(p, state) = end;
    if (d->retry_after_ns < p->penalty_ns)
        d->retry_after_ns = p->penalty_ns;
    if (d->reset_after_ns < p->penalty_ns)
        d->reset_after_ns = p->penalty_ns;
}

void srl__limit_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost)
{
    srl__algo_get(p->algorithm)->refund(p, state, now, cost);
}

bool srl__limit_at_rest(const srl_policy *p, const void *state, uint64_t now)
{
    if (p->penalty_ns != 0 && *until_of(p, state) > now)
        return false;
    return srl__algo_get(p->algorithm)->at_rest(p, state, now);
}

bool srl__limit_valid(const srl_policy *p, const void *state, uint64_t now)
{
    if (p->penalty_ns != 0 && *until_of(p, state) > srl__sat_add(now, p->penalty_ns))
        return false;
    return srl__algo_get(p->algorithm)->valid(p, state, now);
}

uint64_t srl__limit_last_ns(const srl_policy *p, const void *state)
{
    return srl__algo_get(p->algorithm)->last_ns(p, state);
}

bool srl__limit_can_reserve(const srl_policy *p)
{
    const struct srl__algo *a = srl__algo_get(p->algorithm);
    return a->can_reserve != NULL && a->can_reserve(p);
}

uint64_t srl__limit_banned_ns(const srl_policy *p, const void *state, uint64_t now)
{
    if (p->penalty_ns == 0)
        return 0;
    uint64_t until = *until_of(p, state);
    return until > now ? until - now : 0;
}
