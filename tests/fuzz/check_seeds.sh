#!/bin/sh
# check_seeds.sh SHM_H DIR - fail if a committed seed (DIR/*) of the segment
# fuzzer is not of the layout version src/shm/shm.h defines: such a seed is
# refused at the version check, so the fuzzer would mutate inputs that
# never reach the table (layouts 7 and 8 ran on layout-6 seeds until this
# test).  Remake them with make_seed (tests/fuzz/README.md).
set -u
want=$(sed -n 's/^#define SRL__SHM_VERSION \([0-9]*\)u.*/\1/p' "$1")
[ -n "$want" ] || { echo "$1: no SRL__SHM_VERSION" >&2; exit 1; }
dir=$2
set -- "$dir"/*
[ -e "$1" ] || { echo "$dir: no seeds" >&2; exit 1; }
status=0
for seed in "$@"; do
    got=$(od -A n -t u4 -j 8 -N 4 "$seed" | tr -d ' ')
    if [ "$got" != "$want" ]; then
        echo "$seed: layout version $got, this tree's is $want: remake the seeds (tests/fuzz/README.md)" >&2
        status=1
    fi
done
[ "$status" -ne 0 ] || echo "$# seeds, all of layout $want"
exit $status
