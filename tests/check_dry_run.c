/*
 * check_dry_run.c - SRL_CONFIG_DRY_RUN on every store that holds states
 * (a named segment, an anonymous one, the local store).
 *
 *   trace:      a dry-run and an enforcing limiter (same store kind, same
 *               frozen-then-stepped fake clock) over one trace of N + k
 *               requests, a step of half a window, N more: the dry run
 *               allows every one, flags WOULD_DENY exactly where the
 *               enforcing one denies, with the enforcing decision's
 *               remaining, retry_after, reset_after, limit and binding; its
 *               key state is byte for byte the enforcing one's, and its
 *               stats allowed/denied equal the enforcing ones with
 *               would_deny == denied (0 for the enforcing handle).  Each
 *               rate algorithm, a compound and a penalty (ban) policy.
 *   mixed:      an enforcing and a dry-run handle on one segment decide on
 *               the same state; the segment counts both, would_deny only
 *               for the dry one; the flag is not compared at open (nor
 *               taken from the segment with SRL_ADOPT).
 *   enter:      a dry-run srl_enter that would be refused is admitted
 *               without a unit (lease gen 0, srl_leave SRL_ENOENT); the
 *               units in flight never exceed N; with a rate limit in the
 *               compound, a refusal by either takes neither.
 *   peek:       turns like acquire, counts nothing.
 *   reserve:    a refused reservation is allowed, WOULD_DENY, wait 0, counted;
 *               the others wait as the enforcing twin's.
 *   full:       a full table with on_full deny: allowed, UNTRACKED and
 *               WOULD_DENY, counted.
 *   degraded:   a stuck bucket lock with on_full deny: SRL_ETIMEDOUT with
 *               allowed, DEGRADED and WOULD_DENY, not counted.
 *   config:     an unknown flag bit or a reserved word != 0 is SRL_EINVAL.
 *   8 procs:    8 forked workers in dry run on one key of a shared segment,
 *               started together on a spinning barrier, frozen time: every
 *               request allowed, exactly total - N flagged, and
 *               stats.would_deny == denied == total - N.  5 trials.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inflight_testutil.h"
#include "shm.h"   /* internal: a forked holder takes the bucket lock */
#include "shm_testutil.h"
#include "srl.h"
#include "testutil.h"

enum { ST_SHARED, ST_ANONYMOUS, ST_LOCAL, ST_COUNT };
static const char *const store_names[ST_COUNT] = {"shared", "anonymous", "local"};

static const char *const policies[] = {
    "token_bucket:5/1s", "gcra:5/1s", "sliding_log:5/1s", "sliding_counter:5/1s",
    "token_bucket:5/1s + sliding_log:7/1m", "sliding_log:5/1s,penalty=3s",
};
#define N_POLICIES (sizeof policies / sizeof policies[0])
#define N 5u      /* the least permits of every policy above */
#define EXTRA 4u  /* k: requests past the limit */

static srl_config config(const char *policy, fake_clock *c, unsigned flags)
{
    srl_config cfg;
    srl_config_init(&cfg);
    srl_policy_error err;
    ck_assert_msg(srl_limits_parse_ex(policy, &cfg.limits, &err) == 0, "%s: %s", policy,
                  err.message);
    cfg.capacity = 64;
    cfg.ticker = fake_ticker(c);
    cfg.flags = flags;
    cfg.lock_timeout_ms = 10000;
    return cfg;
}

/* Open a limiter of the given store kind; *name gets the segment's name
 * (unlinked by close_store). */
