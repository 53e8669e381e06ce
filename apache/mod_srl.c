/*
 * mod_srl.c - host-wide rate limiting for Apache httpd, on srl.
 *
 * What it holds: the directives, the segment lifecycle in the parent, and
 * the per-request check.
 *
 *   SrlLimiter NAME SPEC... [policy_name=TOKEN]
 *                      main server only: declare a limiter, i.e. the srl
 *                      segment /dev/shm/NAME of the configuration text SPEC
 *                      (srl.h, CONFIGURATION TEXT: POLICY [capacity=N]
 *                      [key_display=N] [on_full=allow|deny] [lockfree=on]
 *                      [tier.NAME=POLICY]... [redis=URI] ...; the library
 *                      parses it, srl_config_parse).  Today's forms stay:
 *                      POLICY CAPACITY (a bare number after the policy is
 *                      capacity=) and tier=NAME=POLICY (tier.NAME=); POLICY
 *                      may be a compound, "A + B", one argument: quote it;
 *                      policy_name: the name in RateLimit-Policy/RateLimit
 *                      (default NAME without its "/"); redis=URI: the
 *                      limit is decided by the Redis store at URI (one
 *                      limit for every host), with the segment NAME as the
 *                      host tier in front (srl_open_tiered); with it,
 *                      fallback=POLICY: what the host decides while Redis
 *                      does not answer (srl.h, srl_open_tiered);
 *                      tier=NAME=POLICY: a tier of the segment (srl.h)
 *   SrlOnFull allow|deny
 *                      main server only: what a full table (or a stuck lock)
 *                      decides for limiters without on_full= (default allow)
 *   SrlLimit NAME|off  server or <Location>/<Directory>: apply a limiter here
 *   SrlKey ip|ip/V4[,/V6]|header:NAME|env:NAME|expr:EXPR
 *                      the request's key (default ip: r->useragent_ip as
 *                      it is); ip/V4,/V6 the address's prefix (srl_key_ip:
 *                      "192.0.2.0/24", "2001:db8::/64"; ip/V4 alone: /64)
 *   SrlExempt CIDR...|off
 *                      addresses never refused by SrlLimit here (address
 *                      exemptions, below)
 *   SrlTier header:NAME|env:NAME|expr:EXPR [VALUE=TIER]...
 *                      the request's tier: the value names it, or the map's
 *                      entry for the value does; else tier 0 (the policy)
 *   SrlCost N          permits one request takes (default 1)
 *   SrlDryRun On|Off   On: never refuse; log the would-be 429 and set
 *                      SRL_LIMITED=1 in the request's environment.  Decided
 *                      through the limiter's second handle, opened with
 *                      SRL_CONFIG_DRY_RUN on the same segment: the states
 *                      and counts are as if enforced, the library flags the
 *                      would-be refusal (SRL_DECISION_WOULD_DENY) and counts
 *                      it in srl_stats.would_deny (rlctl info "would deny")
 *   SrlWarnInterval S  how often the parent logs limiters needing attention
 *   SrlStatus CODE     the status of a refusal, 400..599 (default 429),
 *                      like nginx's limit_req_status
 *   SrlDelay MAX|off   server or <Location>/<Directory>: a request over
 *                      the SrlLimit that the policy admits within MAX (a
 *                      duration: 500ms, 2s; at most 1h) is delayed, not
 *                      refused: its permits are reserved (srl_reserve) and
 *                      the worker sleeps until their instant, then serves
 *                      it (nginx's limit_req delay=); one that would wait
 *                      longer gets SrlStatus as before.  token_bucket and
 *                      gcra limiters only (not redis=); off by default;
 *                      with SrlDryRun On nothing is delayed
 *   SrlRefund EXPR|off server or <Location>/<Directory>: once the response
 *                      is known (log phase), a request SrlLimit admitted
 *                      gets its permits back (srl_refund) when the ap_expr
 *                      EXPR holds, e.g. "%{REQUEST_STATUS} -lt 400": only
 *                      failed logins count.  Not for on_full's or a dry
 *                      run's answers (no permit was taken); off by default
 *   SrlConcurrency NAME|off
 *                      server or <Location>/<Directory>: at most N requests
 *                      of a key in flight at once, NAME a limiter declared
 *                      with a concurrency:N policy (keyed by SrlKey, refused
 *                      with SrlStatus, dry run by SrlDryRun, as SrlLimit)
 *
 * Segment lifecycle.  Segments are opened (created if missing) by the parent
 * in post_config, on the real configuration pass only: the first, pre-config
 * pass (AP_SQ_MS_CREATE_PRE_CONFIG) runs before the server detaches and may
 * be a mere syntax check, so it creates nothing.  Its check_config hook
 * only opens the segments that exist, so that one srl refuses fails
 * `apache2 -t`, `apache2 -k start` and `apache2 -k graceful` themselves
 * (exit 1, the reason on stderr) instead of the running server later:
 * check_config runs before httpd signals a running server or exits after
 * -t, post_config after (a post_config failure in a graceful restart
 * stops the server).  `-k stop` and `-k graceful-stop` skip the check.  A segment the parent
 * created as root is handed to the worker user (User/Group, from
 * ap_unixd_config) so that other processes of that user (php-fpm, rlctl)
 * can open it; its mode stays 0600.  The children do not reopen anything:
 * they inherit the parent's mapping across fork (srl.h: a shared limiter
 * stays valid in children after fork), which also works when the worker
 * user could not open the name itself.  The handle belongs to the
 * configuration pool: a restart (graceful or not) closes it and the next
 * generation's post_config opens the same segment again, which keeps every
 * key's state, because opening an existing segment with an equal policy,
 * capacity and key_display reuses it.  Another policy that srl can change
 * live (srl_policy_change_check) is adopted by the parent and applied by
 * the children (srl_child_init): the root parent takes no bucket lock, and
 * a change takes every one.  Nothing here unlinks a segment:
 * `rlctl destroy` does, once the server is stopped.
 *
 * Per request.  The access_checker hook runs first among its peers and
 * checks initial requests only (ap_is_initial_req): subrequests and
 * internal redirects (DirectoryIndex, ErrorDocument) ride on their main
 * request's decision, so one client request costs exactly SrlCost.  An
 * allowed request gets RateLimit-Policy and RateLimit; a denied one 429
 * with Retry-After as well.  They go into r->err_headers_out so that they
 * survive an error response.  The hook returns DECLINED when it allows:
 * returning OK would, under the legacy "Satisfy Any", grant access.
 *
 * In flight (SrlConcurrency).  The same access_checker enters the key
 * (srl_enter) before the rate limit is decided, so a request refused for
 * concurrency takes no rate permit; a request the rate limit then refuses
 * gives its unit back with everything else, below.  The unit is left in a
 * cleanup of r->pool, registered only once a unit is held: that pool is
 * destroyed on every way a request ends (response sent, client gone,
 * handler error, internal redirect chain, keep-alive or not), after the log
 * phase, so the unit is held for the whole request.  The cleanup's child
 * variant is apr_pool_cleanup_null: a CGI forked by this child runs the
 * child cleanups before exec and must not leave the parent's unit.  A
 * child killed mid-request (SIGKILL, segfault) runs no cleanup: srl
 * reclaims its units by itself (the holder's pid and start time are in the
 * unit; srl.h, "In-flight limits"), at the latest when the key is next
 * full.  No RateLimit headers for a concurrency limit (a quota per window
 * is not what it is); a refusal carries Retry-After (srl's hint: 1 s, or
 * until the oldest unit passes max_hold).
 *
 * Redis stores (redis=URI).  The parent opens the store in post_config as
 * it opens a segment (so another policy stored under the uri's prefix, a
 * refused password or a server that does not answer fails the start, with
 * the reason); the pre-config pass opens it without a config (the stored
 * policy, never creating the prefix) and compares policies.  The children
 * inherit the handle and each makes its own connection on its first
 * request (srl re-connects after fork: the parent's socket is never
 * shared); threads of an event child share that connection under srl's
 * mutex.  A Redis outage while running never fails a request: srl returns
 * on_full's decision flagged degraded within the uri's timeout_ms, logged
 * as a warning.  The parent's health pass skips Redis limiters (the
 * parent must never wait on the network).  The uri may hold a password:
 * it is never logged (messages name the limiter and its config line).
 * The host tier: the limiter is srl_open_tiered(NAME, URI): the segment
 * NAME (created and handed to the worker user as any other) remembers
 * the fleet's denials, so an abusive key is answered in the child without
 * a round trip (SRL_DECISION_LOCAL; counted in srl_stats.local_denied).
 *
 * Metrics.  `SetHandler srl-metrics` in a <Location> serves every
 * limiter's counters as Prometheus text, like mod_status: the same series
 * as `rlctl metrics`, from the same formatter (tools/metrics_fmt.c is
 * compiled into both).  Read through the child's inherited handle
 * (srl_info_get + srl_stats_get, which sum the per-bucket counters: no
 * counter is added to any request's path).  After them, two families of
 * mod_srl's own, srl_handle_lockfree and srl_handle_flood_cache: whether
 * the worker's handle of each limiter took lockfree=on / flood_cache=on
 * (srl_info.flags), which rlctl, with no such handle, cannot say.
 * Restrict the Location (Require ip ...) as for server-status.
 *
 * Concurrency.  Configuration records are written only while the
 * configuration is read and post_config runs (one thread, in the parent),
 * and are read-only afterwards.  The srl handle may be used by any number
 * of threads at once (event MPM): srl locks the key's bucket inside
 * srl_acquire.  The module keeps no global mutable state: the registry of
 * limiters hangs off the configuration pool (apr_pool_userdata).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "httpd.h"
#include "http_config.h"
#include "http_core.h"
#include "http_log.h"
#include "http_protocol.h"
#include "http_request.h"
#include "ap_expr.h"
#include "mpm_common.h" /* ap_hook_monitor */
#include "unixd.h"
#include "apr_hash.h"
#include "apr_strings.h"

#include "srl.h"
#include "metrics_fmt.h"
/* rlctl_health.c (linked in): the conditions rlctl info/ls flag, judged the
 * same way here. */
unsigned rlctl_warnings(const srl_info *in, const srl_stats *st);
const char *rlctl_warnings_text(unsigned w, char *buf, size_t len);

APLOG_USE_MODULE(srl);

#define REGISTRY_KEY "mod_srl-registry"

