#!/usr/bin/env bash
# php_concurrency.sh - Srl::enter() (in-flight limits) under php-fpm and the CLI.
#
# php-fpm8.2 as in php.sh (preloaded FFI, static pools of 4 children, the
# workers running as www-data): pools a and b, pool t with
# request_terminate_timeout = 2s, pool one of a single child.  Requests go
# through cgi-fcgi to tests/e2e/inflight.php, which enters the key (policy
# concurrency:2) and, admitted, records in.N in the phase's directory and
# waits until the test creates the phase's release file (or throws, dies of
# a fatal error, exits, unsets its lease).
# Every wave is settled before it is judged (each request entered or
# answered).  Checks, exact counts:
#   1  5 requests of one key at once: exactly 2 inside, 3 answered 429 with
#      Retry-After 1 and no RateLimit header; another key (pool b) gets its
#      own 2 meanwhile; after the release both answer, each script's
#      shutdown function ran, every unit is back (rlctl get: 0 in flight)
#   2  a worker killed by request_terminate_timeout while it holds a unit:
#      its shutdown functions never ran, its unit still counts and its pid is
#      listed (rlctl get) until the key is next full, then 2 new requests:
#      exactly 1 admitted (the dead worker's unit came back, the live holder
#      keeps its own), 1 refused;
#      Srl::stats() counts 1 reclaimed
#   3  every other way a script ends leaves: an uncaught exception, a fatal
#      error (no destructor runs: only the shutdown function leaves), exit(),
#      unset($lease) (the unit is free at once): 3 in a row each, limit 2,
#      never refused, all served by one worker (pool one: 1 child), so the
#      shutdown function is registered anew in each request
#   4  the CLI: leave() true then false, Srl::leave() of a left lease
#      false, decision() of a refusal, close() leaves held leases, acquire()
#      on a concurrency limiter and enter() on a rate limiter throw
#      SRL_ENOTSUP naming the right call; 20000 enter/leave cycles in one
#      process grow its memory by under 100 kB (one shutdown function per
#      request, not per lease)
#   5  compounds: concurrency:1 + token_bucket:2/1d admits all or nothing
#      (a unit refusal takes no permit, a rate refusal no unit); under fpm
#      a compound of two token buckets sends one RateLimit-Policy item per
#      limit and RateLimit for the binding one
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
fpm_need

LIMIT=2
e2e_tmpdir phpc
srl_token="srl-e2e-phpc-$$"
srl_name="/$srl_token"
srl_policy="concurrency:$LIMIT"
srl_capacity=64
srl_key_display=32
e2e_segments+=("$srl_name" "$srl_name-rate" "$srl_name-cmp" "$srl_name-two")
ctl="$e2e_tmp/ctl"; res="$e2e_tmp/res"
mkdir -p "$ctl" "$res"; chmod 0777 "$ctl"
fcgi_script=inflight.php
fpm_pool_extra_t="request_terminate_timeout = 2s"
fpm_pool_extra_one="pm.max_children = 1"
fpm_start a b t one

# req PHASE POOL KEY [MODE]: one request in the background; its FastCGI
# response lands in res/PHASE.N.
req_n=0
req() {
  local phase=$1 pool=$2 key=$3 mode=${4:-hold}
  wave_dir "$phase"
  req_n=$((req_n + 1))
  local n=$req_n
  ( fcgi "$pool" "$key" SRL_CTL="$ctl/$phase" SRL_MODE="$mode" SRL_REQ="$n" \
      >"$res/$phase.$n.tmp" 2>&1
    mv "$res/$phase.$n.tmp" "$res/$phase.$n" ) &
  wave_pids+=($!)
}
# count PHASE PATTERN: answers of PHASE with a line matching PATTERN (ERE,
# on the answer without its CRs)
count() {
  local f n=0
  for f in "$res/$1".*; do
    case $f in *.tmp) continue ;; esac
    [ -e "$f" ] && tr -d '\r' <"$f" | grep -qE "$2" && n=$((n + 1))
  done
  echo $n
}
downs() { find "$ctl/$1" -name 'down.*' | wc -l; }

