/*
 * redis_sentinel.c - where a Redis Sentinel set says the master is, for
 * the Redis store of a redis-sentinel:// uri (redis_store.c asks before
 * every new connection: after a connection error or a -READONLY).
 *
 * WHAT IT HOLDS
 *   The one question srl asks a sentinel, SENTINEL get-master-addr-by-name
 *   NAME, over a plain TCP socket made for it and closed after it; and the
 *   parser of its reply (*2 of two bulk strings, host and port; *-1 for a
 *   master the sentinel does not know; -ERR ...).
 *
 * INVARIANTS
 *   - Every sentinel reply is untrusted: at most SRL__SENTINEL_REPLY_MAX
 *     bytes are read, the reply must be exactly that shape, the host 1..255
 *     bytes of [A-Za-z0-9._:-] (an address or a name, nothing that could
 *     smuggle a path or a control byte into a log) and the port 1..65535;
 *     anything else is that sentinel's failure, named in srl_last_error,
 *     and the next sentinel is asked.
 *   - Bounded: each sentinel gets a share of the call's time left (its
 *     connect, write and reads each wait with poll() for what is left of
 *     it), so one silent sentinel cannot take the others' time.
 *   - No SIGPIPE (send with MSG_NOSIGNAL), no state of its own: the store
 *     keeps which sentinel answered last (*next), under its mutex.
 *
 * LOCKS
 *   None: called under the Redis store's mutex; touches only its arguments,
 *   the socket it makes and the thread's srl_last_error.
 */
#include "redis_sentinel.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "errdetail.h"
#include "limiter.h"
#include "srl.h"

/* An integer at s[*at..] ended by CRLF, at most digits digits (a leading
 * '-' if sign): 0 with *v set and *at past the CRLF; 1 incomplete; -1
 * malformed. */
static int crlf_int(const char *s, size_t n, size_t *at, int digits, int sign, long long *v)
{
    size_t i = *at;
    int neg = 0;
    if (sign && i < n && s[i] == '-') {
        neg = 1;
        i++;
    }
    long long x = 0;
    int d = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (++d > digits)
            return -1;
        x = x * 10 + (s[i] - '0');
    }
    if (i >= n)
        return 1;
    if (d == 0 || s[i] != '\r')
        return -1;
    if (i + 1 >= n)
        return 1;
    if (s[i + 1] != '\n')
        return -1;
    *at = i + 2;
    *v = neg ? -x : x;
    return 0;
}

#define say(why, wl, ...) (snprintf((why), (wl), __VA_ARGS__), SRL_ESYS)

/* One bulk string "$len\r\nbytes\r\n" at *at: 0 with *p, *len; 1 incomplete; -1 bad. */
static int bulk(const char *s, size_t n, size_t *at, const char **p, size_t *len)
{
    size_t i = *at;
    if (i >= n)
        return 1;
    if (s[i] != '$')
        return -1;
    i++;
    long long l;
    int rc = crlf_int(s, n, &i, 3, 0, &l);
    if (rc != 0)
        return rc;
    if (i + (size_t)l + 2 > n)
        return 1;
    if (s[i + l] != '\r' || s[i + l + 1] != '\n')
        return -1;
    *p = s + i;
    *len = (size_t)l;
    *at = i + (size_t)l + 2;
    return 0;
}

static int host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == ':' || c == '-';
}

int srl__sentinel_parse(const char *s, size_t n, char host[256], int *port, char *why,
                        size_t wl)
{
    if (n == 0)
        return 1;
    if (s[0] == '-') {   /* an error reply: its line, quoted (errdetail masks bytes) */
        const char *e = memchr(s, '\r', n);
        if (e == NULL || (size_t)(e - s) + 1 >= n)
            return n >= SRL__SENTINEL_REPLY_MAX
                       ? say(why, wl, "error reply longer than %u bytes",
                             SRL__SENTINEL_REPLY_MAX)
                       : 1;
        return say(why, wl, "answered '%.*s'", (int)((e - s - 1) > 120 ? 120 : e - s - 1), s + 1);
    }
    int rc = 1;
    size_t at = 1;
    if (s[0] != '*') {
        rc = -1;
    } else {
        long long count = 0;
        rc = crlf_int(s, n, &at, 2, 1, &count);
        if (rc != 0) {
            /* incomplete, or malformed: below */
        } else if (count == -1) {
            return at == n ? SRL_ENOENT
                           : say(why, wl, "sent bytes after its reply (is it a sentinel?)");
        } else if (count != 2) {
            rc = -1;
        } else {
            const char *h, *p;
            size_t hl, pl;
            rc = bulk(s, n, &at, &h, &hl);
            if (rc == 0)
                rc = bulk(s, n, &at, &p, &pl);
            if (rc == 0) {
                if (at != n)
                    return say(why, wl, "sent bytes after its reply (is it a sentinel?)");
                if (hl == 0 || hl > 255)
                    return say(why, wl, "named a master host of %zu bytes (1..255 expected)", hl);
                for (size_t i = 0; i < hl; i++)
                    if (!host_char(h[i]))
                        return say(why, wl, "named a master host with a byte 0x%02x (an "
                                            "address or a name expected)", (unsigned char)h[i]);
                long long v = 0;
                for (size_t i = 0; i < pl && v <= 65535; i++)
                    v = p[i] >= '0' && p[i] <= '9' ? v * 10 + (p[i] - '0') : 65536;
                if (pl == 0 || v < 1 || v > 65535)
                    return say(why, wl, "named a master port '%.*s' (1..65535 expected)",
                               (int)(pl > 16 ? 16 : pl), p);
                memcpy(host, h, hl);
                host[hl] = '\0';
                *port = (int)v;
                return 0;
            }
        }
    }
    if (rc < 0)
        return say(why, wl, "answered what is not the reply to SENTINEL "
                            "get-master-addr-by-name (is it a sentinel?)");
    if (n >= SRL__SENTINEL_REPLY_MAX)
        return say(why, wl, "sent a reply longer than %u bytes (is it a sentinel?)",
                   SRL__SENTINEL_REPLY_MAX);
    return 1;
}

