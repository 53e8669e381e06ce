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
        /* GNU's form: the program, its package, the package's version
         * (srl.h's, which tests/rlctl holds equal to meson's project version). */
        printf("rlctl (srl) %d.%d.%d\n", SRL_VERSION_MAJOR, SRL_VERSION_MINOR,
               SRL_VERSION_PATCH);
        return rlctl_flush(EX_OK);
    }
    /* Global options, before the command, in any order: --owner USER and
     * --mode M (each also as --owner=USER, --mode=M).  After the command,
     * --mode is create's own (the mode it creates with). */
    for (;;) {
        int is_owner = argc >= 2 && strncmp(argv[1], "--owner", 7) == 0 &&
                       (argv[1][7] == '\0' || argv[1][7] == '=');
        int is_mode = argc >= 2 && strncmp(argv[1], "--mode", 6) == 0 &&
                      (argv[1][6] == '\0' || argv[1][6] == '=');
        if (!is_owner && !is_mode)
            break;
        size_t len = is_owner ? 7 : 6;
        int joined = argv[1][len] == '=';
        const char *val = joined ? argv[1] + len + 1 : (argc >= 3 ? argv[2] : NULL);
        if (val == NULL || *val == '\0') {
            fprintf(stderr, "rlctl: %s needs %s\n", is_owner ? "--owner" : "--mode",
                    is_owner ? "a user name or uid" : "octal permission bits (e.g. 0660)");
            return EX_USAGE;
        }
        int orc = is_owner ? rlctl_owner_apply(val) : rlctl_mode_apply(val);
        if (orc != 0)
            return orc;
        int shift = joined ? 1 : 2;
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
