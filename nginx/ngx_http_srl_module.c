/*
 * ngx_http_srl_module.c - host-wide rate and in-flight limits for nginx, on srl.
 *
 * What it holds: the directives, the segment lifecycle in the master and
 * the workers, the per-request decision (preaccess phase), the unit a
 * request holds (a pool cleanup), the variables and the metrics handler.
 *
 *   srl_limiter NAME SPEC...;   http: declare the segment /dev/shm/NAME
 *                      with the limiter spec SPEC (the words joined by
 *                      spaces; srl_config_parse's grammar, srl.h
 *                      CONFIGURATION TEXT); the same NAME and spec as
 *                      mod_srl's SrlLimiter or PHP's new Srl(NAME, SPEC)
 *                      is the same segment
 *   srl NAME [key=V] [cost=N|V] [tier=V] [dry_run] [delay=TIME];
 *                      http/server/location: decide each request on NAME;
 *                      several per level, all must admit (as limit_req);
 *                      delay=: one admitted within TIME is reserved and
 *                      served when its wait is over
 *   srl_concurrency NAME [key=V] [dry_run];
 *                      a unit of a concurrency:N limiter for the whole
 *                      request
 *                      key=ip/V4[,/V6]: the client address's prefix
 *                      (srl_key_ip of $remote_addr: "192.0.2.0/24")
 *   srl_exempt CIDR... | off;
 *                      http/server/location: addresses srl rules never
 *                      refuse here (address exemptions, below)
 *   srl_status CODE; srl_log_level info|notice|warn|error; srl_headers on|off;
 *   srl_ban_log_level info|notice|warn|error|off;
 *                      the line a penalty= ban's start logs (default warn)
 *   srl_metrics;       location: Prometheus text of every limiter
 *
 * Segment lifecycle.  nginx parses its configuration in the master (root),
 * for a start, for `nginx -t` and for each `nginx -s reload`.  The segments
 * are opened at the end of the http block (postconfiguration), while a
 * failure still fails the configuration cleanly: a reload that srl refuses
 * keeps the running configuration, and `nginx -t` says why and exits 1.
 * (init_module would be too late: nginx exits if it fails.)  `nginx -t`
 * opens existing segments only and creates nothing; `nginx -s SIGNAL`
 * opens nothing.  A segment the root master created is handed to the
 * worker user (the `user` directive; nginx's default user when there is
 * none), so a php-fpm pool of that user opens it; its mode stays 0600.
 * The master never takes a bucket lock: a segment that holds another
 * policy srl can change live (srl_policy_change_check) is adopted by the
 * master and changed by the first worker (init_process, after nginx
 * dropped root), keeping every key's use (SRL_CHANGE semantics).  The
 * handles belong to the cycle's pool: a reload's new cycle opens the same
 * segments again (every key keeps its state), the old cycle's close when
 * its workers are gone.  Nothing here unlinks a segment: `rlctl destroy`.
 *
 * The event loop never waits.  A decision on a segment takes at most the
 * spec's lock_timeout_ms, which defaults to NGX_HTTP_SRL_LOCK_TIMEOUT_MS
 * (2 ms) here, not the library's 1 s: a stuck lock answers on_full's
 * decision, flagged degraded, instead of stalling every connection of the
 * worker.  The Redis store (redis=) makes a network round trip per
 * decision and is refused at configuration time (a thread pool would carry
 * it; not written yet: nginx/README.md).
 *
 * Per request.  The preaccess handler (where limit_req and limit_conn run)
 * decides main requests only, once: an internal redirect clears the
 * modules' contexts, so the request's state (ngx_http_srl_ctx_t) is also
 * found through the cleanup of the request pool that carries it, and a
 * decided request is not decided again in the redirect's location.  The
 * concurrency rules run first (a request they refuse takes no rate
 * permit); a unit is given back by that same pool cleanup, which runs on
 * every way a request ends (response sent, client gone, upstream error,
 * internal redirect chain, keepalive or not).  A worker killed holding
 * units runs no cleanup: srl reclaims them (each unit records its holder).
 * A delay= request (srl_reserve) is parked on a timer of its connection
 * (delay_start, as limit_req does) and, when it fires, runs the phases
 * again from the preaccess one, where it is found decided; the
 * reservations it holds (ctx->resv) are given back by resv_refund if a
 * later rule refuses it or its pool's cleanup runs while it still waits.
 *
 * Concurrency.  A worker is one thread: the configuration is written while
 * it is parsed (master) and read-only afterwards; the request state lives
 * in its request's pool.  srl locks the key's bucket inside each call.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <grp.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "srl.h"
#include "metrics_fmt.h"

#define NGX_HTTP_SRL_LOCK_TIMEOUT_MS 2

/* One srl_limiter line and, once the http block is parsed, its handles. */
typedef struct {
    ngx_str_t name;              /* as written ("/api" or "api") */
    const char *cname;           /* the same, NUL-terminated */
    const char *token;           /* without the "/": the name in the headers */
    srl_config cfg;              /* srl_config_parse of the spec (owns its tiers) */
    srl_limits limits;           /* the policy: one limit or a compound */
    ngx_uint_t concurrency;      /* one of them is concurrency:N */
    uint32_t min_permits;        /* the least permits of its rate limits */
    uint32_t ntiers;             /* cfg.tier_count: tiers 1.. are cfg.tiers[] */
    ngx_str_t tier_header[SRL_TIERS_MAX]; /* RateLimit-Policy per tier */
    srl_limiter *lim;            /* open from postconfiguration on */
    srl_limiter *dry;            /* the same segment, SRL_CONFIG_DRY_RUN */
    ngx_uint_t change;           /* another policy is stored: a worker changes it */
    ngx_uid_t owner;             /* the worker user, or (ngx_uid_t) -1 */
    ngx_gid_t group;
    u_char *file;                /* where it was declared, for messages */
    ngx_uint_t line;
} ngx_http_srl_limiter_t;

typedef struct {
    ngx_array_t limiters;        /* ngx_http_srl_limiter_t * */
} ngx_http_srl_main_conf_t;

/* One srl or srl_concurrency line. */
typedef struct {
    ngx_http_srl_limiter_t *limiter;
    ngx_http_complex_value_t key;
    ngx_uint_t ip_prefix;        /* key=ip/V4,/V6: srl_key_ip of the address */
    unsigned v4, v6;
    ngx_http_complex_value_t *cost_cv; /* cost=$variable, else cost */
    uint32_t cost;
    ngx_http_complex_value_t *tier;
    ngx_uint_t dry_run;
    ngx_uint_t concurrency;
    ngx_msec_t delay;            /* delay=TIME: the longest wait (srl_reserve); 0: none */
} ngx_http_srl_rule_t;

typedef struct {
    ngx_array_t *rules;          /* ngx_http_srl_rule_t; NULL: inherit */
    ngx_array_t *exempt;         /* srl_exempt: srl_cidr; NGX_CONF_UNSET_PTR: inherit,
                                    NULL: off */
    ngx_uint_t status;
    ngx_uint_t log_level;
    ngx_uint_t ban_log_level;    /* srl_ban_log_level: NGX_LOG_*, or BAN_LOG_OFF */
    ngx_flag_t headers;
} ngx_http_srl_loc_conf_t;

/* $srl_status, weakest first: a request's is the strongest of its
 * decisions (one denial makes it denied). */
enum { SRL_ST_NONE = 0, SRL_ST_ALLOWED, SRL_ST_DRY_RUN, SRL_ST_UNTRACKED, SRL_ST_DEGRADED,
       SRL_ST_DENIED };

static ngx_str_t ngx_http_srl_status_names[] = {
    ngx_null_string, ngx_string("allowed"), ngx_string("dry_run"), ngx_string("untracked"),
    ngx_string("degraded"), ngx_string("denied"),
};

/* A unit one request holds. */
typedef struct {
    const ngx_http_srl_limiter_t *limiter;
    srl_limiter *lim;            /* the handle that entered: the lease's owner */
    srl_lease lease;
} ngx_http_srl_held_t;

/* A reservation a delayed request holds until it is served: given back
 * (srl_refund) if a later rule refuses it or it ends before its wait. */
typedef struct {
    srl_limiter *lim;
    u_char *key;                 /* the fitted key, in the request's pool */
    size_t len;
    uint32_t cost;
} ngx_http_srl_resv_t;

