/*
 * check_rlctl_keys.c - suite "rlctl_keys": the built rlctl's commands on
 * keys (try, get, reset, list, evict) against live segments, asserting
 * exact output and exit codes.
 *
 * Segments are created with the real monotonic clock (rlctl has no fake
 * ticker), so policies have long windows (5/1h) where results must be
 * exact; the evict test, which needs keys at rest, uses 60/60s, polls
 * (bounded) until the keys that took one permit are seen at rest, while the
 * keys that took all 60 stay away from rest for a minute.
 * Segment names share a prefix per test case; the unchecked teardown
 * unlinks whatever a failed test left behind.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <unistd.h>

#include "rlctl_assert.h"
#include "srl.h"
#include "testutil.h"

/* ------------------------------------------------------ try, get, reset */

START_TEST(try_allows_exactly_the_permits_then_exits_1_with_the_retry_time)
{
    char name[160];
    seg_name(name, sizeof name, "try");
    seg_create(name, "token_bucket:5/1h", "64", "0");
    run_result r;
    for (int i = 1; i <= 5; i++) {
        char want[64];
        RUN(&r, 0, "try", name, "k");
        snprintf(want, sizeof want, "k: allowed, remaining %d of 5\n", 5 - i);
        ck_assert_str_eq(r.out, want);
        run_free(&r);
    }
    RUN(&r, 1, "try", name, "k");
    /* 1h/5 = 720 s per token, less the time since the first request: the
     * human form and Retry-After both round the seconds up, so they agree. */
    const char *at = strstr(r.out, "(Retry-After: ");
    ck_assert_msg(at != NULL, "got: %s", r.out);
    int ra = atoi(at + 14);
    ck_assert_int_le(ra, 720);
    ck_assert_int_gt(ra, 700);
    char want[128];
    if (ra % 60 != 0)
        snprintf(want, sizeof want, "k: denied, retry after %dm %ds (Retry-After: %d)\n", ra / 60,
                 ra % 60, ra);
    else
        snprintf(want, sizeof want, "k: denied, retry after %dm (Retry-After: %d)\n", ra / 60, ra);
    ck_assert_str_eq(r.out, want);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    RUN(&r, 1, "try", name, "k", "--json");
    json_value *v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "allowed"), 0);
    ck_assert_uint_eq(json_get_u64(v, "remaining"), 0);
    ck_assert_uint_eq(json_get_u64(v, "limit"), 5);
    uint64_t ra_ns = json_get_u64(v, "retry_after_ns");
    /* A number (schema 2), whole seconds rounded up like Retry-After. */
    ck_assert_uint_eq(json_get_u64(v, "retry_after"), (ra_ns + 999999999) / 1000000000);
    ck_assert_uint_eq(json_get_u64(v, "schema_version"), 3);
    ck_assert_uint_le(ra_ns, 720ull * 1000000000ull);
    ck_assert_uint_gt(ra_ns, 600ull * 1000000000ull);
    ck_assert_int_eq(json_get_bool(v, "untracked"), 0);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "info", name, "--json");
    v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "allowed"), 5);
    ck_assert_uint_eq(json_get_u64(v, "denied"), 2);
    ck_assert_uint_eq(json_get_u64(v, "used"), 1);
    json_free(v);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

START_TEST(try_with_a_cost_above_the_permits_exits_64_and_tracks_nothing)
{
    char name[160], want[400];
    seg_name(name, sizeof name, "cost");
    seg_create(name, "token_bucket:5/1h", "64", "0");
    run_result r;
    RUN(&r, 64, "try", name, "k", "--cost", "6");
    snprintf(want, sizeof want,
             "rlctl: %s: cost is zero or exceeds the policy's permits: cost 6: "
             "'token_bucket:5/1h' allows 5 at most: give a --cost between 1 and the policy's "
             "permits\n",
             name);
    ck_assert_str_eq(r.err, want);
    run_free(&r);
    RUN(&r, 0, "try", name, "k", "--cost", "5");
    ck_assert_str_eq(r.out, "k: allowed, remaining 0 of 5\n");
    run_free(&r);
    RUN(&r, 0, "info", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "allowed"), 1);
    ck_assert_uint_eq(json_get_u64(v, "used"), 1);
    json_free(v);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

