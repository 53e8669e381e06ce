/*
 * check_rlctl_errors.c - suite "rlctl_errors": rlctl decided an exit status
 * (and a remedy or explicitly none) for every code in srl.h's
 * SRL_ERRNO_MAP, and each status is the one tools/rlctl_open.c documents.
 * Links tools/rlctl_errors.c alone: no segment, no process.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rlctl.h"

/* The documented statuses, written out: a code moved to another status, or
 * added to srl.h, fails here until this list and rlctl(1) agree. */
static const struct { int code; int status; int has_remedy; } want[] = {
    {SRL_OK, EX_OK, 0},
    {SRL_EINVAL, EX_USAGE, 0},
    {SRL_EPOLICY, EX_USAGE, 0},
    {SRL_ECOST, EX_USAGE, 1},
    {SRL_EKEY, EX_USAGE, 0},
    {SRL_ENOMEM, EX_OSERR, 1},
    {SRL_ENOBUFS, EX_SOFTWARE, 0},
    {SRL_ENOENT, EX_NOINPUT, 1},
    {SRL_EEXIST, EX_CANTCREAT, 1},
    {SRL_EMISMATCH, EX_DATAERR, 1},
    {SRL_EFOREIGN, EX_DATAERR, 1},
    {SRL_EVERSION, EX_DATAERR, 1},
    {SRL_ECORRUPT, EX_DATAERR, 1},
    {SRL_ESTALE, EX_DATAERR, 1},
    {SRL_EACCES, EX_NOPERM, 1},
    {SRL_ENOSPC, EX_CANTCREAT, 1},
    {SRL_ETIMEDOUT, EX_TEMPFAIL, 1},
    {SRL_ENOTRECOVERABLE, EX_DATAERR, 1},
    {SRL_ENOTSUP, EX_SOFTWARE, 1},
    {SRL_ESYS, EX_OSERR, 0},
    {SRL_ETOOBIG, EX_CANTCREAT, 1},
};

START_TEST(every_srl_code_has_an_entry)
{
    size_t n = 0;
#define HAS_ENTRY(name, code, msg)                                             \
    n++;                                                                       \
    ck_assert_msg(rlctl_err_lookup(code) != NULL, "no rlctl entry for SRL_" #name);
    SRL_ERRNO_MAP(HAS_ENTRY)
#undef HAS_ENTRY
    ck_assert_uint_eq(n, sizeof want / sizeof want[0]);
}
END_TEST

START_TEST(each_code_exits_with_its_documented_status)
{
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const rlctl_err *e = rlctl_err_lookup(want[i].code);
        ck_assert_ptr_nonnull(e);
        ck_assert_msg(e->status == want[i].status, "%s: status %d, want %d",
                      srl_err_name(want[i].code), e->status, want[i].status);
        ck_assert_int_eq(rlctl_exit_code(want[i].code), want[i].status);
        ck_assert_msg((e->remedy != NULL) == want[i].has_remedy, "%s: remedy %s",
                      srl_err_name(want[i].code), e->remedy ? e->remedy : "(none)");
        if (e->remedy != NULL)
            ck_assert_uint_gt(strlen(e->remedy), 0);
    }
}
END_TEST

START_TEST(unknown_codes_have_no_entry_and_exit_70)
{
    const int unknown[] = {1, 2, -21, -1000, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        ck_assert_ptr_null(rlctl_err_lookup(unknown[i]));
        ck_assert_int_eq(rlctl_exit_code(unknown[i]), EX_SOFTWARE);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlctl_errors");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, every_srl_code_has_an_entry);
    tcase_add_test(tc, each_code_exits_with_its_documented_status);
    tcase_add_test(tc, unknown_codes_have_no_entry_and_exit_70);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
