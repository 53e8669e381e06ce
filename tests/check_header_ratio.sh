#!/bin/sh
# check_header_ratio.sh TOOL HEADER [MAX] - fail if more than MAX % (default
# 50) of HEADER's lines are comment-only (tools/dev/comment-ratio counts
# them).  include/srl.h is the contract, what a caller must know; the why,
# the measurements and the history go to docs/design.md.
set -u
[ $# -ge 2 ] || { echo "usage: check_header_ratio.sh TOOL HEADER [MAX]" >&2; exit 2; }
exec "$1" --max "${3:-50}" "$2"
