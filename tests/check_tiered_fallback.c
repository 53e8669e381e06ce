/*
 * check_tiered_fallback.c - fallback=POLICY on the fronted store
 * (srl_open_tiered): while Redis does not answer, the host decides with the
 * fallback policy, exactly across its processes; Redis takes over again
 * when it answers.  A real redis-server on a unix socket in a mkdtemp
 * directory, killed and restarted by pid; 8 forked workers (test_fork),
 * each with its own handle on the same host segments, started together
 * through a pipe.
 *
 *   - Redis up: decisions are Redis's (flags 0);
 *   - Redis killed: 8 workers x 10 requests on one key admit exactly the
 *     fallback's 30, every answer rc 0 flagged DEGRADED | LOCAL;
 *   - Redis started again (no persistence: the prefix starts over): once
 *     one call reaches it (a bounded wait for the reconnect backoff), 8
 *     workers x 20 requests admit exactly Redis's limit less that call's
 *     permit, no answer DEGRADED;
 *   - the option through the config text (parse, format, its errors) and a
 *     host name too long for its NAME.fallback segment.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "redis_testutil.h"
#include "testutil.h"

#define FLEET 100u      /* Redis's limit: token_bucket:100/1d, nothing refills */
#define FALLBACK 30u    /* the host's while Redis is down */
#define WORKERS 8

static char dir[64], sock[96], uri[200];

/* A redis-server on a unix socket in a fresh directory; uri names it with
 * key prefix prefix and a 300 ms timeout. */
