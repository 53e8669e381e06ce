/*
 * check_rlctl_segments.c - suite "rlctl_segments": the built rlctl's
 * commands on whole segments (create, info, ls, check, watch, destroy) and
 * its answers for missing, foreign, damaged, stale and forbidden ones:
 * exact messages and sysexits codes.
 *
 * Two tests reach the store's internals (shm.h) to damage a header or to
 * leave a stale segment behind: states rlctl must report, which the public
 * API cannot produce on purpose.  Segment names share a prefix per test
 * case; the unchecked teardown unlinks whatever a failed test left behind.
 */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <grp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rlctl_assert.h"
#include "shm_testutil.h"
#include "testutil.h"
#include "shm.h" /* internal: to damage headers and leave a stale segment */

/* Run rlctl with the arguments, require exit status `want`, drop the output. */
#define RUN_STATUS(want, ...)                                                          \
    do {                                                                               \
        run_result r_;                                                                 \
        RUN(&r_, (want), __VA_ARGS__);                                                 \
        run_free(&r_);                                                                 \
    } while (0)

/* A plain segment (token_bucket:5/1h, capacity 64, no key display) made by
 * rlctl create at PREFIX-tag; its name in name. */
static void create_plain(char *name, size_t len, const char *tag)
{
    seg_name(name, len, tag);
    seg_create(name, "token_bucket:5/1h", "64", "0");
}

/* got is the text fmt formats to (the exact message of an rlctl run). */
__attribute__((format(printf, 2, 3)))
static void assert_says(const char *got, const char *fmt, ...)
{
    char want[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    ck_assert_int_lt(n, (int)sizeof want);
    ck_assert_str_eq(got, want);
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
    ck_assert_uint_eq(json_get_u64(v, "mode"), 0640); /* a number (schema 2) */
    ck_assert_str_eq(json_get_str(v, "mode_octal"), "0640");
    ck_assert_uint_eq(json_get_u64(v, "schema_version"), 3);
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
    const char *zero[] = {"used", "allowed", "denied", "would_deny", "full", "recovered",
                          "reset_slots", "evicted", "timeouts"};
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
    assert_info_line(r.out, "would deny", "0 (of those denied, allowed by dry-run handles)");
    assert_info_line(r.out, "evicted", "0");
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* The bytes a created segment of this policy and capacity takes. */
static uint64_t created_bytes(const char *name, const char *capacity)
{
    run_result r;
    RUN(&r, 0, "create", name, "--policy", "sliding_log:200/1h", "--capacity", capacity,
        "--key-display", "255", "--json");
    json_value *v = parse_out(&r);
    uint64_t b = json_get_u64(v, "segment_bytes");
    json_free(v);
    run_free(&r);
    seg_destroy(name);
    return b;
}

/* A dry-run handle's would-be denials (SRL_CONFIG_DRY_RUN, mod_srl's
 * SrlDryRun) in info (text and JSON) and in metrics, next to an enforcing
 * handle's real denial on the same segment. */
START_TEST(info_and_metrics_show_the_denials_a_dry_run_handle_allowed)
{
    char name[160];
    seg_name(name, sizeof name, "dry");
    run_result r;
    RUN_STATUS(0, "create", name, "--policy", "token_bucket:5/1h", "--capacity", "16");
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.flags = SRL_CONFIG_DRY_RUN;
    srl_limiter *dry, *enf;
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &enf), 0);
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_ADOPT, &dry), 0);
    srl_decision d;
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(srl_acquire(dry, "k", 1, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
    }
    ck_assert_int_eq(srl_acquire(enf, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    srl_close(dry);
    srl_close(enf);

    RUN(&r, 0, "info", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "allowed"), 5);
    ck_assert_uint_eq(json_get_u64(v, "denied"), 4);
    ck_assert_uint_eq(json_get_u64(v, "would_deny"), 3);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "info", name);
    assert_info_line(r.out, "denied", "4");
    assert_info_line(r.out, "would deny", "3 (of those denied, allowed by dry-run handles)");
    run_free(&r);
    RUN(&r, 0, "metrics", name);
    char want[256];
    snprintf(want, sizeof want, "\nsrl_would_deny_total{segment=\"%s\"} 3\n", name);
    ck_assert_msg(strstr(r.out, want) != NULL, "no '%s' in:\n%s", want + 1, r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\n# TYPE srl_would_deny_total counter\n"));
    run_free(&r);
    RUN_STATUS(0, "destroy", name);
}
END_TEST

/* create --tier makes the table; info counts the keys of each tier and
 * list names each key's tier (keys made by the library in two tiers). */
START_TEST(create_with_tiers_then_info_counts_keys_per_tier_and_list_names_each_keys_tier)
{
    char name[160];
    seg_name(name, sizeof name, "tiers");
    run_result r;
    RUN(&r, 0, "create", name, "--policy", "token_bucket:5/1h", "--capacity", "64",
        "--key-display", "8", "--tier", "paid=token_bucket:50/1h", "--tier",
        "log=sliding_log:4/1h");
    ck_assert_msg(strstr(r.out, "\ntier 0:         default = token_bucket:5/1h\n"
                                "tier 1:         paid = token_bucket:50/1h\n"
                                "tier 2:         log = sliding_log:4/1h\n") != NULL,
                  "create said: %s", r.out);
    run_free(&r);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &lim), 0);
    int paid = srl_tier_find(lim, "paid"), log = srl_tier_find(lim, "log");
    ck_assert_int_eq(paid, 1);
    ck_assert_int_eq(log, 2);
    static const char *keys[] = {"free1", "paid1", "paid2", "paid3", "log1"};
    static const uint32_t tier[] = {0, 1, 1, 1, 2};
    for (int k = 0; k < 5; k++) {
        srl_decision d;
        ck_assert_int_eq(srl_acquire_tier(lim, tier[k], keys[k], strlen(keys[k]), 1, &d), 0);
    }
    srl_close(lim);
    RUN(&r, 0, "info", name);
    assert_info_line(r.out, "tier 0", "default = token_bucket:5/1h (1 key)");
    assert_info_line(r.out, "tier 1", "paid = token_bucket:50/1h (3 keys)");
    assert_info_line(r.out, "tier 2", "log = sliding_log:4/1h (1 key)");
    run_free(&r);
    RUN(&r, 0, "info", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "tier_count"), 3);
    const json_value *tiers = json_get(v, "tiers");
    ck_assert(tiers != NULL && tiers->type == JSON_ARRAY && tiers->n == 3);
    static const uint64_t count[] = {1, 3, 1};
    static const char *names[] = {"default", "paid", "log"};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_uint_eq(json_get_u64(tiers->items[i], "index"), i);
        ck_assert_str_eq(json_get_str(tiers->items[i], "name"), names[i]);
        ck_assert_uint_eq(json_get_u64(tiers->items[i], "keys"), count[i]);
    }
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "list", name, "--json");
    v = parse_out(&r);
    const json_value *ks = json_get(v, "keys");
    ck_assert(ks != NULL && ks->type == JSON_ARRAY && ks->n == 5);
    for (size_t i = 0; i < ks->n; i++) {
        const char *key = json_get_str(ks->items[i], "key");
        const char *tn = json_get_str(ks->items[i], "tier_name");
        uint64_t t = json_get_u64(ks->items[i], "tier");
        ck_assert_msg(key != NULL && tn != NULL, "key %zu", i);
        uint64_t want = key[0] == 'f' ? 0 : key[0] == 'p' ? 1 : 2;
        ck_assert_msg(t == want && strcmp(tn, names[want]) == 0, "%s: tier %llu %s", key,
                      (unsigned long long)t, tn);
    }
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "list", name, "--sort", "allowed");
    ck_assert_msg(strstr(r.out, " TIER\n") != NULL && strstr(r.out, "paid\n") != NULL &&
                      strstr(r.out, "log\n") != NULL && strstr(r.out, "default\n") != NULL,
                  "list said: %s", r.out);
    run_free(&r);
    RUN_STATUS(0, "destroy", name);
}
END_TEST

