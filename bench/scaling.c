/*
 * scaling.c - decisions per second with 1, 2, 4 forked processes.
 *
 * The parent builds one store (an srl shared segment, the same inside one
 * global robust mutex, or the floor table sized like that segment), makes
 * every key live, and forks nproc children.  Each child draws its own
 * request sequence before the start (distinct keys: child i uses quarter i
 * of the key set, uniformly, whatever nproc is; hot: every child asks for
 * key 0), then blocks on
 * a pipe once it has made its warm-up pass and counted itself `ready`.
 * When all are ready, closing the pipe's write end releases them at once;
 * the parent sleeps o->seconds and raises `stop`.  Each child counts its
 * decisions and measures its own elapsed time; the total rate is the sum of
 * the children's rates.
 *
 * Invariants: the page the children report into is an anonymous MAP_SHARED
 * mapping made before fork; child i writes only res[i] (its own cache line)
 * and reads only `stop`.  A child ends with _exit, so it never runs the
 * parent's atexit work or closes the parent's limiter.
 *
 * Concurrency: children run in parallel on the shared segment, the floor
 * table or the global lock; the parent only waits.
 */
#include "bench.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SCALE_MAXP 16

struct scale_res {
    uint64_t count;
    uint64_t allowed;
    uint64_t ns;
    uint64_t cpu_ns;          /* the child's CPU time over the same span */
    int rc;
    char pad[64 - 36];
};

static uint64_t cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct scale_page {
    atomic_int stop;
    atomic_int ready;         /* children done with their warm-up */
    char pad[56];
    struct scale_res res[SCALE_MAXP];
};

struct scale_env {
    bench_scale_kind kind;
    srl_limiter *lim;
    bench_global_lock g;
    bench_floor f;
    const bench_keys *k;
};

static uint64_t scale_batch(struct scale_env *e, const uint32_t *idx, uint64_t count,
                            uint64_t *allowed, int *err)
{
    srl_decision d;
    uint64_t acc = 0;
    for (uint64_t i = 0; i < count; i++) {
        const unsigned char *key = bench_key_at(e->k, idx, i, count);
        int rc = 0;
        if (e->kind == BENCH_SCALE_FLOOR) {
            acc += bench_floor_op(&e->f, key, BENCH_KEY_LEN);
            continue;
        }
        if (e->kind == BENCH_SCALE_GLOBAL)
            rc = bench_global_acquire(&e->g, e->lim, key, BENCH_KEY_LEN, &d);
        else
            rc = srl_acquire(e->lim, key, BENCH_KEY_LEN, 1, &d);
        if (rc != 0 && *err == 0)
            *err = rc;
        *allowed += (uint64_t)d.allowed;
    }
    if (e->kind == BENCH_SCALE_FLOOR)
        *allowed += count;
    return acc;
}

static void scale_child(struct scale_env *e, struct scale_page *pg, int me,
                        int nproc, int hot, int gate)
{
    struct scale_res *r = &pg->res[me];
    bench_seq seq = {0, NULL};
    /* Every process count uses slices of the same size (a quarter of the
     * keys), so each process has the same working set whatever nproc is:
     * the ratios then measure parallelism, not a smaller cache footprint. */
    uint64_t slice = e->k->n / 4;
    (void)nproc;
    int rc = hot ? bench_seq_make(&seq, 1u << 16, 0, 1, BENCH_UNIFORM, 1)
                 : bench_seq_make(&seq, 1u << 20, slice * (uint64_t)me, slice,
                                  BENCH_UNIFORM, 1000u + (unsigned)me);
    uint64_t count = 0, allowed = 0, pos = 0, sink = 0;
    int err = 0;
    /* Warm up before the gate: a forked child maps the shared pages
     * afresh (fork copies no page tables for shared mappings), so its
     * first pass takes a minor fault per page; that is not a decision. */
    uint64_t warm = seq.len < (1u << 18) ? seq.len : (1u << 18);
    for (uint64_t p = 0; rc == 0 && p + 256 <= warm; p += 256)
        sink += scale_batch(e, seq.idx + p, 256, &allowed, &err);
    allowed = 0;
    atomic_fetch_add(&pg->ready, 1);
    char c;
    while (read(gate, &c, 1) < 0 && errno == EINTR)
        ;
    if (rc != 0) {
        r->rc = rc;
        _exit(1);
    }
    uint64_t t0 = bench_now_ns(), c0 = cpu_now_ns();
    while (!atomic_load_explicit(&pg->stop, memory_order_relaxed)) {
        sink += scale_batch(e, seq.idx + pos, 256, &allowed, &err);
        pos += 256;
        if (pos >= seq.len)
            pos = 0;
        count += 256;
    }
    r->ns = bench_now_ns() - t0;
    r->cpu_ns = cpu_now_ns() - c0;
    if (err != 0)
        fprintf(stderr, "srl-bench: scaling child %d: %s\n", me, srl_strerror(err));
    r->count = count;
    r->allowed = allowed;
    r->rc = err;
    (void)sink;
    _exit(0);
}

