/*
 * check_local_evict.c - on_full=evict on the in-process store (srl_open_local;
 * src/local/local_index.c, reclaim_some and evict_active; issue 41 item 7).
 * Each test runs on a locked handle (token_bucket) and on a lock-free one
 * (SRL_CONFIG_LOCKFREE, gcra of the same rate): _i 0 and 1.
 *
 *   - A table that is full all the time: 8 threads each ask for a stream of
 *     new keys, while every one of them also hammers own-limits keys (locked
 *     handle only: a lock-free one refuses them), 4 plain keys whose limit
 *     is used up, a banned key and an exempt probe.  Exactly: every new key
 *     is decided by a state (admitted, never UNTRACKED: srl_stats.full 0);
 *     the own-limits keys admit their 5 each, the used-up keys and the
 *     banned key none (a fresh state would admit again: so none of them
 *     was evicted), the probe is never refused and is still exempt at the
 *     end; srl_stats.evicted_active == inserts - free slots (each insert
 *     past the free slots took one active key's slot) and used == capacity.
 *   - Kept keys under a flood: an exempt, a banned and an own-limits key
 *     that have used less of their limits than any other key (so that the
 *     least-used rule alone would pick them) are still tracked, with their
 *     control and their exact use, after 8 threads x 100 new keys.
 *   - The least-used key is the one evicted, a deterministic trace on one
 *     thread: ties to the oldest last admission (token bucket: gcra keeps
 *     none), an at-rest key before any active one (counted in evicted, not
 *     evicted_active), an evicted key back fresh, every other key's use
 *     exact through it all.
 * The ticker is a fake one that moves only where the test moves it: no
 * token comes back during a race (one per 12 minutes, the races move the
 * clock by 1 ms a step), so "exactly" is the whole truth.  Threads start
 * together at a barrier and report through counters; only the main thread
 * asserts.  Nothing timed is asserted.
 */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "srl.h"
#include "testutil.h"

#define THREADS 8
#define STEPS 150
#define OWN 8
#define HOT 4
#define HOUR (3600ull * SEC)

/* On full evict, capacity keys, the clock at clock: token_bucket:5/1h, or
 * (lockfree) gcra:5/1h on a lock-free handle. */
static srl_limiter *open_evict(int lockfree, uint64_t capacity, const char *rate,
                               fake_clock *clock)
{
    srl_config cfg;
    srl_config_init(&cfg);
    char text[64];
    snprintf(text, sizeof text, "%s:%s", lockfree ? "gcra" : "token_bucket", rate);
    ck_assert_int_eq(srl_limits_parse_ex(text, &cfg.limits, NULL), 0);
    cfg.capacity = capacity;
    cfg.key_display = 32;   /* srl_foreach names the keys */
    cfg.on_full = SRL_ON_FULL_EVICT;
    cfg.ticker = fake_ticker(clock);
    if (lockfree)
        cfg.flags |= SRL_CONFIG_LOCKFREE;
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_int_eq(info.on_full, SRL_ON_FULL_EVICT);
    ck_assert_uint_eq(info.capacity, capacity);
    return lim;
}

static int keyf(char *buf, size_t n, const char *tag, int i, int j)
{
    return snprintf(buf, n, "%s-%d-%d", tag, i, j);
}

/* ------------------------------------------------ the 8-thread full table */

struct race {
    srl_limiter *lim;
    fake_clock *clock;
    pthread_barrier_t go;
    int own;   /* own-limits keys in play (0 on a lock-free handle) */
    srl_limits one;   /* the hot keys' limits per call, 1/1h (locked handle) */
    uint32_t own_admitted[OWN], hot_admitted[HOT];
    uint32_t banned_admitted, probe_denied, new_refused, new_untracked, errors;
};

struct worker {
    struct race *r;
    int w;
};

static void tally(struct race *r, int rc, const srl_decision *d, uint32_t *on_allowed,
                  uint32_t *on_denied)
{
    if (rc != 0)
        __atomic_add_fetch(&r->errors, 1, __ATOMIC_RELAXED);
    else if (d->allowed && on_allowed != NULL)
        __atomic_add_fetch(on_allowed, 1, __ATOMIC_RELAXED);
    else if (!d->allowed && on_denied != NULL)
        __atomic_add_fetch(on_denied, 1, __ATOMIC_RELAXED);
}

