/*
 * check_redis_uri.c - the Redis store's uri grammar (src/redis/redis_uri.c):
 * every accepted form parses to exactly the expected fields, and every
 * rejected one is SRL_EINVAL with a message naming the bad part.  Pure
 * parsing, so it runs in every build (with or without hiredis).
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "redis_uri.h"
#include "srl.h"

static struct srl__redis_uri parse_ok(const char *uri)
{
    struct srl__redis_uri u;
    char why[200] = "";
    int rc = srl__redis_uri_parse(uri, &u, why, sizeof why);
    ck_assert_msg(rc == 0, "%s: %d %s", uri, rc, why);
    ck_assert_int_eq(srl_redis_uri_check(uri, why, sizeof why), 0);
    ck_assert_str_eq(why, "");
    return u;
}

START_TEST(accepted_forms)
{
    struct srl__redis_uri u = parse_ok("redis://127.0.0.1:6380");
    ck_assert_str_eq(u.host, "127.0.0.1");
    ck_assert_int_eq(u.port, 6380);
    ck_assert_str_eq(u.unix_path, "");
    ck_assert_str_eq(u.user, "");
    ck_assert_str_eq(u.password, "");
    ck_assert_int_eq(u.db, 0);
    ck_assert_uint_eq(u.timeout_ms, 0);
    ck_assert_str_eq(u.prefix, "srl");

    u = parse_ok("redis://cache.internal");
    ck_assert_str_eq(u.host, "cache.internal");
    ck_assert_int_eq(u.port, 6379);   /* Redis's port by default */

    u = parse_ok("redis://app:s3cr%40t@10.0.0.5:6379/3?timeout_ms=250&prefix=api%3Av1");
    ck_assert_str_eq(u.user, "app");
    ck_assert_str_eq(u.password, "s3cr@t");
    ck_assert_str_eq(u.host, "10.0.0.5");
    ck_assert_int_eq(u.db, 3);
    ck_assert_uint_eq(u.timeout_ms, 250);
    ck_assert_str_eq(u.prefix, "api:v1");

    u = parse_ok("redis://:a%20b@h?prefix=x%20y");   /* a space is written %20 */
    ck_assert_str_eq(u.password, "a b");
    ck_assert_str_eq(u.prefix, "x y");

    /* ":password@" (no user: the default user); an unencoded '@' or '/'
     * in the password still splits at the last '@'. */
    u = parse_ok("redis://:p@ss/w@h:1/15");
    ck_assert_str_eq(u.user, "");
    ck_assert_str_eq(u.password, "p@ss/w");
    ck_assert_str_eq(u.host, "h");
    ck_assert_int_eq(u.port, 1);
    ck_assert_int_eq(u.db, 15);

    u = parse_ok("redis://[::1]:7000/2");
    ck_assert_str_eq(u.host, "::1");
    ck_assert_int_eq(u.port, 7000);
    ck_assert_int_eq(u.db, 2);
    u = parse_ok("redis://[fe80::1]");
    ck_assert_str_eq(u.host, "fe80::1");
    ck_assert_int_eq(u.port, 6379);

    u = parse_ok("unix:///run/redis/redis.sock?db=4&timeout_ms=50");
    ck_assert_str_eq(u.unix_path, "/run/redis/redis.sock");
    ck_assert_int_eq(u.db, 4);
    ck_assert_uint_eq(u.timeout_ms, 50);
    u = parse_ok("unix://:pw@/tmp/r.sock");
    ck_assert_str_eq(u.password, "pw");
    ck_assert_str_eq(u.unix_path, "/tmp/r.sock");
    u = parse_ok("unix:///tmp/r.sock?user=bob&password=a%26b&prefix=x");
    ck_assert_str_eq(u.user, "bob");
    ck_assert_str_eq(u.password, "a&b");
    ck_assert_str_eq(u.prefix, "x");
    ck_assert_int_eq(u.cluster, 0);

    /* A cluster: seeds joined by ',', credentials once before them. */
    u = parse_ok("redis-cluster://:p@ss@10.0.0.1:7000,[::1]:7001,cache?timeout_ms=30");
    ck_assert_int_eq(u.cluster, 1);
    ck_assert_int_eq(u.nseeds, 3);
    ck_assert_str_eq(u.password, "p@ss");
    ck_assert_str_eq(u.seed[0].host, "10.0.0.1");
    ck_assert_int_eq(u.seed[0].port, 7000);
    ck_assert_str_eq(u.seed[1].host, "::1");
    ck_assert_int_eq(u.seed[1].port, 7001);
    ck_assert_str_eq(u.seed[2].host, "cache");
    ck_assert_int_eq(u.seed[2].port, 6379);
    ck_assert_str_eq(u.host, "10.0.0.1");   /* host, port: the first seed */
    ck_assert_int_eq(u.port, 7000);
    ck_assert_uint_eq(u.timeout_ms, 30);
    u = parse_ok("redis-cluster://h");
    ck_assert_int_eq(u.nseeds, 1);
    ck_assert_int_eq(u.seed[0].port, 6379);
    ck_assert_int_eq(u.sentinel, 0);
    /* Sentinels: joined by ',' (port 26379 unless given), the master's
     * name after the last '/', the credentials and db the master's. */
    u = parse_ok("redis-sentinel://:p%2Fw@10.0.0.1:26380,[::1],s3/my-master.1?timeout_ms=700"
                 "&db=2&prefix=api");
    ck_assert_int_eq(u.sentinel, 1);
    ck_assert_int_eq(u.cluster, 0);
    ck_assert_int_eq(u.nseeds, 3);
    ck_assert_str_eq(u.master, "my-master.1");
    ck_assert_str_eq(u.password, "p/w");
    ck_assert_str_eq(u.user, "");
    ck_assert_str_eq(u.seed[0].host, "10.0.0.1");
    ck_assert_int_eq(u.seed[0].port, 26380);
    ck_assert_str_eq(u.seed[1].host, "::1");
    ck_assert_int_eq(u.seed[1].port, 26379);
    ck_assert_str_eq(u.seed[2].host, "s3");
    ck_assert_int_eq(u.seed[2].port, 26379);
    ck_assert_int_eq(u.db, 2);
    ck_assert_uint_eq(u.timeout_ms, 700);
    ck_assert_str_eq(u.prefix, "api");
    ck_assert_str_eq(u.unix_path, "");
    u = parse_ok("redis-sentinel://app:pw@s1:1/m");
    ck_assert_str_eq(u.user, "app");
    ck_assert_str_eq(u.password, "pw");
    ck_assert_int_eq(u.nseeds, 1);
    ck_assert_int_eq(u.seed[0].port, 1);
    ck_assert_str_eq(u.master, "m");
}
END_TEST

