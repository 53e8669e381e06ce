/*
 * check_local_race.c - the in-process store under real thread races.
 *
 * One key raced, a new key raced, and the eviction race of an idle sweep:
 *   - one key: 16 threads x 2,000 tries on one key of 1,000 permits with
 *     frozen time, 20 trials: exactly 1,000 admitted in every trial.
 *   - a new key: 5,000 rounds; each round 8 threads send a brand-new
 *     key's first request together (pthread barrier); permits 1: never 2.
 *   - evict-while-acquiring: threads acquire one key while another thread
 *     runs srl_evict_idle in a loop, with frozen time (exactly N admitted)
 *     and with a clock that advances one window per epoch, so the key's
 *     state comes to rest and is evicted again and again (exactly N per
 *     epoch admitted).
 *   - reclamation behind: keys created and deleted while another thread
 *     holds an RCU read-side section, so no deleted node can come back to
 *     the pool; past the pool's bound, creation must wait for the grace
 *     period, never answer from on_full (the race that once let a key
 *     admit all 256 of its requests, docs/design.md "The pool bound race").
 *   - racers of one new key: 3 threads insert one key into a table of 4
 *     with 2 keys in use while the test holds the key's stripe locks; none
 *     may hold a slot while it waits there, so none is answered from
 *     on_full (docs/design.md, "Slots reserved by racers").  Deterministic:
 *     the test waits until every racer sleeps on the held locks.
 * A race is luck, so each test repeats trials, and each is shown to catch
 * the bug it is about: srl__local_set_broken() switches on a deliberately
 * broken variant of src/local/local.c (no lock; get-then-put; no retry on a dead
 * state), and the same harness must see it over-admit in at least one trial
 * (repeated until it does, bounded) while the real code never does.
 *
 * Threads report through per-thread slots and atomics; only the main thread
 * calls ck_assert.  Nothing timed is asserted: wall-clock time only bounds
 * waits so that a broken build fails instead of hanging.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <urcu-bp.h>

#include "srl.h"
#include "testutil.h"

/* The local store's broken variants (src/base/testhooks.h, test library only). */
#include "testhooks.h"
#define BROKEN_NO_LOCK SRL__LOCAL_BROKEN_NO_LOCK
#define BROKEN_GET_THEN_PUT SRL__LOCAL_BROKEN_GET_THEN_PUT
#define BROKEN_NO_DEAD_RETRY SRL__LOCAL_BROKEN_NO_DEAD_RETRY
#define BROKEN_YIELD SRL__LOCAL_BROKEN_YIELD /* not a bug: yields between lookup and lock */
#define BROKEN_NO_POOL_WAIT SRL__LOCAL_BROKEN_NO_POOL_WAIT

#define HOUR (3600ull * SEC)

static srl_limiter *open_tb(uint32_t permits, uint64_t window_ns, uint64_t capacity,
                            fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = permits, .window_ns = window_ns};
    cfg.capacity = capacity;
    cfg.ticker = fake_ticker(clock);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    ck_assert_ptr_nonnull(lim);
    return lim;
}

static uint64_t wall_ns(void)
{
    return srl_monotonic_ns(NULL);
}

/* ============================================================ one key raced */

enum { BR_THREADS = 16, BR_TRIES = 2000, BR_PERMITS = 1000, BR_TRIALS = 20 };

struct br_arg {
    srl_limiter *lim;
    pthread_barrier_t *go;
    char key[32];
    uint64_t granted;
    int errors;
};

static void *br_worker(void *p)
{
    struct br_arg *a = p;
    pthread_barrier_wait(a->go);
    for (int i = 0; i < BR_TRIES; i++) {
        srl_decision d;
        if (srl_acquire(a->lim, a->key, strlen(a->key), 1, &d) != 0)
            a->errors++;
        else if (d.allowed)
            a->granted++;
    }
    return NULL;
}

