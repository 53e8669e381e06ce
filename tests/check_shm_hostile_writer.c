/*
 * check_shm_hostile_writer.c - a process writes the segment WHILE workers
 * use it (issue 37, N1 and N3).
 *
 * check_shm_hostile.c damages a segment between calls; the segment fuzzer
 * mutates a static file.  Neither can see a word read twice: the damage
 * must land between the two reads.  Here writer processes store random
 * values, in a loop, into the words the table reads as indices, lengths,
 * counts and generations (a slot's tier, gen, seq, key_len; tags,
 * undo_slot, moving_slot, the bucket counters and gen; the undo copy and
 * the states; the header page's policy_gen, lf_open and counters; the
 * header itself), never into a mutex (the first sizeof(pthread_mutex_t)
 * bytes of each bucket head: shm.h), while forked workers use every call
 * of the store on a small set of keys.  What users rely on (srl.h, design
 * "Trust model"): whoever can write the segment can change decisions, but
 * no worker crashes, reads or writes outside its memory, hangs or gets a
 * code srl.h does not document.  The ASan/UBSan build (CI's
 * build-test-asan, suite shared) turns any out-of-bounds read into a child
 * that dies, which the parent sees.
 *
 * Bounded: each writer makes WRITES stores; each worker makes at least
 * CALLS calls and goes on until the writers are done (or the parent, who
 * saw every writer end, says stop: a writer that died early), so every
 * store lands beside calls however the scheduler shares a loaded machine;
 * every lock wait is bounded by lock_timeout_ms; alarm() guards the test.
 *
 * The second test (N3): a writer flipping policy_gen between two valid
 * copies beside a deciding worker.  A generation going back is damage: the
 * handle builds no view for it (views held stay bounded,
 * srl__shm_pol_count), the key's use is never reset (admissions stay
 * within what the conversion rule allows), and srl_check reports it.
 *
 * Concurrency: real forked processes on a real segment; the start is a
 * spin barrier (shm_testutil.h) so writers and workers overlap; children
 * report through a shared page, never through Check (testutil.h).
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"
#include "srl.h"
#include "shm_testutil.h"
#include "testutil.h"

#define WORKERS 2
#define WRITERS 1
#define CALLS 2000              /* per worker and case, at least: and until the writers end */
#define KEYS 12

static uint64_t rnd_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

static uint64_t rnd_below(uint64_t *s, uint64_t n)
{
    return n == 0 ? 0 : rnd_next(s) % n;
}

/* ------------------------------------------------------------ cases */

struct hcase {
    const char *name;
    const char *limits;           /* tier 0 */
    const char *tier;             /* tier 1 ("paid"), or NULL */
    uint32_t flags;               /* SRL_CONFIG_* of the workers' handles */
    bool conc;                    /* a concurrency limit: srl_enter/srl_leave */
};

static const struct hcase cases[] = {
    {"token bucket, tiers, plain", "token_bucket:10/1s", "token_bucket:100/1s", 0, false},
    {"gcra, tiers, lock-free", "gcra:20/1s", "gcra:200/1m", SRL_CONFIG_LOCKFREE, false},
    {"gcra, lock-free and flood cache", "gcra:5/1m", NULL,
     SRL_CONFIG_LOCKFREE | SRL_CONFIG_FLOOD_CACHE, false},
    {"compound, tiers, flood cache", "token_bucket:10/1s + sliding_log:5/1s",
     "gcra:100/1m + token_bucket:5000/1d", SRL_CONFIG_FLOOD_CACHE, false},
    {"sliding counter, tiers, dry run", "sliding_counter:10/1s", "sliding_log:8/1m",
     SRL_CONFIG_DRY_RUN, false},
    {"concurrency:5", "concurrency:5", NULL, 0, true},
    {"concurrency + token bucket, dry run", "concurrency:3 + token_bucket:100/1m", NULL,
     SRL_CONFIG_DRY_RUN, true},
};

static srl_tier paid;

