/*
 * check_config.c - the configuration text: srl_config_parse, srl_config_set,
 * srl_config_format, srl_config_free, srl_config_redis, srl_binding_word.
 *
 * Good specs give exactly the canonical text (a table); bad specs give
 * SRL_EPOLICY with the exact offset, length and message (a table) and leave
 * the config untouched; an unknown option gets its did-you-mean; every
 * bound is tried at its edge and one past it; parse(format(c)) == c over
 * many configs (field for field, tiers by content); srl_config_set refuses
 * without changing anything; a parsed config opens a limiter.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srl.h"
#include "testutil.h"

static const struct {
    const char *spec;
    const char *canonical;
} good[] = {
    {"token_bucket:100/1m capacity=65536 key_display=32 on_full=deny "
     "tier.paid=token_bucket:10000/1m",
     "token_bucket:100/1m capacity=65536 key_display=32 on_full=deny "
     "tier.paid=token_bucket:10000/1m"},
    {"100/1m", "token_bucket:100/1m capacity=65536"},
    {"policy=100/1m", "token_bucket:100/1m capacity=65536"},
    {"  token_bucket:10/1s,burst=20 + token_bucket:1000/1d  ",
     "token_bucket:10/1s,burst=20 + token_bucket:1000/1d capacity=65536"},
    {"token_bucket:10/1s+token_bucket:1000/1d capacity=1",
     "token_bucket:10/1s + token_bucket:1000/1d capacity=1"},
    {"token_bucket:10/1s,burst=10", "token_bucket:10/1s capacity=65536"},
    {"gcra:5/1s lockfree=yes FLOOD_CACHE=TRUE on_full=DENY mode=0660 owner=1000 "
     "lock_timeout_ms=50 dry_run=1 force=on capacity=64k",
     "gcra:5/1s capacity=64000 mode=0660 on_full=deny lock_timeout_ms=50 owner=1000 "
     "dry_run=on lockfree=on flood_cache=on force=on"},
    {"5/1s capacity=2M", "token_bucket:5/1s capacity=2000000"},
    {"5/1s capacity=4G", "token_bucket:5/1s capacity=4000000000"},
    {"5/1s dry_run=off lockfree=no flood_cache=false force=0 on_full=allow",
     "token_bucket:5/1s capacity=65536"},
    {"5/1s owner=self", "token_bucket:5/1s capacity=65536"},   /* self is the default */
    {"5/1s owner=0", "token_bucket:5/1s capacity=65536 owner=0"},
    {"5/1s tier.b=1/1s tier.a=2/1s", "token_bucket:5/1s capacity=65536 "
     "tier.b=token_bucket:1/1s tier.a=token_bucket:2/1s"},
    {"5/1s tier.paid=gcra:10/1s + 100/1d",
     "token_bucket:5/1s capacity=65536 tier.paid=gcra:10/1s + token_bucket:100/1d"},
    {"token_bucket:100/1m on_full=deny redis=redis://127.0.0.1:6379/0?prefix=api",
     "token_bucket:100/1m capacity=65536 on_full=deny "
     "redis=redis://127.0.0.1:6379/0?prefix=api"},
    {"10/1s + 1000/1d redis=unix:///r.sock", "token_bucket:10/1s + token_bucket:1000/1d "
     "capacity=65536 redis=unix:///r.sock"},   /* compounds run on Redis too */
    {"100/1m redis=redis://h tier.a=5/1s", "token_bucket:100/1m capacity=65536 "
     "tier.a=token_bucket:5/1s redis=redis://h"},   /* and tiers, fronted or not */
    {"concurrency:4,max_hold=30s", "concurrency:4,max_hold=30s capacity=65536"},
    {"concurrency:2 redis=redis://h", "concurrency:2 capacity=65536 redis=redis://h"},
    {"sliding_log:5/15m,penalty=1h\tcapacity=10\n", "sliding_log:5/15m,penalty=1h capacity=10"},
};

