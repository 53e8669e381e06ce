#!/usr/bin/env bash
# The whole test suite, as CI runs it: four builds of the tree, each with
# -Wall -Wextra -Werror, and every suite that makes sense in each.
#   build-test        plain: every suite (core, shared, local, tools, e2e)
#   build-test-asan   AddressSanitizer + UndefinedBehaviorSanitizer: all but e2e
#                     and install (apache2 and php cannot load an ASan-built
#                     module; a plain cc cannot link an ASan-built libsrl)
#   build-test-tsan   ThreadSanitizer: the in-process store (suite local)
#   build-test-nocas  -DSRL_NO_CAS16: the builds without a 16-byte CAS (every
#                     CPU but x86-64): the tests whose expectations depend on
#                     it (src/base/cas16.h), with the shared lock-free path off and
#                     the local one on its 8-byte fallback
#   build-fuzz        clang libFuzzer targets, 30 s each (tests/fuzz/run.sh),
#                     when clang's fuzzer runtime is installed
# Ends with one line "tests: N passed, N failed, N skipped" over all of them
# (tests/run_counts.sh: a skipped test, exit 77, is skipped, not failed; a
# setup or build that fails is one failure) and exits non-zero exactly when
# it counted a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. tests/run_counts.sh
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 atexit_sleep_ms=0 suppressions=$root/tests/tsan.supp"
passed=0 failed=0 skipped=0

run() { # run NAME MESON_SETUP_ARGS... -- MESON_TEST_ARGS...
  local dir=$1; shift
  local setup=() tests=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do setup+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  tests=("$@")
  echo "=== $dir: meson setup ${setup[*]}"
  if [ ! -d "$dir" ]; then
    meson setup "$dir" "${setup[@]}" >/dev/null || { echo "setup of $dir failed"; failed=$((failed + 1)); return; }
  else
    meson setup --reconfigure "$dir" "${setup[@]}" >/dev/null || { echo "setup of $dir failed"; failed=$((failed + 1)); return; }
  fi
  if ! meson compile -C "$dir" >"$dir/compile.log" 2>&1; then
    tail -40 "$dir/compile.log"; echo "build of $dir failed"; failed=$((failed + 1)); return
  fi
  meson test -C "$dir" --print-errorlogs --num-processes 2 "${tests[@]}"
  local rc=$? p f s
  read -r p f s < <(testlog_count "$dir/meson-logs/testlog.json")
  # meson failed without a failed test in its log (e.g. no test matched)
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then echo "meson test in $dir: exit $rc"; f=1; fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

run build-test -Dwerror=true -- 
# The benchmark is never timed here; a --quick smoke run only proves it runs
# and that no cell failed with an srl error (its exit status).
echo "=== build-test: bench/srl-bench --quick (smoke run, not timed)"
if build-test/bench/srl-bench --quick >build-test/bench-quick.log 2>&1; then
  passed=$((passed + 1))
else
  tail -20 build-test/bench-quick.log; echo "bench smoke run failed"; failed=$((failed + 1))
fi
echo "=== build-test: bench/ab.sh (smoke run of srl-cell and the A/B script, not timed)"
if bench/ab.sh 1 build-test build-test --store local --seconds 0.05 --reps 1 >build-test/ab-smoke.log 2>&1 &&
   grep -q '^ns per decision, median' build-test/ab-smoke.log; then
  passed=$((passed + 1))
else
  tail -20 build-test/ab-smoke.log; echo "ab.sh smoke run failed"; failed=$((failed + 1))
fi
# The sanitized builds run slower: meson's timeouts and Check's own per-case
# timeouts (tcase_set_timeout, scaled by CK_TIMEOUT_MULTIPLIER) both get the
# same margin, so a loaded 2-core machine does not turn slowness into a
# failure.  No assertion depends on a timeout.
CK_TIMEOUT_MULTIPLIER=3 run build-test-asan -Dwerror=true -Db_sanitize=address,undefined \
    -Db_lundef=false -- --no-suite e2e --no-suite install --timeout-multiplier 3
CK_TIMEOUT_MULTIPLIER=4 run build-test-tsan -Dwerror=true -Db_sanitize=thread -Db_lundef=false -- \
    --suite local --timeout-multiplier 4
run build-test-nocas -Dwerror=true -Dc_args=-DSRL_NO_CAS16 -Dapache=disabled -- \
    check_shm_lockfree check_shm_hostile check_limiter python-binding \
    check_local check_local_race check_local_lockfree check_local_homes

# libFuzzer targets (tests/fuzz), 30 s each, one pass/fail per target;
# one skipped when clang's fuzzer runtime is not installed (run.sh exit 77).
echo "=== tests/fuzz/run.sh 30"
mkdir -p build-fuzz
tests/fuzz/run.sh 30 >build-fuzz/run.log 2>&1
frc=$?
cat build-fuzz/run.log
read -r p f s < <(fuzz_count build-fuzz/run.log $frc)
passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))

tests_summary $passed $failed $skipped
