#!/usr/bin/env bash
# apache_cost.sh [N] - what mod_srl costs per request, and where: user-space
# instructions counted by callgrind (valgrind), which the machine's load
# does not change, unlike wrk's requests/s (bench/apache_e2e.sh).
#
#   SRL_MOD=build-bench/apache/mod_srl.so bench/apache_cost.sh 2000
#
# One apache2 -X (a single process: callgrind sees every request) serves a
# 512-byte file to `ab -k -c 1`; it runs twice per server, for 500 and for
# 500 + N requests, so that the difference over N is a request's cost
# without the start-up.  Two servers: plain, and the same with mod_srl
# (SrlLimiter NAME token_bucket:1000000000/1h 65536, SrlLimit, SrlKey ip:
# a limit that never denies, as apache_e2e.sh).  Prints instructions per
# request for both, their difference, and mod_srl's part by function
# (inclusive): the decision, the RateLimit header's formatting, Apache's
# own work on the added header.  Kernel time (the network) is not counted:
# the ratio is of user-space work, an upper bound of the time share.
# Needs valgrind, ab (apache2-utils), apache2; stops each server by pid.
set -uo pipefail
n=${1:-2000}
here=$(cd "$(dirname "$0")" && pwd)
mod=${SRL_MOD:-$here/../build-bench/apache/mod_srl.so}
for c in valgrind callgrind_annotate ab /usr/sbin/apache2; do
  command -v "$c" >/dev/null || { echo "apache_cost: $c is missing" >&2; exit 2; }
done
[ -e "$mod" ] || { echo "apache_cost: no mod_srl.so at $mod (set SRL_MOD)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/srl-apache-cost.XXXXXX)
chmod 0755 "$tmp"
seg="/srl-apache-cost-$$"
pid=""
cleanup() {
  [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
  rm -f "/dev/shm/${seg#/}"
  rm -rf "$tmp"
}
trap cleanup EXIT
md=/usr/lib/apache2/modules

# run SRL(0|1) REQUESTS OUT: one server under callgrind, REQUESTS requests.
run() {
  local srl=$1 reqs=$2 out=$3 dir port
  dir=$(mktemp -d "$tmp/a.XXXXXX"); chmod 0755 "$dir"; mkdir -p "$dir/htdocs" "$dir/run"
  head -c 512 /dev/zero | tr '\0' x >"$dir/htdocs/small.txt"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cat >"$dir/httpd.conf" <<CONF
ServerRoot "$dir"
ServerName 127.0.0.1
Listen 127.0.0.1:$port
LoadModule mpm_prefork_module $md/mod_mpm_prefork.so
LoadModule authz_core_module $md/mod_authz_core.so
KeepAlive On
MaxKeepAliveRequests 0
PidFile "$dir/run/httpd.pid"
DefaultRuntimeDir "$dir/run"
ErrorLog "$dir/error.log"
DocumentRoot "$dir/htdocs"
<Directory "$dir/htdocs">
    Require all granted
</Directory>
CONF
  [ "$srl" = 1 ] && printf 'LoadModule srl_module %s\nSrlLimiter %s token_bucket:1000000000/1h 65536\nSrlLimit %s\nSrlKey ip\n' \
    "$mod" "$seg" "$seg" >>"$dir/httpd.conf"
  valgrind --tool=callgrind --callgrind-out-file="$out" /usr/sbin/apache2 -X -d "$dir" \
    -f "$dir/httpd.conf" >"$dir/valgrind.log" 2>&1 &
  pid=$!
  local up=0
  for _ in $(seq 1 600); do
    curl -s -o /dev/null "http://127.0.0.1:$port/small.txt" && { up=1; break; }
    sleep 0.1
  done
  [ $up = 1 ] || { echo "apache_cost: apache2 under valgrind did not answer" >&2; tail "$dir/error.log" "$dir/valgrind.log" >&2; exit 1; }
  local done
  done=$(ab -k -n "$reqs" -c 1 "http://127.0.0.1:$port/small.txt" 2>&1 | awk '/^Complete requests:/ {print $3} /^Non-2xx/ {print "non-2xx"}')
  [ "$done" = "$reqs" ] || { echo "apache_cost: ab: $done of $reqs" >&2; exit 1; }
  kill -TERM "$pid"; wait "$pid"; pid=""
  rm -f "/dev/shm/${seg#/}"
}
total() { awk '/^summary:/ {print $2; exit}' "$1"; }
# inclusive cost of each function of $1, one "cost<TAB>name" line each
funcs() {
  callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
    sed -nE 's/^ *([0-9,]+) \([ 0-9.]+%\)  (.*)$/\1\t\2/p' | sed 's/,//g; s/ \[.*//; s/^\([0-9]*\)\t.*:/\1\t/'
}
for s in 0 1; do
  echo "apache_cost: server $s (mod_srl $s), 500 and $((500 + n)) requests" >&2
  run $s 500 "$tmp/s$s-a.out"
  run $s $((500 + n)) "$tmp/s$s-b.out"
done
per() { echo $(( ($(total "$2") - $(total "$1")) / n )); }
p0=$(per "$tmp/s0-a.out" "$tmp/s0-b.out"); p1=$(per "$tmp/s1-a.out" "$tmp/s1-b.out")
echo "| server | user-space instructions per request (callgrind, $n requests) |"
echo "| --- | ---: |"
echo "| apache2 -X, 512-byte file, keep-alive | $p0 |"
echo "| the same + mod_srl (a limit that never denies, SrlKey ip) | $p1 |"
echo
awk -v a="$p1" -v b="$p0" 'BEGIN {printf "mod_srl adds %d instructions per request (%.1f %% of the plain server'"'"'s).\n", a - b, 100 * (a - b) / b}'
echo
echo "Where, per request (inclusive instructions; Apache's header filter writes the added header):"
echo
echo "| function | plain | + mod_srl |"
echo "| --- | ---: | ---: |"
# per_func SERVER: "name<TAB>per-request cost" of the functions shown
per_func() {
  join -t $'\t' -1 2 -2 2 <(funcs "$tmp/s$1-b.out" | sort -t $'\t' -k2,2 -u) \
                          <(funcs "$tmp/s$1-a.out" | sort -t $'\t' -k2,2 -u) |
    awk -F'\t' -v n="$n" '$1 ~ /^(srl_access_checker|srl_acquire_tier|apply_decision|srl_format_ratelimit_binding|ap_http_header_filter)$/ {
        printf "%s\t%d\n", $1, ($2 - $3) / n }'
}
join -t $'\t' -a 2 -e 0 -o 0,1.2,2.2 <(per_func 0 | sort) <(per_func 1 | sort) |
  awk -F'\t' '{printf "| %s | %d | %d |\n", $1, $2, $3}'