/* The library's sentence for cfg up to " (capacity": "the segment needs X". */
static void room_need(const char *policy, uint64_t capacity, uint32_t key_display, char *out,
                      size_t len)
{
    srl_config cfg;
    srl_config_init(&cfg);
    srl_policy_error pe;
    ck_assert_int_eq(srl_limits_parse_ex(policy, &cfg.limits, &pe), 0);
    cfg.capacity = capacity;
    cfg.key_display = key_display;
    char msg[512];
    ck_assert_int_lt(srl_room_check(&cfg, msg, sizeof msg), 0);
    char *end = strstr(msg, " (capacity");
    ck_assert_ptr_nonnull(end);
    *end = '\0';
    ck_assert_int_lt(snprintf(out, len, "%s", msg), (int)len);
}

/* rlctl(1): "a full /dev/shm or a lack of memory fails here (exit 73)". */
START_TEST(create_without_room_says_how_many_bytes_it_needs_and_how_many_are_free)
{
    char name[160], need[200], want[1000];
    seg_name(name, sizeof name, "nospace");
    /* A segment is a header plus one equal block per bucket of 16 slots. */
    uint64_t one = created_bytes(name, "1"), two = created_bytes(name, "17");
    uint64_t bytes = one + (4000000000ull / 16 - 1) * (two - one);
    struct statvfs fs;
    ck_assert_int_eq(statvfs("/dev/shm", &fs), 0);
    ck_assert_msg((uint64_t)fs.f_bavail * fs.f_frsize < bytes,
                  "precondition: /dev/shm holds %" PRIu64 " bytes", bytes);
    room_need("sliding_log:200/1h", 4000000000ull, 255, need, sizeof need);
    run_result r;
    RUN(&r, 73, "create", name, "--policy", "sliding_log:200/1h", "--capacity", "4G",
        "--key-display", "255");
    /* rlctl's line for the code, then the library's: the size, the room. */
    snprintf(want, sizeof want,
             "rlctl: %s: no room for the segment in /dev/shm or in the memory the kernel can "
             "give: lower --capacity, or free memory or space in /dev/shm (df /dev/shm, rlctl "
             "ls)\nrlctl: %s: %s (capacity 4000000000 keys); /dev/shm has ",
             name, name, need);
    ck_assert_msg(strncmp(r.err, want, strlen(want)) == 0, "want %s got: %s", want, r.err);
    const char *tail = " free: lower the capacity, or free space in /dev/shm (df /dev/shm, "
                       "rlctl ls)\n";
    ck_assert_msg(strlen(r.err) > strlen(tail) &&
                      strcmp(r.err + strlen(r.err) - strlen(tail), tail) == 0,
                  "got: %s", r.err);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    RUN_STATUS(66, "info", name);
}
END_TEST

