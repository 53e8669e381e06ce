/*
 * check_shm_recovery.c - dead and stuck lock owners, on a real segment.
 *
 *   - a worker SIGKILLed inside the ticker callback (which runs under the
 *     bucket lock, with the undo record armed): the next request, from
 *     another process, neither hangs nor admits more than allowed, and
 *     stats.recovered counts the repair;
 *   - a worker killed after its decision was written but before the undo
 *     record was cleared (simulated through the internal lock/undo calls):
 *     the request is rolled back, so exactly the remaining permit is left;
 *   - a worker killed while inserting a new key: no state is created;
 *   - a corrupted state in the bucket of a dead owner is reset and counted;
 *   - a stopped live owner: bounded wait, SRL_ETIMEDOUT with the DEGRADED
 *     decision from on_full, counted; after SIGCONT (or SIGKILL) it works;
 *   - a lock left unrecoverable: SRL_ENOTRECOVERABLE at once, never a spin;
 *   - a worker killed in the middle of a relocation (copy tagged in the new
 *     bucket, old copy not yet cleared): repair leaves one state;
 *   - a static segment where every lock says "owner died" and every bucket's
 *     relocation marker points into the next one: repair nests one level
 *     only (a 64 KiB thread stack survives 65,536 buckets) and srl_check
 *     counts the duplicates the nested repairs leave; a move into a bucket
 *     whose mutex kind is foreign is never resolved (glibc would abort).
 *
 * Capacity 16 is one bucket, so every key of a test shares one lock.
 */
#include <check.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"
#include "srl.h"
#include "testutil.h"
#include "shm_testutil.h"

#define PERMITS 10

enum { ACT_NONE, ACT_KILL, ACT_STOP };

/* A ticker that kills or stops its own process when read. */
struct evil {
    fake_clock *clock;
    int action;
};

static uint64_t evil_read(void *ctx)
{
    struct evil *e = ctx;
    if (e->action == ACT_KILL)
        raise(SIGKILL);
    if (e->action == ACT_STOP)
        raise(SIGSTOP);
    return fake_clock_read(e->clock);
}

struct seg {
    char name[128];
    fake_clock *clock;
    srl_config cfg;
    srl_limiter *lim;        /* the test's own handle, plain fake ticker */
};

static struct seg seg_new(srl_on_full on_full, uint32_t timeout_ms)
{
    struct seg s;
    strcpy(s.name, unique_name("recovery"));
    s.clock = fake_clock_shared(7 * SEC);   /* frozen */
    srl_config_init(&s.cfg);
    s.cfg.policy = (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = PERMITS, .window_ns = 60 * SEC};
    s.cfg.capacity = 16;
    s.cfg.on_full = on_full;
    s.cfg.lock_timeout_ms = timeout_ms;
    s.cfg.ticker = fake_ticker(s.clock);
    ck_assert_int_eq(srl_open_shared(s.name, &s.cfg, SRL_CREATE | SRL_EXCL, &s.lim), 0);
    return s;
}

static void seg_free(struct seg *s)
{
    srl_close(s->lim);
    ck_assert_int_eq(srl_unlink(s->name), 0);
}

/* Fork a worker that opens the segment with the evil ticker and sends one
 * request for key; it is expected to die (or stop) inside it. */
static pid_t evil_worker(struct seg *s, int action, const char *key)
{
    pid_t pid = test_fork();
    if (pid == 0) {
        struct evil e = {s->clock, action};
        srl_config cfg = s->cfg;
        cfg.ticker = (srl_ticker){evil_read, &e};
        srl_limiter *lim;
        if (srl_open_shared(s->name, &cfg, 0, &lim) != 0)
            _exit(2);
        srl_decision d;
        int rc = srl_acquire(lim, key, strlen(key), 1, &d);
        srl_close(lim);
        _exit(rc == 0 ? 0 : 3);
    }
    return pid;
}

static void expect_killed(pid_t pid)
{
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

static int admit_count(srl_limiter *lim, const char *key, int tries)
{
    int n = 0;
    for (int i = 0; i < tries; i++) {
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, key, strlen(key), 1, &d), 0);
        ck_assert_uint_eq(d.flags, 0);
        n += d.allowed;
    }
    return n;
}