/* One SrlLimiter line and, after post_config, its open segment. */
typedef struct srl_ap_limiter {
    const char *name;          /* segment name as written ("/api" or "api") */
    const char *token;         /* name without the "/": the registry key */
    const char *header_name;   /* the policy name in the headers: policy_name= or token */
    srl_limits limits;         /* the policy: one limit, or a compound */
    int concurrency;           /* one of them is concurrency:N (SrlConcurrency) */
    uint32_t min_permits;      /* the least permits of its rate limits (SrlCost) */
    uint64_t capacity;
    uint32_t key_display;
    int on_full;               /* SRL_ON_FULL_*, or -1: take SrlOnFull */
    unsigned flags;            /* lockfree=on, flood_cache=on: SRL_CONFIG_* of its handles */
    const char *defined_at;    /* "file:line", for messages */
    const char *policy_header; /* RateLimit-Policy value, set in post_config */
    const char *redis;         /* redis=URI: a Redis store, not a segment; else NULL */
    const char *fallback;      /* fallback=POLICY (with redis=): the host's policy while
                                  Redis does not answer; else NULL */
    srl_limiter *lim;          /* open from post_config on; NULL before */
    srl_limiter *dry;          /* the same store opened with SRL_CONFIG_DRY_RUN,
                                  for SrlDryRun On (opened with lim) */
    int change;                /* the segment holds another policy that srl can
                                  change live: the first child applies it
                                  (srl_child_init), never the root parent */
    srl_tier tiers[SRL_TIERS_MAX - 1]; /* tier=NAME=POLICY: tiers 1.. (srl.h, TIERS) */
    uint32_t ntiers;
    /* RateLimit-Policy of each tier (tier_header[0] == policy_header) and
     * its limits, for the headers of a request decided under it. */
    const char *tier_header[SRL_TIERS_MAX];
    const srl_limits *tier_limits[SRL_TIERS_MAX];
    srl_config spec;           /* the parsed SPEC, every option (tiers: in tiers[]) */
} srl_ap_limiter;

/* Every limiter of one configuration generation (lives in pconf). */
typedef struct srl_ap_registry {
    apr_array_header_t *limiters; /* srl_ap_limiter *, in definition order */
    apr_hash_t *by_name;          /* token -> srl_ap_limiter * */
    int on_full;                  /* SrlOnFull, SRL_ON_FULL_ALLOW by default */
    apr_interval_time_t warn_every; /* SrlWarnInterval, 60 s by default */
    int ban_log_level;            /* SrlBanLogLevel: APLOG_*, -1 off; APLOG_WARNING */
    apr_time_t warned_at;         /* last health pass in the parent */
} srl_ap_registry;

typedef enum { KEY_UNSET = 0, KEY_IP, KEY_HEADER, KEY_ENV, KEY_EXPR, KEY_IP_PREFIX } srl_ap_key_kind;

/* Where a request's value comes from: SrlKey's key, SrlTier's tier name. */
typedef struct srl_ap_source {
    srl_ap_key_kind kind;      /* KEY_UNSET: inherit */
    const char *arg;           /* header or variable name */
    ap_expr_info_t *expr;
    unsigned v4, v6;           /* KEY_IP_PREFIX: the prefixes kept */
} srl_ap_source;

/* Per-directory configuration; every field has a "set" marker for merging. */
typedef struct srl_ap_dir {
    srl_ap_limiter *limiter;   /* NULL with limiter_set: "SrlLimit off" */
    int limiter_set;
    srl_ap_source key;         /* SrlKey; KEY_UNSET: inherit (ip at the top) */
    uint32_t cost;             /* 0: inherit (1 at the top) */
    int dry_run;               /* -1: inherit (off at the top) */
    int status;                /* 0: inherit (429 at the top) */
    srl_ap_limiter *conc;      /* SrlConcurrency; NULL with conc_set: "off" */
    int conc_set;
    uint64_t delay_ns;         /* SrlDelay; 0 with delay_set: "off" */
    int delay_set;
    ap_expr_info_t *refund;    /* SrlRefund; NULL with refund_set: "off" */
    int refund_set;
    srl_ap_source tier;        /* SrlTier's source; KEY_UNSET: inherit (tier 0) */
    apr_table_t *tier_map;     /* VALUE -> tier name; NULL: the value is the name */
    apr_array_header_t *exempt; /* SrlExempt: srl_cidr; NULL with exempt_set: "off" */
    int exempt_set;
} srl_ap_dir;

/* One unit a request holds, left by the request pool's cleanup. */
typedef struct srl_ap_held {
    const srl_ap_limiter *limiter;
    srl_limiter *lim;          /* the handle that entered (lim or dry): the lease's owner */
    server_rec *server;        /* for the cleanup's log line (r may be half gone) */
    srl_lease lease;
} srl_ap_held;

/* The permits an SrlLimit took for a request under SrlRefund, in
 * r->request_config until the log phase decides whether to give them back. */
typedef struct srl_ap_taken {
    const srl_ap_limiter *limiter;
    ap_expr_info_t *refund;
    const char *key;
    size_t len;
    uint32_t cost;
} srl_ap_taken;

/* ------------------------------------------------------------ registry */

static srl_ap_registry *registry_get(apr_pool_t *pconf, int create)
{
    void *data = NULL;
    apr_pool_userdata_get(&data, REGISTRY_KEY, pconf);
    if (data != NULL || !create)
        return data;
    srl_ap_registry *reg = apr_pcalloc(pconf, sizeof *reg);
    reg->limiters = apr_array_make(pconf, 4, sizeof(srl_ap_limiter *));
    reg->by_name = apr_hash_make(pconf);
    reg->on_full = SRL_ON_FULL_ALLOW;
    reg->warn_every = apr_time_from_sec(60);
    reg->ban_log_level = APLOG_WARNING;
    apr_pool_userdata_set(reg, REGISTRY_KEY, apr_pool_cleanup_null, pconf);
    return reg;
}

/* The token of a segment name ("/api" -> "api"), or NULL if it is not a
 * name srl accepts (srl_name_check: the library's one rule). */
static const char *name_token(const char *name)
{
    if (srl_name_check(name) != 0)
        return NULL;
    return name[0] == '/' ? name + 1 : name;
}

/* ---------------------------------------------------------- directives */

/* The arguments after NAME as one configuration text, each argument's
 * place in it kept for the messages (at[i], len[i]: argv[i + 1]'s words;
 * len 0: not in the text).  Today's forms become the spec's words: a bare
 * CAPACITY after the policy is capacity=, tier=NAME=POLICY is
 * tier.NAME=POLICY; policy_name= is mod_srl's own and stays out. */
static const char *limiter_spec(apr_pool_t *p, int argc, char *const argv[], size_t *at,
                                size_t *len, const char **policy_name, int *on_full_given)
{
    const char *spec = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *word = a;
        if (strncasecmp(a, "policy_name=", 12) == 0) {
            *policy_name = a + 12;
            at[i - 1] = len[i - 1] = 0;
            continue;
        }
        if (i == 2 && strchr(a, '=') == NULL)
            word = apr_pstrcat(p, "capacity=", a, NULL);
        else if (strncasecmp(a, "tier=", 5) == 0)
            word = apr_pstrcat(p, "tier.", a + 5, NULL);
        else if (strncasecmp(a, "on_full=", 8) == 0)
            *on_full_given = 1;
        if (spec[0] != '\0')
            spec = apr_pstrcat(p, spec, " ", NULL);
        at[i - 1] = strlen(spec);
        len[i - 1] = strlen(word);
        spec = apr_pstrcat(p, spec, word, NULL);
    }
    return spec;
}

/* A refused spec, in the words of the argument it names (the whole
 * directive's for a rule across options). */
static const char *limiter_refusal(apr_pool_t *p, int argc, char *const argv[],
                                   const size_t *at, const size_t *len,
                                   const srl_policy_error *pe)
{
    for (int i = 1; i < argc; i++) {
        size_t s = at[i - 1], n = len[i - 1];
        if (n == 0 || pe->offset < s || pe->offset >= s + n + (pe->length == 0 && i < argc - 1))
            continue;
        const char *a = argv[i];
        unsigned byte = (unsigned)(pe->offset - s);
        if (i == 1 && strchr(a, '=') == NULL)
            return apr_psprintf(p, "SrlLimiter %s: bad policy '%s' at byte %u: %s", argv[0], a,
                                byte, pe->message);
        if (strncasecmp(a, "redis=", 6) == 0)
            return apr_psprintf(p, "SrlLimiter %s: redis=: %s", argv[0], pe->message);
        const char *eq = strncasecmp(a, "tier=", 5) == 0 ? strchr(a + 5, '=') : NULL;
        if (eq != NULL && byte > (unsigned)(eq - a))
            return apr_psprintf(p, "SrlLimiter %s: tier %.*s: bad policy '%s' at byte %u: %s",
                                argv[0], (int)(eq - a - 5), a + 5, eq + 1,
                                byte - (unsigned)(eq - a) - 1, pe->message);
        break;
    }
    return apr_psprintf(p, "SrlLimiter %s: %s%s", argv[0], pe->message,
                        strncmp(pe->message, "unknown option", 14) == 0
                            ? "; mod_srl's own: policy_name=TOKEN" : "");
}

