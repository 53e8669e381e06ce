/*
 * check_rlctl_control.c - suite "rlctl_control": the built rlctl's
 * operator commands (issue 41 items 1 and 2; tools/rlctl_control.c):
 * exempt, unexempt, ban --for [--reason], unban, and what list --exempt /
 * --banned, get and metrics (srl_exempt_total) show of them.
 *
 * Each case runs $RLCTL on a segment it creates (token_bucket:2/1h: a
 * key's third request in an hour is denied) and asserts exactly: stdout's
 * text and --json, the exit status (0 done; 1 unexempt/unban of a key that
 * is not tracked; 64 a usage error, with its message, and then nothing in
 * the segment changed), and the EFFECT through the library: an exempt key
 * admitted past its limit, counted in srl_stats.exempt and left by rlctl
 * evict though at rest, a banned key
 * denied with the ban's time left as retry_after, unban and unexempt
 * giving the key back to its policy with its state as it was.
 *
 * The races (4 workers, rlctl ban between phases and while they hammer)
 * are check_rlctl_control_race.c.
 *
 * Times come from the real clock: bans of 1h and 90s are asserted as
 * bounds that hold however slow the machine (the test takes seconds).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlctl_assert.h"
#include "srl.h"
#include "testutil.h"

#define POLICY "token_bucket:2/1h"

static srl_limiter *open_seg(const char *name)
{
    srl_config cfg;
    srl_config_init(&cfg);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_ADOPT, &lim), 0);
    return lim;
}

static srl_limiter *setup(char *name, size_t len, const char *tag)
{
    seg_name(name, len, tag);
    seg_create(name, POLICY, "64", "16");
    return open_seg(name);
}

/* n requests of key; how many were allowed.  *retry: the largest retry_after. */
static unsigned admit(srl_limiter *lim, const char *key, unsigned n, uint64_t *retry)
{
    unsigned ok = 0;
    uint64_t r = 0;
    for (unsigned i = 0; i < n; i++) {
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, key, strlen(key), 1, &d), 0);
        ok += d.allowed != 0;
        if (d.retry_after_ns > r)
            r = d.retry_after_ns;
    }
    if (retry != NULL)
        *retry = r;
    return ok;
}

static srl_stats stats(srl_limiter *lim)
{
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    return st;
}

/* get KEY --json (exit 0: tracked), parsed. */
static json_value *get_json(const char *name, const char *key)
{
    run_result r;
    RUN(&r, 0, "get", name, key, "--json");
    json_value *v = parse_out(&r);
    run_free(&r);
    return v;
}

/* The keys the segment tracks (list --json's "visited"). */
static uint64_t tracked(const char *name)
{
    run_result r;
    RUN(&r, 0, "list", name, "--json");
    json_value *v = parse_out(&r);
    uint64_t n = json_get_u64(v, "visited");
    json_free(v);
    run_free(&r);
    return n;
}

/* The one line of a metrics text that starts with prefix (copied to buf,
 * without its newline), or "" if none. */
static const char *metric_line(const char *text, const char *prefix, char *buf, size_t len)
{
    buf[0] = '\0';
    for (const char *l = text; *l != '\0';) {
        const char *nl = strchr(l, '\n');
        size_t n = nl != NULL ? (size_t)(nl - l) : strlen(l);
        if (strncmp(l, prefix, strlen(prefix)) == 0) {
            ck_assert_msg(buf[0] == '\0', "two lines start with %s", prefix);
            snprintf(buf, len, "%.*s", (int)n, l);
        }
        l += n + (nl != NULL);
    }
    return buf;
}

#define OUT_EQ(r, want) ck_assert_msg(strcmp((r)->out, (want)) == 0, "stdout %s\nwant   %s", \
                                      (r)->out, (want))

