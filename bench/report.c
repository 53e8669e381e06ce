/*
 * report.c - srl-bench's report: the Markdown tables on stdout, from a
 * filled struct report (report.h), and the targets table with a verdict
 * for each.  Reads the report only: nothing here measures.
 */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

const srl_algorithm bench_algos[NALGO] = {SRL_TOKEN_BUCKET, SRL_GCRA, SRL_SLIDING_COUNTER,
                                          SRL_SLIDING_LOG};
const int bench_nprocs[3] = {1, 2, 4};
const uint32_t bench_displays[3] = {0, 16, 64};

int bench_algo_index(srl_algorithm a)
{
    for (int i = 0; i < NALGO; i++)
        if (bench_algos[i] == a)
            return i;
    fprintf(stderr, "srl-bench: algorithm %d is not measured\n", (int)a);
    abort();
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
    printf("- srl %d.%d.%d, options: keys=%llu seconds/cell=%.2f reps=%d%s; %s\n",
           SRL_VERSION_MAJOR, SRL_VERSION_MINOR, SRL_VERSION_PATCH,
           (unsigned long long)o->keys, o->seconds, o->reps,
           o->quick ? (o->cpu_time ? " (--quick --cpu-time)" : " (--quick)")
                    : (o->cpu_time ? " (--cpu-time: thread CPU time)" : ""),
           o->cold_keys ? "--cold-keys: keys read cold, as in the runs before 2026-12-06 22:18 UTC"
                        : "keys hot: each brought into the cache 8 requests ahead");
    printf("- /proc/loadavg at start: %s; at end: %s\n", R->load_start, R->load_end);
    printf("- CPU check: 2 processes of a pure ALU loop run %.2fx / %.2fx the work of one "
           "(start / end; 2.00 = two free cores; less caps every scaling ratio below)\n",
           R->par_start, R->par_end);
    if (R->speeds > 0) {
        printf("- CPU speeds: the ALU loop pinned to each CPU, over the fastest:");
        for (int c = 0; c < R->speeds; c++)
            printf("%s cpu%d %.2f", c ? "," : "", c, R->speed[c]);
        printf(" (unequal: a single-process cell runs at the speed of the CPU it lands on; "
               "pin the run with taskset to compare runs)\n");
    }
    printf("\n");
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

/* ------------------------------------------------------------ report */

static void print_components(const struct report *R)
{
    const bench_components *c = &R->comp;
    printf("## Components (hot caches, one process)\n\n");
    printf("| piece | ns |\n| --- | ---: |\n");
    printf("| clock_gettime(CLOCK_MONOTONIC), srl_monotonic_ns (the precise ticker) | %.1f |\n", c->clock_ns);
    printf("| clock_gettime(CLOCK_MONOTONIC_COARSE), srl_monotonic_coarse_ns | %.1f |\n", c->coarse_ns);
    printf("| SipHash-x24 (libsodium), 16-byte key | %.1f |\n", c->siphash_ns);
    printf("| the hash, then the precise clock (no decision of a precise-clock policy skips either) "
           "| %.1f |\n", c->hash_clock_ns);
    printf("| the same, then one locked compare-and-swap of a hot word (the lock-free GCRA "
           "path's least) | %.1f |\n", c->hash_clock_cas_ns);
    printf("| robust process-shared mutex lock+unlock, uncontended | %.1f |\n", c->mutex_ns);
    printf("| the same, locked with pthread_mutex_clocklock (bounded wait) | %.1f |\n",
           c->mutex_clock_ns);
    for (int ai = 0; ai < NALGO; ai++) {
        char pol[SRL_POLICY_TEXT_MAX];
        srl_policy p = bench_policy_allow(bench_algos[ai]);
        srl_policy_format(&p, pol, sizeof pol);
        printf("| srl_state_acquire %s (pure algorithm) | %.1f |\n", pol,
               c->algo_ns[bench_algos[ai]]);
    }
    printf("\n### One dependent miss, by the size of the table it is in\n\n"
           "A load at a random line of a shared anonymous mapping, each load's address the "
           "one before's value (no overlap, no prefetch): what one miss a decision cannot "
           "overlap costs in a table of that size. At 1M keys (capacity 1.25M) the shared "
           "segment of a token bucket is 81 MB; the Memory section gives the local store's "
           "bytes per key.\n\n| table | ns per dependent load |\n| ---: | ---: |\n");
    for (int i = 0; i < BENCH_CHASE_SIZES; i++)
        printf("| %u MiB | %.1f |\n", BENCH_CHASE_MIB[i], c->chase_ns[i]);
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
                       srl_algorithm_name(bench_algos[ai]), r->floor_ns,
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
            const bench_cell *s = &R->per[si][di][bench_algo_index(SRL_TOKEN_BUCKET)].shared, *g = &R->global[si][di];
            printf("| %s | %s | %s | %s | %s |\n", size_name(R->sizes[si], a, sizeof a),
                   bench_dist_name((bench_dist)di), cell_ns(s, b, sizeof b),
                   cell_ns(g, c, sizeof c),
                   ratio(g->ns, s->ns, g->rc == 0 && s->rc == 0, d, sizeof d));
        }
    printf("\n### Without the clock read (token_bucket, uniform keys)\n\n");
    printf("The same cells with the coarse ticker, srl_monotonic_coarse_ns, which "
           "srl_default_ticker picks for policies whose emission interval is at least 100 "
           "times the coarse resolution (token_bucket:100/1m and slower on a 4 ms kernel); "
           "every other cell reads the precise clock. The difference is what the precise "
           "clock read costs inside each decision; the floor reads no clock.\n\n");
    printf("| keys | floor | shared | shared, coarse ticker | coarse/floor | local | "
           "local, coarse ticker | coarse/floor |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int si = 0; si < 2; si++) {
        const struct per_row *r = &R->per[si][0][bench_algo_index(SRL_TOKEN_BUCKET)];
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
    printf("\n### GCRA lock-free (SRL_CONFIG_LOCKFREE)\n\n");
    printf("The allow GCRA on the shared store with the lock-free found-key path (one "
           "16-byte compare-and-swap, no mutex), beside the same store without the flag "
           "and the floor, timed in the same interleaved group.\n\n");
    printf("| keys | dist | floor | shared | lock-free | shared/floor | lock-free/floor |\n");
    printf("| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int si = 0; si < 2; si++)
        for (int di = 0; di < 2; di++) {
            const struct per_row *r = &R->per[si][di][bench_algo_index(SRL_GCRA)];
            const bench_cell *lf = &R->lockfree_shared[si][di];
            printf("| %s | %s | %.1f | %s | %s | %s | %s |\n", size_name(R->sizes[si], a, sizeof a),
                   bench_dist_name((bench_dist)di), r->floor_ns, cell_ns(&r->shared, b, sizeof b),
                   cell_ns(lf, c, sizeof c),
                   ratio(r->shared.ns, r->floor_ns, r->shared.rc == 0, d, sizeof d),
                   ratio(lf->ns, r->floor_ns, lf->rc == 0, e, sizeof e));
        }
    printf("\n### Two limits in one decision (token_bucket + gcra, all or nothing)\n\n");
    printf("The allow token bucket alone, and as a compound with the allow GCRA "
           "(\"token_bucket:1e9/1h + gcra:1e9/1h\"): one slot and one lock for both, each "
           "limit decided once, committed from a copy that a denial restores. Timed in the "
           "same interleaved group.\n\n");
    printf("| keys | dist | shared, 1 limit | shared, 2 limits | 2/1 | local, 1 limit | "
           "local, 2 limits | 2/1 |\n");
    printf("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int si = 0; si < 2; si++)
        for (int di = 0; di < 2; di++) {
            const struct per_row *r = &R->per[si][di][bench_algo_index(SRL_TOKEN_BUCKET)];
            const bench_cell *ms = &R->compound[si][di][0], *ml = &R->compound[si][di][1];
            char f[64], g[64];
            printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n",
                   size_name(R->sizes[si], a, sizeof a), bench_dist_name((bench_dist)di),
                   cell_ns(&r->shared, b, sizeof b), cell_ns(ms, c, sizeof c),
                   ratio(ms->ns, r->shared.ns, ms->rc == 0 && r->shared.rc == 0, d, sizeof d),
                   cell_ns(&r->local, e, sizeof e), cell_ns(ml, f, sizeof f),
                   ratio(ml->ns, r->local.ns, ml->rc == 0 && r->local.rc == 0, g, sizeof g));
        }
    printf("\n### GCRA without the key's mutex (local store, SRL_CONFIG_LOCKFREE)\n\n");
    printf("The allow GCRA on the local store with the lock-free found-key path (one "
           "compare-and-swap of the TAT, no mutex), timed in the same interleaved group as "
           "the floor and the locked cells. Target (issue 17): <= 1.2x the floor at 1k keys, "
           "and <= the shared store in every cell.\n\n");
    printf("| keys | dist | floor | shared | local | local, lock-free | lock-free/floor | "
           "lock-free/shared | lock-free/local |\n");
    printf("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int si = 0; si < 2; si++)
        for (int di = 0; di < 2; di++) {
            const struct per_row *r = &R->per[si][di][bench_algo_index(SRL_GCRA)];
            const bench_cell *lf = &R->lockfree[si][di];
            char f[64], g[64], h[64];
            printf("| %s | %s | %.1f | %s | %s | %s | %s | %s | %s |\n",
                   size_name(R->sizes[si], a, sizeof a), bench_dist_name((bench_dist)di),
                   r->floor_ns, cell_ns(&r->shared, b, sizeof b), cell_ns(&r->local, c, sizeof c),
                   cell_ns(lf, d, sizeof d),
                   ratio(lf->ns, r->floor_ns, lf->rc == 0 && r->floor_ns > 0, e, sizeof e),
                   ratio(lf->ns, r->shared.ns, lf->rc == 0 && r->shared.rc == 0, f, sizeof f),
                   ratio(lf->ns, r->local.ns, lf->rc == 0 && r->local.rc == 0, g, sizeof g));
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
        printf("| %s | %s | %s | %s | %s | %s | %s | %.1f%% |\n", srl_algorithm_name(bench_algos[ai]),
               cell_ns(sd, b, sizeof b), cell_ns(sa, c, sizeof c),
               ratio(sd->ns, sa->ns, sd->rc == 0 && sa->rc == 0, d, sizeof d),
               cell_ns(ld, e, sizeof e), cell_ns(la, f, sizeof f),
               ratio(ld->ns, la->ns, ld->rc == 0 && la->rc == 0, g, sizeof g),
               100.0 * (1.0 - sd->allowed_frac));
        (void)h;
    }
    printf("\n");
}

/* srl_open_tiered beside srl_open_redis on the same server (redis_tiered.c). */
static void print_tiered(const bench_tiered_result *t)
{
    printf("#### srl's Redis store and the host tier (srl_open_tiered), 1 client\n\n");
    if (!t->available) {
        printf("Not measured: %s.\n\n", t->why[0] ? t->why : "unknown reason");
        return;
    }
    static const char *scen[2] = {"flood", "distinct"};
    printf("flood: one key of %u permits, %u requests (100x); distinct: %u keys, one "
           "request each.\n\n", t->flood_limit, 100 * t->flood_limit, t->distinct_keys);
    printf("| scenario | store | decisions/s | tiered / redis | EVALSHA per decision | "
           "admitted | answered locally |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    char g[64];
    for (int sc = 0; sc < 2; sc++)
        for (int st = 0; st < 2; st++) {
            const bench_tiered_cell *c = &t->cell[sc][st];
            const bench_tiered_cell *base = &t->cell[sc][0];
            printf("| %s | %s | %.0f | %s | %.4f | %llu | %llu (%.2f %%) |\n", scen[sc],
                   st ? "tiered" : "redis", c->rate,
                   st ? ratio(c->rate, base->rate, base->rate > 0, g, sizeof g) : "1.00x",
                   c->evalsha_per_decision, (unsigned long long)c->admitted,
                   (unsigned long long)c->local, 100.0 * (double)c->local / (double)c->decisions);
        }
    printf("\n");
}

/* A compound on srl's Redis store beside a hand-written EVALSHA, and the
 * concurrency policy's row (redis_compound.c). */
static void print_compound(const bench_compound_result *t)
{
    printf("#### A compound policy on Redis: srl's Redis store against a hand-written "
           "EVALSHA, 1 client\n\n");
    if (!t->available) {
        printf("Not measured: %s.\n\n", t->why[0] ? t->why : "unknown reason");
        return;
    }
    printf("`%s` (never denies in a run). srl: `srl_open_redis`, one compound script call "
           "per decision, both limits in one Redis key. Script: two token buckets in one Lua "
           "script over one Redis hash, all or nothing, floats, time from `TIME` "
           "(bench/redis_compound.c). Same server, same key sequence; %d repetitions of %.2f s "
           "per subject, alternating, median; wall clock (a round trip waits for the server, "
           "so --cpu-time does not apply). Then exactly %llu decisions per subject between two "
           "INFO commandstats (EVALSHA calls, server time) under MONITOR (the commands the "
           "subject sent, each one round trip: none is pipelined; and those its script ran). "
           "The last row, srl with the compound's first limit alone (its ratio is against the "
           "compound script), says what the second limit costs srl.\n\n",
           t->policy, t->reps, t->seconds, (unsigned long long)t->rt_n);
    printf("| policy | who | decisions/s | srl / script | admitted | round trips per decision "
           "| EVALSHA per decision | server us per EVALSHA | script's commands per decision |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    static const char *who[BENCH_COMPOUND_SUBJECTS] = {
        "srl's Redis store", "hand-written EVALSHA", "srl's Redis store, first limit alone"};
    char g[64];
    double n = (double)t->rt_n;
    for (int i = 0; i < BENCH_COMPOUND_SUBJECTS; i++) {
        const bench_compound_cell *c = &t->cell[i];
        char pol[96];
        snprintf(pol, sizeof pol, "%s", i == 2 ? t->one : "compound (2 token buckets)");
        printf("| %s | %s | %.0f | %s | %llu / %llu | %.3f | %.3f | %.1f | %.3f |\n", pol,
               who[i], c->rate,
               i == 1 ? "1.00x" : ratio(c->rate, t->cell[1].rate, t->cell[1].rate > 0, g, sizeof g),
               (unsigned long long)c->admitted, (unsigned long long)c->decisions,
               (double)t->rt_sent[i] / n, (double)t->rt_evalsha[i] / n,
               t->rt_evalsha[i] > 0 ? (double)t->rt_usec[i] / (double)t->rt_evalsha[i] : 0.0,
               (double)t->rt_inner[i] / n);
    }
    if (t->conc_rc != 0) {
        printf("| %s | srl's Redis store | refused: srl_open_redis returned %s (\"%s\")%s%s "
               "| - | - | - | - | - | - |\n", t->conc_policy, srl_err_name(t->conc_rc),
               srl_strerror(t->conc_rc), t->conc_why[0] ? ": " : "", t->conc_why);
        printf("| %s | hand-written EVALSHA | not measured: no srl row to compare it with | - | - "
               "| - | - | - | - |\n\n", t->conc_policy);
    } else if (!t->conc_available) {
        printf("| %s | both | not measured: %s | - | - | - | - | - | - |\n\n", t->conc_policy,
               t->conc_why);
    } else {
        /* A decision here is one enter + leave pair: two EVALSHA, two round trips. */
        static const char *cw[2] = {"srl's Redis store (srl_enter + srl_leave)",
                                    "hand-written EVALSHA (enter + leave)"};
        double cn = (double)t->conc_rt_n;
        for (int i = 0; i < 2; i++) {
            const bench_compound_cell *c = &t->conc[i];
            printf("| %s | %s | %.0f | %s | %llu / %llu | %.3f | %.3f | %.1f | - |\n",
                   t->conc_policy, cw[i], c->rate,
                   i == 1 ? "1.00x" : ratio(c->rate, t->conc[1].rate, t->conc[1].rate > 0, g,
                                            sizeof g),
                   (unsigned long long)c->admitted, (unsigned long long)c->decisions,
                   (double)t->conc_evalsha[i] / cn, (double)t->conc_evalsha[i] / cn,
                   t->conc_evalsha[i] > 0 ? (double)t->conc_usec[i] / (double)t->conc_evalsha[i]
                                          : 0.0);
        }
        printf("\nThe %s rows: one decision is an enter and its leave (two EVALSHA, two "
               "round trips, no pipelining: the round trips are the EVALSHA count, which INFO "
               "commandstats gives over exactly %llu pairs).\n\n",
               t->conc_policy, (unsigned long long)t->conc_rt_n);
    }
    for (int i = 0; i < BENCH_COMPOUND_SUBJECTS; i++)
        printf("%s: %llu decisions, %lld commands sent, %lld EVALSHA: round trips per decision "
               "%.3f\n\n", who[i], (unsigned long long)t->rt_n, t->rt_sent[i], t->rt_evalsha[i],
               (double)t->rt_sent[i] / n);
    for (int i = 0; i < BENCH_COMPOUND_SUBJECTS; i++)
        if (t->cell[i].admitted != t->cell[i].decisions || t->rt_admitted[i] != t->rt_n)
            printf("WARNING: %s denied a request of a policy that never denies.\n\n", who[i]);
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
    print_tiered(&r->tiered);
    print_compound(&r->compound);
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
    printf("## Memory (shared segment bytes from srl_info_get; local store: resident bytes)\n\n");
    printf("segment B = table + fixed: \"table B/slot\" = the buckets (heads and slots) / "
           "slots, what grows with the capacity; \"fixed B\" = what a segment has at any "
           "capacity (the header and policy pages), measured as what is left at zero buckets "
           "by a second segment of the same config; \"B/slot (all)\" = segment bytes / slots. "
           "\"filled\" = keys tracked when the first new key found no free slot (load "
           "reached by the bucketed table); B/key = segment bytes / filled; local B/key = "
           "the resident bytes (/proc/self/statm) a local store of the same capacity added "
           "with capacity/1.25 keys (index, homes, nodes), / keys.\n\n");
    printf("| algorithm | policy | display | state B | slot B | slots | segment B | "
           "table B/slot | fixed B | B/slot (all) | filled | load | B/key | local B/key |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
           "---: | ---: |\n");
    for (int ai = 0; ai < NALGO; ai++)
        for (int di = 0; di < 3; di++) {
            const bench_mem_row *m = &R->mem[ai][di];
            srl_policy_format(&m->policy, pol, sizeof pol);
            if (m->rc != 0 && m->capacity == 0) {
                printf("| %s | %s | %u | %u | error: %s | | | | | | | | | |\n",
                       srl_algorithm_name(m->algo), pol, m->display, m->state_bytes,
                       srl_strerror(m->rc));
                continue;
            }
            char lm[32] = "", tb[32] = "-", fb[32] = "-";
            if (di == 0)
                snprintf(lm, sizeof lm, "%.0f", R->local_mem[ai]);
            if (m->table_bytes && m->capacity) {
                snprintf(tb, sizeof tb, "%.2f", (double)m->table_bytes / (double)m->capacity);
                snprintf(fb, sizeof fb, "%llu", (unsigned long long)m->fixed_bytes);
            }
            printf("| %s | %s | %u | %u | %u | %llu | %llu | %s | %s | %.1f | %llu | %.1f%% | "
                   "%.1f | %s |\n",
                   srl_algorithm_name(m->algo), pol, m->display, m->state_bytes, m->slot_bytes,
                   (unsigned long long)m->capacity, (unsigned long long)m->segment_bytes, tb, fb,
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

/* ------------------------------------------------------------ targets */

/* One target: measure() fills *value for key-count index si (ignored by the
 * targets that are not per size) and returns 0 when it was not measured.
 * what may hold one %s, the key count. */
struct target_def {
    const char *what;
    const char *unit;
    double goal;
    int le;                   /* 1: value <= goal, 0: value >= goal */
    int sizes[2];             /* key-count indexes, in report order; -1: unused */
    int (*measure)(const struct report *R, int si, double *value);
    /* NULL, or appends to what what only the run knows (e.g. bytes it measured) */
    void (*note)(const struct report *R, char *buf, size_t len);
};

static int t_redis(const struct report *R, int si, double *value)
{
    const bench_redis_result *r = &R->redis;
    double rate = si ? R->srl_gcra_rate : R->srl_gcra_rate_small;
    *value = r->available ? rate / r->rate1 : 0;
    return r->available && rate > 0;
}

static int t_two_procs(const struct report *R, int si, double *value)
{
    const bench_scale_result *s = R->scale[si][0][0];
    *value = s[0].rate > 0 ? s[1].rate / s[0].rate : 0;
    return s[0].rc == 0 && s[1].rc == 0 && s[0].rate > 0;
}

/* "not worse than 2x slower": all processes on one key against one process. */
static int t_hot_key(const struct report *R, int si, double *value)
{
    (void)si;
    const bench_scale_result *h = R->scale[1][0][1];
    double worst_hot = 0;
    for (int pi = 1; pi < 3; pi++)
        if (h[pi].rate > 0 && h[0].rate / h[pi].rate > worst_hot)
            worst_hot = h[0].rate / h[pi].rate;
    *value = worst_hot;
    return h[0].rc == 0 && h[1].rc == 0 && h[2].rc == 0 && worst_hot > 0;
}

static int t_bytes_per_key(const struct report *R, int si, double *value)
{
    (void)si;
    const bench_mem_row *m = &R->mem[bench_algo_index(SRL_TOKEN_BUCKET)][0];
    *value = m->filled ? (double)m->segment_bytes / (double)m->filled : 0;
    return m->filled > 0;
}

/* The table's bytes per slot: the 64 B target is about what each slot adds
 * (its bytes and its share of a bucket head), not the fixed pages, which
 * divided by the slots would make the verdict depend on the capacity. */
static int t_bytes_per_slot(const struct report *R, int si, double *value)
{
    (void)si;
    const bench_mem_row *m = &R->mem[bench_algo_index(SRL_TOKEN_BUCKET)][0];
    *value = m->capacity ? (double)m->table_bytes / (double)m->capacity : 0;
    return m->capacity > 0 && m->table_bytes > 0;
}

static void n_fixed_bytes(const struct report *R, char *buf, size_t len)
{
    const bench_mem_row *m = &R->mem[bench_algo_index(SRL_TOKEN_BUCKET)][0];
    if (m->table_bytes > 0)
        snprintf(buf, len, ", plus %llu B of header and policy pages per segment",
                 (unsigned long long)m->fixed_bytes);
}

/* Worst shared srl_acquire / floor over every algorithm in distribution di
 * (issue 17 sets one goal per distribution at 1M keys). */
static int t_floor_ratio_dist(const struct report *R, int si, int di, double *value)
{
    double worst = 0;
    int ok = 1;
    for (int ai = 0; ai < NALGO; ai++) {
        const struct per_row *r = &R->per[si][di][ai];
        if (r->shared.rc != 0 || r->floor_ns <= 0) {
            ok = 0;
            continue;
        }
        double ratio = r->shared.ns / r->floor_ns;
        if (ratio > worst)
            worst = ratio;
    }
    *value = worst;
    return ok;
}

/* The same over both distributions (the brief's goals). */
static int t_floor_ratio(const struct report *R, int si, double *value)
{
    double u, z;
    int ok = t_floor_ratio_dist(R, si, BENCH_UNIFORM, &u);
    ok &= t_floor_ratio_dist(R, si, BENCH_ZIPF, &z);
    *value = u > z ? u : z;
    return ok;
}

static int t_floor_uniform(const struct report *R, int si, double *value)
{
    return t_floor_ratio_dist(R, si, BENCH_UNIFORM, value);
}

static int t_floor_zipf(const struct report *R, int si, double *value)
{
    return t_floor_ratio_dist(R, si, BENCH_ZIPF, value);
}

/* Worst over both distributions of cell / the floor of algorithm ai's row. */
static int t_cell_floor(const struct report *R, int si, int ai, const bench_cell *c0,
                        const bench_cell *c1, double *value)
{
    const bench_cell *c[2] = {c0, c1};
    double worst = 0;
    for (int di = 0; di < 2; di++) {
        double floor_ns = R->per[si][di][ai].floor_ns;
        if (c[di]->rc != 0 || c[di]->ns <= 0 || floor_ns <= 0)
            return 0;
        double ratio = c[di]->ns / floor_ns;
        if (ratio > worst)
            worst = ratio;
    }
    *value = worst;
    return 1;
}

/* The policy-driven clock: the token bucket with the coarse ticker. */
static int t_coarse_floor(const struct report *R, int si, double *value)
{
    return t_cell_floor(R, si, bench_algo_index(SRL_TOKEN_BUCKET), &R->coarse[si][0][0],
                        &R->coarse[si][1][0], value);
}

static int t_lockfree_shared(const struct report *R, int si, double *value)
{
    return t_cell_floor(R, si, bench_algo_index(SRL_GCRA), &R->lockfree_shared[si][0],
                        &R->lockfree_shared[si][1], value);
}

static int t_lockfree_local(const struct report *R, int si, double *value)
{
    return t_cell_floor(R, si, bench_algo_index(SRL_GCRA), &R->lockfree[si][0],
                        &R->lockfree[si][1], value);
}

/* Worst local / shared over every cell of the per-decision table. */
static int t_local_shared(const struct report *R, int si, double *value)
{
    (void)si;
    double worst = 0;
    for (int sz = 0; sz < 2; sz++)
        for (int di = 0; di < 2; di++)
            for (int ai = 0; ai < NALGO; ai++) {
                const struct per_row *r = &R->per[sz][di][ai];
                if (r->shared.rc != 0 || r->local.rc != 0 || r->shared.ns <= 0)
                    return 0;
                if (r->local.ns / r->shared.ns > worst)
                    worst = r->local.ns / r->shared.ns;
            }
    *value = worst;
    return 1;
}

/* The hot-key denial flood with the cache: CPU ns per decision, 2 processes / 1. */
static int t_flood(const struct report *R, int si, double *value)
{
    (void)si;
    const bench_scale_result *one = &R->flood[1][0], *two = &R->flood[1][1];
    if (!(R->o.sections & BENCH_SEC_FLOOD) || one->rc != 0 || two->rc != 0 || one->cpu_ns <= 0)
        return 0;
    *value = two->cpu_ns / one->cpu_ns;
    return 1;
}

/* The original brief's goals first (every run since the first prints them),
 * then issue 17's (BENCHMARKS.md gives their verdicts with the evidence). */
static const struct target_def targets[] = {
    {"shared srl_acquire / floor at %s keys", "x", 1.3, 1, {1, -1}, t_floor_ratio, NULL},
    {"shared srl_acquire / floor at %s keys", "x", 2.0, 1, {0, -1}, t_floor_ratio, NULL},
    {"srl gcra decisions/s (%s keys) / Redis script (1 client, best placement)", "x", 100, 0,
     {1, 0}, t_redis, NULL},
    {"2 processes / 1, %s distinct keys", "x", 1.8, 0, {0, 1}, t_two_procs, NULL},
    {"hot key: 1-process rate / N-process rate (slowdown)", "x", 2.0, 1, {-1, -1}, t_hot_key,
     NULL},
    {"token_bucket, display 0: segment bytes per key (at fill)", " B", 64, 1, {-1, -1},
     t_bytes_per_key, NULL},
    {"token_bucket, display 0: table bytes per slot", " B", 64, 1, {-1, -1},
     t_bytes_per_slot, n_fixed_bytes},
    {"issue 17: shared / floor at %s keys, uniform (worst algorithm)", "x", 1.5, 1, {1, -1},
     t_floor_uniform, NULL},
    {"issue 17: shared / floor at %s keys, Zipf (worst algorithm)", "x", 1.3, 1, {1, -1},
     t_floor_zipf, NULL},
    {"issue 17: shared token bucket, coarse ticker / floor at %s keys", "x", 2.0, 1, {0, -1},
     t_coarse_floor, NULL},
    {"issue 17: lock-free GCRA, shared store / floor at %s keys", "x", 1.2, 1, {0, -1},
     t_lockfree_shared, NULL},
    {"issue 17: lock-free GCRA, local store / floor at %s keys", "x", 1.2, 1, {0, -1},
     t_lockfree_local, NULL},
    {"issue 17: local / shared, worst cell of the per-decision table", "x", 1.0, 1, {-1, -1},
     t_local_shared, NULL},
    {"issue 17: hot-key denial flood with the cache, CPU ns per decision, 2 processes / 1", "x",
     1.0, 1, {-1, -1}, t_flood, NULL},
};

static void print_targets(const struct report *R)
{
    printf("## Targets\n\n| target | goal | measured (worst cell) | verdict |\n"
           "| --- | --- | ---: | --- |\n");
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        const struct target_def *d = &targets[t];
        for (int k = 0; k < 2; k++) {
            int si = d->sizes[k];
            if (si < 0 && k > 0)
                break;
            char what[160], n[32];
            if (si >= 0)
                snprintf(what, sizeof what, d->what, size_name(R->sizes[si], n, sizeof n));
            else
                snprintf(what, sizeof what, "%s", d->what);
            if (d->note != NULL) {
                size_t used = strlen(what);
                d->note(R, what + used, sizeof what - used);
            }
            double value = 0;
            int ok = d->measure(R, si < 0 ? 0 : si, &value);
            target(what, value, d->unit, d->goal, d->le, ok);
        }
    }
    printf("\n");
}

/* Cells that failed with an srl error (the big-segment creation aside: a
 * small /dev/shm may refuse it, and the report says so).  A smoke run
 * (--quick in CI) fails if any did. */
int report_count_errors(const struct report *R)
{
    int n = 0;
    unsigned sec = R->o.sections;
    for (int si = 0; si < 2; si++)
        for (int di = 0; di < 2; di++) {
            for (int ai = 0; ai < NALGO && (sec & BENCH_SEC_DECISIONS); ai++)
                n += (R->per[si][di][ai].shared.rc != 0) + (R->per[si][di][ai].local.rc != 0);
            if (sec & BENCH_SEC_DECISIONS)
                n += (R->global[si][di].rc != 0) + (R->coarse[si][di][0].rc != 0) +
                     (R->coarse[si][di][1].rc != 0) + (R->compound[si][di][0].rc != 0) +
                     (R->compound[si][di][1].rc != 0) + (R->lockfree[si][di].rc != 0) +
                     (R->lockfree_shared[si][di].rc != 0);
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
    if (sec & BENCH_SEC_REDIS)
        n += R->redis.compound.rc != 0;
    return n;
}

void report_print(const struct report *R, double total)
{
    printf("# srl-bench results\n\n");
    print_machine(R);
    if (R->o.sections & BENCH_SEC_COMPONENTS)
        print_components(R);
    if (R->o.sections & BENCH_SEC_DECISIONS)
        print_per_decision(R);
    if (R->o.sections & BENCH_SEC_REDIS)
        print_redis(R);
    if (R->o.sections & BENCH_SEC_SCALING)
        print_scaling(R);
    if (R->o.sections & BENCH_SEC_MEMORY)
        print_memory(R);
    print_targets(R);
    printf("Total run time: %.1f s.\n", total);
}
