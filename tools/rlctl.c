/*
 * rlctl.c - main: --help, --version, then parse (rlctl_args.c) and run the
 * command's row (rlctl_commands.c).
 */
#include "rlctl.h"

#include <string.h>

int main(int argc, char **argv)
{
    int is_help = argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                                strcmp(argv[1], "help") == 0);
    if (is_help && argc == 2) {
        rlctl_usage(stdout, NULL);
        return rlctl_flush(EX_OK);
    }
    if (is_help && argc == 3) { /* rlctl help list, rlctl --help list */
        const struct rlctl_cmd *c = rlctl_command(argv[2]);
        if (c != NULL) {
            rlctl_help(c);
            return rlctl_flush(EX_OK);
        }
        /* else: the parser says "unknown command" (with a suggestion) */
        argv[1] = argv[2];
        argc = 2;
    }
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("rlctl %d.%d.%d\n", SRL_VERSION_MAJOR, SRL_VERSION_MINOR, SRL_VERSION_PATCH);
        return rlctl_flush(EX_OK);
    }
    /* A global option, before the command: --owner USER or --owner=USER. */
    if (argc >= 2 && strncmp(argv[1], "--owner", 7) == 0 &&
        (argv[1][7] == '\0' || argv[1][7] == '=')) {
        const char *user = argv[1][7] == '=' ? argv[1] + 8 : (argc >= 3 ? argv[2] : NULL);
        if (user == NULL || *user == '\0') {
            fputs("rlctl: --owner needs a user name or uid\n", stderr);
            return EX_USAGE;
        }
        int shift = argv[1][7] == '=' ? 1 : 2;
        int orc = rlctl_owner_apply(user);
        if (orc != 0)
            return orc;
        argv[shift] = argv[0];
        argv += shift;
        argc -= shift;
    }
    rlctl_opts o;
    int rc = rlctl_parse(argc, argv, &o);
    if (rc == RLCTL_HELP_SHOWN)
        return rlctl_flush(EX_OK);
    if (rc != 0)
        return rc;
    rc = o.cmd->fn(&o);
    rlctl_opts_free(&o);
    return rc;
}
