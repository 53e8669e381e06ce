/*
 * limiter.c - the srl_limiter facade: argument checks, then dispatch.
 *
 * Every public srl_* call on a limiter lands here first.  This file checks
 * what the stores are allowed to assume (see limiter.h) and nothing else; it
 * takes no lock and keeps no state of its own.
 */
#include "limiter.h"

#include <errno.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ defaults */

void srl_config_init(srl_config *cfg)
{
    if (cfg == NULL)
        return;
    *cfg = (srl_config){
        .policy = {SRL_TOKEN_BUCKET, 100, 60ull * 1000000000ull},
        .capacity = 65536,
        .key_display = 0,
        .mode = 0600,
        .on_full = SRL_ON_FULL_ALLOW,
        .lock_timeout_ms = 1000,
        .ticker = {NULL, NULL},
    };
}

int srl__config_check(const srl_config *cfg)
{
    if (cfg == NULL)
        return SRL_EINVAL;
    int rc = srl_policy_validate(&cfg->policy);
    if (rc != 0)
        return rc;
    if (cfg->capacity == 0 || cfg->capacity > SRL_CAPACITY_MAX)
        return SRL_EINVAL;
    if (cfg->key_display > SRL_KEY_DISPLAY_MAX)
        return SRL_EINVAL;
    if ((cfg->mode & ~0777u) != 0)
        return SRL_EINVAL;
    if (cfg->on_full != SRL_ON_FULL_ALLOW && cfg->on_full != SRL_ON_FULL_DENY)
        return SRL_EINVAL;
    return 0;
}

int srl__open_prologue(const srl_config *cfg, int optional, srl_config *defaults,
                       const srl_config **use, srl_limiter **out)
{
    if (out == NULL)
        return SRL_EINVAL;
    *out = NULL;
    if (cfg == NULL) {
        if (!optional)
            return SRL_EINVAL;
        srl_config_init(defaults);
        cfg = defaults;
    } else {
        int rc = srl__config_check(cfg);
        if (rc != 0)
            return rc;
        /* No store holds in-flight units yet (srl_enter is SRL_ENOTSUP
         * everywhere): refuse at open rather than create a segment whose
         * every decision fails. */
        if (cfg->policy.algorithm == SRL_CONCURRENCY)
            return SRL_ENOTSUP;
    }
    if (sodium_init() < 0)
        return SRL_ESYS;
    *use = cfg;
    return 0;
}

void srl__limiter_init(srl_limiter *lim, const struct srl__store_ops *ops,
                       const srl_config *cfg)
{
    lim->ops = ops;
    lim->policy = cfg->policy;
    lim->algo = srl__algo_get(cfg->policy.algorithm);
    lim->on_full = cfg->on_full;
    lim->lock_timeout_ms = cfg->lock_timeout_ms ? cfg->lock_timeout_ms : 1000;
    lim->ticker = cfg->ticker;
    if (lim->ticker.now == NULL)
        lim->ticker.now = srl_default_ticker(&cfg->policy);
    /* Per-open lease stamp: pid and a process-wide count, never 0, so a
     * lease from another open limiter does not match this one. */
    static _Atomic uint32_t opened;
    lim->lease_owner = ((uint64_t)(uint32_t)getpid() << 32) | (uint64_t)(++opened | 0x80000000u);
}

void srl__decide_on_full(const srl_limiter *lim, unsigned flag, srl_decision *d)
{
    int allow = lim->on_full == SRL_ON_FULL_ALLOW;
    *d = (srl_decision){
        .allowed = allow,
        .limit = lim->policy.permits,
        .remaining = 0,
        /* Denied without a state to ask: the honest wait is one window. */
        .retry_after_ns = allow ? 0 : lim->policy.window_ns,
        .reset_after_ns = lim->policy.window_ns,
        .flags = flag,
    };
}

/* ------------------------------------------------------------ dispatch */

static int check_key(const void *key, size_t len)
{
    if (key == NULL && len != 0)
        return SRL_EINVAL;
    if (len == 0 || len > SRL_KEY_MAX)
        return SRL_EKEY;
    return 0;
}