/* One trial on a fresh key: returns the total granted. */
static uint64_t bucket_trial(srl_limiter *lim, int trial)
{
    pthread_t t[BR_THREADS];
    struct br_arg a[BR_THREADS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, BR_THREADS);
    for (int i = 0; i < BR_THREADS; i++) {
        a[i] = (struct br_arg){.lim = lim, .go = &go};
        snprintf(a[i].key, sizeof a[i].key, "bucket-%d", trial);
        ck_assert_int_eq(pthread_create(&t[i], NULL, br_worker, &a[i]), 0);
    }
    uint64_t granted = 0;
    for (int i = 0; i < BR_THREADS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(a[i].errors, 0);
        granted += a[i].granted;
    }
    pthread_barrier_destroy(&go);
    return granted;
}

START_TEST(bucket_race_admits_exactly_the_permits_in_every_trial)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_tb(BR_PERMITS, HOUR, 1024, clock);
    for (int trial = 0; trial < BR_TRIALS; trial++)
        ck_assert_uint_eq(bucket_trial(lim, trial), BR_PERMITS);
    srl_close(lim);
}
END_TEST

START_TEST(bucket_race_catches_a_state_decided_without_its_lock)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_tb(BR_PERMITS, HOUR, 1024, clock);
    ck_assert_int_eq(srl__local_set_broken(lim, BROKEN_NO_LOCK), 0);
    uint64_t worst = 0;
    int trial = 0;
    while (trial < 10 * BR_TRIALS && worst <= BR_PERMITS) {
        uint64_t g = bucket_trial(lim, trial++);
        if (g > worst)
            worst = g;
    }
    fprintf(stderr, "bucket race, no lock: %llu granted (of %d) in trial %d\n",
            (unsigned long long)worst, BR_PERMITS, trial);
    ck_assert_msg(worst > BR_PERMITS, "the unlocked variant never over-admitted");
    srl_close(lim);
}
END_TEST

/* ========================================================== a new key raced */

enum { RR_THREADS = 8, RR_ROUNDS = 5000 };

struct rr_shared {
    srl_limiter *lim;
    pthread_barrier_t start, end;
    int round;                 /* written by main before `start` */
    int stop;
    int allowed[RR_THREADS];   /* written by worker i before `end` */
    int errors[RR_THREADS];
};

struct rr_arg {
    struct rr_shared *s;
    int id;
};

static void *rr_worker(void *p)
{
    struct rr_arg *a = p;
    struct rr_shared *s = a->s;
    for (;;) {
        pthread_barrier_wait(&s->start);
        if (s->stop)
            return NULL;
        char key[32];
        int len = snprintf(key, sizeof key, "user-%d", s->round);
        srl_decision d;
        int rc = srl_acquire(s->lim, key, (size_t)len, 1, &d);
        s->errors[a->id] += rc != 0;
        s->allowed[a->id] = rc == 0 && d.allowed;
        pthread_barrier_wait(&s->end);
    }
}

/* Runs rounds until `rounds` are done or (stop_on_double) one round admits
 * more than one; returns the number of rounds that admitted more than one. */
static int registry_rounds(srl_limiter *lim, int rounds, int stop_on_double)
{
    struct rr_shared s = {.lim = lim};
    pthread_barrier_init(&s.start, NULL, RR_THREADS + 1);
    pthread_barrier_init(&s.end, NULL, RR_THREADS + 1);
    pthread_t t[RR_THREADS];
    struct rr_arg a[RR_THREADS];
    for (int i = 0; i < RR_THREADS; i++) {
        a[i] = (struct rr_arg){&s, i};
        ck_assert_int_eq(pthread_create(&t[i], NULL, rr_worker, &a[i]), 0);
    }
    int doubled = 0, errors = 0;
    for (int r = 0; r < rounds; r++) {
        s.round = r;
        pthread_barrier_wait(&s.start);
        pthread_barrier_wait(&s.end);
        int ok = 0;
        for (int i = 0; i < RR_THREADS; i++) {
            ok += s.allowed[i];
            errors += s.errors[i];
        }
        if (ok != 1)
            doubled++;
        if (stop_on_double && doubled)
            break;
    }
    s.stop = 1;
    pthread_barrier_wait(&s.start);
    for (int i = 0; i < RR_THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&s.start);
    pthread_barrier_destroy(&s.end);
    ck_assert_int_eq(errors, 0);
    return doubled;
}

