/*
 * rlctl_control.c - exempt, unexempt, ban, unban: operator control of one
 * key (srl_key_exempt, srl_key_ban, srl_key_unban; srl.h "operator
 * control").  Each opens the segment, makes one call, says what it did in
 * text or JSON.  Exit 0 done, 1 (RLCTL_EX_NO) for unexempt/unban of a key
 * that is not tracked, else the error's status (rlctl_errors.c).
 *
 * exempt and ban are refused by the library on a policy with a concurrency
 * limit (srl_enter reads neither, so "done" would be a lie: limiter.c
 * key_control); rlctl prints the library's sentence (srl_last_error) rather
 * than judging the policy itself.  unexempt and unban stay allowed there:
 * they clear what an older rlctl may have set.
 */
#include "rlctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One control call and its report.  what: the past tense for the text
 * ("exempt", "banned"...); json_field: the boolean set in the JSON. */
static int control(const rlctl_opts *o, int op, const char *what)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    int rc;
    switch (op) {
    case 0: rc = srl_key_exempt(lim, o->key, o->key_len, 1); break;
    case 1: rc = srl_key_exempt(lim, o->key, o->key_len, 0); break;
    case 2: rc = srl_key_ban(lim, o->key, o->key_len, o->ban_ns, o->reason); break;
    default: rc = srl_key_unban(lim, o->key, o->key_len); break;
    }
    char why[SRL_POLICY_ERROR_MAX * 2];
    if (rc == SRL_ENOTSUP && srl_last_error(why, sizeof why) > 0) {
        srl_close(lim);
        return rlctl_fail_cmd_why(o, rc, why, "'rlctl info NAME' shows the policy");
    }
    srl_close(lim);
    if (rc != 0 && !(rc == SRL_ENOENT && (op == 1 || op == 3)))
        return rlctl_fail_cmd(o, rc);
    char *key = rlctl_escape(o->key, o->key_len);
    if (key == NULL) {
        fputs("rlctl: out of memory\n", stderr);
        return EX_OSERR;
    }
    char dur[48];
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "key", key);
        rlctl_json_bool(&j, what, rc == 0);
        if (op == 2) {
            rlctl_json_str(&j, "kind", "hand");
            rlctl_json_u64(&j, "for_ns", o->ban_ns);
            rlctl_json_str(&j, "reason", o->reason != NULL ? o->reason : "");
        }
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
    } else if (rc != 0) {
        printf("%s: not tracked (nothing to %s)\n", key, op == 1 ? "unexempt" : "unban");
    } else if (op == 2) {
        /* --reason "" is no reason (the library keeps none): no ": " then. */
        int why = o->reason != NULL && o->reason[0] != '\0';
        printf("%s: banned by hand for %s%s%s\n", key,
               rlctl_fmt_duration(o->ban_ns, dur, sizeof dur), why ? ": " : "",
               why ? o->reason : "");
    } else {
        printf("%s: %s\n", key, what);
    }
    free(key);
    return rlctl_flush(rc == 0 ? EX_OK : RLCTL_EX_NO);
}

int rlctl_cmd_exempt(const rlctl_opts *o)
{
    return control(o, 0, "exempt");
}

int rlctl_cmd_unexempt(const rlctl_opts *o)
{
    return control(o, 1, "unexempted");
}

int rlctl_cmd_ban(const rlctl_opts *o)
{
    return control(o, 2, "banned");
}

int rlctl_cmd_unban(const rlctl_opts *o)
{
    return control(o, 3, "unbanned");
}