static srl_config config_of(const struct hcase *c)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_limits_parse_ex(c->limits, &cfg.limits, NULL), 0);
    cfg.capacity = 256;
    cfg.key_display = 16;
    cfg.lock_timeout_ms = 50;
    if (c->tier != NULL) {
        memset(&paid, 0, sizeof paid);
        snprintf(paid.name, sizeof paid.name, "paid");
        ck_assert_int_eq(srl_limits_parse_ex(c->tier, &paid.limits, NULL), 0);
        cfg.tiers = &paid;
        cfg.tier_count = 1;
    }
    return cfg;
}

/* ------------------------------------------------------------ shared page */

struct area {
    struct spin_barrier start;
    uint32_t stop;                /* the workers are done: writers stop */
    uint32_t bad;                 /* a call answered outside srl.h */
    char why[256];
    uint32_t writers_done;        /* writers that made their WRITES stores */
    uint64_t calls;
    uint64_t writes;
};

static void report(struct area *a, const char *call, int rc)
{
    if (__atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED) == 0)
        snprintf(a->why, sizeof a->why, "%s returned %d (%s)", call, rc, srl_strerror(rc));
}

/* The lock outcomes every call of the shared store may have (srl.h). */
static bool lock_error(int rc)
{
    return rc == SRL_ETIMEDOUT || rc == SRL_ENOTRECOVERABLE || rc == SRL_ECORRUPT;
}

/* ------------------------------------------------------------ writer */

/* One store of width w (1, 2, 4, 8) at off: a relaxed atomic store, so the
 * writer itself is well defined; the readers race it as a hostile process
 * would. */
static void store(unsigned char *m, size_t off, uint64_t v, unsigned w)
{
    switch (w) {
    case 1: __atomic_store_n(m + off, (uint8_t)v, __ATOMIC_RELAXED); break;
    case 2: __atomic_store_n((uint16_t *)(m + off), (uint16_t)v, __ATOMIC_RELAXED); break;
    case 4: __atomic_store_n((uint32_t *)(m + off), (uint32_t)v, __ATOMIC_RELAXED); break;
    default: __atomic_store_n((uint64_t *)(m + off), v, __ATOMIC_RELAXED); break;
    }
}

/* A value a reader would trip on: small, just out of range, all ones, or
 * anything. */
static uint64_t nasty(uint64_t *seed, uint64_t near)
{
    switch (rnd_below(seed, 6)) {
    case 0: return 0;
    case 1: return UINT64_MAX;
    case 2: return near;
    case 3: return near + 1;
    case 4: return near - 1;
    default: return rnd_next(seed);
    }
}

