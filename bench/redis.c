/*
 * redis.c - the Redis baseline: GCRA as a Lua script on a private Redis.
 *
 * What it holds: starting redis-server on a unix socket in a fresh
 * directory (port 0: no TCP listener; --save "" and --appendonly no: no
 * persistence), loading the script once (SCRIPT LOAD), timing EVALSHA
 * decisions with one request per round trip (no pipelining: a worker must
 * wait for its answer before it serves the request), from one client and
 * from two forked clients, then srl's Redis and tiered stores under a
 * flood (redis_tiered.c), then a compound policy on srl's Redis store
 * against a hand-written script (redis_compound.c), then SHUTDOWN
 * NOSAVE, reaping the server (kill by pid if it does not go), and
 * removing the directory.
 *
 * The script is GCRA, the same algorithm as srl's gcra: the state is one
 * number per key, the theoretical arrival time (TAT) in microseconds.  Time
 * comes from the server (TIME), as one clock for every worker; Redis 7
 * replicates script effects, so TIME is allowed before writes.  The key
 * expires when its TAT passes, so an idle key costs no memory (srl's
 * at-rest rule).  Policy: the benchmark's allow policy for gcra (1e9
 * permits per hour, never denies in a run).
 *
 * Invariants: the server is always reaped and its directory removed, on
 * every path after it was started; the server child asks the kernel to kill
 * it if the benchmark dies (PR_SET_PDEATHSIG), so it never outlives us.
 *
 * Concurrency: the server is a child process; the two-client measurement
 * forks two more children, each with its own connection, that report into
 * an anonymous MAP_SHARED page.
 */
#include "redis_bench.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


static const char gcra_lua[] =
    "local interval = tonumber(ARGV[1])\n"      /* us per permit: W / N */
    "local capacity = tonumber(ARGV[2])\n"      /* burst tolerance + one interval: W */
    "local cost = tonumber(ARGV[3])\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local tat = tonumber(redis.call('GET', KEYS[1])) or now\n"
    "if tat < now then tat = now end\n"
    "local new_tat = tat + interval * cost\n"
    "local ahead = new_tat - now\n"
    "if ahead > capacity then\n"
    "  return {0, 0, ahead - capacity}\n"        /* denied: retry after, us */
    "end\n"
    "redis.call('SET', KEYS[1], string.format('%.3f', new_tat), 'PX', math.ceil(ahead / 1000))\n"
    "return {1, math.floor((capacity - ahead) / interval), 0}\n";

struct redis_server {
    char dir[64];
    char sock[96];
    char log[96];
    pid_t pid;
};

/* The first executable `name` on PATH, into buf; 0 if found. */
static int find_on_path(const char *name, char *buf, size_t len)
{
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        if (n > 0 && (size_t)snprintf(buf, len, "%.*s/%s", (int)n, path, name) < len &&
            access(buf, X_OK) == 0)
            return 0;
        path += n + (end != NULL);
    }
    return -1;
}

static void server_stop(struct redis_server *s, redisContext *c)
{
    if (c != NULL) {
        /* The server closes the connection instead of replying. */
        redisReply *r = redisCommand(c, "SHUTDOWN NOSAVE");
        if (r != NULL)
            freeReplyObject(r);
        redisFree(c);
    }
    if (s->pid > 0) {
        int st, done = 0;
        for (int i = 0; i < 250 && !done; i++) {
            if (waitpid(s->pid, &st, WNOHANG) == s->pid)
                done = 1;
            else
                usleep(20000);
        }
        if (!done) {
            kill(s->pid, SIGKILL);
            while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
                ;
        }
        s->pid = 0;
    }
    unlink(s->sock);
    unlink(s->log);
    rmdir(s->dir);
}

