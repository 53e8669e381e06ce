/*
 * limits.c - compound policies (srl_limits): the text and the pure core.
 *
 * A compound is up to SRL_LIMITS_MAX single limits that must all admit.
 * Its state is the limits' states back to back, each at an 8-byte aligned
 * offset, so the compound machinery knows nothing of any algorithm: it goes
 * through the srl__algo vtables like state.c, and any algorithm added there
 * (a concurrency limit, say) can be one of the limits.
 *
 * All or nothing: acquire first decides every limit with commit = 0 (no
 * writes), and only if every one admits does it decide each again with
 * commit = 1.  The two passes see the same state and the same now, so the
 * committing pass admits too (decide is a pure function of its inputs).
 * No locks: the caller serialises access to the state, as for srl_state_*.
 */
#include <string.h>
#include <stdio.h>

#include "algo.h"

#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)

int srl_limits_validate(const srl_limits *l)
{
    if (l == NULL)
        return SRL_EINVAL;
    if (l->count < 1 || l->count > SRL_LIMITS_MAX)
        return SRL_EPOLICY;
    for (uint32_t i = 0; i < l->count; i++)
        if (srl_policy_validate(&l->limit[i]) != 0)
            return SRL_EPOLICY;
    return 0;
}

int srl_limits_of(const srl_policy *p, srl_limits *out)
{
    if (p == NULL || out == NULL)
        return SRL_EINVAL;
    int rc = srl_policy_validate(p);
    if (rc != 0)
        return rc;
    memset(out, 0, sizeof *out);
    out->count = 1;
    out->limit[0] = *p;
    return 0;
}

static void set_err(srl_policy_error *err, size_t off, size_t len, const char *msg)
{
    if (err == NULL)
        return;
    memset(err, 0, sizeof *err);
    err->offset = (uint32_t)off;
    err->length = (uint32_t)len;
    snprintf(err->message, sizeof err->message, "%s", msg);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t';
}

int srl_limits_parse_ex(const char *text, srl_limits *out, srl_policy_error *err)
{
    if (err != NULL)
        memset(err, 0, sizeof *err);
    if (text == NULL || out == NULL) {
        set_err(err, 0, 0, "no policy text given");
        return SRL_EINVAL;
    }
    srl_limits l;
    memset(&l, 0, sizeof l);
    size_t pos = 0;
    for (;;) {
        size_t end = pos;
        while (text[end] != '\0' && text[end] != '+')
            end++;
        size_t b = pos, e = end;
        while (b < e && is_space(text[b]))
            b++;
        while (e > b && is_space(text[e - 1]))
            e--;
        if (b == e) {
            set_err(err, b, 0, "empty limit (write ALGO:N/WINDOW on each side of '+')");
            return SRL_EPOLICY;
        }
        if (l.count == SRL_LIMITS_MAX) {
            set_err(err, b, e - b, "more than 4 limits (SRL_LIMITS_MAX)");
            return SRL_EPOLICY;
        }
        char one[SRL_LIMITS_TEXT_MAX + 1];
        if (e - b >= sizeof one) {
            set_err(err, b, e - b, "limit text too long");
            return SRL_EPOLICY;
        }
        memcpy(one, text + b, e - b);
        one[e - b] = '\0';
        int rc = srl_policy_parse_ex(one, &l.limit[l.count], err);
        if (rc != 0) {
            if (err != NULL)
                err->offset += (uint32_t)b;
            return rc;
        }
        l.count++;
        if (text[end] == '\0')
            break;
        pos = end + 1;
    }
    *out = l;
    if (err != NULL)
        memset(err, 0, sizeof *err);
    return 0;
}

int srl_limits_format(const srl_limits *l, char *buf, size_t len)
{
    if (l == NULL || buf == NULL)
        return SRL_EINVAL;
    int rc = srl_limits_validate(l);
    if (rc != 0)
        return rc;
    char tmp[SRL_LIMITS_TEXT_MAX];
    size_t n = 0;
    for (uint32_t i = 0; i < l->count; i++) {
        if (i > 0) {
            memcpy(tmp + n, " + ", 3);
            n += 3;
        }
        rc = srl_policy_format(&l->limit[i], tmp + n, sizeof tmp - n);
        if (rc < 0)
            return rc;
        n += (size_t)rc;
    }
    if (n + 1 > len)
        return SRL_ENOBUFS;
    memcpy(buf, tmp, n);
    buf[n] = '\0';
    return (int)n;
}

size_t srl_limits_state_size(const srl_limits *l)
{
    if (srl_limits_validate(l) != 0)
        return 0;
    size_t n = 0;
    for (uint32_t i = 0; i < l->count; i++)
        n += ALIGN8(srl_state_size(&l->limit[i]));
    return n;
}

size_t srl_limits_state_offset(const srl_limits *l, uint32_t i)
{
    if (srl_limits_validate(l) != 0 || i >= l->count)
        return 0;
    size_t n = 0;
    for (uint32_t j = 0; j < i; j++)
        n += ALIGN8(srl_state_size(&l->limit[j]));
    return n;
}

