/*
 * check_rlctl_redis.c - suite "rlctl_redis": the built rlctl's info, get,
 * reset and list on a Redis store named by its uri, against a real
 * redis-server each test starts (unix socket in a mkdtemp directory, a
 * password, no persistence) and stops by pid.  Exact output lines and exit
 * codes.
 *
 * The keys are made by this process through srl_open_redis (rlctl cannot
 * create a Redis store: it only adopts one).  Decisions are made on the
 * server's clock, which rlctl cannot be given a fake of, so the policy is
 * gcra:5/1h (T = 12 min) and the one part of a line that depends on time,
 * a trailing duration, is parsed and bounded: the test case's timeout
 * (TIMEOUT_S) bounds the time elapsed since the keys were taken, so the
 * bound is not a guess about speed.  Everything before it is compared
 * byte for byte.
 */
#include <arpa/inet.h>
#include <check.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <unistd.h>

#include "../redis_testutil.h"
#include "../testutil.h"
#include "rlctl_assert.h"
#include "srl.h"

#define TIMEOUT_S 60

static char dir[64], sock[96], uri[200], shown[200];
static pid_t srv;

/* A server with a password; uri (with it) and shown (as rlctl prints it). */
static void start(void)
{
    snprintf(dir, sizeof dir, "/tmp/srl-rlctl-redis-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    snprintf(uri, sizeof uri, "unix://:pw%%40x@%s?prefix=api", sock);
    snprintf(shown, sizeof shown, "unix://:***@%s?prefix=api", sock);
    const char *extra[] = {"--requirepass", "pw@x", NULL};
    srv = redis_server_start(dir, sock, extra);
}

static void stop(void)
{
    redis_server_stop(srv);
    unlink(sock);
    rmdir(dir);
}

/* Open the store at uri with gcra:5/1h and take each key once. */
static srl_limiter *seed(const char *const *keys, size_t n)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("gcra:5/1h", &cfg.policy), 0);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(uri, &cfg, &lim), 0);
    srl_decision d;
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(srl_acquire(lim, keys[i], strlen(keys[i]), 1, &d), 0);
    return lim;
}

/* Seconds of an rlctl duration of a minute or more ("36m", "35m 59s"). */
static long duration_s(const char *s)
{
    long total = 0;
    while (*s != '\0' && *s != '\n') {
        char *end;
        long v = strtol(s, &end, 10);
        ck_assert_msg(end != s, "not a duration: %s", s);
        long unit = *end == 'd' ? 86400 : *end == 'h' ? 3600 : *end == 'm' ? 60 : *end == 's' ? 1 : 0;
        ck_assert_msg(unit != 0, "not a duration: %s", s);
        total += v * unit;
        s = end + 1;
        if (*s == ' ')
            s++;
    }
    return total;
}

/* The line starting with `start` in out must continue with a duration
 * within (want_s - TIMEOUT_S, want_s], then end. */
static void line_then_duration(const char *out, const char *start, long want_s)
{
    const char *at = strstr(out, start);
    ck_assert_msg(at != NULL && (at == out || at[-1] == '\n'), "no line '%s' in:\n%s", start,
                  out);
    long s = duration_s(at + strlen(start));
    ck_assert_msg(s <= want_s && s > want_s - TIMEOUT_S, "%s: %ld s, want ~%ld", start, s, want_s);
}

