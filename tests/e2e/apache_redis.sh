#!/usr/bin/env bash
# apache_redis.sh - mod_srl's `SrlLimiter NAME POLICY CAPACITY redis=URI`:
# two throwaway apache2 servers (two "hosts": one prefork, one event, each
# with its own ServerRoot, port and children running as www-data) share one
# limit held by a redis-server of the test (unix socket in the temporary
# directory, no persistence, stopped by its pid).  Policy token_bucket:10/1d
# (nothing refills during the test), on_full=deny, timeout_ms=300.  Checks,
# with exact counts:
#   T  `apache2 -t` accepts the configuration (and, reading it only,
#      creates nothing in Redis);
#      a bad uri and key_display with redis= are refused, with the reason
#   A  key header:X-Key, sequential: 6 requests to host 1 then 6 to host 2:
#      statuses 6 x 200 then 4 x 200 and 2 x 429, RateLimit r counting down
#      9..0 across the hosts, 429s with Retry-After one token, RateLimit-Policy
#   B  30 requests for one key held open at once, 15 per host: exactly 10
#      admitted fleet-wide, every refusal a 429 with Retry-After
#   C  rlctl info URI: allowed of A + B exactly, and Redis's denials plus
#      the host segments' local answers (rlctl info fleet1/fleet2: denied)
#      their denials exactly; rlctl list URI has the two keys, neither with
#      a permit left
#   L  the host tier: 5 more requests for B's key on each host are all 429
#      with Retry-After, answered on the hosts (no EVALSHA reaches Redis,
#      INFO commandstats) and counted in the host segments; rlctl list on
#      each host segment shows the ban as PREFIX:KEY
#   D  Redis stopped (SIGSTOP): a request is answered 429 by on_full=deny
#      within the timeout, the error log says so; resumed (SIGCONT): a new
#      key is admitted again
#   E  after both servers stopped, a host with another policy for the same
#      prefix: apache2 -k start itself exits 1, stderr names the mismatch
#      and the remedy; the stored states were left alone
#   F  a hostile server (tests/fake_redis.py wrongtype: EVALSHA answered
#      with a bulk string) in place of Redis: the request is answered by
#      on_full=deny, a 429, never a 500, and the error log says so
#   G  a host started while its Redis is down, with fallback=token_bucket:3/1d
#      (policy token_bucket:5/1d): it starts and serves, 6 requests for a key
#      give exactly 3 x 200 (the fallback) then 3 x 429; Redis started: the
#      host limits by Redis by itself, exactly 5 more 200 (RateLimit r 4..0)
#      then 429, and rlctl info URI counts the 5
#   P  tiers on the fleet: tier=paid=token_bucket:3/1d beside the policy
#      token_bucket:1/1d, SrlTier header:X-Plan: a paid key gets 3 x 200
#      then 429s (the second answered on the host: no EVALSHA), a key
#      without a plan 1 x 200 then 429; rlctl info URI counts 4 admitted
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
need "$SRL_MOD" "$SRL_RLCTL" /usr/sbin/apache2
command -v redis-cli >/dev/null || die "redis-cli is not installed"

LIMIT=10
TOKEN_S=8640              # 1d / 10
e2e_tmpdir apache-redis
base=$e2e_tmp
e2e_segments+=(/fleet1 /fleet2)   # the host tiers' segments, named after the limiters
started=$(date +%s)
redis_start
uri="unix://$redis_sock?prefix=e2e-ap&timeout_ms=300"
rcli() { redis-cli -s "$redis_sock" "$@"; }

# body HOST: each host names its limiter differently (so a mod_srl that
# opened a segment instead of the store would give each its own limit: the
# hosts share this machine's /dev/shm), with one policy_name for the headers.
body() {
  echo "SrlLimiter fleet$1 token_bucket:$LIMIT/1d 1000 on_full=deny policy_name=fleet redis=$uri
SrlLimit fleet$1
SrlKey header:X-Key"
}