/* One random store of the mix into the table or the header page. */
static void random_store(unsigned char *m, const struct srl__shm *geo, uint32_t gen0,
                         uint64_t *seed)
{
    const size_t live = SRL__SHM_LIVE_OFFSET;
    const size_t mu = sizeof(pthread_mutex_t);   /* never written: the mutex */
    uint64_t b = rnd_below(seed, geo->buckets);
    size_t bk = SRL__SHM_HEADER_BYTES + (size_t)b * geo->bucket_bytes;
    unsigned i = (unsigned)rnd_below(seed, SRL__SHM_SLOTS);
    size_t slot = bk + geo->slots_off + (size_t)i * geo->slot_bytes;
    switch (rnd_below(seed, 20)) {
    case 0: case 1: case 2: case 3:   /* the slot's tier, the word of N1 */
        store(m, slot + SRL__SLOT_TIER, nasty(seed, 2), 2);
        break;
    case 4: case 5:                   /* its generation */
        store(m, slot + SRL__SLOT_GEN, nasty(seed, gen0), 4);
        break;
    case 6:                           /* its seq */
        store(m, slot + SRL__SLOT_SEQ, nasty(seed, 1), 2);
        break;
    case 7:                           /* key_len */
        store(m, slot + geo->counters_off + SRL__CTR_KEY_LEN, nasty(seed, SRL_KEY_MAX), 2);
        break;
    case 8: case 9: {                 /* the state: counts, heads, holders */
        size_t off = rnd_below(seed, geo->state_bytes / 4) * 4;
        store(m, slot + SRL__SLOT_STATE + off, nasty(seed, 5), 4);
        break;
    }
    case 10:                          /* a tag */
        store(m, bk + offsetof(struct srl__shm_bucket, tags) + i, rnd_next(seed), 1);
        break;
    case 11:                          /* undo_slot, moving_slot */
        store(m, bk + offsetof(struct srl__shm_bucket, undo_slot) + rnd_below(seed, 2),
              nasty(seed, SRL__SHM_SLOTS), 1);
        break;
    case 12: {                        /* the rest of the head and the undo copy */
        size_t off = mu + rnd_below(seed, (geo->slots_off - mu) / 4) * 4;
        store(m, bk + off, nasty(seed, 1), 4);
        break;
    }
    case 13:                          /* anywhere in the slot */
        store(m, slot + rnd_below(seed, geo->slot_bytes), rnd_next(seed), 1);
        break;
    case 14: {                        /* policy_gen: mostly its own value back */
        uint64_t g = rnd_below(seed, 4) != 0 ? gen0 : nasty(seed, gen0);
        store(m, live + offsetof(struct srl__shm_live, policy_gen), g, 4);
        break;
    }
    case 15:                          /* lf_open, the counters */
        store(m, live + rnd_below(seed, sizeof(struct srl__shm_live) / 4) * 4, nasty(seed, 1), 4);
        if (rnd_below(seed, 2) == 0)
            store(m, live + offsetof(struct srl__shm_live, policy_gen), gen0, 4);
        break;
    case 16:                          /* the header (read only at open and by check) */
        store(m, rnd_below(seed, sizeof(struct srl__shm_header)), rnd_next(seed), 1);
        break;
    default: {                        /* a bucket's gen and counters */
        size_t off = offsetof(struct srl__shm_bucket, allowed) +
                     rnd_below(seed, (sizeof(struct srl__shm_bucket) -
                                      offsetof(struct srl__shm_bucket, allowed)) / 4) * 4;
        store(m, bk + off, nasty(seed, 1), 4);
        break;
    }
    }
}

/* Bursts of BURST stores: half of them a storm on the tier (or the
 * generation) word of every occupied slot, the way N1 was found (a tier
 * read twice is caught only by a store between the two reads: the storm
 * keeps the words of the slots in use changing all the time), the other
 * half the random mix above.  WRITES stores in all, then writer_done. */
#define BURST 4096u
#define WRITES (1500u * BURST)

static void writer(const char *name, const struct srl__shm *geo, struct area *a, uint64_t seed)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        _exit(20);
    unsigned char *m = mmap(NULL, geo->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        _exit(21);
    const uint32_t gen0 =
        *(uint32_t *)(m + SRL__SHM_LIVE_OFFSET + offsetof(struct srl__shm_live, policy_gen));
    spin_barrier_wait(&a->start, WORKERS + WRITERS + 1);
    uint64_t n = 0;
    while (n < WRITES && !__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
        if (rnd_below(&seed, 2) == 0) {
            for (unsigned k = 0; k < BURST; k++, n++)
                random_store(m, geo, gen0, &seed);
        } else {
            bool gen = rnd_below(&seed, 4) == 0;
            for (unsigned k = 0; k < BURST; n++) {
                uint64_t b = rnd_below(&seed, geo->buckets);
                size_t bk = SRL__SHM_HEADER_BYTES + (size_t)b * geo->bucket_bytes;
                const uint8_t *tags = m + bk + offsetof(struct srl__shm_bucket, tags);
                for (unsigned i = 0; i < SRL__SHM_SLOTS && k < BURST; i++, k++) {
                    if (__atomic_load_n(&tags[i], __ATOMIC_RELAXED) == 0)
                        continue;
                    size_t slot = bk + geo->slots_off + (size_t)i * geo->slot_bytes;
                    if (gen)
                        store(m, slot + SRL__SLOT_GEN, nasty(&seed, gen0), 4);
                    else
                        store(m, slot + SRL__SLOT_TIER, rnd_below(&seed, 2) ? 0xffff : 16, 2);
                }
            }
        }
        sched_yield();   /* a 2-core machine: let the workers run too */
    }
    __atomic_add_fetch(&a->writes, n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&a->writers_done, 1, __ATOMIC_RELEASE);
    munmap(m, geo->map_bytes);
    _exit(0);
}

