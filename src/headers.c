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

#define NS_PER_S 1000000000ull

static unsigned long long ceil_seconds(uint64_t ns)
{
    return ns / NS_PER_S + (ns % NS_PER_S != 0);
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

int srl_format_retry_after(const srl_decision *d, char *buf, size_t len)
{
    if (d == NULL || buf == NULL)
        return SRL_EINVAL;
    uint64_t ns = d->allowed ? 0 : d->retry_after_ns;
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
    uint64_t ns = d->allowed ? d->reset_after_ns : d->retry_after_ns;
    return emit(buf, len, "\"%s\";r=%u;t=%llu", name, (unsigned)d->remaining,
                ceil_seconds(ns));
}
