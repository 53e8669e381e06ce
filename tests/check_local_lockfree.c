/*
 * check_local_lockfree.c - the in-process store's lock-free GCRA path
 * (SRL_CONFIG_LOCKFREE; src/local/local.c, "LOCK-FREE GCRA").
 *
 * Single-threaded first: a lock-free handle answers exactly as a locked one
 * on the same trace (every field, with peek, refund, reserve, reset, evict,
 * foreach, key_state and stats in between), the flag changes nothing on
 * a policy that is not one GCRA limit, and a key's counts saturate at
 * 2^32 - 1 each, locked or lock-free, without carrying into each other.
 *
 * Then the races.  Each runs its threads until the main thread says stop,
 * released together by a barrier; the main thread stops them only once
 * every thread has made MIN_OPS decisions, a minimum number of epochs has
 * passed and the interleaving the test is about has been seen a minimum
 * number of times (counted by the test library: lost CASes, deciders that
 * met a retired state, counts that landed on a retired state).  Time is a
 * fake clock, frozen within an epoch: the main thread waits until the
 * epoch's permits are all taken and every key denies, checks the exact
 * count, and moves the clock one window on (every state back to a full
 * burst).  Wall-clock time only bounds the waits (WAIT_NS): a run that
 * cannot make progress fails instead of hanging; nothing timed is asserted.
 *   - one hot key, 8 threads: exactly 256 per window;
 *   - 16 keys, 8 threads: exactly 64 per key per window;
 *   - eviction (a sweeping thread) and reclamation (a thread creating new
 *     keys in a full table) racing the deciders: exactly N per window, each
 *     new key's first decision on a fresh state (no TAT written to a
 *     reused node), stats exact;
 *   - srl_reset_key racing the deciders: stats exactly the decisions made;
 *     and, arranged rather than raced, a reset while a decider is parked
 *     between its CAS and its count (SRL__LOCAL_PARK_LF_COUNT): no count
 *     lost.
 * Each is shown to catch its bug: srl__local_set_broken() switches on a
 * broken variant (a blind store instead of the CAS; retirement without the
 * tombstone, so a CAS lands on a retired state; counts retired at death,
 * caught by the arranged reset, exactly one count short;
 * on x86-64, an admission's count stored apart from its CAS instead of in
 * it), and the same harness must see the count go wrong.
 *
 * Threads report through atomics; only the main thread calls ck_assert.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu-bp.h>   /* rcu_barrier: wait for the retired state's callback */

#include "cas16.h"   /* SRL__CAS16: whether admissions count in their CAS */
#include "srl.h"
#include "testhooks.h"
#include "testutil.h"

#define WINDOW SEC
#define WAIT_NS (60 * SEC)   /* bound on any one wait: fail, never hang */
#define MAX_RUN_NS (240 * SEC) /* bound on a whole run */

static uint64_t wall_ns(void)
{
    return srl_monotonic_ns(NULL);
}

/* SRL_LF_MUTANT=<SRL__LOCAL_BROKEN_* bits> switches a broken variant on in
 * every race below, the exact ones too, which must then fail: how the
 * report shows each race test failing against its broken variant
 * (e.g. SRL_LF_MUTANT=0x20 CK_RUN_CASE=hot).  A run with a variant stops at
 * the first wrong count.  Unset in the suite's own runs. */
static unsigned env_mutant(void)
{
    const char *v = getenv("SRL_LF_MUTANT");
    return v != NULL ? (unsigned)strtoul(v, NULL, 0) : 0;
}

static srl_limiter *open_gcra(uint32_t permits, uint64_t capacity, uint32_t flags,
                              fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_GCRA, .permits = permits, .window_ns = WINDOW};
    cfg.capacity = capacity;
    cfg.flags = flags;
    cfg.ticker = fake_ticker(clock);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    return lim;
}

/* ======================================================= one thread */

static void ck_same(const srl_decision *a, const srl_decision *b)
{
    ck_assert_int_eq(a->allowed, b->allowed);
    ck_assert_uint_eq(a->limit, b->limit);
    ck_assert_uint_eq(a->remaining, b->remaining);
    ck_assert_uint_eq(a->retry_after_ns, b->retry_after_ns);
    ck_assert_uint_eq(a->reset_after_ns, b->reset_after_ns);
    ck_assert_uint_eq(a->flags, b->flags);
    ck_assert_uint_eq(a->binding, b->binding);
}

struct fe_sum {
    uint64_t allowed, denied, tat;
    int keys;
};

