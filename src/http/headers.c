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
 *
 * Each text is composed twice by the same code: measured (t.out NULL), then
 * written once it is known to fit.  No printf: these run on every request
 * of mod_srl, nginx and the bindings, and vsnprintf was 4100 of mod_srl's
 * 7700 instructions per request (bench/apache_cost.sh, BENCHMARKS.md).
 */
#include <limits.h>
#include <string.h>

#include "algo.h"

/* An item name ("name" or "name.i") is at most this long (as before: the
 * callers size their own buffers by it). */
#define ITEM_NAME_MAX 79

typedef struct {
    char *out;   /* NULL while measuring */
    size_t n;    /* bytes so far */
} text;

static void put(text *t, const char *s, size_t len)
{
    if (t->out != NULL)
        memcpy(t->out + t->n, s, len);
    t->n += len;
}

static void put_u64(text *t, unsigned long long v)
{
    char d[20];
    size_t i = sizeof d;
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    put(t, d + i, sizeof d - i);
}

/* After the measuring pass: SRL_ENOBUFS (buf untouched) if the text and
 * its NUL do not fit in len, else 0 with t set to write into buf. */
static int fits(text *t, char *buf, size_t len)
{
    if (t->n >= len || t->n > INT_MAX)
        return SRL_ENOBUFS;
    t->out = buf;
    t->n = 0;
    return 0;
}

static int done(text *t)
{
    t->out[t->n] = '\0';
    return (int)t->n;
}

/* One list item: "name" or "name.index" (index >= 0), then ;k1=v1;k2=v2. */
static void item(text *t, const char *name, int index, char k1, unsigned long long v1, char k2,
                 unsigned long long v2)
{
    char p[3] = {';', k1, '='};
    put(t, "\"", 1);
    put(t, name, strlen(name));
    if (index >= 0) {
        put(t, ".", 1);
        put_u64(t, (unsigned)index);
    }
    put(t, "\"", 1);
    put(t, p, 3);
    put_u64(t, v1);
    p[1] = k2;
    put(t, p, 3);
    put_u64(t, v2);
}

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
    text t = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        put_u64(&t, ceil_seconds(admitted(d) ? 0 : d->retry_after_ns));
        if (pass == 0 && fits(&t, buf, len) != 0)
            return SRL_ENOBUFS;
    }
    return done(&t);
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
    text t = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        item(&t, name, -1, 'q', p->permits, 'w', ceil_seconds(p->window_ns));
        if (pass == 0 && fits(&t, buf, len) != 0)
            return SRL_ENOBUFS;
    }
    return done(&t);
}

static void ratelimit_item(text *t, const srl_decision *d, const char *name, int index)
{
    uint64_t ns = admitted(d) ? d->reset_after_ns : d->retry_after_ns;
    item(t, name, index, 'r', d->remaining, 't', ceil_seconds(ns));
}

int srl_format_ratelimit(const srl_decision *d, const char *name, char *buf, size_t len)
{
    if (d == NULL || buf == NULL)
        return SRL_EINVAL;
    int rc = check_name(&name);
    if (rc != 0)
        return rc;
    text t = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        ratelimit_item(&t, d, name, -1);
        if (pass == 0 && fits(&t, buf, len) != 0)
            return SRL_ENOBUFS;
    }
    return done(&t);
}

/* The item index of limit i of a compound: -1 (the bare name) for a single
 * limit, so a one-limit compound emits exactly srl_format_ratelimit_policy's
 * text, else i ("name.i": item names must differ within a field).
 * SRL_ENOBUFS if the item name would be over ITEM_NAME_MAX bytes. */
static int item_index(const srl_limits *l, const char *name, uint32_t i, int *index)
{
    size_t n = strlen(name) + (l->count == 1 ? 0 : 1 + (i >= 10 ? 2 : 1));
    if (n > ITEM_NAME_MAX)
        return SRL_ENOBUFS;
    *index = l->count == 1 ? -1 : (int)i;
    return 0;
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
    int index;
    if ((rc = item_index(l, name, l->count - 1, &index)) != 0)
        return rc;   /* the longest item name is the last one's */
    text t = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < l->count; i++) {
            if (i)
                put(&t, ", ", 2);
            item(&t, name, l->count == 1 ? -1 : (int)i, 'q', l->limit[i].permits, 'w',
                 ceil_seconds(l->limit[i].window_ns));
        }
        if (pass == 0 && fits(&t, buf, len) != 0)
            return SRL_ENOBUFS;
    }
    return done(&t);
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
    int index;
    if ((rc = item_index(l, name, d->binding, &index)) != 0)
        return rc;
    text t = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        ratelimit_item(&t, d, name, index);
        if (pass == 0 && fits(&t, buf, len) != 0)
            return SRL_ENOBUFS;
    }
    return done(&t);
}