/* A main request's srl state, in its pool, carried by its cleanup. */
typedef struct {
    ngx_uint_t decided;
    ngx_msec_t delay;            /* the longest wait of its reservations (ms) */
    ngx_uint_t delaying;         /* its timer is pending: not served yet */
    ngx_uint_t nresv;
    ngx_http_srl_resv_t *resv;   /* [one per rate rule] */
    ngx_uint_t status;           /* SRL_ST_*: the strongest of its decisions */
    ngx_uint_t have_shown;       /* shown: the rate decision of the variables */
    srl_decision shown;
    const ngx_http_srl_limiter_t *shown_limiter;
    ngx_uint_t nheld;
    ngx_http_srl_held_t *held;   /* [one per concurrency rule] */
} ngx_http_srl_ctx_t;

static ngx_int_t ngx_http_srl_preconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_srl_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_srl_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_srl_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_srl_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_srl_limiter_cmd(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_srl_rule_cmd(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_srl_metrics_cmd(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_srl_init_process(ngx_cycle_t *cycle);
static char *ngx_http_srl_exempt_cmd(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ip_prefix_form(ngx_conf_t *cf, ngx_str_t *arg, ngx_http_srl_rule_t *rule);
static void resv_refund(ngx_http_srl_ctx_t *ctx, ngx_log_t *log);

static ngx_conf_enum_t ngx_http_srl_log_levels[] = {
    { ngx_string("info"), NGX_LOG_INFO },
    { ngx_string("notice"), NGX_LOG_NOTICE },
    { ngx_string("warn"), NGX_LOG_WARN },
    { ngx_string("error"), NGX_LOG_ERR },
    { ngx_null_string, 0 }
};

/* srl_ban_log_level: the levels of srl_log_level, or off. */
#define BAN_LOG_OFF 100
static ngx_conf_enum_t ngx_http_srl_ban_log_levels[] = {
    { ngx_string("info"), NGX_LOG_INFO },
    { ngx_string("notice"), NGX_LOG_NOTICE },
    { ngx_string("warn"), NGX_LOG_WARN },
    { ngx_string("error"), NGX_LOG_ERR },
    { ngx_string("off"), BAN_LOG_OFF },
    { ngx_null_string, 0 }
};

static ngx_conf_num_bounds_t ngx_http_srl_status_bounds = {
    ngx_conf_check_num_bounds, 400, 599
};

static ngx_command_t ngx_http_srl_commands[] = {

    { ngx_string("srl_limiter"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_srl_limiter_cmd,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("srl"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_srl_rule_cmd,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("srl_concurrency"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_srl_rule_cmd,
      NGX_HTTP_LOC_CONF_OFFSET,
      1,
      NULL },

    { ngx_string("srl_exempt"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_srl_exempt_cmd,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("srl_status"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_srl_loc_conf_t, status),
      &ngx_http_srl_status_bounds },

    { ngx_string("srl_log_level"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_srl_loc_conf_t, log_level),
      &ngx_http_srl_log_levels },

    { ngx_string("srl_ban_log_level"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_srl_loc_conf_t, ban_log_level),
      &ngx_http_srl_ban_log_levels },

    { ngx_string("srl_headers"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_srl_loc_conf_t, headers),
      NULL },

    { ngx_string("srl_metrics"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_srl_metrics_cmd,
      0,
      0,
      NULL },

      ngx_null_command
};

static ngx_http_module_t ngx_http_srl_module_ctx = {
    ngx_http_srl_preconfiguration,   /* preconfiguration */
    ngx_http_srl_postconfiguration,  /* postconfiguration */
    ngx_http_srl_create_main_conf,   /* create main configuration */
    NULL,                            /* init main configuration */
    NULL,                            /* create server configuration */
    NULL,                            /* merge server configuration */
    ngx_http_srl_create_loc_conf,    /* create location configuration */
    ngx_http_srl_merge_loc_conf      /* merge location configuration */
};

ngx_module_t ngx_http_srl_module = {
    NGX_MODULE_V1,
    &ngx_http_srl_module_ctx,        /* module context */
    ngx_http_srl_commands,           /* module directives */
    NGX_HTTP_MODULE,                 /* module type */
    NULL,                            /* init master */
    NULL,                            /* init module */
    ngx_http_srl_init_process,       /* init process */
    NULL,                            /* init thread */
    NULL,                            /* exit thread */
    NULL,                            /* exit process */
    NULL,                            /* exit master */
    NGX_MODULE_V1_PADDING
};

/* ------------------------------------------------------------ the spec */

/* An unsigned decimal of v[0..n) into *out, at most max: 0, or -1. */
static int
spec_number(const u_char *v, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t x = 0;
    if (n == 0 || n > 20) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9' || x > (UINT64_MAX - 9) / 10) {
            return -1;
        }
        x = x * 10 + (uint64_t) (v[i] - '0');
    }
    if (x > max) {
        return -1;
    }
    *out = x;
    return 0;
}

static void
limiter_free(void *data)
{
    srl_config_free(&((ngx_http_srl_limiter_t *) data)->cfg);
}

/* The spec, through the library's one parser of a limiter spec
 * (srl_config_parse: the policy, then capacity=, key_display=, on_full=,
 * lock_timeout_ms=, tier.NAME=POLICY, dry_run=, lockfree=, ...).  Two
 * things are nginx's own: a spec that does not set lock_timeout_ms gets
 * NGX_HTTP_SRL_LOCK_TIMEOUT_MS (the event loop never waits a second), and
 * redis= is refused (a network round trip per decision).  NGX_OK, or
 * NGX_ERROR with *at and msg[] saying where and why. */
static ngx_int_t
spec_parse(ngx_conf_t *cf, const char *spec, ngx_http_srl_limiter_t *l, size_t *at,
    char *msg, size_t msglen)
{
    srl_policy_error pe;
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }
    if (srl_config_parse(&l->cfg, spec, &pe) != 0) {
        *at = pe.offset;
        ngx_snprintf((u_char *) msg, msglen, "%s%Z", pe.message);
        return NGX_ERROR;
    }
    cln->handler = limiter_free;
    cln->data = l;
    if (srl_config_redis(&l->cfg) != NULL) {
        u_char *r = ngx_strcasestrn((u_char *) spec, "redis=", 6 - 1);
        *at = r != NULL ? (size_t) (r - (u_char *) spec) : 0;
        ngx_snprintf((u_char *) msg, msglen, "redis= is refused: the Redis store makes a "
                     "network round trip on every decision and nginx's event loop never "
                     "waits; this module does not yet run decisions in a thread pool, and "
                     "on the event loop a slow or stopped Redis would stall every "
                     "connection of the worker; use a segment (host-wide, no redis=), or "
                     "keep the fleet-wide limit in the application or mod_srl%Z");
        return NGX_ERROR;
    }
    if (ngx_strcasestrn((u_char *) spec, "lock_timeout_ms=", 16 - 1) == NULL) {
        l->cfg.lock_timeout_ms = NGX_HTTP_SRL_LOCK_TIMEOUT_MS;
    }
    if (l->cfg.limits.count > 0) {
        l->limits = l->cfg.limits;
    } else if (srl_limits_of(&l->cfg.policy, &l->limits) != 0) {
        *at = 0;
        ngx_snprintf((u_char *) msg, msglen, "the policy is not valid%Z");
        return NGX_ERROR;
    }
    l->ntiers = l->cfg.tier_count;
    return NGX_OK;
}

/* The segment's config for a handle of l. */
static void
limiter_config(const ngx_http_srl_limiter_t *l, srl_config *cfg)
{
    *cfg = l->cfg;   /* its tiers stay l->cfg's: the open calls copy them */
    /* The root master trusts the worker user's segment (it hands the ones
     * it creates to that user: hand_to_worker), and no other uid, unless
     * the spec named one (owner=UID).  srl_config_init leaves owner_uid 0
     * (root, whom srl trusts anyway), not the SRL_OWNER_SELF srl.h names as
     * the default: both mean none named. */
    if (geteuid() == 0 && l->owner != (ngx_uid_t) -1 && l->owner != 0 &&
        (cfg->owner_uid == SRL_OWNER_SELF || cfg->owner_uid == 0))
    {
        cfg->owner_uid = (uint32_t) l->owner;
    }
}

/* ---------------------------------------------------------- directives */

static char *
ngx_http_srl_limiter_cmd(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_srl_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts, spec;
    ngx_http_srl_limiter_t *l, **slot;
    char msg[512];
    size_t at = 0;
    (void) cmd;

    l = ngx_pcalloc(cf->pool, sizeof *l);
    if (l == NULL) {
        return NGX_CONF_ERROR;
    }
    l->name = value[1];
    l->cname = (const char *) value[1].data;   /* the parser NUL-terminates words */
    if (srl_name_check(l->cname) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "srl_limiter: bad name \"%V\": use 1..%ud "
                           "of [A-Za-z0-9._-], not all dots, optionally after a \"/\"",
                           &value[1], (unsigned) SRL_NAME_MAX);
        return NGX_CONF_ERROR;
    }
    l->token = l->cname[0] == '/' ? l->cname + 1 : l->cname;
    slot = mcf->limiters.elts;
    for (ngx_uint_t i = 0; i < mcf->limiters.nelts; i++) {
        const char *t = slot[i]->token;
        if (ngx_strcmp(t, l->token) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "srl_limiter %V: already declared in "
                               "%s:%ui", &value[1], slot[i]->file, slot[i]->line);
            return NGX_CONF_ERROR;
        }
    }

    spec.len = 0;
    for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
        spec.len += value[i].len + 1;
    }
    spec.data = ngx_pnalloc(cf->pool, spec.len);
    if (spec.data == NULL) {
        return NGX_CONF_ERROR;
    }
    u_char *p = spec.data;
    for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
        p = ngx_cpymem(p, value[i].data, value[i].len);
        *p++ = ' ';
    }
    spec.len--;
    spec.data[spec.len] = '\0';   /* the last ' ' */
    msg[0] = '\0';
    if (spec_parse(cf, (const char *) spec.data, l, &at, msg, sizeof msg) != NGX_OK) {
        if (msg[0] == '\0') {
            return NGX_CONF_ERROR;   /* no memory */
        }
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "srl_limiter %V: bad spec \"%V\" at byte "
                           "%uz: %s", &value[1], &spec, at, msg);
        return NGX_CONF_ERROR;
    }
    l->min_permits = UINT32_MAX;
    for (uint32_t i = 0; i < l->limits.count; i++) {
        if (l->limits.limit[i].algorithm == SRL_CONCURRENCY) {
            l->concurrency = 1;
        } else if (l->limits.limit[i].permits < l->min_permits) {
            l->min_permits = l->limits.limit[i].permits;
        }
    }
    l->file = cf->conf_file->file.name.data;
    l->line = cf->conf_file->line;
    slot = ngx_array_push(&mcf->limiters);
    if (slot == NULL) {
        return NGX_CONF_ERROR;
    }
    *slot = l;
    return NGX_CONF_OK;
}

static ngx_http_srl_limiter_t *
find_limiter(ngx_conf_t *cf, ngx_str_t *name)
{
    ngx_http_srl_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_srl_module);
    ngx_http_srl_limiter_t **l = mcf->limiters.elts;
    const char *token = (const char *) name->data;
    token += token[0] == '/';
    for (ngx_uint_t i = 0; i < mcf->limiters.nelts; i++) {
        if (ngx_strcmp(l[i]->token, token) == 0) {
            return l[i];
        }
    }
    return NULL;
}

