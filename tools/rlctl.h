/*
 * rlctl.h - what the parts of rlctl share: parsed options, exit codes, the
 * command functions, and the helpers for opening segments and for output.
 *
 * rlctl is an operator's tool over the PUBLIC API only (include/srl.h): it
 * links the shared libsrl, whose internal symbols are hidden, so it cannot
 * reach into a segment other than the way every worker does.  It therefore
 * takes the same bucket locks as the workers, one at a time, and never
 * stops them.
 *
 * Files:
 *   rlctl.c         main: --help, --version, dispatch
 *   rlctl_commands.c  the command table and the usage text made from it
 *   rlctl_args.c    argument parsing (options, numbers, keys, names)
 *   rlctl_escape.c  key escaping for terminals and JSON
 *   rlctl_json.c    a small JSON writer (commas, nesting, string escaping)
 *   rlctl_fmt.c     human formats: durations, byte sizes, aligned tables;
 *                   parsing seconds (-i, RLCTL_PROGRESS_DELAY)
 *   rlctl_open.c    opening segments, valid names; srl error -> message
 *   rlctl_redis.c   Redis stores named by uri: telling a uri from a name,
 *                   the uri with its password hidden, remedies
 *   rlctl_errors.c  each srl error code's exit status and remedy
 *   rlctl_seg.c     commands on whole segments: create destroy check
 *   rlctl_info.c    info: one segment's header, geometry and counters
 *   rlctl_health.c  the warnings info and ls show (load, untracked, ...)
 *   rlctl_ls.c      ls: the srl segments under /dev/shm
 *   rlctl_list.c    list: the tracked keys, sorted and cut to --top
 *   rlctl_keys.c    commands on one key: get try reset
 *   rlctl_evict.c   evict: drop (or with --dry-run count) the keys at rest
 *   rlctl_progress.c  the progress line of long walks (tty stderr only)
 *   rlctl_watch.c   watch: live rates from srl_stats deltas
 *   rlctl_metrics.c metrics: Prometheus text (formatted by metrics_fmt.c,
 *                   shared with mod_srl), --output written atomically
 *
 * No global mutable state: everything a command needs is in rlctl_opts,
 * built once by rlctl_parse() and passed down.
 */
#ifndef RLCTL_H
#define RLCTL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sysexits.h>

#include "srl.h"

/* Exit status 1: the answer is "no" (try denied, get/reset: key not
 * tracked, check: problems found).  Everything else is sysexits.h. */
#define RLCTL_EX_NO 1

/* Where POSIX shared memory objects live on Linux (shm_open's mount). */
#define RLCTL_SHM_DIR "/dev/shm"

enum rlctl_sort { RLCTL_SORT_NONE, RLCTL_SORT_DENIED, RLCTL_SORT_ALLOWED, RLCTL_SORT_RECENT };

/* Option bits: each command lists the ones it accepts. */
enum {
    RLCTL_O_JSON = 1u << 0,
    RLCTL_O_HEX = 1u << 1,
    RLCTL_O_POLICY = 1u << 2,
    RLCTL_O_CAPACITY = 1u << 3,
    RLCTL_O_KEY_DISPLAY = 1u << 4,
    RLCTL_O_MODE = 1u << 5,
    RLCTL_O_ON_FULL = 1u << 6,
    RLCTL_O_COST = 1u << 7,
    RLCTL_O_SORT = 1u << 8,
    RLCTL_O_TOP = 1u << 9,
    RLCTL_O_DRY_RUN = 1u << 10,
    RLCTL_O_INTERVAL = 1u << 11,
    RLCTL_O_COUNT = 1u << 12,
    RLCTL_O_ALL = 1u << 13,
    RLCTL_O_FORCE = 1u << 14,
    RLCTL_O_OUTPUT = 1u << 15,
    RLCTL_O_KEYS = 1u << 16,
    RLCTL_O_ALL_KEYS = 1u << 17,
    RLCTL_O_TIER = 1u << 18,
    RLCTL_O_FOR = 1u << 19,      /* ban --for DURATION */
    RLCTL_O_REASON = 1u << 20,   /* ban --reason TEXT */
    RLCTL_O_EXEMPT = 1u << 21,   /* list --exempt */
    RLCTL_O_BANNED = 1u << 22,   /* list --banned */
};

/* list refuses to print more keys than this without --top or --all-keys
 * (5M keys took 41 s and 1.37 GB of JSON). */
#define RLCTL_LIST_MAX_KEYS 100000u

/* rlctl_cmd.takes_name: NAME... (zero or more names, in o->names). */
#define RLCTL_NAMES 2

#define RLCTL_MAX_POS 2