/* Issue 39's typo, 400M keys for 400k: refused before anything is
 * reserved, whatever this host's memory (too little: the room; enough:
 * the 1 GiB guard, which only --force passes; never tried here). */
START_TEST(create_of_400m_keys_is_refused_with_its_size_and_makes_nothing)
{
    char name[160], need[200], want[1000];
    seg_name(name, sizeof name, "typo");
    room_need("gcra:1/1s", 400000000ull, 0, need, sizeof need);
    run_result r;
    RUN(&r, 73, "create", name, "--policy", "gcra:1/1s", "--capacity", "400M");
    const char *nl = strchr(r.err, '\n');
    ck_assert_ptr_nonnull(nl);
    snprintf(want, sizeof want, "rlctl: %s: %s (capacity 400000000 keys)", name, need);
    ck_assert_msg(strncmp(nl + 1, want, strlen(want)) == 0, "want %s got: %s", want, r.err);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    RUN_STATUS(66, "info", name);
    /* --force on a size that needs none changes nothing. */
    RUN_STATUS(0, "create", name, "--policy", "gcra:1/1s", "--capacity", "400k", "--force");
    RUN_STATUS(0, "destroy", name);
}
END_TEST

START_TEST(create_of_an_existing_segment_exits_73_and_changes_nothing)
{
    char name[160];
    create_plain(name, sizeof name, "exists");
    run_result r;
    RUN(&r, 73, "create", name, "--policy", "gcra:9/1s", "--capacity", "128");
    assert_says(r.err,
                "rlctl: %s: segment already exists: use it as it is, or remove it first with "
                "'rlctl destroy'\n",
                name);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    RUN(&r, 0, "info", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "policy"), "token_bucket:5/1h");
    json_free(v);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* ------------------------------------------------- check, watch, ls */

START_TEST(check_exits_0_on_a_healthy_segment)
{
    char name[160];
    seg_name(name, sizeof name, "check");
    seg_create(name, "sliding_log:5/1h", "256", "8");
    run_result r;
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i % 7);
        run_rlctl(&r, "try", name, key, (const char *)NULL);
        ck_assert_int_le(r.status, 1);
        run_free(&r);
    }
    RUN(&r, 0, "check", name);
    assert_says(r.out,
                "%s: healthy: every invariant holds\n", name);
    run_free(&r);
    RUN(&r, 0, "check", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "healthy"), 1);
    ck_assert_uint_eq(json_get_u64(v, "problem_count"), 0);
    ck_assert_uint_eq(json_get(v, "problems")->n, 0);
    json_free(v);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

START_TEST(watch_prints_count_samples_with_the_running_totals)
{
    char name[160];
    create_plain(name, sizeof name, "watch");
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
        if (lines == 0) { /* the first row comes at once: totals, no rates yet */
            ck_assert(json_get(v, "allowed_per_s")->type == JSON_NULL);
            ck_assert_uint_eq(json_get_u64(v, "interval_ns"), 0);
        } else {
            ck_assert_str_eq(json_get(v, "allowed_per_s")->text, "0.000");
            ck_assert_uint_gt(json_get_u64(v, "interval_ns"), 0);
        }
        ck_assert_uint_gt(json_get_u64(v, "unix_ns"), 1600000000ull * 1000000000ull);
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
    seg_destroy(name);
}
END_TEST

START_TEST(ls_lists_our_segments_with_their_policy_and_use)
{
    char a[160], b[160];
    seg_name(a, sizeof a, "ls-a");
    seg_name(b, sizeof b, "ls-b");
    seg_create(a, "gcra:10/1s", "128", "0");
    seg_create(b, "sliding_counter:100/1m", "256", "0");
    run_result r;
    RUN_STATUS(0, "try", a, "x");
    RUN(&r, 0, "ls", "--keys", "--json");
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
    RUN(&r, 0, "ls", "--keys");
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
    seg_destroy(a);
    seg_destroy(b);
}
END_TEST

/* The status of name in the JSON listing that rlctl with args (a NULL-ended
 * argv, an `ls ... --json`) prints, exit 0, or NULL if not listed (copied
 * to buf); name listed twice fails the test. */
