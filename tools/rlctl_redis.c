/*
 * rlctl_redis.c - rlctl on a Redis store (srl_open_redis) named by its uri.
 *
 * Which NAMEs are uris: those that start with "redis://", "redis-cluster://",
 * "redis-sentinel://" or "unix://".  A
 * segment name is "/" then [A-Za-z0-9._-] only (srl_name_check), so it can
 * never hold the ':' of a scheme: no NAME is both, and a typo in a uri's
 * scheme ("rediss://") is refused as a bad segment name, not guessed at.
 * info, get, reset and list take a uri (rlctl_cmd.redis); the commands on
 * a segment's table or file (create, destroy, ls, check, evict, try, watch,
 * metrics) do not.
 *
 * What rlctl prints for a uri: the uri as typed with its password replaced
 * by "***" (in the userinfo, and every password= option), so a password never
 * reaches a terminal, a log or --json output.  The password is still on
 * rlctl's command line (ps shows it to other users of the host): prefer a
 * unix socket whose permissions admit only the operators, or an ACL user
 * limited to the prefix's keys.
 *
 * rlctl opens a uri with srl_open_redis(uri, NULL): the store's own policy
 * is adopted from P:cfg and nothing is ever created there.
 */
#include "rlctl.h"

#include <stdlib.h>
#include <string.h>

int rlctl_is_uri(const char *name)
{
    return strncmp(name, "redis://", 8) == 0 || strncmp(name, "unix://", 7) == 0 ||
           strncmp(name, "redis-cluster://", 16) == 0 ||
           strncmp(name, "redis-sentinel://", 17) == 0;
}

/* Where the redacted uri goes: out NULL only counts (the first pass sizes
 * the buffer exactly, the second fills it, so any number of hidden parts
 * fits: a uri the grammar refuses is redacted too, for its error). */
struct sink {
    char *out;
    size_t len;
};

/* Append [s, e), or "***" if hide. */
static void put(struct sink *k, const char *s, const char *e, int hide)
{
    size_t n = hide ? 3 : (size_t)(e - s);
    if (k->out != NULL)
        memcpy(k->out + k->len, hide ? "***" : s, n);
    k->len += n;
}

static void redact(const char *uri, struct sink *k)
{
    size_t n = strlen(uri);
    const char *body = strstr(uri, "://") + 3;   /* rlctl_is_uri said it has one */
    const char *q = strchr(body, '?');
    const char *end = q != NULL ? q : uri + n;
    /* The userinfo ends at the last '@' of a redis:// or redis-cluster://
     * authority (srl's rule, so a raw '@' in a password is hidden whole), at
     * "@/" for unix://. */
    const char *at = NULL;
    if (uri[0] == 'r') {
        for (const char *p = body; p < end; p++)
            if (*p == '@')
                at = p;
    } else if (body[0] != '/') {
        at = strstr(body, "@/");
        if (at != NULL && at >= end)
            at = NULL;
    }
    put(k, uri, body, 0);
    if (at != NULL) {
        const char *colon = memchr(body, ':', (size_t)(at - body));
        put(k, body, colon != NULL ? colon + 1 : body, 0);
        put(k, NULL, NULL, 1);
        body = at;
    }
    put(k, body, end, 0);
    /* Options: k=v joined by '&'; every password's value is hidden. */
    for (const char *p = q; p != NULL && *p != '\0';) {
        const char *amp = strchr(p + 1, '&');
        const char *stop = amp != NULL ? amp : uri + n;
        int pw = strncmp(p + 1, "password=", 9) == 0;
        put(k, p, pw ? p + 10 : stop, 0);
        if (pw)
            put(k, NULL, NULL, 1);
        p = amp;
    }
}

char *rlctl_uri_redacted(const char *uri)
{
    struct sink k = {NULL, 0};
    redact(uri, &k);
    k.out = malloc(k.len + 1);
    if (k.out == NULL)
        return NULL;
    k.len = 0;
    redact(uri, &k);
    k.out[k.len] = '\0';
    return k.out;
}

const char *rlctl_redis_remedy(int rc)
{
    switch (rc) {
    case SRL_ENOENT:
        return "no host has opened a limiter under this prefix yet (no PREFIX:cfg): check "
               "the uri's db and prefix=";
    case SRL_EACCES:
        return "give the user and password the workers' uri gives (user:password@ or "
               "?password=)";
    case SRL_ETIMEDOUT:
        return "the Redis server did not answer within timeout_ms: check that it runs, or "
               "raise ?timeout_ms=";
    case SRL_ESYS:
        return "check that the Redis server runs at this address";
    case SRL_ECORRUPT:
        return "PREFIX:cfg or a key's value was not written by srl: delete the prefix's keys "
               "and let the workers start it over";
    case SRL_EINVAL:
        return "the server has no such db: check the uri's /db or ?db=";
    default:
        return NULL;
    }
}
