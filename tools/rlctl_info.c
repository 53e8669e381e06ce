/*
 * rlctl_info.c - info: one segment's policy, geometry, use and counters.
 *
 * Reads srl_info (the header: written once at creation) and srl_stats (the
 * per-bucket counters, summed one bucket at a time while workers run, so
 * the sum is a moment-by-moment view, not one atomic snapshot).  Derived
 * figures: load factor used/capacity; bytes per slot segment/capacity (the
 * header and bucket overhead shared out); bytes per tracked key
 * segment/used (what each live key costs at today's use; none when empty);
 * age from the wall-clock creation time.
 *
 * The JSON object is flat: every counter is a top-level integer field
 * (allowed, denied, used, ...), which the e2e scripts rely on.
 *
 * A Redis store (NAME a uri) has no geometry, owner or file: info shows
 * its prefix, policy, when its P:cfg was made (the server's clock) and the
 * fleet-wide allowed/denied of P:stats; timeouts are this rlctl's own.
 */
#include "rlctl.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

static uint64_t age_ns(uint64_t created_unix_ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    return now > created_unix_ns ? now - created_unix_ns : 0;
}

static void iso_time(uint64_t unix_ns, char *buf, size_t len)
{
    time_t t = (time_t)(unix_ns / 1000000000ull);
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "?");
}


static void info_json(const char *name, const srl_info *in, const srl_stats *st, const char *pol,
                      const char *owner, uint64_t age, uint64_t inflight,
                      const struct rlctl_tiers *tiers)
{
    char s[48];
    rlctl_json j;
    rlctl_json_init(&j, stdout);
    rlctl_json_begin_obj(&j, NULL);
    rlctl_json_str(&j, "name", name);
    char health[48];
    unsigned w = rlctl_warnings(in, st);
    rlctl_json_str(&j, "status", rlctl_warnings_text(w, health, sizeof health));
    rlctl_json_str(&j, "policy", pol);
    rlctl_json_str(&j, "algorithm", srl_algorithm_name(in->policy.algorithm));
    rlctl_json_u64(&j, "permits", in->policy.permits);
    rlctl_json_u64(&j, "window_ns", in->policy.window_ns);
    rlctl_json_str(&j, "on_full", in->on_full == SRL_ON_FULL_DENY ? "deny" : in->on_full == SRL_ON_FULL_EVICT ? "evict" : "allow");
    rlctl_json_u64(&j, "capacity", in->capacity);
    rlctl_json_u64(&j, "buckets", in->buckets);
    rlctl_json_u64(&j, "slots_per_bucket", in->slots_per_bucket);
    rlctl_json_u64(&j, "used", st->used);
    rlctl_json_ratio(&j, "load_factor", st->used, in->capacity);
    rlctl_json_u64(&j, "segment_bytes", in->segment_bytes);
    rlctl_json_u64(&j, "slot_bytes", in->slot_bytes);
    rlctl_json_ratio(&j, "bytes_per_slot", in->segment_bytes, in->capacity);
    rlctl_json_ratio(&j, "bytes_per_key", in->segment_bytes, st->used);
    rlctl_json_u64(&j, "key_display", in->key_display);
    snprintf(s, sizeof s, "%04o", in->mode);
    rlctl_json_u64(&j, "mode", in->mode);
    rlctl_json_str(&j, "mode_octal", s);
    rlctl_json_u64(&j, "owner_uid", in->owner_uid);
    rlctl_json_str(&j, "owner", owner);
    rlctl_json_i64(&j, "creator_pid", in->creator_pid);
    rlctl_json_u64(&j, "created_unix_ns", in->created_unix_ns);
    rlctl_json_u64(&j, "age_ns", age);
    rlctl_json_u64(&j, "allowed", st->allowed);
    rlctl_json_u64(&j, "denied", st->denied);
    rlctl_json_u64(&j, "would_deny", st->would_deny);
    rlctl_json_u64(&j, "full", st->full);
    rlctl_json_u64(&j, "recovered", st->recovered);
    rlctl_json_u64(&j, "reset_slots", st->reset_slots);
    rlctl_json_u64(&j, "evicted", st->evicted);
    if (rlctl_has_units(in)) {
        rlctl_json_u64(&j, "reclaimed", st->reclaimed);
        rlctl_json_u64(&j, "inflight", inflight);
    }
    rlctl_json_u64(&j, "timeouts", st->timeouts);
    rlctl_json_u64(&j, "policy_gen", in->policy_gen);
    rlctl_json_u64(&j, "tier_count", tiers->n);
    rlctl_tiers_json(&j, tiers);
    rlctl_json_end_obj(&j);
    rlctl_json_end(&j);
}

