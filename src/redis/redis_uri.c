/*
 * redis_uri.c - parsing the uri of a Redis store (srl_open_redis).
 *
 *   redis://[user:password@]host[:port][/db][?options]
 *   unix://[user:password@]/path/to/redis.sock[?options]
 *   redis-cluster://[user:password@]host[:port][,host[:port]...][?options]
 *   redis-sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[?options]
 *     (sentinels, port 26379 by default; the credentials and db are the
 *     master's, the sentinels are asked without AUTH)
 *   options: k=v joined by '&': db=N, timeout_ms=N, prefix=P, user=U,
 *            password=W (the last two for uris without user:password@);
 *            each option at most once
 *
 * INVARIANTS
 *   - Pure: no I/O, no allocation; *u is filled only on success, and every
 *     failure is SRL_EINVAL with a message naming the bad part and the
 *     expected form (the uri often comes from a config file, so the message
 *     is what the operator reads).  A password is never copied into why[].
 *   - No raw space or control byte anywhere (a config line splits at
 *     spaces); user, password and prefix are %XX-decoded (a password may hold any
 *     byte but NUL); '@' splits at its last occurrence in a redis:// uri, so
 *     an unencoded '@' or '/' in the password still works; '?' must be %3F.
 *   - The host keeps no brackets ("[::1]" -> "::1") and is never resolved
 *     here: resolution and connection happen in redis_store.c.
 */
#include "redis_uri.h"
#include "msg.h"

#include <stdio.h>
#include <string.h>

#include "srl.h"

/* A uri refused: the reason into why, SRL_EINVAL. */
#define fail(why, whylen, ...) srl__say((why), (whylen), SRL_EINVAL, __VA_ARGS__)

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

/* %XX-decode s[0..n) into out[cap]; 0, or -1 (bad escape, NUL, too long). */
static int decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0)
                return -1;
            c = hexval(s[i + 1]) * 16 + hexval(s[i + 2]);
            i += 2;
        }
        if (c == 0 || o + 1 >= cap)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return 0;
}

/* A decimal in [lo, hi] spelling all of s[0..n); -1 if not. */
static long long number(const char *s, size_t n, long long lo, long long hi)
{
    if (n == 0 || n > 10)
        return -1;
    long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v < lo || v > hi ? -1 : v;
}

/* "user:password" (either may be empty, the ':' may not be missing). */
static int userinfo(const char *s, size_t n, struct srl__redis_uri *u, char *why, size_t wl)
{
    const char *colon = memchr(s, ':', n);
    if (colon == NULL)
        return fail(why, wl, "redis uri: credentials must be 'user:password@' or ':password@'");
    size_t ul = (size_t)(colon - s);
    if (decode(s, ul, u->user, sizeof u->user) != 0)
        return fail(why, wl, "redis uri: bad user (a %%XX escape, or longer than %zu bytes)",
                    sizeof u->user - 1);
    if (decode(colon + 1, n - ul - 1, u->password, sizeof u->password) != 0)
        return fail(why, wl, "redis uri: bad password (a %%XX escape, or longer than %zu bytes)",
                    sizeof u->password - 1);
    return 0;
}

enum { OPT_DB, OPT_TIMEOUT_MS, OPT_PREFIX, OPT_USER, OPT_PASSWORD, OPT_N };
static const char *const option_names[OPT_N] = {"db", "timeout_ms", "prefix", "user",
                                                "password"};

/* The options after '?' (q), uri the whole uri (for offsets in messages).
 * Each option may be given once, and user/password not beside credentials
 * given as user:password@: a second value would silently replace the
 * first, and the reader of the uri could not tell which one is used. */