START_TEST(exempt_admits_past_the_limit_counts_it_and_unexempt_restores)
{
    char name[160];
    srl_limiter *lim = setup(name, sizeof name, "exempt");
    run_result r;
    RUN(&r, 0, "exempt", name, "probe");
    OUT_EQ(&r, "probe: exempt\n");
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    /* Twice its limit, all admitted and counted as exempt (and allowed). */
    ck_assert_uint_eq(admit(lim, "probe", 5, NULL), 5);
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.exempt, 5);
    ck_assert_uint_eq(st.allowed, 5);
    ck_assert_uint_eq(st.denied, 0);
    /* A key beside it keeps its limit. */
    ck_assert_uint_eq(admit(lim, "other", 3, NULL), 2);
    st = stats(lim);
    ck_assert_uint_eq(st.exempt, 5);
    ck_assert_uint_eq(st.allowed, 7);
    ck_assert_uint_eq(st.denied, 1);

    /* get shows the exemption, in text and JSON. */
    RUN(&r, 0, "get", name, "probe");
    ck_assert_msg(strstr(r.out, "\n  exempt (never refused, never evicted)\n") != NULL,
                  "got: %s", r.out);
    run_free(&r);
    json_value *v = get_json(name, "probe");
    ck_assert_int_eq(json_get_bool(v, "exempt"), 1);
    ck_assert_int_eq(json_get(v, "ban_kind")->type, JSON_NULL);
    json_free(v);
    v = get_json(name, "other");
    ck_assert_int_eq(json_get_bool(v, "exempt"), 0);
    json_free(v);

    /* metrics: srl_exempt_total is the library's count. */
    RUN(&r, 0, "metrics", name);
    char line[300], got[300];
    snprintf(line, sizeof line, "srl_exempt_total{segment=\"%s\"} 5", name);
    ck_assert_str_eq(metric_line(r.out, "srl_exempt_total{", got, sizeof got), line);
    ck_assert_msg(strstr(r.out, "\n# TYPE srl_exempt_total counter\n") != NULL, "no TYPE line");
    run_free(&r);

    /* Never evicted: its state is at rest (the exempt requests took none
     * of it), yet rlctl evict leaves it; "idle", at rest too, goes
     * ("other" is not at rest: it used its 2 tokens). */
    RUN(&r, 0, "exempt", name, "idle");
    run_free(&r);
    RUN(&r, 0, "unexempt", name, "idle");
    run_free(&r);
    RUN(&r, 0, "evict", name, "--json");
    v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "evicted"), 1);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "get", name, "probe");
    run_free(&r);
    RUN(&r, 1, "get", name, "idle");
    run_free(&r);
    ck_assert_uint_eq(tracked(name), 2);

    /* Exempting again is no change; --json says so the same way. */
    RUN(&r, 0, "exempt", name, "probe", "--json");
    OUT_EQ(&r, "{\"schema_version\":3,\"key\":\"probe\",\"exempt\":true}\n");
    run_free(&r);

    /* unexempt: its policy decides again, from its state as it was (the
     * exempt requests took none of its 2 tokens). */
    RUN(&r, 0, "unexempt", name, "probe");
    OUT_EQ(&r, "probe: unexempted\n");
    run_free(&r);
    uint64_t retry;
    ck_assert_uint_eq(admit(lim, "probe", 3, &retry), 2);
    ck_assert_uint_gt(retry, 0);
    st = stats(lim);
    ck_assert_uint_eq(st.exempt, 5);
    ck_assert_uint_eq(st.allowed, 9);
    ck_assert_uint_eq(st.denied, 2);
    v = get_json(name, "probe");
    ck_assert_int_eq(json_get_bool(v, "exempt"), 0);
    json_free(v);
    /* unexempt of a tracked key that has no exemption: done, exit 0. */
    RUN(&r, 0, "unexempt", name, "other", "--json");
    OUT_EQ(&r, "{\"schema_version\":3,\"key\":\"other\",\"unexempted\":true}\n");
    run_free(&r);
    srl_close(lim);
    seg_destroy(name);
}
END_TEST

