/*
 * clock.c - the tickers srl ships, and the rule that picks one for a policy.
 *
 * A decision reads the clock once, inside the key's lock, so the clock is a
 * fixed part of every decision's cost: CLOCK_MONOTONIC costs ~20-30 ns here
 * (a vDSO read of the TSC plus scaling), CLOCK_MONOTONIC_COARSE ~5 ns (the
 * vDSO's copy of the time at the last timer tick).  Coarse time is the
 * precise time rounded down to that tick, so it lags by less than its
 * resolution r (clock_getres; 4 ms at HZ=250) and never goes backwards.
 *
 * The rule (srl_default_ticker): a limiter without an explicit ticker reads
 * the coarse clock when every limit's emission interval T = window/permits
 * is at least SRL__COARSE_FACTOR (100) times r, the precise clock otherwise.
 * What the lag costs, worst case, is stated in srl.h at srl_default_ticker.
 * Every process that opens a segment with the same policy and no ticker
 * makes the same choice; a process that mixes clocks on one segment sees
 * at most r of disagreement, which the algorithms absorb as a ticker that
 * went back (never as extra permits).
 *
 * Touches nothing shared; r is read once per process.
 */
#include "clock.h"
#include "limiter.h"

#include <time.h>

#define SRL__COARSE_FACTOR 100u

uint64_t srl__clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * SRL_NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t srl_monotonic_ns(void *ignored)
{
    (void)ignored;
    return srl__clock_ns(CLOCK_MONOTONIC);
}

uint64_t srl_monotonic_coarse_ns(void *ignored)
{
    (void)ignored;
    return srl__clock_ns(CLOCK_MONOTONIC_COARSE);
}

uint64_t srl_coarse_resolution_ns(void)
{
    static uint64_t cached; /* 0: not read yet; a race only reads it twice */
    uint64_t r = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (r == 0) {
        struct timespec ts;
        if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) != 0)
            r = UINT64_MAX; /* no coarse clock: never chosen */
        else
            r = (uint64_t)ts.tv_sec * SRL_NS_PER_S + (uint64_t)ts.tv_nsec;
        if (r == 0)
            r = 1;
        __atomic_store_n(&cached, r, __ATOMIC_RELAXED);
    }
    return r;
}

srl_ticker_fn srl_default_ticker(const srl_policy *p)
{
    if (p == NULL || srl_policy_validate(p) != 0)
        return srl_monotonic_ns;
    uint64_t r = srl_coarse_resolution_ns();
    /* T >= 100 r, without dividing: window >= permits * 100 * r */
    if (r > UINT64_MAX / SRL__COARSE_FACTOR)
        return srl_monotonic_ns;
    uint64_t need = r * SRL__COARSE_FACTOR;
    if (need > UINT64_MAX / p->permits || p->window_ns < need * p->permits)
        return srl_monotonic_ns;
    return srl_monotonic_coarse_ns;
}
