#!/usr/bin/env bash
# nginx_concurrency.sh - srl_concurrency in a throwaway nginx (4 workers).
#
# The upstream is nginx_slow.py, started by the test on loopback: each
# request records its entry (CTL/PHASE/in.N) and is held until the test
# creates CTL/PHASE/release, so the test decides when requests end.  The
# limiter is concurrency:4 on $http_x_key.  Every wave is settled before
# it is judged: each request has either entered the upstream or been
# answered.  Checks, exact counts:
#   1  10 requests at once: exactly 4 reach the upstream, 6 answered 429
#      with Retry-After 1 and no RateLimit header; rlctl get: 4 in flight,
#      held by nginx workers; after the release the 4 answer 200 and every
#      unit is given back (0 in flight)
#   2  upstream errors (proxy_pass to a port nobody listens on): 12 requests
#      in a row, all 502, none refused; 0 in flight after
#   3  internal redirects (error_page 502 = /fallback on the same dead
#      upstream): 12 requests, all 200 from /fallback; 0 in flight after
#   4  client aborts: 4 held requests whose clients are killed: their units
#      come back while the upstream still holds the requests
#   5  kill -9 of every worker holding units (4 held): the master starts new
#      workers; 10 new requests at once: exactly 4 admitted (srl reclaims
#      the dead workers' units), 6 refused; rlctl info counts 4 reclaimed
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
. "$here/nginx_lib.sh"
need "$SRL_NGX_MOD" "$SRL_RLCTL" /usr/sbin/nginx

e2e_tmpdir nginx-conc
e2e_port=$(free_port)
up_port=$(free_port)
dead_port=$(free_port)
name="srl-e2e-ngxc-$$"
e2e_segments+=("$name")
ctl="$e2e_tmp/ctl"
res="$e2e_tmp/res"
hdr="$e2e_tmp/hdr"      # the answers' headers (not in $res: answered counts its files)
mkdir -p "$ctl" "$res" "$hdr"

python3 "$SRL_E2E_DIR/nginx_slow.py" "$up_port" "$ctl" &
up_pid=$!
e2e_pids+=("$up_pid")

nginx_start "
    srl_limiter $name concurrency:4 capacity=100 key_display=16;
    server {
        listen 127.0.0.1:$e2e_port reuseport;
        add_header X-Pid \$pid always;
        location /slow {
            srl_concurrency $name key=\$http_x_key;
            proxy_pass http://127.0.0.1:$up_port;
        }
        location /bad {
            srl_concurrency $name key=\$http_x_key;
            proxy_pass http://127.0.0.1:$dead_port;
        }
        location /redir {
            srl_concurrency $name key=\$http_x_key;
            error_page 502 = /fallback;
            proxy_pass http://127.0.0.1:$dead_port;
        }
        location = /fallback {
            return 200 \"fallback\n\";
        }
    }"
# The upstream listens (a connection, no request: a request would be held).
wait_until 20 python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' \
  "$up_port" || die "the slow upstream did not listen on $up_port"

# fire PHASE N: request N of PHASE in the background; its answer
# (STATUS RETRY-AFTER RATELIMIT) lands in $res/PHASE.N.
fire() {
  (
    curl -s -o /dev/null -D "$hdr/$1.$2" -H "X-Key: hot" \
      "http://127.0.0.1:$e2e_port/slow?$1"
    st=$(awk 'NR==1 {print $2}' "$hdr/$1.$2")
    ra=$(tr -d '\r' <"$hdr/$1.$2" | sed -n 's/^Retry-After: //Ip')
    rl=$(tr -d '\r' <"$hdr/$1.$2" | sed -n 's/^RateLimit: //Ip')
    echo "$st ${ra:--} ${rl:--}" >"$res/$1.$2.tmp" && mv "$res/$1.$2.tmp" "$res/$1.$2"
  ) &
  wave_pids+=($!)
}
answers() { cat "$res/$1".[0-9]* 2>/dev/null | sort | uniq -c | sed 's/^ *//' | tr '\n' ';'; }

