/*
 * limiter.c - the srl_limiter facade: argument checks, then dispatch.
 *
 * Every public srl_* call on a limiter lands here first.  This file checks
 * what the stores are allowed to assume (see limiter.h) and nothing else; it
 * takes no lock and keeps no state of its own.
 */
#include "limiter.h"
#include "errdetail.h"
#include "msg.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ defaults */

void srl_config_init(srl_config *cfg)
{
    if (cfg == NULL)
        return;
    *cfg = (srl_config){
        .policy = {.algorithm = SRL_TOKEN_BUCKET, .permits = 100, .window_ns = 60 * SRL_NS_PER_S},
        .capacity = 65536,
        .key_display = 0,
        .mode = 0600,
        .on_full = SRL_ON_FULL_ALLOW,
        .lock_timeout_ms = 1000,
        .ticker = {NULL, NULL},
        .owner_uid = SRL_OWNER_SELF,
    };
}

int srl__config_check(const srl_config *cfg)
{
    if (cfg == NULL)
        return SRL_EINVAL;
    int rc = cfg->limits.count > 0 ? srl_limits_validate(&cfg->limits)
                                   : srl_policy_validate(&cfg->policy);
    if (rc != 0)
        return rc;
    if (cfg->capacity == 0 || cfg->capacity > SRL_CAPACITY_MAX)
        return SRL_EINVAL;
    if (cfg->key_display > SRL_KEY_DISPLAY_MAX)
        return SRL_EINVAL;
    if ((cfg->mode & ~0777u) != 0)
        return SRL_EINVAL;
    if (cfg->on_full != SRL_ON_FULL_ALLOW && cfg->on_full != SRL_ON_FULL_DENY &&
        cfg->on_full != SRL_ON_FULL_EVICT)
        return SRL_EINVAL;
    if ((cfg->flags & ~(SRL_CONFIG_DRY_RUN | SRL_CONFIG_FLOOD_CACHE | SRL_CONFIG_LOCKFREE |
                       SRL_CONFIG_FORCE)) != 0)
        return SRL_EINVAL;
    for (size_t i = 0; i < sizeof cfg->reserved / sizeof cfg->reserved[0]; i++)
        if (cfg->reserved[i] != 0)
            return SRL_EINVAL;
    return srl__tiers_check(cfg);
}

int srl__open_prologue(const srl_config *cfg, int optional, srl_config *norm,
                       const srl_config **use, srl_limiter **out)
{
    if (out == NULL)
        return SRL_EINVAL;
    *out = NULL;
    if (cfg == NULL) {
        if (!optional)
            return SRL_EINVAL;
        srl_config_init(norm);
    } else {
        int rc = srl__config_check(cfg);
        if (rc != 0)
            return rc;
        *norm = *cfg;
    }
    srl_limits l = norm->limits;
    if (l.count == 0 && srl_limits_of(&norm->policy, &l) != 0)
        return SRL_EPOLICY;
    if (srl__limits_canonical(&l, &norm->limits) != 0)
        return SRL_EPOLICY;
    norm->policy = norm->limits.limit[0];
    if (sodium_init() < 0)
        return SRL_ESYS;
    *use = norm;
    return 0;
}

/* The default clock of a compound: the coarse one only if every limit
 * tolerates it (srl_default_ticker's rule, limit by limit). */
static srl_ticker_fn default_ticker(const srl_limits *l)
{
    srl_ticker_fn fn = srl_default_ticker(&l->limit[0]);
    for (uint32_t i = 1; i < l->count; i++) {
        srl_ticker_fn f = srl_default_ticker(&l->limit[i]);
        if (f != fn)
            return srl_monotonic_ns;   /* one limit needs the precise clock */
    }
    return fn;
}

