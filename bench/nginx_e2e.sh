#!/usr/bin/env bash
# nginx_e2e.sh [SECONDS] [ROUNDS] - nginx's end-to-end row: requests/s of a
# real nginx serving a small static file, plain, with limit_req and with
# ngx_http_srl_module (both limits never deny), measured with wrk; then the
# admitted count of a 100/h limit from 2 workers for both limiters.
#
#   bench/nginx_e2e.sh 10 5     # 5 rounds of 10 s per server (the defaults)
#
# Needs SRL_NGX_MOD (the built module; default build-bench/nginx/
# ngx_http_srl_module.so), nginx and wrk.  Three nginx servers of this
# script, each with its own prefix in a temporary directory, on free
# loopback ports, identical (2 workers, keepalive, no access log, a 512-byte
# file) but for one line: limit_req of a zone at 100000000 r/s, burst=1000000
# nodelay (limit_req counts in milliseconds: without a burst it refuses the
# second request of a millisecond), keyed by $binary_remote_addr, or srl of token_bucket:1000000000/1h keyed by
# $binary_remote_addr (wrk's one address: every worker decides the same hot
# key, the worst case for both).  The rounds alternate (plain, limit_req,
# srl, plain, ...) so load that comes and goes hits all alike; the median
# round of each is reported, with the ratios, and each round's own ratio.
# The exactness row: two more servers (limit_req rate=1r/m burst=99 nodelay,
# i.e. 100 at once, since limit_req has no r/h; srl token_bucket:100/1h), 300 requests at once over 300
# connections spread over both workers (reuseport): each must admit exactly
# 100.  Servers stopped by pid; segments unlinked.  Markdown on stdout.
set -uo pipefail
secs=${1:-10}
rounds=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
mod=${SRL_NGX_MOD:-$here/../build-bench/nginx/ngx_http_srl_module.so}
command -v wrk >/dev/null || { echo "nginx_e2e: wrk is missing (apt-get install wrk)" >&2; exit 2; }
[ -e "$mod" ] || { echo "nginx_e2e: no module at $mod (set SRL_NGX_MOD)" >&2; exit 2; }
[ -x /usr/sbin/nginx ] || { echo "nginx_e2e: nginx is missing" >&2; exit 2; }

tmp=$(mktemp -d /tmp/srl-nginx-e2e.XXXXXX)
chmod 0755 "$tmp"
seg="srl-nginx-e2e-$$"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  rm -f "/dev/shm/$seg" "/dev/shm/$seg-x"
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start NAME PORT HTTP_LINES LOC_LINES: a server; its pid appended to pids.
start() {
  local dir="$tmp/$1" port=$2 user=""
  mkdir -p "$dir/html" "$dir/tmp" "$dir/logs"
  head -c 512 /dev/zero | tr '\0' 'x' >"$dir/html/small.txt"
  [ "$(id -u)" -eq 0 ] && user="user www-data www-data;"
  cat >"$dir/nginx.conf" <<CONF
load_module $mod;
$user
worker_processes 2;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/tmp/b; proxy_temp_path $dir/tmp/p;
    fastcgi_temp_path $dir/tmp/f; uwsgi_temp_path $dir/tmp/u; scgi_temp_path $dir/tmp/s;
    keepalive_requests 100000000;
    $3
    server {
        listen 127.0.0.1:$port reuseport;
        root $dir/html;
        location / { $4 }
        location = /__ready { return 204; }
    }
}
CONF
  setsid /usr/sbin/nginx -p "$dir/" -c "$dir/nginx.conf" -g 'daemon off;' 2>>"$dir/logs/error.log" &
  pids+=($!)
  for _ in $(seq 1 200); do
    curl -s -o /dev/null "http://127.0.0.1:$port/__ready" && return 0
    sleep 0.1
  done
  echo "nginx_e2e: nginx in $dir did not answer; its log:" >&2
  tail -20 "$dir/logs/error.log" >&2
  exit 1
}