static srl_stats stats(srl_limiter *lim)
{
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    return st;
}

/* Run in a child so the parent's test process keeps its own handle. */
static int admit_count_elsewhere(struct seg *s, const char *key, int tries)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = test_fork();
    if (pid == 0) {
        srl_limiter *lim;
        int n = -1;
        if (srl_open_shared(s->name, &s->cfg, 0, &lim) == 0) {
            n = 0;
            for (int i = 0; i < tries; i++) {
                srl_decision d;
                if (srl_acquire(lim, key, strlen(key), 1, &d) != 0 || d.flags != 0) {
                    n = -1;
                    break;
                }
                n += d.allowed;
            }
            srl_close(lim);
        }
        _exit(write(fds[1], &n, sizeof n) == (ssize_t)sizeof n ? 0 : 1);
    }
    close(fds[1]);
    int n = -2;
    ck_assert_int_eq(read(fds[0], &n, sizeof n), (ssize_t)sizeof n);
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return n;
}

START_TEST(a_worker_killed_under_the_lock_leaves_exactly_the_remaining_permit)
{
    struct seg s = seg_new(SRL_ON_FULL_ALLOW, 1000);
    ck_assert_int_eq(admit_count(s.lim, "k", PERMITS - 1), PERMITS - 1);
    expect_killed(evil_worker(&s, ACT_KILL, "k"));
    /* Another process: repairs, then exactly one more is admitted. */
    ck_assert_int_eq(admit_count_elsewhere(&s, "k", 50), 1);
    srl_stats st = stats(s.lim);
    ck_assert_uint_eq(st.recovered, 1);
    ck_assert_uint_eq(st.reset_slots, 0);
    ck_assert_uint_eq(st.allowed, PERMITS);
    ck_assert_uint_eq(st.used, 1);
    ck_assert_int_eq(srl_check(s.lim, NULL, NULL), 0);
    seg_free(&s);
}
END_TEST

START_TEST(a_request_killed_after_its_decision_is_rolled_back)
{
    struct seg s = seg_new(SRL_ON_FULL_ALLOW, 1000);
    ck_assert_int_eq(admit_count(s.lim, "k", PERMITS - 1), PERMITS - 1);
    pid_t pid = test_fork();
    if (pid == 0) {
        /* What srl_acquire does, stopped dead between the state change and
         * the end of the undo record: the request took the last permit but
         * never answered. */
        srl_limiter *lim;
        if (srl_open_shared(s.name, &s.cfg, 0, &lim) != 0)
            _exit(2);
        struct srl__shm *sh = lim->impl;
        struct srl__shm_key k;
        srl__shm_hash(sh, "k", 1, &k);
        struct timespec dl = srl__shm_deadline(sh);
        if (srl__shm_lock(sh, k.b1, &dl) != 0)
            _exit(3);
        int i = srl__shm_find_locked(sh, k.b1, &k);
        if (i < 0)
            _exit(4);
        srl__shm_undo_begin(sh, k.b1, (unsigned)i);
        srl_decision d;
        srl_state_acquire(&lim->cmp.limits.limit[0], srl__shm_slot_state(sh, k.b1, (unsigned)i), 7 * SEC, 1,
                          &d);
        if (!d.allowed || d.remaining != 0)
            _exit(5);
        raise(SIGKILL);
    }
    expect_killed(pid);
    ck_assert_int_eq(admit_count_elsewhere(&s, "k", 50), 1);
    srl_stats st = stats(s.lim);
    ck_assert_uint_eq(st.recovered, 1);
    ck_assert_uint_eq(st.reset_slots, 0);
    ck_assert_int_eq(srl_check(s.lim, NULL, NULL), 0);
    seg_free(&s);
}
END_TEST

START_TEST(a_worker_killed_while_inserting_a_new_key_creates_no_state)
{
    struct seg s = seg_new(SRL_ON_FULL_ALLOW, 1000);
    ck_assert_int_eq(admit_count(s.lim, "old", 3), 3);
    expect_killed(evil_worker(&s, ACT_KILL, "new"));
    srl_decision d;
    ck_assert_int_eq(srl_peek(s.lim, "new", 3, 1, &d), SRL_ENOENT);
    ck_assert_uint_eq(stats(s.lim).used, 1);
    ck_assert_uint_eq(stats(s.lim).recovered, 1);
    ck_assert_int_eq(admit_count(s.lim, "new", 50), PERMITS);
    ck_assert_int_eq(admit_count(s.lim, "old", 50), PERMITS - 3);
    ck_assert_int_eq(srl_check(s.lim, NULL, NULL), 0);
    seg_free(&s);
}
END_TEST