# --- 1: 10 at once
# wave10 PHASE WHAT: 10 requests at once, settled: exactly 4 reach the
# upstream (held there), 6 answered 429 with Retry-After 1, no RateLimit.
wave10() {
  wave_dir "$1"
  for i in $(seq 1 10); do fire "$1" "$i"; done
  wait_until 60 settled "$1" 10 || fail "$2: the wave did not settle"
  wait_until 10 at_least answered "$1" 6
  check_eq "$2: exactly 4 reached the upstream" 4 "$(entered "$1")"
  check_eq "$2: 6 answered 429, Retry-After 1, no RateLimit" "6 429 1 -;" "$(answers "$1")"
}

wave10 w1 1
check_eq "1: rlctl get: 4 in flight" 4 "$(in_flight "$name" hot)"
h=$(holders "$name" hot)
check_eq "1: the holders are nginx workers" "" \
  "$(w=" $(nginx_workers) "; for p in $h; do [[ $w == *" $p "* ]] || echo "$p"; done)"
release w1
wave_wait
check_eq "1: after the release: 4 x 200, 6 x 429" "4 200 - -;6 429 1 -;" "$(answers w1)"
wait_until 10 idle "$name" hot
check_eq "1: every unit given back" 0 "$(in_flight "$name" hot)"

# --- 2: upstream errors
out=$(for i in $(seq 1 12); do curl -s -o /dev/null -w '%{http_code}\n' -H "X-Key: hot" \
  "http://127.0.0.1:$e2e_port/bad"; done | sort | uniq -c | sed 's/^ *//' | tr '\n' ';')
check_eq "2: upstream errors: 12 x 502, none refused" "12 502;" "$out"
wait_until 10 idle "$name" hot
check_eq "2: 0 in flight after" 0 "$(in_flight "$name" hot)"

# --- 3: internal redirects
out=$(for i in $(seq 1 12); do curl -s -o /dev/null -w '%{http_code}\n' -H "X-Key: hot" \
  "http://127.0.0.1:$e2e_port/redir"; done | sort | uniq -c | sed 's/^ *//' | tr '\n' ';')
check_eq "3: internal redirects: 12 x 200 from /fallback" "12 200;" "$out"
wait_until 10 idle "$name" hot
check_eq "3: 0 in flight after" 0 "$(in_flight "$name" hot)"

# --- 4: client aborts
wave_dir w4
for i in 1 2 3 4; do fire w4 "$i"; done
wait_until 60 at_least entered w4 4 || fail "4: the 4 did not reach the upstream"
check_eq "4: 4 in flight" 4 "$(in_flight "$name" hot)"
for p in "${wave_pids[@]}"; do pkill -KILL -P "$p" curl; done
wave_wait
wait_until 20 idle "$name" hot
check_eq "4: the aborted clients' units came back while the upstream holds them" 0 \
  "$(in_flight "$name" hot)"
release w4

# --- 5: kill -9 of the workers holding units
wave_dir w5
for i in 1 2 3 4; do fire w5 "$i"; done
wait_until 60 at_least entered w5 4 || fail "5: the 4 did not reach the upstream"
victims=$(holders "$name" hot)
check_eq "5: 4 in flight" 4 "$(in_flight "$name" hot)"
for p in $(echo "$victims" | tr ' ' '\n' | sort -u); do kill -KILL "$p"; done
wave_wait
release w5
wait_until 20 test "$(nginx_workers | wc -w)" -eq 4 || fail "5: the master did not restart workers"
wave10 w6 "5: after kill -9 (the dead workers' units reclaimed)"
check_eq "5: rlctl info: reclaimed" 4 "$(rlctl_count "$name" reclaimed)"
release w6
wave_wait
wait_until 10 idle "$name" hot
check_eq "5: every unit given back" 0 "$(in_flight "$name" hot)"

e2e_finish
