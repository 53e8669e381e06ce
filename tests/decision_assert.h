/*
 * decision_assert.h - the one set of decision assertions for every suite.
 *
 * Strict on purpose: an allowed decision has no wait and no flags; a
 * denied one has nothing remaining (ck_denied_leaving: exactly rem, for a
 * denied cost > 1), and no flags (a
 * decision from on_full carries a flag and is checked field by field where
 * a test expects one).  Each macro evaluates its decision argument once
 * (it may be a call).
 */
#ifndef SRL_DECISION_ASSERT_H
#define SRL_DECISION_ASSERT_H

#include <check.h>

#include "srl.h"

#define ck_allowed(d, rem)                          \
    do {                                            \
        srl_decision d_ = (d);                      \
        ck_assert_int_eq(d_.allowed, 1);            \
        ck_assert_uint_eq(d_.remaining, (rem));     \
        ck_assert_uint_eq(d_.retry_after_ns, 0);    \
        ck_assert_uint_eq(d_.flags, 0);             \
    } while (0)

/* Denied, with rem requests of cost 1 still allowed (a denied cost > 1). */
#define ck_denied_leaving(d, rem, retry)                \
    do {                                                \
        srl_decision d_ = (d);                          \
        ck_assert_int_eq(d_.allowed, 0);                \
        ck_assert_uint_eq(d_.remaining, (rem));         \
        ck_assert_uint_eq(d_.retry_after_ns, (retry));  \
        ck_assert_uint_eq(d_.flags, 0);                 \
    } while (0)

#define ck_denied(d, retry) ck_denied_leaving(d, 0, retry)

#endif