START_TEST(a_corrupted_state_under_a_dead_owner_is_reset_and_counted)
{
    struct seg s = seg_new(SRL_ON_FULL_ALLOW, 1000);
    ck_assert_int_eq(admit_count(s.lim, "victim", 4), 4);
    ck_assert_int_eq(admit_count(s.lim, "holder", 2), 2);
    /* Damage victim's state by hand (tokens > permits fails validation). */
    struct srl__shm *sh = s.lim->impl;
    struct srl__shm_key k;
    srl__shm_hash(sh, "victim", 6, &k);
    int i = srl__shm_find_locked(sh, k.b1, &k);
    ck_assert_int_ge(i, 0);
    memset(srl__shm_slot_state(sh, k.b1, (unsigned)i), 0xff, sh->state_bytes);
    ck_assert_int_gt(srl_check(s.lim, NULL, NULL), 0);
    expect_killed(evil_worker(&s, ACT_KILL, "holder"));
    ck_assert_int_eq(admit_count_elsewhere(&s, "holder", 50), PERMITS - 2);
    srl_stats st = stats(s.lim);
    ck_assert_uint_eq(st.recovered, 1);
    ck_assert_uint_eq(st.reset_slots, 1);
    /* The reset state is fresh. */
    ck_assert_int_eq(admit_count(s.lim, "victim", 50), PERMITS);
    ck_assert_int_eq(srl_check(s.lim, NULL, NULL), 0);
    seg_free(&s);
}
END_TEST

/* Fork a worker that stops itself while holding the bucket lock; return
 * once it is stopped. */
static pid_t stopped_owner(struct seg *s)
{
    pid_t pid = evil_worker(s, ACT_STOP, "k");
    int status;
    ck_assert_int_eq(waitpid(pid, &status, WUNTRACED), pid);
    ck_assert(WIFSTOPPED(status));
    return pid;
}

START_TEST(a_stopped_owner_times_out_to_the_degraded_decision_then_recovers_on_sigcont)
{
    struct seg s = seg_new(SRL_ON_FULL_DENY, 50);
    ck_assert_int_eq(admit_count(s.lim, "k", 1), 1);
    pid_t pid = stopped_owner(&s);
    for (int n = 0; n < 2; n++) {
        srl_decision d;
        memset(&d, 0xa5, sizeof d);
        ck_assert_int_eq(srl_acquire(s.lim, "k", 1, 1, &d), SRL_ETIMEDOUT);
        ck_assert_int_eq(d.allowed, 0);                      /* on_full = deny */
        ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
        ck_assert_uint_eq(d.retry_after_ns, 60 * SEC);
        ck_assert_uint_eq(d.limit, PERMITS);
    }
    ck_assert_uint_eq(stats(s.lim).timeouts, 2);
    ck_assert_int_eq(kill(pid, SIGCONT), 0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);   /* it finished its request */
    ck_assert_int_eq(admit_count(s.lim, "k", 50), PERMITS - 2);
    srl_stats st = stats(s.lim);
    ck_assert_uint_eq(st.recovered, 0);
    ck_assert_uint_eq(st.timeouts, 2);
    seg_free(&s);
}
END_TEST

START_TEST(a_stopped_owner_times_out_to_allow_by_default_and_its_death_is_repaired)
{
    struct seg s = seg_new(SRL_ON_FULL_ALLOW, 50);
    pid_t pid = stopped_owner(&s);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(s.lim, "other", 5, 1, &d), SRL_ETIMEDOUT);  /* same bucket */
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_uint_eq(d.retry_after_ns, 0);
    ck_assert_uint_eq(stats(s.lim).timeouts, 1);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    expect_killed(pid);
    ck_assert_int_eq(admit_count(s.lim, "k", 50), PERMITS);   /* its insert never happened */
    srl_stats st = stats(s.lim);
    ck_assert_uint_eq(st.recovered, 1);
    ck_assert_uint_eq(st.timeouts, 1);
    seg_free(&s);
}
END_TEST

