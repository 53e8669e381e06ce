/*
 * check_rlctl.c - suite "rlctl": the BUILT rlctl binary against live
 * segments, command by command, asserting exact output and exit codes.
 *
 * Segments are created with the real monotonic clock (rlctl has no fake
 * ticker), so policies have long windows (5/1h) where results must be
 * exact; the one test that needs keys at rest uses a 1/4s window and
 * sleeps past it (it asserts which keys are at rest, never a duration).
 * Each test case's segments share a prefix from unique_name(); the
 * unchecked teardown unlinks whatever a failed test left behind.
 *
 * Two tests reach the store's internals (shm.h) to damage a header or to
 * leave a stale segment behind: states rlctl must report, which the public
 * API cannot produce on purpose.
 *
 * The race with worker processes is in check_rlctl_race.c.
 */
#include <check.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json_mini.h"
#include "rlctl_run.h"
#include "shm.h" /* internal: to damage headers and leave a stale segment */

/* ------------------------------------------------------------ helpers */

#define RUN(r, want, ...)                                                              \
    do {                                                                               \
        int st_ = run_rlctl((r), __VA_ARGS__, (const char *)NULL);                     \
        ck_assert_msg(st_ == (want), "rlctl %s: exit %d (want %d)\nstdout: %s\nstderr: %s", \
                      #__VA_ARGS__, st_, (want), (r)->out, (r)->err);                  \
    } while (0)

/* stdout as JSON: must parse, be ASCII only, and be one line. */
static json_value *parse_out(const run_result *r)
{
    char err[128];
    ck_assert_msg(printable_ascii(r->out, r->out_len), "non-ASCII or control byte in: %s", r->out);
    ck_assert_msg(r->out_len > 0 && r->out[r->out_len - 1] == '\n' &&
                      memchr(r->out, '\n', r->out_len) == r->out + r->out_len - 1,
                  "not one line: %s", r->out);
    json_value *v = json_parse(r->out, r->out_len, err, sizeof err);
    ck_assert_msg(v != NULL, "bad JSON (%s): %s", err, r->out);
    return v;
}

static void create(const char *name, const char *policy, const char *capacity,
                   const char *display)
{
    run_result r;
    RUN(&r, 0, "create", name, "--policy", policy, "--capacity", capacity, "--key-display",
        display);
    run_free(&r);
}

static void destroy(const char *name)
{
    run_result r;
    RUN(&r, 0, "destroy", name);
    run_free(&r);
}

static int shm_exists(const char *name)
{
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", name + 1);
    return access(path, F_OK) == 0;
}

/* "label:" padded to 16 columns, then the value: one line of `info`. */
static void assert_info_line(const char *out, const char *label, const char *value)
{
    char line[256];
    char lab[64];
    snprintf(lab, sizeof lab, "%s:", label);
    snprintf(line, sizeof line, "\n%-16s%s\n", lab, value);
    ck_assert_msg(strstr(out, line) != NULL, "no line '%s' in:\n%s", line + 1, out);
}

/* The entry of `list --json` whose decoded "key" is key, or NULL. */
static const json_value *find_key(const json_value *list, const char *key)
{
    const json_value *keys = json_get(list, "keys");
    ck_assert(keys != NULL && keys->type == JSON_ARRAY);
    const json_value *found = NULL;
    for (size_t i = 0; i < keys->n; i++) {
        const char *k = json_get_str(keys->items[i], "key");
        if (k != NULL && strcmp(k, key) == 0) {
            ck_assert_msg(found == NULL, "key %s listed twice", key);
            found = keys->items[i];
        }
    }
    return found;
}

/* ---------------------------------------------------- create and info */

START_TEST(create_then_info_shows_the_policy_capacity_and_zero_counters)
{
    char name[160];
    seg_name(name, sizeof name, "info");
    run_result r;
    RUN(&r, 0, "create", name, "--policy", "token_bucket:5/1h", "--capacity", "1000",
        "--key-display", "16", "--mode", "0640", "--on-full", "deny");
    ck_assert_msg(strncmp(r.out, "created ", 8) == 0 && strstr(r.out, name) != NULL &&
                      strstr(r.out, ": token_bucket:5/1h, ") != NULL &&
                      strstr(r.out, "\nsegment size: ") != NULL &&
                      strstr(r.out, "\n/dev/shm free: before ") != NULL &&
                      strstr(r.out, ", after ") != NULL,
                  "create said: %s", r.out);
    run_free(&r);

    RUN(&r, 0, "info", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "name"), name);
    ck_assert_str_eq(json_get_str(v, "policy"), "token_bucket:5/1h");
    ck_assert_str_eq(json_get_str(v, "algorithm"), "token_bucket");
    ck_assert_uint_eq(json_get_u64(v, "permits"), 5);
    ck_assert_uint_eq(json_get_u64(v, "window_ns"), 3600ull * 1000000000ull);
    ck_assert_str_eq(json_get_str(v, "on_full"), "deny");
    ck_assert_str_eq(json_get_str(v, "mode"), "0640");
    uint64_t cap = json_get_u64(v, "capacity"), spb = json_get_u64(v, "slots_per_bucket");
    /* Rounded up to whole buckets: the least multiple of the bucket size. */
    ck_assert_uint_eq(cap, json_get_u64(v, "buckets") * spb);
    ck_assert_uint_ge(cap, 1000);
    ck_assert_uint_lt(cap, 1000 + spb);
    ck_assert_uint_eq(json_get_u64(v, "key_display"), 16);
    ck_assert_uint_ne(json_get_u64(v, "creator_pid"), 0);
    ck_assert_uint_eq(json_get_u64(v, "owner_uid"), (uint64_t)getuid());
    ck_assert_uint_ge(json_get_u64(v, "segment_bytes"), cap * json_get_u64(v, "slot_bytes"));
    ck_assert(json_get(v, "bytes_per_key")->type == JSON_NULL); /* no key yet */
    const char *zero[] = {"used", "allowed", "denied", "full", "recovered", "reset_slots",
                          "evicted", "timeouts"};
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        ck_assert_msg(json_get_u64(v, zero[i]) == 0, "%s is not 0", zero[i]);
    json_free(v);
    run_free(&r);

    RUN(&r, 0, "info", name);
    assert_info_line(r.out, "policy", "token_bucket:5/1h");
    assert_info_line(r.out, "on full", "deny");
    assert_info_line(r.out, "used", "0 keys");
    assert_info_line(r.out, "load factor", "0.00%");
    assert_info_line(r.out, "bytes per key", "- (no key tracked)");
    assert_info_line(r.out, "key display", "16 bytes");
    assert_info_line(r.out, "mode", "0640");
    assert_info_line(r.out, "allowed", "0");
    assert_info_line(r.out, "evicted", "0");
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    destroy(name);
}
END_TEST