static redisContext *server_start(struct redis_server *s, const char *exe,
                                  char *why, size_t whylen)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/srl-bench-redis-XXXXXX");
    if (mkdtemp(s->dir) == NULL) {
        snprintf(why, whylen, "mkdtemp: %s", strerror(errno));
        return NULL;
    }
    snprintf(s->sock, sizeof s->sock, "%s/redis.sock", s->dir);
    snprintf(s->log, sizeof s->log, "%s/redis.log", s->dir);
    pid_t parent = getpid();
    s->pid = fork();
    if (s->pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        s->pid = 0;
        server_stop(s, NULL);
        return NULL;
    }
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* The server lives on CPU 0, so the client placements below mean
         * something: same CPU as the server, the other one, or free. */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(0, &one);
        sched_setaffinity(0, sizeof one, &one);
        if (getppid() != parent)
            _exit(127);
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(exe, exe, "--port", "0", "--unixsocket", s->sock,
              "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
              "--dir", s->dir, "--daemonize", "no", "--loglevel", "warning",
              (char *)NULL);
        _exit(127);
    }
    struct timeval tv = {1, 0};
    for (int i = 0; i < 250; i++) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            snprintf(why, whylen, "redis-server exited at start (see its log)");
            server_stop(s, NULL);
            return NULL;
        }
        redisContext *c = redisConnectUnixWithTimeout(s->sock, tv);
        if (c != NULL && c->err == 0)
            return c;
        if (c != NULL)
            redisFree(c);
        usleep(20000);
    }
    snprintf(why, whylen, "redis-server did not answer on %s within 5 s", s->sock);
    server_stop(s, NULL);
    return NULL;
}

int bench_redis_script_load(redisContext *c, const char *lua, char *sha, size_t shalen,
                            char *why, size_t whylen)
{
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", lua);
    int rc = -1;
    if (r != NULL && r->type == REDIS_REPLY_STRING && r->len < shalen) {
        snprintf(sha, shalen, "%s", r->str);
        rc = 0;
    } else {
        snprintf(why, whylen, "SCRIPT LOAD: %s",
                 r == NULL ? c->errstr : (r->type == REDIS_REPLY_ERROR ? r->str : "bad reply"));
    }
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

struct redis_job {
    const char *sock;
    const char *sha;
    const bench_keys *k;
    const bench_seq *seq;
    uint64_t offset;          /* where in seq this client starts */
    uint64_t budget_ns;
};

/* Run decisions for budget_ns on connection c; returns decisions made, or
 * 0 with an error in why. */
static uint64_t redis_loop(redisContext *c, const struct redis_job *j, double *rate,
                           uint64_t *allowed, char *why, size_t whylen)
{
    srl_policy p = bench_policy_allow(SRL_GCRA);
    uint64_t window_us = p.window_ns / 1000;
    char interval[32], capacity[32];
    snprintf(interval, sizeof interval, "%.6f", (double)window_us / p.permits);
    snprintf(capacity, sizeof capacity, "%llu", (unsigned long long)window_us);
    uint64_t n = 0, ok = 0, pos = j->offset;
    uint64_t t0 = bench_now_ns(), t1 = t0;
    while (t1 - t0 < j->budget_ns) {
        for (int b = 0; b < 64; b++) {
            const unsigned char *key = bench_key_at(j->k, j->seq->idx, pos, j->seq->len);
            if (++pos == j->seq->len)
                pos = 0;
            redisReply *r = redisCommand(c, "EVALSHA %s 1 %b %s %s 1", j->sha,
                                         key, (size_t)BENCH_KEY_LEN, interval, capacity);
            if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
                snprintf(why, whylen, "EVALSHA: %s",
                         r == NULL ? c->errstr
                                   : (r->type == REDIS_REPLY_ERROR ? r->str : "bad reply"));
                if (r != NULL)
                    freeReplyObject(r);
                return 0;
            }
            ok += r->element[0]->integer == 1;
            freeReplyObject(r);
            n++;
        }
        t1 = bench_now_ns();
    }
    *rate = (double)n * 1e9 / (double)(t1 - t0);
    *allowed = ok;
    return n;
}