static int scale_setup(struct scale_env *e, bench_scale_kind kind, srl_policy p,
                       const bench_keys *k)
{
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->k = k;
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = p;
    cfg.capacity = bench_capacity_for(k->n);
    if (kind == BENCH_SCALE_FLOOD_ON)
        cfg.flags = SRL_CONFIG_FLOOD_CACHE;
    int rc = bench_open(BENCH_SHARED, &cfg, &e->lim);
    if (kind == BENCH_SCALE_FLOOR) {
        /* The floor table has the segment's bytes and slot size (64-byte
         * slots at 1.25 x keys if no segment can be made). */
        srl_info info = {.segment_bytes = cfg.capacity * 64, .slot_bytes = 64};
        if (rc == 0 && srl_info_get(e->lim, &info) != 0)
            info = (srl_info){.segment_bytes = cfg.capacity * 64, .slot_bytes = 64};
        srl_close(e->lim);
        e->lim = NULL;
        return bench_floor_make(&e->f, info.segment_bytes, info.slot_bytes);
    }
    if (rc != 0)
        return rc;
    if (kind == BENCH_SCALE_GLOBAL && (rc = bench_global_lock_make(&e->g)) != 0)
        return rc;
    srl_decision d;
    for (uint64_t i = 0; i < k->n; i++)
        srl_acquire(e->lim, bench_key(k, i), BENCH_KEY_LEN, 1, &d);
    return 0;
}

static void scale_teardown(struct scale_env *e)
{
    bench_floor_free(&e->f);
    bench_global_lock_free(&e->g);
    srl_close(e->lim);
    e->lim = NULL;
}

/* One measurement: nproc children on the prepared store e. */
static void scale_once(const bench_opts *o, struct scale_env *e, int nproc, int hot,
                       bench_scale_result *out)
{
    memset(out, 0, sizeof *out);
    int rc = 0;
    struct scale_page *pg = mmap(NULL, sizeof *pg, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int gate[2] = {-1, -1};
    if (pg == MAP_FAILED)
        rc = SRL_ENOMEM;
    if (rc == 0 && pipe(gate) != 0)
        rc = SRL_ESYS;
    if (rc != 0) {
        out->rc = rc;
        if (pg != MAP_FAILED)
            munmap(pg, sizeof *pg);
        return;
    }
    memset(pg, 0, sizeof *pg);
    pid_t pids[SCALE_MAXP];
    int started = 0;
    for (int i = 0; i < nproc; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(gate[1]);
            scale_child(e, pg, i, nproc, hot, gate[0]);
        }
        if (pid < 0) {
            rc = SRL_ESYS;
            break;
        }
        pids[started++] = pid;
    }
    close(gate[0]);
    /* Open the gate once every child has drawn its sequence and warmed up
     * (bounded: a child that failed before the gate never reports). */
    for (int w = 0; w < 6000 && atomic_load(&pg->ready) < started; w++)
        usleep(10000);
    close(gate[1]);
    uint64_t ns = (uint64_t)(o->seconds * 1e9);
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (rc == 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    atomic_store(&pg->stop, 1);
    for (int i = 0; i < started; i++) {
        int st;
        while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            if (WIFSIGNALED(st))
                fprintf(stderr, "srl-bench: scaling child %d killed by signal %d\n", i,
                        WTERMSIG(st));
            else
                fprintf(stderr, "srl-bench: scaling child %d exited with %d\n", i,
                        WIFEXITED(st) ? WEXITSTATUS(st) : -1);
            if (rc == 0)
                rc = SRL_ESYS;
        }
    }
    uint64_t count = 0, allowed = 0, cpu = 0;
    for (int i = 0; i < started; i++) {
        struct scale_res *r = &pg->res[i];
        if (r->ns > 0)
            out->rate += (double)r->count * 1e9 / (double)r->ns;
        count += r->count;
        cpu += r->cpu_ns;
        allowed += r->allowed;
        if (r->rc != 0 && rc == 0)
            rc = r->rc;
    }
    out->allowed_frac = count ? (double)allowed / (double)count : 0;
    out->cpu_ns = count ? (double)cpu / (double)count : 0;
    out->rc = rc;
    munmap(pg, sizeof *pg);
}

static int cmp_rate(const void *a, const void *b)
{
    double x = ((const bench_scale_result *)a)->rate, y = ((const bench_scale_result *)b)->rate;
    return (x > y) - (x < y);
}