static const char *cmd_limiter(cmd_parms *cmd, void *dconf, int argc, char *const argv[])
{
    (void)dconf;
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    if (err != NULL)
        return err;
    if (argc < 2)
        return "SrlLimiter NAME SPEC (srl.h CONFIGURATION TEXT: POLICY [capacity=N] "
               "[key_display=N] [on_full=allow|deny] [tier.NAME=POLICY]... [lockfree=on] "
               "[flood_cache=on] [redis=URI]) [policy_name=TOKEN]";

    srl_ap_limiter *l = apr_pcalloc(cmd->pool, sizeof *l);
    l->name = argv[0];
    l->token = name_token(argv[0]);
    if (l->token == NULL)
        return apr_psprintf(cmd->pool, "SrlLimiter: bad name '%s': use 1..%u of "
                            "[A-Za-z0-9._-], not all dots, optionally after a '/'", argv[0],
                            SRL_NAME_MAX);
    size_t *at = apr_pcalloc(cmd->pool, (size_t)argc * sizeof *at);
    size_t *len = apr_pcalloc(cmd->pool, (size_t)argc * sizeof *len);
    const char *header_name = NULL;
    int on_full_given = 0;
    const char *spec = limiter_spec(cmd->pool, argc, argv, at, len, &header_name,
                                    &on_full_given);
    srl_config cfg;
    srl_policy_error pe;
    int rc = srl_config_parse(&cfg, spec, &pe);
    if (rc == SRL_EPOLICY)
        return limiter_refusal(cmd->pool, argc, argv, at, len, &pe);
    if (rc != 0)
        return apr_psprintf(cmd->pool, "SrlLimiter %s: %s", argv[0], srl_strerror(rc));
    /* What the rest of mod_srl reads, copied into the pool; the config's own
     * storage (tiers, uri) goes now. */
    if (cfg.limits.count > 0)
        l->limits = cfg.limits;
    else
        srl_limits_of(&cfg.policy, &l->limits);
    l->capacity = cfg.capacity;
    l->key_display = cfg.key_display;
    l->on_full = on_full_given ? (int)cfg.on_full : -1;
    l->flags = cfg.flags;
    memcpy(l->tiers, cfg.tiers, cfg.tier_count * sizeof *cfg.tiers);
    l->ntiers = cfg.tier_count;
    const char *uri = srl_config_redis(&cfg);
    l->redis = uri != NULL ? apr_pstrdup(cmd->pool, uri) : NULL;
    for (int i = 1; i < argc; i++)   /* checked by srl_config_parse above */
        if (strncasecmp(argv[i], "fallback=", 9) == 0)
            l->fallback = argv[i] + 9;
    srl_config_free(&cfg);
    l->spec = cfg;   /* owns nothing now: limiter_config points it at l->tiers */
    l->min_permits = UINT32_MAX;
    for (uint32_t i = 0; i < l->limits.count; i++) {
        const srl_policy *p = &l->limits.limit[i];
        if (p->algorithm == SRL_CONCURRENCY)
            l->concurrency = 1;
        else if (p->permits < l->min_permits)
            l->min_permits = p->permits;
    }
    l->header_name = l->token;
    if (header_name != NULL) {
        if (header_name[0] == '/' || name_token(header_name) == NULL)
            return apr_psprintf(cmd->pool, "SrlLimiter %s: policy_name '%s' must be 1..%u "
                                "of [A-Za-z0-9._-], not all dots", argv[0], header_name,
                                SRL_NAME_MAX);
        l->header_name = header_name;
    }
    l->defined_at = apr_psprintf(cmd->pool, "%s:%d", cmd->directive->filename,
                                 cmd->directive->line_num);

    srl_ap_registry *reg = registry_get(cmd->pool, 1);
    srl_ap_limiter *old = apr_hash_get(reg->by_name, l->token, APR_HASH_KEY_STRING);
    if (old != NULL)
        return apr_psprintf(cmd->pool, "SrlLimiter %s: already defined at %s",
                            argv[0], old->defined_at);
    apr_hash_set(reg->by_name, l->token, APR_HASH_KEY_STRING, l);
    APR_ARRAY_PUSH(reg->limiters, srl_ap_limiter *) = l;
    return NULL;
}

static const char *cmd_on_full(cmd_parms *cmd, void *dconf, const char *arg)
{
    (void)dconf;
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    if (err != NULL)
        return err;
    srl_ap_registry *reg = registry_get(cmd->pool, 1);
    srl_config c;   /* the library's on_full words, through a scratch config */
    srl_config_init(&c);
    srl_policy_error pe;
    if (srl_config_set(&c, "on_full", arg, &pe) != 0)
        return apr_pstrcat(cmd->pool, "SrlOnFull: ", pe.message, NULL);
    reg->on_full = (int)c.on_full;
    return NULL;
}

static const char *cmd_warn_interval(cmd_parms *cmd, void *dconf, const char *arg)
{
    (void)dconf;
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    if (err != NULL)
        return err;
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || v < 1 || v > 86400)
        return apr_psprintf(cmd->pool, "SrlWarnInterval: '%s': expected seconds, 1..86400", arg);
    registry_get(cmd->pool, 1)->warn_every = apr_time_from_sec(v);
    return NULL;
}

/* SrlBanLogLevel LEVEL|off: the level of the line a penalty ban's start logs. */
static const char *cmd_ban_log_level(cmd_parms *cmd, void *dconf, const char *arg)
{
    (void)dconf;
    static const char *const names[] = {"emerg", "alert", "crit", "error", "warn", "notice",
                                        "info", "debug"};   /* APLOG_EMERG (0) .. APLOG_DEBUG */
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    if (err != NULL)
        return err;
    int level = strcasecmp(arg, "off") == 0 ? -1 : -2;
    for (int i = 0; level == -2 && i < (int)(sizeof names / sizeof names[0]); i++)
        if (strcasecmp(arg, names[i]) == 0)
            level = i;
    if (level == -2)
        return apr_psprintf(cmd->pool, "SrlBanLogLevel: '%s': expected emerg, alert, crit, "
                            "error, warn, notice, info, debug or off", arg);
    registry_get(cmd->pool, 1)->ban_log_level = level;
    return NULL;
}

/* The limiter named by arg (after "SrlLimit" or "SrlConcurrency"), which must
 * be declared and of the right kind: a concurrency limiter is entered, a rate
 * limiter acquired, and each directive takes only its own (the other call
 * would answer SRL_ENOTSUP on every request). */
static const char *find_limiter(cmd_parms *cmd, const char *directive, const char *arg,
                                int concurrency, srl_ap_limiter **out)
{
    const char *token = name_token(arg);
    srl_ap_registry *reg = registry_get(cmd->pool, 0);
    srl_ap_limiter *l = (token == NULL || reg == NULL)
                            ? NULL : apr_hash_get(reg->by_name, token, APR_HASH_KEY_STRING);
    if (l == NULL)
        return apr_psprintf(cmd->pool, "%s %s: no such limiter; declare it first "
                            "with SrlLimiter in the main server configuration", directive, arg);
    int is_conc = l->concurrency;
    if (is_conc != concurrency) {
        char pol[SRL_LIMITS_TEXT_MAX];
        srl_limits_format(&l->limits, pol, sizeof pol);
        return apr_psprintf(cmd->pool, "%s %s: limiter %s (%s) has %s policy '%s': apply it "
                            "with %s %s", directive, arg, l->name, l->defined_at,
                            is_conc ? "the in-flight" : "a rate", pol,
                            is_conc ? "SrlConcurrency" : "SrlLimit", arg);
    }
    *out = l;
    return NULL;
}

/* SrlLimit (cmd->info NULL) and SrlConcurrency (non-NULL): the limiter to
 * apply here, or "off" to stop an inherited one. */
static const char *cmd_apply(cmd_parms *cmd, void *dconf, const char *arg)
{
    srl_ap_dir *d = dconf;
    int conc = cmd->info != NULL;
    srl_ap_limiter **slot = conc ? &d->conc : &d->limiter;
    *(conc ? &d->conc_set : &d->limiter_set) = 1;
    *slot = NULL;
    if (strcasecmp(arg, "off") == 0)
        return NULL;
    return find_limiter(cmd, cmd->cmd->name, arg, conc, slot);
}

/* Parse header:NAME, env:NAME or expr:EXPR into *src.  NULL on success;
 * usage when arg is none of them; else the expression's error. */
static const char *parse_source(cmd_parms *cmd, const char *arg, const char *usage,
                                srl_ap_source *src)
{
    if (strncasecmp(arg, "header:", 7) == 0 && arg[7] != '\0') {
        src->kind = KEY_HEADER;
        src->arg = arg + 7;
    } else if (strncasecmp(arg, "env:", 4) == 0 && arg[4] != '\0') {
        src->kind = KEY_ENV;
        src->arg = arg + 4;
    } else if (strncasecmp(arg, "expr:", 5) == 0 && arg[5] != '\0') {
        const char *err = NULL;
        src->expr = ap_expr_parse_cmd(cmd, arg + 5, AP_EXPR_FLAG_STRING_RESULT, &err, NULL);
        if (err != NULL)
            return apr_pstrcat(cmd->pool, cmd->cmd->name, ": cannot parse expression '",
                               arg + 5, "': ", err, NULL);
        src->kind = KEY_EXPR;
    } else {
        return usage;
    }
    return NULL;
}

/* A source's value for request r: NULL when it has none (a header or
 * variable not set, an expression that failed, logged under directive). */
static const char *source_value(request_rec *r, const srl_ap_source *src, const char *directive)
{
    switch (src->kind) {
    case KEY_HEADER:
        return apr_table_get(r->headers_in, src->arg);
    case KEY_ENV:
        return apr_table_get(r->subprocess_env, src->arg);
    case KEY_EXPR: {
        const char *err = NULL;
        const char *v = ap_expr_str_exec(r, src->expr, &err);
        if (err != NULL) {
            ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r, "%s expression failed: %s", directive, err);
            return NULL;
        }
        return v;
    }
    case KEY_UNSET:
    case KEY_IP:
    default:
        return r->useragent_ip;
    }
}

/* ----------------------------------------- address keys, exemptions
 * SrlKey ip/V4[,/V6]: the key is the client address's prefix, written by
 * srl_key_ip (one form in every binding: "192.0.2.0/24", "2001:db8::/64";
 * IPv4-mapped IPv6 counts as IPv4).  SrlExempt CIDR...: ranges parsed by
 * srl_cidr_parse, matched by srl_cidr_match against r->useragent_ip (so
 * mod_remoteip's trusted-proxy rules decide which address that is).
 *
 * An exempt request is decided by SrlLimit under the key of its range, the
 * range's text ("127.0.0.0/8"), which the request first marks exempt in the
 * store (srl_key_exempt: idempotent, one bucket lock).  So the library
 * counts it (srl_stats.allowed and .exempt, rlctl info, the metrics), never
 * refuses it, and a ban by hand of the range's key ("rlctl ban NAME
 * 127.0.0.0/8") still wins, as a ban wins over any exemption; the client's
 * own key is untouched, so removing SrlExempt leaves nothing behind that
 * decides a request.  SrlConcurrency is not affected.  Stores without
 * exemptions (Redis, tiered: SRL_ENOTSUP): an exempt request passes
 * uncounted (logged at debug). */

/* "ip/V4" or "ip/V4,/V6" (srl_key_ip_form: V6 64 when not given). */
static const char *ip_prefix_form(cmd_parms *cmd, const char *arg, srl_ap_source *src)
{
    unsigned v4, v6;
    if (srl_key_ip_form(arg + 2, strlen(arg + 2), &v4, &v6) != 0)
        return apr_pstrcat(cmd->pool, "SrlKey ", arg, ": an address prefix key is ip/V4 or "
                           "ip/V4,/V6, V4 0..32 and V6 0..128 in decimal (e.g. ip/32,/64, "
                           "ip/24,/48)", NULL);
    src->kind = KEY_IP_PREFIX;
    src->v4 = v4;
    src->v6 = v6;
    return NULL;
}

/* The key of r's address under ip/V4,/V6, in r->pool; NULL (not limited,
 * logged) for an address srl_key_ip does not read. */