START_TEST(an_unrecoverable_lock_is_reported_at_once_and_never_spun_on)
{
    struct seg s = seg_new(SRL_ON_FULL_DENY, 1000);
    ck_assert_int_eq(admit_count(s.lim, "k", 1), 1);
    expect_killed(evil_worker(&s, ACT_KILL, "k"));
    /* A careless repairer: takes the dead owner's lock and releases it
     * without pthread_mutex_consistent, which makes it unusable for good. */
    struct srl__shm *sh = s.lim->impl;
    pthread_mutex_t *mu = &srl__shm_bucket(sh, 0)->mu;
    ck_assert_int_eq(pthread_mutex_lock(mu), EOWNERDEAD);
    ck_assert_int_eq(pthread_mutex_unlock(mu), 0);
    for (int n = 0; n < 3; n++) {
        /* A try (relocation, move repair) must not make it look busy: glibc's
         * own trylock would (see try_once in shm_lock.c). */
        ck_assert_int_eq(srl__shm_trylock(sh, 0), SRL_ENOTRECOVERABLE);
        srl_decision d;
        memset(&d, 0xa5, sizeof d);
        ck_assert_int_eq(srl_acquire(s.lim, "k", 1, 1, &d), SRL_ENOTRECOVERABLE);
        ck_assert_int_eq(d.allowed, 0);
        ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    }
    ck_assert_uint_eq(stats(s.lim).timeouts, 0);
    ck_assert_int_gt(srl_check(s.lim, NULL, NULL), 0);
    seg_free(&s);
}
END_TEST

/* A relocation cut short between its two tag stores: the dead worker held
 * the source bucket X and the destination Y, had tagged the complete copy
 * in Y and not yet cleared the source.  Loop index: 0 X < Y, 1 X > Y. */
START_TEST(a_worker_killed_mid_relocation_leaves_one_state_for_the_key)
{
    fake_clock *c = fake_clock_shared(7 * SEC);
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = PERMITS, .window_ns = 60 * SEC};
    cfg.capacity = 256;
    cfg.ticker = fake_ticker(c);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    struct srl__shm *sh = lim->impl;
    /* A key living in its first bucket X, with X < Y or X > Y as asked. */
    char key[32];
    struct srl__shm_key k;
    int i = -1;
    for (int n = 0; i < 0; n++) {
        snprintf(key, sizeof key, "mover-%d", n);
        srl__shm_hash(sh, key, strlen(key), &k);
        if ((k.b1 < k.b2) == (_i == 0))
            i = 0;
    }
    ck_assert_int_eq(admit_count(lim, key, 3), 3);
    ck_assert_int_eq(admit_count(lim, "bystander", 1), 1);
    uint64_t x = k.b1, y = k.b2;
    i = srl__shm_find_locked(sh, x, &k);
    ck_assert_int_ge(i, 0);
    pid_t pid = test_fork();
    if (pid == 0) {
        struct timespec dl = srl__shm_deadline(sh);
        if (srl__shm_lock(sh, x < y ? x : y, &dl) != 0 || srl__shm_lock(sh, x < y ? y : x, &dl) != 0)
            _exit(1);
        struct srl__shm_bucket *bx = srl__shm_bucket(sh, x), *by = srl__shm_bucket(sh, y);
        unsigned j = 0;
        while (j < 16 && by->tags[j] != 0)
            j++;
        if (j == 16)
            _exit(2);
        /* relocate(), stopped after the copy was tagged. */
        __atomic_store_n(&bx->moving_slot, (uint8_t)(i + 1), __ATOMIC_RELEASE);
        memcpy(srl__shm_slot(sh, y, j), srl__shm_slot(sh, x, (unsigned)i), sh->slot_bytes);
        srl__shm_tag_store(by, j, bx->tags[i]);
        raise(SIGKILL);
    }
    expect_killed(pid);
    ck_assert_int_eq(admit_count(lim, key, 50), PERMITS - 3);   /* one state, 7 left */
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);             /* no duplicate left */
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.used, 2);
    ck_assert_uint_eq(st.recovered, 2);                          /* X and Y */
    ck_assert_uint_eq(st.reset_slots, 0);
    srl_decision d;
    ck_assert_int_eq(srl_reset_key(lim, key, strlen(key)), 0);
    ck_assert_int_eq(srl_peek(lim, key, strlen(key), 1, &d), SRL_ENOENT);  /* gone for good */
    srl_close(lim);
}
END_TEST