START_TEST(get_shows_the_remaining_permits_and_exits_1_for_an_untracked_key)
{
    char name[160];
    seg_name(name, sizeof name, "get");
    seg_create(name, "token_bucket:5/1h", "64", "0");
    run_result r;
    RUN(&r, 0, "try", name, "k");
    run_free(&r);
    RUN(&r, 0, "try", name, "k");
    run_free(&r);
    /* 3 permits left: a third request would pass and leave 2. */
    RUN(&r, 0, "get", name, "k", "--json");
    json_value *v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "tracked"), 1);
    ck_assert_int_eq(json_get_bool(v, "allowed"), 1);
    ck_assert_uint_eq(json_get_u64(v, "remaining"), 2);
    ck_assert_uint_eq(json_get_u64(v, "limit"), 5);
    ck_assert_uint_eq(json_get_u64(v, "retry_after_ns"), 0);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "get", name, "k");
    const char *pfx = "k: a request of cost 1 would be allowed now, leaving 2 of 5; at rest in ";
    ck_assert_msg(strncmp(r.out, pfx, strlen(pfx)) == 0, "got: %s", r.out);
    run_free(&r);
    /* A cost the key cannot pay now: denied, still exit 0 (it is tracked). */
    RUN(&r, 0, "get", name, "k", "--cost", "4", "--json");
    v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "allowed"), 0);
    ck_assert_uint_gt(json_get_u64(v, "retry_after_ns"), 0);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "get", name, "k", "--cost", "3");
    pfx = "k: a request of cost 3 would be allowed now, leaving 0 of 5; at rest in ";
    ck_assert_msg(strncmp(r.out, pfx, strlen(pfx)) == 0, "got: %s", r.out);
    run_free(&r);
    RUN(&r, 0, "get", name, "k", "--cost", "4");
    pfx = "k: a request of cost 4 would be denied now: retry after ";
    ck_assert_msg(strncmp(r.out, pfx, strlen(pfx)) == 0, "got: %s", r.out);
    run_free(&r);
    /* get changed nothing. */
    RUN(&r, 0, "try", name, "k");
    ck_assert_str_eq(r.out, "k: allowed, remaining 2 of 5\n");
    run_free(&r);
    RUN(&r, 1, "get", name, "--hex", "00ff");
    ck_assert_str_eq(r.out, "\\x00\\xff: not tracked (a new key: a first request of cost 1 "
                            "would be allowed, leaving 4 of 5)\n");
    run_free(&r);
    RUN(&r, 1, "get", name, "other", "--json");
    v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "tracked"), 0);
    ck_assert_uint_eq(json_get_u64(v, "limit"), 5);
    /* The same fields as for a tracked key: a fresh state's answer. */
    ck_assert_int_eq(json_get_bool(v, "allowed"), 1);
    ck_assert_uint_eq(json_get_u64(v, "remaining"), 4);
    ck_assert_uint_eq(json_get_u64(v, "retry_after_ns"), 0);
    ck_assert_int_eq(json_get_bool(v, "untracked"), 0);
    json_free(v);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

START_TEST(reset_forgets_a_key_and_exits_1_when_it_is_not_tracked)
{
    char name[160];
    seg_name(name, sizeof name, "reset");
    seg_create(name, "token_bucket:5/1h", "64", "0");
    run_result r;
    for (int i = 0; i < 5; i++) {
        RUN(&r, 0, "try", name, "k");
        run_free(&r);
    }
    RUN(&r, 1, "try", name, "k");
    run_free(&r);
    RUN(&r, 0, "reset", name, "k");
    ck_assert_str_eq(r.out, "k: reset (its next request starts fresh)\n");
    run_free(&r);
    RUN(&r, 1, "get", name, "k");
    run_free(&r);
    RUN(&r, 1, "reset", name, "k", "--json");
    json_value *v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "reset"), 0);
    json_free(v);
    run_free(&r);
    RUN(&r, 1, "reset", name, "k");
    ck_assert_str_eq(r.out, "k: not tracked (nothing to reset)\n");
    run_free(&r);
    RUN(&r, 0, "try", name, "k");
    ck_assert_str_eq(r.out, "k: allowed, remaining 4 of 5\n");
    run_free(&r);
    seg_destroy(name);
}
END_TEST

START_TEST(try_on_a_full_table_says_on_full_decided_and_info_counts_it)
{
    const char *modes[] = {"deny", "allow"};
    for (int m = 0; m < 2; m++) {
        char name[160], tag[32];
        snprintf(tag, sizeof tag, "full-%s", modes[m]);
        seg_name(name, sizeof name, tag);
        run_result r;
        /* 16 slots: one bucket, so exactly 16 keys fit. */
        RUN(&r, 0, "create", name, "--policy", "token_bucket:5/1h", "--capacity", "16",
            "--on-full", modes[m]);
        run_free(&r);
        for (int i = 0; i < 16; i++) {
            char key[16];
            snprintf(key, sizeof key, "k%d", i);
            RUN(&r, 0, "try", name, key);
            run_free(&r);
        }
        if (m == 0) {
            RUN(&r, 1, "try", name, "extra");
            ck_assert_str_eq(r.out, "extra: denied by on_full deny: the table is full, not by "
                                    "the key's limit (workers send Retry-After: 3600, one "
                                    "window); free slots with 'rlctl evict' or make a bigger "
                                    "segment (rlctl info)\n");
        } else {
            RUN(&r, 0, "try", name, "extra");
            ck_assert_str_eq(r.out, "extra: allowed, remaining 0 of 5 (table full: decided by "
                                    "on_full)\n");
        }
        run_free(&r);
        RUN(&r, m == 0 ? 1 : 0, "try", name, "extra", "--json");
        json_value *v = parse_out(&r);
        ck_assert_int_eq(json_get_bool(v, "untracked"), 1);
        ck_assert_int_eq(json_get_bool(v, "degraded"), 0);
        json_free(v);
        run_free(&r);
        RUN(&r, 1, "get", name, "extra");
        char want[300];
        snprintf(want, sizeof want,
                 "extra: not tracked, and the table is full (16 of 16 slots): its first "
                 "request would be %s by on_full %s, not by a limit; free slots with 'rlctl "
                 "evict' or make a bigger segment (rlctl info)\n",
                 m == 0 ? "denied" : "allowed", modes[m]);
        ck_assert_str_eq(r.out, want);
        run_free(&r);
        RUN(&r, 1, "get", name, "extra", "--json");
        v = parse_out(&r);
        ck_assert_int_eq(json_get_bool(v, "tracked"), 0);
        ck_assert_int_eq(json_get_bool(v, "allowed"), m == 1);
        ck_assert_int_eq(json_get_bool(v, "untracked"), 1);
        ck_assert_uint_eq(json_get_u64(v, "retry_after_ns"), m == 0 ? 3600000000000ull : 0);
        json_free(v);
        run_free(&r);
        RUN(&r, 0, "info", name, "--json");
        v = parse_out(&r);
        ck_assert_uint_eq(json_get_u64(v, "used"), 16);
        ck_assert_uint_eq(json_get_u64(v, "full"), 2);
        ck_assert_uint_eq(json_get_u64(v, "allowed"), m == 0 ? 16 : 18);
        ck_assert_uint_eq(json_get_u64(v, "denied"), m == 0 ? 2 : 0);
        json_free(v);
        run_free(&r);
        seg_destroy(name);
    }
}
END_TEST