static char *
compile_value(ngx_conf_t *cf, ngx_str_t *v, ngx_http_complex_value_t *cv)
{
    ngx_http_compile_complex_value_t ccv;
    ngx_memzero(&ccv, sizeof ccv);
    ccv.cf = cf;
    ccv.value = v;
    ccv.complex_value = cv;
    return ngx_http_compile_complex_value(&ccv) == NGX_OK ? NGX_CONF_OK : NGX_CONF_ERROR;
}

/* delay=TIME of an srl line (TIME in nginx's syntax: 500ms, 2s, 1m): the
 * longest a request the policy admits later waits before it is served
 * (srl_reserve's max_wait).  Only the algorithms srl can reserve on. */
static char *
rule_delay(ngx_conf_t *cf, ngx_command_t *cmd, const ngx_http_srl_limiter_t *l,
    ngx_str_t *arg, ngx_http_srl_rule_t *rule)
{
    ngx_str_t v = { arg->len - 6, arg->data + 6 };
    ngx_int_t ms = ngx_parse_time(&v, 0);
    if (ms == NGX_ERROR || ms <= 0 || (uint64_t) ms > SRL_WAIT_MAX_NS / 1000000) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V %V: bad delay \"%V\": give a time of "
                           "1ms..1h (500ms, 2s, 1m)", &cmd->name, &l->name, &v);
        return NGX_CONF_ERROR;
    }
    for (uint32_t i = 0; i < l->limits.count; i++) {
        srl_algorithm a = l->limits.limit[i].algorithm;
        if (a == SRL_SLIDING_LOG || a == SRL_SLIDING_COUNTER) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V %V: delay= needs a limit srl can "
                               "reserve on (token_bucket, gcra, fixed_window); %s cannot "
                               "wait: drop delay= or change the policy", &cmd->name,
                               &l->name, a == SRL_SLIDING_LOG ? "sliding_log"
                                                              : "sliding_counter");
            return NGX_CONF_ERROR;
        }
    }
    rule->delay = (ngx_msec_t) ms;
    return NGX_CONF_OK;
}

/* srl NAME [key=V] [cost=N|V] [tier=V] [dry_run] [delay=TIME];  (cmd->offset 0)
 * srl_concurrency NAME [key=V] [dry_run];          (cmd->offset 1) */
static char *
ngx_http_srl_rule_cmd(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_srl_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts, v;
    ngx_uint_t conc = cmd->offset;
    ngx_http_srl_rule_t *rule;
    ngx_uint_t have_key = 0;

    ngx_http_srl_limiter_t *l = find_limiter(cf, &value[1]);
    if (l == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V %V: no such limiter: declare it with "
                           "srl_limiter in the http block, before", &cmd->name, &value[1]);
        return NGX_CONF_ERROR;
    }
    if (l->concurrency != conc) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V %V: limiter %V has %s policy: apply "
                           "it with %s", &cmd->name, &value[1], &l->name,
                           l->concurrency ? "an in-flight (concurrency:N)" : "a rate",
                           l->concurrency ? "srl_concurrency" : "srl");
        return NGX_CONF_ERROR;
    }
    if (lcf->rules == NULL) {
        lcf->rules = ngx_array_create(cf->pool, 2, sizeof(ngx_http_srl_rule_t));
        if (lcf->rules == NULL) {
            return NGX_CONF_ERROR;
        }
    }
    rule = lcf->rules->elts;
    for (ngx_uint_t i = 0; i < lcf->rules->nelts; i++) {
        if (rule[i].limiter == l) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V %V: applied twice here",
                               &cmd->name, &value[1]);
            return NGX_CONF_ERROR;
        }
    }
    rule = ngx_array_push(lcf->rules);
    if (rule == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(rule, sizeof *rule);
    rule->limiter = l;
    rule->concurrency = conc;
    rule->cost = 1;

    for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
        if (ngx_strncmp(value[i].data, "key=ip/", 7) == 0) {
            if (ip_prefix_form(cf, &value[i], rule) != NGX_CONF_OK) {
                return NGX_CONF_ERROR;
            }
            have_key = 1;
        } else if (ngx_strncmp(value[i].data, "key=", 4) == 0) {
            v.data = value[i].data + 4;
            v.len = value[i].len - 4;
            if (compile_value(cf, &v, &rule->key) != NGX_CONF_OK) {
                return NGX_CONF_ERROR;
            }
            have_key = 1;
        } else if (!conc && ngx_strncmp(value[i].data, "cost=", 5) == 0) {
            v.data = value[i].data + 5;
            v.len = value[i].len - 5;
            if (v.len > 0 && v.data[0] == '$') {
                rule->cost_cv = ngx_palloc(cf->pool, sizeof *rule->cost_cv);
                if (rule->cost_cv == NULL || compile_value(cf, &v, rule->cost_cv) != NGX_CONF_OK) {
                    return NGX_CONF_ERROR;
                }
                continue;
            }
            uint64_t n;
            if (spec_number(v.data, v.len, UINT32_MAX, &n) != 0 || n == 0 ||
                n > l->min_permits)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V %V: cost \"%V\" must be 1..%ud "
                                   "(the least permits of its limits), or a $variable",
                                   &cmd->name, &value[1], &v, (unsigned) l->min_permits);
                return NGX_CONF_ERROR;
            }
            rule->cost = (uint32_t) n;
        } else if (!conc && ngx_strncmp(value[i].data, "tier=", 5) == 0) {
            v.data = value[i].data + 5;
            v.len = value[i].len - 5;
            rule->tier = ngx_palloc(cf->pool, sizeof *rule->tier);
            if (rule->tier == NULL || compile_value(cf, &v, rule->tier) != NGX_CONF_OK) {
                return NGX_CONF_ERROR;
            }
        } else if (ngx_strcmp(value[i].data, "dry_run") == 0) {
            rule->dry_run = 1;
        } else if (!conc && ngx_strncmp(value[i].data, "delay=", 6) == 0) {
            if (rule_delay(cf, cmd, l, &value[i], rule) != NGX_CONF_OK) {
                return NGX_CONF_ERROR;
            }
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V %V: unknown parameter \"%V\" "
                               "(known: key=$variable, key=ip/V4[,/V6]%s, dry_run)",
                               &cmd->name, &value[1],
                               &value[i], conc ? "" : ", cost=N|$variable, tier=$variable, "
                               "delay=TIME");
            return NGX_CONF_ERROR;
        }
    }
    if (rule->delay > 0 && rule->tier != NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V %V: delay= and tier= together: srl "
                           "reserves on the limiter's own policy only (no srl_reserve_tier); "
                           "drop one of them", &cmd->name, &value[1]);
        return NGX_CONF_ERROR;
    }
    if (!have_key) {
        ngx_str_t ip = ngx_string("$remote_addr");
        if (compile_value(cf, &ip, &rule->key) != NGX_CONF_OK) {
            return NGX_CONF_ERROR;
        }
    }
    return NGX_CONF_OK;
}