static const struct {
    const char *spec;
    uint32_t offset, length;
    const char *message;
} bad[] = {
    {"", 0, 0, "no policy: begin with one, e.g. token_bucket:100/1m"},
    {"capacity=5", 0, 0, "no policy: begin with one, e.g. token_bucket:100/1m"},
    {"100/1m capasity=5", 7, 8, "unknown option 'capasity' (did you mean capacity?)"},
    {"100/1m keydisplay=5", 7, 10, "unknown option 'keydisplay' (did you mean key_display?)"},
    {"100/1m onfull=deny", 7, 6, "unknown option 'onfull' (did you mean on_full?)"},
    {"100/1m lookfree=on", 7, 8, "unknown option 'lookfree' (did you mean lockfree?)"},
    {"100/1m zzz=1", 7, 3,
     "unknown option 'zzz' (not one of srl.h's CONFIGURATION TEXT options, e.g. "
     "capacity=65536)"},
    {"100/1m capacity=0", 16, 1,
     "capacity must be a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"},
    {"100/1m capacity=4294967297", 16, 10,
     "capacity must be a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"},
    {"100/1m capacity=4295M", 16, 5,
     "capacity must be a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"},
    {"100/1m capacity=1.5k", 16, 4,
     "capacity must be a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"},
    {"100/1m capacity=k", 16, 1,
     "capacity must be a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"},
    {"100/1m capacity=", 16, 0,
     "capacity must be a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"},
    {"100/1m capacity=-1", 16, 2,
     "capacity must be a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"},
    {"100/1m key_display=256", 19, 3, "key_display must be a number of bytes, 0..255"},
    {"100/1m key_display=1k", 19, 2, "key_display must be a number of bytes, 0..255"},
    {"100/1m mode=01000", 12, 5, "mode must be octal permission bits, e.g. 0600 or 0660"},
    {"100/1m mode=0999", 12, 4, "mode must be octal permission bits, e.g. 0600 or 0660"},
    {"100/1m on_full=maybe", 15, 5, "on_full must be allow, deny or evict"},
    {"100/1m lock_timeout_ms=4294967296", 23, 10,
     "lock_timeout_ms must be a number of milliseconds, 0..4294967295"},
    {"100/1m owner=4294967295", 13, 10, "owner must be a uid, 0..4294967294, or self"},
    {"100/1m owner=root", 13, 4, "owner must be a uid, 0..4294967294, or self"},
    {"100/1m dry_run=maybe", 15, 5, "dry_run must be on or off (yes/no, true/false, 1/0)"},
    {"100/1m lockfree=", 16, 0, "lockfree must be on or off (yes/no, true/false, 1/0)"},
    {"100/1m foo", 7, 3, "a second policy: join limits with '+', give options as NAME=VALUE"},
    {"100/1m =x", 7, 1, "expected NAME=VALUE, e.g. capacity=65536"},
    {"100/1m policy=5/1s", 7, 11, "policy is given twice"},
    {"100/1m capacity=1 capacity=2", 18, 8, "capacity is given twice"},
    {"tokenbucket:100/1m", 0, 11, "unknown algorithm 'tokenbucket' (did you mean token_bucket?)"},
    {"100/1m tier.x=tokenbucket:5/1s", 14, 11,
     "unknown algorithm 'tokenbucket' (did you mean token_bucket?)"},
    {"100/1m tier.x=5/1s + 6/1min", 24, 3, "unknown unit 'min' (write 1m; units: ns us ms s m h d)"},
    {"100/1m tier.default=5/1s", 12, 7,
     "tier name must be 1..31 of [A-Za-z0-9_-], not 'default' (that is the policy)"},
    {"100/1m tier.=5/1s", 12, 0,
     "tier name must be 1..31 of [A-Za-z0-9_-], not 'default' (that is the policy)"},
    {"100/1m tier.a.b=5/1s", 12, 3,
     "tier name must be 1..31 of [A-Za-z0-9_-], not 'default' (that is the policy)"},
    {"100/1m tier.abcdefghijabcdefghijabcdefghij12=1/1s", 12, 32,
     "tier name must be 1..31 of [A-Za-z0-9_-], not 'default' (that is the policy)"},
    {"100/1m tier.paid=5/1s tier.paid=6/1s", 27, 4, "tier 'paid' is given twice"},
    {"100/1m tier.a=", 14, 0, "empty limit (write ALGO:N/WINDOW on each side of '+')"},
    {"concurrency:4 tier.a=5/1s", 25, 0,
     "a concurrency limit cannot be tiered (no tier of a config with tier.NAME may hold one): "
     "use a segment of its own"},
    {"100/1m redis=http://x", 13, 8,
     "redis uri must start with redis://, unix://, redis-cluster:// or redis-sentinel://"},
    /* srl_redis_uri_check's reason echoes the uri: its non-ASCII bytes become '?' */
    {"5/1s redis=redis://h/0?a\303=1", 11, 16,
     "redis uri: unknown option 'a?' (known: db, timeout_ms, prefix, user, password)"},
    {"5/1s redis=redis://h/0?a\001=1", 11, 16,
     "redis uri: byte 14 is a space or control byte (0x01): %XX-escape it (%20 for a space; "
     "a unix path takes none)"},
    /* found by fuzz_config: a '+' joins words across spaces, so a uri that
     * ended in " +" swallowed the next option when formatted and parsed */
    {"5/1s redis=redis://h?prefix=a + fallback=1/1s", 11, 34,
     "redis uri: byte 19 is a space or control byte (0x20): %XX-escape it (%20 for a space; "
     "a unix path takes none)"},
    {"100/1m redis=redis://h key_display=3", 36, 0,
     "key_display is for a segment; a Redis store (redis=) keeps every key whole"},
    {"100/1m key_display=3 redis=redis://h", 36, 0,
     "key_display is for a segment; a Redis store (redis=) keeps every key whole"},
    {"gcra:1/1s redis=redis://h lockfree=on", 37, 0,
     "lockfree is for a segment; a Redis store (redis=) decides in Redis"},
    {"5/1s + concurrency:2 redis=redis://h", 36, 0,
     "redis= takes a concurrency limit alone, not in a compound: give it a limiter of its "
     "own, or use a segment"},
    {"concurrency:2 redis=redis://h fallback=1/1s", 43, 0,
     "fallback= is for rate limits: a concurrency limit on Redis has no host segment "
     "(on_full decides while Redis is down)"},
    {"token_bucket:5/1s lockfree=on", 29, 0,
     "lockfree=on decides gcra limits only, and 'token_bucket:5/1s' has none in any tier: use "
     "gcra:N/W, or drop lockfree="},
};

