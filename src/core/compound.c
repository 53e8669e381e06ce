/*
 * compound.c - one key's state under a compound policy: the store-facing
 * srl__compound_* calls (compound.h) and the public srl_limits_state_* built on
 * them.  The text side of srl_limits (parse, format, validate) is limits.c.
 *
 * Layout of a compound state: limit i's state at off[i], each size rounded
 * up to 8, back to back, in the order the policy text gave; each slice is
 * byte for byte that limit's single state, so tools read one limit with the
 * srl_state_* calls at srl_limits_state_offset.
 */
#include <assert.h>
#include <string.h>

#include "compound.h"

#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)
/* Compound states up to this size are committed in one pass (see
 * srl__compound_decide); larger ones (long sliding logs) in two. */
#define SAVE_MAX 256u

int srl__limits_canonical(const srl_limits *l, srl_limits *out)
{
    if (srl_limits_validate(l) != 0)
        return SRL_EPOLICY;
    srl_limits c;
    memset(&c, 0, sizeof c);
    c.count = l->count;
    for (uint32_t i = 0; i < l->count; i++) {
        c.limit[i].algorithm = l->limit[i].algorithm;
        c.limit[i].permits = l->limit[i].permits;
        c.limit[i].window_ns = l->limit[i].window_ns;
        /* burst = permits is no burst: one canonical form for one behaviour */
        c.limit[i].burst = l->limit[i].burst == l->limit[i].permits ? 0 : l->limit[i].burst;
        c.limit[i].penalty_ns = l->limit[i].penalty_ns;
        c.limit[i].penalty_max_s = l->limit[i].penalty_max_s;
    }
    *out = c;
    return 0;
}

int srl__compound_init(struct srl__compound *c, const srl_limits *l)
{
    if (srl_limits_validate(l) != 0)
        return SRL_EPOLICY;
    memset(c, 0, sizeof *c);
    c->limits = *l;
    c->count = l->count;
    c->conc = -1;
    c->min_permits = UINT32_MAX;
    c->reserve = 1;
    size_t off = 0;
    for (uint32_t i = 0; i < l->count; i++) {
        const srl_policy *p = &l->limit[i];
        c->algo[i] = srl__algo_get(p->algorithm);
        c->off[i] = (uint32_t)off;
        off += ALIGN8(srl__limit_size(p));
        c->penalty |= p->penalty_ns != 0;
        c->reserve &= srl__limit_can_reserve(p);
        if (srl__capacity(p) < c->min_permits)
            c->min_permits = srl__capacity(p);
        if (p->algorithm == SRL_CONCURRENCY)
            c->conc = (int32_t)i;
    }
    c->state_bytes = (uint32_t)off;
    return 0;
}

void srl__compound_state_init(const struct srl__compound *c, void *state, uint64_t now)
{
    for (uint32_t i = 0; i < c->count; i++)
        srl__limit_init(&c->limits.limit[i], (char *)state + c->off[i], now);
}

/* The fields only srl__compound_reserve sets: zero from every other decision. */
static void clear_wait(srl_decision *d)
{
    d->wait_ns = 0;
    d->reserved[0] = d->reserved[1] = 0;
}

/* Is decision a more binding than b?  Among denials the largest retry_after;
 * an allowed one never binds over a denial; among admissions the least
 * remaining.  Ties keep the earlier limit. */
static int binds_more(const srl_decision *a, const srl_decision *b)
{
    if (a->allowed != b->allowed)
        return !a->allowed;
    if (!a->allowed)
        return a->retry_after_ns > b->retry_after_ns;
    return a->remaining < b->remaining;
}