static int fe_add(const srl_entry *e, void *ctx)
{
    struct fe_sum *s = ctx;
    uint64_t tat;
    memcpy(&tat, e->state, sizeof tat);
    s->allowed += e->allowed;
    s->denied += e->denied;
    s->tat += tat;
    s->keys++;
    return 0;
}

START_TEST(a_lockfree_handle_answers_exactly_as_a_locked_one)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lf = open_gcra(5, 4, SRL_CONFIG_LOCKFREE, clock);
    srl_limiter *lk = open_gcra(5, 4, 0, clock);
    uint64_t rng = 12345;
    for (int i = 0; i < 20000; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        unsigned r = (unsigned)(rng >> 33);
        char key[8];
        int len = snprintf(key, sizeof key, "k%u", r % 7); /* 7 keys, capacity 4 */
        uint32_t cost = 1 + (r >> 3) % 3;
        srl_decision a, b;
        int ra, rb;
        switch ((r >> 5) % 16) {
        case 0:
            ra = srl_peek(lf, key, (size_t)len, cost, &a);
            rb = srl_peek(lk, key, (size_t)len, cost, &b);
            break;
        case 1:
            ra = srl_refund(lf, key, (size_t)len, cost);
            rb = srl_refund(lk, key, (size_t)len, cost);
            a = b;
            break;
        case 2:
            ra = srl_reserve(lf, key, (size_t)len, cost, WINDOW / 2, &a);
            rb = srl_reserve(lk, key, (size_t)len, cost, WINDOW / 2, &b);
            break;
        case 3:
            ra = srl_reset_key(lf, key, (size_t)len);
            rb = srl_reset_key(lk, key, (size_t)len);
            a = b;
            break;
        case 4:
            ra = (int)srl_evict_idle(lf);
            rb = (int)srl_evict_idle(lk);
            a = b;
            break;
        case 5: {
            uint64_t sa = 0, sb = 0;
            ra = srl_key_state(lf, key, (size_t)len, &sa, sizeof sa);
            rb = srl_key_state(lk, key, (size_t)len, &sb, sizeof sb);
            ck_assert_uint_eq(sa, sb);
            a = b;
            break;
        }
        case 6:
            __atomic_fetch_add(&clock->now, (r >> 9) % (WINDOW / 3), __ATOMIC_SEQ_CST);
            ra = rb = 0;
            a = b;
            break;
        default:
            ra = srl_acquire(lf, key, (size_t)len, cost, &a);
            rb = srl_acquire(lk, key, (size_t)len, cost, &b);
            break;
        }
        ck_assert_int_eq(ra, rb);
        if (ra >= 0)
            ck_same(&a, &b);
    }
    srl_stats sa, sb;
    ck_assert_int_eq(srl_stats_get(lf, &sa), 0);
    ck_assert_int_eq(srl_stats_get(lk, &sb), 0);
    ck_assert_uint_eq(sa.allowed, sb.allowed);
    ck_assert_uint_eq(sa.denied, sb.denied);
    ck_assert_uint_eq(sa.full, sb.full);
    ck_assert_uint_eq(sa.evicted, sb.evicted);
    ck_assert_uint_eq(sa.used, sb.used);
    ck_assert_uint_gt(sa.evicted, 0);
    ck_assert_uint_gt(sa.full, 0);
    struct fe_sum fa = {0}, fb = {0};
    ck_assert_int_eq(srl_foreach(lf, fe_add, &fa), fb.keys = (int)srl_foreach(lk, fe_add, &fb));
    ck_assert_uint_eq(fa.allowed, fb.allowed);
    ck_assert_uint_eq(fa.denied, fb.denied);
    ck_assert_uint_eq(fa.tat, fb.tat);
    srl_close(lf);
    srl_close(lk);
}
END_TEST

/* What srl_foreach reports for lim, which holds one key. */
static struct fe_sum counts_of(srl_limiter *lim)
{
    struct fe_sum s = {0};
    ck_assert_int_eq(srl_foreach(lim, fe_add, &s), 1);
    return s;
}

