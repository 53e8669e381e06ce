/*
 * check_redis_cluster.c - the Redis store on a real Redis Cluster of three
 * masters (redis-cluster:// uri), started by each test case's unchecked
 * fixture (tests/redis_testutil.c: loopback ports, redis-cli --cluster
 * create, cluster_state:ok) and stopped by pid after the case, failed or
 * not.
 *
 *   - CRC16-XMODEM ("123456789" -> 0x31C3) and the key slot of keys with
 *     and without hash tags equal the server's CLUSTER KEYSLOT; every slot
 *     hash name P:s:{tag} lands in its own slot;
 *   - keys spread: each master holds some of 300 keys, each on the master
 *     of its slot; stats sum the slot hashes of every master; foreach sees
 *     every key once;
 *   - 8 forked processes on one key (limit 1000), and on 60 keys spread over
 *     the masters (limit 100 each): exactly the limit admitted per key, in
 *     every trial; 4 threads on one handle over 30 keys: exact too;
 *   - CLUSTER SLOTS and redirection replies of other shapes change nothing;
 *   - a slot migrated (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE)
 *     while 8 processes run on keys in it: every call succeeds and every
 *     key admits exactly its limit; the old master answered MOVED;
 *   - a master SIGSTOPped: its keys' calls return SRL_ETIMEDOUT with a
 *     DEGRADED decision, the other masters' keys go on; SIGCONT recovers.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_cluster.h"
#include "redis_testutil.h"
#include "srl.h"
#include "testutil.h"

static struct redis_cluster cl;

static void cluster_up(void)
{
    redis_cluster_start(&cl);
}

static void cluster_down(void)
{
    redis_cluster_stop(&cl);
}

static redisContext *node(int i)
{
    redisContext *k = redisConnect("127.0.0.1", cl.port[i]);
    ck_assert(k != NULL && k->err == 0);
    return k;
}

static srl_limiter *open_prefix(const char *prefix, uint32_t permits, const char *more)
{
    srl_config cfg;
    srl_config_init(&cfg);
    /* T = 20 days / permits: nothing refills while a test runs. */
    cfg.policy = (srl_policy){.algorithm = SRL_GCRA, .permits = permits,
                              .window_ns = 20ull * 86400 * SEC};
    cfg.lock_timeout_ms = 2000;
    char u[300];
    snprintf(u, sizeof u, "%s?prefix=%s%s", cl.uri, prefix, more);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), 0);
    return lim;
}

/* The master (index into cl) that serves a limiter key's Redis key. */
static int owner_of(const char *prefix, const char *key)
{
    char full[256];
    int n = snprintf(full, sizeof full, "%s:k:%s", prefix, key);
    return redis_cluster_owner(&cl, srl__keyslot(full, (size_t)n));
}