/* ---------------------------------------------------------------- list */

#define ESC_KEY "\x1b[31mred\x1b[0m"
#define ESC_SHOWN "\\x1b[31mred\\x1b[0m"

START_TEST(list_json_parses_and_shows_binary_and_escape_sequence_keys_escaped)
{
    char name[160];
    seg_name(name, sizeof name, "list");
    seg_create(name, "token_bucket:5/1h", "64", "16");
    char longkey[301];
    memset(longkey, 'L', 300);
    longkey[300] = '\0';
    run_result r;
    const char *raw[] = {"plain", "quo\"te\\back", ESC_KEY, longkey};
    for (size_t i = 0; i < 4; i++) {
        RUN(&r, 0, "try", name, raw[i]);
        ck_assert_msg(memchr(r.out, 0x1b, r.out_len) == NULL, "raw ESC echoed by try");
        run_free(&r);
    }
    RUN(&r, 0, "try", name, "--hex", "0001ff");
    ck_assert_str_eq(r.out, "\\x00\\x01\\xff: allowed, remaining 4 of 5\n");
    run_free(&r);
    RUN(&r, 0, "try", name, "--hex", "0001ff");
    run_free(&r);

    RUN(&r, 0, "list", name, "--json");
    ck_assert_msg(memchr(r.out, 0x1b, r.out_len) == NULL, "raw ESC in list --json");
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "visited"), 5);
    ck_assert_uint_eq(json_get_u64(v, "shown"), 5);
    const json_value *e = find_key(v, "plain");
    ck_assert(e != NULL);
    ck_assert_uint_eq(json_get_u64(e, "allowed"), 1);
    ck_assert_uint_eq(json_get_u64(e, "denied"), 0);
    ck_assert_uint_eq(json_get_u64(e, "available"), 4);
    ck_assert_uint_eq(json_get_u64(e, "limit"), 5);
    ck_assert_int_eq(json_get_bool(e, "at_rest"), 0);
    ck_assert_int_eq(json_get_bool(e, "truncated"), 0);
    ck_assert_str_eq(json_get_str(e, "key_hex"), "706c61696e");
    e = find_key(v, "quo\\\"te\\\\back");
    ck_assert_msg(e != NULL, "quote/backslash key not shown escaped: %s", r.out);
    ck_assert_uint_eq(json_get_u64(e, "key_len"), 11);
    e = find_key(v, ESC_SHOWN);
    ck_assert_msg(e != NULL, "escape-sequence key not shown escaped: %s", r.out);
    ck_assert_str_eq(json_get_str(e, "key_hex"), "1b5b33316d7265641b5b306d");
    e = find_key(v, "\\x00\\x01\\xff");
    ck_assert_msg(e != NULL, "binary key not shown escaped: %s", r.out);
    ck_assert_uint_eq(json_get_u64(e, "allowed"), 2);
    ck_assert_uint_eq(json_get_u64(e, "available"), 3);
    ck_assert_uint_eq(json_get_u64(e, "key_len"), 3);
    e = find_key(v, "LLLLLLLLLLLLLLLL");
    ck_assert(e != NULL);
    ck_assert_int_eq(json_get_bool(e, "truncated"), 1);
    ck_assert_uint_eq(json_get_u64(e, "key_len"), 300);
    ck_assert_uint_eq(json_get_u64(e, "display_len"), 16);
    json_free(v);
    run_free(&r);

    RUN(&r, 0, "list", name);
    ck_assert_msg(printable_ascii(r.out, r.out_len), "raw bytes in list: %s", r.out);
    ck_assert_msg(strncmp(r.out, "KEY ", 4) == 0, "no header: %s", r.out);
    ck_assert_msg(strstr(r.out, "\n" ESC_SHOWN " ") != NULL, "no escaped row: %s", r.out);
    ck_assert_msg(strstr(r.out, "\n\\x00\\x01\\xff ") != NULL, "no binary row: %s", r.out);
    ck_assert_msg(strstr(r.out, "\nquo\\\"te\\\\back ") != NULL, "no quote row: %s", r.out);
    const char *cut = strstr(r.out, "\nLLLLLLLLLLLLLLLL...  ");
    ck_assert_msg(cut != NULL, "no truncated row: %s", r.out);
    ck_assert_msg(strncmp(cut + strlen("\nLLLLLLLLLLLLLLLL..."), "  300  ", 7) == 0,
                  "truncated row lacks its length: %s", r.out);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

