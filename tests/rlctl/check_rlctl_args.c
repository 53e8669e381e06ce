/*
 * check_rlctl_args.c - suite "rlctl_args": every bad command line exits 64
 * (EX_USAGE) with one line saying what is wrong, then the usage line of
 * the command (or of all commands), nothing on stdout, nothing created,
 * and operator-typed bytes echoed escaped.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rlctl_assert.h"
#include "srl.h"

struct bad_args {
    const char *args[12];
    const char *first_line; /* NAME in it stands for the segment name */
    const char *usage;      /* the second line */
};

/* issue 37's uri: 30 empty password= options (rlctl once overflowed its
 * buffer hiding them); now refused by the grammar, before any redaction. */
#define PW10 "password=&password=&password=&password=&password=&password=&password=&" \
             "password=&password=&password=&"
#define PW30_URI "redis://127.0.0.1:1?" PW10 PW10 PW10 "db=0"

#define TOP_USAGE "usage: rlctl [--owner USER] [--mode M] COMMAND [ARGS]   (see rlctl(1))"

START_TEST(bad_arguments_exit_64_with_the_reason_and_a_usage_line)
{
    char name[160];
    seg_name(name, sizeof name, "args");
    const char *N = name;
    const struct bad_args cases[] = {
        {{NULL}, "rlctl: no command given", TOP_USAGE},
        {{"frob"}, "rlctl: unknown command 'frob'", TOP_USAGE},
        {{"\x1b[2J"}, "rlctl: unknown command '\\x1b[2J'", TOP_USAGE},
        {{"info"}, "rlctl: info: missing NAME", "usage: rlctl info NAME|URI [--json]"},
        {{"try", N}, "rlctl: try: missing KEY",
         "usage: rlctl try NAME [--hex] KEY [--cost N] [--tier NAME] [--json]"},
        {{"info", N, "extra"}, "rlctl: info: unexpected argument 'extra'",
         "usage: rlctl info NAME|URI [--json]"},
        {{"info", N, "--bogus"}, "rlctl: info: unknown option '--bogus'",
         "usage: rlctl info NAME|URI [--json]"},
        {{"info", "bad/name"},
         "rlctl: info: invalid segment name 'bad/name': expected \"/\" then 1..200 of "
         "[A-Za-z0-9._-]",
         "usage: rlctl info NAME|URI [--json]"},
        {{"info", "/.."},
         "rlctl: info: invalid segment name '/..': expected \"/\" then 1..200 of "
         "[A-Za-z0-9._-]",
         "usage: rlctl info NAME|URI [--json]"},
        {{"create", N, "--policy", "bogus", "--capacity", "10"},
         "rlctl: create: --policy: invalid value 'bogus': unknown algorithm 'bogus' "
         "(algorithms: token_bucket sliding_log sliding_counter gcra concurrency fixed_window)",
         NULL},
        {{"create", N, "--policy", "tokenbucket:10/1s", "--capacity", "10"},
         "rlctl: create: --policy: invalid value 'tokenbucket:10/1s': unknown algorithm "
         "'tokenbucket' (did you mean token_bucket?)",
         NULL},
        {{"create", N, "--policy", "10/1min", "--capacity", "10"},
         "rlctl: create: --policy: invalid value '10/1min': unknown unit 'min' "
         "(write 1m; units: ns us ms s m h d)",
         NULL},
        {{"create", N, "--policy", "5/1h"}, "rlctl: create: --capacity is required", NULL},
        {{"create", N, "--capacity", "10"}, "rlctl: create: --policy is required", NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "0"},
         "rlctl: create: --capacity: invalid value '0': expected a number of keys, "
         "1..4294967296 (suffix k, M or G: 1000s)",
         NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "10", "--mode", "0999"},
         "rlctl: create: --mode: invalid value '0999': expected octal permission bits, e.g. "
         "0600 or 0660",
         NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "10", "--key-display", "256"},
         "rlctl: create: --key-display: invalid value '256': expected a number of bytes, 0..255",
         NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "10", "--on-full", "maybe"},
         "rlctl: create: --on-full: invalid value 'maybe': expected allow, deny or evict", NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "10", "--tier", "paid"},
         "rlctl: create: --tier: invalid value 'paid': expected NAME=POLICY, NAME 1..31 of "
         "[A-Za-z0-9_-]", NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "10", "--tier", "default=5/1s"},
         "rlctl: create: --tier: invalid value 'default=5/1s': tier name must be 1..31 of "
         "[A-Za-z0-9_-], not 'default' (that is the policy)", NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "10", "--tier", "paid=5/1s", "--tier",
          "paid=6/1s"},
         "rlctl: create: --tier: invalid value 'paid=6/1s': tier 'paid' is given twice", NULL},
        {{"create", N, "--policy", "5/1h", "--capacity", "10", "--tier", "paid=tokenbucket:5/1s"},
         "rlctl: create: --tier: invalid value 'paid=tokenbucket:5/1s': unknown algorithm "
         "'tokenbucket' (did you mean token_bucket?)", NULL},
        {{"list", N, "--top", "0"},
         "rlctl: list: --top: invalid value '0': expected a positive number of keys",
         "usage: rlctl list NAME|URI [--sort denied|allowed|recent] [--top N | --all-keys] [--exempt] [--banned] [--json]"},
        {{"list", N, "--sort", "size"},
         "rlctl: list: --sort: invalid value 'size': expected denied, allowed or recent",
         "usage: rlctl list NAME|URI [--sort denied|allowed|recent] [--top N | --all-keys] [--exempt] [--banned] [--json]"},
        {{"get", N, "--sort", "denied", "k"},
         "rlctl: get: --sort is not an option of this command",
         "usage: rlctl get NAME|URI [--hex] KEY [--cost N] [--tier NAME] [--json]"},
        {{"get", N, "--hex", "abc"},
         "rlctl: get: KEY: invalid value 'abc': expected an even number of hex digits (--hex)",
         "usage: rlctl get NAME|URI [--hex] KEY [--cost N] [--tier NAME] [--json]"},
        {{"get", N, "--hex", "zz"},
         "rlctl: get: KEY: invalid value 'zz': expected hex digits only (--hex)",
         "usage: rlctl get NAME|URI [--hex] KEY [--cost N] [--tier NAME] [--json]"},
        {{"get", N, ""}, "rlctl: get: KEY is empty",
         "usage: rlctl get NAME|URI [--hex] KEY [--cost N] [--tier NAME] [--json]"},
        {{"try", N, "k", "--cost", "0"},
         "rlctl: try: --cost: invalid value '0': expected a number of permits, 1..4294967295",
         "usage: rlctl try NAME [--hex] KEY [--cost N] [--tier NAME] [--json]"},
        {{"try", N, "k", "--cost", "-1"},
         "rlctl: try: --cost: invalid value '-1': expected a number of permits, 1..4294967295",
         "usage: rlctl try NAME [--hex] KEY [--cost N] [--tier NAME] [--json]"},
        {{"watch", N, "-i", "0"},
         "rlctl: watch: -i: invalid value '0': expected seconds, 0.001..86400 (e.g. 1 or 0.5)",
         "usage: rlctl watch NAME [-i SECONDS] [-n COUNT] [--json]"},
        {{"watch", N, "-n"}, "rlctl: watch: option '-n' needs a value",
         "usage: rlctl watch NAME [-i SECONDS] [-n COUNT] [--json]"},
        {{"info", PW30_URI},
         "rlctl: info: redis uri: option 'password' repeated at offset 30 (give each option "
         "once)",
         "usage: rlctl info NAME|URI [--json]"},
        {{"metrics", N, "redis://h:1"},
         "rlctl: metrics: a Redis uri names a store for info, get, reset and list only; metrics "
         "takes segment names (a Redis store's counters: rlctl info URI)",
         "usage: rlctl metrics [NAME...] [--all] [--output FILE]"},
        {{"try", "unix:///run/redis.sock", "k"},
         "rlctl: try: a Redis uri names a store for info, get, reset and list only; try takes a "
         "segment name",
         "usage: rlctl try NAME [--hex] KEY [--cost N] [--tier NAME] [--json]"},
        {{"evict", N, "--dry-run=yes"}, "rlctl: evict: unknown option '--dry-run=yes'",
         "usage: rlctl evict NAME [--dry-run] [--json]"},
    };
    const char *create_usage = "usage: rlctl create NAME --policy P --capacity N [--tier "
                               "NAME=P]... [--key-display B] [--mode M] [--on-full allow|deny|evict] "
                               "[--force] [--json]";
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
    ck_assert_msg(strncmp(r.out, "usage: rlctl [--owner USER] [--mode M] COMMAND", 46) == 0,
                  "got: %s", r.out);
    run_free(&r);
}
END_TEST

