/*
 * check_state.c - the public pure core (srl_state_*), the same contract for
 * every algorithm: argument errors and what they leave untouched, sizes and
 * alignment, peek == acquire without the write, and a fresh state's shape.
 * Each test is a loop test over the four algorithms (_i = srl_algorithm).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "srl.h"
#include "testutil.h"
#include "algotest.h"

#define STATE_MAX (8 + 8 * 16)

static srl_policy policy_of(int a)
{
    srl_policy p = {.algorithm = (srl_algorithm)a, .permits = 16, .window_ns = 4 * SEC};
    return p;
}

START_TEST(state_size_is_fixed_per_algorithm_and_zero_for_an_invalid_policy)
{
    static const size_t expect[] = {24, 8 + 8 * 16, 16, 8};
    srl_policy p = policy_of(_i);
    ck_assert_uint_eq(srl_state_size(&p), expect[_i]);
    ck_assert_uint_eq(srl_state_size(&p) % 8, 0);
    srl_policy bad = p;
    bad.permits = 0;
    ck_assert_uint_eq(srl_state_size(&bad), 0);
    bad = p;
    bad.window_ns = 0;
    ck_assert_uint_eq(srl_state_size(&bad), 0);
    ck_assert_uint_eq(srl_state_size(NULL), 0);
    srl_policy log = {.algorithm = SRL_SLIDING_LOG, .permits = SRL_SLIDING_LOG_PERMITS_MAX, .window_ns = SEC};
    ck_assert_uint_eq(srl_state_size(&log), 8 + 8 * SRL_SLIDING_LOG_PERMITS_MAX);
}
END_TEST

START_TEST(state_calls_with_null_arguments_are_einval_and_write_nothing)
{
    srl_policy p = policy_of(_i);
    uint64_t st[STATE_MAX / 8], before[STATE_MAX / 8];
    ck_assert_int_eq(srl_state_init(&p, st, 0), 0);
    memcpy(before, st, sizeof st);
    srl_decision d, dbefore;
    memset(&d, 0x3c, sizeof d);
    dbefore = d;
    ck_assert_int_eq(srl_state_init(NULL, st, 0), SRL_EINVAL);
    ck_assert_int_eq(srl_state_init(&p, NULL, 0), SRL_EINVAL);
    ck_assert_int_eq(srl_state_acquire(NULL, st, 0, 1, &d), SRL_EINVAL);
    ck_assert_int_eq(srl_state_acquire(&p, NULL, 0, 1, &d), SRL_EINVAL);
    ck_assert_int_eq(srl_state_acquire(&p, st, 0, 1, NULL), SRL_EINVAL);
    ck_assert_int_eq(srl_state_peek(NULL, st, 0, 1, &d), SRL_EINVAL);
    ck_assert_int_eq(srl_state_peek(&p, NULL, 0, 1, &d), SRL_EINVAL);
    ck_assert_int_eq(srl_state_peek(&p, st, 0, 1, NULL), SRL_EINVAL);
    ck_assert_int_eq(srl_state_at_rest(NULL, st, 0), SRL_EINVAL);
    ck_assert_int_eq(srl_state_at_rest(&p, NULL, 0), SRL_EINVAL);
    ck_assert_int_eq(srl_state_valid(NULL, st, 0), SRL_EINVAL);
    ck_assert_int_eq(srl_state_valid(&p, NULL, 0), SRL_EINVAL);
    ck_assert_mem_eq(st, before, sizeof st);
    ck_assert_mem_eq(&d, &dbefore, sizeof d);
}
END_TEST

START_TEST(state_calls_with_an_invalid_policy_are_epolicy_and_write_nothing)
{
    srl_policy good = policy_of(_i);
    srl_policy bads[3] = {good, good, good};
    bads[0].permits = 0;
    bads[1].window_ns = SRL_WINDOW_MAX_NS + 1;
    bads[2].algorithm = (srl_algorithm)7;
    uint64_t st[STATE_MAX / 8], before[STATE_MAX / 8];
    srl_state_init(&good, st, 0);
    memcpy(before, st, sizeof st);
    srl_decision d, dbefore;
    memset(&d, 0x3c, sizeof d);
    dbefore = d;
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(srl_state_init(&bads[k], st, 5), SRL_EPOLICY);
        ck_assert_int_eq(srl_state_acquire(&bads[k], st, 5, 1, &d), SRL_EPOLICY);
        ck_assert_int_eq(srl_state_peek(&bads[k], st, 5, 1, &d), SRL_EPOLICY);
        ck_assert_int_eq(srl_state_at_rest(&bads[k], st, 5), SRL_EPOLICY);
        ck_assert_int_eq(srl_state_valid(&bads[k], st, 5), SRL_EPOLICY);
    }
    ck_assert_mem_eq(st, before, sizeof st);
    ck_assert_mem_eq(&d, &dbefore, sizeof d);
}
END_TEST

START_TEST(state_cost_zero_or_above_permits_is_ecost_and_writes_nothing)
{
    srl_policy p = policy_of(_i);
    uint64_t st[STATE_MAX / 8], before[STATE_MAX / 8];
    srl_state_init(&p, st, 0);
    srl_decision d, dbefore;
    ck_assert_int_eq(srl_state_acquire(&p, st, 0, 3, &d), 0);
    memcpy(before, st, sizeof st);
    memset(&d, 0x3c, sizeof d);
    dbefore = d;
    static const uint32_t costs[] = {0, 17, 1000, UINT32_MAX};
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(srl_state_acquire(&p, st, 1, costs[k], &d), SRL_ECOST);
        ck_assert_int_eq(srl_state_peek(&p, st, 1, costs[k], &d), SRL_ECOST);
    }
    ck_assert_mem_eq(st, before, sizeof st);
    ck_assert_mem_eq(&d, &dbefore, sizeof d);
    /* the limit itself is a legal cost */
    ck_assert_int_eq(srl_state_peek(&p, st, 1, 16, &d), 0);
}
END_TEST

