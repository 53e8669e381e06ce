#!/usr/bin/env bash
# symfony.sh - the Symfony RateLimiter adapter (php/Srl/Symfony) under
# php-fpm: one static pool of 4 workers (lib.sh's fpm_start, ffi.enable=
# preload), Debian's php-symfony-rate-limiter, tests/e2e/symfony_app.php.
# For each policy (token_bucket: 12 at once, then 12 a day; sliding_window
# and fixed_window: 12 a day), 40 requests for one key at once:
#   - exactly 12 accepted across the workers, 28 answered 429, more than one
#     worker answered;
#   - the accepted requests' getRemainingTokens() are 11..0, each once; every
#     429 has remaining 0, Retry-After (from getRetryAfter()) within a second
#     of srl's retry_after, and the expected wait (token_bucket: one token,
#     7200 s; fixed_window: the first request's day; sliding_window: until the
#     next window of srl's, under a day);
#   - every getRetryAfter() is srl's decision instant plus its retry_after
#     (to the microsecond), every getRemainingTokens() srl's remaining;
#   - rlctl info on the segment (/symfony.ID.POLICY): 12 allowed, 28
#     denied, one key; rlctl get on the key: 0 remaining.
# Then the 'exempt' option (fixed_window, 12 a day, exempt 10.0.0.0/8 and
# ::1): 40 requests at once, 20 from addresses in the range (and ::1), 20
# from 192.0.2.7: every exempt one accepted across the workers, exactly 12
# of the others; the segment counts 32 allowed, 8 denied, 20 exempt
# (srl_exempt_total), three keys (10.0.0.0/8's, ::1's: the two exempt ones
# rlctl list --exempt shows; 192.0.2.7's).
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
fpm_need
need "$SRL_PHP_DIR/Srl/Symfony/autoload.php"
[ -f /usr/share/php/Symfony/Component/RateLimiter/RateLimiterFactory.php ] ||
  die "php-symfony-rate-limiter is not installed (tools/install-deps)"

N=12
M=40
e2e_tmpdir symfony
# (lib.sh's fcgi passes these to every request; the app does not use them)
srl_name=/unused srl_policy=unused srl_capacity=1
fcgi_script=symfony_app.php
fpm_start a

# header NAME RESPONSE: a header's value in a FastCGI response.
header() { tr -d '\r' <<<"$2" | sed -n "s/^$1: //Ip" | head -1; }

run_policy() {
  local policy=$1 interval=$2 low=$3 high=$4 id="e2e-$$-$1" dir="$e2e_tmp/$1" i p pids=()
  local seg="/symfony.$id.$policy" started
  e2e_segments+=("$seg")
  mkdir -p "$dir"
  started=$(date +%s)
  for i in $(seq 1 $M); do
    fcgi a hot SF_ID="$id" SF_POLICY="$policy" SF_LIMIT=$N SF_INTERVAL="$interval" SF_KEY=hot \
      SRL_SLEEP_MS=100 >"$dir/r$i" 2>&1 & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  local all lines
  all=$(cat "$dir"/r*)
  lines=$(grep '^sf ' <<<"$all")
  check_eq "$policy: answers" $M "$(grep -c . <<<"$lines")"
  check_eq "$policy: accepted across the workers" $N "$(grep -c ' accepted=1 ' <<<"$lines")"
  check_eq "$policy: answered 429" $((M - N)) "$(tr -d '\r' <<<"$all" | grep -c '^Status: 429 Too Many Requests$')"
  check_gt "$policy: workers that answered" 1 \
    "$(sed -n 's/^sf pid=\([0-9]*\) .*/\1/p' <<<"$lines" | sort -u | wc -l)"
  check_eq "$policy: accepted remaining: 11..0, each once" "$(seq 0 $((N - 1)) | tr '\n' ' ')" \
    "$(sed -n 's/.* accepted=1 remaining=\([0-9]*\) .*/\1/p' <<<"$lines" | sort -n | tr '\n' ' ')"
  check_eq "$policy: refused remaining: all 0" "$((M - N)) 0" \
    "$(sed -n 's/.* accepted=0 remaining=\([0-9]*\) .*/\1/p' <<<"$lines" | sort | uniq -c | awk '{print $1, $2}')"
  check_eq "$policy: X-RateLimit-Limit" "$M $N" \
    "$(cat "$dir"/r* | tr -d '\r' | sed -n 's/^X-RateLimit-Limit: //p' | sort | uniq -c | awk '{print $1, $2}')"
  # Each answer against the srl decision behind it (python: exact integers).
  local verdict
  verdict=$(python3 - "$dir" "$low" "$high" "$(( $(date +%s) - started + 1 ))" <<'PY'
import glob, re, sys
d, low, high, slack = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
bad = []
for f in sorted(glob.glob(d + "/r*")):
    text = open(f).read().replace("\r", "")
    m = re.search(r"^sf pid=\d+ accepted=(\d) remaining=(\d+) limit=\d+ retry_us=(\d+) srl=(\S+)$", text, re.M)
    if not m:
        bad.append(f + ": no line"); continue
    acc, rem, retry_us, srl = int(m[1]), int(m[2]), int(m[3]), m[4]
    if srl == "none":
        bad.append(f + ": no srl decision"); continue
    allowed, srem, sns, at_us = map(int, srl.split(","))
    if allowed != acc: bad.append(f + ": accepted %d, srl allowed %d" % (acc, allowed))
    if srem != rem: bad.append(f + ": remaining %d, srl %d" % (rem, srem))
    if retry_us != at_us + (sns + 999) // 1000:
        bad.append(f + ": retry_us %d != at %d + srl %d ns" % (retry_us, at_us, sns))
    if not acc:
        ra = re.search(r"^Retry-After: (\d+)$", text, re.M)
        want = (sns + 999999999) // 10**9
        if not ra or int(ra[1]) not in (want - 1, want):
            bad.append(f + ": Retry-After %s, srl's retry_after %d s" % (ra and ra[1], want))
        elif not (low - slack <= int(ra[1]) <= high):
            bad.append(f + ": Retry-After %s not in %d..%d" % (ra[1], low - slack, high))
print("ok" if not bad else "; ".join(bad[:3]))
PY
)
  check_eq "$policy: every answer is srl's decision (accepted, remaining, getRetryAfter, Retry-After)" ok "$verdict"
  check_eq "$policy: rlctl info: allowed" $N "$(rlctl_count "$seg" allowed)"
  check_eq "$policy: rlctl info: denied" $((M - N)) "$(rlctl_count "$seg" denied)"
  check_eq "$policy: rlctl info: keys (Symfony's id ID-KEY)" 1 "$(rlctl_count "$seg" used)"
  check_eq "$policy: rlctl get $id-hot: remaining" 0 \
    "$(rlctl_as_owner get "$seg" "$id-hot" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["remaining"])')"
}