#define ROW(label, ...)                    \
    do {                                   \
        printf("%-16s", label ":");        \
        printf(__VA_ARGS__);               \
        putchar('\n');                     \
    } while (0)

static void info_text(const char *name, const srl_info *in, const srl_stats *st, const char *pol,
                      const char *owner, uint64_t age, uint64_t inflight,
                      const struct rlctl_tiers *tiers)
{
    char a[48], b[48];
    unsigned w = rlctl_warnings(in, st);
    ROW("name", "%s", name);
    ROW("status", "%s", rlctl_warnings_text(w, a, sizeof a));
    ROW("policy", "%s", pol);
    rlctl_tiers_text(tiers);
    if (in->kind == SRL_STORE_SHARED || in->kind == SRL_STORE_ANONYMOUS)
        ROW("policy gen", "%u (%s)", in->policy_gen,
            in->policy_gen == 0 ? "as created" : "changed live: rlctl set-policy");
    ROW("on full", "%s", in->on_full == SRL_ON_FULL_DENY ? "deny" : in->on_full == SRL_ON_FULL_EVICT ? "evict" : "allow");
    ROW("capacity", "%" PRIu64 " %s (%" PRIu64 " %s of %u)", in->capacity,
        rlctl_plural(in->capacity, "slot", "slots"), in->buckets,
        rlctl_plural(in->buckets, "bucket", "buckets"), in->slots_per_bucket);
    ROW("used", "%" PRIu64 " %s", st->used, rlctl_plural(st->used, "key", "keys"));
    ROW("load factor", "%s", rlctl_fmt_percent(st->used, in->capacity, a, sizeof a));
    ROW("segment size", "%" PRIu64 " bytes (%s)", in->segment_bytes,
        rlctl_fmt_bytes(in->segment_bytes, b, sizeof b));
    char sb[128];
    ROW("bytes per slot", "%s", rlctl_fmt_slot_bytes(in, sb, sizeof sb));
    if (st->used)
        ROW("bytes per key", "%" PRIu64 " (the segment over the %" PRIu64 " %s tracked)",
            in->segment_bytes / st->used, st->used, rlctl_plural(st->used, "key", "keys"));
    else
        ROW("bytes per key", "- (no key tracked)");
    ROW("key display", "%u bytes", in->key_display);
    ROW("mode", "%04o", in->mode);
    ROW("owner", "%s (uid %u)", owner, in->owner_uid);
    /* kill(pid, 0): ESRCH means no such process in our pid namespace. */
    int gone = in->creator_pid > 0 && kill((pid_t)in->creator_pid, 0) != 0 && errno == ESRCH;
    ROW("creator pid", "%d (%s)", in->creator_pid, gone ? "exited" : "running");
    iso_time(in->created_unix_ns, a, sizeof a);
    ROW("created", "%s (age %s)", a, rlctl_fmt_duration(age, b, sizeof b));
    ROW("allowed", "%" PRIu64, st->allowed);
    ROW("denied", "%" PRIu64, st->denied);
    ROW("would deny", "%" PRIu64 " (of those denied, allowed by dry-run handles)", st->would_deny);
    ROW("full", "%" PRIu64, st->full);
    ROW("recovered", "%" PRIu64, st->recovered);
    ROW("reset slots", "%" PRIu64, st->reset_slots);
    ROW("evicted", "%" PRIu64, st->evicted);
    ROW("timeouts", "%" PRIu64, st->timeouts);
    if (rlctl_has_units(in)) {
        ROW("in flight", "%" PRIu64 " %s", inflight, inflight == 1 ? "unit" : "units");
        ROW("reclaimed", "%" PRIu64 " (in-flight units of dead or stuck holders)", st->reclaimed);
    }
    rlctl_warnings_explain(w, name, pol, in->capacity, stdout);
}