/* A hot key's request: on the locked handle with its limits of 1 per call
 * (each fresh state of it admits exactly one: so its admissions count the
 * states it had), on the lock-free one by the policy (5). */
static int hot_acquire(struct race *r, const char *k, size_t len, srl_decision *d)
{
    if (r->own > 0)
        return srl_acquire_limits(r->lim, k, len, &r->one, 1, d);
    return srl_acquire(r->lim, k, len, 1, d);
}

/* srl_foreach: the hot keys' counts, their nodes' (allowed + denied of
 * the state they hold now). */
static int hot_counts(const srl_entry *e, void *ctx)
{
    uint64_t (*c)[2] = ctx;
    char name[48] = {0};
    memcpy(name, e->display, e->display_len < sizeof name - 1 ? e->display_len : sizeof name - 1);
    int h;
    if (sscanf(name, "hot-%d-0", &h) == 1 && h >= 0 && h < HOT) {
        c[h][0] = e->allowed;
        c[h][1] = e->denied;
    }
    return 0;
}

static void *race_worker(void *arg)
{
    struct worker *wk = arg;
    struct race *r = wk->r;
    srl_decision d;
    char k[48];
    pthread_barrier_wait(&r->go);
    for (int n = 0; n < STEPS; n++) {
        if (r->own > 0) {
            int o = (wk->w + n) % r->own;
            int len = keyf(k, sizeof k, "own", o, 0);
            tally(r, srl_acquire(r->lim, k, (size_t)len, 1, &d), &d, &r->own_admitted[o], NULL);
        }
        int len = keyf(k, sizeof k, "hot", n % HOT, 0);
        tally(r, hot_acquire(r, k, (size_t)len, &d), &d, &r->hot_admitted[n % HOT], NULL);
        tally(r, srl_acquire(r->lim, "banned", 6, 1, &d), &d, &r->banned_admitted, NULL);
        tally(r, srl_acquire(r->lim, "probe", 5, 1, &d), &d, NULL, &r->probe_denied);
        len = keyf(k, sizeof k, "new", wk->w, n);
        int rc = srl_acquire(r->lim, k, (size_t)len, 1, &d);
        tally(r, rc, &d, NULL, &r->new_refused);
        if (rc == 0 && (d.flags & SRL_DECISION_UNTRACKED))
            __atomic_add_fetch(&r->new_untracked, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&r->clock->now, 1000000, __ATOMIC_RELAXED);   /* 1 ms */
    }
    return NULL;
}

/* Run THREADS race_workers on r to the end. */
static void run_threads(pthread_barrier_t *go, void *(*fn)(void *), struct worker *wk,
                        void *r)
{
    pthread_t t[THREADS];
    ck_assert_int_eq(pthread_barrier_init(go, NULL, THREADS), 0);
    for (int w = 0; w < THREADS; w++) {
        wk[w].r = r;
        wk[w].w = w;
        ck_assert_int_eq(pthread_create(&t[w], NULL, fn, &wk[w]), 0);
    }
    for (int w = 0; w < THREADS; w++)
        ck_assert_int_eq(pthread_join(t[w], NULL), 0);
    pthread_barrier_destroy(go);
}

