/*
 * keyctl.c - operator control of one key of a live segment, for the
 * end-to-end tests of address exemptions (apache_exempt.sh, nginx's):
 *     keyctl NAME ban KEY SECONDS     srl_key_ban, no reason
 *     keyctl NAME unban KEY           srl_key_unban
 *     keyctl NAME flags KEY           srl_key_control_get: "exempt banned" or "-"
 *     keyctl NAME stats               "allowed N denied N exempt N"
 * The segment is opened as it is (cfg NULL), by its owner (the caller runs
 * this as the workers' user).  Exit 0, or 1 with srl_strerror on stderr.
 * (rlctl's exempt/ban commands do the same for operators; this keeps the
 * tests independent of their output format.)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srl.h"

static int die(const char *what, int rc)
{
    fprintf(stderr, "keyctl: %s: %s\n", what, srl_strerror(rc));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: keyctl NAME ban KEY SECONDS|unban KEY|flags KEY|stats\n");
        return 2;
    }
    srl_limiter *lim;
    int rc = srl_open_shared(argv[1], NULL, 0, &lim);
    if (rc != 0)
        return die(argv[1], rc);
    const char *op = argv[2], *key = argc > 3 ? argv[3] : "";
    size_t len = strlen(key);
    if (strcmp(op, "ban") == 0 && argc == 5) {
        rc = srl_key_ban(lim, key, len, strtoull(argv[4], NULL, 10) * 1000000000ull, NULL);
    } else if (strcmp(op, "unban") == 0 && argc == 4) {
        rc = srl_key_unban(lim, key, len);
    } else if (strcmp(op, "flags") == 0 && argc == 4) {
        srl_key_control kc;
        rc = srl_key_control_get(lim, key, len, &kc);
        if (rc == 0)
            printf("%s%s%s\n", kc.flags & SRL_KEY_EXEMPT ? "exempt" : "",
                   (kc.flags & SRL_KEY_EXEMPT) && (kc.flags & SRL_KEY_BANNED) ? " " : "",
                   kc.flags & SRL_KEY_BANNED ? "banned" : (kc.flags & SRL_KEY_EXEMPT ? "" : "-"));
    } else if (strcmp(op, "stats") == 0 && argc == 3) {
        srl_stats st;
        rc = srl_stats_get(lim, &st);
        if (rc == 0)
            printf("allowed %" PRIu64 " denied %" PRIu64 " exempt %" PRIu64 "\n", st.allowed,
                   st.denied, st.exempt);
    } else {
        srl_close(lim);
        fprintf(stderr, "keyctl: bad command\n");
        return 2;
    }
    srl_close(lim);
    return rc == 0 ? 0 : die(op, rc);
}
