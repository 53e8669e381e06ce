/*
 * config.c - the configuration text: srl_config_parse, srl_config_set,
 * srl_config_format, srl_config_free, srl_config_redis, and the words each
 * binding uses for an option (srl_binding_word).
 *
 * Every option is one row of `fields` (name, slot function, offset in
 * srl_config, bounds, where it applies, what a value must be): parse splits
 * the text into words and hands each NAME=VALUE to the row's slot, set hands
 * one to it directly, format walks the rows.  A new option is one row.
 *
 * Invariants:
 *   - A config written here holds its policy canonical (srl__limits_canonical):
 *     one limit in cfg->policy (limits.count 0), a compound in cfg->limits;
 *     so parse(format(c)) == c field for field.
 *   - cfg->tiers is NULL or points at a struct store (malloc'd, owned by the
 *     config, freed by srl_config_free): tiers first, so the pointer to the
 *     tiers is the pointer to the block.  Nothing else is ever freed.  Every
 *     store is listed in `stores` (under stores_mu, the file's one lock)
 *     while it lives: the fallback is read only from a listed block.
 *   - A refused parse or set leaves *cfg as it was (work is done on a copy).
 *   - Every message quotes the text through srl__quote (no control bytes).
 * Pure functions over their arguments (and malloc, and the list of stores
 * under its mutex): safe from any thread.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compound.h"
#include "config.h"

/* The owned part of a parsed config: what cfg->tiers points at. */
struct store {
    srl_tier tiers[SRL_TIERS_MAX - 1];
    char redis[SRL_CONFIG_URI_MAX + 1];   /* "" when not given */
    srl_limits fallback;                  /* count 0 when not given */
};

/* Where errors go: offsets are counted from base (the value's place in the spec). */
struct cerr {
    srl_policy_error *e;
    size_t base;
    int named;   /* a spec's message names its option; srl_config_set's caller knows it */
};

__attribute__((format(printf, 4, 5)))
static int fail(struct cerr *ce, size_t off, size_t len, const char *fmt, ...)
{
    if (ce->e != NULL) {
        memset(ce->e, 0, sizeof *ce->e);
        va_list ap;
        va_start(ap, fmt);
        srl__perr_vset(ce->e, ce->base + off, len, fmt, ap);
        va_end(ap);
    }
    return SRL_EPOLICY;
}

struct field;
typedef int (*slot_fn)(srl_config *c, const struct field *f, const char *v, size_t n,
                       const char *sub, struct cerr *ce);
typedef int (*show_fn)(const srl_config *c, const struct field *f, char *buf, size_t len);


struct field {
    const char *name;   /* "tier." is a prefix: tier.NAME */
    slot_fn set;
    show_fn show;       /* writes " name=value" if not the default, else nothing */
    size_t off;
    uint64_t min, max;  /* numbers; a flag's bit in min */
    const char *no_redis; /* a segment's option only: why a Redis store refuses it */
    const char *expect; /* what a value must be, after "expected " or "NAME must be " */
};

/* ------------------------------------------------------------ words */

/* "on" "yes" "true" "1" / "off" "no" "false" "0", any case: 1, 0, or -1. */
static int boolean(const char *v, size_t n)
{
    static const char *const yes[] = {"on", "yes", "true", "1"};
    static const char *const no[] = {"off", "no", "false", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strlen(yes[i]) == n && strncasecmp(v, yes[i], n) == 0)
            return 1;
        if (strlen(no[i]) == n && strncasecmp(v, no[i], n) == 0)
            return 0;
    }
    return -1;
}

/* Decimal digits v[0..n) with an optional k/M/G (1000s, any case) into
 * *out <= max: 0, or -1. */
static int count(const char *v, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t mult = 1;
    if (n > 1) {
        char s = v[n - 1];
        if (s == 'k' || s == 'K')
            mult = 1000;
        else if (s == 'm' || s == 'M')
            mult = 1000000;
        else if (s == 'g' || s == 'G')
            mult = 1000000000;
        if (mult > 1)
            n--;
    }
    if (n == 0 || n > 20)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9' ||
            __builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, (uint64_t)(v[i] - '0'), &x))
            return -1;
    }
    if (__builtin_mul_overflow(x, mult, &x) || x > max)
        return -1;
    *out = x;
    return 0;
}