p_plain=$(free_port); p_lr=$(free_port); p_srl=$(free_port)
start plain "$p_plain" "" ""
start lr "$p_lr" "limit_req_zone \$binary_remote_addr zone=z:10m rate=100000000r/s;" "limit_req zone=z burst=1000000 nodelay;"
start srl "$p_srl" "srl_limiter $seg token_bucket:1000000000/1h capacity=65536;" \
  "srl $seg key=\$binary_remote_addr;"

wrk_rps() {
  local out
  out=$(wrk -t2 -c16 -d"${secs}s" "http://127.0.0.1:$1/small.txt" 2>&1)
  if grep -q "Non-2xx" <<<"$out"; then
    echo "nginx_e2e: non-2xx answers on port $1:" >&2
    echo "$out" >&2
    exit 1
  fi
  awk '/^Requests\/sec:/ {print $2}' <<<"$out"
}

plain=(); lr=(); srl=()
for p in "$p_plain" "$p_lr" "$p_srl"; do wrk -t2 -c16 -d2s "http://127.0.0.1:$p/small.txt" >/dev/null 2>&1; done
for r in $(seq 1 "$rounds"); do
  a=$(wrk_rps "$p_plain"); b=$(wrk_rps "$p_lr"); c=$(wrk_rps "$p_srl")
  echo "nginx_e2e: round $r: plain $a, limit_req $b, srl $c req/s" >&2
  plain+=("$a"); lr+=("$b"); srl+=("$c")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", 100 * a / b}'; }
mp=$(median "${plain[@]}"); ml=$(median "${lr[@]}"); ms=$(median "${srl[@]}")
echo "| server | requests/s (median of $rounds x ${secs} s, wrk -t2 -c16) | all rounds |"
echo "| --- | ---: | --- |"
echo "| nginx, 2 workers, 512-byte file | $mp | ${plain[*]} |"
echo "| the same + limit_req (never denying) | $ml | ${lr[*]} |"
echo "| the same + srl (token_bucket:1000000000/1h, never denying) | $ms | ${srl[*]} |"
echo
r_srl=$(pct "$ms" "$mp"); r_lr=$(pct "$ml" "$mp")
echo "srl keeps $r_srl % of plain nginx's requests/s (target >= 98 %: $(awk -v r="$r_srl" 'BEGIN {print (r >= 98.0) ? "met" : "MISSED"}')); limit_req $r_lr %; srl / limit_req $(pct "$ms" "$ml") % (target >= 100 %)."
ps=(); pl=()
for r in $(seq 0 $((rounds - 1))); do
  ps+=("$(pct "${srl[$r]}" "${plain[$r]}")"); pl+=("$(pct "${srl[$r]}" "${lr[$r]}")")
done
echo "Round by round: srl / plain ${ps[*]} (median $(median "${ps[@]}") %); srl / limit_req ${pl[*]} (median $(median "${pl[@]}") %)."

# Exactness: a limit of 100, 300 requests at once over both workers.
p_x1=$(free_port); p_x2=$(free_port)
start xlr "$p_x1" "limit_req_zone \$binary_remote_addr zone=x:10m rate=1r/m;" "limit_req zone=x burst=99 nodelay;"
start xsrl "$p_x2" "srl_limiter $seg-x token_bucket:100/1h capacity=64;" "srl $seg-x key=\$binary_remote_addr;"
client="$here/../tests/e2e/nginx_httpc.py"
n_lr=$(python3 "$client" burst 127.0.0.1 "$p_x1" /small.txt 300 | awk -F'\t' '$1 == 200' | wc -l)
n_srl=$(python3 "$client" burst 127.0.0.1 "$p_x2" /small.txt 300 | awk -F'\t' '$1 == 200' | wc -l)
echo
echo "A limit of 100 (limit_req 1r/m burst=99 nodelay, srl token_bucket:100/1h), 300 requests at once from 2 workers: limit_req admitted $n_lr, srl $n_srl (both must be 100)."
