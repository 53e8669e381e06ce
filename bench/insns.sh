#!/usr/bin/env bash
# insns.sh BUILD_A BUILD_B [N] [SPEC] - instructions per decision of two
# builds, counted by callgrind: load on the machine does not change them, so
# this compares builds where wall-clock A/B runs (bench/ab.sh) drown in noise.
#
#   bench/insns.sh build-main build-branch 200000 "token_bucket:1000000000/1h capacity=65536"
#
# Each build's bench/srl-count runs under callgrind for N and for 3N
# decisions (1000 keys, cost 1, a shared segment); the difference over 2N is
# one decision without start-up.  Prints each build's instructions per
# decision and B / A.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,12p "$0" >&2; exit 2; }
a=$1 b=$2 n=${3:-200000} spec=${4:-token_bucket:1000000000/1h capacity=65536}
command -v valgrind >/dev/null || { echo "insns.sh: valgrind is missing" >&2; exit 2; }
tmp=$(mktemp -d /tmp/srl-insns.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
count() { # BUILD DECISIONS -> instructions
  valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$1/bench/srl-count" "$2" "$spec" \
    >/dev/null 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
  awk '/^summary:/ {print $2}' "$tmp/out"
}
per() { echo $(( ($(count "$1" $((3 * n))) - $(count "$1" "$n")) / (2 * n) )); }
pa=$(per "$a"); pb=$(per "$b")
echo "instructions per decision ($spec, 1000 keys): A $pa ($a), B $pb ($b); B / A $(awk -v a="$pa" -v b="$pb" 'BEGIN {printf "%.3f", b / a}')"