static const char *ip_prefix_key(request_rec *r, const srl_ap_source *src)
{
    char *buf = apr_palloc(r->pool, SRL_KEY_IP_MAX);
    if (srl_key_ip(r->useragent_ip, src->v4, src->v6, buf, SRL_KEY_IP_MAX) > 0)
        return buf;
    ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r, "SrlKey ip/%u,/%u: client address '%s' is "
                  "not an IPv4 or IPv6 address; the request is not limited", src->v4, src->v6,
                  ap_escape_logitem(r->pool, r->useragent_ip ? r->useragent_ip : ""));
    return NULL;
}

/* SrlExempt CIDR... (repeatable; each argument one range) or off. */
static const char *cmd_exempt(cmd_parms *cmd, void *dconf, const char *arg)
{
    srl_ap_dir *d = dconf;
    if (strcasecmp(arg, "off") == 0) {
        if (d->exempt != NULL && d->exempt->nelts > 0)
            return "SrlExempt off cannot be given with ranges in the same section";
        d->exempt = NULL;
        d->exempt_set = 1;
        return NULL;
    }
    if (d->exempt_set && d->exempt == NULL)
        return "SrlExempt off cannot be given with ranges in the same section";
    srl_cidr c;
    if (srl_cidr_parse(arg, &c) != 0)
        return apr_pstrcat(cmd->pool, "SrlExempt ", arg, ": not an address range; give "
                           "ADDRESS or ADDRESS/PREFIX (10.0.0.0/8, 2001:db8::/32, ::1), the "
                           "address with no bits set past the prefix", NULL);
    if (d->exempt == NULL)
        d->exempt = apr_array_make(cmd->pool, 4, sizeof(srl_cidr));
    *(srl_cidr *)apr_array_push(d->exempt) = c;
    d->exempt_set = 1;
    return NULL;
}

/* The key of the first SrlExempt range holding r's address, marked exempt
 * in l's store; NULL when the address is in none (or there are none). */
static const char *exempt_key(request_rec *r, const srl_ap_dir *d, const srl_ap_limiter *l)
{
    if (d->exempt == NULL || r->useragent_ip == NULL)
        return NULL;
    const srl_cidr *c = (const srl_cidr *)d->exempt->elts;
    for (int i = 0; i < d->exempt->nelts; i++) {
        if (srl_cidr_match(&c[i], r->useragent_ip) != 1)
            continue;
        char *key = apr_palloc(r->pool, SRL_KEY_IP_MAX);
        if (srl_cidr_format(&c[i], key, SRL_KEY_IP_MAX) <= 0)
            return NULL;
        int rc = srl_key_exempt(l->lim, key, strlen(key), 1);
        if (rc != 0)
            ap_log_rerror(APLOG_MARK, rc == SRL_ENOTSUP ? APLOG_DEBUG : APLOG_WARNING, 0, r,
                          "SrlExempt %s on %s: %s; the request passes uncounted", key, l->name,
                          srl_strerror(rc));
        return rc == 0 ? key : "";
    }
    return NULL;
}

static const char *cmd_key(cmd_parms *cmd, void *dconf, const char *arg)
{
    srl_ap_dir *d = dconf;
    if (strcasecmp(arg, "ip") == 0) {
        d->key.kind = KEY_IP;
        return NULL;
    }
    if (strncasecmp(arg, "ip/", 3) == 0)
        return ip_prefix_form(cmd, arg, &d->key);
    return parse_source(cmd, arg, "SrlKey must be ip, ip/V4[,/V6], header:NAME, env:NAME or "
                        "expr:EXPRESSION", &d->key);
}

/* SrlTier header:NAME|env:NAME|expr:EXPR [VALUE=TIER]...: the source's
 * value names the request's tier, or with a map, the map's entry for it. */
static const char *cmd_tier(cmd_parms *cmd, void *dconf, int argc, char *const argv[])
{
    srl_ap_dir *d = dconf;
    static const char usage[] = "SrlTier header:NAME|env:NAME|expr:EXPRESSION [VALUE=TIER]...";
    if (argc < 1)
        return usage;
    const char *err = parse_source(cmd, argv[0], usage, &d->tier);
    if (err != NULL)
        return err;
    d->tier_map = NULL;
    for (int i = 1; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (eq == NULL || eq == argv[i] || srl_tier_name_check(eq + 1) != 0)
            return apr_psprintf(cmd->pool, "SrlTier: map entry '%s' must be VALUE=TIER (TIER "
                                "1..%u of [A-Za-z0-9_-], or default)", argv[i],
                                SRL_TIER_NAME_MAX);
        if (d->tier_map == NULL)
            d->tier_map = apr_table_make(cmd->pool, argc);
        apr_table_setn(d->tier_map, apr_pstrmemdup(cmd->pool, argv[i], (size_t)(eq - argv[i])),
                       eq + 1);
    }
    return NULL;
}

static const char *cmd_cost(cmd_parms *cmd, void *dconf, const char *arg)
{
    srl_ap_dir *d = dconf;
    char *end = NULL;
    apr_int64_t n = apr_strtoi64(arg, &end, 10);
    if (end == arg || *end != '\0' || n < 1 || n > UINT32_MAX)
        return apr_psprintf(cmd->pool, "SrlCost '%s' must be 1..%u", arg, UINT32_MAX);
    if (d->limiter != NULL && (uint64_t)n > d->limiter->min_permits)
        return apr_psprintf(cmd->pool, "SrlCost %s exceeds the %u permits of limiter %s: "
                            "such a request could never pass", arg,
                            d->limiter->min_permits, d->limiter->name);
    d->cost = (uint32_t)n;
    return NULL;
}

static const char *cmd_dry_run(cmd_parms *cmd, void *dconf, int on)
{
    (void)cmd;
    ((srl_ap_dir *)dconf)->dry_run = on;
    return NULL;
}

static const char *cmd_status(cmd_parms *cmd, void *dconf, const char *arg)
{
    char *end = NULL;
    apr_int64_t n = apr_strtoi64(arg, &end, 10);
    if (end == arg || *end != '\0' || n < 400 || n > 599)
        return apr_psprintf(cmd->pool, "SrlStatus '%s' must be an HTTP error status, 400..599 "
                            "(default 429)", arg);
    ((srl_ap_dir *)dconf)->status = (int)n;
    return NULL;
}

/* SrlDelay MAX: a duration in the policy text's units ("500ms", "2s"),
 * read by the library's own parser (the window of 1/MAX), or off. */
static const char *cmd_delay(cmd_parms *cmd, void *dconf, const char *arg)
{
    srl_ap_dir *d = dconf;
    d->delay_set = 1;
    d->delay_ns = 0;
    if (strcasecmp(arg, "off") == 0)
        return NULL;
    srl_policy p;
    if (srl_policy_parse(apr_pstrcat(cmd->pool, "token_bucket:1/", arg, NULL), &p) != 0 ||
        p.window_ns > SRL_WAIT_MAX_NS)
        return apr_psprintf(cmd->pool, "SrlDelay '%s' must be off or a duration up to 1h "
                            "(e.g. 500ms, 2s; units ns us ms s m h)", arg);
    d->delay_ns = p.window_ns;
    return NULL;
}

/* SrlRefund EXPR|off: give the request's permits back in the log phase
 * when the boolean expression holds for the final response. */
static const char *cmd_refund(cmd_parms *cmd, void *dconf, const char *arg)
{
    srl_ap_dir *d = dconf;
    d->refund_set = 1;
    d->refund = NULL;
    if (strcasecmp(arg, "off") == 0)
        return NULL;
    const char *err = NULL;
    d->refund = ap_expr_parse_cmd(cmd, arg, 0, &err, NULL);
    if (err != NULL)
        return apr_pstrcat(cmd->pool, "SrlRefund: cannot parse expression '", arg, "': ", err,
                           " (e.g. \"%{REQUEST_STATUS} -lt 400\")", NULL);
    return NULL;
}

static void *create_dir(apr_pool_t *p, char *dir)
{
    (void)dir;
    srl_ap_dir *d = apr_pcalloc(p, sizeof *d);
    d->dry_run = -1;
    return d;
}

static void *merge_dir(apr_pool_t *p, void *basev, void *addv)
{
    const srl_ap_dir *base = basev, *add = addv;
    srl_ap_dir *d = apr_pcalloc(p, sizeof *d);
    d->limiter = add->limiter_set ? add->limiter : base->limiter;
    d->limiter_set = base->limiter_set || add->limiter_set;
    d->key = add->key.kind != KEY_UNSET ? add->key : base->key;
    d->cost = add->cost != 0 ? add->cost : base->cost;
    d->dry_run = add->dry_run != -1 ? add->dry_run : base->dry_run;
    d->status = add->status != 0 ? add->status : base->status;
    d->conc = add->conc_set ? add->conc : base->conc;
    d->conc_set = base->conc_set || add->conc_set;
    d->delay_ns = add->delay_set ? add->delay_ns : base->delay_ns;
    d->delay_set = base->delay_set || add->delay_set;
    d->refund = add->refund_set ? add->refund : base->refund;
    d->refund_set = base->refund_set || add->refund_set;
    const srl_ap_dir *t = add->tier.kind != KEY_UNSET ? add : base;
    d->tier = t->tier;
    d->tier_map = t->tier_map;
    d->exempt = add->exempt_set ? add->exempt : base->exempt;
    d->exempt_set = base->exempt_set || add->exempt_set;
    return d;
}

/* --------------------------------------------------- segment lifecycle */

static apr_status_t limiter_close(void *data)
{
    srl_ap_limiter *l = data;
    srl_close(l->lim);   /* unmaps; the segment and its states stay */
    srl_close(l->dry);
    l->lim = NULL;
    l->dry = NULL;
    return APR_SUCCESS;
}

static const char *open_remedy(const srl_ap_limiter *l, int rc)
{
    if (l->redis != NULL) {
        switch (rc) {
        case SRL_EMISMATCH:
            return " (another policy is stored under the uri's prefix: use another prefix=, "
                   "or give every host the same policy; or the segment NAME, the host "
                   "tier, exists as another limiter's: `rlctl destroy NAME`)";
        case SRL_EACCES:
            return " (the Redis server refused the uri's user or password)";
        case SRL_ETIMEDOUT:
            return " (the Redis server did not answer within timeout_ms)";
        case SRL_ESYS:
            return " (is the Redis server running at the uri's address?)";
        case SRL_ENOTSUP:
            return " (this policy does not fit the Redis store's exact arithmetic, see "
                   "srl_open_redis in srl.h, or srl was built without hiredis)";
        default:
            return "";
        }
    }
    switch (rc) {
    case SRL_EMISMATCH:
        return " (the segment exists with another policy or capacity: use another name, or "
               "remove it with `rlctl destroy NAME` while no server uses it)";
    case SRL_ESTALE:
        return " (its creator died before finishing it: remove it with `rlctl destroy NAME`)";
    case SRL_EACCES:
        return " (the segment belongs to another user, or its mode was refused)";
    case SRL_ENOSPC:
        return " (the shared-memory filesystem is full: see `df /dev/shm`)";
    default:
        return "";
    }
}

