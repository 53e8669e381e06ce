/*
 * check_algo_concurrency.c - in-flight limits through the pure core
 * (algo_concurrency.c): admission up to N, exact leave by (entry, gen), a
 * second leave and a stale lease refused, dead holders and max_hold-expired
 * units reclaimed only when the key is full, a reused pid (same pid, other
 * start time) judged dead by proc.c, the generic srl_state_* view, policy
 * text round trips, and validity of the holder table.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algo.h"
#include "proc.h"
#include "srl.h"
#include "testutil.h"

static const srl_policy four = {.algorithm = SRL_CONCURRENCY, .permits = 4, .window_ns = 0};
static const srl_policy four_hold_10s = {.algorithm = SRL_CONCURRENCY, .permits = 4, .window_ns = 10 * SEC};

/* Liveness fake: pids listed in dead[] are dead, everyone else alive. */
struct fake {
    int32_t dead[8];
    unsigned n;
    unsigned calls;
};

static int fake_alive(const struct srl__proc *who, void *ctx)
{
    struct fake *f = ctx;
    f->calls++;
    for (unsigned i = 0; i < f->n; i++)
        if (f->dead[i] == who->pid)
            return 0;
    return 1;
}

static struct srl__proc proc_of(int32_t pid)
{
    struct srl__proc p = {pid, 1000 + (uint64_t)pid, 4026531836u};
    return p;
}

/* Enter for pid, returning gen (0: denied) and the entry in *entry. */
static uint32_t enter(const srl_policy *p, void *st, uint64_t now, int32_t pid,
                      struct fake *f, srl_decision *d, uint32_t *entry)
{
    struct srl__proc who = proc_of(pid);
    uint32_t gen = 12345;
    *entry = 999;
    srl__conc_enter(p, st, now, &who, fake_alive, f, d, entry, &gen);
    ck_assert_int_eq(srl_state_valid(p, st, now), 1);
    return gen;
}