START_TEST(info_shows_the_stored_policy_and_fleet_counts_with_the_password_hidden)
{
    start();
    const char *keys[] = {"alice", "alice", "bob"};
    srl_limiter *lim = seed(keys, 3);
    srl_decision d;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(srl_acquire(lim, "carl", 4, 1, &d), 0);
    ck_assert_int_eq(srl_acquire(lim, "carl", 4, 2, &d), 0);   /* denied: 1 left */
    ck_assert_int_eq(d.allowed, 0);
    run_result r;
    RUN(&r, 0, "info", uri);
    char want[1024];
    snprintf(want, sizeof want,
             "name:           %s\n"
             "store:          redis (prefix api)\n"
             "policy:         gcra:5/1h\n",
             shown);
    ck_assert_msg(strncmp(r.out, want, strlen(want)) == 0, "got:\n%s", r.out);
    const char *created = strstr(r.out, "created:        ");
    ck_assert_ptr_nonnull(created);
    ck_assert_msg(strstr(created, ", the server's clock)\n"
                                  "allowed:        7 (every host)\n"
                                  "denied:         1 (every host)\n"
                                  "keys:           not counted: 'rlctl list' walks them\n") != NULL,
                  "got:\n%s", r.out);
    ck_assert_ptr_null(strstr(r.out, "pw@x"));
    ck_assert_ptr_null(strstr(r.out, "pw%40x"));
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    RUN(&r, 0, "info", uri, "--json");
    json_value *v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "name"), shown);
    ck_assert_str_eq(json_get_str(v, "store"), "redis");
    ck_assert_str_eq(json_get_str(v, "prefix"), "api");
    ck_assert_str_eq(json_get_str(v, "policy"), "gcra:5/1h");
    ck_assert_uint_eq(json_get_u64(v, "permits"), 5);
    ck_assert_uint_eq(json_get_u64(v, "allowed"), 7);
    ck_assert_uint_eq(json_get_u64(v, "denied"), 1);
    srl_info in;
    ck_assert_int_eq(srl_info_get(lim, &in), 0);
    ck_assert_uint_eq(json_get_u64(v, "created_unix_ns"), in.created_unix_ns);
    json_free(v);
    run_free(&r);
    srl_close(lim);
    stop();
}
END_TEST

START_TEST(get_and_reset_on_a_uri_answer_as_on_a_segment)
{
    start();
    const char *keys[] = {"alice", "alice", "bob"};
    srl_limiter *lim = seed(keys, 3);
    srl_decision d;
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(srl_acquire(lim, "carl", 4, 1, &d), 0);
    run_result r;
    /* alice took 2 of 5: a third passes and leaves 2; at rest 3 T later. */
    RUN(&r, 0, "get", uri, "alice");
    line_then_duration(r.out, "alice: a request of cost 1 would be allowed now, leaving 2 of 5; "
                              "at rest in ", 36 * 60);
    run_free(&r);
    /* carl took all 5: retry after T, at rest after 5 T. */
    RUN(&r, 0, "get", uri, "carl");
    ck_assert_msg(strncmp(r.out, "carl: a request of cost 1 would be denied now: retry after ",
                          59) == 0, "got: %s", r.out);
    char *semi = strstr(r.out, "; at rest in ");
    ck_assert_ptr_nonnull(semi);
    *semi = '\0';
    long retry = duration_s(r.out + 59);
    ck_assert(retry <= 12 * 60 && retry > 12 * 60 - TIMEOUT_S);
    line_then_duration(semi + 2, "at rest in ", 60 * 60);
    run_free(&r);
    RUN(&r, 1, "get", uri, "carol");
    ck_assert_str_eq(r.out, "carol: not tracked (a new key: a first request of cost 1 would be "
                            "allowed, leaving 4 of 5)\n");
    run_free(&r);
    RUN(&r, 0, "get", uri, "alice", "--json");
    json_value *v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "tracked"), 1);
    ck_assert_uint_eq(json_get_u64(v, "remaining"), 2);
    ck_assert_uint_eq(json_get_u64(v, "limit"), 5);
    json_free(v);
    run_free(&r);
    /* A tier the store does not have: named for a store, not a segment. */
    RUN(&r, 64, "get", uri, "alice", "--tier", "gold");
    const char *tail = ": no tier 'gold' in the store (it has only tier 0, 'default': its own "
                       "policy)\n";   /* after the uri, its password hidden */
    ck_assert_msg(strlen(r.err) > strlen(tail) &&
                      strcmp(r.err + strlen(r.err) - strlen(tail), tail) == 0,
                  "got: %s", r.err);
    run_free(&r);

    RUN(&r, 0, "reset", uri, "bob");
    ck_assert_str_eq(r.out, "bob: reset (its next request starts fresh)\n");
    run_free(&r);
    RUN(&r, 1, "reset", uri, "bob");
    ck_assert_str_eq(r.out, "bob: not tracked (nothing to reset)\n");
    run_free(&r);
    ck_assert_int_eq(srl_peek(lim, "bob", 3, 1, &d), SRL_ENOENT);
    /* get changed nothing: alice still has 3. */
    ck_assert_int_eq(srl_peek(lim, "alice", 5, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 2);
    srl_close(lim);
    stop();
}
END_TEST

