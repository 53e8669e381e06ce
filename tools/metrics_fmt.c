/*
 * metrics_fmt.c - srl segments as Prometheus text (see metrics_fmt.h).
 *
 * Every number comes from srl_info (the header, written once) and srl_stats
 * (the per-bucket counters summed by srl_stats_get): exporting adds no
 * counter to the decision path.
 *
 * srl_decisions_total splits every decision into exactly one result, so
 * the results add up to all decisions:
 *   allowed / denied  decided by the key's state
 *   untracked         table full: decided by on_full (srl_stats.full); the
 *                     library counts these in allowed or denied as well,
 *                     by the segment's fixed on_full, so they are taken
 *                     out of that one here
 *   degraded          a lock wait timed out (srl_stats.timeouts): decided
 *                     by on_full without a state.  Also counts timeouts of
 *                     maintenance calls (rlctl, evict), so it is an upper
 *                     bound on degraded decisions.
 * The counters are summed bucket by bucket while workers run, so a
 * difference can be momentarily negative: it is clamped at 0.
 *
 * Numbers are printed with integer arithmetic (no locale, no rounding
 * surprises); ratios with 6 decimals, seconds with up to 9.
 */
#include "metrics_fmt.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

enum fam {
    F_UP, F_INFO, F_DECISIONS, F_KEYS, F_INFLIGHT, F_CAPACITY, F_LOAD, F_RECOVERED, F_RESET, F_EVICTED,
    F_RECLAIMED, F_TIMEOUTS, F_WOULD_DENY, F_EXEMPT, F_EVICTED_ACTIVE, F_BYTES, F_PERMITS,
    F_WINDOW, F_CREATED, F_BANS, F_COUNT
};

static const struct family {
    const char *name, *type, *help;
} families[F_COUNT] = {
    [F_UP] = {"srl_segment_up", "gauge",
              "1 if the segment could be read; the status label says why not"},
    [F_INFO] = {"srl_segment_info", "gauge",
                "Always 1; the labels carry the segment's policy and on_full"},
    [F_DECISIONS] = {"srl_decisions_total", "counter",
                     "Decisions by result: allowed/denied by the key's state, untracked "
                     "(table full) and degraded (lock timeout) by on_full"},
    [F_KEYS] = {"srl_keys", "gauge", "Keys tracked now"},
    [F_INFLIGHT] = {"srl_inflight_units", "gauge",
                    "Units of the concurrency limit held now, over all keys (segments with "
                    "one; units of dead holders count until reclaimed)"},
    [F_CAPACITY] = {"srl_capacity_keys", "gauge", "Slots in the table (most keys it can track)"},
    [F_LOAD] = {"srl_table_load_ratio", "gauge",
                "Keys tracked / capacity; at 0.9 or more make a bigger segment"},
    [F_RECOVERED] = {"srl_recovered_total", "counter",
                     "Buckets repaired after a lock owner died"},
    [F_RESET] = {"srl_reset_slots_total", "counter",
                 "Key states reset to fresh by repair (failed validation)"},
    [F_EVICTED] = {"srl_evicted_total", "counter", "Key states at rest reclaimed"},
    [F_RECLAIMED] = {"srl_reclaimed_total", "counter",
                     "In-flight units freed because their holder died or held them past max_hold"},
    [F_TIMEOUTS] = {"srl_lock_timeouts_total", "counter", "Bucket lock waits that timed out"},
    [F_WOULD_DENY] = {"srl_would_deny_total", "counter",
                      "Denials that dry-run handles allowed (SRL_CONFIG_DRY_RUN; also counted "
                      "as denied)"},
    [F_EXEMPT] = {"srl_exempt_total", "counter",
                  "Decisions of exempt keys (rlctl exempt; also counted as allowed)"},
    [F_EVICTED_ACTIVE] = {"srl_evicted_active_total", "counter",
                          "Keys not at rest whose slot a new key took (on_full=evict)"},
    [F_BYTES] = {"srl_segment_bytes", "gauge", "Size of the shared-memory segment"},
    [F_PERMITS] = {"srl_policy_permits", "gauge",
                   "Per limit of the policy (label limit, its index): requests a key may make "
                   "per window, or units in flight for a concurrency limit"},
    [F_WINDOW] = {"srl_policy_window_seconds", "gauge",
                  "Per limit: its window (a concurrency limit: max_hold, 0 for none)"},
    [F_CREATED] = {"srl_segment_created_timestamp_seconds", "gauge",
                   "Wall-clock time the segment was created (a change: it was recreated)"},
    [F_BANS] = {"srl_bans_active", "gauge",
                "Keys banned now, by kind: hand (rlctl ban, srl_key_ban) or penalty (a "
                "limit's penalty=)"},
};