/* ms left until end (CLOCK_MONOTONIC ns), at least 1 while any is left; 0 after. */
static int ms_until(uint64_t end)
{
    uint64_t now = srl__clock_ns(CLOCK_MONOTONIC);
    if (now >= end)
        return 0;
    uint64_t ms = (end - now + 999999) / 1000000;
    return ms > 3600000 ? 3600000 : (int)ms;
}

/* Wait for fd to be ready for ev until end: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short ev, uint64_t end)
{
    for (;;) {
        int ms = ms_until(end);
        if (ms == 0)
            return 0;
        struct pollfd p = {fd, ev, 0};
        int k = poll(&p, 1, ms);
        if (k > 0)
            return 1;
        if (k < 0 && errno != EINTR)
            return -1;
    }
}

/* A connected non-blocking TCP socket to host:port by end, or -1 (errno;
 * ETIMEDOUT when end passed). */
static int dial(const char *host, int port, uint64_t end)
{
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *a;
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g != 0) {
        errno = g == EAI_SYSTEM ? errno : EHOSTUNREACH;
        return -1;
    }
    int fd = -1, e = ECONNREFUSED;
    for (a = ai; a != NULL && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            e = errno;
            int ok = 0;
            if (e == EINPROGRESS) {
                int w = wait_fd(fd, POLLOUT, end);
                socklen_t sl = sizeof e;
                if (w == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) == 0 && e == 0)
                    ok = 1;
                else if (w == 0)
                    e = ETIMEDOUT;
                else if (w < 0)
                    e = errno;
            }
            if (!ok) {
                close(fd);
                fd = -1;
            }
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        errno = e;
    return fd;
}

/* Ask one sentinel by end: 0 with host, port; else the code, why[] set. */
static int ask(const char *shost, int sport, const char *master, uint64_t end, char host[256],
               int *port, char *why, size_t wl)
{
    int fd = dial(shost, sport, end);
    if (fd < 0) {
        int e = errno;
        snprintf(why, wl, "connect: %s", e == ETIMEDOUT ? "no answer in time" : strerror(e));
        return e == ETIMEDOUT ? SRL_ETIMEDOUT : SRL_ESYS;
    }
    char req[256];
    size_t ml = strlen(master);
    int rl = snprintf(req, sizeof req, "*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name"
                      "\r\n$%zu\r\n%s\r\n", ml, master);
    size_t sent = 0;
    int rc = 1;
    while (rc == 1 && sent < (size_t)rl) {
        ssize_t k = send(fd, req + sent, (size_t)rl - sent, MSG_NOSIGNAL);
        if (k > 0)
            sent += (size_t)k;
        else if (k < 0 && errno == EINTR)
            continue;
        else if (k < 0 && errno == EAGAIN && wait_fd(fd, POLLOUT, end) == 1)
            continue;
        else
            rc = errno == EAGAIN ? SRL_ETIMEDOUT : SRL_ESYS;
    }
    if (rc != 1) {
        snprintf(why, wl, "%s", rc == SRL_ETIMEDOUT ? "no answer in time" : "the write failed");
        close(fd);
        return rc;
    }
    char buf[SRL__SENTINEL_REPLY_MAX];
    size_t n = 0;
    while (rc == 1) {
        int w = wait_fd(fd, POLLIN, end);
        if (w != 1) {
            snprintf(why, wl, "%s", w == 0 ? "no answer in time" : strerror(errno));
            rc = w == 0 ? SRL_ETIMEDOUT : SRL_ESYS;
            break;
        }
        ssize_t k = recv(fd, buf + n, sizeof buf - n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0) {
            snprintf(why, wl, "%s", k == 0 ? "closed the connection before its reply"
                                           : strerror(errno));
            rc = SRL_ESYS;
            break;
        }
        n += (size_t)k;
        rc = srl__sentinel_parse(buf, n, host, port, why, wl);
        if (rc == SRL_ENOENT)
            snprintf(why, wl, "knows no master '%s'", master);
    }
    close(fd);
    return rc;
}

int srl__sentinel_master(const struct srl__redis_uri *u, uint64_t deadline_ns, int *next,
                         char host[256], int *port)
{
    char said[SRL__ERR_DETAIL_MAX] = "";
    size_t used = 0;
    int rc = SRL_ESYS;
    int first = *next >= 0 && *next < u->nseeds ? *next : 0;
    for (int k = 0; k < u->nseeds; k++) {
        int i = (first + k) % u->nseeds;
        uint64_t now = srl__clock_ns(CLOCK_MONOTONIC);
        if (now >= deadline_ns) {
            rc = SRL_ETIMEDOUT;
            break;
        }
        /* This one's share: what is left, split among those not yet asked. */
        uint64_t end = now + (deadline_ns - now) / (uint64_t)(u->nseeds - k);
        char why[160];
        rc = ask(u->seed[i].host, u->seed[i].port, u->master, end, host, port, why, sizeof why);
        if (rc == 0) {
            *next = i;
            return 0;
        }
        int w = snprintf(said + used, sizeof said - used, "%s%s:%d %s", used ? "; " : "",
                         u->seed[i].host, u->seed[i].port, why);
        if (w > 0)
            used = used + (size_t)w < sizeof said ? used + (size_t)w : sizeof said - 1;
    }
    if (rc == SRL_ENOENT)
        rc = SRL_ESYS;
    srl__err_set("sentinels of '%s': %s", u->master, said);
    return rc;
}