static int options(const char *uri, const char *q, struct srl__redis_uri *u, char *why,
                   size_t wl)
{
    int creds = u->user[0] != '\0' || u->password[0] != '\0';
    unsigned seen = 0;
    while (*q != '\0') {
        const char *end = strchr(q, '&');
        size_t n = end != NULL ? (size_t)(end - q) : strlen(q);
        const char *eq = memchr(q, '=', n);
        if (eq == NULL)
            return fail(why, wl, "redis uri: option '%.*s' needs a value (name=value)", (int)n, q);
        size_t kl = (size_t)(eq - q), vl = n - kl - 1;
        const char *v = eq + 1;
        unsigned which = 0;
        while (which < OPT_N &&
               (strlen(option_names[which]) != kl || memcmp(q, option_names[which], kl) != 0))
            which++;
        if (which == OPT_N)
            return fail(why, wl,
                        "redis uri: unknown option '%.*s' (known: db, timeout_ms, prefix, "
                        "user, password)",
                        (int)kl, q);
        if (seen & (1u << which))
            return fail(why, wl,
                        "redis uri: option '%s' repeated at offset %zu (give each option once)",
                        option_names[which], (size_t)(q - uri));
        seen |= 1u << which;
        if ((which == OPT_USER || which == OPT_PASSWORD) && creds)
            return fail(why, wl,
                        "redis uri: option '%s' at offset %zu repeats the credentials "
                        "(give them once: user:password@ or ?user=&password=)",
                        option_names[which], (size_t)(q - uri));
        long long x;
        switch (which) {
        case OPT_DB:
            if ((x = number(v, vl, 0, 1000000)) < 0)
                return fail(why, wl, "redis uri: db must be a number 0..1000000, not '%.*s'",
                            (int)vl, v);
            u->db = (int)x;
            break;
        case OPT_TIMEOUT_MS:
            if ((x = number(v, vl, 1, 3600000)) < 0)
                return fail(why, wl,
                            "redis uri: timeout_ms must be a number 1..3600000, not '%.*s'",
                            (int)vl, v);
            u->timeout_ms = (uint32_t)x;
            break;
        case OPT_PREFIX:
            if (vl == 0 || decode(v, vl, u->prefix, sizeof u->prefix) != 0)
                return fail(why, wl, "redis uri: prefix must be 1..%d bytes",
                            SRL__REDIS_PREFIX_MAX);
            break;
        case OPT_USER:
            if (decode(v, vl, u->user, sizeof u->user) != 0)
                return fail(why, wl, "redis uri: bad user option");
            break;
        default:   /* OPT_PASSWORD */
            if (decode(v, vl, u->password, sizeof u->password) != 0)
                return fail(why, wl, "redis uri: bad password option");
            break;
        }
        q += n + (end != NULL);
    }
    return 0;
}

/* A leading "userinfo@" of [*s, *s + *n), split at the last '@' (so a raw
 * '@' in a password stays in it): parsed into u, and *s, *n moved past it. */
static int take_userinfo(const char **s, size_t *n, struct srl__redis_uri *u, char *why,
                         size_t wl)
{
    const char *at = NULL;
    for (size_t i = 0; i < *n; i++)
        if ((*s)[i] == '@')
            at = *s + i;
    if (at == NULL)
        return 0;
    int rc = userinfo(*s, (size_t)(at - *s), u, why, wl);
    if (rc != 0)
        return rc;
    *n -= (size_t)(at + 1 - *s);
    *s = at + 1;
    return 0;
}

