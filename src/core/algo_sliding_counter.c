/*
 * algo_sliding_counter.c - the sliding window counter (a weighted estimate).
 *
 * Two fixed-window counts, the previous window's and the current one's, with
 * windows aligned to multiples of W.  The count in the sliding window ending
 * at `now` is estimated as
 *     estimate = prev * (W - e) / W + curr,      e = now - window_start,
 * assuming the previous window's requests were spread evenly.  Everything is
 * kept multiplied by W, so the estimate is exact in integers:
 *     estimate * W = prev * (W - e) + curr * W   (< 2^92, in 128 bits).
 * A request of cost c passes iff estimate + (c - 1) < permits (for c = 1:
 * estimate < permits).
 *
 * State (16 bytes, 8-byte aligned, pointer-free):
 *   window_start  start of the current window, a multiple of W, <= now when
 *                 written; never moves backwards
 *   prev, curr    counts, 0..permits
 * Rolling (done on a copy; stored only by an admission): one window passed
 * -> prev = curr, curr = 0; two or more -> both 0.  A ticker that went back
 * before window_start is treated as window_start (zero elapsed).
 *
 * Concurrency: none here; callers hold the key's lock (see algo.h).
 */
#include <assert.h>
#include <string.h>

#include "algo.h"

struct sc_state {
    uint64_t window_start;
    uint32_t prev;
    uint32_t curr;
};

_Static_assert(sizeof(struct sc_state) == 16, "sliding counter state is 16 bytes");

/* s as seen at time t >= s->window_start. */
static struct sc_state sc_roll(const srl_policy *p, const struct sc_state *s, uint64_t t)
{
    struct sc_state r = *s;
    uint64_t W = p->window_ns;
    uint64_t k = (t - s->window_start) / W;
    if (k == 1) {
        r.prev = s->curr;
        r.curr = 0;
        r.window_start = s->window_start + W;
    } else if (k >= 2) {
        r.prev = 0;
        r.curr = 0;
        r.window_start = t - t % W;
    }
    return r;
}

/* Smallest x in [0, W] with prev * (W - x) < A, given A > 0 and prev > 0. */
static uint64_t sc_solve(uint32_t prev, srl__u128 A, uint64_t W)
{
    /* prev * m < A  <=>  m <= (A - 1) / prev */
    srl__u128 m = (A - 1) / prev;
    return m >= W ? 0 : W - (uint64_t)m;
}

/* Nanoseconds after t until a request of cost passes, for state r (rolled
 * to t, e = t - r.window_start); assumes it does not pass at t. */
static uint64_t sc_wait(const srl_policy *p, const struct sc_state *r, uint64_t e, uint32_t cost)
{
    uint64_t W = p->window_ns;
    /* In the current window: prev * (W - e') < (permits - curr - cost + 1) * W. */
    if ((uint64_t)r->curr + cost - 1 < p->permits && r->prev > 0) {
        srl__u128 A = (srl__u128)(p->permits - r->curr - cost + 1) * W;
        uint64_t x = sc_solve(r->prev, A, W);
        if (x < W) {
            assert(x > e);
            return x - e;
        }
    }
    /* In the next window, where prev' = curr and curr' = 0:
     * curr * (W - e') < (permits - cost + 1) * W; at e' = W (two windows on)
     * everything is 0 and any cost <= permits passes. */
    uint64_t to_next = W - e;
    if (r->curr == 0)
        return to_next;
    srl__u128 B = (srl__u128)(p->permits - cost + 1) * W;
    return srl__sat_add(to_next, sc_solve(r->curr, B, W));
}

static size_t sc_size(const srl_policy *p)
{
    (void)p;
    return sizeof(struct sc_state);
}

static void sc_init(const srl_policy *p, void *state, uint64_t now)
{
    struct sc_state s = {.window_start = now - now % p->window_ns, .prev = 0, .curr = 0};
    memcpy(state, &s, sizeof s);
}

static void sc_decide(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                      int commit, srl_decision *d)
{
    assert(cost >= 1 && cost <= p->permits);
    struct sc_state *s = state;
    uint64_t W = p->window_ns;
    uint64_t t = now > s->window_start ? now : s->window_start;
    uint64_t behind = t - now;                /* > 0 only if the ticker went back */
    struct sc_state r = sc_roll(p, s, t);
    uint64_t e = t - r.window_start;

    srl__u128 est = (srl__u128)r.prev * (W - e) + (srl__u128)r.curr * W;   /* estimate * W */
    srl__u128 limit = (srl__u128)p->permits * W;
    srl__u128 after = est + (srl__u128)cost * W;                           /* with this request */

    d->limit = p->permits;
    d->flags = 0;
    d->binding = 0;
    if (after - W < limit) {
        /* remaining = max(0, ceil(permits - estimate - cost)) */
        d->allowed = 1;
        d->remaining = after >= limit ? 0 : (uint32_t)srl__ceil_div128(limit - after, W);
        d->retry_after_ns = 0;
        /* curr >= 1 now: both counts are 0 two windows after window_start. */
        d->reset_after_ns = srl__sat_add(behind, 2 * W - e);
        if (commit) {
            r.curr += cost;
            *s = r;
        }
    } else {
        d->allowed = 0;
        d->remaining = est >= limit ? 0 : (uint32_t)srl__ceil_div128(limit - est, W);
        d->retry_after_ns = srl__sat_add(behind, sc_wait(p, &r, e, cost));
        uint64_t rest = r.curr ? 2 * W - e : r.prev ? W - e : 0;
        d->reset_after_ns = rest ? srl__sat_add(behind, rest) : 0;
    }
}

/* Take cost back from the current window's count (not below 0).  Permits
 * taken in a window that has since become the previous one stay counted:
 * the estimate weighs them as already spread out, and the refund belongs to
 * the window the caller is in.  Nothing is written when curr is 0. */
static void sc_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost)
{
    struct sc_state *s = state;
    uint64_t t = now > s->window_start ? now : s->window_start;
    struct sc_state r = sc_roll(p, s, t);
    if (r.curr == 0)
        return;
    r.curr = cost < r.curr ? r.curr - cost : 0;
    *s = r;
}

static bool sc_at_rest(const srl_policy *p, const void *state, uint64_t now)
{
    const struct sc_state *s = state;
    if (now < s->window_start)
        return false;   /* a window in the future would keep the next count there */
    struct sc_state r = sc_roll(p, s, now);
    return r.prev == 0 && r.curr == 0;
}

static bool sc_valid(const srl_policy *p, const void *state, uint64_t now)
{
    const struct sc_state *s = state;
    return s->prev <= p->permits && s->curr <= p->permits &&
           s->window_start % p->window_ns == 0 && s->window_start <= now;
}

static uint64_t sc_last_ns(const srl_policy *p, const void *state)
{
    (void)p;
    (void)state;
    return 0;   /* counts do not remember times */
}

const struct srl__algo srl__algo_sliding_counter = {
    .name = "sliding_counter",
    .size = sc_size,
    .init = sc_init,
    .decide = sc_decide,
    .refund = sc_refund,
    .at_rest = sc_at_rest,
    .valid = sc_valid,
    .last_ns = sc_last_ns,
};