/* Hand a segment the parent (root) created to the worker user.  A
 * concurrency limit on redis= has none (srl_open_fronted opens Redis alone). */
static int hand_to_worker(apr_pool_t *p, server_rec *s, const srl_ap_limiter *l)
{
    srl_info in;
    if (geteuid() != 0 || ap_unixd_config.user_id == 0 ||
        (srl_info_get(l->lim, &in) == 0 && in.kind == SRL_STORE_REDIS))
        return OK;
    const char *shm_name = l->name[0] == '/' ? l->name : apr_pstrcat(p, "/", l->name, NULL);
    int fd = shm_open(shm_name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, errno, s,
                     "SrlLimiter %s: cannot reopen the segment to set its owner", l->name);
        if (fd >= 0)
            close(fd);
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    int rc = OK;
    /* Only a root-owned segment is handed over: one that already belongs to
     * the worker user is left alone, and srl refused any other owner (it
     * trusts root's own uid and the one named in cfg.owner_uid). */
    if (st.st_uid == 0 && fchown(fd, ap_unixd_config.user_id, ap_unixd_config.group_id) != 0) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, errno, s,
                     "SrlLimiter %s: cannot give the segment to uid %ld", l->name,
                     (long)ap_unixd_config.user_id);
        rc = HTTP_INTERNAL_SERVER_ERROR;
    }
    close(fd);
    return rc;
}

static void limiter_config(const srl_ap_registry *reg, const srl_ap_limiter *l, srl_config *cfg)
{
    /* The spec's config as parsed (one limit as the plain policy, a
     * compound as srl_limits; mode, lock_timeout_ms and the flags as
     * written; the flags are per handle: never stored in, or compared with,
     * the segment), with its tiers and SrlOnFull's default. */
    *cfg = l->spec;
    cfg->tiers = l->tiers;
    cfg->tier_count = l->ntiers;
    cfg->on_full = (srl_on_full)(l->on_full >= 0 ? l->on_full : reg->on_full);
    /* The parent runs as root and the segment ends up the worker user's
     * (hand_to_worker): that one uid is trusted, by name, and no other
     * (docs/design.md, "Trust").  The parent only maps it: it never locks a
     * bucket, so a worker that rewrites the mutexes cannot make root write
     * through them; the children that lock run as that user anyway. */
    if (geteuid() == 0 && ap_unixd_config.user_id != 0)
        cfg->owner_uid = (uint32_t)ap_unixd_config.user_id;
}

/* The first pass: an existing segment that srl would refuse (another
 * policy, foreign, corrupt, not ours) fails the start now, while `apache2
 * -k start` still waits for the answer: on the real pass the server has
 * already detached and its launcher exited 0.  A missing one is fine (the
 * real pass creates it); nothing is created here. */
/* What a limiter is, for messages (never the uri: it may hold a password). */
static const char *store_what(const srl_ap_limiter *l)
{
    return l->redis != NULL ? "its Redis store and host segment" : "the segment";
}

/* After SRL_EMISMATCH on a segment: what differs, from the segment's own
 * config (an adopting open), as "; why" for the log line, or "". */
static const char *mismatch_why(apr_pool_t *p, const srl_ap_limiter *l, const srl_config *cfg,
                                int rc)
{
    if (rc != SRL_EMISMATCH || l->redis != NULL)
        return "";
    srl_limiter *seg;
    srl_info in;
    char why[1024];
    /* cfg's trust (owner_uid, mode) applies to the adopting open too. */
    if (srl_open_shared(l->name, cfg, SRL_ADOPT, &seg) != 0)
        return "";
    int n = srl_info_get(seg, &in) == 0
                ? srl_mismatch_explain_for(cfg, &in, SRL_BINDING_APACHE, why, sizeof why)
                : 0;
    srl_close(seg);
    return n > 0 ? apr_pstrcat(p, "; ", why, NULL) : "";
}

/* After SRL_EMISMATCH on a segment: open it adopting its policy, and ask
 * srl whether this configuration's policy can replace it live
 * (srl_policy_change_check: same capacity, key display and tier names, a
 * state that fits the slots).  0 with *seg open; else the code, *seg
 * closed, and why[] says what differs and what to do (for the log line). */
static int open_changeable(const srl_ap_limiter *l, const srl_config *cfg, srl_limiter **seg,
                           char *why, size_t len)
{
    /* cfg's trust (owner_uid, mode) applies to the adopting open too. */
    int rc = srl_open_shared(l->name, cfg, SRL_ADOPT, seg);
    if (rc != 0) {
        *seg = NULL;
        return rc;
    }
    rc = srl_policy_change_check(*seg, cfg, why, len);
    if (rc != 0) {
        srl_close(*seg);
        *seg = NULL;
    }
    return rc;
}

static int precheck_limiter(server_rec *s, const srl_ap_registry *reg, const srl_ap_limiter *l)
{
    srl_config cfg;
    limiter_config(reg, l, &cfg);
    srl_limiter *lim = NULL;
    /* A Redis store is opened without a config: its stored policy, and no
     * prefix created by what may be a syntax check. */
    int rc = l->redis != NULL ? srl_open_redis(l->redis, NULL, &lim)
                              : srl_open_shared(l->name, &cfg, 0, &lim);
    srl_info in;
    if (rc == 0 && l->redis != NULL && srl_info_get(lim, &in) == 0 &&
        (in.policy.algorithm != l->limits.limit[0].algorithm ||
         in.policy.permits != l->limits.limit[0].permits ||
         in.policy.window_ns != l->limits.limit[0].window_ns))
        rc = SRL_EMISMATCH;
    srl_close(lim);
    if (rc == 0 || rc == SRL_ENOENT)
        return OK;
    if (l->redis != NULL && (rc == SRL_ESYS || rc == SRL_ETIMEDOUT)) {
        /* Redis down: the start goes on (srl_open_redis with a config opens
         * without a server and checks the policy at its first connection),
         * so a restart during an outage serves by on_full. */
        char cause[256];
        (void)srl_last_error(cause, sizeof cause);   /* which server, what happened */
        ap_log_error(APLOG_MARK, APLOG_WARNING, rc == SRL_ESYS ? errno : 0, s,
                     "SrlLimiter %s (%s): %s not reachable (%s: %s): deciding by on_full "
                     "until it answers", l->name, l->defined_at, store_what(l),
                     srl_strerror(rc), cause);
        return OK;
    }
    char why[1024] = "";
    if (l->redis != NULL)
        (void)srl_last_error(why, sizeof why);   /* the open's own sentence */
    if (rc == SRL_EMISMATCH && l->redis == NULL) {
        srl_limiter *seg = NULL;
        rc = open_changeable(l, &cfg, &seg, why, sizeof why);
        srl_close(seg);
        if (rc == 0)
            return OK;
    }
    ap_log_error(APLOG_MARK, APLOG_EMERG, rc == SRL_ESYS ? errno : 0, s,
                 "SrlLimiter %s (%s): cannot open %s: %s%s%s%s", l->name, l->defined_at,
                 store_what(l), srl_strerror(rc),
                 /* a mismatch's own explanation names what differs */
                 rc == SRL_EMISMATCH && l->redis == NULL && why[0] != '\0'
                     ? " (to start over: `rlctl destroy NAME` while no server uses it)"
                     : open_remedy(l, rc),
                 why[0] != '\0' ? "; " : "", why);
    return HTTP_INTERNAL_SERVER_ERROR;
}

/* The fronted store: Redis with the host segment NAME in front, and with
 * fallback= the host's policy while Redis does not answer.  cfg's tiers are
 * mod_srl's own table (l->tiers), and the library reads the fallback from a
 * config store of its own (srl.h, Ownership): both are set again on a
 * config made here, the tiers by their text. */
static int open_fronted(const srl_ap_limiter *l, const srl_config *cfg, srl_limiter **out)
{
    srl_config c = *cfg;
    c.tiers = NULL;
    c.tier_count = 0;
    srl_policy_error pe;
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < cfg->tier_count; i++) {
        char name[sizeof "tier." + SRL_TIER_NAME_MAX], text[SRL_LIMITS_TEXT_MAX];
        snprintf(name, sizeof name, "tier.%s", cfg->tiers[i].name);
        rc = srl_limits_format(&cfg->tiers[i].limits, text, sizeof text) < 0
                 ? SRL_EPOLICY
                 : srl_config_set(&c, name, text, &pe);
    }
    if (rc == 0 && l->fallback != NULL)
        rc = srl_config_set(&c, "fallback", l->fallback, &pe);
    if (rc == 0)
        rc = srl_open_fronted(l->name, l->redis, &c, SRL_CREATE, out);
    srl_config_free(&c);
    return rc;
}

static int open_limiter(apr_pool_t *pconf, server_rec *s, const srl_ap_registry *reg,
                        srl_ap_limiter *l)
{
    srl_config cfg;
    limiter_config(reg, l, &cfg);

    int rc = l->redis != NULL ? open_fronted(l, &cfg, &l->lim)
                              : srl_open_shared(l->name, &cfg, SRL_CREATE, &l->lim);
    char why[1024] = "";
    l->change = 0;
    if (rc == SRL_EMISMATCH && l->redis == NULL) {
        /* Another policy this one can replace: adopt the segment's for now;
         * the children change it (srl_child_init).  The parent, root,
         * never takes a bucket lock (limiter_config), and a change does. */
        rc = open_changeable(l, &cfg, &l->lim, why, sizeof why);
        l->change = rc == 0;
    }
    if (rc == 0) {
        /* SrlDryRun's handle: the same store, this opener's dry-run flag
         * (not compared with the segment, not stored in it); it adopts
         * the segment's policy too while a change is pending. */
        cfg.flags |= SRL_CONFIG_DRY_RUN;
        rc = l->redis != NULL ? srl_open_redis(l->redis, &cfg, &l->dry)
                              : srl_open_shared(l->name, &cfg, l->change ? SRL_ADOPT : 0, &l->dry);
        if (rc != 0) {
            srl_close(l->lim);
            l->lim = NULL;
        }
    }
    if ((rc == SRL_ENOSPC || rc == SRL_ETOOBIG) && l->redis == NULL)
        srl_room_check(&cfg, why, sizeof why);   /* what it needs, what is free */
    if (rc != 0 && l->redis != NULL && rc != SRL_EMISMATCH && why[0] == '\0')
        (void)srl_last_error(why, sizeof why);   /* which server, what happened */
    if (rc != 0) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, rc == SRL_ESYS ? errno : 0, s,
                     "SrlLimiter %s (%s): cannot open %s: %s%s%s%s", l->name,
                     l->defined_at, store_what(l), srl_strerror(rc), open_remedy(l, rc),
                     why[0] != '\0' ? "; " : "", why[0] != '\0' ? why : mismatch_why(pconf, l, &cfg, rc));
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    apr_pool_cleanup_register(pconf, l, limiter_close, apr_pool_cleanup_null);

    if (l->concurrency)
        return hand_to_worker(pconf, s, l);   /* no RateLimit headers: apply_decision */
    /* One item per limit, up to 4 of ~"NAME.i";q=4294967295;w=315360000 */
    char buf[4 * (SRL_NAME_MAX + 40)];
    rc = srl_format_ratelimit_policies(&l->limits, l->header_name, buf, sizeof buf);
    if (rc < 0) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, 0, s, "SrlLimiter %s: cannot format its "
                     "RateLimit-Policy: %s", l->name, srl_strerror(rc));
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    l->policy_header = apr_pstrdup(pconf, buf);
    l->tier_header[0] = l->policy_header;
    l->tier_limits[0] = &l->limits;
    for (uint32_t t = 0; t < l->ntiers; t++) {
        if (srl_format_ratelimit_policies(&l->tiers[t].limits, l->header_name, buf,
                                          sizeof buf) < 0)
            return HTTP_INTERNAL_SERVER_ERROR;   /* the same name formatted above */
        l->tier_header[t + 1] = apr_pstrdup(pconf, buf);
        l->tier_limits[t + 1] = &l->tiers[t].limits;
    }
    return hand_to_worker(pconf, s, l);   /* a tiered limiter's host segment too */
}