START_TEST(list_without_display_bytes_shows_fingerprints)
{
    char name[160];
    seg_name(name, sizeof name, "fp");
    seg_create(name, "token_bucket:5/1h", "64", "0");
    run_result r;
    RUN(&r, 0, "try", name, ESC_KEY);
    run_free(&r);
    RUN(&r, 0, "list", name, "--json");
    json_value *v = parse_out(&r);
    const json_value *keys = json_get(v, "keys");
    ck_assert_uint_eq(keys->n, 1);
    const char *fp = json_get_str(keys->items[0], "fingerprint");
    ck_assert_uint_eq(strlen(fp), 32);
    ck_assert_str_eq(json_get_str(keys->items[0], "key"), "");
    ck_assert_int_eq(json_get_bool(keys->items[0], "truncated"), 1);
    char want[64];
    snprintf(want, sizeof want, "\n<fingerprint %s>  ", fp);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "list", name);
    ck_assert_msg(strstr(r.out, want) != NULL, "want %s in: %s", want + 1, r.out);
    ck_assert_msg(memchr(r.out, 0x1b, r.out_len) == NULL, "raw ESC");
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* The JSON key strings of `list NAME --json [--sort S] [--top T]`, in
 * order, joined by ','. */
static void list_order(const char *name, const char *sort, const char *top, char *buf,
                       size_t len)
{
    const char *argv[8] = {"list", name, "--json"};
    size_t n = 3;
    if (sort != NULL) {
        argv[n++] = "--sort";
        argv[n++] = sort;
    }
    if (top != NULL) {
        argv[n++] = "--top";
        argv[n++] = top;
    }
    argv[n] = NULL;
    run_result r;
    int st = run_rlctl_argv(&r, argv);
    ck_assert_msg(st == 0, "list: exit %d: %s", st, r.err);
    json_value *v = parse_out(&r);
    const json_value *keys = json_get(v, "keys");
    buf[0] = '\0';
    for (size_t i = 0; i < keys->n; i++) {
        strncat(buf, json_get_str(keys->items[i], "key"), len - strlen(buf) - 2);
        if (i + 1 < keys->n)
            strcat(buf, ",");
    }
    json_free(v);
    run_free(&r);
}

/* Returns once the coarse clock has ticked: a 5/1h policy reads it
 * (srl_default_ticker), so requests on either side of this call get
 * distinct times, whatever the machine's load. */
static void wait_for_a_coarse_tick(void)
{
    uint64_t t = srl_monotonic_coarse_ns(NULL);
    while (srl_monotonic_coarse_ns(NULL) == t)
        ;
}

START_TEST(list_sorts_by_denied_allowed_or_recent_and_cuts_to_top)
{
    char name[160], order[256];
    seg_name(name, sizeof name, "sort");
    seg_create(name, "token_bucket:5/1h", "64", "8");
    run_result r;
    /* a: 4 allowed; b: 1 allowed (cost 5), then 2 denied; c: 2 allowed, last. */
    const char *plan[][3] = {{"a"}, {"a"}, {"a"}, {"a"}, {"b", "--cost", "5"}, {"b"}, {"b"},
                             {"c"}, {"c"}};
    for (size_t i = 0; i < sizeof plan / sizeof plan[0]; i++) {
        if (i == 4 || i == 7) /* a's last, b's and c's admissions at distinct times */
            wait_for_a_coarse_tick();
        const char *argv[] = {"try", name, plan[i][0], plan[i][1], plan[i][2], NULL};
        run_rlctl_argv(&r, argv);
        ck_assert_int_eq(r.status, i == 5 || i == 6 ? 1 : 0);
        run_free(&r);
    }
    list_order(name, "denied", NULL, order, sizeof order);
    ck_assert_str_eq(order, "b,a,c");
    list_order(name, "allowed", NULL, order, sizeof order);
    ck_assert_str_eq(order, "a,c,b");
    list_order(name, "recent", NULL, order, sizeof order);
    ck_assert_str_eq(order, "c,b,a");
    list_order(name, "denied", "1", order, sizeof order);
    ck_assert_str_eq(order, "b");
    list_order(name, "allowed", "2", order, sizeof order);
    ck_assert_str_eq(order, "a,c");
    RUN(&r, 0, "list", name, "--top", "2", "--json");
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "shown"), 2);
    ck_assert_uint_eq(json_get(v, "keys")->n, 2);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "list", name, "--sort", "denied", "--top", "1");
    ck_assert_msg(strstr(r.out, "\nb ") != NULL && strstr(r.out, "\n(1 of 3 keys shown)\n"),
                  "got: %s", r.out);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* --------------------------------------------------------------- evict */