START_TEST(a_keys_counts_stop_at_2_pow_32_minus_1_and_never_carry_into_each_other)
{
    /* The two halves of a node's counts word, on a locked handle and on a
     * lock-free one (whose admissions count in their CAS where there is a
     * 16-byte CAS, its denials in a CAS loop).  GCRA 3 per window on a
     * frozen clock: three admissions, then denials. */
    for (int lockfree = 0; lockfree < 2; lockfree++) {
        srl_limiter *lim = open_gcra(3, 4, lockfree ? SRL_CONFIG_LOCKFREE : 0,
                                     fake_clock_shared(5 * SEC));
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert(d.allowed);
        ck_assert_int_eq(srl__local_set_counts(lim, "k", 1, UINT32_MAX - 1, 7), 0);
        for (int i = 0; i < 2; i++) {   /* up to the limit, then one past it */
            ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
            ck_assert(d.allowed);
        }
        struct fe_sum c = counts_of(lim);
        ck_assert_uint_eq(c.allowed, UINT32_MAX);
        ck_assert_uint_eq(c.denied, 7);
        ck_assert_int_eq(srl__local_set_counts(lim, "k", 1, 3, UINT32_MAX), 0);
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert(!d.allowed);
        c = counts_of(lim);
        ck_assert_uint_eq(c.allowed, 3);
        ck_assert_uint_eq(c.denied, UINT32_MAX);
        ck_assert_int_eq(srl__local_set_counts(lim, "absent", 6, 0, 0), SRL_ENOENT);
        srl_close(lim);
    }
}
END_TEST

START_TEST(the_flag_is_accepted_and_changes_nothing_on_other_policies)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    static const char *const specs[] = {"token_bucket:3/1s", "gcra:3/1s,penalty=2s",
                                        "gcra:3/1s + gcra:10/1m", "sliding_log:3/1s"};
    for (unsigned i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        srl_limiter *lim[2];
        for (int f = 0; f < 2; f++) {
            srl_config cfg;
            srl_config_init(&cfg);
            ck_assert_int_eq(srl_limits_parse_ex(specs[i], &cfg.limits, NULL), 0);
            cfg.flags = f ? SRL_CONFIG_LOCKFREE : 0;
            cfg.ticker = fake_ticker(clock);
            ck_assert_int_eq(srl_open_local(&cfg, &lim[f]), 0);
        }
        for (int j = 0; j < 6; j++) {
            srl_decision a, b;
            ck_assert_int_eq(srl_acquire(lim[1], "k", 1, 1, &a), 0);
            ck_assert_int_eq(srl_acquire(lim[0], "k", 1, 1, &b), 0);
            ck_same(&a, &b);
        }
        srl_close(lim[0]);
        srl_close(lim[1]);
    }
    /* A dry-run GCRA handle keeps the locked path and still never refuses. */
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_GCRA, .permits = 2, .window_ns = WINDOW};
    cfg.flags = SRL_CONFIG_LOCKFREE | SRL_CONFIG_DRY_RUN;
    cfg.ticker = fake_ticker(clock);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    srl_decision d;
    for (int j = 0; j < 3; j++)
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.flags, SRL_DECISION_WOULD_DENY);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.would_deny, 1);
    srl_close(lim);
}
END_TEST

/* ========================================================== the races */

enum { THREADS = 8, MAX_KEYS = 16, MIN_OPS = 2000 };

struct race {
    /* Set by the test before the run. */
    srl_limiter *lim;
    fake_clock *clock;
    uint32_t burst;            /* the policy's permits: admissions per key per window */
    int nkeys;                 /* keys "hot-0" .. the deciders share */
    int epochs;                /* windows (epochs) at least */
    uint64_t min_seen;         /* the interleaving's count at least (see seen()) */
    int which;                 /* which count: 0 conflicts, 1 tombstones, 2 late,
                                  3 lost counts */
    int evictor, churner, resetter; /* extra threads */
    int stop_on_wrong;         /* a broken variant: stop at the first wrong count */
    /* The run. */
    pthread_barrier_t go;
    int stop;                  /* atomic */
    uint64_t granted;          /* atomic: admissions on the hot keys */
    uint64_t ops[THREADS], allowed[THREADS], denied[THREADS]; /* atomics, per decider */
    uint64_t extra_allowed, extra_denied; /* atomics: the churner's answers */
    uint64_t extra_ops;        /* atomic: sweeps, new keys, resets */
    uint64_t not_fresh;        /* atomic: new keys whose first decision was not fresh */
    uint64_t untracked;        /* atomic: the churner's untracked answers */
    int errors;                /* atomic */
    /* The result. */
    int epochs_done;
    int wrong_epoch;           /* the first epoch whose count was wrong (0: none) */
    uint64_t wrong_got, wrong_want;
    int stalled;               /* a wait ran out */
    struct srl__local_lf_counts seen;
};

struct decider {
    struct race *r;
    int id;
};

static int stopping(struct race *r)
{
    return __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE);
}