/* ------------------------------------------------------------ workers */

struct walk {
    uint32_t state_bytes;
    uint32_t key_display;
    uint64_t n;
};

/* srl_foreach's callback: every byte it is handed must be readable (ASan). */
static int walk_entry(const srl_entry *e, void *ctx)
{
    struct walk *w = ctx;
    volatile unsigned char sink = 0;
    for (uint32_t i = 0; i < e->display_len && i < w->key_display; i++)
        sink ^= e->display[i];
    const unsigned char *st = e->state;
    for (uint32_t i = 0; i < w->state_bytes; i++)
        sink ^= st[i];
    (void)sink;
    w->n++;
    return 0;
}

static void worker(const char *name, const struct hcase *c, struct area *a, uint64_t seed)
{
    srl_config cfg = config_of(c);
    cfg.flags = c->flags;
    srl_limiter *lim;
    int rc = srl_open_shared(name, &cfg, 0, &lim);
    if (rc != 0)
        _exit(30);
    srl_info info;
    if (srl_info_get(lim, &info) != 0)
        _exit(31);
    unsigned char *buf = malloc(info.state_bytes);
    if (buf == NULL)
        _exit(32);
    struct walk w = {info.state_bytes, info.key_display, 0};
    srl_lease held[4];
    unsigned nheld = 0;
    spin_barrier_wait(&a->start, WORKERS + WRITERS + 1);
    int call = 0;
    for (;; call++) {
        if (call >= CALLS && (__atomic_load_n(&a->writers_done, __ATOMIC_ACQUIRE) == WRITERS ||
                              __atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)))
            break;
        char key[16];
        int n = snprintf(key, sizeof key, "k%d", (int)rnd_below(&seed, KEYS));
        srl_decision d;
        memset(&d, 0, sizeof d);
        unsigned what = (unsigned)rnd_below(&seed, 16);
        switch (what) {
        case 0: case 1: case 2: case 3: case 4:
            if (c->conc) {
                srl_lease l;
                rc = srl_enter(lim, key, (size_t)n, &l, &d);
                if (rc != 0 && !lock_error(rc))
                    report(a, "srl_enter", rc);
                if (rc == 0 && l.gen != 0) {
                    if (nheld == 4) {
                        int lrc = srl_leave(lim, &held[0]);
                        if (lrc != 0 && lrc != SRL_ENOENT && !lock_error(lrc))
                            report(a, "srl_leave", lrc);
                        memmove(held, held + 1, 3 * sizeof held[0]);
                        nheld--;
                    }
                    held[nheld++] = l;
                }
            } else {
                uint32_t tier = (uint32_t)rnd_below(&seed, info.tier_count);
                rc = srl_acquire_tier(lim, tier, key, (size_t)n, 1, &d);
                if (rc != 0 && !lock_error(rc))
                    report(a, "srl_acquire_tier", rc);
            }
            break;
        case 5:
            if (nheld > 0) {
                rc = srl_leave(lim, &held[--nheld]);
                if (rc != 0 && rc != SRL_ENOENT && !lock_error(rc))
                    report(a, "srl_leave", rc);
            } else {
                rc = srl_acquire(lim, key, (size_t)n, 1, &d);
                if (rc != 0 && !lock_error(rc) && !(c->conc && rc == SRL_ENOTSUP))
                    report(a, "srl_acquire", rc);
            }
            break;
        case 6:
            rc = srl_reserve(lim, key, (size_t)n, 1, 5 * MS, &d);
            if (rc != 0 && !lock_error(rc) && rc != SRL_ENOTSUP)
                report(a, "srl_reserve", rc);
            break;
        case 7:
            rc = srl_refund(lim, key, (size_t)n, 1);
            if (rc != 0 && rc != SRL_ENOENT && rc != SRL_ECOST && !lock_error(rc) &&
                !(c->conc && rc == SRL_ENOTSUP))
                report(a, "srl_refund", rc);
            break;
        case 8:
            rc = srl_peek(lim, key, (size_t)n, 1, &d);
            if (rc != 0 && rc != SRL_ENOENT && rc != SRL_ECOST && !lock_error(rc))
                report(a, "srl_peek", rc);
            break;
        case 9: {
            int64_t r = srl_foreach(lim, walk_entry, &w);
            if (r < 0 && !lock_error((int)r))
                report(a, "srl_foreach", (int)r);
            break;
        }
        case 10: {
            int64_t r = srl_check(lim, NULL, NULL);
            if (r < 0)
                report(a, "srl_check", (int)r);
            break;
        }
        case 11: {
            int64_t r = srl_evict_idle(lim);
            if (r < 0 && !lock_error((int)r))
                report(a, "srl_evict_idle", (int)r);
            break;
        }
        case 12:
            rc = srl_key_state(lim, key, (size_t)n, buf, info.state_bytes);
            if (rc != 0 && rc != SRL_ENOENT && !lock_error(rc))
                report(a, "srl_key_state", rc);
            break;
        case 13: {
            srl_stats st;
            rc = srl_stats_get(lim, &st);
            if (rc != 0)
                report(a, "srl_stats_get", rc);
            break;
        }
        case 14: {
            srl_info in;
            rc = srl_info_get(lim, &in);
            if (rc != 0 && rc != SRL_ECORRUPT)
                report(a, "srl_info_get", rc);
            break;
        }
        default: {
            srl_tier t;
            rc = srl_tier_get(lim, (uint32_t)rnd_below(&seed, info.tier_count), &t);
            if (rc != 0 && rc != SRL_ECORRUPT)
                report(a, "srl_tier_get", rc);
            break;
        }
        }
        if (d.allowed > 1)
            report(a, "a decision's allowed", (int)d.allowed);
    }
    __atomic_add_fetch(&a->calls, (uint64_t)call, __ATOMIC_RELAXED);
    free(buf);
    srl_close(lim);
    _exit(0);
}