static void *
ngx_http_srl_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_srl_main_conf_t *mcf = ngx_pcalloc(cf->pool, sizeof *mcf);
    if (mcf == NULL ||
        ngx_array_init(&mcf->limiters, cf->pool, 4, sizeof(ngx_http_srl_limiter_t *)) != NGX_OK)
    {
        return NULL;
    }
    return mcf;
}

static void *
ngx_http_srl_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_srl_loc_conf_t *lcf = ngx_pcalloc(cf->pool, sizeof *lcf);
    if (lcf == NULL) {
        return NULL;
    }
    lcf->exempt = NGX_CONF_UNSET_PTR;
    lcf->status = NGX_CONF_UNSET_UINT;
    lcf->log_level = NGX_CONF_UNSET_UINT;
    lcf->ban_log_level = NGX_CONF_UNSET_UINT;
    lcf->headers = NGX_CONF_UNSET;
    return lcf;
}

static char *
ngx_http_srl_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_srl_loc_conf_t *prev = parent, *conf = child;
    (void) cf;
    if (conf->rules == NULL) {
        conf->rules = prev->rules;
    }
    ngx_conf_merge_ptr_value(conf->exempt, prev->exempt, NULL);
    ngx_conf_merge_uint_value(conf->status, prev->status, NGX_HTTP_TOO_MANY_REQUESTS);
    ngx_conf_merge_uint_value(conf->log_level, prev->log_level, NGX_LOG_ERR);
    ngx_conf_merge_uint_value(conf->ban_log_level, prev->ban_log_level, NGX_LOG_WARN);
    ngx_conf_merge_value(conf->headers, prev->headers, 1);
    return NGX_CONF_OK;
}

/* ---------------------------------------------------- segment lifecycle */

static void
limiters_close(void *data)
{
    ngx_array_t *a = data;
    ngx_http_srl_limiter_t **l = a->elts;
    for (ngx_uint_t i = 0; i < a->nelts; i++) {
        srl_close(l[i]->lim);   /* unmaps; the segment and its states stay */
        srl_close(l[i]->dry);
        l[i]->lim = NULL;
        l[i]->dry = NULL;
    }
}

static const char *
open_remedy(int rc)
{
    switch (rc) {
    case SRL_EMISMATCH:
        return " (the segment exists with another capacity, key_display or tier names: use "
               "another name, or remove it with `rlctl destroy NAME` while no server uses it)";
    case SRL_ESTALE:
        return " (its creator died before finishing it: `rlctl destroy NAME`)";
    case SRL_EACCES:
        return " (the segment belongs to another user than nginx's workers, or its mode was "
               "refused)";
    case SRL_ENOSPC:
        return " (the shared-memory filesystem is full: see `df /dev/shm`)";
    default:
        return "";
    }
}

/* Hand a segment the root master created to the worker user. */
static ngx_int_t
hand_to_worker(ngx_conf_t *cf, const ngx_http_srl_limiter_t *l)
{
    char shm_name[SRL_NAME_MAX + 2];
    struct stat st;
    if (geteuid() != 0 || l->owner == (ngx_uid_t) -1 || l->owner == 0) {
        return NGX_OK;
    }
    ngx_snprintf((u_char *) shm_name, sizeof shm_name, "%s%s%Z",
                 l->cname[0] == '/' ? "" : "/", l->cname);
    int fd = shm_open(shm_name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0 || fstat(fd, &st) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno, "srl_limiter %s: cannot reopen the "
                           "segment to give it to the worker user", l->cname);
        if (fd >= 0) {
            close(fd);
        }
        return NGX_ERROR;
    }
    ngx_int_t rc = NGX_OK;
    /* Only a root-owned one: srl refused any owner but root and l->owner. */
    if (st.st_uid == 0 && fchown(fd, l->owner, l->group) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno, "srl_limiter %s: cannot give the "
                           "segment to uid %ui", l->cname, (ngx_uint_t) l->owner);
        rc = NGX_ERROR;
    }
    close(fd);
    return rc;
}

/* After SRL_EMISMATCH: open the segment adopting its policy and ask srl
 * whether l's can replace it live.  0 with *seg open; else the code, and
 * why[] says what differs. */
static int
open_changeable(const ngx_http_srl_limiter_t *l, const srl_config *cfg, srl_limiter **seg,
    char *why, size_t len)
{
    int rc = srl_open_shared(l->cname, cfg, SRL_ADOPT, seg);
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

/* Open l's handles (nginx -t: check an existing segment only). */
static ngx_int_t
open_limiter(ngx_conf_t *cf, ngx_http_srl_limiter_t *l)
{
    srl_config cfg;
    char why[1024] = "";
    limiter_config(l, &cfg);
    int rc = srl_open_shared(l->cname, &cfg, ngx_test_config ? 0 : SRL_CREATE, &l->lim);
    l->change = 0;
    if (rc == SRL_EMISMATCH) {
        rc = open_changeable(l, &cfg, &l->lim, why, sizeof why);
        l->change = rc == 0;
    }
    if (ngx_test_config && rc == SRL_ENOENT) {
        return NGX_OK;   /* the start creates it */
    }
    if (rc == 0) {
        /* dry_run's handle: the same segment, this opener's flag. */
        cfg.flags |= SRL_CONFIG_DRY_RUN;
        rc = srl_open_shared(l->cname, &cfg, l->change ? SRL_ADOPT : 0, &l->dry);
    }
    if (rc == SRL_EACCES && why[0] == '\0') {
        /* the owner, the mode, the workers' user and the fix */
        char slashed[SRL_NAME_MAX + 2];
        ngx_snprintf((u_char *) slashed, sizeof slashed, "%s%s%Z",
                     l->cname[0] == '/' ? "" : "/", l->cname);
        if (srl_open_explain(slashed, &cfg, why, sizeof why) == SRL_EINVAL) {
            why[0] = '\0';
        }
    }
    if (rc != 0) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, rc == SRL_ESYS ? ngx_errno : 0,
                      "srl_limiter %s (%s:%ui): cannot open the segment: %s%s%s%s", l->cname,
                      l->file, l->line, srl_strerror(rc), open_remedy(rc),
                      why[0] != '\0' ? "; " : "", why);
        srl_close(l->lim);
        l->lim = NULL;
        return NGX_ERROR;
    }
    if (ngx_test_config) {
        return NGX_OK;
    }
    if (!l->concurrency) {
        char buf[4 * (SRL_NAME_MAX + 40)];
        const srl_limits *ls;
        for (uint32_t t = 0; t <= l->ntiers; t++) {
            ls = t == 0 ? &l->limits : &l->cfg.tiers[t - 1].limits;
            int n = srl_format_ratelimit_policies(ls, l->token, buf, sizeof buf);
            if (n < 0) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "srl_limiter %s: cannot format its "
                              "RateLimit-Policy: %s", l->cname, srl_strerror(n));
                return NGX_ERROR;
            }
            l->tier_header[t].data = ngx_pnalloc(cf->pool, (size_t) n);
            if (l->tier_header[t].data == NULL) {
                return NGX_ERROR;
            }
            ngx_memcpy(l->tier_header[t].data, buf, (size_t) n);
            l->tier_header[t].len = (size_t) n;
        }
    }
    return hand_to_worker(cf, l);
}

