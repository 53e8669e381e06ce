/*
 * policy.c - a policy's text form (parse, format), its validation, and the
 * table from srl_algorithm to the algorithm vtables.
 *
 * Grammar (no whitespace anywhere):
 *     policy  = [ algo ":" ] permits "/" [ count ] unit
 *     algo    = "token_bucket" | "sliding_log" | "sliding_counter" | "gcra"
 *     permits = 1*DIGIT            1 .. 2^32-1
 *     count   = 1*DIGIT            > 0 (default 1)
 *     unit    = "ns" | "us" | "ms" | "s" | "m" | "h" | "d"
 * Every overflow (of permits, of count, of count * unit) is SRL_EPOLICY,
 * as is any result srl_policy_validate() refuses.  The formatter writes the
 * canonical form "algo:N/<count><unit>" with the largest unit that divides
 * the window exactly, so parse(format(p)) == p for every valid p.
 *
 * Pure functions over their arguments: no state, safe from any thread.
 */
#include <stdio.h>
#include <string.h>

#include "algo.h"

static const struct srl__algo *const algos[] = {
    [SRL_TOKEN_BUCKET] = &srl__algo_token_bucket,
    [SRL_SLIDING_LOG] = &srl__algo_sliding_log,
    [SRL_SLIDING_COUNTER] = &srl__algo_sliding_counter,
    [SRL_GCRA] = &srl__algo_gcra,
};

#define N_ALGOS (sizeof algos / sizeof algos[0])

const struct srl__algo *srl__algo_get(srl_algorithm a)
{
    /* Compared as unsigned: a corrupt or foreign value may be negative. */
    if ((unsigned)a >= N_ALGOS)
        return NULL;
    return algos[a];
}

const char *srl_algorithm_name(srl_algorithm a)
{
    const struct srl__algo *al = srl__algo_get(a);
    return al ? al->name : NULL;
}

int srl_policy_validate(const srl_policy *p)
{
    if (p == NULL)
        return SRL_EINVAL;
    if (srl__algo_get(p->algorithm) == NULL)
        return SRL_EPOLICY;
    if (p->permits < 1)
        return SRL_EPOLICY;
    if (p->window_ns < 1 || p->window_ns > SRL_WINDOW_MAX_NS)
        return SRL_EPOLICY;
    if (p->algorithm == SRL_SLIDING_LOG && p->permits > SRL_SLIDING_LOG_PERMITS_MAX)
        return SRL_EPOLICY;
    return 0;
}

/* Units, largest first (the formatter's search order). */
static const struct {
    const char *name;
    uint64_t ns;
} units[] = {
    {"d", 86400ull * 1000000000ull},
    {"h", 3600ull * 1000000000ull},
    {"m", 60ull * 1000000000ull},
    {"s", 1000000000ull},
    {"ms", 1000000ull},
    {"us", 1000ull},
    {"ns", 1ull},
};

#define N_UNITS (sizeof units / sizeof units[0])

/* Reads 1*DIGIT at *s into *v (<= max); advances *s.  0 or SRL_EPOLICY. */
static int parse_uint(const char **s, uint64_t max, uint64_t *v)
{
    const char *c = *s;
    uint64_t x = 0;
    if (*c < '0' || *c > '9')
        return SRL_EPOLICY;
    for (; *c >= '0' && *c <= '9'; c++) {
        if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, (uint64_t)(*c - '0'), &x))
            return SRL_EPOLICY;
        if (x > max)
            return SRL_EPOLICY;
    }
    *s = c;
    *v = x;
    return 0;
}

int srl_policy_parse(const char *text, srl_policy *out)
{
    if (text == NULL || out == NULL)
        return SRL_EINVAL;
    srl_policy p = {.algorithm = SRL_TOKEN_BUCKET};
    const char *s = text;

    const char *colon = strchr(s, ':');
    if (colon != NULL) {
        size_t n = (size_t)(colon - s);
        const struct srl__algo *found = NULL;
        for (unsigned a = 0; a < N_ALGOS; a++) {
            if (strlen(algos[a]->name) == n && memcmp(algos[a]->name, s, n) == 0) {
                found = algos[a];
                p.algorithm = (srl_algorithm)a;
            }
        }
        if (found == NULL)
            return SRL_EPOLICY;
        s = colon + 1;
    }

    uint64_t permits, count = 1;
    if (parse_uint(&s, SRL_PERMITS_MAX, &permits) != 0)
        return SRL_EPOLICY;
    if (*s++ != '/')
        return SRL_EPOLICY;
    if (*s >= '0' && *s <= '9') {
        if (parse_uint(&s, UINT64_MAX, &count) != 0 || count == 0)
            return SRL_EPOLICY;
    }
    uint64_t unit = 0;
    for (unsigned u = 0; u < N_UNITS; u++)
        if (strcmp(s, units[u].name) == 0)
            unit = units[u].ns;
    if (unit == 0)
        return SRL_EPOLICY;
    if (__builtin_mul_overflow(count, unit, &p.window_ns))
        return SRL_EPOLICY;
    p.permits = (uint32_t)permits;

    if (srl_policy_validate(&p) != 0)
        return SRL_EPOLICY;
    *out = p;
    return 0;
}

int srl_policy_format(const srl_policy *p, char *buf, size_t len)
{
    if (p == NULL || buf == NULL)
        return SRL_EINVAL;
    int rc = srl_policy_validate(p);
    if (rc != 0)
        return rc;
    unsigned u = 0;
    while (p->window_ns % units[u].ns != 0)
        u++;   /* terminates: the last unit is 1 ns */
    char tmp[SRL_POLICY_TEXT_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s:%u/%llu%s", srl_algorithm_name(p->algorithm),
                     (unsigned)p->permits, (unsigned long long)(p->window_ns / units[u].ns),
                     units[u].name);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return SRL_EPOLICY;   /* cannot happen for a valid policy: 49 chars at most */
    if ((size_t)n >= len)
        return SRL_ENOBUFS;
    memcpy(buf, tmp, (size_t)n + 1);
    return n;
}
