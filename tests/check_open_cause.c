/*
 * check_open_cause.c - a refused open names its cause, for C callers as for
 * the bindings: another user's 0600 segment opened as nobody (plain and as
 * a tiered store's host segment, Redis down) gives SRL_EACCES, an empty
 * srl_last_error for the tiered open (the host segment's cause is not
 * Redis's) and srl_open_explain's exact sentence; srl_strerror's texts for
 * a timeout and a system error speak of no segment.
 *
 * The opens as nobody run in a test_fork child that drops to uid/gid 65534
 * and reports through a shared_zeroed page (a child never calls Check).
 * The open as nobody needs root (setuid); as another user it is not run.
 */
#include <check.h>
#include <grp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srl.h"
#include "testutil.h"

#define NOBODY 65534

struct report {
    int rc_shared, rc_tiered;
    char detail_tiered[256];
    char why_shared[600], why_tiered[600];
};

/* A loopback port nothing listens on: bound, then closed. */
static int refused_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &n), 0);
    close(s);
    return ntohs(a.sin_port);
}

START_TEST(nobody_opening_roots_0600_segment_is_told_owner_mode_and_fix)
{
    const char *name = unique_name("cause");
    srl_config cfg;
    srl_limiter *lim = NULL;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("token_bucket:5/1d", &cfg.policy), 0);
    cfg.capacity = 64;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    srl_close(lim);
    char uri[96];
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d?prefix=cause", refused_port());

    struct report *r = shared_zeroed(sizeof *r);
    pid_t pid = test_fork();
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
            _exit(2);
        srl_limiter *l = NULL;
        r->rc_shared = srl_open_shared(name, &cfg, SRL_CREATE, &l);
        srl_open_explain(name, &cfg, r->why_shared, sizeof r->why_shared);
        r->rc_tiered = srl_open_tiered(name, uri, &cfg, SRL_CREATE, &l);
        srl_last_error(r->detail_tiered, sizeof r->detail_tiered);
        srl_open_explain(name, &cfg, r->why_tiered, sizeof r->why_tiered);
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    char want[600];
    snprintf(want, sizeof want,
             "segment %s is owned by root (uid 0), mode 0600; this process runs as nobody "
             "(uid 65534), which cannot open it: run as root, or create it owned by the user "
             "that uses it (rlctl --owner USER create ...), or with mode 0660 and a group both "
             "share", name);
    ck_assert_int_eq(r->rc_shared, SRL_EACCES);
    ck_assert_str_eq(r->why_shared, want);
    ck_assert_int_eq(r->rc_tiered, SRL_EACCES);
    /* Redis is down too, but the refusal is the host segment's: no Redis
     * sentence stands in for it */
    ck_assert_str_eq(r->detail_tiered, "");
    ck_assert_str_eq(r->why_tiered, want);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_timeout_and_a_system_error_speak_of_no_segment)
{
    ck_assert_str_eq(srl_strerror(SRL_ETIMEDOUT),
                     "timed out: what it waited for (a lock, a creator, a server) did not "
                     "answer in time");
    ck_assert_str_eq(srl_strerror(SRL_ESYS), "system or network error");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("open_cause");
    TCase *tc = tcase_create("open_cause");
    if (geteuid() == 0)
        tcase_add_test(tc, nobody_opening_roots_0600_segment_is_told_owner_mode_and_fix);
    else
        puts("check_open_cause: not root: the open as nobody is not run");
    tcase_add_test(tc, a_timeout_and_a_system_error_speak_of_no_segment);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
