/*
 * tiers.c - a limiter's tier table: named policies beside the default one,
 * the checks a table must pass (from a caller's config or from a segment,
 * which is untrusted), and the conversion of one key's state from one
 * tier to another (include/srl.h, TIERS; docs/design.md, "Tiers and live
 * changes").
 *
 * Holds: srl_tier_name_check, srl__tiers_check (a config's table),
 * srl__tiers_valid (a stored table: also canonical, NUL-padded, unused
 * entries zero), srl__tiers_init (the resolved compounds in the limiter
 * head), srl__tiers_state_max, srl__tier_convert, srl_tier_find and
 * srl_tier_get.
 *
 * Invariants of a resolved table (struct srl_limiter, limiter.h): tier 0 is
 * lim->cmp and is named "default"; tiers 1..tier_count-1 are tier_def[t-1]
 * (canonical limits, NUL-padded name) resolved into tier_cmp[t-1]; no tier
 * of a table with more than one holds a concurrency limit.  Nothing here
 * takes a lock: conversion is a pure function the store calls under the
 * key's bucket lock, with the time it read there.
 */
#include "tiers.h"
#include "limiter.h"

#include <string.h>

static const char default_name[] = "default";

int srl_tier_name_check(const char *name)
{
    if (name == NULL)
        return SRL_EINVAL;
    size_t n = strnlen(name, SRL_TIER_NAME_MAX + 1);
    if (n == 0 || n > SRL_TIER_NAME_MAX)
        return SRL_EINVAL;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-';
        if (!ok)
            return SRL_EINVAL;
    }
    return 0;
}

static bool has_concurrency(const srl_limits *l)
{
    for (uint32_t i = 0; i < l->count && i < SRL_LIMITS_MAX; i++)
        if (l->limit[i].algorithm == SRL_CONCURRENCY)
            return true;
    return false;
}

/* The rules every table obeys, whoever wrote it: count, names valid,
 * NUL-padded, unique, not "default", limits valid, no concurrency limit
 * anywhere (tier 0's limits: base).  strict (a stored table) also wants
 * each tier's limits canonical. */
static int table_check(const srl_limits *base, const srl_tier *t, uint32_t count, bool strict)
{
    if (count == 0)
        return 0;
    if (count > SRL_TIERS_MAX - 1 || t == NULL)
        return SRL_EINVAL;
    if (has_concurrency(base))
        return SRL_EPOLICY;
    for (uint32_t i = 0; i < count; i++) {
        const char *name = t[i].name;
        if (srl_tier_name_check(name) != 0 || strcmp(name, default_name) == 0)
            return SRL_EINVAL;
        for (size_t j = strlen(name); j < sizeof t[i].name; j++)
            if (name[j] != '\0')
                return SRL_EINVAL;
        for (uint32_t k = 0; k < i; k++)
            if (strcmp(t[k].name, name) == 0)
                return SRL_EINVAL;
        srl_limits canon;
        if (srl__limits_canonical(&t[i].limits, &canon) != 0 || has_concurrency(&canon))
            return SRL_EPOLICY;
        if (strict && memcmp(&canon, &t[i].limits, sizeof canon) != 0)
            return SRL_EPOLICY;
    }
    return 0;
}

int srl__tiers_check(const srl_config *cfg)
{
    srl_limits base = cfg->limits;
    if (base.count == 0 && srl_limits_of(&cfg->policy, &base) != 0)
        return SRL_EPOLICY;
    return table_check(&base, cfg->tiers, cfg->tier_count, false);
}

bool srl__tiers_valid(const srl_limits *base, const srl_tier *t, uint32_t count)
{
    if (table_check(base, t, count, true) != 0)
        return false;
    static const srl_tier zero;
    for (uint32_t i = count; i < SRL_TIERS_MAX - 1; i++)
        if (memcmp(&t[i], &zero, sizeof zero) != 0)
            return false;
    return true;
}

int srl__tiers_init(srl_limiter *lim, const srl_config *cfg)
{
    memset(lim->tier_def, 0, sizeof lim->tier_def);
    lim->tier_count = 1;
    for (uint32_t i = 0; i < cfg->tier_count; i++) {
        srl_tier *d = &lim->tier_def[i];
        /* The name is checked (table_check): at most 31 bytes and a NUL. */
        memcpy(d->name, cfg->tiers[i].name, strlen(cfg->tiers[i].name));
        if (srl__limits_canonical(&cfg->tiers[i].limits, &d->limits) != 0 ||
            srl__compound_init(&lim->tier_cmp[i], &d->limits) != 0)
            return SRL_EPOLICY;
        lim->tier_count++;
    }
    return 0;
}