START_TEST(registry_race_admits_exactly_one_first_request_in_every_round)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_tb(1, HOUR, 1u << 16, clock);
    ck_assert_int_eq(registry_rounds(lim, RR_ROUNDS, 0), 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.used, RR_ROUNDS);            /* one state per key */
    ck_assert_uint_eq(st.allowed, RR_ROUNDS);
    ck_assert_uint_eq(st.denied, (uint64_t)RR_ROUNDS * (RR_THREADS - 1));
    srl_close(lim);
}
END_TEST

START_TEST(registry_race_catches_get_then_put_creation)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_tb(1, HOUR, 1u << 20, clock);
    ck_assert_int_eq(srl__local_set_broken(lim, BROKEN_GET_THEN_PUT), 0);
    ck_assert_int_gt(registry_rounds(lim, 20 * RR_ROUNDS, 1), 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    fprintf(stderr, "registry race, get-then-put: a key admitted twice; %llu admitted in all\n",
            (unsigned long long)st.allowed);
    srl_close(lim);
}
END_TEST

/* ================================================ evict while acquiring */

/* --- frozen time: the state is at rest only before its first admission */

enum { EF_THREADS = 4, EF_TRIES = 64, EF_PERMITS = 8 };

struct ef_shared {
    srl_limiter *lim;
    pthread_barrier_t start, end;
    char key[32];
    int stop;
    int acquirers_left;        /* atomic; the evictor runs until 0 */
    uint64_t granted[EF_THREADS];
    int errors;                /* atomic */
};

struct ef_arg {
    struct ef_shared *s;
    int id;                    /* -1: the evictor */
};

static void *ef_worker(void *p)
{
    struct ef_arg *a = p;
    struct ef_shared *s = a->s;
    for (;;) {
        pthread_barrier_wait(&s->start);
        if (s->stop)
            return NULL;
        if (a->id < 0) {
            while (__atomic_load_n(&s->acquirers_left, __ATOMIC_ACQUIRE) > 0)
                if (srl_evict_idle(s->lim) < 0)
                    __atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
        } else {
            uint64_t g = 0;
            for (int i = 0; i < EF_TRIES; i++) {
                srl_decision d;
                if (srl_acquire(s->lim, s->key, strlen(s->key), 1, &d) != 0)
                    __atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
                else
                    g += d.allowed;
            }
            s->granted[a->id] = g;
            __atomic_fetch_sub(&s->acquirers_left, 1, __ATOMIC_RELEASE);
        }
        pthread_barrier_wait(&s->end);
    }
}

/* Runs up to `trials` trials, each on a fresh key; returns the largest
 * total granted, stopping early once a trial exceeds the permits if
 * stop_on_excess. */
static uint64_t evict_frozen_trials(srl_limiter *lim, int trials, int stop_on_excess)
{
    struct ef_shared s = {.lim = lim};
    pthread_barrier_init(&s.start, NULL, EF_THREADS + 2);
    pthread_barrier_init(&s.end, NULL, EF_THREADS + 2);
    pthread_t t[EF_THREADS + 1];
    struct ef_arg a[EF_THREADS + 1];
    for (int i = 0; i <= EF_THREADS; i++) {
        a[i] = (struct ef_arg){&s, i == EF_THREADS ? -1 : i};
        ck_assert_int_eq(pthread_create(&t[i], NULL, ef_worker, &a[i]), 0);
    }
    uint64_t worst = 0;
    for (int trial = 0; trial < trials; trial++) {
        snprintf(s.key, sizeof s.key, "evict-%d", trial);
        s.acquirers_left = EF_THREADS;
        pthread_barrier_wait(&s.start);
        pthread_barrier_wait(&s.end);
        uint64_t total = 0;
        for (int i = 0; i < EF_THREADS; i++)
            total += s.granted[i];
        if (total > worst)
            worst = total;
        /* A correct trial's key ends with no permit left, never at rest, so
         * it is still tracked; a broken one may end on an evicted orphan. */
        int rc = srl_reset_key(lim, s.key, strlen(s.key));
        if (total <= EF_PERMITS)
            ck_assert_int_eq(rc, 0);
        else
            ck_assert(rc == 0 || rc == SRL_ENOENT);
        if (stop_on_excess && worst > EF_PERMITS)
            break;
    }
    s.stop = 1;
    pthread_barrier_wait(&s.start);
    for (int i = 0; i <= EF_THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&s.start);
    pthread_barrier_destroy(&s.end);
    ck_assert_int_eq(s.errors, 0);
    return worst;
}

