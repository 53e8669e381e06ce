#!/bin/sh
# check_no_mutants.sh [--hooks src/base/testhooks.h] LIB... - fail if a library
# holds a test hook or a deliberately broken variant (tests/mutants: patched
# only into the test copy of the library, never into the shipped libsrl).
# A test-only symbol is any of:
#   - a function src/base/testhooks.h declares (--hooks): every hook the suites
#     call, the Redis store's too;
#   - a static function only a patch adds (STATIC below);
#   - any srl__ name with test, broken or mutant in it.
# nm lists local (static) functions too, unless the library was stripped,
# so a stripped library is refused rather than passed.
set -u
hooks=
if [ "${1:-}" = --hooks ]; then
    hooks=$2
    shift 2
    [ -r "$hooks" ] || { echo "check_no_mutants.sh: cannot read $hooks" >&2; exit 2; }
fi
[ $# -ge 1 ] || { echo "usage: check_no_mutants.sh [--hooks testhooks.h] LIB..." >&2; exit 2; }
STATIC='decide_slot_unlocked acquire_get_then_put acquire_unlocked_broken'
declared=
[ -n "$hooks" ] && declared=$(grep -o 'srl__[a-z0-9_]*(' "$hooks" | tr -d '(' | sort -u)
status=0
for lib in "$@"; do
    syms=$(nm "$lib" 2>/dev/null | awk '{print $NF}')
    if [ -z "$syms" ]; then
        echo "$lib: nm lists no symbols (stripped?): cannot check" >&2
        status=1
        continue
    fi
    bad=0
    echo "$syms" | grep -qx 'srl__shm_acquire' || { echo "$lib: no srl__shm_acquire: not libsrl?" >&2; bad=1; }
    found=$( { for m in $STATIC $declared; do echo "$syms" | grep -x "$m"; done
               echo "$syms" | grep -E '^srl__.*(test|broken|mutant)'; } | sort -u)
    for m in $found; do
        echo "$lib: holds test-only symbol $m (a tests/mutants patch or a hook in the shipped sources?)"
        bad=1
    done
    [ $bad -eq 0 ] && echo "$lib: no test hooks, no mutants"
    [ $bad -eq 0 ] || status=1
done
exit $status