START_TEST(evict_dry_run_counts_the_keys_at_rest_then_evict_removes_exactly_them)
{
    char name[160];
    seg_name(name, sizeof name, "evict");
    /* 60 permits a minute: A, B, C take 1 each and are back at rest a
     * second later; D and E take all 60 and stay away from rest for a
     * minute, far beyond the rest of this test. */
    seg_create(name, "token_bucket:60/60s", "64", "8");
    run_result r;
    const char *old[] = {"A", "B", "C"}, *fresh[] = {"D", "E"};
    for (int i = 0; i < 3; i++) {
        RUN(&r, 0, "try", name, old[i]);
        run_free(&r);
    }
    for (int i = 0; i < 2; i++) {
        RUN(&r, 0, "try", name, fresh[i], "--cost", "60");
        run_free(&r);
    }
    /* Wait until A, B, C are observed at rest (not a guessed sleep); 30 s
     * without that is a failure. */
    uint64_t t0 = srl_monotonic_ns(NULL);
    for (int rest = 0; rest < 3;) {
        ck_assert_msg(srl_monotonic_ns(NULL) - t0 < 30ull * 1000000000ull,
                      "A, B, C not at rest after 30 s");
        usleep(100 * 1000);
        RUN(&r, 0, "list", name, "--json");
        json_value *l = parse_out(&r);
        rest = 0;
        for (int i = 0; i < 3; i++)
            rest += json_get_bool(find_key(l, old[i]), "at_rest");
        json_free(l);
        run_free(&r);
    }
    RUN(&r, 0, "evict", name, "--dry-run", "--json");
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "at_rest"), 3);
    ck_assert_uint_eq(json_get_u64(v, "tracked"), 5);
    ck_assert_int_eq(json_get_bool(v, "dry_run"), 1);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "evict", name, "--dry-run");
    char want[300];
    snprintf(want, sizeof want,
             "%s: 3 of 5 keys at rest would be evicted (dry run: nothing evicted)\n", name);
    ck_assert_str_eq(r.out, want);
    run_free(&r);
    /* The dry run changed nothing. */
    RUN(&r, 0, "list", name, "--json");
    v = parse_out(&r);
    ck_assert_uint_eq(json_get(v, "keys")->n, 5);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(json_get_bool(find_key(v, old[i]), "at_rest"), 1);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(json_get_bool(find_key(v, fresh[i]), "at_rest"), 0);
    json_free(v);
    run_free(&r);

    RUN(&r, 0, "evict", name, "--json");
    v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "evicted"), 3);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "list", name, "--json");
    v = parse_out(&r);
    ck_assert_uint_eq(json_get(v, "keys")->n, 2);
    ck_assert(find_key(v, "D") != NULL && find_key(v, "E") != NULL);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "info", name, "--json");
    v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "evicted"), 3);
    ck_assert_uint_eq(json_get_u64(v, "used"), 2);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "evict", name);
    snprintf(want, sizeof want, "%s: evicted 0 keys at rest\n", name);
    ck_assert_str_eq(r.out, want);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

START_TEST(list_on_gcra_and_sliding_counter_refuses_sort_recent_and_explains_idle)
{
    const char *algos[] = {"gcra:5/1h", "sliding_counter:5/1h"};
    const char *names[] = {"gcra", "sliding_counter"};
    for (int i = 0; i < 2; i++) {
        char name[160], want[300];
        seg_name(name, sizeof name, names[i]);
        seg_create(name, algos[i], "64", "8");
        run_result r;
        RUN(&r, 0, "try", name, "k");
        run_free(&r);
        RUN(&r, EX_USAGE, "list", name, "--sort", "recent");
        snprintf(want, sizeof want,
                 "rlctl: list: --sort recent: %s segments do not record when a key was last "
                 "used; sort by denied or allowed\n",
                 names[i]);
        ck_assert_str_eq(r.err, want);
        ck_assert_str_eq(r.out, "");
        run_free(&r);
        RUN(&r, 0, "list", name);
        snprintf(want, sizeof want, "\n(IDLE is '-': %s keeps no time of last use)\n", names[i]);
        ck_assert_msg(strstr(r.out, want) != NULL, "got: %s", r.out);
        run_free(&r);
        seg_destroy(name);
    }
}
END_TEST

START_TEST(list_top_without_sort_keeps_the_footer_and_hints_at_key_display)
{
    char name[160];
    seg_name(name, sizeof name, "list-footer");
    seg_create(name, "token_bucket:5/1h", "64", "0");
    run_result r;
    const char *keys[] = {"a", "b", "c", "d"};
    for (size_t i = 0; i < 4; i++) {
        RUN(&r, 0, "try", name, keys[i]);
        run_free(&r);
    }
    /* The hint's cost figures: check_rlctl_walks.c */
    const char *hint = "\n(keys shown by fingerprint: this segment keeps no key bytes; to see "
                       "them, recreate it with --key-display 32 and open it with key_display 32 "
                       "in the workers: ";
    RUN(&r, 0, "list", name, "--top", "2");
    ck_assert_msg(strstr(r.out, "\n(2 of 4 keys shown)\n") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, hint) != NULL, "%s", r.out);
    run_free(&r);
    RUN(&r, 0, "list", name, "--top", "2", "--sort", "allowed");
    ck_assert_msg(strstr(r.out, "\n(2 of 4 keys shown)\n") != NULL, "%s", r.out);
    run_free(&r);
    seg_destroy(name);
    /* With display bytes there is no hint. */
    seg_create(name, "token_bucket:5/1h", "64", "8");
    RUN(&r, 0, "try", name, "k");
    run_free(&r);
    RUN(&r, 0, "list", name);
    ck_assert_msg(strstr(r.out, "keys shown by fingerprint") == NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "keys shown)") == NULL, "%s", r.out);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* ------------------------------------------------------ in flight, compound */

/* A segment named for tag: token_bucket:2/1h (tier 0, "default") and tier
 * paid, token_bucket:5/1h; key bytes shown. */
static void paid_segment(char *name, size_t len, const char *tag)
{
    seg_name(name, len, tag);
    run_result r;
    RUN(&r, 0, "create", name, "--policy", "token_bucket:2/1h", "--capacity", "64",
        "--key-display", "8", "--tier", "paid=token_bucket:5/1h");
    run_free(&r);
}