/* -k stop or -k graceful-stop: a server whose configuration was edited
 * since must still be stoppable.  httpd strips -k from process->argv
 * (ap_mpm_rewrite_args) and keeps its argument to itself, so the command
 * line is read as the kernel has it. */
static int stopping(void)
{
    char buf[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *prev = "";
    for (const char *a = buf; a < buf + n; a += strlen(a) + 1) {
        const char *k = strcmp(prev, "-k") == 0 ? a : strncmp(a, "-k", 2) == 0 ? a + 2 : NULL;
        if (k != NULL && (strcmp(k, "stop") == 0 || strcmp(k, "graceful-stop") == 0))
            return 1;
        prev = a;
    }
    return 0;
}

/* The first pass of every apache2 run (-t, -k start, -k graceful, a
 * foreground start): refuse a segment that the real pass would refuse,
 * creating nothing, before httpd exits (-t) or signals a running server. */
static int srl_check_config(apr_pool_t *pconf, apr_pool_t *plog, apr_pool_t *ptemp,
                            server_rec *s)
{
    (void)plog;
    (void)ptemp;
    srl_ap_registry *reg = registry_get(pconf, 0);
    if (reg == NULL || ap_state_query(AP_SQ_MAIN_STATE) != AP_SQ_MS_CREATE_PRE_CONFIG ||
        stopping())
        return OK;
    for (int i = 0; i < reg->limiters->nelts; i++) {
        int rc = precheck_limiter(s, reg, APR_ARRAY_IDX(reg->limiters, i, srl_ap_limiter *));
        if (rc != OK)
            return rc;
    }
    return OK;
}

/* The SrlLimiter options that are srl_config flags of its handles, and how
 * the parent's log (log_handle_flags) and srl-metrics (handle_metrics) say
 * whether they took effect (srl_info.flags). */
static const struct {
    uint32_t flag;
    const char *option;   /* as in SrlLimiter */
    const char *on;       /* took effect, for the log */
    const char *off;      /* asked and not taken: why, for the log */
    const char *metric, *help;
} handle_flags[] = {
    {SRL_CONFIG_LOCKFREE, "lockfree", "lock-free gcra path on",
     /* srl.h's two conditions; srl_info tells them apart from neither (a
      * segment's alignment is fixed at creation, by the policy it was
      * created with, which a live change leaves no trace of). */
     "either the segment's slots are not 16-byte aligned (it was created with no gcra limit "
     "in any tier: stop the server, rlctl destroy it, start) or this CPU has no 16-byte "
     "compare-and-swap (x86-64 cmpxchg16b)",
     "srl_handle_lockfree",
     "1 if this worker's handle decides found GCRA keys lock-free (SrlLimiter lockfree=on "
     "took effect)"},
    {SRL_CONFIG_FLOOD_CACHE, "flood_cache", "denial-flood cache on", "its store keeps none",
     "srl_handle_flood_cache",
     "1 if this worker's handle answers repeated denials from its denial-flood cache "
     "(SrlLimiter flood_cache=on took effect)"},
};

/* lockfree=on, flood_cache=on: whether the handle just opened took them,
 * once per generation.  The parent opens it and every child inherits it
 * as is, so this is what each worker decides with (srl-metrics'
 * srl_handle_* say the same per worker).  Asked and off is a warning: the
 * operator asked for a path the workers do not take. */
static void log_handle_flags(server_rec *s, const srl_ap_limiter *l)
{
    srl_info in;
    if (l->flags == 0 || srl_info_get(l->lim, &in) != 0)
        return;
    for (size_t f = 0; f < sizeof handle_flags / sizeof handle_flags[0]; f++) {
        if (!(l->flags & handle_flags[f].flag))
            continue;
        if (in.flags & handle_flags[f].flag)
            ap_log_error(APLOG_MARK, APLOG_INFO, 0, s, "SrlLimiter %s: %s=on: %s", l->name,
                         handle_flags[f].option, handle_flags[f].on);
        else
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s, "SrlLimiter %s: %s=on asked but "
                         "off: %s", l->name, handle_flags[f].option, handle_flags[f].off);
    }
}

static int srl_post_config(apr_pool_t *pconf, apr_pool_t *plog, apr_pool_t *ptemp,
                           server_rec *s)
{
    (void)plog;
    (void)ptemp;
    srl_ap_registry *reg = registry_get(pconf, 0);
    if (reg == NULL)
        return OK;
    /* The pre-config pass may be a syntax check: create nothing yet
     * (srl_check_config has refused what the real pass would refuse). */
    if (ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_CREATE_PRE_CONFIG)
        return OK;
    for (int i = 0; i < reg->limiters->nelts; i++) {
        srl_ap_limiter *l = APR_ARRAY_IDX(reg->limiters, i, srl_ap_limiter *);
        int rc = open_limiter(pconf, s, reg, l);
        if (rc != OK)
            return rc;
        char pol[SRL_LIMITS_TEXT_MAX];
        srl_limits_format(&l->limits, pol, sizeof pol);
        if (l->redis != NULL)
            ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                         "SrlLimiter %s: %s, Redis store with host segment %s, open", l->name,
                         pol, l->name);
        else
            ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                         "SrlLimiter %s: %s, %" APR_UINT64_T_FMT " keys, open", l->name, pol,
                         (apr_uint64_t)l->capacity);
        log_handle_flags(s, l);
    }
    return OK;
}

/* A limiter whose segment held another policy (open_limiter's l->change):
 * each new child asks srl to change it to this configuration's.  The
 * first one changes it (a walk that converts every key under its bucket
 * lock, keeping each key's use: srl_policy_change); the others find it
 * equal and change nothing.  A child, not the parent: the MPM has dropped
 * root before child_init, and a change takes bucket locks, which the root
 * parent never does.  A failure (say a lock that timed out) is logged and
 * the old policy stays; the next child tries again. */
static void srl_child_init(apr_pool_t *p, server_rec *s)
{
    (void)p;
    srl_ap_registry *reg = registry_get(s->process->pconf, 0);
    if (reg == NULL)
        return;
    for (int i = 0; i < reg->limiters->nelts; i++) {
        srl_ap_limiter *l = APR_ARRAY_IDX(reg->limiters, i, srl_ap_limiter *);
        if (!l->change || l->lim == NULL)
            continue;
        if (geteuid() == 0 && ap_unixd_config.user_id != 0)
            continue;   /* not dropped yet (cannot happen with prefork/event) */
        srl_config cfg;
        srl_info after;
        char why[1024] = "";
        limiter_config(reg, l, &cfg);
        /* 1: this child made the change; 0: a sibling did first (they all
         * race here after a restart, and exactly one logs it). */
        int rc = srl_policy_change(l->lim, &cfg, why, sizeof why);
        if (rc < 0) {
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, s,
                         "SrlLimiter %s (%s): cannot change the segment's policy: %s%s%s",
                         l->name, l->defined_at, srl_strerror(rc), why[0] ? "; " : "", why);
            continue;
        }
        l->change = 0;
        if (rc == 1 && srl_info_get(l->lim, &after) == 0) {
            char pol[SRL_LIMITS_TEXT_MAX];
            srl_limits_format(&l->limits, pol, sizeof pol);
            ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                         "SrlLimiter %s: policy changed to %s (generation %u); every key "
                         "keeps its use", l->name, pol, (unsigned)after.policy_gen);
        }
    }
}

/* ------------------------------------------------------------ requests */

/* The request's key, or NULL when it has none (then it is not limited). */
static const char *request_key(request_rec *r, const srl_ap_dir *d)
{
    if (d->key.kind == KEY_IP_PREFIX)
        return ip_prefix_key(r, &d->key);
    return source_value(r, &d->key, "SrlKey");
}

/* SrlTier: the tier this request is decided under, 0 (the policy itself)
 * when there is no SrlTier, the source is empty, the map has no entry for
 * its value, or the limiter has no tier of that name. */
static uint32_t request_tier(request_rec *r, const srl_ap_dir *d, const srl_ap_limiter *l)
{
    if (d->tier.kind == KEY_UNSET || l->ntiers == 0)
        return 0;
    const char *v = source_value(r, &d->tier, "SrlTier");
    if (v != NULL && d->tier_map != NULL)
        v = apr_table_get(d->tier_map, v);
    if (v == NULL || v[0] == '\0')
        return 0;
    int t = srl_tier_find(l->lim, v);
    if (t < 0) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, "SrlTier: limiter %s has no tier '%s': "
                      "the default tier decides", l->name, ap_escape_logitem(r->pool, v));
        return 0;
    }
    return (uint32_t)t;
}

static void set_headers(request_rec *r, const srl_ap_limiter *l, uint32_t tier,
                        const srl_decision *dec)
{
    char buf[SRL_NAME_MAX + 64];   /* "NAME.i";r=4294967295;t=315360000 */
    if (tier > l->ntiers)
        tier = 0;
    apr_table_setn(r->err_headers_out, "RateLimit-Policy", l->tier_header[tier]);
    if (srl_format_ratelimit_binding(l->tier_limits[tier], dec, l->header_name, buf,
                                     sizeof buf) >= 0)
        apr_table_set(r->err_headers_out, "RateLimit", buf);
    if (!dec->allowed && srl_format_retry_after(dec, buf, sizeof buf) >= 0)
        apr_table_set(r->err_headers_out, "Retry-After", buf);
}

