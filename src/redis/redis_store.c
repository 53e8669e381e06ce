/*
 * redis_store.c - the Redis store (srl_open_redis): per-key states live in a
 * Redis server, decided by a server-side Lua script, so several hosts share
 * one limit.
 *
 * WHAT IT HOLDS
 *   Keys under a prefix P (default "srl"):
 *     P:cfg        hash: policy (srl_policy_format text), esec, eusec (the
 *                  server's TIME at creation: the epoch of the store's clock)
 *     P:stats      hash: allowed, denied (HINCRBY in the script)
 *     P:k:<key>    the key's state (GCRA tat; token bucket "last frac
 *                  tokens"; sliding counter "window_start prev curr";
 *                  sliding log: a list of times; a compound: its limits'
 *                  texts joined by ';'), written with PX/PEXPIRE so it
 *                  expires exactly when the state comes to rest
 *   One Lua script per algorithm, a transcription of algo_*.c, in
 *   src/redis/NAME.lua, and one for compounds that holds all four
 *   (compound.lua: all or nothing in one call, as compound.c); embedded at
 *   build time: redis_scripts.h.
 *
 * INVARIANTS
 *   - Time is the server's TIME (so skewed hosts agree), in ns since the
 *     epoch in P:cfg.  Every time, count and product in a script is an
 *     exact integer (src/redis/num.lua: limbs base 2^24), so every policy
 *     within SRL_PERMITS_MAX and SRL_WINDOW_MAX_NS runs, for any time
 *     since the epoch: there is no horizon.
 *   - The scripts decide exactly as algo_*.c (same remaining, retry_after,
 *     reset_after, refund); waits come back as decimal strings.
 *   - A denied request writes nothing but the denied counter.
 *
 * CONCURRENCY AND FAULTS
 *   One connection per limiter, guarded by a mutex (threads take turns; a
 *   command is one round trip).  It is made lazily, re-made after fork (pid
 *   check) and after any I/O error.  A call's whole time (the wait for the
 *   mutex, connect, every write and read, redirections) is bounded by one
 *   deadline, the uri's timeout_ms (else lock_timeout_ms) after it began
 *   (call_begin); replies are bounded in size as they arrive (see "Bounded
 *   I/O").  Every failure returns SRL_ETIMEDOUT (the deadline passed),
 *   SRL_ESYS (refused, reset, a reply too large or unparsable, a
 *   redirection outside the map), SRL_EACCES or SRL_ECORRUPT (a reply no
 *   script gives) with *d from on_full flagged SRL_DECISION_DEGRADED.  A
 *   new connection runs AUTH and SELECT from the uri.  The next call
 *   reconnects; a failed connect backs off (10 ms doubling to 1 s: calls
 *   fail at once meanwhile).  An open that reaches no server still opens
 *   (cfg_checked 0): the first call that reaches one checks P:cfg then
 *   (cfg_check), a mismatch found so is sticky (cfg_mismatch).
 *
 *   The server is untrusted input: reply sizes, types and every decision
 *   field are checked (reply_decision: against the policy), a redirection is
 *   followed only to a node of the slot map, and a walk's SCAN calls are
 *   bounded against DBSIZE.
 */
#include "algo.h"
#include "errdetail.h"
#include "limiter.h"
#include "redis_cluster.h"
#include "redis_lease.h"
#include "redis_sentinel.h"
#include "redis_uri.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define PREFIX_MAX SRL__REDIS_PREFIX_MAX
#define SRL__REDIS_DEFERRED 1   /* open: no server reached, policy check deferred */

/* The scripts (src/redis/NAME.lua, embedded at build time by embed.py):
 * gcra_lua, tb_lua, sl_lua, sc_lua (prologue.lua + the algorithm's +
 * one.lua: their KEYS, ARGV and replies are described there), cmp_lua (a
 * compound: all four + compound.lua), open_lua (P:cfg) and slot_lua (a
 * cluster's slot hash). */
#include "redis_scripts.h"

/* A single limit's policy, or a compound's first. */
static inline const srl_policy *rpol(const srl_limiter *lim)
{
    return &lim->cmp.limits.limit[0];
}

static const char *const algo_lua[] = {
    [SRL_TOKEN_BUCKET] = tb_lua,
    [SRL_SLIDING_LOG] = sl_lua,
    [SRL_SLIDING_COUNTER] = sc_lua,
    [SRL_GCRA] = gcra_lua,
};

/* Each algorithm's name in compound.lua's ARGV (the algo table's keys). */
static const char algo_letter[] = {
    [SRL_TOKEN_BUCKET] = 't',
    [SRL_SLIDING_LOG] = 'l',
    [SRL_SLIDING_COUNTER] = 'c',
    [SRL_GCRA] = 'g',
};

/* Several limits, a ban period or tiers: compound.lua decides (its state
 * text holds the bans, and a tiered config's the key's tier: tier.lua). */
static int uses_cmp(const srl_limiter *lim)
{
    return lim->cmp.count > 1 || lim->cmp.penalty || lim->tier_count > 1;
}

static const char *script_of(const srl_limiter *lim)
{
    if (lim->cmp.conc >= 0)
        return conc_lua;   /* a concurrency limit alone (runnable) */
    return uses_cmp(lim) ? cmp_lua : algo_lua[rpol(lim)->algorithm];
}

struct rstore {
    srl_limiter lim;
    pthread_mutex_t mu;
    struct srl__rconn one;    /* the server (not a cluster), under mu */
    struct srl__cluster cl;   /* a cluster (u.cluster): masters and slot map, under mu */
    int replied;              /* cluster: node[] index of route()'s last reply, under mu */
    pid_t pid;                /* process that made the last connection */
    char sha[48];             /* of the algorithm's script, "" until loaded once */
    char esec[24], eusec[24]; /* the epoch of P:cfg, copied into each slot hash (cluster) */
    struct srl__redis_uri u;  /* where, who, db, timeout, prefix */
    uint64_t capacity;
    uint64_t timeouts;        /* atomic: a call that waits for mu may time out */
    uint64_t deadline_ns;     /* CLOCK_MONOTONIC: the end of the call holding mu */
    uint64_t created_unix_ns;
    srl_limits adopted;       /* open with cfg NULL: the policy read from P:cfg */
    int connect_failed;       /* under mu: the last ensure() could not connect */
    int sentinel_next;        /* under mu: the sentinel to ask first (the last that answered) */
    int cfg_checked;          /* under mu: P:cfg created or found equal (open_cfg) */
    int cfg_mismatch;         /* under mu: P:cfg holds another policy (sticky) */
    uint64_t mismatched;      /* atomic: decisions by on_full for cfg_mismatch */
    srl_tier adopted_tiers[SRL_TIERS_MAX - 1];   /* adopting: P:cfg's tiers 1.. */
    uint32_t adopted_tier_count;
    struct srl__lease_table leases;   /* own mutex: the keys of held units */
};

static struct rstore *rs_of(srl_limiter *lim) { return lim->impl; }

static int io_error(redisContext *c, int saved_errno)
{
    if (c != NULL && c->err == REDIS_ERR_IO &&
        (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT ||
         saved_errno == EINPROGRESS))
        return SRL_ETIMEDOUT;
    if (c != NULL && c->err == REDIS_ERR_IO && saved_errno != 0)
        errno = saved_errno;
    return SRL_ESYS;
}

/* Under mu: drop the connection (after an error, or inherited over fork). */
static void drop(struct srl__rconn *n)
{
    if (n->c != NULL)
        redisFree(n->c);
    n->c = NULL;
}

/* hiredis write()s: a server gone away must not kill the caller with
 * SIGPIPE.  Block it in this thread around the I/O and swallow only a
 * SIGPIPE that I/O raised (one already pending stays pending). */
struct pipe_guard {
    sigset_t set, old;
    int was_pending;
};

static void pipe_guard_begin(struct pipe_guard *g)
{
    sigemptyset(&g->set);
    sigaddset(&g->set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &g->set, &g->old);
    sigset_t pending;
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
}

static void pipe_guard_end(struct pipe_guard *g)
{
    int saved = errno;
    if (!g->was_pending) {
        sigset_t pending;
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE)) {
            struct timespec zero = {0, 0};
            while (sigtimedwait(&g->set, NULL, &zero) < 0 && errno == EINTR) {
            }
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
    errno = saved;
}

/*
 * Bounded I/O.  Every read and write of a call waits at most what is left
 * of the call's deadline (r->deadline_ns, set by whoever took mu): the
 * socket's SO_RCVTIMEO/SO_SNDTIMEO are set to the time left before each
 * read() and write(), and the reply is parsed between reads, so a server
 * that trickles a valid reply cannot stretch a call past timeout_ms.
 *
 * Every reply is bounded as it arrives: one item (a line, a bulk string:
 * hiredis keeps only the item it is parsing buffered) at most
 * REPLY_ITEM_MAX bytes, checked before each read; at most REPLY_BYTES_MAX
 * bytes in all its strings and REPLY_ELEMENTS_MAX array elements, checked
 * by the reader's object functions before an array is allocated.  srl's
 * replies are small (a decision, a SHA, a SCAN batch of about COUNT keys
 * of at most PREFIX_MAX + SRL_KEY_MAX + 3 bytes, a slot map of at most
 * SRL__CLUSTER_NODES masters), so anything larger is a hostile or broken
 * server: SRL_ESYS with errno EMSGSIZE (a reply that does not parse:
 * EPROTO).  The caller then drops the connection (its stream is
 * mid-reply); the next call makes a new one.
 */
#define REPLY_ITEM_MAX (64u << 10)
#define REPLY_BYTES_MAX (8u << 20)
#define REPLY_ELEMENTS_MAX (1u << 19)

struct reply_budget {
    size_t bytes, elements;
    int over;
};

/* hiredis's own object functions (base_fns: what every new reader's fn
 * points to, seen on the first connection) and srl's wrappers of them. */
static redisReplyObjectFunctions base_fns, bounded_fns;
static redisReplyObjectFunctions *fns_seen;   /* atomic: every writer stores the same */
static pthread_once_t fns_once = PTHREAD_ONCE_INIT;

static void *bounded_string(const redisReadTask *t, char *str, size_t len)
{
    struct reply_budget *b = t->privdata;
    if (b != NULL && (len > REPLY_BYTES_MAX || (b->bytes += len) > REPLY_BYTES_MAX)) {
        b->over = 1;
        return NULL;   /* the reader fails: no object is made */
    }
    return base_fns.createString(t, str, len);
}

static void *bounded_array(const redisReadTask *t, int elements)
{
    struct reply_budget *b = t->privdata;
    if (b != NULL && (elements < 0 || (size_t)elements > REPLY_ELEMENTS_MAX ||
                      (b->elements += (size_t)elements) > REPLY_ELEMENTS_MAX)) {
        b->over = 1;
        return NULL;
    }
    return base_fns.createArray(t, elements);
}

static void fns_init(void)
{
    base_fns = *__atomic_load_n(&fns_seen, __ATOMIC_ACQUIRE);
    bounded_fns = base_fns;
    bounded_fns.createString = bounded_string;
    bounded_fns.createArray = bounded_array;
}

/* ns left of the call holding mu, 0 once its deadline has passed. */
static uint64_t left_ns(const struct rstore *r)
{
    uint64_t now = srl__clock_ns(CLOCK_MONOTONIC);
    return now < r->deadline_ns ? r->deadline_ns - now : 0;
}