/* get without --tier sees a key under its own tier, and decodes its state's
 * rows by that tier's limits: a compound default and a one-limit tier paid
 * (a paid key has no rows; decoded by default's two limits it had two of
 * garbage), then the other way round (a paid key shows paid's two rows). */
START_TEST(get_sees_a_key_under_its_own_tier)
{
    char name[160];
    seg_name(name, sizeof name, "owntier");
    run_result r;
    RUN(&r, 0, "create", name, "--policy", "token_bucket:2/1h + token_bucket:3/1d", "--capacity",
        "64", "--tier", "paid=token_bucket:5/1h");
    run_free(&r);
    for (int i = 0; i < 3; i++) {
        RUN(&r, 0, "try", name, "p", "--tier", "paid");
        run_free(&r);
    }
    RUN(&r, 0, "try", name, "d");
    run_free(&r);
    RUN(&r, 0, "get", name, "p");
    const char *pfx = "p: of tier 'paid', a request of cost 1 would be allowed now, leaving 1 "
                      "of 5; at rest in ";
    ck_assert_msg(strncmp(r.out, pfx, strlen(pfx)) == 0, "got: %s", r.out);
    ck_assert_msg(strchr(r.out, '\n') == r.out + strlen(r.out) - 1, "one line, got: %s", r.out);
    run_free(&r);
    RUN(&r, 0, "get", name, "p", "--json");
    json_value *v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "tier_name"), "paid");
    ck_assert_ptr_null(json_get(v, "limits"));
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "get", name, "d");   /* default's key: its two rows, no tier named */
    ck_assert_msg(strstr(r.out, "d: a request of cost 1 would be allowed now, leaving 0 of 2") ==
                      r.out && strstr(r.out, "\n  limit 0 (token_bucket:2/1h): 1 of 2 left\n"
                                             "  limit 1 (token_bucket:3/1d): 2 of 3 left\n"),
                  "got: %s", r.out);
    run_free(&r);
    seg_destroy(name);

    seg_name(name, sizeof name, "owntier2");
    RUN(&r, 0, "create", name, "--policy", "token_bucket:2/1h", "--capacity", "64", "--tier",
        "paid=token_bucket:5/1h + token_bucket:9/1d");
    run_free(&r);
    RUN(&r, 0, "try", name, "p", "--tier", "paid");
    run_free(&r);
    RUN(&r, 0, "get", name, "p");
    ck_assert_msg(strstr(r.out, "p: of tier 'paid', a request of cost 1 would be allowed now, "
                                "leaving 3 of 5") == r.out &&
                      strstr(r.out, "\n  limit 0 (token_bucket:5/1h): 4 of 5 left\n"
                                    "  limit 1 (token_bucket:9/1d): 8 of 9 left\n"),
                  "got: %s", r.out);
    run_free(&r);
    RUN(&r, 0, "get", name, "p", "--json");
    v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "tier_name"), "paid");
    ck_assert_ptr_nonnull(json_get(v, "limits"));
    json_free(v);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* try --tier NAME decides under that tier (a new key is created in it,
 * list shows it there); a name the segment has not is refused with its
 * tiers, changing nothing. */
