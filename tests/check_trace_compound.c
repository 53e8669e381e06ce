/*
 * check_trace_compound.c - compound policies (several limits on a key, all
 * or nothing) decide on every store exactly as the host's core does
 * (srl_limits_state_*) on the same trace:
 *   - a differential trace per form: 300 requests of costs 1..a few, with
 *     bursts, long gaps and retries landing exactly where a denial said,
 *     peeks and refunds, each decision equal field by field (allowed,
 *     remaining, retry_after, reset_after, limit, binding, flags), P:stats
 *     equal to the trace's counts; ban periods too ("penalty=": a ban is
 *     not extended by the requests it refuses);
 *   - 8 forked processes (test_fork) flooding one key at a shared fake
 *     time, round after round with the time moved between rounds: the
 *     stores admit exactly what the core admits (a limit that takes a
 *     permit for a request another limit denies admits fewer).
 * Stores (loop index): STORE_SHARED (a named segment), STORE_REDIS
 * (srl_open_redis on a redis-server the test starts on a unix socket),
 * STORE_TIERED (srl_open_tiered: Redis fronted by a host segment; its
 * local answers, flagged SRL_DECISION_LOCAL, must deny as the core does
 * with the same retry_after).  The Redis handles take the ticker's time
 * (test hooks srl__redis_fixed_time, srl__tiered_redis), so the core and
 * the server see the same clock.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_testutil.h"
#include "shm_testutil.h"
#include "srl.h"
#include "testutil.h"

int srl__redis_fixed_time(srl_limiter *lim, int on);
srl_limiter *srl__tiered_redis(srl_limiter *lim);

enum { STORE_SHARED, STORE_REDIS, STORE_TIERED, STORES };

#define DAY (86400 * SEC)

/* A compound form: its text, the trace's shortest and longest window (for
 * the steps), the largest cost, the ticker's first time (an epoch that far
 * back: 0, 60 days, 10 years). */
struct form {
    const char *text;
    uint64_t short_w, long_w;
    uint32_t cost_max;
    uint64_t start;
};

static const struct form forms[] = {
    {"token_bucket:10/1s + token_bucket:60/1h", SEC, 3600 * SEC, 3, 0},
    {"gcra:5/1s + sliding_counter:20/1m", SEC, 60 * SEC, 2, 60 * DAY},
    {"sliding_log:7/1m + token_bucket:3/10s,burst=6", 10 * SEC, 60 * SEC, 3, 3660 * DAY},
    {"sliding_counter:9/10s + gcra:4/3s,burst=8 + sliding_log:30/5m", 3 * SEC, 300 * SEC, 2, 0},
    {"token_bucket:200/1m + gcra:1000003/7d + sliding_counter:500/1h + sliding_log:300/1h",
     60 * SEC, 7 * DAY, 100, 3660 * DAY},
    /* ban periods: a single limit's (decided by the compound script) and
     * a compound's, each limit its own */
    {"token_bucket:5/1s,penalty=2s", SEC, 10 * SEC, 2, 60 * DAY},
    {"gcra:5/1s,penalty=2s + sliding_log:30/1m,penalty=20s + sliding_counter:50/5m", SEC,
     300 * SEC, 3, 3660 * DAY},
};
#define N_FORMS (int)(sizeof forms / sizeof forms[0])

struct store {
    srl_limiter *lim;
    int kind;
    char name[64];
    pid_t server;
    char dir[64], sock[96];
};

static srl_limits parse(const char *text)
{
    srl_limits l;
    srl_policy_error pe;
    ck_assert_msg(srl_limits_parse_ex(text, &l, &pe) == 0, "%s: %s", text, pe.message);
    return l;
}

static struct store open_store(int kind, const srl_limits *l, fake_clock *clk, int n)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.limits = *l;
    cfg.capacity = 100;
    cfg.ticker = fake_ticker(clk);
    struct store st = {.kind = kind};
    if (kind == STORE_SHARED) {
        strcpy(st.name, unique_name("tcmp"));
        ck_assert_int_eq(srl_open_shared(st.name, &cfg, SRL_CREATE | SRL_EXCL, &st.lim), 0);
        return st;
    }
    snprintf(st.dir, sizeof st.dir, "/tmp/srl-tcmp-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(st.dir));
    snprintf(st.sock, sizeof st.sock, "%s/redis.sock", st.dir);
    st.server = redis_server_start(st.dir, st.sock, NULL);
    char uri[160];
    snprintf(uri, sizeof uri, "unix://%s?prefix=cmp%d", st.sock, n);
    srl_limiter *r;
    if (kind == STORE_REDIS) {
        ck_assert_int_eq(srl_open_redis(uri, &cfg, &st.lim), 0);
        r = st.lim;
    } else {
        strcpy(st.name, unique_name("tcmp"));
        ck_assert_int_eq(srl_open_tiered(st.name, uri, &cfg, SRL_CREATE | SRL_EXCL, &st.lim), 0);
        r = srl__tiered_redis(st.lim);
        ck_assert_ptr_nonnull(r);
    }
    ck_assert_int_eq(srl__redis_fixed_time(r, 1), 0);
    return st;
}

