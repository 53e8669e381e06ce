/* raw_fork.c - a fixture, never compiled: the fork the lint test
 * forks_only_through_test_fork must refuse (the child writes to Check's
 * channel in its ck_assert_int_ge).  tests/meson.build runs the lint on it
 * as forks_rule_catches_raw_fork, which must fail. */
#include <check.h>
#include <unistd.h>

void raw_fork_fixture(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(0);
}
