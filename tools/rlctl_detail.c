/*
 * rlctl_detail.c - what `get` shows of a tracked key beyond its decision:
 * each limit of a compound policy, and the holders of an in-flight limit.
 *
 * The key's state is copied once under its lock (srl_key_state) and then
 * decoded with the public pure-core calls (srl_limits_state_offset,
 * srl_state_peek, srl_holder_get): rlctl never reads a segment itself.
 * Holder times are the limiter's ticker time (CLOCK_MONOTONIC, or the
 * coarse clock, which lags it by at most a few ms): "held" is rounded.
 */
#include "rlctl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rlctl_detail_load(srl_limiter *lim, const srl_info *in, const void *key, size_t len,
                      rlctl_detail *out)
{
    memset(out, 0, sizeof *out);
    if (in->limits.count <= 1 && !rlctl_has_units(in))
        return 0;   /* one rate limit: the decision says it all */
    out->state = calloc(1, in->state_bytes ? in->state_bytes : 1);
    if (out->state == NULL)
        return SRL_ENOMEM;
    int rc = srl_key_state(lim, key, len, out->state, in->state_bytes);
    if (rc != 0) {
        free(out->state);
        out->state = NULL;
        return rc == SRL_ENOENT || rc == SRL_ENOTSUP ? 0 : rc;
    }
    out->now = srl_monotonic_ns(NULL);
    return 0;
}

void rlctl_detail_free(rlctl_detail *d)
{
    free(d->state);
    d->state = NULL;
}

static const void *slice(const srl_info *in, const rlctl_detail *d, uint32_t i)
{
    return (const char *)d->state + srl_limits_state_offset(&in->limits, i);
}

/* A holder's mark: a dead one's unit is still counted until the next evict
 * or the next worker that finds the key full frees it. */
static const char *alive_text(const srl_holder *h)
{
    switch (srl_holder_alive(h)) {
    case 1:
        return "alive";
    case 0:
        return "dead: freed by the next evict";
    default:
        return "in another PID namespace";
    }
}

void rlctl_detail_print(const srl_info *in, const rlctl_detail *d)
{
    if (d->state == NULL)
        return;
    for (uint32_t i = 0; i < in->limits.count; i++) {
        const srl_policy *p = &in->limits.limit[i];
        char text[SRL_POLICY_TEXT_MAX], dur[48];
        if (srl_policy_format(p, text, sizeof text) < 0)
            snprintf(text, sizeof text, "?");
        srl_decision x;
        if (srl_state_peek(p, slice(in, d, i), d->now, 1, &x) != 0)
            continue;
        if (p->algorithm == SRL_CONCURRENCY) {
            uint32_t busy = x.allowed ? p->permits - x.remaining - 1 : p->permits;
            printf("  limit %u (%s): %u of %u in flight", i, text, busy, p->permits);
            const char *sep = ": ";
            for (uint32_t u = 0; u < p->permits; u++) {
                srl_holder h;
                if (srl_holder_get(p, slice(in, d, i), u, &h) != 1)
                    continue;
                uint64_t held = d->now > h.since_ns ? d->now - h.since_ns : 0;
                printf("%spid %d for %s (%s)", sep, (int)h.pid,
                       rlctl_fmt_duration(held, dur, sizeof dur), alive_text(&h));
                sep = ", ";
            }
            printf("\n");
        } else if (x.allowed) {
            printf("  limit %u (%s): %u of %u left\n", i, text, x.remaining + 1, x.limit);
        } else {
            printf("  limit %u (%s): none left, retry after %s\n", i, text,
                   rlctl_fmt_duration(x.retry_after_ns, dur, sizeof dur));
        }
    }
}

void rlctl_detail_json(rlctl_json *j, const srl_info *in, const rlctl_detail *d)
{
    if (d->state == NULL)
        return;
    rlctl_json_begin_arr(j, "limits");
    for (uint32_t i = 0; i < in->limits.count; i++) {
        const srl_policy *p = &in->limits.limit[i];
        char text[SRL_POLICY_TEXT_MAX];
        srl_decision x;
        if (srl_policy_format(p, text, sizeof text) < 0 ||
            srl_state_peek(p, slice(in, d, i), d->now, 1, &x) != 0)
            continue;
        rlctl_json_begin_obj(j, NULL);
        rlctl_json_u64(j, "index", i);
        rlctl_json_str(j, "policy", text);
        rlctl_json_bool(j, "allowed", x.allowed);
        rlctl_json_u64(j, "remaining", x.allowed ? (uint64_t)x.remaining + 1 : 0);
        rlctl_json_u64(j, "retry_after_ns", x.retry_after_ns);
        if (p->algorithm == SRL_CONCURRENCY) {
            rlctl_json_u64(j, "inflight", x.allowed ? p->permits - x.remaining - 1 : p->permits);
            rlctl_json_begin_arr(j, "holders");
            for (uint32_t u = 0; u < p->permits; u++) {
                srl_holder h;
                if (srl_holder_get(p, slice(in, d, i), u, &h) != 1)
                    continue;
                rlctl_json_begin_obj(j, NULL);
                rlctl_json_i64(j, "pid", h.pid);
                rlctl_json_u64(j, "held_ns", d->now > h.since_ns ? d->now - h.since_ns : 0);
                int alive = srl_holder_alive(&h);
                if (alive == 0 || alive == 1)
                    rlctl_json_bool(j, "alive", alive);
                else
                    rlctl_json_null(j, "alive");   /* another PID namespace */
                rlctl_json_end_obj(j);
            }
            rlctl_json_end_arr(j);
        }
        rlctl_json_end_obj(j);
    }
    rlctl_json_end_arr(j);
}

static int sum_inflight(const srl_entry *e, void *ctx)
{
    *(uint64_t *)ctx += e->inflight;
    return 0;
}

int rlctl_inflight(srl_limiter *lim, uint64_t *out)
{
    *out = 0;
    int64_t n = srl_foreach(lim, sum_inflight, out);
    return n < 0 ? (int)n : 0;
}

int rlctl_has_units(const srl_info *in)
{
    for (uint32_t i = 0; i < in->limits.count; i++)
        if (in->limits.limit[i].algorithm == SRL_CONCURRENCY)
            return 1;
    return 0;
}
