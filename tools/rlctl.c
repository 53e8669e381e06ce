/*
 * rlctl.c - main: the command table, usage text and dispatch.
 *
 * Each command is one row: its name, the function that runs it, the options
 * it accepts and the positionals it needs.  rlctl_parse() checks the command
 * line against the row, so a command function only ever sees arguments
 * that are complete and in range.  The usage lines printed on a bad command
 * line come from the same rows, so they cannot drift from what is parsed.
 */
#include "rlctl.h"

#include <string.h>

#define JSON_O RLCTL_O_JSON
#define KEY_O (RLCTL_O_HEX | RLCTL_O_JSON)

static const struct rlctl_cmd commands[] = {
    {"create", rlctl_cmd_create,
     RLCTL_O_POLICY | RLCTL_O_CAPACITY | RLCTL_O_KEY_DISPLAY | RLCTL_O_MODE |
         RLCTL_O_ON_FULL | JSON_O,
     1, 0,
     "create NAME --policy P --capacity N [--key-display B] [--mode M] "
     "[--on-full allow|deny] [--json]"},
    {"destroy", rlctl_cmd_destroy, RLCTL_O_FORCE | JSON_O, 1, 0,
     "destroy NAME [--force] [--json]"},
    {"ls", rlctl_cmd_ls, RLCTL_O_ALL | JSON_O, 0, 0, "ls [--all] [--json]"},
    {"info", rlctl_cmd_info, JSON_O, 1, 0, "info NAME [--json]"},
    {"list", rlctl_cmd_list, RLCTL_O_SORT | RLCTL_O_TOP | JSON_O, 1, 0,
     "list NAME [--sort denied|allowed|recent] [--top N] [--json]"},
    {"get", rlctl_cmd_get, KEY_O | RLCTL_O_COST, 1, 1,
     "get NAME [--hex] KEY [--cost N] [--json]"},
    {"try", rlctl_cmd_try, KEY_O | RLCTL_O_COST, 1, 1,
     "try NAME [--hex] KEY [--cost N] [--json]"},
    {"reset", rlctl_cmd_reset, KEY_O, 1, 1, "reset NAME [--hex] KEY [--json]"},
    {"evict", rlctl_cmd_evict, RLCTL_O_DRY_RUN | JSON_O, 1, 0,
     "evict NAME [--dry-run] [--json]"},
    {"check", rlctl_cmd_check, JSON_O, 1, 0, "check NAME [--json]"},
    {"watch", rlctl_cmd_watch, RLCTL_O_INTERVAL | RLCTL_O_COUNT | JSON_O, 1, 0,
     "watch NAME [-i SECONDS] [-n COUNT] [--json]"},
    {"metrics", rlctl_cmd_metrics, RLCTL_O_ALL | RLCTL_O_OUTPUT, RLCTL_NAMES, 0,
     "metrics [NAME...] [--all] [--output FILE]"},
};

const struct rlctl_cmd *rlctl_commands(size_t *n)
{
    *n = sizeof commands / sizeof commands[0];
    return commands;
}

void rlctl_usage(FILE *f, const struct rlctl_cmd *only)
{
    if (only != NULL) {
        fprintf(f, "usage: rlctl %s\n", only->synopsis);
        return;
    }
    fputs("usage: rlctl COMMAND [ARGS]   (see rlctl(1))\n", f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "       rlctl %s\n", commands[i].synopsis);
}

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