typedef struct rlctl_opts {
    const struct rlctl_cmd *cmd;
    unsigned seen;            /* RLCTL_O_* given on the command line */
    int json, hex, dry_run, all, force;
    int keys;                 /* ls --keys: walk each segment (USED, LOAD, warnings) */
    int all_keys;             /* list --all-keys: no RLCTL_LIST_MAX_KEYS refusal */
    srl_config cfg;           /* create: --policy, --capacity, --tier, --key-display,
                                 --mode, --on-full, each through srl_config_set;
                                 owns its tiers (rlctl_opts_free) */
    const char *tier_name;    /* get, try --tier NAME, else NULL */
    uint32_t cost;            /* default 1 */
    enum rlctl_sort sort;
    uint64_t top;             /* 0: no limit */
    uint64_t interval_ns;     /* watch: default 1 s */
    uint64_t ban_ns;          /* ban --for (required there) */
    const char *reason;       /* ban --reason, else NULL */
    unsigned only;            /* list --exempt / --banned: SRL_KEY_* a row must have one of */
    uint64_t count;           /* watch: 0 = until interrupted */
    const char *name;         /* segment name as typed, or the uri with its
                                 password hidden (what messages show) */
    const char *uri;          /* a Redis store's uri as typed, else NULL */
    char *name_buf;           /* malloc'd storage of name for a uri */
    char *const *names;       /* RLCTL_NAMES commands: the names, nnames of them */
    int nnames;
    const char *output;       /* --output FILE */
    unsigned char *key;       /* key bytes (decoded from --hex), malloc'd */
    size_t key_len;
    const char *extra;        /* set-key: the POLICY after KEY (takes_key 2) */
} rlctl_opts;

typedef int (*rlctl_cmd_fn)(const rlctl_opts *o);

struct rlctl_cmd {
    const char *name;
    rlctl_cmd_fn fn;
    unsigned options;         /* RLCTL_O_* accepted */
    int takes_name;           /* NAME positional required */
    int takes_key;            /* KEY positional required (2: KEY and POLICY) */
    const char *synopsis;     /* after "rlctl " */
    const char *help;         /* what it does, for --help (lines of < 80 columns) */
    int redis;                /* NAME may be a Redis uri (rlctl_redis.c) */
};

/* rlctl_commands.c */
const struct rlctl_cmd *rlctl_commands(size_t *n);
void rlctl_usage(FILE *f, const struct rlctl_cmd *only);
/* The command named name, or NULL. */
const struct rlctl_cmd *rlctl_command(const char *name);
/* `rlctl help CMD`, `rlctl CMD --help`: usage, what it does, where to read on. */
void rlctl_help(const struct rlctl_cmd *c);

/* rlctl_args.c: returns 0, or EX_USAGE after printing why and a usage line.
 * On success the caller owns o->key (free with rlctl_opts_free). */
int rlctl_parse(int argc, char **argv, rlctl_opts *o);
void rlctl_opts_free(rlctl_opts *o);
int rlctl_parse_u64(const char *s, uint64_t max, uint64_t *out);
/* rlctl_parse's result when --help was asked for and printed. */
#define RLCTL_HELP_SHOWN (-1)

/* rlctl_owner.c: --owner USER (root drops to USER; others trust its uid);
 * --mode M (the group/other bits a segment may grant: srl_config.mode). */
int rlctl_owner_apply(const char *user);
int rlctl_mode_apply(const char *arg);
uint32_t rlctl_trusted_mode(void);
uint32_t rlctl_trusted_uid(void);
void rlctl_owner_remedy(const char *name);
/* The login name of uid, or the number when it has none. */
void rlctl_owner_name(uint32_t uid, char *buf, size_t len);
/* rlctl_open.c: 1 if NAME's file is shorter than its header says. */
int rlctl_truncated(const char *name, uint64_t *size, uint64_t *total);

/* rlctl_escape.c: key bytes as printable ASCII; see the file for the rules.
 * rlctl_escape returns a malloc'd NUL-terminated string or NULL (ENOMEM). */
char *rlctl_escape(const unsigned char *s, size_t n);
char *rlctl_hex(const unsigned char *s, size_t n);
/* A key as shown by list: escaped display bytes, "..." if truncated, or
 * "<fingerprint HEX>" when no display bytes were kept. */
char *rlctl_key_label(const srl_entry *e);

/* rlctl_json.c.  RLCTL_JSON_SCHEMA: the first field of every top-level
 * object; raised when a field changes type or meaning (2: retry_after and
 * mode became numbers; 3: ls counts keys only with --keys, used and
 * load_factor are null without). */