/* Fold per-limit decisions into the compound one. */
static void fold(const struct srl__compound *c, const srl_decision *each, srl_decision *d)
{
    uint32_t b = 0;
    uint32_t remaining = each[0].remaining;
    uint64_t reset = each[0].reset_after_ns;
    unsigned started = each[0].flags & SRL_DECISION_BAN_STARTED;
    for (uint32_t i = 1; i < c->count; i++) {
        if (binds_more(&each[i], &each[b]))
            b = i;
        if (each[i].remaining < remaining)
            remaining = each[i].remaining;
        if (each[i].reset_after_ns > reset)
            reset = each[i].reset_after_ns;
        started |= each[i].flags & SRL_DECISION_BAN_STARTED;
    }
    *d = each[b];
    d->remaining = remaining;
    d->reset_after_ns = reset;
    d->binding = b;
    d->flags |= started;   /* any limit's ban that started is the request's */
}

/* A committed denial: each limit that denied bans the key for its penalty
 * (the others, and every algorithm state, stay as they were). */
static void ban_deniers(const struct srl__compound *c, void *state, uint64_t now, int32_t skip,
                        srl_decision *each)
{
    if (!c->penalty)
        return;
    for (uint32_t i = 0; i < c->count; i++)
        if ((int32_t)i != skip && !each[i].allowed)
            srl__limit_ban(&c->limits.limit[i], (char *)state + c->off[i], now, &each[i]);
}

/* Decide every limit but `skip` without writing; 1 if all admit. */
static int dry_run(const struct srl__compound *c, void *state, uint64_t now, uint32_t cost,
                   int32_t skip, srl_decision *each)
{
    int all = 1;
    for (uint32_t i = 0; i < c->count; i++) {
        if ((int32_t)i == skip)
            continue;
        srl__limit_decide(&c->limits.limit[i], (char *)state + c->off[i], now, cost, 0,
                          &each[i]);
        all &= each[i].allowed != 0;
    }
    return all;
}

void srl__compound_decide(const struct srl__compound *c, void *state, uint64_t now, uint32_t cost,
                          int commit, srl_decision *d)
{
    assert(!(commit && c->conc >= 0));
    if (c->count == 1 && !c->penalty) {   /* the common case: the vtable's one call */
        srl__compound_decide_one(c, state, now, cost, commit, d);
        return;
    }
    if (c->count == 1) {
        srl__limit_decide(&c->limits.limit[0], state, now, cost, commit, d);
        d->binding = 0;
        clear_wait(d);
        return;
    }
    srl_decision each[SRL_LIMITS_MAX];
    if (commit && c->state_bytes <= SAVE_MAX) {
        /* Commit limit by limit on the state itself, undoing all of it
         * from a copy if one denies: the admit path decides each limit
         * once, not twice.  decide() is pure, so a committing call reports
         * what the dry run would have, and the limits after a denier are
         * decided without writing, as in the two-pass form. */
        unsigned char save[SAVE_MAX] __attribute__((aligned(8)));
        memcpy(save, state, c->state_bytes);
        uint32_t i = 0;
        for (; i < c->count; i++) {
            srl__limit_decide(&c->limits.limit[i], (char *)state + c->off[i], now, cost, 1,
                              &each[i]);
            if (!each[i].allowed)
                break;
        }
        if (i < c->count) {
            memcpy(state, save, c->state_bytes);   /* nothing taken, no ban yet */
            for (uint32_t j = i; j < c->count; j++)
                srl__limit_decide(&c->limits.limit[j], (char *)state + c->off[j], now, cost, 0,
                                  &each[j]);
            ban_deniers(c, state, now, -1, each);
        }
        fold(c, each, d);
        clear_wait(d);
        return;
    }
    int all = dry_run(c, state, now, cost, -1, each);
    if (all && commit)
        for (uint32_t i = 0; i < c->count; i++)
            srl__limit_decide(&c->limits.limit[i], (char *)state + c->off[i], now, cost, 1,
                              &each[i]);
    else if (commit)
        ban_deniers(c, state, now, -1, each);
    fold(c, each, d);
    clear_wait(d);
}