static const struct {
    const char *uri, *why;   /* why: a substring the message must hold */
} bad[] = {
    {"http://h:1", "must start with redis://, unix://, redis-cluster:// or redis-sentinel://"},
    {"", "must start with redis://, unix://, redis-cluster:// or redis-sentinel://"},
    {"redis-sentinel://h:26379", "needs the master's name (redis-sentinel://host:26379,"},
    {"redis-sentinel://h:26379/", "the master's name '' must be 1..127 bytes of [A-Za-z0-9._:-]"},
    {"redis-sentinel://h/my*master", "the master's name 'my*master' must be 1..127 bytes"},
    /* a config line splits at spaces: a raw one would not come back whole */
    {"redis-sentinel://h/my master", "byte 22 is a space or control byte (0x20): %XX-escape "
                                     "it (%20 for a space; a unix path takes none)"},
    {"redis://h?prefix=a +", "byte 19 is a space or control byte (0x20)"},
    {"redis://u:p\tw@h", "byte 12 is a space or control byte (0x09)"},
    {"unix:///r s.sock", "byte 10 is a space or control byte (0x20)"},
    {"redis://h?prefix=a\x7f", "byte 19 is a space or control byte (0x7f)"},
    {"redis-sentinel:///mymaster", "needs at least one sentinel (host:port)"},
    {"redis-sentinel://:pw@/mymaster", "needs at least one sentinel (host:port)"},
    {"redis-sentinel://a:1,/m", "host is missing"},
    {"redis-sentinel://a:1,b:0/m", "port must be 1..65535, not '0'"},
    {"redis-sentinel://pw@a/m", "credentials must be 'user:password@' or ':password@'"},
    {"redis-sentinel://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q/m", "at most 16 sentinels"},
    {"redis-sentinel://a/m?color=red", "unknown option 'color'"},
    {"redis-cluster://", "host is missing"},
    {"redis-cluster://a:1,", "host is missing"},
    {"redis-cluster://a:1,b:99999", "port must be 1..65535, not '99999'"},
    {"redis-cluster://a:1/2", "a cluster has only db 0"},
    {"redis-cluster://a:1?db=3", "a cluster has only db 0"},
    {"redis-cluster://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "at most 16 cluster seeds"},
    {"redis://", "host is missing"},
    {"redis://:6379", "host is missing"},
    {"redis://h:99999", "port must be 1..65535, not '99999'"},
    {"redis://h:0", "port must be 1..65535, not '0'"},
    {"redis://h:", "port must be 1..65535, not ''"},
    {"redis://h:12x", "port must be 1..65535, not '12x'"},
    {"redis://h/x", "'/x' after the host must be a db number"},
    {"redis://h/", "after the host must be a db number"},
    {"redis://pw@h", "credentials must be 'user:password@' or ':password@'"},
    {"redis://u:p%zz@h", "bad password"},
    {"redis://u:p%00@h", "bad password"},
    {"redis://u:@h", "a user needs a password"},
    {"redis://[::1:6379", "'[' of an IPv6 host is not closed"},
    {"redis://[::1]6379", "expected ':port' after ']'"},
    {"redis://h?db=x", "db must be a number 0..1000000, not 'x'"},
    {"redis://h?timeout_ms=0", "timeout_ms must be a number 1..3600000, not '0'"},
    {"redis://h?timeout_ms", "option 'timeout_ms' needs a value"},
    {"redis://h?prefix=", "prefix must be 1..128 bytes"},
    {"redis://h?color=red", "unknown option 'color' (known: db, timeout_ms, prefix"},
    {"unix://", "unix socket path missing"},
    {"unix://tmp/r.sock", "unix:// needs an absolute path"},
};

START_TEST(rejected_forms)
{
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct srl__redis_uri u;
        memset(&u, 0x5a, sizeof u);
        char why[200] = "";
        ck_assert_int_eq(srl__redis_uri_parse(bad[i].uri, &u, why, sizeof why), SRL_EINVAL);
        ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: got '%s', want '%s'", bad[i].uri,
                      why, bad[i].why);
        ck_assert_uint_eq(((unsigned char *)&u)[0], 0x5a);   /* *u untouched */
        ck_assert_int_eq(srl_redis_uri_check(bad[i].uri, NULL, 0), SRL_EINVAL);
    }
    char longp[400];
    memset(longp, 'a', sizeof longp);
    memcpy(longp, "redis://:", 9);
    memcpy(longp + sizeof longp - 4, "@h", 3);
    char why[200];
    ck_assert_int_eq(srl_redis_uri_check(longp, why, sizeof why), SRL_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "bad password"));
    ck_assert_ptr_null(strstr(why, "aaaa"));   /* the password is never echoed */
    ck_assert_int_eq(srl_redis_uri_check(NULL, why, sizeof why), SRL_EINVAL);
    /* A tiny buffer is truncated, still terminated. */
    char small[8];
    ck_assert_int_eq(srl_redis_uri_check("x", small, sizeof small), SRL_EINVAL);
    ck_assert_uint_eq(strlen(small), 7);
}
END_TEST