START_TEST(eviction_with_frozen_time_never_admits_more_than_the_permits)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_tb(EF_PERMITS, HOUR, 1024, clock);
    /* Exactly: more than EF_PERMITS would be an orphan admitting, fewer a
     * lost permit.  Then again with a yield between lookup and lock, which
     * lets the evictor kill the fresh state under the acquirer's feet. */
    ck_assert_uint_eq(evict_frozen_trials(lim, 400, 0), EF_PERMITS);
    ck_assert_int_eq(srl__local_set_broken(lim, BROKEN_YIELD), 0);
    ck_assert_uint_eq(evict_frozen_trials(lim, 400, 0), EF_PERMITS);
    srl_close(lim);
}
END_TEST

/* --- advancing time: the state comes to rest each epoch */

enum { EA_THREADS = 3, EA_PERMITS = 4, EA_EPOCHS = 300 };
#define EA_WINDOW SEC
#define EA_WAIT_NS (20 * SEC) /* bound on any wait: fail, never hang */

struct ea_shared {
    srl_limiter *lim;
    fake_clock *clock;
    uint64_t granted;          /* atomic: total admitted so far */
    int stop;                  /* atomic */
    int errors;                /* atomic */
};

static void *ea_acquirer(void *p)
{
    struct ea_shared *s = p;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        srl_decision d;
        if (srl_acquire(s->lim, "hot", 3, 1, &d) != 0)
            __atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
        else if (d.allowed)
            __atomic_fetch_add(&s->granted, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Waits until at least `want` were admitted; 0 if the bound ran out. */
static int ea_wait_granted(struct ea_shared *s, uint64_t want)
{
    uint64_t deadline = wall_ns() + EA_WAIT_NS;
    while (__atomic_load_n(&s->granted, __ATOMIC_ACQUIRE) < want) {
        if (wall_ns() > deadline)
            return 0;
        sched_yield();
    }
    return 1;
}

/*
 * One trial: acquirers hammer key "hot"; the driver (this thread) waits
 * until the epoch's permits are all used, moves the clock one window on
 * (the bucket refills to full: at rest) and evicts at once, racing the
 * acquirers.  The policy allows exactly EA_PERMITS per epoch, so the
 * total must be EA_PERMITS * (EA_EPOCHS + 1).  Returns the total.
 */
static uint64_t evict_advancing_trial(int broken)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_tb(EA_PERMITS, EA_WINDOW, 64, clock);
    if (broken)
        ck_assert_int_eq(srl__local_set_broken(lim, BROKEN_NO_DEAD_RETRY), 0);
    struct ea_shared s = {.lim = lim, .clock = clock};
    pthread_t t[EA_THREADS];
    for (int i = 0; i < EA_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, ea_acquirer, &s), 0);
    int waited = 1;
    int64_t evicted = 0;
    for (uint64_t e = 1; e <= EA_EPOCHS && waited; e++) {
        waited = ea_wait_granted(&s, EA_PERMITS * e);
        __atomic_fetch_add(&clock->now, EA_WINDOW, __ATOMIC_SEQ_CST);
        int64_t n = srl_evict_idle(lim);
        if (n < 0)
            __atomic_fetch_add(&s.errors, 1, __ATOMIC_RELAXED);
        else
            evicted += n;
    }
    if (waited)
        waited = ea_wait_granted(&s, EA_PERMITS * (EA_EPOCHS + 1));
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < EA_THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert_msg(waited, "acquirers stopped being admitted (a lost permit?)");
    ck_assert_int_eq(s.errors, 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.evicted, (uint64_t)evicted);
    srl_close(lim);
    return s.granted;
}

START_TEST(eviction_of_states_coming_to_rest_never_admits_more_than_the_policy)
{
    for (int trial = 0; trial < 4; trial++)
        ck_assert_uint_eq(evict_advancing_trial(0), EA_PERMITS * (EA_EPOCHS + 1));
}
END_TEST

