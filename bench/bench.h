/*
 * bench.h - declarations shared by the files of srl-bench (not installed).
 *
 * The benchmark is one program, split by what each file holds:
 *   main.c       command line, the order of the sections (fills a report)
 *   report.c     the report's tables and the targets (report.h)
 *   keys.c       key bytes and pre-generated request sequences (uniform and
 *                Zipf), from a fixed seed so every run asks the same keys
 *   baselines.c  the floor (keyed hash + one slot touch + one robust mutex),
 *                the global-lock wrapper, and the cost of each component
 *   setup.c      store names, policies, capacities, the store opener, the
 *                coarse ticker (used by the files below; calls none of them)
 *   acquire.c    per-decision cost of srl_acquire on both stores
 *   scaling.c    forked processes on distinct keys and on one hot key
 *   memory.c     table bytes per slot, fixed bytes per segment, segment bytes
 *                per key; the 10M-key segment
 *   redis.c      the Redis GCRA script baseline (only built with hiredis);
 *                redis_tiered.c and redis_compound.c on the same server
 *
 * Invariants: every measurement reads its keys from a pre-generated
 * sequence, never from a random generator inside the timed loop, so the
 * floor and srl pay for exactly the same key reads.  Every shared segment
 * the benchmark creates is unlinked right after it is opened (the mapping
 * stays valid, and a crash leaves nothing behind in /dev/shm).
 *
 * Concurrency: the program is single-threaded; scaling.c and redis.c fork
 * children that share only anonymous MAP_SHARED pages set up before fork.
 */
#ifndef SRL_BENCH_H
#define SRL_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <time.h>

#include "srl.h"

#define BENCH_KEY_LEN 16            /* every benchmark key is 16 bytes */

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* This thread's CPU time: what --cpu-time measures decisions with, so that
 * time spent preempted by other load on the machine is not counted. */
static inline uint64_t bench_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ options */

typedef struct bench_opts {
    int quick;                /* --quick: CI smoke run, < 60 s */
    uint64_t keys;            /* the "many keys" size (default 1M) */
    double seconds;           /* measured time per cell */
    int reps;                 /* repetitions per cell; the median is kept */
    uint64_t big_keys;        /* capacity of the creation test (10M) */
    unsigned sections;        /* BENCH_SEC_* to run (--only); all by default */
    int cpu_time;             /* --cpu-time: time decisions by this thread's CPU clock */
    int cold_keys;            /* --cold-keys: keys not brought ahead (bench_key_at) */
} bench_opts;

enum {
    BENCH_SEC_COMPONENTS = 1u << 0,
    BENCH_SEC_DECISIONS = 1u << 1,    /* per-decision cells, global lock, deny, coarse */
    BENCH_SEC_REDIS = 1u << 2,
    BENCH_SEC_SCALING = 1u << 3,
    BENCH_SEC_MEMORY = 1u << 4,       /* memory table and the big segment */
    BENCH_SEC_FLOOD = 1u << 5,        /* hot-key denial flood, flood cache off and on */
    BENCH_SEC_ALL = (1u << 6) - 1
};

/* ------------------------------------------------------------ keys.c */

typedef struct bench_rng {
    uint64_t s;
} bench_rng;

uint64_t bench_rng_next(bench_rng *r);     /* splitmix64 */
double bench_rng_unit(bench_rng *r);       /* uniform in [0, 1) */

/* n keys of BENCH_KEY_LEN bytes each, "u:%014llu" of their index. */
typedef struct bench_keys {
    uint64_t n;
    unsigned char *bytes;     /* n * BENCH_KEY_LEN */
    int cold;                 /* --cold-keys: no key is brought ahead (bench_key_at) */
} bench_keys;

int bench_keys_make(bench_keys *k, uint64_t n);
void bench_keys_free(bench_keys *k);
static inline const unsigned char *bench_key(const bench_keys *k, uint64_t i)
{
    return k->bytes + i * BENCH_KEY_LEN;
}