START_TEST(state_peek_gives_the_acquire_decision_and_never_writes)
{
    srl_policy p = policy_of(_i);
    uint64_t st[STATE_MAX / 8], copy[STATE_MAX / 8];
    srl_state_init(&p, st, 1000);
    uint64_t now = 1000, seed = 12345;
    for (int i = 0; i < 500; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        now += seed % (300 * MS);
        uint32_t cost = 1 + (uint32_t)((seed >> 20) % 6);
        memcpy(copy, st, sizeof st);
        srl_decision dp, da;
        ck_assert_int_eq(srl_state_peek(&p, st, now, cost, &dp), 0);
        ck_assert_mem_eq(st, copy, sizeof st);
        ck_assert_int_eq(srl_state_acquire(&p, st, now, cost, &da), 0);
        ck_assert(decision_eq(&dp, &da));
        if (!da.allowed)
            ck_assert_mem_eq(st, copy, sizeof st);
        ck_assert_int_eq(srl_state_valid(&p, st, now), 1);
        ck_assert_uint_eq(da.limit, 16);
        ck_assert_uint_eq(da.flags, 0);
        if (da.allowed)
            ck_assert_uint_eq(da.retry_after_ns, 0);
        else
            ck_assert_uint_gt(da.retry_after_ns, 0);
    }
}
END_TEST

START_TEST(state_fresh_is_at_rest_valid_and_admits_a_full_burst)
{
    srl_policy p = policy_of(_i);
    uint64_t st[STATE_MAX / 8];
    uint64_t now = 123 * SEC + 456;
    srl_state_init(&p, st, now);
    ck_assert_int_eq(srl_state_at_rest(&p, st, now), 1);
    ck_assert_int_eq(srl_state_valid(&p, st, now), 1);
    srl_decision d;
    ck_assert_int_eq(srl_state_peek(&p, st, now, 16, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    for (uint32_t i = 0; i < 16; i++) {
        ck_assert_int_eq(srl_state_acquire(&p, st, now, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.remaining, 15 - i);
    }
    ck_assert_int_eq(srl_state_acquire(&p, st, now, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_int_eq(srl_state_at_rest(&p, st, now), 0);
}
END_TEST

START_TEST(state_is_position_independent_and_works_after_a_copy)
{
    srl_policy p = policy_of(_i);
    uint64_t a[STATE_MAX / 8], b[STATE_MAX / 8 + 1];
    srl_state_init(&p, a, 0);
    srl_decision d;
    srl_state_acquire(&p, a, 0, 5, &d);
    memcpy(b + 1, a, srl_state_size(&p));   /* another 8-aligned address */
    srl_decision da, db;
    srl_state_acquire(&p, a, 100 * MS, 11, &da);
    srl_state_acquire(&p, b + 1, 100 * MS, 11, &db);
    ck_assert(decision_eq(&da, &db));
    ck_assert_mem_eq(a, b + 1, srl_state_size(&p));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("state");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, state_size_is_fixed_per_algorithm_and_zero_for_an_invalid_policy, 0, 4);
    tcase_add_loop_test(tc, state_calls_with_null_arguments_are_einval_and_write_nothing, 0, 4);
    tcase_add_loop_test(tc, state_calls_with_an_invalid_policy_are_epolicy_and_write_nothing, 0, 4);
    tcase_add_loop_test(tc, state_cost_zero_or_above_permits_is_ecost_and_writes_nothing, 0, 4);
    tcase_add_loop_test(tc, state_peek_gives_the_acquire_decision_and_never_writes, 0, 4);
    tcase_add_loop_test(tc, state_fresh_is_at_rest_valid_and_admits_a_full_burst, 0, 4);
    tcase_add_loop_test(tc, state_is_position_independent_and_works_after_a_copy, 0, 4);
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
