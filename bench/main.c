/*
 * main.c - srl-bench: command line, the order of the sections, the report.
 *
 *   srl-bench [--quick] [--keys N] [--seconds S] [--reps R] [--only LIST]
 *
 * Sections, all in one run so every ratio compares numbers taken minutes
 * apart on the same machine:
 *   1. components: clock, hash, mutex, each algorithm on a hot state;
 *   2. per-decision cost of srl_acquire (4 algorithms x shared/local x
 *      1k/N keys x uniform/Zipf), each next to its floor (same key reads,
 *      same table bytes, same slot size), plus the global-lock wrapper and
 *      the deny path;
 *   3. Redis GCRA script (when built with hiredis and redis-server exists);
 *   4. scaling: 1, 2, 4 processes, distinct keys and one hot key;
 *   5. memory per slot and per key; creation of a big segment;
 *   6. the targets, met or missed.
 * Progress goes to stderr; the report (Markdown tables) to stdout, so
 * `srl-bench > result.md` keeps only the report.
 *
 * Concurrency: single-threaded; sections that fork wait for every child.
 */
#include "bench.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <sodium.h>

#define NALGO 4
static const srl_algorithm algos[NALGO] = {SRL_TOKEN_BUCKET, SRL_GCRA,
                                           SRL_SLIDING_COUNTER, SRL_SLIDING_LOG};

/* Results of the per-decision section, by [size][dist][algo]. */
struct per_row {
    double floor_ns;
    bench_cell shared, local;
};

struct report {
    bench_opts o;
    char load_start[64], load_end[64];
    double par_start, par_end;           /* bench_cpu_parallelism before and after */
    uint64_t sizes[2];
    bench_components comp;
    struct per_row per[2][2][NALGO];
    bench_cell global[2][2];              /* token bucket inside the global lock */
    bench_cell coarse[2][2][2];           /* token bucket, coarse ticker: [size][dist][shared, local] */
    bench_cell deny[NALGO][2];            /* [algo][shared, local], N keys uniform */
    bench_redis_result redis;
    double srl_gcra_rate;                 /* 1 process, shared, N keys uniform */
    double srl_gcra_rate_small;           /* the same at 1k keys */
    bench_scale_result scale[2][3][2][3]; /* [size][kind][hot][1,2,4 procs]; size 0: distinct only */
    bench_mem_row mem[NALGO][3];
    double local_mem[NALGO];
    bench_create_result big;
};

static const int nprocs[3] = {1, 2, 4};
static const uint32_t displays[3] = {0, 16, 64};

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
          "  --quick      CI smoke run (100k keys, short cells, 1M-key creation): < 60 s\n"
          "  --keys N     the many-keys size (default 1000000)\n"
          "  --seconds S  measured time per cell (default 0.5)\n"
          "  --reps R     repetitions per cell, the median is reported (default 5)\n"
          "  --only LIST  run only these sections, comma-separated: components,\n"
          "               decisions, redis, scaling, memory (default: all)\n",
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
                                          "memory"};
            char buf[256];
            snprintf(buf, sizeof buf, "%s", argv[++i]);
            o->sections = 0;
            for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                unsigned bit = 0;
                for (unsigned j = 0; j < 5; j++)
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

static void print_machine(const struct report *R)
{
    const bench_opts *o = &R->o;
    char model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c != NULL) {
                    c += 1 + (c[1] == ' ');
                    c[strcspn(c, "\n")] = '\0';
                    snprintf(model, sizeof model, "%s", c);
                }
                break;
            }
        }
        fclose(f);
    }
    struct utsname u;
    uname(&u);
    printf("## Machine\n\n");
    printf("- CPUs online (nproc): %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    printf("- CPU model: %s\n", model);
    printf("- kernel: %s %s %s\n", u.sysname, u.release, u.machine);
    printf("- srl %d.%d.%d, options: keys=%llu seconds/cell=%.2f reps=%d%s\n",
           SRL_VERSION_MAJOR, SRL_VERSION_MINOR, SRL_VERSION_PATCH,
           (unsigned long long)o->keys, o->seconds, o->reps, o->quick ? " (--quick)" : "");
    printf("- /proc/loadavg at start: %s; at end: %s\n", R->load_start, R->load_end);
    printf("- CPU check: 2 processes of a pure ALU loop run %.2fx / %.2fx the work of one "
           "(start / end; 2.00 = two free cores; less caps every scaling ratio below)\n\n",
           R->par_start, R->par_end);
}