START_TEST(ban_denies_with_its_time_left_and_unban_restores)
{
    char name[160];
    srl_limiter *lim = setup(name, sizeof name, "ban");
    /* One token of "bad" used before the ban: unban gives back one. */
    ck_assert_uint_eq(admit(lim, "bad", 1, NULL), 1);
    run_result r;
    RUN(&r, 0, "ban", name, "bad", "--for", "1h", "--reason", "scraping /api");
    OUT_EQ(&r, "bad: banned by hand for 1h: scraping /api\n");
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    uint64_t retry;
    ck_assert_uint_eq(admit(lim, "bad", 4, &retry), 0);
    ck_assert_uint_le(retry, 3600 * SEC);
    ck_assert_uint_gt(retry, 3500 * SEC);
    srl_stats st = stats(lim);
    ck_assert_uint_eq(st.allowed, 1);
    ck_assert_uint_eq(st.denied, 4);
    ck_assert_uint_eq(st.exempt, 0);

    RUN(&r, 0, "get", name, "bad");
    ck_assert_msg(strstr(r.out, "\n  ban kind: hand, ") != NULL &&
                  strstr(r.out, " left, reason: scraping /api\n") != NULL, "got: %s", r.out);
    run_free(&r);
    json_value *v = get_json(name, "bad");
    ck_assert_str_eq(json_get_str(v, "ban_kind"), "hand");
    ck_assert_str_eq(json_get_str(v, "ban_reason"), "scraping /api");
    ck_assert_uint_le(json_get_u64(v, "ban_left_ns"), 3600 * SEC);
    ck_assert_uint_gt(json_get_u64(v, "ban_left_ns"), 3500 * SEC);
    ck_assert_int_eq(json_get_bool(v, "allowed"), 0);
    json_free(v);

    /* A new ban replaces the last: 90s, no reason, in JSON. */
    RUN(&r, 0, "ban", name, "bad", "--for", "90s", "--json");
    OUT_EQ(&r, "{\"schema_version\":3,\"key\":\"bad\",\"banned\":true,\"kind\":\"hand\","
               "\"for_ns\":90000000000,\"reason\":\"\"}\n");
    run_free(&r);
    ck_assert_uint_eq(admit(lim, "bad", 1, &retry), 0);
    ck_assert_uint_le(retry, 90 * SEC);
    ck_assert_uint_gt(retry, 60 * SEC);
    v = get_json(name, "bad");
    ck_assert_str_eq(json_get_str(v, "ban_reason"), "");
    json_free(v);

    /* An empty --reason is no reason: no ": " after the duration. */
    RUN(&r, 0, "ban", name, "bad", "--for", "2m", "--reason", "");
    OUT_EQ(&r, "bad: banned by hand for 2m\n");
    run_free(&r);

    /* A ban wins over an exemption. */
    RUN(&r, 0, "exempt", name, "bad");
    run_free(&r);
    ck_assert_uint_eq(admit(lim, "bad", 1, NULL), 0);

    /* unban: the policy decides again, with the token left before the ban
     * (the exemption stays: take it back to see it). */
    RUN(&r, 0, "unban", name, "bad");
    OUT_EQ(&r, "bad: unbanned\n");
    run_free(&r);
    RUN(&r, 0, "unexempt", name, "bad");
    run_free(&r);
    ck_assert_uint_eq(admit(lim, "bad", 3, NULL), 1);
    v = get_json(name, "bad");
    ck_assert_int_eq(json_get(v, "ban_kind")->type, JSON_NULL);
    ck_assert_uint_eq(json_get_u64(v, "ban_left_ns"), 0);
    json_free(v);
    RUN(&r, 0, "unban", name, "bad", "--json");
    OUT_EQ(&r, "{\"schema_version\":3,\"key\":\"bad\",\"unbanned\":true}\n");
    run_free(&r);
    srl_close(lim);
    seg_destroy(name);
}
END_TEST