/* ---------------------------------------------- a chain of dead owners */

#define CHAIN_BUCKETS 65536u

/* A fingerprint whose candidate buckets are b1 and b2 (fastrange of each
 * half): the smallest x with floor(x * n / 2^64) == b, plus a per-bucket
 * offset far below the 2^64 / n width of a bucket's range. */
static void fp_for(uint8_t fp[16], uint64_t b1, uint64_t b2, uint64_t n)
{
    uint64_t half[2] = {b1, b2};
    for (int h = 0; h < 2; h++) {
        uint64_t x = (uint64_t)((((unsigned __int128)half[h] << 64) + n - 1) / n);
        x += (half[h] * 0x9e3779b1u) & 0xffffffffu;
        for (int i = 0; i < 8; i++)
            fp[8 * h + i] = (uint8_t)(x >> (8 * i));
    }
}

/* A named segment of exactly n buckets, no display copy; *sh is its handle. */
static srl_limiter *open_buckets(char name[128], uint64_t n, struct srl__shm **sh)
{
    strcpy(name, unique_name("recovery"));
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = PERMITS, .window_ns = 60 * SEC};
    cfg.capacity = n * SRL__SHM_SLOTS;
    cfg.key_display = 0;
    cfg.lock_timeout_ms = 50;
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    *sh = lim->impl;
    ck_assert_uint_eq((*sh)->buckets, n);
    return lim;
}

struct chain_run {
    srl_limiter *lim;
    int64_t problems;
};

static void *chain_check(void *arg)
{
    struct chain_run *r = arg;
    r->problems = srl_check(r->lim, NULL, NULL);
    return NULL;
}

/* srl_check on a thread with a 64 KiB stack. */
static int64_t check_on_small_stack(srl_limiter *lim)
{
    struct chain_run r = {lim, -1};
    pthread_attr_t a;
    ck_assert_int_eq(pthread_attr_init(&a), 0);
    ck_assert_int_eq(pthread_attr_setstacksize(&a, 64 * 1024), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, &a, chain_check, &r), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    pthread_attr_destroy(&a);
    return r.problems;
}

/*
 * Issue 10 item 3, as a hostile or corrupted segment presents it: every
 * bucket mutex's lock word is FUTEX_OWNER_DIED (what the kernel leaves when
 * an owner dies; written directly, since the kernel repairs at most 2048
 * robust locks per dying thread), bucket b (b < N-1) holds key K_b in slot 0
 * with moving_slot = 1 and candidates {b, b+1}, and bucket b (b > 0) holds a
 * tagged copy of K_{b-1} in slot 1: a relocation of every K_b cut short
 * after the copy.  Repair of b trylocks b+1, whose owner died too; if that
 * repair resolved its own move it would trylock b+2, and so on down the
 * table (the old code overflowed any stack).
 *
 * Bounded: a repair nested in another skips its move.  srl_check locks
 * bucket 0: repair(0) nests repair(1) (move skipped) and drops K_0's source.
 * Checking bucket 1 takes bucket 2: repair(2) nests repair(3), drops K_2's
 * source; K_1 is then in bucket 1 slot 0 and bucket 2 slot 1: one duplicate.
 * So every odd b <= N-3 keeps both copies of K_b: N/2 - 1 duplicates, each
 * reported once (from the lower bucket), and every bucket repaired once.
 */