#define RLCTL_JSON_SCHEMA 3
typedef struct rlctl_json {
    FILE *f;
    int depth;
    unsigned char need_comma[16];
    int pending_key;          /* a key was written; the value follows */
} rlctl_json;

void rlctl_json_init(rlctl_json *j, FILE *f);
void rlctl_json_begin_obj(rlctl_json *j, const char *key);
void rlctl_json_end_obj(rlctl_json *j);
void rlctl_json_begin_arr(rlctl_json *j, const char *key);
void rlctl_json_end_arr(rlctl_json *j);
void rlctl_json_str(rlctl_json *j, const char *key, const char *v);
void rlctl_json_u64(rlctl_json *j, const char *key, uint64_t v);
void rlctl_json_i64(rlctl_json *j, const char *key, int64_t v);
void rlctl_json_bool(rlctl_json *j, const char *key, int v);
void rlctl_json_null(rlctl_json *j, const char *key);
void rlctl_json_ratio(rlctl_json *j, const char *key, uint64_t num, uint64_t den);
/* A fixed-point number given in thousandths: 1500 -> 1.500. */
void rlctl_json_milli(rlctl_json *j, const char *key, uint64_t milli);
void rlctl_json_end(rlctl_json *j); /* newline after the top-level value */

/* rlctl_fmt.c: "2", "0.5": seconds with up to 9 decimals, 1 ms .. 1 day
 * (-i, RLCTL_PROGRESS_DELAY); 0 or -1. */
int rlctl_parse_seconds(const char *s, uint64_t *ns);
/* rlctl_fmt.c: into buf (at least 48 bytes). */
const char *rlctl_fmt_duration(uint64_t ns, char *buf, size_t len);
const char *rlctl_fmt_bytes(uint64_t bytes, char *buf, size_t len);
const char *rlctl_fmt_percent(uint64_t num, uint64_t den, char *buf, size_t len);
/* one if n == 1, else many ("1 key", "2 keys"). */
const char *rlctl_plural(uint64_t n, const char *one, const char *many);
/* Bytes per slot, "92 (slot 48 + its share ...)": the same words in
 * create and info; buf >= 96 bytes. */
const char *rlctl_fmt_slot_bytes(const srl_info *in, char *buf, size_t len);

/* An aligned text table: add rows of ncols strings (copied), then print. */
typedef struct rlctl_table {
    size_t ncols, nrows, cap;
    const char *const *headers;
    const unsigned char *right; /* per column: 1 right-aligned (numbers) */
    char **cells;               /* nrows * ncols */
    int oom;
} rlctl_table;

void rlctl_table_init(rlctl_table *t, size_t ncols, const char *const *headers,
                      const unsigned char *right);
void rlctl_table_add(rlctl_table *t, const char *const *row);
int rlctl_table_print(rlctl_table *t, FILE *f); /* 0 or EX_OSERR (ENOMEM) */
void rlctl_table_free(rlctl_table *t);

/* rlctl_errors.c: what rlctl does about each srl result code. */
typedef struct rlctl_err {
    int status;                 /* exit status (sysexits.h) */
    const char *remedy;         /* what the operator can do; NULL: nothing to add */
    int known;                  /* 1 for every code of SRL_ERRNO_MAP */
} rlctl_err;
/* The entry for rc; NULL for a code srl.h does not define. */
const rlctl_err *rlctl_err_lookup(int rc);
/* Its exit status; EX_SOFTWARE for an unknown code. */
int rlctl_exit_code(int rc);

/* rlctl_redis.c.  A NAME is a Redis store's uri when it starts with
 * "redis://" or "unix://": a segment name holds no ':' (srl_name_check), so
 * the two never overlap. */
int rlctl_is_uri(const char *name);
/* The uri with its password (userinfo or ?password=) shown as "***";
 * malloc'd, NULL on ENOMEM. */
char *rlctl_uri_redacted(const char *uri);
/* What to do about rc from a Redis store (NULL: nothing to add). */
const char *rlctl_redis_remedy(int rc);

/* rlctl_open.c */
/* 1 if name follows srl's segment-name rule (see the definition). */
int rlctl_name_valid(const char *name);
/* Print "rlctl: NAME: <what>: <remedy>" and return the exit code for rc. */
int rlctl_fail(const char *name, int rc);
/* rlctl_fail for a command: with --json also {"error", "code", "remedy",
 * "exit_status"} on stdout. */
int rlctl_fail_cmd(const rlctl_opts *o, int rc);
/* The same for a failure rlctl explains itself: "rlctl: NAME: ERROR: REMEDY"
 * (remedy may be NULL), the exit status of rc. */
