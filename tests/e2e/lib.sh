# lib.sh - shared helpers of the end-to-end tests (sourced, not run).
#
# Every check prints what it checked ("ok: ..." or "FAIL: ...") and a failed
# check makes the test exit non-zero at the end (e2e_finish), after the
# servers were stopped by their pids (e2e_cleanup, on EXIT).  Paths of the
# built artefacts come from meson through the environment:
#   SRL_LIBDIR (libsrl.so.0), SRL_MOD (mod_srl.so), SRL_RLCTL (rlctl),
#   SRL_PHP_DIR (php/ of the source tree), SRL_E2E_DIR (this directory).
set -uo pipefail

e2e_failures=0
e2e_checks=0
e2e_pids=()        # servers to stop, by pid
e2e_segments=()    # segment names to unlink
e2e_logs=()        # logs to show when a check failed

ok()   { e2e_checks=$((e2e_checks + 1)); echo "ok: $*"; }
e2e_failed=()     # the failed checks, repeated after the logs (CI shows the tail)
fail() { e2e_checks=$((e2e_checks + 1)); e2e_failures=$((e2e_failures + 1)); e2e_failed+=("FAIL: $*"); echo "FAIL: $*"; }
die()  { echo "FATAL: $*"; e2e_failures=$((e2e_failures + 1)); e2e_failed+=("FATAL: $*"); exit 1; }

# check_eq WHAT EXPECTED ACTUAL
check_eq() {
  if [ "$2" == "$3" ]; then ok "$1 = $3"; else fail "$1: expected '$2', got '$3'"; fi
}
# check_range WHAT LOW HIGH ACTUAL (integers, inclusive)
check_range() {
  if [[ "$4" =~ ^[0-9]+$ ]] && [ "$4" -ge "$2" ] && [ "$4" -le "$3" ]; then
    ok "$1 = $4 (in $2..$3)"
  else
    fail "$1: expected $2..$3, got '$4'"
  fi
}
# check_gt WHAT LOW ACTUAL: ACTUAL > LOW
check_gt() {
  if [[ "$3" =~ ^[0-9]+$ ]] && [ "$3" -gt "$2" ]; then ok "$1 = $3 (> $2)"; else fail "$1: expected > $2, got '$3'"; fi
}

need() { for f in "$@"; do [ -e "$f" ] || die "missing $f (is it built?)"; done; }

# A TCP port nobody listens on now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_until SECONDS COMMAND...: poll every 0.1 s.
wait_until() {
  local n=$(( $1 * 10 )); shift
  while [ $n -gt 0 ]; do "$@" 2>/dev/null && return 0; sleep 0.1; n=$((n - 1)); done
  return 1
}

# The user the servers' workers run as: www-data when we are root.
if [ "$(id -u)" -eq 0 ]; then
  e2e_user=www-data; e2e_group=www-data
else
  e2e_user=$(id -un); e2e_group=$(id -gn)
fi
# as_worker COMMAND...: run as the workers' user, environment kept.
as_worker() {
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid="$e2e_user" --regid="$e2e_group" --clear-groups -- "$@"
  else
    "$@"
  fi
}

# A temporary directory the workers' user can read (sockets, scripts, logs).
e2e_tmpdir() {
  e2e_tmp=$(mktemp -d "${TMPDIR:-/tmp}/srl-e2e-$1.XXXXXX") || die "mktemp"
  chmod 0755 "$e2e_tmp"
}

# stop_pid PID: SIGTERM, then wait (bounded) for it to exit.
stop_pid() {
  local pid=$1 sig=${2:-TERM}
  kill -0 "$pid" 2>/dev/null || return 0
  kill -s "$sig" "$pid" 2>/dev/null
  kill -CONT "$pid" 2>/dev/null   # a stopped process (lock_stopper) takes SIGTERM only when run
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "note: $pid ignored SIG$sig for 10 s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  return 0
}

e2e_cleanup() {
  local pid seg
  for pid in "${e2e_pids[@]}"; do stop_pid "$pid"; done
  for seg in "${e2e_segments[@]}"; do rm -f "/dev/shm/${seg#/}"; done
  if [ "$e2e_failures" -ne 0 ]; then
    local f
    for f in "${e2e_logs[@]}"; do
      [ -f "$f" ] && { echo "----- $f (last 40 lines)"; tail -40 "$f"; }
    done
    echo "----- $(basename "$0"): the failed checks again"
    printf '%s\n' "${e2e_failed[@]}"
  fi
  [ -n "${e2e_tmp:-}" ] && rm -rf "$e2e_tmp"
}
trap e2e_cleanup EXIT
# meson's timeout sends SIGTERM: exit through the EXIT trap, so that the servers
# and helpers the test started are stopped by their pids then too.
trap 'exit 143' TERM
trap 'exit 130' INT