START_TEST(create_of_an_existing_segment_exits_73_and_changes_nothing)
{
    char name[160], want[400];
    seg_name(name, sizeof name, "exists");
    create(name, "token_bucket:5/1h", "64", "0");
    run_result r;
    RUN(&r, 73, "create", name, "--policy", "gcra:9/1s", "--capacity", "128");
    snprintf(want, sizeof want,
             "rlctl: %s: segment already exists: use it as it is, or remove it first with "
             "'rlctl destroy'\n",
             name);
    ck_assert_str_eq(r.err, want);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    RUN(&r, 0, "info", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "policy"), "token_bucket:5/1h");
    json_free(v);
    run_free(&r);
    destroy(name);
}
END_TEST

/* ------------------------------------------------------ try, get, reset */

START_TEST(try_allows_exactly_the_permits_then_exits_1_with_the_retry_time)
{
    char name[160];
    seg_name(name, sizeof name, "try");
    create(name, "token_bucket:5/1h", "64", "0");
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
     * human form floors the seconds, Retry-After rounds them up. */
    int m, sec, ra;
    char tail[8];
    ck_assert_msg(sscanf(r.out, "k: denied, retry after %dm %ds (Retry-After: %d)%1[\n]", &m,
                         &sec, &ra, tail) == 4,
                  "got: %s", r.out);
    ck_assert_int_le(ra, 720);
    ck_assert_int_eq(m * 60 + sec + 1, ra);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    RUN(&r, 1, "try", name, "k", "--json");
    json_value *v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "allowed"), 0);
    ck_assert_uint_eq(json_get_u64(v, "remaining"), 0);
    ck_assert_uint_eq(json_get_u64(v, "limit"), 5);
    uint64_t ra_ns = json_get_u64(v, "retry_after_ns");
    char ra_text[24];
    snprintf(ra_text, sizeof ra_text, "%llu", (unsigned long long)((ra_ns + 999999999) / 1000000000));
    ck_assert_str_eq(json_get_str(v, "retry_after"), ra_text);
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
    destroy(name);
}
END_TEST

