#!/bin/sh
# check_no_mutants.sh LIB... - fail if a library holds a test hook or a
# deliberately broken variant (src/base/testhooks.h: compiled only with
# -DSRL_MUTANTS into the test copy, never into the shipped libsrl).
# nm lists local (static) functions too, unless the library was stripped,
# so a stripped library is refused rather than passed.
set -u
# One symbol per mutant: the hooks, and the static functions only a mutant calls.
MUTANTS='srl__shm_set_test_flags srl__room_set_test_src srl__shm_test_park_built srl__local_set_broken decide_slot_unlocked acquire_get_then_put acquire_unlocked_broken'
status=0
for lib in "$@"; do
    syms=$(nm "$lib" 2>/dev/null | awk '{print $NF}')
    if [ -z "$syms" ]; then
        echo "$lib: nm lists no symbols (stripped?): cannot check" >&2
        status=1
        continue
    fi
    echo "$syms" | grep -qx 'srl__shm_acquire' || { echo "$lib: no srl__shm_acquire: not libsrl?" >&2; status=1; }
    for m in $MUTANTS; do
        if echo "$syms" | grep -qx "$m"; then
            echo "$lib: holds test-only symbol $m (built with SRL_MUTANTS?)"
            status=1
        fi
    done
    [ $status -eq 0 ] && echo "$lib: no test hooks, no mutants"
done
exit $status