static srl_limiter *open_store(int kind, const srl_config *cfg, char name[128])
{
    srl_limiter *lim = NULL;
    name[0] = '\0';
    switch (kind) {
    case ST_SHARED:
        strcpy(name, unique_name("dry"));
        ck_assert_int_eq(srl_open_shared(name, cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
        break;
    case ST_ANONYMOUS:
        ck_assert_int_eq(srl_open_anonymous(cfg, &lim), 0);
        break;
    default:
        ck_assert_int_eq(srl_open_local(cfg, &lim), 0);
        break;
    }
    return lim;
}

static void close_store(srl_limiter *lim, const char *name)
{
    srl_close(lim);
    if (name[0] != '\0')
        ck_assert_int_eq(srl_unlink(name), 0);
}

/* A dry-run config of policy on a clock of its own at 7 s (moved by no one). */
static srl_config dry_config(const char *policy)
{
    return config(policy, fake_clock_shared(7 * SEC), SRL_CONFIG_DRY_RUN);
}

/* A dry-run limiter of policy in a store of the given kind (see open_store). */
static srl_limiter *open_dry(int kind, const char *policy, char name[128])
{
    srl_config cd = dry_config(policy);
    return open_store(kind, &cd, name);
}

static srl_stats stats(srl_limiter *lim)
{
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    return st;
}

/* lim's stats count allowed, denied and would_deny as given. */
static void ck_counts(srl_limiter *lim, uint64_t allowed, uint64_t denied, uint64_t would_deny)
{
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.allowed, allowed);
    ck_assert_uint_eq(st.denied, denied);
    ck_assert_uint_eq(st.would_deny, would_deny);
}

/* The dry decision is the enforcing one, allowed and flagged if it denied. */
static void ck_dry_matches(const srl_decision *dry, const srl_decision *enf, const char *what,
                           unsigned step)
{
    ck_assert_msg(dry->allowed == 1, "%s step %u: the dry run refused", what, step);
    unsigned want = enf->flags | (enf->allowed ? 0 : SRL_DECISION_WOULD_DENY);
    ck_assert_msg(dry->flags == want, "%s step %u: flags %#x, want %#x", what, step, dry->flags,
                  want);
    ck_assert_msg(dry->remaining == enf->remaining && dry->retry_after_ns == enf->retry_after_ns &&
                      dry->reset_after_ns == enf->reset_after_ns && dry->limit == enf->limit &&
                      dry->binding == enf->binding,
                  "%s step %u: remaining %u/%u retry %llu/%llu reset %llu/%llu binding %u/%u",
                  what, step, dry->remaining, enf->remaining,
                  (unsigned long long)dry->retry_after_ns, (unsigned long long)enf->retry_after_ns,
                  (unsigned long long)dry->reset_after_ns, (unsigned long long)enf->reset_after_ns,
                  dry->binding, enf->binding);
}

static void ck_same_state(srl_limiter *dry, srl_limiter *enf, const char *key, const char *what)
{
    unsigned char a[8192], b[8192];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    ck_assert_int_eq(srl_key_state(dry, key, strlen(key), a, sizeof a), 0);
    ck_assert_int_eq(srl_key_state(enf, key, strlen(key), b, sizeof b), 0);
    ck_assert_msg(memcmp(a, b, sizeof a) == 0, "%s: the dry run's state differs", what);
}

/* _i: store kind * N_POLICIES + policy. */
START_TEST(a_dry_run_allows_every_request_flags_exactly_the_denials_and_keeps_the_enforcing_state)
{
    int kind = _i / (int)N_POLICIES;
    const char *policy = policies[_i % (int)N_POLICIES];
    char what[160];
    snprintf(what, sizeof what, "%s %s", store_names[kind], policy);
    fake_clock *c = fake_clock_shared(7 * SEC);
    srl_config ce = config(policy, c, 0), cd = config(policy, c, SRL_CONFIG_DRY_RUN);
    char ne[128], nd[128];
    srl_limiter *enf = open_store(kind, &ce, ne), *dry = open_store(kind, &cd, nd);
    unsigned flagged = 0, denied = 0, step = 0;
    for (int phase = 0; phase < 2; phase++) {
        unsigned n = phase == 0 ? N + EXTRA : N;
        for (unsigned i = 0; i < n; i++, step++) {
            srl_decision de, dd;
            ck_assert_int_eq(srl_acquire(enf, "k", 1, 1, &de), 0);
            ck_assert_int_eq(srl_acquire(dry, "k", 1, 1, &dd), 0);
            ck_dry_matches(&dd, &de, what, step);
            denied += !de.allowed;
            flagged += (dd.flags & SRL_DECISION_WOULD_DENY) != 0;
            ck_same_state(dry, enf, "k", what);
        }
        c->now += 500 * MS;   /* half a window: some refill, not all */
    }
    /* The first N + EXTRA at one instant: exactly EXTRA past the limit. */
    ck_assert_uint_ge(denied, EXTRA);
    ck_assert_uint_eq(flagged, denied);
    srl_stats se = stats(enf), sd = stats(dry);
    ck_assert_uint_eq(sd.allowed, se.allowed);
    ck_assert_uint_eq(sd.denied, se.denied);
    ck_assert_uint_eq(se.denied, denied);
    ck_assert_uint_eq(sd.would_deny, denied);
    ck_assert_uint_eq(se.would_deny, 0);
    if (kind != ST_LOCAL) {
        ck_assert_int_eq(srl_check(dry, NULL, NULL), 0);
        ck_assert_int_eq(srl_check(enf, NULL, NULL), 0);
    }
    close_store(enf, ne);
    close_store(dry, nd);
}
END_TEST

START_TEST(an_enforcing_and_a_dry_run_handle_on_one_segment_share_the_state_and_the_counts)
{
    fake_clock *c = fake_clock_shared(7 * SEC);
    srl_config ce = config("token_bucket:5/1m", c, 0);
    srl_config cd = config("token_bucket:5/1m", c, SRL_CONFIG_DRY_RUN);
    char nm[128];
    strcpy(nm, unique_name("dry"));
    srl_limiter *enf, *dry, *adopted;
    ck_assert_int_eq(srl_open_shared(nm, &ce, SRL_CREATE | SRL_EXCL, &enf), 0);
    ck_assert_int_eq(srl_open_shared(nm, &cd, 0, &dry), 0);      /* not compared */
    ck_assert_int_eq(srl_open_shared(nm, &cd, SRL_ADOPT, &adopted), 0);
    srl_decision d;
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_int_eq(srl_acquire(enf, "k", 1, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
    }
    for (unsigned i = 0; i < 2; i++) {   /* the dry handle takes from the same state */
        ck_assert_int_eq(srl_acquire(dry, "k", 1, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.flags, 0);
        ck_assert_uint_eq(d.remaining, 1 - i);
    }
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_int_eq(srl_acquire(dry, "k", 1, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.flags, SRL_DECISION_WOULD_DENY);
        ck_assert_uint_eq(d.retry_after_ns, 12 * SEC);
        ck_assert_uint_eq(d.remaining, 0);
    }
    ck_assert_int_eq(srl_acquire(adopted, "k", 1, 1, &d), 0);    /* SRL_ADOPT keeps cfg's flag */
    ck_assert_uint_eq(d.flags, SRL_DECISION_WOULD_DENY);
    ck_assert_int_eq(srl_acquire(enf, "k", 1, 1, &d), 0);        /* the enforcing one refuses */
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_uint_eq(d.retry_after_ns, 12 * SEC);
    srl_stats st = stats(enf);   /* the segment's counts, whichever handle reads them */
    ck_assert_uint_eq(st.allowed, 5);
    ck_assert_uint_eq(st.denied, 5);
    ck_assert_uint_eq(st.would_deny, 4);
    ck_assert_uint_eq(stats(dry).would_deny, 4);
    ck_assert_int_eq(srl_check(enf, NULL, NULL), 0);
    srl_close(adopted);
    srl_close(dry);
    close_store(enf, nm);
}
END_TEST

/* _i: store kind. */
START_TEST(a_dry_run_enter_that_would_be_refused_is_admitted_without_a_unit)
{
    char nm[128];
    srl_limiter *dry = open_dry(_i, "concurrency:2", nm);
    srl_lease held[2], extra;
    srl_decision d;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(srl_enter(dry, "k", 1, &held[i], &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.flags, 0);
        ck_assert_uint_ne(held[i].gen, 0);
    }
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(srl_enter(dry, "k", 1, &extra, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.flags, SRL_DECISION_WOULD_DENY);
        ck_assert_uint_eq(d.remaining, 0);
        ck_assert_uint_eq(d.retry_after_ns, SEC);   /* the denial's hint, kept */
        ck_assert_uint_eq(extra.gen, 0);            /* no unit taken */
        ck_assert_int_eq(srl_leave(dry, &extra), SRL_ENOENT);
        ck_assert_uint_eq(inflight_total(dry), 2);
    }
    ck_counts(dry, 2, 3, 3);
    ck_assert_int_eq(srl_leave(dry, &held[0]), 0);
    ck_assert_int_eq(srl_enter(dry, "k", 1, &extra, &d), 0);   /* a unit is free again */
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_uint_ne(extra.gen, 0);
    close_store(dry, nm);
}
END_TEST

/* _i: store kind.  A compound with a concurrency limit: a would-be refusal
 * by either limit takes no unit and no permit. */
START_TEST(a_dry_run_compound_enter_takes_nothing_when_either_limit_would_refuse)
{
    char nm[128];
    srl_limiter *dry = open_dry(_i, "concurrency:2 + token_bucket:3/1h", nm);
    srl_lease l1, l2, l3;
    srl_decision d;
    ck_assert_int_eq(srl_enter(dry, "k", 1, &l1, &d), 0);
    ck_assert_int_eq(srl_enter(dry, "k", 1, &l2, &d), 0);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_int_eq(srl_enter(dry, "k", 1, &l3, &d), 0);      /* no unit free */
    ck_assert_uint_eq(d.flags, SRL_DECISION_WOULD_DENY);
    ck_assert_uint_eq(l3.gen, 0);
    ck_assert_uint_eq(d.binding, 0);
    ck_assert_int_eq(srl_leave(dry, &l1), 0);
    ck_assert_int_eq(srl_enter(dry, "k", 1, &l1, &d), 0);      /* the third permit */
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_uint_ne(l1.gen, 0);
    ck_assert_int_eq(srl_leave(dry, &l1), 0);
    ck_assert_int_eq(srl_enter(dry, "k", 1, &l1, &d), 0);      /* a unit, no permit */
    ck_assert_uint_eq(d.flags, SRL_DECISION_WOULD_DENY);
    ck_assert_uint_eq(d.binding, 1);
    ck_assert_uint_eq(d.retry_after_ns, 1200 * SEC);
    ck_assert_uint_eq(l1.gen, 0);
    ck_assert_uint_eq(inflight_total(dry), 1);
    ck_counts(dry, 3, 2, 2);
    close_store(dry, nm);
}
END_TEST

/* _i: store kind. */
START_TEST(a_dry_run_peek_turns_like_acquire_and_counts_nothing)
{
    char nm[128];
    srl_limiter *dry = open_dry(_i, "sliding_log:2/1s", nm);
    srl_decision d;
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(srl_acquire(dry, "k", 1, 1, &d), 0);
    ck_assert_int_eq(srl_peek(dry, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.flags, SRL_DECISION_WOULD_DENY);
    ck_assert_uint_eq(d.retry_after_ns, SEC);
    ck_counts(dry, 2, 0, 0);
    close_store(dry, nm);
}
END_TEST

/* _i: store kind.  srl_reserve on a dry-run handle: the reservations the
 * enforcing twin makes are made alike (same wait), the one it refuses
 * (a wait above max_wait) is allowed with WOULD_DENY and wait_ns 0, takes
 * nothing, and is counted; the states stay equal. */
START_TEST(a_dry_run_reservation_that_would_be_refused_is_allowed_and_takes_nothing)
{
    fake_clock *c = fake_clock_shared(7 * SEC);
    srl_config ce = config("gcra:2/1s", c, 0), cd = config("gcra:2/1s", c, SRL_CONFIG_DRY_RUN);
    char ne[128], nd[128];
    srl_limiter *enf = open_store(_i, &ce, ne), *dry = open_store(_i, &cd, nd);
    /* 2 at once, the third 500 ms ahead, the fourth would wait 1 s > 600 ms. */
    const uint64_t want_wait[] = {0, 0, 500 * MS, 0};
    for (unsigned i = 0; i < 4; i++) {
        srl_decision de, dd;
        ck_assert_int_eq(srl_reserve(enf, "k", 1, 1, 600 * MS, &de), 0);
        ck_assert_int_eq(srl_reserve(dry, "k", 1, 1, 600 * MS, &dd), 0);
        ck_assert_int_eq(de.allowed, i < 3);
        ck_dry_matches(&dd, &de, store_names[_i], i);
        ck_assert_uint_eq(de.wait_ns, want_wait[i]);
        ck_assert_uint_eq(dd.wait_ns, want_wait[i]);
    }
    ck_same_state(dry, enf, "k", store_names[_i]);
    srl_stats sd = stats(dry), se = stats(enf);
    ck_assert_uint_eq(sd.would_deny, 1);
    ck_assert_uint_eq(se.would_deny, 0);
    ck_assert_uint_eq(sd.denied, se.denied);
    ck_assert_uint_eq(sd.allowed, se.allowed);
    close_store(dry, nd);
    close_store(enf, ne);
}
END_TEST

/* _i: store kind.  A full table with on_full deny: the dry run admits. */
START_TEST(a_dry_run_on_a_full_table_that_denies_admits_and_counts_it)
{
    srl_config cd = dry_config("token_bucket:2/1h");
    cd.capacity = 1;                  /* a segment rounds up to one bucket */
    cd.on_full = SRL_ON_FULL_DENY;
    char nm[128];
    srl_limiter *dry = open_store(_i, &cd, nm);
    srl_stats st = stats(dry);
    uint64_t keys = st.capacity;
    srl_decision d = {0};
    char key[32];
    for (uint64_t i = 0; i <= keys * 4 && !(d.flags & SRL_DECISION_UNTRACKED); i++) {
        snprintf(key, sizeof key, "key-%llu", (unsigned long long)i);
        ck_assert_int_eq(srl_acquire(dry, key, strlen(key), 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
    }
    ck_assert_uint_eq(d.flags, SRL_DECISION_UNTRACKED | SRL_DECISION_WOULD_DENY);
    st = stats(dry);
    ck_assert_uint_eq(st.full, 1);
    ck_assert_uint_eq(st.denied, 1);
    ck_assert_uint_eq(st.would_deny, 1);
    close_store(dry, nm);
}
END_TEST

/* A bucket lock held by a live process: the degraded on_full denial is
 * turned as well (the error code stays), and counted nowhere. */
START_TEST(a_dry_run_degraded_denial_is_turned_and_not_counted)
{
    srl_config cd = dry_config("token_bucket:2/1h");
    cd.capacity = 1;                  /* one bucket: every key's */
    cd.on_full = SRL_ON_FULL_DENY;
    cd.lock_timeout_ms = 20;
    srl_limiter *dry;
    ck_assert_int_eq(srl_open_anonymous(&cd, &dry), 0);
    struct srl__shm *s = dry->impl;
    ck_assert_uint_eq(s->buckets, 1);
    int go[2], done[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(done), 0);
    pid_t pid = test_fork();
    if (pid == 0) {
        struct timespec dl = srl__shm_deadline(s);
        char x = 1;
        if (srl__shm_lock(s, 0, &dl) != 0 || write(go[1], &x, 1) != 1 || read(done[0], &x, 1) != 1)
            _exit(1);
        srl__shm_unlock(s, 0);
        _exit(0);
    }
    char x;
    ck_assert_int_eq(read(go[0], &x, 1), 1);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(dry, "k", 1, 1, &d), SRL_ETIMEDOUT);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED | SRL_DECISION_WOULD_DENY);
    ck_assert_int_eq(write(done[1], &x, 1), 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    srl_stats st = stats(dry);
    ck_assert_uint_eq(st.timeouts, 1);
    ck_assert_uint_eq(st.denied, 0);
    ck_assert_uint_eq(st.would_deny, 0);
    srl_close(dry);
}
END_TEST

START_TEST(an_unknown_config_flag_or_reserved_word_is_refused)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_uint_eq(cfg.flags, 0);
    srl_limiter *lim;
    cfg.flags = 0x10u;  /* 0x2 FLOOD_CACHE, 0x4 LOCKFREE, 0x8 FORCE: the next bit is unknown */
    ck_assert_int_eq(srl_open_local(&cfg, &lim), SRL_EINVAL);
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), SRL_EINVAL);
    cfg.flags = SRL_CONFIG_DRY_RUN;
    cfg.reserved[1] = 1;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), SRL_EINVAL);
    cfg.reserved[1] = 0;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------- 8 processes */

#define WORKERS 8
#define TRIALS 5
#define TRIES 300
#define PERMITS 500u

struct area {
    struct spin_barrier barrier;
    uint32_t refused[TRIALS];       /* allowed == 0 seen: must stay 0 */
    uint32_t flagged[TRIALS];       /* WOULD_DENY seen */
    uint32_t errors;
};

static void worker(srl_limiter *lim, struct area *a)
{
    for (int t = 0; t < TRIALS; t++) {
        char key[32];
        snprintf(key, sizeof key, "trial-%d", t);
        spin_barrier_wait(&a->barrier, WORKERS);
        uint32_t refused = 0, flagged = 0;
        for (int i = 0; i < TRIES; i++) {
            srl_decision d = {0};
            if (srl_acquire(lim, key, strlen(key), 1, &d) != 0)
                __atomic_fetch_add(&a->errors, 1, __ATOMIC_RELAXED);
            refused += !d.allowed;
            flagged += (d.flags & SRL_DECISION_WOULD_DENY) != 0;
        }
        __atomic_fetch_add(&a->refused[t], refused, __ATOMIC_RELAXED);
        __atomic_fetch_add(&a->flagged[t], flagged, __ATOMIC_RELAXED);
    }
}

START_TEST(eight_processes_in_dry_run_on_one_key_count_exactly_the_would_be_denials)
{
    fake_clock *c = fake_clock_shared(5 * SEC);   /* frozen: nothing refills */
    srl_config cfg = config("sliding_log:500/1m", c, SRL_CONFIG_DRY_RUN);
    char nm[128];
    strcpy(nm, unique_name("dry-race"));
    struct area *a = shared_zeroed(sizeof *a);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = test_fork();
        if (pids[w] == 0) {
            srl_limiter *lim = NULL;
            if (srl_open_shared(nm, &cfg, SRL_CREATE, &lim) != 0)
                _exit(2);
            worker(lim, a);
            srl_close(lim);
            _exit(0);
        }
    }
    for (int w = 0; w < WORKERS; w++) {
        int status;
        ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "worker %d ended with status %#x", w, status);
    }
    ck_assert_uint_eq(a->errors, 0);
    const uint32_t over = WORKERS * TRIES - PERMITS;
    for (int t = 0; t < TRIALS; t++) {
        ck_assert_uint_eq(a->refused[t], 0);
        ck_assert_msg(a->flagged[t] == over, "trial %d: %u flagged, want %u", t, a->flagged[t],
                      over);
    }
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(nm, &cfg, 0, &lim), 0);
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.allowed, (uint64_t)TRIALS * PERMITS);
    ck_assert_uint_eq(st.denied, (uint64_t)TRIALS * over);
    ck_assert_msg(st.would_deny == (uint64_t)TRIALS * over, "would_deny %llu, want %llu",
                  (unsigned long long)st.would_deny, (unsigned long long)TRIALS * over);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(nm), 0);
    munmap(a, sizeof *a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dry_run");
    TCase *tc = tcase_create("stores");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(
        tc, a_dry_run_allows_every_request_flags_exactly_the_denials_and_keeps_the_enforcing_state,
        0, ST_COUNT * (int)N_POLICIES);
    tcase_add_test(tc, an_enforcing_and_a_dry_run_handle_on_one_segment_share_the_state_and_the_counts);
    tcase_add_loop_test(tc, a_dry_run_enter_that_would_be_refused_is_admitted_without_a_unit, 0,
                        ST_COUNT);
    tcase_add_loop_test(tc, a_dry_run_compound_enter_takes_nothing_when_either_limit_would_refuse,
                        0, ST_COUNT);
    tcase_add_loop_test(tc, a_dry_run_peek_turns_like_acquire_and_counts_nothing, 0, ST_COUNT);
    tcase_add_loop_test(tc, a_dry_run_reservation_that_would_be_refused_is_allowed_and_takes_nothing, 0,
                        ST_COUNT);
    tcase_add_loop_test(tc, a_dry_run_on_a_full_table_that_denies_admits_and_counts_it, 0,
                        ST_COUNT);
    tcase_add_test(tc, a_dry_run_degraded_denial_is_turned_and_not_counted);
    tcase_add_test(tc, an_unknown_config_flag_or_reserved_word_is_refused);
    tcase_add_test(tc, eight_processes_in_dry_run_on_one_key_count_exactly_the_would_be_denials);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"dry", "dry-race"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
