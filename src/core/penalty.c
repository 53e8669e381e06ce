/*
 * penalty.c - one limit with its ban period (",penalty=15m"): the calls that
 * decide a single limit, used by compound.c and state.c for every limit.
 *
 * A limit without a penalty is its algorithm and nothing else: each call
 * here is then one branch and the vtable call (algo.h).  With a penalty the
 * limit's state is the algorithm's state, rounded up to 8 bytes, then one
 * u64 `until`: the end of the ban, 0 (or any time <= now) for none.  An
 * escalating penalty (",penalty=MIN..MAX", penalty_max_s != 0) adds a u64
 * `k`, the last ban's doubling count: that ban lasted min(MIN << k, MAX).
 *
 * Escalation (fail2ban's bantime.increment): a ban that starts while the
 * last one is remembered, now < until + MAX (the memory window: MAX after
 * the last ban ended), lasts twice as long, k + 1, up to MAX; any other ban
 * starts again at MIN, k = 0.  So the count is per key and per limit, in
 * the key's state: exact under the key's lock on every store, dropped with
 * the state (srl_reset_key, eviction, which it keeps from until forgotten).
 * `until` doubles as the time of the last ban, so no clock word is needed.
 *
 *   - A denial that commits (srl_acquire, not srl_peek) bans the key until
 *     now + penalty: the algorithm's state is untouched (a denial takes
 *     nothing), only `until` is written.
 *   - While banned, every request is denied with retry_after = until - now
 *     (at least the algorithm's own wait), and nothing is written.
 *   - A refund gives permits back to the algorithm and never lifts a ban.
 *   - The decision whose denial starts a ban carries
 *     SRL_DECISION_BAN_STARTED: one per ban, since only a denial at
 *     until <= now starts one and it moves until past now.
 *   - At rest: not banned, no offence remembered (escalating) and the
 *     algorithm at rest.  Valid: the algorithm's state is valid, until <=
 *     now + the longest ban, and k <= K_MAX.
 * mod_evasive's DOSBlockingPeriod and HAProxy's gpc + expire pattern, in
 * the key's own state, under the key's lock like everything else.
 * No locks, no clock: pure functions of (policy, state, now).
 */
#include "algo.h"

#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)
/* The largest doubling count kept: MIN << 63 is past any MAX already. */
#define K_MAX 63u

static uint64_t *until_of(const srl_policy *p, const void *state)
{
    return (uint64_t *)((char *)state + ALIGN8(srl__algo_get(p->algorithm)->size(p)));
}

/* The escalation word after until (penalty_max_s != 0 only). */
static uint64_t *k_of(const srl_policy *p, const void *state)
{
    return until_of(p, state) + 1;
}

/* The longest ban of p, in ns: MAX, or the one penalty. */
static uint64_t ban_max_ns(const srl_policy *p)
{
    return p->penalty_max_s != 0 ? (uint64_t)p->penalty_max_s * SRL_NS_PER_S : p->penalty_ns;
}

/* Whether p's last ban (ended at until) is still remembered at now. */
static bool remembered(const srl_policy *p, uint64_t until, uint64_t now)
{
    return p->penalty_max_s != 0 && until != 0 && now < srl__sat_add(until, ban_max_ns(p));
}

/* A ban of doubling count k: min(MIN << k, MAX). */
static uint64_t ban_ns(const srl_policy *p, uint64_t k)
{
    uint64_t max = ban_max_ns(p);
    if (k >= 64 || p->penalty_ns > (max >> k))
        return max;
    return p->penalty_ns << k;
}

size_t srl__limit_size(const srl_policy *p)
{
    size_t n = srl__algo_get(p->algorithm)->size(p);
    if (p->penalty_ns == 0)
        return n;
    return ALIGN8(n) + (p->penalty_max_s != 0 ? 2 : 1) * sizeof(uint64_t);
}

void srl__limit_init(const srl_policy *p, void *state, uint64_t now)
{
    srl__algo_get(p->algorithm)->init(p, state, now);
    if (p->penalty_ns != 0)
        *until_of(p, state) = 0;
    if (p->penalty_max_s != 0)
        *k_of(p, state) = 0;
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
        srl__decision_banned(d, *until - now);
        return;
    }
    if (!d->allowed && commit)
        srl__limit_ban(p, state, now, d);
}

void srl__limit_ban(const srl_policy *p, void *state, uint64_t now, srl_decision *d)
{
    uint64_t until = p->penalty_ns == 0 ? 0 : *until_of(p, state);
    if (p->penalty_ns == 0 || until > now)
        return;   /* no ban period, or banned already: a ban is not extended */
    uint64_t len = p->penalty_ns;
    if (p->penalty_max_s != 0) {
        uint64_t k = *k_of(p, state);
        k = !remembered(p, until, now) ? 0 : k < K_MAX ? k + 1 : K_MAX;
        *k_of(p, state) = k;
        len = ban_ns(p, k);
    }
    *until_of(p, state) = srl__sat_add(now, len);
    d->flags |= SRL_DECISION_BAN_STARTED;
    if (d->retry_after_ns < len)
        d->retry_after_ns = len;
    if (d->reset_after_ns < len)
        d->reset_after_ns = len;
}

void srl__limit_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost)
{
    srl__algo_get(p->algorithm)->refund(p, state, now, cost);
}

bool srl__limit_at_rest(const srl_policy *p, const void *state, uint64_t now)
{
    if (p->penalty_ns != 0 && *until_of(p, state) > now)
        return false;
    if (p->penalty_max_s != 0 && remembered(p, *until_of(p, state), now))
        return false;   /* a fresh state would not double its next ban */
    return srl__algo_get(p->algorithm)->at_rest(p, state, now);
}

bool srl__limit_valid(const srl_policy *p, const void *state, uint64_t now)
{
    if (p->penalty_ns != 0 && *until_of(p, state) > srl__sat_add(now, ban_max_ns(p)))
        return false;
    if (p->penalty_max_s != 0 && *k_of(p, state) > K_MAX)
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

uint32_t srl__limit_offences(const srl_policy *p, const void *state, uint64_t now)
{
    if (p->penalty_max_s == 0)
        return 0;
    uint64_t until = *until_of(p, state);
    return remembered(p, until, now) ? (uint32_t)*k_of(p, state) + 1 : 0;
}

void srl__limit_forgive(const srl_policy *p, void *state)
{
    if (p->penalty_ns != 0)
        *until_of(p, state) = 0;
    if (p->penalty_max_s != 0)
        *k_of(p, state) = 0;
}
