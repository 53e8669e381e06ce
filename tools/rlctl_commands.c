/*
 * rlctl_commands.c - the command table and the usage text made from it.
 *
 * Each command is one row: its name, the function that runs it, the options
 * it accepts and the positionals it needs.  rlctl_parse() (rlctl_args.c)
 * checks the command line against the row, so a command function only ever
 * sees arguments that are complete and in range.  The usage lines printed on
 * a bad command line come from the same rows, so they cannot drift from
 * what is parsed.  This file calls no parser: rlctl.c and rlctl_args.c call
 * it, never the other way round.
 */
#include "rlctl.h"

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
