#!/usr/bin/env bash
# End-to-end test of examples/prefork_http: start it on a free loopback port
# with 4 workers and policy 10/1h, send 14 requests for one API key, and
# require exactly 10 answers 200 then 4 answers 429 with Retry-After and
# RateLimit headers, served by more than one worker.  Stops the server by pid.
# First: bad arguments exit 64 with a message naming the argument.
set -euo pipefail
server=$1
rlctl=$2
# Bad arguments: exit 64 and a message naming the argument, before binding.
bad() { # bad WANT_MESSAGE ARGS...
  local want=$1; shift
  local msg rc=0
  msg=$("$server" "$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" -eq 64 ] && [ "$msg" = "$want" ] || { echo "FAIL: prefork_http $*: exit $rc, said '$msg' (want '$want')"; exit 1; }
}
bad "prefork_http: PORT '80x': expected a number, 1..65535" 80x
bad "prefork_http: PORT '0': expected a number, 1..65535" 0
bad "prefork_http: PORT '70000': expected a number, 1..65535" 70000
bad "prefork_http: WORKERS '100': expected a number, 1..64" 18090 100
bad "prefork_http: WORKERS '-1': expected a number, 1..64" 18090 -1
bad "prefork_http: POLICY 'bogus': invalid rate-limit policy (e.g. 10/1m, gcra:100/1s)" 18090 2 bogus
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$(mktemp -d)
"$server" "$port" 4 token_bucket:10/1h >"$out/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$out"' EXIT
for _ in $(seq 50); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" -H 'X-Api-Key: warmup' && break
  sleep 0.1
done
ok=0 limited=0
for i in $(seq 14); do
  curl -s -D "$out/h$i" -o /dev/null "http://127.0.0.1:$port/" -H 'X-Api-Key: k1'
  code=$(head -1 "$out/h$i" | awk '{print $2}')
  case $code in
    200) ok=$((ok + 1)) ;;
    429) limited=$((limited + 1))
         grep -qi '^Retry-After: [1-9][0-9]*' "$out/h$i" || { echo "no Retry-After in 429"; cat "$out/h$i"; exit 1; }
         grep -qi '^RateLimit: "default";r=0;t=' "$out/h$i" || { echo "bad RateLimit in 429"; cat "$out/h$i"; exit 1; } ;;
    *) echo "unexpected status $code"; exit 1 ;;
  esac
done
grep -qi '^RateLimit-Policy: "default";q=10;w=3600' "$out/h1" || { echo "bad RateLimit-Policy"; cat "$out/h1"; exit 1; }
workers=$(cat "$out"/h* | grep -i '^X-Worker:' | sort -u | wc -l)
echo "prefork_http: $ok x 200, $limited x 429, served by $workers workers"
[ "$ok" -eq 10 ] && [ "$limited" -eq 4 ] || { echo "FAIL: expected 10 x 200 and 4 x 429"; exit 1; }
[ "$workers" -gt 1 ] || { echo "FAIL: one worker served everything"; exit 1; }
# The named segment: rlctl sees exactly what the workers decided (k1: 10
# allowed, 4 denied), and it is gone once the server stopped.
seg=prefork_http-$port
grep -q "segment /$seg (rlctl info $seg)" "$out/server.log" || { echo "FAIL: no segment line"; cat "$out/server.log"; exit 1; }
got=$("$rlctl" list "$seg" --json | python3 -c '
import json, sys
k = [e for e in json.load(sys.stdin)["keys"] if e["key"] == "k1"]
print(k[0]["allowed"], k[0]["denied"]) if k else print("missing")')
[ "$got" = "10 4" ] || { echo "FAIL: rlctl list $seg: k1 allowed/denied '$got' (want '10 4')"; exit 1; }
kill "$pid"; wait "$pid" || true
if "$rlctl" info "$seg" >/dev/null 2>&1; then echo "FAIL: $seg left behind"; exit 1; fi
echo "prefork_http: rlctl list $seg: k1 $got; removed on SIGTERM"