static const char *listed_status(const char *const *args, const char *name, char *buf,
                                 size_t len)
{
    run_result r;
    ck_assert_int_eq(run_rlctl_argv(&r, args), 0);
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

/* `ls --json` (`ls --all --json` if all) status of name, as listed_status. */
static const char *ls_status(const char *name, int all, char *buf, size_t len)
{
    static const char *const mine[] = {"ls", "--json", NULL};
    static const char *const every[] = {"ls", "--all", "--json", NULL};
    return listed_status(all ? every : mine, name, buf, len);
}

/* ls --keys's STATUS column of name (its second word), copied to buf:
 * the counter warnings need the walk. */
static const char *ls_text_status(const char *name, char *buf, size_t len)
{
    run_result r;
    RUN(&r, 0, "ls", "--keys");
    char row[300];
    snprintf(row, sizeof row, "\n%s ", name);
    const char *line = strstr(r.out, row);
    ck_assert_msg(line != NULL, "no row for %s: %s", name, r.out);
    char n[256], st[64];
    ck_assert_int_eq(sscanf(line + 1, "%255s %63s", n, st), 2);
    snprintf(buf, len, "%s", st);
    run_free(&r);
    return buf;
}

static void try_keys(const char *name, int from, int to)
{
    for (int i = from; i <= to; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        RUN_STATUS(0, "try", name, k);
    }
}

START_TEST(info_and_ls_warn_at_90_percent_load_and_after_untracked_decisions)
{
    char name[160], st[64];
    seg_name(name, sizeof name, "warn");
    /* One bucket of 16 slots; a window of an hour, so no state comes to
     * rest (and is evicted by an insert) while the test runs. */
    seg_create(name, "gcra:10/1h", "16", "0");
    {
        /* Wording: singular where it is one, the same bytes-per-slot words
         * as create, the creator (rlctl create, gone) said to have exited. */
        try_keys(name, 1, 1);
        run_result w;
        RUN(&w, 0, "info", name);
        assert_info_line(w.out, "capacity", "16 slots (1 bucket of 16)");
        assert_info_line(w.out, "used", "1 key");
        ck_assert_msg(strstr(w.out, " (the segment over the 1 key tracked)\n") != NULL, "%s",
                      w.out);
        ck_assert_msg(strstr(w.out, " + its share of the header and bucket locks)\n") != NULL,
                      "%s", w.out);
        ck_assert_msg(strstr(w.out, "\ncreator pid:    ") != NULL &&
                          strstr(w.out, " (exited)\n") != NULL, "%s", w.out);
        run_free(&w);
    }
    try_keys(name, 2, 14); /* 14/16 = 87.5 %: still ok */
    ck_assert_str_eq(ls_text_status(name, st, sizeof st), "ok");
    run_result r;
    RUN(&r, 0, "info", name);
    ck_assert_msg(strstr(r.out, "\nstatus:         ok\n") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "warning:") == NULL, "%s", r.out);
    run_free(&r);

    try_keys(name, 15, 15); /* 15/16 = 93.75 % */
    ck_assert_str_eq(ls_text_status(name, st, sizeof st), "load");
    RUN(&r, 0, "info", name);
    ck_assert_msg(strstr(r.out, "\nstatus:         load\n") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "\nwarning: load: the table is at or above 90 % load") != NULL,
                  "%s", r.out);
    run_free(&r);

    try_keys(name, 16, 18); /* 16 tracked, 2 decided by on_full (allow: exit 0) */
    ck_assert_str_eq(ls_text_status(name, st, sizeof st), "load,untracked");
    RUN(&r, 0, "info", name);
    ck_assert_msg(strstr(r.out, "\nwarning: untracked: decisions were made by on_full") != NULL,
                  "%s", r.out);
    char fix[512];
    snprintf(fix, sizeof fix, "     rlctl destroy %s && rlctl create %s --policy gcra:10/1h "
             "--capacity 32\n", name, name);
    ck_assert_msg(strstr(r.out, fix) != NULL, "no '%s' in %s", fix, r.out);
    run_free(&r);
    RUN(&r, 0, "info", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "status"), "load,untracked");
    ck_assert_uint_eq(json_get_u64(v, "full"), 2);
    json_free(v);
    run_free(&r);
    static const char *const ls_keys[] = {"ls", "--keys", "--json", NULL};
    ck_assert_str_eq(listed_status(ls_keys, name, st, sizeof st), "load,untracked");
    seg_destroy(name);
}
END_TEST

/* ---------------------------------------------------- failures: 66 65 64 */

START_TEST(destroy_removes_the_segment)
{
    char name[160];
    create_plain(name, sizeof name, "destroy");
    ck_assert(shm_exists(name));
    run_result r;
    RUN(&r, 0, "destroy", name);
    assert_says(r.out,
                "destroyed %s (processes that have it open keep using it until they close it)\n",
                name);
    run_free(&r);
    ck_assert(!shm_exists(name));
    RUN_STATUS(66, "info", name);
    RUN_STATUS(66, "destroy", name);
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
    /* With --json the failure is also a JSON object on stdout. */
    run_result r;
    RUN(&r, 66, "info", name, "--json");
    ck_assert_str_eq(r.err, want);
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "schema_version"), 3);
    ck_assert_str_eq(json_get_str(v, "name"), name);
    ck_assert_str_eq(json_get_str(v, "error"), "no such segment");
    ck_assert_str_eq(json_get(v, "code")->text, "-7");
    ck_assert_uint_eq(json_get_u64(v, "exit_status"), 66);
    json_free(v);
    run_free(&r);
    ck_assert(!shm_exists(name));
}
END_TEST

