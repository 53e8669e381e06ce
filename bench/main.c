/*
 * main.c - srl-bench: command line and the order of the sections; they fill
 * a struct report, which report.c prints.
 *
 *   srl-bench [--quick] [--keys N] [--seconds S] [--reps R] [--only LIST]
 *
 * Sections, all in one run so every ratio compares numbers taken minutes
 * apart on the same machine:
 *   1. components: clock, hash, mutex, each algorithm on a hot state, and
 *      the hash, the clock and a locked CAS back to back;
 *   2. per-decision cost of srl_acquire (4 algorithms x shared/local x
 *      1k/N keys x uniform/Zipf), each next to its floor (same key reads,
 *      same table bytes, same slot size), plus the global-lock wrapper and
 *      the deny path;
 *   3. Redis GCRA script (when built with hiredis and redis-server exists);
 *   4. scaling: 1, 2, 4 processes, distinct keys and one hot key;
 *   6. flood: one hot key at 100x its limit, flood cache off and on, 1, 2, 4 processes;
 *   5. memory per slot and per key; creation of a big segment;
 *   6. the targets, met or missed.
 * Progress goes to stderr; the report (Markdown tables) to stdout, so
 * `srl-bench > result.md` keeps only the report.
 *
 * Concurrency: single-threaded; sections that fork wait for every child.
 */
#include "bench.h"
#include "report.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

static void progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("srl-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void usage(FILE *f)
{
    fputs("usage: srl-bench [--quick] [--keys N] [--seconds S] [--reps R] [--only LIST]\n"
          "                 [--cpu-time] [--cold-keys]\n"
          "  --quick      CI smoke run (100k keys, short cells, 1M-key creation): < 60 s\n"
          "  --keys N     the many-keys size (default 1000000)\n"
          "  --seconds S  measured time per cell (default 0.5)\n"
          "  --reps R     repetitions per cell, the median is reported (default 5)\n"
          "  --only LIST  run only these sections, comma-separated: components,\n"
          "               decisions, redis, scaling, memory, flood (default: all)\n"
          "  --cpu-time   time single-process cells by this thread's CPU clock, not\n"
          "               the wall clock (for a machine loaded by other jobs)\n"
          "  --cold-keys  do not bring each key into the cache ahead of its request\n"
          "               (the method of the runs before 2026-12-06 22:18 UTC; see\n"
          "               BENCHMARKS.md, \"Hot keys\")\n",
          f);
}

static int parse_args(int argc, char **argv, bench_opts *o)
{
    uint64_t keys = 0;
    double seconds = 0;
    int reps = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
        } else if (strcmp(a, "--cpu-time") == 0) {
            o->cpu_time = 1;
        } else if (strcmp(a, "--cold-keys") == 0) {
            o->cold_keys = 1;
        } else if (strcmp(a, "--keys") == 0 && i + 1 < argc) {
            char *end;
            keys = strtoull(argv[++i], &end, 10);
            if (*end != '\0' || keys < 1000 || keys > 100000000)
                return -1;
        } else if (strcmp(a, "--seconds") == 0 && i + 1 < argc) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end != '\0' || !(seconds > 0.001 && seconds < 600))
                return -1;
        } else if (strcmp(a, "--reps") == 0 && i + 1 < argc) {
            char *end;
            long r = strtol(argv[++i], &end, 10);
            if (*end != '\0' || r < 1 || r > 32)
                return -1;
            reps = (int)r;
        } else if (strcmp(a, "--only") == 0 && i + 1 < argc) {
            static const char *names[] = {"components", "decisions", "redis", "scaling",
                                          "memory", "flood"};
            char buf[256];
            snprintf(buf, sizeof buf, "%s", argv[++i]);
            o->sections = 0;
            for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                unsigned bit = 0;
                for (unsigned j = 0; j < 6; j++)
                    if (strcmp(t, names[j]) == 0)
                        bit = 1u << j;
                if (bit == 0)
                    return -1;
                o->sections |= bit;
            }
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            return -1;
        }
    }
    o->keys = keys ? keys : (o->quick ? 100000 : 1000000);
    o->seconds = seconds > 0 ? seconds : (o->quick ? 0.1 : 0.5);
    o->reps = reps ? reps : (o->quick ? 3 : 5);
    o->big_keys = o->quick ? 1000000 : 10000000;
    if (o->sections == 0)
        o->sections = BENCH_SEC_ALL;
    return 0;
}

/* ------------------------------------------------------------ machine */

static void read_loadavg(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fgets(buf, (int)len, f) != NULL)
            buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
    }
}