/* How a child ended, for a message: "exit N" or "signal N". */
static void ended(int status, char *out, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(out, len, "signal %d", WTERMSIG(status));
    else
        snprintf(out, len, "exit %d", WEXITSTATUS(status));
}

START_TEST(a_writer_racing_every_call_on_every_word_crashes_nothing_and_gets_documented_codes)
{
    alarm(200);
    const struct hcase *c = &cases[_i];
    srl_config cfg = config_of(c);
    const char *name = unique_name("hw");
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    /* Keys in place before the writer starts, so that its first stores
     * already land on occupied slots. */
    srl_decision d;
    for (int k = 0; k < KEYS; k++) {
        char key[16];
        int n = snprintf(key, sizeof key, "k%d", k);
        srl_lease l;
        ck_assert_int_eq(c->conc ? srl_enter(lim, key, (size_t)n, &l, &d)
                                 : srl_acquire(lim, key, (size_t)n, 1, &d), 0);
    }
    struct srl__shm geo = *(struct srl__shm *)lim->impl;
    struct area *a = shared_zeroed(sizeof *a);
    pid_t pids[WORKERS + WRITERS];
    for (int w = 0; w < WORKERS + WRITERS; w++) {
        pids[w] = test_fork();
        if (pids[w] == 0) {
            uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w + 1) + (uint64_t)_i;
            if (w < WORKERS)
                worker(name, c, a, seed);
            writer(name, &geo, a, seed);
        }
    }
    spin_barrier_wait(&a->start, WORKERS + WRITERS + 1);
    int status[WORKERS + WRITERS];
    /* The writers first: the workers go on until they are done. */
    for (int w = WORKERS; w < WORKERS + WRITERS; w++)
        ck_assert_int_eq(waitpid(pids[w], &status[w], 0), pids[w]);
    __atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);   /* only if a writer died early */
    for (int w = 0; w < WORKERS; w++)
        ck_assert_int_eq(waitpid(pids[w], &status[w], 0), pids[w]);
    char how[64];
    for (int w = 0; w < WORKERS + WRITERS; w++) {
        ended(status[w], how, sizeof how);
        ck_assert_msg(WIFEXITED(status[w]) && WEXITSTATUS(status[w]) == 0,
                      "%s: %s %d ended with %s (first bad call: %s)", c->name,
                      w < WORKERS ? "worker" : "writer", w, how, a->bad ? a->why : "none");
    }
    ck_assert_msg(a->bad == 0, "%s: %u calls answered outside srl.h, the first: %s", c->name,
                  a->bad, a->why);
    ck_assert_uint_ge(a->calls, (uint64_t)WORKERS * CALLS);
    ck_assert_uint_ge(a->writes, (uint64_t)WRITERS * WRITES);   /* all of them beside calls */
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------------ N3 */