START_TEST(a_foreign_file_exits_65_and_is_left_alone)
{
    char name[160];
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
    assert_says(r.err,
                "rlctl: %s: not an srl segment: it belongs to another program: leave it alone\n",
                name);
    run_free(&r);
    RUN(&r, 65, "list", name, "--json");
    {
        /* --json: the error is a JSON object on stdout, never a listing. */
        json_value *jv = parse_out(&r);
        ck_assert_str_eq(json_get_str(jv, "error"), "not an srl segment");
        ck_assert_uint_eq(json_get_u64(jv, "exit_status"), 65);
        ck_assert(json_get(jv, "keys") == NULL);
        json_free(jv);
    }
    run_free(&r);
    RUN(&r, 65, "destroy", name);
    assert_says(r.err,
                "rlctl: %s: not an srl segment: refusing to remove it (--force removes it "
                "anyway)\n",
                name);
    run_free(&r);
    ck_assert(shm_exists(name));
    RUN(&r, 0, "ls", "--json");
    ck_assert_msg(strstr(r.out, name) == NULL, "ls shows a foreign file: %s", r.out);
    {
        /* ... but says it left something out. */
        json_value *jv = parse_out(&r);
        ck_assert_uint_ge(json_get_u64(jv, "skipped"), 1);
        json_free(jv);
    }
    run_free(&r);
    RUN(&r, 0, "ls");
    ck_assert_msg(strstr(r.out, " not srl segments or not readable; 'rlctl ls --all' lists them "
                                "all)\n") != NULL,
                  "no skipped note: %s", r.out);
    run_free(&r);
    char st[32];
    ck_assert_str_eq(ls_status(name, 1, st, sizeof st), "foreign");    /* listed once */
    /* Unchanged: the same bytes are still there. */
    fd = shm_open(name, O_RDONLY, 0);
    ck_assert_int_ge(fd, 0);
    char back[8192];
    ck_assert_int_eq(read(fd, back, sizeof back), (int)sizeof back);
    close(fd);
    ck_assert(memcmp(back, junk, sizeof junk) == 0);
    RUN_STATUS(0, "destroy", name, "--force");
    ck_assert(!shm_exists(name));
}
END_TEST

/* Group sharing is explicit: a segment created 0660 is refused by every
 * opener that does not accept 0660, rlctl included, and accepted by
 * 'rlctl --mode 0660' (as by a worker whose config says mode 0660). */
START_TEST(a_group_shared_segment_is_opened_with_the_global_mode)
{
    char name[160], want[700], st[32];
    seg_name(name, sizeof name, "group");
    run_result r;
    RUN(&r, 0, "create", name, "--policy", "token_bucket:5/1h", "--capacity", "16", "--mode",
        "0660");
    ck_assert_msg(strstr(r.out, "\nmode 0660: openers must accept it: 'rlctl --mode 0660 ...', "
                                "and the workers' mode option (PHP 'mode' => 0660); others "
                                "refuse it as forbidden\n") != NULL, "%s", r.out);
    run_free(&r);
    RUN(&r, 77, "try", name, "k");
    snprintf(want, sizeof want, "open with mode=0660 (rlctl --mode 0660 ...)\n");
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    run_free(&r);
    RUN(&r, 0, "--mode", "0660", "try", name, "k");
    ck_assert_str_eq(r.out, "k: allowed, remaining 4 of 5\n");
    run_free(&r);
    RUN(&r, 0, "--mode=0660", "info", name);
    assert_info_line(r.out, "mode", "0660");
    run_free(&r);
    RUN_STATUS(77, "--mode", "0640", "info", name); /* no group write accepted */
    ck_assert_str_eq(ls_status(name, 0, st, sizeof st), "forbidden");
    static const char *const ls_0660[] = {"--mode", "0660", "ls", "--json", NULL};
    ck_assert_str_eq(listed_status(ls_0660, name, st, sizeof st), "ok");
    RUN(&r, 64, "--mode", "0999", "info", name);
    ck_assert_str_eq(r.err, "rlctl: --mode: invalid value '0999': expected octal permission "
                            "bits, e.g. 0660 to accept a segment its group may write\n");
    run_free(&r);
    RUN_STATUS(77, "destroy", name);
    RUN_STATUS(0, "--mode", "0660", "destroy", name);
    ck_assert(!shm_exists(name));
}
END_TEST