static int quoted_fail(struct cerr *ce, const struct field *f, const char *v, size_t n)
{
    (void)v;
    if (!ce->named)
        return fail(ce, 0, n, "expected %s", f->expect);
    return fail(ce, 0, n, "%s must be %s", f->name, f->expect);
}

/* ------------------------------------------------------------ slots */

static int set_count(srl_config *c, const struct field *f, const char *v, size_t n,
                     const char *sub, struct cerr *ce)
{
    (void)sub;
    uint64_t x;
    if (count(v, n, f->max, &x) != 0 || x < f->min)
        return quoted_fail(ce, f, v, n);
    memcpy((char *)c + f->off, &x, sizeof x);
    return 0;
}

/* A checked value into the row's uint32_t field. */
static int store_u32(srl_config *c, const struct field *f, uint64_t x)
{
    uint32_t y = (uint32_t)x;
    memcpy((char *)c + f->off, &y, sizeof y);
    return 0;
}

static int set_u32(srl_config *c, const struct field *f, const char *v, size_t n,
                   const char *sub, struct cerr *ce)
{
    (void)sub;
    uint64_t x;
    /* no suffix: these are bytes and milliseconds, not counts */
    if (n == 0 || (v[n - 1] < '0' || v[n - 1] > '9') || count(v, n, f->max, &x) != 0 ||
        x < f->min)
        return quoted_fail(ce, f, v, n);
    return store_u32(c, f, x);
}

static int set_octal(srl_config *c, const struct field *f, const char *v, size_t n,
                     const char *sub, struct cerr *ce)
{
    (void)sub;
    uint64_t x = 0;
    if (n == 0 || n > 4)
        return quoted_fail(ce, f, v, n);
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '7')
            return quoted_fail(ce, f, v, n);
        x = x * 8 + (uint64_t)(v[i] - '0');
    }
    if (x > f->max)
        return quoted_fail(ce, f, v, n);
    return store_u32(c, f, x);
}

static int set_on_full(srl_config *c, const struct field *f, const char *v, size_t n,
                       const char *sub, struct cerr *ce)
{
    (void)sub;
    if (n == 5 && strncasecmp(v, "allow", 5) == 0)
        c->on_full = SRL_ON_FULL_ALLOW;
    else if (n == 4 && strncasecmp(v, "deny", 4) == 0)
        c->on_full = SRL_ON_FULL_DENY;
    else if (n == 5 && strncasecmp(v, "evict", 5) == 0)
        c->on_full = SRL_ON_FULL_EVICT;
    else
        return quoted_fail(ce, f, v, n);
    return 0;
}

static int set_owner(srl_config *c, const struct field *f, const char *v, size_t n,
                     const char *sub, struct cerr *ce)
{
    (void)sub;
    uint64_t x;
    if (n == 4 && strncasecmp(v, "self", 4) == 0)
        x = SRL_OWNER_SELF;
    else if (n == 0 || v[n - 1] < '0' || v[n - 1] > '9' || count(v, n, f->max, &x) != 0)
        return quoted_fail(ce, f, v, n);
    return store_u32(c, f, x);
}

static int set_flag(srl_config *c, const struct field *f, const char *v, size_t n,
                    const char *sub, struct cerr *ce)
{
    (void)sub;
    int b = boolean(v, n);
    if (b < 0)
        return quoted_fail(ce, f, v, n);
    if (b)
        c->flags |= (uint32_t)f->min;
    else
        c->flags &= ~(uint32_t)f->min;
    return 0;
}

/* A policy text v[0..n) into canonical limits. */
static int limits_of(const char *v, size_t n, srl_limits *out, struct cerr *ce)
{
    char text[SRL_LIMITS_TEXT_MAX * 4];   /* room for spaces around '+' */
    if (n >= sizeof text)
        return fail(ce, 0, n, "policy text longer than %u bytes", (unsigned)sizeof text - 1);
    memcpy(text, v, n);
    text[n] = '\0';
    srl_limits l;
    srl_policy_error pe;
    int rc = srl_limits_parse_ex(text, &l, &pe);
    if (rc != 0) {
        if (ce->e != NULL) {
            *ce->e = pe;
            ce->e->offset += (uint32_t)ce->base;
        }
        return SRL_EPOLICY;
    }
    if (srl__limits_canonical(&l, out) != 0)
        return fail(ce, 0, n, "invalid policy");
    return 0;
}