/* The key of request i of a timed loop over idx[0 .. end).  A server asks
 * srl about a key it has just built from the request, so the key's bytes
 * are in the cache; a key set of a million keys (16 MB) read in random
 * order is not.  So the loop brings the key BENCH_KEY_AHEAD requests ahead
 * into the cache, for every subject alike (srl, the floor, the global
 * lock, Redis): what is timed is the limiter, not a miss on the key.
 * Without it, the floor hid that miss behind its own table miss (the next
 * key's load fits in the CPU's reorder window behind its few hundred
 * instructions) while a decision of srl, about a thousand, could not: at
 * 1M uniform keys a quarter of srl's time was that miss, and the floor's
 * barely moved (BENCHMARKS.md, "Hot keys").  --cold-keys (k->cold) keeps
 * the method of the runs before 2026-12-06 22:18 UTC.  The first
 * BENCH_KEY_AHEAD requests of a batch are not brought ahead. */
#define BENCH_KEY_AHEAD 8u
static inline const unsigned char *bench_key_at(const bench_keys *k, const uint32_t *idx,
                                                uint64_t i, uint64_t end)
{
    if (!k->cold && i + BENCH_KEY_AHEAD < end)
        __builtin_prefetch(bench_key(k, idx[i + BENCH_KEY_AHEAD]), 0, 3);
    return bench_key(k, idx[i]);
}

typedef enum bench_dist { BENCH_UNIFORM = 0, BENCH_ZIPF = 1 } bench_dist;
const char *bench_dist_name(bench_dist d);

/* A request sequence: len indices into a key set of n keys, drawn from
 * [first, first + n) with the given distribution (Zipf: s = 1.0, rank r
 * has probability proportional to 1/r).  Deterministic in seed. */
typedef struct bench_seq {
    uint64_t len;
    uint32_t *idx;
} bench_seq;

int bench_seq_make(bench_seq *s, uint64_t len, uint64_t first, uint64_t n,
                   bench_dist d, uint64_t seed);
void bench_seq_free(bench_seq *s);

/* --------------------------------------------------------- baselines.c */

/* The floor: a table of `entries` lines, each a robust process-shared mutex
 * and a slot of slot_bytes, in an anonymous MAP_SHARED mapping (shmem pages,
 * as a segment's).  One op = SipHash-x24 of the key, the line it picks,
 * lock, read+write every word of the slot, unlock. */
typedef struct bench_floor {
    void *map;
    size_t map_bytes;
    uint64_t entries;
    size_t entry_bytes;
    uint32_t slot_bytes;
    unsigned char hkey[16];
} bench_floor;

int bench_floor_make(bench_floor *f, uint64_t table_bytes, uint32_t slot_bytes);
void bench_floor_free(bench_floor *f);
/* One floor decision; returns a value derived from the slot so the work
 * cannot be optimised away. */
uint64_t bench_floor_op(bench_floor *f, const unsigned char *key, size_t len);

/* A single robust process-shared mutex in its own MAP_SHARED page: the
 * simplest correct design, held around every srl_acquire. */
typedef struct bench_global_lock {
    pthread_mutex_t *m;
} bench_global_lock;

int bench_global_lock_make(bench_global_lock *g);
void bench_global_lock_free(bench_global_lock *g);
int bench_global_acquire(bench_global_lock *g, srl_limiter *lim,
                         const void *key, size_t len, srl_decision *d);

/* Lock a robust mutex, making it consistent if its owner died. */
int bench_robust_lock(pthread_mutex_t *m);
int bench_robust_mutex_init(pthread_mutex_t *m);

/* Costs of the pieces a decision is made of, in ns (hot caches). */
typedef struct bench_components {
    double clock_ns;          /* clock_gettime(CLOCK_MONOTONIC) */
    double coarse_ns;         /* clock_gettime(CLOCK_MONOTONIC_COARSE) */
    double siphash_ns;        /* crypto_shorthash_siphashx24, 16-byte key */
    double hash_clock_ns;     /* the hash, then the precise clock */
    double hash_clock_cas_ns; /* the same, then one locked CAS of a hot word */
    double mutex_ns;          /* robust pshared lock + unlock, uncontended */
    double mutex_clock_ns;    /* the same through pthread_mutex_clocklock (a bounded wait) */
    double algo_ns[4];        /* srl_state_acquire on one hot state, by srl_algorithm */
    double chase_ns[3];       /* one dependent load, a random line of BENCH_CHASE_MIB[i] MiB */
} bench_components;