START_TEST(eviction_race_catches_an_acquirer_that_decides_on_a_dead_state)
{
    uint64_t bound = EA_PERMITS * (EA_EPOCHS + 1), worst = 0;
    for (int trial = 0; trial < 50 && worst <= bound; trial++) {
        uint64_t g = evict_advancing_trial(1);
        if (g > worst)
            worst = g;
    }
    fprintf(stderr, "evict race (advancing), no dead retry: %llu granted (bound %llu)\n",
            (unsigned long long)worst, (unsigned long long)bound);
    ck_assert_msg(worst > bound, "the no-retry variant never over-admitted");
}
END_TEST

START_TEST(eviction_with_frozen_time_catches_an_acquirer_that_decides_on_a_dead_state)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_tb(EF_PERMITS, HOUR, 1024, clock);
    ck_assert_int_eq(srl__local_set_broken(lim, BROKEN_NO_DEAD_RETRY | BROKEN_YIELD), 0);
    uint64_t worst = evict_frozen_trials(lim, 4000, 1);
    fprintf(stderr, "evict race (frozen), no dead retry: %llu granted (of %d)\n",
            (unsigned long long)worst, EF_PERMITS);
    ck_assert_uint_gt(worst, EF_PERMITS);
    srl_close(lim);
}
END_TEST

/* ================================================ reclamation behind */

/* A reader that holds one urcu-bp read-side section open, so no grace
 * period ends and no deleted node goes back to the pool, until the churner
 * is done or has been stuck for PB_STALL_POLLS polls after at least
 * PB_ARMED keys (then it waits for this reader: let it go). */
enum { PB_CAPACITY = 64, PB_KEYS = 2000, PB_ARMED = 4 * PB_CAPACITY, PB_STALL_POLLS = 5 };

struct pb_shared {
    int progress;              /* atomic: keys the churner has finished */
    int done;                  /* atomic */
    int holding;               /* atomic: the reader is in its section */
    int released_at;           /* keys done when the reader let go (-1: never) */
};

static void *pb_reader(void *p)
{
    struct pb_shared *s = p;
    rcu_read_lock();
    __atomic_store_n(&s->holding, 1, __ATOMIC_RELEASE);
    int last = -1, still = 0;
    s->released_at = -1;
    while (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        int now = __atomic_load_n(&s->progress, __ATOMIC_ACQUIRE);
        still = now == last ? still + 1 : 0;
        last = now;
        if (now >= PB_ARMED && still >= PB_STALL_POLLS) {
            s->released_at = now;
            break;
        }
    }
    rcu_read_unlock();
    return NULL;
}

/* Creates PB_KEYS keys of 1 permit one after another, two requests each,
 * deleting each (srl_reset_key) before the next, while pb_reader holds
 * reclamation back.  Returns the requests decided untracked; *allowed gets
 * the admissions (PB_KEYS exactly when every key was tracked). */
static int pool_bound_run(srl_limiter *lim, uint64_t *allowed, int *released_at)
{
    struct pb_shared s = {0};
    pthread_t r;
    ck_assert_int_eq(pthread_create(&r, NULL, pb_reader, &s), 0);
    while (!__atomic_load_n(&s.holding, __ATOMIC_ACQUIRE))
        sched_yield();
    int untracked = 0, errors = 0;
    *allowed = 0;
    for (int i = 0; i < PB_KEYS; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "pb-%d", i);
        for (int j = 0; j < 2; j++) {
            srl_decision d;
            if (srl_acquire(lim, key, (size_t)len, 1, &d) != 0) {
                errors++;
                continue;
            }
            *allowed += d.allowed;
            untracked += (d.flags & SRL_DECISION_UNTRACKED) != 0;
        }
        int rc = srl_reset_key(lim, key, (size_t)len);
        errors += rc != 0 && rc != SRL_ENOENT;
        __atomic_store_n(&s.progress, i + 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&s.done, 1, __ATOMIC_RELEASE);
    pthread_join(r, NULL);
    ck_assert_int_eq(errors, 0);
    *released_at = s.released_at;
    return untracked;
}