/* 250 keys span several SCAN batches of 100: list shows each once, in rows
 * exact up to their last column; --top 5 stops after 5; --sort is refused. */
START_TEST(list_walks_every_key_and_top_stops_the_walk)
{
    start();
    enum { N = 250 };
    static char names[N][8];
    const char *keys[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "k%03d", i);
        keys[i] = names[i];
    }
    srl_limiter *lim = seed(keys, N);
    redisContext *c = redisConnectUnix(sock);
    ck_assert(c != NULL && c->err == 0);
    freeReplyObject(redisCommand(c, "AUTH pw@x"));
    freeReplyObject(redisCommand(c, "CONFIG RESETSTAT"));

    run_result r;
    RUN(&r, 0, "list", uri, "--json");
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "visited"), N);
    ck_assert_uint_eq(json_get_u64(v, "shown"), N);
    ck_assert_str_eq(json_get_str(v, "name"), shown);
    for (int i = 0; i < N; i++) {
        const json_value *k = find_key(v, names[i]);   /* fails if listed twice */
        ck_assert_msg(k != NULL, "%s not listed", names[i]);
        ck_assert_uint_eq(json_get_u64(k, "available"), 4);
        ck_assert_uint_eq(json_get_u64(k, "key_len"), 4);
        ck_assert_uint_eq(json_get_u64(k, "retry_after_ns"), 0);
        ck_assert_int_eq(json_get_bool(k, "truncated"), 0);
    }
    json_free(v);
    run_free(&r);
    redisReply *st = redisCommand(c, "INFO commandstats");
    const char *calls = strstr(st->str, "cmdstat_scan:calls=");
    ck_assert_ptr_nonnull(calls);
    ck_assert_int_ge(atoi(calls + 19), 3);   /* 250 keys, COUNT 100 */
    freeReplyObject(st);
    redisFree(c);

    RUN(&r, 0, "list", uri);
    const char *hdr = "KEY   LEN  AVAILABLE  RETRY_AFTER  RESET_AFTER_NEXT\n";
    ck_assert_msg(strncmp(r.out, hdr, strlen(hdr)) == 0, "got:\n%s", r.out);
    for (int i = 0; i < N; i++) {
        char row[sizeof names[0] + 40];
        /* One taken: a peek of one more leaves 3 and rests 2 T later. */
        snprintf(row, sizeof row, "%.7s    4        4/5           0s  ", names[i]);
        line_then_duration(r.out, row, 24 * 60);
    }
    ck_assert_msg(strstr(r.out, "\n(250 keys)\n") != NULL, "%s", r.out + r.out_len - 40);
    ck_assert_str_eq(r.err, "");
    run_free(&r);

    RUN(&r, 0, "list", uri, "--top", "5");
    int lines = 0;
    for (const char *p = r.out; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, 7);   /* header, 5 rows, footer */
    ck_assert_msg(strstr(r.out, "\n(5 keys shown; --top stopped the walk, there may be more)\n"),
                  "%s", r.out);
    run_free(&r);
    RUN(&r, 0, "list", uri, "--top", "5", "--json");
    v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "visited"), 5);
    json_free(v);
    run_free(&r);

    RUN(&r, EX_USAGE, "list", uri, "--sort", "denied");
    ck_assert_str_eq(r.err, "rlctl: list: --sort: a Redis store keeps no per-key counts or "
                            "time of last use; list it without --sort (--top N shows the "
                            "first N keys found)\n");
    run_free(&r);
    srl_close(lim);
    stop();
}
END_TEST

/* The store cannot count its keys first: without --top or --all-keys the
 * walk stops after RLCTL_LIST_MAX_KEYS + 1 and the listing is refused;
 * --top 3 shows 3; --all-keys lists all 100001. */
