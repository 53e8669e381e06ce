/*
 * check_rlctl_bans.c - suite "rlctl_bans": a ban by hand and one from a
 * limit's penalty= told apart by the built rlctl (issue 41 item 2): get's
 * text and JSON (ban_kind, ban_left_ns, ban_reason, repeat), list's BAN
 * column and ban_kind, and metrics' srl_bans_active{kind=...}, exactly.
 *
 * The keys are set through the library on the segment rlctl created (the
 * real clock: bans of an hour, so every ban asserted is still running;
 * times are asserted as bounds, kinds and counts exactly):
 *   hand    banned by hand (srl_key_ban, reason "abuse")
 *   pen     its one token taken, then denied: a penalty ban of 1m
 *   both    a penalty ban and then a hand ban: shown and counted as hand
 *   plain   one request: no ban
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "rlctl_assert.h"
#include "srl.h"
#include "testutil.h"

static void penalty_ban(srl_limiter *lim, const char *key)
{
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, key, strlen(key), 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_acquire(lim, key, strlen(key), 1, &d), 0);
    ck_assert_uint_eq(d.flags, SRL_DECISION_BAN_STARTED);
    ck_assert_uint_eq(d.retry_after_ns, 3600 * SEC);   /* the token's wait (1h) > the ban */
}

static srl_limiter *setup(const char *name)
{
    seg_create(name, "token_bucket:1/1h,penalty=1m..1d", "64", "16");
    srl_config cfg;
    srl_config_init(&cfg);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_ADOPT, &lim), 0);
    ck_assert_int_eq(srl_key_ban(lim, "hand", 4, 3600 * SEC, "abuse"), 0);
    penalty_ban(lim, "pen");
    penalty_ban(lim, "both");
    ck_assert_int_eq(srl_key_ban(lim, "both", 4, 3600 * SEC, NULL), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "plain", 5, 1, &d), 0);
    return lim;
}

static json_value *get_json(const char *name, const char *key)
{
    run_result r;
    RUN(&r, 0, "get", name, key, "--json");
    json_value *v = parse_out(&r);
    run_free(&r);
    return v;
}

START_TEST(get_tells_a_hand_ban_from_a_penalty_ban_and_shows_the_offences)
{
    char name[160];
    seg_name(name, sizeof name, "get");
    srl_limiter *lim = setup(name);
    json_value *v = get_json(name, "hand");
    ck_assert_str_eq(json_get_str(v, "ban_kind"), "hand");
    ck_assert_str_eq(json_get_str(v, "ban_reason"), "abuse");
    ck_assert_uint_le(json_get_u64(v, "ban_left_ns"), 3600 * SEC);
    ck_assert_uint_gt(json_get_u64(v, "ban_left_ns"), 3500 * SEC);
    ck_assert_uint_eq(json_get_u64(v, "repeat"), 0);
    json_free(v);
    v = get_json(name, "pen");
    ck_assert_str_eq(json_get_str(v, "ban_kind"), "penalty");
    ck_assert_str_eq(json_get_str(v, "ban_reason"), "");
    ck_assert_uint_le(json_get_u64(v, "ban_left_ns"), 60 * SEC);
    ck_assert_uint_gt(json_get_u64(v, "ban_left_ns"), 30 * SEC);
    ck_assert_uint_eq(json_get_u64(v, "repeat"), 1);
    json_free(v);
    v = get_json(name, "both");
    ck_assert_str_eq(json_get_str(v, "ban_kind"), "hand");
    ck_assert_uint_eq(json_get_u64(v, "repeat"), 1);
    json_free(v);
    v = get_json(name, "plain");
    const json_value *k = json_get(v, "ban_kind");
    ck_assert_ptr_nonnull(k);
    ck_assert_int_eq(k->type, JSON_NULL);
    ck_assert_uint_eq(json_get_u64(v, "repeat"), 0);
    json_free(v);

    run_result r;
    RUN(&r, 0, "get", name, "hand");
    ck_assert_msg(strstr(r.out, "\n  ban kind: hand, ") != NULL && strstr(r.out, "left, reason: "
                  "abuse\n") != NULL, "got: %s", r.out);
    run_free(&r);
    RUN(&r, 0, "get", name, "pen");
    ck_assert_msg(strstr(r.out, "\n  ban kind: penalty, ") != NULL &&
                  strstr(r.out, "\n  offences remembered: 1 (the next penalty ban is twice the "
                         "last, up to its longest)\n") != NULL, "got: %s", r.out);
    run_free(&r);
    RUN(&r, 0, "get", name, "plain");
    ck_assert_msg(strstr(r.out, "ban kind") == NULL, "got: %s", r.out);
    run_free(&r);

    /* unban forgives (the library's), reset forgets (rlctl's). */
    ck_assert_int_eq(srl_key_unban(lim, "both", 4), 0);
    v = get_json(name, "both");
    ck_assert_int_eq(json_get(v, "ban_kind")->type, JSON_NULL);
    ck_assert_uint_eq(json_get_u64(v, "repeat"), 0);
    json_free(v);
    RUN(&r, 0, "reset", name, "pen");
    run_free(&r);
    RUN(&r, 1, "get", name, "pen", "--json");
    v = parse_out(&r);
    ck_assert_int_eq(json_get(v, "ban_kind")->type, JSON_NULL);
    ck_assert_uint_eq(json_get_u64(v, "repeat"), 0);
    json_free(v);
    run_free(&r);
    srl_close(lim);
    seg_destroy(name);
}
END_TEST