struct out {
    srl__metrics_put put;
    void *ctx;
};

static void puts_(const struct out *o, const char *s)
{
    o->put(o->ctx, s, strlen(s));
}

/* A label value: backslash, double quote and newline escaped. */
static void label(const struct out *o, const char *k, const char *v, int first)
{
    if (!first)
        puts_(o, ",");
    puts_(o, k);
    puts_(o, "=\"");
    for (const char *p = v; *p; p++) {
        const char *esc = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
        if (esc != NULL)
            puts_(o, esc);
        else
            o->put(o->ctx, p, 1);
    }
    puts_(o, "\"");
}

static void u64(const struct out *o, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    puts_(o, b);
}

/* num/den with `digits` decimals (truncated), trailing zeros kept off. */
static void fixed(const struct out *o, uint64_t num, uint64_t den, unsigned digits)
{
    if (den == 0) {
        puts_(o, "0");
        return;
    }
    char b[48];
    uint64_t whole = num / den, rem = num % den, frac = 0, scale = 1;
    for (unsigned i = 0; i < digits; i++)
        scale *= 10;
    /* rem < den; den is a capacity (<= 2^32) or 1e9, so rem*scale fits. */
    frac = (uint64_t)(((unsigned __int128)rem * scale) / den);
    int n = snprintf(b, sizeof b, "%" PRIu64 ".%0*" PRIu64, whole, (int)digits, frac);
    while (n > 0 && b[n - 1] == '0')
        b[--n] = '\0';
    if (n > 0 && b[n - 1] == '.')
        b[--n] = '\0';
    puts_(o, b);
}

static uint64_t minus(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* One sample of family f per value: f{segment="...",key="v[i].label"} v[i].v. */
struct split {
    const char *label;
    uint64_t v;
};
static void splits(const struct out *o, enum fam f, const srl__metrics_seg *g, const char *key,
                   const struct split *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        puts_(o, families[f].name);
        puts_(o, "{");
        label(o, "segment", g->name, 1);
        label(o, key, v[i].label, 0);
        puts_(o, "} ");
        u64(o, v[i].v);
        puts_(o, "\n");
    }
}

static void decisions(const struct out *o, const srl__metrics_seg *g)
{
    const srl_stats *s = &g->stats;
    int deny = g->info.on_full == SRL_ON_FULL_DENY;
    const struct split r[] = {
        {"allowed", deny ? s->allowed : minus(s->allowed, s->full)},
        {"denied", deny ? minus(s->denied, s->full) : s->denied},
        {"untracked", s->full},
        {"degraded", s->timeouts},
    };
    splits(o, F_DECISIONS, g, "result", r, sizeof r / sizeof r[0]);
}

/* One sample per limit of a compound (label limit="i"). */
static void per_limit(const struct out *o, enum fam f, const srl__metrics_seg *g)
{
    for (uint32_t i = 0; i < g->info.limits.count; i++) {
        const srl_policy *p = &g->info.limits.limit[i];
        char idx[12];
        snprintf(idx, sizeof idx, "%u", (unsigned)i);
        puts_(o, families[f].name);
        puts_(o, "{");
        label(o, "segment", g->name, 1);
        label(o, "limit", idx, 0);
        puts_(o, "} ");
        if (f == F_PERMITS)
            u64(o, p->permits);
        else
            fixed(o, p->window_ns, SRL_NS_PER_S, 9);
        puts_(o, "\n");
    }
}

/* Two samples, kind="hand" and kind="penalty". */
static void bans(const struct out *o, const srl__metrics_seg *g)
{
    const struct split k[] = {
        {"hand", g->bans_hand},
        {"penalty", g->bans_penalty},
    };
    splits(o, F_BANS, g, "kind", k, sizeof k / sizeof k[0]);
}

static int count_ban(const srl_entry *e, void *ctx)
{
    srl__metrics_seg *g = ctx;
    if (e->control & SRL_KEY_BANNED)   /* a hand ban decides over a penalty's */
        g->bans_hand++;
    else if (e->control & SRL_KEY_PENALTY)
        g->bans_penalty++;
    return 0;
}

