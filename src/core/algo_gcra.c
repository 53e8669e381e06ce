/*
 * algo_gcra.c - GCRA (generic cell rate algorithm): token-bucket semantics
 * in one 64-bit word.
 *
 * State (8 bytes): tat, the theoretical arrival time: the time at which the
 * key would be back to a full burst.  With emission interval T and burst
 * tolerance tau = B * T (B = burst, or permits when there is none), a request of cost c at `now` computes
 * tat' = max(tat, now) + c*T and passes iff tat' - now <= tau.
 *
 * T = ceil(W / permits).  Where W is not a multiple of permits, the
 * sustained rate is therefore slightly slower than nominal (each request
 * waits up to 1 ns longer than W / permits); the burst stays exactly
 * B.  tau = B * T <= B * W / permits + B <= SRL_WINDOW_MAX_NS + 2^32 < 2^60
 * (srl_policy_validate bounds B * W / permits), so no sum here
 * overflows for now < 2^63; sums saturate anyway.
 *
 * init() sets tat = 0, which max(tat, now) reads as "full" at any time, so
 * a fresh state does not depend on the clock.  A state with tat <= now is
 * at rest: it decides exactly like a fresh one.  A denied request writes
 * nothing.  GCRA does not remember when the last request was admitted, so
 * last_ns() is 0 ("not known").
 *
 * A ticker that goes backwards never gives capacity: tat never moves back
 * (tat' >= tat).  Unlike the token bucket, which stores its last time and
 * counts the gap as zero elapsed, one word cannot tell "the clock went
 * back" from "the burst was used", so GCRA sees a backwards step as burst
 * already consumed (it fails closed by the size of the step).  Its waits
 * are exact in the ticker's own time either way.
 *
 * Reservations (srl_reserve): decide() at the instant t = now + wait the
 * request will act; the TAT then lies up to wait + tau ahead of now (wait
 * <= SRL_WAIT_MAX_NS), which valid() accepts; the refund moves it back by
 * cost*T, exactly the TAT before the reservation.
 *
 * Concurrency: none here; callers hold the key's lock (see algo.h).
 */
#include <assert.h>
#include <string.h>

#include "algo.h"

struct gcra_state {
    uint64_t tat;
};

_Static_assert(sizeof(struct gcra_state) == 8, "GCRA state is 8 bytes");

static uint64_t gcra_T(const srl_policy *p)
{
    return p->window_ns / p->permits + (p->window_ns % p->permits != 0);
}

static uint64_t gcra_tau(const srl_policy *p)
{
    srl__u128 tau = (srl__u128)srl__capacity(p) * gcra_T(p);
    return tau > UINT64_MAX ? UINT64_MAX : (uint64_t)tau;
}

static size_t gcra_size(const srl_policy *p)
{
    (void)p;
    return sizeof(struct gcra_state);
}

static void gcra_init(const srl_policy *p, void *state, uint64_t now)
{
    (void)p;
    (void)now;
    struct gcra_state s = {.tat = 0};
    memcpy(state, &s, sizeof s);
}

static void gcra_decide(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                        int commit, srl_decision *d)
{
    assert(cost >= 1 && cost <= srl__capacity(p));
    struct gcra_state *s = state;
    uint64_t T = gcra_T(p), tau = gcra_tau(p);
    uint64_t base = s->tat > now ? s->tat : now;
    uint64_t used = base - now;                       /* burst already consumed, in ns */
    uint64_t next = srl__sat_add(base, (uint64_t)cost * T);
    uint64_t need = next - now;                       /* consumed after this request */

    d->limit = srl__capacity(p);
    d->flags = 0;
    d->binding = 0;
    if (need <= tau) {
        d->allowed = 1;
        d->remaining = (uint32_t)((tau - need) / T);
        d->retry_after_ns = 0;
        d->reset_after_ns = need;
        if (commit)
            s->tat = next;
    } else {
        d->allowed = 0;
        d->remaining = used >= tau ? 0 : (uint32_t)((tau - used) / T);
        d->retry_after_ns = need - tau;
        d->reset_after_ns = used;
    }
}

/* Move the TAT back by cost*T, but not before now: a TAT at or before now
 * already means a full burst, and a refund never gives more. */
static void gcra_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost)
{
    struct gcra_state *s = state;
    if (s->tat <= now)
        return;
    srl__u128 back = (srl__u128)cost * gcra_T(p);
    s->tat = back >= s->tat - now ? now : s->tat - (uint64_t)back;
}

static bool gcra_at_rest(const srl_policy *p, const void *state, uint64_t now)
{
    (void)p;
    const struct gcra_state *s = state;
    return s->tat <= now;
}

static bool gcra_valid(const srl_policy *p, const void *state, uint64_t now)
{
    const struct gcra_state *s = state;
    /* One burst ahead, plus the longest reservation queue. */
    return s->tat <= srl__sat_add(srl__sat_add(now, gcra_tau(p)), SRL_WAIT_MAX_NS);
}

static bool gcra_can_reserve(const srl_policy *p)
{
    (void)p;
    return true;
}

static uint64_t gcra_last_ns(const srl_policy *p, const void *state)
{
    (void)p;
    (void)state;
    return 0;
}

const struct srl__algo srl__algo_gcra = {
    .name = "gcra",
    .size = gcra_size,
    .init = gcra_init,
    .decide = gcra_decide,
    .refund = gcra_refund,
    .at_rest = gcra_at_rest,
    .valid = gcra_valid,
    .last_ns = gcra_last_ns,
    .can_reserve = gcra_can_reserve,
};