START_TEST(try_with_a_cost_above_the_permits_exits_64_and_tracks_nothing)
{
    char name[160], want[400];
    seg_name(name, sizeof name, "cost");
    create(name, "token_bucket:5/1h", "64", "0");
    run_result r;
    RUN(&r, 64, "try", name, "k", "--cost", "6");
    snprintf(want, sizeof want,
             "rlctl: %s: cost is zero or exceeds the policy's permits: give a --cost between 1 "
             "and the policy's permits\n",
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
    destroy(name);
}
END_TEST

START_TEST(get_shows_the_remaining_permits_and_exits_1_for_an_untracked_key)
{
    char name[160];
    seg_name(name, sizeof name, "get");
    create(name, "token_bucket:5/1h", "64", "0");
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
    ck_assert_str_eq(r.out, "\\x00\\xff: not tracked (a new key: its first request would be "
                            "allowed)\n");
    run_free(&r);
    RUN(&r, 1, "get", name, "other", "--json");
    v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "tracked"), 0);
    ck_assert_uint_eq(json_get_u64(v, "limit"), 5);
    json_free(v);
    run_free(&r);
    destroy(name);
}
END_TEST

START_TEST(reset_forgets_a_key_and_exits_1_when_it_is_not_tracked)
{
    char name[160];
    seg_name(name, sizeof name, "reset");
    create(name, "token_bucket:5/1h", "64", "0");
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
    destroy(name);
}
END_TEST

/* ---------------------------------------------------------------- list */

#define ESC_KEY "\x1b[31mred\x1b[0m"
#define ESC_SHOWN "\\x1b[31mred\\x1b[0m"

START_TEST(list_json_parses_and_shows_binary_and_escape_sequence_keys_escaped)
{
    char name[160];
    seg_name(name, sizeof name, "list");
    create(name, "token_bucket:5/1h", "64", "16");
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
    destroy(name);
}
END_TEST

START_TEST(list_without_display_bytes_shows_fingerprints)
{
    char name[160];
    seg_name(name, sizeof name, "fp");
    create(name, "token_bucket:5/1h", "64", "0");
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
    destroy(name);
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

START_TEST(list_sorts_by_denied_allowed_or_recent_and_cuts_to_top)
{
    char name[160], order[256];
    seg_name(name, sizeof name, "sort");
    create(name, "token_bucket:5/1h", "64", "8");
    run_result r;
    /* a: 4 allowed; b: 1 allowed (cost 5), then 2 denied; c: 2 allowed, last. */
    const char *plan[][3] = {{"a"}, {"a"}, {"a"}, {"a"}, {"b", "--cost", "5"}, {"b"}, {"b"},
                             {"c"}, {"c"}};
    for (size_t i = 0; i < sizeof plan / sizeof plan[0]; i++) {
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
    destroy(name);
}
END_TEST

/* --------------------------------------------------------------- evict */

START_TEST(evict_dry_run_counts_the_keys_at_rest_then_evict_removes_exactly_them)
{
    char name[160];
    seg_name(name, sizeof name, "evict");
    create(name, "token_bucket:1/4s", "64", "8");
    run_result r;
    const char *old[] = {"A", "B", "C"}, *fresh[] = {"D", "E"};
    for (int i = 0; i < 3; i++) {
        RUN(&r, 0, "try", name, old[i]);
        run_free(&r);
    }
    /* One permit per 4 s: A, B, C are back at rest 4 s after their request. */
    usleep(4500 * 1000);
    for (int i = 0; i < 2; i++) {
        RUN(&r, 0, "try", name, fresh[i]);
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
    destroy(name);
}
END_TEST

/* ------------------------------------------------- check, watch, ls */

START_TEST(check_exits_0_on_a_healthy_segment)
{
    char name[160], want[300];
    seg_name(name, sizeof name, "check");
    create(name, "sliding_log:5/1h", "256", "8");
    run_result r;
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i % 7);
        run_rlctl(&r, "try", name, key, (const char *)NULL);
        ck_assert_int_le(r.status, 1);
        run_free(&r);
    }
    RUN(&r, 0, "check", name);
    snprintf(want, sizeof want, "%s: healthy: every invariant holds\n", name);
    ck_assert_str_eq(r.out, want);
    run_free(&r);
    RUN(&r, 0, "check", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "healthy"), 1);
    ck_assert_uint_eq(json_get_u64(v, "problem_count"), 0);
    ck_assert_uint_eq(json_get(v, "problems")->n, 0);
    json_free(v);
    run_free(&r);
    destroy(name);
}
END_TEST