static int set_policy(srl_config *c, const struct field *f, const char *v, size_t n,
                      const char *sub, struct cerr *ce)
{
    (void)f;
    (void)sub;
    srl_limits l;
    int rc = limits_of(v, n, &l, ce);
    if (rc != 0)
        return rc;
    memset(&c->limits, 0, sizeof c->limits);
    memset(&c->policy, 0, sizeof c->policy);
    if (l.count == 1)
        c->policy = l.limit[0];   /* one limit as the plain policy, as every opener wrote it */
    else
        c->limits = l;
    return 0;
}

/* Every store this file made and has not freed.  A caller may point
 * cfg->tiers at a tier table of its own (mod_srl does), which is no store:
 * what is read past the tiers (the fallback, for srl_open_tiered) is read
 * only from a block found here, never from a caller's table. */
static pthread_mutex_t stores_mu = PTHREAD_MUTEX_INITIALIZER;
static const void **stores;
static size_t nstores, stores_cap;

static struct store *store_new(void)
{
    struct store *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    pthread_mutex_lock(&stores_mu);
    if (nstores == stores_cap) {
        size_t cap = stores_cap ? 2 * stores_cap : 16;
        const void **n = realloc(stores, cap * sizeof *n);
        if (n == NULL) {
            pthread_mutex_unlock(&stores_mu);
            free(s);
            return NULL;
        }
        stores = n;
        stores_cap = cap;
    }
    stores[nstores++] = s;
    pthread_mutex_unlock(&stores_mu);
    return s;
}

static void store_free(const void *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&stores_mu);
    for (size_t i = 0; i < nstores; i++)
        if (stores[i] == p) {
            stores[i] = stores[--nstores];
            break;
        }
    pthread_mutex_unlock(&stores_mu);
    free((void *)p);
}

/* The config's store, made if needed; NULL on ENOMEM. */
static struct store *store_of(srl_config *c)
{
    if (c->tiers == NULL)
        c->tiers = (srl_tier *)store_new();
    return (struct store *)(void *)c->tiers;
}

static int set_tier(srl_config *c, const struct field *f, const char *v, size_t n,
                    const char *sub, struct cerr *ce)
{
    (void)f;
    size_t sn = strlen(sub);
    char name[SRL_TIER_NAME_MAX + 1];
    /* the name sits before the value: "tier.NAME=" */
    size_t at = sn + 1;   /* cut names: the offset is of what was read */
    if (sn == 0 || sn > SRL_TIER_NAME_MAX) {
        ce->base -= at;
        return fail(ce, 0, sn, "tier name must be 1..%u of [A-Za-z0-9_-], not 'default' "
                    "(that is the policy)", SRL_TIER_NAME_MAX);
    }
    memcpy(name, sub, sn);
    name[sn] = '\0';
    if (srl_tier_name_check(name) != 0 || strcmp(name, "default") == 0) {
        ce->base -= at;
        return fail(ce, 0, sn, "tier name must be 1..%u of [A-Za-z0-9_-], not 'default' "
                    "(that is the policy)", SRL_TIER_NAME_MAX);
    }
    for (uint32_t i = 0; i < c->tier_count; i++)
        if (strcmp(c->tiers[i].name, name) == 0) {
            ce->base -= at;
            return fail(ce, 0, sn, "tier '%s' is given twice", name);
        }
    if (c->tier_count == SRL_TIERS_MAX - 1) {
        ce->base -= at;
        return fail(ce, 0, sn, "at most %u tiers besides the policy", SRL_TIERS_MAX - 1);
    }
    srl_limits l;
    int rc = limits_of(v, n, &l, ce);
    if (rc != 0)
        return rc;
    struct store *s = store_of(c);
    if (s == NULL)
        return SRL_ENOMEM;
    srl_tier *t = &s->tiers[c->tier_count++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, sn);
    t->limits = l;
    return 0;
}