/* Each option at most once, and user=/password= not beside user:password@:
 * the exact message, naming the option and the offset of its second
 * occurrence (issue 37's uri: 30 empty password= options). */
START_TEST(repeated_options_are_refused_at_their_offset)
{
    static const struct {
        const char *uri, *why;
    } rep[] = {
        {"redis://127.0.0.1:1?password=&password=&password=&db=0",
         "redis uri: option 'password' repeated at offset 30 (give each option once)"},
        {"redis://h?db=1&timeout_ms=5&db=1",
         "redis uri: option 'db' repeated at offset 28 (give each option once)"},
        {"unix:///s?prefix=a&prefix=a",
         "redis uri: option 'prefix' repeated at offset 19 (give each option once)"},
        {"unix:///s?user=a&password=b&user=a",
         "redis uri: option 'user' repeated at offset 28 (give each option once)"},
        {"redis://h?timeout_ms=1&timeout_ms=2",
         "redis uri: option 'timeout_ms' repeated at offset 23 (give each option once)"},
        {"redis://:pw@h?password=pw",
         "redis uri: option 'password' at offset 14 repeats the credentials (give them once: "
         "user:password@ or ?user=&password=)"},
        {"unix://u:pw@/s?user=u",
         "redis uri: option 'user' at offset 15 repeats the credentials (give them once: "
         "user:password@ or ?user=&password=)"},
    };
    for (size_t i = 0; i < sizeof rep / sizeof rep[0]; i++) {
        struct srl__redis_uri u;
        memset(&u, 0x5a, sizeof u);
        char why[200] = "";
        ck_assert_int_eq(srl__redis_uri_parse(rep[i].uri, &u, why, sizeof why), SRL_EINVAL);
        ck_assert_msg(strcmp(why, rep[i].why) == 0, "%s:\ngot  '%s'\nwant '%s'", rep[i].uri, why,
                      rep[i].why);
        ck_assert_uint_eq(((unsigned char *)&u)[0], 0x5a);   /* *u untouched */
    }
    char uri[400];
    size_t n = (size_t)snprintf(uri, sizeof uri, "redis://127.0.0.1:1?");
    for (int i = 0; i < 30; i++)
        n += (size_t)snprintf(uri + n, sizeof uri - n, "password=&");
    snprintf(uri + n, sizeof uri - n, "db=0");
    char why[200];
    ck_assert_int_eq(srl_redis_uri_check(uri, why, sizeof why), SRL_EINVAL);
    ck_assert_str_eq(why, "redis uri: option 'password' repeated at offset 30 (give each option "
                          "once)");
    /* Each once is fine, in any order. */
    parse_ok("unix:///s?password=b&timeout_ms=5&user=a&prefix=p&db=2");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redis_uri");
    TCase *tc = tcase_create("uri");
    tcase_add_test(tc, accepted_forms);
    tcase_add_test(tc, rejected_forms);
    tcase_add_test(tc, repeated_options_are_refused_at_their_offset);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