static int tcp(const char *s, size_t n, struct srl__redis_uri *u, char *why, size_t wl)
{
    int rc = take_userinfo(&s, &n, u, why, wl);
    if (rc != 0)
        return rc;
    const char *slash = memchr(s, '/', n);
    size_t hp = slash != NULL ? (size_t)(slash - s) : n;
    if (slash != NULL) {
        long long db = number(slash + 1, n - hp - 1, 0, 1000000);
        if (db < 0)
            return fail(why, wl, "redis uri: '/%.*s' after the host must be a db number",
                        (int)(n - hp - 1), slash + 1);
        u->db = (int)db;
    }
    const char *host = s, *hend = s + hp, *port = NULL;
    if (hp > 0 && s[0] == '[') {   /* [v6]:port */
        const char *close = memchr(s, ']', hp);
        if (close == NULL)
            return fail(why, wl, "redis uri: '[' of an IPv6 host is not closed");
        host = s + 1;
        hend = close;
        if (close + 1 < s + hp) {
            if (close[1] != ':')
                return fail(why, wl, "redis uri: expected ':port' after ']'");
            port = close + 2;
        }
    } else {
        const char *colon = memchr(s, ':', hp);
        if (colon != NULL) {
            hend = colon;
            port = colon + 1;
        }
    }
    size_t hl = (size_t)(hend - host);
    if (hl == 0 || hl >= sizeof u->host)
        return fail(why, wl, "redis uri: the host is missing or longer than %zu bytes "
                             "(redis://host:port)", sizeof u->host - 1);
    memcpy(u->host, host, hl);
    u->host[hl] = '\0';
    u->port = 6379;
    if (port != NULL) {
        size_t pl = (size_t)(s + hp - port);
        long long p = number(port, pl, 1, 65535);
        if (p < 0)
            return fail(why, wl, "redis uri: port must be 1..65535, not '%.*s'", (int)pl, port);
        u->port = (int)p;
    }
    return 0;
}

/* Seeds "h[:p],h[:p]..." (what: "cluster seeds" or "sentinels"), each as
 * a redis:// host without /db or userinfo, port def when not given. */
static int seeds(const char *s, size_t n, int def, const char *what,
                 struct srl__redis_uri *u, char *why, size_t wl)
{
    while (1) {
        const char *comma = memchr(s, ',', n);
        size_t len = comma != NULL ? (size_t)(comma - s) : n;
        if (u->nseeds == SRL__REDIS_SEEDS)
            return fail(why, wl, "redis uri: at most %d %s", SRL__REDIS_SEEDS, what);
        struct srl__redis_uri one;
        memset(&one, 0, sizeof one);
        if (memchr(s, '/', len) != NULL)
            return fail(why, wl, "redis uri: a cluster has only db 0 (no /db or db= in "
                                 "redis-cluster://)");
        int has_port = memchr(s, ':', len) != NULL && (len == 0 || s[len - 1] != ']');
        int rc = tcp(s, len, &one, why, wl);
        if (rc != 0)
            return rc;
        if (one.user[0] != '\0' || one.password[0] != '\0')
            return fail(why, wl, "redis uri: credentials go once, before the first of the %s",
                        what);
        memcpy(u->seed[u->nseeds].host, one.host, sizeof one.host);
        u->seed[u->nseeds].port = has_port ? one.port : def;
        u->nseeds++;
        if (comma == NULL)
            break;
        n -= len + 1;
        s = comma + 1;
    }
    memcpy(u->host, u->seed[0].host, sizeof u->host);
    u->port = u->seed[0].port;
    return 0;
}

/* Seeds "[userinfo@]h[:p],h[:p]...": userinfo splits at the last '@'. */
static int cluster(const char *s, size_t n, struct srl__redis_uri *u, char *why, size_t wl)
{
    int rc = take_userinfo(&s, &n, u, why, wl);
    if (rc != 0)
        return rc;
    u->cluster = 1;
    return seeds(s, n, 6379, "cluster seeds", u, why, wl);
}

/* A master name as Sentinel knows it: 1..127 bytes of [A-Za-z0-9._:-]. */
static int master_name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= sizeof ((struct srl__redis_uri *)0)->master)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':'))
            return 0;
    }
    return 1;
}