START_TEST(deleted_keys_awaiting_reclamation_never_make_a_key_untracked)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_tb(1, HOUR, PB_CAPACITY, clock);
    uint64_t allowed = 0;
    int released_at = -1;
    int untracked = pool_bound_run(lim, &allowed, &released_at);
    fprintf(stderr, "reclamation behind: the reader let go after %d keys; %d untracked, "
            "%llu admitted of %d keys\n", released_at, untracked,
            (unsigned long long)allowed, PB_KEYS);
    ck_assert_int_eq(untracked, 0);
    ck_assert_uint_eq(allowed, PB_KEYS);   /* one per key of 1 permit: never 2 */
    /* The churner really was held back (else this run proves nothing). */
    ck_assert_int_ge(released_at, PB_ARMED);
    ck_assert_int_lt(released_at, PB_KEYS);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.full, 0);
    srl_close(lim);
}
END_TEST

START_TEST(reclamation_behind_catches_a_pool_that_answers_on_full)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_tb(1, HOUR, PB_CAPACITY, clock);
    ck_assert_int_eq(srl__local_set_broken(lim, BROKEN_NO_POOL_WAIT), 0);
    uint64_t allowed = 0;
    int released_at = -1;
    int untracked = pool_bound_run(lim, &allowed, &released_at);
    fprintf(stderr, "reclamation behind, no pool wait: %d untracked, %llu admitted of %d keys\n",
            untracked, (unsigned long long)allowed, PB_KEYS);
    ck_assert_int_gt(untracked, 0);
    ck_assert_uint_gt(allowed, PB_KEYS);   /* on_full allowed a key's second request */
    srl_close(lim);
}
END_TEST

/* ============================================ racers of one new key */

/* Threads inserting one new key into a table with room, while the test
 * holds the key's stripe locks (srl__local_hold_key_stripes): each racer
 * waits there.  Reserving its slot before the locks, each held one, and
 * the racers outnumbering the free slots made one of them answer from
 * on_full (docs/design.md, "Slots reserved by racers"). */
enum { NR_CAPACITY = 4, NR_LIVE = 2, NR_RACERS = 3, NR_PERMITS = 10 };

struct nr_racer {
    srl_limiter *lim;
    pid_t tid;                 /* atomic */
    int done;                  /* atomic */
    int rc;
    srl_decision d;
};