START_TEST(help_for_one_command_and_did_you_mean)
{
    const char *list_usage =
        "usage: rlctl list NAME|URI [--sort denied|allowed|recent] [--top N | --all-keys] [--exempt] [--banned] [--json]\n\n"
        "The tracked keys with their counts and state;";
    const char *const forms[][4] = {{"help", "list"}, {"--help", "list"}, {"list", "--help"},
                                    {"-h", "list"}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        run_result r;
        RUN(&r, 0, forms[i][0], forms[i][1]);
        ck_assert_msg(strncmp(r.out, list_usage, strlen(list_usage)) == 0, "%s %s: %s",
                      forms[i][0], forms[i][1], r.out);
        ck_assert_msg(strstr(r.out, "See rlctl(1)") != NULL, "%s", r.out);
        run_free(&r);
    }
    run_result r;
    RUN(&r, 64, "lst", "/x");
    ck_assert_msg(strncmp(r.err, "rlctl: unknown command 'lst' (did you mean 'ls' or 'list'?)\n",
                          60) == 0, "%s", r.err);
    run_free(&r);
    RUN(&r, 64, "help", "metrcs");
    ck_assert_msg(strncmp(r.err, "rlctl: unknown command 'metrcs' (did you mean 'metrics'?)\n",
                          58) == 0, "%s", r.err);
    run_free(&r);
    RUN(&r, 64, "--help", "frob");
    ck_assert_msg(strncmp(r.err, "rlctl: unknown command 'frob'\n", 30) == 0, "%s", r.err);
    run_free(&r);
}
END_TEST

