#!/usr/bin/env bash
# Build the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined)
# into build-fuzz/ and run each for a bounded time.
#   tests/fuzz/run.sh [SECONDS] [TARGET...]   default 30 s each, all targets
# Targets: policy config segment rlctl_args room policyd_proto policyd_conf keyip sentinel_reply conc_reply (fuzz_<target>.c; seeds in
# corpus/<target>/, new inputs go to build-fuzz/corpus/<target>/ so the
# committed seeds stay small).  Prints one line per target,
# "fuzz <target>: pass|fail", and "fuzz: N passed, N failed" at the end.
# Exit 0 all passed, 1 some failed, 77 no clang fuzzer runtime here.
# Crash inputs are written to build-fuzz/crash-<target>-*.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/build-fuzz
secs=${1:-30}; [ $# -gt 0 ] && shift
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(policy config segment rlctl_args room policyd_proto policyd_conf keyip sentinel_reply conc_reply)
CC=${FUZZ_CC:-$(command -v clang-14 || command -v clang || true)}
mkdir -p "$out"
if [ -z "$CC" ] || ! printf 'int LLVMFuzzerTestOneInput(const char *d, long n){(void)d;(void)n;return 0;}\n' \
     | "$CC" -x c - -fsanitize=fuzzer,address,undefined -o "$out/probe" 2>/dev/null; then
  echo "fuzz: no clang with the libFuzzer runtime (apt-get install clang-14 libclang-rt-14-dev)"
  exit 77
fi
san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -g -O1)
cflags=(-D_GNU_SOURCE -fno-strict-aliasing -Wall -Wextra -Werror -I"$root/include"
        $(for d in "$root"/src/*/; do printf -- '-I%s ' "${d%/}"; done)
        -I"$root/tools" -I"$root/policyd" $(pkg-config --cflags libsodium liburcu-bp liburcu-cds))
# A segment whose mutated header says a creator is still at work makes an
# opener wait the ready bound (src/shm/shm.h): 20 ms here, not 2 s, so such
# inputs do not slow a long run from about a thousand inputs a second to a
# few (the wait and its error are the same code; only the bound is shorter).
cflags+=(-DSRL__SHM_READY_WAIT_MS=20u)
libs=($(pkg-config --libs libsodium liburcu-bp liburcu-cds) -lpthread -lrt)
build() { # build: the library and rlctl objects once, then each target
  local o objs=() tobjs=() pobjs=()
  for f in "$root"/src/*/*.c; do
    # The library as built without hiredis: redis_none.c stands for the
    # store (and its cluster routing, src/meson.build's hiredis-only files).
    # testhooks_shm.c is the test copy's alone (src/meson.build).
    case "$(basename "$f")" in redis_store.c | redis_cluster.c | testhooks_shm.c) continue ;; esac
    o=$out/obj/src-$(basename "$f" .c).o; objs+=("$o")
    [ "$o" -nt "$f" ] || "$CC" "${cflags[@]}" "${san[@]}" -fsanitize=fuzzer-no-link -c "$f" -o "$o" || return 1
  done
  for f in "$root"/tools/rlctl*.c "$root"/tools/metrics_fmt.c; do
    o=$out/obj/tools-$(basename "$f" .c).o; tobjs+=("$o")
    [ "$o" -nt "$f" ] || "$CC" "${cflags[@]}" "${san[@]}" -fsanitize=fuzzer-no-link -Dmain=rlctl_main \
      -c "$f" -o "$o" || return 1
  done
  for f in "$root"/policyd/*.c; do # srl-policyd's parts, not its main()
    [ "$(basename "$f")" = main.c ] && continue
    o=$out/obj/policyd-$(basename "$f" .c).o; pobjs+=("$o")
    [ "$o" -nt "$f" ] || "$CC" "${cflags[@]}" "${san[@]}" -fsanitize=fuzzer-no-link \
      -c "$f" -o "$o" || return 1
  done
  "$CC" "${cflags[@]}" "${san[@]}" "$root/tests/fuzz/make_seed.c" "${objs[@]}" "${libs[@]}" \
    -o "$out/make_seed" || return 1
  for t in "${targets[@]}"; do
    local extra=(); [ "$t" = rlctl_args ] && extra=("${tobjs[@]}")
    case "$t" in policyd_*) extra=("${pobjs[@]}") ;; esac
    "$CC" "${cflags[@]}" "${san[@]}" -fsanitize=fuzzer "$root/tests/fuzz/fuzz_$t.c" "${extra[@]}" \
      "${objs[@]}" "${libs[@]}" -o "$out/fuzz_$t" || return 1
  done
}
# The objects are reused only while they would come out the same: a change
# to the compiler, its flags or any header empties the cache (a source newer
# than its object is rebuilt by build itself).
stamp=$( { "$CC" --version; echo "${cflags[*]} ${san[*]}"
           cat "$root"/include/*.h "$root"/src/*/*.h "$root"/tools/*.h "$root"/policyd/*.h; } | sha256sum | cut -c1-16)
[ "$(cat "$out/obj/stamp" 2>/dev/null)" = "$stamp" ] || rm -rf "$out/obj"
mkdir -p "$out/obj" && echo "$stamp" >"$out/obj/stamp"
if ! build >"$out/build.log" 2>&1; then
  tail -30 "$out/build.log"; echo "fuzz: build failed"; exit 1
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
passed=0 failed=0
for t in "${targets[@]}"; do
  seeds=$root/tests/fuzz/corpus/$t work=$out/corpus/$t
  mkdir -p "$work"
  max=(); [ "$t" = segment ] && max=(-max_len=$(stat -c %s "$seeds"/* | sort -n | tail -1))
  # -timeout: one input taking this long is a hang (a finding).
  if nice -n 10 "$out/fuzz_$t" "${max[@]}" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$out/crash-$t-" "$work" "$seeds" \
       >"$out/fuzz_$t.log" 2>&1; then
    echo "fuzz $t: pass ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/fuzz_$t.log" | grep -o '[0-9]*$') runs in ${secs}s)"
    passed=$((passed + 1))
  else
    # The log stays in build-fuzz/, which CI does not keep: print what a
    # reader needs to reproduce it (the frames in srl's own files, the input).
    echo "fuzz $t: fail (log: build-fuzz/fuzz_$t.log)"
    grep -m5 -E 'ERROR|SUMMARY|Test unit written' "$out/fuzz_$t.log"
    grep -m12 -E '^ +#[0-9]+ .* /(src|tests|tools|policyd)/' "$out/fuzz_$t.log"
    grep -m1 -E '^Base64: ' "$out/fuzz_$t.log"
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