e2e_finish() {
  echo "$(basename "$0") $*: $e2e_checks checks, $e2e_failures failed"
  [ "$e2e_failures" -eq 0 ]
  exit $?
}

# rlctl_as_owner CMD NAME ARGS...: rlctl as NAME's owner.  srl maps only its
# caller's own segments (root included: docs/design.md, "Trust"), and the
# servers' segments belong to their worker user (www-data) or, when a root
# master created them before forking (gunicorn --preload), to root: root's
# rlctl becomes the owner with --owner.
rlctl_as_owner() {
  local owner
  owner=$(stat -c %U "/dev/shm/${2#/}" 2>/dev/null || echo "")
  if [ "$(id -u)" -eq 0 ] && [ -n "$owner" ] && [ "$owner" != root ]; then
    "$SRL_RLCTL" --owner "$owner" "$@"
  else
    "$SRL_RLCTL" "$@"
  fi
}

# count_sum N...: their sum, or the first that is not a count (an
# rlctl_count that failed), so a check fails instead of the script.
count_sum() {
  local t=0 v
  for v in "$@"; do
    [[ $v =~ ^[0-9]+$ ]] || { echo "not a count: $v"; return; }
    t=$((t + v))
  done
  echo "$t"
}

# rlctl_count NAME FIELD: a member of `rlctl info NAME --json` (the first
# number or string of that name, at any depth), or "rlctl-failed: ...".
rlctl_count() {
  local json rc
  json=$(rlctl_as_owner info "$1" --json 2>&1); rc=$?
  if [ $rc -ne 0 ]; then echo "rlctl-failed(exit $rc): $json" | head -1; return; fi
  python3 -c '
import json, sys
want = sys.argv[1]
def find(o):
    if isinstance(o, dict):
        if want in o and isinstance(o[want], (int, str)):
            return o[want]
        for v in o.values():
            r = find(v)
            if r is not None:
                return r
    return None
try:
    r = find(json.loads(sys.argv[2]))
except ValueError as e:
    r = "unparsable: %s" % e
print("missing" if r is None else r)' "$2" "$json"
}

# rlctl_key NAME KEY FIELD: one member of KEY's entry in `rlctl list NAME
# --json` (needs key_display long enough to show the key), or "absent".
rlctl_key() {
  local json rc
  json=$(rlctl_as_owner list "$1" --json 2>&1); rc=$?
  if [ $rc -ne 0 ]; then echo "rlctl-failed(exit $rc): $json" | head -1; return; fi
  python3 -c '
import json, sys
try:
    keys = [k for k in json.loads(sys.argv[3])["keys"] if k.get("key") == sys.argv[1]]
    print(keys[0].get(sys.argv[2], "missing") if keys else "absent")
except (ValueError, KeyError, TypeError) as e:
    print("unparsable: %s" % e)' "$2" "$3" "$json"
}

# ---------------------------------------------------------------- apache

# apache_check_conf MPM CONF_BODY: write $e2e_tmp/check.conf, a configuration
# for `apache2 -t` and for starts that must fail (no User, log check.log),
# with the modules the tests' bodies use.
apache_check_conf() {
  local moddir=/usr/lib/apache2/modules
  mkdir -p "$e2e_tmp/htdocs" "$e2e_tmp/run"
  cat >"$e2e_tmp/check.conf" <<CONF
ServerRoot "$e2e_tmp"
ServerName 127.0.0.1
Listen 127.0.0.1:$e2e_port
LoadModule mpm_${1}_module $moddir/mod_mpm_${1}.so
LoadModule authz_core_module $moddir/mod_authz_core.so
LoadModule dir_module $moddir/mod_dir.so
LoadModule setenvif_module $moddir/mod_setenvif.so
LoadModule srl_module $SRL_MOD
PidFile "$e2e_tmp/run/check.pid"
DefaultRuntimeDir "$e2e_tmp/run"
ErrorLog "$e2e_tmp/check.log"
DocumentRoot "$e2e_tmp/htdocs"
$2
CONF
}