/* The socket's wait for one read (SO_RCVTIMEO) or write (SO_SNDTIMEO): ns,
 * rounded up to a microsecond (a zero timeval would mean no bound). */
static void set_wait(redisContext *c, int which, uint64_t ns)
{
    uint64_t us = (ns + 999) / 1000;
    struct timeval tv = {.tv_sec = (time_t)(us / 1000000),
                         .tv_usec = (suseconds_t)(us % 1000000)};
    (void)setsockopt(c->fd, SOL_SOCKET, which, &tv, sizeof tv);
}

/* A failed read or write: the deadline passed, or the socket failed. */
static int io_fail(const struct rstore *r, redisContext *c, int e)
{
    return left_ns(r) == 0 ? SRL_ETIMEDOUT : io_error(c, e);
}

/* The server c talks to, for an error's sentence: host:port or the
 * socket's path. */
static const char *peer_name(const redisContext *c, char *buf, size_t len)
{
    if (c->connection_type == REDIS_CONN_UNIX)
        snprintf(buf, len, "%s", c->unix_sock.path ? c->unix_sock.path : "?");
    else
        snprintf(buf, len, "%s:%d", c->tcp.host ? c->tcp.host : "?", c->tcp.port);
    return buf;
}

/* strerror(e) with a lower-case first letter, as a clause. */
static void say_errno(const char *what, const char *peer, int e)
{
    char m[128];
    snprintf(m, sizeof m, "%s", strerror(e));
    if (m[0] >= 'A' && m[0] <= 'Z' && !(m[1] >= 'A' && m[1] <= 'Z'))
        m[0] = (char)(m[0] - 'A' + 'a');
    srl__err_set("%s%s: %s", what, peer, m);
}

/* The sentence of a failed command on c (srl_last_error). */
static void io_detail(const struct rstore *r, const redisContext *c, int rc)
{
    char peer[320];
    peer_name(c, peer, sizeof peer);
    if (rc == SRL_ETIMEDOUT)
        srl__err_set("%s: no reply within %u ms", peer, (unsigned)(r->u.timeout_ms
                     ? r->u.timeout_ms : r->lim.lock_timeout_ms));
    else if (rc == SRL_ESYS && errno == EPROTO)
        srl__err_set("reply from %s is not RESP: is it Redis?", peer);
    else if (rc == SRL_ESYS && errno == EMSGSIZE)
        srl__err_set("reply from %s is larger than srl's bounds (64 KiB a string, 8 MiB a "
                     "reply): is it Redis?", peer);
    else if (rc == SRL_ESYS && errno != 0)
        say_errno("", peer, errno);
}

/* Under mu: write what c has queued, within the deadline. */
static int flush_out(const struct rstore *r, redisContext *c)
{
    int done = 0;
    while (!done) {
        uint64_t left = left_ns(r);
        if (left == 0)
            return SRL_ETIMEDOUT;
        set_wait(c, SO_SNDTIMEO, left);
        errno = 0;
        if (redisBufferWrite(c, &done) != REDIS_OK)
            return io_fail(r, c, errno);
    }
    return 0;
}

/* Under mu: the next reply on c, within the deadline and the bounds of *b
 * (one command's, or shared by a pipeline's replies: their sum is bounded,
 * not each).  0 with *out set, or an SRL_E* code (*out NULL: drop the
 * connection). */
static int read_reply(const struct rstore *r, redisContext *c, struct reply_budget *b,
                      redisReply **out)
{
    void *rep = NULL;
    int rc = 0;
    c->reader->privdata = b;
    for (;;) {
        if (redisGetReplyFromReader(c, &rep) != REDIS_OK) {
            errno = b->over ? EMSGSIZE : EPROTO;
            rc = SRL_ESYS;
            break;
        }
        if (rep != NULL)
            break;
        if (c->reader->len - c->reader->pos > REPLY_ITEM_MAX) {
            errno = EMSGSIZE;
            rc = SRL_ESYS;
            break;
        }
        uint64_t left = left_ns(r);
        if (left == 0) {
            rc = SRL_ETIMEDOUT;
            break;
        }
        set_wait(c, SO_RCVTIMEO, left);
        errno = 0;
        if (redisBufferRead(c) != REDIS_OK) {
            rc = io_fail(r, c, errno);
            break;
        }
    }
    c->reader->privdata = NULL;
    *out = rep;
    return rc;
}

/* One command on c, bounded as above, with SIGPIPE kept from the caller.
 * NULL with *rc set on failure (the caller drops c). */
static redisReply *raw(const struct rstore *r, redisContext *c, int argc, const char **argv,
                       const size_t *lens, int *rc)
{
    struct pipe_guard g;
    pipe_guard_begin(&g);
    redisReply *rep = NULL;
    *rc = redisAppendCommandArgv(c, argc, argv, lens) == REDIS_OK ? 0 : SRL_ENOMEM;
    if (*rc == 0)
        *rc = flush_out(r, c);
    struct reply_budget b = {0};
    if (*rc == 0)
        *rc = read_reply(r, c, &b, &rep);
    pipe_guard_end(&g);
    if (*rc != 0)
        io_detail(r, c, *rc);
    return rep;
}

/* The code for an error reply: the server wants (other) credentials, or
 * something this store does not expect. */
static int reply_error(const redisReply *rep)
{
    if (strncmp(rep->str, "NOAUTH", 6) == 0 || strncmp(rep->str, "WRONGPASS", 9) == 0 ||
        strncmp(rep->str, "NOPERM", 6) == 0 || strstr(rep->str, "invalid password") != NULL ||
        strstr(rep->str, "invalid username-password") != NULL)
        return SRL_EACCES;
    return SRL_ESYS;
}

/* Under mu: the sentence of an error reply route() just gave. */
static void reply_detail(const struct rstore *r, const redisReply *rep)
{
    const redisContext *c = r->u.cluster ? r->cl.node[r->replied].c : r->one.c;
    char peer[320] = "the server";
    if (c != NULL)
        peer_name(c, peer, sizeof peer);
    srl__err_set("%s: %.160s", peer, rep->str);
}