int srl__limiter_init(srl_limiter *lim, const struct srl__store_ops *ops,
                      const srl_config *cfg)
{
    lim->ops = ops;
    if (srl__compound_init(&lim->cmp, &cfg->limits) != 0)
        return SRL_EPOLICY;
    if (srl__tiers_init(lim, cfg) != 0)
        return SRL_EPOLICY;
    lim->live_state_bytes = 0;   /* a shared segment's opener sets them once open */
    lim->tier_get = NULL;
    lim->on_full = cfg->on_full;
    lim->dry_run = (cfg->flags & SRL_CONFIG_DRY_RUN) != 0;
    lim->lock_timeout_ms = cfg->lock_timeout_ms ? cfg->lock_timeout_ms : 1000;
    lim->ticker = cfg->ticker;
    if (lim->ticker.now == NULL)
        lim->ticker.now = default_ticker(&cfg->limits);
    /* Per-open lease stamp: pid and a process-wide count, never 0, so a
     * lease from another open limiter does not match this one. */
    static _Atomic uint32_t opened;
    lim->lease_owner = ((uint64_t)(uint32_t)getpid() << 32) | (uint64_t)(++opened | 0x80000000u);
    return 0;
}

void srl__decide_on_full(const srl_limiter *lim, unsigned flag, srl_decision *d)
{
    /* EVICT reaches here only when nothing could be evicted: as ALLOW. */
    int allow = lim->on_full != SRL_ON_FULL_DENY;
    const srl_policy *p = &lim->cmp.limits.limit[0];
    /* Denied without a state to ask: the honest wait is one window (a
     * concurrency limit has none: the same 1 s hint as a full key). */
    uint64_t wait = p->algorithm == SRL_CONCURRENCY ? SRL_NS_PER_S : p->window_ns;
    *d = (srl_decision){
        .allowed = allow,
        .limit = srl__capacity(p),
        .remaining = 0,
        .retry_after_ns = allow ? 0 : wait,
        .reset_after_ns = wait,
        .flags = flag,
    };
}

/* ------------------------------------------------------------ dispatch */

/* Dry run (SRL_CONFIG_DRY_RUN): the store decided, wrote and counted as an
 * enforcing handle would (and counted would_deny where it counts denied);
 * here only the answer turns.  rc: the store's result; *d is filled on 0
 * and on a degraded decision, untouched on any other error. */
static int dry_run_turn(const srl_limiter *lim, int rc, srl_decision *d)
{
    if (!lim->dry_run)
        return rc;
    /* The codes a store answers with a degraded decision (srl_acquire; Redis
     * adds SRL_ESYS and SRL_EACCES); the flag tells them from the same code
     * with *d untouched (Redis's SRL_ECORRUPT). */
    bool filled = rc == 0 || ((rc == SRL_ETIMEDOUT || rc == SRL_ENOTRECOVERABLE ||
                               rc == SRL_ECORRUPT || rc == SRL_ESYS || rc == SRL_EACCES) &&
                              (d->flags & SRL_DECISION_DEGRADED));
    if (filled && !d->allowed) {
        d->allowed = 1;
        d->flags |= SRL_DECISION_WOULD_DENY;
    }
    return rc;
}

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
    /* A tiered store checks the key's own tier (shm_table.c), and a store
     * whose policy may change checks the permits itself. */
    if (cost == 0 || (!lim->live_state_bytes && cost > srl__tiers_cost_max(lim)))
        return srl__cost_refused(&lim->cmp, cost);
    return 0;
}

/* check_request, then tier within the table and cost within its permits
 * (those the store checks itself when its policy may change). */
static int check_tier_request(const srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                              uint32_t cost, const srl_decision *d)
{
    int rc = check_request(lim, key, len, cost, d);
    if (rc != 0)
        return rc;
    if (tier >= lim->tier_count)
        return SRL_EINVAL;
    if (!lim->live_state_bytes && cost > srl__tier_cmp(lim, tier)->min_permits)
        return srl__cost_refused(srl__tier_cmp(lim, tier), cost);
    return 0;
}

int srl_acquire(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                srl_decision *d)
{
    return srl_acquire_tier(lim, 0, key, len, cost, d);
}

