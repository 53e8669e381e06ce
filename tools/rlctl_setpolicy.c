/*
 * rlctl_setpolicy.c - `rlctl set-policy NAME [TIER=]POLICY`: give a tier of a
 * running segment a new policy (srl_policy_change_tier), while its workers
 * keep deciding on it.  Each key keeps its use (the library converts it on
 * its next touch: include/srl.h, LIVE POLICY CHANGES).
 *
 * TIER= is taken only when the text before the first '=' holds no ':' (a
 * policy always does, and its options, ",burst=N", come after it), so
 * "paid=token_bucket:50/1m" names tier paid and "token_bucket:5/1s,burst=9"
 * is tier 0's.  What the segment cannot take (a bigger state, a
 * concurrency limit) is refused by the library with a sentence saying what
 * to do, printed as it is.
 */
#include "rlctl.h"

#include <stdlib.h>
#include <string.h>

/* Split "[TIER=]POLICY" (NUL-terminated copy in buf). */
static void split(char *buf, const char **tier, const char **policy)
{
    char *eq = strchr(buf, '=');
    char *colon = strchr(buf, ':');
    if (eq != NULL && (colon == NULL || eq < colon)) {
        *eq = '\0';
        *tier = buf;
        *policy = eq + 1;
    } else {
        *tier = NULL;
        *policy = buf;
    }
}

static int refused(const rlctl_opts *o, int rc, const char *msg)
{
    int status = rlctl_exit_code(rc);
    fprintf(stderr, "rlctl: %s: set-policy refused (%s): %s\n", o->name, srl_err_name(rc), msg);
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "name", o->name);
        rlctl_json_str(&j, "error", srl_strerror(rc));
        rlctl_json_i64(&j, "code", rc);
        rlctl_json_str(&j, "remedy", msg);
        rlctl_json_u64(&j, "exit_status", (uint64_t)status);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
        fflush(stdout);
    }
    return status;
}

/* The library's remedy for a segment too small names the create command
 * with "--key-display N" when the segment keeps key bytes: the number is
 * this segment's. */
static void fill_key_display(char *msg, size_t len, uint32_t key_display)
{
    static const char pat[] = " --key-display N";
    char *at = strstr(msg, pat);
    if (at == NULL)
        return;
    char rest[1024];
    snprintf(rest, sizeof rest, "%s", at + sizeof pat - 1);
    snprintf(at, len - (size_t)(at - msg), " --key-display %u%s", key_display, rest);
}

int rlctl_cmd_set_policy(const rlctl_opts *o)
{
    if (o->uri != NULL)
        return refused(o, SRL_ENOTSUP,
                       "a Redis store's policy is the one its clients pass; change it there");
    char *buf = malloc(o->key_len + 1);
    if (buf == NULL)
        return EX_OSERR;
    memcpy(buf, o->key, o->key_len);
    buf[o->key_len] = '\0';
    int nul = strlen(buf) != o->key_len;
    const char *tname, *text;
    split(buf, &tname, &text);
    srl_limits l;
    srl_policy_error pe;
    if (nul || srl_limits_parse_ex(text, &l, &pe) != 0) {
        char *shown = rlctl_escape((const unsigned char *)text, strlen(text));
        fprintf(stderr, "rlctl: set-policy: invalid policy '%s': %s\n", shown ? shown : "?",
                nul ? "it holds a NUL byte" : pe.message);
        free(shown);
        free(buf);
        return EX_USAGE;
    }
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0) {
        free(buf);
        return status;
    }
    srl_info in;
    int rc = srl_info_get(lim, &in);
    char msg[1024];
    int tier = rc == 0 && tname != NULL ? rlctl_tier_index(lim, &in, tname, msg, sizeof msg) : 0;
    if (rc == 0 && tier < 0) {
        srl_close(lim);
        free(buf);
        return refused(o, SRL_EINVAL, msg);
    }
    srl_tier before;
    if (rc == 0)
        rc = srl_tier_get(lim, (uint32_t)tier, &before);
    if (rc != 0) {
        srl_close(lim);
        free(buf);
        return rlctl_fail_cmd(o, rc);
    }
    rc = srl_policy_change_tier(lim, (uint32_t)tier, &l, msg, sizeof msg);
    int changed = rc == 1;   /* 0: it was the current policy already */
    srl_info after;
    if (rc >= 0)
        rc = srl_info_get(lim, &after);
    srl_close(lim);
    free(buf);
    if (rc != 0) {
        fill_key_display(msg, sizeof msg, in.key_display);
        return refused(o, rc, msg[0] ? msg : srl_strerror(rc));
    }
    char was[SRL_LIMITS_TEXT_MAX], now[SRL_LIMITS_TEXT_MAX];
    if (srl_limits_format(&before.limits, was, sizeof was) < 0)
        snprintf(was, sizeof was, "?");
    if (srl_limits_format(&l, now, sizeof now) < 0)
        snprintf(now, sizeof now, "?");
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "name", o->name);
        rlctl_json_u64(&j, "tier", (uint64_t)tier);
        rlctl_json_str(&j, "tier_name", before.name);
        rlctl_json_str(&j, "old_policy", was);
        rlctl_json_str(&j, "policy", now);
        rlctl_json_bool(&j, "changed", changed);
        rlctl_json_u64(&j, "policy_gen", after.policy_gen);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
    } else if (changed) {
        printf("%s: tier %d (%s): %s -> %s (policy generation %u); each key keeps its use, "
               "converted on its next request\n",
               o->name, tier, before.name, was, now, after.policy_gen);
    } else {
        printf("%s: tier %d (%s) already has %s: nothing changed (policy generation %u)\n",
               o->name, tier, before.name, now, after.policy_gen);
    }
    return rlctl_flush(EX_OK);
}