/* AUTH and SELECT on a new connection, as the uri says. */
static int handshake(struct rstore *r, redisContext *c)
{
    char db[16];
    snprintf(db, sizeof db, "%d", r->u.db);
    const char *auth_user[] = {"AUTH", r->u.user, r->u.password};
    const char *auth[] = {"AUTH", r->u.password};
    const char *sel[] = {"SELECT", db};
    int has_user = r->u.user[0] != '\0';
    for (int step = 0; step < 2; step++) {
        if (step == 0 && r->u.password[0] == '\0')
            continue;
        if (step == 1 && r->u.db == 0)
            continue;
        const char **argv = step == 1 ? sel : has_user ? auth_user : auth;
        int argc = step == 0 ? 2 + has_user : 2;
        size_t lens[3];
        for (int i = 0; i < argc; i++)
            lens[i] = strlen(argv[i]);
        int rc;
        redisReply *rep = raw(r, c, argc, argv, lens, &rc);
        if (rep == NULL)
            return rc;
        if (rep->type == REDIS_REPLY_ERROR) {
            rc = step == 0 ? SRL_EACCES : reply_error(rep) == SRL_EACCES ? SRL_EACCES : SRL_EINVAL;
            char peer[320];
            srl__err_set("%s on %s: %.160s", argv[0], peer_name(c, peer, sizeof peer),
                         rep->str);
        }
        freeReplyObject(rep);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static uint32_t timeout_ms(const struct rstore *r)
{
    return r->u.timeout_ms ? r->u.timeout_ms : r->lim.lock_timeout_ms;
}

/* Begin a call: take mu, waiting at most timeout_ms, and set the call's
 * deadline, timeout_ms after the call began: the wait for mu, connect,
 * every write and read, redirections and their waits all come out of it.
 * 0, or SRL_ETIMEDOUT (mu not taken; counted). */
static int call_begin(struct rstore *r)
{
    uint64_t end = srl__clock_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_ms(r) * 1000000ull;
    struct timespec ts = {.tv_sec = (time_t)(end / SRL_NS_PER_S),
                          .tv_nsec = (long)(end % SRL_NS_PER_S)};
    srl__err_clear();
    int e = pthread_mutex_clocklock(&r->mu, CLOCK_MONOTONIC, &ts);
    if (e != 0) {
        __atomic_add_fetch(&r->timeouts, 1, __ATOMIC_RELAXED);
        srl__err_set("%s: no turn on the handle's connection within %u ms (other threads' "
                     "calls held it)", r->u.prefix, timeout_ms(r));
        return SRL_ETIMEDOUT;
    }
    r->deadline_ns = end;
    return 0;
}

/* End a call begun with call_begin: count its timeout, release mu. */
static void call_end(struct rstore *r, int rc)
{
    if (rc == SRL_ETIMEDOUT)
        __atomic_add_fetch(&r->timeouts, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&r->mu);
}

/* Under mu: a connect to n failed with rc (srl_last_error says why): no
 * new attempt for 10 ms, doubling up to 1 s.  Returns rc. */
static int connect_backoff(struct srl__rconn *n, int rc)
{
    uint64_t wait_ms = n->failures < 7 ? 10ull << n->failures : 1000;
    n->failures++;
    n->retry_at_ns = srl__clock_ns(CLOCK_MONOTONIC) + wait_ms * 1000000ull;
    n->last_rc = rc;
    (void)srl_last_error(n->last_msg, sizeof n->last_msg);
    return rc;
}

/* Under mu: make sure n->c is a live connection of this process.  After a
 * failed connect the next attempts wait: 10 ms, doubling up to 1 s; calls
 * in between fail at once with the last connect's code, so a server that is
 * down costs one bounded wait per backoff step, not one per request.  Each
 * cluster node has its own connection and its own backoff. */
static int ensure(struct rstore *r, struct srl__rconn *n)
{
    if (n->c != NULL && n->pid != getpid())
        drop(n);   /* the parent's socket: never share a stream with it */
    if (n->c != NULL)
        return 0;
    if (n->failures > 0 && srl__clock_ns(CLOCK_MONOTONIC) < n->retry_at_ns) {
        srl__err_set("%s (retrying in %llu ms)", n->last_msg,
                     (unsigned long long)((n->retry_at_ns - srl__clock_ns(CLOCK_MONOTONIC)) /
                                          1000000 + 1));
        return n->last_rc;
    }
    uint64_t left = left_ns(r);
    if (left == 0)
        return SRL_ETIMEDOUT;   /* the call's time is up: no connect, no backoff */
    if (r->u.sentinel) {
        /* Every new connection asks the sentinels where the master is now
         * (redis_sentinel.c): a connection error or a -READONLY dropped the
         * last one.  Their failure is a failed connect (same backoff). */
        int rc = srl__sentinel_master(&r->u, r->deadline_ns, &r->sentinel_next, n->host,
                                      &n->port);
        r->connect_failed = rc != 0;
        if (rc != 0)
            return connect_backoff(n, rc);
        left = left_ns(r);
    }
    uint64_t us = (left + 999) / 1000;
    struct timeval tv = {.tv_sec = (time_t)(us / 1000000),
                         .tv_usec = (suseconds_t)(us % 1000000)};
    errno = 0;
    redisContext *c = n->host[0] == '\0'
                          ? redisConnectUnixWithTimeout(r->u.unix_path, tv)
                          : redisConnectWithTimeout(n->host, n->port, tv);
    int e = errno;
    if (c == NULL)
        return SRL_ENOMEM;
    int rc = 0;
    r->connect_failed = c->err != 0;
    if (c->err != 0) {
        rc = io_error(c, e ? e : errno);
        if (rc == SRL_ESYS && c->err == REDIS_ERR_IO && e == ETIMEDOUT)
            rc = SRL_ETIMEDOUT;
        char peer[320];
        if (n->host[0] == '\0')
            snprintf(peer, sizeof peer, "%s", r->u.unix_path);
        else
            snprintf(peer, sizeof peer, "%s:%d", n->host, n->port);
        if (rc == SRL_ETIMEDOUT)
            srl__err_set("connect %s: no answer within %u ms", peer, timeout_ms(r));
        else if (c->err == REDIS_ERR_IO && (e ? e : errno) != 0)
            say_errno("connect ", peer, e ? e : errno);
        else
            srl__err_set("connect %s: %.120s", peer, c->errstr);
    } else {
        __atomic_store_n(&fns_seen, c->reader->fn, __ATOMIC_RELEASE);   /* the defaults */
        pthread_once(&fns_once, fns_init);
        c->reader->fn = &bounded_fns;   /* replies bounded as they arrive */
        rc = handshake(r, c);
    }
    if (rc != 0) {
        redisFree(c);
        return connect_backoff(n, rc);
    }
    n->failures = 0;
    n->c = c;
    n->pid = r->pid = getpid();
    return 0;
}

/* Under mu: one command on n; NULL with *rc set on failure (connection
 * dropped). */
static redisReply *cmd_on(struct rstore *r, struct srl__rconn *n, int argc, const char **argv,
                          const size_t *lens, int *rc)
{
    *rc = ensure(r, n);
    if (*rc != 0)
        return NULL;
    redisReply *rep = raw(r, n->c, argc, argv, lens, rc);
    if (rep == NULL)
        drop(n);
    return rep;
}

/*
 * Under mu: ask a cluster for its slot map (CLUSTER SLOTS) and take it.
 * Asks the known masters (and the uri's seeds), those with a live
 * connection first (a node that just failed has none), skipping any in
 * connect backoff, and stops at the first that answers, or after
 * REFRESH_TRIES that could not (each a bounded wait): a call never waits on
 * every node of a broken cluster.  0 or the last failure's code.
 */
#define REFRESH_TRIES 3
static int refresh(struct rstore *r)
{
    struct srl__cluster *cl = &r->cl;
    for (int i = 0; i < r->u.nseeds; i++)
        (void)srl__cluster_node(cl, r->u.seed[i].host, r->u.seed[i].port, 1);
    int rc = SRL_ESYS, tries = 0;
    uint64_t now = srl__clock_ns(CLOCK_MONOTONIC);
    static const char *const argv[] = {"CLUSTER", "SLOTS"};
    static const size_t lens[] = {7, 5};
    for (size_t k = 0; k < 2 * cl->n && tries < REFRESH_TRIES; k++) {
        struct srl__rconn *n = &cl->node[k % cl->n];
        if ((k < cl->n) != (n->c != NULL))
            continue;   /* pass 1: live connections; pass 2: the others */
        if (n->c == NULL && n->failures > 0 && now < n->retry_at_ns) {
            rc = n->last_rc;
            continue;
        }
        tries++;
        redisReply *rep = cmd_on(r, n, 2, (const char **)argv, lens, &rc);
        if (rep == NULL)
            continue;
        char host[sizeof n->host];
        memcpy(host, n->host, sizeof host);   /* apply may move node[] */
        rc = rep->type == REDIS_REPLY_ERROR ? reply_error(rep)
                                            : srl__cluster_apply_slots(cl, rep, host);
        freeReplyObject(rep);
        if (rc == 0)
            return 0;
    }
    return rc;
}

/* Redirections (MOVED, ASK) one command follows at once; past that each
 * waits first (see route). */
#define MAX_HOPS 5

/*
 * Under mu: one command about the Redis key k: on the server (behind
 * Sentinel, a -READONLY reply is retried once on a new connection, to the
 * master the sentinels name then), or on a cluster on the master of k's
 * slot.  A cluster's MOVED updates the slot, marks the map stale (refreshed
 * on the next routing) and retries there; ASK retries once on the named
 * node after ASKING; TRYAGAIN (a script's
 * keys split by a migration in progress) retries after 1, 2, 4 ... 64 ms.
 * Redirections past MAX_HOPS wait the same way before each retry: masters
 * that send a slot back and forth (the moment SETSLOT NODE has reached one
 * and not the other) settle within ms.  The call's deadline bounds it all:
 * a wait that would outlast it is SRL_ETIMEDOUT.  A MOVED or ASK naming a
 * node the map does not hold refreshes the map from a known node first and
 * is followed only if the new map names it, else SRL_ESYS with errno
 * EPROTO: a hostile reply cannot send the credentials elsewhere.  A
 * connection failure marks the map stale (the node may have been
 * replaced).  NULL with *rc set on failure.
 */
static redisReply *route(struct rstore *r, const char *k, size_t kl, int argc, const char **argv,
                         const size_t *lens, int *rc)
{
    if (!r->u.cluster) {
        redisReply *rep = cmd_on(r, &r->one, argc, argv, lens, rc);
        if (r->u.sentinel && rep != NULL && rep->type == REDIS_REPLY_ERROR &&
            strstr(rep->str, "READONLY") != NULL) {
            /* A demoted master (or a replica a sentinel named for a
             * moment): a new connection asks the sentinels again; once. */
            freeReplyObject(rep);
            drop(&r->one);
            rep = cmd_on(r, &r->one, argc, argv, lens, rc);
        }
        return rep;
    }
    struct srl__cluster *cl = &r->cl;
    unsigned slot = srl__keyslot(k, kl);
    int ix = -1, asking = 0, hops = 0;
    uint64_t nap_us = 1000;
    for (;;) {
        if (ix < 0) {
            if (cl->stale || cl->slot[slot] == 0) {
                *rc = refresh(r);
                if (cl->slot[slot] == 0) {
                    if (*rc == 0)
                        *rc = SRL_ESYS;   /* no master serves the slot: cluster down */
                    return NULL;
                }
            }
            ix = cl->slot[slot] - 1;
        }
        struct srl__rconn *n = &cl->node[ix];
        if (asking) {
            static const char *const ask[] = {"ASKING"};
            static const size_t asklen[] = {6};
            redisReply *a = cmd_on(r, n, 1, (const char **)ask, asklen, rc);
            if (a == NULL) {
                cl->stale = 1;
                return NULL;
            }
            freeReplyObject(a);
        }
        redisReply *rep = cmd_on(r, n, argc, argv, lens, rc);
        if (rep == NULL) {
            cl->stale = 1;
            return NULL;
        }
        unsigned s;
        char host[256];
        int port;
        enum srl__redirect kind = srl__cluster_redirect(rep, &s, host, &port);
        if (kind == SRL__NO_REDIRECT) {
            r->replied = ix;
            return rep;
        }
        freeReplyObject(rep);
        asking = 0;
        if (kind == SRL__TRYAGAIN || hops >= MAX_HOPS) {
            if (left_ns(r) <= nap_us * 1000) {
                *rc = SRL_ETIMEDOUT;   /* the nap would outlast the call */
                return NULL;
            }
            struct timespec ts = {0, (long)nap_us * 1000};
            nanosleep(&ts, NULL);
            nap_us = nap_us < 64000 ? 2 * nap_us : nap_us;
        }
        if (kind == SRL__TRYAGAIN) {
            ix = -1;   /* ask the slot's owner again */
            continue;
        }
        hops++;
        if (host[0] == '\0')   /* "MOVED 12 :6380": the replier's own host */
            memcpy(host, n->host, sizeof host);
        ix = srl__cluster_node(cl, host, port, 0);
        if (ix < 0) {
            /* Not a node of the map: ask a known node for the map again,
             * and follow only if it names the node now.  A redirection
             * never makes srl connect (and AUTH) to a host no map named. */
            *rc = refresh(r);
            ix = *rc == 0 ? srl__cluster_node(cl, host, port, 0) : -1;
            if (ix < 0) {
                if (*rc == 0) {
                    errno = EPROTO;
                    *rc = SRL_ESYS;
                }
                return NULL;
            }
        }
        if (kind == SRL__MOVED) {
            cl->slot[s] = (uint16_t)(ix + 1);
            cl->stale = 1;
        } else {
            asking = 1;
        }
    }
}

/* Under mu: SCRIPT LOAD the acquire script on the server; on a cluster on
 * the master of key k, or (k NULL) on the node that gave route()'s last
 * reply: the one that said NOSCRIPT, which after an ASK is not k's master
 * in the map.  0 or an SRL_E* code. */
static int load_script(struct rstore *r, const char *k, size_t kl)
{
    const char *lua = script_of(&r->lim);
    const char *argv[] = {"SCRIPT", "LOAD", lua};
    size_t lens[] = {6, 4, strlen(lua)};
    int rc;
    redisReply *rep = k == NULL && r->u.cluster
                          ? cmd_on(r, &r->cl.node[r->replied], 3, argv, lens, &rc)
                          : route(r, k, kl, 3, argv, lens, &rc);
    if (rep == NULL)
        return rc;
    rc = rep->type == REDIS_REPLY_ERROR ? reply_error(rep) : SRL_ESYS;
    if (rep->type == REDIS_REPLY_STRING && rep->len < sizeof r->sha) {
        memcpy(r->sha, rep->str, rep->len);
        r->sha[rep->len] = '\0';
        rc = 0;
    }
    freeReplyObject(rep);
    return rc;
}

static int runnable(const srl_limits *l);

/* P:cfg's policy text: the limits' canonical text, then " tier.NAME=TEXT"
 * per tier, so hosts with other tiers differ as hosts with another policy
 * do (and a version without tiers sees another policy). */
#define CFG_TEXT_MAX (SRL_TIERS_MAX * (SRL_LIMITS_TEXT_MAX + SRL_TIER_NAME_MAX + 8))
static int limits_text(const srl_limits *l, char *buf, size_t len)
{
    return l->count > 1 ? srl_limits_format(l, buf, len)
                        : srl_policy_format(&l->limit[0], buf, len);
}

static int cfg_text(const srl_limits *base, const srl_tier *tiers, uint32_t n, char *buf,
                    size_t len)
{
    int rc = limits_text(base, buf, len);
    if (rc < 0)
        return rc;
    size_t used = strlen(buf);
    for (uint32_t t = 0; t < n; t++) {
        char one[SRL_LIMITS_TEXT_MAX];
        if ((rc = limits_text(&tiers[t].limits, one, sizeof one)) < 0)
            return rc;
        int w = snprintf(buf + used, len - used, " tier.%s=%s", tiers[t].name, one);
        if (w < 0 || (size_t)w >= len - used)
            return SRL_EINVAL;
        used += (size_t)w;
    }
    return 0;
}

/* Adopting: a stored text with tiers (cfg_text's), parsed as untrusted
 * into r->adopted and r->adopted_tiers.  0, SRL_ECORRUPT (not a text
 * cfg_text writes) or SRL_ENOTSUP (a tier no script runs). */
static int adopt_tiers(struct rstore *r, const char *text)
{
    srl_config c;
    srl_policy_error pe;
    srl_config_init(&c);
    if (srl_config_parse(&c, text, &pe) != 0)
        return SRL_ECORRUPT;
    srl_limits base = c.limits, canon;
    int rc = 0;
    if ((base.count == 0 && srl_limits_of(&c.policy, &base) != 0) ||
        srl__limits_canonical(&base, &canon) != 0 || c.tier_count == 0)
        rc = SRL_ECORRUPT;
    for (uint32_t t = 0; rc == 0 && t < c.tier_count; t++) {
        r->adopted_tiers[t] = c.tiers[t];
        if (srl__limits_canonical(&c.tiers[t].limits, &r->adopted_tiers[t].limits) != 0)
            rc = SRL_ECORRUPT;
        else if (!runnable(&r->adopted_tiers[t].limits))
            rc = SRL_ENOTSUP;
    }
    char again[CFG_TEXT_MAX];
    /* Only the policy and its tiers: any other option is not ours. */
    if (rc == 0 && (cfg_text(&canon, r->adopted_tiers, c.tier_count, again, sizeof again) != 0 ||
                    strcmp(again, text) != 0))
        rc = SRL_ECORRUPT;
    if (rc == 0 && !runnable(&canon))
        rc = SRL_ENOTSUP;
    if (rc == 0) {
        r->adopted = canon;
        r->adopted_tier_count = c.tier_count;
    }
    srl_config_free(&c);
    return rc;
}

/* Under mu: create P:cfg with this limiter's policy, or check the stored
 * one; with adopt, take the stored policy instead (never create).  Sets
 * created_unix_ns from the server's TIME at P:cfg's creation.  0,
 * SRL_EMISMATCH, SRL_ENOENT (adopt: no P:cfg), SRL_ECORRUPT (adopt: a
 * policy text this version cannot use) or a connection error. */
static int open_cfg(struct rstore *r, int adopt)
{
    char ptext[CFG_TEXT_MAX] = "", cfgkey[PREFIX_MAX + 8];
    int rc = adopt ? 0
                   : cfg_text(&r->lim.cmp.limits, r->lim.tier_def, r->lim.tier_count - 1, ptext,
                              sizeof ptext);
    if (rc < 0)
        return rc;
    snprintf(cfgkey, sizeof cfgkey, "%s:cfg", r->u.prefix);
    const char *argv[] = {"EVAL", open_lua, "1", cfgkey, ptext};
    size_t lens[] = {4, sizeof open_lua - 1, 1, strlen(cfgkey), strlen(ptext)};
    redisReply *rep = route(r, cfgkey, strlen(cfgkey), 5, argv, lens, &rc);
    if (rep == NULL)
        return rc;
    rc = SRL_ESYS;
    redisReply *const *e = rep->element;
    if (rep->type == REDIS_REPLY_ERROR) {
        rc = reply_error(rep);
        reply_detail(r, rep);
    } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
               e[0]->type == REDIS_REPLY_INTEGER && e[0]->integer != 1) {
        rc = e[0]->integer == 0 ? SRL_EMISMATCH : SRL_ENOENT;
        if (rc == SRL_EMISMATCH)
            srl__err_set("%s holds another policy than this limiter's '%s' (rlctl URI info "
                         "shows it)", cfgkey, ptext);
    } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 4 &&
               e[0]->type == REDIS_REPLY_INTEGER) {
        int strings = 1;
        for (size_t i = 1; i < 4; i++)
            strings &= e[i]->type == REDIS_REPLY_STRING;
        rc = strings ? 0 : SRL_ESYS;
        srl_limits l, p;
        if (rc == 0 && adopt) {
            /* The stored text comes from another host: parse it as
             * untrusted, and only a policy this store can run is taken. */
            srl_policy_error pe;
            if (e[1]->len >= sizeof ptext)
                rc = SRL_ECORRUPT;
            else
                memcpy(ptext, e[1]->str, e[1]->len + 1);
            if (rc == 0 && strstr(ptext, " tier.") != NULL)
                rc = adopt_tiers(r, ptext);
            else if (rc == 0 && (srl_limits_parse_ex(ptext, &l, &pe) != 0 ||
                                 srl__limits_canonical(&l, &p) != 0))
                rc = SRL_ECORRUPT;
            else if (rc == 0 && !runnable(&p))
                rc = SRL_ENOTSUP;   /* e.g. concurrency: no script holds leases */
            else if (rc == 0)
                r->adopted = p;   /* srl_open_redis re-inits the limiter with it */
        }
        if (rc == 0 && (e[2]->len >= sizeof r->esec || e[3]->len >= sizeof r->eusec))
            rc = SRL_ECORRUPT;
        if (rc == 0) {
            memcpy(r->esec, e[2]->str, e[2]->len + 1);
            memcpy(r->eusec, e[3]->str, e[3]->len + 1);
            uint64_t sec = strtoull(e[2]->str, NULL, 10), usec = strtoull(e[3]->str, NULL, 10);
            r->created_unix_ns = sec * SRL_NS_PER_S + usec * 1000ull;
        }
    }
    freeReplyObject(rep);
    return rc;
}