START_TEST(damaged_segments_exit_65_are_listed_by_ls_and_destroy_removes_them)
{
    char ver[160], cor[160], sta[160], st[32];
    create_plain(ver, sizeof ver, "version");
    create_plain(cor, sizeof cor, "corrupt");
    seg_name(sta, sizeof sta, "stale");
    uint32_t bad_version = SRL__SHM_VERSION + 7, bad_state = 7;
    shm_poke(ver, offsetof(struct srl__shm_header, version), &bad_version, sizeof bad_version);
    shm_poke(cor, offsetof(struct srl__shm_header, state), &bad_state, sizeof bad_state);
    /* Stale: a creator that dies before publishing READY. */
    pid_t pid = test_fork();
    if (pid == 0) {
        srl_config cfg;
        srl_config_init(&cfg);
        cfg.capacity = 64;
        srl_limiter *lim;
        _exit(srl__shm_open_test(sta, &cfg, SRL_CREATE | SRL_EXCL, SRL__SHM_TEST_NO_READY, &lim) == 0
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
        assert_says(r.err, "rlctl: %s: %s: %s\n", cases[i].name, cases[i].what,
                    cases[i].remedy);
        ck_assert_str_eq(r.out, "");
        run_free(&r);
        RUN_STATUS(65, "try", cases[i].name, "k");
        ck_assert_str_eq(ls_status(cases[i].name, 0, st, sizeof st), cases[i].status);
        RUN_STATUS(0, "destroy", cases[i].name);
        ck_assert(!shm_exists(cases[i].name));
    }
}
END_TEST

START_TEST(check_reports_each_problem_and_exits_1)
{
    char name[160];
    seg_name(name, sizeof name, "check-bad");
    seg_create(name, "token_bucket:5/1h", "16", "0"); /* one bucket of 16 slots */
    run_result r;
    RUN_STATUS(0, "try", name, "k");
    /* Find the key's slot in bucket 0 and give it a tag that no longer
     * matches its fingerprint. */
    int fd = shm_open(name, O_RDWR, 0);
    ck_assert_int_ge(fd, 0);
    uint8_t tags[SRL__SHM_SLOTS];
    off_t at = SRL__SHM_HEADER_BYTES + offsetof(struct srl__shm_bucket, tags);
    ck_assert_int_eq(pread(fd, tags, sizeof tags, at), (ssize_t)sizeof tags);
    close(fd);
    int slot = -1;
    for (int i = 0; i < (int)SRL__SHM_SLOTS; i++)
        if (tags[i] != 0) {
            ck_assert_int_eq(slot, -1); /* exactly one key */
            slot = i;
        }
    ck_assert_int_ge(slot, 0);
    uint8_t bad = tags[slot] == 0xff ? 0x01 : (uint8_t)(tags[slot] + 1);
    shm_poke(name, at + slot, &bad, 1);

    RUN(&r, 1, "check", name);
    assert_says(r.out,
                "%s: bucket 0 slot %d: tag %#x does not match its fingerprint\n"
                "%s: 1 problem found\n",
                name, slot, bad, name);
    run_free(&r);
    RUN(&r, 1, "check", name, "--json");
    json_value *v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "healthy"), 0);
    ck_assert_uint_eq(json_get_u64(v, "problem_count"), 1);
    const json_value *p = json_get(v, "problems");
    ck_assert_uint_eq(p->n, 1);
    assert_says(p->items[0]->text, "bucket 0 slot %d: tag %#x does not match its fingerprint",
                slot, bad);
    json_free(v);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

START_TEST(a_segment_writable_by_others_exits_77_as_forbidden)
{
    char name[160], st[32];
    create_plain(name, sizeof name, "forbidden");
    int fd = shm_open(name, O_RDWR, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fchmod(fd, 0602), 0);
    close(fd);
    run_result r;
    RUN(&r, 77, "info", name);
    assert_says(r.err,
                "rlctl: %s: permission denied (segment owner or mode refused): segment %s is "
                "owned by root (uid 0), mode 0602: group or others may write it, which this "
                "opener does not accept (mode 0600): chmod 600 the file if nobody else should, "
                "or if they are trusted open with mode=0602 (rlctl --mode 0602 ...)\n",
                name, name);
    run_free(&r);
    /* Ours, so shown without --all: only we can fix its mode. */
    ck_assert_str_eq(ls_status(name, 0, st, sizeof st), "forbidden");
    ck_assert_str_eq(ls_status(name, 1, st, sizeof st), "forbidden");
    RUN_STATUS(77, "destroy", name);
    ck_assert(shm_exists(name));
    RUN_STATUS(0, "destroy", name, "--force");
    ck_assert(!shm_exists(name));
}
END_TEST

/* A segment cut short (anyone who may write it can ftruncate it) is named
 * as truncated by info and ls, with the sizes and what to do. */
START_TEST(a_truncated_segment_is_named_as_such_by_info_and_ls)
{
    char name[160], st[32], path[200];
    create_plain(name, sizeof name, "cut");
    snprintf(path, sizeof path, "/dev/shm%s", name);
    /* The header's size is the file's as made (table, then layout 9's
     * operator area); cut it past the header pages, into the table. */
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_gt(sb.st_size, SRL__SHM_HEADER_BYTES + 904);
    ck_assert_int_eq(truncate(path, SRL__SHM_HEADER_BYTES + 904), 0);
    run_result r;
    RUN(&r, 65, "info", name);
    assert_says(r.err,
                "rlctl: %s: segment is corrupt (header or table inconsistent): its file is %u "
                "bytes but its header says %u: it was truncated (workers still using it die of "
                "SIGBUS): stop them, 'rlctl destroy %s', and restart them\n",
                name, SRL__SHM_HEADER_BYTES + 904, (unsigned)sb.st_size, name);
    run_free(&r);
    ck_assert_str_eq(ls_status(name, 0, st, sizeof st), "truncated");
    RUN_STATUS(0, "destroy", name, "--force");
}
END_TEST

static int take(srl_limiter *lim, const char *key, int tries)
{
    int n = 0;
    for (int i = 0; i < tries; i++) {
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, key, strlen(key), 1, &d), 0);
        n += d.allowed;
    }
    return n;
}