START_TEST(watch_prints_count_samples_with_the_running_totals)
{
    char name[160];
    seg_name(name, sizeof name, "watch");
    create(name, "token_bucket:5/1h", "64", "0");
    run_result r;
    for (int i = 0; i < 7; i++) {
        run_rlctl(&r, "try", name, "w", (const char *)NULL);
        ck_assert_int_eq(r.status, i < 5 ? 0 : 1);
        run_free(&r);
    }
    RUN(&r, 0, "watch", name, "-i", "0.02", "-n", "3", "--json");
    ck_assert(printable_ascii(r.out, r.out_len));
    size_t lines = 0;
    for (char *line = r.out, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        char err[128];
        json_value *v = json_parse(line, (size_t)(nl - line), err, sizeof err);
        ck_assert_msg(v != NULL, "bad JSON line (%s): %.*s", err, (int)(nl - line), line);
        ck_assert_uint_eq(json_get_u64(v, "allowed"), 5);
        ck_assert_uint_eq(json_get_u64(v, "denied"), 2);
        ck_assert_uint_eq(json_get_u64(v, "used"), 1);
        ck_assert_str_eq(json_get(v, "allowed_per_s")->text, "0.000");
        ck_assert_uint_gt(json_get_u64(v, "interval_ns"), 0);
        json_free(v);
        lines++;
    }
    ck_assert_uint_eq(lines, 3);
    run_free(&r);
    RUN(&r, 0, "watch", name, "-i", "0.02", "-n", "2");
    size_t nl = 0;
    for (size_t i = 0; i < r.out_len; i++)
        nl += r.out[i] == '\n';
    ck_assert_uint_eq(nl, 3); /* header + 2 samples */
    ck_assert_msg(strstr(r.out, "ALLOWED/s") != NULL, "no header: %s", r.out);
    run_free(&r);
    destroy(name);
}
END_TEST

START_TEST(ls_lists_our_segments_with_their_policy_and_use)
{
    char a[160], b[160];
    seg_name(a, sizeof a, "ls-a");
    seg_name(b, sizeof b, "ls-b");
    create(a, "gcra:10/1s", "128", "0");
    create(b, "sliding_counter:100/1m", "256", "0");
    run_result r;
    RUN(&r, 0, "try", a, "x");
    run_free(&r);
    RUN(&r, 0, "ls", "--json");
    json_value *v = parse_out(&r);
    const json_value *segs = json_get(v, "segments");
    ck_assert(segs != NULL && segs->type == JSON_ARRAY);
    int seen = 0;
    for (size_t i = 0; i < segs->n; i++) {
        const json_value *s = segs->items[i];
        const char *n = json_get_str(s, "name");
        if (strcmp(n, a) == 0) {
            ck_assert_str_eq(json_get_str(s, "status"), "ok");
            ck_assert_str_eq(json_get_str(s, "policy"), "gcra:10/1s");
            ck_assert_uint_eq(json_get_u64(s, "used"), 1);
            ck_assert_uint_ge(json_get_u64(s, "capacity"), 128);
            seen |= 1;
        } else if (strcmp(n, b) == 0) {
            ck_assert_str_eq(json_get_str(s, "policy"), "sliding_counter:100/1m");
            ck_assert_uint_eq(json_get_u64(s, "used"), 0);
            seen |= 2;
        }
    }
    ck_assert_int_eq(seen, 3);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "ls");
    ck_assert_msg(strncmp(r.out, "NAME ", 5) == 0, "no header: %s", r.out);
    char row[300];
    snprintf(row, sizeof row, "\n%s ", a);
    const char *line = strstr(r.out, row);
    ck_assert_msg(line != NULL, "no row for %s: %s", a, r.out);
    char f[5][64];
    ck_assert_int_eq(sscanf(line + 1, "%63s %63s %63s %63s %63s", f[0], f[1], f[2], f[3], f[4]), 5);
    ck_assert_str_eq(f[1], "ok");
    ck_assert_str_eq(f[2], "gcra:10/1s");
    ck_assert_str_eq(f[4], "1");
    ck_assert(printable_ascii(r.out, r.out_len));
    run_free(&r);
    destroy(a);
    destroy(b);
}
END_TEST