START_TEST(a_full_table_with_on_full_evict_under_8_threads_stays_exact_and_admits_new_keys)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    static struct race r;
    memset(&r, 0, sizeof r);
    r.clock = clock;
    r.lim = open_evict(_i, 64, "5/1h", clock);
    r.own = _i ? 0 : OWN;
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:1/1h", &r.one, NULL), 0);
    uint32_t hot_limit = _i ? 5 : 1;
    srl_limits own;
    ck_assert_int_eq(srl_limits_parse_ex("token_bucket:5/1h", &own, NULL), 0);
    char key[48];
    for (int o = 0; o < r.own; o++) {
        int len = keyf(key, sizeof key, "own", o, 0);
        ck_assert_int_eq(srl_key_set_limits(r.lim, key, (size_t)len, &own), 0);
    }
    ck_assert_int_eq(srl_key_exempt(r.lim, "probe", 5, 1), 0);
    ck_assert_int_eq(srl_key_ban(r.lim, "banned", 6, HOUR, "test"), 0);
    srl_decision d;
    for (int h = 0; h < HOT; h++) {   /* used up before the race */
        int len = keyf(key, sizeof key, "hot", h, 0);
        for (uint32_t n = 0; n < hot_limit; n++) {
            ck_assert_int_eq(hot_acquire(&r, key, (size_t)len, &d), 0);
            ck_assert_int_eq(d.allowed, 1);
        }
    }
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(r.lim, &s), 0);
    uint64_t kept = (uint64_t)r.own + 2;   /* own-limits keys, probe, banned */
    ck_assert_uint_eq(s.used, kept + HOT);
    uint64_t free_slots = s.capacity - s.used;

    struct worker wk[THREADS];
    run_threads(&r.go, race_worker, wk, &r);

    ck_assert_uint_eq(r.errors, 0);
    ck_assert_uint_eq(r.new_refused, 0);
    ck_assert_uint_eq(r.new_untracked, 0);
    ck_assert_uint_eq(r.probe_denied, 0);
    ck_assert_uint_eq(r.banned_admitted, 0);
    for (int o = 0; o < r.own; o++)
        ck_assert_msg(r.own_admitted[o] == 5, "own-%d admitted %u", o, r.own_admitted[o]);
    /* A hot key whose node holds every request it had (its pre-race
     * admissions and all of the race's, denied) was never evicted: it
     * admitted nothing more.  One that was evicted (the least used of a
     * scan that, preempted, saw little else) started fresh, as the
     * contract says; on the locked handle each of its fresh states
     * admitted exactly one. */
    uint64_t counts[HOT][2] = {{0}};
    ck_assert_int_ge(srl_foreach(r.lim, hot_counts, counts), 0);
    uint64_t hot_again = 0;
    for (int h = 0; h < HOT; h++) {
        uint64_t hot_requests = (uint64_t)THREADS * ((STEPS - h + HOT - 1) / HOT);
        bool original = counts[h][0] == hot_limit && counts[h][1] == hot_requests;
        if (original)
            ck_assert_msg(r.hot_admitted[h] == 0, "hot-%d admitted %u more", h, r.hot_admitted[h]);
        else
            ck_assert_msg(r.hot_admitted[h] > 0, "hot-%d: a new state admitted nothing", h);
        hot_again += r.hot_admitted[h];
    }
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(r.lim, "probe", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_EXEMPT);
    ck_assert_int_eq(srl_key_control_get(r.lim, "banned", 6, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_BANNED);
    ck_assert_int_eq(srl_stats_get(r.lim, &s), 0);
    uint64_t inserts = (uint64_t)THREADS * STEPS;
    ck_assert_uint_eq(s.full, 0);
    ck_assert_uint_eq(s.used, s.capacity);
    /* Each insert past the free slots took an active key's slot: the new
     * keys' and the hot keys' fresh states (one per admission on the locked
     * handle; none on the lock-free one unless a hot key went). */
    if (!_i || hot_again == 0)
        ck_assert_uint_eq(s.evicted_active, inserts + hot_again - free_slots);
    else
        ck_assert_uint_ge(s.evicted_active, inserts + hot_again / hot_limit - free_slots);
    /* evicted also counts the at-rest reclaims: a fresh node another
     * thread's scan took before its first decision (its inserter then
     * inserted again, one insert more for each). */
    ck_assert_uint_ge(s.evicted, s.evicted_active);
    srl_close(r.lim);
}
END_TEST

/* ------------------------------------------------ kept keys under a flood */

struct flood {
    srl_limiter *lim;
    pthread_barrier_t go;
    uint32_t errors, untracked;
};