struct redis_page {
    double rate[2];
    uint64_t n[2], allowed[2];
};

void bench_redis_run(const bench_opts *o, const bench_keys *k, const bench_seq *seq,
                     bench_redis_result *out)
{
    memset(out, 0, sizeof *out);
    char exe[512];
    if (find_on_path("redis-server", exe, sizeof exe) != 0) {
        snprintf(out->why, sizeof out->why, "redis-server not found on PATH");
        return;
    }
    struct redis_server s;
    redisContext *c = server_start(&s, exe, out->why, sizeof out->why);
    if (c == NULL)
        return;
    redisReply *r = redisCommand(c, "INFO server");
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *v = strstr(r->str, "redis_version:");
        if (v != NULL)
            sscanf(v + 14, "%31[^\r\n]", out->version);
    }
    if (r != NULL)
        freeReplyObject(r);
    char sha[64];
    if (bench_redis_script_load(c, gcra_lua, sha, sizeof sha, out->why, sizeof out->why) != 0) {
        server_stop(&s, c);
        return;
    }
    double secs = o->seconds < 2.0 ? o->seconds : 2.0;
    struct redis_job j = {s.sock, sha, k, seq, 0, (uint64_t)(secs * 1e9)};
    /* One client, in three placements: on the server's CPU (a round trip
     * is two context switches on one core), on the other CPU (a wake-up
     * across cores, slow on an idle VM whose vCPUs halt), and where the
     * scheduler likes.  The best of the three is Redis's figure, so the
     * ratio against srl is a lower bound. */
    cpu_set_t saved;
    int have_saved = sched_getaffinity(0, sizeof saved, &saved) == 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (int place = 0; place < 3; place++) {
        if (have_saved) {
            cpu_set_t m;
            CPU_ZERO(&m);
            if (place == 0)
                CPU_SET(0, &m);
            else if (place == 1 && ncpu > 1)
                CPU_SET(1, &m);
            else
                m = saved;
            sched_setaffinity(0, sizeof m, &m);
        }
        uint64_t allowed = 0;
        double rate = 0;
        j.offset = (uint64_t)place * (seq->len / 3);
        uint64_t n = redis_loop(c, &j, &rate, &allowed, out->why, sizeof out->why);
        if (have_saved)
            sched_setaffinity(0, sizeof saved, &saved);
        if (n == 0) {
            server_stop(&s, c);
            return;
        }
        out->rate_placed[place] = rate;
        if (rate > out->rate1) {
            out->rate1 = rate;
            out->allowed_frac = (double)allowed / (double)n;
        }
    }

    /* Two clients, each its own process and connection. */
    struct redis_page *pg = mmap(NULL, sizeof *pg, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (pg != MAP_FAILED) {
        memset(pg, 0, sizeof *pg);
        pid_t kids[2] = {-1, -1};
        for (int i = 0; i < 2; i++) {
            kids[i] = fork();
            if (kids[i] == 0) {
                struct timeval tv = {2, 0};
                redisContext *cc = redisConnectUnixWithTimeout(s.sock, tv);
                char w[160];
                struct redis_job jj = j;
                jj.offset = (uint64_t)i * (seq->len / 2);
                if (cc != NULL && cc->err == 0)
                    pg->n[i] = redis_loop(cc, &jj, &pg->rate[i], &pg->allowed[i],
                                          w, sizeof w);
                if (cc != NULL)
                    redisFree(cc);
                _exit(pg->n[i] ? 0 : 1);
            }
        }
        for (int i = 0; i < 2; i++) {
            int st;
            if (kids[i] > 0)
                while (waitpid(kids[i], &st, 0) < 0 && errno == EINTR)
                    ;
        }
        out->rate2 = pg->rate[0] + pg->rate[1];
        munmap(pg, sizeof *pg);
    }
    bench_tiered_run(c, s.sock, &out->tiered);
    bench_compound_run(o, k, seq, c, s.sock, &out->compound);
    out->available = 1;
    server_stop(&s, c);
}