/* Validate l and state; *off gets each limit's offset. */
static int checked(const srl_limits *l, const void *state, size_t off[SRL_LIMITS_MAX])
{
    int rc = srl_limits_validate(l);
    if (rc != 0)
        return rc;
    if (state == NULL)
        return SRL_EINVAL;
    size_t n = 0;
    for (uint32_t i = 0; i < l->count; i++) {
        off[i] = n;
        n += ALIGN8(srl_state_size(&l->limit[i]));
    }
    return 0;
}

static int cost_ok(const srl_limits *l, uint32_t cost)
{
    if (cost == 0)
        return 0;
    for (uint32_t i = 0; i < l->count; i++)
        if (cost > l->limit[i].permits)
            return 0;
    return 1;
}

int srl_limits_state_init(const srl_limits *l, void *state, uint64_t now)
{
    size_t off[SRL_LIMITS_MAX];
    int rc = checked(l, state, off);
    if (rc != 0)
        return rc;
    for (uint32_t i = 0; i < l->count; i++)
        srl__algo_get(l->limit[i].algorithm)->init(&l->limit[i], (char *)state + off[i], now);
    return 0;
}

/* Is decision a more binding than b?  Among denials the largest retry_after;
 * an allowed one never binds over a denial; among admissions the least
 * remaining.  Ties keep the earlier limit. */
static int binds_more(const srl_decision *a, const srl_decision *b)
{
    if (a->allowed != b->allowed)
        return !a->allowed;
    if (!a->allowed)
        return a->retry_after_ns > b->retry_after_ns;
    return a->remaining < b->remaining;
}

static int decide(const srl_limits *l, const void *state, uint64_t now, uint32_t cost,
                  int commit, srl_decision *d)
{
    size_t off[SRL_LIMITS_MAX];
    int rc = checked(l, state, off);
    if (rc != 0)
        return rc;
    if (d == NULL)
        return SRL_EINVAL;
    if (!cost_ok(l, cost))
        return SRL_ECOST;
    srl_decision each[SRL_LIMITS_MAX];
    int all = 1;
    for (uint32_t i = 0; i < l->count; i++) {
        const srl_policy *p = &l->limit[i];
        srl__algo_get(p->algorithm)->decide(p, (char *)state + off[i], now, cost, 0, &each[i]);
        all &= each[i].allowed != 0;
    }
    if (all && commit)
        for (uint32_t i = 0; i < l->count; i++) {
            const srl_policy *p = &l->limit[i];
            srl__algo_get(p->algorithm)->decide(p, (char *)state + off[i], now, cost, 1,
                                                &each[i]);
        }
    uint32_t b = 0;
    uint32_t remaining = each[0].remaining;
    uint64_t reset = each[0].reset_after_ns;
    for (uint32_t i = 1; i < l->count; i++) {
        if (binds_more(&each[i], &each[b]))
            b = i;
        if (each[i].remaining < remaining)
            remaining = each[i].remaining;
        if (each[i].reset_after_ns > reset)
            reset = each[i].reset_after_ns;
    }
    *d = each[b];
    d->remaining = remaining;
    d->reset_after_ns = reset;
    d->binding = b;
    return 0;
}

int srl_limits_state_acquire(const srl_limits *l, void *state, uint64_t now, uint32_t cost,
                             srl_decision *d)
{
    return decide(l, state, now, cost, 1, d);
}

int srl_limits_state_peek(const srl_limits *l, const void *state, uint64_t now,
                          uint32_t cost, srl_decision *d)
{
    return decide(l, state, now, cost, 0, d);
}

int srl_limits_state_refund(const srl_limits *l, void *state, uint64_t now, uint32_t cost)
{
    size_t off[SRL_LIMITS_MAX];
    int rc = checked(l, state, off);
    if (rc != 0)
        return rc;
    if (!cost_ok(l, cost))
        return SRL_ECOST;
    for (uint32_t i = 0; i < l->count; i++)
        srl__algo_get(l->limit[i].algorithm)->refund(&l->limit[i], (char *)state + off[i],
                                                     now, cost);
    return 0;
}

int srl_limits_state_at_rest(const srl_limits *l, const void *state, uint64_t now)
{
    size_t off[SRL_LIMITS_MAX];
    int rc = checked(l, state, off);
    if (rc != 0)
        return rc;
    for (uint32_t i = 0; i < l->count; i++)
        if (!srl__algo_get(l->limit[i].algorithm)->at_rest(&l->limit[i],
                                                           (const char *)state + off[i], now))
            return 0;
    return 1;
}

int srl_limits_state_valid(const srl_limits *l, const void *state, uint64_t now)
{
    size_t off[SRL_LIMITS_MAX];
    int rc = checked(l, state, off);
    if (rc != 0)
        return rc;
    for (uint32_t i = 0; i < l->count; i++)
        if (!srl__algo_get(l->limit[i].algorithm)->valid(&l->limit[i],
                                                         (const char *)state + off[i], now))
            return 0;
    return 1;
}
