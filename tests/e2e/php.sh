#!/usr/bin/env bash
# php.sh - the PHP binding (php/Srl.php over FFI) under php-fpm and the CLI.
#
# Starts php-fpm8.2 with its own configuration in a temporary directory: two
# pools (a, b), each pm=static with 4 children on its own unix socket, the
# workers running as www-data, php.ini = php/srl.ini (ffi.enable=preload,
# ffi.preload, opcache.preload).  Requests go through cgi-fcgi to
# tests/e2e/limit.php; CLI processes run the same script with ffi.enable=1.
# Policy token_bucket:20/1d (nothing refills during the test).  Checks:
#   1  one key through fpm, the CLI, fpm again: the first answer has
#      remaining 19 and RateLimit-Policy/RateLimit headers; a CLI process
#      takes the other 19 (remaining 18..0); the next fpm request is a 429
#      with Retry-After (one token: 4320 s, rounded up) and RateLimit r=0;
#      fpm found the preloaded FFI scope, the CLI loaded the header itself,
#      and a script's own FFI::cdef is refused under fpm (ffi.enable=preload)
#   2  one key hammered at once by 15 requests to each pool and 10 CLI
#      processes (2 acquires each): exactly 20 of the 50 admitted host-wide,
#      each pool served by more than one child, each fpm denial a 429
#   3  rlctl info on the segment agrees: allowed, denied, keys
#   4  errors throw SrlException with the SRL_E* code (another policy or
#      capacity: EMISMATCH; bad policy, cost 0 or above the permits, empty
#      key, missing segment without CREATE) and change no count
#   4c flags Srl::CHANGE (CLI, its own segment, token_bucket:3/1d): a key
#      that used 3 of 3 gets exactly 3 more after another process opens with
#      token_bucket:6/1d | CHANGE; the old policy then throws EMISMATCH;
#      Srl::ADOPT takes the segment's (6/1d: a new key gets 6); CHANGE
#      with another capacity throws EMISMATCH naming it, changing nothing
#   5e Srl::keyFit (CLI): srl_key_fit's rule, its fixed vector, two long keys
#      differing at the end counted apart
#   5b 'dry_run' => true (CLI): never refused, exactly the would-be
#      denials flagged wouldDeny with their retry_after, counted in
#      stats()['would_deny'] and rlctl info; an enforcing handle refuses
#   5d 'lockfree' => true (CLI, gcra:5/1d): exactly 5 of 8 admitted, and
#      info() says the lock-free path is on (srl_info.flags); on a
#      token_bucket segment it says off;
#      'flood_cache' => true: 10 more denials of a denied key are answered
#      by the handle (rlctl info, another process, counts 1 denial), then
#      its stats() flushes them (11, and rlctl agrees), info() says it is
#      on; both must be bools
#   5c reserve() (CLI): the burst without a wait, then each its token's
#      wait, a wait above maxWait denied taking nothing, refund() cancels,
#      a sliding log cannot wait (SRL_ENOTSUP)
#   6  'redis' => URI (a redis-server of the test, unix socket): one key
#      through fpm, the CLI, then both pools and CLI processes at once: the
#      same exact counts and headers as on a segment, with the segment
#      NAME-fleet as the host tier: Redis's denials plus the host's local
#      answers (rlctl info NAME-fleet, and acquire()'s 'local') are the
#      denials exactly; rlctl info URI agrees, 1-5's segment is untouched; a segment-only option, another policy under
#      the prefix and a bad uri are refused; a stopped server gives on_full's
#      degraded decision within timeout_ms, not an exception, and recovers;
#      a killed one (SRL_ESYS) degrades too
#   7  'tiers' => [...] and acquire(KEY, COST, TIER): two CLI processes at
#      once, keys of two tiers: each key admitted exactly its tier's limit;
#      a key moved from default (used 2 of 2) to paid gets paid's 5 - 2;
#      an unknown tier is SrlException SRL_ENOENT; rlctl info counts the
#      keys per tier; tiers with redis are refused
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
fpm_need

LIMIT=20
TOKEN_S=4320                 # 1d / 20
e2e_tmpdir php
srl_token="srl-e2e-php-$$"
srl_name="/$srl_token"
srl_policy="token_bucket:$LIMIT/1d"
srl_capacity=1024
e2e_segments+=("$srl_name" "$srl_name-none" "$srl_name-typo" "$srl_name-tiers")
started=$(date +%s)

fpm_start a b

# field NAME TEXT: the value of NAME=... in limit.php's output line.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
# header NAME RESPONSE: a header's value in a FastCGI response.
header() { tr -d '\r' <<<"$2" | sed -n "s/^$1: //Ip" | head -1; }

# --- 1: one key, fpm then CLI then fpm
r=$(fcgi a shape)
line=$(grep '^srl ' <<<"$r")
check_eq "1: first fpm request allowed" 1 "$(field allowed "$line")"
check_eq "1: first fpm request remaining" $((LIMIT - 1)) "$(field remaining "$line")"
check_eq "1: first fpm request limit" $LIMIT "$(field limit "$line")"
check_eq "1: fpm uses the preloaded FFI scope (ffi.enable=preload)" scope "$(field ffi "$line")"
check_eq "1: pool a answered" a "$(field pool "$line")"
check_eq "1: RateLimit-Policy" "\"$srl_token\";q=$LIMIT;w=86400" "$(header RateLimit-Policy "$r")"
rl=$(header RateLimit "$r")
check_eq "1: RateLimit r" "\"$srl_token\";r=$((LIMIT - 1))" "${rl%%;t=*}"
elapsed=$(( $(date +%s) - started + 1 ))
check_range "1: RateLimit t (one token to refill)" $((TOKEN_S - elapsed)) $TOKEN_S "${rl##*;t=}"
check_eq "1: no Status header on an allowed answer" "" "$(header Status "$r")"