/* The table sizes the chase rows time one dependent miss in: what a miss
 * costs grows with the table (its lines and its pages), which is why the
 * bigger of two stores pays more per miss at 1M keys (BENCHMARKS.md). */
#define BENCH_CHASE_SIZES 3
static const unsigned BENCH_CHASE_MIB[BENCH_CHASE_SIZES] = {16, 64, 256};

void bench_components_measure(const bench_opts *o, bench_components *c);

/* -------------------------------------------------------------- setup.c */

typedef enum bench_store {
    BENCH_SHARED = 0,         /* srl_open_shared on /dev/shm */
    BENCH_LOCAL = 1,          /* srl_open_local */
    BENCH_SHARED_GLOBAL = 2,  /* srl_open_shared inside one global robust mutex */
    BENCH_SHARED_LOCKFREE = 3 /* srl_open_shared with SRL_CONFIG_LOCKFREE */
} bench_store;
const char *bench_store_name(bench_store s);

/* The policies the benchmark uses: "huge" never denies in a run, the deny
 * one admits one request per key per hour (so after warm-up every decision
 * is a denial).  sliding_log always gets a small limit (its state is 8 B
 * per permit). */
srl_policy bench_policy_allow(srl_algorithm a);
srl_policy bench_policy_deny(srl_algorithm a);

/* Open a store for cfg (capacity and display already set).  A shared one is
 * created under a fresh name in /dev/shm and unlinked at once. */
int bench_open(bench_store s, const srl_config *cfg, srl_limiter **out);

/* Slots a table is created with for nkeys live keys: room to spare, so no
 * timed request finds its buckets full. */
uint64_t bench_capacity_for(uint64_t nkeys);

/* CLOCK_MONOTONIC_COARSE (a few ms resolution, no clock hardware read), as
 * a ticker: shows what a decision costs without its clock read. */

typedef struct bench_cell {
    double ns;                /* median ns per decision */
    double allowed_frac;      /* fraction of decisions allowed (after the warm-up) */
    uint64_t segment_bytes;   /* srl_info of the store (0 for local) */
    uint32_t slot_bytes;
    uint64_t untracked;       /* decisions that found the table full (should be 0) */
    int rc;                   /* 0, or the srl error that stopped the cell */
} bench_cell;

/* ---- timing.c */

/* One thing to time: fn runs the requests at sequence positions
 * [start, start + count) (count = BENCH_BATCH; seq_len is a multiple of it)
 * as a direct loop, so the one indirect call is paid once per batch. */
#define BENCH_BATCH 1024u
typedef uint64_t (*bench_batch_fn)(void *ctx, uint64_t start, uint64_t count);

typedef struct bench_subject {
    bench_batch_fn fn;        /* NULL: skipped (its store failed to open) */
    void *ctx;
    uint64_t seq_len;
    double ns;                /* out: median ns per request */
} bench_subject;

/* Time the n subjects interleaved: o->reps repetitions of o->seconds /
 * o->reps each, repetition by repetition across the group. */
void bench_time_interleaved(const bench_opts *o, bench_subject *subs, int n);

/* One subject alone. */
double bench_time_batches(const bench_opts *o, bench_batch_fn fn, void *ctx,
                          uint64_t seq_len);

/* ---- acquire.c: srl_acquire over a pre-generated sequence */

typedef struct bench_acq {
    srl_limiter *lim;
    bench_global_lock g;      /* .m non-NULL: every call inside the global lock */
    const bench_keys *k;
    const uint32_t *idx;
    uint64_t seq_len;
    uint64_t allowed, untracked, total;
    int rc;                   /* first error of open, warm-up or timing */
    srl_info info;
} bench_acq;

/* Open store s for policy p (ticker: NULL .now for the default) with room
 * for nkeys, make every one of the first nkeys keys live (one request
 * each), then one untimed pass over the sequence (up to 2M requests). */
int bench_acq_open(bench_acq *a, bench_store s, srl_policy p, srl_ticker ticker,
                   const bench_keys *k, uint64_t nkeys, const bench_seq *seq);