# apache_start MPM CONF_BODY: write httpd.conf in $e2e_tmp and start apache2
# in the foreground (as our child), on $e2e_port; sets apache_pid.
apache_start() {
  local mpm=$1 body=$2 mpmconf
  local moddir=/usr/lib/apache2/modules
  if [ "$mpm" = prefork ]; then
    mpmconf="StartServers 4
MinSpareServers 4
MaxSpareServers 8
ServerLimit 8
MaxRequestWorkers 8
MaxConnectionsPerChild 0"
  else
    mpmconf="StartServers 4
ServerLimit 4
ThreadsPerChild 2
MaxRequestWorkers 8
MinSpareThreads 2
MaxSpareThreads 8
ThreadLimit 2
MaxConnectionsPerChild 0"
  fi
  local userconf=""
  [ "$(id -u)" -eq 0 ] && userconf="User $e2e_user
Group $e2e_group"
  mkdir -p "$e2e_tmp/htdocs" "$e2e_tmp/run"
  cat >"$e2e_tmp/httpd.conf" <<CONF
ServerRoot "$e2e_tmp"
ServerName 127.0.0.1
Listen 127.0.0.1:$e2e_port
LoadModule mpm_${mpm}_module $moddir/mod_mpm_${mpm}.so
LoadModule authz_core_module $moddir/mod_authz_core.so
LoadModule dir_module $moddir/mod_dir.so
LoadModule setenvif_module $moddir/mod_setenvif.so
LoadModule srl_module $SRL_MOD
$userconf
$mpmconf
PidFile "$e2e_tmp/run/httpd.pid"
DefaultRuntimeDir "$e2e_tmp/run"
ErrorLog "$e2e_tmp/error.log"
LogLevel warn srl:info
LogFormat "%P %>s %U key=%{X-Key}i env=%{X-Env-Key}i limited=%{SRL_LIMITED}e" srl
CustomLog "$e2e_tmp/access.log" srl
KeepAlive Off
DocumentRoot "$e2e_tmp/htdocs"
<Directory "$e2e_tmp/htdocs">
    Require all granted
</Directory>
$body
CONF
  e2e_logs+=("$e2e_tmp/error.log" "$e2e_tmp/access.log")
  # Its own session: on shutdown prefork signals its whole process group,
  # which must not include this script.  setsid execs in place (a
  # background job is no group leader), so $! stays apache2's pid.
  setsid /usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/httpd.conf" -DFOREGROUND &
  apache_pid=$!
  e2e_pids+=("$apache_pid")
  wait_until 20 curl -s -o /dev/null "http://127.0.0.1:$e2e_port/" \
    || die "apache2 ($mpm) did not answer on port $e2e_port"
  wait_until 10 test -s "$e2e_tmp/run/httpd.pid" || die "apache2 wrote no PidFile"
  check_eq "apache2 ($mpm) PidFile names the process we started" "$apache_pid" \
    "$(cat "$e2e_tmp/run/httpd.pid")"
}

# http MODE COUNT PATH [HEADER...]: requests through httpc.py, one line each:
# "STATUS<TAB>Retry-After<TAB>RateLimit<TAB>RateLimit-Policy".
http() {
  local mode=$1 count=$2 path=$3; shift 3
  python3 "$SRL_E2E_DIR/httpc.py" "$mode" 127.0.0.1 "$e2e_port" "$path" "$count" "$@"
}

# ----------------------------------------------------------------- redis

# redis_start: a redis-server of this test on $e2e_tmp/redis/redis.sock (mode
# 0777, so the servers' workers reach it), no TCP port, no persistence,
# running as the workers' user (so a worker-side test may SIGSTOP it),
# stopped by its pid at exit; sets redis_pid and redis_sock.
redis_start() {
  command -v redis-server >/dev/null || die "redis-server is not installed"
  redis_sock="$e2e_tmp/redis/redis.sock"
  mkdir -p "$e2e_tmp/redis"
  chmod 0755 "$e2e_tmp/redis"
  [ "$(id -u)" -eq 0 ] && chown "$e2e_user:$e2e_group" "$e2e_tmp/redis"
  local args=(redis-server --port 0 --unixsocket "$redis_sock" --unixsocketperm 777 --save ""
              --appendonly no --dir "$e2e_tmp/redis" --logfile "$e2e_tmp/redis/redis.log")
  # Not through as_worker: $! must be redis-server's own pid (setpriv execs).
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid="$e2e_user" --regid="$e2e_group" --clear-groups -- "${args[@]}" &
  else
    "${args[@]}" &
  fi
  redis_pid=$!
  e2e_pids+=("$redis_pid")
  e2e_logs+=("$e2e_tmp/redis/redis.log")
  wait_until 20 redis-cli -s "$redis_sock" ping >/dev/null || die "redis-server did not start"
}