/* The waits of every limit: each is its own dry decision's retry_after,
 * exact to the ns, and falls by one ns a ns until it is 0 (nothing else
 * writes the state meanwhile: we hold the lock).  So the compound's wait is
 * the largest, and a reservation with max_wait succeeds max_wait before it. */
void srl__compound_reserve(const struct srl__compound *c, void *state, uint64_t now, uint32_t cost,
                           uint64_t max_wait, srl_decision *d)
{
    srl_decision each[SRL_LIMITS_MAX];
    uint64_t wait = 0, banned = 0;
    uint32_t wb = 0;               /* the limit that waits longest binds */
    if (max_wait != 0) {
        assert(c->reserve && c->state_bytes <= SAVE_MAX);
        for (uint32_t i = 0; i < c->count; i++) {
            const srl_policy *p = &c->limits.limit[i];
            const char *si = (const char *)state + c->off[i];
            uint64_t b = srl__limit_banned_ns(p, si, now);
            banned = b > banned ? b : banned;
            srl__limit_decide(p, (void *)si, now, cost, 0, &each[i]);
            if (!each[i].allowed && each[i].retry_after_ns > wait) {
                wait = each[i].retry_after_ns;
                wb = i;
            }
        }
    }
    if (wait == 0 || banned != 0 || wait > max_wait) {
        /* Admitted now, or refused: srl_acquire's own decision (and ban). */
        srl__compound_decide(c, state, now, cost, 1, d);
        if (!d->allowed && max_wait != 0) {
            uint64_t left = wait - (wait < max_wait ? wait : max_wait);
            for (uint32_t i = 0; i < c->count; i++) {
                uint64_t b = srl__limit_banned_ns(&c->limits.limit[i],
                                                  (const char *)state + c->off[i], now);
                left = b > left ? b : left;
            }
            d->retry_after_ns = left;
        }
        return;
    }
    /* Every limit takes cost at the one instant the request acts: each
     * admits there (its wait is at most `wait`), so the copy is only a
     * guard against a state no valid history leaves. */
    uint64_t at = srl__sat_add(now, wait);   /* a ticker near 2^64 saturates */
    unsigned char save[SAVE_MAX] __attribute__((aligned(8)));
    memcpy(save, state, c->state_bytes);
    for (uint32_t i = 0; i < c->count; i++) {
        srl__limit_decide(&c->limits.limit[i], (char *)state + c->off[i], at, cost, 1, &each[i]);
        if (!each[i].allowed) {
            memcpy(state, save, c->state_bytes);
            srl__compound_decide(c, state, now, cost, 1, d);
            return;
        }
    }
    fold(c, each, d);
    d->binding = wb;
    d->limit = each[wb].limit;
    d->remaining = 0;              /* nothing is free before the wait ends */
    d->retry_after_ns = 0;
    d->reset_after_ns = srl__sat_add(d->reset_after_ns, wait);
    d->wait_ns = wait;
    d->reserved[0] = d->reserved[1] = 0;
}

void srl__compound_refund(const struct srl__compound *c, void *state, uint64_t now, uint32_t cost)
{
    for (uint32_t i = 0; i < c->count; i++)
        if ((int32_t)i != c->conc)
            srl__limit_refund(&c->limits.limit[i], (char *)state + c->off[i], now, cost);
}

bool srl__compound_at_rest(const struct srl__compound *c, const void *state, uint64_t now)
{
    for (uint32_t i = 0; i < c->count; i++)
        if (!srl__limit_at_rest(&c->limits.limit[i], (const char *)state + c->off[i], now))
            return false;
    return true;
}

uint32_t srl__compound_offences(const struct srl__compound *c, const void *state, uint64_t now)
{
    uint32_t n = 0;
    for (uint32_t i = 0; c->penalty && i < c->count; i++) {
        uint32_t o = srl__limit_offences(&c->limits.limit[i], (const char *)state + c->off[i], now);
        n = o > n ? o : n;
    }
    return n;
}

