/*
 * rlctl_keys.c - commands on one key: get, try, reset.
 *
 * Exit status, for shell scripts:
 *   get    0 the key is tracked, 1 not tracked.  It prints the decision a
 *          request of --cost would get (srl_peek; with --tier, srl_peek_tier:
 *          as a request of that tier would find it): "remaining" is what
 *          would be left AFTER that request, as in srl_decision.  For a key not
 *          tracked: a fresh state's answer, or on_full's when every slot
 *          is taken (then it is untracked), with the same JSON fields.
 *   try    0 allowed, 1 denied; the request counts like a worker's
 *   reset  0 the key was reset, 1 it was not tracked (nothing to do)
 * and the sysexits codes of rlctl_open.c for errors.  A lock timeout in try
 * still prints the degraded on_full decision, then fails with EX_TEMPFAIL.
 *
 * Each call takes the key's bucket lock like a worker's would (through the
 * public API) and holds it only for that call.
 */
#include "rlctl.h"

#include <stdlib.h>
#include <string.h>

/* The key, escaped, for output; NULL on ENOMEM (reported). */
static char *key_text(const rlctl_opts *o)
{
    char *k = rlctl_escape(o->key, o->key_len);
    if (k == NULL)
        fputs("rlctl: out of memory\n", stderr);
    return k;
}

static void decision_json(rlctl_json *j, const srl_decision *d)
{
    char ra[32];
    if (srl_format_retry_after(d, ra, sizeof ra) < 0)
        snprintf(ra, sizeof ra, "0");
    rlctl_json_bool(j, "allowed", d->allowed);
    rlctl_json_u64(j, "limit", d->limit);
    rlctl_json_u64(j, "remaining", d->remaining);
    rlctl_json_u64(j, "retry_after_ns", d->retry_after_ns);
    rlctl_json_u64(j, "retry_after", strtoull(ra, NULL, 10)); /* whole seconds, rounded up */
    rlctl_json_u64(j, "reset_after_ns", d->reset_after_ns);
    rlctl_json_bool(j, "untracked", (d->flags & SRL_DECISION_UNTRACKED) != 0);
    rlctl_json_bool(j, "degraded", (d->flags & SRL_DECISION_DEGRADED) != 0);
}

static const char *flags_note(const srl_decision *d)
{
    if (d->flags & SRL_DECISION_DEGRADED)
        return " (lock timed out: decided by on_full)";
    if (d->flags & SRL_DECISION_UNTRACKED)
        return " (table full: decided by on_full)";
    return "";
}

/* What a key that is not tracked would get: a fresh state's answer when
 * the table has room; on_full's (as the library decides it) when full. */
static void untracked_decision(const srl_info *in, const srl_limits *l, int full, uint32_t cost,
                               srl_decision *d)
{
    const srl_policy *p = &l->limit[0];
    if (full) {
        int allow = in->on_full == SRL_ON_FULL_ALLOW;
        *d = (srl_decision){.allowed = allow, .limit = p->permits,
                            .retry_after_ns = allow ? 0 : p->window_ns,
                            .reset_after_ns = p->window_ns,
                            .flags = SRL_DECISION_UNTRACKED};
        return;
    }
    /* A fresh state of every limit (a sliding log or a concurrency holder
     * table can be tens of KiB, so it is allocated). */
    size_t n = srl_limits_state_size(l);
    void *state = n > 0 ? calloc(1, n) : NULL;
    if (state == NULL || srl_limits_state_init(l, state, 0) != 0 ||
        srl_limits_state_peek(l, state, 0, cost, d) != 0)
        *d = (srl_decision){.allowed = 1, .limit = p->permits, .remaining = p->permits - cost};
    free(state);
}

/* --tier NAME's index into *tier (0 without --tier), or the exit status of
 * an unknown name, refused with the tiers the store has (lim stays open). */
static int chosen_tier(const rlctl_opts *o, srl_limiter *lim, uint32_t *tier)
{
    *tier = 0;
    if (o->tier_name == NULL)
        return 0;
    srl_info in;
    char msg[1024];
    int rc = srl_info_get(lim, &in);
    if (rc != 0)
        return rlctl_fail_cmd(o, rc);
    int t = rlctl_tier_index(lim, &in, o->tier_name, msg, sizeof msg);
    if (t < 0)
        return rlctl_fail_cmd_why(o, SRL_EINVAL, msg, NULL);
    *tier = (uint32_t)t;
    return 0;
}