c=$(cli shape $((LIMIT - 1)))
check_eq "1: CLI process: admitted" $((LIMIT - 1)) "$(grep -c ' allowed=1 ' <<<"$c")"
check_eq "1: CLI process: remaining counts down" "$(seq $((LIMIT - 2)) -1 0 | tr '\n' ' ')" \
  "$(sed -n 's/.* remaining=\([0-9]*\) .*/\1/p' <<<"$c" | tr '\n' ' ')"
check_eq "1: the CLI loads srl_ffi.h itself (ffi.enable=1)" $((LIMIT - 1)) "$(grep -c ' ffi=load$' <<<"$c")"

r=$(fcgi b shape)
line=$(grep '^srl ' <<<"$r")
elapsed=$(( $(date +%s) - started + 1 ))
check_eq "1: fpm pool b after the CLI: denied" 0 "$(field allowed "$line")"
check_eq "1: fpm pool b answered" b "$(field pool "$line")"
check_eq "1: Status" "429 Too Many Requests" "$(header Status "$r")"
ra=$(header Retry-After "$r")
check_range "1: Retry-After (one token)" $((TOKEN_S - elapsed)) $TOKEN_S "$ra"
check_eq "1: retry_after of acquire() equals Retry-After" "$ra" "$(field retry_after "$line")"
check_eq "1: RateLimit on the 429" "\"$srl_token\";r=0;t=$ra" "$(header RateLimit "$r")"

# ffi.enable=preload holds: a script's own FFI use is refused under fpm.
cat >"$e2e_tmp/rogue.php" <<'PHP'
<?php
try { FFI::cdef('int getpid(void);'); echo "rogue: allowed\n"; }
catch (Throwable $e) { echo "rogue: ", $e->getMessage(), "\n"; }
PHP
r=$(env -i SCRIPT_FILENAME="$e2e_tmp/rogue.php" REQUEST_METHOD=GET cgi-fcgi -bind -connect "$e2e_tmp/a.sock")
check_eq "1: a script's own FFI::cdef under fpm is refused" \
  'rogue: FFI API is restricted by "ffi.enable" configuration directive' "$(grep '^rogue: ' <<<"$r")"