uint64_t srl__compound_banned_ns(const struct srl__compound *c, const void *state, uint64_t now)
{
    uint64_t n = 0;
    for (uint32_t i = 0; c->penalty && i < c->count; i++) {
        uint64_t b = srl__limit_banned_ns(&c->limits.limit[i], (const char *)state + c->off[i],
                                          now);
        n = b > n ? b : n;
    }
    return n;
}

void srl__compound_forgive(const struct srl__compound *c, void *state)
{
    for (uint32_t i = 0; c->penalty && i < c->count; i++)
        srl__limit_forgive(&c->limits.limit[i], (char *)state + c->off[i]);
}

bool srl__compound_valid(const struct srl__compound *c, const void *state, uint64_t now)
{
    for (uint32_t i = 0; i < c->count; i++)
        if (!srl__limit_valid(&c->limits.limit[i], (const char *)state + c->off[i], now))
            return false;
    return true;
}

uint64_t srl__compound_last_ns(const struct srl__compound *c, const void *state)
{
    uint64_t last = 0;
    for (uint32_t i = 0; i < c->count; i++) {
        uint64_t t = srl__limit_last_ns(&c->limits.limit[i], (const char *)state + c->off[i]);
        if (t > last)
            last = t;
    }
    return last;
}

void srl__compound_enter(const struct srl__compound *c, void *state, uint64_t now,
                         const struct srl__proc *who, srl__conc_alive_fn alive, void *ctx,
                         srl_decision *d, uint32_t *entry, uint32_t *gen, uint32_t *reclaimed)
{
    assert(c->conc >= 0);
    const uint32_t k = (uint32_t)c->conc;
    const srl_policy *cp = &c->limits.limit[k];
    void *cs = (char *)state + c->off[k];
    srl_decision each[SRL_LIMITS_MAX];
    *gen = 0;
    *reclaimed = 0;
    /* Reclaim before judging the unit limit, so a dead holder never causes a
     * denial (freeing an abandoned unit is repair, not admission: it is done
     * even if a rate limit then denies). */
    c->algo[k]->decide(cp, cs, now, 1, 0, &each[k]);
    if (!each[k].allowed) {
        *reclaimed = srl__conc_reclaim(cp, cs, now, alive, ctx);
        c->algo[k]->decide(cp, cs, now, 1, 0, &each[k]);
    }
    int all = dry_run(c, state, now, 1, (int32_t)k, each) && each[k].allowed;
    if (all) {
        /* The unit first: in a valid state it is free (the report said so),
         * but a holder table damaged in the segment can claim a free entry
         * it does not have, and then nothing may be taken at all. */
        srl__conc_enter(cp, cs, now, who, NULL, NULL, &each[k], entry, gen);
        if (*gen != 0)
            for (uint32_t i = 0; i < c->count; i++)
                if (i != k)
                    srl__limit_decide(&c->limits.limit[i], (char *)state + c->off[i], now, 1,
                                      1, &each[i]);
    } else {
        ban_deniers(c, state, now, (int32_t)k, each);
    }
    if (c->count == 1) {
        *d = each[0];
        d->binding = 0;
    } else {
        fold(c, each, d);
    }
    clear_wait(d);
}

int srl__compound_leave(const struct srl__compound *c, void *state, uint32_t entry, uint32_t gen,
                        int32_t pid)
{
    const srl_policy *cp = &c->limits.limit[c->conc];
    void *cs = srl__compound_conc_state(c, state);
    struct srl__proc who;
    uint64_t since;
    if (!srl__conc_holder(cp, cs, entry, &who, &since) || who.pid != pid)
        return SRL_ENOENT;
    return srl__conc_leave(cp, cs, entry, gen);
}

uint32_t srl__compound_inflight(const struct srl__compound *c, const void *state)
{
    if (c->conc < 0)
        return 0;
    return srl__conc_inflight((const char *)state + c->off[c->conc]);
}