/* The same for a compound policy (several limits, all or nothing). */
int bench_acq_open_limits(bench_acq *a, bench_store s, const srl_limits *l, srl_ticker ticker,
                          const bench_keys *k, uint64_t nkeys, const bench_seq *seq);
/* bench_acq_open with srl_config.flags (SRL_CONFIG_LOCKFREE). */
int bench_acq_open_flags(bench_acq *a, bench_store s, srl_policy p, srl_ticker ticker,
                         uint32_t flags, const bench_keys *k, uint64_t nkeys,
                         const bench_seq *seq);
void bench_acq_close(bench_acq *a);
/* The subject that times a (fn NULL if it failed to open). */
bench_subject bench_acq_subject(bench_acq *a);
/* Its results after timing. */
void bench_acq_cell(const bench_acq *a, const bench_subject *sub, bench_cell *out);

/* The floor over the same key sequence. */
typedef struct bench_floor_run {
    bench_floor *f;
    const bench_keys *k;
    const uint32_t *idx;
} bench_floor_run;
bench_subject bench_floor_subject(bench_floor_run *r, const bench_seq *seq);

/* ------------------------------------------------------------ scaling.c */

typedef enum bench_scale_kind {
    BENCH_SCALE_SRL = 0,      /* srl_acquire on a shared segment */
    BENCH_SCALE_GLOBAL = 1,   /* the same, inside one global robust mutex */
    BENCH_SCALE_FLOOR = 2,    /* the floor op */
    BENCH_SCALE_FLOOD_OFF = 3, /* srl_acquire, a plain handle (a denying policy) */
    BENCH_SCALE_FLOOD_ON = 4  /* srl_acquire with the flood cache (the same policy) */
} bench_scale_kind;

typedef struct bench_scale_result {
    double rate;              /* decisions per second, all processes */
    double cpu_ns;            /* CPU time per decision (all processes' CPU / decisions):
                                 what a decision costs, whatever else runs on the machine */
    double allowed_frac;
    int rc;
} bench_scale_result;

/* For each of the n process counts (1..4): that many processes for
 * o->seconds; hot: all on key 0, else process i uses quarter i of the key
 * set (uniform within it).  One store is set up for the series; the counts
 * are run round-robin `rounds` times and the median round of each kept. */
void bench_scale_series(const bench_opts *o, bench_scale_kind kind, srl_policy p,
                        const bench_keys *k, int hot, const int *nprocs, int n,
                        int rounds, bench_scale_result *out);
/* The hot-key denial flood (issue 17, item 5): one key of policy p (which
 * denies nearly everything) from 1, 2, 4 processes, with the flood cache
 * off (out[0][*]) and on (out[1][*]); rounds interleave cache and process
 * count, the median round is kept. */
void bench_flood_series(const bench_opts *o, srl_policy p, const bench_keys *k, int rounds,
                        bench_scale_result out[2][3]);

/* Throughput of two processes running a pure ALU loop, over one process's
 * (2.0 on two idle cores).  Below 2, other load or vCPU sharing caps every
 * scaling ratio at this value. */
double bench_cpu_parallelism(double seconds);
/* The same ALU loop pinned to each online CPU in turn (up to max of them),
 * for seconds each: speed[i] is CPU i's work over the fastest CPU's (1.00).
 * A VM's vCPUs may differ (a busy hyperthread sibling on the host), and a
 * single-process cell then runs at the speed of whichever CPU it landed
 * on.  Returns how many CPUs were measured (0 if affinity is refused). */
int bench_cpu_speeds(double seconds, double *speed, int max);

/* ------------------------------------------------------------ memory.c */

typedef struct bench_mem_row {
    srl_algorithm algo;
    srl_policy policy;
    uint32_t display;
    uint32_t state_bytes;     /* srl_state_size */
    uint32_t slot_bytes;
    uint64_t capacity;        /* slots */
    uint64_t segment_bytes;
    /* segment_bytes = fixed_bytes + table_bytes: the header and policy pages,
     * whatever the capacity, and the buckets (heads and slots), which grow
     * with it.  Split by a second segment of the same config with fewer
     * buckets (srl_info gives no bucket size); 0 if that could not be made. */
    uint64_t table_bytes;
    uint64_t fixed_bytes;
    uint64_t filled;          /* keys tracked when the first request found no slot */
    int rc;
} bench_mem_row;