/* A call that failed: on a degraded decision (a lock timed out or cannot be
 * used) srl decided by on_full and the request goes on with that decision;
 * anything else is this server's fault, a 500. */
static int check_call(request_rec *r, const char *directive, const srl_ap_limiter *l, int rc,
                      const srl_decision *dec)
{
    if (rc == 0)
        return OK;
    if (!(dec->flags & SRL_DECISION_DEGRADED)) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r, "%s %s: %s", directive, l->name,
                      srl_strerror(rc));
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r, "%s %s: %s; decided by on_full (%s)",
                  directive, l->name, srl_strerror(rc), dec->allowed ? "allowed" : "denied");
    return OK;
}

/* What a decision makes of the request: DECLINED (go on: returning OK
 * would grant access under "Satisfy Any") or the refusal's status.  A rate
 * decision sets RateLimit-Policy and RateLimit; every refusal Retry-After. */
static int apply_decision(request_rec *r, const srl_ap_dir *d, const char *directive,
                          const srl_ap_limiter *l, uint32_t tier, const srl_decision *dec,
                          const char *key, size_t len)
{
    int conc = l->concurrency;
    int code = d->status != 0 ? d->status : HTTP_TOO_MANY_REQUESTS;
    /* SrlDryRun's handle allows; the library marks what it would refuse. */
    int refused = !dec->allowed || (dec->flags & SRL_DECISION_WOULD_DENY);
    if (refused)
        apr_table_setn(r->subprocess_env, "SRL_LIMITED", "1");
    if (d->dry_run == 1) {
        if (refused)
            ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r, "%s %s: dry run: would "
                          "answer %d to %s for %s", directive, l->name, code, r->useragent_ip,
                          ap_escape_logitem(r->pool, r->uri));
        return DECLINED;
    }
    if (!conc) {
        set_headers(r, l, tier, dec);
    } else if (!dec->allowed) {
        char buf[32];
        if (srl_format_retry_after(dec, buf, sizeof buf) >= 0)
            apr_table_set(r->err_headers_out, "Retry-After", buf);
    }
    if (dec->allowed)
        return DECLINED;
    ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, "%s %s: %d to %s for key \"%s\" on %s%s",
                  directive, l->name, code, r->useragent_ip,
                  ap_escape_logitem(r->pool, apr_pstrmemdup(r->pool, key, len)),
                  ap_escape_logitem(r->pool, r->uri),
                  conc ? apr_psprintf(r->pool, " (%u in flight)",
                                      (unsigned)(dec->limit - dec->remaining)) : "");
    return code;
}

/* r->pool's cleanup: give the request's unit back, however the request
 * ended.  Runs after the log phase.  SRL_ENOENT: srl reclaimed the unit
 * already (held longer than max_hold), nothing to give back. */
static apr_status_t leave_cleanup(void *data)
{
    srl_ap_held *h = data;
    int rc = srl_leave(h->lim, &h->lease);
    if (rc == SRL_ENOENT)
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, h->server, "SrlConcurrency %s: the unit "
                     "was reclaimed before the request ended (held longer than max_hold)",
                     h->limiter->name);
    else if (rc != 0)
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, h->server, "SrlConcurrency %s: cannot give "
                     "the unit back: %s (srl reclaims it once this process is gone)",
                     h->limiter->name, srl_strerror(rc));
    return APR_SUCCESS;
}

/* SrlConcurrency: take a unit for the whole request, or refuse. */
static int enter_concurrency(request_rec *r, const srl_ap_dir *d, const char *key, size_t len)
{
    const srl_ap_limiter *l = d->conc;
    srl_ap_held *h = apr_pcalloc(r->pool, sizeof *h);
    srl_decision dec;
    memset(&dec, 0, sizeof dec);
    srl_limiter *lim = d->dry_run == 1 ? l->dry : l->lim;
    int rc = check_call(r, "SrlConcurrency", l, srl_enter(lim, key, len, &h->lease, &dec),
                        &dec);
    if (rc != OK)
        return rc;
    /* gen 0: no unit is held (refused, allowed by on_full without one, or
     * a dry run's would-be refusal, admitted without one). */
    if (h->lease.gen != 0) {
        h->limiter = l;
        h->lim = lim;
        h->server = r->server;
        apr_pool_cleanup_register(r->pool, h, leave_cleanup, apr_pool_cleanup_null);
    }
    return apply_decision(r, d, "SrlConcurrency", l, 0, &dec, key, len);
}

/* SrlDelay: reserve within the delay and sleep until the permits' instant
 * (srl_acquire_wait), so the request is served at the policy's rate
 * instead of refused.  A limiter that cannot wait (its policy, or Redis):
 * srl_acquire, and a warning. */
static int delay_request(request_rec *r, const srl_ap_dir *d, const srl_ap_limiter *l,
                         const char *key, size_t len, uint32_t cost, srl_decision *dec)
{
    int rc = srl_acquire_wait(l->lim, key, len, cost, d->delay_ns, dec);
    if (rc == SRL_ENOTSUP) {
        ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r, "SrlDelay: limiter %s cannot delay "
                      "(token_bucket and gcra segments only): refusing instead", l->name);
        return srl_acquire(l->lim, key, len, cost, dec);
    }
    if (rc == 0 && dec->allowed && dec->wait_ns > 0) {
        apr_table_setn(r->subprocess_env, "SRL_DELAYED_MS",
                       apr_psprintf(r->pool, "%llu",
                                    (unsigned long long)((dec->wait_ns + 999999) / 1000000)));
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, "SrlLimit %s: delayed %llu ns", l->name,
                      (unsigned long long)dec->wait_ns);
    }
    return rc;
}

/* A decision that started a penalty= ban (one per ban, SRL_DECISION_BAN_STARTED):
 * one line at SrlBanLogLevel with the key, the policy and until when (UTC:
 * now plus the decision's retry_after, rounded up to the second). */
static void log_ban_start(request_rec *r, const srl_ap_limiter *l, uint32_t tier,
                          const srl_decision *dec, const char *key, size_t len)
{
    const srl_ap_registry *reg = registry_get(r->server->process->pconf, 0);
    int level = reg != NULL ? reg->ban_log_level : APLOG_WARNING;
    if (!(dec->flags & SRL_DECISION_BAN_STARTED) || level < 0)
        return;
    char policy[SRL_LIMITS_TEXT_MAX], until[32];
    if (tier > l->ntiers || srl_limits_format(l->tier_limits[tier], policy, sizeof policy) < 0)
        snprintf(policy, sizeof policy, "?");
    apr_time_t end = apr_time_now() + (apr_time_t)((dec->retry_after_ns + 999) / 1000);
    apr_time_exp_t t;
    apr_size_t n = 0;
    apr_time_exp_gmt(&t, end + APR_USEC_PER_SEC - 1);   /* rounded up to the second */
    if (apr_strftime(until, &n, sizeof until, "%Y-%m-%dT%H:%M:%SZ", &t) != APR_SUCCESS)
        snprintf(until, sizeof until, "?");
    ap_log_rerror(APLOG_MARK, level, 0, r, "SrlLimit %s: ban started: key \"%s\", policy %s, "
                  "until %s", l->name, ap_escape_logitem(r->pool, apr_pstrmemdup(r->pool, key, len)),
                  policy, until);
}

static int srl_access_checker(request_rec *r)
{
    if (!ap_is_initial_req(r))
        return DECLINED;
    const srl_ap_dir *d = ap_get_module_config(r->per_dir_config, &srl_module);
    const srl_ap_limiter *l = d->limiter != NULL && d->limiter->lim != NULL ? d->limiter : NULL;
    const srl_ap_limiter *c = d->conc != NULL && d->conc->lim != NULL ? d->conc : NULL;
    if (l == NULL && c == NULL)
        return DECLINED;

    const char *key = request_key(r, d);
    size_t len = key != NULL ? strlen(key) : 0;
    if (len == 0) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, "%s %s: request has no key, "
                      "not limited", l != NULL ? "SrlLimit" : "SrlConcurrency",
                      (l != NULL ? l : c)->name);
        return DECLINED;
    }
    if (len > SRL_KEY_MAX) {
        /* srl_key_fit: the rule every binding and host applies, so a long
         * key counts the same here, in PHP, Python and nginx. */
        unsigned char *fit = apr_palloc(r->pool, SRL_KEY_MAX);
        key = srl_key_fit(key, &len, fit);
    }

    /* In flight first: a request refused for concurrency takes no rate
     * permit.  One the rate limit refuses below gives its unit back when
     * r->pool goes, like any other. */
    if (c != NULL) {
        int rc = enter_concurrency(r, d, key, len);
        if (rc != DECLINED || l == NULL)
            return rc;
    }

    /* SrlExempt: decided under its range's exempt key (above). */
    const char *ex = exempt_key(r, d, l);
    if (ex != NULL && ex[0] == '\0')
        return DECLINED;
    if (ex != NULL) {
        key = ex;
        len = strlen(ex);
    }

    srl_decision dec;
    memset(&dec, 0, sizeof dec);
    uint32_t cost = d->cost != 0 ? d->cost : 1;
    uint32_t tier = request_tier(r, d, l);
    /* SrlDelay reserves under tier 0 (srl_reserve has no tier). */
    int rc = d->delay_ns != 0 && d->dry_run != 1
                 ? delay_request(r, d, l, key, len, cost, &dec)
                 : srl_acquire_tier(d->dry_run == 1 ? l->dry : l->lim, tier, key, len, cost,
                                    &dec);
    rc = check_call(r, "SrlLimit", l, rc, &dec);
    if (rc != OK)
        return rc;
    log_ban_start(r, l, tier, &dec, key, len);
    /* Permits were taken (not on_full's answer, not a dry run's would-be
     * denial): SrlRefund may give them back once the response is known. */
    if (d->refund != NULL && dec.allowed &&
        (dec.flags & (SRL_DECISION_UNTRACKED | SRL_DECISION_DEGRADED |
                      SRL_DECISION_WOULD_DENY)) == 0) {
        srl_ap_taken *t = apr_palloc(r->pool, sizeof *t);
        *t = (srl_ap_taken){l, d->refund, apr_pstrmemdup(r->pool, key, len), len, cost};
        ap_set_module_config(r->request_config, &srl_module, t);
    }
    return apply_decision(r, d, "SrlLimit", l, tier, &dec, key, len);
}

