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

#include <string.h>

#define JSON_O RLCTL_O_JSON
#define KEY_O (RLCTL_O_HEX | RLCTL_O_JSON)

static const struct rlctl_cmd commands[] = {
    {"create", rlctl_cmd_create,
     RLCTL_O_POLICY | RLCTL_O_CAPACITY | RLCTL_O_KEY_DISPLAY | RLCTL_O_MODE |
         RLCTL_O_ON_FULL | RLCTL_O_TIER | RLCTL_O_FORCE | JSON_O,
     1, 0,
     "create NAME --policy P --capacity N [--tier NAME=P]... [--key-display B] "
     "[--mode M] [--on-full allow|deny|evict] [--force] [--json]",
     "Create a segment.  --capacity takes a number of keys (10k, 1M: 1000s);\n"
     "--key-display B keeps the first B bytes of each key for list (B more\n"
     "bytes per slot; 0 shows fingerprints); --on-full says what a new key gets\n"
     "when every slot is taken; --mode is octal (default 0600).  Each --tier\n"
     "adds a named policy (tier 1, 2, ...; --policy is tier 0, 'default'):\n"
     "workers pick one per request (srl_acquire_tier).  A segment that does not\n"
     "fit in memory is refused; one above 1 GiB needs --force.", 0},
    {"destroy", rlctl_cmd_destroy, RLCTL_O_FORCE | JSON_O, 1, 0,
     "destroy NAME [--force] [--json]",
     "Remove a segment's name; processes that have it open keep using it.\n"
     "--force removes it even if it is not an srl segment.", 0},
    {"ls", rlctl_cmd_ls, RLCTL_O_ALL | RLCTL_O_KEYS | JSON_O, 0, 0,
     "ls [--keys] [--all] [--json]",
     "List the srl segments of this host with their status, policy, capacity,\n"
     "size and owner, from their headers only (cheap at any size).  --keys also\n"
     "reads every bucket: keys in use, load, and the load, untracked, repaired\n"
     "and timeouts warnings.  --all: also foreign and forbidden objects.", 0},
    {"info", rlctl_cmd_info, JSON_O, 1, 0, "info NAME|URI [--json]",
     "A segment's policy, geometry, owner, counters and warnings; or a Redis\n"
     "store's (URI: redis://... or unix://...) policy and fleet-wide counters.", 1},
    {"list", rlctl_cmd_list,
     RLCTL_O_SORT | RLCTL_O_TOP | RLCTL_O_ALL_KEYS | RLCTL_O_EXEMPT | RLCTL_O_BANNED | JSON_O, 1, 0,
     "list NAME|URI [--sort denied|allowed|recent] [--top N | --all-keys] [--exempt] [--banned] "
     "[--json]",
     "The tracked keys with their counts and state; --sort and --top keep the\n"
     "biggest N.  More than 100000 keys without --top are refused (exit 64)\n"
     "unless --all-keys insists.  A Redis store is walked with SCAN, in batches;\n"
     "--top N stops after N keys (no --sort: Redis keeps no per-key counts).", 1},
    {"get", rlctl_cmd_get, KEY_O | RLCTL_O_COST | RLCTL_O_TIER, 1, 1,
     "get NAME|URI [--hex] KEY [--cost N] [--tier NAME] [--json]",
     "The decision a request for KEY would get now, changing nothing; with\n"
     "--tier, a request of tier NAME (a key of another tier as converted to it).\n"
     "Exit 0 tracked, 1 not tracked.", 1},
    {"try", rlctl_cmd_try, KEY_O | RLCTL_O_COST | RLCTL_O_TIER, 1, 1,
     "try NAME [--hex] KEY [--cost N] [--tier NAME] [--json]",
     "Make one request for KEY, as a worker would, under tier NAME (default:\n"
     "tier 0).  Exit 0 allowed, 1 denied.", 0},
    {"reset", rlctl_cmd_reset, KEY_O, 1, 1, "reset NAME|URI [--hex] KEY [--json]",
     "Forget KEY: its next request starts fresh.  Exit 1 if it was not tracked.", 1},
    {"exempt", rlctl_cmd_exempt, KEY_O, 1, 1, "exempt NAME [--hex] KEY [--json]",
     "Never refuse KEY and never evict it (its requests are still counted), until\n"
     "unexempt or the segment goes.", 0},
    {"unexempt", rlctl_cmd_unexempt, KEY_O, 1, 1, "unexempt NAME [--hex] KEY [--json]",
     "Take KEY's exemption back: its policy decides again.  Exit 1 if not tracked.", 0},
    {"ban", rlctl_cmd_ban, KEY_O | RLCTL_O_FOR | RLCTL_O_REASON, 1, 1,
     "ban NAME [--hex] KEY --for DURATION [--reason TEXT] [--json]",
     "Deny KEY for DURATION (30s, 15m, 1h, 7d) whatever its policy says, with\n"
     "Retry-After the time left; a new ban replaces the last.  TEXT (59 bytes)\n"
     "is shown by get and list --banned.", 0},
    {"unban", rlctl_cmd_unban, KEY_O, 1, 1, "unban NAME [--hex] KEY [--json]",
     "Lift KEY's ban by hand and forget its offences.  Exit 1 if not tracked.", 0},
    {"set-key", rlctl_cmd_set_key, KEY_O, 1, 2, "set-key NAME [--hex] KEY POLICY [--json]",
     "Decide KEY by POLICY from now on, whatever tier its requests name, until\n"
     "clear-key; its use is kept (as set-policy keeps it) and it is never\n"
     "evicted.  A policy whose state needs bigger slots is refused.", 0},
    {"clear-key", rlctl_cmd_clear_key, KEY_O, 1, 1, "clear-key NAME [--hex] KEY [--json]",
     "KEY's own limits are dropped: the default tier decides it again, its use\n"
     "kept.  Exit 1 if it was not tracked.", 0},
    {"set-policy", rlctl_cmd_set_policy, JSON_O, 1, 1, "set-policy NAME [TIER=]POLICY [--json]",
     "Give tier TIER (default: tier 0, the segment's policy) a new policy while\n"
     "the workers run.  Each key keeps its use (10 used of 10 leaves 10 under\n"
     "20); another algorithm starts keys fresh.  A policy whose state needs\n"
     "bigger slots is refused with the create command for a bigger segment.", 0},
    {"evict", rlctl_cmd_evict, RLCTL_O_DRY_RUN | JSON_O, 1, 0,
     "evict NAME [--dry-run] [--json]",
     "Drop every key at rest (dropping it changes no decision).", 0},
    {"check", rlctl_cmd_check, JSON_O, 1, 0, "check NAME [--json]",
     "Verify every invariant of the table.  Exit 1 if problems were found.", 0},
    {"watch", rlctl_cmd_watch, RLCTL_O_INTERVAL | RLCTL_O_COUNT | JSON_O, 1, 0,
     "watch NAME [-i SECONDS] [-n COUNT] [--json]",
     "Live per-second rates every SECONDS (default 1), COUNT times or until\n"
     "interrupted.", 0},
    {"metrics", rlctl_cmd_metrics, RLCTL_O_ALL | RLCTL_O_OUTPUT, RLCTL_NAMES, 0,
     "metrics [NAME...] [--all] [--output FILE]",
     "Prometheus text for the NAMEs (default: every segment); --output FILE\n"
     "replaces FILE atomically, for node_exporter's textfile collector.", 0},
};

const struct rlctl_cmd *rlctl_commands(size_t *n)
{
    *n = sizeof commands / sizeof commands[0];
    return commands;
}

void rlctl_help(const struct rlctl_cmd *c)
{
    printf("usage: rlctl %s\n\n%s\n\nSee rlctl(1) for the output, the JSON fields and the exit "
           "statuses.\n",
           c->synopsis, c->help);
}

const struct rlctl_cmd *rlctl_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

void rlctl_usage(FILE *f, const struct rlctl_cmd *only)
{
    if (only != NULL) {
        fprintf(f, "usage: rlctl %s\n", only->synopsis);
        return;
    }
    fputs("usage: rlctl [--owner USER] [--mode M] COMMAND [ARGS]   (see rlctl(1))\n", f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "       rlctl %s\n", commands[i].synopsis);
}
