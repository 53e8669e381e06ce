#!/usr/bin/env bash
# check_run_all_count.sh - tests/run_counts.sh (the counting of run-all.sh)
# on made-up logs: a meson testlog.json with every result meson writes, and
# tests/fuzz/run.sh outputs; each count, the closing line and its status.
set -u
. "$(dirname "$0")/run_counts.sh"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
want() { # want WHAT GOT EXPECTED
  if [ "$2" != "$3" ]; then echo "FAIL $1: got '$2', want '$3'"; status=1; else echo "ok $1: $2"; fi
}
for r in OK OK SKIP FAIL EXPECTEDFAIL TIMEOUT UNEXPECTEDPASS ERROR; do
  printf '{"name": "t", "result": "%s", "returncode": 0}\n' "$r"
done >"$tmp/testlog.json"
want "testlog with every result" "$(testlog_count "$tmp/testlog.json")" "3 4 1"
printf '{"name": "deb", "result": "SKIP", "returncode": 77}\n{"name": "a", "result": "OK"}\n' \
  >"$tmp/skip.json"
want "testlog with a skip" "$(testlog_count "$tmp/skip.json")" "1 0 1"
want "no testlog" "$(testlog_count "$tmp/missing.json" 2>/dev/null)" "0 1 0"

printf 'fuzz policy: pass (9 runs in 1s)\nfuzz segment: fail (log: x)\nfuzz rlctl_args: pass (3 runs in 1s)\nfuzz: 2 passed, 1 failed\n' \
  >"$tmp/fuzz.log"
want "fuzz run with a failure" "$(fuzz_count "$tmp/fuzz.log" 1)" "2 1 0"
echo 'fuzz: no clang with the libFuzzer runtime' >"$tmp/noclang.log"
want "fuzz without clang" "$(fuzz_count "$tmp/noclang.log" 77)" "0 0 1"
printf 'cc: error\nfuzz: build failed\n' >"$tmp/build.log"
want "fuzz build failed" "$(fuzz_count "$tmp/build.log" 1)" "0 1 0"

line=$(tests_summary 158 0 1); rc=$?
want "skipped alone: line" "$line" "tests: 158 passed, 0 failed, 1 skipped"
want "skipped alone: status" "$rc" 0
line=$(tests_summary 3 4 1); rc=$?
want "a failure: line" "$line" "tests: 3 passed, 4 failed, 1 skipped"
want "a failure: status" "$rc" 1
exit $status