# ------------------------------------------------------------------- php

# php_ini: $e2e_tmp/php.ini is the build's srl-build.ini (php/srl.ini with
# this source tree's php/ filled in), exactly what php/README.md gives
# php-fpm from a build tree.
php_ini() {
  if grep -q '@SRL_PHP_DIR@' "$SRL_BUILD_INI" ||
     ! grep -qx "ffi.preload = $SRL_PHP_DIR/srl_ffi.h" "$SRL_BUILD_INI"; then
    echo "FAIL: $SRL_BUILD_INI does not name $SRL_PHP_DIR"; exit 1
  fi
  cp "$SRL_BUILD_INI" "$e2e_tmp/php.ini"
  if [ "$(id -u)" -ne 0 ]; then
    sed -i "s|^opcache.preload_user.*|opcache.preload_user = $e2e_user|" "$e2e_tmp/php.ini"
  fi
}

# fpm_need: what the php-fpm tests need, or die naming what is missing.
fpm_need() {
  need "$SRL_LIBDIR/libsrl.so.0" "$SRL_RLCTL" "$SRL_PHP_DIR/Srl.php" "$SRL_PHP_DIR/srl_ffi.h"
  command -v php-fpm8.2 >/dev/null || die "php-fpm8.2 is not installed"
  command -v cgi-fcgi >/dev/null || die "cgi-fcgi (libfcgi-bin) is not installed"
}

# fpm_start POOL...: php-fpm with one static pool of 4 children per name,
# each on $e2e_tmp/POOL.sock; sets fpm_pid.  $fpm_pool_extra_POOL, if set,
# is added to that pool's section (e.g. request_terminate_timeout = 2s).
fpm_start() {
  php_ini
  {
    echo "[global]"
    echo "pid = $e2e_tmp/fpm.pid"
    echo "error_log = $e2e_tmp/fpm.log"
    echo "daemonize = no"
    local p
    for p in "$@"; do
      echo "[$p]"
      [ "$(id -u)" -eq 0 ] && { echo "user = $e2e_user"; echo "group = $e2e_group"; }
      echo "listen = $e2e_tmp/$p.sock"
      echo "listen.mode = 0666"
      echo "pm = static"
      echo "pm.max_children = 4"
      echo "env[SRL_POOL] = $p"
      echo "catch_workers_output = yes"
      local extra="fpm_pool_extra_$p"
      [ -n "${!extra:-}" ] && echo "${!extra}"
    done
  } >"$e2e_tmp/fpm.conf"
  e2e_logs+=("$e2e_tmp/fpm.log")
  # The master binds libsrl (ffi.preload) before forking: it needs the path.
  LD_LIBRARY_PATH="$SRL_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    php-fpm8.2 -c "$e2e_tmp/php.ini" -y "$e2e_tmp/fpm.conf" -F &
  fpm_pid=$!
  e2e_pids+=("$fpm_pid")
  for p in "$@"; do
    wait_until 20 test -S "$e2e_tmp/$p.sock" || die "php-fpm did not open $p.sock"
  done
  wait_until 10 test -s "$e2e_tmp/fpm.pid" || die "php-fpm wrote no pid file"
  check_eq "php-fpm pid file names the process we started" "$fpm_pid" "$(cat "$e2e_tmp/fpm.pid")"
}

# fcgi POOL KEY [VAR=VALUE...]: one request to tests/e2e/limit.php (or
# $fcgi_script) through cgi-fcgi; prints the whole FastCGI response
# (headers, blank line, body).
fcgi() {
  local pool=$1 key=$2 script=${fcgi_script:-limit.php}; shift 2
  env -i SCRIPT_FILENAME="$SRL_E2E_DIR/$script" SCRIPT_NAME="/$script" REQUEST_METHOD=GET \
    SRL_PHP_DIR="$SRL_PHP_DIR" SRL_NAME="$srl_name" SRL_POLICY="$srl_policy" \
    SRL_CAPACITY="$srl_capacity" SRL_KEY_DISPLAY="${srl_key_display:-0}" SRL_KEY="$key" \
    SRL_REDIS="${srl_redis:-}" "$@" cgi-fcgi -bind -connect "$e2e_tmp/$pool.sock"
}