#ifndef SRL_BENCH_REDIS
void bench_redis_run(const bench_opts *o, const bench_keys *k, const bench_seq *seq,
                     bench_redis_result *out)
{
    (void)o, (void)k, (void)seq;
    memset(out, 0, sizeof *out);
    snprintf(out->why, sizeof out->why,
             "built without hiredis (meson option bench_redis)");
}
#endif

/* ------------------------------------------------------------ sections */

/* One group: every subject of one (key count, distribution, algorithm),
 * opened together and timed interleaved, so their ratios come from the same
 * minutes of the machine's life. */
static void run_group(struct report *R, int si, int di, int ai, const bench_keys *k,
                      const bench_seq *seq, int decisions)
{
    const bench_opts *o = &R->o;
    uint64_t n = R->sizes[si];
    srl_algorithm a = bench_algos[ai];
    srl_policy allow = bench_policy_allow(a), deny = bench_policy_deny(a);
    /* Explicit clocks, not srl_default_ticker: the allow policy would get the
     * precise clock and the deny policy (1/1h) the coarse one, and the
     * deny/allow ratios would measure the clock instead of the path. */
    srl_ticker def = {srl_monotonic_ns, NULL}, coarse = {srl_monotonic_coarse_ns, NULL};
    struct per_row *row = &R->per[si][di][ai];
    enum { FLOOR, SHARED, LOCAL, GLOBAL, C_SHARED, C_LOCAL, D_SHARED, D_LOCAL, M_SHARED, M_LOCAL,
           L_SHARED, LF_LOCAL, NSUB };
    /* Two limits (the allow token bucket and the allow GCRA) next to one. */
    srl_limits two = {.count = 2};
    two.limit[0] = allow;
    two.limit[1] = bench_policy_allow(SRL_GCRA);
    int tb = decisions && a == SRL_TOKEN_BUCKET;
    struct { bench_store store; srl_policy p; srl_ticker t; int on; bench_cell *out;
             const srl_limits *l; uint32_t flags; } spec[NSUB] = {
        [SHARED] = {BENCH_SHARED, allow, def, 1, &row->shared},
        [LOCAL] = {BENCH_LOCAL, allow, def, decisions, &row->local},
        [GLOBAL] = {BENCH_SHARED_GLOBAL, allow, def, decisions && a == SRL_TOKEN_BUCKET,
                    &R->global[si][di]},
        [C_SHARED] = {BENCH_SHARED, allow, coarse, decisions && a == SRL_TOKEN_BUCKET,
                      &R->coarse[si][di][0]},
        [C_LOCAL] = {BENCH_LOCAL, allow, coarse, decisions && a == SRL_TOKEN_BUCKET,
                     &R->coarse[si][di][1]},
        [D_SHARED] = {BENCH_SHARED, deny, def, decisions && si == 1 && di == 0,
                      &R->deny[ai][0]},
        [D_LOCAL] = {BENCH_LOCAL, deny, def, decisions && si == 1 && di == 0,
                     &R->deny[ai][1]},
        [M_SHARED] = {BENCH_SHARED, allow, def, tb, &R->compound[si][di][0], &two},
        [M_LOCAL] = {BENCH_LOCAL, allow, def, tb, &R->compound[si][di][1], &two},
        [L_SHARED] = {BENCH_SHARED_LOCKFREE, allow, def, decisions && a == SRL_GCRA,
                      &R->lockfree_shared[si][di]},
        [LF_LOCAL] = {BENCH_LOCAL, allow, def, decisions && a == SRL_GCRA, &R->lockfree[si][di],
                      NULL, SRL_CONFIG_LOCKFREE},
    };
    bench_acq acq[NSUB];
    bench_subject subs[NSUB];
    memset(subs, 0, sizeof subs);
    progress("%s, %llu keys, %s: opening and warming", srl_algorithm_name(a),
             (unsigned long long)n, bench_dist_name((bench_dist)di));
    for (int i = SHARED; i < NSUB; i++) {
        memset(&acq[i], 0, sizeof acq[i]);
        if (!spec[i].on)
            continue;
        if (spec[i].l != NULL)
            bench_acq_open_limits(&acq[i], spec[i].store, spec[i].l, spec[i].t, k, n, seq);
        else
            bench_acq_open_flags(&acq[i], spec[i].store, spec[i].p, spec[i].t, spec[i].flags, k,
                                 n, seq);
        subs[i] = bench_acq_subject(&acq[i]);
    }
    /* The floor: the same table bytes and slot size as the shared segment
     * (64-byte slots at 1.25 x keys if no segment could be made). */
    bench_floor f;
    bench_floor_run fr = {&f, k, seq->idx};
    uint64_t tbytes = acq[SHARED].info.segment_bytes ? acq[SHARED].info.segment_bytes
                                                     : bench_capacity_for(n) * 64;
    uint32_t sbytes = acq[SHARED].info.slot_bytes ? acq[SHARED].info.slot_bytes : 64;
    int have_floor = bench_floor_make(&f, tbytes, sbytes) == 0;
    if (have_floor)
        subs[FLOOR] = bench_floor_subject(&fr, seq);
    progress("%s, %llu keys, %s: timing", srl_algorithm_name(a), (unsigned long long)n,
             bench_dist_name((bench_dist)di));
    bench_time_interleaved(o, subs, NSUB);
    row->floor_ns = have_floor ? subs[FLOOR].ns : 0;
    for (int i = SHARED; i < NSUB; i++) {
        if (spec[i].on)
            bench_acq_cell(&acq[i], &subs[i], spec[i].out);
        bench_acq_close(&acq[i]);
    }
    if (have_floor)
        bench_floor_free(&f);
}