static long long scan_count(int i, const char *pattern)
{
    redisContext *k = node(i);
    long long n = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = redisCommand(k, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        n += (long long)r->element[1]->elements;
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    redisFree(k);
    return n;
}

/* ------------------------------------------------------------ slots */

START_TEST(crc16_and_keyslot_agree_with_the_server)
{
    ck_assert_uint_eq(srl__crc16("123456789", 9), 0x31C3);
    ck_assert_uint_eq(srl__keyslot("123456789", 9), 0x31C3 & 16383);
    static const char *const fixed[] = {"", "a", "{user1000}.following", "{user1000}.followers",
                                        "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}",
                                        "}{", "a{b", "a}b{", "{", "}", "x{y}"};
    redisContext *k = node(0);
    uint64_t seed = 99;
    for (int i = 0; i < 600; i++) {
        char key[48];
        size_t len;
        if (i < (int)(sizeof fixed / sizeof fixed[0])) {
            len = strlen(fixed[i]);
            memcpy(key, fixed[i], len);
        } else {
            /* Random binary keys, '{' and '}' and NUL frequent. */
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            len = (size_t)(seed >> 59) + (seed >> 40) % 16;
            static const char alpha[] = "{}\0ab:z\xff";
            for (size_t j = 0; j < len; j++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                key[j] = (seed >> 61) < 6 ? alpha[(seed >> 33) % 8] : (char)(seed >> 24);
            }
        }
        redisReply *r = redisCommand(k, "CLUSTER KEYSLOT %b", key, len);
        ck_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
        ck_assert_msg(r->integer == (long long)srl__keyslot(key, len), "key %d (len %zu): %lld vs %u",
                      i, len, r->integer, srl__keyslot(key, len));
        freeReplyObject(r);
    }
    redisFree(k);
    /* The slot hash of every slot is in that slot. */
    for (unsigned s = 0; s < SRL__SLOTS; s++) {
        char tag[8], name[64];
        int n = snprintf(name, sizeof name, "srl:s:{%s}", srl__slot_tag(s, tag));
        ck_assert_uint_eq(srl__keyslot(name, (size_t)n), s);
    }
}
END_TEST

/* ------------------------------------------------------------ replies */

/* A reply as hiredis would give it, from RESP text. */
static redisReply *resp(const char *text)
{
    redisReader *rd = redisReaderCreate();
    ck_assert_int_eq(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
    void *rep = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &rep), REDIS_OK);
    ck_assert_ptr_nonnull(rep);
    redisReaderFree(rd);
    return rep;
}

/* A master [ip "h", port 1, id]; and [ip "1.2", port 7000, id]. */
#define NODE_H1 "*3\r\n$1\r\nh\r\n:1\r\n$2\r\nid\r\n"
#define NODE_12 "*3\r\n$3\r\n1.2\r\n:7000\r\n$2\r\nid\r\n"

/* CLUSTER SLOTS and redirections are replies from the network: a reply of
 * another shape changes nothing, a redirection that does not parse is none. */