START_TEST(unexempt_and_unban_of_an_untracked_key_exit_1_and_insert_nothing)
{
    char name[160];
    srl_limiter *lim = setup(name, sizeof name, "untracked");
    run_result r;
    RUN(&r, 1, "unexempt", name, "ghost");
    OUT_EQ(&r, "ghost: not tracked (nothing to unexempt)\n");
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    RUN(&r, 1, "unban", name, "ghost");
    OUT_EQ(&r, "ghost: not tracked (nothing to unban)\n");
    run_free(&r);
    RUN(&r, 1, "unexempt", name, "ghost", "--json");
    OUT_EQ(&r, "{\"schema_version\":3,\"key\":\"ghost\",\"unexempted\":false}\n");
    run_free(&r);
    RUN(&r, 1, "unban", name, "--hex", "00ff", "--json");
    OUT_EQ(&r, "{\"schema_version\":3,\"key\":\"\\\\x00\\\\xff\",\"unbanned\":false}\n");
    run_free(&r);
    ck_assert_uint_eq(tracked(name), 0);
    /* exempt and ban insert the key they name (--hex: its bytes). */
    RUN(&r, 0, "exempt", name, "--hex", "00ff");
    run_free(&r);
    ck_assert_uint_eq(tracked(name), 1);
    srl_decision d;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(srl_acquire(lim, "\x00\xff", 2, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
    }
    ck_assert_uint_eq(stats(lim).exempt, 3);
    srl_close(lim);
    seg_destroy(name);
}
END_TEST

START_TEST(list_exempt_and_banned_show_exactly_those_keys)
{
    char name[160];
    srl_limiter *lim = setup(name, sizeof name, "list");
    static const char *const plain[] = {"p1", "p2", "p3"};
    for (size_t i = 0; i < 3; i++)
        ck_assert_uint_eq(admit(lim, plain[i], 1, NULL), 1);
    run_result r;
    const char *const cmds[][6] = {
        {"exempt", "e1"}, {"exempt", "e2"}, {"ban", "b1", "--for", "1h", "--reason", "r1"},
        {"ban", "b2", "--for", "1h"}, {"exempt", "eb"}, {"ban", "eb", "--for", "1h"},
        {"exempt", "gone"}, {"unexempt", "gone"}, {"ban", "lifted", "--for", "1h"},
        {"unban", "lifted"}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const char *argv[8] = {cmds[i][0], name};
        for (int j = 1; j < 6 && cmds[i][j] != NULL; j++)
            argv[j + 1] = cmds[i][j];
        ck_assert_int_eq(run_rlctl_argv(&r, argv), 0);
        run_free(&r);
    }
    ck_assert_uint_eq(tracked(name), 10);

    static const struct { const char *only, *keys[4]; } want[] = {
        {"--exempt", {"e1", "e2", "eb"}}, {"--banned", {"b1", "b2", "eb"}}};
    for (size_t w = 0; w < 2; w++) {
        RUN(&r, 0, "list", name, want[w].only, "--json");
        json_value *v = parse_out(&r);
        ck_assert_uint_eq(json_get_u64(v, "visited"), 10);
        ck_assert_uint_eq(json_get_u64(v, "shown"), 3);
        ck_assert_uint_eq(json_get(v, "keys")->n, 3);
        for (int k = 0; k < 3; k++) {
            const json_value *e = find_key(v, want[w].keys[k]);
            ck_assert_msg(e != NULL, "%s: %s not listed: %s", want[w].only, want[w].keys[k],
                          r.out);
            ck_assert_int_eq(json_get_bool(e, "exempt"), w == 0 || k == 2);
            if (w == 1 || k == 2) {
                ck_assert_str_eq(json_get_str(e, "ban_kind"), "hand");
                ck_assert_uint_gt(json_get_u64(e, "ban_left_ns"), 3500 * SEC);
            } else {
                ck_assert_int_eq(json_get(e, "ban_kind")->type, JSON_NULL);
            }
        }
        json_free(v);
        run_free(&r);
        /* The text: the three keys' rows and the count line, nothing else. */
        RUN(&r, 0, "list", name, want[w].only);
        ck_assert_msg(strstr(r.out, "\n(3 of 10 keys shown)\n") != NULL, "got: %s", r.out);
        size_t lines = 0;
        for (const char *c = r.out; *c != '\0'; c++)
            lines += *c == '\n';
        ck_assert_uint_eq(lines, 5);   /* header, 3 rows, count */
        for (int k = 0; k < 3; k++) {
            char row[16];
            snprintf(row, sizeof row, "\n%s ", want[w].keys[k]);
            ck_assert_msg(strstr(r.out, row) != NULL, "no row %s: %s", want[w].keys[k], r.out);
        }
        run_free(&r);
    }
    /* Both: a key with either. */
    RUN(&r, 0, "list", name, "--exempt", "--banned", "--json");
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "shown"), 5);
    json_free(v);
    run_free(&r);
    srl_close(lim);
    seg_destroy(name);
}
END_TEST

/* A usage error: exit 64, stderr's first line exactly, nothing on stdout. */
static void usage_fails(const char *const *argv, const char *first_line)
{
    run_result r;
    int st = run_rlctl_argv(&r, argv);
    ck_assert_msg(st == 64, "%s %s: exit %d (want 64)\nstdout: %s\nstderr: %s", argv[0],
                  argv[2] ? argv[2] : "", st, r.out, r.err);
    ck_assert_str_eq(r.out, "");
    size_t n = strlen(first_line);
    ck_assert_msg(strncmp(r.err, first_line, n) == 0 && r.err[n] == '\n', "stderr %s\nwant   %s",
                  r.err, first_line);
    ck_assert_msg(strstr(r.err, "\nusage: rlctl ") != NULL, "no usage line: %s", r.err);
    run_free(&r);
}