static srl_config sentinel(void)
{
    srl_config c;
    memset(&c, 0xa5, sizeof c);
    c.tiers = NULL;
    return c;
}

START_TEST(good_specs_give_their_canonical_text)
{
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        srl_config c;
        srl_policy_error e;
        int rc = srl_config_parse(&c, good[i].spec, &e);
        ck_assert_msg(rc == 0, "%s: %d at %u: %s", good[i].spec, rc, e.offset, e.message);
        ck_assert_str_eq(e.message, "");
        char t[SRL_CONFIG_TEXT_MAX];
        int n = srl_config_format(&c, t, sizeof t);
        ck_assert_int_eq(n, (int)strlen(good[i].canonical));
        ck_assert_str_eq(t, good[i].canonical);
        srl_config_free(&c);
    }
}
END_TEST

START_TEST(bad_specs_name_the_bad_part)
{
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srl_config c = sentinel(), before = c;
        srl_policy_error e;
        int rc = srl_config_parse(&c, bad[i].spec, &e);
        ck_assert_msg(rc == SRL_EPOLICY, "%s: %d", bad[i].spec, rc);
        ck_assert_msg(e.offset == bad[i].offset && e.length == bad[i].length,
                      "%s: at %u+%u, want %u+%u (%s)", bad[i].spec, e.offset, e.length,
                      bad[i].offset, bad[i].length, e.message);
        ck_assert_str_eq(e.message, bad[i].message);
        ck_assert_msg(e.offset + e.length <= strlen(bad[i].spec), "%s", bad[i].spec);
        ck_assert_msg(memcmp(&c, &before, sizeof c) == 0, "%s: cfg changed", bad[i].spec);
    }
}
END_TEST