static int check_request(const srl_limiter *lim, const void *key, size_t len,
                         uint32_t cost, const srl_decision *d)
{
    if (lim == NULL || d == NULL)
        return SRL_EINVAL;
    int rc = check_key(key, len);
    if (rc != 0)
        return rc;
    if (cost == 0 || cost > lim->policy.permits)
        return SRL_ECOST;
    return 0;
}

int srl_acquire(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                srl_decision *d)
{
    if (lim != NULL && lim->policy.algorithm == SRL_CONCURRENCY)
        return SRL_ENOTSUP;   /* a unit needs a holder: srl_enter */
    int rc = check_request(lim, key, len, cost, d);
    return rc != 0 ? rc : lim->ops->acquire(lim, key, len, cost, d);
}

int srl_peek(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
             srl_decision *d)
{
    int rc = check_request(lim, key, len, cost, d);
    return rc != 0 ? rc : lim->ops->peek(lim, key, len, cost, d);
}

int srl_refund(srl_limiter *lim, const void *key, size_t len, uint32_t cost)
{
    if (lim == NULL)
        return SRL_EINVAL;
    int rc = check_key(key, len);
    if (rc != 0)
        return rc;
    if (cost == 0 || cost > lim->policy.permits)
        return SRL_ECOST;
    return lim->ops->refund(lim, key, len, cost);
}

int srl_reset_key(srl_limiter *lim, const void *key, size_t len)
{
    if (lim == NULL)
        return SRL_EINVAL;
    int rc = check_key(key, len);
    return rc != 0 ? rc : lim->ops->reset_key(lim, key, len);
}

int64_t srl_evict_idle(srl_limiter *lim)
{
    return lim == NULL ? SRL_EINVAL : lim->ops->evict_idle(lim);
}

int srl_stats_get(srl_limiter *lim, srl_stats *out)
{
    return lim == NULL || out == NULL ? SRL_EINVAL : lim->ops->stats(lim, out);
}

int srl_info_get(srl_limiter *lim, srl_info *out)
{
    return lim == NULL || out == NULL ? SRL_EINVAL : lim->ops->info(lim, out);
}

int64_t srl_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx)
{
    if (lim == NULL || fn == NULL)
        return SRL_EINVAL;
    return lim->ops->foreach(lim, fn, ctx);
}

int64_t srl_check(srl_limiter *lim, srl_report_fn fn, void *ctx)
{
    if (lim == NULL)
        return SRL_EINVAL;
    return lim->ops->check == NULL ? SRL_ENOTSUP : lim->ops->check(lim, fn, ctx);
}

void srl_close(srl_limiter *lim)
{
    if (lim != NULL)
        lim->ops->close(lim);
}

int srl_enter(srl_limiter *lim, const void *key, size_t len, srl_lease *lease,
              srl_decision *d)
{
    if (lease == NULL)
        return SRL_EINVAL;
    int rc = check_request(lim, key, len, 1, d);
    if (rc != 0)
        return rc;
    if (lim->policy.algorithm != SRL_CONCURRENCY || lim->ops->enter == NULL)
        return SRL_ENOTSUP;
    memset(lease, 0, sizeof *lease);
    return lim->ops->enter(lim, key, len, lease, d);
}

int srl_leave(srl_limiter *lim, srl_lease *lease)
{
    if (lim == NULL || lease == NULL)
        return SRL_EINVAL;
    if (lim->policy.algorithm != SRL_CONCURRENCY || lim->ops->leave == NULL)
        return SRL_ENOTSUP;
    if (lease->owner != lim->lease_owner)
        return SRL_EINVAL;    /* another limiter's lease (or garbage) */
    if (lease->gen == 0)
        return SRL_ENOENT;    /* left already, or never admitted */
    int rc = lim->ops->leave(lim, lease);
    lease->gen = 0;           /* a second leave is SRL_ENOENT without a lookup */
    return rc;
}
