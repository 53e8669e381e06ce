/*
 * headers.c - HTTP header field values from decisions and policies.
 *
 *   Retry-After         "7"                    whole seconds, rounded up
 *   RateLimit-Policy    "default";q=100;w=60   quota and window (seconds, up)
 *   RateLimit           "default";r=42;t=17    remaining and seconds until
 *                                               reset (the retry time if denied)
 * following the IETF httpapi ratelimit-headers draft (structured-field
 * lists whose items are quoted policy names with parameters).
 *
 * Seconds always round up: telling a client to come back a fraction of a
 * second early would only earn it another 429.  Each function returns the
 * length written (without the NUL) or a negative code; on failure buf is
 * not written at all (the text is measured first).
 *
 * Pure functions: no state, safe from any thread.
 */
#include <stdarg.h>
#include <stdio.h>

#include "algo.h"


static unsigned long long ceil_seconds(uint64_t ns)
{
    return ns / SRL_NS_PER_S + (ns % SRL_NS_PER_S != 0);
}

/* A policy name must be a non-empty token of [A-Za-z0-9_.-]. */
static int check_name(const char **name)
{
    if (*name == NULL) {
        *name = "default";
        return 0;
    }
    const char *c = *name;
    if (*c == '\0')
        return SRL_EINVAL;
    for (; *c; c++) {
        int ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                 (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == '-';
        if (!ok)
            return SRL_EINVAL;
    }
    return 0;
}

/* Writes fmt's expansion only if it fits: the length, or SRL_ENOBUFS. */
static int emit(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int emit(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return SRL_EINVAL;
    if ((size_t)n >= len)
        return SRL_ENOBUFS;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return n;
}

/* A dry run's would-be denial (allowed, SRL_DECISION_WOULD_DENY) reads as
 * the denial it stands for: its header values say what enforcing would send. */
static int admitted(const srl_decision *d)
{
    return d->allowed && !(d->flags & SRL_DECISION_WOULD_DENY);
}

int srl_format_retry_after(const srl_decision *d, char *buf, size_t len)
{
    if (d == NULL || buf == NULL)
        return SRL_EINVAL;
    uint64_t ns = admitted(d) ? 0 : d->retry_after_ns;
    return emit(buf, len, "%llu", ceil_seconds(ns));
}

int srl_format_ratelimit_policy(const srl_policy *p, const char *name, char *buf, size_t len)
{
    if (p == NULL || buf == NULL)
        return SRL_EINVAL;
    int rc = srl_policy_validate(p);
    if (rc != 0)
        return rc;
    if ((rc = check_name(&name)) != 0)
        return rc;
    return emit(buf, len, "\"%s\";q=%u;w=%llu", name, (unsigned)p->permits,
                ceil_seconds(p->window_ns));
}

int srl_format_ratelimit(const srl_decision *d, const char *name, char *buf, size_t len)
{
    if (d == NULL || buf == NULL)
        return SRL_EINVAL;
    int rc = check_name(&name);
    if (rc != 0)
        return rc;
    uint64_t ns = admitted(d) ? d->reset_after_ns : d->retry_after_ns;
    return emit(buf, len, "\"%s\";r=%u;t=%llu", name, (unsigned)d->remaining,
                ceil_seconds(ns));
}

/* The item name of limit i of a compound: name itself for a single limit
 * (so a one-limit compound emits exactly srl_format_ratelimit_policy's
 * text), else "name.i" (item names must differ within a field). */
static int item_name(const srl_limits *l, const char *name, uint32_t i, char *out, size_t len)
{
    int n = l->count == 1 ? snprintf(out, len, "%s", name)
                          : snprintf(out, len, "%s.%u", name, (unsigned)i);
    return n < 0 || (size_t)n >= len ? SRL_ENOBUFS : 0;
}

int srl_format_ratelimit_policies(const srl_limits *l, const char *name, char *buf, size_t len)
{
    if (l == NULL || buf == NULL)
        return SRL_EINVAL;
    int rc = srl_limits_validate(l);
    if (rc != 0)
        return rc;
    if ((rc = check_name(&name)) != 0)
        return rc;
    char tmp[SRL_LIMITS_MAX * 96];
    size_t n = 0;
    for (uint32_t i = 0; i < l->count; i++) {
        char item[80];
        if ((rc = item_name(l, name, i, item, sizeof item)) != 0)
            return rc;
        rc = srl_format_ratelimit_policy(&l->limit[i], item, tmp + n + (i ? 2 : 0),
                                         sizeof tmp - n - 2);
        if (rc < 0)
            return rc;
        if (i) {
            tmp[n] = ',';
            tmp[n + 1] = ' ';
            n += 2;
        }
        n += (size_t)rc;
    }
    return emit(buf, len, "%s", tmp);
}

int srl_format_ratelimit_binding(const srl_limits *l, const srl_decision *d, const char *name,
                                 char *buf, size_t len)
{
    if (l == NULL || d == NULL || buf == NULL)
        return SRL_EINVAL;
    int rc = srl_limits_validate(l);
    if (rc != 0)
        return rc;
    if ((rc = check_name(&name)) != 0)
        return rc;
    if (d->binding >= l->count)
        return SRL_EINVAL;
    char item[80];
    if ((rc = item_name(l, name, d->binding, item, sizeof item)) != 0)
        return rc;
    return srl_format_ratelimit(d, item, buf, len);
}
