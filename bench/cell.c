/*
 * srl-cell - one cell of srl-bench's decision table, alone, for comparing
 * two builds (bench/ab.sh runs two of them in turn and prints medians).
 *
 * Why it exists: on a shared VM the speed of the machine moves 10-20 %
 * between srl-bench runs a few minutes apart, as much as a change worth
 * measuring.  Short runs of two builds, alternated many times, see the same
 * machine; their medians compare where two long runs do not.
 *
 *   srl-cell [--store shared|local|floor] [--policy P] [--keys N] [--zipf]
 *            [--lockfree] [--seconds S] [--reps R] [--wall] [--cold-keys]
 *
 * The cell is srl-bench's, made by srl-bench's own code: its keys and
 * request sequence (keys.c, the decision cells' seeds and length), its
 * opener, capacity and warm-up (bench_acq_open_flags: a shared store is a
 * fresh /dev/shm segment) and its timing (bench_time_batches: R
 * repetitions of S / R seconds, the median kept; thread CPU time unless
 * --wall; keys brought ahead as srl-bench's, unless --cold-keys).  --store
 * floor times srl-bench's floor for the cell (the shared segment's bytes and
 * slot size).  Defaults: shared, token_bucket:1000000000/1h, 1000 keys,
 * uniform, 0.5 s, 5 repetitions.  Prints one line, "<ns> ns per decision,
 * <p>% allowed".  Exit status 1 on an srl error, 2 on a bad option.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: srl-cell [--store shared|local|floor] [--policy P] [--keys N] [--zipf] "
                    "[--lockfree] [--seconds S] [--reps R] [--wall] [--cold-keys]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *store = "shared", *policy = "token_bucket:1000000000/1h";
    uint64_t nkeys = 1000;
    uint32_t flags = 0;
    bench_dist dist = BENCH_UNIFORM;
    bench_opts o = {.seconds = 0.5, .reps = 5, .cpu_time = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--lockfree") == 0)
            flags |= SRL_CONFIG_LOCKFREE;
        else if (strcmp(a, "--wall") == 0)
            o.cpu_time = 0;
        else if (strcmp(a, "--cold-keys") == 0)
            o.cold_keys = 1;
        else if (strcmp(a, "--zipf") == 0)
            dist = BENCH_ZIPF;
        else if (v != NULL && strcmp(a, "--store") == 0 && ++i)
            store = v;
        else if (v != NULL && strcmp(a, "--policy") == 0 && ++i)
            policy = v;
        else if (v != NULL && strcmp(a, "--keys") == 0 && ++i)
            nkeys = strtoull(v, NULL, 10);
        else if (v != NULL && strcmp(a, "--seconds") == 0 && ++i)
            o.seconds = strtod(v, NULL);
        else if (v != NULL && strcmp(a, "--reps") == 0 && ++i)
            o.reps = atoi(v);
        else
            return usage();
    }
    int local = strcmp(store, "local") == 0, is_floor = strcmp(store, "floor") == 0;
    if ((!local && !is_floor && strcmp(store, "shared") != 0) || nkeys == 0 || nkeys > UINT32_MAX ||
        !(o.seconds > 0) || o.reps < 1)
        return usage();

    srl_policy p;
    int rc = srl_policy_parse(policy, &p);
    if (rc != 0) {
        fprintf(stderr, "srl-cell: policy \"%s\": %s\n", policy, srl_strerror(rc));
        return 1;
    }
    bench_keys keys;
    bench_seq seq;   /* srl-bench's decision cells: 4M requests, seed 42 + dist */
    if (bench_keys_make(&keys, nkeys) != 0 ||
        bench_seq_make(&seq, 1u << 22, 0, nkeys, dist, 42 + (uint64_t)dist) != 0) {
        fprintf(stderr, "srl-cell: out of memory\n");
        return 1;
    }
    keys.cold = o.cold_keys;
    bench_acq a;
    bench_acq_open_flags(&a, local ? BENCH_LOCAL : BENCH_SHARED, p, (srl_ticker){0}, flags,
                         &keys, nkeys, &seq);
    bench_subject sub = bench_acq_subject(&a);
    bench_floor f = {0};
    bench_floor_run fr = {&f, &keys, seq.idx};
    if (is_floor && sub.fn != NULL) {
        /* srl-bench's floor for this cell: the shared segment's bytes and
         * slot size, the segment closed before the floor is timed. */
        uint64_t tbytes = a.info.segment_bytes;
        uint32_t sbytes = a.info.slot_bytes;
        bench_acq_close(&a);
        sub.fn = NULL;
        if (bench_floor_make(&f, tbytes, sbytes) == 0)
            sub = bench_floor_subject(&fr, &seq);
    }
    if (sub.fn != NULL)
        sub.ns = bench_time_batches(&o, sub.fn, sub.ctx, sub.seq_len);
    bench_cell cell;
    bench_acq_cell(&a, &sub, &cell);
    if (is_floor) {
        cell.allowed_frac = 1.0;   /* the floor decides nothing */
        bench_floor_free(&f);
    }
    if (a.lim != NULL)
        bench_acq_close(&a);
    bench_keys_free(&keys);
    bench_seq_free(&seq);
    if (cell.rc != 0) {
        fprintf(stderr, "srl-cell: %s\n", srl_strerror(cell.rc));
        return 1;
    }
    printf("%.1f ns per decision, %.1f%% allowed\n", cell.ns, 100.0 * cell.allowed_frac);
    return 0;
}