int rlctl_cmd_get(const rlctl_opts *o)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    uint32_t tier;
    status = chosen_tier(o, lim, &tier);
    if (status != 0) {
        srl_close(lim);
        return status;
    }
    srl_decision d;
    srl_info in;
    srl_stats st;
    srl_tier as = {.name = ""};
    rlctl_detail more = {0};
    /* --tier: the key as a request of that tier finds it (converted if it
     * is of another); its state's own rows (detail) are of its own tier's
     * limits, so they are shown only without --tier. */
    int rc = o->tier_name != NULL ? srl_peek_tier(lim, tier, o->key, o->key_len, o->cost, &d)
                                  : srl_peek(lim, o->key, o->key_len, o->cost, &d);
    int irc = srl_info_get(lim, &in);
    if (irc == 0)
        irc = srl_stats_get(lim, &st);
    /* Operator control (stores without it: none set), and the key's tier. */
    srl_key_control kc;
    rlctl_ban_load(lim, o->key, o->key_len, &kc);
    if (rc != 0)
        memset(&kc, 0, sizeof kc);
    if (irc == 0 && o->tier_name != NULL)
        irc = srl_tier_get(lim, tier, &as);
    /* Without --tier the key is seen under its own tier: its state's rows
     * are of that tier's limits, not of the policy's (tier 0). */
    srl_info own_in = in;
    if (irc == 0 && rc == 0 && o->tier_name == NULL && kc.tier != 0 &&
        (irc = srl_tier_get(lim, kc.tier, &as)) == 0)
        own_in.limits = as.limits;
    if (irc == 0 && rc == 0 && o->tier_name == NULL)
        irc = rlctl_detail_load(lim, &own_in, o->key, o->key_len, &more);
    if (kc.flags & SRL_KEY_BANNED) {   /* what a request gets now: the ban's denial */
        d.allowed = 0;
        d.remaining = 0;
        if (d.retry_after_ns < kc.ban_left_ns)
            d.retry_after_ns = kc.ban_left_ns;
    } else if (kc.flags & SRL_KEY_EXEMPT) {
        d.allowed = 1;
        d.retry_after_ns = 0;
    }
    /* A key with limits of its own (srl_key_set_limits): its state is of
     * those, not of the segment's, so the per-limit detail is not shown. */
    srl_limits own;
    char own_text[SRL_LIMITS_TEXT_MAX] = "";
    if (rc == 0 && srl_key_get_limits(lim, o->key, o->key_len, &own) == 0) {
        rlctl_detail_free(&more);
        if (srl_limits_format(&own, own_text, sizeof own_text) < 0)
            snprintf(own_text, sizeof own_text, "?");
    }
    srl_close(lim);
    if (rc != 0 && rc != SRL_ENOENT)
        return rlctl_fail_cmd(o, rc);
    if (irc != 0)
        return rlctl_fail_cmd(o, irc);
    /* Every slot taken: a new key cannot get one, on_full decides.  A
     * Redis store has no slots to run out of. */
    int full = in.kind != SRL_STORE_REDIS && st.used >= in.capacity;
    if (rc == SRL_ENOENT)
        untracked_decision(&in, o->tier_name != NULL ? &as.limits : &in.limits, full, o->cost,
                           &d);
    char under[SRL_TIER_NAME_MAX + 24] = "";   /* "under tier 'paid', " */
    if (o->tier_name != NULL)
        snprintf(under, sizeof under, "under tier '%s', ", as.name);
    else if (kc.tier != 0)
        snprintf(under, sizeof under, "of tier '%s', ", as.name);
    int named = o->tier_name != NULL || kc.tier != 0;   /* as says the tier */
    char *key = key_text(o);
    if (key == NULL) {
        rlctl_detail_free(&more);
        return EX_OSERR;
    }
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "key", key);
        rlctl_json_u64(&j, "key_len", o->key_len);
        rlctl_json_bool(&j, "tracked", rc == 0);
        rlctl_json_u64(&j, "cost", o->cost);
        if (named)
            rlctl_json_str(&j, "tier_name", as.name);
        decision_json(&j, &d);
        rlctl_json_bool(&j, "exempt", (kc.flags & SRL_KEY_EXEMPT) != 0);
        if (own_text[0] != '\0')
            rlctl_json_str(&j, "own_limits", own_text);
        rlctl_detail_json(&j, &own_in, &more);
        rlctl_ban_json(&j, &kc);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
    } else if (rc == SRL_ENOENT && full) {
        printf("%s: not tracked, and the table is full (%" PRIu64 " of %" PRIu64
               " slots): its first request would be %s by on_full %s, not by a limit; "
               "free slots with 'rlctl evict' or make a bigger segment (rlctl info)\n",
               key, st.used, in.capacity, d.allowed ? "allowed" : "denied",
               d.allowed ? "allow" : "deny");
    } else if (rc == SRL_ENOENT) {
        printf("%s: not tracked (a new key: %sa first request of cost %u would be allowed, "
               "leaving %u of %u)\n",
               key, under, o->cost, d.remaining, d.limit);
    } else {
        char ra[48], rs[48];
        rlctl_fmt_duration(d.reset_after_ns, rs, sizeof rs);
        if (d.allowed)
            printf("%s: %sa request of cost %u would be allowed now, leaving %u of %u; at rest "
                   "in %s\n",
                   key, under, o->cost, d.remaining, d.limit, rs);
        else
            printf("%s: %sa request of cost %u would be denied now: retry after %s; at rest in "
                   "%s\n",
                   key, under, o->cost, rlctl_fmt_duration(d.retry_after_ns, ra, sizeof ra), rs);
        if (kc.flags & SRL_KEY_EXEMPT)
            printf("  exempt (never refused, never evicted)\n");
        if (own_text[0] != '\0')
            printf("  decided by its own limits: %s (rlctl clear-key drops them)\n", own_text);
        rlctl_detail_print(&own_in, &more);
        rlctl_ban_print(&kc);
    }
    rlctl_detail_free(&more);
    free(key);
    return rlctl_flush(rc == 0 ? EX_OK : RLCTL_EX_NO);
}