START_TEST(try_takes_a_tier)
{
    char name[160], want[400];
    paid_segment(name, sizeof name, "trytier");
    run_result r;
    for (int i = 0; i < 5; i++) {
        RUN(&r, 0, "try", name, "p", "--tier", "paid");
        snprintf(want, sizeof want, "p: allowed, remaining %d of 5\n", 4 - i);
        ck_assert_str_eq(r.out, want);
        run_free(&r);
    }
    RUN(&r, 1, "try", name, "p", "--tier", "paid");
    run_free(&r);
    RUN(&r, 0, "try", name, "d");   /* no --tier: tier 0 */
    ck_assert_str_eq(r.out, "d: allowed, remaining 1 of 2\n");
    run_free(&r);
    RUN(&r, 0, "list", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_str_eq(json_get_str(find_key(v, "p"), "tier_name"), "paid");
    ck_assert_uint_eq(json_get_u64(find_key(v, "p"), "tier"), 1);
    ck_assert_str_eq(json_get_str(find_key(v, "d"), "tier_name"), "default");
    json_free(v);
    run_free(&r);
    RUN(&r, 64, "try", name, "n", "--tier", "gold");
    snprintf(want, sizeof want,
             "rlctl: %s: no tier 'gold' in the segment (its tiers: default, paid)\n", name);
    ck_assert_str_eq(r.err, want);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    RUN(&r, 1, "get", name, "n");   /* the refused try took nothing */
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* get --tier NAME: the key as a request of that tier would find it, and
 * nothing written.  p used 3 of paid's 5: paid sees 2 left (1 after the
 * request); default (2/1h) sees it converted, its 3 used capped at 2, so
 * denied; the key stays in paid (a get converts nothing).  A new key: a
 * fresh state of the tier's limits.  An unknown tier: refused, naming the
 * tiers.  A cost above the tier's permits: the tier's sentence. */
START_TEST(get_takes_a_tier)
{
    char name[160], want[400];
    paid_segment(name, sizeof name, "gettier");
    run_result r;
    for (int i = 0; i < 3; i++) {
        RUN(&r, 0, "try", name, "p", "--tier", "paid");
        run_free(&r);
    }
    /* paid's text up to its time (the refill since the tries moves it);
     * default's whole: the conversion starts a state at the get's now with
     * 2 of 2 used, so exactly one token (30m) to wait. */
    RUN(&r, 0, "get", name, "p", "--tier", "paid");
    const char *pfx = "p: under tier 'paid', a request of cost 1 would be allowed now, "
                      "leaving 1 of 5; at rest in ";
    ck_assert_msg(strncmp(r.out, pfx, strlen(pfx)) == 0, "got: %s", r.out);
    run_free(&r);
    RUN(&r, 0, "get", name, "p", "--tier", "default");
    ck_assert_str_eq(r.out, "p: under tier 'default', a request of cost 1 would be denied now: "
                            "retry after 30m; at rest in 1h\n");
    run_free(&r);
    RUN(&r, 0, "get", name, "p", "--tier", "paid", "--json");
    json_value *v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "tier_name"), "paid");
    ck_assert_int_eq(json_get_bool(v, "allowed"), 1);
    ck_assert_uint_eq(json_get_u64(v, "limit"), 5);
    ck_assert_uint_eq(json_get_u64(v, "remaining"), 1);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "get", name, "p", "--tier", "default", "--json");
    v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "tier_name"), "default");
    ck_assert_int_eq(json_get_bool(v, "allowed"), 0);
    ck_assert_uint_eq(json_get_u64(v, "limit"), 2);
    ck_assert_uint_eq(json_get_u64(v, "remaining"), 0);
    ck_assert_uint_eq(json_get_u64(v, "retry_after_ns"), 1800 * SEC);
    json_free(v);
    run_free(&r);
    /* Still paid's, 2 left: the gets wrote nothing. */
    RUN(&r, 0, "try", name, "p", "--tier", "paid");
    ck_assert_str_eq(r.out, "p: allowed, remaining 1 of 5\n");
    run_free(&r);
    RUN(&r, 1, "get", name, "n", "--tier", "paid");
    ck_assert_str_eq(r.out, "n: not tracked (a new key: under tier 'paid', a first request of "
                            "cost 1 would be allowed, leaving 4 of 5)\n");
    run_free(&r);
    RUN(&r, 64, "get", name, "p", "--tier", "gold");
    snprintf(want, sizeof want,
             "rlctl: %s: no tier 'gold' in the segment (its tiers: default, paid)\n", name);
    ck_assert_str_eq(r.err, want);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    RUN(&r, 64, "get", name, "p", "--tier", "default", "--cost", "3");
    snprintf(want, sizeof want,
             "rlctl: %s: cost is zero or exceeds the policy's permits: cost 3: "
             "'token_bucket:2/1h' allows 2 at most: give a --cost between 1 and the policy's "
             "permits\n",
             name);
    ck_assert_str_eq(r.err, want);
    run_free(&r);
    RUN(&r, 0, "list", name, "--json");
    v = parse_out(&r);
    ck_assert_str_eq(json_get_str(find_key(v, "p"), "tier_name"), "paid");
    json_free(v);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* How many times needle occurs in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* A worker process (forked, the public API) holds two units of key k and
 * waits to be killed; rlctl sees them with its pid, marked alive, evict
 * leaves them while it lives; once it is dead get marks them dead, evict
 * frees them, and info counts the reclaim.  try has no units to take. */