START_TEST(concurrency_admits_exactly_n_then_denies_and_leave_frees_one)
{
    uint64_t st[64];
    struct fake f = {{0}, 0, 0};
    srl_decision d;
    uint32_t e[5], g[5];
    ck_assert_uint_eq(srl_state_size(&four), 16 + 4 * 32);
    ck_assert_int_eq(srl_state_init(&four, st, 0), 0);
    for (uint32_t i = 0; i < 4; i++) {
        g[i] = enter(&four, st, 10, 100 + (int32_t)i, &f, &d, &e[i]);
        ck_assert_uint_ne(g[i], 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.limit, 4);
        ck_assert_uint_eq(d.remaining, 3 - i);
        ck_assert_uint_eq(d.retry_after_ns, 0);
        ck_assert_uint_eq(srl__conc_inflight(st), i + 1);
    }
    ck_assert_uint_eq(f.calls, 0);   /* not full: no liveness check */
    g[4] = enter(&four, st, 20, 200, &f, &d, &e[4]);
    ck_assert_uint_eq(g[4], 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_uint_eq(d.retry_after_ns, 1 * SEC);   /* no max_hold: a 1 s hint */
    ck_assert_uint_eq(f.calls, 4);   /* full: every holder was asked */
    ck_assert_int_eq(srl__conc_leave(&four, st, e[2], g[2]), 0);
    ck_assert_uint_eq(srl__conc_inflight(st), 3);
    g[4] = enter(&four, st, 30, 200, &f, &d, &e[4]);
    ck_assert_uint_ne(g[4], 0);
    ck_assert_uint_eq(e[4], e[2]);          /* the freed entry is reused ... */
    ck_assert_uint_ne(g[4], g[2]);          /* ... under a new generation */
    ck_assert_uint_eq(d.remaining, 0);
}
END_TEST

START_TEST(concurrency_second_leave_and_stale_or_foreign_lease_release_nothing)
{
    uint64_t st[64];
    struct fake f = {{0}, 0, 0};
    srl_decision d;
    uint32_t e1, e2;
    srl_state_init(&four, st, 0);
    uint32_t g1 = enter(&four, st, 1, 100, &f, &d, &e1);
    ck_assert_int_eq(srl__conc_leave(&four, st, e1, g1), 0);
    ck_assert_int_eq(srl__conc_leave(&four, st, e1, g1), SRL_ENOENT);   /* twice */
    uint32_t g2 = enter(&four, st, 2, 101, &f, &d, &e2);
    ck_assert_uint_eq(e2, e1);
    /* The old lease names the same entry, now someone else's: refused. */
    ck_assert_int_eq(srl__conc_leave(&four, st, e1, g1), SRL_ENOENT);
    ck_assert_uint_eq(srl__conc_inflight(st), 1);
    ck_assert_int_eq(srl__conc_leave(&four, st, 4, g2), SRL_ENOENT);   /* entry out of range */
    ck_assert_int_eq(srl__conc_leave(&four, st, e2, 0), SRL_ENOENT);   /* gen 0: no lease */
    ck_assert_uint_eq(srl__conc_inflight(st), 1);
    ck_assert_int_eq(srl__conc_leave(&four, st, e2, g2), 0);
    ck_assert_uint_eq(srl__conc_inflight(st), 0);
    ck_assert_int_eq(srl_state_at_rest(&four, st, 3), 1);
}
END_TEST

START_TEST(concurrency_dead_holders_are_reclaimed_before_a_full_key_denies)
{
    uint64_t st[64];
    struct fake f = {{0}, 0, 0};
    srl_decision d;
    uint32_t e[4], g[4], en;
    srl_state_init(&four, st, 0);
    for (int i = 0; i < 4; i++)
        g[i] = enter(&four, st, 1, 100 + i, &f, &d, &e[i]);
    f.dead[f.n++] = 101;
    f.dead[f.n++] = 103;
    ck_assert_uint_ne(enter(&four, st, 2, 200, &f, &d, &en), 0);
    ck_assert_uint_eq(srl__conc_inflight(st), 3);   /* 2 reclaimed, 1 admitted */
    ck_assert_uint_eq(d.remaining, 1);
    /* The dead holders' leases are stale now: no double release. */
    ck_assert_int_eq(srl__conc_leave(&four, st, e[1], g[1]), SRL_ENOENT);
    ck_assert_uint_eq(srl__conc_inflight(st), 3);
    /* srl_evict_idle's path: reclaim without entering. */
    f.dead[f.n++] = 100;
    ck_assert_uint_eq(srl__conc_reclaim(&four, st, 3, fake_alive, &f), 1);
    ck_assert_uint_eq(srl__conc_inflight(st), 2);
    ck_assert_int_eq(srl__conc_leave(&four, st, e[0], g[0]), SRL_ENOENT);
    ck_assert_int_eq(srl__conc_leave(&four, st, e[2], g[2]), 0);
    ck_assert_int_eq(srl_state_valid(&four, st, 3), 1);
}
END_TEST

START_TEST(concurrency_max_hold_abandons_a_live_holder_exactly_at_the_limit)
{
    uint64_t st[64];
    struct fake f = {{0}, 0, 0};
    srl_decision d;
    uint32_t e, g0, g;
    srl_state_init(&four_hold_10s, st, 0);
    g0 = enter(&four_hold_10s, st, 0, 100, &f, &d, &e);
    for (int i = 1; i < 4; i++)
        enter(&four_hold_10s, st, 5 * SEC, 100 + i, &f, &d, &e);
    g = enter(&four_hold_10s, st, 10 * SEC - 1, 200, &f, &d, &e);
    ck_assert_uint_eq(g, 0);
    ck_assert_uint_eq(d.retry_after_ns, 1);          /* the oldest passes max_hold in 1 ns */
    ck_assert_uint_eq(d.reset_after_ns, 1);
    g = enter(&four_hold_10s, st, 10 * SEC, 200, &f, &d, &e);
    ck_assert_uint_ne(g, 0);                          /* pid 100 lives, but held 10 s */
    ck_assert_uint_eq(srl__conc_inflight(st), 4);
    ck_assert_int_eq(srl__conc_leave(&four_hold_10s, st, 0, g0), SRL_ENOENT);
}
END_TEST

START_TEST(concurrency_through_the_generic_core_peeks_but_never_acquires_or_refunds)
{
    uint64_t st[64], before[64];
    srl_decision d;
    struct fake f = {{0}, 0, 0};
    uint32_t e;
    srl_state_init(&four, st, 0);
    enter(&four, st, 1, 100, &f, &d, &e);
    memcpy(before, st, sizeof st);
    memset(&d, 0x5a, sizeof d);
    ck_assert_int_eq(srl_state_acquire(&four, st, 2, 1, &d), SRL_ENOTSUP);
    ck_assert_int_eq(srl_state_refund(&four, st, 2, 1), SRL_ENOTSUP);
    ck_assert_int_eq(memcmp(before, st, sizeof st), 0);
    ck_assert_int_eq(srl_state_peek(&four, st, 2, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 2);   /* 3 free, less the unit this entry would take */
    ck_assert_int_eq(srl_state_peek(&four, st, 2, 4, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(memcmp(before, st, sizeof st), 0);
    ck_assert_int_eq(srl_state_at_rest(&four, st, 2), 0);
    ck_assert_uint_eq(srl__algo_concurrency.last_ns(&four, st), 1);
}
END_TEST

START_TEST(concurrency_valid_rejects_every_broken_holder_table)
{
    uint64_t st[64], good[64];
    srl_decision d;
    struct fake f = {{0}, 0, 0};
    uint32_t e;
    srl_state_init(&four, good, 0);
    enter(&four, good, 5, 100, &f, &d, &e);
    enter(&four, good, 6, 101, &f, &d, &e);
    uint32_t *w = (uint32_t *)st;
    /* header: count, gen_seq, last_ns; entries at byte 16, 32 bytes each:
     * pid, gen, start, pidns, since_ns. */
    memcpy(st, good, sizeof st); w[0] = 3;                      /* count != used */
    ck_assert_int_eq(srl_state_valid(&four, st, 10), 0);
    memcpy(st, good, sizeof st); w[4 + 1 * 8 + 1] = w[4 + 1];   /* two entries, one gen */
    ck_assert_int_eq(srl_state_valid(&four, st, 10), 0);
    memcpy(st, good, sizeof st); w[4] = 0;                      /* held by pid 0 */
    ck_assert_int_eq(srl_state_valid(&four, st, 10), 0);
    memcpy(st, good, sizeof st); w[4 + 2 * 8] = 77;             /* a free entry with a pid */
    ck_assert_int_eq(srl_state_valid(&four, st, 10), 0);
    memcpy(st, good, sizeof st);
    ck_assert_int_eq(srl_state_valid(&four, st, 5), 0);         /* since in the future */
    ck_assert_int_eq(srl_state_valid(&four, st, 10), 1);
}
END_TEST

START_TEST(concurrency_a_reused_pid_is_not_the_holder)
{
    /* A real child: alive while it runs, then a record with its pid but
     * another start time (what a reused pid looks like) is dead. */
    pid_t c = test_fork();
    if (c == 0) {
        pause();
        _exit(0);
    }
    struct srl__proc self, child = {c, 0, 0};
    srl__proc_self(&self);
    ck_assert_uint_ne(self.start, 0);
    child.pidns = self.pidns;
    /* Its real start time from /proc via a record of the child itself. */
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)c);
    FILE *fp = fopen(path, "r");
    ck_assert_ptr_nonnull(fp);
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, fp));
    fclose(fp);
    char *p = strrchr(buf, ')') + 2;
    for (int field = 3; field < 22; field++)
        p = strchr(p, ' ') + 1;
    child.start = strtoull(p, NULL, 10);
    ck_assert_int_eq(srl__proc_state(&child), SRL__PROC_ALIVE);
    struct srl__proc reused = child;
    reused.start = child.start + 1;
    ck_assert_int_eq(srl__proc_state(&reused), SRL__PROC_DEAD);
    kill(c, SIGSTOP);                                  /* stopped is alive */
    ck_assert_int_eq(srl__proc_state(&child), SRL__PROC_ALIVE);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    ck_assert_int_eq(srl__proc_state(&child), SRL__PROC_DEAD);
}
END_TEST

