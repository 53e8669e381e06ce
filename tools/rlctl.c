/*
 * rlctl.c - main: --help, --version, then parse (rlctl_args.c) and run the
 * command's row (rlctl_commands.c).
 */
#include "rlctl.h"

#include <string.h>

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "help") == 0)) {
        rlctl_usage(stdout, NULL);
        return rlctl_flush(EX_OK);
    }
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("rlctl %d.%d.%d\n", SRL_VERSION_MAJOR, SRL_VERSION_MINOR, SRL_VERSION_PATCH);
        return rlctl_flush(EX_OK);
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