/* Under mu: the policy check an open made without a server (Redis down
 * then: see srl_open_redis), done at the first call that reaches one.
 * 0 once P:cfg is created or found equal; SRL_EMISMATCH, from then on
 * without asking the server again (the stored policy changes only when a
 * person deletes P:cfg: reopen then); else the connection's error (tried
 * again at the next call). */
static int cfg_check(struct rstore *r)
{
    if (r->cfg_mismatch)
        return SRL_EMISMATCH;
    if (r->cfg_checked)
        return 0;
    int rc = open_cfg(r, 0);
    r->cfg_checked = rc == 0;
    r->cfg_mismatch = rc == SRL_EMISMATCH;
    return rc;
}

static size_t key_name(const struct rstore *r, const char *what, const void *key, size_t len,
                       char *buf)
{
    size_t n = (size_t)snprintf(buf, PREFIX_MAX + 8, "%s:%s", r->u.prefix, what);
    memcpy(buf + n, key, len);
    return n + len;
}

/* A cluster's slot hash: "P:s:{tag}", in the slot of the Redis key k
 * (buf: PREFIX_MAX + 16 bytes). */
static void slot_hash_name(const struct rstore *r, const char *k, size_t kl, char *buf)
{
    char tag[8];
    snprintf(buf, PREFIX_MAX + 16, "%s:s:{%s}", r->u.prefix,
             srl__slot_tag(srl__keyslot(k, kl), tag));
}

/* The arguments of one EVALSHA of the algorithm's script, but the key:
 * EVALSHA sha 3 key cfg stats mode cost permits window now capacity, then
 * max_wait dry (SCRIPT_XARGS); a compound's (uses_cmp): EVALSHA sha 3 key
 * cfg stats mode cost n "" now "" max_wait dry and per limit letter permits
 * window capacity penalty. */
#define SCRIPT_ARGC 12
#define SCRIPT_XARGS 2
#define SCRIPT_ARGS_PER_LIMIT 5
/* A tiered config's (tier.lua) add the request's tier ("own": the key's)
 * and the table: its count, then per tier its number of limits and theirs. */
#define SCRIPT_LIMIT_ARGS (SCRIPT_ARGS_PER_LIMIT * SRL_LIMITS_MAX)
#define SCRIPT_TIER_ARGS (2 + SRL_TIERS_MAX * (1 + SCRIPT_LIMIT_ARGS))
#define SCRIPT_ARGC_MAX (SCRIPT_ARGC + SCRIPT_XARGS + SCRIPT_LIMIT_ARGS + SCRIPT_TIER_ARGS)
struct script_call {
    char cfg[PREFIX_MAX + 16], st[PREFIX_MAX + 16];
    char a_cost[24], a_P[24], a_W[24], a_now[24], a_cap[24], a_mode[2];
    char a_maxw[24], a_dry[2];   /* '0' but for srl_reserve; '1' on a dry-run handle */
    /* Per tier (0 without tiers): its limits' count, letters and numbers. */
    char a_n[SRL_TIERS_MAX][4], a_letter[SRL_TIERS_MAX][SRL_LIMITS_MAX][2];
    char a_lim[SRL_TIERS_MAX][SRL_LIMITS_MAX][SCRIPT_ARGS_PER_LIMIT - 1][24];
    char a_tier[12], a_tiers[12];
    int argc;
    const char *xv[SCRIPT_LIMIT_ARGS + SCRIPT_TIER_ARGS];   /* after the fixed ones */
    const char *argv[SCRIPT_ARGC_MAX];
    size_t lens[SCRIPT_ARGC_MAX];
};

/* Tier t's limits into *sc (its count, then per limit letter permits
 * window capacity penalty); the pointers to them at xv[at..], returned
 * past the last. */
static int script_limits(const srl_limiter *lim, struct script_call *sc, uint32_t t, int at)
{
    const srl_limits *l = &srl__tier_cmp(lim, t)->limits;
    snprintf(sc->a_n[t], sizeof sc->a_n[t], "%u", l->count);
    for (uint32_t i = 0; i < l->count; i++) {
        const srl_policy *p = &l->limit[i];
        char (*f)[24] = sc->a_lim[t][i];
        sc->a_letter[t][i][0] = algo_letter[p->algorithm];
        sc->a_letter[t][i][1] = '\0';
        snprintf(f[0], sizeof f[0], "%u", p->permits);
        snprintf(f[1], sizeof f[1], "%llu", (unsigned long long)p->window_ns);
        snprintf(f[2], sizeof f[2], "%u", srl__capacity(p));
        snprintf(f[3], sizeof f[3], "%llu", (unsigned long long)p->penalty_ns);
        sc->xv[at++] = sc->a_letter[t][i];
        for (int k = 0; k < SCRIPT_ARGS_PER_LIMIT - 1; k++)
            sc->xv[at++] = f[k];
    }
    return at;
}

/* Fill *sc for mode, cost and tier (SRL__OWN_TIER: the key's own, which
 * the script reads); then script_argv() per key and attempt. */