int srl_acquire_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                     uint32_t cost, srl_decision *d)
{
    if (lim != NULL && lim->cmp.conc >= 0)
        return SRL_ENOTSUP;   /* a unit needs a holder: srl_enter */
    int rc = check_tier_request(lim, tier, key, len, cost, d);
    if (rc != 0)
        return rc;
    if (lim->ops->acquire_tier == NULL)   /* one tier: tier 0 */
        return dry_run_turn(lim, lim->ops->acquire(lim, key, len, cost, d), d);
    return dry_run_turn(lim, lim->ops->acquire_tier(lim, tier, key, len, cost, d), d);
}

int srl_reserve(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                uint64_t max_wait_ns, srl_decision *d)
{
    if (max_wait_ns == 0)
        return srl_acquire(lim, key, len, cost, d);   /* exactly, every store */
    if (lim != NULL && lim->cmp.conc >= 0)
        return SRL_ENOTSUP;
    int rc = check_request(lim, key, len, cost, d);
    if (rc != 0)
        return rc;
    if (max_wait_ns > SRL_WAIT_MAX_NS)
        return SRL_EINVAL;
    if (lim->ops->reserve == NULL)
        return SRL_ENOTSUP;
    if (!lim->live_state_bytes) {   /* else the store checks, under the key's lock */
        if (cost > srl__tier_cmp(lim, 0)->min_permits)   /* a reservation is tier 0's */
            return srl__cost_refused(&lim->cmp, cost);
        if (!lim->cmp.reserve)
            return SRL_ENOTSUP;
    }
    /* A dry run turns a refused reservation as a denial (wait_ns stays 0). */
    return dry_run_turn(lim, lim->ops->reserve(lim, key, len, cost, max_wait_ns, d), d);
}

int srl_peek(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
             srl_decision *d)
{
    int rc = check_request(lim, key, len, cost, d);
    return rc != 0 ? rc : dry_run_turn(lim, lim->ops->peek(lim, key, len, cost, d), d);
}

int srl_peek_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len, uint32_t cost,
                  srl_decision *d)
{
    int rc = check_tier_request(lim, tier, key, len, cost, d);
    if (rc != 0)
        return rc;
    if (lim->ops->peek_tier == NULL)   /* one tier: tier 0 */
        return dry_run_turn(lim, lim->ops->peek(lim, key, len, cost, d), d);
    return dry_run_turn(lim, lim->ops->peek_tier(lim, tier, key, len, cost, d), d);
}

int srl_refund(srl_limiter *lim, const void *key, size_t len, uint32_t cost)
{
    if (lim == NULL)
        return SRL_EINVAL;
    int rc = check_key(key, len);
    if (rc != 0)
        return rc;
    if (lim->cmp.conc >= 0)
        return SRL_ENOTSUP;   /* a unit is given back by srl_leave */
    if (cost == 0 || (!lim->live_state_bytes && cost > srl__tiers_cost_max(lim)))
        return srl__cost_refused(&lim->cmp, cost);
    return lim->ops->refund(lim, key, len, cost);
}

int srl_reset_key(srl_limiter *lim, const void *key, size_t len)
{
    if (lim == NULL)
        return SRL_EINVAL;
    int rc = check_key(key, len);
    return rc != 0 ? rc : lim->ops->reset_key(lim, key, len);
}

/* Operator control (srl.h): one entry into the store's key_control. */
static int key_control(srl_limiter *lim, const void *key, size_t len, int op, uint64_t for_ns,
                       const char *reason, srl_key_control *out)
{
    if (op != SRL__CTL_GET)
        srl__err_clear();   /* a read leaves the last failure's sentence (rlctl get) */
    if (lim == NULL)
        return SRL_EINVAL;
    int rc = check_key(key, len);
    if (rc != 0)
        return rc;
    if (lim->ops->key_control == NULL)
        return SRL_ENOTSUP;   /* Redis, fronted: not yet (srl.h) */
    if ((op == SRL__CTL_EXEMPT || op == SRL__CTL_BAN) && lim->cmp.conc >= 0) {
        /* srl_enter decides such a limiter and reads neither: a flag set
         * here would say "done" and change nothing. */
        srl__err_set("this policy has an in-flight (concurrency) limit, whose srl_enter reads "
                     "no exemption or ban: set them on a rate-limit segment its requests "
                     "pass first");
        return SRL_ENOTSUP;
    }
    return lim->ops->key_control(lim, key, len, op, for_ns, reason, out);
}

