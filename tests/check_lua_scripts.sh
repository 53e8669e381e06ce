#!/bin/sh
# check_lua_scripts.sh - every Lua script of the Redis store parses as Lua
# 5.1 (the language of Redis's scripting engine), each file alone and each
# decision script as the server receives it: num.lua + prologue.lua + the
# algorithm's + one.lua, and the compound's num.lua + prologue.lua + all four
# + tier.lua + compound.lua, and num.lua + prologue.lua + concurrency.lua
# (src/redis/embed.py joins them the same way).
# Usage: check_lua_scripts.sh LUAC DIR_OR_FILE...   (exit 1 at the first failure)
set -eu
luac=$1
shift
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
n=0
for arg in "$@"; do
  if [ -d "$arg" ]; then
    for f in "$arg"/*.lua; do
      "$luac" -p "$f" || { echo "FAIL: $f does not parse"; exit 1; }
      n=$((n + 1))
    done
    for a in gcra token_bucket sliding_log sliding_counter; do
      cat "$arg/num.lua" "$arg/prologue.lua" "$arg/$a.lua" "$arg/one.lua" >"$tmp"
      "$luac" -p "$tmp" || { echo "FAIL: num.lua + prologue.lua + $a.lua + one.lua does not parse"; exit 1; }
      n=$((n + 1))
    done
    cat "$arg/num.lua" "$arg/prologue.lua" "$arg/concurrency.lua" >"$tmp"
    "$luac" -p "$tmp" || { echo "FAIL: the concurrency script does not parse"; exit 1; }
    n=$((n + 1))
    (cd "$arg" && cat num.lua prologue.lua gcra.lua token_bucket.lua sliding_log.lua \
      sliding_counter.lua tier.lua compound.lua) >"$tmp"
    "$luac" -p "$tmp" || { echo "FAIL: the compound script does not parse"; exit 1; }
    n=$((n + 1))
  else
    "$luac" -p "$arg" || { echo "FAIL: $arg does not parse"; exit 1; }
    n=$((n + 1))
  fi
done
echo "ok: $n scripts parse as Lua 5.1"