# --- 1: one key at once, and another beside it
for i in 1 2 3 4 5; do req p1 a k1; done
req p1b b k2; req p1b b k2
wait_until 30 settled p1 5 || fail "1: k1's 5 requests did not settle"
wait_until 30 settled p1b 2 || fail "1: k2's 2 requests did not settle"
if [ "$(count p1 'Uncaught')" -ne 0 ]; then   # nothing below can pass: say why now
  die "inflight.php failed: $(cat "$res"/p1.* | tr -d '\r' | grep -m1 -o 'Uncaught.*')"
fi
check_eq "1: k1 inside at once" $LIMIT "$(entered p1)"
check_eq "1: k1 answered while 2 are inside" 3 "$(answered p1)"
check_eq "1: ... refused (allowed=0)" 3 "$(count p1 '^srl .* allowed=0 ')"
check_eq "1: ... with Status 429" 3 "$(count p1 '^Status: 429')"
check_eq "1: ... with Retry-After 1" 3 "$(count p1 '^Retry-After: 1$')"
check_eq "1: ... and no RateLimit header" 0 "$(count p1 '^RateLimit')"
check_eq "1: k2 inside meanwhile (its own 2)" $LIMIT "$(entered p1b)"
check_eq "1: rlctl get k1: in flight" $LIMIT "$(in_flight "$srl_name" k1)"
check_eq "1: rlctl get k2: in flight" $LIMIT "$(in_flight "$srl_name" k2)"
release p1; release p1b; wave_wait
check_eq "1: after the release: k1 admitted answers" $LIMIT "$(count p1 '^srl .* allowed=1 ')"
check_eq "1: after the release: k2 admitted answers" $LIMIT "$(count p1b '^srl .* allowed=1 ')"
check_eq "1: the admitted scripts' shutdown functions ran" $((2 * LIMIT)) \
  "$(( $(downs p1) + $(downs p1b) ))"
wait_until 20 idle "$srl_name" k1 || true
check_eq "1: every unit back: k1 in flight" 0 "$(in_flight "$srl_name" k1)"
check_eq "1: every unit back: k2 in flight" 0 "$(in_flight "$srl_name" k2)"
idle "$srl_name" k1 && idle "$srl_name" k2 || die "1: units leaked: the waves below would be judged on full keys"

# --- 2: request_terminate_timeout kills a holder
req k a k3
req kt t k3        # never released: pool t's timeout ends it
wait_until 30 settled k 1 || fail "2: pool a's holder did not enter"
wait_until 30 settled kt 1 || fail "2: pool t's holder did not enter"
check_eq "2: held (pool a + pool t)" 2 "$(( $(entered k) + $(entered kt) ))"
killed() { grep -q "\[pool t\] child [0-9]* exited on signal" "$e2e_tmp/fpm.log"; }
wait_until 30 killed || fail "2: php-fpm did not kill pool t's worker"
check_eq "2: php-fpm timed the worker out" 1 \
  "$(grep -c "\[pool t\] child [0-9]*, script '.*inflight.php' .*execution timed out" "$e2e_tmp/fpm.log")"
echo "note: $(grep -o "\[pool t\] child [0-9]* exited on signal [0-9]* ([A-Z]*)" "$e2e_tmp/fpm.log")"
wait_until 30 at_least answered kt 1 || fail "2: the killed request's client did not finish"
check_eq "2: the killed worker ran no shutdown function" 0 "$(downs kt)"
check_eq "2: the dead worker's unit still counts until the key is next full" 2 \
  "$(in_flight "$srl_name" k3)"
dead=$(sed -n 's/.*\[pool t\] child \([0-9]*\) exited on signal.*/\1/p' "$e2e_tmp/fpm.log" | head -1)
check_eq "2: rlctl get: the dead worker ($dead) still listed as a holder" 1 \
  "$(holders "$srl_name" k3 | tr ' ' '\n' | grep -cx "$dead")"
req k2 a k3; req k2 a k3
wait_until 30 settled k2 2 || fail "2: the new requests did not settle"
check_eq "2: new requests admitted (the dead worker's unit came back)" 1 "$(entered k2)"
check_eq "2: new requests refused (the live holder keeps its unit)" 1 "$(count k2 '^Status: 429')"
check_eq "2: rlctl get: the dead worker is no holder any more" 0 \
  "$(holders "$srl_name" k3 | tr ' ' '\n' | grep -cx "$dead")"