#define FLIP_ROUNDS 2000
#define FLIP_DECISIONS 5        /* per round */

struct flip_area {
    struct spin_barrier start;
    uint32_t round;               /* the writer's: policy_gen is round & 1 now */
    uint32_t ack;                 /* the decider's: done deciding under round */
};

/* A key used up under 10/1h, the policy changed to 11/1h (generation 1;
 * the key's use carried over by the conversion rule: one permit more),
 * then a writer process sets policy_gen to 0 and 1 by turns, both valid
 * copies, and the decider (this process, so that the views its handle
 * holds can be counted) decides FLIP_DECISIONS times under each.  The
 * turns are a handshake, not timing: every round is decided under the
 * generation it stands for.  The generation gone back is damage: no view
 * is built for it (the views held stay as they were), the call is
 * SRL_ECORRUPT with on_full's DEGRADED decision, each one is counted in
 * policy_damage, srl_check (any handle's: rlctl check's) reports it, and
 * the key is never reset (no admission beyond the 11 the rule gives). */
START_TEST(policy_gen_flipped_between_two_valid_copies_is_damage_not_a_view_per_decision)
{
    alarm(120);
    fake_clock *clk = fake_clock_shared(1000 * SEC);
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:10/1h", &cfg.limits, NULL), 0);
    cfg.capacity = 64;
    cfg.ticker = fake_ticker(clk);
    const char *name = unique_name("flip");
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    srl_decision d;
    uint32_t admitted = 0;
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        admitted += d.allowed;
    }
    ck_assert_uint_eq(admitted, 10);
    srl_limits eleven;
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:11/1h", &eleven, NULL), 0);
    char msg[256];
    ck_assert_int_eq(srl_policy_change_tier(lim, 0, &eleven, msg, sizeof msg), 1);
    struct srl__shm *s = lim->impl;
    uint32_t *gen = &srl__shm_live(s)->policy_gen;
    ck_assert_uint_eq(*gen, 1);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);   /* the one the rule gives */
    admitted += d.allowed;
    ck_assert_uint_eq(admitted, 11);
    /* Both copies are valid: generation 0's (10/1h) and 1's (11/1h). */
    struct srl__shm_policy copy;
    ck_assert_int_eq(srl__shm_policy_read(s, 0, &copy, NULL, 0), 0);
    ck_assert_int_eq(srl__shm_policy_read(s, 1, &copy, NULL, 0), 0);
    uint32_t views = srl__shm_pol_count(s);
    ck_assert_uint_le(views, 2);

    struct flip_area *a = shared_zeroed(sizeof *a);
    pid_t pid = test_fork();
    if (pid == 0) {
        spin_barrier_wait(&a->start, 2);
        for (uint32_t r = 1; r <= FLIP_ROUNDS; r++) {
            __atomic_store_n(gen, r & 1u, __ATOMIC_RELEASE);
            __atomic_store_n(&a->round, r, __ATOMIC_RELEASE);
            while (__atomic_load_n(&a->ack, __ATOMIC_ACQUIRE) != r)
                sched_yield();
        }
        _exit(0);
    }
    spin_barrier_wait(&a->start, 2);
    uint32_t refused = 0, bad_new = 0;
    for (uint32_t r = 1; r <= FLIP_ROUNDS; r++) {
        while (__atomic_load_n(&a->round, __ATOMIC_ACQUIRE) != r)
            sched_yield();
        for (int i = 0; i < FLIP_DECISIONS; i++) {
            int rc = srl_acquire(lim, "k", 1, 1, &d);
            if (rc == 0 && d.flags == 0)
                admitted += d.allowed;
            /* Generation 1, the newest, is decided; 0, gone back, is not. */
            if (r & 1u)
                bad_new += rc != 0 || d.flags != 0;
            else
                refused += rc == SRL_ECORRUPT && (d.flags & SRL_DECISION_DEGRADED);
        }
        __atomic_store_n(&a->ack, r, __ATOMIC_RELEASE);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_uint_eq(admitted, 11);                     /* never reset */
    ck_assert_uint_eq(srl__shm_pol_count(s), views);     /* no view per flip */
    ck_assert_uint_eq(refused, FLIP_ROUNDS / 2 * FLIP_DECISIONS);
    ck_assert_uint_eq(bad_new, 0);
    ck_assert_uint_eq(srl__shm_live(s)->policy_damage, refused);
    ck_assert_uint_eq(*gen, 0);
    *gen = 1;   /* the writer gone: the real value back */
    struct check_lines l;
    memset(&l, 0, sizeof l);
    ck_assert_int_eq(srl_check(lim, check_lines_collect, &l), 1);
    char want[160];
    snprintf(want, sizeof want, "header: %u decisions refused a policy generation", refused);
    ck_assert_msg(strncmp(l.last, want, strlen(want)) == 0, "%s", l.last);
    srl_limiter *other;   /* rlctl check's own handle sees it too */
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &other), 0);
    ck_assert_int_eq(srl_check(other, NULL, NULL), 1);
    srl_close(other);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);   /* still used up */
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* A writer forging valid copies forward, one generation after another,
 * each a view for every handle that decides: the handle stops at
 * SRL__SHM_POL_VIEWS views, and a generation past them is damage, refused
 * and counted, not memory.  (Deterministic: the writes are this
 * process's, between decisions.) */
START_TEST(forged_generations_forward_stop_at_the_view_bound)
{
    alarm(60);
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:10/1h", &cfg.limits, NULL), 0);
    cfg.capacity = 64;
    const char *name = unique_name("flip");
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    struct srl__shm *s = lim->impl;
    uint32_t *gen = &srl__shm_live(s)->policy_gen;
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(srl__shm_pol_count(s), 1);
    for (uint32_t g = 1; g < SRL__SHM_POL_VIEWS; g++) {
        struct srl__shm_policy c;
        srl__shm_policy_fill(&c, g, &cfg.limits, NULL, 1);
        memcpy(s->base + SRL__SHM_POLICY_OFFSET(g & 1u), &c, sizeof c);
        __atomic_store_n(gen, g, __ATOMIC_RELEASE);
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert_uint_eq(d.flags, 0);
    }
    ck_assert_uint_eq(srl__shm_pol_count(s), SRL__SHM_POL_VIEWS);
    ck_assert_uint_eq(srl__shm_live(s)->policy_damage, 0);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);   /* forward by one: as a changer does */
    struct srl__shm_policy c;
    srl__shm_policy_fill(&c, SRL__SHM_POL_VIEWS, &cfg.limits, NULL, 1);
    memcpy(s->base + SRL__SHM_POLICY_OFFSET(SRL__SHM_POL_VIEWS & 1u), &c, sizeof c);
    __atomic_store_n(gen, SRL__SHM_POL_VIEWS, __ATOMIC_RELEASE);
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), SRL_ECORRUPT);
        ck_assert(d.flags & SRL_DECISION_DEGRADED);
    }
    ck_assert_uint_eq(srl__shm_pol_count(s), SRL__SHM_POL_VIEWS);
    ck_assert_uint_eq(srl__shm_live(s)->policy_damage, 100);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 1);
    /* Another handle (a restarted worker) starts with no views: it decides. */
    srl_limiter *other;
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &other), 0);
    ck_assert_int_eq(srl_acquire(other, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.flags, 0);
    srl_close(other);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_hostile_writer");
    TCase *tc = tcase_create("writer");
    tcase_set_timeout(tc, 250);
    tcase_add_loop_test(tc, a_writer_racing_every_call_on_every_word_crashes_nothing_and_gets_documented_codes,
                        0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, policy_gen_flipped_between_two_valid_copies_is_damage_not_a_view_per_decision);
    tcase_add_test(tc, forged_generations_forward_stop_at_the_view_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"hw", "flip"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
