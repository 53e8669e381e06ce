/*
 * algo_sliding_log.c - the sliding window log: exact, O(permits) state.
 *
 * Remembers the time of every admitted permit still inside the window and
 * admits a request of cost c iff live + c <= permits.  An entry t is inside
 * the window at `now` iff t + W > now: the window is half-open, so an entry
 * exactly one window old is out (with a 1 s window, a permit taken at 0 is
 * free again at exactly 1000 ms).
 *
 * State (8 + 8 * permits bytes, 8-byte aligned, pointer-free): a ring
 *   count    entries stored, 0..permits (expired ones may linger until the
 *            next admission drops them)
 *   head     index of the oldest entry, 0..permits-1
 *   ts[]     times, oldest first from head, non-decreasing: an admission
 *            stamps max(newest, now), so a clock that went backwards never
 *            makes the log unsorted
 * Costs of c are stored as c copies of the time (cost <= permits <=
 * SRL_SLIDING_LOG_PERMITS_MAX, so that is bounded).
 *
 * A denied request writes nothing; expired entries are dropped only by an
 * admission.  t + W cannot overflow for t < 2^63 (W < 2^59); it saturates.
 *
 * Concurrency: none here; callers hold the key's lock (see algo.h).
 */
#include <assert.h>
#include <string.h>

#include "algo.h"

struct sl_state {
    uint32_t count;
    uint32_t head;
    uint64_t ts[];
};

_Static_assert(sizeof(struct sl_state) == 8, "sliding log header is 8 bytes");

/* The i-th oldest stored entry. */
static uint64_t sl_at(const srl_policy *p, const struct sl_state *s, uint32_t i)
{
    return s->ts[((uint64_t)s->head + i) % p->permits];
}

/* Entries stored, as every reader but valid() sees it: capped at permits, so
 * a corrupted count (a hostile or torn segment) costs at most permits steps
 * under the bucket lock instead of 2^32, and valid() still reports it. */
static uint32_t sl_count(const srl_policy *p, const struct sl_state *s)
{
    return s->count < p->permits ? s->count : p->permits;
}

/* Entries at the front that have left the window at `now`. */
static uint32_t sl_expired(const srl_policy *p, const struct sl_state *s, uint64_t now)
{
    uint32_t i = 0, n = sl_count(p, s);
    while (i < n && srl__sat_add(sl_at(p, s, i), p->window_ns) <= now)
        i++;
    return i;
}

static size_t sl_size(const srl_policy *p)
{
    return sizeof(struct sl_state) + (size_t)p->permits * sizeof(uint64_t);
}

static void sl_init(const srl_policy *p, void *state, uint64_t now)
{
    (void)now;
    memset(state, 0, sl_size(p));
}

static void sl_decide(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                      int commit, srl_decision *d)
{
    assert(cost >= 1 && cost <= p->permits);
    struct sl_state *s = state;
    uint32_t n = sl_count(p, s);
    uint32_t expired = sl_expired(p, s, now);
    uint32_t live = n - expired;
    uint64_t W = p->window_ns;

    d->limit = p->permits;
    d->flags = 0;
    d->binding = 0;
    if ((uint64_t)live + cost <= p->permits) {
        uint64_t newest = live ? sl_at(p, s, n - 1) : 0;
        uint64_t stamp = newest > now ? newest : now;
        d->allowed = 1;
        d->remaining = p->permits - live - cost;
        d->retry_after_ns = 0;
        d->reset_after_ns = srl__sat_add(stamp, W) - now;
        if (commit) {
            uint32_t head = (uint32_t)(((uint64_t)s->head + expired) % p->permits);
            for (uint32_t i = 0; i < cost; i++)
                s->ts[((uint64_t)head + live + i) % p->permits] = stamp;
            s->head = head;
            s->count = live + cost;
        }
    } else {
        /* live + cost - permits entries must leave; the last of them sets the wait. */
        uint32_t k = live + cost - p->permits - 1;
        uint64_t leaves = srl__sat_add(sl_at(p, s, expired + k), W);
        uint64_t newest = sl_at(p, s, n - 1);
        d->allowed = 0;
        d->remaining = p->permits - live;
        d->retry_after_ns = leaves - now;
        d->reset_after_ns = srl__sat_add(newest, W) - now;
    }
}

/* Drop the newest cost entries still inside the window (fewer if fewer are
 * live) and zero their slots, so the log is byte for byte the one an
 * admission of cost fewer would have left.  Expired entries stay for the
 * next admission to drop, as they would have. */
static void sl_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost)
{
    struct sl_state *s = state;
    uint32_t n = sl_count(p, s);
    uint32_t live = n - sl_expired(p, s, now);
    uint32_t drop = cost < live ? cost : live;
    for (uint32_t i = 0; i < drop; i++)
        s->ts[((uint64_t)s->head + n - 1 - i) % p->permits] = 0;
    if (drop > 0)
        s->count = n - drop;
}

static bool sl_at_rest(const srl_policy *p, const void *state, uint64_t now)
{
    const struct sl_state *s = state;
    return sl_expired(p, s, now) == sl_count(p, s);
}

static bool sl_valid(const srl_policy *p, const void *state, uint64_t now)
{
    const struct sl_state *s = state;
    if (s->count > p->permits || s->head >= p->permits)
        return false;
    for (uint32_t i = 0; i < s->count; i++) {
        uint64_t t = sl_at(p, s, i);
        if (t > now || (i > 0 && t < sl_at(p, s, i - 1)))
            return false;
    }
    return true;
}

static uint64_t sl_last_ns(const srl_policy *p, const void *state)
{
    const struct sl_state *s = state;
    uint32_t n = sl_count(p, s);
    return n ? sl_at(p, s, n - 1) : 0;
}

const struct srl__algo srl__algo_sliding_log = {
    .name = "sliding_log",
    .size = sl_size,
    .init = sl_init,
    .decide = sl_decide,
    .refund = sl_refund,
    .at_rest = sl_at_rest,
    .valid = sl_valid,
    .last_ns = sl_last_ns,
};
