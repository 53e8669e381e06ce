#!/usr/bin/env bash
# apache.sh MPM - mod_srl in a throwaway apache2 (MPM = prefork or event).
#
# Starts Debian's apache2 on 127.0.0.1:<free port> with its own ServerRoot
# and configuration in a temporary directory, the workers running as
# www-data, one limiter (token_bucket:10/1d, so nothing refills during the
# test) applied in several ways, and checks, with exact counts:
#   A  key ip, sequential: exactly 10 x 200 then 429s; RateLimit r counts
#      down 9..0; 429s carry Retry-After (one token: 8640 s, rounded up),
#      RateLimit r=0;t=Retry-After, and every answer RateLimit-Policy
#   B  key header:X-Key, 30 requests over 30 held connections: exactly 10
#      admitted, by more than one child (%P in the access log)
#   Q  lockfree=on flood_cache=on on a gcra limiter: a key's first request,
#      then 29 at once over held connections: exactly 10 admitted in all,
#      20 refused with Retry-After, rlctl info allowed 10; then 20 more at
#      once: all refused; lockfree=on on a limiter with no gcra limit and
#      flood_cache=maybe are refused at configuration time, saying why;
#      the paths are really on in the workers: srl-metrics' (a worker's)
#      srl_handle_lockfree and srl_handle_flood_cache are 1 for it and 0
#      for a limiter without the options (srl_info.flags of the handle),
#      and the parent logged both as on when it opened the segment
#   C  a directory (DirectoryIndex: a subrequest and a redirect per
#      request, into a <Location> of their own, so httpd runs the access
#      phase for them again): still exactly 10 admitted, once per request
#   D  key expr:, SrlCost 2: exactly 5 admitted, Retry-After of 2 tokens
#   E  key env: (SetEnvIf), SrlDryRun On: all 200, no RateLimit headers,
#      SRL_LIMITED=1 logged for exactly the 3 over the limit, 3 log lines,
#      rlctl info's would_deny 3 (the library counts them: SRL_CONFIG_DRY_RUN)
#   F  SrlLimit off below a server-wide SrlLimit: not counted, no headers
#   T  tiers: a limiter with tier=paid=... tier=vip=...; SrlTier header:X-Plan
#      (the value names the tier) and SrlTier header:X-Plan gold=vip (a map):
#      each key admitted exactly its tier's limit (2, 5, 8; no header, an
#      unmapped value or an unknown tier: the default), RateLimit-Policy
#      is the tier's; a key moved from default (2 of 2 used) to paid gets 3
#      more; rlctl info counts the keys per tier
#   X  two 5000-byte keys differing in the last byte count apart (srl_key_fit),
#      an empty key is not limited
#   L  SrlStatus 503 answers a refusal with 503; policy_name= is the name in
#      RateLimit-Policy and RateLimit; the refusal's log line has key and URI
#   J  a full table (capacity 1 = one bucket): with SrlOnFull deny exactly
#      the table's slots of 40 new keys are admitted, the rest get 429;
#      with on_full=allow all pass; rlctl counts the on_full decisions
#   G  graceful restart (apache2 -k graceful, i.e. SIGUSR1): the exhausted
#      key stays exhausted, a new key starts fresh
#   P  a graceful restart with the limit raised under the same name
#      (token_bucket:10/1d -> 20/1d): a key that had used 10 of 10 gets
#      exactly 10 more, not 20; a new key gets 20; RateLimit-Policy says 20;
#      one child logs the change, rlctl info shows generation 1; then a
#      restart with another capacity is refused by `-k graceful` itself
#      (exit 1, stderr says what differs), the server is not signalled
#   R  SrlRefund "%{REQUEST_STATUS} -lt 400": 200s give their permit back
#      in the log phase, 404s keep it: 3 200s, 3 404s, then 429
#   H  rlctl info on the segment: allowed/denied/used agree exactly, and
#      rlctl list has each key (the exact bytes mod_srl used) with its counts;
#      the segment belongs to the workers' user, mode 0600
#   K  SetHandler srl-metrics: 200, Prometheus text promtool and
#      prometheus_client accept, the counts of H, byte-identical to `rlctl
#      metrics` of the same segments, then mod_srl's srl_handle_* gauges only
#   I  after the stop, the same name with another capacity: apache2 refuses
#      to start, saying on stderr why and how to fix it; `apache2 -k start`
#      and `apache2 -t` themselves exit 1 (the check runs in check_config,
#      before it detaches); `-k stop` is not refused
# plus: `apache2 -t` (config check only) creates no segment, and a
# SrlLimit naming no limiter is refused at configuration time.
mpm=${1:?usage: apache.sh prefork|event}
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
need "$SRL_MOD" "$SRL_RLCTL" /usr/sbin/apache2 /usr/lib/apache2/modules/mod_mpm_$mpm.so

LIMIT=10
TOKEN_S=8640              # 1d / 10: the wait for one token
e2e_tmpdir "apache-$mpm"
e2e_port=$(free_port)
token="srl-e2e-ap-$mpm-$$"
name="/$token"
e2e_segments+=("$name" "$name-fd" "$name-fa" "$name-st" "$name-dl" "$name-ti" "$name-rf" "$name-pc"
              "$name-lf" "$name-lk")
started=$(date +%s)