int srl__metrics_count_bans(srl_limiter *lim, srl__metrics_seg *g)
{
    g->bans_hand = g->bans_penalty = 0;
    int64_t n = srl_foreach(lim, count_ban, g);
    g->bans_counted = n >= 0;
    return n < 0 ? (int)n : 0;
}

static void sample(const struct out *o, enum fam f, const srl__metrics_seg *g)
{
    const srl_info *in = &g->info;
    const srl_stats *s = &g->stats;
    if (f == F_DECISIONS) {
        decisions(o, g);
        return;
    }
    if (f == F_PERMITS || f == F_WINDOW) {
        per_limit(o, f, g);
        return;
    }
    if (f == F_BANS) {
        bans(o, g);
        return;
    }
    puts_(o, families[f].name);
    puts_(o, "{");
    label(o, "segment", g->name, 1);
    if (f == F_UP)
        label(o, "status", g->status, 0);
    if (f == F_INFO) {
        char pol[SRL_LIMITS_TEXT_MAX];
        const char *alg = srl_algorithm_name(in->policy.algorithm);
        if (srl_limits_format(&in->limits, pol, sizeof pol) < 0)
            snprintf(pol, sizeof pol, "?");
        label(o, "policy", pol, 0);
        label(o, "algorithm", alg != NULL ? alg : "?", 0);
        label(o, "on_full",
              in->on_full == SRL_ON_FULL_DENY    ? "deny"
              : in->on_full == SRL_ON_FULL_EVICT ? "evict"
                                                 : "allow",
              0);
    }
    puts_(o, "} ");
    switch (f) {
    case F_UP: u64(o, g->ok ? 1 : 0); break;
    case F_INFO: u64(o, 1); break;
    case F_KEYS: u64(o, s->used); break;
    case F_INFLIGHT: u64(o, g->inflight); break;
    case F_CAPACITY: u64(o, in->capacity); break;
    case F_LOAD: fixed(o, s->used, in->capacity, 6); break;
    case F_RECOVERED: u64(o, s->recovered); break;
    case F_RESET: u64(o, s->reset_slots); break;
    case F_EVICTED: u64(o, s->evicted); break;
    case F_RECLAIMED: u64(o, s->reclaimed); break;
    case F_TIMEOUTS: u64(o, s->timeouts); break;
    case F_WOULD_DENY: u64(o, s->would_deny); break;
    case F_EXEMPT: u64(o, s->exempt); break;
    case F_EVICTED_ACTIVE: u64(o, s->evicted_active); break;
    case F_BYTES: u64(o, in->segment_bytes); break;
    case F_CREATED: fixed(o, in->created_unix_ns, SRL_NS_PER_S, 9); break;
    default: break;
    }
    puts_(o, "\n");
}

static void head(const struct out *o, const struct family *f)
{
    puts_(o, "# HELP ");
    puts_(o, f->name);
    puts_(o, " ");
    puts_(o, f->help);
    puts_(o, "\n# TYPE ");
    puts_(o, f->name);
    puts_(o, " ");
    puts_(o, f->type);
    puts_(o, "\n");
}

void srl__metrics_format(const srl__metrics_seg *segs, size_t n, srl__metrics_put put, void *ctx)
{
    const struct out o = {put, ctx};
    for (int f = 0; f < F_COUNT; f++) {
        head(&o, &families[f]);
        for (size_t i = 0; i < n; i++)
            if ((segs[i].ok || f == F_UP) && (f != F_INFLIGHT || segs[i].inflight_counted) &&
                (f != F_BANS || segs[i].bans_counted))
                sample(&o, (enum fam)f, &segs[i]);
    }
}

void srl__metrics_gauge(srl__metrics_put put, void *ctx, const char *name, const char *help,
                        const char *key, const char *const *labels, const uint64_t *values,
                        size_t n)
{
    const struct out o = {put, ctx};
    const struct family f = {name, "gauge", help};
    head(&o, &f);
    for (size_t i = 0; i < n; i++) {
        puts_(&o, name);
        puts_(&o, "{");
        label(&o, key, labels[i], 1);
        puts_(&o, "} ");
        u64(&o, values[i]);
        puts_(&o, "\n");
    }
}