static void *flood_worker(void *arg)
{
    struct worker *wk = arg;
    struct flood *f = (struct flood *)wk->r;
    srl_decision d;
    char k[48];
    pthread_barrier_wait(&f->go);
    for (int n = 0; n < 100; n++) {
        int len = keyf(k, sizeof k, "flood", wk->w, n);
        for (int u = 0; u < 3; u++) {   /* 3 of 5: more than any kept key used */
            if (srl_acquire(f->lim, k, (size_t)len, 1, &d) != 0 || !d.allowed)
                __atomic_add_fetch(&f->errors, 1, __ATOMIC_RELAXED);
            else if (d.flags & SRL_DECISION_UNTRACKED)
                __atomic_add_fetch(&f->untracked, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

START_TEST(exempt_banned_and_own_limits_keys_are_never_evicted_under_a_flood_of_new_keys)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    static struct flood f;
    memset(&f, 0, sizeof f);
    f.lim = open_evict(_i, 32, "5/1h", clock);
    srl_decision d;
    /* Each kept key has been decided (a node no decision counted is never
     * an active victim) and has used less of its limit than the flood's
     * keys: an exempt key's state is never used, a banned one's neither,
     * the own-limits key 1 of 1000. */
    ck_assert_int_eq(srl_key_exempt(f.lim, "probe", 5, 1), 0);
    ck_assert_int_eq(srl_acquire(f.lim, "probe", 5, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_key_ban(f.lim, "banned", 6, HOUR, NULL), 0);
    ck_assert_int_eq(srl_acquire(f.lim, "banned", 6, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    if (!_i) {
        srl_limits big;
        ck_assert_int_eq(srl_limits_parse_ex("token_bucket:1000/1h", &big, NULL), 0);
        ck_assert_int_eq(srl_key_set_limits(f.lim, "own", 3, &big), 0);
        ck_assert_int_eq(srl_acquire(f.lim, "own", 3, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.remaining, 999);
    }
    struct worker wk[THREADS];
    run_threads(&f.go, flood_worker, wk, &f);
    ck_assert_uint_eq(f.errors, 0);
    ck_assert_uint_eq(f.untracked, 0);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(f.lim, "probe", 5, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_EXEMPT);
    ck_assert_int_eq(srl_key_control_get(f.lim, "banned", 6, &kc), 0);
    ck_assert_uint_eq(kc.flags, SRL_KEY_BANNED);
    if (!_i) {
        ck_assert_int_eq(srl_key_control_get(f.lim, "own", 3, &kc), 0);
        ck_assert_uint_eq(kc.flags, SRL_KEY_OWN_LIMITS);
        ck_assert_int_eq(srl_peek(f.lim, "own", 3, 1, &d), 0);
        ck_assert_uint_eq(d.remaining, 998);   /* its one use kept: never fresh */
    }
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(f.lim, &s), 0);
    ck_assert_uint_eq(s.full, 0);
    /* At least one active key went for each insert past the free slots
     * (more when a flood key went between its uses and came back). */
    uint64_t kept = _i ? 2 : 3;
    ck_assert_uint_ge(s.evicted_active, (uint64_t)THREADS * 100 - (s.capacity - kept));
    srl_close(f.lim);
}
END_TEST

/* ------------------------------------------------ the deterministic trace */

/* n admissions of key, each admitted. */
static void use(srl_limiter *lim, const char *key, int n)
{
    srl_decision d;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(srl_acquire(lim, key, strlen(key), 1, &d), 0);
        ck_assert_msg(d.allowed && !(d.flags & SRL_DECISION_UNTRACKED), "%s #%d", key, i);
    }
}

/* key's use of its limit of 10 (what a peek finds left, subtracted), or -1
 * if it is not tracked. */
static int used(srl_limiter *lim, const char *key)
{
    srl_decision d;
    int rc = srl_peek(lim, key, strlen(key), 1, &d);
    if (rc == SRL_ENOENT)
        return -1;
    ck_assert_int_eq(rc, 0);
    return d.allowed ? 10 - (int)d.remaining - 1 : 10;
}

static void expect_evicted(srl_limiter *lim, uint64_t evicted, uint64_t active)
{
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);
    ck_assert_uint_eq(s.used, s.capacity);
    ck_assert_uint_eq(s.full, 0);
    ck_assert_uint_eq(s.evicted, evicted);
    ck_assert_uint_eq(s.evicted_active, active);
}

START_TEST(the_key_evicted_is_the_one_that_used_the_least_of_its_limit_ties_to_the_oldest)
{
    fake_clock *clock = fake_clock_shared(1000 * SEC);
    /* A capacity of 8: one scan sees every key. */
    srl_limiter *lim = open_evict(_i, 8, "10/1h", clock);
    const char *names[8] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"};
    int uses[8] = {5, 3, 8, 2, 6, 2, 9, 4};
    if (_i)
        uses[5] = 7;   /* gcra keeps no last admission: no tie to break */
    for (int i = 0; i < 8; i++) {
        use(lim, names[i], uses[i]);
        clock->now += SEC;   /* k3 admitted before k5 */
    }
    /* A new key: k3 goes (2 used, and k5's 2 came later), nothing else. */
    use(lim, "n1", 7);
    expect_evicted(lim, 1, 1);
    ck_assert_int_eq(used(lim, "k3"), -1);
    for (int i = 0; i < 8; i++)
        if (i != 3)
            ck_assert_int_eq(used(lim, names[i]), uses[i]);
    ck_assert_int_eq(used(lim, "n1"), 7);
    /* The next: the least used now, k5 (2; on gcra k1, 3). */
    clock->now += SEC;
    use(lim, "n2", 5);
    expect_evicted(lim, 2, 2);
    ck_assert_int_eq(used(lim, _i ? "k1" : "k5"), -1);
    /* k3 comes back fresh, 10 admitted as a new key's, in the slot of the
     * least used: k1 (3; on gcra k7, 4). */
    clock->now += SEC;
    use(lim, "k3", 10);
    expect_evicted(lim, 3, 3);
    ck_assert_int_eq(used(lim, "k3"), 10);
    ck_assert_int_eq(used(lim, _i ? "k7" : "k1"), -1);
    const char *left[7] = {"k0", "k2", "k4", _i ? "k5" : "k6", _i ? "k6" : "k7", "n1", "n2"};
    for (int i = 0; i < 7; i++)
        ck_assert_msg(used(lim, left[i]) > 0, "%s", left[i]);
    /* 31 minutes on, 5 tokens are back: every key that used 5 or less is
     * at rest (k0, n2, and k7 on the locked handle), and those go, all of
     * them, before any active key: counted in evicted only. */
    clock->now += 31 * 60 * SEC;
    use(lim, "n3", 1);
    uint64_t at_rest = _i ? 2 : 3;
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(lim, &s), 0);
    ck_assert_uint_eq(s.used, s.capacity - at_rest + 1);
    ck_assert_uint_eq(s.full, 0);
    ck_assert_uint_eq(s.evicted, 3 + at_rest);
    ck_assert_uint_eq(s.evicted_active, 3);
    ck_assert_int_eq(used(lim, "k0"), -1);
    ck_assert_int_eq(used(lim, "n2"), -1);
    if (!_i)
        ck_assert_int_eq(used(lim, "k7"), -1);
    /* The others are there, their use less the 5 tokens back. */
    ck_assert_int_eq(used(lim, "k2"), 3);
    ck_assert_int_eq(used(lim, "k4"), 1);
    ck_assert_int_eq(used(lim, "k6"), 4);
    ck_assert_int_eq(used(lim, "n1"), 2);
    ck_assert_int_eq(used(lim, "k3"), 5);
    ck_assert_int_eq(used(lim, "n3"), 1);
    srl_close(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("local_evict");
    TCase *tc = tcase_create("evict");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc,
                        a_full_table_with_on_full_evict_under_8_threads_stays_exact_and_admits_new_keys,
                        0, 2);
    tcase_add_loop_test(tc,
                        exempt_banned_and_own_limits_keys_are_never_evicted_under_a_flood_of_new_keys,
                        0, 2);
    tcase_add_loop_test(tc,
                        the_key_evicted_is_the_one_that_used_the_least_of_its_limit_ties_to_the_oldest,
                        0, 2);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
