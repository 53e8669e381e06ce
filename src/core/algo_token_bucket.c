/*
 * algo_token_bucket.c - the token bucket (default algorithm), exact in integers.
 *
 * A bucket holds up to B tokens (B = burst, or permits when there is none)
 * and refills `permits` per window.
 * To stay exact without floating point, a token is divided into W units
 * (W = window_ns) and every elapsed nanosecond adds `permits` units:
 * permits tokens per W ns, with no rounding at all.  `frac` holds the units
 * of the token being refilled (0 <= frac < W).
 *
 * State (24 bytes, 8-byte aligned, pointer-free):
 *   last_ns  time of the last refill that was stored (= last admitted
 *            request, or init time); never moves backwards
 *   frac     partial token, in units (< W); 0 whenever the bucket is full
 *   tokens   whole tokens, 0..B
 *   pad      always 0
 *
 * Refill is computed on demand from the elapsed time and is compositional
 * (refilling to t1 then to t2 gives the same as refilling to t2 directly,
 * the cap included), which is why a denied request may skip storing it:
 * it changes nothing.  Overflow: elapsed < 2^64 and permits < 2^32, so
 * elapsed * permits + frac < 2^97 fits in 128 bits; (B - tokens) * W
 * < 2^91.
 *
 * Debt (srl_reserve): a reservation is decide() at the instant it will act,
 * t = now + wait, so it stores last_ns = t > now with the level it leaves
 * there (0 tokens, frac < permits <= W: can_reserve requires at most one
 * token per ns, so no whole token is ever stored ahead of now).  A request
 * at now' < t sees that level, flat, plus the gap: no token before the debt
 * is paid, and its own wait reaches past t.  The state stays 24 bytes; the
 * refill itself is unchanged and exact.  A refund while last_ns > now walks
 * the refill line back instead of adding tokens at last_ns: last_ns moves
 * back (not before now) by as many whole ns as the level after the refund
 * pays for, which is exactly the state before the reservation (but for a
 * reservation of the whole capacity in the nanosecond the bucket fills,
 * whose cap hid a sub-ns part: that refund is stricter by less than one
 * ns of refill).  This is the one case where last_ns moves backwards.
 *
 * Concurrency: none here; callers hold the key's lock (see algo.h).
 */
#include <assert.h>
#include <string.h>

#include "algo.h"

struct tb_state {
    uint64_t last_ns;
    uint64_t frac;
    uint32_t tokens;
    uint32_t pad;
};

_Static_assert(sizeof(struct tb_state) == 24, "token bucket state is 24 bytes");

/* The bucket's level at `now`, without writing it. */
static void tb_refill(const srl_policy *p, const struct tb_state *s, uint64_t now,
                      uint32_t *tokens, uint64_t *frac)
{
    uint64_t elapsed = now > s->last_ns ? now - s->last_ns : 0;
    const uint32_t cap = srl__capacity(p);
    if (s->tokens >= cap) {
        *tokens = cap;
        *frac = 0;
        return;
    }
    srl__u128 units = (srl__u128)s->frac + (srl__u128)elapsed * p->permits;
    /* A refill of >= 2^64 tokens (units' high half >= W) fills any bucket. */
    uint64_t add, rem;
    if ((uint64_t)(units >> 64) >= p->window_ns ||
        (add = srl__div128_64(units, p->window_ns, &rem)) >= cap - s->tokens) {
        *tokens = cap;
        *frac = 0;
    } else {
        *tokens = s->tokens + (uint32_t)add;
        *frac = rem;
    }
}

/* Nanoseconds until a bucket at (tokens, frac) holds `want` tokens. */
static uint64_t tb_wait(const srl_policy *p, uint32_t tokens, uint64_t frac, uint32_t want)
{
    if (tokens >= want)
        return 0;
    srl__u128 missing = (srl__u128)(want - tokens) * p->window_ns - frac;
    return srl__ceil_div128(missing, p->permits);
}

static size_t tb_size(const srl_policy *p)
{
    (void)p;
    return sizeof(struct tb_state);
}

static void tb_init(const srl_policy *p, void *state, uint64_t now)
{
    struct tb_state s = {.last_ns = now, .frac = 0, .tokens = srl__capacity(p), .pad = 0};
    memcpy(state, &s, sizeof s);
}

