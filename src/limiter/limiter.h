/*
 * limiter.h - srl_limiter, the facade over the stores (internal).
 *
 * limiter.c owns argument checking (key length, cost, NULLs) and the
 * dispatch; a store implements struct srl__store_ops and may assume its
 * arguments were checked: key non-NULL with 1 <= len <= SRL_KEY_MAX,
 * 1 <= cost <= cmp.min_permits, out pointers non-NULL.
 *
 * Stores: shm_*.c (shared and anonymous segments), local*.c (liburcu).
 * Neither knows how rates are computed: they hand a key's state and `now`
 * to the compound calls (compound.h) under the key's lock.  The facade has
 * already checked that 1 <= cost <= cmp.min_permits, that srl_acquire and
 * srl_refund never reach a limiter with a concurrency limit, and that
 * srl_enter/srl_leave only reach one that has it.
 *
 * The limiter's other parts each declare their own functions, included
 * here for the stores: tiers.h (the tier table), cost.h (SRL_ECOST's
 * sentence), clock.h (the tickers).  None of them includes this file.
 */
#ifndef SRL_LIMITER_H
#define SRL_LIMITER_H

#include <time.h>

#include "clock.h"
#include "compound.h"
#include "cost.h"
#include "srl.h"
#include "tiers.h"

struct srl__store_ops {
    int (*acquire)(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                   srl_decision *d);
    /* srl_acquire_tier (may be NULL: the store has tier 0 only, and
     * acquire serves it); tier < lim->tier_count, cost within its permits. */
    int (*acquire_tier)(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                        uint32_t cost, srl_decision *d);
    int (*peek)(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                srl_decision *d);
    /* srl_peek_tier (may be NULL: tier 0 only, and peek serves it); tier
     * < lim->tier_count. */
    int (*peek_tier)(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                     uint32_t cost, srl_decision *d);
    int (*refund)(srl_limiter *lim, const void *key, size_t len, uint32_t cost);
    /* srl_reserve with 0 < max_wait <= SRL_WAIT_MAX_NS on a cmp.reserve
     * limiter (may be NULL: SRL_ENOTSUP); srl__compound_reserve under the lock. */
    int (*reserve)(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                   uint64_t max_wait, srl_decision *d);
    int (*reset_key)(srl_limiter *lim, const void *key, size_t len);
    int64_t (*evict_idle)(srl_limiter *lim);
    int (*stats)(srl_limiter *lim, srl_stats *out);
    int (*info)(srl_limiter *lim, srl_info *out);
    int64_t (*foreach)(srl_limiter *lim, srl_foreach_fn fn, void *ctx);
    int64_t (*check)(srl_limiter *lim, srl_report_fn fn, void *ctx); /* may be NULL */
    /* srl_policy_change (may be NULL: SRL_ENOTSUP): cfg normalised, or
     * with one != NULL srl_policy_change_tier (tier's limits, cfg NULL);
     * check: only say whether it would be taken (srl_policy_change_check). */
    int (*policy_change)(srl_limiter *lim, const srl_config *cfg, uint32_t tier,
                         const srl_limits *one, int check, char *msg, size_t len);
    /* SRL_CONCURRENCY (may be NULL: SRL_ENOTSUP).  enter fills *lease on
     * admission; leave is given a lease whose owner is this limiter. */
    int (*enter)(srl_limiter *lim, const void *key, size_t len, srl_lease *lease,
                 srl_decision *d);
    int (*leave)(srl_limiter *lim, srl_lease *lease);
    /* srl_key_state (may be NULL: SRL_ENOTSUP); buf holds cmp.state_bytes. */
    int (*key_state)(srl_limiter *lim, const void *key, size_t len, void *buf);
    /* Operator control of one key (may be NULL: SRL_ENOTSUP): op is
     * SRL__CTL_*, for_ns and reason serve SRL__CTL_BAN, out SRL__CTL_GET. */
    int (*key_control)(srl_limiter *lim, const void *key, size_t len, int op, uint64_t for_ns,
                       const char *reason, srl_key_control *out);
    /* Per-key limits (may be NULL: SRL_ENOTSUP): srl_key_set_limits (l,
     * or NULL to clear) and srl_key_get_limits (get != NULL); and
     * srl_acquire_limits (l valid, cost >= 1). */
    int (*key_limits)(srl_limiter *lim, const void *key, size_t len, const srl_limits *l,
                      srl_limits *get);
    int (*acquire_limits)(srl_limiter *lim, const void *key, size_t len, const srl_limits *l,
                          uint32_t cost, srl_decision *d);
    void (*close)(srl_limiter *lim);
};
enum { SRL__CTL_EXEMPT, SRL__CTL_UNEXEMPT, SRL__CTL_BAN, SRL__CTL_UNBAN, SRL__CTL_GET };