#define SRL__OWN_TIER UINT32_MAX
static void script_init(const srl_limiter *lim, struct script_call *sc, char mode, uint32_t cost,
                        uint32_t tier)
{
    const struct rstore *r = lim->impl;
    snprintf(sc->cfg, sizeof sc->cfg, "%s:cfg", r->u.prefix);
    snprintf(sc->st, sizeof sc->st, "%s:stats", r->u.prefix);
    snprintf(sc->a_cost, sizeof sc->a_cost, "%u", cost);
    snprintf(sc->a_P, sizeof sc->a_P, "%u", rpol(lim)->permits);
    snprintf(sc->a_W, sizeof sc->a_W, "%llu", (unsigned long long)rpol(lim)->window_ns);
    snprintf(sc->a_cap, sizeof sc->a_cap, "%u", srl__capacity(rpol(lim)));
    sc->a_mode[0] = mode;
    sc->a_mode[1] = '\0';
    memcpy(sc->a_maxw, "0", 2);
    memcpy(sc->a_dry, lim->dry_run ? "1" : "0", 2);
    sc->argc = SCRIPT_ARGC + SCRIPT_XARGS;
    if (uses_cmp(lim)) {
        /* The request's tier decides; tier.lua switches to the key's own
         * (SRL__OWN_TIER), which only the script knows. */
        uint32_t t = tier == SRL__OWN_TIER ? 0 : tier;
        sc->a_W[0] = sc->a_cap[0] = '\0';
        int at = script_limits(lim, sc, t, 0);
        memcpy(sc->a_P, sc->a_n[t], sizeof sc->a_n[t]);
        if (lim->tier_count > 1) {
            if (tier == SRL__OWN_TIER)
                memcpy(sc->a_tier, "own", 4);
            else
                snprintf(sc->a_tier, sizeof sc->a_tier, "%u", tier);
            snprintf(sc->a_tiers, sizeof sc->a_tiers, "%u", lim->tier_count);
            sc->xv[at++] = sc->a_tier;
            sc->xv[at++] = sc->a_tiers;
            for (uint32_t j = 0; j < lim->tier_count; j++) {
                sc->xv[at++] = NULL;   /* the count, once a_n[j] is written */
                int c = at - 1;
                at = script_limits(lim, sc, j, at);
                sc->xv[c] = sc->a_n[j];
            }
        }
        sc->argc = SCRIPT_ARGC + SCRIPT_XARGS + at;
    }
}

/* Under mu (r->sha is read): argv/lens for one key.  The injected time is
 * read now, per call, as decide always did. */
static void script_argv(srl_limiter *lim, struct script_call *sc, const char *key, size_t klen)
{
    struct rstore *r = lim->impl;
    if (r->u.cluster) {
        /* The script's keys must share a slot: the slot hash of key's slot
         * holds both the epoch and the counters. */
        slot_hash_name(r, key, klen, sc->cfg);
        memcpy(sc->st, sc->cfg, sizeof sc->st);
    }
    sc->a_now[0] = '\0';
    const char *argv[] = {"EVALSHA", r->sha, "3", key, sc->cfg, sc->st,
                          sc->a_mode, sc->a_cost, sc->a_P, sc->a_W, sc->a_now, sc->a_cap};
    for (int i = 0; i < SCRIPT_ARGC; i++)
        sc->argv[i] = argv[i];
    sc->argv[SCRIPT_ARGC] = sc->a_maxw;
    sc->argv[SCRIPT_ARGC + 1] = sc->a_dry;
    for (int i = SCRIPT_ARGC + SCRIPT_XARGS; i < sc->argc; i++)
        sc->argv[i] = sc->xv[i - SCRIPT_ARGC - SCRIPT_XARGS];
    for (int i = 0; i < sc->argc; i++)
        sc->lens[i] = i == 3 ? klen : strlen(sc->argv[i]);
}

/*
 * The longest wait (retry_after, reset_after) a script can answer for p,
 * with the server's clock going forward: GCRA tau = permits * T; token
 * bucket and sliding log one window; sliding counter two; a ban period if
 * longer.  A server clock
 * stepped back adds the step ("behind" in the scripts), so a reply is
 * refused only past twice this: a clock stepped back by more than that is
 * treated as a server answering out of range.
 */
static uint64_t algo_wait_ns(const srl_policy *p);
static uint64_t longest_wait_ns(const srl_policy *p)
{
    uint64_t w = algo_wait_ns(p);
    return p->penalty_ns > w ? p->penalty_ns : w;
}

static uint64_t algo_wait_ns(const srl_policy *p)
{
    uint64_t W = p->window_ns, P = p->permits, cap = srl__capacity(p);
    switch (p->algorithm) {
    case SRL_GCRA:
        return cap * (W / P + (W % P != 0));   /* burst: cap * T <= W_MAX + cap */
    case SRL_TOKEN_BUCKET: {
        /* Refill from empty: ceil(cap * W / P), W without a burst. */
        srl__u128 full = ((srl__u128)cap * W + P - 1) / P;
        return full > W ? (uint64_t)full : W;
    }
    case SRL_SLIDING_COUNTER:
        return 2 * W;
    default:
        return W;
    }
}

/* A wait in a decision reply: the decimal text of a number (waits may pass
 * 2^53, so the scripts send them as strings).  1 and *v set if s is 1..20
 * digits with a value below 2^64, else 0. */
static int reply_wait(const redisReply *e, uint64_t *v)
{
    if (e->type != REDIS_REPLY_STRING || e->len < 1 || e->len > 20)
        return 0;
    uint64_t x = 0;
    for (size_t i = 0; i < e->len; i++) {
        unsigned dg = (unsigned)(e->str[i] - '0');
        if (dg > 9 || x > (UINT64_MAX - dg) / 10)
            return 0;
        x = x * 10 + dg;
    }
    *v = x;
    return 1;
}

/* 1 and *d filled if rep is a script's decision {allowed, remaining,
 * "retry_after", "reset_after"} (a compound's adds the binding limit b,
 * 0..count-1) within the policy's range: two integers and two waits
 * (reply_wait), allowed 0 or 1, remaining <= the capacity (burst, else
 * permits) of limit b, retry_after 0 if allowed and at most 2 *
 * longest_wait_ns of limit b, reset_after at most 2 * the longest of any
 * limit (each plus SRL_WAIT_MAX_NS if the policy can reserve: a
 * reservation stores states that far ahead); a reservation's (max_wait >
 * 0) adds its wait, at most max_wait, nonzero only on an admission with
 * remaining 0; a tiered config's adds the tier that decided (the
 * request's, or for SRL__OWN_TIER the key's: any of the table), whose
 * limits the rest is checked against (*decided, if not NULL); else 0
 * (*d untouched). */
static int reply_decision(const srl_limiter *lim, const redisReply *rep, uint32_t tier,
                          uint64_t max_wait, srl_decision *d, uint32_t *decided)
{
    int tiered = lim->tier_count > 1;
    size_t want = (uses_cmp(lim) ? 6 : 4) + (size_t)tiered + (max_wait > 0);
    /* compound.lua adds binding, ban started; tier.lua the tier; a
     * reservation its wait, last */
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != want)
        return 0;
    if (tiered) {
        const redisReply *e = rep->element[6];
        if (e->type != REDIS_REPLY_INTEGER || e->integer < 0 ||
            e->integer >= lim->tier_count || (tier != SRL__OWN_TIER && e->integer != tier))
            return 0;
        tier = (uint32_t)e->integer;
    } else {
        tier = 0;
    }
    const srl_limits *l = &srl__tier_cmp(lim, tier)->limits;
    uint64_t wait = 0;
    if (max_wait > 0 && (!reply_wait(rep->element[want - 1], &wait) || wait > max_wait))
        return 0;
    uint32_t b = 0;
    unsigned flags = 0;
    if (uses_cmp(lim)) {
        const redisReply *e = rep->element[4], *f = rep->element[5];
        if (e->type != REDIS_REPLY_INTEGER || e->integer < 0 || e->integer >= l->count ||
            f->type != REDIS_REPLY_INTEGER || f->integer < 0 || f->integer > 1)
            return 0;
        b = (uint32_t)e->integer;
        flags = f->integer ? SRL_DECISION_BAN_STARTED : 0;
    }
    long long v[2];
    for (int i = 0; i < 2; i++) {
        if (rep->element[i]->type != REDIS_REPLY_INTEGER || rep->element[i]->integer < 0)
            return 0;
        v[i] = rep->element[i]->integer;
    }
    uint64_t w[2];
    if (!reply_wait(rep->element[2], &w[0]) || !reply_wait(rep->element[3], &w[1]))
        return 0;
    uint64_t ahead = lim->cmp.reserve ? SRL_WAIT_MAX_NS : 0;
    uint64_t most = 2 * longest_wait_ns(&l->limit[b]) + ahead, longest = 0;   /* < 2^63 */
    for (uint32_t i = 0; i < l->count; i++) {
        uint64_t w2 = 2 * longest_wait_ns(&l->limit[i]) + ahead;
        longest = w2 > longest ? w2 : longest;
    }
    uint32_t cap = srl__capacity(&l->limit[b]);
    if (v[0] > 1 || (uint64_t)v[1] > cap || (v[0] == 1 && (w[0] != 0 || flags != 0)) ||
        w[0] > most || w[1] > longest || (wait != 0 && (v[0] != 1 || v[1] != 0)))
        return 0;
    if (decided != NULL)
        *decided = tier;
    *d = (srl_decision){.allowed = v[0] != 0, .limit = cap,
                        .remaining = (uint32_t)v[1], .retry_after_ns = w[0],
                        .reset_after_ns = w[1], .flags = flags, .binding = b, .wait_ns = wait};
    return 1;
}

/* Under mu: make the slot hash of key k's slot (a cluster store). */
static int slot_init(struct rstore *r, const char *k, size_t kl)
{
    char h[PREFIX_MAX + 16];
    slot_hash_name(r, k, kl, h);
    const char *argv[] = {"EVAL", slot_lua, "1", h, r->esec, r->eusec};
    size_t lens[] = {4, sizeof slot_lua - 1, 1, strlen(h), strlen(r->esec), strlen(r->eusec)};
    int rc;
    redisReply *rep = route(r, h, lens[3], 6, argv, lens, &rc);
    if (rep == NULL)
        return rc;
    rc = rep->type == REDIS_REPLY_INTEGER ? 0
         : rep->type == REDIS_REPLY_ERROR ? reply_error(rep) : SRL_ESYS;
    freeReplyObject(rep);
    return rc;
}

/* What to do about a script's error reply for key k:
 * reload the script (NOSCRIPT: the server restarted or flushed its
 * scripts; on a cluster, this key's master had not loaded it yet) or
 * re-create P:cfg (SRLNOCFG: a server restarted without persistence lost
 * it, and every state with it: start the prefix over with this policy; on
 * a cluster the slot hash is missing: make it).  Under mu.  1 if one of
 * them was done (*rc its result: retry if 0), else 0. */
static int script_recover(struct rstore *r, const redisReply *rep, int *rc, const char *k,
                          size_t kl)
{
    if (rep->type != REDIS_REPLY_ERROR)
        return 0;
    if (strncmp(rep->str, "NOSCRIPT", 8) == 0)
        *rc = load_script(r, r->u.cluster ? NULL : k, kl);
    else if (strncmp(rep->str, "SRLNOCFG", 8) == 0)
        *rc = r->u.cluster ? slot_init(r, k, kl) : open_cfg(r, 0);
    else
        return 0;
    return 1;
}

/* One call of the limiter's script for the Redis key k (sc filled by
 * script_init, its extra arguments after): the reply, or NULL with *rc an
 * error.  Takes and releases mu; checks P:cfg first, loads the script and
 * recovers from NOSCRIPT and SRLNOCFG (script_recover). */
static redisReply *run_script(srl_limiter *lim, struct script_call *sc, const char *k,
                              size_t kl, int *rcp)
{
    struct rstore *r = rs_of(lim);
    int rc = call_begin(r);
    int locked = rc == 0;
    if (rc == 0)
        rc = cfg_check(r);
    if (rc == 0 && r->sha[0] == '\0')
        rc = load_script(r, k, kl);
    redisReply *rep = NULL;
    /* Up to two recoveries: a cluster master's first decision in a slot
     * may need both the script and the slot hash. */
    for (int attempt = 0; rc == 0 && attempt < 4; attempt++) {
        script_argv(lim, sc, k, kl);
        rep = route(r, k, kl, sc->argc, sc->argv, sc->lens, &rc);
        if (rep != NULL && attempt < 3 && script_recover(r, rep, &rc, k, kl)) {
            freeReplyObject(rep);
            rep = NULL;
            continue;
        }
        break;
    }
    if (locked)
        call_end(r, rc);
    *rcp = rc;
    return rc == 0 ? rep : NULL;
}

