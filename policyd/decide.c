/*
 * decide.c - a request's attributes to srl keys, costs and one answer.
 *
 * A quota applies unless one of its exemptions matches; its key is the
 * values of its key attributes joined by NUL (values cannot hold NUL: the
 * reader refuses it, so two attribute lists never make the same key).  The
 * answer is the first denial's, and the units the earlier quotas took are
 * refunded then, so a deferred message, retried later, is counted once.
 * No state of its own; srl's locks only (each srl call takes one key's).
 */
#include "decide.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pd_cost(const pd_quota *q, const pd_reader *r, uint32_t *cost)
{
    if (q->cost_attr == NULL) {
        *cost = q->cost_fixed;
        return 0;
    }
    const char *v = pd_get(r, q->cost_attr);
    if (v == NULL || *v == '\0') {
        *cost = 1;
        return 0;
    }
    if (*v < '0' || *v > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || n > UINT32_MAX) return -1;
    *cost = n == 0 ? 1 : (uint32_t)n;
    return 0;
}

static int exempt(const pd_quota *q, const pd_reader *r)
{
    for (uint32_t i = 0; i < q->exempt_count; i++) {
        const char *v = pd_get(r, q->exempt[i].attr);
        if (v != NULL && strcmp(v, q->exempt[i].value) == 0) return 1;
    }
    return 0;
}

/* The key of r under q into buf; its length, 0 if a key attribute is absent
 * or empty (*missing names it), -1 if it is over SRL_KEY_MAX. */
static long make_key(const pd_quota *q, const pd_reader *r, char *buf, const char **missing)
{
    size_t len = 0;
    for (uint32_t i = 0; i < q->key_count; i++) {
        const char *v = pd_get(r, q->key_attrs[i]);
        if (v == NULL || *v == '\0') {
            *missing = q->key_attrs[i];
            return 0;
        }
        size_t n = strlen(v);
        if (len + n + (i > 0) > SRL_KEY_MAX) return -1;
        if (i > 0) buf[len++] = '\0';
        memcpy(buf + len, v, n);
        len += n;
    }
    return (long)len;
}

struct taken {
    srl_limiter *lim;
    size_t off, len;
    uint32_t cost;
};

int pd_decide(pd_conf *c, const pd_reader *r, char *action, size_t alen, char *why,
              size_t wlen)
{
    static char keys[PD_QUOTAS_MAX][SRL_KEY_MAX];
    struct taken taken[PD_QUOTAS_MAX];
    uint32_t ntaken = 0;
    int out = PD_PASS;
    why[0] = '\0';
    const char *req = pd_get(r, "request");
    if (req == NULL || strcmp(req, "smtpd_access_policy") != 0) {
        snprintf(why, wlen, "%s: not an smtpd access policy request; answering %s",
                 req == NULL ? "no 'request' attribute" : "request is not smtpd_access_policy",
                 c->default_action);
        snprintf(action, alen, "%s", c->default_action);
        return PD_BAD_REQUEST;
    }
    for (uint32_t i = 0; i < c->quota_count; i++) {
        pd_quota *q = &c->quota[i];
        if (exempt(q, r)) continue;
        const char *missing = NULL;
        long klen = make_key(q, r, keys[i], &missing);
        if (klen == 0) {
            snprintf(why, wlen, "quota %s: attribute %s is absent or empty; answering %s",
                     q->name, missing, c->missing_action);
            if (strcmp(c->missing_action, "DUNNO") == 0) continue;
            snprintf(action, alen, "%s", c->missing_action);
            out = PD_MISSING;
            break;
        }
        uint32_t cost;
        if (klen < 0 || pd_cost(q, r, &cost) != 0) {
            snprintf(why, wlen, "quota %s: %s; answering %s", q->name,
                     klen < 0 ? "the key is longer than srl's limit (4096 bytes)"
                              : "the cost attribute is not a number 0..4294967295",
                     c->default_action);
            snprintf(action, alen, "%s", c->default_action);
            out = PD_BAD_REQUEST;
            break;
        }
        srl_decision d;
        int rc = srl_acquire(q->lim, keys[i], (size_t)klen, cost, &d);
        if (rc == SRL_ECOST) {
            snprintf(action, alen, "REJECT 5.7.1 %u recipients are more than quota %s allows",
                     cost, q->name);
            snprintf(why, wlen, "quota %s: cost %u over the limit's permits; %s", q->name, cost,
                     action);
            out = PD_TOO_BIG;
            break;
        }
        if (rc != 0) {
            snprintf(why, wlen, "quota %s: srl_acquire: %s; answering %s", q->name,
                     srl_strerror(rc), c->error_action);
            snprintf(action, alen, "%s", c->error_action);
            out = PD_ERROR;
            break;
        }
        if (!d.allowed) {
            uint64_t secs = (d.retry_after_ns + 999999999u) / 1000000000u;
            snprintf(action, alen, "%s 4.7.1 quota %s exceeded, retry in %llu seconds",
                     c->defer_action, q->name, (unsigned long long)secs);
            snprintf(why, wlen, "quota %s: denied (cost %u); %s", q->name, cost, action);
            out = PD_DEFER;
            break;
        }
        taken[ntaken++] = (struct taken){q->lim, i, (size_t)klen, cost};
    }
    if (out != PD_PASS) {
        for (uint32_t k = 0; k < ntaken; k++)
            srl_refund(taken[k].lim, keys[taken[k].off], taken[k].len, taken[k].cost);
        return out;
    }
    snprintf(action, alen, "DUNNO");
    return PD_PASS;
}