static void run_per_decision(struct report *R)
{
    const bench_opts *o = &R->o;
    uint64_t seqlen = o->quick ? (1u << 20) : (1u << 22);
    int decisions = (o->sections & BENCH_SEC_DECISIONS) != 0;
    bench_keys k;
    if (bench_keys_make(&k, R->sizes[1]) != 0) {
        progress("out of memory for keys");
        exit(1);
    }
    k.cold = o->cold_keys;
    for (int si = 0; si < 2; si++) {
        uint64_t n = R->sizes[si];
        bench_seq seq[2];
        for (int di = 0; di < 2; di++)
            if (bench_seq_make(&seq[di], seqlen, 0, n, (bench_dist)di, 42 + di) != 0) {
                progress("out of memory for sequences");
                exit(1);
            }
        for (int ai = 0; ai < NALGO; ai++)
            for (int di = 0; di < 2; di++) {
                /* --only redis still needs srl's gcra cell at N keys, uniform. */
                int need = decisions || (di == 0 && bench_algos[ai] == SRL_GCRA);
                if (need)
                    run_group(R, si, di, ai, &k, &seq[di], decisions);
            }
        if (si == 0) {
            const bench_cell *g = &R->per[0][0][bench_algo_index(SRL_GCRA)].shared;
            R->srl_gcra_rate_small = g->rc == 0 && g->ns > 0 ? 1e9 / g->ns : 0;
        }
        if (si == 1) {
            const bench_cell *g = &R->per[1][0][bench_algo_index(SRL_GCRA)].shared;
            R->srl_gcra_rate = g->rc == 0 && g->ns > 0 ? 1e9 / g->ns : 0;
            if (o->sections & BENCH_SEC_REDIS) {
                progress("redis");
                bench_redis_run(o, &k, &seq[0], &R->redis);
            }
        }
        for (int di = 0; di < 2; di++)
            bench_seq_free(&seq[di]);
    }
    bench_keys_free(&k);
}

static void run_scaling(struct report *R)
{
    bench_opts o = R->o;
    int rounds = R->o.quick ? 1 : 3;
    static const char *kinds[3] = {"srl", "global lock", "floor"};
    for (int si = 0; si < 2; si++) {
        bench_keys k;
        if (bench_keys_make(&k, R->sizes[si]) != 0)
            return;
        k.cold = o.cold_keys;
        for (int kind = 0; kind < 3; kind++)
            for (int hot = 0; hot < 2; hot++) {
                if (si == 0 && hot)
                    continue;   /* one hot key is one key, whatever the key set */
                progress("scaling %s, %s, %llu keys: 1, 2, 4 processes x %d rounds",
                         kinds[kind], hot ? "hot key" : "distinct keys",
                         (unsigned long long)R->sizes[si], rounds);
                bench_scale_series(&o, (bench_scale_kind)kind,
                                   bench_policy_allow(SRL_TOKEN_BUCKET), &k, hot, bench_nprocs, 3,
                                   rounds, R->scale[si][kind][hot]);
            }
        bench_keys_free(&k);
    }
}

/* The hot-key denial flood (issue 17, item 5): printed after the report,
 * as its own table.  Per-decision cost = processes / total rate: the time
 * a decision holds one process (equal to CPU time while processes <= cores). */