/* One run of the script.  mode: 'a' acquire (srl_reserve's with max_wait >
 * 0), 'p' peek (fill *d), 'r' refund (d is NULL). */
static int decide(srl_limiter *lim, const void *key, size_t len, uint32_t cost, char mode,
                  uint32_t tier, uint64_t max_wait, srl_decision *d)
{
    struct rstore *r = rs_of(lim);
    char kbuf[PREFIX_MAX + 8 + SRL_KEY_MAX];
    size_t klen = key_name(r, "k:", key, len, kbuf);
    struct script_call sc;
    script_init(lim, &sc, mode, cost, tier);
    snprintf(sc.a_maxw, sizeof sc.a_maxw, "%llu", (unsigned long long)max_wait);

    int rc;
    redisReply *rep = run_script(lim, &sc, kbuf, klen, &rc);
    if (rc == 0) {
        rc = SRL_ECORRUPT;  /* a reply this script never gives: P:cfg or a state was altered */
        if (rep->type == REDIS_REPLY_ERROR && reply_error(rep) == SRL_EACCES) {
            rc = SRL_EACCES;   /* the server now wants a password */
            srl__err_set("%s: %.160s", r->u.prefix, rep->str);   /* mu is released */
        } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 && mode != 'a' &&
                   rep->element[0]->type == REDIS_REPLY_INTEGER &&
                   rep->element[0]->integer == -1) {
            rc = SRL_ENOENT;   /* peek, refund: no state (*d untouched) */
        } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 && d == NULL &&
                   rep->element[0]->type == REDIS_REPLY_INTEGER &&
                   rep->element[0]->integer == -2) {
            rc = 0;   /* refunded */
        } else if (d != NULL && reply_decision(lim, rep, tier, max_wait, d, NULL)) {
            rc = 0;
        }
        freeReplyObject(rep);
    }
    /* Every store error (the server slow, gone, refusing, or answering what
     * no script answers) decides from on_full, so a caller that ignores
     * the error still gets the configured fail-open or fail-closed answer. */
    if (rc == SRL_EMISMATCH && d != NULL)
        __atomic_add_fetch(&r->mismatched, 1, __ATOMIC_RELAXED);
    if (rc != 0 && rc != SRL_ENOENT && d != NULL)
        srl__decide_on_full(lim, SRL_DECISION_DEGRADED, d);
    return rc;
}

static int rs_acquire(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                      srl_decision *d)
{
    return decide(lim, key, len, cost, 'a', 0, 0, d);
}

/* srl_acquire_tier: the key moves to tier if it is of another (tier.lua
 * converts it in the same script call). */
static int rs_acquire_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                           uint32_t cost, srl_decision *d)
{
    return decide(lim, key, len, cost, 'a', tier, 0, d);
}

/* srl_reserve: the acquire's script call with max_wait (prologue.lua). */
static int rs_reserve(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                      uint64_t max_wait, srl_decision *d)
{
    return decide(lim, key, len, cost, 'a', 0, max_wait, d);
}

static int conc_call(srl_limiter *lim, const void *key, size_t len, char mode, uint32_t cost,
                     srl_lease *lease, srl_decision *d);

static int rs_peek(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                   srl_decision *d)
{
    if (lim->cmp.conc >= 0)
        return conc_call(lim, key, len, 'p', cost, NULL, d);
    return decide(lim, key, len, cost, 'p', SRL__OWN_TIER, 0, d);
}

/* srl_peek_tier: what tier would get, the key's state converted in the
 * script only (nothing written). */
static int rs_peek_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                        uint32_t cost, srl_decision *d)
{
    return decide(lim, key, len, cost, 'p', tier, 0, d);
}

static int rs_refund(srl_limiter *lim, const void *key, size_t len, uint32_t cost)
{
    return decide(lim, key, len, cost, 'r', SRL__OWN_TIER, 0, NULL);
}

/* ------------------------------------------------ concurrency units */

/* The lease time of a unit on Redis: max_hold, else the default (srl.h). */
static uint64_t lease_ns(const srl_limiter *lim)
{
    uint64_t w = rpol(lim)->window_ns;
    return w != 0 ? w : SRL_REDIS_LEASE_DEFAULT_NS;
}

/* concurrency.lua's extra arguments (ARGV[9..13]) after script_init's. */
struct conc_args {
    struct srl__holder me;
    char a_lease[24];
    char tail[SRL_CONCURRENCY_MAX * 11 + 1];   /* enter: dead gens; leave: the gen */
    char a_nonce[24];
};

static void conc_init(srl_limiter *lim, struct script_call *sc, struct conc_args *ca,
                      char mode, uint32_t cost)
{
    script_init(lim, sc, mode, cost, 0);
    srl__holder_self(&ca->me);
    snprintf(ca->a_lease, sizeof ca->a_lease, "%llu", (unsigned long long)lease_ns(lim));
    memcpy(sc->a_W, ca->a_lease, sizeof ca->a_lease);
    ca->a_nonce[0] = '\0';
    const char *x[] = {ca->me.host, ca->me.pid, ca->me.start, ca->tail, ca->a_nonce};
    for (int i = 0; i < 5; i++)
        sc->xv[i] = x[i];
    sc->argc = SCRIPT_ARGC + SCRIPT_XARGS + 5;
}

/* srl_enter ('e', cost 1, lease filled on admission) and srl_peek ('p',
 * lease NULL) of a concurrency limit.  A denial that names units of this host
 * whose process died (srl__conc_reply judges them by pid and start time)
 * is decided again once with those named, so a dead holder never causes
 * a denial, as on the host store. */
static int conc_call(srl_limiter *lim, const void *key, size_t len, char mode, uint32_t cost,
                     srl_lease *lease, srl_decision *d)
{
    struct rstore *r = rs_of(lim);
    char kbuf[PREFIX_MAX + 8 + SRL_KEY_MAX];
    size_t klen = key_name(r, "k:", key, len, kbuf);
    struct script_call sc;
    struct conc_args ca;
    conc_init(lim, &sc, &ca, mode, cost);
    ca.tail[0] = '\0';
    uint64_t nonce = srl__lease_nonce();
    snprintf(ca.a_nonce, sizeof ca.a_nonce, "%llu", (unsigned long long)nonce);
    uint32_t gen = 0;
    int rc = 0;
    for (int round = 0; round < 2; round++) {
        char dead[sizeof ca.tail] = "";
        redisReply *rep = run_script(lim, &sc, kbuf, klen, &rc);
        if (rc != 0)
            break;
        rc = SRL_ECORRUPT;   /* a reply the script never gives */
        if (rep->type == REDIS_REPLY_ERROR && reply_error(rep) == SRL_EACCES) {
            rc = SRL_EACCES;
            srl__err_set("%s: %.160s", r->u.prefix, rep->str);
        } else if (mode == 'p' && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
                   rep->element[0]->type == REDIS_REPLY_INTEGER &&
                   rep->element[0]->integer == -1) {
            rc = SRL_ENOENT;   /* peek: no state */
        } else if (srl__conc_reply(rep, rpol(lim)->permits, lease_ns(lim), mode == 'p', d, &gen,
                                   dead, sizeof dead)) {
            rc = 0;
        }
        freeReplyObject(rep);
        if (rc != 0 || d->allowed || dead[0] == '\0')
            break;
        memcpy(ca.tail, dead, sizeof dead);   /* again, naming the dead */
    }
    if (rc == 0 && gen != 0 &&
        (rc = srl__lease_put(&r->leases, kbuf, klen, gen, nonce, lease_ns(lim), lease)) != 0) {
        /* Admitted, but no room to remember the key: give the unit back
         * (if that fails too, it comes back by its lease time). */
        conc_init(lim, &sc, &ca, 'v', 1);
        snprintf(ca.tail, sizeof ca.tail, "%u", gen);
        snprintf(ca.a_nonce, sizeof ca.a_nonce, "%llu", (unsigned long long)nonce);
        int rc2;
        redisReply *rep = run_script(lim, &sc, kbuf, klen, &rc2);
        if (rep != NULL)
            freeReplyObject(rep);
    }
    if (rc != 0 && rc != SRL_ENOENT)
        srl__decide_on_full(lim, SRL_DECISION_DEGRADED, d);
    return rc;
}

static int rs_enter(srl_limiter *lim, const void *key, size_t len, srl_lease *lease,
                    srl_decision *d)
{
    return conc_call(lim, key, len, 'e', 1, lease, d);
}

/* The lease's key comes from this handle's table (srl_lease holds none);
 * the script deletes the unit only if its generation and holder (host,
 * pid, start time, nonce) are this caller's.  The slot is freed whatever Redis
 * answers: a unit a failed leave leaves behind comes back by its lease
 * time. */
static int rs_leave(srl_limiter *lim, srl_lease *lease)
{
    struct rstore *r = rs_of(lim);
    char *k;
    size_t kl;
    uint64_t nonce;
    int rc = srl__lease_take(&r->leases, lease, &k, &kl, &nonce);
    if (rc != 0)
        return rc;
    struct script_call sc;
    struct conc_args ca;
    conc_init(lim, &sc, &ca, 'v', 1);
    snprintf(ca.tail, sizeof ca.tail, "%u", lease->gen);
    snprintf(ca.a_nonce, sizeof ca.a_nonce, "%llu", (unsigned long long)nonce);
    redisReply *rep = run_script(lim, &sc, k, kl, &rc);
    free(k);
    if (rc != 0)
        return rc;
    rc = SRL_ECORRUPT;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
        rep->element[0]->type == REDIS_REPLY_INTEGER &&
        (rep->element[0]->integer == -1 || rep->element[0]->integer == -2))
        rc = rep->element[0]->integer == -2 ? 0 : SRL_ENOENT;
    else if (rep->type == REDIS_REPLY_ERROR && reply_error(rep) == SRL_EACCES)
        rc = SRL_EACCES;
    freeReplyObject(rep);
    return rc;
}

static int rs_reset_key(srl_limiter *lim, const void *key, size_t len)
{
    struct rstore *r = rs_of(lim);
    char kbuf[PREFIX_MAX + 8 + SRL_KEY_MAX];
    size_t klen = key_name(r, "k:", key, len, kbuf);
    const char *argv[] = {"DEL", kbuf};
    size_t lens[] = {3, klen};
    int rc = call_begin(r);
    if (rc != 0)
        return rc;
    redisReply *rep = route(r, kbuf, klen, 2, argv, lens, &rc);
    call_end(r, rc);
    if (rep == NULL)
        return rc;
    rc = rep->type != REDIS_REPLY_INTEGER ? SRL_ESYS : rep->integer == 1 ? 0 : SRL_ENOENT;
    freeReplyObject(rep);
    return rc;
}