START_TEST(usage_errors_name_what_is_wrong_and_change_nothing)
{
    char name[160];
    srl_limiter *lim = setup(name, sizeof name, "usage");
    char longkey[SRL_KEY_MAX + 2], longhex[2 * SRL_KEY_MAX + 3];
    memset(longkey, 'k', SRL_KEY_MAX + 1);
    longkey[SRL_KEY_MAX + 1] = '\0';
    memset(longhex, 'a', 2 * SRL_KEY_MAX + 2);
    longhex[2 * SRL_KEY_MAX + 2] = '\0';
    char reason60[SRL_BAN_REASON_MAX + 2];
    memset(reason60, 'r', SRL_BAN_REASON_MAX + 1);
    reason60[SRL_BAN_REASON_MAX + 1] = '\0';
    char want60[300];
    snprintf(want60, sizeof want60, "rlctl: ban: --reason: invalid value '%s': expected at "
             "most %u bytes", reason60, SRL_BAN_REASON_MAX);
    char wantlong[100];
    snprintf(wantlong, sizeof wantlong, "rlctl: %%s: KEY is %u bytes, longer than %u",
             SRL_KEY_MAX + 1, SRL_KEY_MAX);
    char wl_exempt[100], wl_ban[100];
    snprintf(wl_exempt, sizeof wl_exempt, wantlong, "exempt");
    snprintf(wl_ban, sizeof wl_ban, wantlong, "ban");
    const struct { const char *argv[9]; const char *err; } cases[] = {
        {{"ban", name, "k"}, "rlctl: ban: --for DURATION is required (e.g. --for 1h)"},
        {{"ban", name, "k", "--reason", "x"},
         "rlctl: ban: --for DURATION is required (e.g. --for 1h)"},
        {{"ban", name, "k", "--for", "0s"},
         "rlctl: ban: --for: invalid value '0s': expected a duration such as 30s, 15m, 1h or 7d"},
        {{"ban", name, "k", "--for", "1x"},
         "rlctl: ban: --for: invalid value '1x': expected a duration such as 30s, 15m, 1h or 7d"},
        {{"ban", name, "k", "--for", "-1h"},
         "rlctl: ban: --for: invalid value '-1h': expected a duration such as 30s, 15m, 1h or 7d"},
        {{"ban", name, "k", "--for", "1h", "--reason", "a\tb"},
         "rlctl: ban: --reason: invalid value 'a\\x09b': expected text without control "
         "characters"},
        {{"ban", name, "k", "--for", "1h", "--reason", "bad\x1b[2J"},
         "rlctl: ban: --reason: invalid value 'bad\\x1b[2J': expected text without control "
         "characters"},
        {{"ban", name, "k", "--for", "1h", "--reason", "del\x7f"},
         "rlctl: ban: --reason: invalid value 'del\\x7f': expected text without control "
         "characters"},
        {{"ban", name, "k", "--for", "1h", "--reason", reason60}, want60},
        {{"exempt", name, "--hex", "6g"},
         "rlctl: exempt: KEY: invalid value '6g': expected hex digits only (--hex)"},
        {{"unexempt", name, "--hex", "616"},
         "rlctl: unexempt: KEY: invalid value '616': expected an even number of hex digits "
         "(--hex)"},
        {{"ban", name, "--hex", "zz", "--for", "1h"},
         "rlctl: ban: KEY: invalid value 'zz': expected hex digits only (--hex)"},
        {{"unban", name, "--hex", ""}, "rlctl: unban: KEY is empty"},
        {{"exempt", name, longkey}, wl_exempt},
        {{"ban", name, "--hex", longhex, "--for", "1h"}, wl_ban},
        {{"exempt", name, "k", "--for", "1h"}, "rlctl: exempt: --for is not an option of this "
                                              "command"},
        {{"unban", name, "k", "--reason", "x"}, "rlctl: unban: --reason is not an option of "
                                               "this command"},
        {{"exempt", name}, "rlctl: exempt: missing KEY"},
        {{"unexempt", name, "k", "k2"}, "rlctl: unexempt: unexpected argument 'k2'"},
        {{"ban", "redis://127.0.0.1:1", "k", "--for", "1h"},
         "rlctl: ban: a Redis uri names a store for info, get, reset and list only; ban takes a "
         "segment name"},
        {{"exempt", "redis://127.0.0.1:1/0", "k"},
         "rlctl: exempt: a Redis uri names a store for info, get, reset and list only; exempt "
         "takes a segment name"},
        {{"unban", "redis://127.0.0.1:1", "k"},
         "rlctl: unban: a Redis uri names a store for info, get, reset and list only; unban "
         "takes a segment name"},
        {{"unexempt", "redis://127.0.0.1:1", "k"},
         "rlctl: unexempt: a Redis uri names a store for info, get, reset and list only; "
         "unexempt takes a segment name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        usage_fails(cases[i].argv, cases[i].err);
    /* A reason of exactly SRL_BAN_REASON_MAX bytes is taken whole. */
    reason60[SRL_BAN_REASON_MAX] = '\0';
    run_result r;
    ck_assert_uint_eq(tracked(name), 0);
    ck_assert_uint_eq(stats(lim).allowed + stats(lim).denied, 0);
    RUN(&r, 0, "ban", name, "k", "--for", "1h", "--reason", reason60);
    run_free(&r);
    json_value *v = get_json(name, "k");
    ck_assert_str_eq(json_get_str(v, "ban_reason"), reason60);
    json_free(v);
    srl_close(lim);
    seg_destroy(name);
}
END_TEST

/* A policy with a concurrency limit: srl_enter never reads an exemption or
 * a ban, so the library refuses both and rlctl says its why and what to
 * do; nothing is stored
 * nothing; srl_enter keeps deciding by the limit alone. */
START_TEST(a_concurrency_segment_refuses_exempt_and_ban)
{
    char name[160];
    seg_name(name, sizeof name, "conc");
    seg_create(name, "concurrency:1", "64", "16");
    srl_limiter *lim = open_seg(name);
    char want[600];
    for (int op = 0; op < 2; op++) {
        run_result r;
        if (op == 0)
            RUN(&r, 70, "exempt", name, "k");
        else
            RUN(&r, 70, "ban", name, "k", "--for", "1h");
        ck_assert_str_eq(r.out, "");
        snprintf(want, sizeof want, "rlctl: %s: this policy has an in-flight (concurrency) "
                 "limit, whose srl_enter reads no exemption or ban: set them on a "
                 "rate-limit segment its requests pass first: 'rlctl info NAME' shows the "
                 "policy\n", name);
        ck_assert_str_eq(r.err, want);
        run_free(&r);
    }
    run_result r;
    RUN(&r, 70, "ban", name, "k", "--for", "1h", "--json");
    json_value *v = parse_out(&r);
    ck_assert_int_eq(json_get_u64(v, "exit_status"), 70);
    ck_assert_str_eq(json_get_str(v, "error"), "this policy has an in-flight (concurrency) "
                     "limit, whose srl_enter reads no exemption or ban: set them on a "
                     "rate-limit segment its requests pass first");
    json_free(v);
    run_free(&r);
    ck_assert_uint_eq(tracked(name), 0);
    srl_lease l[2];
    srl_decision d;
    ck_assert_int_eq(srl_enter(lim, "k", 1, &l[0], &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_enter(lim, "k", 1, &l[1], &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(srl_leave(lim, &l[0]), 0);
    /* unban and unexempt there: a key not tracked, or one tracked (exit 0). */
    RUN(&r, 1, "unexempt", name, "other");
    run_free(&r);
    RUN(&r, 0, "unban", name, "k");
    OUT_EQ(&r, "k: unbanned\n");
    run_free(&r);
    srl_close(lim);
    seg_destroy(name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlctl_control");
    TCase *tc = tcase_create("control");
    tcase_add_unchecked_fixture(tc, seg_prefix_init, seg_prefix_cleanup);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, exempt_admits_past_the_limit_counts_it_and_unexempt_restores);
    tcase_add_test(tc, ban_denies_with_its_time_left_and_unban_restores);
    tcase_add_test(tc, unexempt_and_unban_of_an_untracked_key_exit_1_and_insert_nothing);
    tcase_add_test(tc, list_exempt_and_banned_show_exactly_those_keys);
    tcase_add_test(tc, usage_errors_name_what_is_wrong_and_change_nothing);
    tcase_add_test(tc, a_concurrency_segment_refuses_exempt_and_ban);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