START_TEST(null_arguments)
{
    srl_config c;
    srl_policy_error e;
    ck_assert_int_eq(srl_config_parse(NULL, "5/1s", &e), SRL_EINVAL);
    ck_assert_int_eq(srl_config_parse(&c, NULL, &e), SRL_EINVAL);
    ck_assert_int_eq(srl_config_parse(&c, "5/1s", NULL), 0);
    srl_config_init(&c);
    ck_assert_int_eq(srl_config_set(&c, NULL, "1", &e), SRL_EINVAL);
    ck_assert_int_eq(srl_config_set(&c, "capacity", NULL, &e), SRL_EINVAL);
    ck_assert_int_eq(srl_config_format(NULL, (char[8]){0}, 8), SRL_EINVAL);
    ck_assert_ptr_null(srl_config_redis(NULL));
    srl_config_free(NULL);
}
END_TEST

/* Every bound at its edge (accepted, read back) and one past it (refused). */
START_TEST(every_bound)
{
#define CAP "expected a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"
    static const struct {
        const char *name, *ok, *over, *expect;
    } b[] = {
        {"capacity", "1", "0", CAP},
        {"capacity", "4294967296", "4294967297", CAP},
        {"capacity", "4294967k", "4294968k", CAP},
        {"key_display", "255", "256", "expected a number of bytes, 0..255"},
        {"key_display", "0", "-0", "expected a number of bytes, 0..255"},
        {"mode", "0777", "01000", "expected octal permission bits, e.g. 0600 or 0660"},
        {"lock_timeout_ms", "4294967295", "4294967296",
         "expected a number of milliseconds, 0..4294967295"},
        {"owner", "4294967294", "4294967295", "expected a uid, 0..4294967294, or self"},
        {"owner", "0", "x", "expected a uid, 0..4294967294, or self"},
    };
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        srl_config c;
        srl_config_init(&c);
        srl_policy_error e;
        ck_assert_msg(srl_config_set(&c, b[i].name, b[i].ok, &e) == 0, "%s=%s: %s", b[i].name,
                      b[i].ok, e.message);
        srl_config before = c;
        ck_assert_msg(srl_config_set(&c, b[i].name, b[i].over, &e) == SRL_EPOLICY, "%s=%s",
                      b[i].name, b[i].over);
        ck_assert(memcmp(&c, &before, sizeof c) == 0);
        ck_assert_uint_eq(e.offset, strlen(b[i].name) + 1);   /* in NAME=VALUE */
        ck_assert_uint_eq(e.length, strlen(b[i].over));
        ck_assert_str_eq(e.message, b[i].expect);
    }
    srl_config c;
    srl_config_init(&c);
    ck_assert_uint_eq(c.owner_uid, SRL_OWNER_SELF);   /* srl.h's default: uid 0 is not trusted */
    ck_assert_int_eq(srl_config_set(&c, "capacity", "4294967296", NULL), 0);
    ck_assert_uint_eq(c.capacity, SRL_CAPACITY_MAX);
    ck_assert_int_eq(srl_config_set(&c, "key_display", "255", NULL), 0);
    ck_assert_uint_eq(c.key_display, SRL_KEY_DISPLAY_MAX);
    ck_assert_int_eq(srl_config_set(&c, "owner", "4294967294", NULL), 0);
    ck_assert_uint_eq(c.owner_uid, SRL_OWNER_SELF - 1);
    ck_assert_int_eq(srl_config_set(&c, "owner", "SELF", NULL), 0);
    ck_assert_uint_eq(c.owner_uid, SRL_OWNER_SELF);

    /* tiers: SRL_TIERS_MAX - 1 besides the policy, names of SRL_TIER_NAME_MAX */
    char name[64], spec[SRL_CONFIG_TEXT_MAX];
    size_t o = (size_t)snprintf(spec, sizeof spec, "5/1s");
    for (uint32_t t = 0; t < SRL_TIERS_MAX - 1; t++)
        o += (size_t)snprintf(spec + o, sizeof spec - o, " tier.t%u=%u/1s", t, t + 1);
    srl_policy_error e;
    ck_assert_int_eq(srl_config_parse(&c, spec, &e), 0);
    ck_assert_uint_eq(c.tier_count, SRL_TIERS_MAX - 1);
    ck_assert_int_eq(srl_config_set(&c, "tier.more", "1/1s", &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "at most 15 tiers besides the policy");
    ck_assert_uint_eq(c.tier_count, SRL_TIERS_MAX - 1);
    srl_config_free(&c);
    snprintf(spec + o, sizeof spec - o, " tier.more=1/1s");
    ck_assert_int_eq(srl_config_parse(&c, spec, &e), SRL_EPOLICY);
    ck_assert_uint_eq(e.offset, o + 6);
    ck_assert_uint_eq(e.length, 4);

    srl_config_init(&c);
    memset(name, 'n', SRL_TIER_NAME_MAX);
    snprintf(name, sizeof name, "tier.%.*s", (int)SRL_TIER_NAME_MAX,
             "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn");
    ck_assert_int_eq(srl_config_set(&c, name, "1/1s", &e), 0);
    ck_assert_uint_eq(strlen(c.tiers[0].name), SRL_TIER_NAME_MAX);
    strcat(name, "n");
    ck_assert_int_eq(srl_config_set(&c, name, "1/1s", &e), SRL_EPOLICY);
    ck_assert_uint_eq(e.length, SRL_TIER_NAME_MAX + 1);
    ck_assert_uint_eq(c.tier_count, 1);
    srl_config_free(&c);
    ck_assert_ptr_null(c.tiers);
    ck_assert_uint_eq(c.tier_count, 0);
}
END_TEST