static void run_flood(struct report *R)
{
    bench_keys k;
    if (bench_keys_make(&k, 1000) != 0)
        return;
    int rounds = R->o.quick ? 3 : 7;
    progress("flood: one hot key, cache off/on, 1, 2, 4 processes x %d rounds", rounds);
    srl_policy p = {.algorithm = SRL_TOKEN_BUCKET, .permits = 100, .window_ns = 1000000000ull};
    bench_flood_series(&R->o, p, &k, rounds, R->flood);
    bench_keys_free(&k);
}

static void print_flood(const struct report *R)
{
    static const int np[3] = {1, 2, 4};
    printf("\n## Hot-key denial flood (issue 17, item 5)\n\n"
           "One key, token_bucket:100/1s, every process asking as fast as it can (>99.99 %% "
           "denied); a plain handle (off) against one with SRL_CONFIG_FLOOD_CACHE (on), rounds "
           "interleaving cache and process count, median of %d rounds of %.2f s.  CPU ns per "
           "decision = all processes' CPU time / decisions (what a decision costs, whatever "
           "else runs); wall: processes / total rate.\n\n",
           R->o.quick ? 3 : 7, R->o.seconds);
    printf("| processes | off: decisions/s | off: CPU ns/decision | off: wall ns/decision/process "
           "| on: decisions/s | on: CPU ns/decision | on: wall ns/decision/process | allowed (on) |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int j = 0; j < 3; j++) {
        const bench_scale_result *a = &R->flood[0][j], *b = &R->flood[1][j];
        if (a->rc != 0 || b->rc != 0 || a->rate <= 0 || b->rate <= 0) {
            printf("| %d | error %d | | | error %d | | | |\n", np[j], a->rc, b->rc);
            continue;
        }
        printf("| %d | %.3g M | %.1f | %.1f | %.3g M | %.1f | %.1f | %.4f %% |\n", np[j],
               a->rate / 1e6, a->cpu_ns, np[j] * 1e9 / a->rate, b->rate / 1e6, b->cpu_ns,
               np[j] * 1e9 / b->rate, 100 * b->allowed_frac);
    }
}

static void run_memory(struct report *R)
{
    uint64_t cap = R->o.quick ? 16384 : 65536;
    for (int ai = 0; ai < NALGO; ai++) {
        for (int di = 0; di < 3; di++) {
            progress("memory %s display %u", srl_algorithm_name(bench_algos[ai]),
                     bench_displays[di]);
            bench_mem_shared(bench_algos[ai], bench_displays[di], cap, &R->mem[ai][di]);
        }
        int rc;
        R->local_mem[ai] = bench_mem_local(bench_algos[ai], cap, &rc);
        if (rc != 0)
            R->local_mem[ai] = -1;
    }
    progress("creating a %llu-key segment", (unsigned long long)R->o.big_keys);
    bench_create_big(R->o.big_keys, &R->big);
}

int main(int argc, char **argv)
{
    static struct report R;
    if (parse_args(argc, argv, &R.o) != 0) {
        usage(stderr);
        return 64;
    }
    if (sodium_init() < 0) {
        fputs("srl-bench: sodium_init failed\n", stderr);
        return 70;
    }
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    R.sizes[0] = 1000;
    R.sizes[1] = R.o.keys;
    uint64_t t0 = bench_now_ns();
    read_loadavg(R.load_start, sizeof R.load_start);
    R.par_start = bench_cpu_parallelism(R.o.quick ? 0.2 : 0.5);
    R.speeds = bench_cpu_speeds(R.o.quick ? 0.1 : 0.3, R.speed, 8);
    if (R.o.sections & BENCH_SEC_COMPONENTS) {
        progress("components");
        bench_components_measure(&R.o, &R.comp);
    }
    if (R.o.sections & (BENCH_SEC_DECISIONS | BENCH_SEC_REDIS))
        run_per_decision(&R);
    if (R.o.sections & BENCH_SEC_SCALING)
        run_scaling(&R);
    if (R.o.sections & BENCH_SEC_MEMORY)
        run_memory(&R);
    if (R.o.sections & BENCH_SEC_FLOOD)
        run_flood(&R);
    read_loadavg(R.load_end, sizeof R.load_end);
    R.par_end = bench_cpu_parallelism(R.o.quick ? 0.2 : 0.5);
    double total = (double)(bench_now_ns() - t0) / 1e9;

    report_print(&R, total);
    if (R.o.sections & BENCH_SEC_FLOOD)
        print_flood(&R);
    int errors = report_count_errors(&R);
    if (errors) {
        printf("\n%d cells failed with an srl error (see the tables).\n", errors);
        progress("%d cells failed", errors);
    }
    progress("done in %.1f s", total);
    fflush(stdout);
    return errors ? 1 : 0;
}