/* The worker user nginx will switch to (the core module's `user`, read
 * before the http block; nginx's default one when root and none given). */
static void
worker_user(ngx_conf_t *cf, ngx_uid_t *uid, ngx_gid_t *gid)
{
    ngx_core_conf_t *ccf = (ngx_core_conf_t *) ngx_get_conf(cf->cycle->conf_ctx, ngx_core_module);
    *uid = (ngx_uid_t) -1;
    *gid = (ngx_gid_t) -1;
    if (geteuid() != 0) {
        return;
    }
    if (ccf != NULL && ccf->user != (ngx_uid_t) NGX_CONF_UNSET_UINT) {
        *uid = ccf->user;
        *gid = ccf->group;
        return;
    }
    struct passwd *pw = getpwnam(NGX_USER);
    struct group *gr = getgrnam(NGX_GROUP);
    if (pw != NULL && gr != NULL) {
        *uid = pw->pw_uid;
        *gid = gr->gr_gid;
    }
}

static ngx_int_t
ngx_http_srl_open_all(ngx_conf_t *cf, ngx_http_srl_main_conf_t *mcf)
{
    ngx_http_srl_limiter_t **l = mcf->limiters.elts;
    ngx_uid_t uid;
    ngx_gid_t gid;
    ngx_pool_cleanup_t *cln;

    if (ngx_process == NGX_PROCESS_SIGNALLER || mcf->limiters.nelts == 0) {
        return NGX_OK;
    }
    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }
    cln->handler = limiters_close;
    cln->data = &mcf->limiters;
    worker_user(cf, &uid, &gid);
    for (ngx_uint_t i = 0; i < mcf->limiters.nelts; i++) {
        l[i]->owner = uid;
        l[i]->group = gid;
        if (open_limiter(cf, l[i]) != NGX_OK) {
            return NGX_ERROR;
        }
    }
    if (ngx_test_config) {
        limiters_close(&mcf->limiters);   /* -t only checked them */
    }
    return NGX_OK;
}

/* A worker, after nginx dropped root: change the segments whose stored
 * policy differs (the master adopted them).  The first worker changes each
 * (every key keeps its use: srl_policy_change); the others find it equal. */
static ngx_int_t
ngx_http_srl_init_process(ngx_cycle_t *cycle)
{
    ngx_http_srl_main_conf_t *mcf = ngx_http_cycle_get_module_main_conf(cycle,
                                                                      ngx_http_srl_module);
    if (mcf == NULL) {
        return NGX_OK;
    }
    ngx_http_srl_limiter_t **l = mcf->limiters.elts;
    for (ngx_uint_t i = 0; i < mcf->limiters.nelts; i++) {
        srl_config cfg;
        char why[1024] = "";
        if (!l[i]->change || l[i]->lim == NULL) {
            continue;
        }
        limiter_config(l[i], &cfg);
        int rc = srl_policy_change(l[i]->lim, &cfg, why, sizeof why);
        if (rc < 0) {
            ngx_log_error(NGX_LOG_ERR, cycle->log, 0, "srl_limiter %s (%s:%ui): cannot change "
                          "the segment's policy: %s%s%s", l[i]->cname, l[i]->file,
                          l[i]->line, srl_strerror(rc), why[0] ? "; " : "", why);
            continue;
        }
        l[i]->change = 0;
        if (rc == 1) {
            ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0, "srl_limiter %s: policy changed; "
                          "every key keeps its use", l[i]->cname);
        }
    }
    return NGX_OK;
}

/* ------------------------------------------------------------- requests */

static void
ngx_http_srl_cleanup(void *data)
{
    ngx_http_srl_ctx_t *ctx = data;
    for (ngx_uint_t i = 0; i < ctx->nheld; i++) {
        ngx_http_srl_held_t *h = &ctx->held[i];
        int rc = srl_leave(h->lim, &h->lease);
        if (rc == SRL_ENOENT) {
            ngx_log_error(NGX_LOG_INFO, ngx_cycle->log, 0, "srl_concurrency %s: the unit was "
                          "reclaimed before the request ended (held longer than max_hold)",
                          h->limiter->cname);
        } else if (rc != 0) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "srl_concurrency %s: cannot give "
                          "the unit back: %s (srl reclaims it once this worker is gone)",
                          h->limiter->cname, srl_strerror(rc));
        }
    }
    ctx->nheld = 0;
    if (ctx->delaying) {
        resv_refund(ctx, ngx_cycle->log);   /* ended before its wait: never served */
    }
}

/* The main request's state: its module context, or after an internal
 * redirect (which clears contexts) the one its pool's cleanup carries. */
static ngx_http_srl_ctx_t *
get_ctx(ngx_http_request_t *r)
{
    ngx_http_request_t *m = r->main;
    ngx_http_srl_ctx_t *ctx = ngx_http_get_module_ctx(m, ngx_http_srl_module);
    if (ctx != NULL) {
        return ctx;
    }
    for (ngx_pool_cleanup_t *c = m->pool->cleanup; c != NULL; c = c->next) {
        if (c->handler == ngx_http_srl_cleanup) {
            ctx = c->data;
            ngx_http_set_ctx(m, ctx, ngx_http_srl_module);
            return ctx;
        }
    }
    return NULL;
}

static ngx_int_t
add_header(ngx_http_request_t *r, const char *name, size_t nlen, const char *v, size_t vlen)
{
    ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    h->value.data = ngx_pnalloc(r->pool, vlen);
    if (h->value.data == NULL) {
        h->hash = 0;
        return NGX_ERROR;
    }
    ngx_memcpy(h->value.data, v, vlen);
    h->value.len = vlen;
    h->key.data = (u_char *) name;
    h->key.len = nlen;
    h->hash = 1;
#if (nginx_version >= 1023000)
    h->next = NULL;
#endif
    return NGX_OK;
}

/* RateLimit-Policy and RateLimit of a rate decision; Retry-After of any
 * refusal (a concurrency one has only that: a quota per window is not what
 * it is). */
static ngx_int_t
set_headers(ngx_http_request_t *r, const ngx_http_srl_limiter_t *l, uint32_t tier,
    const srl_decision *dec, ngx_uint_t refused)
{
    char buf[SRL_NAME_MAX + 64];
    int n;
    if (!l->concurrency) {
        const srl_limits *ls = tier == 0 ? &l->limits : &l->cfg.tiers[tier - 1].limits;
        if (add_header(r, "RateLimit-Policy", 16, (const char *) l->tier_header[tier].data,
                       l->tier_header[tier].len) != NGX_OK)
        {
            return NGX_ERROR;
        }
        n = srl_format_ratelimit_binding(ls, dec, l->token, buf, sizeof buf);
        if (n >= 0 && add_header(r, "RateLimit", 9, buf, (size_t) n) != NGX_OK) {
            return NGX_ERROR;
        }
    }
    if (refused) {
        n = srl_format_retry_after(dec, buf, sizeof buf);
        if (n >= 0 && add_header(r, "Retry-After", 11, buf, (size_t) n) != NGX_OK) {
            return NGX_ERROR;
        }
    }
    return NGX_OK;
}