/* Log phase: SrlRefund's expression, evaluated on the final request of an
 * internal redirect chain (its status is the response's), gives the
 * permits back with srl_refund (never above the limit: srl.h). */
static int srl_log_refund(request_rec *r)
{
    const srl_ap_taken *t = ap_get_module_config(r->request_config, &srl_module);
    if (t == NULL)
        return DECLINED;
    request_rec *last = r;
    while (last->next != NULL)
        last = last->next;
    const char *err = NULL;
    int yes = ap_expr_exec(last, t->refund, &err);
    if (yes < 0) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r, "SrlRefund: cannot evaluate the "
                      "expression: %s (the permits stay taken)", err);
        return DECLINED;
    }
    if (yes == 0)
        return DECLINED;
    int rc = srl_refund(t->limiter->lim, t->key, t->len, t->cost);
    if (rc == 0)
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, "SrlRefund %s: %u permit(s) given back",
                      t->limiter->name, t->cost);
    else if (rc != SRL_ENOENT)   /* the key was evicted or reset meanwhile: nothing to give */
        ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r, "SrlRefund %s: cannot give the "
                      "permits back: %s", t->limiter->name, srl_strerror(rc));
    return DECLINED;
}

/* ------------------------------------------------------------- metrics */

static void put_request(void *ctx, const char *s, size_t n)
{
    ap_rwrite(s, (int)n, (request_rec *)ctx);
}

/* After the segments' series (rlctl's text, byte for byte): what this
 * worker's enforcing handle of each limiter (SrlLimit's, SrlDryRun Off)
 * works with, from srl_info.flags, i.e. whether lockfree=on and
 * flood_cache=on took effect, not merely whether they were asked for.
 * Every worker inherits the parent's handles, so any one of them answers
 * for all.  SrlDryRun's handle is always a dry run by construction
 * (open_limiter), so it gets no series of its own. */
static void handle_metrics(request_rec *r, const srl__metrics_seg *v, int n)
{
    const char **labels = apr_pcalloc(r->pool, sizeof *labels * (size_t)(n > 0 ? n : 1));
    uint64_t *values = apr_pcalloc(r->pool, sizeof *values * (size_t)(n > 0 ? n : 1));
    for (size_t f = 0; f < sizeof handle_flags / sizeof handle_flags[0]; f++) {
        size_t k = 0;
        for (int i = 0; i < n; i++) {
            if (!v[i].ok)
                continue;   /* srl_segment_up says why */
            labels[k] = v[i].name;
            values[k++] = (v[i].info.flags & handle_flags[f].flag) != 0;
        }
        srl__metrics_gauge(put_request, r, handle_flags[f].metric, handle_flags[f].help,
                           "segment", labels, values, k);
    }
}

static int srl_metrics_handler(request_rec *r)
{
    if (r->handler == NULL || strcmp(r->handler, "srl-metrics") != 0)
        return DECLINED;
    r->allowed |= (AP_METHOD_BIT << M_GET);
    if (r->method_number != M_GET)
        return HTTP_METHOD_NOT_ALLOWED;
    const srl_ap_registry *reg = registry_get(r->server->process->pconf, 0);
    int n = reg != NULL ? reg->limiters->nelts : 0;
    srl__metrics_seg *v = apr_pcalloc(r->pool, sizeof *v * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) {
        const srl_ap_limiter *l = APR_ARRAY_IDX(reg->limiters, i, srl_ap_limiter *);
        v[i].name = l->name[0] == '/' ? l->name : apr_pstrcat(r->pool, "/", l->name, NULL);
        int rc = l->lim == NULL ? SRL_ENOENT : srl_info_get(l->lim, &v[i].info);
        if (rc == 0)
            rc = srl_stats_get(l->lim, &v[i].stats);
        if (rc == 0)   /* srl_bans_active, as rlctl metrics counts it */
            rc = srl__metrics_count_bans(l->lim, &v[i]);
        v[i].ok = rc == 0;
        v[i].status = rc == 0 ? "ok" : "error";
        if (rc != 0)
            ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r, "srl-metrics: %s: %s", l->name,
                          srl_strerror(rc));
    }
    ap_set_content_type(r, SRL__METRICS_CONTENT_TYPE);
    if (!r->header_only) {
        srl__metrics_format(v, (size_t)n, put_request, r);
        handle_metrics(r, v, n);
    }
    return OK;
}

/* -------------------------------------------------------------- health */

/* The parent's monitor hook (about once a second): every SrlWarnInterval,
 * one warn-level line per limiter that needs the operator (the conditions
 * of rlctl info/ls).  Only the parent logs, so a busy server logs each
 * condition once per interval, not once per child; srl_stats_get reads the
 * per-bucket counters and writes nothing. */
static int srl_monitor(apr_pool_t *p, server_rec *s)
{
    (void)p;
    srl_ap_registry *reg = registry_get(s->process->pconf, 0);
    apr_time_t now = apr_time_now();
    if (reg == NULL || now - reg->warned_at < reg->warn_every)
        return DECLINED;
    reg->warned_at = now;
    for (int i = 0; i < reg->limiters->nelts; i++) {
        const srl_ap_limiter *l = APR_ARRAY_IDX(reg->limiters, i, srl_ap_limiter *);
        srl_info in;
        srl_stats st;
        /* A Redis store's stats are a round trip: the parent never waits on
         * the network (rlctl info URI shows them). */
        if (l->lim == NULL || l->redis != NULL || srl_info_get(l->lim, &in) != 0 ||
            srl_stats_get(l->lim, &st) != 0)
            continue;
        unsigned w = rlctl_warnings(&in, &st);
        char what[96];
        if (w != 0)
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                         "SrlLimiter %s: needs attention: %s (used %" APR_UINT64_T_FMT
                         " of %" APR_UINT64_T_FMT " slots, full %" APR_UINT64_T_FMT
                         ", repaired %" APR_UINT64_T_FMT ", timeouts %" APR_UINT64_T_FMT
                         "): 'rlctl info %s' says what to do",
                         l->name, rlctl_warnings_text(w, what, sizeof what),
                         (apr_uint64_t)st.used, (apr_uint64_t)in.capacity,
                         (apr_uint64_t)st.full, (apr_uint64_t)st.recovered,
                         (apr_uint64_t)st.timeouts, l->token);
    }
    return DECLINED;
}

/* ---------------------------------------------------------- the module */

static const command_rec srl_cmds[] = {
    AP_INIT_TAKE_ARGV("SrlLimiter", cmd_limiter, NULL, RSRC_CONF,
                      "NAME SPEC... (POLICY [capacity=N] [key_display=N] [on_full=allow|deny] "
                      "[tier.NAME=POLICY]... [redis=URI] ...) [policy_name=TOKEN]: declare a "
                      "host-wide limiter (the "
                      "shared-memory segment /dev/shm/NAME), or a fleet-wide one in Redis"),
    AP_INIT_TAKE1("SrlOnFull", cmd_on_full, NULL, RSRC_CONF,
                  "allow|deny: the answer of a full table for limiters without on_full="),
    AP_INIT_TAKE1("SrlLimit", cmd_apply, NULL, RSRC_CONF | ACCESS_CONF,
                  "NAME|off: apply the named limiter to this server or section"),
    AP_INIT_TAKE_ARGV("SrlTier", cmd_tier, NULL, RSRC_CONF | ACCESS_CONF,
                      "header:NAME|env:NAME|expr:EXPR [VALUE=TIER]...: the request's tier "
                      "(a tier=NAME=POLICY of its SrlLimiter; none or unknown: the policy)"),
    AP_INIT_TAKE1("SrlKey", cmd_key, NULL, RSRC_CONF | ACCESS_CONF,
                  "ip|ip/V4[,/V6]|header:NAME|env:NAME|expr:EXPRESSION: the key requests are "
                  "counted by"),
    AP_INIT_ITERATE("SrlExempt", cmd_exempt, NULL, RSRC_CONF | ACCESS_CONF,
                    "CIDR...|off: client addresses SrlLimit never refuses here (counted as "
                    "exempt)"),
    AP_INIT_TAKE1("SrlCost", cmd_cost, NULL, RSRC_CONF | ACCESS_CONF,
                  "N: permits one request takes (default 1)"),
    AP_INIT_FLAG("SrlDryRun", cmd_dry_run, NULL, RSRC_CONF | ACCESS_CONF,
                 "On: never refuse; log and set SRL_LIMITED=1 instead"),
    AP_INIT_TAKE1("SrlWarnInterval", cmd_warn_interval, NULL, RSRC_CONF,
                  "SECONDS: how often the parent logs limiters that need attention "
                  "(default 60)"),
    AP_INIT_TAKE1("SrlBanLogLevel", cmd_ban_log_level, NULL, RSRC_CONF,
                  "LEVEL|off: the level of the line a penalty= ban's start logs (key, policy, "
                  "until; default warn)"),
    AP_INIT_TAKE1("SrlDelay", cmd_delay, NULL, RSRC_CONF | ACCESS_CONF,
                  "delay a request over the limit up to this long instead of refusing it "
                  "(500ms, 2s, at most 1h; off)"),
    AP_INIT_TAKE1("SrlRefund", cmd_refund, NULL, RSRC_CONF | ACCESS_CONF,
                  "SrlRefund EXPR|off: give a request's SrlLimit permits back when the "
                  "expression holds once it is answered (e.g. \"%{REQUEST_STATUS} -lt 400\")"),
    AP_INIT_TAKE1("SrlConcurrency", cmd_apply, "concurrency", RSRC_CONF | ACCESS_CONF,
                  "NAME|off: at most the named concurrency limiter's N requests of a key "
                  "in flight at once here"),
    AP_INIT_TAKE1("SrlStatus", cmd_status, NULL, RSRC_CONF | ACCESS_CONF,
                  "CODE: the status of a refused request, 400..599 (default 429)"),
    {NULL}
};

static void srl_register_hooks(apr_pool_t *p)
{
    (void)p;
    ap_hook_check_config(srl_check_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_post_config(srl_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_child_init(srl_child_init, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_access_checker(srl_access_checker, NULL, NULL, APR_HOOK_FIRST);
    ap_hook_handler(srl_metrics_handler, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_log_transaction(srl_log_refund, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_monitor(srl_monitor, NULL, NULL, APR_HOOK_MIDDLE);
}

module AP_MODULE_DECLARE_DATA srl_module = {
    STANDARD20_MODULE_STUFF,
    create_dir,
    merge_dir,
    NULL,
    NULL,
    srl_cmds,
    srl_register_hooks,
#if defined(AP_MODULE_FLAG_ALWAYS_MERGE)
    AP_MODULE_FLAG_NONE
#endif
};
