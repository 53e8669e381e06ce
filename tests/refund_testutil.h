/*
 * refund_testutil.h - the srl_refund store test, shared by the shared-store
 * (check_shm_refund.c) and local-store (check_local_refund.c) suites so
 * every store is held to the same exact table.
 *
 * On a limiter of 5 permits per minute and a frozen fake clock: a refund
 * of an untracked key is SRL_ENOENT; the key is taken to its limit; bad
 * refunds (cost 0, cost above permits, empty key) are refused and change
 * nothing; a refund of 1 admits exactly one more request; a refund of
 * everything admits exactly permits more; another key is never touched.
 */
#ifndef SRL_REFUND_TESTUTIL_H
#define SRL_REFUND_TESTUTIL_H

#include <check.h>
#include <string.h>

#include "srl.h"

#define REFUND_PERMITS 5u

/* How many of n requests of cost 1 for key are admitted now. */
static inline uint32_t refund_admit_n(srl_limiter *lim, const char *key, uint32_t n)
{
    uint32_t admitted = 0;
    for (uint32_t i = 0; i < n; i++) {
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, key, strlen(key), 1, &d), 0);
        admitted += (uint32_t)d.allowed;
    }
    return admitted;
}

static inline void refund_store_table(srl_limiter *lim)
{
    const char *key = "user-7", *other = "user-8";
    size_t len = strlen(key);
    ck_assert_int_eq(srl_refund(lim, key, len, 1), SRL_ENOENT);
    ck_assert_int_eq(srl_refund(NULL, key, len, 1), SRL_EINVAL);
    ck_assert_uint_eq(refund_admit_n(lim, other, 2), 2);
    ck_assert_uint_eq(refund_admit_n(lim, key, REFUND_PERMITS + 3), REFUND_PERMITS);

    ck_assert_int_eq(srl_refund(lim, key, len, 0), SRL_ECOST);
    ck_assert_int_eq(srl_refund(lim, key, len, REFUND_PERMITS + 1), SRL_ECOST);
    ck_assert_int_eq(srl_refund(lim, key, 0, 1), SRL_EKEY);
    ck_assert_int_eq(srl_refund(lim, key, SRL_KEY_MAX + 1, 1), SRL_EKEY);
    ck_assert_uint_eq(refund_admit_n(lim, key, 1), 0);   /* the refused refunds gave nothing */

    ck_assert_int_eq(srl_refund(lim, key, len, 1), 0);
    srl_decision d;
    ck_assert_int_eq(srl_peek(lim, key, len, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_uint_eq(refund_admit_n(lim, key, 3), 1);   /* exactly one more */

    ck_assert_int_eq(srl_refund(lim, key, len, REFUND_PERMITS), 0);
    ck_assert_int_eq(srl_refund(lim, key, len, REFUND_PERMITS), 0);   /* capped: not 10 */
    ck_assert_uint_eq(refund_admit_n(lim, key, 2 * REFUND_PERMITS), REFUND_PERMITS);

    /* the other key kept its own count: 3 of its remaining permits */
    ck_assert_uint_eq(refund_admit_n(lim, other, REFUND_PERMITS), REFUND_PERMITS - 2);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.used, 2);
    ck_assert_uint_eq(st.allowed, 2 + REFUND_PERMITS + 1 + REFUND_PERMITS + REFUND_PERMITS - 2);
}

#endif
