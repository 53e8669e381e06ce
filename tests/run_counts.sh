# run_counts.sh - the counting of tests/run-all.sh, sourced by it and by
# tests/check_run_all_count.sh (which feeds it made-up logs).  Bash.
#   testlog_count FILE      "PASSED FAILED SKIPPED" of a meson testlog.json:
#                           OK and EXPECTEDFAIL pass, SKIP (exit 77) is
#                           skipped, every other result (FAIL, TIMEOUT,
#                           UNEXPECTEDPASS, ERROR, ...) fails; a missing or
#                           unreadable log is one failure
#   fuzz_count LOG RC       the same for tests/fuzz/run.sh's output LOG and
#                           exit status RC: a "fuzz T: pass|fail" line per
#                           target; RC 77 (no clang here) is one skipped;
#                           a non-zero RC with no fail line (the build
#                           failed) is one failure
#   tests_summary P F S     print "tests: P passed, F failed, S skipped" (the
#                           line CI reads); status 1 if F > 0, else 0
testlog_count() {
  python3 - "$1" <<'PY' || echo "0 1 0"
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    r = json.loads(line).get("result")
    if r in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif r == "SKIP":
        s += 1
    else:
        f += 1
print(p, f, s)
PY
}

fuzz_count() {
  local log=$1 rc=$2 p f
  if [ "$rc" -eq 77 ]; then echo "0 0 1"; return; fi
  p=$(grep -c '^fuzz [a-z_]*: pass' "$log")
  f=$(grep -c '^fuzz [a-z_]*: fail' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$rc" -eq 0 ] && [ $((p + f)) -eq 0 ]; then f=1; fi   # ran nothing
  echo "$p $f 0"
}

tests_summary() {
  echo "tests: $1 passed, $2 failed, $3 skipped"
  [ "$2" -eq 0 ]
}
