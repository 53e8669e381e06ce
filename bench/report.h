/*
 * report.h - what one srl-bench run measured (struct report, filled by
 * main.c's sections) and how it is printed (report.c).
 *
 * Arrays indexed by algorithm use bench_algos' order; code that means one
 * algorithm looks its index up with bench_algo_index(SRL_GCRA), never by
 * position.  report.c only reads a report; main.c only fills it.
 */
#ifndef SRL_BENCH_REPORT_H
#define SRL_BENCH_REPORT_H

#include "bench.h"

#define NALGO 4
/* The algorithms measured, in report order. */
extern const srl_algorithm bench_algos[NALGO];
/* a's index in bench_algos (aborts for an algorithm not measured). */
int bench_algo_index(srl_algorithm a);

/* The process counts of the scaling section, and the key displays of the
 * memory section. */
extern const int bench_nprocs[3];
extern const uint32_t bench_displays[3];


/* Results of the per-decision section, by [size][dist][algo]. */
struct per_row {
    double floor_ns;
    bench_cell shared, local;
};

struct report {
    bench_opts o;
    char load_start[64], load_end[64];
    double par_start, par_end;           /* bench_cpu_parallelism before and after */
    double speed[8];                     /* bench_cpu_speeds at the start */
    int speeds;                          /* how many of speed[] were measured */
    uint64_t sizes[2];
    bench_components comp;
    struct per_row per[2][2][NALGO];
    bench_cell global[2][2];              /* token bucket inside the global lock */
    bench_cell coarse[2][2][2];           /* token bucket, coarse ticker: [size][dist][shared, local] */
    bench_cell lockfree_shared[2][2];     /* gcra, shared store, SRL_CONFIG_LOCKFREE: [size][dist] */
    bench_cell compound[2][2][2];         /* token bucket + gcra (two limits): [size][dist][shared, local] */
    bench_cell lockfree[2][2];            /* gcra, local store, SRL_CONFIG_LOCKFREE: [size][dist] */
    bench_cell deny[NALGO][2];            /* [algo][shared, local], N keys uniform */
    bench_redis_result redis;
    double srl_gcra_rate;                 /* 1 process, shared, N keys uniform */
    double srl_gcra_rate_small;           /* the same at 1k keys */
    bench_scale_result scale[2][3][2][3]; /* [size][kind][hot][1,2,4 procs]; size 0: distinct only */
    bench_scale_result flood[2][3];       /* hot-key denial flood: [cache off, on][1,2,4 procs] */
    bench_mem_row mem[NALGO][3];
    double local_mem[NALGO];
    bench_create_result big;
};

/* Print the whole report (Markdown) to stdout; total is the run's seconds. */
void report_print(const struct report *R, double total);
/* Cells that failed with an srl error (see report.c). */
int report_count_errors(const struct report *R);

#endif