static int rs_info(srl_limiter *lim, srl_info *out)
{
    struct rstore *r = rs_of(lim);
    memset(out, 0, sizeof *out);
    out->kind = SRL_STORE_REDIS;
    out->policy = *rpol(lim);
    out->limits = lim->cmp.limits;
    out->on_full = lim->on_full;
    out->capacity = r->capacity;
    out->key_display = SRL_KEY_MAX;   /* the whole key is in its Redis key's name */
    out->creator_pid = (int32_t)r->pid;
    out->created_unix_ns = r->created_unix_ns;
    snprintf(out->name, sizeof out->name, "%s", r->u.prefix);
    return 0;
}

/* srl_evict_idle: every state is written with PX/PEXPIRE for exactly the
 * time until it comes to rest (rounded up to the next ms), so Redis itself
 * drops each key at rest: there is never one left to evict. */
static int64_t rs_evict_idle(srl_limiter *lim)
{
    (void)lim;
    return 0;
}

/*
 * srl_foreach: SCAN the prefix's state keys (MATCH P:k:*, with the prefix's
 * glob characters escaped) in batches of SCAN_COUNT, and peek each batch's
 * keys with the script (mode 'p', cost 1), pipelined: two round trips per
 * batch, each reply awaited at most timeout_ms.  The mutex is held for one
 * batch and released before fn runs, so other threads' decisions go on
 * between batches and fn may take as long as it likes.
 *
 * What SCAN guarantees, and so what a walk sees: every key that exists for
 * the whole walk is visited; keys created or expired meanwhile may or may
 * not be; a key may be visited twice if Redis shrinks its table during the
 * walk.  A key that vanished between SCAN and its peek (it came to rest or
 * was reset) is not visited.  A key under P:k: that is not a state of this
 * policy (a nested prefix such as P:k:x, a value written by hand: the
 * script answers an error) is skipped, not counted.
 */
#define SCAN_COUNT "100"

struct walk_batch {
    redisReply *scan;         /* SCAN's reply; scan->element[1] the keys */
    redisReply **peek;        /* one reply per key (a peek, or HMGET for stats) */
    size_t n;
};

static void walk_batch_free(struct walk_batch *b)
{
    for (size_t i = 0; b->peek != NULL && i < b->n; i++)
        if (b->peek[i] != NULL)
            freeReplyObject(b->peek[i]);
    free(b->peek);
    if (b->scan != NULL)
        freeReplyObject(b->scan);
    *b = (struct walk_batch){0};
}

/* Under mu: for every key of b, peek it (stats 0) or read its allowed,
 * denied and would_deny counters (stats 1: b holds slot hashes), pipelined on n.  0 or a
 * connection error. */
static int walk_pipe(srl_limiter *lim, struct srl__rconn *n, struct walk_batch *b, int stats)
{
    struct rstore *r = rs_of(lim);
    int rc = ensure(r, n);
    if (rc != 0)
        return rc;
    struct script_call sc;
    struct conc_args ca;
    script_init(lim, &sc, 'p', 1, SRL__OWN_TIER);
    if (lim->cmp.conc >= 0) {
        conc_init(lim, &sc, &ca, 'p', 1);   /* concurrency.lua's peek */
        ca.tail[0] = '\0';
    }
    struct pipe_guard g;
    pipe_guard_begin(&g);
    for (size_t i = 0; i < b->n && rc == 0; i++) {
        const redisReply *k = b->scan->element[1]->element[i];
        const char *hm[] = {"HMGET", k->str, "allowed", "denied", "would_deny"};
        size_t hml[] = {5, k->len, 7, 6, 10};
        if (!stats)
            script_argv(lim, &sc, k->str, k->len);
        if ((stats ? redisAppendCommandArgv(n->c, 5, hm, hml)
                   : redisAppendCommandArgv(n->c, sc.argc, sc.argv, sc.lens)) != REDIS_OK)
            rc = SRL_ENOMEM;
    }
    if (rc == 0)
        rc = flush_out(r, n->c);
    struct reply_budget budget = {0};   /* the batch's replies together */
    for (size_t i = 0; i < b->n && rc == 0; i++)
        rc = read_reply(r, n->c, &budget, &b->peek[i]);
    pipe_guard_end(&g);
    if (rc != 0)
        drop(n);   /* replies may be left unread: never reuse the stream */
    return rc;
}

/* Under mu: one SCAN step on n from cursor (updated in place) and the
 * pipelined replies for the keys it returned.  0 or an SRL_E* code (b is
 * then empty). */
static int walk_batch(srl_limiter *lim, struct srl__rconn *n, char cursor[32],
                      const char *pattern, struct walk_batch *b, int stats)
{
    struct rstore *r = rs_of(lim);
    const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT};
    size_t lens[6];
    for (int i = 0; i < 6; i++)
        lens[i] = strlen(argv[i]);
    int rc;
    b->scan = cmd_on(r, n, 6, argv, lens, &rc);
    if (b->scan == NULL)
        return rc;
    const redisReply *s = b->scan;
    int ok = s->type == REDIS_REPLY_ARRAY && s->elements == 2 &&
             s->element[0]->type == REDIS_REPLY_STRING && s->element[0]->len < 32 &&
             s->element[1]->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < s->element[1]->elements; i++)
        ok = s->element[1]->element[i]->type == REDIS_REPLY_STRING;
    if (!ok) {
        rc = s->type == REDIS_REPLY_ERROR ? reply_error(s) : SRL_ESYS;
        walk_batch_free(b);
        return rc;
    }
    memcpy(cursor, s->element[0]->str, s->element[0]->len + 1);
    b->n = s->element[1]->elements;
    if (b->n == 0)
        return 0;
    b->peek = calloc(b->n, sizeof *b->peek);
    if (b->peek == NULL) {
        walk_batch_free(b);
        return SRL_ENOMEM;
    }
    for (int attempt = 0; attempt < 3; attempt++) {
        rc = walk_pipe(lim, n, b, stats);
        int again = 0;
        for (size_t i = 0; rc == 0 && i < b->n && !again && !stats; i++) {
            const redisReply *k = b->scan->element[1]->element[i], *p = b->peek[i];
            if (!r->u.cluster) {
                again = attempt < 2 && script_recover(r, p, &rc, k->str, k->len);
            } else if (attempt < 2 && p->type == REDIS_REPLY_ERROR &&
                       strncmp(p->str, "NOSCRIPT", 8) == 0) {
                /* Load on n itself; nothing here may route (a refresh
                 * would move node[], n with it).  A key without its slot
                 * hash (SRLNOCFG) is skipped. */
                r->replied = (int)(n - r->cl.node);
                rc = load_script(r, NULL, 0);
                again = 1;
            }
        }
        if (!again || rc != 0)
            break;
        for (size_t i = 0; i < b->n; i++) {
            freeReplyObject(b->peek[i]);
            b->peek[i] = NULL;
        }
    }
    if (rc != 0)
        walk_batch_free(b);
    return rc;
}

/* A walk's peek reply for one key into e->now (and e->tier): 1, or 0 (a
 * reply no script gives, or none for that key: skipped). */
static int walk_decision(const srl_limiter *lim, const redisReply *p, srl_entry *e)
{
    uint32_t gen;
    char dead[2] = "";
    if (lim->cmp.conc >= 0)
        return srl__conc_reply(p, rpol(lim)->permits, lease_ns(lim), 1, &e->now, &gen, dead,
                               sizeof dead);
    return reply_decision(lim, p, SRL__OWN_TIER, 0, &e->now, &e->tier);
}

/*
 * The servers a walk SCANs: the one server, or every master of the
 * cluster's map as the walk begins (refreshed first if stale), named by
 * host:port so that a refresh during the walk (which renumbers nodes) is
 * harmless; a master that left the map meanwhile is skipped.  A key moved
 * by a reshard during the walk may be seen on both masters, or on neither
 * (its peek on the old master answers MOVED: skipped).
 */
struct walk_nodes {
    size_t n;
    struct {
        char host[256];
        int port;
    } *at;
};

static int walk_nodes_begin(struct rstore *r, struct walk_nodes *w)
{
    *w = (struct walk_nodes){.n = 1};
    if (!r->u.cluster)
        return 0;
    int rc = call_begin(r);
    if (rc != 0)
        return rc;
    if (r->cl.stale || r->cl.n == 0)
        rc = refresh(r);
    if (rc == 0) {
        w->n = r->cl.n;
        w->at = calloc(w->n + 1, sizeof *w->at);
        if (w->at == NULL)
            rc = SRL_ENOMEM;
        for (size_t i = 0; rc == 0 && i < w->n; i++) {
            memcpy(w->at[i].host, r->cl.node[i].host, sizeof w->at[i].host);
            w->at[i].port = r->cl.node[i].port;
        }
    }
    call_end(r, rc);
    return rc;
}

/* Under mu: the connection of the walk's j-th server, NULL if gone. */
static struct srl__rconn *walk_node(struct rstore *r, const struct walk_nodes *w, size_t j)
{
    if (!r->u.cluster)
        return &r->one;
    int ix = srl__cluster_node(&r->cl, w->at[j].host, w->at[j].port, 0);
    return ix < 0 ? NULL : &r->cl.node[ix];
}

/* MATCH treats * ? [ ] \ as glob syntax: the prefix escaped, then what. */
static void scan_pattern(const struct rstore *r, const char *what, char *pattern)
{
    size_t o = 0;
    for (const char *p = r->u.prefix; *p != '\0'; p++) {
        if (strchr("*?[]\\", *p) != NULL)
            pattern[o++] = '\\';
        pattern[o++] = *p;
    }
    memcpy(pattern + o, what, strlen(what) + 1);
}

/*
 * A walk's SCAN calls on one server are bounded.  Redis answers a SCAN
 * once it has COUNT keys or has looked at 10 * COUNT buckets, and a db of
 * N keys has at most about 4 N + 8 buckets (both tables, mid-rehash), so a
 * walk takes well under N + 2 calls.  Past WALK_CALLS_MIN calls the
 * server's DBSIZE is read again (the db may have grown), and a walk past
 * 2 * DBSIZE + WALK_CALLS_MIN calls ends with SRL_ESYS, errno EPROTO (the
 * server broke SCAN's promise): a server whose cursor never comes back to
 * 0 cannot keep a walk going.
 */
#define WALK_CALLS_MIN 1024

struct walk_bound {
    uint64_t calls, limit;   /* limit starts at WALK_CALLS_MIN */
};

/* Under mu: the walk's bound from n's DBSIZE now. */
static int walk_recount(struct rstore *r, struct srl__rconn *n, struct walk_bound *wb)
{
    static const char *const argv[] = {"DBSIZE"};
    static const size_t lens[] = {6};
    int rc;
    redisReply *rep = cmd_on(r, n, 1, (const char **)argv, lens, &rc);
    if (rep == NULL)
        return rc;
    rc = 0;
    if (rep->type == REDIS_REPLY_INTEGER && rep->integer >= 0 &&
        (unsigned long long)rep->integer < (1ull << 62)) {
        wb->limit = 2 * (uint64_t)rep->integer + WALK_CALLS_MIN;
    } else {
        errno = EPROTO;
        rc = SRL_ESYS;
    }
    freeReplyObject(rep);
    return rc;
}

/* One SCAN step of a walk on its j-th server, under mu: 0, 1 (the server
 * left the map: b empty, the walk goes on to the next one) or an error
 * (b empty). */