/* "[userinfo@]h[:p],h[:p].../MASTER": the sentinels, then the master's name. */
static int sentinel(const char *s, size_t n, struct srl__redis_uri *u, char *why, size_t wl)
{
    /* The master's name after the last '/' (a password may hold a raw '/'
     * only with %2F here: the split must not depend on the password). */
    const char *slash = NULL;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '/')
            slash = s + i;
    if (slash == NULL)
        return fail(why, wl, "redis uri: redis-sentinel:// needs the master's name "
                             "(redis-sentinel://host:26379,host:26379/MASTER)");
    size_t ml = n - (size_t)(slash + 1 - s);
    if (!master_name_ok(slash + 1, ml))
        return fail(why, wl, "redis uri: the master's name '%.*s' must be 1..%zu bytes of "
                             "[A-Za-z0-9._:-]", (int)(ml > 64 ? 64 : ml), slash + 1,
                    sizeof u->master - 1);
    memcpy(u->master, slash + 1, ml);
    u->master[ml] = '\0';
    n = (size_t)(slash - s);
    int rc = take_userinfo(&s, &n, u, why, wl);
    if (rc != 0)
        return rc;
    if (n == 0)
        return fail(why, wl, "redis uri: redis-sentinel:// needs at least one sentinel "
                             "(host:port)");
    u->sentinel = 1;
    return seeds(s, n, 26379, "sentinels", u, why, wl);
}

int srl__redis_uri_parse(const char *uri, struct srl__redis_uri *out, char *why, size_t wl)
{
    if (uri == NULL)
        return fail(why, wl, "redis uri: NULL");
    /* A uri holds no raw space or control byte: a config line splits words
     * at spaces (config.c), so one inside a uri would not come back whole. */
    for (size_t i = 0; uri[i] != '\0'; i++)
        if ((unsigned char)uri[i] <= 0x20 || (unsigned char)uri[i] == 0x7f)
            return fail(why, wl, "redis uri: byte %zu is a space or control byte (0x%02x): "
                        "%%XX-escape it (%%20 for a space; a unix path takes none)", i + 1,
                        (unsigned char)uri[i]);
    struct srl__redis_uri u;
    memset(&u, 0, sizeof u);
    snprintf(u.prefix, sizeof u.prefix, "srl");
    const char *q = strchr(uri, '?');
    size_t body = q != NULL ? (size_t)(q - uri) : strlen(uri);
    int rc;
    if (strncmp(uri, "unix://", 7) == 0) {
        const char *s = uri + 7;
        size_t n = body - 7;
        if (n > 0 && s[0] != '/') {   /* userinfo@/path */
            const char *at = strstr(s, "@/");
            if (at == NULL || at >= s + n)
                return fail(why, wl, "redis uri: unix:// needs an absolute path "
                                     "(unix:///path/to/redis.sock)");
            rc = userinfo(s, (size_t)(at - s), &u, why, wl);
            if (rc != 0)
                return rc;
            n -= (size_t)(at + 1 - s);
            s = at + 1;
        }
        if (n == 0 || n >= sizeof u.unix_path)
            return fail(why, wl, "redis uri: unix socket path missing or longer than %zu bytes",
                        sizeof u.unix_path - 1);
        memcpy(u.unix_path, s, n);
        u.unix_path[n] = '\0';
    } else if (strncmp(uri, "redis://", 8) == 0) {
        rc = tcp(uri + 8, body - 8, &u, why, wl);
        if (rc != 0)
            return rc;
    } else if (strncmp(uri, "redis-cluster://", 16) == 0) {
        rc = cluster(uri + 16, body - 16, &u, why, wl);
        if (rc != 0)
            return rc;
    } else if (strncmp(uri, "redis-sentinel://", 17) == 0) {
        rc = sentinel(uri + 17, body - 17, &u, why, wl);
        if (rc != 0)
            return rc;
    } else {
        return fail(why, wl, "redis uri must start with redis://, unix://, redis-cluster:// "
                             "or redis-sentinel://");
    }
    if (q != NULL && (rc = options(uri, q + 1, &u, why, wl)) != 0)
        return rc;
    if (u.cluster && u.db != 0)
        return fail(why, wl, "redis uri: a cluster has only db 0 (no /db or db= in "
                             "redis-cluster://)");
    if (u.user[0] != '\0' && u.password[0] == '\0')
        return fail(why, wl, "redis uri: a user needs a password (user:password@)");
    *out = u;
    return 0;
}

int srl_redis_uri_check(const char *uri, char *why, size_t whylen)
{
    struct srl__redis_uri u;
    if (why != NULL && whylen > 0)
        why[0] = '\0';
    return srl__redis_uri_parse(uri, &u, why, whylen);
}