static pid_t server_up(const char *prefix)
{
    snprintf(dir, sizeof dir, "/tmp/srl-fallback-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    snprintf(uri, sizeof uri, "unix://%s?timeout_ms=300&prefix=%s", sock, prefix);
    return redis_server_start(dir, sock, NULL);
}

static void server_down(pid_t srv)
{
    redis_server_stop(srv);
    unlink(sock);
    rmdir(dir);
}

static srl_config fallback_cfg(void)
{
    char spec[400];
    snprintf(spec, sizeof spec,
             "token_bucket:%u/1d capacity=1024 on_full=deny fallback=token_bucket:%u/1d "
             "redis=%s", FLEET, FALLBACK, uri);
    srl_config cfg;
    srl_policy_error pe;
    ck_assert_msg(srl_config_parse(&cfg, spec, &pe) == 0, "%s: %s", spec, pe.message);
    return cfg;
}

struct tally {
    unsigned admitted, denied, bad_rc, bad_flags;
    unsigned flags_seen;   /* OR of every decision's flags */
};

/* WORKERS processes, each opening its own handle on name, start together
 * (EOF on a pipe) and make n requests for "k"; their tallies summed.
 * want_flags: what every admission's flags must be (a denial's may add
 * LOCAL: a ban Redis gave), and a denial has a retry_after. */
static struct tally run_workers(const char *name, const srl_config *cfg, unsigned n,
                                unsigned want_flags)
{
    int go[2], res[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(res), 0);
    pid_t kids[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        kids[i] = test_fork();
        if (kids[i] == 0) {
            close(go[1]);
            struct tally t = {0};
            srl_limiter *lim = NULL;
            if (srl_open_tiered(name, uri, cfg, SRL_CREATE, &lim) != 0)
                t.bad_rc = n;
            char c;
            (void)!read(go[0], &c, 1);
            for (unsigned k = 0; lim != NULL && k < n; k++) {
                srl_decision d;
                if (srl_acquire(lim, "k", 1, 1, &d) != 0) {
                    t.bad_rc++;
                    continue;
                }
                t.flags_seen |= d.flags;
                if (d.allowed) {
                    t.admitted++;
                    t.bad_flags += d.flags != want_flags;
                } else {
                    t.denied++;
                    t.bad_flags += (d.flags != want_flags &&
                                    d.flags != (want_flags | SRL_DECISION_LOCAL)) ||
                                   d.retry_after_ns == 0;
                }
            }
            srl_close(lim);
            (void)!write(res[1], &t, sizeof t);
            _exit(0);
        }
    }
    close(go[0]);
    close(go[1]);   /* everyone starts */
    struct tally sum = {0};
    for (int i = 0; i < WORKERS; i++) {
        struct tally t;
        ck_assert_int_eq(read(res[0], &t, sizeof t), (ssize_t)sizeof t);
        sum.admitted += t.admitted;
        sum.denied += t.denied;
        sum.bad_rc += t.bad_rc;
        sum.bad_flags += t.bad_flags;
        sum.flags_seen |= t.flags_seen;
    }
    for (int i = 0; i < WORKERS; i++)
        waitpid(kids[i], NULL, 0);
    close(res[0]);
    close(res[1]);
    return sum;
}

static void unlink_host(const char *name)
{
    char fb[256];
    snprintf(fb, sizeof fb, "%s.fallback", name);
    srl_unlink(name);
    srl_unlink(fb);
}

START_TEST(redis_down_the_host_enforces_the_fallback_exactly_then_redis_takes_over)
{
    pid_t srv = server_up("fb");
    srl_config cfg = fallback_cfg();
    const char *name = unique_name("fallback");
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_tiered(name, uri, &cfg, SRL_CREATE, &lim), 0);

    /* Redis up: Redis decides. */
    srl_decision d;
    for (unsigned i = 0; i < 5; i++) {
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert_uint_eq(d.flags, 0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.remaining, FLEET - 1 - i);
    }

    /* Redis killed mid-run: the host decides with the fallback, exactly. */
    redis_server_stop(srv);
    struct tally down = run_workers(name, &cfg, 10, SRL_DECISION_DEGRADED | SRL_DECISION_LOCAL);
    printf("Redis down: %u admitted, %u denied by %d workers (fallback %u)\n", down.admitted,
           down.denied, WORKERS, FALLBACK);
    ck_assert_uint_eq(down.bad_rc, 0);
    ck_assert_uint_eq(down.bad_flags, 0);
    ck_assert_uint_eq(down.admitted, FALLBACK);
    ck_assert_uint_eq(down.denied, WORKERS * 10 - FALLBACK);
    /* The parent's handle too, and srl_last_error still names the outage. */
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED | SRL_DECISION_LOCAL);
    char why[256];
    ck_assert_uint_gt(srl_last_error(why, sizeof why), 0);
    ck_assert_msg(strstr(why, sock) != NULL, "srl_last_error: '%s'", why);

    /* Redis back (empty: no persistence): the first call that reaches it
     * is Redis's again.  The wait is the reconnect backoff (1 s at most
     * per step), asked for, bounded. */
    srv = redis_server_start(dir, sock, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int rc = srl_acquire(lim, "k", 1, 1, &d);
        ck_assert_int_eq(rc, 0);
        if (d.flags == 0)
            break;
        ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED | SRL_DECISION_LOCAL);
        ck_assert_int_eq(d.allowed, 0);   /* the fallback is spent */
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ck_assert_msg(t1.tv_sec - t0.tv_sec < 10,
                      "Redis restarted, but no decision came from it within 10 s");
        usleep(5000);
    }
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, FLEET - 1);
    struct tally up = run_workers(name, &cfg, 20, 0);
    printf("Redis back: %u admitted, %u denied by %d workers (left %u)\n", up.admitted,
           up.denied, WORKERS, FLEET - 1);
    ck_assert_uint_eq(up.bad_rc, 0);
    ck_assert_uint_eq(up.bad_flags, 0);
    ck_assert_uint_eq(up.flags_seen & SRL_DECISION_DEGRADED, 0);
    ck_assert_uint_eq(up.admitted, FLEET - 1);
    ck_assert_uint_eq(up.denied, WORKERS * 20 - (FLEET - 1));

    srl_close(lim);
    unlink_host(name);
    srl_config_free(&cfg);
    server_down(srv);
}
END_TEST