START_TEST(list_of_more_than_100000_keys_needs_top_or_all_keys)
{
    start();
    const char *keys[] = {"seed"};
    srl_limiter *lim = seed(keys, 1);
    redisContext *c = redisConnectUnix(sock);
    ck_assert(c != NULL && c->err == 0);
    freeReplyObject(redisCommand(c, "AUTH pw@x"));
    /* 100000 more GCRA states (a tat of 1: long at rest, still stored). */
    redisReply *rep = redisCommand(c, "EVAL %s 0",
                                   "for i = 1, 100000 do redis.call('SET', "
                                   "string.format('api:k:m%06d', i), '1', 'PX', 3600000) end "
                                   "return redis.call('DBSIZE')");
    ck_assert_int_eq(rep->type, REDIS_REPLY_INTEGER);
    ck_assert_int_eq(rep->integer, 100000 + 3);   /* + seed, api:cfg, api:stats */
    freeReplyObject(rep);
    redisFree(c);
    run_result r;
    char want[400];
    RUN(&r, EX_USAGE, "list", uri);
    snprintf(want, sizeof want,
             "rlctl: list: %s holds more than 100000 keys: give --top N for the first N SCAN "
             "finds, or --all-keys to list every one\n",
             shown);
    ck_assert_str_eq(r.err, want);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    RUN(&r, 0, "list", uri, "--top", "3");
    ck_assert_msg(strstr(r.out, "\n(3 keys shown; --top stopped the walk, there may be more)\n"),
                  "%s", r.out);
    run_free(&r);
    RUN(&r, 0, "list", uri, "--all-keys");
    ck_assert_msg(r.out_len > 12 && strcmp(r.out + r.out_len - 15, "\n(100001 keys)\n") == 0,
                  "%s", r.out_len > 200 ? r.out + r.out_len - 200 : r.out);
    run_free(&r);
    srl_close(lim);
    stop();
}
END_TEST

