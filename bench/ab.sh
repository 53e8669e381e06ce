#!/usr/bin/env bash
# ab.sh: compare two builds on one cell, alternating short runs (srl-cell).
#
#   bench/ab.sh ROUNDS BUILD_A BUILD_B [srl-cell options...]
#   e.g. bench/ab.sh 8 build-main build-branch --store local --policy gcra:1000000000/1h --lockfree
#
# Runs BUILD_A/bench/srl-cell and BUILD_B/bench/srl-cell in turn, ROUNDS times
# each, and prints every time, then each build's median and minimum and the
# ratio of the medians (B / A).  Why alternate: on a shared VM the machine's
# speed drifts by more than most changes between two long runs; runs a
# second apart see the same machine (bench/cell.c).  Every run is pinned to
# one CPU, AB_CPU (default: the last one): a VM's vCPUs may run at different
# speeds (srl-bench's "CPU speeds" line), and an unpinned run would time
# whichever it landed on.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,14p "$0" >&2; exit 2; }
rounds=$1 a=$2 b=$3
shift 3
cpu=${AB_CPU:-$(($(nproc) - 1))}
for build in "$a" "$b"; do
  [ -x "$build/bench/srl-cell" ] || { echo "ab.sh: no $build/bench/srl-cell (meson compile -C $build bench/srl-cell)" >&2; exit 2; }
done
ta=() tb=()
for ((r = 1; r <= rounds; r++)); do
  ta+=("$(taskset -c "$cpu" "$a/bench/srl-cell" "$@" | awk '{print $1}')")
  tb+=("$(taskset -c "$cpu" "$b/bench/srl-cell" "$@" | awk '{print $1}')")
done
stats() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "%.1f %.1f", m, v[1]}'; }
read -r ma mina <<<"$(stats "${ta[@]}")"
read -r mb minb <<<"$(stats "${tb[@]}")"
echo "cell: $* (cpu $cpu)"
echo "A $a: ${ta[*]}"
echo "B $b: ${tb[*]}"
printf 'ns per decision, median (min): A %s (%s), B %s (%s); B / A = %.3f\n' \
  "$ma" "$mina" "$mb" "$minb" "$(awk -v x="$mb" -v y="$ma" 'BEGIN {print x / y}')"