/* One config, field for field (tiers by content, not by pointer). */
static void assert_same(const srl_config *a, const srl_config *b, const char *what)
{
    srl_config x = *a, y = *b;
    x.tiers = y.tiers = NULL;
    ck_assert_msg(memcmp(&x, &y, sizeof x) == 0, "%s: fields differ", what);
    ck_assert_msg(a->tier_count == b->tier_count, "%s: tier counts differ", what);
    if (a->tier_count > 0)
        ck_assert_msg(memcmp(a->tiers, b->tiers, a->tier_count * sizeof *a->tiers) == 0,
                      "%s: tiers differ", what);
    const char *ua = srl_config_redis(a), *ub = srl_config_redis(b);
    ck_assert_msg((ua == NULL) == (ub == NULL), "%s: uri given on one side", what);
    if (ua != NULL)
        ck_assert_str_eq(ua, ub);
}

/* Many configs built option by option through srl_config_set; each one's
 * text parses back to it. */
START_TEST(format_then_parse_is_the_same_config)
{
    static const char *const policies[] = {"token_bucket:100/1m", "gcra:5/1s,penalty=1m",
                                           "sliding_log:5/15m + token_bucket:1000/1d",
                                           "sliding_counter:7/90s", "token_bucket:9/1s,burst=3"};
    static const char *const values[][2] = {
        {"capacity", "1"}, {"capacity", "1000k"}, {"key_display", "32"}, {"mode", "0640"},
        {"on_full", "deny"}, {"lock_timeout_ms", "0"}, {"owner", "33"}, {"owner", "self"},
        {"dry_run", "on"}, {"lockfree", "on"}, {"flood_cache", "yes"}, {"force", "true"},
        {"tier.paid", "gcra:100/1s"}, {"tier.free", "token_bucket:1/1m + gcra:1/1s"},
    };
    size_t nv = sizeof values / sizeof values[0], made = 0;
    for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++)
        for (uint32_t mask = 0; mask < (1u << nv); mask += 1 + (mask % 7)) {
            srl_config c;
            srl_config_init(&c);
            srl_policy_error e;
            ck_assert_int_eq(srl_config_set(&c, "policy", policies[p], &e), 0);
            for (size_t v = 0; v < nv; v++)
                if (mask & (1u << v))
                    ck_assert_msg(srl_config_set(&c, values[v][0], values[v][1], &e) == 0,
                                  "%s=%s: %s", values[v][0], values[v][1], e.message);
            char t[SRL_CONFIG_TEXT_MAX];
            ck_assert_int_gt(srl_config_format(&c, t, sizeof t), 0);
            srl_config back;
            int rc = srl_config_parse(&back, t, &e);
            /* lockfree without a gcra limit is a spec the parser refuses */
            if (rc != 0) {
                ck_assert_msg(strncmp(e.message, "lockfree=on decides gcra limits only, and '",
                                      43) == 0, "%s", e.message);
                ck_assert(c.flags & SRL_CONFIG_LOCKFREE);
            } else {
                assert_same(&c, &back, t);
                made++;
            }
            srl_config_free(&back);
            srl_config_free(&c);
        }
    ck_assert_uint_gt(made, 500);
    /* and a Redis one */
    srl_config c, back;
    ck_assert_int_eq(srl_config_parse(&c, "gcra:5/1s redis=unix:///run/r.sock?prefix=a "
                                          "on_full=deny", NULL), 0);
    char t[SRL_CONFIG_TEXT_MAX];
    ck_assert_int_gt(srl_config_format(&c, t, sizeof t), 0);
    ck_assert_int_eq(srl_config_parse(&back, t, NULL), 0);
    assert_same(&c, &back, t);
    ck_assert_str_eq(srl_config_redis(&back), "unix:///run/r.sock?prefix=a");
    srl_config_free(&c);
    srl_config_free(&back);
}
END_TEST

