#!/bin/sh
# check_fork_rule.sh DIR_OR_FILE... - fail if a test calls fork() itself
# instead of test_fork() (tests/testutil.h, which says why: a forked child
# must never write to Check's channel, and the usual
# `pid = fork(); ck_assert_int_ge(pid, 0);` does, in the child too).
# testutil.c, where test_fork lives, is the one file allowed to.  Comment
# lines (starting with /*, * or //) are not calls; tests/dev holds
# fixtures, never built into a suite (raw_fork.c is this lint's).
set -u
[ $# -gt 0 ] || { echo "usage: $0 DIR_OR_FILE..." >&2; exit 2; }
hits=$(grep -rnHE --exclude-dir=dev --include='*.c' --include='*.h' '(^|[^_[:alnum:]])fork[[:space:]]*\(' "$@" |
       grep -v '/testutil\.c:' |
       grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/\*|\*|//)')
if [ -n "$hits" ]; then
    echo "$hits"
    echo "fork() called directly: use test_fork() (tests/testutil.h says why)" >&2
    exit 1
fi
echo "every fork in $* goes through test_fork"