reclaimed=$(SRL_NAME="$srl_name" SRL_POLICY="$srl_policy" SRL_PHP_DIR="$SRL_PHP_DIR" LD_LIBRARY_PATH="$SRL_LIBDIR" \
  as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
  require getenv("SRL_PHP_DIR") . "/Srl.php";
  echo (new Srl(getenv("SRL_NAME"), getenv("SRL_POLICY"), 64, ["key_display" => 32]))->stats()["reclaimed"];')
check_eq "2: Srl::stats(): units reclaimed from dead holders" 1 "$reclaimed"
release k; release k2; wave_wait
check_eq "2: the live holders answered" 2 "$(( $(count k '^srl .* allowed=1 ') + $(count k2 '^srl .* allowed=1 ') ))"
wait_until 20 idle "$srl_name" k3 || true
check_eq "2: every unit back: in flight" 0 "$(in_flight "$srl_name" k3)"

# --- 3: an uncaught exception, a fatal error, exit(), unset($lease): each leaves
for mode in throw fatal exit unset; do
  for i in 1 2 3; do req "m-$mode" one "k-$mode" "$mode"; wave_wait; done
  check_eq "3: $mode, 3 in a row: admitted" 3 "$(count "m-$mode" '^srl .* allowed=1 ')"
  check_eq "3: $mode: refused" 0 "$(count "m-$mode" '^srl .* allowed=0 ')"
  wait_until 20 idle "$srl_name" "k-$mode" || true
  check_eq "3: $mode: in flight afterwards" 0 "$(in_flight "$srl_name" "k-$mode")"
done
check_eq "3: one worker served them all" 1 \
  "$(cat "$res"/m-*.* | sed -n 's/^srl pid=\([0-9]*\) .*/\1/p' | sort -u | wc -l)"
check_eq "3: throw: the exception was uncaught" 3 \
  "$(count m-throw 'Uncaught RuntimeException: inflight.php: thrown on purpose')"
check_eq "3: fatal: died of the memory limit" 3 "$(count m-fatal 'Allowed memory size of [0-9]+ bytes exhausted')"
check_eq "3: unset: the unit is free at once (peek: one more enter would be admitted, leaving 1)" 3 \
  "$(count m-unset "^after unset: allowed=1 remaining=$((LIMIT - 1))\$")"

# --- 4: the CLI: idempotent leave, close(), errors
out=$(SRL_NAME="$srl_name" SRL_POLICY="$srl_policy" SRL_PHP_DIR="$SRL_PHP_DIR" \
      LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
  require getenv("SRL_PHP_DIR") . "/Srl.php";
  $n = getenv("SRL_NAME");
  $s = new Srl($n, getenv("SRL_POLICY"), 64, ["key_display" => 32]);
  $l = $s->enter("k4");
  echo "held ", var_export($l->held(), true), "\n";
  echo "leave ", var_export($l->leave(), true), " ", var_export($l->leave(), true), " ",
       var_export($s->leave($l), true), " ", var_export($l->held(), true), "\n";
  $a = $s->enter("k4"); $b = $s->enter("k4"); $c = $s->enter("k4", $d);
  echo "third ", var_export($c, true), " ", var_export($d["allowed"], true), " ",
       $d["retry_after"], " ", var_export($s->decision()["allowed"], true), "\n";
  $p = new Srl($n, getenv("SRL_POLICY"), 64, ["key_display" => 32]);
  echo "before close: another enter allowed ", var_export($p->peek("k4")["allowed"], true), "\n";
  $s->close();
  echo "after close: allowed ", var_export($p->peek("k4")["allowed"], true), " leaving ",
       $p->peek("k4")["remaining"], " ", var_export($a->held(), true), " ",
       var_export($b->leave(), true), "\n";
  try { $p->acquire("k4"); echo "no exception\n"; }
  catch (SrlException $e) { echo $e->getCode(), " ", $e->getMessage(), "\n"; }
  for ($i = 0; $i < 21000; $i++) {
      if ($i === 1000) { $m = memory_get_usage(); }
      $s2 = $s2 ?? new Srl($n, getenv("SRL_POLICY"), 64, ["key_display" => 32]);
      $s2->enter("k4m")->leave();
  }
  echo "growth ", memory_get_usage() - $m < 100000 ? "small" : "large: " . (memory_get_usage() - $m), "\n";
  $r = new Srl("$n-rate", "token_bucket:5/1d", 64);
  try { $r->enter("k4"); echo "no exception\n"; }
  catch (SrlException $e) { echo $e->getCode(), " ", $e->getMessage(), "\n"; }
  $r->close(); Srl::unlink("$n-rate");' 2>&1)
check_eq "4: a fresh lease is held" "held true" "$(sed -n 1p <<<"$out")"
check_eq "4: leave() true, then false; Srl::leave() of it false; no longer held" \
  "leave true false false false" "$(sed -n 2p <<<"$out")"
check_eq "4: the third enter of limit 2: null, decision refused, Retry-After 1, decision() agrees" \
  "third NULL false 1 false" "$(sed -n 3p <<<"$out")"
check_eq "4: two held: another enter would be refused" "before close: another enter allowed false" \
  "$(sed -n 4p <<<"$out")"
check_eq "4: close() left both; a left lease is not held and leave() is false" \
  "after close: allowed true leaving 1 false false" "$(sed -n 5p <<<"$out")"
check_eq "4: acquire() on a concurrency limiter: SRL_ENOTSUP, naming enter()" \
  "-18 srl: acquire() on a concurrency limiter: use enter(): operation not supported by this limiter" \
  "$(sed -n 6p <<<"$out")"
check_eq "4: enter() on a rate limiter: SRL_ENOTSUP, naming acquire()" \
  "-18 srl: enter() needs a concurrency policy (concurrency:N): use acquire(): operation not supported by this limiter" \
  "$(sed -n 8p <<<"$out")"
check_eq "4: 20000 enter/leave cycles in one process: memory growth below 100 kB" \
  "growth small" "$(sed -n 7p <<<"$out")"
check_eq "4: nothing else printed" 8 "$(grep -c . <<<"$out")"
check_eq "4: k4 in flight after the CLI exited" 0 "$(in_flight "$srl_name" k4)"

# --- 5: compounds
out=$(SRL_NAME="$srl_name-cmp" SRL_PHP_DIR="$SRL_PHP_DIR" \
      LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
  require getenv("SRL_PHP_DIR") . "/Srl.php";
  $s = new Srl(getenv("SRL_NAME"), "concurrency:1 + token_bucket:2/1d", 64);
  $a = $s->enter("k"); $b = $s->enter("k", $d);
  echo var_export($a->held(), true), " ", var_export($b, true), " ", $d["retry_after"], "\n";
  $a->leave(); $c = $s->enter("k"); echo var_export($c->held(), true), "\n"; $c->leave();
  $e = $s->enter("k", $d);
  echo var_export($e, true), " ", $d["retry_after"], "\n";' 2>&1)
check_eq "5: concurrency:1 + token_bucket:2/1d: held, the second refused by the unit (Retry-After 1)" \
  "true NULL 1" "$(sed -n 1p <<<"$out")"
check_eq "5: ... which took no permit: after leave() one more is admitted" true "$(sed -n 2p <<<"$out")"
read -r e ra <<<"$(sed -n 3p <<<"$out")"
check_eq "5: then the token bucket refuses (with the unit free)" NULL "$e"
check_range "5: ... Retry-After one token (1d/2)" 43000 43200 "$ra"
r=$(fcgi_script=limit.php fcgi a two SRL_NAME="$srl_name-two" \
    SRL_POLICY="token_bucket:10/1d + token_bucket:2/1d")
header() { tr -d '\r' <<<"$2" | sed -n "s/^$1: //Ip" | head -1; }
check_eq "5: fpm: RateLimit-Policy of a compound: one item per limit" \
  "\"$srl_token-two.0\";q=10;w=86400, \"$srl_token-two.1\";q=2;w=86400" "$(header RateLimit-Policy "$r")"
rl=$(header RateLimit "$r")
check_eq "5: fpm: RateLimit names the binding limit (the one with the least left)" \
  "\"$srl_token-two.1\";r=1" "${rl%%;t=*}"

stop_pid "$fpm_pid" QUIT
check_eq "php-fpm stopped by its pid" gone "$(kill -0 "$fpm_pid" 2>/dev/null && echo running || echo gone)"
e2e_finish