START_TEST(format_too_small_is_enobufs)
{
    srl_config c;
    ck_assert_int_eq(srl_config_parse(&c, "5/1s tier.a=1/1s", NULL), 0);
    char t[64];
    int n = srl_config_format(&c, t, sizeof t);
    ck_assert_int_eq(n, (int)strlen("token_bucket:5/1s capacity=65536 tier.a=token_bucket:1/1s"));
    ck_assert_int_eq(srl_config_format(&c, t, (size_t)n), SRL_ENOBUFS);
    ck_assert_int_eq(srl_config_format(&c, t, (size_t)n + 1), n);
    srl_config_free(&c);
}
END_TEST

START_TEST(set_refuses_without_changing_anything)
{
    srl_config c;
    srl_config_init(&c);
    srl_policy_error e;
    ck_assert_int_eq(srl_config_set(&c, "tier.paid", "5/1s", &e), 0);
    ck_assert_int_eq(srl_config_set(&c, "tier.paid", "6/1s", &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "tier 'paid' is given twice");
    ck_assert_uint_eq(c.tier_count, 1);
    ck_assert_uint_eq(c.tiers[0].limits.limit[0].permits, 5);
    /* the redis rules, in both orders, and nothing kept of the refused one */
    ck_assert_int_eq(srl_config_set(&c, "mode", "0640", &e), 0);
    ck_assert_int_eq(srl_config_set(&c, "redis", "redis://127.0.0.1", &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "mode is for a segment; a Redis store (redis=) takes no mode");
    ck_assert_ptr_null(srl_config_redis(&c));
    srl_config_free(&c);
    srl_config_init(&c);
    ck_assert_int_eq(srl_config_set(&c, "redis", "redis://127.0.0.1", &e), 0);
    ck_assert_int_eq(srl_config_set(&c, "Key_Display", "8", &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "key_display is for a segment; a Redis store (redis=) keeps "
                                "every key whole");
    ck_assert_uint_eq(c.key_display, 0);
    ck_assert_int_eq(srl_config_set(&c, "policy", "5/1s + concurrency:3", &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "redis= takes a concurrency limit alone, not in a compound: "
                                "give it a limiter of its own, or use a segment");
    ck_assert_uint_eq(c.policy.algorithm, SRL_TOKEN_BUCKET);
    ck_assert_str_eq(srl_config_redis(&c), "redis://127.0.0.1");
    /* set accepts what a program asks, lockfree on any policy (the opens do) */
    srl_config_free(&c);
    srl_config_init(&c);
    ck_assert_int_eq(srl_config_set(&c, "lockfree", "on", &e), 0);
    ck_assert_uint_eq(c.flags, SRL_CONFIG_LOCKFREE);
    ck_assert_int_eq(srl_config_set(&c, "mde", "on", &e), SRL_EPOLICY);
    ck_assert_str_eq(e.message, "unknown option 'mde' (did you mean mode?)");
    ck_assert_uint_eq(e.offset, 0);
    ck_assert_uint_eq(e.length, 3);
    /* a tier's name is at 5 in "tier.NAME=", its policy past the '=' */
    ck_assert_int_eq(srl_config_set(&c, "tier.default", "1/1s", &e), SRL_EPOLICY);
    ck_assert_uint_eq(e.offset, 5);
    ck_assert_uint_eq(e.length, 7);
    ck_assert_int_eq(srl_config_set(&c, "tier.x", "1/1min", &e), SRL_EPOLICY);
    ck_assert_uint_eq(e.offset, 10);
    ck_assert_uint_eq(e.length, 3);
    ck_assert_int_eq(srl_config_set(&c, "force", "ON", &e), 0);
    ck_assert_uint_eq(c.flags, SRL_CONFIG_LOCKFREE | SRL_CONFIG_FORCE);
    ck_assert_ptr_null(c.tiers);   /* nothing owned: nothing allocated */
}
END_TEST

/* A parsed config opens a limiter with its tiers; freed after the open. */
START_TEST(a_parsed_config_opens)
{
    srl_config c;
    srl_policy_error e;
    ck_assert_int_eq(srl_config_parse(&c, "token_bucket:2/1d capacity=64 tier.paid=token_bucket:"
                                          "3/1d on_full=deny", &e), 0);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&c, &lim), 0);
    srl_config_free(&c);
    srl_decision d;
    int paid = srl_tier_find(lim, "paid");
    ck_assert_int_eq(paid, 1);
    int admitted = 0;
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(srl_acquire_tier(lim, (uint32_t)paid, "k", 1, 1, &d), 0);
        admitted += d.allowed;
    }
    ck_assert_int_eq(admitted, 3);
    srl_info in;
    ck_assert_int_eq(srl_info_get(lim, &in), 0);
    ck_assert_int_eq(in.on_full, SRL_ON_FULL_DENY);
    ck_assert_uint_eq(in.tier_count, 2);
    srl_close(lim);
}
END_TEST

START_TEST(binding_words)
{
    ck_assert_str_eq(srl_binding_word(SRL_BINDING_PHP, "change"),
                     "rlctl set-policy, or open with Srl::CREATE | Srl::CHANGE");
    ck_assert_str_eq(srl_binding_word(SRL_BINDING_PYTHON, "change"),
                     "rlctl set-policy, or open with change=True");
    ck_assert_str_eq(srl_binding_word(SRL_BINDING_C, "change"),
                     "rlctl set-policy, or open with SRL_CHANGE");
    ck_assert_str_eq(srl_binding_word(SRL_BINDING_RLCTL, "policy"), "--policy");
    ck_assert_str_eq(srl_binding_word(SRL_BINDING_APACHE, "tier"), "tier=");
    ck_assert_ptr_null(srl_binding_word(SRL_BINDING_COUNT, "change"));
    ck_assert_ptr_null(srl_binding_word(SRL_BINDING_C, "nothing"));
    /* the mismatch sentence in each binding's words */
    srl_config c;
    ck_assert_int_eq(srl_config_parse(&c, "gcra:100/1m capacity=64", NULL), 0);
    srl_info seg;
    memset(&seg, 0, sizeof seg);
    srl_limits_parse_ex("token_bucket:100/1m", &seg.limits, NULL);
    seg.capacity = 64;
    seg.tier_count = 1;
    char why[1024];
    ck_assert_int_eq(srl_mismatch_explain_for(&c, &seg, SRL_BINDING_PHP, why, sizeof why), 1);
    ck_assert_str_eq(why, "policy: the segment has token_bucket:100/1m, this config asks for "
                          "gcra:100/1m (use the segment's policy, or change it live, keeping "
                          "each key's use: rlctl set-policy, or open with Srl::CREATE | "
                          "Srl::CHANGE; or another segment name, or destroy it: its keys start "
                          "fresh)");
    ck_assert_int_eq(srl_mismatch_explain(&c, &seg, why, sizeof why), 1);
    ck_assert_ptr_nonnull(strstr(why, "open with SRL_CHANGE;"));
    ck_assert_int_eq(srl_mismatch_explain_for(&c, &seg, SRL_BINDING_COUNT, why, sizeof why),
                     SRL_EINVAL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_set_timeout(tc, 60);   /* the round trip of ~800 configs, under ASan on a loaded host */
    tcase_add_test(tc, good_specs_give_their_canonical_text);
    tcase_add_test(tc, bad_specs_name_the_bad_part);
    tcase_add_test(tc, null_arguments);
    tcase_add_test(tc, every_bound);
    tcase_add_test(tc, format_then_parse_is_the_same_config);
    tcase_add_test(tc, format_too_small_is_enobufs);
    tcase_add_test(tc, set_refuses_without_changing_anything);
    tcase_add_test(tc, a_parsed_config_opens);
    tcase_add_test(tc, binding_words);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
