/*
 * rlctl_args.c - the command line: "rlctl COMMAND [options] NAME [KEY]".
 *
 * Options may come before or after the positionals (GNU getopt permutes
 * them); "--" ends the options, so a key that starts with '-' can be given
 * as "rlctl get NAME -- -key".  Every value is checked here, strictly (no
 * sign, no trailing garbage, no overflow), and an option the command does
 * not take is an error: a command function never sees a bad argument.
 *
 * Errors print "rlctl: COMMAND: <why>" and the command's usage line to
 * stderr and return EX_USAGE.  Values typed by the operator are echoed
 * escaped, like keys, so an argument cannot smuggle terminal escapes.
 *
 * Uses getopt_long (process-global state) from the single thread of main.
 */
#include "rlctl.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_JSON = 256, OPT_HEX, OPT_POLICY, OPT_CAPACITY, OPT_KEY_DISPLAY, OPT_MODE,
       OPT_ON_FULL, OPT_COST, OPT_SORT, OPT_TOP, OPT_DRY_RUN, OPT_OUTPUT, OPT_KEYS,
       OPT_ALL_KEYS, OPT_TIER, OPT_FOR, OPT_REASON, OPT_EXEMPT, OPT_BANNED };

static const struct option long_opts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"hex", no_argument, NULL, OPT_HEX},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"capacity", required_argument, NULL, OPT_CAPACITY},
    {"key-display", required_argument, NULL, OPT_KEY_DISPLAY},
    {"mode", required_argument, NULL, OPT_MODE},
    {"on-full", required_argument, NULL, OPT_ON_FULL},
    {"cost", required_argument, NULL, OPT_COST},
    {"sort", required_argument, NULL, OPT_SORT},
    {"top", required_argument, NULL, OPT_TOP},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"keys", no_argument, NULL, OPT_KEYS},
    {"all-keys", no_argument, NULL, OPT_ALL_KEYS},
    {"tier", required_argument, NULL, OPT_TIER},
    {"for", required_argument, NULL, OPT_FOR},
    {"reason", required_argument, NULL, OPT_REASON},
    {"exempt", no_argument, NULL, OPT_EXEMPT},
    {"banned", no_argument, NULL, OPT_BANNED},
    {"interval", required_argument, NULL, 'i'},
    {"count", required_argument, NULL, 'n'},
    {"all", no_argument, NULL, 'a'},
    {"force", no_argument, NULL, 'f'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Print "rlctl: CMD: " + message (with %s arguments escaped by the caller)
 * and the usage line; return EX_USAGE. */
static int usage_error(const struct rlctl_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int usage_error(const struct rlctl_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    fputs("rlctl: ", stderr);
    if (cmd != NULL)
        fprintf(stderr, "%s: ", cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    rlctl_usage(stderr, cmd);
    return EX_USAGE;
}

/* An argument as it may be echoed: escaped (never NULL: "?" on ENOMEM). */
static const char *shown(const char *arg, char **tofree)
{
    *tofree = rlctl_escape((const unsigned char *)arg, strlen(arg));
    return *tofree != NULL ? *tofree : "?";
}

static int bad_value(const struct rlctl_cmd *cmd, const char *opt, const char *arg,
                     const char *expected)
{
    char *f;
    int rc = usage_error(cmd, "%s: invalid value '%s': expected %s", opt, shown(arg, &f),
                         expected);
    free(f);
    return rc;
}

static int bad_name(const struct rlctl_cmd *cmd, const char *name)
{
    char *f;
    int rc = usage_error(cmd,
                         "invalid segment name '%s': expected \"/\" then 1..200 of "
                         "[A-Za-z0-9._-]",
                         shown(name, &f));
    free(f);
    return rc;
}

int rlctl_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return -1;
    *out = v;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The KEY positional: raw bytes, or hex digits with --hex. */
static int parse_key(rlctl_opts *o, const char *arg)
{
    size_t n = strlen(arg);
    if (o->hex) {
        if (n % 2 != 0)
            return bad_value(o->cmd, "KEY", arg, "an even number of hex digits (--hex)");
        for (size_t i = 0; i < n; i++)
            if (hexval(arg[i]) < 0)
                return bad_value(o->cmd, "KEY", arg, "hex digits only (--hex)");
        n /= 2;
    }
    if (n == 0)
        return usage_error(o->cmd, "KEY is empty");
    if (n > SRL_KEY_MAX)
        return usage_error(o->cmd, "KEY is %zu bytes, longer than %u", n, SRL_KEY_MAX);
    o->key = malloc(n);
    if (o->key == NULL) {
        fputs("rlctl: out of memory\n", stderr);
        return EX_OSERR;
    }
    for (size_t i = 0; i < n; i++)
        o->key[i] = o->hex ? (unsigned char)(hexval(arg[2 * i]) * 16 + hexval(arg[2 * i + 1]))
                           : (unsigned char)arg[i];
    o->key_len = n;
    return 0;
}

/* Edit distance (insert, delete, substitute, swap of neighbours) between a
 * typed word and a command name, both short: capped at 9. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 16 || lb > 16)
        return 9;
    size_t d[17][17];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* " (did you mean 'ls' or 'list'?)" for the commands within 1 edit (2 for
 * words of 5 letters or more), or "". */
static void suggest(const char *typed, char *buf, size_t len)
{
    size_t n, found = 0, off = 0;
    const struct rlctl_cmd *c = rlctl_commands(&n);
    size_t max = strlen(typed) >= 5 ? 2 : 1;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (distance(typed, c[i].name) > max)
            continue;
        int w = snprintf(buf + off, len - off, "%s'%s'", found ? " or " : " (did you mean ",
                         c[i].name);
        if (w < 0 || (size_t)w >= len - off)
            break;
        off += (size_t)w;
        found++;
    }
    if (found && off + 3 < len)
        snprintf(buf + off, len - off, "?)");
}

/* --policy, --capacity, --key-display, --mode, --on-full and --tier
 * NAME=POLICY (create; --tier repeatable: tier 1, 2, ... in the order
 * given, tier 0 being --policy): each is one srl_config_set, and its
 * refusal the library's words after rlctl's "--OPT: invalid value 'V': ". */
static int config_option(rlctl_opts *o, const char *opt, const char *name, const char *arg)
{
    const char *value = arg;
    char tier[SRL_TIER_NAME_MAX + 8];
    if (strcmp(name, "tier.") == 0) {
        const char *eq = strchr(arg, '=');
        size_t n = eq != NULL ? (size_t)(eq - arg) : 0;
        if (eq == NULL || n == 0 || n > SRL_TIER_NAME_MAX) {
            char expect[96];
            snprintf(expect, sizeof expect, "expected NAME=POLICY, NAME 1..%u of [A-Za-z0-9_-]",
                     SRL_TIER_NAME_MAX);
            char *f;
            int rc = usage_error(o->cmd, "%s: invalid value '%s': %s", opt, shown(arg, &f),
                                 expect);
            free(f);
            return rc;
        }
        snprintf(tier, sizeof tier, "tier.%.*s", (int)n, arg);
        name = tier;
        value = eq + 1;
    }
    srl_policy_error pe;
    int rc = srl_config_set(&o->cfg, name, value, &pe);
    if (rc == SRL_ENOMEM) {
        fputs("rlctl: out of memory\n", stderr);
        return EX_OSERR;
    }
    if (rc != 0) {
        char *f;
        rc = usage_error(o->cmd, "%s: invalid value '%s': %s", opt, shown(arg, &f), pe.message);
        free(f);
    }
    return rc;
}

static unsigned option_bit(int opt)
{
    switch (opt) {
    case OPT_JSON: return RLCTL_O_JSON;
    case OPT_HEX: return RLCTL_O_HEX;
    case OPT_POLICY: return RLCTL_O_POLICY;
    case OPT_CAPACITY: return RLCTL_O_CAPACITY;
    case OPT_KEY_DISPLAY: return RLCTL_O_KEY_DISPLAY;
    case OPT_MODE: return RLCTL_O_MODE;
    case OPT_ON_FULL: return RLCTL_O_ON_FULL;
    case OPT_COST: return RLCTL_O_COST;
    case OPT_SORT: return RLCTL_O_SORT;
    case OPT_TOP: return RLCTL_O_TOP;
    case OPT_DRY_RUN: return RLCTL_O_DRY_RUN;
    case OPT_OUTPUT: return RLCTL_O_OUTPUT;
    case OPT_KEYS: return RLCTL_O_KEYS;
    case OPT_ALL_KEYS: return RLCTL_O_ALL_KEYS;
    case OPT_TIER: return RLCTL_O_TIER;
    case OPT_FOR: return RLCTL_O_FOR;
    case OPT_REASON: return RLCTL_O_REASON;
    case OPT_EXEMPT: return RLCTL_O_EXEMPT;
    case OPT_BANNED: return RLCTL_O_BANNED;
    case 'i': return RLCTL_O_INTERVAL;
    case 'n': return RLCTL_O_COUNT;
    case 'a': return RLCTL_O_ALL;
    case 'f': return RLCTL_O_FORCE;
    default: return 0;
    }
}

static const char *option_name(int opt)
{
    for (const struct option *l = long_opts; l->name != NULL; l++)
        if (l->val == opt)
            return l->name;
    return "?";
}

/* One option with its value (optarg), checked for range. */
static int take_option(rlctl_opts *o, int opt, const char *arg)
{
    const struct rlctl_cmd *cmd = o->cmd;
    uint64_t v;
    switch (opt) {
    case OPT_JSON: o->json = 1; return 0;
    case OPT_HEX: o->hex = 1; return 0;
    case OPT_DRY_RUN: o->dry_run = 1; return 0;
    case OPT_KEYS: o->keys = 1; return 0;
    case OPT_ALL_KEYS: o->all_keys = 1; return 0;
    case OPT_OUTPUT:
        if (arg[0] == '\0')
            return bad_value(cmd, "--output", arg, "a file name");
        o->output = arg;
        return 0;
    case 'a': o->all = 1; return 0;
    case 'f': o->force = 1; return 0;
    case OPT_EXEMPT: o->only |= SRL_KEY_EXEMPT; return 0;
    case OPT_BANNED: o->only |= SRL_KEY_BANNED | SRL_KEY_PENALTY; return 0;   /* either kind */
    case OPT_FOR: {
        /* A duration in a policy window's grammar (30s, 15m, 1h, 7d). */
        char text[80];
        srl_policy p;
        if (strlen(arg) > 40 || snprintf(text, sizeof text, "token_bucket:1/%s", arg) < 0 ||
            srl_policy_parse(text, &p) != 0)
            return bad_value(cmd, "--for", arg, "a duration such as 30s, 15m, 1h or 7d");
        o->ban_ns = p.window_ns;
        return 0;
    }
    case OPT_REASON:
        if (strlen(arg) > SRL_BAN_REASON_MAX)
            return bad_value(cmd, "--reason", arg, "at most 59 bytes");
        for (const char *c = arg; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                return bad_value(cmd, "--reason", arg, "text without control characters");
        o->reason = arg;
        return 0;
    case OPT_POLICY: return config_option(o, "--policy", "policy", arg);
    case OPT_TIER:
        if (cmd->takes_key) {   /* get, try --tier NAME: a tier, found at open */
            if (srl_tier_name_check(arg) != 0) {
                char what[64];
                snprintf(what, sizeof what, "a tier name, 1..%u of [A-Za-z0-9_-]",
                         (unsigned)SRL_TIER_NAME_MAX);
                return bad_value(cmd, "--tier", arg, what);
            }
            o->tier_name = arg;
            return 0;
        }
        return config_option(o, "--tier", "tier.", arg);
    case OPT_CAPACITY: return config_option(o, "--capacity", "capacity", arg);
    case OPT_KEY_DISPLAY: return config_option(o, "--key-display", "key_display", arg);
    case OPT_MODE: return config_option(o, "--mode", "mode", arg);
    case OPT_ON_FULL: return config_option(o, "--on-full", "on_full", arg);
    case OPT_COST:
        if (rlctl_parse_u64(arg, UINT32_MAX, &v) != 0 || v == 0)
            return bad_value(cmd, "--cost", arg, "a number of permits, 1..4294967295");
        o->cost = (uint32_t)v;
        return 0;
    case OPT_SORT:
        if (strcmp(arg, "denied") == 0)
            o->sort = RLCTL_SORT_DENIED;
        else if (strcmp(arg, "allowed") == 0)
            o->sort = RLCTL_SORT_ALLOWED;
        else if (strcmp(arg, "recent") == 0)
            o->sort = RLCTL_SORT_RECENT;
        else
            return bad_value(cmd, "--sort", arg, "denied, allowed or recent");
        return 0;
    case OPT_TOP:
        if (rlctl_parse_u64(arg, UINT64_MAX, &v) != 0 || v == 0)
            return bad_value(cmd, "--top", arg, "a positive number of keys");
        o->top = v;
        return 0;
    case 'i':
        if (rlctl_parse_seconds(arg, &o->interval_ns) != 0)
            return bad_value(cmd, "-i", arg, "seconds, 0.001..86400 (e.g. 1 or 0.5)");
        return 0;
    case 'n':
        if (rlctl_parse_u64(arg, UINT64_MAX, &v) != 0 || v == 0)
            return bad_value(cmd, "-n", arg, "a positive number of samples");
        o->count = v;
        return 0;
    default:
        return usage_error(cmd, "internal: unhandled option");
    }
}

void rlctl_opts_free(rlctl_opts *o)
{
    srl_config_free(&o->cfg);
    free(o->key);
    o->key = NULL;
    free(o->name_buf);
    o->name_buf = NULL;
}

/* NAME is a Redis uri: the command must take one, and srl must accept it
 * (srl_redis_uri_check's reason names the bad part, never the password). */
static int take_uri(rlctl_opts *o, const char *uri)
{
    if (!o->cmd->redis)
        return usage_error(o->cmd, "a Redis uri names a store for info, get, reset and list "
                                   "only; %s takes a segment name",
                           o->cmd->name);
    char why[200];
    if (srl_redis_uri_check(uri, why, sizeof why) != 0)
        return usage_error(o->cmd, "%s", why);
    o->name_buf = rlctl_uri_redacted(uri);
    if (o->name_buf == NULL) {
        fputs("rlctl: out of memory\n", stderr);
        return EX_OSERR;
    }
    o->uri = uri;
    o->name = o->name_buf;
    return 0;
}

static int parse(int argc, char **argv, rlctl_opts *o);

int rlctl_parse(int argc, char **argv, rlctl_opts *o)
{
    *o = (rlctl_opts){.cost = 1, .interval_ns = 1000000000ull};
    srl_config_init(&o->cfg);
    int rc = parse(argc, argv, o);
    if (rc != 0)
        srl_config_free(&o->cfg);   /* a parse that passed: the caller's rlctl_opts_free */
    return rc;
}

static int parse(int argc, char **argv, rlctl_opts *o)
{
    if (argc < 2)
        return usage_error(NULL, "no command given");
    o->cmd = rlctl_command(argv[1]);
    if (o->cmd == NULL) {
        char *f, hint[200];
        suggest(argv[1], hint, sizeof hint);
        int rc = usage_error(NULL, "unknown command '%s'%s", shown(argv[1], &f), hint);
        free(f);
        return rc;
    }
    /* getopt sees argv[1..]: the command name stands where a program name
     * would, and is skipped. */
    int sub_argc = argc - 1;
    char **sub_argv = argv + 1;
    optind = 0;   /* GNU: 0 also drops a cluster left half-read by an earlier parse */
    opterr = 0;
    int opt;
    while ((opt = getopt_long(sub_argc, sub_argv, ":i:n:afh", long_opts, NULL)) != -1) {
        if (opt == 'h') {
            rlctl_help(o->cmd);
            return RLCTL_HELP_SHOWN;
        }
        if (opt == '?' || opt == ':') {
            /* Short options are named by optopt; long ones (optopt 0 or
             * one of our values >= 256) by the word getopt just read. */
            char *f = NULL;
            char sopt[3] = {'-', (char)optopt, '\0'};
            const char *what = shown(optopt > 0 && optopt < 256 ? sopt
                                                                : sub_argv[optind - 1], &f);
            int rc = usage_error(o->cmd, opt == '?' ? "unknown option '%s'"
                                                    : "option '%s' needs a value", what);
            free(f);
            return rc;
        }
        unsigned bit = option_bit(opt);
        if ((o->cmd->options & bit) == 0) {
            int rc = usage_error(o->cmd, "%s%s is not an option of this command",
                                 opt < 256 ? "-" : "--",
                                 opt < 256 ? (char[2]){(char)opt, '\0'} : option_name(opt));
            return rc;
        }
        o->seen |= bit;
        int rc = take_option(o, opt, optarg);
        if (rc != 0)
            return rc;
    }
    if ((o->seen & RLCTL_O_TOP) && (o->seen & RLCTL_O_ALL_KEYS))
        return usage_error(o->cmd, "give --top N or --all-keys, not both");
    int npos = sub_argc - optind;
    if (o->cmd->takes_name == RLCTL_NAMES) {
        for (int i = optind; i < sub_argc; i++) {
            if (rlctl_is_uri(sub_argv[i]))
                return usage_error(o->cmd, "a Redis uri names a store for info, get, reset and "
                                           "list only; %s takes segment names (a Redis store's "
                                           "counters: rlctl info URI)",
                                   o->cmd->name);
            if (!rlctl_name_valid(sub_argv[i]))
                return bad_name(o->cmd, sub_argv[i]);
        }
        if (npos > 0 && o->all)
            return usage_error(o->cmd, "give NAMEs or --all, not both");
        o->names = sub_argv + optind;
        o->nnames = npos;
        return 0;
    }
    int want = o->cmd->takes_name + o->cmd->takes_key;
    if (npos < want)
        return usage_error(o->cmd, "missing %s",
                           npos == 0 && o->cmd->takes_name        ? "NAME"
                           : npos <= o->cmd->takes_name           ? "KEY"
                                                                  : "POLICY");
    if (npos > want) {
        char *f;
        int rc = usage_error(o->cmd, "unexpected argument '%s'",
                             shown(sub_argv[optind + want], &f));
        free(f);
        return rc;
    }
    /* ban's --for is required: a ban has an end. */
    if ((o->cmd->options & RLCTL_O_FOR) && o->ban_ns == 0)
        return usage_error(o->cmd, "--for DURATION is required (e.g. --for 1h)");
    if (o->cmd->takes_name && rlctl_is_uri(sub_argv[optind])) {
        int rc = take_uri(o, sub_argv[optind]);
        if (rc != 0)
            return rc;
    } else if (o->cmd->takes_name) {
        o->name = sub_argv[optind];
        if (!rlctl_name_valid(o->name))
            return bad_name(o->cmd, o->name);
    }
    if ((o->cmd->options & RLCTL_O_POLICY) && !(o->seen & RLCTL_O_POLICY))
        return usage_error(o->cmd, "--policy is required");
    if ((o->cmd->options & RLCTL_O_CAPACITY) && !(o->seen & RLCTL_O_CAPACITY))
        return usage_error(o->cmd, "--capacity is required");
    if (o->cmd->takes_key) {
        int rc = parse_key(o, sub_argv[optind + 1]);
        if (rc != 0) {
            rlctl_opts_free(o);
            return rc;
        }
        if (o->cmd->takes_key == 2)
            o->extra = sub_argv[optind + 2];
    }
    return 0;
}