/* ---------------------------------------------------- failures: 66 65 64 */

START_TEST(destroy_removes_the_segment)
{
    char name[160], want[300];
    seg_name(name, sizeof name, "destroy");
    create(name, "token_bucket:5/1h", "64", "0");
    ck_assert(shm_exists(name));
    run_result r;
    RUN(&r, 0, "destroy", name);
    snprintf(want, sizeof want,
             "destroyed %s (processes that have it open keep using it until they close it)\n",
             name);
    ck_assert_str_eq(r.out, want);
    run_free(&r);
    ck_assert(!shm_exists(name));
    RUN(&r, 66, "info", name);
    run_free(&r);
    RUN(&r, 66, "destroy", name);
    run_free(&r);
}
END_TEST

START_TEST(a_missing_segment_exits_66_with_a_message_for_every_command)
{
    char name[160], want[400];
    seg_name(name, sizeof name, "missing");
    snprintf(want, sizeof want,
             "rlctl: %s: no such segment: check the name; 'rlctl ls' lists the segments on this "
             "host\n",
             name);
    const char *cmds[][4] = {{"info", name, NULL}, {"list", name, NULL}, {"get", name, "k", NULL},
                             {"try", name, "k", NULL}, {"reset", name, "k", NULL},
                             {"evict", name, NULL}, {"check", name, NULL}, {"watch", name, NULL},
                             {"destroy", name, NULL}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        run_result r;
        int st = run_rlctl_argv(&r, cmds[i]);
        ck_assert_msg(st == 66, "%s: exit %d", cmds[i][0], st);
        ck_assert_str_eq(r.err, want);
        ck_assert_str_eq(r.out, "");
        run_free(&r);
    }
    ck_assert(!shm_exists(name));
}
END_TEST

START_TEST(a_foreign_file_exits_65_and_is_left_alone)
{
    char name[160], want[400];
    seg_name(name, sizeof name, "foreign");
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    ck_assert_int_ge(fd, 0);
    char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)("not an srl segment\n"[i % 19]);
    ck_assert_int_eq(write(fd, junk, sizeof junk), (int)sizeof junk);
    close(fd);
    run_result r;
    RUN(&r, 65, "info", name);
    snprintf(want, sizeof want,
             "rlctl: %s: not an srl segment: it belongs to another program: leave it alone\n",
             name);
    ck_assert_str_eq(r.err, want);
    run_free(&r);
    RUN(&r, 65, "list", name, "--json");
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    RUN(&r, 65, "destroy", name);
    snprintf(want, sizeof want,
             "rlctl: %s: not an srl segment: refusing to remove it (--force removes it anyway)\n",
             name);
    ck_assert_str_eq(r.err, want);
    run_free(&r);
    ck_assert(shm_exists(name));
    RUN(&r, 0, "ls", "--json");
    ck_assert_msg(strstr(r.out, name) == NULL, "ls shows a foreign file: %s", r.out);
    run_free(&r);
    RUN(&r, 0, "ls", "--all", "--json");
    json_value *v = parse_out(&r);
    const json_value *segs = json_get(v, "segments");
    int seen = 0;
    for (size_t i = 0; i < segs->n; i++)
        if (strcmp(json_get_str(segs->items[i], "name"), name) == 0) {
            ck_assert_str_eq(json_get_str(segs->items[i], "status"), "foreign");
            seen++;
        }
    ck_assert_int_eq(seen, 1);
    json_free(v);
    run_free(&r);
    /* Unchanged: the same bytes are still there. */
    fd = shm_open(name, O_RDONLY, 0);
    ck_assert_int_ge(fd, 0);
    char back[8192];
    ck_assert_int_eq(read(fd, back, sizeof back), (int)sizeof back);
    close(fd);
    ck_assert(memcmp(back, junk, sizeof junk) == 0);
    RUN(&r, 0, "destroy", name, "--force");
    run_free(&r);
    ck_assert(!shm_exists(name));
}
END_TEST

