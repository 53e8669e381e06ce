/*
 * timing.c - the timing loop every single-process measurement uses.
 *
 * A measurement is a group of subjects (srl on each store, the floor, ...)
 * timed *interleaved*: repetition r times subject 0, then 1, ..., then
 * repetition r + 1.  The machine this runs on may carry other load that
 * comes and goes over seconds; interleaving makes such a burst hit every
 * subject of the group alike, so the ratios between them (the figures the
 * targets are about) stay meaningful.  Each subject keeps the median of its
 * repetitions: one slow repetition does not move it, and it is not the
 * luckiest either.
 *
 * One repetition of a subject: an untimed warm-up of an eighth of its
 * budget (the previous subject evicted part of its working set from the
 * caches), then batches of BENCH_BATCH sequence positions (wrapping around
 * the sequence) until o->seconds / o->reps have passed.  The clock is read
 * once per batch (1024 requests), below 0.1 % of the cheapest batch.
 * With --cpu-time the clock is this thread's CPU clock (a system call, about
 * 0.5 % of the cheapest batch): on a machine so loaded that this process
 * runs a fraction of the time, wall time measures the other load's time
 * slices, CPU time still measures the decisions (their cache misses
 * included, which the other load makes worse for every subject alike).
 *
 * Concurrency: none.
 */
#include "bench.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Run sub's batches for budget ns from *pos; returns ns per request.
 * With cpu, ns of this thread's CPU time (--cpu-time). */
static double run_for(bench_subject *sub, uint64_t budget, uint64_t *pos, uint64_t *sink,
                      int cpu)
{
    uint64_t (*now)(void) = cpu ? bench_cpu_ns : bench_now_ns;
    uint64_t ops = 0;
    uint64_t t0 = now(), t1;
    do {
        *sink += sub->fn(sub->ctx, *pos, BENCH_BATCH);
        *pos += BENCH_BATCH;
        if (*pos >= sub->seq_len)
            *pos = 0;
        ops += BENCH_BATCH;
        t1 = now();
    } while (t1 - t0 < budget);
    return (double)(t1 - t0) / (double)ops;
}

void bench_time_interleaved(const bench_opts *o, bench_subject *subs, int n)
{
    enum { MAXREPS = 32, MAXSUBS = 16 };
    double per[MAXSUBS][MAXREPS];
    uint64_t pos[MAXSUBS] = {0};
    int reps = o->reps < 1 ? 1 : (o->reps > MAXREPS ? MAXREPS : o->reps);
    if (n > MAXSUBS)
        n = MAXSUBS;
    uint64_t budget = (uint64_t)(o->seconds * 1e9 / reps);
    volatile uint64_t sink = 0;
    uint64_t acc = 0;
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            if (subs[i].fn == NULL)
                continue;
            run_for(&subs[i], budget / 8, &pos[i], &acc, o->cpu_time);
            per[i][r] = run_for(&subs[i], budget, &pos[i], &acc, o->cpu_time);
        }
    sink += acc;
    (void)sink;
    for (int i = 0; i < n; i++) {
        if (subs[i].fn == NULL)
            continue;
        qsort(per[i], (size_t)reps, sizeof per[i][0], cmp_double);
        subs[i].ns = per[i][reps / 2];
    }
}

double bench_time_batches(const bench_opts *o, bench_batch_fn fn, void *ctx,
                          uint64_t seq_len)
{
    bench_subject s = {fn, ctx, seq_len, 0};
    bench_time_interleaved(o, &s, 1);
    return s.ns;
}