static void close_store(struct store *st)
{
    srl_close(st->lim);
    if (st->name[0] != '\0')
        ck_assert_int_eq(srl_unlink(st->name), 0);
    if (st->server > 0) {
        redis_server_stop(st->server);
        unlink(st->sock);
        rmdir(st->dir);
    }
}

/* d (the store's) equals e (the core's); a tiered store's local answer is
 * a denial the core gives too, its retry_after a lower bound of the
 * core's (the host remembers the wait of the cost Redis denied; a larger
 * cost waits longer: srl.h, srl_open_tiered). */
static void same(int kind, const srl_decision *d, const srl_decision *e, int step)
{
    if (kind == STORE_TIERED && (d->flags & SRL_DECISION_LOCAL)) {
        ck_assert_msg(!d->allowed && !e->allowed && d->retry_after_ns > 0 &&
                          d->retry_after_ns <= e->retry_after_ns,
                      "step %d: local %d/%llu, core %d/%llu", step, d->allowed,
                      (unsigned long long)d->retry_after_ns, e->allowed,
                      (unsigned long long)e->retry_after_ns);
        return;
    }
    ck_assert_msg(d->allowed == e->allowed && d->remaining == e->remaining &&
                      d->retry_after_ns == e->retry_after_ns &&
                      d->reset_after_ns == e->reset_after_ns && d->limit == e->limit &&
                      d->binding == e->binding && d->flags == e->flags,
                  "step %d: store %d/%u/%llu/%llu/lim %u/b %u/f %x, core %d/%u/%llu/%llu/lim "
                  "%u/b %u/f %x",
                  step, d->allowed, d->remaining, (unsigned long long)d->retry_after_ns,
                  (unsigned long long)d->reset_after_ns, d->limit, d->binding, d->flags,
                  e->allowed, e->remaining, (unsigned long long)e->retry_after_ns,
                  (unsigned long long)e->reset_after_ns, e->limit, e->binding, e->flags);
}

/* The Redis key's PTTL in ms (-2: none). */
static long long pttl(const char *sock, const char *key)
{
    redisContext *c = redisConnectUnix(sock);
    ck_assert(c != NULL && c->err == 0);
    redisReply *r = redisCommand(c, "PTTL %s", key);
    ck_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

static uint32_t min_capacity(const srl_limits *l)
{
    uint32_t m = UINT32_MAX;
    for (uint32_t i = 0; i < l->count; i++) {
        uint32_t c = l->limit[i].burst ? l->limit[i].burst : l->limit[i].permits;
        m = c < m ? c : m;
    }
    return m;
}

/* _i: store * N_FORMS + form. */
START_TEST(compound_trace_equals_the_core)
{
    int kind = _i / N_FORMS;
    const struct form *f = &forms[_i % N_FORMS];
    srl_limits l = parse(f->text);
    fake_clock *clk = fake_clock_shared(f->start);
    struct store st = open_store(kind, &l, clk, _i);
    size_t size = srl_limits_state_size(&l);
    uint64_t *state = calloc(1, size), *fresh = calloc(1, size);
    ck_assert_int_eq(srl_limits_state_init(&l, state, clk->now), 0);
    uint32_t cap = min_capacity(&l), cost_max = f->cost_max < cap ? f->cost_max : cap;
    srl_decision d, e;
    ck_assert_int_eq(srl_peek(st.lim, "k", 1, 1, &d), SRL_ENOENT);
    uint64_t seed = 777 + (uint64_t)(_i % N_FORMS);   /* each store the same trace */
    unsigned allowed = 0, denied = 0, refunds = 0, bindings = 0;
    for (int i = 0; i < 300; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t step = (seed >> 59) % 16 == 0  ? (seed >> 8) % (f->long_w / 4)
                        : (seed >> 60) % 4 == 0 ? (seed >> 8) % f->short_w
                                                : (seed >> 8) % (f->short_w / 20);
        if (i > 0 && !d.allowed && (seed >> 40) % 2 == 0)
            step = d.retry_after_ns;   /* exactly where a denial said to retry */
        clk->now += step;
        uint32_t cost = 1 + (uint32_t)((seed >> 24) % cost_max);
        if (i > 0) {
            ck_assert_int_eq(srl_limits_state_peek(&l, state, clk->now, cost, &e), 0);
            int prc = srl_peek(st.lim, "k", 1, cost, &d);
            if (prc == SRL_ENOENT) {
                /* at rest and dropped: the core must decide as a fresh key */
                ck_assert_int_eq(srl_limits_state_init(&l, fresh, clk->now), 0);
                ck_assert_int_eq(srl_limits_state_peek(&l, fresh, clk->now, cost, &d), 0);
            } else {
                ck_assert_int_eq(prc, 0);
            }
            same(kind, &d, &e, i);
        }
        ck_assert_int_eq(srl_acquire(st.lim, "k", 1, cost, &d), 0);
        ck_assert_int_eq(srl_limits_state_acquire(&l, state, clk->now, cost, &e), 0);
        same(kind, &d, &e, i);
        allowed += d.allowed;
        denied += !d.allowed;
        bindings |= 1u << e.binding;
        if (d.allowed && (seed >> 30) % 5 == 0) {
            uint32_t back = 1 + (uint32_t)((seed >> 20) % cost_max);
            ck_assert_int_eq(srl_refund(st.lim, "k", 1, back), 0);
            ck_assert_int_eq(srl_limits_state_refund(&l, state, clk->now, back), 0);
            refunds++;
        }
    }
    /* The trace is worth something: both outcomes, refunds, and more than
     * one limit binding. */
    ck_assert_uint_gt(allowed, 20);
    ck_assert_uint_gt(denied, 5);
    ck_assert_uint_gt(refunds, 5);
    if (l.count > 1)
        ck_assert_uint_ne(bindings & (bindings - 1), 0);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(st.lim, &s), 0);
    ck_assert_uint_eq(s.allowed, allowed);
    ck_assert_uint_eq(s.denied + s.local_denied, denied);
    if (kind != STORE_SHARED) {
        /* Every limit at rest, then one admission: the key's entry lives
         * until its last limit comes to rest (the decision's reset_after,
         * the longest), not its first. */
        clk->now += 2 * f->long_w;
        ck_assert_int_eq(srl_acquire(st.lim, "k", 1, 1, &d), 0);
        ck_assert(d.allowed);
        long long want = (long long)((d.reset_after_ns + MS - 1) / MS);
        char key[32];
        snprintf(key, sizeof key, "cmp%d:k:k", _i);
        long long t = pttl(st.sock, key);
        /* (want is a minute or more in every form: half of it is no race
         * with the server's clock, and an entry kept for the first limit's
         * rest alone lives well under that.) */
        ck_assert_msg(t <= want && t > want / 2, "PTTL %lld ms, reset_after %lld ms", t, want);
    }
    free(state);
    free(fresh);
    close_store(&st);
}
END_TEST

