/*
 * mismatch.c - srl_mismatch_explain: say what differs when a segment
 * refuses a config with SRL_EMISMATCH.
 *
 * It compares exactly what the segment open compares (shm_segment.c,
 * validate): the canonical limits, the capacity in whole buckets (from
 * srl__shm_slots_for, the shared store's own geometry behind shm_api.h),
 * and key_display.  Pure: no segment is touched, the caller
 * brings the segment's srl_info (an open with SRL_ADOPT).  The way to change
 * live is named in the caller's words (srl_binding_word, config.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "compound.h"
#include "shm_api.h"

struct out {
    char *buf;
    size_t len, used;
    int truncated, n;
};

static void append(struct out *o, const char *fmt, va_list ap)
{
    if (o->truncated)
        return;
    int w = vsnprintf(o->buf + o->used, o->len - o->used, fmt, ap);
    if (w < 0 || (size_t)w >= o->len - o->used) {
        o->truncated = 1;
        o->used = o->len - 1;
    } else {
        o->used += (size_t)w;
    }
}

static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    append(o, fmt, ap);
    va_end(ap);
}

/* One difference: a sentence, after "; " if it is not the first. */
static void say(struct out *o, const char *fmt, ...)
{
    if (o->n++ > 0)
        put(o, "; ");
    va_list ap;
    va_start(ap, fmt);
    append(o, fmt, ap);
    va_end(ap);
}

int srl_mismatch_explain(const srl_config *cfg, const srl_info *seg, char *buf, size_t len)
{
    return srl_mismatch_explain_for(cfg, seg, SRL_BINDING_C, buf, len);
}

int srl_mismatch_explain_for(const srl_config *cfg, const srl_info *seg, srl_binding b,
                             char *buf, size_t len)
{
    const char *change = srl_binding_word(b, "change");
    if (change == NULL)
        return SRL_EINVAL;
    if (cfg == NULL || seg == NULL || buf == NULL || len == 0)
        return SRL_EINVAL;
    buf[0] = '\0';
    struct out o = {buf, len, 0, 0, 0};
    srl_limits want, have;
    srl_limits one;
    const srl_limits *w = &cfg->limits;
    if (w->count == 0) {
        if (srl_limits_of(&cfg->policy, &one) != 0)
            return SRL_EINVAL;
        w = &one;
    }
    if (srl__limits_canonical(w, &want) != 0 || srl__limits_canonical(&seg->limits, &have) != 0)
        return SRL_EINVAL;
    if (memcmp(&want, &have, sizeof want) != 0) {
        char a[SRL_LIMITS_TEXT_MAX], b[SRL_LIMITS_TEXT_MAX];
        srl_limits_format(&have, a, sizeof a);
        srl_limits_format(&want, b, sizeof b);
        say(&o, "policy: the segment has %s, this config asks for %s (use the segment's policy, "
                "or change it live, keeping each key's use: %s; or another segment name, or "
                "destroy it: its keys start fresh)", a, b, change);
    }
    /* The slots cfg would get: the open's own geometry, not a copy of its rounding. */
    uint32_t per_bucket;
    uint64_t slots = srl__shm_slots_for(cfg, &per_bucket);
    if (slots == 0)
        return SRL_EINVAL;
    if (slots != seg->capacity)
        say(&o, "capacity: the segment holds %llu slots, this config asks for %llu keys (%llu "
                "slots in buckets of %u): ask for %llu, or make a new segment",
            (unsigned long long)seg->capacity, (unsigned long long)cfg->capacity,
            (unsigned long long)slots, per_bucket, (unsigned long long)seg->capacity);
    /* The tier table itself is not in srl_info: a count is what can be
     * told apart here (the tables: srl_tier_get on the adopted handle). */
    uint32_t seg_tiers = seg->tier_count > 0 ? seg->tier_count : 1;
    if (cfg->tier_count + 1 != seg_tiers)
        say(&o, "tiers: the segment has %u (its policy and %u named), this config asks for %u "
                "(pass the segment's table: rlctl info lists it)",
            seg_tiers, seg_tiers - 1, cfg->tier_count + 1);
    if (cfg->key_display != seg->key_display)
        say(&o, "key_display: the segment keeps %u bytes per key, this config asks for %u (it "
                "is part of the slot size: use %u)",
            seg->key_display, cfg->key_display, seg->key_display);
    return o.truncated ? SRL_ENOBUFS : o.n;
}