START_TEST(bad_uris_missing_stores_and_refused_passwords_exit_with_their_reason)
{
    start();
    const char *keys[] = {"a"};
    srl_limiter *lim = seed(keys, 1);
    run_result r;
    char u[300], want[600];

    snprintf(u, sizeof u, "unix://:pw%%40x@%s?prefix=nothing", sock);
    RUN(&r, EX_NOINPUT, "info", u);
    snprintf(want, sizeof want,
             "rlctl: unix://:***@%s?prefix=nothing: no srl limiter at this uri: no host has "
             "opened a limiter under this prefix yet (no PREFIX:cfg): check the uri's db and "
             "prefix=\n",
             sock);
    ck_assert_str_eq(r.err, want);
    run_free(&r);

    snprintf(u, sizeof u, "unix://%s?prefix=api&password=wrong", sock);
    RUN(&r, EX_NOPERM, "list", u);
    snprintf(want, sizeof want,
             "rlctl: unix://%s?prefix=api&password=***: the Redis server refused access: "
             "AUTH on %s: WRONGPASS invalid username-password pair or user is disabled.: "
             "give the user and password the workers' uri gives (user:password@ or "
             "?password=)\n",
             sock, sock);
    ck_assert_str_eq(r.err, want);
    ck_assert_str_eq(r.out, "");
    run_free(&r);

    RUN(&r, EX_USAGE, "get", "redis://h:99999", "k");
    ck_assert_str_eq(r.err, "rlctl: get: redis uri: port must be 1..65535, not '99999'\n"
                            "usage: rlctl get NAME|URI [--hex] KEY [--cost N] [--tier NAME] [--json]\n");
    run_free(&r);
    RUN(&r, EX_USAGE, "evict", uri);
    ck_assert_str_eq(r.err, "rlctl: evict: a Redis uri names a store for info, get, reset and "
                            "list only; evict takes a segment name\n"
                            "usage: rlctl evict NAME [--dry-run] [--json]\n");
    run_free(&r);
    srl_close(lim);

    /* Nobody listens: a system error, at once (no hang). */
    stop();
    snprintf(u, sizeof u, "unix://%s", sock);
    RUN(&r, EX_OSERR, "info", u);
    snprintf(want, sizeof want, "rlctl: %s: %s: connect %s: no such file or directory: ", u,
             srl_strerror(SRL_ESYS), sock);
    ck_assert_msg(strncmp(r.err, want, strlen(want)) == 0, "%s", r.err);
    ck_assert_msg(strstr(r.err, ": check that the Redis server runs at this address\n") != NULL,
                  "%s", r.err);
    run_free(&r);

    /* A port that answers, but not as Redis: the reason, not "Success". */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(lfd, 8), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    pid_t http = test_fork();
    if (http == 0) {
        static const char h[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        for (int c; (c = accept(lfd, NULL, NULL)) >= 0; close(c))
            (void)!write(c, h, sizeof h - 1);
        _exit(0);
    }
    close(lfd);
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", ntohs(a.sin_port));
    RUN(&r, EX_OSERR, "info", u);
    snprintf(want, sizeof want, "rlctl: %s: %s: reply from 127.0.0.1:%d is not RESP: is it "
             "Redis?: ", u, srl_strerror(SRL_ESYS), ntohs(a.sin_port));
    kill(http, SIGKILL);
    waitpid(http, NULL, 0);
    ck_assert_msg(strncmp(r.err, want, strlen(want)) == 0, "%s", r.err);
    ck_assert_msg(strstr(r.err, "Success") == NULL, "%s", r.err);
    run_free(&r);
}
END_TEST

/* A Redis Cluster uri (redis-cluster://h:p,h:p,h:p): info sums every
 * master's counts, get and reset route to the key's master, list walks
 * every master (31 keys over the 16384 slots of three masters).  The
 * cluster has no password; the uri shown is the uri given.  The cluster is
 * started and stopped by the test case's unchecked fixture, in the runner,
 * so its servers are stopped by pid also when the test fails. */
static struct redis_cluster cluster;
static void cluster_up(void) { redis_cluster_start(&cluster); }
static void cluster_down(void) { redis_cluster_stop(&cluster); }

START_TEST(a_cluster_uri_is_a_uri_info_get_reset_and_list_cover_every_master)
{
    const struct redis_cluster *c = &cluster;
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("gcra:5/1h", &cfg.policy), 0);
    char curi[300];
    snprintf(curi, sizeof curi, "%s?prefix=api", c->uri);
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_redis(curi, &cfg, &lim), 0);
    srl_decision d;
    char key[32];
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof key, "user-%d", i);
        ck_assert_int_eq(srl_acquire(lim, key, strlen(key), 1, &d), 0);
    }
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(srl_acquire(lim, "carl", 4, 1, &d), 0);   /* 5 allowed, 1 denied */
    ck_assert_int_eq(d.allowed, 0);
    run_result r;
    RUN(&r, 0, "info", curi, "--json");
    json_value *v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "name"), curi);
    ck_assert_uint_eq(json_get_u64(v, "allowed"), 35);
    ck_assert_uint_eq(json_get_u64(v, "denied"), 1);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "get", curi, "carl");
    ck_assert_msg(strncmp(r.out, "carl: a request of cost 1 would be denied now: retry after ",
                          59) == 0, "got: %s", r.out);
    run_free(&r);
    RUN(&r, 0, "list", curi, "--json");
    size_t rows = 0;
    for (const char *p = r.out; (p = strstr(p, "\"key\"")) != NULL; p++)
        rows++;
    ck_assert_msg(rows == 31, "list showed %zu keys, want 31:\n%s", rows, r.out);
    run_free(&r);
    RUN(&r, 0, "reset", curi, "carl");
    ck_assert_str_eq(r.out, "carl: reset (its next request starts fresh)\n");
    run_free(&r);
    ck_assert_int_eq(srl_peek(lim, "carl", 4, 1, &d), SRL_ENOENT);
    srl_close(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlctl_redis");
    TCase *tc = tcase_create("redis");
    tcase_set_timeout(tc, TIMEOUT_S);
    tcase_add_test(tc, info_shows_the_stored_policy_and_fleet_counts_with_the_password_hidden);
    tcase_add_test(tc, get_and_reset_on_a_uri_answer_as_on_a_segment);
    tcase_add_test(tc, list_walks_every_key_and_top_stops_the_walk);
    tcase_add_test(tc, bad_uris_missing_stores_and_refused_passwords_exit_with_their_reason);
    /* Its own case: three walks of 100001 keys took over 60 s at load 18;
     * it bounds no duration, so its timeout is only a hang's bound. */
    TCase *big = tcase_create("big");
    tcase_set_timeout(big, 600);
    tcase_add_test(big, list_of_more_than_100000_keys_needs_top_or_all_keys);
    suite_add_tcase(s, big);
    TCase *cl = tcase_create("cluster");
    tcase_set_timeout(cl, TIMEOUT_S);
    tcase_add_unchecked_fixture(cl, cluster_up, cluster_down);
    tcase_add_test(cl, a_cluster_uri_is_a_uri_info_get_reset_and_list_cover_every_master);
    suite_add_tcase(s, cl);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