static const char *size_name(uint64_t n, char *buf, size_t len)
{
    if (n % 1000000 == 0)
        snprintf(buf, len, "%lluM", (unsigned long long)(n / 1000000));
    else if (n % 1000 == 0)
        snprintf(buf, len, "%lluk", (unsigned long long)(n / 1000));
    else
        snprintf(buf, len, "%llu", (unsigned long long)n);
    return buf;
}

/* "12.3" or the error's name when the cell failed. */
static const char *cell_ns(const bench_cell *c, char *buf, size_t len)
{
    if (c->rc != 0)
        snprintf(buf, len, "error: %s", srl_strerror(c->rc));
    else
        snprintf(buf, len, "%.1f", c->ns);
    return buf;
}

static const char *ratio(double a, double b, int ok, char *buf, size_t len)
{
    if (!ok || b <= 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.2fx", a / b);
    return buf;
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
    srl_algorithm a = algos[ai];
    srl_policy allow = bench_policy_allow(a), deny = bench_policy_deny(a);
    srl_ticker def = {NULL, NULL}, coarse = {bench_coarse_ns, NULL};
    struct per_row *row = &R->per[si][di][ai];
    enum { FLOOR, SHARED, LOCAL, GLOBAL, C_SHARED, C_LOCAL, D_SHARED, D_LOCAL, NSUB };
    struct { bench_store store; srl_policy p; srl_ticker t; int on; bench_cell *out; } spec[NSUB] = {
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
        bench_acq_open(&acq[i], spec[i].store, spec[i].p, spec[i].t, k, n, seq);
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
                int need = decisions || (di == 0 && algos[ai] == SRL_GCRA);
                if (need)
                    run_group(R, si, di, ai, &k, &seq[di], decisions);
            }
        if (si == 0) {
            const bench_cell *g = &R->per[0][0][1].shared;
            R->srl_gcra_rate_small = g->rc == 0 && g->ns > 0 ? 1e9 / g->ns : 0;
        }
        if (si == 1) {
            const bench_cell *g = &R->per[1][0][1].shared;
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
        for (int kind = 0; kind < 3; kind++)
            for (int hot = 0; hot < 2; hot++) {
                if (si == 0 && hot)
                    continue;   /* one hot key is one key, whatever the key set */
                progress("scaling %s, %s, %llu keys: 1, 2, 4 processes x %d rounds",
                         kinds[kind], hot ? "hot key" : "distinct keys",
                         (unsigned long long)R->sizes[si], rounds);
                bench_scale_series(&o, (bench_scale_kind)kind,
                                   bench_policy_allow(SRL_TOKEN_BUCKET), &k, hot, nprocs, 3,
                                   rounds, R->scale[si][kind][hot]);
            }
        bench_keys_free(&k);
    }
}

static void run_memory(struct report *R)
{
    uint64_t cap = R->o.quick ? 16384 : 65536;
    for (int ai = 0; ai < NALGO; ai++) {
        for (int di = 0; di < 3; di++) {
            progress("memory %s display %u", srl_algorithm_name(algos[ai]), displays[di]);
            bench_mem_shared(algos[ai], displays[di], cap, &R->mem[ai][di]);
        }
        int rc;
        R->local_mem[ai] = bench_mem_local(algos[ai], cap, &rc);
        if (rc != 0)
            R->local_mem[ai] = -1;
    }
    progress("creating a %llu-key segment", (unsigned long long)R->o.big_keys);
    bench_create_big(R->o.big_keys, &R->big);
}

/* ------------------------------------------------------------ report */

static void print_components(const struct report *R)
{
    const bench_components *c = &R->comp;
    printf("## Components (hot caches, one process)\n\n");
    printf("| piece | ns |\n| --- | ---: |\n");
    printf("| clock_gettime(CLOCK_MONOTONIC), srl's default ticker | %.1f |\n", c->clock_ns);
    printf("| clock_gettime(CLOCK_MONOTONIC_COARSE) | %.1f |\n", c->coarse_ns);
    printf("| SipHash-x24 (libsodium), 16-byte key | %.1f |\n", c->siphash_ns);
    printf("| robust process-shared mutex lock+unlock, uncontended | %.1f |\n", c->mutex_ns);
    printf("| the same, locked with pthread_mutex_clocklock (bounded wait) | %.1f |\n",
           c->mutex_clock_ns);
    for (int ai = 0; ai < NALGO; ai++) {
        char pol[SRL_POLICY_TEXT_MAX];
        srl_policy p = bench_policy_allow(algos[ai]);
        srl_policy_format(&p, pol, sizeof pol);
        printf("| srl_state_acquire %s (pure algorithm) | %.1f |\n", pol,
               c->algo_ns[algos[ai]]);
    }
    printf("\n");
}

static void print_per_decision(const struct report *R)
{
    char a[64], b[64], c[64], d[64], e[64];
    printf("## Per-decision cost of srl_acquire (one process, ns per decision)\n\n");
    printf("Floor = SipHash-x24 of the key + one robust mutex lock/unlock + read+write of a "
           "slot-sized block, in a MAP_SHARED table of the same bytes as that row's segment. "
           "Allow policies: 1e9 permits/1h (sliding_log: 8/10us, its allowed share is shown).\n\n");
    printf("| keys | dist | algorithm | floor | shared | shared/floor | local | local/floor | "
           "allowed (shared) |\n");
    printf("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int si = 0; si < 2; si++)
        for (int di = 0; di < 2; di++)
            for (int ai = 0; ai < NALGO; ai++) {
                const struct per_row *r = &R->per[si][di][ai];
                printf("| %s | %s | %s | %.1f | %s | %s | %s | %s | %.1f%% |\n",
                       size_name(R->sizes[si], a, sizeof a), bench_dist_name((bench_dist)di),
                       srl_algorithm_name(algos[ai]), r->floor_ns,
                       cell_ns(&r->shared, b, sizeof b),
                       ratio(r->shared.ns, r->floor_ns, r->shared.rc == 0, c, sizeof c),
                       cell_ns(&r->local, d, sizeof d),
                       ratio(r->local.ns, r->floor_ns, r->local.rc == 0, e, sizeof e),
                       100.0 * r->shared.allowed_frac);
            }
    printf("\n");
    int untracked = 0;
    for (int si = 0; si < 2; si++)
        for (int di = 0; di < 2; di++)
            for (int ai = 0; ai < NALGO; ai++)
                untracked += R->per[si][di][ai].shared.untracked != 0 ||
                             R->per[si][di][ai].local.untracked != 0;
    if (untracked)
        printf("WARNING: %d cells had untracked (table full) decisions.\n\n", untracked);

    printf("### The global lock (the simplest correct design), one process\n\n");
    printf("token_bucket on the shared store, every srl_acquire inside one extra global "
           "robust mutex.\n\n");
    printf("| keys | dist | shared | shared + global lock | ratio |\n");
    printf("| ---: | --- | ---: | ---: | ---: |\n");
    for (int si = 0; si < 2; si++)
        for (int di = 0; di < 2; di++) {
            const bench_cell *s = &R->per[si][di][0].shared, *g = &R->global[si][di];
            printf("| %s | %s | %s | %s | %s |\n", size_name(R->sizes[si], a, sizeof a),
                   bench_dist_name((bench_dist)di), cell_ns(s, b, sizeof b),
                   cell_ns(g, c, sizeof c),
                   ratio(g->ns, s->ns, g->rc == 0 && s->rc == 0, d, sizeof d));
        }
    printf("\n### Without the clock read (token_bucket, uniform keys)\n\n");
    printf("The same cells with a CLOCK_MONOTONIC_COARSE ticker (srl_config.ticker): the "
           "difference is what the default ticker's clock read costs inside each decision; "
           "the floor reads no clock.\n\n");
    printf("| keys | floor | shared | shared, coarse ticker | coarse/floor | local | "
           "local, coarse ticker | coarse/floor |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int si = 0; si < 2; si++) {
        const struct per_row *r = &R->per[si][0][0];
        const bench_cell *cs = &R->coarse[si][0][0], *cl = &R->coarse[si][0][1];
        char f[64], g[64], h[64];
        printf("| %s | %.1f | %s | %s | %s | %s | %s | %s |\n",
               size_name(R->sizes[si], a, sizeof a), r->floor_ns,
               cell_ns(&r->shared, b, sizeof b), cell_ns(cs, c, sizeof c),
               ratio(cs->ns, r->floor_ns, cs->rc == 0, d, sizeof d),
               cell_ns(&r->local, e, sizeof e), cell_ns(cl, f, sizeof f),
               ratio(cl->ns, r->floor_ns, cl->rc == 0, g, sizeof g));
        (void)h;
    }
    printf("\n### Deny path (%s keys, uniform; policy 1/1h: every timed decision is a denial)\n\n",
           size_name(R->sizes[1], a, sizeof a));
    printf("| algorithm | shared deny | shared allow | deny/allow | local deny | local allow | "
           "deny/allow | denied (shared) |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int ai = 0; ai < NALGO; ai++) {
        const bench_cell *sd = &R->deny[ai][0], *ld = &R->deny[ai][1];
        const bench_cell *sa = &R->per[1][0][ai].shared, *la = &R->per[1][0][ai].local;
        char f[64], g[64], h[64];
        printf("| %s | %s | %s | %s | %s | %s | %s | %.1f%% |\n", srl_algorithm_name(algos[ai]),
               cell_ns(sd, b, sizeof b), cell_ns(sa, c, sizeof c),
               ratio(sd->ns, sa->ns, sd->rc == 0 && sa->rc == 0, d, sizeof d),
               cell_ns(ld, e, sizeof e), cell_ns(la, f, sizeof f),
               ratio(ld->ns, la->ns, ld->rc == 0 && la->rc == 0, g, sizeof g),
               100.0 * (1.0 - sd->allowed_frac));
        (void)h;
    }
    printf("\n");
}

static void print_redis(const struct report *R)
{
    char a[64];
    const bench_redis_result *r = &R->redis;
    printf("## Redis GCRA script (EVALSHA over a private unix socket, no pipelining)\n\n");
    if (!r->available) {
        printf("Not measured: %s.\n\n", r->why[0] ? r->why : "unknown reason");
        return;
    }
    char n1[32], n2[32], c1[64], c2[64];
    size_name(R->sizes[1], n1, sizeof n1);
    size_name(R->sizes[0], n2, sizeof n2);
    printf("| who | decisions/s | srl gcra (shared, 1 process, %s keys) / this | "
           "srl gcra (%s keys) / this |\n", n1, n2);
    printf("| --- | ---: | ---: | ---: |\n");
    static const char *place[3] = {"on the server's CPU", "on the other CPU", "unpinned"};
    double big = R->srl_gcra_rate, small = R->srl_gcra_rate_small;
    for (int i = 0; i < 3; i++)
        printf("| Redis %s, 1 client %s | %.0f | %s | %s |\n", r->version, place[i],
               r->rate_placed[i], ratio(big, r->rate_placed[i], big > 0, c1, sizeof c1),
               ratio(small, r->rate_placed[i], small > 0, c2, sizeof c2));
    printf("| **Redis %s, 1 client, best placement** | **%.0f** | **%s** | **%s** |\n",
           r->version, r->rate1, ratio(big, r->rate1, big > 0, c1, sizeof c1),
           ratio(small, r->rate1, small > 0, c2, sizeof c2));
    printf("| Redis %s, 2 clients (unpinned) | %.0f | %s | %s |\n", r->version, r->rate2,
           ratio(big, r->rate2, big > 0 && r->rate2 > 0, c1, sizeof c1),
           ratio(small, r->rate2, small > 0 && r->rate2 > 0, c2, sizeof c2));
    printf("| srl gcra, shared store, 1 process, uniform keys | %.0f (%s keys) | 1.00x | "
           "%.0f (%s keys) |\n\n", big, n1, small, n2);
    (void)a;
    if (r->allowed_frac < 0.999)
        printf("WARNING: the Redis script allowed only %.1f%%.\n\n", 100 * r->allowed_frac);
}

static void print_scaling(const struct report *R)
{
    char a[64], b[64], c[64];
    static const char *kinds[3] = {"srl shared", "srl + global lock", "floor"};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("## Scaling (forked processes on one segment, token_bucket 1e9/1h, decisions/s "
           "total)\n\n");
    printf("Each cell: the median of %d rounds; the process counts run round-robin. "
           "This machine has %ld CPUs: 4 processes on %ld cores cannot run more than %ld at "
           "once, so 4 processes measure time-slicing, not parallelism. Distinct keys: process "
           "i uses quarter i of the key set (the same working set per process for every "
           "process count); hot: every process asks for the same key. The floor rows show "
           "what the machine itself allows for the same memory traffic.\n\n",
           R->o.quick ? 1 : 3, ncpu, ncpu, ncpu);
    printf("| store | keys | 1 process | 2 processes | 2 vs 1 | 4 processes | 4 vs 1 |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int kind = 0; kind < 3; kind++)
        for (int row = 0; row < 3; row++) {
            int si = row == 0 ? 0 : 1, hot = row == 2;
            const bench_scale_result *s = R->scale[si][kind][hot];
            char keys[96];
            if (hot)
                snprintf(keys, sizeof keys, "one hot key");
            else
                snprintf(keys, sizeof keys, "%s distinct", size_name(R->sizes[si], c, sizeof c));
            if (s[0].rc != 0) {
                printf("| %s | %s | error: %s | | | | |\n", kinds[kind], keys,
                       srl_strerror(s[0].rc));
                continue;
            }
            printf("| %s | %s | %.0f | %.0f | %s | %.0f | %s |\n", kinds[kind], keys,
                   s[0].rate, s[1].rate,
                   ratio(s[1].rate, s[0].rate, s[1].rc == 0, a, sizeof a), s[2].rate,
                   ratio(s[2].rate, s[0].rate, s[2].rc == 0, b, sizeof b));
        }
    printf("\n");
}

static void print_memory(const struct report *R)
{
    char pol[SRL_POLICY_TEXT_MAX];
    printf("## Memory (shared segment bytes from srl_info_get; local heap from mallinfo2)\n\n");
    printf("\"filled\" = keys tracked when the first new key found no free slot (load "
           "reached by the bucketed table); B/key = segment bytes / filled.\n\n");
    printf("| algorithm | policy | display | state B | slot B | slots | segment B | "
           "B/slot (all) | filled | load | B/key | local heap B/key |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int ai = 0; ai < NALGO; ai++)
        for (int di = 0; di < 3; di++) {
            const bench_mem_row *m = &R->mem[ai][di];
            srl_policy_format(&m->policy, pol, sizeof pol);
            if (m->rc != 0 && m->capacity == 0) {
                printf("| %s | %s | %u | %u | error: %s | | | | | | | |\n",
                       srl_algorithm_name(m->algo), pol, m->display, m->state_bytes,
                       srl_strerror(m->rc));
                continue;
            }
            char lm[32] = "";
            if (di == 0)
                snprintf(lm, sizeof lm, "%.0f", R->local_mem[ai]);
            printf("| %s | %s | %u | %u | %u | %llu | %llu | %.1f | %llu | %.1f%% | %.1f | %s |\n",
                   srl_algorithm_name(m->algo), pol, m->display, m->state_bytes, m->slot_bytes,
                   (unsigned long long)m->capacity, (unsigned long long)m->segment_bytes,
                   m->capacity ? (double)m->segment_bytes / (double)m->capacity : 0,
                   (unsigned long long)m->filled,
                   m->capacity ? 100.0 * (double)m->filled / (double)m->capacity : 0,
                   m->filled ? (double)m->segment_bytes / (double)m->filled : 0, lm);
        }
    printf("\nPublished figures, for comparison (quoted, not measured here): nginx "
           "limit_req: \"The stored state always occupies 64 bytes on 32-bit platforms and "
           "128 bytes on 64-bit platforms. One megabyte zone can keep about 16 thousand "
           "64-byte states or about 8 thousand 128-byte states.\" HAProxy stick-table size: "
           "\"Count approximately 50 bytes per entry, plus the size of a string if any\" "
           "(about 50-60 B per IPv4 key).\n\n");
    const bench_create_result *b = &R->big;
    printf("### Creating a big segment (token_bucket:100/1m, display 0)\n\n");
    if (b->rc != 0 && b->capacity == 0) {
        printf("Failed: %s.\n\n", srl_strerror(b->rc));
        return;
    }
    printf("| slots | segment bytes | B/slot | srl_open_shared(SRL_CREATE) | first request "
           "for 1M keys |\n| ---: | ---: | ---: | ---: | ---: |\n");
    printf("| %llu | %llu (%.1f MiB) | %.1f | %.3f s | %.3f s |\n\n",
           (unsigned long long)b->capacity, (unsigned long long)b->segment_bytes,
           (double)b->segment_bytes / 1048576.0,
           b->capacity ? (double)b->segment_bytes / (double)b->capacity : 0, b->seconds,
           b->first_pass_seconds);
}

static void target(const char *what, double value, const char *unit, double limit, int le,
                   int ok)
{
    const char *verdict = !ok ? "not measured"
                          : ((le ? value <= limit : value >= limit) ? "met" : "MISSED");
    printf("| %s | %s %g | ", what, le ? "<=" : ">=", limit);
    if (ok)
        printf("%.2f%s | %s |\n", value, unit, verdict);
    else
        printf("- | %s |\n", verdict);
}

static void print_targets(const struct report *R)
{
    printf("## Targets\n\n| target | goal | measured (worst cell) | verdict |\n"
           "| --- | --- | ---: | --- |\n");
    for (int si = 1; si >= 0; si--) {
        double worst = 0;
        int ok = 1;
        for (int di = 0; di < 2; di++)
            for (int ai = 0; ai < NALGO; ai++) {
                const struct per_row *r = &R->per[si][di][ai];
                if (r->shared.rc != 0 || r->floor_ns <= 0) {
                    ok = 0;
                    continue;
                }
                double x = r->shared.ns / r->floor_ns;
                if (x > worst)
                    worst = x;
            }
        char what[160], n[32];
        snprintf(what, sizeof what, "shared srl_acquire / floor at %s keys",
                 size_name(R->sizes[si], n, sizeof n));
        target(what, worst, "x", si ? 1.3 : 2.0, 1, ok);
    }
    const bench_redis_result *r = &R->redis;
    for (int si = 1; si >= 0; si--) {
        double rate = si ? R->srl_gcra_rate : R->srl_gcra_rate_small;
        char what[160], n[32];
        snprintf(what, sizeof what,
                 "srl gcra decisions/s (%s keys) / Redis script (1 client, best placement)",
                 size_name(R->sizes[si], n, sizeof n));
        target(what, r->available ? rate / r->rate1 : 0, "x", 100, 0,
               r->available && rate > 0);
    }
    for (int si = 0; si < 2; si++) {
        const bench_scale_result *s = R->scale[si][0][0];
        char what[160], n[32];
        snprintf(what, sizeof what, "2 processes / 1, %s distinct keys",
                 size_name(R->sizes[si], n, sizeof n));
        target(what, s[0].rate > 0 ? s[1].rate / s[0].rate : 0, "x", 1.8, 0,
               s[0].rc == 0 && s[1].rc == 0 && s[0].rate > 0);
    }
    const bench_scale_result *h = R->scale[1][0][1];
    /* "not worse than 2x slower": all processes on one key against one process. */
    double worst_hot = 0;
    for (int pi = 1; pi < 3; pi++)
        if (h[pi].rate > 0 && h[0].rate / h[pi].rate > worst_hot)
            worst_hot = h[0].rate / h[pi].rate;
    target("hot key: 1-process rate / N-process rate (slowdown)", worst_hot, "x", 2.0, 1,
           h[0].rc == 0 && h[1].rc == 0 && h[2].rc == 0 && worst_hot > 0);
    const bench_mem_row *m = &R->mem[0][0];
    target("token_bucket, display 0: segment bytes per key (at fill)",
           m->filled ? (double)m->segment_bytes / (double)m->filled : 0, " B", 64, 1,
           m->filled > 0);
    target("token_bucket, display 0: segment bytes per slot",
           m->capacity ? (double)m->segment_bytes / (double)m->capacity : 0, " B", 64, 1,
           m->capacity > 0);
    printf("\n");
}

/* Cells that failed with an srl error (the big-segment creation aside: a
 * small /dev/shm may refuse it, and the report says so).  A smoke run
 * (--quick in CI) fails if any did. */
static int count_errors(const struct report *R)
{
    int n = 0;
    unsigned sec = R->o.sections;
    for (int si = 0; si < 2; si++)
        for (int di = 0; di < 2; di++) {
            for (int ai = 0; ai < NALGO && (sec & BENCH_SEC_DECISIONS); ai++)
                n += (R->per[si][di][ai].shared.rc != 0) + (R->per[si][di][ai].local.rc != 0);
            if (sec & BENCH_SEC_DECISIONS)
                n += (R->global[si][di].rc != 0) + (R->coarse[si][di][0].rc != 0) +
                     (R->coarse[si][di][1].rc != 0);
        }
    for (int ai = 0; ai < NALGO && (sec & BENCH_SEC_DECISIONS); ai++)
        n += (R->deny[ai][0].rc != 0) + (R->deny[ai][1].rc != 0);
    for (int si = 0; si < 2 && (sec & BENCH_SEC_SCALING); si++)
        for (int kind = 0; kind < 3; kind++)
            for (int hot = 0; hot < 2; hot++)
                for (int pi = 0; pi < 3; pi++)
                    n += !(si == 0 && hot) && R->scale[si][kind][hot][pi].rc != 0;
    for (int ai = 0; ai < NALGO && (sec & BENCH_SEC_MEMORY); ai++)
        for (int di = 0; di < 3; di++)
            n += R->mem[ai][di].rc != 0;
    return n;
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
    read_loadavg(R.load_end, sizeof R.load_end);
    R.par_end = bench_cpu_parallelism(R.o.quick ? 0.2 : 0.5);
    double total = (double)(bench_now_ns() - t0) / 1e9;

    printf("# srl-bench results\n\n");
    print_machine(&R);
    if (R.o.sections & BENCH_SEC_COMPONENTS)
        print_components(&R);
    if (R.o.sections & BENCH_SEC_DECISIONS)
        print_per_decision(&R);
    if (R.o.sections & BENCH_SEC_REDIS)
        print_redis(&R);
    if (R.o.sections & BENCH_SEC_SCALING)
        print_scaling(&R);
    if (R.o.sections & BENCH_SEC_MEMORY)
        print_memory(&R);
    print_targets(&R);
    printf("Total run time: %.1f s.\n", total);
    int errors = count_errors(&R);
    if (errors) {
        printf("\n%d cells failed with an srl error (see the tables).\n", errors);
        progress("%d cells failed", errors);
    }
    progress("done in %.1f s", total);
    fflush(stdout);
    return errors ? 1 : 0;
}