static int walk_step(srl_limiter *lim, const struct walk_nodes *w, size_t j, char cursor[32],
                     const char *pattern, struct walk_batch *b, int stats,
                     struct walk_bound *wb)
{
    struct rstore *r = rs_of(lim);
    int rc = call_begin(r);
    if (rc != 0)
        return rc;
    struct srl__rconn *n = walk_node(r, w, j);
    rc = n == NULL ? 1 : walk_batch(lim, n, cursor, pattern, b, stats);
    if (rc == 0 && strcmp(cursor, "0") != 0 && ++wb->calls >= wb->limit) {
        rc = walk_recount(r, n, wb);
        if (rc == 0 && wb->calls >= wb->limit) {
            errno = EPROTO;
            rc = SRL_ESYS;
        }
        if (rc != 0)
            walk_batch_free(b);
    }
    call_end(r, rc);
    return rc;
}

/* srl_stats_get on a cluster: allowed, denied, would_deny summed over every
 * slot hash P:s:{tag} of every master (SCAN, then HMGET pipelined per batch). */
static int cluster_counts(srl_limiter *lim, uint64_t count[3])
{
    struct rstore *r = rs_of(lim);
    char pattern[2 * PREFIX_MAX + 8];
    scan_pattern(r, ":s:*", pattern);
    struct walk_nodes w;
    int rc = walk_nodes_begin(r, &w);
    count[0] = count[1] = count[2] = 0;
    for (size_t j = 0; rc == 0 && j < w.n; j++) {
        char cursor[32] = "0";
        struct walk_bound wb = {0, WALK_CALLS_MIN};
        do {
            struct walk_batch b = {0};
            rc = walk_step(lim, &w, j, cursor, pattern, &b, 1, &wb);
            for (size_t i = 0; rc == 0 && i < b.n; i++) {
                const redisReply *h = b.peek[i];
                if (h->type != REDIS_REPLY_ARRAY || h->elements != 3)
                    continue;   /* moved away meanwhile, or not a hash: not counted */
                for (int f = 0; f < 3; f++) {
                    const redisReply *e = h->element[f];
                    count[f] += e->type == REDIS_REPLY_STRING ? strtoull(e->str, NULL, 10) : 0;
                }
            }
            walk_batch_free(&b);
        } while (rc == 0 && strcmp(cursor, "0") != 0);
        if (rc == 1)
            rc = 0;
    }
    free(w.at);
    return rc;
}

static int rs_stats(srl_limiter *lim, srl_stats *out)
{
    struct rstore *r = rs_of(lim);
    if (r->u.cluster) {
        uint64_t n[3];
        int rc = cluster_counts(lim, n);
        if (rc != 0)
            return rc;
        *out = (srl_stats){.capacity = r->capacity,
                           .timeouts = __atomic_load_n(&r->timeouts, __ATOMIC_RELAXED),
                           .full = __atomic_load_n(&r->mismatched, __ATOMIC_RELAXED),
                           .allowed = n[0], .denied = n[1], .would_deny = n[2]};
        return 0;
    }
    char st[PREFIX_MAX + 8];
    snprintf(st, sizeof st, "%s:stats", r->u.prefix);
    const char *argv[] = {"HMGET", st, "allowed", "denied", "would_deny"};
    size_t lens[] = {5, strlen(st), 7, 6, 10};
    int rc = call_begin(r);
    if (rc != 0)
        return rc;
    redisReply *rep = cmd_on(r, &r->one, 5, argv, lens, &rc);
    call_end(r, rc);
    uint64_t timeouts = __atomic_load_n(&r->timeouts, __ATOMIC_RELAXED);
    if (rep == NULL)
        return rc;
    *out = (srl_stats){.capacity = r->capacity, .timeouts = timeouts,
                       .full = __atomic_load_n(&r->mismatched, __ATOMIC_RELAXED)};
    rc = SRL_ESYS;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 3) {
        uint64_t *to[] = {&out->allowed, &out->denied, &out->would_deny};
        for (int i = 0; i < 3; i++) {
            redisReply *e = rep->element[i];
            *to[i] = e->type == REDIS_REPLY_STRING ? strtoull(e->str, NULL, 10) : 0;
        }
        rc = 0;
    }
    freeReplyObject(rep);
    return rc;
}

static int64_t rs_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx)
{
    struct rstore *r = rs_of(lim);
    char pattern[2 * PREFIX_MAX + 8];
    scan_pattern(r, ":k:*", pattern);
    size_t plen = strlen(r->u.prefix) + 3;   /* "P:k:" */
    struct walk_nodes w;
    int rc = walk_nodes_begin(r, &w);
    if (rc != 0)
        return rc;
    int64_t visited = 0;
    for (size_t j = 0; j < w.n; j++) {
        char cursor[32] = "0";
        struct walk_bound wb = {0, WALK_CALLS_MIN};
        do {
            struct walk_batch b = {0};
            rc = walk_step(lim, &w, j, cursor, pattern, &b, 0, &wb);
            if (rc == 1)
                break;   /* that master left the map */
            if (rc != 0) {
                free(w.at);
                return rc;   /* as the shared store: a walk does not skip keys silently */
            }
            for (size_t i = 0; i < b.n; i++) {
                const redisReply *k = b.scan->element[1]->element[i];
                srl_entry e = {0};
                /* The server is not trusted to have honoured MATCH. */
                if (k->len <= plen || k->len - plen > SRL_KEY_MAX ||
                    memcmp(k->str, r->u.prefix, plen - 3) != 0 ||
                    memcmp(k->str + plen - 3, ":k:", 3) != 0 ||
                    !walk_decision(lim, b.peek[i], &e))
                    continue;
                e.display = (const unsigned char *)k->str + plen;
                e.display_len = e.key_len = (uint32_t)(k->len - plen);
                visited++;
                if (fn(&e, ctx)) {
                    walk_batch_free(&b);
                    free(w.at);
                    return visited;
                }
            }
            walk_batch_free(&b);
        } while (strcmp(cursor, "0") != 0);
    }
    free(w.at);
    return visited;
}

static void rs_close(srl_limiter *lim)
{
    struct rstore *r = rs_of(lim);
    /* In a child this closes only the child's copies of the sockets. */
    drop(&r->one);
    srl__cluster_free(&r->cl);
    srl__lease_table_free(&r->leases);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static const struct srl__store_ops redis_ops = {
    .acquire = rs_acquire,
    .acquire_tier = rs_acquire_tier,
    .peek = rs_peek,
    .peek_tier = rs_peek_tier,
    .refund = rs_refund,
    .reserve = rs_reserve,
    .reset_key = rs_reset_key,
    .evict_idle = rs_evict_idle,
    .stats = rs_stats,
    .info = rs_info,
    .foreach = rs_foreach,
    .check = NULL,
    .close = rs_close,
    .enter = rs_enter,
    .leave = rs_leave,
};

/* The policies a script decides: the four rate algorithms, any permits
 * and window (the scripts' arithmetic is exact: src/redis/num.lua). */
static int has_script(const srl_policy *p)
{
    /* concurrency: no script, in-flight units need holders; fixed_window: no
     * script yet.  algo_lua[] has the other four. */
    return p->algorithm < sizeof algo_lua / sizeof algo_lua[0] && algo_lua[p->algorithm] != NULL;
}

/* A policy this store runs: every limit has a script; several limits, or
 * a ban period, run as one compound script call. */
static int runnable(const srl_limits *l)
{
    if (l->count == 1 && l->limit[0].algorithm == SRL_CONCURRENCY)
        return 1;   /* concurrency.lua; in a compound: not yet */
    for (uint32_t i = 0; i < l->count; i++)
        if (!has_script(&l->limit[i]))
            return 0;
    return l->count >= 1;
}

int srl_open_redis(const char *uri, const srl_config *cfg, srl_limiter **out)
{
    /* cfg NULL: adopt the policy stored under the prefix (rlctl does). */
    srl_config defaults;
    int adopt = cfg == NULL;
    int rc = srl__open_prologue(cfg, 1, &defaults, &cfg, out);
    if (rc != 0)
        return rc;
    if (uri == NULL)
        return SRL_EINVAL;
    /* Limits of the four rate algorithms, one or a compound, ban periods
     * too: in-flight units have no script yet.  Adopting: the stored
     * policy is checked by open_cfg. */
    if (!adopt && !runnable(&cfg->limits))
        return SRL_ENOTSUP;
    for (uint32_t t = 0; !adopt && t < cfg->tier_count; t++)
        if (!runnable(&cfg->tiers[t].limits))
            return SRL_ENOTSUP;   /* a tier no script runs (fixed_window) */

    struct rstore *r = calloc(1, sizeof *r);
    if (r == NULL)
        return SRL_ENOMEM;
    char why[200] = "";
    srl__err_clear();
    rc = srl__redis_uri_parse(uri, &r->u, why, sizeof why);
    if (rc != 0)
        srl__err_set("%s", why);
    /* On a cluster the prefix must not hold a hash tag: it would put every
     * key in one slot (and the slot hashes' tags would not be theirs). */
    if (rc == 0 && r->u.cluster && strpbrk(r->u.prefix, "{}") != NULL)
        rc = SRL_EINVAL;
    if (rc != 0) {
        free(r);
        return rc;
    }
    if (r->u.unix_path[0] == '\0') {   /* TCP (a cluster's nodes come from its map) */
        memcpy(r->one.host, r->u.host, sizeof r->one.host);
        r->one.port = r->u.port;
    }
    (void)srl__limiter_init(&r->lim, &redis_ops, cfg);   /* cfg normalised: cannot fail */
    r->lim.impl = r;
    r->capacity = cfg->capacity;
    r->pid = getpid();
    pthread_mutex_init(&r->mu, NULL);
    srl__lease_table_init(&r->leases);

    rc = call_begin(r);   /* the handle is no one else's yet: mu only for the deadline */
    if (rc == 0) {
        rc = open_cfg(r, adopt);
        r->cfg_checked = rc == 0;
        /* No server to ask (down, or too slow to answer within the
         * deadline): the handle opens anyway and decides by on_full until a
         * call reaches one, which checks the policy then (cfg_check).  A
         * worker (re)started during an outage thus serves, and limits again
         * by itself.  Adopting needs the stored policy: no handle without. */
        if (!adopt && (rc == SRL_ETIMEDOUT || (rc == SRL_ESYS && r->connect_failed)))
            rc = SRL__REDIS_DEFERRED;
        call_end(r, rc);
    }
    int deferred = rc == SRL__REDIS_DEFERRED;
    if (deferred)
        rc = 0;
    if (rc == 0 && adopt) {
        /* The adopted policy, canonical as the prologue makes it, picks the
         * default ticker as a config would. */
        defaults.limits = r->adopted;
        defaults.policy = r->adopted.limit[0];
        defaults.tiers = r->adopted_tiers;
        defaults.tier_count = r->adopted_tier_count;
        rc = srl__limiter_init(&r->lim, &redis_ops, &defaults);
        r->lim.impl = r;
    }
    char cfgkey[PREFIX_MAX + 8];
    snprintf(cfgkey, sizeof cfgkey, "%s:cfg", r->u.prefix);
    if (rc == 0 && !deferred && (rc = call_begin(r)) == 0) {
        rc = load_script(r, cfgkey, strlen(cfgkey));
        call_end(r, rc);
    }
    if (rc != 0) {
        rs_close(&r->lim);
        return rc;
    }
    *out = &r->lim;
    return 0;
}