static void *decide_loop(void *p)
{
    struct decider *a = p;
    struct race *r = a->r;
    char key[MAX_KEYS][16];
    for (int k = 0; k < r->nkeys; k++)
        snprintf(key[k], sizeof key[k], "hot-%d", k);
    pthread_barrier_wait(&r->go);
    for (unsigned i = (unsigned)a->id; !stopping(r); i++) {
        const char *k = key[i % (unsigned)r->nkeys];
        srl_decision d;
        if (srl_acquire(r->lim, k, strlen(k), 1, &d) != 0) {
            __atomic_fetch_add(&r->errors, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (d.flags & SRL_DECISION_UNTRACKED)
            __atomic_fetch_add(&r->errors, 1, __ATOMIC_RELAXED); /* never, with room */
        if (d.allowed)
            __atomic_fetch_add(&r->granted, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(d.allowed ? &r->allowed[a->id] : &r->denied[a->id], 1,
                           __ATOMIC_RELAXED);
        __atomic_fetch_add(&r->ops[a->id], 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *evict_loop(void *p)
{
    struct race *r = p;
    pthread_barrier_wait(&r->go);
    while (!stopping(r)) {
        if (srl_evict_idle(r->lim) < 0)
            __atomic_fetch_add(&r->errors, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&r->extra_ops, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Resets the hot keys one after another, one per 8 admissions (so that the
 * deciders mostly decide on live states, and reset ones race them). */
static void *reset_loop(void *p)
{
    struct race *r = p;
    pthread_barrier_wait(&r->go);
    uint64_t last = 0;
    for (unsigned i = 0; !stopping(r); i++) {
        uint64_t g = __atomic_load_n(&r->granted, __ATOMIC_RELAXED);
        if (g - last < 8) {
            sched_yield();
            continue;
        }
        last = g;
        char key[16];
        int len = snprintf(key, sizeof key, "hot-%u", i % (unsigned)r->nkeys);
        int rc = srl_reset_key(r->lim, key, (size_t)len);
        if (rc != 0 && rc != SRL_ENOENT)
            __atomic_fetch_add(&r->errors, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&r->extra_ops, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

enum { CHURN_PER_EPOCH = 6 };

/* Creates CHURN_PER_EPOCH new keys per window (the table, sized for the hot
 * keys and 2 windows of them, is full of states that are at rest once the
 * clock moves on: each new key reclaims, and may reclaim a hot key at the
 * start of its window).  Each new key's first decision must find a fresh
 * state: burst - 1 left. */
static void *churn_loop(void *p)
{
    struct race *r = p;
    pthread_barrier_wait(&r->go);
    uint64_t epoch_now = 0;
    int made = 0;
    for (unsigned i = 0; !stopping(r); i++) {
        uint64_t now = __atomic_load_n(&r->clock->now, __ATOMIC_ACQUIRE);
        if (now != epoch_now) {
            epoch_now = now;
            made = 0;
        }
        if (made == CHURN_PER_EPOCH) {
            sched_yield();
            continue;
        }
        made++;
        char key[24];
        int len = snprintf(key, sizeof key, "new-%u", i);
        srl_decision d;
        if (srl_acquire(r->lim, key, (size_t)len, 1, &d) != 0) {
            __atomic_fetch_add(&r->errors, 1, __ATOMIC_RELAXED);
            continue;
        }
        __atomic_fetch_add(d.allowed ? &r->extra_allowed : &r->extra_denied, 1, __ATOMIC_RELAXED);
        if (d.flags & SRL_DECISION_UNTRACKED)
            __atomic_fetch_add(&r->untracked, 1, __ATOMIC_RELAXED);
        else if (!d.allowed || d.remaining != r->burst - 1)
            __atomic_fetch_add(&r->not_fresh, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&r->extra_ops, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static uint64_t seen(struct race *r)
{
    ck_assert_int_eq(srl__local_lf_counts(r->lim, &r->seen), 0);
    switch (r->which) {
    case 0: return r->seen.conflicts;
    case 1: return r->seen.tombstones;
    case 2: return r->seen.late;
    default: return r->seen.lost_counts;
    }
}

static int everyone_progressed(struct race *r)
{
    for (int i = 0; i < THREADS; i++)
        if (__atomic_load_n(&r->ops[i], __ATOMIC_ACQUIRE) < MIN_OPS)
            return 0;
    return !(r->evictor || r->churner || r->resetter) ||
           __atomic_load_n(&r->extra_ops, __ATOMIC_RELAXED) >= MIN_OPS / 10;
}

/* Every hot key denies (its window's permits are all taken).  A key not
 * tracked (evicted at rest) does not. */
static int all_exhausted(struct race *r)
{
    for (int k = 0; k < r->nkeys; k++) {
        char key[16];
        int len = snprintf(key, sizeof key, "hot-%d", k);
        srl_decision d;
        if (srl_peek(r->lim, key, (size_t)len, 1, &d) != 0 || d.allowed)
            return 0;
    }
    return 1;
}

/* Waits until cond holds (1), or WAIT_NS ran out (0). */
static int wait_for(struct race *r, int (*cond)(struct race *, uint64_t), uint64_t arg)
{
    uint64_t deadline = wall_ns() + WAIT_NS;
    while (!cond(r, arg)) {
        if (wall_ns() > deadline)
            return 0;
        sched_yield();
    }
    return 1;
}

static int granted_at_least(struct race *r, uint64_t want)
{
    return __atomic_load_n(&r->granted, __ATOMIC_ACQUIRE) >= want;
}

static int exhausted(struct race *r, uint64_t unused)
{
    (void)unused;
    return all_exhausted(r);
}

/*
 * One run.  With frozen windows (resetter off): in window e the hot keys
 * admit exactly burst x nkeys; the main thread waits for that many and for
 * every key to deny, records a wrong count, then moves the clock a window
 * on.  With the resetter, time stays frozen (a reset gives a key a new
 * burst, so only the stats are exact) and the main thread only waits for
 * the stop condition.  Stops once every thread progressed, `epochs` passed
 * and the interleaving was seen min_seen times (or, stop_on_wrong, at the
 * first wrong count), or when MAX_RUN_NS ran out.
 */
static void race_run(struct race *r)
{
    int extras = r->evictor + r->churner + r->resetter;
    pthread_barrier_init(&r->go, NULL, (unsigned)(THREADS + extras + 1));
    pthread_t t[THREADS + 3];
    struct decider a[THREADS];
    int nt = 0;
    for (int i = 0; i < THREADS; i++) {
        a[i] = (struct decider){r, i};
        ck_assert_int_eq(pthread_create(&t[nt++], NULL, decide_loop, &a[i]), 0);
    }
    if (r->evictor)
        ck_assert_int_eq(pthread_create(&t[nt++], NULL, evict_loop, r), 0);
    if (r->churner)
        ck_assert_int_eq(pthread_create(&t[nt++], NULL, churn_loop, r), 0);
    if (r->resetter)
        ck_assert_int_eq(pthread_create(&t[nt++], NULL, reset_loop, r), 0);
    pthread_barrier_wait(&r->go);
    uint64_t end = wall_ns() + MAX_RUN_NS;
    for (int e = 1; wall_ns() < end; e++) {
        if (!r->resetter) {
            uint64_t want = (uint64_t)r->burst * (uint64_t)r->nkeys * (uint64_t)e;
            if (!wait_for(r, granted_at_least, want) || !wait_for(r, exhausted, 0)) {
                r->stalled = 1;
                break;
            }
            uint64_t got = __atomic_load_n(&r->granted, __ATOMIC_ACQUIRE);
            if (got != want && r->wrong_epoch == 0) {
                r->wrong_epoch = e;
                r->wrong_got = got;
                r->wrong_want = want;
            }
            if (got != want) {
                /* Later windows are counted from here. */
                __atomic_fetch_sub(&r->granted, got - want, __ATOMIC_ACQ_REL);
            }
        } else {
            sched_yield();
        }
        r->epochs_done = e;
        if (r->stop_on_wrong && r->wrong_epoch)
            break;
        if (e >= r->epochs && everyone_progressed(r) && seen(r) >= r->min_seen)
            break;
        if (!r->resetter)
            __atomic_fetch_add(&r->clock->now, WINDOW, __ATOMIC_SEQ_CST);
    }
    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&r->go);
    (void)seen(r);
}

/* srl_stats_get against the answers the threads were given. */
static void ck_stats_exact(struct race *r)
{
    uint64_t allowed = r->extra_allowed, denied = r->extra_denied;
    for (int i = 0; i < THREADS; i++) {
        allowed += r->allowed[i];
        denied += r->denied[i];
    }
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(r->lim, &st), 0);
    fprintf(stderr, "  stats: allowed %llu denied %llu (answered %llu / %llu), evicted %llu\n",
            (unsigned long long)st.allowed, (unsigned long long)st.denied,
            (unsigned long long)allowed, (unsigned long long)denied,
            (unsigned long long)st.evicted);
    ck_assert_uint_eq(st.allowed, allowed);
    ck_assert_uint_eq(st.denied, denied);
}

static void report(const char *what, struct race *r)
{
    uint64_t ops = 0, least = UINT64_MAX;
    for (int i = 0; i < THREADS; i++) {
        ops += r->ops[i];
        if (r->ops[i] < least)
            least = r->ops[i];
    }
    fprintf(stderr,
            "%s: %d %s, %llu decisions (fewest by a thread %llu), extra %llu; "
            "lost CAS %llu, tombstones met %llu, late counts %llu; wrong window %d "
            "(%llu admitted, %llu due)%s\n",
            what, r->epochs_done, r->resetter ? "polls" : "windows", (unsigned long long)ops, (unsigned long long)least,
            (unsigned long long)r->extra_ops, (unsigned long long)r->seen.conflicts,
            (unsigned long long)r->seen.tombstones, (unsigned long long)r->seen.late,
            r->wrong_epoch, (unsigned long long)r->wrong_got, (unsigned long long)r->wrong_want,
            r->stalled ? "; STALLED" : "");
}

/* The real code: every window exact, the interleaving seen, no stall. */
static void ck_exact_run(struct race *r, const char *what)
{
    report(what, r);
    ck_assert_int_eq(r->errors, 0);
    ck_assert_msg(!r->stalled, "a wait ran out (a lost permit, or no progress)");
    ck_assert_msg(r->wrong_epoch == 0, "window %d admitted %llu, due %llu", r->wrong_epoch,
                  (unsigned long long)r->wrong_got, (unsigned long long)r->wrong_want);
    ck_assert_msg(everyone_progressed(r), "a thread made fewer than %d decisions", MIN_OPS);
    ck_assert_msg(seen(r) >= r->min_seen, "the race was not seen %llu times",
                  (unsigned long long)r->min_seen);
}

/* Open r's limiter (GCRA, r->burst a window, lock-free), switch on the
 * variants (and SRL_LF_MUTANT's), and run. */
static void start_race(struct race *r, uint64_t capacity, unsigned broken)
{
    broken |= env_mutant();
    r->clock = fake_clock_shared(5 * SEC);
    r->stop_on_wrong = (broken & ~SRL__LOCAL_BROKEN_YIELD) != 0;
    r->lim = open_gcra(r->burst, capacity, SRL_CONFIG_LOCKFREE, r->clock);
    if (broken)
        ck_assert_int_eq(srl__local_set_broken(r->lim, broken), 0);
    race_run(r);
}

/* A broken variant's run: some window admitted more than its permits. */
static void ck_caught_over_admitting(struct race *r, const char *what)
{
    report(what, r);
    ck_assert_msg(r->wrong_epoch > 0, "%s: never caught", what);
    ck_assert_uint_gt(r->wrong_got, r->wrong_want);
    srl_close(r->lim);
}

/* --- one hot key; many keys */

static void hot_keys_run(struct race *r, int nkeys, unsigned broken)
{
    /* A large burst: the CASes race while a window's permits last. */
    *r = (struct race){.burst = nkeys == 1 ? 256 : 64, .nkeys = nkeys, .epochs = 40,
                       .min_seen = nkeys == 1 ? 50 : 20, .which = 0};
    start_race(r, 1024, broken);
}

START_TEST(eight_threads_on_one_hot_key_admit_exactly_the_burst_in_every_window)
{
    struct race r;
    hot_keys_run(&r, 1, 0);
    ck_exact_run(&r, "one hot key");
    ck_stats_exact(&r);
    srl_close(r.lim);
}
END_TEST

START_TEST(one_hot_key_catches_a_blind_store_instead_of_the_cas)
{
    struct race r;
    hot_keys_run(&r, 1, SRL__LOCAL_BROKEN_LF_BLIND_STORE);
    ck_caught_over_admitting(&r, "one hot key, blind store");
}
END_TEST

START_TEST(eight_threads_on_sixteen_keys_admit_exactly_the_burst_per_key_per_window)
{
    struct race r;
    hot_keys_run(&r, MAX_KEYS, 0);
    ck_exact_run(&r, "16 keys");
    ck_stats_exact(&r);
    srl_close(r.lim);
}
END_TEST

START_TEST(sixteen_keys_catch_a_blind_store_instead_of_the_cas)
{
    struct race r;
    hot_keys_run(&r, MAX_KEYS, SRL__LOCAL_BROKEN_LF_BLIND_STORE);
    ck_caught_over_admitting(&r, "16 keys, blind store");
}
END_TEST

#if SRL__CAS16
/* With the 16-byte CAS (x86-64, src/base/cas16.h) an admission adds its count
 * in the CAS of the word (one 16-byte CAS of {allowed, TAT}).  The variant writes the two apart: every
 * window stays exact (the word is still CASed) and the run goes on until
 * it has overwritten a count 20 times; the stats must then be short. */
START_TEST(one_hot_key_catches_a_count_stored_apart_from_the_cas)
{
    struct race r = {.burst = 256, .nkeys = 1, .epochs = 40, .min_seen = 20, .which = 3};
    start_race(&r, 1024, SRL__LOCAL_BROKEN_LF_SPLIT_COUNT);
    report("one hot key, count apart from the CAS", &r);
    ck_assert_int_eq(r.wrong_epoch, 0);
    ck_assert_uint_ge(r.seen.lost_counts, 20);
    uint64_t allowed = 0;
    for (int i = 0; i < THREADS; i++)
        allowed += r.allowed[i];
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(r.lim, &st), 0);
    fprintf(stderr, "  stats: allowed %llu (answered %llu), %llu counts overwritten\n",
            (unsigned long long)st.allowed, (unsigned long long)allowed,
            (unsigned long long)r.seen.lost_counts);
    ck_assert_uint_lt(st.allowed, allowed);
    srl_close(r.lim);
}
END_TEST
#endif

/* --- eviction and reclamation racing the deciders */

/* The hot key, a sweeping thread and a thread creating keys in a full table
 * (capacity: the hot key and two windows of new keys).  The yield between
 * a decider's read and its CAS (not a bug: a preemption there) widens the
 * window in which a sweep retires the state at the start of a window. */
static void retire_run(struct race *r, unsigned broken)
{
    *r = (struct race){.burst = 8, .nkeys = 1, .epochs = 200, .min_seen = 20, .which = 1,
                       .evictor = 1, .churner = 1};
    start_race(r, 1 + 2 * CHURN_PER_EPOCH, SRL__LOCAL_BROKEN_YIELD | broken);
}

START_TEST(eviction_and_reclamation_racing_lockfree_deciders_keep_every_window_exact)
{
    struct race r;
    retire_run(&r, 0);
    ck_exact_run(&r, "retire race");
    fprintf(stderr, "  new keys: %llu not fresh, %llu untracked\n",
            (unsigned long long)r.not_fresh, (unsigned long long)r.untracked);
    ck_assert_uint_eq(r.not_fresh, 0);   /* no TAT ever written to a reused node */
    /* The table always has room for the new keys too (at most 7 of a
     * window are not at rest): none is answered from on_full, however
     * many deciders race to re-insert the hot key (design.md, "Slots
     * reserved by racers"). */
    ck_assert_uint_eq(r.untracked, 0);
    ck_stats_exact(&r);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(r.lim, &st), 0);
    ck_assert_uint_gt(st.evicted, 0);
    srl_close(r.lim);
}
END_TEST

START_TEST(eviction_race_catches_a_cas_that_ignores_the_retired_version)
{
    struct race r;
    retire_run(&r, SRL__LOCAL_BROKEN_LF_NO_TOMBSTONE);
    ck_caught_over_admitting(&r, "retire race, no tombstone");
}
END_TEST

/* --- srl_reset_key racing the deciders: the stats */

static void reset_run(struct race *r, unsigned broken)
{
    *r = (struct race){.burst = 64, .nkeys = 4, .epochs = 1, .min_seen = 100, .which = 2,
                       .resetter = 1, .evictor = 1};
    /* Room for the retired nodes awaiting their grace period (4 x capacity):
     * the deciders rarely wait for reclamation. */
    start_race(r, 4096, SRL__LOCAL_BROKEN_YIELD | broken);
}

START_TEST(resets_racing_lockfree_deciders_leave_the_stats_exact)
{
    struct race r;
    reset_run(&r, 0);
    ck_exact_run(&r, "reset race");
    ck_assert_uint_gt(r.seen.tombstones, 0);
    ck_stats_exact(&r);
    srl_close(r.lim);
}
END_TEST

/* --- srl_reset_key between a decision and its count, arranged
 *
 * A lock-free decider counts its decision after its CAS (a denial always;
 * anything without the 16-byte CAS), inside its read-side section.  Here
 * the decider of a denial parks exactly there (SRL__LOCAL_PARK_LF_COUNT),
 * the key is reset (its state retired) while it is parked, and then it
 * counts, on the retired state.  The count must still reach the stats: a
 * retired state's counts move to the totals only after its grace period.
 * lost[] gets the decisions the stats lack (answered - counted): [0] right
 * after the count (the callback may or may not have run), [1] once it has
 * (rcu_barrier). */
struct once {
    srl_limiter *lim;
    srl_decision d;
    int rc;
};

static void *decide_once(void *p)
{
    struct once *o = p;
    o->rc = srl_acquire(o->lim, "k", 1, 1, &o->d);
    return NULL;
}

static uint64_t counted(srl_limiter *lim)
{
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    return st.allowed + st.denied;
}

static void reset_while_a_count_is_due(unsigned broken, uint64_t lost[2])
{
    fake_clock *c = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_gcra(2, 64, SRL_CONFIG_LOCKFREE, c);
    if (broken)
        ck_assert_int_eq(srl__local_set_broken(lim, broken), 0);
    srl_decision d;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert(d.allowed);
    }
    ck_assert_int_eq(srl__local_park(lim, SRL__LOCAL_PARK_LF_COUNT, SRL__LOCAL_PARK_ARM), 0);
    struct once o = {.lim = lim};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, decide_once, &o), 0);
    int parked = 0;
    for (uint64_t end = wall_ns() + WAIT_NS; !parked && wall_ns() < end;) {
        parked = srl__local_park(lim, SRL__LOCAL_PARK_LF_COUNT, SRL__LOCAL_PARK_ASK);
        if (!parked)
            sched_yield();
    }
    if (!parked) {
        /* Never leave a thread parked behind an assertion. */
        srl__local_park(lim, SRL__LOCAL_PARK_LF_COUNT, SRL__LOCAL_PARK_RELEASE);
        pthread_join(t, NULL);
        ck_abort_msg("the decider never parked before its count");
    }
    ck_assert_int_eq(srl_reset_key(lim, "k", 1), 0);
    ck_assert_int_eq(srl__local_park(lim, SRL__LOCAL_PARK_LF_COUNT, SRL__LOCAL_PARK_RELEASE), 0);
    pthread_join(t, NULL);
    ck_assert_int_eq(o.rc, 0);
    ck_assert(!o.d.allowed);   /* decided on the spent state, before the reset */
    lost[0] = 3 - counted(lim);
    rcu_barrier();             /* the retired state's callback has run */
    lost[1] = 3 - counted(lim);
    /* The reset state starts afresh, and is counted like any other. */
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert(d.allowed);
    ck_assert_uint_eq(4 - counted(lim), lost[1]);
    srl_close(lim);
}

START_TEST(a_reset_between_a_lockfree_decision_and_its_count_loses_no_count)
{
    uint64_t lost[2];
    reset_while_a_count_is_due(0, lost);
    ck_assert_uint_eq(lost[0], 0);
    ck_assert_uint_eq(lost[1], 0);
}
END_TEST

START_TEST(a_reset_between_a_decision_and_its_count_catches_counts_retired_at_death)
{
    uint64_t lost[2];
    reset_while_a_count_is_due(SRL__LOCAL_BROKEN_LF_RETIRE_EARLY, lost);
    fprintf(stderr, "counts retired at death: %llu lost before the grace period, %llu after\n",
            (unsigned long long)lost[0], (unsigned long long)lost[1]);
    ck_assert_uint_eq(lost[0], 1);
    ck_assert_uint_eq(lost[1], 1);
}
END_TEST

static Suite *local_lockfree_suite(void)
{
    Suite *s = suite_create("local_lockfree");
    /* One case per race, so that CK_RUN_CASE can run one (see env_mutant). */
    TCase *one = tcase_create("single");
    tcase_add_test(one, a_lockfree_handle_answers_exactly_as_a_locked_one);
    tcase_add_test(one, the_flag_is_accepted_and_changes_nothing_on_other_policies);
    tcase_add_test(one, a_keys_counts_stop_at_2_pow_32_minus_1_and_never_carry_into_each_other);
    TCase *hot = tcase_create("hot");
    tcase_add_test(hot, eight_threads_on_one_hot_key_admit_exactly_the_burst_in_every_window);
    tcase_add_test(hot, one_hot_key_catches_a_blind_store_instead_of_the_cas);
    tcase_add_test(hot, eight_threads_on_sixteen_keys_admit_exactly_the_burst_per_key_per_window);
    tcase_add_test(hot, sixteen_keys_catch_a_blind_store_instead_of_the_cas);
#if SRL__CAS16
    tcase_add_test(hot, one_hot_key_catches_a_count_stored_apart_from_the_cas);
#endif
    TCase *retire = tcase_create("retire");
    tcase_add_test(retire, eviction_and_reclamation_racing_lockfree_deciders_keep_every_window_exact);
    tcase_add_test(retire, eviction_race_catches_a_cas_that_ignores_the_retired_version);
    TCase *reset = tcase_create("reset");
    tcase_add_test(reset, resets_racing_lockfree_deciders_leave_the_stats_exact);
    tcase_add_test(reset, a_reset_between_a_lockfree_decision_and_its_count_loses_no_count);
    tcase_add_test(reset, a_reset_between_a_decision_and_its_count_catches_counts_retired_at_death);
    TCase *cases[] = {one, hot, retire, reset};
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tcase_set_timeout(cases[i], 0); /* meson's per-test timeout bounds the run */
        suite_add_tcase(s, cases[i]);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(local_lockfree_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
