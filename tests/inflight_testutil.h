/*
 * inflight_testutil.h - the srl_enter/srl_leave table every store that holds
 * in-flight units must pass (check_shm_inflight.c, check_local_inflight.c).
 *
 * On "concurrency:4" with a frozen fake clock: four enters are admitted
 * with remaining 3, 2, 1, 0; the fifth is denied (retry after the 1 s hint,
 * lease gen 0, nothing taken); a leave gives one unit back and the next
 * enter is admitted; a second leave of one lease, a lease never admitted
 * and another limiter's lease change nothing; srl_acquire and srl_refund
 * are SRL_ENOTSUP; a walk shows the units in flight.
 *
 * On "concurrency:2 + token_bucket:3/1h": each enter takes a unit and a
 * permit; a full unit limit denies with binding 0 and takes no permit; a
 * spent rate limit denies with binding 1 and takes no unit.
 */
#ifndef SRL_INFLIGHT_TESTUTIL_H
#define SRL_INFLIGHT_TESTUTIL_H

#include <check.h>
#include <string.h>

#include "srl.h"

static inline int inflight_sum_fn(const srl_entry *e, void *ctx)
{
    *(uint64_t *)ctx += e->inflight;
    return 0;
}

/* Units in flight over every key of lim. */
static inline uint64_t inflight_total(srl_limiter *lim)
{
    uint64_t n = 0;
    ck_assert_int_ge(srl_foreach(lim, inflight_sum_fn, &n), 0);
    return n;
}

static inline srl_lease inflight_enter_ok(srl_limiter *lim, const char *key, uint32_t remaining)
{
    srl_lease l;
    srl_decision d;
    ck_assert_int_eq(srl_enter(lim, key, strlen(key), &l, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, remaining);
    ck_assert_uint_ne(l.gen, 0);
    return l;
}

static inline void inflight_enter_denied(srl_limiter *lim, const char *key, uint32_t binding,
                                         uint64_t retry_ns)
{
    srl_lease l;
    srl_decision d;
    ck_assert_int_eq(srl_enter(lim, key, strlen(key), &l, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.binding, binding);
    ck_assert_uint_eq(d.retry_after_ns, retry_ns);
    ck_assert_uint_eq(l.gen, 0);
    ck_assert_int_eq(srl_leave(lim, &l), SRL_ENOENT);
}

/* other: a second limiter of the same kind, for the foreign-lease check. */
static inline void inflight_store_table(srl_limiter *lim, srl_limiter *other)
{
    const char *key = "client-9";
    size_t len = strlen(key);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, key, len, 1, &d), SRL_ENOTSUP);
    ck_assert_int_eq(srl_refund(lim, key, len, 1), SRL_ENOTSUP);
    srl_lease a = inflight_enter_ok(lim, key, 3);
    srl_lease b = inflight_enter_ok(lim, key, 2);
    srl_lease c = inflight_enter_ok(lim, key, 1);
    srl_lease e = inflight_enter_ok(lim, key, 0);
    inflight_enter_denied(lim, key, 0, 1000000000ull);
    ck_assert_uint_eq(inflight_total(lim), 4);
    ck_assert_int_eq(srl_leave(other, &a), SRL_EINVAL);   /* not its lease */
    ck_assert_uint_eq(inflight_total(lim), 4);
    ck_assert_int_eq(srl_leave(lim, &b), 0);
    ck_assert_int_eq(srl_leave(lim, &b), SRL_ENOENT);     /* twice: nothing more */
    ck_assert_uint_eq(inflight_total(lim), 3);
    srl_lease f = inflight_enter_ok(lim, key, 0);
    inflight_enter_denied(lim, key, 0, 1000000000ull);
    /* A copy of a lease left already is as stale as the original. */
    srl_lease stale = a;
    ck_assert_int_eq(srl_leave(lim, &a), 0);
    ck_assert_int_eq(srl_leave(lim, &stale), SRL_ENOENT);
    ck_assert_int_eq(srl_leave(lim, &c), 0);
    ck_assert_int_eq(srl_leave(lim, &e), 0);
    ck_assert_int_eq(srl_leave(lim, &f), 0);
    ck_assert_uint_eq(inflight_total(lim), 0);
    ck_assert_int_eq(srl_peek(lim, key, len, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 3);   /* all 4 free: an entry would leave 3 */
    /* Nothing in flight is at rest: evict_idle may drop the key. */
    ck_assert_int_eq(srl_evict_idle(lim), 1);
    ck_assert_int_eq(srl_peek(lim, key, len, 1, &d), SRL_ENOENT);
}

static inline void inflight_compound_table(srl_limiter *lim)
{
    const char *key = "client-10";
    srl_lease a = inflight_enter_ok(lim, key, 1);   /* units 1 left, tokens 2 */
    srl_lease b = inflight_enter_ok(lim, key, 0);   /* units 0, tokens 1 */
    inflight_enter_denied(lim, key, 0, 1000000000ull);
    ck_assert_int_eq(srl_leave(lim, &a), 0);
    srl_lease c = inflight_enter_ok(lim, key, 0);   /* units 0, tokens 0 */
    ck_assert_int_eq(srl_leave(lim, &b), 0);
    ck_assert_int_eq(srl_leave(lim, &c), 0);
    ck_assert_uint_eq(inflight_total(lim), 0);
    /* Units free, tokens spent: denied by limit 1, one token in 20 min. */
    inflight_enter_denied(lim, key, 1, 20 * 60 * 1000000000ull);
    ck_assert_uint_eq(inflight_total(lim), 0);
}

#endif
