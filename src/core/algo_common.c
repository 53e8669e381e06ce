/*
 * algo_common.c - integer helpers shared by the four algorithms.
 *
 * Holds the saturating arithmetic that keeps every algorithm overflow-safe:
 * time values reach ~2^63 (years of uptime), windows reach
 * SRL_WINDOW_MAX_NS (< 2^59) and permits reach 2^32-1, so products of a
 * window and a count need up to 91 bits and are formed in unsigned __int128
 * by the callers; these helpers bring them back to 64 bits, saturating
 * rather than wrapping (a wait of UINT64_MAX ns is "forever", never "now").
 *
 * Pure functions: no state, no locks, safe from any thread or process.
 */
#include "algo.h"

uint64_t srl__sat_add(uint64_t a, uint64_t b)
{
    uint64_t s;
    if (__builtin_add_overflow(a, b, &s))
        return UINT64_MAX;
    return s;
}

uint64_t srl__ceil_div128(srl__u128 n, uint64_t d)
{
    /* d == 0 is a caller bug: every divisor is a validated window or permits. */
    if (d == 0)
        return UINT64_MAX;
    if ((uint64_t)(n >> 64) >= d)
        return UINT64_MAX;   /* the quotient is >= 2^64 */
    uint64_t r, q = srl__div128_64(n, d, &r);
    if (r != 0 && q == UINT64_MAX)
        return UINT64_MAX;
    return q + (r != 0);
}
