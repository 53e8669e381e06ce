/*
 * algo_concurrency.c - in-flight (concurrency) limits: "at most N requests
 * of this key inside at once", with each unit's holder recorded so that a
 * holder that dies (SIGKILL, OOM, segfault) can be reclaimed without its
 * cooperation.
 *
 * Policy: algorithm SRL_CONCURRENCY, permits = N (1..SRL_CONCURRENCY_MAX),
 * window_ns = max_hold (0: none).  A unit older than max_hold counts as
 * abandoned even if its holder lives (a stuck request): operator's choice.
 *
 * State (16 + 32*N bytes, pointer-free, 8-aligned):
 *   header  count    units in use (== number of entries with gen != 0)
 *           gen_seq  last generation handed out (never 0 after wrap)
 *           last_ns  time of the last admission
 *   entry[N] pid, gen (0: free), start, pidns (proc.h), since_ns
 * A lease names (entry, gen): leaving checks both, so a second leave, or a
 * leave after the unit was reclaimed and handed to someone else, finds a
 * different gen and is refused (SRL_ENOENT), never a double release.
 *
 * Reclaiming dead holders needs /proc reads, which the pure core does not
 * do itself: srl__conc_enter takes a liveness callback and calls it only
 * when the key is full (so a healthy key costs no /proc read).  Bound: a
 * dead holder's unit is held until the next srl_enter that finds the key
 * full, or the next srl_evict_idle / rlctl evict; it never causes a
 * denial, because a full key reclaims before it denies.  A stopped
 * (SIGSTOP) holder is alive: its units stay (max_hold aside).
 *
 * The generic vtable (algo.h) sees concurrency as a rate algorithm with no
 * holder: decide() only reports (commit must be 0: state.c refuses
 * srl_state_acquire and srl_state_refund with SRL_ENOTSUP), at_rest() is
 * "nothing in flight", valid() checks every invariant above for crash
 * repair.  Concurrency: none here; callers hold the key's lock.
 */
#include <assert.h>
#include <string.h>

#include "algo.h"

struct conc_head {
    uint32_t count;
    uint32_t gen_seq;
    uint64_t last_ns;
};

struct conc_entry {
    int32_t pid;
    uint32_t gen;             /* 0: free */
    uint64_t start;
    uint64_t pidns;
    uint64_t since_ns;
};

_Static_assert(sizeof(struct conc_head) == 16, "concurrency header is 16 bytes");
_Static_assert(sizeof(struct conc_entry) == 32, "concurrency entry is 32 bytes");

static struct conc_entry *entries(void *state)
{
    return (struct conc_entry *)((char *)state + sizeof(struct conc_head));
}

static size_t conc_size(const srl_policy *p)
{
    return sizeof(struct conc_head) + (size_t)p->permits * sizeof(struct conc_entry);
}

static void conc_init(const srl_policy *p, void *state, uint64_t now)
{
    (void)now;
    memset(state, 0, conc_size(p));
}

static int expired(const srl_policy *p, const struct conc_entry *e, uint64_t now)
{
    return p->window_ns != 0 && now >= e->since_ns && now - e->since_ns >= p->window_ns;
}

/* Time until the oldest unit passes max_hold (0 when there is none). */
static uint64_t soonest_expiry(const srl_policy *p, void *state, uint64_t now)
{
    if (p->window_ns == 0)
        return 0;
    struct conc_entry *e = entries(state);
    uint64_t best = UINT64_MAX;
    for (uint32_t i = 0; i < p->permits; i++) {
        if (e[i].gen == 0)
            continue;
        uint64_t end = srl__sat_add(e[i].since_ns, p->window_ns);
        uint64_t left = end > now ? end - now : 0;
        if (left < best)
            best = left;
    }
    return best == UINT64_MAX ? 0 : best;
}

static void fill(const srl_policy *p, void *state, uint64_t now, int allowed,
                 srl_decision *d)
{
    const struct conc_head *h = state;
    d->allowed = allowed;
    d->limit = p->permits;
    d->remaining = p->permits - h->count;
    d->flags = 0;
    /* No time-based promise for a full key unless max_hold gives one: a
     * retry hint of 1 s is what an HTTP Retry-After can say at least. */
    uint64_t exp = soonest_expiry(p, state, now);
    d->retry_after_ns = allowed ? 0 : (exp != 0 ? exp : SRL_NS_PER_S);
    d->reset_after_ns = h->count == 0 ? 0 : exp;
}

static void conc_decide(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                        int commit, srl_decision *d)
{
    assert(commit == 0);
    (void)commit;
    const struct conc_head *h = state;
    int allowed = h->count + cost <= p->permits;
    fill(p, state, now, allowed, d);
    if (allowed)
        d->remaining -= cost;   /* what an admission would leave, as every algorithm says */
}

static void conc_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost)
{
    (void)p, (void)state, (void)now, (void)cost;   /* refused by state.c */
}