/* set-policy on a segment in use: the handle a worker opened before sees
 * the new limit at once, each key keeps its use, and what the segment
 * cannot take is refused with the command that makes one that can. */
START_TEST(set_policy_raises_a_running_segments_limit_and_each_key_keeps_its_use)
{
    char name[160];
    seg_name(name, sizeof name, "live");
    run_result r;
    RUN_STATUS(0, "create", name, "--policy", "token_bucket:10/1h", "--capacity", "64", "--tier",
               "paid=token_bucket:20/1h");
    srl_limiter *lim;   /* a worker, opened before any change */
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &lim), 0);
    ck_assert_int_eq(take(lim, "k", 10), 10);
    RUN(&r, 0, "set-policy", name, "token_bucket:20/1h");
    assert_says(r.out,
                "%s: tier 0 (default): token_bucket:10/1h -> token_bucket:20/1h (policy "
                "generation 1); each key keeps its use, converted on its next request\n", name);
    run_free(&r);
    ck_assert_int_eq(take(lim, "k", 50), 10);   /* 10 used of 20: exactly 10 more */
    RUN(&r, 0, "set-policy", name, "paid=token_bucket:30/1h", "--json");
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "tier"), 1);
    ck_assert_str_eq(json_get_str(v, "tier_name"), "paid");
    ck_assert_str_eq(json_get_str(v, "old_policy"), "token_bucket:20/1h");
    ck_assert_str_eq(json_get_str(v, "policy"), "token_bucket:30/1h");
    ck_assert_int_eq(json_get_bool(v, "changed"), 1);
    ck_assert_uint_eq(json_get_u64(v, "policy_gen"), 2);
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "set-policy", name, "paid=token_bucket:30/1h");
    assert_says(r.out,
                "%s: tier 1 (paid) already has token_bucket:30/1h: nothing changed (policy "
                "generation 2)\n", name);
    run_free(&r);
    RUN(&r, 65, "set-policy", name, "sliding_log:100/1h");
    assert_says(r.err,
                "rlctl: %s: set-policy refused (SRL_EMISMATCH): size: the segment's slots "
                "hold 24 bytes of state (made for token_bucket:10/1h), sliding_log:100/1h needs "
                "808: make a bigger segment under another name, e.g. rlctl create NEWNAME "
                "--policy 'sliding_log:100/1h' --capacity 64, move the workers to it and destroy "
                "this one\n",
                name);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    RUN(&r, 64, "set-policy", name, "gold=token_bucket:1/1s");
    assert_says(r.err,
                "rlctl: %s: set-policy refused (SRL_EINVAL): no tier 'gold' in the segment (its "
                "tiers: default, paid)\n", name);
    run_free(&r);
    RUN(&r, 64, "set-policy", name, "tokenbucket:1/1s");
    ck_assert_str_eq(r.err, "rlctl: set-policy: invalid policy 'tokenbucket:1/1s': unknown "
                            "algorithm 'tokenbucket' (did you mean token_bucket?)\n");
    run_free(&r);
    RUN_STATUS(64, "set-policy", name);   /* no policy */
    RUN(&r, 0, "info", name);
    assert_info_line(r.out, "policy", "token_bucket:20/1h");
    assert_info_line(r.out, "tier 1", "paid = token_bucket:30/1h (0 keys)");
    assert_info_line(r.out, "policy gen", "2 (changed live: rlctl set-policy)");
    run_free(&r);
    RUN(&r, 0, "info", name, "--json");
    v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "policy_gen"), 2);
    json_free(v);
    run_free(&r);
    /* The worker's srl_info says so too; a plain opener with the old
     * policy is now refused. */
    srl_info in;
    ck_assert_int_eq(srl_info_get(lim, &in), 0);
    ck_assert_uint_eq(in.policy_gen, 2);
    ck_assert_uint_eq(in.policy.permits, 20);
    srl_close(lim);
    RUN_STATUS(0, "check", name);
    seg_destroy(name);
    RUN_STATUS(66, "set-policy", name, "token_bucket:20/1h");
    /* One tier, key bytes kept: the remedies name what this segment has. */
    RUN_STATUS(0, "create", name, "--policy", "token_bucket:10/1h", "--capacity", "64",
               "--key-display", "16");
    RUN(&r, 64, "set-policy", name, "gold=token_bucket:1/1s");
    assert_says(r.err,
                "rlctl: %s: set-policy refused (SRL_EINVAL): no tier 'gold' in the segment (it "
                "has only tier 0, 'default': its own policy)\n",
                name);
    run_free(&r);
    RUN(&r, 65, "set-policy", name, "sliding_log:100/1h");
    assert_says(r.err,
                "rlctl: %s: set-policy refused (SRL_EMISMATCH): size: the segment's slots "
                "hold 24 bytes of state (made for token_bucket:10/1h), sliding_log:100/1h needs "
                "808: make a bigger segment under another name, e.g. rlctl create NEWNAME "
                "--policy 'sliding_log:100/1h' --capacity 64 --key-display 16, move the workers "
                "to it and destroy this one\n",
                name);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* Run rlctl as uid/gid 65534 (nobody), from a child that dropped root. */