/* --version: "rlctl (srl) X.Y.Z", srl.h's version, which is meson's
 * project version (the library's soname version and the packages'). */
START_TEST(version_names_the_srl_release)
{
    char want[64];
    snprintf(want, sizeof want, "rlctl (srl) %d.%d.%d\n", SRL_VERSION_MAJOR, SRL_VERSION_MINOR,
             SRL_VERSION_PATCH);
    const char *pv = getenv("SRL_PROJECT_VERSION");
    ck_assert_ptr_nonnull(pv);
    char mv[64];
    snprintf(mv, sizeof mv, "rlctl (srl) %s\n", pv);
    ck_assert_str_eq(want, mv);
    run_result r;
    RUN(&r, 0, "--version");
    ck_assert_str_eq(r.out, want);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
}
END_TEST

START_TEST(capacity_takes_k_m_g_suffixes)
{
    char name[160];
    seg_name(name, sizeof name, "cap10k");
    run_result r;
    RUN(&r, 0, "create", name, "--policy", "5/1s", "--capacity", "10k", "--json");
    json_value *v = parse_out(&r);
    ck_assert_uint_ge(json_get_u64(v, "capacity"), 10000);
    ck_assert_uint_lt(json_get_u64(v, "capacity"), 10016);
    json_free(v);
    run_free(&r);
    seg_destroy(name);
    const char *bad[] = {"k", "1.5k", "5G", "10kk", "-1k"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        RUN(&r, 64, "create", name, "--policy", "5/1s", "--capacity", bad[i]);
        ck_assert_msg(strstr(r.err, "(suffix k, M or G: 1000s)") != NULL, "%s", r.err);
        run_free(&r);
    }
    ck_assert(!shm_exists(name));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlctl_args");
    TCase *tc = tcase_create("args");
    tcase_add_unchecked_fixture(tc, seg_prefix_init, seg_prefix_cleanup);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bad_arguments_exit_64_with_the_reason_and_a_usage_line);
    tcase_add_test(tc, help_for_one_command_and_did_you_mean);
    tcase_add_test(tc, version_names_the_srl_release);
    tcase_add_test(tc, capacity_takes_k_m_g_suffixes);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
