/*
 * redis_testutil.c - start and stop a redis-server, or a three-master
 * Redis Cluster, for a test (see the header).  Readiness is a bounded poll
 * (the test's own timeout bounds it), never a sleep hoped to be long
 * enough.
 */
#include "redis_testutil.h"
#include "srl.h"
#include "testutil.h"

#include <check.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int sock_ready(const char *sock)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

pid_t redis_server_start(const char *dir, const char *sock, const char *const *extra)
{
    unlink(sock);
    pid_t pid = test_fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        const char *argv[16] = {"redis-server", "--port", "0", "--unixsocket", sock,
                                "--save", "", "--appendonly", "no", "--dir", dir};
        for (int i = 0; i < 4 && extra != NULL && extra[i] != NULL; i++)
            argv[11 + i] = extra[i];
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    while (!sock_ready(sock)) {
        int st;
        ck_assert_int_eq(waitpid(pid, &st, WNOHANG), 0);
        usleep(5000);
    }
    return pid;
}

void redis_server_stop(pid_t pid)
{
    kill(pid, SIGCONT);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

long long redis_command_calls(const char *sock, const char *cmd)
{
    redisContext *c = redisConnectUnix(sock);
    ck_assert(c != NULL && c->err == 0);
    redisReply *r = redisCommand(c, "INFO commandstats");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    char field[64];
    int n = snprintf(field, sizeof field, "cmdstat_%s:calls=", cmd);
    const char *at = strstr(r->str, field);
    long long calls = at != NULL ? atoll(at + n) : 0;
    freeReplyObject(r);
    redisFree(c);
    return calls;
}

/* ---------------------------------------------------------------- cluster */

static void cluster_die(struct redis_cluster *c, const char *what)
{
    fprintf(stderr, "redis cluster setup: %s\n", what);
    redis_cluster_stop(c);
    abort();
}

/* 1 if the loopback TCP port p can be bound now. */
static int port_free(int p)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* A port p with p and p + 10000 (the cluster bus) free, p not in used[]. */
static int pick_port(const int *used, int n)
{
    unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    for (int tries = 0; tries < 1000; tries++) {
        seed = seed * 1103515245u + 12345u;
        int p = 20000 + (int)((seed >> 8) % 30000);
        int clash = 0;
        for (int i = 0; i < n; i++)
            clash |= used[i] == p || used[i] + 10000 == p || used[i] == p + 10000;
        if (!clash && port_free(p) && port_free(p + 10000))
            return p;
    }
    return -1;
}

static redisContext *node_conn(int port)
{
    struct timeval tv = {2, 0};
    redisContext *k = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (k != NULL && k->err != 0) {
        redisFree(k);
        return NULL;
    }
    return k;
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void cluster_undo(void *c)
{
    redis_cluster_stop(c);
}

void redis_cluster_start(struct redis_cluster *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/srl-rcluster-XXXXXX");
    if (mkdtemp(c->dir) == NULL)
        cluster_die(c, "mkdtemp");
    for (int i = 0; i < REDIS_CLUSTER_N; i++) {
        c->port[i] = pick_port(c->port, i);
        if (c->port[i] < 0)
            cluster_die(c, "no free port");
        char port[16], conf[128];
        snprintf(port, sizeof port, "%d", c->port[i]);
        snprintf(conf, sizeof conf, "%s/nodes-%d.conf", c->dir, c->port[i]);
        pid_t pid = test_fork_undo(cluster_undo, c);
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(null, 2);
            execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1",
                   "--cluster-enabled", "yes", "--cluster-config-file", conf, "--save", "",
                   "--appendonly", "no", "--dir", c->dir, (char *)NULL);
            _exit(127);
        }
        c->pid[i] = pid;
    }
    for (int i = 0; i < REDIS_CLUSTER_N; i++) {
        redisContext *k;
        while ((k = node_conn(c->port[i])) == NULL) {
            if (waitpid(c->pid[i], NULL, WNOHANG) != 0)
                cluster_die(c, "redis-server exited");
            nap_ms(5);
        }
        redisReply *r = redisCommand(k, "CLUSTER MYID");
        if (r == NULL || r->type != REDIS_REPLY_STRING || r->len >= sizeof c->id[i])
            cluster_die(c, "CLUSTER MYID");
        memcpy(c->id[i], r->str, r->len + 1);
        freeReplyObject(r);
        redisFree(k);
    }
    pid_t cli = test_fork_undo(cluster_undo, c);
    if (cli == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        char a[REDIS_CLUSTER_N][32];
        for (int i = 0; i < REDIS_CLUSTER_N; i++)
            snprintf(a[i], sizeof a[i], "127.0.0.1:%d", c->port[i]);
        execlp("redis-cli", "redis-cli", "--cluster", "create", a[0], a[1], a[2],
               "--cluster-replicas", "0", "--cluster-yes", (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(cli, &st, 0) != cli || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        cluster_die(c, "redis-cli --cluster create failed");
    /* Every node agrees the cluster is up (each knows all 16384 slots). */
    for (int i = 0; i < REDIS_CLUSTER_N; i++) {
        for (;;) {
            redisContext *k = node_conn(c->port[i]);
            if (k == NULL)
                cluster_die(c, "node gone");
            redisReply *r = redisCommand(k, "CLUSTER INFO");
            int ok = r != NULL && r->type == REDIS_REPLY_STRING;
            ok = ok && strstr(r->str, "cluster_state:ok") != NULL &&
                 strstr(r->str, "cluster_slots_ok:16384") != NULL;
            if (r != NULL)
                freeReplyObject(r);
            redisFree(k);
            if (ok)
                break;
            nap_ms(20);
        }
    }
    int n = snprintf(c->uri, sizeof c->uri, "redis-cluster://");
    for (int i = 0; i < REDIS_CLUSTER_N; i++)
        n += snprintf(c->uri + n, sizeof c->uri - (size_t)n, "%s127.0.0.1:%d", i ? "," : "",
                      c->port[i]);
}

void redis_cluster_stop(struct redis_cluster *c)
{
    for (int i = 0; i < REDIS_CLUSTER_N; i++) {
        if (c->pid[i] > 0)
            redis_server_stop(c->pid[i]);
        c->pid[i] = 0;
        char conf[128];
        snprintf(conf, sizeof conf, "%s/nodes-%d.conf", c->dir, c->port[i]);
        unlink(conf);
    }
    if (c->dir[0] != '\0')
        rmdir(c->dir);
}

int redis_cluster_owner(const struct redis_cluster *c, unsigned slot)
{
    for (int i = 0; i < REDIS_CLUSTER_N; i++) {
        redisContext *k = node_conn(c->port[i]);
        if (k == NULL)
            continue;
        redisReply *r = redisCommand(k, "CLUSTER SLOTS");
        int owner = -1;
        for (size_t j = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && j < r->elements; j++) {
            redisReply *e = r->element[j];
            if ((unsigned long long)e->element[0]->integer <= slot &&
                slot <= (unsigned long long)e->element[1]->integer)
                for (int m = 0; m < REDIS_CLUSTER_N; m++)
                    if (e->element[2]->element[1]->integer == c->port[m])
                        owner = m;
        }
        if (r != NULL)
            freeReplyObject(r);
        redisFree(k);
        return owner;
    }
    return -1;
}

/* ---------------------------------------------------------------- the fake */

/* One line of f's output appended to log (NUL-terminated): 1, or 0 at EOF. */
static int fake_line(struct fake_redis *f, size_t *start)
{
    *start = f->len;
    for (;;) {
        char ch;
        ssize_t n = read(f->out_fd, &ch, 1);
        if (n <= 0)
            return 0;
        if (f->len + 1 < sizeof f->log)
            f->log[f->len++] = ch;
        f->log[f->len] = '\0';
        if (ch == '\n')
            return 1;
    }
}

void fake_redis_start(struct fake_redis *f, const char *mode, int once)
{
    memset(f, 0, sizeof *f);
    const char *py = getenv("FAKE_REDIS_PY");   /* tests/meson.build sets it */
    ck_assert_msg(py != NULL, "FAKE_REDIS_PY (the path of tests/fake_redis.py) is not set");
    int in[2], out[2];
    ck_assert_int_eq(pipe(in), 0);
    ck_assert_int_eq(pipe(out), 0);
    pid_t pid = test_fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execlp("python3", "python3", py, mode, once ? "--once" : NULL, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    f->pid = pid;
    f->in_fd = in[1];
    f->out_fd = out[0];
    size_t at;
    ck_assert_msg(fake_line(f, &at) && sscanf(f->log + at, "ready %d", &f->port) == 1,
                  "fake_redis.py did not start: '%s'", f->log);
}

int fake_redis_wait(struct fake_redis *f, const char *prefix)
{
    size_t at;
    while (fake_line(f, &at))
        if (strncmp(f->log + at, prefix, strlen(prefix)) == 0)
            return 1;
    return 0;
}

int fake_redis_saw(const struct fake_redis *f, const char *prefix)
{
    int n = 0;
    size_t pl = strlen(prefix);
    for (const char *l = f->log; *l != '\0';) {
        n += strncmp(l, prefix, pl) == 0;
        const char *nl = strchr(l, '\n');
        if (nl == NULL)
            break;
        l = nl + 1;
    }
    return n;
}

void fake_redis_stop(struct fake_redis *f)
{
    if (f->pid <= 0)
        return;
    kill(f->pid, SIGKILL);
    waitpid(f->pid, NULL, 0);
    size_t at;
    while (fake_line(f, &at)) {
    }
    close(f->in_fd);
    close(f->out_fd);
    f->pid = 0;
}

unsigned redis_fork_flood(srl_limiter *lim, const char *key)
{
    return redis_fork_flood_tier(lim, 0, key);   /* srl_acquire is tier 0's */
}

unsigned redis_fork_flood_tier(srl_limiter *lim, unsigned tier, const char *key)
{
    enum { N = 8 };
    int go[2], res[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(res), 0);
    pid_t kids[N];
    for (int i = 0; i < N; i++) {
        kids[i] = test_fork();
        if (kids[i] == 0) {
            close(go[1]);
            char c;
            (void)!read(go[0], &c, 1);   /* EOF: everyone starts together */
            unsigned n = 0;
            srl_decision d;
            int rc;
            while ((rc = srl_acquire_tier(lim, tier, key, strlen(key), 1, &d)) == 0 && d.allowed)
                n++;
            if (rc != 0)
                n = 1u << 31;
            (void)!write(res[1], &n, sizeof n);
            _exit(0);
        }
    }
    close(go[0]);
    close(go[1]);
    unsigned total = 0;
    int bad = 0;
    for (int i = 0; i < N; i++) {
        unsigned n;
        ck_assert_int_eq(read(res[0], &n, sizeof n), (ssize_t)sizeof n);
        bad |= n >= 1u << 31;
        total += n;
    }
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(waitpid(kids[i], NULL, 0), kids[i]);
    close(res[0]);
    close(res[1]);
    return bad ? UINT32_MAX : total;
}
