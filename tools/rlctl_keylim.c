/*
 * rlctl_keylim.c - set-key and clear-key: a key's own limits on a segment
 * (srl_key_set_limits, srl_key_clear_limits; include/srl.h "Per-key
 * limits").  rlctl_parse (rlctl_args.c) hands set-key its KEY in o->key
 * and the POLICY after it in o->extra.  Nothing here is a parser but
 * srl_limits_parse_ex's; the library says why a set is refused
 * (srl_last_error), and that sentence is what rlctl prints.
 */
#include "rlctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int done(const rlctl_opts *o, const char *key, const char *limits, int rc)
{
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "key", key);
        if (limits != NULL)
            rlctl_json_str(&j, "own_limits", limits);
        else
            rlctl_json_bool(&j, "cleared", rc == 0);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
    } else if (limits != NULL) {
        printf("%s: decided by its own limits %s (its use kept)\n", key, limits);
    } else if (rc == 0) {
        printf("%s: own limits cleared (its tier decides it again, its use kept)\n", key);
    } else {
        printf("%s: not tracked (nothing to clear)\n", key);
    }
    return rlctl_flush(rc == 0 ? EX_OK : RLCTL_EX_NO);
}

static int key_limits(const rlctl_opts *o, const srl_limits *l)
{
    if (o->uri != NULL)
        return rlctl_fail_cmd_why(o, SRL_ENOTSUP, "per-key limits live in a segment",
                                  "a Redis store has none yet");
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    int rc = l != NULL ? srl_key_set_limits(lim, o->key, o->key_len, l)
                       : srl_key_clear_limits(lim, o->key, o->key_len);
    char why[256];
    srl_last_error(why, sizeof why);
    srl_close(lim);
    if (rc != 0 && !(l == NULL && rc == SRL_ENOENT))
        return why[0] ? rlctl_fail_cmd_why(o, rc, srl_strerror(rc), why) : rlctl_fail_cmd(o, rc);
    char *key = rlctl_escape(o->key, o->key_len);
    if (key == NULL)
        return EX_OSERR;
    char text[SRL_LIMITS_TEXT_MAX];
    if (l != NULL && srl_limits_format(l, text, sizeof text) < 0)
        snprintf(text, sizeof text, "?");
    status = done(o, key, l != NULL ? text : NULL, rc);
    free(key);
    return status;
}

int rlctl_cmd_set_key(const rlctl_opts *o)
{
    srl_limits l;
    srl_policy_error pe;
    if (srl_limits_parse_ex(o->extra, &l, &pe) != 0) {
        char *shown = rlctl_escape((const unsigned char *)o->extra, strlen(o->extra));
        fprintf(stderr, "rlctl: set-key: invalid policy '%s': %s\n", shown ? shown : "?",
                pe.message);
        free(shown);
        return EX_USAGE;
    }
    return key_limits(o, &l);
}

int rlctl_cmd_clear_key(const rlctl_opts *o)
{
    return key_limits(o, NULL);
}