/* Write `len` bytes at `off` of the segment file (to damage a header). */
static void poke(const char *name, off_t off, const void *bytes, size_t len)
{
    int fd = shm_open(name, O_RDWR, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, bytes, len, off), (ssize_t)len);
    close(fd);
}

/* `ls --json` status of name, or NULL if not listed (copied to buf). */
static const char *ls_status(const char *name, int all, char *buf, size_t len)
{
    run_result r;
    int st = all ? run_rlctl(&r, "ls", "--all", "--json", (const char *)NULL)
                 : run_rlctl(&r, "ls", "--json", (const char *)NULL);
    ck_assert_int_eq(st, 0);
    json_value *v = parse_out(&r);
    const json_value *segs = json_get(v, "segments");
    const char *found = NULL;
    for (size_t i = 0; i < segs->n; i++)
        if (strcmp(json_get_str(segs->items[i], "name"), name) == 0) {
            ck_assert_msg(found == NULL, "%s listed twice", name);
            snprintf(buf, len, "%s", json_get_str(segs->items[i], "status"));
            found = buf;
        }
    json_free(v);
    run_free(&r);
    return found;
}

START_TEST(damaged_segments_exit_65_are_listed_by_ls_and_destroy_removes_them)
{
    char ver[160], cor[160], sta[160], want[400], st[32];
    seg_name(ver, sizeof ver, "version");
    seg_name(cor, sizeof cor, "corrupt");
    seg_name(sta, sizeof sta, "stale");
    create(ver, "token_bucket:5/1h", "64", "0");
    create(cor, "token_bucket:5/1h", "64", "0");
    uint32_t bad_version = SRL__SHM_VERSION + 7, bad_state = 7;
    poke(ver, offsetof(struct srl__shm_header, version), &bad_version, sizeof bad_version);
    poke(cor, offsetof(struct srl__shm_header, state), &bad_state, sizeof bad_state);
    /* Stale: a creator that dies before publishing READY. */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        srl_config cfg;
        srl_config_init(&cfg);
        cfg.capacity = 64;
        srl_limiter *lim;
        _exit(srl__shm_open(sta, &cfg, SRL_CREATE | SRL_EXCL, SRL__SHM_TEST_NO_READY, &lim) == 0
                  ? 0 : 1);
    }
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    ck_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);

    const struct { const char *name, *status, *what, *remedy; } cases[] = {
        {ver, "version", "srl segment of an incompatible layout version or ABI",
         "use the rlctl of the srl version that created it, or destroy and recreate it"},
        {cor, "corrupt", "segment is corrupt (header or table inconsistent)",
         "destroy it ('rlctl destroy') and let the workers recreate it"},
        {sta, "stale",
         "segment is stale: its creator died before it was ready; unlink it (rlctl destroy)",
         "no worker can use it until it is removed"},
    };
    for (size_t i = 0; i < 3; i++) {
        run_result r;
        RUN(&r, 65, "info", cases[i].name);
        snprintf(want, sizeof want, "rlctl: %s: %s: %s\n", cases[i].name, cases[i].what,
                 cases[i].remedy);
        ck_assert_str_eq(r.err, want);
        ck_assert_str_eq(r.out, "");
        run_free(&r);
        RUN(&r, 65, "try", cases[i].name, "k");
        run_free(&r);
        ck_assert_str_eq(ls_status(cases[i].name, 0, st, sizeof st), cases[i].status);
        RUN(&r, 0, "destroy", cases[i].name);
        run_free(&r);
        ck_assert(!shm_exists(cases[i].name));
    }
}
END_TEST

START_TEST(a_segment_writable_by_others_exits_77_as_forbidden)
{
    char name[160], want[400], st[32];
    seg_name(name, sizeof name, "forbidden");
    create(name, "token_bucket:5/1h", "64", "0");
    int fd = shm_open(name, O_RDWR, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fchmod(fd, 0602), 0);
    close(fd);
    run_result r;
    RUN(&r, 77, "info", name);
    snprintf(want, sizeof want,
             "rlctl: %s: permission denied (segment owner or mode refused): run rlctl as the "
             "segment's owner, and make sure its mode lets nobody else write it\n",
             name);
    ck_assert_str_eq(r.err, want);
    run_free(&r);
    ck_assert_ptr_null(ls_status(name, 0, st, sizeof st));
    ck_assert_str_eq(ls_status(name, 1, st, sizeof st), "forbidden");
    RUN(&r, 77, "destroy", name);
    run_free(&r);
    ck_assert(shm_exists(name));
    RUN(&r, 0, "destroy", name, "--force");
    run_free(&r);
    ck_assert(!shm_exists(name));
}
END_TEST

