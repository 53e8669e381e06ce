/*
 * keys.c - benchmark keys and pre-generated request sequences.
 *
 * What it holds: a splitmix64 generator (fixed seeds, so two runs ask for
 * the same keys in the same order), a key set of fixed-width 16-byte keys,
 * and sequences of key indices drawn uniformly or from a Zipf distribution.
 *
 * Invariants: key i is the 16 bytes "u:%014llu" of i (no NUL is part of the
 * key); a sequence's indices are all in [first, first + n).  Zipf with s = 1
 * is sampled by inverting its cumulative distribution (binary search over a
 * table of n doubles): exact, and its cost is paid before any timing.
 * Rank 1, the hottest, maps to index `first`; the keys are hashed by srl and
 * by the floor, so where a hot key sits in the key set does not matter.
 *
 * Concurrency: none (pure functions over caller-owned memory).
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t bench_rng_next(bench_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double bench_rng_unit(bench_rng *r)
{
    return (double)(bench_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

int bench_keys_make(bench_keys *k, uint64_t n)
{
    k->n = n;
    k->cold = 0;
    k->bytes = malloc(n * BENCH_KEY_LEN + 1);
    if (k->bytes == NULL)
        return SRL_ENOMEM;
    char tmp[32]; /* 16 used: indices stay below 10^14 */
    for (uint64_t i = 0; i < n; i++) {
        snprintf(tmp, sizeof tmp, "u:%014llu", (unsigned long long)i);
        memcpy(k->bytes + i * BENCH_KEY_LEN, tmp, BENCH_KEY_LEN);
    }
    return 0;
}

void bench_keys_free(bench_keys *k)
{
    free(k->bytes);
    k->bytes = NULL;
    k->n = 0;
}

const char *bench_dist_name(bench_dist d)
{
    return d == BENCH_ZIPF ? "zipf" : "uniform";
}

/* Index of the first cdf entry >= u (cdf is non-decreasing, cdf[n-1] = 1). */
static uint64_t cdf_search(const double *cdf, uint64_t n, double u)
{
    uint64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int bench_seq_make(bench_seq *s, uint64_t len, uint64_t first, uint64_t n,
                   bench_dist d, uint64_t seed)
{
    s->len = len;
    s->idx = malloc(len * sizeof *s->idx);
    if (s->idx == NULL || n == 0 || first + n > UINT32_MAX)
        return SRL_ENOMEM;
    bench_rng r = {seed};
    if (d == BENCH_UNIFORM) {
        for (uint64_t i = 0; i < len; i++) {
            /* Lemire's multiply-shift: unbiased enough for n << 2^32. */
            uint64_t x = bench_rng_next(&r) >> 32;
            s->idx[i] = (uint32_t)(first + ((x * n) >> 32));
        }
        return 0;
    }
    double *cdf = malloc(n * sizeof *cdf);
    if (cdf == NULL) {
        free(s->idx);
        s->idx = NULL;
        return SRL_ENOMEM;
    }
    double sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        sum += 1.0 / (double)(i + 1);
        cdf[i] = sum;
    }
    for (uint64_t i = 0; i < n; i++)
        cdf[i] /= sum;
    cdf[n - 1] = 1.0;
    for (uint64_t i = 0; i < len; i++)
        s->idx[i] = (uint32_t)(first + cdf_search(cdf, n, bench_rng_unit(&r)));
    free(cdf);
    return 0;
}

void bench_seq_free(bench_seq *s)
{
    free(s->idx);
    s->idx = NULL;
    s->len = 0;
}
