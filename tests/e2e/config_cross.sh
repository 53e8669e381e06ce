#!/usr/bin/env bash
# config_cross.sh - one configuration text, five callers: the same specs,
# good and bad, given to the library (srl-config-check), Python
# (srl.Limiter.anonymous(spec)), PHP (new Srl($name, $spec), and
# srl_config_parse through its FFI), mod_srl (`apache2 -t` of
# "SrlLimiter NAME SPEC") and rlctl (create, the spec's words as its
# options) must be accepted alike, and a refusal must carry the library's
# offset and message wherever the caller shows them:
#   Python    "... at byte OFFSET: MESSAGE"          (offset and message)
#   PHP       "srl: policy 'SPEC': MESSAGE"; FFI's err.offset (both)
#   mod_srl   MESSAGE; "at byte OFFSET" for a bad policy argument
#   rlctl     exit 64 naming the option (its words: --capacity ...)
# The library's own verdicts are check_config's; here they are the
# reference every caller is held to.
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
need "$SRL_CONFIG_CHECK" "$SRL_MOD" "$SRL_RLCTL" "$SRL_LIBDIR/libsrl.so.0" /usr/sbin/apache2 \
  /usr/lib/apache2/modules/mod_mpm_prefork.so
e2e_tmpdir cross
e2e_port=$(free_port)
token="srl-e2e-cross-$$"

specs=(
  "token_bucket:100/1m capacity=64 key_display=32 on_full=deny tier.paid=token_bucket:10000/1m"
  "token_bucket:10/1s,burst=20+token_bucket:1000/1d capacity=64"
  "gcra:5/1s capacity=64 lockfree=on flood_cache=yes"
  "sliding_log:5/15m capacity=1k mode=0600"
  "100/1m capacity=64 ON_FULL=Deny"
  "tokenbucket:100/1m capacity=64"
  "100/1m capasity=64"
  "100/1m capacity=0"
  "100/1m capacity=64 key_display=256"
  "100/1m capacity=64 on_full=maybe"
  "100/1m capacity=64 tier.default=5/1s"
  "100/1m capacity=64 tier.x=5/1min"
  "token_bucket:5/1s capacity=64 lockfree=on"
  "100/1m capacity=64 tier.a=1/1s tier.a=2/1s"
  "concurrency:4 capacity=64 tier.a=5/1s"
  "100/1m capacity=64 mode=0999"
)
good=0 bad=0
for i in "${!specs[@]}"; do
  spec=${specs[$i]} name="/$token-$i"
  e2e_segments+=("$name")
  c=$("$SRL_CONFIG_CHECK" "$spec")
  case $c in
    ok\ *) verdict=ok; good=$((good + 1)) ;;
    error\ *) verdict=error; bad=$((bad + 1))
      read -r _ off len msg <<<"$c" ;;
    *) fail "[$i] srl-config-check: $c"; continue ;;
  esac

  # Python
  py=$(PYTHONPATH="$SRL_PYTHONPATH" python3 -c '
import sys, srl
try:
    srl.Limiter.anonymous(sys.argv[1]).close(); print("ok")
except srl.Error as e:
    print("error", e.message)
except ValueError as e:
    print("error", e)' "$spec" 2>&1)
  # PHP: the constructor, and the offset through the FFI declaration
  php=$(LD_LIBRARY_PATH="$SRL_LIBDIR" php -n -d extension=ffi -d ffi.enable=1 -r '
    require getenv("SRL_PHP_DIR") . "/Srl.php";
    [$n, $spec] = [$argv[1], $argv[2]];
    $ffi = Srl::ffi(); $c = $ffi->new("srl_config"); $e = $ffi->new("srl_policy_error");
    $rc = $ffi->srl_config_parse(FFI::addr($c), $spec, FFI::addr($e));
    $ffi->srl_config_free(FFI::addr($c));
    try { (new Srl($n, $spec))->close(); echo "ok\n"; }
    catch (Throwable $x) { echo "error ", $e->offset, " ", $x->getMessage(), "\n"; }' \
    -- "$name" "$spec" 2>&1)
  srl_unlink_name=${name#/}; rm -f "/dev/shm/$srl_unlink_name"
  # mod_srl: apache2 -t (its first pass creates nothing)
  apache_check_conf prefork "SrlLimiter $name $spec"
  ap=$(/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/check.conf" -t 2>&1); aprc=$?

  if [ "$verdict" = ok ]; then
    check_eq "[$i] Python accepts '$spec'" ok "$py"
    check_eq "[$i] PHP accepts '$spec'" ok "$php"
    check_eq "[$i] mod_srl accepts '$spec' (apache2 -t)" 0 "$aprc"
  else
    check_eq "[$i] Python: '$spec' refused at byte $off: $msg" 1 \
      "$(grep -cF "at byte $off: $msg" <<<"$py")"
    check_eq "[$i] PHP: '$spec' refused at byte $off with the library's message" \
      "error $off srl: policy '$spec': $msg" "$php"
    check_eq "[$i] mod_srl: '$spec' refused (apache2 -t)" 1 "$aprc"
    check_eq "[$i] mod_srl: the library's message" 1 "$(grep -cF "$msg" <<<"$ap")"
    if grep -q "bad policy" <<<"$ap"; then
      check_eq "[$i] mod_srl: at the library's byte" 1 "$(grep -cF "at byte $off:" <<<"$ap")"
    fi
  fi

  # rlctl create: only specs of the options it has (the spec's words as its own)
  args=() rl=yes first=1
  for w in $spec; do
    if [ $first = 1 ]; then args+=(--policy "$w"); first=0; continue; fi
    case ${w%%=*} in
      capacity) args+=(--capacity "${w#*=}") ;;
      key_display) args+=(--key-display "${w#*=}") ;;
      mode) args+=(--mode "${w#*=}") ;;
      on_full) args+=(--on-full "${w#*=}") ;;
      tier.*) t=${w#tier.}; args+=(--tier "${t%%=*}=${w#*=}") ;;
      *) rl=no ;;
    esac
  done
  if [ $rl = yes ]; then
    out=$("$SRL_RLCTL" create "$name" "${args[@]}" 2>&1); rc=$?
    rm -f "/dev/shm/${name#/}"
    if [ "$verdict" = ok ]; then
      check_eq "[$i] rlctl create accepts '$spec'" 0 "$rc"
    else
      check_eq "[$i] rlctl create refuses '$spec' (EX_USAGE)" 64 "$rc"
      check_eq "[$i] rlctl names the bad option" 1 \
        "$(grep -cE '^rlctl: create: --(policy|capacity|key-display|mode|on-full|tier):' <<<"$out")"
    fi
  fi
done
check_eq "specs the library accepts" 5 "$good"
check_eq "specs the library refuses" 11 "$bad"
e2e_finish