uint32_t srl__tiers_state_max(const srl_config *cfg, uint32_t base_bytes)
{
    uint32_t m = base_bytes;
    for (uint32_t i = 0; i < cfg->tier_count; i++) {
        size_t n = srl_limits_state_size(&cfg->tiers[i].limits);
        if (n > m)
            m = (uint32_t)n;
    }
    return m;
}

uint32_t srl__tiers_cost_max(const srl_limiter *lim)
{
    uint32_t m = lim->cmp.min_permits;
    for (uint32_t t = 1; t < lim->tier_count; t++)
        if (lim->tier_cmp[t - 1].min_permits > m)
            m = lim->tier_cmp[t - 1].min_permits;
    return m;
}

uint32_t srl__tiers_bytes_max(const srl_limiter *lim)
{
    uint32_t m = lim->cmp.state_bytes;
    for (uint32_t t = 1; t < lim->tier_count; t++)
        if (lim->tier_cmp[t - 1].state_bytes > m)
            m = lim->tier_cmp[t - 1].state_bytes;
    return m;
}

/* Same shape: as many limits, limit i of the same algorithm in each. */
static bool same_shape(const struct srl__compound *a, const struct srl__compound *b)
{
    if (a->count != b->count)
        return false;
    for (uint32_t i = 0; i < a->count; i++)
        if (a->limits.limit[i].algorithm != b->limits.limit[i].algorithm)
            return false;
    return true;
}

void srl__tier_convert(const struct srl__compound *from, const void *old,
                       const struct srl__compound *to, void *out, uint64_t now)
{
    srl__compound_state_init(to, out, now);
    if (!same_shape(from, to))
        return;   /* another algorithm: the key starts fresh */
    for (uint32_t i = 0; i < to->count; i++) {
        const srl_policy *po = &from->limits.limit[i], *pn = &to->limits.limit[i];
        if (pn->algorithm == SRL_FIXED_WINDOW && po->penalty_ns == 0 && pn->penalty_ns == 0) {
            /* The window keeps its start: a re-count at now would open a
             * new window of the new length, a longer wait than either tier
             * gives (srl__fw_convert). */
            srl__fw_convert(po, (const char *)old + from->off[i], pn, (char *)out + to->off[i],
                            now);
            continue;
        }
        srl_decision d;
        /* What the old limit has left now: a peek of cost 1 admits it and
         * leaves `remaining` after it; a denial (or a ban) leaves none. */
        srl__limit_decide(po, (char *)old + from->off[i], now, 1, 0, &d);
        uint32_t cap_old = srl__capacity(po), cap_new = srl__capacity(pn);
        uint64_t left = d.allowed ? (uint64_t)d.remaining + 1 : 0;
        if (left > cap_old)
            left = cap_old;
        uint32_t used = cap_old - (uint32_t)left;
        if (used > cap_new)
            used = cap_new;
        if (used == 0)
            continue;
        /* A fresh state admits any cost up to its capacity at once. */
        srl__limit_decide(pn, (char *)out + to->off[i], now, used, 1, &d);
    }
}

int srl_tier_find(srl_limiter *lim, const char *name)
{
    if (lim == NULL || name == NULL)
        return SRL_EINVAL;
    if (strcmp(name, default_name) == 0)
        return 0;
    for (uint32_t t = 1; t < lim->tier_count; t++)
        if (strncmp(lim->tier_def[t - 1].name, name, sizeof lim->tier_def[0].name) == 0 &&
            strlen(name) <= SRL_TIER_NAME_MAX)
            return (int)t;
    return SRL_ENOENT;
}

int srl_tier_get(srl_limiter *lim, uint32_t i, srl_tier *out)
{
    if (lim == NULL || out == NULL || i >= lim->tier_count)
        return SRL_EINVAL;
    if (lim->tier_get != NULL)   /* a policy that may change: the current one */
        return lim->tier_get(lim, i, out);
    if (i == 0) {
        memset(out, 0, sizeof *out);
        memcpy(out->name, default_name, sizeof default_name);
        out->limits = lim->cmp.limits;
    } else {
        *out = lim->tier_def[i - 1];
    }
    return 0;
}