START_TEST(concurrency_policy_text_round_trips_and_names_bad_parts)
{
    srl_policy p;
    srl_policy_error e;
    char buf[SRL_POLICY_TEXT_MAX];
    ck_assert_int_eq(srl_policy_parse("concurrency:4", &p), 0);
    ck_assert_int_eq(p.algorithm, SRL_CONCURRENCY);
    ck_assert_uint_eq(p.permits, 4);
    ck_assert_uint_eq(p.window_ns, 0);
    ck_assert_int_eq(srl_policy_format(&p, buf, sizeof buf), 13);
    ck_assert_str_eq(buf, "concurrency:4");
    ck_assert_int_eq(srl_policy_parse("concurrency:4,max_hold=60s", &p), 0);
    ck_assert_uint_eq(p.window_ns, 60 * SEC);
    srl_policy_format(&p, buf, sizeof buf);
    ck_assert_str_eq(buf, "concurrency:4,max_hold=1m");
    ck_assert_int_eq(srl_policy_parse_ex("concurrency:4/1s", &p, &e), SRL_EPOLICY);
    ck_assert_uint_eq(e.offset, 13);
    ck_assert_str_eq(e.message, "expected ',max_hold=WINDOW' or the end after concurrency:N, "
                                "e.g. concurrency:4,max_hold=60s");
    ck_assert_int_eq(srl_policy_parse_ex("concurrency:1025", &p, &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "concurrency N 1025 above 1024 (its state is 32 bytes per unit)");
    ck_assert_int_eq(srl_policy_parse_ex("concurrency:4,max_hold=0s", &p, &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "window must be 1ns or more");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("algo_concurrency");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, concurrency_admits_exactly_n_then_denies_and_leave_frees_one);
    tcase_add_test(tc, concurrency_second_leave_and_stale_or_foreign_lease_release_nothing);
    tcase_add_test(tc, concurrency_dead_holders_are_reclaimed_before_a_full_key_denies);
    tcase_add_test(tc, concurrency_max_hold_abandons_a_live_holder_exactly_at_the_limit);
    tcase_add_test(tc, concurrency_through_the_generic_core_peeks_but_never_acquires_or_refunds);
    tcase_add_test(tc, concurrency_valid_rejects_every_broken_holder_table);
    tcase_add_test(tc, concurrency_a_reused_pid_is_not_the_holder);
    tcase_add_test(tc, concurrency_policy_text_round_trips_and_names_bad_parts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