void bench_scale_series(const bench_opts *o, bench_scale_kind kind, srl_policy p,
                        const bench_keys *k, int hot, const int *nprocs, int n,
                        int rounds, bench_scale_result *out)
{
    enum { MAXR = 15 };
    bench_scale_result runs[4][MAXR];
    if (rounds < 1)
        rounds = 1;
    if (rounds > MAXR)
        rounds = MAXR;
    memset(out, 0, (size_t)n * sizeof *out);
    for (int j = 0; j < n; j++)
        if (n > 4 || nprocs[j] < 1 || nprocs[j] > 4) {
            out[0].rc = SRL_EINVAL;
            return;
        }
    struct scale_env e;
    int rc = scale_setup(&e, kind, p, k);
    if (rc != 0) {
        for (int j = 0; j < n; j++)
            out[j].rc = rc;
        scale_teardown(&e);
        return;
    }
    /* Round-robin over the process counts, so a burst of other load on the
     * machine hits every count alike; the median round is kept. */
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < n; j++)
            scale_once(o, &e, nprocs[j], hot, &runs[j][r]);
    for (int j = 0; j < n; j++) {
        int bad = 0;
        for (int r = 0; r < rounds; r++)
            if (runs[j][r].rc != 0)
                bad = runs[j][r].rc;
        qsort(runs[j], (size_t)rounds, sizeof runs[j][0], cmp_rate);
        out[j] = runs[j][rounds / 2];
        if (bad != 0)
            out[j].rc = bad;
    }
    scale_teardown(&e);
}

void bench_flood_series(const bench_opts *o, srl_policy p, const bench_keys *k, int rounds,
                        bench_scale_result out[2][3])
{
    enum { MAXR = 15 };
    static const int np[3] = {1, 2, 4};
    bench_scale_result runs[2][3][MAXR];
    if (rounds < 1)
        rounds = 1;
    if (rounds > MAXR)
        rounds = MAXR;
    memset(out, 0, 2 * sizeof out[0]);
    struct scale_env e[2];
    for (int c = 0; c < 2; c++) {
        int rc = scale_setup(&e[c], c ? BENCH_SCALE_FLOOD_ON : BENCH_SCALE_FLOOD_OFF, p, k);
        if (rc != 0) {
            for (int j = 0; j < 3; j++)
                out[0][j].rc = out[1][j].rc = rc;
            scale_teardown(&e[0]);
            if (c == 1)
                scale_teardown(&e[1]);
            return;
        }
    }
    /* Round-robin over cache off/on and the process counts, so a burst of
     * other load hits every cell alike. */
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < 3; j++)
            for (int c = 0; c < 2; c++)
                scale_once(o, &e[c], np[j], 1, &runs[c][j][r]);
    for (int c = 0; c < 2; c++)
        for (int j = 0; j < 3; j++) {
            int bad = 0;
            for (int r = 0; r < rounds; r++)
                if (runs[c][j][r].rc != 0)
                    bad = runs[c][j][r].rc;
            qsort(runs[c][j], (size_t)rounds, sizeof runs[c][j][0], cmp_rate);
            out[c][j] = runs[c][j][rounds / 2];
            if (bad != 0)
                out[c][j].rc = bad;
        }
    scale_teardown(&e[0]);
    scale_teardown(&e[1]);
}

/* ------------------------------------------------- machine check */

/* ALU-only work for ns nanoseconds; returns iterations done. */
static uint64_t spin_for(uint64_t ns)
{
    volatile uint64_t x = 0;
    uint64_t it = 0, t0 = bench_now_ns();
    while (bench_now_ns() - t0 < ns) {
        for (int i = 0; i < 4096; i++)
            x += (uint64_t)i;
        it++;
    }
    return it;
}

int bench_cpu_speeds(double seconds, double *speed, int max)
{
    cpu_set_t saved;
    if (sched_getaffinity(0, sizeof saved, &saved) != 0)
        return 0;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = online < max ? (int)online : max;
    uint64_t best = 0, it[n];
    for (int c = 0; c < n; c++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        it[c] = sched_setaffinity(0, sizeof one, &one) == 0 ? spin_for((uint64_t)(seconds * 1e9)) : 0;
        if (it[c] > best)
            best = it[c];
    }
    sched_setaffinity(0, sizeof saved, &saved);
    for (int c = 0; c < n; c++)
        speed[c] = best > 0 ? (double)it[c] / (double)best : 0;
    return best > 0 ? n : 0;
}

double bench_cpu_parallelism(double seconds)
{
    uint64_t ns = (uint64_t)(seconds * 1e9);
    uint64_t one = spin_for(ns);
    uint64_t *res = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                         -1, 0);
    if (res == MAP_FAILED || one == 0)
        return 0;
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            res[i * 8] = spin_for(ns);
            _exit(0);
        }
    }
    for (int i = 0; i < 2; i++)
        if (kids[i] > 0)
            while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
                ;
    double r = (double)(res[0] + res[8]) / (double)one;
    munmap(res, 4096);
    return r;
}
