/*
 * rlctl_tiers.c - a segment's tiers as rlctl shows them: the table (names
 * and policies, read with srl_tier_get while the segment is open) and, for
 * info, how many tracked keys each tier holds (one srl_foreach walk, one
 * bucket lock at a time, so a moment-by-moment count like srl_stats).
 *
 * Only segments with more than one tier show any of it: a one-tier segment's
 * output is what it was before tiers existed.
 */
#include "rlctl.h"

#include <string.h>

static int count_tier(const srl_entry *e, void *ctx)
{
    struct rlctl_tiers *t = ctx;
    if (e->tier < t->n)
        t->keys[e->tier]++;
    return 0;
}

int rlctl_tiers_load(srl_limiter *lim, const srl_info *in, int count_keys,
                     struct rlctl_tiers *out)
{
    memset(out, 0, sizeof *out);
    out->n = in->tier_count >= 1 && in->tier_count <= SRL_TIERS_MAX ? in->tier_count : 1;
    for (uint32_t i = 0; i < out->n; i++) {
        srl_tier t;
        int rc = srl_tier_get(lim, i, &t);
        if (rc != 0)
            return rc;
        snprintf(out->name[i], sizeof out->name[i], "%s", t.name);
        if (srl_limits_format(&t.limits, out->policy[i], sizeof out->policy[i]) < 0)
            snprintf(out->policy[i], sizeof out->policy[i], "?");
    }
    if (count_keys && out->n > 1) {
        int64_t n = srl_foreach(lim, count_tier, out);
        if (n < 0)
            return (int)n;
        out->counted = 1;
    }
    return 0;
}

const char *rlctl_tier_name(const struct rlctl_tiers *t, uint32_t i)
{
    return i < t->n ? t->name[i] : "?";
}

void rlctl_tiers_text(const struct rlctl_tiers *t)
{
    if (t->n <= 1)
        return;
    for (uint32_t i = 0; i < t->n; i++) {
        char label[48];
        snprintf(label, sizeof label, "tier %u:", i);
        printf("%-16s%s = %s", label, t->name[i], t->policy[i]);
        if (t->counted)
            printf(" (%" PRIu64 " %s)", t->keys[i], rlctl_plural(t->keys[i], "key", "keys"));
        putchar('\n');
    }
}

void rlctl_tiers_json(rlctl_json *j, const struct rlctl_tiers *t)
{
    rlctl_json_begin_arr(j, "tiers");
    for (uint32_t i = 0; i < t->n; i++) {
        rlctl_json_begin_obj(j, NULL);
        rlctl_json_u64(j, "index", i);
        rlctl_json_str(j, "name", t->name[i]);
        rlctl_json_str(j, "policy", t->policy[i]);
        if (t->counted)
            rlctl_json_u64(j, "keys", t->keys[i]);
        rlctl_json_end_obj(j);
    }
    rlctl_json_end_arr(j);
}

/* The tier called tname; or -1 and "no tier NAME" with the tiers the
 * segment has (a segment of one tier has only its own policy, which info
 * shows as "policy", not as a tier row). */
int rlctl_tier_index(srl_limiter *lim, const srl_info *in, const char *tname, char *msg,
                     size_t len)
{
    int found = srl_tier_find(lim, tname);
    if (found >= 0)
        return found;
    struct rlctl_tiers t;
    int n = snprintf(msg, len, "no tier '%.32s' in the %s", tname,
                     in->kind == SRL_STORE_REDIS ? "store" : "segment");
    if (rlctl_tiers_load(lim, in, 0, &t) != 0)
        return -1;
    if (t.n <= 1) {
        snprintf(msg + n, len - (size_t)n, " (it has only tier 0, 'default': its own policy)");
        return -1;
    }
    n += snprintf(msg + n, len - (size_t)n, " (its tiers:");
    for (uint32_t i = 0; i < t.n && (size_t)n < len; i++)
        n += snprintf(msg + n, len - (size_t)n, "%s %s", i ? "," : "", t.name[i]);
    if ((size_t)n < len)
        snprintf(msg + n, len - (size_t)n, ")");
    return -1;
}