mkdir -p "$e2e_tmp/htdocs/dir"
for f in ip cost dry free fulld fulla st delay tier tiern pc lf long; do echo "$f" >"$e2e_tmp/htdocs/$f"; done
mkdir -p "$e2e_tmp/htdocs/refund" && echo ok >"$e2e_tmp/htdocs/refund/ok"
echo hdr >"$e2e_tmp/htdocs/hdr"
echo index >"$e2e_tmp/htdocs/dir/index.html"

body="SrlLimiter $name token_bucket:$LIMIT/1d 4096 key_display=32
SetEnvIf X-Env-Key \"^(.+)\$\" SRL_KEY_ENV=\$1
DirectoryIndex index.html
SrlLimit $name
SrlKey header:X-Key
<Location /ip>
    SrlKey ip
</Location>
<Location /cost>
    SrlKey \"expr:cost-%{REMOTE_ADDR}\"
    SrlCost 2
</Location>
<Location /dry>
    SrlKey env:SRL_KEY_ENV
    SrlDryRun On
</Location>
<Location /free>
    SrlLimit off
</Location>
<Location /dir/index.html>
    SrlCost 1
</Location>
SrlOnFull deny
SrlWarnInterval 1
SrlLimiter $name-fd token_bucket:$LIMIT/1d 1
SrlLimiter $name-fa token_bucket:$LIMIT/1d 1 on_full=allow
<Location /fulld>
    SrlLimit $name-fd
</Location>
<Location /fulla>
    SrlLimit $name-fa
</Location>
<Location /srl-metrics>
    SrlLimit off
    SetHandler srl-metrics
</Location>
SrlLimiter $name-st token_bucket:1/1d 16 policy_name=custom-L
<Location /st>
    SrlLimit $name-st
    SrlStatus 503
</Location>
SrlLimiter $name-rf token_bucket:3/1d 16 key_display=32
<Location /refund>
    SrlLimit $name-rf
    SrlKey header:X-Key
    SrlRefund \"%{REQUEST_STATUS} -lt 400\"
</Location>
SrlLimiter $name-dl token_bucket:2/8s 16 key_display=32
<Location /delay>
    SrlLimit $name-dl
    SrlKey header:X-Key
    SrlDelay 5s
</Location>
SrlLimiter $name-ti token_bucket:2/1d 64 tier=paid=token_bucket:5/1d tier=vip=token_bucket:8/1d
<Location /tiern>
    SrlLimit $name-ti
    SrlTier header:X-Plan
</Location>
<Location /tier>
    SrlLimit $name-ti
    SrlTier header:X-Plan gold=vip
</Location>
SrlLimiter $name-pc token_bucket:$LIMIT/1d 64 key_display=32
<Location /pc>
    SrlLimit $name-pc
    SrlKey header:X-Key
</Location>
SrlLimiter $name-lf gcra:$LIMIT/1d 64 key_display=32 lockfree=on flood_cache=on
<Location /lf>
    SrlLimit $name-lf
    SrlKey header:X-Key
</Location>
SrlLimiter $name-lk token_bucket:2/1d 16 key_display=32
<Location /long>
    SrlLimit $name-lk
    SrlKey header:X-Key
</Location>"