# host_conf DIR PORT MPM: a configuration like apache_start's, for -t and -k.
host_conf() {
  mkdir -p "$1/htdocs" "$1/run"
  cat <<CONF
ServerRoot "$1"
ServerName 127.0.0.1
Listen 127.0.0.1:$2
LoadModule mpm_$3_module /usr/lib/apache2/modules/mod_mpm_$3.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule srl_module $SRL_MOD
PidFile "$1/run/check.pid"
DefaultRuntimeDir "$1/run"
ErrorLog "$1/check.log"
DocumentRoot "$1/htdocs"
$([ "$(id -u)" -eq 0 ] && printf 'User %s\nGroup %s\n' "$e2e_user" "$e2e_group")
CONF
}

# --- T: configuration time
host_conf "$base" "$(free_port)" prefork >"$base/check.conf"
body 1 >>"$base/check.conf"
out=$(/usr/sbin/apache2 -d "$base" -f "$base/check.conf" -t 2>&1); rc=$?
check_eq "T: apache2 -t accepts redis= (exit status)" 0 "$rc"
check_eq "T: apache2 -t created nothing in Redis (no PREFIX:cfg)" 0 "$(rcli EXISTS e2e-ap:cfg)"
sed "s|redis=unix://[^ ]*|redis=redis://:secret@h:99999|" "$base/check.conf" >"$base/bad.conf"
out=$(/usr/sbin/apache2 -d "$base" -f "$base/bad.conf" -t 2>&1); rc=$?
check_eq "T: a bad uri is refused (exit status)" 1 "$rc"
check_eq "T: ... with the reason" 1 \
  "$(grep -cxF "SrlLimiter fleet1: redis=: redis uri: port must be 1..65535, not '99999'" <<<"$out")"
check_eq "T: ... the password is not echoed" 0 "$(grep -c secret <<<"$out")"
sed "s|policy_name=fleet redis=|policy_name=fleet key_display=8 redis=|" "$base/check.conf" \
  >"$base/kd.conf"
out=$(/usr/sbin/apache2 -d "$base" -f "$base/kd.conf" -t 2>&1); rc=$?
check_eq "T: key_display with redis= is refused (exit status)" 1 "$rc"
check_eq "T: ... saying why" 1 \
  "$(grep -c 'SrlLimiter fleet1: key_display is for a segment; a Redis store (redis=) keeps every key whole' <<<"$out")"

# Two hosts, each in a directory of its own.
mkdir -p "$base/h1/htdocs" "$base/h2/htdocs"
chmod 0755 "$base/h1" "$base/h2"
echo x >"$base/h1/htdocs/x"
echo x >"$base/h2/htdocs/x"
e2e_tmp=$base/h1; e2e_port=$(free_port); apache_start prefork "$(body 1)"
port1=$e2e_port; pid1=$apache_pid
e2e_tmp=$base/h2; e2e_port=$(free_port); apache_start event "$(body 2)"
port2=$e2e_port; pid2=$apache_pid
e2e_tmp=$base
policy="\"fleet\";q=$LIMIT;w=86400"
on() { local port=$1; shift; e2e_port=$port http "$@"; }
count_status() { awk -F'\t' -v s="$1" '$1 == s' <<<"$2" | wc -l; }

# --- A: one key, host 1 then host 2
a=$( { on "$port1" seq 6 /x "X-Key: seq-A"; on "$port2" seq 6 /x "X-Key: seq-A"; } )
check_eq "A: statuses across the two hosts" "200 200 200 200 200 200 200 200 200 200 429 429" \
  "$(cut -f1 <<<"$a" | tr '\n' ' ' | sed 's/ $//')"
check_eq "A: RateLimit r counts down 9..0 across the hosts" "9 8 7 6 5 4 3 2 1 0" \
  "$(head -$LIMIT <<<"$a" | cut -f3 | sed 's/.*;r=\([0-9]*\);.*/\1/' | tr '\n' ' ' | sed 's/ $//')"
