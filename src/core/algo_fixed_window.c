/*
 * algo_fixed_window.c - the fixed window counter, windows started by a key's
 * first hit (the semantics of the Python `limits` package's storages).
 *
 * A key's window opens at the first admitted request after the previous
 * window ended (or ever) and lasts exactly W nanoseconds: [start, start + W).
 * Inside it at most permits are admitted; a request of cost c passes iff
 *     count + c <= permits,
 * and an admission adds c to count.  A denial takes nothing (as in every srl
 * algorithm): the count never exceeds permits.  At start + W the window is
 * over and the count is 0 again; the next admitted request opens a new
 * window at its own time, not at a multiple of W.  So two bursts of permits
 * can pass within a little over W of each other (the end of one window and
 * the start of the next): that is what a fixed window is.
 *
 * State (16 bytes, 8-byte aligned, pointer-free):
 *   start   when the current window opened; never moves backwards
 *   count   admitted in [start, start + W): 0..permits; 0 means no window
 *   zero    0
 * A window is over at t iff t - start >= W; a state with count 0 or an
 * ended window is at rest.  A ticker that went back before start is treated
 * as start (zero elapsed), and a new window never opens before start.
 * All arithmetic is u64: start + W is not formed (start may be near
 * UINT64_MAX after years idle); t - start is, with t >= start.
 *
 * Concurrency: none here; callers hold the key's lock (see algo.h).
 */
#include <assert.h>
#include <string.h>

#include "algo.h"

struct fw_state {
    uint64_t start;
    uint32_t count;
    uint32_t zero;
};

_Static_assert(sizeof(struct fw_state) == 16, "fixed window state is 16 bytes");

/* Count of s at t >= s->start: 0 once the window has ended. */
static uint32_t fw_count(const srl_policy *p, const struct fw_state *s, uint64_t t)
{
    return t - s->start >= p->window_ns ? 0 : s->count;
}

static size_t fw_size(const srl_policy *p)
{
    (void)p;
    return sizeof(struct fw_state);
}

static void fw_init(const srl_policy *p, void *state, uint64_t now)
{
    (void)p;
    struct fw_state s = {.start = now, .count = 0, .zero = 0};
    memcpy(state, &s, sizeof s);
}

static void fw_decide(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                      int commit, srl_decision *d)
{
    assert(cost >= 1 && cost <= p->permits);
    struct fw_state *s = state;
    uint64_t W = p->window_ns;
    uint64_t t = now > s->start ? now : s->start;
    uint64_t behind = t - now;                 /* > 0 only if the ticker went back */
    uint32_t count = fw_count(p, s, t);
    /* Time left in the open window at t (none when count is 0). */
    uint64_t left = count ? W - (t - s->start) : 0;

    d->limit = p->permits;
    d->flags = 0;
    d->binding = 0;
    if ((uint64_t)count + cost <= p->permits) {
        d->allowed = 1;
        d->remaining = p->permits - count - cost;
        d->retry_after_ns = 0;
        /* A new window opens at t and runs W; an open one runs `left`. */
        d->reset_after_ns = srl__sat_add(behind, count ? left : W);
        if (commit) {
            if (count == 0) {
                s->start = t;
                s->count = cost;
            } else {
                s->count = count + cost;
            }
            s->zero = 0;
        }
    } else {
        /* count > 0 here (cost <= permits): the window's end frees it all. */
        d->allowed = 0;
        d->remaining = p->permits - count;
        d->retry_after_ns = srl__sat_add(behind, left);
        d->reset_after_ns = srl__sat_add(behind, left);
    }
}

/* Take cost back from the open window's count (not below 0); the window
 * keeps its start.  Nothing is written when no window is open. */
static void fw_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost)
{
    struct fw_state *s = state;
    uint64_t t = now > s->start ? now : s->start;
    uint32_t count = fw_count(p, s, t);
    if (count == 0)
        return;
    s->count = cost < count ? count - cost : 0;
}

static bool fw_at_rest(const srl_policy *p, const void *state, uint64_t now)
{
    const struct fw_state *s = state;
    if (now < s->start)
        return false;   /* a new window would open at start, not at now */
    return fw_count(p, s, now) == 0;
}

static bool fw_valid(const srl_policy *p, const void *state, uint64_t now)
{
    const struct fw_state *s = state;
    return s->count <= p->permits && s->zero == 0 && s->start <= now;
}

static uint64_t fw_last_ns(const srl_policy *p, const void *state)
{
    (void)p;
    (void)state;
    return 0;   /* the window's start is its first request, not its last */
}

void srl__fw_convert(const srl_policy *po, const void *old, const srl_policy *pn, void *out,
                     uint64_t now)
{
    const struct fw_state *o = old;
    struct fw_state *n = out;
    uint64_t t = now > o->start ? now : o->start;
    uint32_t count = fw_count(po, o, t);
    fw_init(pn, n, t);
    if (count == 0 || t - o->start >= pn->window_ns)
        return;   /* no window open, or the new length has already ended it */
    n->start = o->start;
    n->count = count < pn->permits ? count : pn->permits;
}

const struct srl__algo srl__algo_fixed_window = {
    .name = "fixed_window",
    .size = fw_size,
    .init = fw_init,
    .decide = fw_decide,
    .refund = fw_refund,
    .at_rest = fw_at_rest,
    .valid = fw_valid,
    .last_ns = fw_last_ns,
};
