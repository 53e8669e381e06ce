/*
 * check_local_refund.c - srl_refund on the in-process store: the shared
 * store table (refund_testutil.h) for every algorithm.
 */
#include <check.h>
#include <stdlib.h>

#include "refund_testutil.h"
#include "srl.h"
#include "testutil.h"

START_TEST(local_refund_gives_back_exactly_what_it_names)
{
    fake_clock *c = fake_clock_shared(3 * SEC);   /* frozen: nothing refills */
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = (srl_algorithm)_i, .permits = REFUND_PERMITS, .window_ns = 60 * SEC};
    cfg.capacity = 16;
    cfg.ticker = fake_ticker(c);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    refund_store_table(lim);
    srl_close(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("local_refund");
    TCase *tc = tcase_create("local");
    tcase_add_loop_test(tc, local_refund_gives_back_exactly_what_it_names, 0, 4);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