struct bad_args {
    const char *args[10];
    const char *first_line; /* NAME in it stands for the segment name */
    const char *usage;      /* the second line */
};

START_TEST(bad_arguments_exit_64_with_the_reason_and_a_usage_line)
{
    char name[160];
    seg_name(name, sizeof name, "args");
    const char *N = name;
    const struct bad_args cases[] = {
        {{NULL}, "rlctl: no command given", "usage: rlctl COMMAND [ARGS]   (see rlctl(1))"},
        {{"frob"}, "rlctl: unknown command 'frob'", "usage: rlctl COMMAND [ARGS]   (see rlctl(1))"},
        {{"\x1b[2J"}, "rlctl: unknown command '\\x1b[2J'",
         "usage: rlctl COMMAND [ARGS]   (see rlctl(1))"},
        {{"info"}, "rlctl: info: missing NAME", "usage: rlctl info NAME [--json]"},
        {{"try", N}, "rlctl: try: missing KEY",
         "usage: rlctl try NAME [--hex] KEY [--cost N] [--json]"},
        {{"info", N, "extra"}, "rlctl: info: unexpected argument 'extra'",
         "usage: rlctl info NAME [--json]"},
        {{"info", N, "--bogus"}, "rlctl: info: unknown option '--bogus'",
         "usage: rlctl info NAME [--json]"},
        {{"info", "bad/name"},
         "rlctl: info: invalid segment name 'bad/name': expected \"/\" then 1..200 of "
         "[A-Za-z0-9._-]",
         "usage: rlctl info NAME [--json]"},
        {{"info", "/.."},
         "rlctl: info: invalid segment name '/..': expected \"/\" then 1..200 of "
         "[A-Za-z0-9._-]",
         "usage: rlctl info NAME [--json]"},
        {{"create", N, "--policy", "bogus", "--capacity", "10"},
         "rlctl: create: --policy: invalid value 'bogus': expected ALGO:N/WINDOW, e.g. "
         "token_bucket:100/1m or gcra:10/1s",
         NULL},
        {{"create", N, "--policy", "5/1h"}, "rlctl: create: --capacity is required", NULL},
        {{"create", N, "--capacity", "10"}, "rlctl: create: --policy is required", NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "0"},
         "rlctl: create: --capacity: invalid value '0': expected a number of keys, "
         "1..4294967296",
         NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "10", "--mode", "0999"},
         "rlctl: create: --mode: invalid value '0999': expected octal permission bits, e.g. "
         "0600 or 0660",
         NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "10", "--key-display", "256"},
         "rlctl: create: --key-display: invalid value '256': expected a number of bytes, 0..255",
         NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "10", "--on-full", "maybe"},
         "rlctl: create: --on-full: invalid value 'maybe': expected allow or deny", NULL},
        {{"list", N, "--top", "0"},
         "rlctl: list: --top: invalid value '0': expected a positive number of keys",
         "usage: rlctl list NAME [--sort denied|allowed|recent] [--top N] [--json]"},
        {{"list", N, "--sort", "size"},
         "rlctl: list: --sort: invalid value 'size': expected denied, allowed or recent",
         "usage: rlctl list NAME [--sort denied|allowed|recent] [--top N] [--json]"},
        {{"get", N, "--sort", "denied", "k"},
         "rlctl: get: --sort is not an option of this command",
         "usage: rlctl get NAME [--hex] KEY [--cost N] [--json]"},
        {{"get", N, "--hex", "abc"},
         "rlctl: get: KEY: invalid value 'abc': expected an even number of hex digits (--hex)",
         "usage: rlctl get NAME [--hex] KEY [--cost N] [--json]"},
        {{"get", N, "--hex", "zz"},
         "rlctl: get: KEY: invalid value 'zz': expected hex digits only (--hex)",
         "usage: rlctl get NAME [--hex] KEY [--cost N] [--json]"},
        {{"get", N, ""}, "rlctl: get: KEY is empty",
         "usage: rlctl get NAME [--hex] KEY [--cost N] [--json]"},
        {{"try", N, "k", "--cost", "0"},
         "rlctl: try: --cost: invalid value '0': expected a number of permits, 1..4294967295",
         "usage: rlctl try NAME [--hex] KEY [--cost N] [--json]"},
        {{"try", N, "k", "--cost", "-1"},
         "rlctl: try: --cost: invalid value '-1': expected a number of permits, 1..4294967295",
         "usage: rlctl try NAME [--hex] KEY [--cost N] [--json]"},
        {{"watch", N, "-i", "0"},
         "rlctl: watch: -i: invalid value '0': expected seconds, 0.001..86400 (e.g. 1 or 0.5)",
         "usage: rlctl watch NAME [-i SECONDS] [-n COUNT] [--json]"},
        {{"watch", N, "-n"}, "rlctl: watch: option '-n' needs a value",
         "usage: rlctl watch NAME [-i SECONDS] [-n COUNT] [--json]"},
        {{"evict", N, "--dry-run=yes"}, "rlctl: evict: unknown option '--dry-run=yes'",
         "usage: rlctl evict NAME [--dry-run] [--json]"},
    };
    const char *create_usage = "usage: rlctl create NAME --policy P --capacity N [--key-display "
                               "B] [--mode M] [--on-full allow|deny] [--json]";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r;
        int st = run_rlctl_argv(&r, cases[i].args);
        char want[600];
        snprintf(want, sizeof want, "%s\n%s\n", cases[i].first_line,
                 cases[i].usage ? cases[i].usage : create_usage);
        ck_assert_msg(st == 64, "case %zu: exit %d", i, st);
        ck_assert_msg(strncmp(r.err, want, strlen(want)) == 0, "case %zu:\nwant: %sgot:  %s", i,
                      want, r.err);
        ck_assert_msg(memchr(r.err, 0x1b, r.err_len) == NULL, "case %zu: raw ESC", i);
        ck_assert_msg(r.out_len == 0, "case %zu: stdout %s", i, r.out);
        run_free(&r);
    }
    ck_assert(!shm_exists(name)); /* no failed create left anything */
    run_result r;
    RUN(&r, 0, "--help");
    ck_assert_msg(strncmp(r.out, "usage: rlctl COMMAND", 20) == 0, "got: %s", r.out);
    run_free(&r);
}
END_TEST