# cli KEY REPEAT: REPEAT acquires from one PHP CLI process (ffi.enable=1).
cli() {
  SRL_PHP_DIR="$SRL_PHP_DIR" SRL_NAME="$srl_name" SRL_POLICY="$srl_policy" \
    SRL_CAPACITY="$srl_capacity" SRL_KEY_DISPLAY="${srl_key_display:-0}" SRL_KEY="$1" \
    SRL_REPEAT="$2" SRL_POOL=cli SRL_REDIS="${srl_redis:-}" \
    LD_LIBRARY_PATH="$SRL_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    as_worker php -n -d extension=ffi -d ffi.enable=1 "$SRL_E2E_DIR/limit.php"
}

# The hot-key check of the WSGI servers' e2e tests (gunicorn.sh, uwsgi.sh):
# M requests for key "hot" held open at once against PORT, whose policy is
# LIMIT a day (TOKEN_S seconds a token).  Exactly LIMIT admitted host-wide,
# every 429 with Retry-After one token and RateLimit r=0, both headers
# named after the limiter (the segment $srl_token, as mod_srl and PHP name
# it).  The answers (status TAB retry-after TAB ratelimit TAB policy) are
# left in $wsgi_out.
wsgi_hold_hot() {
  local port=$1 T=$'\t'
  local denied="429$T$TOKEN_S$T\"$srl_token\";r=0;t=$TOKEN_S$T\"$srl_token\";q=$LIMIT;w=86400"
  wsgi_out=$(python3 "$SRL_E2E_DIR/httpc.py" hold 127.0.0.1 "$port" /hit $M "X-Key: hot")
  check_eq "2: answers" $M "$(grep -c . <<<"$wsgi_out")"
  check_eq "2: admitted host-wide" $LIMIT "$(grep -c "^200$T" <<<"$wsgi_out")"
  check_eq "2: answered 429" $((M - LIMIT)) "$(grep -c "^429$T" <<<"$wsgi_out")"
  check_eq "2: every 429 has Retry-After = one token and RateLimit r=0" $((M - LIMIT)) \
    "$(grep -cxF "$denied" <<<"$wsgi_out")"
}

# rlctl on segment NAME counts what wsgi_hold_hot sent: LIMIT allowed,
# M - LIMIT denied, one key.
rlctl_agrees_hot() {
  check_eq "3: rlctl info: allowed" $LIMIT "$(rlctl_count "$1" allowed)"
  check_eq "3: rlctl info: denied" $((M - LIMIT)) "$(rlctl_count "$1" denied)"
  check_eq "3: rlctl info: keys tracked" 1 "$(rlctl_count "$1" used)"
}

# ------------------------------------------------------ in-flight waves
# The in-flight tests (apache_concurrency.sh, php_concurrency.sh) start
# requests in the background whose handlers create $ctl/PHASE/in.* once
# admitted and then wait for $ctl/PHASE/release; each answered request
# leaves $res/PHASE.N.  A wave is judged once it has settled: every request
# has either entered its handler or been answered.
wave_pids=()
wave_dir() { mkdir -p "$ctl/$1"; chmod 0777 "$ctl/$1"; }
entered() { find "$ctl/$1" -name 'in.*' | wc -l; }
answered() { find "$res" -name "$1.*" ! -name '*.tmp' | wc -l; }
settled() { [ $(( $(entered "$1") + $(answered "$1") )) -ge "$2" ]; }
release() { : >"$ctl/$1/release"; }
# at_least entered|answered PHASE N: a condition for wait_until, evaluated
# on each poll (a "$(...)" argument would be evaluated once, before it)
at_least() { [ "$("$1" "$2")" -ge "$3" ]; }
wave_wait() { local p; for p in "${wave_pids[@]}"; do wait "$p"; done; wave_pids=(); }
# in_flight NAME KEY: units of KEY held now, as `rlctl get --json` shows
# them (the concurrency limit's "inflight"; 0 for a key not tracked);
# holders NAME KEY: the pids holding them, sorted, space-separated.
rlctl_inflight() {
  rlctl_as_owner get "$1" "$2" --json 2>/dev/null | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    c = [l for l in d.get("limits", []) if "inflight" in l]
    if sys.argv[1] == "count":
        print(c[0]["inflight"] if c else 0 if not d["tracked"] else "no inflight field")
    else:
        print(" ".join(sorted(str(h["pid"]) for l in c for h in l["holders"])))
except (ValueError, KeyError) as e:
    print("unparsable: %s" % e)' "$3"
}
in_flight() { rlctl_inflight "$1" "$2" count; }
holders() { rlctl_inflight "$1" "$2" pids; }
# idle NAME KEY: nothing of KEY in flight
idle() { [ "$(in_flight "$1" "$2")" = 0 ]; }
