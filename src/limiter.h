/*
 * limiter.h - srl_limiter, the facade over the stores (internal).
 *
 * limiter.c owns argument checking (key length, cost, NULLs) and the
 * dispatch; a store implements struct srl__store_ops and may assume its
 * arguments were checked: key non-NULL with 1 <= len <= SRL_KEY_MAX,
 * 1 <= cost <= cmp.min_permits, out pointers non-NULL.
 *
 * Stores: shm_*.c (shared and anonymous segments), local.c (liburcu).
 * Neither knows how rates are computed: they hand a key's state and `now`
 * to the compound calls (compound.h) under the key's lock.  The facade has
 * already checked that 1 <= cost <= cmp.min_permits, that srl_acquire and
 * srl_refund never reach a limiter with a concurrency limit, and that
 * srl_enter/srl_leave only reach one that has it.
 */
#ifndef SRL_LIMITER_H
#define SRL_LIMITER_H

#include <time.h>

#include "compound.h"
#include "srl.h"

struct srl__store_ops {
    int (*acquire)(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                   srl_decision *d);
    int (*peek)(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                srl_decision *d);
    int (*refund)(srl_limiter *lim, const void *key, size_t len, uint32_t cost);
    /* srl_reserve with 0 < max_wait <= SRL_WAIT_MAX_NS on a cmp.reserve
     * limiter (may be NULL: SRL_ENOTSUP); srl__cmp_reserve under the lock. */
    int (*reserve)(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                   uint64_t max_wait, srl_decision *d);
    int (*reset_key)(srl_limiter *lim, const void *key, size_t len);
    int64_t (*evict_idle)(srl_limiter *lim);
    int (*stats)(srl_limiter *lim, srl_stats *out);
    int (*info)(srl_limiter *lim, srl_info *out);
    int64_t (*foreach)(srl_limiter *lim, srl_foreach_fn fn, void *ctx);
    int64_t (*check)(srl_limiter *lim, srl_report_fn fn, void *ctx); /* may be NULL */
    /* SRL_CONCURRENCY (may be NULL: SRL_ENOTSUP).  enter fills *lease on
     * admission; leave is given a lease whose owner is this limiter. */
    int (*enter)(srl_limiter *lim, const void *key, size_t len, srl_lease *lease,
                 srl_decision *d);
    int (*leave)(srl_limiter *lim, srl_lease *lease);
    /* srl_key_state (may be NULL: SRL_ENOTSUP); buf holds cmp.state_bytes. */
    int (*key_state)(srl_limiter *lim, const void *key, size_t len, void *buf);
    void (*close)(srl_limiter *lim);
};

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
};

/* Fill the common head from a config the prologue normalised (ticker
 * defaulted).  Returns 0 or SRL_EPOLICY. */
int srl__limiter_init(srl_limiter *lim, const struct srl__store_ops *ops,
                      const srl_config *cfg);

/* clock_gettime(id) in nanoseconds (clock.c). */
uint64_t srl__clock_ns(clockid_t id);

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