static void info_redis(const char *name, const srl_info *in, const srl_stats *st,
                       const char *pol, uint64_t age, int json)
{
    char a[48], b[48];
    if (json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "name", name);
        rlctl_json_str(&j, "store", "redis");
        rlctl_json_str(&j, "prefix", in->name);
        rlctl_json_str(&j, "policy", pol);
        rlctl_json_str(&j, "algorithm", srl_algorithm_name(in->policy.algorithm));
        rlctl_json_u64(&j, "permits", in->policy.permits);
        rlctl_json_u64(&j, "window_ns", in->policy.window_ns);
        rlctl_json_u64(&j, "created_unix_ns", in->created_unix_ns);
        rlctl_json_u64(&j, "age_ns", age);
        rlctl_json_u64(&j, "allowed", st->allowed);
        rlctl_json_u64(&j, "denied", st->denied);
        rlctl_json_u64(&j, "timeouts", st->timeouts);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
        return;
    }
    ROW("name", "%s", name);
    ROW("store", "redis (prefix %s)", in->name);
    ROW("policy", "%s", pol);
    iso_time(in->created_unix_ns, a, sizeof a);
    ROW("created", "%s (age %s, the server's clock)", a, rlctl_fmt_duration(age, b, sizeof b));
    ROW("allowed", "%" PRIu64 " (every host)", st->allowed);
    ROW("denied", "%" PRIu64 " (every host)", st->denied);
    ROW("keys", "not counted: 'rlctl list' walks them");
}

int rlctl_cmd_info(const rlctl_opts *o)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    srl_info in;
    srl_stats st;
    struct rlctl_tiers tiers;
    uint64_t inflight = 0;
    int rc = srl_info_get(lim, &in);
    if (rc == 0) {
        rlctl_progress p;
        rlctl_progress_begin(&p, o, NULL, NULL, 0, "rlctl: info: counting %s: %" PRIu64 " %s",
                             rlctl_seg_name(&in, o->name), in.buckets,
                             rlctl_plural(in.buckets, "bucket", "buckets"));
        rc = srl_stats_get(lim, &st);
        if (rc == 0 && rlctl_has_units(&in) && in.kind != SRL_STORE_REDIS)
            rc = rlctl_inflight(lim, &inflight);
        if (rc == 0)
            rc = rlctl_tiers_load(lim, &in, in.kind != SRL_STORE_REDIS, &tiers);
        rlctl_progress_end(&p);
    }
    srl_close(lim);
    if (rc != 0)
        return rlctl_fail_cmd(o, rc);
    char pol[SRL_LIMITS_TEXT_MAX], owner[64];
    if (srl_limits_format(&in.limits, pol, sizeof pol) < 0)
        snprintf(pol, sizeof pol, "?");
    rlctl_owner_name(in.owner_uid, owner, sizeof owner);
    uint64_t age = age_ns(in.created_unix_ns);
    if (in.kind == SRL_STORE_REDIS)
        info_redis(o->name, &in, &st, pol, age, o->json);
    else if (o->json)
        info_json(rlctl_seg_name(&in, o->name), &in, &st, pol, owner, age, inflight, &tiers);
    else
        info_text(rlctl_seg_name(&in, o->name), &in, &st, pol, owner, age, inflight, &tiers);
    return rlctl_flush(EX_OK);
}
