/*
 * prefork_http.c - a small pre-fork HTTP server limited by srl.
 *
 * The parent creates a named shared segment, /prefork_http-PORT (so
 * `rlctl info prefork_http-PORT`, `rlctl list`, `rlctl watch` show what the
 * workers decide), removes it again on SIGTERM, and forks WORKERS children that accept() on one listening socket, the way
 * Apache prefork does.  Each request is keyed by its X-Api-Key header, or by
 * the client address when there is none, and answered 200 or 429 with
 * Retry-After and RateLimit headers.  SIGTERM to the parent stops it all.
 *
 * Usage: prefork_http PORT [WORKERS [POLICY]]   (binds 127.0.0.1 only)
 *   curl -i -H 'X-Api-Key: k1' http://127.0.0.1:PORT/
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srl.h"

#define REQ_MAX 8192

/* The value of header `name` in the raw request, copied into out. */
static int find_header(const char *req, const char *name, char *out, size_t len)
{
    size_t n = strlen(name);
    for (const char *p = strstr(req, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vl = strcspn(v, "\r\n");
            if (vl == 0 || vl >= len)
                return 0;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return 1;
        }
    }
    return 0;
}

static void serve(srl_limiter *lim, const srl_policy *policy, int c,
                  const struct sockaddr_in *peer)
{
    char req[REQ_MAX + 1];
    size_t got = 0;
    while (got < REQ_MAX) {
        ssize_t n = read(c, req + got, REQ_MAX - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        req[got] = '\0';
        if (strstr(req, "\r\n\r\n") != NULL)
            break;
    }
    req[got] = '\0';

    char key[256];
    if (!find_header(req, "X-Api-Key", key, sizeof key))
        inet_ntop(AF_INET, &peer->sin_addr, key, sizeof key);

    srl_decision d;
    int rc = srl_acquire(lim, key, strlen(key), 1, &d);
    char pol[128], now[128], retry[32], resp[1024];
    srl_format_ratelimit_policy(policy, NULL, pol, sizeof pol);
    srl_format_ratelimit(&d, NULL, now, sizeof now);
    srl_format_retry_after(&d, retry, sizeof retry);
    int len;
    if (rc != 0 && !(d.flags & SRL_DECISION_DEGRADED))
        len = snprintf(resp, sizeof resp, "HTTP/1.1 500 Internal Server Error\r\n"
                       "Connection: close\r\nContent-Length: 0\r\n\r\n");
    else if (d.allowed)
        len = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nConnection: close\r\n"
                       "RateLimit-Policy: %s\r\nRateLimit: %s\r\nX-Worker: %ld\r\n"
                       "Content-Length: 3\r\n\r\nok\n", pol, now, (long)getpid());
    else
        len = snprintf(resp, sizeof resp, "HTTP/1.1 429 Too Many Requests\r\n"
                       "Connection: close\r\nRetry-After: %s\r\nRateLimit-Policy: %s\r\n"
                       "RateLimit: %s\r\nX-Worker: %ld\r\nContent-Length: 0\r\n\r\n",
                       retry, pol, now, (long)getpid());
    if (len > 0 && write(c, resp, (size_t)len) < 0)
        perror("prefork_http: write");
}

static void child(srl_limiter *lim, const srl_policy *policy, int ls)
{
    signal(SIGTERM, SIG_DFL);
    for (;;) {
        struct sockaddr_in peer;
        socklen_t pl = sizeof peer;
        int c = accept(ls, (struct sockaddr *)&peer, &pl);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        serve(lim, policy, c, &peer);
        close(c);
    }
}

/* A whole decimal number in [min, max]: no sign, no trailing bytes (atoi
 * would take "80x" as 80 and "x" as 0). */
static int parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static volatile sig_atomic_t stopping;
static void on_term(int sig)
{
    (void)sig;
    stopping = 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: prefork_http PORT [WORKERS [POLICY]]\n");
        return 64;
    }
    unsigned long port, workers = 4;
    if (parse_ulong(argv[1], 1, 65535, &port) != 0) {
        fprintf(stderr, "prefork_http: PORT '%s': expected a number, 1..65535\n", argv[1]);
        return 64;
    }
    if (argc > 2 && parse_ulong(argv[2], 1, 64, &workers) != 0) {
        fprintf(stderr, "prefork_http: WORKERS '%s': expected a number, 1..64\n", argv[2]);
        return 64;
    }
    srl_config cfg;
    srl_config_init(&cfg);
    const char *policy = argc > 3 ? argv[3] : "10/1m";
    int rc = srl_policy_parse(policy, &cfg.policy);
    if (rc != 0) {
        fprintf(stderr, "prefork_http: POLICY '%s': %s (e.g. 10/1m, gcra:100/1s)\n", policy,
                srl_strerror(rc));
        return 64;
    }
    /* Keys shown by rlctl list: the first 32 bytes of each (32 bytes more
     * per slot). */
    cfg.key_display = 32;
    char seg[64];
    snprintf(seg, sizeof seg, "/prefork_http-%lu", port);
    srl_limiter *lim;
    if ((rc = srl_open_shared(seg, &cfg, SRL_CREATE | SRL_EXCL, &lim)) != 0) {
        fprintf(stderr, "prefork_http: segment %s: %s%s\n", seg, srl_strerror(rc),
                rc == SRL_EEXIST ? " (another prefork_http on this port, or left over: "
                                   "rlctl destroy it)" : "");
        return 1;
    }

    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 128) != 0) {
        perror("prefork_http: listen");
        srl_close(lim);
        srl_unlink(seg);
        return 1;
    }

    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    pid_t pids[64];
    for (unsigned long i = 0; i < workers; i++)
        if ((pids[i] = fork()) == 0)
            child(lim, &cfg.policy, ls);
    printf("prefork_http: %lu workers on 127.0.0.1:%lu, segment %s (rlctl info %s)\n",
           workers, port, seg, seg + 1);
    fflush(stdout);
    while (!stopping)
        pause();
    for (unsigned long i = 0; i < workers; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGTERM);
    while (wait(NULL) > 0)
        ;
    srl_close(lim);
    srl_unlink(seg);
    return 0;
}
