/*
 * main.c - srl-policyd's process: read the config, open the quotas'
 * segments, then serve either one connection on stdin/stdout (run by
 * Postfix's spawn(8)) or a listening unix or loopback TCP socket, one
 * forked handler per Postfix connection (at most max_clients at once; the
 * segments are shared memory, so every handler counts on the same state).
 * Signals: SIGTERM/SIGINT stop the listener (handlers finish their
 * connection); SIGCHLD reaps.  A killed server loses nothing: the counts
 * are in the segments, and the next server opens them again.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"
#include "serve.h"

static volatile sig_atomic_t stopping;
static void on_stop(int sig) { (void)sig; stopping = 1; }
static void on_child(int sig) { (void)sig; }

static int usage(void)
{
    fprintf(stderr, "usage: srl-policyd [-c CONFIG] [-t]\n"
                    "  -c CONFIG  the config file (default /etc/srl/policyd.conf)\n"
                    "  -t         check the config and the segments, then exit\n");
    return 2;
}

static int listen_on(const pd_conf *c, char *err, size_t errlen)
{
    int fd;
    if (strncmp(c->listen, "unix:", 5) == 0) {
        const char *path = c->listen + 5;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof sa.sun_path) {
            snprintf(err, errlen, "listen %s: the path is too long", c->listen);
            return -1;
        }
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        unlink(path); /* a socket left by a killed server */
        mode_t old = umask(0777 & ~c->socket_mode);
        int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof sa);
        umask(old);
        if (rc != 0 || listen(fd, 128) != 0) {
            snprintf(err, errlen, "listen %s: %s", c->listen, strerror(errno));
            if (fd >= 0) close(fd);
            return -1;
        }
        return fd;
    }
    char host[128];
    const char *hp = c->listen + 5, *colon = strrchr(hp, ':');
    if (colon == NULL || (size_t)(colon - hp) >= sizeof host) {
        snprintf(err, errlen, "listen %s: expected inet:ADDRESS:PORT", c->listen);
        return -1;
    }
    memcpy(host, hp, (size_t)(colon - hp));
    host[colon - hp] = '\0';
    if (host[0] == '[') {
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
    int rc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "listen %s: %s", c->listen, gai_strerror(rc));
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        snprintf(err, errlen, "listen %s: %s", c->listen, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    return fd;
}

static int serve_socket(pd_conf *c, int lfd)
{
    uint32_t children = 0;
    unsigned long conn = 0;
    while (!stopping) {
        while (waitpid(-1, NULL, WNOHANG) > 0) children--;
        if (children >= c->max_clients) {
            if (waitpid(-1, NULL, 0) > 0) children--;
            continue;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            pd_log(LOG_ERR, "accept: %s", strerror(errno));
            return 1;
        }
        conn++;
        pid_t pid = fork();
        if (pid == 0) {
            char peer[32];
            snprintf(peer, sizeof peer, "connection %lu", conn);
            close(lfd);
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            pd_serve(c, fd, fd, peer);
            _exit(0);
        }
        if (pid < 0) pd_log(LOG_ERR, "fork: %s", strerror(errno));
        else children++;
        close(fd);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = "/etc/srl/policyd.conf";
    int check = 0, opt;
    while ((opt = getopt(argc, argv, "c:th")) != -1) {
        if (opt == 'c') path = optarg;
        else if (opt == 't') check = 1;
        else return usage();
    }
    if (optind != argc) return usage();
    pd_conf c;
    char err[1024];
    if (pd_conf_load(&c, path, err, sizeof err) != 0) {
        fprintf(stderr, "srl-policyd: %s\n", err);
        return 2;
    }
    if (!check && pd_log_open(c.log_to, c.log_file) != 0) {
        fprintf(stderr, "srl-policyd: log %s: %s\n", c.log_file, strerror(errno));
        pd_conf_free(&c);
        return 2;
    }
    if (pd_conf_open(&c, err, sizeof err) != 0) {
        if (check) fprintf(stderr, "srl-policyd: %s\n", err);
        else pd_log(LOG_ERR, "%s", err);
        pd_conf_free(&c);
        return 1;
    }
    if (check) {
        printf("srl-policyd: %s: %u quotas, segments open\n", path, c.quota_count);
        pd_conf_free(&c);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int rc = 0;
    if (c.listen == NULL) {
        pd_serve(&c, 0, 1, "stdin");
    } else {
        int lfd = listen_on(&c, err, sizeof err);
        if (lfd < 0) {
            pd_log(LOG_ERR, "%s", err);
            fprintf(stderr, "srl-policyd: %s\n", err);
            pd_conf_free(&c);
            return 1;
        }
        struct sigaction sc = {.sa_handler = on_child}; /* no SA_RESTART: accept wakes */
        sigaction(SIGCHLD, &sc, NULL);
        pd_log(LOG_INFO, "listening on %s, %u quotas", c.listen, c.quota_count);
        rc = serve_socket(&c, lfd);
        close(lfd);
        if (strncmp(c.listen, "unix:", 5) == 0) unlink(c.listen + 5);
    }
    pd_conf_free(&c);
    return rc;
}