static void *nr_worker(void *p)
{
    struct nr_racer *a = p;
    __atomic_store_n(&a->tid, gettid(), __ATOMIC_RELEASE);
    a->rc = srl_acquire(a->lim, "new", 3, 1, &a->d);
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The thread is asleep (state S: here, waiting for a lock). */
static bool thread_sleeping(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    return proc_stat_state(path) == 'S';
}

/* Every racer has returned or sleeps, and did so for 20 polls in a row
 * (a racer asleep a moment on the pool's lock is on its way, not there). */
static void nr_wait_parked(struct nr_racer *r)
{
    uint64_t deadline = wall_ns() + 60 * SEC;
    for (int still = 0; still < 20;) {
        bool parked = true;
        for (int i = 0; i < NR_RACERS && parked; i++) {
            pid_t tid = __atomic_load_n(&r[i].tid, __ATOMIC_ACQUIRE);
            parked = __atomic_load_n(&r[i].done, __ATOMIC_ACQUIRE) ||
                     (tid != 0 && thread_sleeping(tid));
        }
        still = parked ? still + 1 : 0;
        ck_assert_msg(wall_ns() < deadline, "the racers never reached the held locks");
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* NR_LIVE keys in use (not at rest), then NR_RACERS threads insert one new
 * key while its stripes are held; released once all wait.  Returns the
 * racers answered untracked; every racer's call returned 0. */
static int new_key_racers_run(unsigned broken, uint64_t *full)
{
    fake_clock *clock = fake_clock_shared(5 * SEC);
    srl_limiter *lim = open_tb(NR_PERMITS, HOUR, NR_CAPACITY, clock);
    ck_assert_int_eq(srl__local_set_broken(lim, broken), 0);
    for (int i = 0; i < NR_LIVE; i++) {
        char key[8];
        int len = snprintf(key, sizeof key, "live-%d", i);
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, key, (size_t)len, 1, &d), 0);
        ck_assert(d.allowed && !(d.flags & SRL_DECISION_UNTRACKED));
    }
    ck_assert_int_eq(srl__local_hold_key_stripes(lim, "new", 3, 1), 0);
    struct nr_racer r[NR_RACERS];
    pthread_t t[NR_RACERS];
    for (int i = 0; i < NR_RACERS; i++) {
        r[i] = (struct nr_racer){.lim = lim};
        ck_assert_int_eq(pthread_create(&t[i], NULL, nr_worker, &r[i]), 0);
    }
    nr_wait_parked(r);
    ck_assert_int_eq(srl__local_hold_key_stripes(lim, "new", 3, 0), 0);
    int untracked = 0, allowed = 0;
    for (int i = 0; i < NR_RACERS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(r[i].rc, 0);
        untracked += (r[i].d.flags & SRL_DECISION_UNTRACKED) != 0;
        allowed += r[i].d.allowed;
    }
    ck_assert_int_eq(allowed, NR_RACERS);   /* 10 permits: all admitted, tracked or not */
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    *full = st.full;
    if (untracked == 0) {
        /* The key's one state took every admission (a peek answers as
         * if its cost were taken). */
        srl_decision d;
        ck_assert_int_eq(srl_peek(lim, "new", 3, 1, &d), 0);
        ck_assert_uint_eq(d.remaining, NR_PERMITS - NR_RACERS - 1); /* after the peeked 1 */
    }
    srl_close(lim);
    return untracked;
}

START_TEST(racers_inserting_one_new_key_hold_no_slot_while_they_wait_for_its_bucket)
{
    uint64_t full = 0;
    int untracked = new_key_racers_run(0, &full);
    fprintf(stderr, "new-key racers: %d untracked of %d (capacity %d, %d live)\n", untracked,
            NR_RACERS, NR_CAPACITY, NR_LIVE);
    ck_assert_int_eq(untracked, 0);
    ck_assert_uint_eq(full, 0);
}
END_TEST

START_TEST(new_key_racers_catch_slots_reserved_before_the_bucket_locks)
{
    uint64_t full = 0;
    int untracked = new_key_racers_run(SRL__LOCAL_BROKEN_RESERVE_EARLY, &full);
    fprintf(stderr, "new-key racers, slots reserved early: %d untracked of %d\n", untracked,
            NR_RACERS);
    /* Two racers hold the two free slots; the third finds the table full. */
    ck_assert_int_eq(untracked, NR_RACERS - (NR_CAPACITY - NR_LIVE));
    ck_assert_uint_eq(full, 1);
}
END_TEST

static Suite *local_race_suite(void)
{
    Suite *s = suite_create("local_race");
    TCase *tc = tcase_create("races");
    tcase_set_timeout(tc, 0); /* meson's per-test timeout bounds the run */
    tcase_add_test(tc, bucket_race_admits_exactly_the_permits_in_every_trial);
    tcase_add_test(tc, bucket_race_catches_a_state_decided_without_its_lock);
    tcase_add_test(tc, registry_race_admits_exactly_one_first_request_in_every_round);
    tcase_add_test(tc, registry_race_catches_get_then_put_creation);
    tcase_add_test(tc, eviction_with_frozen_time_never_admits_more_than_the_permits);
    tcase_add_test(tc, eviction_with_frozen_time_catches_an_acquirer_that_decides_on_a_dead_state);
    tcase_add_test(tc, eviction_of_states_coming_to_rest_never_admits_more_than_the_policy);
    tcase_add_test(tc, eviction_race_catches_an_acquirer_that_decides_on_a_dead_state);
    tcase_add_test(tc, deleted_keys_awaiting_reclamation_never_make_a_key_untracked);
    tcase_add_test(tc, reclamation_behind_catches_a_pool_that_answers_on_full);
    tcase_add_test(tc, racers_inserting_one_new_key_hold_no_slot_while_they_wait_for_its_bucket);
    tcase_add_test(tc, new_key_racers_catch_slots_reserved_before_the_bucket_locks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(local_race_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