/* rule's tier for r: the value names it; 0 when empty or unknown. */
static uint32_t
rule_tier(ngx_http_request_t *r, const ngx_http_srl_rule_t *rule)
{
    ngx_str_t v;
    char name[SRL_TIER_NAME_MAX + 1];
    if (rule->tier == NULL || rule->limiter->ntiers == 0 ||
        ngx_http_complex_value(r, rule->tier, &v) != NGX_OK ||
        v.len == 0 || v.len > SRL_TIER_NAME_MAX)
    {
        return 0;
    }
    ngx_memcpy(name, v.data, v.len);
    name[v.len] = '\0';
    int t = srl_tier_find(rule->limiter->lim, name);
    return t > 0 ? (uint32_t) t : 0;
}

/* rule's cost for r, or 0 with the reason logged. */
static uint32_t
rule_cost(ngx_http_request_t *r, const ngx_http_srl_rule_t *rule)
{
    ngx_str_t v;
    uint64_t n;
    if (rule->cost_cv == NULL) {
        return rule->cost;
    }
    if (ngx_http_complex_value(r, rule->cost_cv, &v) != NGX_OK) {
        return 0;
    }
    if (spec_number(v.data, v.len, rule->limiter->min_permits, &n) != 0 || n == 0) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "srl %s: cost \"%V\" is not "
                      "1..%ud (the least permits of its limits)", rule->limiter->cname, &v,
                      (unsigned) rule->limiter->min_permits);
        return 0;
    }
    return (uint32_t) n;
}

static ngx_uint_t
status_of(const srl_decision *dec, ngx_uint_t dry_run)
{
    if (dec->flags & SRL_DECISION_DEGRADED) {
        return SRL_ST_DEGRADED;
    }
    if (dec->flags & SRL_DECISION_UNTRACKED) {
        return dec->allowed ? SRL_ST_UNTRACKED : SRL_ST_DENIED;
    }
    if (dry_run && (dec->flags & SRL_DECISION_WOULD_DENY)) {
        return SRL_ST_DRY_RUN;
    }
    return dec->allowed ? SRL_ST_ALLOWED : SRL_ST_DENIED;
}

/* ------------------------------------------- address keys, exemptions
 * key=ip/V4[,/V6]: the key is the client address's prefix, written by
 * srl_key_ip ("192.0.2.0/24", "2001:db8::/64"; IPv4-mapped IPv6 counts as
 * IPv4), the same bytes mod_srl, PHP and Python make.  srl_exempt CIDR...:
 * ranges parsed by srl_cidr_parse, matched by srl_cidr_match against
 * $remote_addr (so the realip module's trusted proxies decide which
 * address that is).  An exempt request is decided by each srl rule under
 * its range's key ("127.0.0.0/8"), which the request first marks exempt in
 * the segment (srl_key_exempt: idempotent, one bucket lock): the library
 * counts it (srl_stats.allowed and .exempt, metrics), never refuses it, and
 * a ban by hand of the range's key still wins.  The client's own key is
 * untouched, so removing srl_exempt leaves nothing that decides a request.
 * srl_concurrency rules are not affected. */

/* key=ip/V4 or key=ip/V4,/V6 (srl_key_ip_form: V6 64 when not given). */
static char *
ip_prefix_form(ngx_conf_t *cf, ngx_str_t *arg, ngx_http_srl_rule_t *rule)
{
    unsigned v4, v6;
    if (srl_key_ip_form((const char *) arg->data + 6, arg->len - 6, &v4, &v6) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "srl: \"%V\": an address prefix key is "
                           "key=ip/V4 or key=ip/V4,/V6, V4 0..32 and V6 0..128 in decimal "
                           "(e.g. key=ip/32,/64)", arg);
        return NGX_CONF_ERROR;
    }
    rule->ip_prefix = 1;
    rule->v4 = v4;
    rule->v6 = v6;
    return NGX_CONF_OK;
}

/* srl_exempt CIDR... | off; */
static char *
ngx_http_srl_exempt_cmd(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_srl_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts;
    (void) cmd;
    if (lcf->exempt != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }
    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "off") == 0) {
        lcf->exempt = NULL;
        return NGX_CONF_OK;
    }
    lcf->exempt = ngx_array_create(cf->pool, cf->args->nelts - 1, sizeof(srl_cidr));
    if (lcf->exempt == NULL) {
        return NGX_CONF_ERROR;
    }
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        srl_cidr *c = ngx_array_push(lcf->exempt);
        if (c == NULL) {
            return NGX_CONF_ERROR;
        }
        /* value[i] is NUL-terminated (nginx's parser ends every word so). */
        if (srl_cidr_parse((const char *) value[i].data, c) != 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "srl_exempt \"%V\": not an address "
                               "range; give ADDRESS or ADDRESS/PREFIX (10.0.0.0/8, "
                               "2001:db8::/32, ::1), the address with no bits set past the "
                               "prefix", &value[i]);
            return NGX_CONF_ERROR;
        }
    }
    return NGX_CONF_OK;
}

/* $remote_addr as a C string in buf (64 bytes); 0, or -1 if it is longer
 * (a unix socket's "unix:..." is short and simply matches no range). */
static int
addr_cstr(ngx_http_request_t *r, char buf[64])
{
    ngx_str_t *a = &r->connection->addr_text;
    if (a->len >= 64) {
        return -1;
    }
    ngx_memcpy(buf, a->data, a->len);
    buf[a->len] = '\0';
    return 0;
}

/* The request's key for rule: an srl_exempt range's (marked exempt), the
 * address prefix's, or the key= value.  NGX_OK (key->len 0: not limited),
 * or NGX_HTTP_INTERNAL_SERVER_ERROR. */
static ngx_int_t
rule_key(ngx_http_request_t *r, ngx_http_srl_loc_conf_t *lcf, const ngx_http_srl_rule_t *rule,
    ngx_str_t *key)
{
    char addr[64];
    const ngx_http_srl_limiter_t *l = rule->limiter;
    if (!rule->concurrency && lcf->exempt != NULL && addr_cstr(r, addr) == 0) {
        const srl_cidr *c = lcf->exempt->elts;
        for (ngx_uint_t i = 0; i < lcf->exempt->nelts; i++) {
            if (srl_cidr_match(&c[i], addr) != 1) {
                continue;
            }
            u_char *buf = ngx_pnalloc(r->pool, SRL_KEY_IP_MAX);
            int n = buf != NULL ? srl_cidr_format(&c[i], (char *) buf, SRL_KEY_IP_MAX) : -1;
            if (n <= 0) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
            int rc = srl_key_exempt(l->lim, buf, (size_t) n, 1);
            if (rc != 0) {
                ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "srl_exempt %s on %s: %s; "
                              "the request passes uncounted", buf, l->cname, srl_strerror(rc));
                key->len = 0;
                return NGX_OK;
            }
            key->data = buf;
            key->len = (size_t) n;
            return NGX_OK;
        }
    }
    if (rule->ip_prefix) {
        u_char *buf = ngx_pnalloc(r->pool, SRL_KEY_IP_MAX);
        int n = -1;
        if (buf == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (addr_cstr(r, addr) == 0) {
            n = srl_key_ip(addr, rule->v4, rule->v6, (char *) buf, SRL_KEY_IP_MAX);
        }
        if (n <= 0) {
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "srl %s: key=ip/%ud,/%ud: "
                          "client address \"%V\" is not an IPv4 or IPv6 address; the request "
                          "is not limited", l->cname, rule->v4, rule->v6,
                          &r->connection->addr_text);
            key->len = 0;
            return NGX_OK;
        }
        key->data = buf;
        key->len = (size_t) n;
        return NGX_OK;
    }
    if (ngx_http_complex_value(r, (ngx_http_complex_value_t *) &rule->key, key) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    return NGX_OK;
}

/* A decision that started a penalty= ban (one per ban, SRL_DECISION_BAN_STARTED):
 * one line at srl_ban_log_level with the key (bytes outside printable ASCII,
 * '"' and '\\' as \\xNN), the policy and until when (UTC: now plus the
 * decision's retry_after, rounded up to the second). */