static bool conc_at_rest(const srl_policy *p, const void *state, uint64_t now)
{
    (void)p, (void)now;
    const struct conc_head *h = state;
    return h->count == 0;
}

static bool conc_valid(const srl_policy *p, const void *state, uint64_t now)
{
    const struct conc_head *h = state;
    const struct conc_entry *e = entries((void *)state);
    uint32_t used = 0;
    for (uint32_t i = 0; i < p->permits; i++) {
        if (e[i].gen == 0) {
            if (e[i].pid != 0 || e[i].start != 0 || e[i].pidns != 0 || e[i].since_ns != 0)
                return false;
            continue;
        }
        if (e[i].pid <= 0 || e[i].since_ns > now)
            return false;
        for (uint32_t j = 0; j < i; j++)
            if (e[j].gen == e[i].gen)
                return false;     /* two leases would match one gen */
        used++;
    }
    return used == h->count && h->last_ns <= now;
}

static uint64_t conc_last_ns(const srl_policy *p, const void *state)
{
    (void)p;
    const struct conc_head *h = state;
    return h->last_ns;
}

const struct srl__algo srl__algo_concurrency = {
    .name = "concurrency",
    .size = conc_size,
    .init = conc_init,
    .decide = conc_decide,
    .refund = conc_refund,
    .at_rest = conc_at_rest,
    .valid = conc_valid,
    .last_ns = conc_last_ns,
};

/* ------------------------------------------------ holder-aware calls */

static void free_entry(struct conc_head *h, struct conc_entry *e)
{
    memset(e, 0, sizeof *e);
    h->count--;
}

uint32_t srl__conc_reclaim(const srl_policy *p, void *state, uint64_t now,
                           srl__conc_alive_fn alive, void *ctx)
{
    struct conc_head *h = state;
    struct conc_entry *e = entries(state);
    uint32_t freed = 0;
    for (uint32_t i = 0; i < p->permits; i++) {
        if (e[i].gen == 0)
            continue;
        struct srl__proc who = {e[i].pid, e[i].start, e[i].pidns};
        if (expired(p, &e[i], now) || (alive != NULL && !alive(&who, ctx))) {
            free_entry(h, &e[i]);
            freed++;
        }
    }
    return freed;
}

void srl__conc_enter(const srl_policy *p, void *state, uint64_t now,
                     const struct srl__proc *who, srl__conc_alive_fn alive, void *ctx,
                     srl_decision *d, uint32_t *entry, uint32_t *gen)
{
    struct conc_head *h = state;
    struct conc_entry *e = entries(state);
    if (h->count >= p->permits)
        srl__conc_reclaim(p, state, now, alive, ctx);   /* reclaim before denying */
    *gen = 0;
    if (h->count >= p->permits) {
        fill(p, state, now, 0, d);
        return;
    }
    /* count < permits means a free entry exists in a valid state; a state
     * damaged in the segment may say so falsely, so the search is bounded
     * and finding none is a denial (srl_check reports the state). */
    uint32_t i = 0;
    while (i < p->permits && e[i].gen != 0)
        i++;
    if (i == p->permits) {
        fill(p, state, now, 0, d);
        return;
    }
    /* A generation no live entry holds (after 2^32 admissions gen_seq
     * wraps; at most permits values are taken, so this ends quickly). */
    uint32_t g;
    for (;;) {
        g = ++h->gen_seq;
        if (g == 0)
            continue;
        uint32_t j = 0;
        while (j < p->permits && e[j].gen != g)
            j++;
        if (j == p->permits)
            break;
    }
    e[i].pid = who->pid;
    e[i].gen = g;
    e[i].start = who->start;
    e[i].pidns = who->pidns;
    e[i].since_ns = now;
    h->count++;
    if (now > h->last_ns)
        h->last_ns = now;
    fill(p, state, now, 1, d);
    *entry = i;
    *gen = g;
}

int srl__conc_leave(const srl_policy *p, void *state, uint32_t entry, uint32_t gen)
{
    struct conc_head *h = state;
    struct conc_entry *e = entries(state);
    if (gen == 0 || entry >= p->permits || e[entry].gen != gen)
        return SRL_ENOENT;   /* left already, reclaimed, or not this key's lease */
    free_entry(h, &e[entry]);
    return 0;
}

void srl__conc_seed(void *state, uint32_t seq)
{
    struct conc_head *h = state;
    h->gen_seq = seq;
}

uint32_t srl__conc_inflight(const void *state)
{
    const struct conc_head *h = state;
    return h->count;
}

int srl__conc_holder(const srl_policy *p, const void *state, uint32_t i,
                     struct srl__proc *who, uint64_t *since_ns)
{
    const struct conc_entry *e = entries((void *)state);
    if (i >= p->permits || e[i].gen == 0)
        return 0;
    who->pid = e[i].pid;
    who->start = e[i].start;
    who->pidns = e[i].pidns;
    *since_ns = e[i].since_ns;
    return 1;
}