run_policy token_bucket '1 day' 7200 7200
run_policy fixed_window '1 day' 86400 86400
run_policy sliding_window '1 day' 1 86400

run_exempt() {
  local policy=fixed_window id="e2e-$$-ex" dir="$e2e_tmp/exempt" i p pids=() key
  local seg="/symfony.$id.$policy"
  e2e_segments+=("$seg")
  mkdir -p "$dir"
  for i in $(seq 1 $M); do
    if [ $((i % 2)) -eq 0 ]; then key=10.$i.0.1; [ $i -eq 40 ] && key=::1; else key=192.0.2.7; fi
    fcgi a hot SF_ID="$id" SF_POLICY=$policy SF_LIMIT=$N SF_INTERVAL='1 day' SF_KEY="$key" \
      SF_EXEMPT='10.0.0.0/8,::1' SRL_SLEEP_MS=100 >"$dir/r$i" 2>&1 & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  local ex no
  ex=$(for i in $(seq 2 2 $M); do cat "$dir/r$i"; done)
  no=$(for i in $(seq 1 2 $M); do cat "$dir/r$i"; done)
  check_eq "exempt: answers from the range" $((M / 2)) "$(grep -c '^sf pid=' <<<"$ex")"
  check_eq "exempt: from the range, all accepted" $((M / 2)) "$(grep -c ' accepted=1 ' <<<"$ex")"
  check_eq "exempt: from the range, decision's exempt" $((M / 2)) "$(grep -c '^sf exempt=1$' <<<"$ex")"
  check_gt "exempt: workers that answered the range" 1 \
    "$(sed -n 's/^sf pid=\([0-9]*\) .*/\1/p' <<<"$ex" | sort -u | wc -l)"
  check_eq "exempt: 192.0.2.7 accepted" $N "$(grep -c ' accepted=1 ' <<<"$no")"
  check_eq "exempt: 192.0.2.7 answered 429" $((M / 2 - N)) \
    "$(tr -d '\r' <<<"$no" | grep -c '^Status: 429 Too Many Requests$')"
  check_eq "exempt: 192.0.2.7 not exempt" $((M / 2)) "$(grep -c '^sf exempt=0$' <<<"$no")"
  check_eq "exempt: rlctl info: allowed" $((M / 2 + N)) "$(rlctl_count "$seg" allowed)"
  check_eq "exempt: rlctl info: denied" $((M / 2 - N)) "$(rlctl_count "$seg" denied)"
  check_eq "exempt: rlctl info: keys (10.0.0.0/8's, ::1's, 192.0.2.7's)" 3 "$(rlctl_count "$seg" used)"
  check_eq "exempt: rlctl metrics: srl_exempt_total" "srl_exempt_total{segment=\"$seg\"} $((M / 2))" \
    "$(rlctl_as_owner metrics "$seg" | grep '^srl_exempt_total{')"
  check_eq "exempt: rlctl list --exempt: the two ranges' keys" 2 \
    "$(rlctl_as_owner list "$seg" --exempt --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["shown"])')"
}
run_exempt

stop_pid "$fpm_pid" QUIT
e2e_finish