static void
log_ban_start(ngx_http_request_t *r, const ngx_http_srl_loc_conf_t *lcf,
    const ngx_http_srl_limiter_t *l, uint32_t tier, const srl_decision *dec,
    const ngx_str_t *key)
{
    if (!(dec->flags & SRL_DECISION_BAN_STARTED) || lcf->ban_log_level == BAN_LOG_OFF) {
        return;
    }
    const srl_limits *ls = tier == 0 ? &l->limits : &l->cfg.tiers[tier - 1].limits;
    char policy[SRL_LIMITS_TEXT_MAX];
    if (srl_limits_format(ls, policy, sizeof policy) < 0) {
        ngx_cpystrn((u_char *) policy, (u_char *) "?", sizeof policy);
    }
    u_char *shown = ngx_pnalloc(r->pool, key->len * 4 + 1), *p = shown;
    if (shown == NULL) {
        return;
    }
    for (size_t i = 0; i < key->len; i++) {
        u_char c = key->data[i];
        p = c < 0x20 || c > 0x7e || c == '"' || c == '\\' ? ngx_sprintf(p, "\\x%02xd", c)
                                                            : (*p = c, p + 1);
    }
    ngx_time_t *tp = ngx_timeofday();
    uint64_t end_ns = (uint64_t) tp->sec * 1000000000 + (uint64_t) tp->msec * 1000000 +
                      dec->retry_after_ns;
    ngx_tm_t tm;
    ngx_gmtime((time_t) ((end_ns + 999999999) / 1000000000), &tm);
    ngx_log_error(lcf->ban_log_level, r->connection->log, 0, "srl %s: ban started: key "
                  "\"%*s\", policy %s, until %4d-%02d-%02dT%02d:%02d:%02dZ", l->cname,
                  (size_t) (p - shown), shown, policy, tm.ngx_tm_year, tm.ngx_tm_mon,
                  tm.ngx_tm_mday, tm.ngx_tm_hour, tm.ngx_tm_min, tm.ngx_tm_sec);
}

/* srl_reserve for a delay= rule: a request the policy admits within the
 * rule's delay takes its permits now for the instant now + wait_ns; r is
 * then served once its longest wait has passed (delay_start), and the
 * reservation is recorded so that it can be given back if r is not served
 * (resv_refund).  A dry run reserves too (what would happen) but never
 * waits. */
static int
reserve(ngx_http_request_t *r, ngx_http_srl_ctx_t *ctx, const ngx_http_srl_rule_t *rule,
    srl_limiter *lim, const void *k, size_t len, uint32_t cost, srl_decision *dec)
{
    int rc = srl_reserve(lim, k, len, cost, (uint64_t) rule->delay * 1000000u, dec);
    if (rc != 0 || !dec->allowed || dec->wait_ns == 0 || rule->dry_run) {
        return rc;
    }
    ngx_http_srl_resv_t *v = &ctx->resv[ctx->nresv];
    v->key = ngx_pnalloc(r->pool, len);
    if (v->key == NULL) {
        srl_refund(lim, k, len, cost);
        return SRL_ENOMEM;
    }
    ngx_memcpy(v->key, k, len);
    v->lim = lim;
    v->len = len;
    v->cost = cost;
    ctx->nresv++;
    ngx_msec_t ms = (ngx_msec_t) ((dec->wait_ns + 999999) / 1000000);
    if (ms > ctx->delay) {
        ctx->delay = ms;
    }
    return 0;
}

/* Give back the reservations of a request that will not be served. */
static void
resv_refund(ngx_http_srl_ctx_t *ctx, ngx_log_t *log)
{
    for (ngx_uint_t i = 0; i < ctx->nresv; i++) {
        ngx_http_srl_resv_t *v = &ctx->resv[i];
        int rc = srl_refund(v->lim, v->key, v->len, v->cost);
        if (rc != 0) {
            ngx_log_error(NGX_LOG_WARN, log, 0, "srl: cannot give back a delayed request's "
                          "reservation: %s", srl_strerror(rc));
        }
    }
    ctx->nresv = 0;
    ctx->delaying = 0;
}

/* The write handler of a delayed request (as limit_req's): until its timer
 * fires, keep waiting; then run the phases again from the preaccess one,
 * where the decided request goes on. */
static void
delay_handler(ngx_http_request_t *r)
{
    ngx_event_t *wev = r->connection->write;
    if (wev->delayed) {
        if (ngx_handle_write_event(wev, 0) != NGX_OK) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        }
        return;
    }
    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    ngx_http_srl_ctx_t *ctx = get_ctx(r);
    if (ctx != NULL) {
        ctx->delaying = 0;   /* served: the reservations are used */
        ctx->nresv = 0;
    }
    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}

/* Park r for ctx->delay ms on a timer of its connection: the worker goes
 * on serving others; a client that goes away meanwhile ends r
 * (ngx_http_test_reading), and the pool cleanup gives the reservations
 * back. */
static ngx_int_t
delay_start(ngx_http_request_t *r, ngx_http_srl_ctx_t *ctx)
{
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "srl: delaying %M ms",
                   ctx->delay);
    ctx->delaying = 1;
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = delay_handler;
    r->connection->write->delayed = 1;
    ngx_add_timer(r->connection->write, ctx->delay);
    return NGX_AGAIN;
}

/* One rule's decision for r: NGX_DECLINED (admitted, go on), the refusal's
 * status, or NGX_HTTP_INTERNAL_SERVER_ERROR. */
static ngx_int_t
decide(ngx_http_request_t *r, ngx_http_srl_loc_conf_t *lcf, ngx_http_srl_ctx_t *ctx,
    const ngx_http_srl_rule_t *rule)
{
    const ngx_http_srl_limiter_t *l = rule->limiter;
    srl_limiter *lim = rule->dry_run ? l->dry : l->lim;
    unsigned char fit[SRL_KEY_MAX];
    ngx_str_t key;
    srl_decision dec;
    uint32_t tier = 0;
    int rc;

    if (lim == NULL) {
        return NGX_DECLINED;   /* not opened (cannot happen past the configuration) */
    }
    ngx_int_t krc = rule_key(r, lcf, rule, &key);
    if (krc != NGX_OK) {
        return krc;
    }
    if (key.len == 0) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "srl %s: no key, not limited", l->cname);
        return NGX_DECLINED;
    }
    size_t len = key.len;
    const void *k = srl_key_fit(key.data, &len, fit);
    ngx_memzero(&dec, sizeof dec);
    if (rule->concurrency) {
        ngx_http_srl_held_t *h = &ctx->held[ctx->nheld];
        ngx_memzero(h, sizeof *h);
        rc = srl_enter(lim, k, len, &h->lease, &dec);
        if (rc == 0 && h->lease.gen != 0) {
            h->limiter = l;
            h->lim = lim;
            ctx->nheld++;
        }
    } else {
        uint32_t cost = rule_cost(r, rule);
        if (cost == 0) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (rule->delay > 0) {
            rc = reserve(r, ctx, rule, lim, k, len, cost, &dec);
        } else {
            tier = rule_tier(r, rule);
            rc = srl_acquire_tier(lim, tier, k, len, cost, &dec);
        }
    }
    if (rc != 0 && !(dec.flags & SRL_DECISION_DEGRADED)) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "srl %s: %s", l->cname,
                      srl_strerror(rc));
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (rc != 0) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "srl %s: %s; decided by on_full "
                      "(%s)", l->cname, srl_strerror(rc), dec.allowed ? "allowed" : "denied");
    }
    log_ban_start(r, lcf, l, tier, &dec, &key);
    ngx_uint_t st = status_of(&dec, rule->dry_run);
    if (st > ctx->status) {
        ctx->status = st;
    }
    ngx_uint_t refused = !dec.allowed || (dec.flags & SRL_DECISION_WOULD_DENY);
    if (!rule->concurrency &&
        (!ctx->have_shown || refused || dec.remaining < ctx->shown.remaining))
    {
        ctx->have_shown = 1;
        ctx->shown = dec;
        ctx->shown_limiter = l;
    }
    if (rule->dry_run) {
        if (refused) {
            ngx_log_error(lcf->log_level, r->connection->log, 0, "srl %s: dry run: would "
                          "answer %ui for key \"%V\"", l->cname, lcf->status, &key);
        }
        return NGX_DECLINED;
    }
    if (lcf->headers && set_headers(r, l, tier, &dec, refused) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (dec.allowed) {
        return NGX_DECLINED;
    }
    ngx_log_error(lcf->log_level, r->connection->log, 0, "srl %s: %ui for key \"%V\"%s",
                  l->cname, lcf->status, &key,
                  rule->concurrency ? " (all units in flight)" : "");
    return (ngx_int_t) lcf->status;
}

