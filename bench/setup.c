/*
 * setup.c - what every section opens its cells with: store names, the
 * allow and deny policies, the capacity for a key count, the store opener
 * and the coarse ticker.  Called by acquire.c, baselines.c, scaling.c,
 * memory.c and redis.c; calls nothing of the benchmark's own, so no two
 * bench files call each other in a loop.
 *
 * Shared segments are created under a fresh name and unlinked as soon as
 * they are open (see bench.h).
 */
#include "bench.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

const char *bench_store_name(bench_store s)
{
    switch (s) {
    case BENCH_SHARED: return "shared";
    case BENCH_LOCAL: return "local";
    case BENCH_SHARED_GLOBAL: return "shared+global lock";
    case BENCH_SHARED_LOCKFREE: return "shared, lock-free";
    }
    return "?";
}

srl_policy bench_policy_allow(srl_algorithm a)
{
    if (a == SRL_SLIDING_LOG)
        return (srl_policy){.algorithm = a, .permits = 8, .window_ns = 10000ull};
    return (srl_policy){.algorithm = a, .permits = 1000000000u, .window_ns = 3600ull * 1000000000ull};
}

srl_policy bench_policy_deny(srl_algorithm a)
{
    return (srl_policy){.algorithm = a, .permits = 1, .window_ns = 3600ull * 1000000000ull};
}

uint64_t bench_capacity_for(uint64_t nkeys)
{
    return nkeys + nkeys / 4 + 64;
}

int bench_open(bench_store s, const srl_config *cfg, srl_limiter **out)
{
    if (s == BENCH_LOCAL)
        return srl_open_local(cfg, out);
    char name[64];
    snprintf(name, sizeof name, "/srl-bench-%d-%08x%08x", (int)getpid(),
             randombytes_random(), randombytes_random());
    srl_config c = *cfg;
    if (s == BENCH_SHARED_LOCKFREE)
        c.flags |= SRL_CONFIG_LOCKFREE;
    int rc = srl_open_shared(name, &c, SRL_CREATE | SRL_EXCL, out);
    if (rc == 0)
        srl_unlink(name);
    return rc;
}