int srl_key_exempt(srl_limiter *lim, const void *key, size_t len, int on)
{
    if (on != 0 && on != 1)
        return SRL_EINVAL;
    return key_control(lim, key, len, on ? SRL__CTL_EXEMPT : SRL__CTL_UNEXEMPT, 0, NULL, NULL);
}

int srl_key_ban(srl_limiter *lim, const void *key, size_t len, uint64_t for_ns, const char *reason)
{
    if (for_ns == 0 || for_ns > SRL_WINDOW_MAX_NS)
        return SRL_EINVAL;
    if (reason != NULL) {
        size_t n = strlen(reason);
        if (n > SRL_BAN_REASON_MAX)
            return SRL_EINVAL;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)reason[i] < 0x20 || reason[i] == 0x7f)
                return SRL_EINVAL;
    }
    return key_control(lim, key, len, SRL__CTL_BAN, for_ns, reason, NULL);
}

int srl_key_unban(srl_limiter *lim, const void *key, size_t len)
{
    return key_control(lim, key, len, SRL__CTL_UNBAN, 0, NULL, NULL);
}

int srl_key_control_get(srl_limiter *lim, const void *key, size_t len, srl_key_control *out)
{
    if (out == NULL)
        return SRL_EINVAL;
    return key_control(lim, key, len, SRL__CTL_GET, 0, NULL, out);
}

/* Per-key limits (srl.h): the store's key_limits and acquire_limits. */
static int key_limits(srl_limiter *lim, const void *key, size_t len, const srl_limits *l,
                      srl_limits *get)
{
    srl__err_clear();
    if (lim == NULL)
        return SRL_EINVAL;
    int rc = check_key(key, len);
    if (rc != 0)
        return rc;
    if (lim->ops->key_limits == NULL) {
        srl__err_set("per-key limits live in a segment or an in-process store; this store has none");
        return SRL_ENOTSUP;
    }
    return lim->ops->key_limits(lim, key, len, l, get);
}

int srl_key_set_limits(srl_limiter *lim, const void *key, size_t len, const srl_limits *limits)
{
    return key_limits(lim, key, len, limits, NULL);
}

int srl_key_clear_limits(srl_limiter *lim, const void *key, size_t len)
{
    return key_limits(lim, key, len, NULL, NULL);
}

int srl_key_get_limits(srl_limiter *lim, const void *key, size_t len, srl_limits *out)
{
    if (out == NULL)
        return SRL_EINVAL;
    return key_limits(lim, key, len, NULL, out);
}

int srl_acquire_limits(srl_limiter *lim, const void *key, size_t len, const srl_limits *limits,
                       uint32_t cost, srl_decision *d)
{
    srl__err_clear();
    if (lim == NULL || d == NULL || limits == NULL)
        return SRL_EINVAL;
    int rc = check_key(key, len);
    if (rc != 0)
        return rc;
    if (cost == 0)
        return srl__cost_refused(&lim->cmp, cost);
    if (lim->ops->acquire_limits == NULL) {
        srl__err_set("per-call limits need a segment or an in-process store; this store has none");
        return SRL_ENOTSUP;
    }
    return dry_run_turn(lim, lim->ops->acquire_limits(lim, key, len, limits, cost, d), d);
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
    if (lim == NULL || out == NULL)
        return SRL_EINVAL;
    int rc = lim->ops->info(lim, out);
    if (rc == 0) {
        out->tier_count = lim->tier_count;   /* every store: 1 without tiers */
        /* The stores say which of their own flags are on; dry run is the
         * facade's (dry_run_turn), in every store. */
        out->flags = (out->flags & ~SRL_CONFIG_DRY_RUN) | (lim->dry_run ? SRL_CONFIG_DRY_RUN : 0u);
    }
    return rc;
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
    if (lim->cmp.conc < 0 || lim->ops->enter == NULL)
        return SRL_ENOTSUP;
    memset(lease, 0, sizeof *lease);
    lease->owner = lim->lease_owner;   /* a denied lease is this limiter's too: leave says ENOENT */
    return dry_run_turn(lim, lim->ops->enter(lim, key, len, lease, d), d);
}

