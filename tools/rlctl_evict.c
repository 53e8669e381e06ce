/*
 * rlctl_evict.c - evict: drop the keys at rest, or count them (--dry-run).
 *
 * A key at rest is indistinguishable from a new one (srl_state_at_rest), so
 * dropping it changes no future decision: eviction is safe while workers
 * run.  srl_evict_idle takes one bucket lock at a time and decides "at
 * rest" under that lock, so a key that a worker touches during the walk is
 * never dropped.  --dry-run walks with srl_foreach and counts the entries
 * it reports at rest; it changes nothing (a key may of course come to rest,
 * or leave it, between a dry run and a real one).
 *
 * On a terminal a progress line shows while the walk runs
 * (rlctl_progress.c).
 *
 * Its own file so the race test can build rlctl with a deliberately broken
 * evict (tests/rlctl/broken_evict.c) in its place.
 */
#include "rlctl.h"

struct rest_count {
    uint64_t at_rest;
    rlctl_progress *progress;
};

static int count_at_rest(const srl_entry *e, void *ctx)
{
    struct rest_count *c = ctx;
    c->at_rest += e->at_rest != 0;
    rlctl_progress_add(c->progress, 1);
    return 0;
}

int rlctl_cmd_evict(const rlctl_opts *o)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    /* The progress line (on a tty only): keys checked for a dry run (a
     * walk with a callback), the elapsed time for srl_evict_idle (none). */
    rlctl_progress p;
    srl_info in;
    uint64_t buckets = srl_info_get(lim, &in) == 0 ? in.buckets : 0;
    if (o->dry_run)
        rlctl_progress_begin(&p, o, "key checked", "keys checked", 0,
                             "rlctl: evict --dry-run: %s", o->name);
    else
        rlctl_progress_begin(&p, o, NULL, NULL, 0, "rlctl: evict: %s: %" PRIu64 " %s", o->name,
                             buckets, rlctl_plural(buckets, "bucket", "buckets"));
    struct rest_count c = {.progress = &p};
    int64_t n = o->dry_run ? srl_foreach(lim, count_at_rest, &c) : srl_evict_idle(lim);
    rlctl_progress_end(&p);
    srl_close(lim);
    if (n < 0)
        return rlctl_fail_cmd(o, (int)n);
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "name", o->name);
        rlctl_json_bool(&j, "dry_run", o->dry_run);
        if (o->dry_run) {
            rlctl_json_u64(&j, "at_rest", c.at_rest);
            rlctl_json_i64(&j, "tracked", n);
        } else {
            rlctl_json_i64(&j, "evicted", n);
        }
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
    } else if (o->dry_run) {
        printf("%s: %" PRIu64 " of %" PRId64 " %s at rest would be evicted (dry run: nothing "
               "evicted)\n",
               o->name, c.at_rest, n, rlctl_plural((uint64_t)n, "key", "keys"));
    } else {
        printf("%s: evicted %" PRId64 " %s at rest\n", o->name, n,
               rlctl_plural((uint64_t)n, "key", "keys"));
    }
    return rlctl_flush(EX_OK);
}