START_TEST(a_chain_of_dead_owners_and_relocation_markers_repairs_one_level_deep_only)
{
    const uint64_t n = CHAIN_BUCKETS;
    char name[128];
    struct srl__shm *sh;
    srl_limiter *lim = open_buckets(name, n, &sh);
    for (uint64_t b = 0; b < n; b++) {
        struct srl__shm_bucket *bk = srl__shm_bucket(sh, b);
        uint8_t fp[16];
        if (b + 1 < n) {
            fp_for(fp, b, b + 1, n);
            memcpy(srl__shm_slot(sh, b, 0), fp, 16);
            bk->tags[0] = srl__shm_fp_tag(fp);
            bk->moving_slot = 1;
        }
        if (b > 0) {
            fp_for(fp, b - 1, b, n);
            memcpy(srl__shm_slot(sh, b, 1), fp, 16);
            bk->tags[1] = srl__shm_fp_tag(fp);
        }
        bk->mu.__data.__lock = FUTEX_OWNER_DIED;
    }
    /* The chain is what it claims: K_0's candidates are buckets 0 and 1. */
    uint64_t c1, c2;
    srl__shm_fp_buckets(sh, srl__shm_slot(sh, 0, 0), &c1, &c2);
    ck_assert(c1 == 0 && c2 == 1);
    srl__shm_fp_buckets(sh, srl__shm_slot(sh, n - 1, 1), &c1, &c2);
    ck_assert(c1 == n - 2 && c2 == n - 1);

    ck_assert_int_eq(check_on_small_stack(lim), (int64_t)(n / 2 - 1));
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.recovered, n);         /* every owner had died */
    ck_assert_uint_eq(st.reset_slots, 0);
    ck_assert_uint_eq(st.used, 2 * (n - 1) - n / 2);
    /* Nothing is pending any more, the duplicates stay reported. */
    ck_assert_int_eq(check_on_small_stack(lim), (int64_t)(n / 2 - 1));
    ck_assert_uint_eq(stats(lim).recovered, n);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* The trylock of repair (resolving a move into a bucket whose mutex kind
 * word is foreign, here priority-protect 0xc0, on which glibc's lock
 * asserts in tpp.c) checks the kind too: the move is left unresolved, the
 * dead owner's bucket is repaired, and srl_check reports the foreign kind
 * once (not again as an unavailable lock from bucket 1's duplicate scan). */
START_TEST(repair_never_trylocks_a_bucket_whose_mutex_kind_is_foreign)
{
    const uint64_t n = 4;
    char name[128];
    struct srl__shm *sh;
    srl_limiter *lim = open_buckets(name, n, &sh);
    struct srl__shm_bucket *b1 = srl__shm_bucket(sh, 1), *b2 = srl__shm_bucket(sh, 2);
    uint8_t fp[16];
    fp_for(fp, 1, 2, n);
    memcpy(srl__shm_slot(sh, 1, 0), fp, 16);
    b1->tags[0] = srl__shm_fp_tag(fp);
    b1->moving_slot = 1;
    b1->mu.__data.__lock = FUTEX_OWNER_DIED;
    b2->mu.__data.__kind = 0xc0;
    struct check_lines l = {0, ""};
    ck_assert_int_eq(srl_check(lim, check_lines_collect, &l), 1);
    ck_assert_int_eq(l.n, 1);
    ck_assert_ptr_nonnull(strstr(l.last, "bucket 2: mutex kind 0xc0 is not srl's"));
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.recovered, 1);
    ck_assert_uint_eq(st.used, 1);                  /* the source stays */
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_recovery");
    TCase *tc = tcase_create("recovery");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_worker_killed_under_the_lock_leaves_exactly_the_remaining_permit);
    tcase_add_test(tc, a_request_killed_after_its_decision_is_rolled_back);
    tcase_add_test(tc, a_worker_killed_while_inserting_a_new_key_creates_no_state);
    tcase_add_test(tc, a_corrupted_state_under_a_dead_owner_is_reset_and_counted);
    tcase_add_test(tc, a_stopped_owner_times_out_to_the_degraded_decision_then_recovers_on_sigcont);
    tcase_add_test(tc, a_stopped_owner_times_out_to_allow_by_default_and_its_death_is_repaired);
    tcase_add_test(tc, an_unrecoverable_lock_is_reported_at_once_and_never_spun_on);
    tcase_add_loop_test(tc, a_worker_killed_mid_relocation_leaves_one_state_for_the_key, 0, 2);
    tcase_add_test(tc, a_chain_of_dead_owners_and_relocation_markers_repairs_one_level_deep_only);
    tcase_add_test(tc, repair_never_trylocks_a_bucket_whose_mutex_kind_is_foreign);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"recovery"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