void bench_mem_shared(srl_algorithm a, uint32_t display, uint64_t capacity,
                      bench_mem_row *out);

/* Heap bytes per key of the local store (mallinfo2 delta over n keys). */
double bench_mem_local(srl_algorithm a, uint64_t n, int *rc);

typedef struct bench_create_result {
    double seconds;           /* srl_open_shared(SRL_CREATE) wall time */
    double first_pass_seconds;/* one request for each of the first 1M keys afterwards */
    uint64_t capacity;
    uint64_t segment_bytes;
    int rc;
} bench_create_result;

void bench_create_big(uint64_t capacity, bench_create_result *out);

/* ------------------------------------------------------------ redis.c */

/* redis_tiered.c: srl_open_redis and srl_open_tiered on the same server. */
typedef struct bench_tiered_cell {
    double rate;                  /* decisions/s, one client */
    double evalsha_per_decision;  /* the server's EVALSHA count / decisions */
    uint64_t decisions, admitted, local;
} bench_tiered_cell;

typedef struct bench_tiered_result {
    int available;
    char why[160];
    uint32_t flood_limit;         /* the flood's key: this many permits, 100x the requests */
    uint32_t distinct_keys;
    bench_tiered_cell cell[2][2]; /* [flood, distinct][redis, tiered] */
} bench_tiered_result;

/* redis_compound.c: a compound policy, srl's Redis store against a
 * hand-written EVALSHA; [0] srl, [1] the script, [2] srl with the
 * compound's first limit alone (what the second limit costs srl). */
enum { BENCH_COMPOUND_SUBJECTS = 3 };
typedef struct bench_compound_cell {
    double rate;                  /* decisions/s, one client (median of reps) */
    uint64_t decisions, admitted; /* over every timed repetition */
} bench_compound_cell;

typedef struct bench_compound_result {
    int available;
    int rc;                       /* an srl error of the cell (0: none) */
    char why[200];
    char policy[128];
    char one[64];                 /* [2]'s policy */
    int reps;
    double seconds;               /* per repetition and subject */
    bench_compound_cell cell[BENCH_COMPOUND_SUBJECTS];
    uint64_t rt_n;                /* decisions between the two INFO commandstats */
    long long rt_evalsha[BENCH_COMPOUND_SUBJECTS];      /* the server's EVALSHA calls in them (commandstats) */
    long long rt_usec[BENCH_COMPOUND_SUBJECTS];         /* its microseconds in those calls (commandstats) */
    long long rt_sent[BENCH_COMPOUND_SUBJECTS];         /* commands the subject sent (MONITOR) */
    long long rt_inner[BENCH_COMPOUND_SUBJECTS];        /* commands its script ran (MONITOR, "lua") */
    uint64_t rt_admitted[BENCH_COMPOUND_SUBJECTS];
    char conc_policy[64];
    int conc_rc;                  /* srl_open_redis's answer for conc_policy */
    char conc_why[200];           /* srl_last_error after it, or the measure's error */
    /* conc_policy measured (conc_rc 0): [0] srl_enter + srl_leave, [1] a
     * hand-written enter script + leave script; one pair per request. */
    int conc_available;
    bench_compound_cell conc[2];  /* rate: pairs/s (median); admitted: entered */
    uint64_t conc_rt_n;           /* pairs between two INFO commandstats */
    long long conc_evalsha[2];    /* the server's EVALSHA calls in them */
    long long conc_usec[2];       /* its microseconds in those calls */
} bench_compound_result;

typedef struct bench_redis_result {
    int available;            /* 0: not built, or redis-server missing */
    char why[160];            /* when not available, or on error */
    char version[32];
    double rate1;             /* decisions/s, one client, one request per round trip (best placement) */
    double rate_placed[3];    /* one client on the server's CPU, on the other CPU, unpinned */
    double rate2;             /* the same with two client processes */
    double allowed_frac;
    bench_tiered_result tiered;
    bench_compound_result compound;
} bench_redis_result;

void bench_redis_run(const bench_opts *o, const bench_keys *k, const bench_seq *seq,
                     bench_redis_result *out);

#endif
