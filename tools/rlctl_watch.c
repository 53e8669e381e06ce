/*
 * rlctl_watch.c - watch: live rates of a segment, like varnishstat.
 *
 * Every interval (-i SECONDS, default 1) it reads srl_stats and prints the
 * per-second rates of allowed, denied, full and evicted decisions since
 * the previous sample, with the keys tracked and the running totals.  -n
 * COUNT stops after COUNT samples (scripts and tests); otherwise it runs
 * until interrupted.  --json prints one object per sample per line (JSON
 * Lines).
 *
 * Rates are deltas over the measured elapsed CLOCK_MONOTONIC time, not the
 * nominal interval, so a late wakeup does not inflate them.  Samples are
 * scheduled on absolute deadlines, so the interval does not drift.  A
 * counter that went down (it never should) gives a rate of 0, not a wrap.
 * srl_stats sums per-bucket counters one bucket at a time: workers are
 * never stopped, and no counter is added to their hot path.
 */
#include "rlctl.h"

#include <errno.h>
#include <time.h>

static uint64_t mono_ns(void)
{
    return srl_monotonic_ns(NULL);
}

static void sleep_until(uint64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                          .tv_nsec = (long)(deadline_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* Events per second, in thousandths, over elapsed_ns. */
static uint64_t rate_milli(uint64_t now, uint64_t before, uint64_t elapsed_ns)
{
    if (now <= before || elapsed_ns == 0)
        return 0;
    unsigned __int128 v = (unsigned __int128)(now - before) * 1000000000000ull / elapsed_ns;
    return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static void sample_json(const char *name, uint64_t t_ns, uint64_t elapsed, const srl_stats *c,
                        const srl_stats *p)
{
    rlctl_json j;
    rlctl_json_init(&j, stdout);
    rlctl_json_begin_obj(&j, NULL);
    rlctl_json_str(&j, "name", name);
    rlctl_json_u64(&j, "t_ns", t_ns);
    rlctl_json_u64(&j, "interval_ns", elapsed);
    rlctl_json_u64(&j, "used", c->used);
    rlctl_json_u64(&j, "capacity", c->capacity);
    rlctl_json_milli(&j, "allowed_per_s", rate_milli(c->allowed, p->allowed, elapsed));
    rlctl_json_milli(&j, "denied_per_s", rate_milli(c->denied, p->denied, elapsed));
    rlctl_json_milli(&j, "full_per_s", rate_milli(c->full, p->full, elapsed));
    rlctl_json_milli(&j, "evicted_per_s", rate_milli(c->evicted, p->evicted, elapsed));
    rlctl_json_u64(&j, "allowed", c->allowed);
    rlctl_json_u64(&j, "denied", c->denied);
    rlctl_json_u64(&j, "full", c->full);
    rlctl_json_u64(&j, "evicted", c->evicted);
    rlctl_json_u64(&j, "recovered", c->recovered);
    rlctl_json_u64(&j, "reset_slots", c->reset_slots);
    rlctl_json_u64(&j, "timeouts", c->timeouts);
    rlctl_json_end_obj(&j);
    rlctl_json_end(&j);
}

static const char *rate_text(uint64_t milli, char *buf, size_t len)
{
    snprintf(buf, len, "%" PRIu64 ".%" PRIu64, milli / 1000, milli / 100 % 10);
    return buf;
}

static void sample_text(uint64_t t_ns, uint64_t elapsed, const srl_stats *c, const srl_stats *p)
{
    char a[32], d[32], f[32], e[32], t[48];
    printf("%10s %10" PRIu64 " %12s %12s %10s %10s %14" PRIu64 " %14" PRIu64 " %10" PRIu64
           " %9" PRIu64 " %9" PRIu64 "\n",
           rlctl_fmt_duration(t_ns, t, sizeof t), c->used,
           rate_text(rate_milli(c->allowed, p->allowed, elapsed), a, sizeof a),
           rate_text(rate_milli(c->denied, p->denied, elapsed), d, sizeof d),
           rate_text(rate_milli(c->full, p->full, elapsed), f, sizeof f),
           rate_text(rate_milli(c->evicted, p->evicted, elapsed), e, sizeof e), c->allowed,
           c->denied, c->full, c->recovered, c->timeouts);
}

int rlctl_cmd_watch(const rlctl_opts *o)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    srl_stats prev, cur;
    int rc = srl_stats_get(lim, &prev);
    uint64_t start = mono_ns(), last = start, deadline = start;
    if (rc == 0 && !o->json) {
        printf("%10s %10s %12s %12s %10s %10s %14s %14s %10s %9s %9s\n", "TIME", "USED",
               "ALLOWED/s", "DENIED/s", "FULL/s", "EVICTED/s", "ALLOWED", "DENIED", "FULL",
               "RECOVERED", "TIMEOUTS");
        status = rlctl_flush(EX_OK);
    }
    for (uint64_t i = 0; rc == 0 && status == EX_OK && (o->count == 0 || i < o->count); i++) {
        deadline += o->interval_ns;
        sleep_until(deadline);
        rc = srl_stats_get(lim, &cur);
        if (rc != 0)
            break;
        uint64_t now = mono_ns();
        if (o->json)
            sample_json(o->name, now - start, now - last, &cur, &prev);
        else
            sample_text(now - start, now - last, &cur, &prev);
        status = rlctl_flush(EX_OK);
        prev = cur;
        last = now;
    }
    srl_close(lim);
    return rc != 0 ? rlctl_fail(o->name, rc) : status;
}