static int run_as_nobody(run_result *r, const char *const *args)
{
    pid_t pid = test_fork();
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
            setresuid(65534, 65534, 65534) != 0)
            _exit(100);
        run_result rr;
        run_rlctl_argv(&rr, args);
        _exit(rr.status);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    r->status = WEXITSTATUS(status);
    return r->status;
}

/* The squatting attack of docs/design.md "Trust": another user creates the
 * name root's tools (or Apache's root parent) will open.  Root refuses it,
 * says whose it is and what to type; with --owner, root's rlctl becomes that
 * user before mapping anything, so the segment can only hurt its owner. */
START_TEST(root_refuses_another_users_segment_and_inspects_it_only_as_that_user)
{
    ck_assert_int_eq(geteuid(), 0);
    char name[160], other[160];
    seg_name(name, sizeof name, "squat");
    const char *create[] = {"create", name, "--policy", "token_bucket:5/1h", "--capacity", "64",
                            NULL};
    run_result r;
    ck_assert_int_eq(run_as_nobody(&r, create), 0);
    struct stat st;
    char path[200];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_uid, 65534);
    static const char *const cmds[] = {"info", "check", "list", "evict"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        RUN(&r, 77, cmds[i], name);
        assert_says(r.err,
                    "rlctl: %s: permission denied (segment owner or mode refused): segment %s "
                    "is owned by nobody (uid 65534), mode 0600; this process runs as root (uid "
                    "0), and srl maps only its caller's own segments or those of the one trusted "
                    "owner: run as nobody (rlctl --owner nobody ...), or trust uid 65534 "
                    "(owner=65534)\n",
                    name, name);
        run_free(&r);
        RUN_STATUS(0, "--owner", "nobody", cmds[i], name);
    }
    RUN_STATUS(0, "--owner=65534", "info", name);
    RUN_STATUS(64, "--owner", "no-such-user-here", "info", name);
    /* ls as root leaves it out, but says whose it is and how to see it;
     * that command lists it with its owner. */
    RUN(&r, 0, "ls");
    ck_assert_msg(strstr(r.out, name) == NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, " of user nobody: 'rlctl --owner nobody ls' shows them") != NULL,
                  "no owner in the skipped note: %s", r.out);
    run_free(&r);
    RUN(&r, 0, "--owner", "nobody", "ls");
    {
        const char *row = strstr(r.out, name);
        ck_assert_msg(row != NULL, "%s", r.out);
        size_t n = strcspn(row, "\n");
        ck_assert_msg(n > 7 && strncmp(row + n - 7, " nobody", 7) == 0, "%s", r.out);
    }
    run_free(&r);
    /* It really ran as nobody: what it creates is nobody's. */
    seg_name(other, sizeof other, "squat2");
    RUN_STATUS(0, "--owner", "nobody", "create", other, "--policy", "5/1h", "--capacity", "16");
    snprintf(path, sizeof path, "/dev/shm%s", other);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_uid, 65534);
    RUN_STATUS(0, "--owner", "nobody", "destroy", other);
    RUN_STATUS(0, "--owner", "nobody", "destroy", name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlctl_segments");
    TCase *tc = tcase_create("segments");
    tcase_add_unchecked_fixture(tc, seg_prefix_init, seg_prefix_cleanup);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, create_then_info_shows_the_policy_capacity_and_zero_counters);
    tcase_add_test(tc, create_with_tiers_then_info_counts_keys_per_tier_and_list_names_each_keys_tier);
    tcase_add_test(tc, set_policy_raises_a_running_segments_limit_and_each_key_keeps_its_use);
    tcase_add_test(tc, create_without_room_says_how_many_bytes_it_needs_and_how_many_are_free);
    tcase_add_test(tc, create_of_400m_keys_is_refused_with_its_size_and_makes_nothing);
    tcase_add_test(tc, info_and_metrics_show_the_denials_a_dry_run_handle_allowed);
    tcase_add_test(tc, create_of_an_existing_segment_exits_73_and_changes_nothing);
    tcase_add_test(tc, check_exits_0_on_a_healthy_segment);
    tcase_add_test(tc, watch_prints_count_samples_with_the_running_totals);
    tcase_add_test(tc, ls_lists_our_segments_with_their_policy_and_use);
    tcase_add_test(tc, info_and_ls_warn_at_90_percent_load_and_after_untracked_decisions);
    tcase_add_test(tc, destroy_removes_the_segment);
    tcase_add_test(tc, a_missing_segment_exits_66_with_a_message_for_every_command);
    tcase_add_test(tc, a_foreign_file_exits_65_and_is_left_alone);
    tcase_add_test(tc, damaged_segments_exit_65_are_listed_by_ls_and_destroy_removes_them);
    tcase_add_test(tc, a_segment_writable_by_others_exits_77_as_forbidden);
    tcase_add_test(tc, a_group_shared_segment_is_opened_with_the_global_mode);
    tcase_add_test(tc, check_reports_each_problem_and_exits_1);
    tcase_add_test(tc, root_refuses_another_users_segment_and_inspects_it_only_as_that_user);
    tcase_add_test(tc, a_truncated_segment_is_named_as_such_by_info_and_ls);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