# burst DIR KEY N M SLEEP_MS: N requests to each pool and M CLI processes (2
# acquires each) for KEY at once, their answers in DIR/a*, b*, c*; sets all.
burst() {
  local dir=$1 key=$2 n=$3 m=$4 ms=$5 i p
  local pids=()
  mkdir -p "$dir"
  for i in $(seq 1 "$n"); do
    fcgi a "$key" SRL_SLEEP_MS="$ms" >"$dir/a$i" 2>&1 & pids+=($!)
    fcgi b "$key" SRL_SLEEP_MS="$ms" >"$dir/b$i" 2>&1 & pids+=($!)
  done
  for i in $(seq 1 "$m"); do
    cli "$key" 2 >"$dir/c$i" 2>&1 & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  all=$(cat "$dir"/*)
}

# --- 2: one key from both pools and the CLI at once
out="$e2e_tmp/out"
burst "$out" shared 15 10 150
check_eq "2: answers (15 + 15 fpm requests, 10 CLI x 2)" 50 "$(grep -c '^srl ' <<<"$all")"
check_eq "2: admitted host-wide" $LIMIT "$(grep -c '^srl .* allowed=1 ' <<<"$all")"
check_eq "2: denied host-wide" $((50 - LIMIT)) "$(grep -c '^srl .* allowed=0 ' <<<"$all")"
fpm_denied=$(cat "$out"/a* "$out"/b* | grep -c '^srl .* allowed=0 ')
check_eq "2: every denied fpm request answered 429" "$fpm_denied" \
  "$(cat "$out"/a* "$out"/b* | tr -d '\r' | grep -c '^Status: 429 Too Many Requests$')"
check_eq "2: every denied fpm request has a Retry-After" "$fpm_denied" \
  "$(cat "$out"/a* "$out"/b* | tr -d '\r' | grep -c '^Retry-After: [0-9]*$')"
check_eq "2: every fpm answer has a RateLimit header" 30 \
  "$(cat "$out"/a* "$out"/b* | tr -d '\r' | grep -c "^RateLimit: \"$srl_token\";r=")"
for p in a b; do
  check_eq "2: pool $p answered its 15" 15 "$(cat "$out/$p"* | grep -c "^srl pool=$p ")"
  check_gt "2: pool $p children that answered" 1 \
    "$(cat "$out/$p"* | sed -n 's/^srl pool=. pid=\([0-9]*\) .*/\1/p' | sort -u | wc -l)"
done

# --- 3: rlctl agrees (1: 20 allowed, 1 denied; 2: 20 allowed, 30 denied)
check_eq "3: rlctl info: allowed" 40 "$(rlctl_count "$srl_name" allowed)"
check_eq "3: rlctl info: denied" 31 "$(rlctl_count "$srl_name" denied)"
check_eq "3: rlctl info: keys tracked" 2 "$(rlctl_count "$srl_name" used)"
check_eq "3: segment owner and mode" "$e2e_user 600" "$(stat -c '%U %a' "/dev/shm/$srl_token")"

# --- 4: errors are exceptions with the SRL_E* code, and change nothing
php_err() { # php_err CODE: run a snippet against the segment, print the exception code
  SRL_NAME="$srl_name" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
    require getenv("SRL_PHP_DIR") . "/Srl.php";
    try { '"$1"'; echo "no exception\n"; } catch (SrlException $e) { echo $e->getCode(), "\n"; }'
}
export SRL_PHP_DIR
check_eq "4: another policy on the segment: SrlException code (SRL_EMISMATCH)" -9 \
  "$(php_err '$s = new Srl(getenv("SRL_NAME"), "token_bucket:21/1d", 1024)')"
check_eq "4: another capacity on the segment: SRL_EMISMATCH" -9 \
  "$(php_err '$s = new Srl(getenv("SRL_NAME"), "token_bucket:20/1d", 999999)')"
check_eq "4: the mismatch says what differs, both sides, and the remedy in PHP's words (Srl::CREATE | Srl::CHANGE, not SRL_CHANGE)" \
  "srl: open '$srl_name': segment exists with a different policy or geometry; policy: the segment has token_bucket:20/1d, this config asks for token_bucket:21/1d (use the segment's policy, or change it live, keeping each key's use: rlctl set-policy, or open with Srl::CREATE | Srl::CHANGE; or another segment name, or destroy it: its keys start fresh)" \
  "$(SRL_NAME="$srl_name" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
    require getenv("SRL_PHP_DIR") . "/Srl.php";
    try { new Srl(getenv("SRL_NAME"), "token_bucket:21/1d", 1024); }
    catch (SrlException $e) { echo $e->getMessage(), "\n"; }')"
check_eq "4: a bad policy: SRL_EPOLICY" -2 "$(php_err '$s = new Srl(getenv("SRL_NAME"), "token_bucket:20/1parsec", 1024)')"
check_eq "4: cost above the permits: SRL_ECOST" -3 \
  "$(php_err '(new Srl(getenv("SRL_NAME"), "token_bucket:20/1d", 1024))->acquire("k4", 21)')"
check_eq "4: cost 0: SRL_ECOST" -3 "$(php_err '(new Srl(getenv("SRL_NAME"), "token_bucket:20/1d", 1024))->acquire("k4", 0)')"
check_eq "4: empty key: SRL_EKEY" -4 "$(php_err '(new Srl(getenv("SRL_NAME"), "token_bucket:20/1d", 1024))->acquire("")')"
typo=$(SRL_NAME="$srl_name-typo" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
  require getenv("SRL_PHP_DIR") . "/Srl.php";
  try { new Srl(getenv("SRL_NAME"), "token_bucket:20/1d", 1024, ["key_dispaly" => 32]); echo "no exception\n"; }
  catch (InvalidArgumentException $e) { echo $e->getMessage(), "\n"; }')
check_eq "4: a misspelt option is refused, named" \
  "unknown option 'key_dispaly' (did you mean key_display?)" "$typo"
check_eq "4: ... before anything was created" absent \
  "$([ -e "/dev/shm/$srl_token-typo" ] && echo present || echo absent)"
check_eq "4: a missing segment without Srl::CREATE: SRL_ENOENT" -7 \
  "$(php_err '$s = new Srl(getenv("SRL_NAME") . "-none", "token_bucket:20/1d", 1024, ["flags" => 0])')"
check_eq "4: a bad policy's message names the bad part" \
  "srl: policy 'token_bucket:20/1parsec': unknown unit 'parsec' (units: ns us ms s m h d)" \
  "$(SRL_NAME="$srl_name" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
    require getenv("SRL_PHP_DIR") . "/Srl.php";
    try { new Srl(getenv("SRL_NAME"), "token_bucket:20/1parsec", 1024); } catch (SrlException $e) { echo $e->getMessage(), "\n"; }')"
check_eq "4: after the errors: rlctl info: allowed" 40 "$(rlctl_count "$srl_name" allowed)"
check_eq "4: after the errors: rlctl info: keys tracked" 2 "$(rlctl_count "$srl_name" used)"

# --- 4c: Srl::CHANGE and Srl::ADOPT
change_name="$srl_name-change"
e2e_segments+=("$change_name")
php_change() { # php_change CODE: run a snippet with $n the segment name
  SRL_NAME="$change_name" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
    require getenv("SRL_PHP_DIR") . "/Srl.php";
    $n = getenv("SRL_NAME");
    function admitted(Srl $s, int $k, string $key = "ck") { $a = 0; for ($i = 0; $i < $k; $i++) { $a += $s->acquire($key)["allowed"] ? 1 : 0; } return $a; }
    try { '"$1"' } catch (SrlException $e) { echo "SrlException ", $e->getCode(), ": ", $e->getMessage(), "\n"; }'
}
check_eq "4c: token_bucket:3/1d: 3 of 5 admitted" 3 \
  "$(php_change 'echo admitted(new Srl($n, "token_bucket:3/1d", 64), 5), "\n";')"
check_eq "4c: Srl::CHANGE to token_bucket:6/1d: the key that used 3 of 3 gets exactly 3 more" 3 \
  "$(php_change 'echo admitted(new Srl($n, "token_bucket:6/1d", 64, ["flags" => Srl::CREATE | Srl::CHANGE]), 5), "\n";')"
check_eq "4c: rlctl info: the policy's generation" 1 "$(rlctl_count "$change_name" policy_gen)"
check_eq "4c: the old policy, without CHANGE: SRL_EMISMATCH" -9 \
  "$(php_change 'new Srl($n, "token_bucket:3/1d", 64); echo "no exception\n";' | sed -n 's/^SrlException \(-*[0-9]*\):.*/\1/p')"
check_eq "4c: Srl::ADOPT takes the segment's policy, whatever \$policy says: a new key gets 6" 6 \
  "$(php_change 'echo admitted(new Srl($n, "token_bucket:3/1d", 64, ["flags" => Srl::ADOPT]), 8, "ad"), "\n";')"
check_eq "4c: Srl::CHANGE with another capacity: SRL_EMISMATCH, saying what differs" \
  "SrlException -9: capacity" \
  "$(php_change 'new Srl($n, "token_bucket:6/1d", 999999, ["flags" => Srl::CREATE | Srl::CHANGE]); echo "no exception\n";' |
     sed -n 's/^\(SrlException -9\): .*segment exists with a different policy or geometry; \(capacity\).*/\1: \2/p')"
check_eq "4c: Srl::CHANGE to another policy and another capacity: SRL_EMISMATCH" -9 \
  "$(php_change 'new Srl($n, "token_bucket:9/1d", 999999, ["flags" => Srl::CREATE | Srl::CHANGE]); echo "no exception\n";' | sed -n 's/^SrlException \(-*[0-9]*\):.*/\1/p')"
check_eq "4c: ... and changed nothing (generation 1, the key still spent)" "1 0" \
  "$(rlctl_count "$change_name" policy_gen) $(php_change 'echo admitted(new Srl($n, "token_bucket:6/1d", 64), 1), "\n";')"

# --- 5: refund() gives back exactly what it names, on its own segment
# (3 per day: 3 admitted, refund 1, exactly one more; untracked key: false)
refund_name="$srl_name-refund"
out=$(SRL_NAME="$refund_name" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
  require getenv("SRL_PHP_DIR") . "/Srl.php";
  $s = new Srl(getenv("SRL_NAME"), "token_bucket:3/1d", 64);
  $a = [];
  for ($i = 0; $i < 4; $i++) { $a[] = $s->acquire("login")["allowed"] ? 1 : 0; }
  echo implode(" ", $a), "\n";
  var_export($s->refund("login")); echo "\n";
  $b = [];
  for ($i = 0; $i < 3; $i++) { $b[] = $s->acquire("login")["allowed"] ? 1 : 0; }
  echo implode(" ", $b), "\n";
  var_export($s->refund("nobody")); echo "\n";
  try { $s->refund("login", 0); echo "no exception\n"; } catch (SrlException $e) { echo $e->getCode(), "\n"; }
  try { $s->refund("login", 4); echo "no exception\n"; } catch (SrlException $e) { echo $e->getCode(), "\n"; }
  $s->close();
  Srl::unlink(getenv("SRL_NAME"));')
check_eq "5: 3 of 4 admitted before the refund" "1 1 1 0" "$(sed -n 1p <<<"$out")"
check_eq "5: refund of a tracked key: true" true "$(sed -n 2p <<<"$out")"
check_eq "5: exactly one more admitted after refund(1)" "1 0 0" "$(sed -n 3p <<<"$out")"
check_eq "5: refund of an untracked key: false" false "$(sed -n 4p <<<"$out")"
check_eq "5: refund cost 0: SRL_ECOST" -3 "$(sed -n 5p <<<"$out")"
check_eq "5: refund above the permits: SRL_ECOST" -3 "$(sed -n 6p <<<"$out")"
check_eq "5: the refund segment is gone" absent \
  "$([ -e "/dev/shm/${refund_name#/}" ] && echo present || echo absent)"

# --- 5e: Srl::keyFit, srl_key_fit's rule: '' -> null, 1..4096 bytes the key
# itself, longer the fitted form (the library's fixed vector: bytes i % 251,
# 5000 of them); two 5000-byte keys differing in the last byte count apart
fit_name="$srl_name-fit"
out=$(SRL_NAME="$fit_name" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
  require getenv("SRL_PHP_DIR") . "/Srl.php";
  var_export(Srl::keyFit("")); echo "\n";
  $k = str_repeat("k", 4096);
  echo Srl::keyFit("alice"), " ", Srl::keyFit($k) === $k ? "same" : "other", "\n";
  $v = ""; for ($i = 0; $i < 5000; $i++) { $v .= chr($i % 251); }
  $f = Srl::keyFit($v);
  echo strlen($f), " ", substr($f, 0, 4064) === substr($v, 0, 4064) ? "head" : "no-head", " ",
       bin2hex(substr($f, 4064)), "\n";
  $s = new Srl(getenv("SRL_NAME"), "token_bucket:1/1d", 64);
  $a = str_repeat("L", 4999);
  $r = [];
  foreach ([$a . "a", $a . "b", $a . "a"] as $key) {
    $r[] = $s->acquire(Srl::keyFit($key))["allowed"] ? 1 : 0;
  }
  echo implode(" ", $r), "\n";
  $s->close();
  Srl::unlink(getenv("SRL_NAME"));')
check_eq "5e: keyFit(\"\"): null" NULL "$(sed -n 1p <<<"$out")"
check_eq "5e: keyFit of 5 and of 4096 bytes: the key itself" "alice same" "$(sed -n 2p <<<"$out")"
check_eq "5e: keyFit of 5000 bytes: 4096, its head, BLAKE2b-256 of it (check_keyfit's vector)" \
  "4096 head 380a35589ac0b8796076c76b284d2e0dd0842d3eac226475610946e0c2277b8b" "$(sed -n 3p <<<"$out")"
check_eq "5e: two 5000-byte keys differing in the last byte count apart" "1 1 0" "$(sed -n 4p <<<"$out")"

# --- 5b: 'dry_run' => true: never refused, would-be denials flagged and counted
# (3 per day: a dry handle takes 5, the last 2 flagged wouldDeny with the
# denial's retry_after; an enforcing handle on the same segment is refused;
# stats and rlctl info count would_deny 2 within denied 3)
dry_name="$srl_name-dry"
out=$(SRL_NAME="$dry_name" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
  require getenv("SRL_PHP_DIR") . "/Srl.php";
  $dry = new Srl(getenv("SRL_NAME"), "token_bucket:3/1d", 64, ["dry_run" => true]);
  $a = []; $w = []; $r = [];
  for ($i = 0; $i < 5; $i++) {
    $d = $dry->acquire("k");
    $a[] = $d["allowed"] ? 1 : 0; $w[] = $d["wouldDeny"] ? 1 : 0; $r[] = $d["retry_after"];
  }
  echo implode(" ", $a), "\n", implode(" ", $w), "\n", implode(" ", $r), "\n";
  $enf = new Srl(getenv("SRL_NAME"), "token_bucket:3/1d", 64);
  $d = $enf->acquire("k");
  echo ($d["allowed"] ? 1 : 0), " ", ($d["wouldDeny"] ? 1 : 0), "\n";
  $st = $enf->stats();
  echo $st["allowed"], " ", $st["denied"], " ", $st["would_deny"], "\n";
  try { new Srl(getenv("SRL_NAME"), "token_bucket:3/1d", 64, ["dry_run" => "maybe"]); echo "no exception\n"; }
  catch (InvalidArgumentException $e) { echo $e->getMessage(), "\n"; }')
check_eq "5b: dry run: all 5 allowed" "1 1 1 1 1" "$(sed -n 1p <<<"$out")"
check_eq "5b: dry run: exactly the 2 over the limit flagged wouldDeny" "0 0 0 1 1" "$(sed -n 2p <<<"$out")"
check_eq "5b: dry run: retry_after of the would-be denials (a day / 3)" "0 0 0 28800 28800" "$(sed -n 3p <<<"$out")"
check_eq "5b: an enforcing handle on the same segment is refused" "0 0" "$(sed -n 4p <<<"$out")"
check_eq "5b: stats allowed denied would_deny" "3 3 2" "$(sed -n 5p <<<"$out")"
check_eq "5b: dry_run must be a boolean word" "dry_run: expected on or off (yes/no, true/false, 1/0)" \
  "$(sed -n 6p <<<"$out")"
check_eq "5b: rlctl info: would deny" 2 "$(rlctl_count "$dry_name" would_deny)"
rlctl_as_owner destroy "$dry_name" >/dev/null 2>&1

# --- 5d: 'lockfree' and 'flood_cache' reach the handle
lf_name="$srl_name-lf"
e2e_segments+=("$lf_name" "$lf_name-fc" "$lf_name-tb")
out=$(SRL_NAME="$lf_name" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
  require getenv("SRL_PHP_DIR") . "/Srl.php";
  /* rlctl info NAME --json in another process: its "denied" */
  function denied(string $n): string {
    $j = json_decode((string)shell_exec(getenv("SRL_RLCTL") . " info " . escapeshellarg($n) . " --json"), true);
    $f = function ($o) use (&$f) {
      if (!is_array($o)) { return null; }
      if (isset($o["denied"]) && is_int($o["denied"])) { return $o["denied"]; }
      foreach ($o as $v) { $r = $f($v); if ($r !== null) { return $r; } }
      return null;
    };
    return (string)($f($j) ?? "missing");
  }
  /* [lockfree, flood_cache, dry_run, flags] of info(): what took effect */
  function took(Srl $s): string {
    $i = $s->info();
    return json_encode([$i["lockfree"], $i["flood_cache"], $i["dry_run"], $i["flags"]]);
  }
  $n = getenv("SRL_NAME");
  $lf = new Srl($n, "gcra:5/1d", 64, ["lockfree" => true]);
  $a = [];
  for ($i = 0; $i < 8; $i++) { $a[] = $lf->acquire("k")["allowed"] ? 1 : 0; }
  echo implode(" ", $a), "\n";
  echo took($lf), "\n";
  $lf->close();
  $fc = new Srl($n . "-fc", "token_bucket:1/1d", 64, ["flood_cache" => true]);
  $fc->acquire("k"); $fc->acquire("k");   /* allowed, then denied under the lock: cached */
  for ($i = 0; $i < 10; $i++) { $fc->acquire("k"); }
  echo denied($n . "-fc"), "\n";
  echo $fc->stats()["denied"], " ", denied($n . "-fc"), "\n";
  echo took($fc), "\n";
  $fc->close();
  $tb = new Srl($n . "-tb", "token_bucket:5/1d", 64, ["lockfree" => true]);
  echo took($tb), "\n";
  $tb->close();
  foreach (["lockfree", "flood_cache"] as $o) {
    try { new Srl($n, "gcra:5/1d", 64, [$o => 2]); echo "no exception\n"; }
    catch (InvalidArgumentException $e) { echo $e->getMessage(), "\n"; }
  }' 2>&1)
check_eq "5d: lockfree gcra:5/1d: exactly 5 of 8 admitted" "1 1 1 1 1 0 0 0" "$(sed -n 1p <<<"$out")"
check_eq "5d: lockfree gcra:5/1d: info() says the lock-free path is on (flags 0x4)" \
  "[true,false,false,4]" "$(sed -n 2p <<<"$out")"
check_eq "5d: flood_cache: rlctl info counts 1 denial while the handle holds 10" 1 \
  "$(sed -n 3p <<<"$out")"
check_eq "5d: flood_cache: stats() flushes them: 11, and rlctl agrees" "11 11" \
  "$(sed -n 4p <<<"$out")"
check_eq "5d: flood_cache: info() says it is on (flags 0x2)" \
  "[false,true,false,2]" "$(sed -n 5p <<<"$out")"
check_eq "5d: lockfree on token_bucket: info() says it is off (no gcra tier)" \
  "[false,false,false,0]" "$(sed -n 6p <<<"$out")"
check_eq "5d: lockfree must be a boolean" "lockfree: expected on or off (yes/no, true/false, 1/0)" \
  "$(sed -n 7p <<<"$out")"
check_eq "5d: flood_cache must be a boolean" "flood_cache: expected on or off (yes/no, true/false, 1/0)" \
  "$(sed -n 8p <<<"$out")"
rlctl_as_owner destroy "$lf_name" >/dev/null 2>&1
rlctl_as_owner destroy "$lf_name-fc" >/dev/null 2>&1
rlctl_as_owner destroy "$lf_name-tb" >/dev/null 2>&1

# --- 5c: reserve() waits instead of refusing (real clock: loose bounds only)
# token_bucket:2/1s: 2 at once, then one every 500 ms; a reservation that
# would wait longer than maxWaitNs takes nothing; refund() cancels one.
reserve_name="$srl_name-reserve"
out=$(SRL_NAME="$reserve_name" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
  require getenv("SRL_PHP_DIR") . "/Srl.php";
  $s = new Srl(getenv("SRL_NAME"), "token_bucket:2/1s", 64);
  $r = [];
  for ($i = 0; $i < 2; $i++) { $d = $s->reserve("api", 2000000000); $r[] = $d["allowed"] ? $d["waitNs"] : "denied"; }
  echo implode(" ", $r), "
";
  $w1 = $s->reserve("api", 2000000000)["waitNs"];
  $w2 = $s->reserve("api", 2000000000)["waitNs"];
  echo (0 < $w1 && $w1 <= 500000000) ? "ok" : "bad $w1", " ", ($w1 < $w2 && $w2 <= 1000000000) ? "ok" : "bad $w2", "
";
  $d = $s->reserve("api", 0);              /* max 0: acquire, denied */
  echo $d["allowed"] ? 1 : 0, " ", $d["waitNs"], "
";
  $d = $s->reserve("api", 1000000);        /* 1 ms: too short, nothing taken */
  echo $d["allowed"] ? 1 : 0, " ", $d["retry_after"] >= 1 ? "retry" : "none", "
";
  $w3 = $s->reserve("api", 2000000000)["waitNs"];
  echo ($w2 < $w3 && $w3 <= 1500000000) ? "ok" : "bad $w3", "
";
  var_export($s->refund("api")); echo "
";   /* cancel the last one */
  $w4 = $s->reserve("api", 2000000000)["waitNs"];
  echo ($w4 <= $w3 && $w4 > $w2) ? "ok" : "bad $w4 after $w3", "
";
  $s->close();
  Srl::unlink(getenv("SRL_NAME"));
  $l = new Srl(getenv("SRL_NAME") . "-log", "sliding_log:2/1s", 64);
  try { $l->reserve("api", 1000); echo "no exception
"; } catch (SrlException $e) { echo $e->getCode(), "
"; }
  $l->close();
  Srl::unlink(getenv("SRL_NAME") . "-log");')
check_eq "5c: the burst reserves without waiting" "0 0" "$(sed -n 1p <<<"$out")"
check_eq "5c: then each waits for its token, in order" "ok ok" "$(sed -n 2p <<<"$out")"
check_eq "5c: reserve(maxWait 0) is acquire: denied, no wait" "0 0" "$(sed -n 3p <<<"$out")"
check_eq "5c: a wait above maxWait is denied with a retry" "0 retry" "$(sed -n 4p <<<"$out")"
check_eq "5c: the denied one took nothing: the next waits one token more" ok "$(sed -n 5p <<<"$out")"
check_eq "5c: refund cancels a reservation: true" true "$(sed -n 6p <<<"$out")"
check_eq "5c: after the cancel the same slot is reserved again" ok "$(sed -n 7p <<<"$out")"
check_eq "5c: sliding_log cannot wait: SRL_ENOTSUP" -18 "$(sed -n 8p <<<"$out")"

# --- 6: 'redis' => URI: the same limit, held by a Redis server, with the
# segment NAME as the host tier (another name than 1-5's segment)
redis_start
srl_redis="unix://$redis_sock?prefix=e2e-php"
seg_name=$srl_name
srl_name="$srl_name-fleet"
e2e_segments+=("$srl_name" /x /xt)   # the fronted stores' host segments
r=$(fcgi a fleet)
line=$(grep '^srl ' <<<"$r")
check_eq "6: first fpm request on Redis: allowed" 1 "$(field allowed "$line")"
check_eq "6: first fpm request on Redis: remaining" $((LIMIT - 1)) "$(field remaining "$line")"
check_eq "6: RateLimit-Policy" "\"$srl_token-fleet\";q=$LIMIT;w=86400" "$(header RateLimit-Policy "$r")"
c=$(cli fleet $((LIMIT - 1)))
check_eq "6: CLI process on Redis: admitted" $((LIMIT - 1)) "$(grep -c ' allowed=1 ' <<<"$c")"
check_eq "6: CLI process on Redis: remaining counts down" "$(seq $((LIMIT - 2)) -1 0 | tr '\n' ' ')" \
  "$(sed -n 's/.* remaining=\([0-9]*\) .*/\1/p' <<<"$c" | tr '\n' ' ')"
r=$(fcgi b fleet)
elapsed=$(( $(date +%s) - started + 1 ))
check_eq "6: fpm pool b after the CLI: Status" "429 Too Many Requests" "$(header Status "$r")"
check_range "6: Retry-After (one token)" $((TOKEN_S - elapsed)) $TOKEN_S "$(header Retry-After "$r")"
out="$e2e_tmp/out6"   # (5 reused $out for its output)
burst "$out" fleet2 10 5 100
check_eq "6: answers (10 + 10 fpm requests, 5 CLI x 2)" 30 "$(grep -c '^srl ' <<<"$all")"
check_eq "6: admitted fleet-wide" $LIMIT "$(grep -c '^srl .* allowed=1 ' <<<"$all")"
check_eq "6: every denied fpm request answered 429" \
  "$(cat "$out"/a* "$out"/b* | grep -c '^srl .* allowed=0 ')" \
  "$(cat "$out"/a* "$out"/b* | tr -d '\r' | grep -c '^Status: 429 Too Many Requests$')"
check_eq "6: rlctl info URI: allowed" $((2 * LIMIT)) "$(rlctl_count "$srl_redis" allowed)"
local6=$(rlctl_count "$srl_name" denied)
check_eq "6: Redis's denials + the host tier's local answers" $((1 + 30 - LIMIT)) \
  "$(count_sum "$(rlctl_count "$srl_redis" denied)" "$local6")"
check_range "6: ... of which answered on the host" 1 $((1 + 30 - LIMIT - 1)) "$local6"
check_eq "6: ... each one an acquire() with 'local' => true" "$local6" \
  "$(grep -c '^srl .* allowed=0 .* local=1 ' <<<"$all")"
check_eq "6: rlctl list URI: keys" 2 \
  "$("$SRL_RLCTL" list "$srl_redis" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["visited"])')"
check_eq "6: the segment is untouched: allowed" 40 "$(rlctl_count "$seg_name" allowed)"
php_redis() { # php_redis CODE: run a snippet with $u the uri, print its output
  U="$srl_redis" RPID="$redis_pid" RSOCK="$redis_sock" LD_LIBRARY_PATH="$SRL_LIBDIR" \
    as_worker php -n -d extension=ffi -d ffi.enable=1 -r '
    require getenv("SRL_PHP_DIR") . "/Srl.php"; $u = getenv("U");
    try { '"$1"'; } catch (Throwable $e) { echo get_class($e), " ", $e->getCode(), " ", $e->getMessage(), "\n"; }'
}
check_eq "6: a segment-only option with redis is refused, named" \
  "InvalidArgumentException 0 key_display is for a segment; a Redis store (redis=) keeps every key whole" \
  "$(php_redis 'new Srl("x", "token_bucket:20/1d", 1024, ["redis" => $u, "key_display" => 8])')"
check_eq "6: another policy under the prefix: SRL_EMISMATCH, naming the key and the policy" \
  "SrlException -9 srl: open redis store 'x': segment exists with a different policy or geometry: e2e-php:cfg holds another policy than this limiter's 'token_bucket:21/1d' (rlctl URI info shows it)" \
  "$(php_redis 'new Srl("x", "token_bucket:21/1d", 1024, ["redis" => $u])')"
check_eq "6: a bad uri: SRL_EINVAL with the reason" \
  "SrlException -1 srl: redis uri: port must be 1..65535, not '99999'" \
  "$(php_redis 'new Srl("x", "token_bucket:20/1d", 1024, ["redis" => "redis://h:99999"])')"
tiers=$(php_redis '
  $s = new Srl("xt", "token_bucket:20/1d", 1024,
               ["redis" => "unix://" . getenv("RSOCK") . "?prefix=e2e-tiers",
                "tiers" => ["one" => "token_bucket:1/1d"]]);
  foreach ([["k", "one"], ["k", "one"], ["k", "one"], ["k", null]] as [$k, $t]) {
    $d = $s->acquire($k, 1, $t);
    echo ($d["allowed"] ? 1 : 0), ($d["local"] ? "L" : ""), " ";
  }')
check_eq "6: tiers with redis (the fronted store): tier one admits 1, then Redis denies, then the host; default admits" \
  "1 0 0L 1 " "$tiers"
conc=$(php_redis '
  $s = new Srl("xc", "concurrency:2", 1024,
               ["redis" => "unix://" . getenv("RSOCK") . "?prefix=e2e-conc"]);
  $a = $s->enter("k"); $b = $s->enter("k"); $c = $s->enter("k", $d);
  echo ($a ? 1 : 0), ($b ? 1 : 0), ($c ? 1 : 0), " ", ($d["allowed"] ? 1 : 0), " ";
  echo ($a->leave() ? 1 : 0), " ", ($s->enter("k") ? 1 : 0);')
check_eq "6: concurrency:2 with redis (Redis alone holds the units): 2 of 3 enter; a leave frees one" \
  "110 0 1 1" "$conc"
check_eq "6: ... and no host segment was made for it" absent \
  "$([ -e /dev/shm/xc ] && echo present || echo absent)"
fault=$(php_redis '
  $s = new Srl("x", "token_bucket:20/1d", 1024,
               ["redis" => "unix://" . getenv("RSOCK") . "?prefix=e2e-fault&timeout_ms=200",
                "on_full" => "deny"]);
  $show = function ($d) { echo ($d["allowed"] ? 1 : 0), " ", ($d["degraded"] ? 1 : 0), "\n"; };
  $show($s->acquire("k"));
  shell_exec("kill -STOP " . getenv("RPID"));
  $t = microtime(true);
  $show($s->acquire("k"));
  echo (microtime(true) - $t < 5 ? "bounded" : "slow"), "\n";
  shell_exec("kill -CONT " . getenv("RPID"));
  $show($s->acquire("k"));
  shell_exec("kill -KILL " . getenv("RPID"));
  $show($s->acquire("k"));' 2>&1)
check_eq "6: Redis answering: allowed, not degraded" "1 0" "$(sed -n 1p <<<"$fault")"
check_eq "6: Redis stopped: on_full deny, degraded, no exception" "0 1" "$(sed -n 2p <<<"$fault")"
check_eq "6: ... answered within the timeout, not hung" bounded "$(sed -n 3p <<<"$fault")"
check_eq "6: Redis resumed: allowed again" "1 0" "$(sed -n 4p <<<"$fault")"
check_eq "6: Redis killed (SRL_ESYS): on_full deny, degraded, no exception" "0 1" \
  "$(sed -n 5p <<<"$fault")"

# --- 7: tiers (CLI processes; the segment is made by the first)
php_tiers() { # php_tiers CODE: run a snippet with $s the tiered limiter
  SRL_NAME="$seg_name-tiers" LD_LIBRARY_PATH="$SRL_LIBDIR" as_worker php -n -d extension=ffi \
    -d ffi.enable=1 -r '
    require getenv("SRL_PHP_DIR") . "/Srl.php";
    try {
      $s = new Srl(getenv("SRL_NAME"), "token_bucket:2/1d", 1024,
                   ["tiers" => ["paid" => "token_bucket:5/1d"]]);
      '"$1"';
    } catch (Throwable $e) { echo get_class($e), " ", $e->getCode(), " ", $e->getMessage(), "\n"; }'
}
hammer='for ($i = 0; $i < 10; $i++) { foreach (["f1" => null, "f2" => "default", "p1" => "paid"] as $k => $t) {
          $d = $s->acquire($k, 1, $t); if ($d["allowed"]) echo "$k\n"; } }'
php_tiers "$hammer" >"$e2e_tmp/t1" 2>&1 & t1=$!
php_tiers "$hammer" >"$e2e_tmp/t2" 2>&1 & t2=$!
wait "$t1" "$t2"
tiers_out=$(cat "$e2e_tmp/t1" "$e2e_tmp/t2")
check_eq "7: two processes, default tier (no tier argument): admitted 2" 2 "$(grep -c '^f1$' <<<"$tiers_out")"
check_eq "7: default tier by name: admitted 2" 2 "$(grep -c '^f2$' <<<"$tiers_out")"
check_eq "7: paid tier: admitted 5" 5 "$(grep -c '^p1$' <<<"$tiers_out")"
check_eq "7: nothing else printed" 9 "$(wc -l <<<"$tiers_out")"
check_eq "7: a key moved from default (2 of 2 used) to paid gets 5 - 2 more" 3 \
  "$(php_tiers '$n = 0; for ($i = 0; $i < 10; $i++) $n += $s->acquire("f1", 1, "paid")["allowed"] ? 1 : 0; echo $n, "\n";')"
check_eq "7: an unknown tier: SrlException SRL_ENOENT" \
  "SrlException -7 srl: no tier 'gold' in this limiter" "$(php_tiers '$s->acquire("k", 1, "gold")')"
check_eq "7: cost above the tier's permits: SRL_ECOST" "SrlException -3" \
  "$(php_tiers '$s->acquire("k", 3)' | cut -d' ' -f1,2)"
info=$(rlctl_as_owner info "$seg_name-tiers")
check_eq "7: rlctl info: default tier's keys" "tier 0:         default = token_bucket:2/1d (1 key)" \
  "$(grep '^tier 0:' <<<"$info")"
check_eq "7: rlctl info: paid tier's keys" "tier 1:         paid = token_bucket:5/1d (2 keys)" \
  "$(grep '^tier 1:' <<<"$info")"

stop_pid "$fpm_pid" QUIT
check_eq "php-fpm stopped by its pid" gone "$(kill -0 "$fpm_pid" 2>/dev/null && echo running || echo gone)"
e2e_finish