check_eq "A: every answer has RateLimit-Policy $policy" 12 "$(cut -f4 <<<"$a" | grep -cxF "$policy")"
elapsed=$(( $(date +%s) - started + 1 ))
while IFS=$'\t' read -r st ra rl pol; do
  check_range "A: 429 Retry-After (one token)" $((TOKEN_S - elapsed)) $TOKEN_S "$ra"
  check_eq "A: 429 RateLimit" "\"fleet\";r=0;t=$ra" "$rl"
done <<<"$(tail -2 <<<"$a")"

# --- B: one key held open at once on both hosts
on "$port1" hold 15 /x "X-Key: hold-B" >"$base/b1" & j1=$!
on "$port2" hold 15 /x "X-Key: hold-B" >"$base/b2" & j2=$!
wait "$j1"; wait "$j2"
b=$(cat "$base/b1" "$base/b2")
check_eq "B: answers" 30 "$(grep -c . <<<"$b")"
check_eq "B: admitted fleet-wide" $LIMIT "$(count_status 200 "$b")"
check_eq "B: refused with 429" $((30 - LIMIT)) "$(count_status 429 "$b")"
check_eq "B: every 429 has a Retry-After" $((30 - LIMIT)) \
  "$(awk -F'\t' '$1 == 429 && $2 ~ /^[0-9]+$/' <<<"$b" | wc -l)"

# --- C: rlctl on the uri agrees
check_eq "C: rlctl info URI: allowed" $((2 * LIMIT)) "$(rlctl_count "$uri" allowed)"
local1=$(rlctl_count fleet1 denied); local2=$(rlctl_count fleet2 denied)
check_eq "C: Redis's denials + the hosts' local answers" $((2 + 30 - LIMIT)) \
  "$(count_sum "$(rlctl_count "$uri" denied)" "$local1" "$local2")"
check_range "C: ... of which answered on the hosts (A's last request at least)" 1 \
  $((2 + 30 - LIMIT - 2)) "$(count_sum "$local1" "$local2")"