static void tb_decide(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                      int commit, srl_decision *d)
{
    const uint32_t cap = srl__capacity(p);
    assert(cost >= 1 && cost <= cap);
    struct tb_state *s = state;
    uint32_t tokens;
    uint64_t frac;
    tb_refill(p, s, now, &tokens, &frac);

    /* A ticker behind last_ns sees no refill until it passes last_ns again:
     * waits are reported in that ticker's time, so they include the gap. */
    uint64_t behind = s->last_ns > now ? s->last_ns - now : 0;
    d->limit = cap;
    d->flags = 0;
    d->binding = 0;
    if (tokens >= cost) {
        tokens -= cost;
        d->allowed = 1;
        d->remaining = tokens;
        d->retry_after_ns = 0;
        d->reset_after_ns = srl__sat_add(behind, tb_wait(p, tokens, frac, cap));
        if (commit) {
            s->tokens = tokens;
            s->frac = frac;
            s->last_ns = now > s->last_ns ? now : s->last_ns;
        }
    } else {
        d->allowed = 0;
        d->remaining = tokens;
        d->retry_after_ns = srl__sat_add(behind, tb_wait(p, tokens, frac, cost));
        d->reset_after_ns = srl__sat_add(behind, tb_wait(p, tokens, frac, cap));
    }
}

/* Refill to now, then add cost tokens up to the capacity.  A bucket that is
 * already full at now is left as it is (the refund had nothing to give). */
static void tb_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost)
{
    struct tb_state *s = state;
    uint32_t tokens;
    uint64_t frac;
    const uint32_t cap = srl__capacity(p);
    if (s->last_ns > now && s->tokens < cap) {
        /* In debt (see the top): the level at last_ns plus cost tokens,
         * moved back along the refill line as far as it stays >= 0. */
        srl__u128 units = (srl__u128)s->tokens * p->window_ns + s->frac +
                          (srl__u128)cost * p->window_ns;
        uint64_t ahead = s->last_ns - now;
        srl__u128 back = units / p->permits;
        uint64_t step = back >= ahead ? ahead : (uint64_t)back;
        units -= (srl__u128)step * p->permits;
        s->last_ns -= step;
        if (units >= (srl__u128)cap * p->window_ns) {
            s->tokens = cap;
            s->frac = 0;
        } else {
            s->tokens = (uint32_t)(units / p->window_ns);
            s->frac = (uint64_t)(units % p->window_ns);
        }
        return;
    }
    tb_refill(p, s, now, &tokens, &frac);
    if (tokens >= cap)
        return;
    if (cost >= cap - tokens) {
        tokens = cap;
        frac = 0;   /* a full bucket holds no partial token */
    } else {
        tokens += cost;
    }
    s->tokens = tokens;
    s->frac = frac;
    s->last_ns = now > s->last_ns ? now : s->last_ns;
}

static bool tb_at_rest(const srl_policy *p, const void *state, uint64_t now)
{
    const struct tb_state *s = state;
    uint32_t tokens;
    uint64_t frac;
    tb_refill(p, s, now, &tokens, &frac);
    /* Full, and no stored time ahead of now (a future last_ns would delay
     * the refill after the next request, unlike a fresh state's). */
    return tokens == srl__capacity(p) && s->last_ns <= now;
}

static bool tb_valid(const srl_policy *p, const void *state, uint64_t now)
{
    (void)now;
    const struct tb_state *s = state;
    const uint32_t cap = srl__capacity(p);
    if (s->tokens > cap || s->frac >= p->window_ns || s->pad != 0)
        return false;
    if (s->tokens == cap && s->frac != 0)
        return false;
    return true;
}

static uint64_t tb_last_ns(const srl_policy *p, const void *state)
{
    const struct tb_state *s = state;
    /* Every admission leaves fewer than permits tokens stored, so a stored
     * full bucket was never written by a request. */
    return s->tokens >= srl__capacity(p) ? 0 : s->last_ns;
}

/* At most one token per ns: see "Debt" at the top. */
static bool tb_can_reserve(const srl_policy *p)
{
    return p->permits <= p->window_ns;
}

const struct srl__algo srl__algo_token_bucket = {
    .name = "token_bucket",
    .size = tb_size,
    .init = tb_init,
    .decide = tb_decide,
    .refund = tb_refund,
    .at_rest = tb_at_rest,
    .valid = tb_valid,
    .last_ns = tb_last_ns,
    .can_reserve = tb_can_reserve,
};
