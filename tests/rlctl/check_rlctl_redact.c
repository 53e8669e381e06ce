/*
 * check_rlctl_redact.c - suite "rlctl_redact": rlctl_uri_redacted()
 * (tools/rlctl_redis.c) hides every password of a uri, whatever the uri
 * holds, and its result is exactly the uri with each hidden part replaced
 * by "***".  Links tools/rlctl_redis.c alone: the redaction runs on bytes
 * as typed (a caller may redact before, or without, srl_redis_uri_check),
 * so uris the grammar refuses are fed to it too.  Under ASan a buffer sized
 * for fewer hidden parts than the uri has is a heap-buffer-overflow here.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlctl.h"

static void expect(const char *uri, const char *want)
{
    char *got = rlctl_uri_redacted(uri);
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(strcmp(got, want) == 0, "%s:\nwant %s\ngot  %s", uri, want, got);
    free(got);
}

START_TEST(each_password_is_hidden)
{
    expect("redis://h:1", "redis://h:1");
    expect("redis://u:s3cret@h:1/2?db=0", "redis://u:***@h:1/2?db=0");
    expect("redis://:p@ss@h", "redis://:***@h");
    expect("unix://:pw@/tmp/r.sock?prefix=x", "unix://:***@/tmp/r.sock?prefix=x");
    expect("unix:///tmp/r.sock?user=bob&password=a%26b&prefix=x",
           "unix:///tmp/r.sock?user=bob&password=***&prefix=x");
    expect("redis-cluster://:pw@a:1,b:2?password=x", "redis-cluster://:***@a:1,b:2?password=***");
    expect("redis-sentinel://app:p@w@s1:26379,s2/mymaster?db=1",
           "redis-sentinel://app:***@s1:26379,s2/mymaster?db=1");
    /* An empty password grows by 3 bytes: the most a hidden part adds. */
    expect("redis://:@h?password=", "redis://:***@h?password=***");
}
END_TEST

/* The uri of issue 37's N2: 30 empty password= options (each grows by 3
 * bytes), plus an empty userinfo password. */
START_TEST(many_hidden_parts_fit)
{
    char uri[2048], want[2048];
    size_t u = (size_t)snprintf(uri, sizeof uri, "redis://:@127.0.0.1:1?");
    size_t w = (size_t)snprintf(want, sizeof want, "redis://:***@127.0.0.1:1?");
    for (int i = 0; i < 30; i++) {
        u += (size_t)snprintf(uri + u, sizeof uri - u, "password=&");
        w += (size_t)snprintf(want + w, sizeof want - w, "password=***&");
    }
    snprintf(uri + u, sizeof uri - u, "db=0");
    snprintf(want + w, sizeof want - w, "db=0");
    expect(uri, want);
    /* Only options: 90 of them, no userinfo. */
    u = (size_t)snprintf(uri, sizeof uri, "unix:///s?");
    w = (size_t)snprintf(want, sizeof want, "unix:///s?");
    for (int i = 0; i < 90; i++) {
        u += (size_t)snprintf(uri + u, sizeof uri - u, "%spassword=", i ? "&" : "");
        w += (size_t)snprintf(want + w, sizeof want - w, "%spassword=***", i ? "&" : "");
    }
    expect(uri, want);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlctl_redact");
    TCase *tc = tcase_create("redact");
    tcase_add_test(tc, each_password_is_hidden);
    tcase_add_test(tc, many_hidden_parts_fit);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
