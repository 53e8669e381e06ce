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
 *            [--zipf] [--lockfree] [--wall]
 *
 * The keys and the request sequence are srl-bench's (keys.c: key i is
 * "u:%014llu" of i; uniform, or Zipf with --zipf; the seeds of srl-bench's
 * decision cells), so every build sees the same trace.  Every key is
 * created, then the trace runs once untimed (warm caches, grown pools),
 * then once timed.  Prints one line: "<ns> ns per decision" (thread CPU
 * time; --wall: CLOCK_MONOTONIC), then the share allowed.  Exit status 1
 * on any srl error, 2 on a bad option.  Public API only.
 */
#include "bench.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: srl-cell [--store shared|local] [--policy P] [--keys N] "
                    "[--decisions N] [--zipf] [--lockfree] [--wall]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *store = "shared", *policy = "token_bucket:1000000000/1h";
    uint64_t nkeys = 1000, n = 4000000;
    unsigned flags = 0;
    bench_dist dist = BENCH_UNIFORM;
    uint64_t (*now_ns)(void) = bench_cpu_ns;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--lockfree") == 0)
            flags |= SRL_CONFIG_LOCKFREE;
        else if (strcmp(a, "--wall") == 0)
            now_ns = bench_now_ns;
        else if (strcmp(a, "--zipf") == 0)
            dist = BENCH_ZIPF;
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
    bench_keys keys;
    bench_seq trace;
    if (bench_keys_make(&keys, nkeys) != 0 ||
        bench_seq_make(&trace, n, 0, nkeys, dist, 42 + (uint64_t)dist) != 0) {
        fprintf(stderr, "srl-cell: out of memory\n");
        return 1;
    }

    srl_decision d;
    uint64_t allowed = 0;
    for (int pass = 0; pass < 3; pass++) {   /* create, warm, time */
        uint64_t count = pass == 0 ? nkeys : n, t0 = now_ns();
        for (uint64_t i = 0; i < count; i++) {
            rc = srl_acquire(lim, bench_key(&keys, pass == 0 ? i : trace.idx[i]), BENCH_KEY_LEN,
                             1, &d);
            if (rc != 0) {
                fprintf(stderr, "srl-cell: srl_acquire: %s\n", srl_strerror(rc));
                return 1;
            }
            allowed += pass == 2 && d.allowed;
        }
        if (pass == 2)
            printf("%.1f ns per decision, %.1f%% allowed\n",
                   (double)(now_ns() - t0) / (double)n, 100.0 * (double)allowed / (double)n);
    }
    srl_close(lim);
    bench_keys_free(&keys);
    bench_seq_free(&trace);
    return 0;
}
