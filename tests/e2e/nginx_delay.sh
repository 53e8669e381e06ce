#!/usr/bin/env bash
# nginx_delay.sh - `srl NAME ... delay=TIME` in a throwaway nginx.
#
# One worker (ngx_workers=1), so that every request below shares one event
# loop: a delayed request that blocked it would hold up every answer after
# it.  add_header X-Srl-Delay $srl_delay always; the access log logs it too.
# Checks, exact counts:
#   1  token_bucket:3/12s delay=10s, 10 requests of one key at once (their
#      answers read in the order they complete): exactly 3 answered 200 at
#      once (X-Srl-Delay 0), exactly 2 answered 200 after a wait (the first
#      excess request reserved at about 4 s, the second at about 8 s: the
#      third would wait about 12 s, past 10 s), exactly 5 answered 429 with
#      Retry-After; every answer that was not delayed completed before both
#      delayed ones, and the shorter wait before the longer (the worker kept
#      serving while two requests waited); the access log has the same
#      delays; rlctl info: allowed 5, denied 5.  (Precondition: the 10
#      decisions fall within 2 s of each other, the margin of the counts;
#      they take milliseconds.)
#   2  token_bucket:1/1h delay=1h: request 1 of a key passes, request 2 is
#      parked (a wait of about 1 h: the test knows it is parked once rlctl
#      counts its reservation); while it is parked a location without srl
#      on the same worker answers 200 and request 3 of the key is refused
#      (its wait would be about 2 h); then request 2's client goes away:
#      nginx logs 499 and gives the reservation back, so request 4 is parked
#      again (wait about 1 h), not refused
#   3  nginx -t refuses delay= on sliding_log, a bad delay, delay= with tier=
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
. "$here/nginx_lib.sh"
need "$SRL_NGX_MOD" "$SRL_RLCTL" /usr/sbin/nginx

e2e_tmpdir nginx-delay
e2e_port=$(free_port)
name="srl-e2e-ngxd-$$"
e2e_segments+=("$name" "$name-h" "$name-log")
ngx_workers=1

body() {
  cat <<CONF
    srl_limiter $name token_bucket:3/12s capacity=100 key_display=16;
    srl_limiter $name-h token_bucket:1/1h capacity=100 key_display=16;
    log_format delay '\$status \$request_uri key=\$http_x_key st=\$srl_status d=\$srl_delay';
    server {
        listen 127.0.0.1:$e2e_port;
        access_log $e2e_tmp/delay.log delay;
        add_header X-Srl-Delay \$srl_delay always;
        location /d {
            srl $name key=\$http_x_key delay=10s;
            try_files /index.html =404;
        }
        location /h {
            srl $name-h key=\$http_x_key delay=1h;
            try_files /index.html =404;
        }
        location /static {
            try_files /index.html =404;
        }
    }
CONF
}

nginx_start "$(body)"
e2e_logs+=("$e2e_tmp/delay.log")
check_eq "nginx runs 1 worker" 1 "$(echo $(nginx_workers) | wc -w)"

# --- 1: 3 at once, 2 delayed, 5 refused; the order they complete in
ngx_http order 10 /d "X-Key: k1" >"$e2e_tmp/1.out" || fail "1: the client failed"
out="$e2e_tmp/1.out"   # N STATUS PID RETRY-AFTER RATELIMIT POLICY PARSE X-SRL-DELAY
check_eq "1: answered" 10 "$(wc -l <"$out")"
check_eq "1: exactly 3 served at once (X-Srl-Delay 0)" 3 "$(awk -F'\t' '$2 == 200 && $8 == 0' "$out" | wc -l)"
check_eq "1: exactly 2 served after a wait" 2 "$(awk -F'\t' '$2 == 200 && $8 > 0' "$out" | wc -l)"
check_eq "1: exactly 5 refused, with Retry-After" 5 "$(awk -F'\t' '$2 == 429 && $4 ~ /^[0-9]+$/' "$out" | wc -l)"
check_eq "1: every answer's rate-limit headers parse" 10 "$(awk -F'\t' '$7 == "ok"' "$out" | wc -l)"
d1=$(awk -F'\t' '$2 == 200 && $8 > 0 {print $8}' "$out" | sort -n | head -1)
d2=$(awk -F'\t' '$2 == 200 && $8 > 0 {print $8}' "$out" | sort -n | tail -1)
check_range "1: the first delayed request's wait (ms; reserved at 4 s)" 2000 4000 "$d1"
check_range "1: the second's (ms; reserved at 8 s)" 6000 8000 "$d2"
# completion order: lines 1..8 the undelayed, then the waits ascending
check_eq "1: the 8 undelayed answers completed before the delayed ones" 8 \
  "$(head -8 "$out" | awk -F'\t' '$8 == 0 || $2 == 429' | wc -l)"
check_eq "1: the delayed ones completed shorter wait first" "$d1 $d2" \
  "$(tail -2 "$out" | cut -f8 | tr '\n' ' ' | sed 's/ $//')"