static Suite *rlctl_suite(void)
{
    Suite *s = suite_create("rlctl");
    TCase *tc = tcase_create("commands");
    tcase_add_unchecked_fixture(tc, seg_prefix_init, seg_prefix_cleanup);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, create_then_info_shows_the_policy_capacity_and_zero_counters);
    tcase_add_test(tc, create_of_an_existing_segment_exits_73_and_changes_nothing);
    tcase_add_test(tc, try_allows_exactly_the_permits_then_exits_1_with_the_retry_time);
    tcase_add_test(tc, try_with_a_cost_above_the_permits_exits_64_and_tracks_nothing);
    tcase_add_test(tc, get_shows_the_remaining_permits_and_exits_1_for_an_untracked_key);
    tcase_add_test(tc, reset_forgets_a_key_and_exits_1_when_it_is_not_tracked);
    tcase_add_test(tc, list_json_parses_and_shows_binary_and_escape_sequence_keys_escaped);
    tcase_add_test(tc, list_without_display_bytes_shows_fingerprints);
    tcase_add_test(tc, list_sorts_by_denied_allowed_or_recent_and_cuts_to_top);
    tcase_add_test(tc, evict_dry_run_counts_the_keys_at_rest_then_evict_removes_exactly_them);
    tcase_add_test(tc, check_exits_0_on_a_healthy_segment);
    tcase_add_test(tc, watch_prints_count_samples_with_the_running_totals);
    tcase_add_test(tc, ls_lists_our_segments_with_their_policy_and_use);
    tcase_add_test(tc, destroy_removes_the_segment);
    tcase_add_test(tc, a_missing_segment_exits_66_with_a_message_for_every_command);
    tcase_add_test(tc, a_foreign_file_exits_65_and_is_left_alone);
    tcase_add_test(tc, damaged_segments_exit_65_are_listed_by_ls_and_destroy_removes_them);
    tcase_add_test(tc, a_segment_writable_by_others_exits_77_as_forbidden);
    tcase_add_test(tc, bad_arguments_exit_64_with_the_reason_and_a_usage_line);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(rlctl_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