START_TEST(list_and_metrics_count_each_kind)
{
    char name[160];
    seg_name(name, sizeof name, "list");
    srl_limiter *lim = setup(name);
    run_result r;
    RUN(&r, 0, "list", name, "--json");
    json_value *v = parse_out(&r);
    const json_value *keys = json_get(v, "keys");
    static const struct { const char *key, *kind; } want[] = {
        {"hand", "hand"}, {"pen", "penalty"}, {"both", "hand"}, {"plain", NULL}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const json_value *e = find_key(v, want[i].key);
        ck_assert_msg(e != NULL, "%s not listed", want[i].key);
        if (want[i].kind != NULL)
            ck_assert_str_eq(json_get_str(e, "ban_kind"), want[i].kind);
        else
            ck_assert_int_eq(json_get(e, "ban_kind")->type, JSON_NULL);
    }
    (void)keys;
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "list", name);
    ck_assert_msg(strstr(r.out, "AT_REST  BAN\n") != NULL, "got: %s", r.out);
    ck_assert_msg(strstr(r.out, "  penalty\n") != NULL, "got: %s", r.out);
    run_free(&r);

    RUN(&r, 0, "metrics", name);
    char line[300];
    snprintf(line, sizeof line, "\nsrl_bans_active{segment=\"%s\",kind=\"hand\"} 2\n", name);
    ck_assert_msg(strstr(r.out, line) != NULL, "want %s in: %s", line, r.out);
    snprintf(line, sizeof line, "\nsrl_bans_active{segment=\"%s\",kind=\"penalty\"} 1\n", name);
    ck_assert_msg(strstr(r.out, line) != NULL, "want %s in: %s", line, r.out);
    ck_assert_msg(strstr(r.out, "\n# TYPE srl_bans_active gauge\n") != NULL, "got: %s", r.out);
    run_free(&r);
    /* The hand ban lifted: it counts as none, the penalty one stays. */
    ck_assert_int_eq(srl_key_unban(lim, "hand", 4), 0);
    RUN(&r, 0, "metrics", name);
    snprintf(line, sizeof line, "\nsrl_bans_active{segment=\"%s\",kind=\"hand\"} 1\n", name);
    ck_assert_msg(strstr(r.out, line) != NULL, "want %s in: %s", line, r.out);
    run_free(&r);
    srl_close(lim);
    seg_destroy(name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlctl_bans");
    TCase *tc = tcase_create("bans");
    tcase_add_unchecked_fixture(tc, seg_prefix_init, seg_prefix_cleanup);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, get_tells_a_hand_ban_from_a_penalty_ban_and_shows_the_offences);
    tcase_add_test(tc, list_and_metrics_count_each_kind);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
