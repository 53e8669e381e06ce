/*
 * check_sentinel_reply.c - the parser of a sentinel's reply to SENTINEL
 * get-master-addr-by-name (src/redis/redis_sentinel.c: srl__sentinel_parse): the
 * replies a sentinel gives, and hostile ones, each with its exact result
 * and sentence (the one srl_last_error shows after "HOST:PORT ").  Pure.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_sentinel.h"
#include "srl.h"

static const struct {
    const char *reply;
    size_t len;          /* 0: strlen(reply) */
    int rc;
    const char *host_or_why;
    int port;
} cases[] = {
    {"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n", 0, 0, "127.0.0.1", 6379},
    {"*2\r\n$3\r\n::1\r\n$5\r\n26380\r\n", 0, 0, "::1", 26380},
    {"*2\r\n$21\r\nredis-1.cache.internal\r\n$1\r\n1\r\n", 0, SRL_ESYS,
     "answered what is not the reply to SENTINEL get-master-addr-by-name (is it a sentinel?)", 0},
    {"*2\r\n$22\r\nredis-1.cache.internal\r\n$5\r\n65535\r\n", 0, 0, "redis-1.cache.internal",
     65535},
    {"*-1\r\n", 0, SRL_ENOENT, "", 0},
    {"-ERR unknown command 'SENTINEL'\r\n", 0, SRL_ESYS,
     "answered 'ERR unknown command 'SENTINEL''", 0},
    {"-NOAUTH Authentication required.\r\n", 0, SRL_ESYS,
     "answered 'NOAUTH Authentication required.'", 0},
    /* incomplete: read more */
    {"", 0, 1, "", 0},
    {"*2\r\n$9\r\n127.0.", 0, 1, "", 0},
    {"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r", 0, 1, "", 0},
    {"-ERR half a line", 0, 1, "", 0},
    /* hostile */
    {"*2\r\n$9\r\n127.0.0.1\r\n$1\r\n0\r\n", 0, SRL_ESYS,
     "named a master port '0' (1..65535 expected)", 0},
    {"*2\r\n$9\r\n127.0.0.1\r\n$5\r\n65536\r\n", 0, SRL_ESYS,
     "named a master port '65536' (1..65535 expected)", 0},
    {"*2\r\n$9\r\n127.0.0.1\r\n$3\r\n-12\r\n", 0, SRL_ESYS,
     "named a master port '-12' (1..65535 expected)", 0},
    {"*2\r\n$9\r\n127.0.0.1\r\n$0\r\n\r\n", 0, SRL_ESYS,
     "named a master port '' (1..65535 expected)", 0},
    {"*2\r\n$0\r\n\r\n$4\r\n6379\r\n", 0, SRL_ESYS,
     "named a master host of 0 bytes (1..255 expected)", 0},
    {"*2\r\n$9\r\n/tmp/sock\r\n$4\r\n6379\r\n", 0, SRL_ESYS,
     "named a master host with a byte 0x2f (an address or a name expected)", 0},
    {"*2\r\n$5\r\nh\0st1\r\n$4\r\n6379\r\n", 25, SRL_ESYS,
     "named a master host with a byte 0x00 (an address or a name expected)", 0},
    {"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n+OK\r\n", 0, SRL_ESYS,
     "sent bytes after its reply (is it a sentinel?)", 0},
    {"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", 0, SRL_ESYS,
     "answered what is not the reply to SENTINEL get-master-addr-by-name (is it a sentinel?)", 0},
    {"+OK\r\n", 0, SRL_ESYS,
     "answered what is not the reply to SENTINEL get-master-addr-by-name (is it a sentinel?)", 0},
    {"*2\r\n:1\r\n:2\r\n", 0, SRL_ESYS,
     "answered what is not the reply to SENTINEL get-master-addr-by-name (is it a sentinel?)", 0},
    {"*2\n$9\n127.0.0.1\n$4\n6379\n", 0, SRL_ESYS,
     "answered what is not the reply to SENTINEL get-master-addr-by-name (is it a sentinel?)", 0},
    {"*2\r\n$9999\r\n", 0, SRL_ESYS,
     "answered what is not the reply to SENTINEL get-master-addr-by-name (is it a sentinel?)", 0},
};

START_TEST(each_reply_gives_its_exact_result)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = cases[i].len ? cases[i].len : strlen(cases[i].reply);
        char host[256] = "", why[200] = "";
        int port = -7;
        int rc = srl__sentinel_parse(cases[i].reply, n, host, &port, why, sizeof why);
        ck_assert_msg(rc == cases[i].rc, "case %zu: rc %d, want %d (%s)", i, rc, cases[i].rc,
                      why);
        if (rc == 0) {
            ck_assert_str_eq(host, cases[i].host_or_why);
            ck_assert_int_eq(port, cases[i].port);
        } else if (rc == SRL_ESYS) {
            ck_assert_msg(strcmp(why, cases[i].host_or_why) == 0, "case %zu: '%s', want '%s'",
                          i, why, cases[i].host_or_why);
            ck_assert_int_eq(port, -7);   /* nothing written on a refusal */
        }
    }
}
END_TEST

/* A reply that never ends is bounded: at SRL__SENTINEL_REPLY_MAX bytes it
 * is refused, never "read more". */
START_TEST(a_reply_that_never_ends_is_refused_at_the_bound)
{
    char buf[SRL__SENTINEL_REPLY_MAX + 8];
    char host[256], why[200];
    int port;
    memset(buf, 'x', sizeof buf);
    buf[0] = '-';
    ck_assert_int_eq(srl__sentinel_parse(buf, SRL__SENTINEL_REPLY_MAX - 1, host, &port, why,
                                         sizeof why), 1);
    ck_assert_int_eq(srl__sentinel_parse(buf, SRL__SENTINEL_REPLY_MAX, host, &port, why,
                                         sizeof why), SRL_ESYS);
    ck_assert_str_eq(why, "error reply longer than 300 bytes");
    /* a host of 255 bytes announced, fewer sent */
    int k = snprintf(buf, sizeof buf, "*2\r\n$255\r\n");
    memset(buf + k, 'h', sizeof buf - (size_t)k);
    ck_assert_int_eq(srl__sentinel_parse(buf, 200, host, &port, why, sizeof why), 1);
    ck_assert_int_eq(srl__sentinel_parse(buf, SRL__SENTINEL_REPLY_MAX, host, &port, why,
                                         sizeof why), SRL_ESYS);
    ck_assert_str_eq(why, "answered what is not the reply to SENTINEL get-master-addr-by-name "
                          "(is it a sentinel?)");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sentinel_reply");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, each_reply_gives_its_exact_result);
    tcase_add_test(tc, a_reply_that_never_ends_is_refused_at_the_bound);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