check_eq "C: rlctl list URI: the two keys, nothing available" "hold-B 0
seq-A 0" "$("$SRL_RLCTL" list "$uri" --json | python3 -c '
import json, sys
print("\n".join(sorted("%s %d" % (k["key"], k["available"]) for k in json.load(sys.stdin)["keys"])))')"

# --- L: the host tier answers a banned key without Redis
evalsha() { rcli INFO commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p'; }
calls=$(evalsha)
l=$( { on "$port1" seq 5 /x "X-Key: hold-B"; on "$port2" seq 5 /x "X-Key: hold-B"; } )
check_eq "L: 10 more requests for B's key: 429" 10 "$(count_status 429 "$l")"
check_eq "L: ... each with a Retry-After" 10 "$(awk -F'\t' '$2 ~ /^[0-9]+$/' <<<"$l" | wc -l)"
check_eq "L: ... none reached Redis (EVALSHA calls)" "$calls" "$(evalsha)"
check_eq "L: ... counted by the host segments" "$(count_sum "$local1" "$local2" 10)" \
  "$(count_sum "$(rlctl_count fleet1 denied)" "$(rlctl_count fleet2 denied)")"

check_eq "L: rlctl list on each host segment shows the ban as PREFIX:KEY (README)" \
  "e2e-ap:hold-B e2e-ap:hold-B" \
  "$(for h in fleet1 fleet2; do rlctl_as_owner list "$h" --json | python3 -c '
import json, sys
print(" ".join(k["key"] for k in json.load(sys.stdin)["keys"] if "hold-B" in k["key"]))'; done | xargs)"

# --- D: Redis stopped, then resumed
kill -STOP "$redis_pid"
t0=$(date +%s%N)
d=$(on "$port1" seq 1 /x "X-Key: stop-D")
t1=$(date +%s%N)
kill -CONT "$redis_pid"
check_eq "D: Redis stopped: on_full=deny answers 429" 429 "$(cut -f1 <<<"$d")"
check_range "D: ... within the timeout (ms, 300 ms timeout)" 0 5000 $(( (t1 - t0) / 1000000 ))
wait_until 10 grep -q "SrlLimit fleet1: .*; decided by on_full (denied)" "$base/h1/error.log"
check_eq "D: the error log says on_full decided" 1 \
  "$(grep -c "SrlLimit fleet1: .*; decided by on_full (denied)" "$base/h1/error.log")"
d=$(on "$port1" seq 1 /x "X-Key: new-D")
check_eq "D: Redis resumed: a new key is admitted" 200 "$(cut -f1 <<<"$d")"

# --- E: another policy for the prefix refuses to start
stop_pid "$pid1"; stop_pid "$pid2"
allowed=$(rlctl_count "$uri" allowed)
host_conf "$base" "$(free_port)" prefork | sed "s|check.log|mismatch.log|" >"$base/mismatch.conf"
body 1 | sed "s|token_bucket:$LIMIT/1d|token_bucket:$((LIMIT + 1))/1d|" >>"$base/mismatch.conf"
timeout 30 /usr/sbin/apache2 -d "$base" -f "$base/mismatch.conf" -k start >/dev/null 2>"$base/mismatch.err"
check_eq "E: another policy under the prefix: apache2 -k start exit status" 1 "$?"
check_eq "E: no server left running" absent \
  "$([ -s "$base/run/check.pid" ] && kill -0 "$(cat "$base/run/check.pid")" 2>/dev/null && echo running || echo absent)"
# (the check runs in check_config, before the logs open: stderr)
check_eq "E: it names the mismatch and the remedy (stderr)" 1 \
  "$(grep -c "SrlLimiter fleet1 (.*): cannot open its Redis store and host segment: segment exists with a different policy or geometry (another policy is stored under the uri's prefix" "$base/mismatch.err")"
check_eq "E: it does not show the uri" 0 "$(cat "$base/mismatch.log" "$base/mismatch.err" 2>/dev/null | grep -c "$redis_sock")"
check_eq "E: the states were left alone (rlctl info URI: allowed)" "$allowed" \
  "$(rlctl_count "$uri" allowed)"

# --- F: a server answering what no script answers: on_full, not a 500
# (the fake exits when this script does: its stdin is the coprocess pipe)
coproc FAKE { exec python3 "$SRL_E2E_DIR/../fake_redis.py" wrongtype 2>/dev/null; }
read -r -u "${FAKE[0]}" ready fake_port || die "fake_redis.py did not start"
e2e_segments+=(/fleet3)
fbody="SrlLimiter fleet3 token_bucket:$LIMIT/1d 1000 on_full=deny policy_name=fleet redis=redis://127.0.0.1:$fake_port?prefix=e2e-fake&timeout_ms=300
SrlLimit fleet3
SrlKey header:X-Key"
mkdir -p "$base/h3/htdocs"; chmod 0755 "$base/h3"; echo x >"$base/h3/htdocs/x"
e2e_tmp=$base/h3; e2e_port=$(free_port); apache_start prefork "$fbody"
port3=$e2e_port; pid3=$apache_pid; e2e_tmp=$base
f=$(on "$port3" seq 1 /x "X-Key: hostile-F")
check_eq "F: a reply of the wrong type: on_full=deny answers 429 (not 500)" 429 "$(cut -f1 <<<"$f")"
wait_until 10 grep -q "SrlLimit fleet3: .*; decided by on_full (denied)" "$base/h3/error.log"
check_eq "F: the error log says on_full decided" 1 \
  "$(grep -c "SrlLimit fleet3: .*; decided by on_full (denied)" "$base/h3/error.log")"
stop_pid "$pid3"

# --- G: a host started during an outage, with a fallback
e2e_segments+=(/fleet4 /fleet4.fallback)
gsock=$base/h4/redis/redis.sock
guri="unix://$gsock?prefix=e2e-g&timeout_ms=300"
gbody="SrlLimiter fleet4 token_bucket:5/1d 1000 on_full=deny fallback=token_bucket:3/1d policy_name=fleet redis=$guri
SrlLimit fleet4
SrlKey header:X-Key"
mkdir -p "$base/h4/htdocs"; chmod 0755 "$base/h4"; echo x >"$base/h4/htdocs/x"
e2e_tmp=$base/h4; e2e_port=$(free_port); apache_start prefork "$gbody"
port4=$e2e_port; pid4=$apache_pid; e2e_tmp=$base
g=$(on "$port4" seq 6 /x "X-Key: late-G")
check_eq "G: Redis down since the start: the fallback serves 3 then refuses" \
  "200 200 200 429 429 429" "$(cut -f1 <<<"$g" | tr '\n' ' ' | sed 's/ $//')"
main_redis_pid=$redis_pid main_redis_sock=$redis_sock
e2e_tmp=$base/h4; redis_start; e2e_tmp=$base
g_redis_pid=$redis_pid; redis_pid=$main_redis_pid; redis_sock=$main_redis_sock
# The workers reconnect by themselves (their backoff: 1 s at most a step).
g_first() { [ "$(on "$port4" seq 1 /x "X-Key: late-G" | cut -f1)" = 200 ]; }
wait_until 20 g_first
check_eq "G: Redis started: a request is admitted again (by Redis: the fallback is spent)" \
  0 "$?"
g=$(on "$port4" seq 5 /x "X-Key: late-G")
check_eq "G: ... then exactly Redis's limit: 4 more 200, then 429" "200 200 200 200 429" \
  "$(cut -f1 <<<"$g" | tr '\n' ' ' | sed 's/ $//')"
check_eq "G: ... RateLimit r from Redis's count" "3 2 1 0" \
  "$(head -4 <<<"$g" | cut -f3 | sed 's/.*;r=\([0-9]*\);.*/\1/' | tr '\n' ' ' | sed 's/ $//')"
check_eq "G: rlctl info URI: allowed" 5 "$(rlctl_count "$guri" allowed)"
stop_pid "$pid4"
stop_pid "$g_redis_pid"

# --- P: tiers on the fleet (the fronted store takes tiers)
e2e_segments+=(/fleet5)
puri="unix://$redis_sock?prefix=e2e-p&timeout_ms=300"
pbody="SrlLimiter fleet5 token_bucket:1/1d 1000 on_full=deny tier=paid=token_bucket:3/1d policy_name=fleet redis=$puri
SrlLimit fleet5
SrlKey header:X-Key
SrlTier header:X-Plan"
mkdir -p "$base/h5/htdocs"; chmod 0755 "$base/h5"; echo x >"$base/h5/htdocs/x"
e2e_tmp=$base/h5; e2e_port=$(free_port); apache_start prefork "$pbody"
port5=$e2e_port; pid5=$apache_pid; e2e_tmp=$base
p=$(on "$port5" seq 4 /x "X-Key: paid-P" "X-Plan: paid")
check_eq "P: a paid key: 3 admitted, then 429" "200 200 200 429" \
  "$(cut -f1 <<<"$p" | tr '\n' ' ' | sed 's/ $//')"
calls=$(evalsha)
p=$(on "$port5" seq 1 /x "X-Key: paid-P" "X-Plan: paid")
check_eq "P: ... and again 429, answered on the host (no EVALSHA)" "429 $calls" \
  "$(cut -f1 <<<"$p") $(evalsha)"
p=$(on "$port5" seq 2 /x "X-Key: free-P")
check_eq "P: a key without a plan: the policy's 1, then 429" "200 429" \
  "$(cut -f1 <<<"$p" | tr '\n' ' ' | sed 's/ $//')"
check_eq "P: rlctl info URI: allowed" 4 "$(rlctl_count "$puri" allowed)"
stop_pid "$pid5"
e2e_finish