logged() { [ "$(grep -c "$1" "$e2e_tmp/delay.log")" -ge "$2" ]; }
wait_until 10 logged ' /d key=k1 ' 10
check_eq "1: the access log: 3 allowed d=0, 2 allowed d=WAIT, 5 denied" "3 1 1 5" \
  "$(grep -c '^200 /d key=k1 st=allowed d=0$' "$e2e_tmp/delay.log") $(grep -c "^200 /d key=k1 st=allowed d=$d1\$" "$e2e_tmp/delay.log") $(grep -c "^200 /d key=k1 st=allowed d=$d2\$" "$e2e_tmp/delay.log") $(grep -c '^429 /d key=k1 st=denied ' "$e2e_tmp/delay.log")"
check_eq "1: rlctl info allowed" 5 "$(rlctl_count "$name" allowed)"
check_eq "1: rlctl info denied" 5 "$(rlctl_count "$name" denied)"

# --- 2: a parked request does not hold up the worker; its abort gives back
# its reservation.  park N: request N of key h1 in the background, its
# answer (status line) in $e2e_tmp/park.N once complete.
park() {
  python3 - "$e2e_port" "$1" >"$e2e_tmp/park.$1.tmp" <<'PY' &
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /h?" + sys.argv[2].encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Key: h1\r\n\r\n")
data = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    data += c
print(data.split(b"\r\n")[0].decode())
PY
  park_pid=$!
  e2e_pids+=("$park_pid")
}
h1_allowed() { [ "$(rlctl_key "$name-h" h1 allowed)" = "$1" ]; }
st() { curl -s -o /dev/null -w '%{http_code} %header{x-srl-delay}' -H "X-Key: h1" "http://127.0.0.1:$e2e_port$1"; }
check_eq "2: request 1 passes at once" "200 0" "$(st /h?1)"
park 2
p2=$park_pid
# parked once srl counts its reservation as the key's second admission
wait_until 20 h1_allowed 2 || fail "2: request 2 was not reserved"
check_eq "2: while request 2 waits, a location without srl answers on the worker" "200 " "$(st /static)"
check_eq "2: request 3 is refused (its wait would be about 2 h, past delay=1h)" 429 "$(st /h?3 | cut -d' ' -f1)"
check_eq "2: request 2 is still waiting" "" "$(cat "$e2e_tmp/park.2.tmp")"
kill "$p2"
wait "$p2" 2>/dev/null
wait_until 20 grep -q '^499 /h?2 ' "$e2e_tmp/delay.log" || fail "2: nginx logged no 499 for request 2"
park 4
p4=$park_pid
wait_until 20 h1_allowed 3 \
  || fail "2: request 4 was not reserved: request 2's reservation was not given back ($(rlctl_key "$name-h" h1 allowed) allowed, $(rlctl_key "$name-h" h1 denied) denied)"
check_eq "2: request 4 waits (not refused)" "" "$(cat "$e2e_tmp/park.4.tmp")"
check_eq "2: rlctl info: 3 allowed, 1 denied" "3 1" "$(rlctl_count "$name-h" allowed) $(rlctl_count "$name-h" denied)"
kill "$p4"
wait "$p4" 2>/dev/null
check_eq "2: their waits logged (about 1 h)" 2 \
  "$(grep -cE '^499 /h\?[24] key=h1 st=allowed d=3[0-9]{6}$' "$e2e_tmp/delay.log")"

# --- 3: nginx -t
t_conf() { nginx_conf "    srl_limiter $name-log $1 capacity=100;
    server { listen 127.0.0.1:$e2e_port; location / { srl $name-log $2; } }"; nginx_test; }
t_conf sliding_log:10/1m "delay=1s"
check_eq "3: delay= on sliding_log fails nginx -t" 1 "$?"
check_eq "3: saying why" 1 "$(grep -cF "srl $name-log: delay= needs a limit srl can reserve on (token_bucket, gcra, fixed_window); sliding_log cannot wait: drop delay= or change the policy" "$e2e_tmp/nginx-t.err")"
t_conf token_bucket:10/1m "delay=2x"
check_eq "3: a bad delay fails nginx -t" 1 "$?"
check_eq "3: saying why" 1 "$(grep -cF "srl $name-log: bad delay \"2x\": give a time of 1ms..1h (500ms, 2s, 1m)" "$e2e_tmp/nginx-t.err")"
t_conf token_bucket:10/1m "delay=2h"
check_eq "3: a delay past 1 h fails nginx -t" 1 "$(grep -cF "bad delay \"2h\"" "$e2e_tmp/nginx-t.err")"
t_conf token_bucket:10/1m "delay=1s tier=\$http_x_tier"
check_eq "3: delay= with tier= fails nginx -t" 1 "$(grep -cF "srl $name-log: delay= and tier= together" "$e2e_tmp/nginx-t.err")"
t_conf token_bucket:10/1m "delay=1s"
check_eq "3: a good delay passes nginx -t" 0 "$?"

e2e_finish
