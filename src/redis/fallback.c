/*
 * fallback.c - fallback=POLICY on the fronted store (srl_open_tiered):
 * while Redis does not answer, the host decides with that policy, exactly,
 * across every worker of the host.
 *
 * WHAT IT HOLDS
 *   The fallback segment: an ordinary shared segment named after the host
 *   segment (NAME.fallback) whose policy is the fallback policy and whose
 *   keys are the host segment's ("P:key", tiered.c: host_key).  Nothing of
 *   its own beyond opening it and flagging its answers: the segment's own
 *   locks make its decisions exact across processes, as any segment's.
 *
 * INVARIANTS
 *   - It decides only calls whose Redis request got no answer
 *     (srl__fallback_applies); Redis is asked first on every call, with the
 *     store's reconnect backoff (redis_store.c: ensure), so Redis takes
 *     over at the first call that reaches it.
 *   - Its answers carry SRL_DECISION_DEGRADED | SRL_DECISION_LOCAL and are
 *     never remembered as bans (tiered.c stores only Redis's denials).
 *   - What it admitted is not told to Redis when Redis returns: the fleet
 *     may admit, over an outage, up to the fallback's limit per host on top
 *     of Redis's (srl.h says so).
 *
 * LOCKS
 *   Only the fallback segment's bucket locks, through srl_acquire/srl_peek,
 *   never while tiered.c holds the host segment's or Redis's.
 */
#include "fallback.h"
#include "errdetail.h"

#include <stdio.h>
#include <string.h>

/* NAME.fallback into name[]: 0, or SRL_EINVAL (too long: srl_last_error says). */
static int fallback_name(const char *shm_name, char name[SRL_NAME_MAX + 2])
{
    size_t n = strlen(shm_name) + sizeof SRL__FALLBACK_SUFFIX - 1;
    if (n > SRL_NAME_MAX + (shm_name[0] == '/')) {
        srl__err_set("fallback= keeps its states in the segment NAME%s: the host segment's "
                     "name must be at most %zu bytes", SRL__FALLBACK_SUFFIX,
                     (size_t)SRL_NAME_MAX - (sizeof SRL__FALLBACK_SUFFIX - 1));
        return SRL_EINVAL;
    }
    snprintf(name, SRL_NAME_MAX + 2, "%s%s", shm_name, SRL__FALLBACK_SUFFIX);
    return srl_name_check(name);
}

int srl__fallback_name_check(const char *shm_name)
{
    char name[SRL_NAME_MAX + 2];
    return fallback_name(shm_name, name);
}

int srl__fallback_open(const char *shm_name, const srl_config *cfg, const srl_limits *pol,
                       uint32_t kd, srl_ticker ticker, unsigned flags, srl_limiter **out)
{
    char name[SRL_NAME_MAX + 2];
    int rc = fallback_name(shm_name, name);
    if (rc != 0)
        return rc;
    srl_config f;
    srl_config_init(&f);
    if (pol->count == 1)
        f.policy = pol->limit[0];   /* one limit as the plain policy, as config.c keeps it */
    else
        f.limits = *pol;
    f.capacity = cfg->capacity;
    f.key_display = kd;
    f.mode = cfg->mode;
    f.on_full = cfg->on_full;
    f.lock_timeout_ms = cfg->lock_timeout_ms;
    f.owner_uid = cfg->owner_uid;
    f.ticker = ticker;
    return srl_open_shared(name, &f, flags, out);
}

int srl__fallback_applies(int rc)
{
    return rc == SRL_ETIMEDOUT || rc == SRL_ESYS;
}

int srl__fallback_decide(srl_limiter *fb, const void *hk, size_t hlen, uint32_t cost, int count,
                         srl_decision *d)
{
    int rc = count ? srl_acquire(fb, hk, hlen, cost, d) : srl_peek(fb, hk, hlen, cost, d);
    if (rc == 0)
        d->flags |= SRL_DECISION_DEGRADED | SRL_DECISION_LOCAL;
    return rc;
}