/* The flood's forms: nothing refills between a round's requests (one fake
 * time per round), and the limits bind in turn as rounds go by. */
static const char *const flood_forms[] = {
    "token_bucket:100/1s + token_bucket:1000/1h",
    "gcra:50/1s + sliding_log:300/1h + sliding_counter:400/1h",
    /* banned for 2.5 s by the first round's denials: rounds 1 and 2 admit
     * nothing (their refusals do not extend the ban), round 3 again */
    "token_bucket:100/1s,penalty=2500ms + token_bucket:1000/1h",
};
#define N_FLOOD (int)(sizeof flood_forms / sizeof flood_forms[0])
#define ROUNDS 6

/* _i: store * N_FLOOD + form. */
START_TEST(eight_processes_admit_what_the_core_admits)
{
    int kind = _i / N_FLOOD;
    srl_limits l = parse(flood_forms[_i % N_FLOOD]);
    fake_clock *clk = fake_clock_shared(5 * SEC);
    struct store st = open_store(kind, &l, clk, 100 + _i);
    uint64_t *state = calloc(1, srl_limits_state_size(&l));
    ck_assert_int_eq(srl_limits_state_init(&l, state, clk->now), 0);
    unsigned total = 0, want_total = 0;
    for (int round = 0; round < ROUNDS; round++) {
        /* The core: admissions until the first denial; the other seven
         * denials change nothing (all or nothing). */
        srl_decision e;
        unsigned want = 0;
        while (srl_limits_state_acquire(&l, state, clk->now, 1, &e) == 0 && e.allowed)
            want++;
        unsigned got = redis_fork_flood(st.lim, "hot");
        ck_assert_msg(got == want, "round %d: the store admitted %u, the core %u", round, got,
                      want);
        total += got;
        want_total += want;
        clk->now += SEC;   /* the short limits refill, the long ones barely */
    }
    ck_assert_uint_gt(want_total, 0);
    srl_stats s;
    ck_assert_int_eq(srl_stats_get(st.lim, &s), 0);
    ck_assert_uint_eq(s.allowed, total);
    ck_assert_uint_eq(s.denied + s.local_denied, 8 * ROUNDS);
    free(state);
    close_store(&st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace_compound");
    TCase *tc = tcase_create("compound");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, compound_trace_equals_the_core, 0, STORES * N_FORMS);
    tcase_add_loop_test(tc, eight_processes_admit_what_the_core_admits, 0, STORES * N_FLOOD);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"tcmp"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