/* Common head of every limiter; a store allocates the whole handle and
 * keeps its own fields in `impl`. */
struct srl_limiter {
    const struct srl__store_ops *ops;
    struct srl__compound cmp;       /* the limits, resolved once */
    srl_on_full on_full;
    int dry_run;                    /* SRL_CONFIG_DRY_RUN: stores count would_deny
                                       where they count denied; the facade turns
                                       the answer (limiter.c) */
    uint32_t lock_timeout_ms;
    srl_ticker ticker;              /* .now never NULL once opened */
    uint64_t lease_owner;           /* stamped into leases: never 0, unique per open */
    void *impl;
    /* Tiers (tiers.c): tier 0 is cmp above; tier t >= 1 is tier_def[t-1],
     * resolved into tier_cmp[t-1].  tier_count is 1 without tiers. */
    uint32_t tier_count;
    srl_tier tier_def[SRL_TIERS_MAX - 1];
    struct srl__compound tier_cmp[SRL_TIERS_MAX - 1];
    /* Nonzero: the store's policy may change after open (a shared segment,
     * srl_policy_change), and this is the most state a key may have.  The
     * facade then checks only cost >= 1: the store checks the permits (and
     * srl_reserve's support) against the policy current under the key's
     * lock, and cmp/tier_def above are the policy at open (a concurrency
     * limit, whose presence never changes, is still read from cmp). */
    uint32_t live_state_bytes;
    /* srl_tier_get's current table (may be NULL: tier_def above). */
    int (*tier_get)(srl_limiter *lim, uint32_t t, srl_tier *out);
};

/* The compound of tier t (t < lim->tier_count, checked by the caller). */
static inline const struct srl__compound *srl__tier_cmp(const srl_limiter *lim, uint32_t t)
{
    return t == 0 ? &lim->cmp : &lim->tier_cmp[t - 1];
}

/* Fill the common head from a config the prologue normalised (ticker
 * defaulted).  Returns 0 or SRL_EPOLICY. */
int srl__limiter_init(srl_limiter *lim, const struct srl__store_ops *ops,
                      const srl_config *cfg);

/* Read the limiter's ticker.  Call inside the key's lock. */
static inline uint64_t srl__now(const srl_limiter *lim)
{
    return lim->ticker.now(lim->ticker.ctx);
}

/* The decision on_full gives, with the given SRL_DECISION_* flag. */
void srl__decide_on_full(const srl_limiter *lim, unsigned flag, srl_decision *d);

/* Checks a config before a store uses it: policy, capacity, display, mode.
 * Returns 0, SRL_EINVAL or SRL_EPOLICY. */
int srl__config_check(const srl_config *cfg);

/* The common start of every opener: out checked and *out = NULL, the
 * config checked, libsodium (the keyed hashes, the random hash keys) ready.
 * cfg may be NULL only if `optional` (srl_config_init's defaults are then
 * used).  *use points at *norm, a copy of the config normalised so that
 * stores read one thing: limits.count >= 1 always (a single `policy`
 * becomes a compound of one) and policy == limits.limit[0].  Returns 0,
 * SRL_EINVAL, SRL_EPOLICY or SRL_ESYS. */
int srl__open_prologue(const srl_config *cfg, int optional, srl_config *norm,
                       const srl_config **use, srl_limiter **out);

#endif
