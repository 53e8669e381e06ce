/*
 * algotest.h - assertions shared by the algorithm suites (check_algo_*.c).
 *
 * acq()/peek() call the public srl_state_* layer and require success; the
 * decision is prefilled with garbage so a field the algorithm forgets to
 * write shows up.  decision_eq compares field by field, because
 * srl_decision has padding that memcmp would compare.  ck_allowed and
 * ck_denied come from decision_assert.h (strict: remaining, wait, flags).
 */
#ifndef SRL_ALGOTEST_H
#define SRL_ALGOTEST_H

#include <check.h>
#include <string.h>

#include "decision_assert.h"
#include "srl.h"

static inline int decision_eq(const srl_decision *a, const srl_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after_ns == b->retry_after_ns && a->reset_after_ns == b->reset_after_ns &&
           a->flags == b->flags;
}

static inline srl_decision acq(const srl_policy *p, void *s, uint64_t now, uint32_t cost)
{
    srl_decision d;
    memset(&d, 0x5a, sizeof d);
    ck_assert_int_eq(srl_state_acquire(p, s, now, cost, &d), 0);
    return d;
}

static inline srl_decision peek(const srl_policy *p, const void *s, uint64_t now, uint32_t cost)
{
    srl_decision d;
    memset(&d, 0x5a, sizeof d);
    ck_assert_int_eq(srl_state_peek(p, s, now, cost, &d), 0);
    return d;
}

#endif