START_TEST(the_option_goes_through_the_config_text)
{
    srl_config cfg;
    srl_policy_error pe;
    ck_assert_int_eq(srl_config_parse(&cfg, "gcra:100/1m fallback=gcra:10/1m + "
                                      "token_bucket:100/1h redis=redis://h", &pe), 0);
    char text[SRL_CONFIG_TEXT_MAX];
    ck_assert_int_gt(srl_config_format(&cfg, text, sizeof text), 0);
    ck_assert_str_eq(text, "gcra:100/1m capacity=65536 redis=redis://h "
                           "fallback=gcra:10/1m + token_bucket:100/1h");
    srl_config_free(&cfg);
    ck_assert_int_eq(srl_config_parse(&cfg, "gcra:100/1m fallback=gcra:10/1m", &pe),
                     SRL_EPOLICY);
    ck_assert_str_eq(pe.message, "fallback= is what the host decides while Redis does not "
                                 "answer: it needs redis=URI (a segment decides every request "
                                 "itself)");
    ck_assert_int_eq(srl_config_parse(&cfg, "gcra:100/1m fallback=concurrency:4", &pe),
                     SRL_EPOLICY);
    ck_assert_str_eq(pe.message, "fallback takes rate limits, not concurrency (the host "
                                 "could not give Redis its units back)");
    ck_assert_uint_eq(pe.offset, 21);
    ck_assert_int_eq(srl_config_parse(&cfg, "gcra:100/1m fallback=10/1m fallback=5/1m "
                                      "redis=redis://h", &pe),
                     SRL_EPOLICY);
    ck_assert_str_eq(pe.message, "fallback is given twice");
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_config_set(&cfg, "policy", "gcra:100/1m", &pe), 0);
    ck_assert_int_eq(srl_config_set(&cfg, "fallback", "gcra:10/1m", &pe), 0);
    ck_assert_int_gt(srl_config_format(&cfg, text, sizeof text), 0);
    ck_assert_str_eq(text, "gcra:100/1m capacity=65536 fallback=gcra:10/1m");
    srl_config_free(&cfg);
}
END_TEST

START_TEST(a_host_name_too_long_for_its_fallback_segment_is_refused)
{
    pid_t srv = server_up("fb");
    srl_config cfg = fallback_cfg();
    char name[SRL_NAME_MAX + 1];
    memset(name, 'n', SRL_NAME_MAX);
    name[SRL_NAME_MAX] = '\0';
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_tiered(name, uri, &cfg, SRL_CREATE, &lim), SRL_EINVAL);
    ck_assert_ptr_null(lim);
    char why[256];
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "fallback= keeps its states in the segment NAME.fallback: the host "
                          "segment's name must be at most 191 bytes");
    srl_config_free(&cfg);
    server_down(srv);
}
END_TEST

/* A caller's own tier table (mod_srl points cfg->tiers at one) is no
 * config store: nothing past its tiers is read as a fallback, even bytes
 * laid out as one. */
START_TEST(a_tier_table_of_the_caller_s_own_carries_no_fallback)
{
    pid_t srv = server_up("own");
    static struct {
        srl_tier tiers[SRL_TIERS_MAX - 1];
        char redis[SRL_CONFIG_URI_MAX + 1];
        srl_limits fallback;   /* where config.c's store keeps it */
    } own;
    memset(&own, 0, sizeof own);
    srl_policy_error pe;
    ck_assert_int_eq(srl_limits_parse_ex("gcra:1/1h", &own.fallback, &pe), 0);
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("gcra:10/1h", &cfg.policy), 0);
    cfg.tiers = own.tiers;
    cfg.tier_count = 0;
    const char *name = unique_name("own");
    srl_limiter *lim = NULL;
    ck_assert_int_eq(srl_open_tiered(name, uri, &cfg, SRL_CREATE, &lim), 0);
    char path[256];
    snprintf(path, sizeof path, "/dev/shm%s.fallback", name);
    ck_assert_msg(access(path, F_OK) != 0, "%s exists: a fallback was read from the caller's "
                  "table", path);
    srl_close(lim);
    unlink_host(name);
    server_down(srv);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tiered_fallback");
    TCase *tc = tcase_create("fallback");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, redis_down_the_host_enforces_the_fallback_exactly_then_redis_takes_over);
    tcase_add_test(tc, the_option_goes_through_the_config_text);
    tcase_add_test(tc, a_host_name_too_long_for_its_fallback_segment_is_refused);
    tcase_add_test(tc, a_tier_table_of_the_caller_s_own_carries_no_fallback);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
