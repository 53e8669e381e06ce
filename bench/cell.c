/*
 * srl-cell - one cell of srl-bench's decision table, alone, for comparing
 * two builds (bench/ab.sh runs two of them in turn and prints medians).
 *
 * Why it exists: on a shared VM the speed of the machine moves 10-20 %
 * between srl-bench runs a few minutes apart, as much as a change worth
 * measuring.  Short runs of two builds, alternated many times, see the same
 * machine; their medians compare where two long runs do not.
 *
 *   srl-cell [--store shared|local] [--policy P] [--keys N] [--decisions N]
 *            [--lockfree] [--wall]
 *
 * Keys are 16 bytes (the index i, little-endian, zero padded), drawn
 * uniformly by a fixed xorshift sequence: every build sees the same trace.
 * Every key is created, then the trace runs once untimed (warm caches,
 * grown pools), then once timed.  Prints one line: "<ns> ns per decision"
 * (thread CPU time; --wall: CLOCK_MONOTONIC), then the share allowed.
 * Exit status 1 on any srl error.  Public API only.
 */
#include <srl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t clock_of(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int usage(void)
{
    fprintf(stderr, "usage: srl-cell [--store shared|local] [--policy P] [--keys N] "
                    "[--decisions N] [--lockfree] [--wall]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *store = "shared", *policy = "token_bucket:1000000000/1h";
    uint64_t nkeys = 1000, n = 4000000;
    unsigned flags = 0;
    clockid_t clock = CLOCK_THREAD_CPUTIME_ID;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--lockfree") == 0)
            flags |= SRL_CONFIG_LOCKFREE;
        else if (strcmp(a, "--wall") == 0)
            clock = CLOCK_MONOTONIC;
        else if (v != NULL && strcmp(a, "--store") == 0 && ++i)
            store = v;
        else if (v != NULL && strcmp(a, "--policy") == 0 && ++i)
            policy = v;
        else if (v != NULL && strcmp(a, "--keys") == 0 && ++i)
            nkeys = strtoull(v, NULL, 10);
        else if (v != NULL && strcmp(a, "--decisions") == 0 && ++i)
            n = strtoull(v, NULL, 10);
        else
            return usage();
    }
    int local = strcmp(store, "local") == 0;
    if ((!local && strcmp(store, "shared") != 0) || nkeys == 0 || n == 0 ||
        nkeys > UINT32_MAX)
        return usage();

    srl_config c;
    srl_config_init(&c);
    int rc = srl_policy_parse(policy, &c.policy);
    if (rc != 0) {
        fprintf(stderr, "srl-cell: policy \"%s\": %s\n", policy, srl_strerror(rc));
        return 1;
    }
    c.capacity = nkeys + nkeys / 4;   /* srl-bench's load: 80 % */
    c.flags |= flags;
    srl_limiter *lim;
    rc = local ? srl_open_local(&c, &lim) : srl_open_anonymous(&c, &lim);
    if (rc != 0) {
        fprintf(stderr, "srl-cell: open: %s\n", srl_strerror(rc));
        return 1;
    }
    unsigned char(*keys)[16] = calloc(nkeys, 16);
    uint32_t *trace = malloc(n * sizeof *trace);
    if (keys == NULL || trace == NULL) {
        fprintf(stderr, "srl-cell: out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < nkeys; i++)
        for (int b = 0; b < 8; b++)
            keys[i][b] = (unsigned char)(i >> (8 * b));
    uint64_t x = 88172645463325252u;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        trace[i] = (uint32_t)(x % nkeys);
    }

    srl_decision d;
    uint64_t allowed = 0;
    for (int pass = 0; pass < 3; pass++) {   /* create, warm, time */
        uint64_t count = pass == 0 ? nkeys : n, t0 = clock_of(clock);
        for (uint64_t i = 0; i < count; i++) {
            rc = srl_acquire(lim, keys[pass == 0 ? i : trace[i]], 16, 1, &d);
            if (rc != 0) {
                fprintf(stderr, "srl-cell: srl_acquire: %s\n", srl_strerror(rc));
                return 1;
            }
            allowed += pass == 2 && d.allowed;
        }
        if (pass == 2)
            printf("%.1f ns per decision, %.1f%% allowed\n",
                   (double)(clock_of(clock) - t0) / (double)n, 100.0 * (double)allowed / (double)n);
    }
    srl_close(lim);
    free(keys);
    free(trace);
    return 0;
}