static ngx_int_t
ngx_http_srl_handler(ngx_http_request_t *r)
{
    ngx_http_srl_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_srl_module);
    ngx_http_srl_ctx_t *ctx;
    ngx_pool_cleanup_t *cln;

    if (r != r->main || lcf->rules == NULL) {
        return NGX_DECLINED;   /* a subrequest rides on its main request's decision */
    }
    ctx = get_ctx(r);
    if (ctx != NULL && ctx->decided) {
        return NGX_DECLINED;   /* an internal redirect: decided in the first location */
    }
    /* The cleanup first: a unit entered below is given back however the
     * request ends, even if it ends with this handler's error. */
    cln = ngx_pool_cleanup_add(r->pool, sizeof(ngx_http_srl_ctx_t));
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx = cln->data;
    ngx_memzero(ctx, sizeof *ctx);
    ctx->held = ngx_pcalloc(r->pool, sizeof(ngx_http_srl_held_t) * lcf->rules->nelts);
    ctx->resv = ngx_pcalloc(r->pool, sizeof(ngx_http_srl_resv_t) * lcf->rules->nelts);
    if (ctx->held == NULL || ctx->resv == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    cln->handler = ngx_http_srl_cleanup;
    ngx_http_set_ctx(r, ctx, ngx_http_srl_module);
    ctx->decided = 1;

    /* In flight first: a request refused for concurrency takes no permit. */
    ngx_http_srl_rule_t *rule = lcf->rules->elts;
    for (ngx_uint_t pass = 0; pass < 2; pass++) {
        for (ngx_uint_t i = 0; i < lcf->rules->nelts; i++) {
            if (rule[i].concurrency != (pass == 0)) {
                continue;
            }
            ngx_int_t rc = decide(r, lcf, ctx, &rule[i]);
            if (rc != NGX_DECLINED) {
                resv_refund(ctx, r->connection->log);
                return rc;   /* the cleanup gives back the units entered */
            }
        }
    }
    return ctx->delay > 0 ? delay_start(r, ctx) : NGX_DECLINED;
}

/* ------------------------------------------------------------ variables */

static ngx_int_t
var_set(ngx_http_request_t *r, ngx_http_variable_value_t *v, const u_char *s, size_t n)
{
    u_char *p = ngx_pnalloc(r->pool, n);
    if (p == NULL) {
        return NGX_ERROR;
    }
    ngx_memcpy(p, s, n);
    v->data = p;
    v->len = n;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    return NGX_OK;
}

/* data: 0 $srl_status, 1 $srl_remaining, 2 $srl_retry_after, 3 $srl_binding,
 * 4 $srl_delay */
static ngx_int_t
ngx_http_srl_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_http_srl_ctx_t *ctx = get_ctx(r);
    u_char buf[SRL_NAME_MAX + 32];
    if (ctx == NULL || ctx->status == SRL_ST_NONE ||
        (data != 0 && !ctx->have_shown))
    {
        v->not_found = 1;
        return NGX_OK;
    }
    switch (data) {
    case 4:
        return var_set(r, v, buf, (size_t) (ngx_sprintf(buf, "%M", ctx->delay) - buf));
    case 0:
        return var_set(r, v, ngx_http_srl_status_names[ctx->status].data,
                       ngx_http_srl_status_names[ctx->status].len);
    case 1:
        return var_set(r, v, buf, (size_t) (ngx_sprintf(buf, "%ud", ctx->shown.remaining) - buf));
    case 2: {
        int n = srl_format_retry_after(&ctx->shown, (char *) buf, sizeof buf);
        return n < 0 ? NGX_ERROR : var_set(r, v, buf, (size_t) n);
    }
    default: {
        const ngx_http_srl_limiter_t *l = ctx->shown_limiter;
        u_char *e = l->limits.count > 1
                        ? ngx_sprintf(buf, "%s.%ud", l->token, (unsigned) ctx->shown.binding)
                        : ngx_sprintf(buf, "%s", l->token);
        return var_set(r, v, buf, (size_t) (e - buf));
    }
    }
}

static ngx_int_t
ngx_http_srl_preconfiguration(ngx_conf_t *cf)
{
    static ngx_str_t names[] = { ngx_string("srl_status"), ngx_string("srl_remaining"),
                                 ngx_string("srl_retry_after"), ngx_string("srl_binding"),
                                 ngx_string("srl_delay") };
    for (uintptr_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ngx_http_variable_t *var = ngx_http_add_variable(cf, &names[i],
                                                         NGX_HTTP_VAR_NOCACHEABLE);
        if (var == NULL) {
            return NGX_ERROR;
        }
        var->get_handler = ngx_http_srl_variable;
        var->data = i;
    }
    return NGX_OK;
}

static ngx_int_t
ngx_http_srl_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    ngx_http_srl_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_srl_module);
    ngx_http_handler_pt *h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_srl_handler;
    return ngx_http_srl_open_all(cf, mcf);
}

/* -------------------------------------------------------------- metrics */

typedef struct {
    ngx_http_request_t *r;
    ngx_chain_t *first, **last;
    ngx_buf_t *b;
    ngx_int_t failed;
} metrics_out_t;

static void
metrics_put(void *data, const char *s, size_t n)
{
    metrics_out_t *o = data;
    if (o->failed) {
        return;
    }
    if (o->b == NULL || (size_t) (o->b->end - o->b->last) < n) {
        ngx_chain_t *cl = ngx_alloc_chain_link(o->r->pool);
        o->b = ngx_create_temp_buf(o->r->pool, n > 8192 ? n : 8192);
        if (cl == NULL || o->b == NULL) {
            o->failed = 1;
            return;
        }
        cl->buf = o->b;
        cl->next = NULL;
        *o->last = cl;
        o->last = &cl->next;
    }
    o->b->last = ngx_cpymem(o->b->last, s, n);
}

static ngx_int_t
ngx_http_srl_metrics_handler(ngx_http_request_t *r)
{
    static ngx_str_t type = ngx_string(SRL__METRICS_CONTENT_TYPE);
    ngx_http_srl_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_srl_module);
    ngx_http_srl_limiter_t **l = mcf->limiters.elts;
    metrics_out_t o;
    ngx_int_t rc;

    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }
    if (ngx_http_discard_request_body(r) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    srl__metrics_seg *v = ngx_pcalloc(r->pool, sizeof *v * (mcf->limiters.nelts + 1));
    if (v == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    for (ngx_uint_t i = 0; i < mcf->limiters.nelts; i++) {
        u_char *name = ngx_pnalloc(r->pool, l[i]->name.len + 2);
        if (name == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ngx_sprintf(name, "%s%s%Z", l[i]->cname[0] == '/' ? "" : "/", l[i]->cname);
        v[i].name = (const char *) name;
        int e = l[i]->lim == NULL ? SRL_ENOENT : srl_info_get(l[i]->lim, &v[i].info);
        if (e == 0) {
            e = srl_stats_get(l[i]->lim, &v[i].stats);
        }
        if (e == 0) {   /* srl_bans_active, as rlctl metrics counts it */
            e = srl__metrics_count_bans(l[i]->lim, &v[i]);
        }
        v[i].ok = e == 0;
        v[i].status = e == 0 ? "ok" : "error";
        if (e != 0) {
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "srl_metrics: %s: %s",
                          l[i]->cname, srl_strerror(e));
        }
    }
    ngx_memzero(&o, sizeof o);
    o.r = r;
    o.last = &o.first;
    srl__metrics_format(v, mcf->limiters.nelts, metrics_put, &o);
    if (o.failed) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    off_t total = 0;
    for (ngx_chain_t *cl = o.first; cl != NULL; cl = cl->next) {
        total += cl->buf->last - cl->buf->pos;
        if (cl->next == NULL) {
            cl->buf->last_buf = 1;
            cl->buf->last_in_chain = 1;
        }
    }
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = total;
    r->headers_out.content_type = type;
    r->headers_out.content_type_len = type.len;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only || o.first == NULL) {
        return rc;
    }
    return ngx_http_output_filter(r, o.first);
}

static char *
ngx_http_srl_metrics_cmd(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    (void) cmd;
    (void) conf;
    clcf->handler = ngx_http_srl_metrics_handler;
    return NGX_CONF_OK;
}
