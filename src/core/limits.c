/*
 * limits.c - compound policies (srl_limits): validation and the text.
 * One key's state under a compound (srl_limits_state_*) is compound.c.
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

int srl_limits_validate(const srl_limits *l)
{
    if (l == NULL)
        return SRL_EINVAL;
    if (l->count < 1 || l->count > SRL_LIMITS_MAX)
        return SRL_EPOLICY;
    uint32_t conc = 0;
    for (uint32_t i = 0; i < l->count; i++) {
        if (srl_policy_validate(&l->limit[i]) != 0)
            return SRL_EPOLICY;
        conc += l->limit[i].algorithm == SRL_CONCURRENCY;
    }
    if (conc > 1 || l->reserved0 != 0)
        return SRL_EPOLICY;   /* one in-flight count per key is all a lease can name */
    for (size_t i = 0; i < sizeof l->reserved / sizeof l->reserved[0]; i++)
        if (l->reserved[i] != 0)
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
        if (l.limit[l.count].algorithm == SRL_CONCURRENCY)
            for (uint32_t j = 0; j < l.count; j++)
                if (l.limit[j].algorithm == SRL_CONCURRENCY) {
                    set_err(err, b, e - b,
                            "more than one concurrency limit (a key has one in-flight count)");
                    return SRL_EPOLICY;
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