int rlctl_fail_cmd_why(const rlctl_opts *o, int rc, const char *error, const char *remedy);
/* The config every open of an existing segment passes: the trust of
 * --owner and --mode, nothing else (the segment's own policy is adopted). */
void rlctl_open_config(srl_config *cfg);
/* Open an existing segment (its own policy and geometry), or with o->uri
 * the Redis store there (its stored policy).  Returns 0 or an exit code
 * after printing the message. */
int rlctl_open(const rlctl_opts *o, srl_limiter **out);
/* The segment's own name from srl_info (normalised, with its "/") when it
 * is a valid name, else the name as typed: never bytes unchecked. */
const char *rlctl_seg_name(const srl_info *in, const char *typed);
/* Finish a command's output: EX_IOERR if stdout could not be written. */
int rlctl_flush(int status);

/* rlctl_progress.c: the progress line of a long walk (see the file).
 * begin draws nothing (and starts no thread) unless stderr is a tty and
 * --json was not given.  unit NULL: the line shows the elapsed time only;
 * else "DONE of TOTAL UNIT (P %)" (TOTAL 0: unknown, "DONE UNIT"), UNIT
 * being unit_one for a count of 1. */
typedef struct rlctl_progress {
    int on, stop, drawn;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char what[320];
    const char *unit_one, *unit;
    uint64_t total, start_ns, delay_ns;
    _Atomic uint64_t done;
} rlctl_progress;
void rlctl_progress_begin(rlctl_progress *p, const rlctl_opts *o, const char *unit_one,
                          const char *unit, uint64_t total, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static inline void rlctl_progress_add(rlctl_progress *p, uint64_t n)
{
    atomic_fetch_add_explicit(&p->done, n, memory_order_relaxed);
}
void rlctl_progress_end(rlctl_progress *p);

/* rlctl_ls.c: one segment as ls and metrics see it. */
struct rlctl_seg {
    char name[260];
    const char *status;       /* rlctl_status_of(open_rc) */
    int open_rc;
    int counted;              /* stats read (a walk of every bucket) */
    srl_info info;            /* valid when open_rc == 0 */
    srl_stats stats;          /* valid when counted */
    int inflight_counted;     /* a concurrency policy, walked: inflight valid */
    uint64_t inflight;        /* units held now over all keys */
    int bans_counted;         /* walk 2 (metrics): the bans below counted */
    uint64_t bans_hand, bans_penalty;   /* srl__metrics_count_bans */
};
#define RLCTL_LS_OWNERS 8
struct rlctl_segs {
    struct rlctl_seg *v;
    size_t n, cap;
    size_t skipped;           /* foreign or others' forbidden, left out (no --all) */
    uint32_t owner_uid[RLCTL_LS_OWNERS];   /* owners of the forbidden ones skipped */
    size_t owner_count[RLCTL_LS_OWNERS];
    size_t nowners;
};
const char *rlctl_status_of(int rc); /* "ok", "stale", "forbidden", ... */
/* Open NAME ("/" optional), read its info and, if walk, its stats (with a
 * progress line per o); walk 2 (metrics) counts its bans too; close it. */
void rlctl_probe(const rlctl_opts *o, const char *name, int walk, struct rlctl_seg *g);
/* The segments under /dev/shm by name: every srl segment, plus foreign and
 * forbidden objects with o->all; stats read only if walk.  Returns EX_OK
 * (free out->v) or an exit code after printing why. */
int rlctl_scan(const rlctl_opts *o, int walk, struct rlctl_segs *out);

/* rlctl_health.c: conditions of a readable segment that need attention. */
enum {
    RLCTL_WARN_LOAD = 1u << 0,      /* used >= 90 % of capacity */
    RLCTL_WARN_UNTRACKED = 1u << 1, /* stats.full > 0 */
    RLCTL_WARN_REPAIRED = 1u << 2,  /* stats.recovered > 0 */
    RLCTL_WARN_TIMEOUTS = 1u << 3,  /* stats.timeouts > 0 */
    RLCTL_WARN_TRUNCATED = 1u << 4, /* info.file_bytes < info.segment_bytes */
};
/* st NULL: the counters were not read; only what the header and the file
 * show (truncated) is judged. */
unsigned rlctl_warnings(const srl_info *in, const srl_stats *st);
/* The conditions that need srl_stats (a walk). */
#define RLCTL_WARN_NEED_STATS \
    (RLCTL_WARN_LOAD | RLCTL_WARN_UNTRACKED | RLCTL_WARN_REPAIRED | RLCTL_WARN_TIMEOUTS)
/* "ok", or the tokens joined by ',' ("load,untracked"); buf >= 48 bytes. */
const char *rlctl_warnings_text(unsigned w, char *buf, size_t len);
/* One "warning: TOKEN: what it means" line per condition, and for load or
 * untracked the commands that make a segment twice as big. */
void rlctl_warnings_explain(unsigned w, const char *name, const char *pol, uint64_t capacity,
                            FILE *f);

/* Commands. */
int rlctl_cmd_create(const rlctl_opts *o);
int rlctl_cmd_destroy(const rlctl_opts *o);
int rlctl_cmd_ls(const rlctl_opts *o);
int rlctl_cmd_info(const rlctl_opts *o);
int rlctl_cmd_check(const rlctl_opts *o);
int rlctl_cmd_list(const rlctl_opts *o);
int rlctl_cmd_get(const rlctl_opts *o);
int rlctl_cmd_try(const rlctl_opts *o);
int rlctl_cmd_reset(const rlctl_opts *o);
/* rlctl_control.c: operator control of one key (srl.h). */
int rlctl_cmd_exempt(const rlctl_opts *o);
int rlctl_cmd_unexempt(const rlctl_opts *o);
int rlctl_cmd_ban(const rlctl_opts *o);
int rlctl_cmd_unban(const rlctl_opts *o);
int rlctl_cmd_set_key(const rlctl_opts *o);     /* rlctl_keylim.c */
int rlctl_cmd_clear_key(const rlctl_opts *o);
int rlctl_cmd_evict(const rlctl_opts *o);
int rlctl_cmd_watch(const rlctl_opts *o);
int rlctl_cmd_metrics(const rlctl_opts *o);
int rlctl_cmd_set_policy(const rlctl_opts *o);   /* rlctl_setpolicy.c */

/* rlctl_detail.c: get's per-limit and in-flight lines for one tracked key. */
typedef struct rlctl_detail {
    void *state;              /* the key's state copy, NULL: nothing more to show */
    uint64_t now;             /* ticker time of the copy */
} rlctl_detail;
int rlctl_detail_load(srl_limiter *lim, const srl_info *in, const void *key, size_t len,
                      rlctl_detail *out);
void rlctl_detail_print(const srl_info *in, const rlctl_detail *d);
void rlctl_detail_json(rlctl_json *j, const srl_info *in, const rlctl_detail *d);
void rlctl_detail_free(rlctl_detail *d);

/* rlctl_ban.c: a key's bans as get and list show them: the kind ("hand",
 * "penalty", NULL for none) of SRL_KEY_* flags, and get's lines and JSON
 * fields (ban_kind, ban_left_ns, ban_reason, repeat). */
const char *rlctl_ban_kind(unsigned flags);
void rlctl_ban_load(srl_limiter *lim, const void *key, size_t len, srl_key_control *kc);
void rlctl_ban_print(const srl_key_control *kc);
void rlctl_ban_json(rlctl_json *j, const srl_key_control *kc);
/* The policy has a concurrency limit (info and list show units in flight). */
int rlctl_has_units(const srl_info *in);
/* The units in flight over every key (a walk of the table): 0 or an
 * SRL_E* code. */
int rlctl_inflight(srl_limiter *lim, uint64_t *out);

/* rlctl_tiers.c: a segment's tiers (names, policies, keys per tier). */
struct rlctl_tiers {
    uint32_t n;               /* 1: no tiers beyond the default */
    int counted;              /* keys[] filled (a walk was made) */
    char name[SRL_TIERS_MAX][SRL_TIER_NAME_MAX + 1];
    char policy[SRL_TIERS_MAX][SRL_LIMITS_TEXT_MAX];
    uint64_t keys[SRL_TIERS_MAX];
};
/* Read the table of an open limiter (and with count_keys, walk it to count
 * the keys of each tier, when it has more than one): 0 or an SRL_E* code. */
int rlctl_tiers_load(srl_limiter *lim, const srl_info *in, int count_keys,
                     struct rlctl_tiers *out);
const char *rlctl_tier_name(const struct rlctl_tiers *t, uint32_t i);
/* The index of the tier called name in an open limiter, or -1 with msg
 * saying there is none and which tiers there are. */
int rlctl_tier_index(srl_limiter *lim, const srl_info *in, const char *name, char *msg,
                     size_t len);
/* info's rows "tier N:  NAME = POLICY (K keys)", nothing for one tier. */
void rlctl_tiers_text(const struct rlctl_tiers *t);
/* "tiers": [{"index", "name", "policy"[, "keys"]}], every tier. */
void rlctl_tiers_json(rlctl_json *j, const struct rlctl_tiers *t);

#endif