START_TEST(get_names_the_pids_holding_units_and_evict_frees_a_dead_holders_units)
{
    char name[160], want[600];
    seg_name(name, sizeof name, "units");
    seg_create(name, "concurrency:3", "64", "8");
    {   /* try has no units to take: one message, saying why and what to do */
        run_result t;
        RUN(&t, 70, "try", name, "k");
        snprintf(want, sizeof want,
                 "rlctl: %s: 'try' takes permits of a rate limit, and this policy has an "
                 "in-flight (concurrency) limit: its units are taken and given back only by "
                 "the workers that hold them (srl_enter/srl_leave); 'rlctl get %s KEY' shows "
                 "who holds them\n", name, name);
        ck_assert_str_eq(t.err, want);
        ck_assert_str_eq(t.out, "");
        run_free(&t);
        RUN(&t, 70, "try", name, "k", "--json");
        json_value *v = parse_out(&t);
        ck_assert_str_eq(json_get_str(v, "error"), "'try' takes permits of a rate limit, and "
                                                   "this policy has an in-flight (concurrency) "
                                                   "limit");
        ck_assert_uint_eq(json_get_u64(v, "exit_status"), 70);
        json_free(v);
        run_free(&t);
    }
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t p = test_fork();
    if (p == 0) {
        srl_limiter *lim;
        if (srl_open_shared(name, NULL, 0, &lim) != 0)
            _exit(1);
        for (int i = 0; i < 2; i++) {
            srl_lease l;
            srl_decision d;
            if (srl_enter(lim, "k", 1, &l, &d) != 0 || !d.allowed)
                _exit(2);
        }
        if (write(ready[1], "x", 1) != 1)
            _exit(3);
        for (;;)
            pause();
    }
    char c;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    run_result r;
    RUN(&r, 0, "get", name, "k");
    ck_assert_msg(strncmp(r.out, "k: a request of cost 1 would be allowed now, leaving 0 of 3;",
                          60) == 0, "%s", r.out);
    snprintf(want, sizeof want, "  limit 0 (concurrency:3): 2 of 3 in flight: pid %d for ",
             (int)p);
    ck_assert_msg(strstr(r.out, want) != NULL, "want '%s' in:\n%s", want, r.out);
    ck_assert_msg(strstr(strstr(r.out, want) + strlen(want), ", pid ") != NULL, "%s", r.out);
    ck_assert_int_eq(count_of(r.out, " (alive)"), 2);
    run_free(&r);
    RUN(&r, 0, "get", name, "k", "--json");
    json_value *v = parse_out(&r);
    const json_value *lims = json_get(v, "limits");
    ck_assert_uint_eq(lims->n, 1);
    ck_assert_uint_eq(json_get_u64(lims->items[0], "inflight"), 2);
    const json_value *hs = json_get(lims->items[0], "holders");
    ck_assert_uint_eq(hs->n, 2);
    for (size_t i = 0; i < hs->n; i++) {
        ck_assert_uint_eq(json_get_u64(hs->items[i], "pid"), (uint64_t)p);
        ck_assert_int_eq(json_get_bool(hs->items[i], "alive"), 1);
    }
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "info", name);
    ck_assert_msg(strstr(r.out, "in flight:      2 units\n") != NULL, "%s", r.out);
    run_free(&r);
    RUN(&r, 0, "evict", name);   /* the holder lives: nothing at rest */
    snprintf(want, sizeof want, "%s: evicted 0 keys at rest\n", name);
    ck_assert_str_eq(r.out, want);
    run_free(&r);
    ck_assert_int_eq(kill(p, SIGKILL), 0);
    ck_assert_int_eq(waitpid(p, NULL, 0), p);
    /* Dead, its units not yet freed: get still lists them, marked dead. */
    RUN(&r, 0, "get", name, "k");
    ck_assert_int_eq(count_of(r.out, " (dead: freed by the next evict)"), 2);
    ck_assert_int_eq(count_of(r.out, " (alive)"), 0);
    run_free(&r);
    RUN(&r, 0, "get", name, "k", "--json");
    v = parse_out(&r);
    hs = json_get(json_get(v, "limits")->items[0], "holders");
    ck_assert_uint_eq(hs->n, 2);
    for (size_t i = 0; i < hs->n; i++)
        ck_assert_int_eq(json_get_bool(hs->items[i], "alive"), 0);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "evict", name);   /* dead: its units are freed, the key is at rest */
    snprintf(want, sizeof want, "%s: evicted 1 key at rest\n", name);
    ck_assert_str_eq(r.out, want);
    run_free(&r);
    RUN(&r, 1, "get", name, "k");
    run_free(&r);
    RUN(&r, 0, "info", name);
    ck_assert_msg(strstr(r.out, "reclaimed:      2 (in-flight units of dead or stuck holders)\n")
                  != NULL, "%s", r.out);
    run_free(&r);
    close(ready[0]);
    close(ready[1]);
    seg_destroy(name);
}
END_TEST

/* Each limit of a compound is shown, and a denial took nothing from the
 * limit that would have admitted it. */
START_TEST(get_shows_every_limit_of_a_compound_policy)
{
    char name[160];
    seg_name(name, sizeof name, "compound");
    seg_create(name, "token_bucket:10/1h + sliding_log:3/1h", "64", "8");
    run_result r;
    for (int i = 0; i < 3; i++) {
        RUN(&r, 0, "try", name, "k");
        run_free(&r);
    }
    RUN(&r, 1, "try", name, "k");
    run_free(&r);
    RUN(&r, 0, "get", name, "k");
    ck_assert_msg(strstr(r.out, "\n  limit 0 (token_bucket:10/1h): 7 of 10 left\n"
                                "  limit 1 (sliding_log:3/1h): none left, retry after ") != NULL,
                  "%s", r.out);
    run_free(&r);
    RUN(&r, 0, "info", name);
    ck_assert_msg(strstr(r.out, "token_bucket:10/1h + sliding_log:3/1h") != NULL, "%s", r.out);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlctl_keys");
    TCase *tc = tcase_create("keys");
    tcase_add_unchecked_fixture(tc, seg_prefix_init, seg_prefix_cleanup);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, try_allows_exactly_the_permits_then_exits_1_with_the_retry_time);
    tcase_add_test(tc, list_top_without_sort_keeps_the_footer_and_hints_at_key_display);
    tcase_add_test(tc, try_with_a_cost_above_the_permits_exits_64_and_tracks_nothing);
    tcase_add_test(tc, try_takes_a_tier);
    tcase_add_test(tc, get_takes_a_tier);
    tcase_add_test(tc, get_sees_a_key_under_its_own_tier);
    tcase_add_test(tc, get_shows_the_remaining_permits_and_exits_1_for_an_untracked_key);
    tcase_add_test(tc, reset_forgets_a_key_and_exits_1_when_it_is_not_tracked);
    tcase_add_test(tc, try_on_a_full_table_says_on_full_decided_and_info_counts_it);
    tcase_add_test(tc, list_json_parses_and_shows_binary_and_escape_sequence_keys_escaped);
    tcase_add_test(tc, list_without_display_bytes_shows_fingerprints);
    tcase_add_test(tc, list_sorts_by_denied_allowed_or_recent_and_cuts_to_top);
    tcase_add_test(tc, list_on_gcra_and_sliding_counter_refuses_sort_recent_and_explains_idle);
    tcase_add_test(tc, evict_dry_run_counts_the_keys_at_rest_then_evict_removes_exactly_them);
    tcase_add_test(tc, get_names_the_pids_holding_units_and_evict_frees_a_dead_holders_units);
    tcase_add_test(tc, get_shows_every_limit_of_a_compound_policy);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