/* ------------------------------------------------ the public pure core */

size_t srl_limits_state_size(const srl_limits *l)
{
    struct srl__compound c;
    return srl__compound_init(&c, l) == 0 ? c.state_bytes : 0;
}

size_t srl_limits_state_offset(const srl_limits *l, uint32_t i)
{
    struct srl__compound c;
    if (srl__compound_init(&c, l) != 0 || i >= c.count)
        return 0;
    return c.off[i];
}

/* Resolve l and check state; SRL_EINVAL for NULL, SRL_EPOLICY for l. */
static int resolve(const srl_limits *l, const void *state, struct srl__compound *c)
{
    if (l == NULL || state == NULL)
        return SRL_EINVAL;
    return srl__compound_init(c, l);
}

static int cost_ok(const struct srl__compound *c, uint32_t cost)
{
    return cost >= 1 && cost <= c->min_permits;
}

int srl_limits_state_init(const srl_limits *l, void *state, uint64_t now)
{
    struct srl__compound c;
    int rc = resolve(l, state, &c);
    if (rc == 0)
        srl__compound_state_init(&c, state, now);
    return rc;
}

static int decide(const srl_limits *l, void *state, uint64_t now, uint32_t cost, int commit,
                  srl_decision *d)
{
    struct srl__compound c;
    int rc = resolve(l, state, &c);
    if (rc != 0)
        return rc;
    if (d == NULL)
        return SRL_EINVAL;
    if (commit && c.conc >= 0)
        return SRL_ENOTSUP;   /* a unit needs a holder: srl_enter */
    if (!cost_ok(&c, cost))
        return SRL_ECOST;
    srl__compound_decide(&c, state, now, cost, commit, d);
    return 0;
}

int srl_limits_state_acquire(const srl_limits *l, void *state, uint64_t now, uint32_t cost,
                             srl_decision *d)
{
    return decide(l, state, now, cost, 1, d);
}

int srl_limits_state_peek(const srl_limits *l, const void *state, uint64_t now,
                          uint32_t cost, srl_decision *d)
{
    /* commit = 0 writes nothing: the cast only lets one decide() serve both. */
    return decide(l, (void *)state, now, cost, 0, d);
}

int srl_limits_state_reserve(const srl_limits *l, void *state, uint64_t now, uint32_t cost,
                             uint64_t max_wait_ns, srl_decision *d)
{
    struct srl__compound c;
    int rc = resolve(l, state, &c);
    if (rc != 0)
        return rc;
    if (d == NULL || max_wait_ns > SRL_WAIT_MAX_NS)
        return SRL_EINVAL;
    if (c.conc >= 0 || (max_wait_ns != 0 && !c.reserve))
        return SRL_ENOTSUP;
    if (!cost_ok(&c, cost))
        return SRL_ECOST;
    srl__compound_reserve(&c, state, now, cost, max_wait_ns, d);
    return 0;
}

int srl_limits_state_refund(const srl_limits *l, void *state, uint64_t now, uint32_t cost)
{
    struct srl__compound c;
    int rc = resolve(l, state, &c);
    if (rc != 0)
        return rc;
    if (c.conc >= 0)
        return SRL_ENOTSUP;   /* a unit is given back by srl_leave */
    if (!cost_ok(&c, cost))
        return SRL_ECOST;
    srl__compound_refund(&c, state, now, cost);
    return 0;
}

int srl_limits_state_at_rest(const srl_limits *l, const void *state, uint64_t now)
{
    struct srl__compound c;
    int rc = resolve(l, state, &c);
    return rc != 0 ? rc : srl__compound_at_rest(&c, state, now);
}

int srl_limits_state_valid(const srl_limits *l, const void *state, uint64_t now)
{
    struct srl__compound c;
    int rc = resolve(l, state, &c);
    return rc != 0 ? rc : srl__compound_valid(&c, state, now);
}
