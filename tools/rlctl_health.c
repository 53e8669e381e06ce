/*
 * rlctl_health.c - what in a readable segment needs the operator.
 *
 * Five conditions, judged from srl_info + srl_stats alone (no lock beyond
 * srl_stats_get's, which walks every bucket; truncated needs srl_info only,
 * and is all that ls judges without --keys):
 *   load       used >= 90 % of capacity: inserts soon fail (or already do)
 *   untracked  decisions were made by on_full because the table was full
 *   repaired   buckets were repaired after a lock owner died
 *   timeouts   lock waits timed out (a process held a bucket lock too long)
 *   truncated  the file is shorter than the table (srl_info.file_bytes)
 * The counters are totals since creation, so untracked, repaired and
 * timeouts stay shown until the segment is recreated: they say "this has
 * happened", which is what a status column is for; watch shows rates.
 * ls prints the tokens joined by ',' ("ok" when none); info adds one line
 * per condition with what to do.
 */
#include "rlctl.h"

#include <string.h>

static const struct {
    unsigned bit;
    const char *token, *what;
} conds[] = {
    {RLCTL_WARN_LOAD, "load", "the table is at or above 90 % load: new keys will soon be (or "
                              "are) decided by on_full, not by the policy"},
    {RLCTL_WARN_UNTRACKED, "untracked", "decisions were made by on_full because the table was "
                                        "full (counter 'full')"},
    {RLCTL_WARN_REPAIRED, "repaired", "buckets were repaired after a worker died holding a "
                                      "lock: run 'rlctl check', and find why workers die"},
    {RLCTL_WARN_TIMEOUTS, "timeouts", "lock waits timed out (those decisions came from "
                                      "on_full): look for stopped or stuck workers"},
    {RLCTL_WARN_TRUNCATED, "truncated", "the segment's file is shorter than its table: a "
                                        "worker that touches the missing part dies of SIGBUS: "
                                        "stop the workers, destroy the segment, restart them"},
};

unsigned rlctl_warnings(const srl_info *in, const srl_stats *st)
{
    unsigned w = 0;
    if (in->kind == SRL_STORE_SHARED && in->file_bytes < in->segment_bytes)
        w |= RLCTL_WARN_TRUNCATED;
    if (st == NULL) /* not walked (ls without --keys): the header's word only */
        return w;
    /* used * 10 >= capacity * 9, in 128 bits: no overflow, no rounding. */
    if (in->capacity != 0 &&
        (unsigned __int128)st->used * 10 >= (unsigned __int128)in->capacity * 9)
        w |= RLCTL_WARN_LOAD;
    if (st->full != 0)
        w |= RLCTL_WARN_UNTRACKED;
    if (st->recovered != 0)
        w |= RLCTL_WARN_REPAIRED;
    if (st->timeouts != 0)
        w |= RLCTL_WARN_TIMEOUTS;
    return w;
}

const char *rlctl_warnings_text(unsigned w, char *buf, size_t len)
{
    snprintf(buf, len, "%s", w == 0 ? "ok" : "");
    for (size_t i = 0; i < sizeof conds / sizeof conds[0]; i++) {
        if (w & conds[i].bit) {
            size_t n = strlen(buf);
            snprintf(buf + n, len - n, "%s%s", n ? "," : "", conds[i].token);
        }
    }
    return buf;
}

void rlctl_warnings_explain(unsigned w, const char *name, const char *pol, uint64_t capacity,
                            FILE *f)
{
    for (size_t i = 0; i < sizeof conds / sizeof conds[0]; i++)
        if (w & conds[i].bit)
            fprintf(f, "warning: %s: %s\n", conds[i].token, conds[i].what);
    if (w & (RLCTL_WARN_LOAD | RLCTL_WARN_UNTRACKED)) {
        /* Twice the slots; capped at what srl accepts. */
        uint64_t want = capacity > SRL_CAPACITY_MAX / 2 ? SRL_CAPACITY_MAX : 2 * capacity;
        fprintf(f,
                "fix: a bigger segment (this drops every key's state): raise the capacity the "
                "workers open it with to %" PRIu64 ", then\n"
                "     rlctl destroy %s && rlctl create %s --policy %s --capacity %" PRIu64 "\n",
                want, name, name, pol, want);
    }
}