int srl_leave(srl_limiter *lim, srl_lease *lease)
{
    if (lim == NULL || lease == NULL)
        return SRL_EINVAL;
    if (lim->cmp.conc < 0 || lim->ops->leave == NULL)
        return SRL_ENOTSUP;
    if (lease->owner != lim->lease_owner)
        return SRL_EINVAL;    /* another limiter's lease (or garbage) */
    if (lease->gen == 0)
        return SRL_ENOENT;    /* left already, or never admitted */
    int rc = lim->ops->leave(lim, lease);
    lease->gen = 0;           /* a second leave is SRL_ENOENT without a lookup */
    return rc;
}

int srl_key_state(srl_limiter *lim, const void *key, size_t len, void *buf, size_t buflen)
{
    if (lim == NULL || buf == NULL)
        return SRL_EINVAL;
    int rc = check_key(key, len);
    if (rc != 0)
        return rc;
    if (lim->ops->key_state == NULL)
        return SRL_ENOTSUP;
    if (buflen < (lim->live_state_bytes ? lim->live_state_bytes : srl__tiers_bytes_max(lim)))
        return SRL_ENOBUFS;
    return lim->ops->key_state(lim, key, len, buf);
}

/* ------------------------------------------------------------ live policy */


static int policy_change(srl_limiter *lim, const srl_config *cfg, int check, char *msg,
                         size_t len)
{
    if (msg != NULL && len > 0)
        msg[0] = '\0';
    if (lim == NULL || cfg == NULL)
        return srl__say(msg, len, SRL_EINVAL, "no limiter or no config");
    if (lim->ops->policy_change == NULL)
        return srl__say(msg, len, SRL_ENOTSUP,
                          "this store's policy cannot change live (only a shared segment's)");
    int rc = srl__config_check(cfg);
    if (rc != 0)
        return srl__say(msg, len, rc, "the config is not valid (srl_config's rules)");
    srl_config norm = *cfg;
    srl_limits l = norm.limits;
    if ((l.count == 0 && srl_limits_of(&norm.policy, &l) != 0) ||
        srl__limits_canonical(&l, &norm.limits) != 0)
        return srl__say(msg, len, SRL_EPOLICY, "the policy is not valid");
    norm.policy = norm.limits.limit[0];
    return lim->ops->policy_change(lim, &norm, 0, NULL, check, msg, len);
}

int srl_policy_change(srl_limiter *lim, const srl_config *cfg, char *msg, size_t len)
{
    return policy_change(lim, cfg, 0, msg, len);
}

int srl_policy_change_check(srl_limiter *lim, const srl_config *cfg, char *msg, size_t len)
{
    return policy_change(lim, cfg, 1, msg, len);
}

int srl_policy_change_tier(srl_limiter *lim, uint32_t tier, const srl_limits *limits, char *msg,
                           size_t len)
{
    if (msg != NULL && len > 0)
        msg[0] = '\0';
    if (lim == NULL || limits == NULL)
        return srl__say(msg, len, SRL_EINVAL, "no limiter or no limits");
    if (lim->ops->policy_change == NULL)
        return srl__say(msg, len, SRL_ENOTSUP,
                          "this store's policy cannot change live (only a shared segment's)");
    if (srl_limits_validate(limits) != 0)
        return srl__say(msg, len, SRL_EPOLICY, "the policy is not valid");
    return lim->ops->policy_change(lim, NULL, tier, limits, 0, msg, len);
}