# --- configuration-time behaviour, before any server runs
apache_check_conf "$mpm" "$body"
out=$(/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/check.conf" -t 2>&1); rc=$?
check_eq "apache2 -t accepts the configuration (exit status)" 0 "$rc"
check_eq "apache2 -t created no segment (first pass only)" absent \
  "$([ -e "/dev/shm/$token" ] && echo present || echo absent)"
sed "s|^SrlLimit $name\$|SrlLimit /no-such-limiter|" "$e2e_tmp/check.conf" >"$e2e_tmp/bad.conf"
out=$(/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/bad.conf" -t 2>&1); rc=$?
check_eq "SrlLimit of an undeclared limiter is refused (exit status)" 1 "$rc"
check_eq "the refusal names the problem" 1 "$(grep -c 'SrlLimit /no-such-limiter: no such limiter' <<<"$out")"
sed "s|^SrlLimiter $name token_bucket:$LIMIT/1d |SrlLimiter $name tokenbucket:$LIMIT/1d |" \
  "$e2e_tmp/check.conf" >"$e2e_tmp/badpolicy.conf"
out=$(/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/badpolicy.conf" -t 2>&1); rc=$?
check_eq "SrlLimiter with a misspelt algorithm is refused (exit status)" 1 "$rc"
check_eq "the refusal names the bad part and the fix" 1 \
  "$(grep -cF "SrlLimiter $name: bad policy 'tokenbucket:$LIMIT/1d' at byte 0: unknown algorithm 'tokenbucket' (did you mean token_bucket?)" <<<"$out")"
sed "s|^SrlLimiter $name-pc token_bucket:$LIMIT/1d 64 key_display=32\$|& lockfree=on|" \
  "$e2e_tmp/check.conf" >"$e2e_tmp/badlf.conf"
out=$(/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/badlf.conf" -t 2>&1); rc=$?
check_eq "Q: lockfree=on on a limiter with no gcra limit is refused (exit status)" 1 "$rc"
check_eq "Q: the refusal says lockfree decides gcra only, and the fix" 1 \
  "$(grep -cF "SrlLimiter $name-pc: lockfree=on decides gcra limits only, and 'token_bucket:$LIMIT/1d' has none in any tier: use gcra:N/W, or drop lockfree=" <<<"$out")"
sed "s|flood_cache=on|flood_cache=maybe|" "$e2e_tmp/check.conf" >"$e2e_tmp/badfc.conf"
out=$(/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/badfc.conf" -t 2>&1); rc=$?
check_eq "Q: flood_cache=maybe is refused (exit status)" 1 "$rc"
check_eq "Q: the refusal says what flood_cache takes" 1 \
  "$(grep -cF "SrlLimiter $name-lf: flood_cache must be on or off" <<<"$out")"
sed "s|SrlDelay 5s|SrlDelay 2h|" "$e2e_tmp/check.conf" >"$e2e_tmp/baddelay.conf"
out=$(/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/baddelay.conf" -t 2>&1); rc=$?
check_eq "SrlDelay above 1h is refused (exit status)" 1 "$rc"
check_eq "the refusal says what SrlDelay takes" 1 \
  "$(grep -cF "SrlDelay '2h' must be off or a duration up to 1h" <<<"$out")"

apache_start "$mpm" "$body"
policy="\"$token\";q=$LIMIT;w=86400"

# count_status STATUS LINES: how many responses had that status.
count_status() { awk -F'\t' -v s="$1" '$1 == s' <<<"$2" | wc -l; }

# --- A: key ip, sequential
a=$(http seq $((LIMIT + 3)) /ip)
check_eq "A: statuses in order (10 x 200, then 3 x 429)" \
  "$(printf '200 %.0s' $(seq $LIMIT))429 429 429" "$(cut -f1 <<<"$a" | tr '\n' ' ' | sed 's/ $//')"
check_eq "A: RateLimit r on the admitted counts down 9..0" "9 8 7 6 5 4 3 2 1 0" \
  "$(head -$LIMIT <<<"$a" | cut -f3 | sed 's/.*;r=\([0-9]*\);.*/\1/' | tr '\n' ' ' | sed 's/ $//')"
check_eq "A: every answer has RateLimit-Policy $policy" $((LIMIT + 3)) \
  "$(cut -f4 <<<"$a" | grep -cxF "$policy")"
check_eq "A: admitted answers carry no Retry-After" $LIMIT "$(head -$LIMIT <<<"$a" | cut -f2 | grep -cx -- -)"
elapsed=$(( $(date +%s) - started + 1 ))
while IFS=$'\t' read -r st ra rl pol; do
  check_range "A: 429 Retry-After (one token, less the seconds elapsed)" $((TOKEN_S - elapsed)) $TOKEN_S "$ra"
  check_eq "A: 429 RateLimit" "\"$token\";r=0;t=$ra" "$rl"
done <<<"$(tail -3 <<<"$a")"

# --- T: tiers
tier_ok() { count_status 200 "$(http seq 12 "$1" "X-Key: $2" ${3:+"X-Plan: $3"})"; }
check_eq "T: no X-Plan: the default tier's 2" 2 "$(tier_ok /tiern t-free)"
check_eq "T: X-Plan: paid: paid's 5" 5 "$(tier_ok /tiern t-paid paid)"
check_eq "T: X-Plan: vip: vip's 8" 8 "$(tier_ok /tiern t-vip vip)"
check_eq "T: X-Plan: nosuch (no such tier): the default's 2" 2 "$(tier_ok /tiern t-nosuch nosuch)"
check_eq "T: mapped X-Plan: gold -> vip: 8" 8 "$(tier_ok /tier t-gold gold)"
check_eq "T: unmapped X-Plan: paid (the map has gold only): the default's 2" 2 \
  "$(tier_ok /tier t-unmapped paid)"
check_eq "T: RateLimit-Policy of a paid request is paid's" "\"$token-ti\";q=5;w=86400" \
  "$(http seq 1 /tiern "X-Key: t-hdr" "X-Plan: paid" | cut -f4)"
check_eq "T: a key moved from default (2 of 2 used) to paid gets 5 - 2 more" 3 \
  "$(tier_ok /tiern t-free paid)"
tinfo=$(rlctl_as_owner info "$name-ti")
check_eq "T: rlctl info: default tier's keys" "tier 0:         default = token_bucket:2/1d (2 keys)" \
  "$(grep '^tier 0:' <<<"$tinfo")"
check_eq "T: rlctl info: paid tier's keys" "tier 1:         paid = token_bucket:5/1d (3 keys)" \
  "$(grep '^tier 1:' <<<"$tinfo")"
check_eq "T: rlctl info: vip tier's keys" "tier 2:         vip = token_bucket:8/1d (2 keys)" \
  "$(grep '^tier 2:' <<<"$tinfo")"

# --- B: key header, spread over the children
b=$(http hold $((3 * LIMIT)) /hdr "X-Key: hold-B")
check_eq "B: admitted of 30 concurrent requests" $LIMIT "$(count_status 200 "$b")"
check_eq "B: refused with 429" $((2 * LIMIT)) "$(count_status 429 "$b")"
check_eq "B: every 429 has a Retry-After" $((2 * LIMIT)) \
  "$(awk -F'\t' '$1 == 429 && $2 ~ /^[0-9]+$/' <<<"$b" | wc -l)"
# The access log is written after the response: wait (bounded) for the lines.
logged() { [ "$(awk -v f="$1" -v v="$2" '$f == v' "$e2e_tmp/access.log" | wc -l)" -ge "$3" ]; }
wait_until 20 logged 4 key=hold-B $((3 * LIMIT)) || fail "B: the access log lacks the 30 requests"
pids=$(awk '$2 == 200 && $4 == "key=hold-B" {print $1}' "$e2e_tmp/access.log" | sort -u | wc -l)
check_gt "B: distinct children (%P) among the admitted" 1 "$pids"
check_eq "B: access log agrees on the admitted" $LIMIT \
  "$(awk '$2 == 200 && $4 == "key=hold-B"' "$e2e_tmp/access.log" | wc -l)"

# --- Q: lockfree=on flood_cache=on (gcra): the first request inserts the
# key (under the lock); the concurrent ones find it, the lock-free path's case
q=$(http seq 1 /lf "X-Key: hold-Q")
check_eq "Q: the key's first request is admitted" 200 "$(cut -f1 <<<"$q")"
q=$(http hold $((3 * LIMIT - 1)) /lf "X-Key: hold-Q")
check_eq "Q: of 29 concurrent requests, admitted (10 in all)" $((LIMIT - 1)) "$(count_status 200 "$q")"
check_eq "Q: refused with 429" $((2 * LIMIT)) "$(count_status 429 "$q")"
check_eq "Q: every 429 has a Retry-After" $((2 * LIMIT)) \
  "$(awk -F'\t' '$1 == 429 && $2 ~ /^[0-9]+$/' <<<"$q" | wc -l)"
q=$(http hold $((2 * LIMIT)) /lf "X-Key: hold-Q")
check_eq "Q: 20 more at once once the key is spent: all refused" $((2 * LIMIT)) "$(count_status 429 "$q")"
check_eq "Q: rlctl info: allowed (admissions are never cached)" $LIMIT "$(rlctl_count "$name-lf" allowed)"
# Exact answers hold with the paths off too: that they are on is srl_info.flags
# of the worker's handle, which only the worker's srl-metrics page shows.
qm=$(curl -s "http://127.0.0.1:$e2e_port/srl-metrics")
# handle_flag FAMILY LIMITER: its sample's value on the page ("" if none).
handle_flag() { awk -v k="srl_handle_$1{segment=\"$2\"}" '$1 == k {print $2}' <<<"$qm"; }
for fam in lockfree flood_cache; do
  check_eq "Q: srl-metrics: srl_handle_$fam of $name-lf ($fam=on took effect in the worker)" 1 \
    "$(handle_flag $fam "$name-lf")"
  check_eq "Q: srl-metrics: srl_handle_$fam of $name (no $fam=)" 0 "$(handle_flag $fam "$name")"
done
check_eq "Q: the parent logged the lock-free path on" 1 \
  "$(grep -c "SrlLimiter $name-lf: lockfree=on: lock-free gcra path on" "$e2e_tmp/error.log")"
check_eq "Q: the parent logged the flood cache on" 1 \
  "$(grep -c "SrlLimiter $name-lf: flood_cache=on: denial-flood cache on" "$e2e_tmp/error.log")"
check_eq "Q: nothing asked for is off" 0 "$(grep -c "asked but off" "$e2e_tmp/error.log")"

# --- C: subrequests and internal redirects are not counted
c=$(http seq $((LIMIT + 3)) /dir/ "X-Key: dir-C")
check_eq "C: /dir/ (DirectoryIndex) admitted" $LIMIT "$(count_status 200 "$c")"
check_eq "C: /dir/ refused" 3 "$(count_status 429 "$c")"
check_eq "C: the 10th admitted still had r=0 left (one permit per request)" "\"$token\";r=0" \
  "$(sed -n ${LIMIT}p <<<"$c" | cut -f3 | sed 's/;t=.*//')"

# --- D: expression key, cost 2
d=$(http seq 7 /cost)
check_eq "D: cost 2 of 10 permits: admitted" 5 "$(count_status 200 "$d")"
check_eq "D: refused" 2 "$(count_status 429 "$d")"
elapsed=$(( $(date +%s) - started + 1 ))
check_range "D: Retry-After for 2 tokens" $((2 * TOKEN_S - elapsed)) $((2 * TOKEN_S)) "$(tail -1 <<<"$d" | cut -f2)"

# --- E: dry run
e=$(http seq $((LIMIT + 3)) /dry "X-Env-Key: dry-E")
check_eq "E: dry run answers all with 200" $((LIMIT + 3)) "$(count_status 200 "$e")"
check_eq "E: dry run sends no RateLimit header" $((LIMIT + 3)) "$(cut -f3 <<<"$e" | grep -cx -- -)"
wait_until 20 logged 5 env=dry-E $((LIMIT + 3)) || fail "E: the access log lacks the requests"
check_eq "E: SRL_LIMITED=1 logged for the requests over the limit" 3 \
  "$(grep -c 'env=dry-E limited=1$' "$e2e_tmp/access.log")"
check_eq "E: SRL_LIMITED unset for the others" $LIMIT \
  "$(grep -c 'env=dry-E limited=-$' "$e2e_tmp/access.log")"
check_eq "E: one dry-run line per would-be 429 in the error log" 3 \
  "$(grep -c "SrlLimit $name: dry run: would answer 429" "$e2e_tmp/error.log")"
check_eq "E: rlctl info: would deny (the library's dry-run count, SrlDryRun's handle)" 3 \
  "$(rlctl_count "$name" would_deny)"

# --- F: SrlLimit off
f=$(http seq 5 /free "X-Key: free-F")
check_eq "F: SrlLimit off: all admitted" 5 "$(count_status 200 "$f")"
check_eq "F: SrlLimit off: no RateLimit header" 5 "$(cut -f3 <<<"$f" | grep -cx -- -)"

# --- L: SrlStatus, policy_name=, the refusal's log line names key and URI
l=$(http seq 2 /st "X-Key: st-L")
check_eq "L: SrlStatus 503: statuses" "200 503" "$(cut -f1 <<<"$l" | tr '\n' ' ' | sed 's/ $//')"
check_eq "L: policy_name= names the RateLimit-Policy" 2 "$(cut -f4 <<<"$l" | grep -c '^"custom-L";')"
check_eq "L: policy_name= names the RateLimit field" 2 "$(cut -f3 <<<"$l" | grep -c '^"custom-L";')"
check_eq "L: the refusal is logged with its key and URI" 1 \
  "$(grep -c "SrlLimit $name-st: 503 to 127.0.0.1 for key \"st-L\" on /st" "$e2e_tmp/error.log")"

# --- X: keys over 4096 bytes are srl_key_fit's (head + hash of the whole
# key), so two 5000-byte keys that differ only in their last byte count
# apart (cut to 4096 they were one key); an empty key is not limited
long=$(head -c 4999 /dev/zero | tr '\0' L)
xa=$(http seq 3 /long "X-Key: ${long}a")
xb=$(http seq 3 /long "X-Key: ${long}b")
check_eq "X: 5000-byte key ...a: statuses" "200 200 429" "$(cut -f1 <<<"$xa" | xargs)"
check_eq "X: 5000-byte key ...b (differs in the last byte): statuses" "200 200 429" \
  "$(cut -f1 <<<"$xb" | xargs)"
xe=$(http seq 3 /long "X-Key: ")
check_eq "X: an empty key: not limited, no RateLimit header" "200 200 200 - - -" \
  "$(cut -f1 <<<"$xe" | xargs) $(cut -f3 <<<"$xe" | xargs)"
check_eq "X: rlctl info: keys tracked (the two fitted keys)" 2 "$(rlctl_count "$name-lk" used)"
check_eq "X: rlctl list: each key is 4096 bytes (fitted), shown by its head" \
  "4096 LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL
4096 LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL" \
  "$(rlctl_as_owner list "$name-lk" --json | python3 -c '
import json, sys
for k in json.load(sys.stdin)["keys"]:
    print(k["key_len"], k["key"])')"

# --- J: a full table (capacity 1: one bucket of slots_per_bucket slots)
for lim in fd fa; do
  slots=$(rlctl_count "$name-$lim" capacity)
  j=$(http seq 40 /full${lim#f} "X-Key: full-{i}")
  if [ $lim = fd ]; then
    check_eq "J: SrlOnFull deny: rlctl info on_full" deny "$(rlctl_count "$name-$lim" on_full)"
    check_eq "J: on_full deny: 40 new keys, admitted = the table's slots" "$slots" "$(count_status 200 "$j")"
    check_eq "J: on_full deny: refused with 429" $((40 - slots)) "$(count_status 429 "$j")"
  else
    check_eq "J: on_full=allow overrides SrlOnFull: rlctl info on_full" allow "$(rlctl_count "$name-$lim" on_full)"
    check_eq "J: on_full allow: all 40 admitted" 40 "$(count_status 200 "$j")"
  fi
  check_eq "J: $lim: rlctl info: keys tracked = slots" "$slots" "$(rlctl_count "$name-$lim" used)"
  check_eq "J: $lim: rlctl info: decided by on_full" $((40 - slots)) "$(rlctl_count "$name-$lim" full)"
done

# --- W: the parent logs the full table (load, untracked) at warn level,
# once per interval, and leaves the healthy limiter alone
warned() { grep -q "\[srl:warn\].*SrlLimiter $name-fd: needs attention: load,untracked (used 16 of 16 slots" "$e2e_tmp/error.log"; }
wait_until 40 warned || fail "W: no warn-level 'needs attention' line for $name-fd"
warned && ok "W: the full limiter $name-fd is logged at warn level"
check_eq "W: the healthy limiter $name is not logged" 0 "$(grep -c "SrlLimiter $name: needs attention" "$e2e_tmp/error.log")"

full_logged() { [ "$(awk '$4 ~ /^key=full-/' "$e2e_tmp/access.log" | wc -l)" -ge 80 ]; }
wait_until 20 full_logged || fail "G: the access log lacks J's 80 requests"
awk '{print $1}' "$e2e_tmp/access.log" | sort -u >"$e2e_tmp/pids.before"
# What `apachectl -k graceful` runs: a second apache2 that reads the
# configuration (pre-config pass only) and sends SIGUSR1 to the PidFile's pid.
/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/httpd.conf" -k graceful
check_eq "G: apache2 -k graceful (exit status)" 0 "$?"
second_generation() { [ "$(grep -c 'resuming normal operations' "$e2e_tmp/error.log")" -ge 2 ]; }
wait_until 20 second_generation || fail "G: no second generation after -k graceful"
wait_until 10 curl -s -o /dev/null "http://127.0.0.1:$e2e_port/free"
g=$(http seq 1 /ip)
check_eq "G: after a graceful restart the exhausted ip key is still refused" 429 "$(cut -f1 <<<"$g")"
g=$(http seq 2 /hdr "X-Key: after-G")
check_eq "G: a new key after the restart: statuses" "200 200" "$(cut -f1 <<<"$g" | tr '\n' ' ' | sed 's/ $//')"
check_eq "G: a new key after the restart: remaining" "9 8" \
  "$(cut -f3 <<<"$g" | sed 's/.*;r=\([0-9]*\);.*/\1/' | tr '\n' ' ' | sed 's/ $//')"
wait_until 20 logged 4 key=after-G 2 || fail "G: the access log lacks after-G"
check_eq "G: the new key was served by new-generation children only" 0 \
  "$(awk '$4 == "key=after-G" {print $1}' "$e2e_tmp/access.log" | grep -cxFf "$e2e_tmp/pids.before")"
check_eq "G: the parent survived the restart" "$apache_pid" "$(cat "$e2e_tmp/run/httpd.pid")"

# --- P: a graceful restart with a raised limit keeps each key's use
pc=$(http seq $((LIMIT + 2)) /pc "X-Key: pc-P")
check_eq "P: before the change: $LIMIT of $((LIMIT + 2)) admitted" $LIMIT "$(count_status 200 "$pc")"
sed -i "s|^SrlLimiter $name-pc token_bucket:$LIMIT/1d |SrlLimiter $name-pc token_bucket:$((2 * LIMIT))/1d |" \
  "$e2e_tmp/httpd.conf"
/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/httpd.conf" -k graceful
check_eq "P: apache2 -k graceful with the raised limit (exit status)" 0 "$?"
pc_changed() { grep -q "SrlLimiter $name-pc: policy changed to token_bucket:$((2 * LIMIT))/1d (generation 1)" "$e2e_tmp/error.log"; }
third_generation() { [ "$(grep -c 'resuming normal operations' "$e2e_tmp/error.log")" -ge 3 ]; }
wait_until 20 third_generation || fail "P: no third generation after -k graceful"
wait_until 20 pc_changed || fail "P: no child logged the policy change"
check_eq "P: exactly one child changed the policy (the others found it done)" 1 \
  "$(grep -c "SrlLimiter $name-pc: policy changed" "$e2e_tmp/error.log")"
check_eq "P: no child failed to change it" 0 "$(grep -c "cannot change the segment's policy" "$e2e_tmp/error.log")"
pc=$(http seq $((LIMIT + 3)) /pc "X-Key: pc-P")
check_eq "P: the key that used $LIMIT of $LIMIT gets exactly $LIMIT more, not $((2 * LIMIT))" \
  "$(printf '200 %.0s' $(seq $LIMIT))429 429 429" "$(cut -f1 <<<"$pc" | tr '\n' ' ' | sed 's/ $//')"
check_eq "P: RateLimit-Policy is the new limit's" "\"$token-pc\";q=$((2 * LIMIT));w=86400" \
  "$(head -1 <<<"$pc" | cut -f4)"
pc=$(http seq $((2 * LIMIT + 2)) /pc "X-Key: pc-P-new")
check_eq "P: a new key gets the new limit, $((2 * LIMIT))" $((2 * LIMIT)) "$(count_status 200 "$pc")"
check_eq "P: rlctl info: the policy's generation" 1 "$(rlctl_count "$name-pc" policy_gen)"
check_eq "P: rlctl info: allowed (10 + 10 + 20)" $((4 * LIMIT)) "$(rlctl_count "$name-pc" allowed)"
sed "s|^SrlLimiter $name-pc token_bucket:$((2 * LIMIT))/1d 64 |SrlLimiter $name-pc token_bucket:$((2 * LIMIT))/1d 128 |" \
  "$e2e_tmp/httpd.conf" >"$e2e_tmp/capacity.conf"
out=$(/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/capacity.conf" -k graceful 2>&1); rc=$?
check_eq "P: -k graceful with another capacity is refused (exit status)" 1 "$rc"
check_eq "P: the refusal says what differs and what to do" 1 \
  "$(grep -c "SrlLimiter $name-pc (.*): cannot open the segment: segment exists with a different policy or geometry.*; capacity: the segment holds 64 slots, this config asks for 128 keys.*rlctl create" <<<"$out")"
check_eq "P: the server was not signalled (still 3 generations)" 3 \
  "$(grep -c 'resuming normal operations' "$e2e_tmp/error.log")"
pc=$(http seq 1 /pc "X-Key: pc-P")
check_eq "P: the running server kept the raised limit (the key is still spent)" 429 "$(cut -f1 <<<"$pc")"

# --- M: SrlDelay 5s on token_bucket:2/8s (a token every 4 s): of 6 requests
# at once, 2 pass, the 3rd is delayed about 4 s and then served (200, not
# 429), the others would wait 8 s or more: 429.  A 4th request reaching
# the server s seconds after the first waits 8 - s: the counts hold while
# the 6 arrive within 3 s of each other (a loaded machine's spread; a
# 4 s delay with 3 s allowed, as before, left only 1 s).  The server's real
# clock is only checked loosely (at least 2 s, well under 20 s).
t0=$(date +%s%N)
m=$(http hold 6 /delay "X-Key: delay-M")
elapsed_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check_eq "M: SrlDelay: served (2 at once, 1 delayed)" 3 "$(count_status 200 "$m")"
check_eq "M: SrlDelay: refused (would wait longer than 5 s)" 3 "$(count_status 429 "$m")"
check_eq "M: every 429 has a Retry-After" 3 "$(awk -F'\t' '$1 == 429 && $2 != "-"' <<<"$m" | wc -l)"
check_range "M: the batch lasted the delay, loosely (ms)" 2000 20000 "$elapsed_ms"
check_eq "M: rlctl: the key's allowed/denied" 3/3 \
  "$(rlctl_key "$name-dl" delay-M allowed)/$(rlctl_key "$name-dl" delay-M denied)"

# --- R: SrlRefund "%{REQUEST_STATUS} -lt 400" on token_bucket:3/1d: only the
# 404s count.  The refund runs in the log phase, after the client has its
# answer, so the test waits (bounded) until rlctl shows all 3 given back
# before it goes on; then 3 misses take the 3 permits and keep them.
# (rlctl get's remaining is what a request of cost 1 would leave: 2 of 3.)
rf_remaining() {
  rlctl_as_owner get "$name-rf" refund-R --json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin).get("remaining"))'
}
r1=$(http seq 3 /refund/ok "X-Key: refund-R")
check_eq "R: three 200s" 3 "$(count_status 200 "$r1")"
rf_all_back() { [ "$(rf_remaining)" = 2 ]; }
wait_until 10 rf_all_back
check_eq "R: each 200 gave its permit back (a request would leave 2 of 3)" 2 "$(rf_remaining)"
r2=$(http seq 3 /refund/missing "X-Key: refund-R")
check_eq "R: three 404s, each keeps its permit" 3 "$(count_status 404 "$r2")"
r3=$(http seq 1 /refund/ok "X-Key: refund-R")
check_eq "R: then the limit is spent: 429" 1 "$(count_status 429 "$r3")"
check_eq "R: a refused request is not refunded either (a request would be denied)" 0 "$(rf_remaining)"

# --- H: rlctl agrees
#   allowed: A 10 + B 10 + C 10 + D 5 + E 10 + G 2 = 47
#   denied:  A 3 + B 20 + C 3 + D 2 + E 3 + G 1 = 32
#   keys:    127.0.0.1, hold-B, dir-C, cost-127.0.0.1, dry-E, after-G = 6
check_eq "H: rlctl info: allowed" 47 "$(rlctl_count "$name" allowed)"
check_eq "H: rlctl info: denied" 32 "$(rlctl_count "$name" denied)"
check_eq "H: rlctl info: would deny (E's 3, within denied)" 3 "$(rlctl_count "$name" would_deny)"
check_eq "H: rlctl info: keys tracked" 6 "$(rlctl_count "$name" used)"
for k in "127.0.0.1 10 4" "hold-B 10 20" "dir-C 10 3" "cost-127.0.0.1 5 2" "dry-E 10 3" "after-G 2 0"; do
  set -- $k
  check_eq "H: rlctl list: key $1 allowed/denied" "$2/$3" \
    "$(rlctl_key "$name" "$1" allowed)/$(rlctl_key "$name" "$1" denied)"
done
check_eq "H: segment owner and mode" "$e2e_user 600" "$(stat -c '%U %a' "/dev/shm/$token")"

# --- K: SetHandler srl-metrics serves rlctl metrics' text, byte for byte
curl -s -D "$e2e_tmp/metrics.hdr" -o "$e2e_tmp/metrics.txt" "http://127.0.0.1:$e2e_port/srl-metrics"
check_eq "K: srl-metrics: status" 200 "$(awk 'NR==1 {print $2}' "$e2e_tmp/metrics.hdr")"
check_eq "K: srl-metrics: Content-Type" "text/plain; version=0.0.4; charset=utf-8" \
  "$(tr -d '\r' <"$e2e_tmp/metrics.hdr" | sed -n 's/^Content-Type: //Ip')"
if command -v promtool >/dev/null; then
  promtool check metrics <"$e2e_tmp/metrics.txt" >"$e2e_tmp/promtool.out" 2>&1
  check_eq "K: promtool check metrics accepts it (exit status)" 0 "$?"
  check_eq "K: promtool has no lint complaint" "" "$(cat "$e2e_tmp/promtool.out")"
else
  fail "K: promtool missing (tools/install-deps: prometheus)"
fi
check_eq "K: allowed decisions" 1 \
  "$(grep -cxF "srl_decisions_total{segment=\"$name\",result=\"allowed\"} 47" "$e2e_tmp/metrics.txt")"
check_eq "K: denied decisions" 1 \
  "$(grep -cxF "srl_decisions_total{segment=\"$name\",result=\"denied\"} 32" "$e2e_tmp/metrics.txt")"
check_eq "K: keys" 1 "$(grep -cxF "srl_keys{segment=\"$name\"} 6" "$e2e_tmp/metrics.txt")"
rlctl_as_owner metrics "$name" "$name-fd" "$name-fa" "$name-st" "$name-rf" "$name-dl" "$name-ti" "$name-pc" "$name-lf" "$name-lk" >"$e2e_tmp/rlctl-metrics.txt"
check_eq "K: rlctl metrics' text, byte for byte, first (one formatter)" same \
  "$(head -c "$(stat -c %s "$e2e_tmp/rlctl-metrics.txt")" "$e2e_tmp/metrics.txt" |
     cmp -s - "$e2e_tmp/rlctl-metrics.txt" && echo same || echo differs)"
check_eq "K: then only mod_srl's srl_handle_* (two gauges, a sample per limiter each)" \
  "srl_handle_lockfree gauge 10 srl_handle_flood_cache gauge 10" \
  "$(tail -c +$(($(stat -c %s "$e2e_tmp/rlctl-metrics.txt") + 1)) "$e2e_tmp/metrics.txt" |
     /usr/bin/python3 -c 'import sys
from prometheus_client.parser import text_string_to_metric_families as p
print(" ".join("%s %s %d" % (f.name, f.type, len(f.samples)) for f in p(sys.stdin.read())))')"

stop_pid "$apache_pid"
check_eq "apache2 stopped by its pid" gone "$(kill -0 "$apache_pid" 2>/dev/null && echo running || echo gone)"

# --- I0: a root parent that names no User trusts no other uid: the segment,
# now www-data's (H), is refused before anything of it is read
if [ "$(id -u)" -eq 0 ]; then
  sed "s|check.log|noowner.log|" "$e2e_tmp/check.conf" >"$e2e_tmp/noowner.conf"
  timeout 30 setsid /usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/noowner.conf" -DFOREGROUND >/dev/null 2>"$e2e_tmp/noowner.err"
  check_eq "I0: another user's segment, no User named: apache2 exit status" 1 "$?"
  check_eq "I0: it says permission denied (stderr: the check runs before the logs open)" 1 \
    "$(grep -c "SrlLimiter $name (.*): cannot open the segment: permission denied" "$e2e_tmp/noowner.err")"
fi

# --- I: the same name with another capacity refuses to start, with the
# remedy, on stderr: the check runs in the first pass, before the logs open
# (another policy would be changed live, as P shows)
{ sed "s|^SrlLimiter $name token_bucket:$LIMIT/1d 4096 |SrlLimiter $name token_bucket:$LIMIT/1d 8192 |; s|check.log|mismatch.log|" \
  "$e2e_tmp/check.conf"; [ "$(id -u)" -eq 0 ] && printf 'User %s\nGroup %s\n' "$e2e_user" "$e2e_group"; } >"$e2e_tmp/mismatch.conf"
timeout 30 setsid /usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/mismatch.conf" -DFOREGROUND >/dev/null 2>"$e2e_tmp/mismatch.err"
check_eq "I: another capacity on the existing segment: apache2 exit status" 1 "$?"
check_eq "I: it names the mismatch and the remedy" 1 \
  "$(grep -c "SrlLimiter $name (.*): cannot open the segment: segment exists with a different policy.*rlctl destroy" "$e2e_tmp/mismatch.err")"
check_eq "I: ... once: not also the generic remedy" 0 \
  "$(grep -c "exists with another policy or capacity" "$e2e_tmp/mismatch.err")"
check_eq "I: it says what differs, both sides" 1 \
  "$(grep -c "; capacity: the segment holds 4096 slots, this config asks for 8192 keys (8192 slots): capacity cannot change live" "$e2e_tmp/mismatch.err")"
sed "s|mismatch.log|mismatch-k.log|; s|check.pid|mismatch-k.pid|" "$e2e_tmp/mismatch.conf" >"$e2e_tmp/mismatch-k.conf"
timeout 30 /usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/mismatch-k.conf" -k start >/dev/null 2>"$e2e_tmp/mismatch-k.err"
check_eq "I: apache2 -k start itself fails (exit status), before it detaches" 1 "$?"
check_eq "I: -k start: no server left running" absent \
  "$([ -s "$e2e_tmp/run/mismatch-k.pid" ] && kill -0 "$(cat "$e2e_tmp/run/mismatch-k.pid")" 2>/dev/null && echo running || echo absent)"
check_eq "I: -k start: it names the mismatch" 1 \
  "$(grep -c "SrlLimiter $name (.*): cannot open the segment: segment exists with a different policy" "$e2e_tmp/mismatch-k.err")"
timeout 30 /usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/mismatch.conf" -t >/dev/null 2>"$e2e_tmp/mismatch-t.err"
check_eq "I: apache2 -t refuses it too (exit status)" 1 "$?"
check_eq "I: -t: it names the mismatch" 1 \
  "$(grep -c "SrlLimiter $name (.*): cannot open the segment: segment exists with a different policy" "$e2e_tmp/mismatch-t.err")"
out=$(timeout 30 /usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/mismatch-k.conf" -k stop 2>&1)
check_eq "I: -k stop skips the srl check (nothing running to stop, but no SrlLimiter refusal)" 0 \
  "$(grep -c "SrlLimiter" <<<"$out")"
check_eq "I: the states were left alone (rlctl info: allowed)" 47 "$(rlctl_count "$name" allowed)"
e2e_finish "$mpm"
