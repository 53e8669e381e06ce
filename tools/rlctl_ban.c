/*
 * rlctl_ban.c - what `get` and `list` show of a key's bans (issue 41): a
 * ban by hand (srl_key_ban) and one from a limit's ",penalty=" are told
 * apart by their kind, "hand" or "penalty" (a hand ban wins when both
 * run: it is the one that decides), and the offences an escalating
 * penalty remembers ("repeat": its next ban doubles).
 *
 * Read through the public API only (srl_key_control_get, srl_entry.control);
 * a store without operator control (SRL_ENOTSUP: in-process, Redis) shows
 * no ban and no repeat, as "none".
 */
#include "rlctl.h"

#include <string.h>

const char *rlctl_ban_kind(unsigned flags)
{
    if (flags & SRL_KEY_BANNED)
        return "hand";
    if (flags & SRL_KEY_PENALTY)
        return "penalty";
    return NULL;
}

void rlctl_ban_load(srl_limiter *lim, const void *key, size_t len, srl_key_control *kc)
{
    if (srl_key_control_get(lim, key, len, kc) != 0)
        memset(kc, 0, sizeof *kc);
}

void rlctl_ban_print(const srl_key_control *kc)
{
    const char *kind = rlctl_ban_kind(kc->flags);
    char dur[48];
    if (kind != NULL) {
        uint64_t left = kc->flags & SRL_KEY_BANNED ? kc->ban_left_ns : kc->penalty_left_ns;
        printf("  ban kind: %s, %s left", kind, rlctl_fmt_duration(left, dur, sizeof dur));
        if ((kc->flags & SRL_KEY_BANNED) && kc->reason[0] != '\0')
            printf(", reason: %s", kc->reason);
        printf("\n");
    }
    if (kc->repeat != 0)
        printf("  offences remembered: %u (the next penalty ban is twice the last, up to its "
               "longest)\n", kc->repeat);
}

void rlctl_ban_json(rlctl_json *j, const srl_key_control *kc)
{
    const char *kind = rlctl_ban_kind(kc->flags);
    if (kind != NULL)
        rlctl_json_str(j, "ban_kind", kind);
    else
        rlctl_json_null(j, "ban_kind");
    rlctl_json_u64(j, "ban_left_ns", kc->flags & SRL_KEY_BANNED ? kc->ban_left_ns
                                                                 : kc->penalty_left_ns);
    rlctl_json_str(j, "ban_reason", kc->flags & SRL_KEY_BANNED ? kc->reason : "");
    rlctl_json_u64(j, "repeat", kc->repeat);
}