static int set_redis(srl_config *c, const struct field *f, const char *v, size_t n,
                     const char *sub, struct cerr *ce)
{
    (void)f;
    (void)sub;
    char uri[SRL_CONFIG_URI_MAX + 1], why[SRL_POLICY_ERROR_MAX];
    if (n == 0 || n > SRL_CONFIG_URI_MAX)
        return fail(ce, 0, n, "redis: expected a uri of 1..%u bytes", SRL_CONFIG_URI_MAX);
    memcpy(uri, v, n);
    uri[n] = '\0';
    if (srl_redis_uri_check(uri, why, sizeof why) != 0) {
        /* its reason may echo the uri's bytes: none reaches a message raw */
        for (char *w = why; *w; w++)
            if ((unsigned char)*w < 0x20 || (unsigned char)*w >= 0x7f)
                *w = '?';
        return fail(ce, 0, n, "%s", why);
    }
    struct store *s = store_of(c);
    if (s == NULL)
        return SRL_ENOMEM;
    memcpy(s->redis, uri, n + 1);
    return 0;
}

/* fallback=POLICY: the fronted store's host policy while Redis does not
 * answer (tiered.c).  A rate limit or a compound of them: a concurrency
 * unit has a holder the host could not give back to Redis. */
static int set_fallback(srl_config *c, const struct field *f, const char *v, size_t n,
                        const char *sub, struct cerr *ce)
{
    (void)f;
    (void)sub;
    srl_limits l;
    int rc = limits_of(v, n, &l, ce);
    if (rc != 0)
        return rc;
    for (uint32_t i = 0; i < l.count; i++)
        if (l.limit[i].algorithm == SRL_CONCURRENCY)
            return fail(ce, 0, n, "fallback takes rate limits, not concurrency (the host "
                        "could not give Redis its units back)");
    struct store *s = store_of(c);
    if (s == NULL)
        return SRL_ENOMEM;
    s->fallback = l;
    return 0;
}

/* ------------------------------------------------------------ shows */