int rlctl_cmd_try(const rlctl_opts *o)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    uint32_t tier;
    status = chosen_tier(o, lim, &tier);
    if (status != 0) {
        srl_close(lim);
        return status;
    }
    srl_decision d;
    int rc = srl_acquire_tier(lim, tier, o->key, o->key_len, o->cost, &d);
    srl_close(lim);
    /* On a lock timeout (or an unrecoverable lock) d is still filled. */
    int degraded = rc == SRL_ETIMEDOUT || rc == SRL_ENOTRECOVERABLE;
    if (rc == SRL_ENOTSUP) {
        char remedy[400];
        snprintf(remedy, sizeof remedy,
                 "its units are taken and given back only by the workers that hold them "
                 "(srl_enter/srl_leave); 'rlctl get %s KEY' shows who holds them", o->name);
        return rlctl_fail_cmd_why(o, rc, "'try' takes permits of a rate limit, and this "
                                         "policy has an in-flight (concurrency) limit", remedy);
    }
    if (rc != 0 && !degraded)
        return rlctl_fail_cmd(o, rc);
    char *key = key_text(o);
    if (key == NULL)
        return EX_OSERR;
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "key", key);
        rlctl_json_u64(&j, "key_len", o->key_len);
        rlctl_json_u64(&j, "cost", o->cost);
        decision_json(&j, &d);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
    } else if (d.allowed) {
        printf("%s: allowed, remaining %u of %u%s\n", key, d.remaining, d.limit, flags_note(&d));
    } else if (d.flags & (SRL_DECISION_UNTRACKED | SRL_DECISION_DEGRADED)) {
        /* No state decided it: the Retry-After a worker sends is one
         * window, a guess, not the key's wait. */
        char hdr[32];
        if (srl_format_retry_after(&d, hdr, sizeof hdr) < 0)
            hdr[0] = '\0';
        printf("%s: denied by on_full deny: %s, not by the key's limit (workers send "
               "Retry-After: %s, one window); %s\n",
               key, d.flags & SRL_DECISION_DEGRADED ? "its bucket's lock timed out"
                                                    : "the table is full",
               hdr, d.flags & SRL_DECISION_DEGRADED
                        ? "look for stopped workers"
                        : "free slots with 'rlctl evict' or make a bigger segment (rlctl info)");
    } else {
        char ra[48], hdr[32];
        if (srl_format_retry_after(&d, hdr, sizeof hdr) < 0)
            hdr[0] = '\0';
        printf("%s: denied, retry after %s (Retry-After: %s)%s\n", key,
               rlctl_fmt_duration(d.retry_after_ns, ra, sizeof ra), hdr, flags_note(&d));
    }
    free(key);
    status = rlctl_flush(d.allowed ? EX_OK : RLCTL_EX_NO);
    return degraded ? rlctl_fail_cmd(o, rc) : status;
}

int rlctl_cmd_reset(const rlctl_opts *o)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    int rc = srl_reset_key(lim, o->key, o->key_len);
    srl_close(lim);
    if (rc != 0 && rc != SRL_ENOENT)
        return rlctl_fail_cmd(o, rc);
    char *key = key_text(o);
    if (key == NULL)
        return EX_OSERR;
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "key", key);
        rlctl_json_bool(&j, "reset", rc == 0);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
    } else if (rc == 0) {
        printf("%s: reset (its next request starts fresh)\n", key);
    } else {
        printf("%s: not tracked (nothing to reset)\n", key);
    }
    free(key);
    return rlctl_flush(rc == 0 ? EX_OK : RLCTL_EX_NO);
}
