#!/usr/bin/env bash
# apache_e2e.sh [SECONDS] [ROUNDS] - the end-to-end row of BENCHMARKS.md:
# requests/s of a real Apache prefork serving a small static file, without
# mod_srl and with it (a limit that never denies), measured with wrk.
#
#   bench/apache_e2e.sh 10 5     # 5 rounds of 10 s per server (the defaults)
#   SRL_LIMITER="gcra:1000000000/1h 65536 lockfree=on" bench/apache_e2e.sh 10 5
#                                # another SrlLimiter (after its NAME)
#
# Needs SRL_MOD (the built mod_srl.so; default build-bench/apache/mod_srl.so)
# and wrk (Debian package wrk, in tools/install-deps).  Two apache2 servers of
# this script, each with its own ServerRoot in a temporary directory, on two
# free loopback ports, identical configurations (prefork, 8 workers,
# KeepAlive on, no access log) but for the srl lines: the second loads
# mod_srl, declares token_bucket:1000000000/1h (no request is ever denied)
# on a shared segment, and applies it to every request
# keyed by client address (wrk's one address: every worker decides the same
# hot key, the worst case for the lock).  The servers run side by side; the
# rounds alternate (plain, srl, plain, srl, ...) so load that comes and goes
# on the machine hits both alike, and the median round of each is reported,
# with their ratio.  Both servers are stopped by pid; the segment is unlinked.
# Output: a Markdown table on stdout, progress on stderr.
set -uo pipefail
secs=${1:-10}
rounds=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
mod=${SRL_MOD:-$here/../build-bench/apache/mod_srl.so}
limiter=${SRL_LIMITER:-token_bucket:1000000000/1h 65536}   # SrlLimiter after NAME
command -v wrk >/dev/null || { echo "apache_e2e: wrk is missing (apt-get install wrk)" >&2; exit 2; }
[ -e "$mod" ] || { echo "apache_e2e: no mod_srl.so at $mod (set SRL_MOD)" >&2; exit 2; }
[ -x /usr/sbin/apache2 ] || { echo "apache_e2e: apache2 is missing" >&2; exit 2; }
moddir=/usr/lib/apache2/modules

tmp=$(mktemp -d /tmp/srl-apache-e2e.XXXXXX)
chmod 0755 "$tmp"
seg="/srl-apache-e2e-$$"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  rm -f "/dev/shm/${seg#/}"
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# conf DIR PORT SRL(0|1): one server's configuration.
conf() {
  local dir=$1 port=$2 srl=$3 user=""
  mkdir -p "$dir/htdocs" "$dir/run"
  head -c 512 /dev/zero | tr '\0' 'x' >"$dir/htdocs/small.txt"   # a 512-byte file
  [ "$(id -u)" -eq 0 ] && user="User www-data
Group www-data"
  {
    cat <<CONF
ServerRoot "$dir"
ServerName 127.0.0.1
Listen 127.0.0.1:$port
LoadModule mpm_prefork_module $moddir/mod_mpm_prefork.so
LoadModule authz_core_module $moddir/mod_authz_core.so
$user
StartServers 8
MinSpareServers 8
MaxSpareServers 8
ServerLimit 8
MaxRequestWorkers 8
MaxConnectionsPerChild 0
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
    if [ "$srl" = 1 ]; then
      cat <<CONF
LoadModule srl_module $mod
SrlLimiter $seg $limiter
SrlLimit $seg
SrlKey ip
CONF
    fi
  } >"$dir/httpd.conf"
}

start() { # DIR PORT -> pid in started_pid
  setsid /usr/sbin/apache2 -d "$1" -f "$1/httpd.conf" -DFOREGROUND &
  started_pid=$!
  pids+=("$started_pid")
  for _ in $(seq 1 200); do
    curl -s -o /dev/null "http://127.0.0.1:$2/small.txt" && return 0
    sleep 0.1
  done
  echo "apache_e2e: apache2 in $1 did not answer; its log:" >&2
  tail -20 "$1/error.log" >&2
  exit 1
}

p_plain=$(free_port); p_srl=$(free_port)
while [ "$p_srl" = "$p_plain" ]; do p_srl=$(free_port); done
conf "$tmp/plain" "$p_plain" 0
conf "$tmp/srl" "$p_srl" 1
start "$tmp/plain" "$p_plain"
start "$tmp/srl" "$p_srl"
# Both answer 200 (the limit never denies).
for p in "$p_plain" "$p_srl"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p/small.txt")
  [ "$code" = 200 ] || { echo "apache_e2e: port $p answered $code" >&2; exit 1; }
done

# wrk_rps PORT: requests/s of one run (2 threads, 16 connections); non-2xx
# answers make the run fail (a limit that denied would be a wrong benchmark).
wrk_rps() {
  local out
  out=$(wrk -t2 -c16 -d"${secs}s" "http://127.0.0.1:$1/small.txt" 2>&1)
  if grep -q "Non-2xx" <<<"$out"; then
    echo "apache_e2e: non-2xx answers on port $1:" >&2
    echo "$out" >&2
    exit 1
  fi
  awk '/^Requests\/sec:/ {print $2}' <<<"$out"
}

plain=(); withsrl=()
wrk -t2 -c16 -d2s "http://127.0.0.1:$p_plain/small.txt" >/dev/null 2>&1   # warm both
wrk -t2 -c16 -d2s "http://127.0.0.1:$p_srl/small.txt" >/dev/null 2>&1
for r in $(seq 1 "$rounds"); do
  a=$(wrk_rps "$p_plain"); b=$(wrk_rps "$p_srl")
  echo "apache_e2e: round $r: plain $a req/s, mod_srl $b req/s" >&2
  plain+=("$a"); withsrl+=("$b")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
mp=$(median "${plain[@]}"); ms=$(median "${withsrl[@]}")
ratio=$(awk -v a="$ms" -v b="$mp" 'BEGIN {printf "%.1f", 100 * a / b}')
verdict=$(awk -v r="$ratio" 'BEGIN {print (r >= 98.0) ? "met" : "MISSED"}')
echo "| server | requests/s (median of $rounds x ${secs} s, wrk -t2 -c16) | all rounds |"
echo "| --- | ---: | --- |"
echo "| apache2 prefork, 8 workers, 512-byte file | $mp | ${plain[*]} |"
echo "| the same + mod_srl (SrlLimiter NAME $limiter, SrlKey ip) | $ms | ${withsrl[*]} |"
echo
echo "mod_srl keeps $ratio % of Apache's requests/s (target >= 98 %: $verdict)."
# Each round's two runs are back to back, so their ratio cancels what the
# machine's speed does between rounds; its median is printed beside the
# verdict (which stays on the medians above), to tell drift from a cost.
pairs=()
for r in $(seq 0 $((rounds - 1))); do
  pairs+=("$(awk -v a="${withsrl[$r]}" -v b="${plain[$r]}" 'BEGIN {printf "%.1f", 100 * a / b}')")
done
echo "Round by round (mod_srl / plain, %): ${pairs[*]}; median $(median "${pairs[@]}") %."