static int put(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int put(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return w;
}

static int show_policy(const srl_config *c, const struct field *f, char *buf, size_t len)
{
    (void)f;
    char t[SRL_LIMITS_TEXT_MAX];
    int rc = c->limits.count > 0 ? srl_limits_format(&c->limits, t, sizeof t)
                                 : srl_policy_format(&c->policy, t, sizeof t);
    if (rc < 0)
        return rc;
    return put(buf, len, "%s", t);
}

static int show_u64(const srl_config *c, const struct field *f, char *buf, size_t len,
                    uint64_t def)
{
    uint64_t x;
    memcpy(&x, (const char *)c + f->off, sizeof x);
    return x == def ? 0 : put(buf, len, " %s=%llu", f->name, (unsigned long long)x);
}

static int show_capacity(const srl_config *c, const struct field *f, char *buf, size_t len)
{
    return show_u64(c, f, buf, len, 0);   /* always written: the size of what is opened */
}

static uint32_t u32_at(const srl_config *c, const struct field *f)
{
    uint32_t x;
    memcpy(&x, (const char *)c + f->off, sizeof x);
    return x;
}

static int show_u32(const srl_config *c, const struct field *f, char *buf, size_t len)
{
    srl_config d;
    srl_config_init(&d);
    uint32_t x = u32_at(c, f);
    return x == u32_at(&d, f) ? 0 : put(buf, len, " %s=%u", f->name, x);
}

static int show_octal(const srl_config *c, const struct field *f, char *buf, size_t len)
{
    uint32_t x = u32_at(c, f);
    return x == 0600 ? 0 : put(buf, len, " %s=%04o", f->name, x);
}

static int show_on_full(const srl_config *c, const struct field *f, char *buf, size_t len)
{
    if (c->on_full == SRL_ON_FULL_ALLOW)
        return 0;
    return put(buf, len, " %s=%s", f->name, c->on_full == SRL_ON_FULL_EVICT ? "evict" : "deny");
}

static int show_owner(const srl_config *c, const struct field *f, char *buf, size_t len)
{
    srl_config d;
    srl_config_init(&d);
    if (c->owner_uid == d.owner_uid)
        return 0;
    if (c->owner_uid == SRL_OWNER_SELF)
        return put(buf, len, " %s=self", f->name);
    return put(buf, len, " %s=%u", f->name, c->owner_uid);
}

static int show_flag(const srl_config *c, const struct field *f, char *buf, size_t len)
{
    return (c->flags & f->min) == 0 ? 0 : put(buf, len, " %s=on", f->name);
}

static int show_tiers(const srl_config *c, const struct field *f, char *buf, size_t len)
{
    (void)f;
    size_t used = 0;
    for (uint32_t i = 0; i < c->tier_count; i++) {
        char t[SRL_LIMITS_TEXT_MAX];
        if (srl_limits_format(&c->tiers[i].limits, t, sizeof t) < 0)
            return SRL_EPOLICY;
        int w = put(buf + used, used < len ? len - used : 0, " tier.%s=%s", c->tiers[i].name, t);
        if (w < 0)
            return SRL_EINVAL;
        used += (size_t)w;
    }
    return (int)used;
}

static int show_redis(const srl_config *c, const struct field *f, char *buf, size_t len)
{
    const char *u = srl_config_redis(c);
    return u == NULL ? 0 : put(buf, len, " %s=%s", f->name, u);
}

static int show_fallback(const srl_config *c, const struct field *f, char *buf, size_t len)
{
    srl_limits l;
    char t[SRL_LIMITS_TEXT_MAX];
    if (!srl__config_fallback(c, &l))
        return 0;
    if (srl_limits_format(&l, t, sizeof t) < 0)
        return SRL_EPOLICY;
    return put(buf, len, " %s=%s", f->name, t);
}

/* ------------------------------------------------------------ the table */

/* The bounds in the messages are srl.h's: */
_Static_assert(SRL_KEY_DISPLAY_MAX == 255, "key_display's expect names SRL_KEY_DISPLAY_MAX");
_Static_assert(SRL_CAPACITY_MAX == 4294967296ull, "capacity's expect names SRL_CAPACITY_MAX");
_Static_assert(SRL_OWNER_SELF == 4294967295u, "owner's expect names SRL_OWNER_SELF - 1");

static const struct field fields[] = {
    {"policy", set_policy, show_policy, 0, 0, 0, NULL,
     "a policy such as token_bucket:100/1m"},
    {"capacity", set_count, show_capacity, offsetof(srl_config, capacity), 1, SRL_CAPACITY_MAX,
     NULL, "a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"},
    {"key_display", set_u32, show_u32, offsetof(srl_config, key_display), 0,
     SRL_KEY_DISPLAY_MAX, "keeps every key whole", "a number of bytes, 0..255"},
    {"mode", set_octal, show_octal, offsetof(srl_config, mode), 0, 0777, "takes no mode",
     "octal permission bits, e.g. 0600 or 0660"},
    {"on_full", set_on_full, show_on_full, offsetof(srl_config, on_full), 0, 0, NULL,
     "allow, deny or evict"},
    {"lock_timeout_ms", set_u32, show_u32, offsetof(srl_config, lock_timeout_ms), 0, UINT32_MAX,
     NULL, "a number of milliseconds, 0..4294967295"},
    {"owner", set_owner, show_owner, offsetof(srl_config, owner_uid), 0, SRL_OWNER_SELF - 1,
     NULL, "a uid, 0..4294967294, or self"},
    {"dry_run", set_flag, show_flag, 0, SRL_CONFIG_DRY_RUN, 0, NULL,
     "on or off (yes/no, true/false, 1/0)"},
    {"lockfree", set_flag, show_flag, 0, SRL_CONFIG_LOCKFREE, 0, "decides in Redis",
     "on or off (yes/no, true/false, 1/0)"},
    {"flood_cache", set_flag, show_flag, 0, SRL_CONFIG_FLOOD_CACHE, 0, "decides in Redis",
     "on or off (yes/no, true/false, 1/0)"},
    {"force", set_flag, show_flag, 0, SRL_CONFIG_FORCE, 0, NULL,
     "on or off (yes/no, true/false, 1/0)"},
    {"tier.", set_tier, show_tiers, 0, 0, 0, NULL, "tier.NAME=POLICY"},
    {"redis", set_redis, show_redis, 0, 0, 0, NULL, "a redis:// or unix:// uri"},
    {"fallback", set_fallback, show_fallback, 0, 0, 0, NULL,
     "a rate policy such as token_bucket:25/1m"},
};

#define N_FIELDS (sizeof fields / sizeof fields[0])

/* The row of name[0..n) (any case), with *sub the rest after "tier."; NULL if none. */
static const struct field *lookup(const char *name, size_t n, size_t *sub)
{
    for (size_t i = 0; i < N_FIELDS; i++) {
        size_t fl = strlen(fields[i].name);
        int prefix = fields[i].name[fl - 1] == '.';
        if ((prefix ? n >= fl : n == fl) && strncasecmp(name, fields[i].name, fl) == 0) {
            *sub = fl;
            return &fields[i];
        }
    }
    return NULL;
}

static int unknown(struct cerr *ce, const char *name, size_t n)
{
    char q[4 * SRL__QUOTE_MAX + 8];
    srl__quote(q, sizeof q, name, n);
    const char *best = NULL;
    unsigned best_d = UINT32_MAX;
    for (size_t i = 0; i < N_FIELDS && n <= 64; i++) {
        size_t fl = strlen(fields[i].name);
        unsigned d = srl__edit_distance(name, n, fields[i].name);
        unsigned lim = (unsigned)fl / 3;
        if (d <= (lim ? lim : 1) && d < best_d) {
            best = fields[i].name;
            best_d = d;
        }
    }
    if (best != NULL)
        return fail(ce, 0, n, "unknown option '%s' (did you mean %s?)", q, best);
    /* the whole list does not fit SRL_POLICY_ERROR_MAX: where it is, and one */
    return fail(ce, 0, n, "unknown option '%s' (not one of srl.h's CONFIGURATION TEXT "
                "options, e.g. capacity=65536)", q);
}

static int has_concurrency(const srl_config *c)
{
    for (uint32_t t = 0; t <= c->tier_count; t++) {
        const srl_limits *ls = t == 0 ? &c->limits : &c->tiers[t - 1].limits;
        if (t == 0 && ls->count == 0 && c->policy.algorithm == SRL_CONCURRENCY)
            return 1;
        for (uint32_t i = 0; i < ls->count; i++)
            if (ls->limit[i].algorithm == SRL_CONCURRENCY)
                return 1;
    }
    return 0;
}

/* The rules across options, for a whole config (at: where to point). */
static int across(const srl_config *c, struct cerr *ce, size_t at)
{
    if (c->tier_count > 0 && has_concurrency(c))
        return fail(ce, at, 0, "a concurrency limit cannot be tiered (no tier of a config "
                    "with tier.NAME may hold one): use a segment of its own");
    if (srl_config_redis(c) == NULL)
        return 0;
    /* Every opener of a spec's redis= (mod_srl, PHP, Python) opens the
     * fronted store, which hands a concurrency limit alone to Redis alone
     * (tiered.c); a compound holding one no Redis script decides yet. */
    if (has_concurrency(c) && c->limits.count > 1)
        return fail(ce, at, 0, "redis= takes a concurrency limit alone, not in a compound: "
                    "give it a limiter of its own, or use a segment");
    srl_limits fb;
    if (has_concurrency(c) && srl__config_fallback(c, &fb))
        return fail(ce, at, 0, "fallback= is for rate limits: a concurrency limit on Redis "
                    "has no host segment (on_full decides while Redis is down)");
    /* an option is given when its text is not empty: the formatter's own rule */
    for (size_t i = 0; i < N_FIELDS; i++) {
        char t[SRL_CONFIG_TEXT_MAX];
        if (fields[i].no_redis == NULL || fields[i].show(c, &fields[i], t, sizeof t) <= 0)
            continue;
        return fail(ce, at, 0, "%s is for a segment; a Redis store (redis=) %s", fields[i].name,
                    fields[i].no_redis);
    }
    return 0;
}

/* One NAME=VALUE onto *c (a copy the caller keeps or drops). */
static int apply(srl_config *c, const char *name, size_t nn, const char *v, size_t vn,
                 size_t name_at, size_t value_at, int named, srl_policy_error *err,
                 const struct field **out)
{
    struct cerr ce = {err, name_at, named};
    size_t sub;
    const struct field *f = lookup(name, nn, &sub);
    if (f == NULL)
        return unknown(&ce, name, nn);
    /* tier.NAME: the name, cut one byte past the longest (set_tier refuses it) */
    char subname[SRL_TIER_NAME_MAX + 2];
    size_t sl = nn - sub > SRL_TIER_NAME_MAX + 1 ? SRL_TIER_NAME_MAX + 1 : nn - sub;
    memcpy(subname, name + sub, sl);
    subname[sl] = '\0';
    if (strlen(subname) != sl)
        return unknown(&ce, name, nn);
    ce.base = value_at;
    *out = f;
    return f->set(c, f, v, vn, subname, &ce);
}

static void err_clear(srl_policy_error *err)
{
    if (err != NULL)
        memset(err, 0, sizeof *err);
}

int srl_config_set(srl_config *cfg, const char *name, const char *value, srl_policy_error *err)
{
    err_clear(err);
    if (cfg == NULL || name == NULL || value == NULL) {
        struct cerr ce = {err, 0, 1};
        fail(&ce, 0, 0, "no config, name or value given");
        return SRL_EINVAL;
    }
    srl_config c = *cfg;
    void *had = (void *)cfg->tiers;
    struct store saved;
    if (had != NULL)
        memcpy(&saved, had, sizeof saved);
    const struct field *f;
    /* offsets as if the caller had written NAME=VALUE in a spec */
    size_t nn = strlen(name);
    int rc = apply(&c, name, nn, value, strlen(value), 0, nn + 1, 0, err, &f);
    if (rc == 0) {
        struct cerr ce = {err, 0, 1};
        rc = across(&c, &ce, 0);
    }
    if (rc != 0) {
        if (had == NULL && c.tiers != NULL)
            store_free(c.tiers);
        else if (had != NULL)
            memcpy(had, &saved, sizeof saved);
        return rc;
    }
    *cfg = c;
    err_clear(err);
    return 0;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The end of the word at s[i]: spaces split words, except around '+'
 * (a compound "a + b" is one word). */
static size_t word_end(const char *s, size_t i)
{
    for (;;) {
        while (s[i] != '\0' && !is_space(s[i]))
            i++;
        size_t j = i;
        while (is_space(s[j]))
            j++;
        if (s[j] == '\0')
            return i;
        if ((i > 0 && s[i - 1] == '+') || s[j] == '+') {
            i = j;
            continue;
        }
        return i;
    }
}

/* A word that names an option: letters, digits, '_' '.' '-' then '='. */
static size_t name_len(const char *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = w[i];
        if (ch == '=')
            return i;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return 0;
    }
    return 0;
}

int srl_config_parse(srl_config *cfg, const char *spec, srl_policy_error *err)
{
    err_clear(err);
    struct cerr ce = {err, 0, 1};
    if (cfg == NULL || spec == NULL) {
        fail(&ce, 0, 0, "no config or spec given");
        return SRL_EINVAL;
    }
    srl_config c;
    srl_config_init(&c);
    uint32_t seen = 0;   /* rows given, but tier. (one per name) */
    int have_policy = 0, rc = 0;
    size_t i = 0;
    for (;;) {
        while (is_space(spec[i]))
            i++;
        if (spec[i] == '\0')
            break;
        size_t e = word_end(spec, i);
        const char *w = spec + i;
        size_t n = e - i;
        size_t nl = name_len(w, n);
        const struct field *f = NULL;
        if (nl == 0 && n > 0 && w[0] != '=') {
            /* a bare word: the policy, first */
            if (have_policy) {
                rc = fail(&ce, i, n, "a second policy: join limits with '+', give options as "
                          "NAME=VALUE");
                break;
            }
            rc = apply(&c, "policy", 6, w, n, i, i, 1, err, &f);
        } else if (nl == 0) {
            rc = fail(&ce, i, 1, "expected NAME=VALUE, e.g. capacity=65536");
            break;
        } else {
            rc = apply(&c, w, nl, w + nl + 1, n - nl - 1, i, i + nl + 1, 1, err, &f);
        }
        if (rc != 0)
            break;
        if (f == &fields[0]) {
            if (have_policy) {
                rc = fail(&ce, i, n, "policy is given twice");
                break;
            }
            have_policy = 1;
        } else if (f->set != set_tier) {
            uint32_t bit = 1u << (unsigned)(f - fields);
            if (seen & bit) {
                rc = fail(&ce, i, nl, "%s is given twice", f->name);
                break;
            }
            seen |= bit;
        }
        i = e;
    }
    if (rc == 0 && !have_policy)
        rc = fail(&ce, 0, 0, "no policy: begin with one, e.g. token_bucket:100/1m");
    if (rc == 0)
        rc = across(&c, &ce, i);
    srl_limits fb;
    if (rc == 0 && srl_config_redis(&c) == NULL && srl__config_fallback(&c, &fb))
        rc = fail(&ce, i, 0, "fallback= is what the host decides while Redis does not answer: "
                  "it needs redis=URI (a segment decides every request itself)");
    if (rc == 0 && (c.flags & SRL_CONFIG_LOCKFREE) && !srl__config_has_gcra(&c)) {
        char t[SRL_LIMITS_TEXT_MAX], q[4 * SRL__QUOTE_MAX + 8];
        show_policy(&c, &fields[0], t, sizeof t);
        srl__quote(q, sizeof q, t, strlen(t));
        rc = fail(&ce, i, 0, "lockfree=on decides gcra limits only, and '%s' has none in any "
                  "tier: use gcra:N/W, or drop lockfree=", q);
    }
    if (rc != 0) {
        srl_config_free(&c);
        return rc;
    }
    *cfg = c;
    err_clear(err);
    return 0;
}

int srl__config_has_gcra(const srl_config *c)
{
    if (c->limits.count == 0 ? c->policy.algorithm == SRL_GCRA : 0)
        return 1;
    for (uint32_t t = 0; t <= c->tier_count; t++) {
        const srl_limits *ls = t == 0 ? &c->limits : &c->tiers[t - 1].limits;
        for (uint32_t i = 0; i < ls->count; i++)
            if (ls->limit[i].algorithm == SRL_GCRA)
                return 1;
    }
    return 0;
}

int srl_config_format(const srl_config *cfg, char *buf, size_t len)
{
    if (cfg == NULL || buf == NULL || len == 0)
        return SRL_EINVAL;
    size_t used = 0;
    for (size_t i = 0; i < N_FIELDS; i++) {
        int w = fields[i].show(cfg, &fields[i], buf + used, len - used);
        if (w < 0)
            return w;
        if ((size_t)w >= len - used) {
            buf[used] = '\0';
            return SRL_ENOBUFS;
        }
        used += (size_t)w;
    }
    buf[used] = '\0';
    return (int)used;
}

const char *srl_config_redis(const srl_config *cfg)
{
    if (cfg == NULL || cfg->tiers == NULL)
        return NULL;
    const struct store *s = (const struct store *)(const void *)cfg->tiers;
    return s->redis[0] != '\0' ? s->redis : NULL;
}

int srl__config_fallback(const srl_config *cfg, srl_limits *out)
{
    int given = 0;
    if (cfg == NULL || cfg->tiers == NULL)
        return 0;
    pthread_mutex_lock(&stores_mu);
    for (size_t i = 0; i < nstores && !given; i++)
        if (stores[i] == (const void *)cfg->tiers) {
            const struct store *s = stores[i];
            given = s->fallback.count > 0;
            if (given)
                *out = s->fallback;
        }
    pthread_mutex_unlock(&stores_mu);
    return given;
}

void srl_config_free(srl_config *cfg)
{
    if (cfg == NULL)
        return;
    store_free(cfg->tiers);
    cfg->tiers = NULL;
    cfg->tier_count = 0;
}

/* ------------------------------------------------------------ words */

/* What each binding calls a thing the library's messages name. */
static const struct {
    const char *what;
    const char *word[SRL_BINDING_COUNT];
} words[] = {
    /* what: C, rlctl, Python, PHP, Apache (srl_binding order) */
    {"change", {"rlctl set-policy, or open with SRL_CHANGE", "rlctl set-policy",
                "rlctl set-policy, or open with change=True",
                "rlctl set-policy, or open with Srl::CREATE | Srl::CHANGE", "rlctl set-policy"}},
    {"policy", {"policy", "--policy", "policy", "$policy", "POLICY"}},
    {"capacity", {"capacity", "--capacity", "capacity", "$capacity", "CAPACITY"}},
    {"key_display", {"key_display", "--key-display", "key_display", "key_display", "key_display="}},
    {"tier", {"tier.NAME", "--tier", "tiers", "tiers", "tier="}},
    {"redis", {"redis", "--redis", "redis", "redis", "redis="}},
    {"lockfree", {"lockfree", "--lockfree", "lockfree", "lockfree", "lockfree="}},
};

const char *srl_binding_word(srl_binding b, const char *what)
{
    if ((unsigned)b >= SRL_BINDING_COUNT || what == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(words[i].what, what) == 0)
            return words[i].word[b];
    return NULL;
}
