/*
 * timing.c - the one timing loop every single-process cell uses.
 *
 * A cell runs o->reps repetitions; each repetition calls the cell's batch
 * function over consecutive batches of BENCH_BATCH sequence positions
 * (wrapping around the sequence) until o->seconds / o->reps have passed, and
 * yields ns per request.  The median repetition is reported: one slow
 * repetition (a VM steal, a page-cache hiccup) does not move it, and it is
 * not the luckiest run either.
 *
 * The clock is read once per batch (1024 requests), so its ~20 ns cost is
 * below 0.1 % of a batch of the cheapest cells.
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

double bench_time_batches(const bench_opts *o, bench_batch_fn fn, void *ctx,
                          uint64_t seq_len)
{
    double per[32];
    int reps = o->reps < 1 ? 1 : (o->reps > 32 ? 32 : o->reps);
    uint64_t budget = (uint64_t)(o->seconds * 1e9 / reps);
    uint64_t pos = 0;
    volatile uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        uint64_t ops = 0;
        uint64_t t0 = bench_now_ns(), t1;
        do {
            sink += fn(ctx, pos, BENCH_BATCH);
            pos += BENCH_BATCH;
            if (pos >= seq_len)
                pos = 0;
            ops += BENCH_BATCH;
            t1 = bench_now_ns();
        } while (t1 - t0 < budget);
        per[r] = (double)(t1 - t0) / (double)ops;
    }
    (void)sink;
    qsort(per, (size_t)reps, sizeof per[0], cmp_double);
    return per[reps / 2];
}