START_TEST(slot_map_and_redirections_from_untrusted_replies)
{
    struct srl__cluster c;
    memset(&c, 0, sizeof c);
    /* Two ranges; the second master shown with an empty address (the
     * asked host's). */
    redisReply *r = resp("*2\r\n"
                         "*3\r\n:0\r\n:99\r\n*3\r\n$3\r\n1.2\r\n:7000\r\n$1\r\na\r\n"
                         "*4\r\n:100\r\n:16383\r\n*3\r\n$0\r\n\r\n:7001\r\n$1\r\nb\r\n"
                         "*3\r\n$3\r\n9.9\r\n:7002\r\n$1\r\nc\r\n");
    ck_assert_int_eq(srl__cluster_apply_slots(&c, r, "asked"), 0);
    freeReplyObject(r);
    ck_assert_uint_eq(c.n, 2);   /* masters only: the replica 9.9 is not a node */
    ck_assert_str_eq(c.node[c.slot[0] - 1].host, "1.2");
    ck_assert_int_eq(c.node[c.slot[99] - 1].port, 7000);
    ck_assert_str_eq(c.node[c.slot[100] - 1].host, "asked");
    ck_assert_int_eq(c.node[c.slot[16383] - 1].port, 7001);
    uint16_t before[SRL__SLOTS];
    memcpy(before, c.slot, sizeof before);
    static const char *const bad[] = {
        "$2\r\nno\r\n",                                                   /* not an array */
        "*1\r\n*3\r\n:0\r\n:16384\r\n" NODE_H1,                  /* slot out of range */
        "*1\r\n*3\r\n:9\r\n:3\r\n" NODE_H1,                       /* start > end */
        "*1\r\n*3\r\n:-1\r\n:3\r\n" NODE_H1,                      /* negative */
        "*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$1\r\nh\r\n:70000\r\n", /* port */
        "*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n:1\r\n:7000\r\n",        /* ip not a string */
        "*1\r\n*2\r\n:0\r\n:3\r\n",                                  /* no master */
        "*1\r\n:5\r\n",                                                 /* not a range */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = resp(bad[i]);
        ck_assert_msg(srl__cluster_apply_slots(&c, r, "asked") == SRL_ECORRUPT, "bad[%zu]", i);
        freeReplyObject(r);
        ck_assert(memcmp(before, c.slot, sizeof before) == 0);
        ck_assert_uint_eq(c.n, 2);
    }
    /* A new map drops a master no slot names any more. */
    r = resp("*1\r\n*3\r\n:0\r\n:16383\r\n" NODE_12);
    ck_assert_int_eq(srl__cluster_apply_slots(&c, r, "asked"), 0);
    freeReplyObject(r);
    ck_assert_uint_eq(c.n, 1);
    ck_assert_uint_eq(c.slot[16383], 1);
    srl__cluster_free(&c);

    unsigned slot;
    char host[256];
    int port;
    r = resp("-MOVED 3999 127.0.0.1:6381\r\n");
    ck_assert_int_eq(srl__cluster_redirect(r, &slot, host, &port), SRL__MOVED);
    ck_assert_uint_eq(slot, 3999);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_int_eq(port, 6381);
    freeReplyObject(r);
    r = resp("-ASK 12 ::1:7000\r\n");   /* IPv6: the port after the last ':' */
    ck_assert_int_eq(srl__cluster_redirect(r, &slot, host, &port), SRL__ASK);
    ck_assert_str_eq(host, "::1");
    ck_assert_int_eq(port, 7000);
    freeReplyObject(r);
    r = resp("-MOVED 5 :7001\r\n");      /* unknown endpoint: the replier's host */
    ck_assert_int_eq(srl__cluster_redirect(r, &slot, host, &port), SRL__MOVED);
    ck_assert_str_eq(host, "");
    freeReplyObject(r);
    r = resp("-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
    ck_assert_int_eq(srl__cluster_redirect(r, &slot, host, &port), SRL__TRYAGAIN);
    freeReplyObject(r);
    static const char *const none[] = {"-MOVED 16384 h:1\r\n", "-MOVED x h:1\r\n",
                                       "-MOVED 1 h\r\n", "-MOVED 1 h:0\r\n",
                                       "-MOVED 1 h:1x\r\n", "-ASK 1\r\n",
                                       "-ERR MOVED 1 h:1\r\n", "+MOVED 1 h:1\r\n"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        r = resp(none[i]);
        ck_assert_msg(srl__cluster_redirect(r, &slot, host, &port) == SRL__NO_REDIRECT,
                      "none[%zu]", i);
        freeReplyObject(r);
    }
}
END_TEST

/* ------------------------------------------------------------ spread */

static int count_visit(const srl_entry *e, void *ctx)
{
    (void)e;
    ++*(unsigned *)ctx;
    return 0;
}

START_TEST(keys_spread_over_every_master)
{
    srl_limiter *lim = open_prefix("spread", 10, "");
    enum { NK = 300 };
    int per[REDIS_CLUSTER_N] = {0};
    srl_decision d;
    for (int i = 0; i < NK; i++) {
        char key[32];
        int n = snprintf(key, sizeof key, "user:%d", i);
        ck_assert_int_eq(srl_acquire(lim, key, (size_t)n, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.remaining, 9);
        int o = owner_of("spread", key);
        ck_assert_int_ge(o, 0);
        per[o]++;
        /* The key lives on the master of its slot. */
        redisContext *k = node(o);
        redisReply *r = redisCommand(k, "EXISTS spread:k:%s", key);
        ck_assert_int_eq(r->integer, 1);
        freeReplyObject(r);
        redisFree(k);
    }
    long long total = 0;
    for (int i = 0; i < REDIS_CLUSTER_N; i++) {
        long long n = scan_count(i, "spread:k:*");
        ck_assert_msg(n > 0, "master %d holds no key", i);
        ck_assert_int_eq(n, per[i]);
        total += n;
        ck_assert_int_gt(scan_count(i, "spread:s:*"), 0);   /* slot hashes there too */
    }
    ck_assert_int_eq(total, NK);
    ck_assert_int_eq(srl_acquire(lim, "user:7", 6, 3, &d), 0);
    ck_assert_uint_eq(d.remaining, 6);

    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.allowed, NK + 1);
    ck_assert_uint_eq(st.denied, 0);
    unsigned seen = 0;
    ck_assert_int_eq(srl_foreach(lim, count_visit, &seen), NK);
    ck_assert_uint_eq(seen, NK);
    ck_assert_int_eq(srl_reset_key(lim, "user:7", 6), 0);
    ck_assert_int_eq(srl_peek(lim, "user:7", 6, 1, &d), SRL_ENOENT);
    ck_assert_int_eq(srl_evict_idle(lim), 0);

    /* The policy lives in one key (P:cfg): another policy is refused. */
    srl_config other;
    srl_config_init(&other);
    other.policy = (srl_policy){.algorithm = SRL_GCRA, .permits = 11, .window_ns = 60 * SEC};
    char u[300];
    snprintf(u, sizeof u, "%s?prefix=spread", cl.uri);
    srl_limiter *l2 = NULL;
    ck_assert_int_eq(srl_open_redis(u, &other, &l2), SRL_EMISMATCH);
    /* A hash tag in the prefix would put every key in one slot. */
    snprintf(u, sizeof u, "%s?prefix=%%7Bp%%7D", cl.uri);
    ck_assert_int_eq(srl_open_redis(u, &other, &l2), SRL_EINVAL);
    /* Any seed that answers will do: the first one here has no server. */
    int dead = cl.port[0] + 1;
    while (dead == cl.port[1] || dead == cl.port[2])
        dead++;
    snprintf(u, sizeof u, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d?prefix=spread", dead,
             cl.port[1]);
    srl_config same;
    srl_config_init(&same);
    same.policy = (srl_policy){.algorithm = SRL_GCRA, .permits = 10,
                               .window_ns = 20ull * 86400 * SEC};
    ck_assert_int_eq(srl_open_redis(u, &same, &l2), 0);
    ck_assert_int_eq(srl_peek(l2, "user:9", 6, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 8);
    srl_close(l2);
    /* Adopting the stored policy works on a cluster too. */
    snprintf(u, sizeof u, "%s?prefix=spread", cl.uri);
    ck_assert_int_eq(srl_open_redis(u, NULL, &l2), 0);
    ck_assert_int_eq(srl_peek(l2, "user:8", 6, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 8);   /* the peek's remaining: after one more */
    srl_close(l2);
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------------------ forked */

enum { NPROC = 8, MAXKEYS = 64 };

/* 8 children started together; child c goes round the keys from key c,
 * acquiring on each until it is denied, until every key denied it.  Each
 * writes a byte to progress_w (if >= 0) after its 20th call: the migration
 * test waits for them.  With stop[0] >= 0 a child then goes on asking (each
 * key must stay denied) until stop[0] reads EOF, so the parent can act
 * while calls are certain to go on (the children close stop[1]).  run_collect: counts[k] the admissions
 * of key k over all children; returns the number of children that saw an
 * error. */
struct run {
    pid_t kids[NPROC];
    int res;
};

static int stopped(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

static void run_start(struct run *run, srl_limiter *lim, char keys[][24], int nk, int progress_w,
                      const int stop[2])
{
    int stop_r = stop != NULL ? stop[0] : -1;
    int go[2], res[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(res), 0);
    for (int c = 0; c < NPROC; c++) {
        run->kids[c] = test_fork();
        if (run->kids[c] == 0) {
            close(go[1]);
            if (stop != NULL)
                close(stop[1]);
            char ch;
            (void)!read(go[0], &ch, 1);   /* EOF: everyone starts together */
            unsigned n[MAXKEYS + 1] = {0};
            unsigned char done[MAXKEYS] = {0};
            int left = nk, calls = 0;
            while ((left > 0 || (stop_r >= 0 && !stopped(stop_r))) && !n[MAXKEYS]) {
                for (int j = 0; j < nk && !n[MAXKEYS]; j++) {
                    int k = (c + j) % nk;
                    if (done[k] && (left > 0 || stop_r < 0))
                        continue;
                    srl_decision d;
                    int rc = srl_acquire(lim, keys[k], strlen(keys[k]), 1, &d);
                    if (++calls == 20 && progress_w >= 0)
                        (void)!write(progress_w, "p", 1);
                    if (rc != 0) {
                        n[MAXKEYS] = (unsigned)-rc;   /* an error: stop, reported */
                    } else if (d.allowed) {
                        n[k]++;
                    } else if (!done[k]) {
                        done[k] = 1;
                        left--;
                    }
                }
            }
            if (calls < 20 && progress_w >= 0)
                (void)!write(progress_w, "p", 1);
            (void)!write(res[1], n, sizeof n);
            _exit(0);
        }
    }
    close(go[0]);
    close(res[1]);
    close(go[1]);   /* go */
    run->res = res[0];
}

static int last_error;   /* run_collect: the last error code a child saw */

static int run_collect(struct run *run, int nk, unsigned *counts)
{
    int errors = 0;
    memset(counts, 0, sizeof *counts * (size_t)nk);
    for (int c = 0; c < NPROC; c++) {
        unsigned n[MAXKEYS + 1];
        ck_assert_int_eq(read(run->res, n, sizeof n), (ssize_t)sizeof n);
        for (int k = 0; k < nk; k++)
            counts[k] += n[k];
        errors += n[MAXKEYS] != 0;
        if (n[MAXKEYS] != 0)
            last_error = -(int)n[MAXKEYS];
    }
    for (int c = 0; c < NPROC; c++)
        waitpid(run->kids[c], NULL, 0);
    close(run->res);
    return errors;
}

/* _i: the trial (each on a prefix of its own). */
START_TEST(forked_exact_on_one_key)
{
    char prefix[16];
    snprintf(prefix, sizeof prefix, "one%d", _i);
    srl_limiter *lim = open_prefix(prefix, 1000, "");
    char keys[1][24] = {"hot"};
    srl_decision d;
    /* The parent's connections exist before the fork: each child must
     * make its own. */
    ck_assert_int_eq(srl_peek(lim, "hot", 3, 1, &d), SRL_ENOENT);
    struct run run;
    run_start(&run, lim, keys, 1, -1, NULL);
    unsigned count;
    ck_assert_int_eq(run_collect(&run, 1, &count), 0);
    ck_assert_uint_eq(count, 1000);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.allowed, 1000);
    ck_assert_uint_eq(st.denied, NPROC);
    srl_close(lim);
}
END_TEST

static int make_keys(char keys[][24], int nk, const char *fmt)
{
    for (int k = 0; k < nk; k++)
        snprintf(keys[k], 24, fmt, k);
    return nk;
}

START_TEST(forked_exact_on_many_keys_spread)
{
    char prefix[16];
    snprintf(prefix, sizeof prefix, "many%d", _i);
    srl_limiter *lim = open_prefix(prefix, 100, "");
    char keys[60][24];
    int nk = make_keys(keys, 60, "key-%d");
    int per[REDIS_CLUSTER_N] = {0};
    for (int k = 0; k < nk; k++)
        per[owner_of(prefix, keys[k])]++;
    for (int i = 0; i < REDIS_CLUSTER_N; i++)
        ck_assert_int_gt(per[i], 0);   /* the keys spread over all three masters */
    struct run run;
    run_start(&run, lim, keys, nk, -1, NULL);
    unsigned counts[60];
    ck_assert_int_eq(run_collect(&run, nk, counts), 0);
    for (int k = 0; k < nk; k++)
        ck_assert_msg(counts[k] == 100, "%s: %u admitted", keys[k], counts[k]);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.allowed, 100 * 60);
    ck_assert_uint_eq(st.denied, NPROC * 60);
    srl_close(lim);
}
END_TEST

/* Threads share the masters' connections under the store's mutex. */
struct worker {
    srl_limiter *lim;
    pthread_barrier_t *start;
    char (*keys)[24];
    int nk, first, rc;
    unsigned n[30];
};

static void *worker_run(void *p)
{
    struct worker *w = p;
    pthread_barrier_wait(w->start);
    for (int j = 0; j < w->nk && w->rc == 0; j++) {
        const char *k = w->keys[(w->first + j) % w->nk];
        srl_decision d;
        while ((w->rc = srl_acquire(w->lim, k, strlen(k), 1, &d)) == 0 && d.allowed)
            w->n[(w->first + j) % w->nk]++;
    }
    return NULL;
}

START_TEST(threads_exact_on_keys_spread)
{
    srl_limiter *lim = open_prefix("threads", 50, "");
    char keys[30][24];
    int nk = make_keys(keys, 30, "t-%d");
    enum { NT = 4 };
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NT);
    struct worker w[NT];
    pthread_t t[NT];
    for (int i = 0; i < NT; i++) {
        w[i] = (struct worker){.lim = lim, .start = &start, .keys = keys, .nk = nk,
                               .first = i * 7};
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
    }
    unsigned total[30] = {0};
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(w[i].rc, 0);
        for (int k = 0; k < nk; k++)
            total[k] += w[i].n[k];
    }
    for (int k = 0; k < nk; k++)
        ck_assert_msg(total[k] == 50, "%s: %u admitted", keys[k], total[k]);
    pthread_barrier_destroy(&start);
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------------------ reshard */

static void ok_reply(redisReply *r, const char *what)
{
    ck_assert_msg(r != NULL && r->type != REDIS_REPLY_ERROR, "%s: %s", what,
                  r != NULL ? r->str : "no reply");
    freeReplyObject(r);
}

/* Moving slot from master a to master b as redis-cli --cluster reshard
 * does: IMPORTING on b and MIGRATING on a (slot_migrating), MIGRATE its
 * keys max at a time (slot_move_keys: the number moved), then SETSLOT NODE
 * b on every master (slot_owned_by), in index order: unlike redis-cli,
 * which tells the target first, the old master may then send the slot to
 * b while b still sends it back; the store must ride that out. */
static void slot_migrating(unsigned slot, int a, int b)
{
    redisContext *ka = node(a), *kb = node(b);
    ok_reply(redisCommand(kb, "CLUSTER SETSLOT %u IMPORTING %s", slot, cl.id[a]), "importing");
    ok_reply(redisCommand(ka, "CLUSTER SETSLOT %u MIGRATING %s", slot, cl.id[b]), "migrating");
    redisFree(ka);
    redisFree(kb);
}

/* MIGRATE keys k[0..n) from master a to master b. */
static void migrate(int a, int b, const char *const *k, const size_t *kl, size_t n)
{
    redisContext *ka = node(a);
    const char *argv[24];
    size_t lens[24];
    char port[16];
    snprintf(port, sizeof port, "%d", cl.port[b]);
    const char *head[] = {"MIGRATE", "127.0.0.1", port, "", "0", "5000", "KEYS"};
    int argc = 0;
    for (int i = 0; i < 7; i++, argc++) {
        argv[argc] = head[i];
        lens[argc] = strlen(head[i]);
    }
    ck_assert_uint_le(n, 16);
    for (size_t i = 0; i < n; i++, argc++) {
        argv[argc] = k[i];
        lens[argc] = kl[i];
    }
    ok_reply(redisCommandArgv(ka, argc, argv, lens), "migrate");
    redisFree(ka);
}

static size_t slot_move_keys(unsigned slot, int a, int b, unsigned max)
{
    redisContext *ka = node(a);
    redisReply *r = redisCommand(ka, "CLUSTER GETKEYSINSLOT %u %u", slot, max);
    ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements <= 16);
    size_t n = r->elements;
    const char *k[16];
    size_t kl[16];
    for (size_t i = 0; i < n; i++) {
        k[i] = r->element[i]->str;
        kl[i] = r->element[i]->len;
    }
    if (n > 0)
        migrate(a, b, k, kl, n);
    freeReplyObject(r);
    redisFree(ka);
    return n;
}

static void slot_owned_by(unsigned slot, int b)
{
    for (int i = 0; i < REDIS_CLUSTER_N; i++) {
        redisContext *k = node(i);
        ok_reply(redisCommand(k, "CLUSTER SETSLOT %u NODE %s", slot, cl.id[b]), "node");
        redisFree(k);
    }
}

static long long errorstat(int i, const char *name)
{
    redisContext *k = node(i);
    redisReply *r = redisCommand(k, "INFO errorstats");
    ck_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    char pat[64];
    snprintf(pat, sizeof pat, "errorstat_%s:count=", name);
    const char *p = strstr(r->str, pat);
    long long v = p != NULL ? atoll(p + strlen(pat)) : 0;
    freeReplyObject(r);
    redisFree(k);
    return v;
}

/* _i: the trial; each moves the slot on to the next master. */
START_TEST(slot_migrated_while_running_stays_exact)
{
    char prefix[16];
    snprintf(prefix, sizeof prefix, "mv%d", _i);
    srl_limiter *lim = open_prefix(prefix, 300, "");
    /* 24 keys in one slot (hash tag {mv}) and 24 spread ones. */
    char keys[48][24];
    make_keys(keys, 24, "{mv}%d");
    make_keys(keys + 24, 24, "k%d");
    unsigned slot = srl__keyslot("mv", 2);
    int a = redis_cluster_owner(&cl, slot), b = (a + 1) % REDIS_CLUSTER_N;
    ck_assert_int_ge(a, 0);
    long long moved0 = errorstat(a, "MOVED"), ask0 = errorstat(a, "ASK");

    int prog[2], stop[2];
    ck_assert_int_eq(pipe(prog), 0);
    ck_assert_int_eq(pipe(stop), 0);
    struct run run;
    run_start(&run, lim, keys, 48, prog[1], stop);
    close(prog[1]);
    close(stop[0]);
    char ch;
    for (int c = 0; c < NPROC; c++)   /* every child is running */
        ck_assert_int_eq(read(prog[0], &ch, 1), 1);
    /* The slot hash and 8 of the slot's keys first: calls on those 8 are
     * ASKed to b (their script's two keys are both there); calls on the
     * others meanwhile get TRYAGAIN (their two keys split) and retry.
     * Then the rest, a few at a time. */
    slot_migrating(slot, a, b);
    char hash[64], tag[8];
    snprintf(hash, sizeof hash, "%s:s:{%s}", prefix, srl__slot_tag(slot, tag));
    const char *first[9] = {hash};
    size_t firstl[9] = {strlen(hash)};
    char names[8][40];
    for (int k = 0; k < 8; k++) {
        firstl[k + 1] = (size_t)snprintf(names[k], sizeof names[k], "%s:k:%s", prefix, keys[k]);
        first[k + 1] = names[k];
    }
    migrate(a, b, first, firstl, 9);
    /* This process's own handle is ASKed too (its map still says a). */
    srl_decision d;
    ck_assert_int_eq(srl_peek(lim, keys[0], strlen(keys[0]), 1, &d), 0);
    ck_assert_int_gt(errorstat(a, "ASK"), ask0);
    while (slot_move_keys(slot, a, b, 3) > 0) {
    }
    slot_owned_by(slot, b);
    ck_assert_int_eq(srl_peek(lim, keys[0], strlen(keys[0]), 1, &d), 0);
    ck_assert_int_gt(errorstat(a, "MOVED"), moved0);   /* the old master said MOVED */
    close(stop[1]);
    unsigned counts[48];
    int errors = run_collect(&run, 48, counts);
    close(prog[0]);
    ck_assert_msg(errors == 0, "%d children saw an error, the last %s", errors,
                  srl_err_name(last_error));
    for (int k = 0; k < 48; k++)
        ck_assert_msg(counts[k] == 300, "%s: %u admitted", keys[k], counts[k]);
    ck_assert_int_eq(redis_cluster_owner(&cl, slot), b);
    ck_assert_int_eq(srl_peek(lim, "{mv}0", 5, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------------------ faults */

START_TEST(stopped_master_degrades_then_recovers)
{
    srl_limiter *lim = NULL;
    {
        srl_config cfg;
        srl_config_init(&cfg);
        /* T = 20 days / 100: nothing refills during the timeouts. */
        cfg.policy = (srl_policy){.algorithm = SRL_GCRA, .permits = 100,
                                  .window_ns = 20ull * 86400 * SEC};
        cfg.on_full = SRL_ON_FULL_DENY;
        char u[300];
        snprintf(u, sizeof u, "%s?prefix=stop&timeout_ms=300", cl.uri);
        ck_assert_int_eq(srl_open_redis(u, &cfg, &lim), 0);
    }
    /* A key on each master. */
    char key[REDIS_CLUSTER_N][24];
    int have = 0;
    for (int i = 0; have != (1 << REDIS_CLUSTER_N) - 1; i++) {
        char k[24];
        snprintf(k, sizeof k, "k%d", i);
        int o = owner_of("stop", k);
        if (!(have & (1 << o))) {
            memcpy(key[o], k, sizeof k);
            have |= 1 << o;
        }
    }
    srl_decision d;
    for (int i = 0; i < REDIS_CLUSTER_N; i++) {
        ck_assert_int_eq(srl_acquire(lim, key[i], strlen(key[i]), 1, &d), 0);
        ck_assert_uint_eq(d.remaining, 99);
    }
    int m = 1;
    ck_assert_int_eq(kill(cl.pid[m], SIGSTOP), 0);
    ck_assert_int_eq(srl_acquire(lim, key[m], strlen(key[m]), 1, &d), SRL_ETIMEDOUT);
    ck_assert_int_eq(d.allowed, 0);   /* on_full: deny */
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_int_eq(srl_peek(lim, key[m], strlen(key[m]), 1, &d), SRL_ETIMEDOUT);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    /* The other masters' keys are decided as before. */
    for (int i = 0; i < REDIS_CLUSTER_N; i++) {
        if (i == m)
            continue;
        ck_assert_int_eq(srl_acquire(lim, key[i], strlen(key[i]), 1, &d), 0);
        ck_assert_uint_eq(d.flags, 0);
        ck_assert_uint_eq(d.remaining, 98);
    }
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), SRL_ETIMEDOUT);   /* it SCANs every master */
    ck_assert_int_eq(kill(cl.pid[m], SIGCONT), 0);

    ck_assert_int_eq(srl_acquire(lim, key[m], strlen(key[m]), 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.flags, 0);
    /* The timed-out acquire may or may not have reached the server. */
    ck_assert(d.remaining == 98 || d.remaining == 97);
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.timeouts, 3);
    srl_close(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redis_cluster");
    /* Each case has a cluster of its own: the reshard and the stop alter it. */
    TCase *tc = tcase_create("cluster");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, cluster_up, cluster_down);
    tcase_add_test(tc, crc16_and_keyslot_agree_with_the_server);
    tcase_add_test(tc, keys_spread_over_every_master);
    tcase_add_loop_test(tc, forked_exact_on_one_key, 0, 5);
    tcase_add_loop_test(tc, forked_exact_on_many_keys_spread, 0, 3);
    tcase_add_test(tc, threads_exact_on_keys_spread);
    suite_add_tcase(s, tc);
    TCase *re = tcase_create("reshard");
    tcase_set_timeout(re, 120);
    tcase_add_unchecked_fixture(re, cluster_up, cluster_down);
    tcase_add_loop_test(re, slot_migrated_while_running_stays_exact, 0, 3);
    suite_add_tcase(s, re);
    TCase *st = tcase_create("stop");
    tcase_set_timeout(st, 60);
    tcase_add_unchecked_fixture(st, cluster_up, cluster_down);
    tcase_add_test(st, stopped_master_degrades_then_recovers);
    suite_add_tcase(s, st);
    TCase *pa = tcase_create("replies");   /* no server */
    tcase_add_test(pa, slot_map_and_redirections_from_untrusted_replies);
    suite_add_tcase(s, pa);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
