#!/usr/bin/env bash
# uwsgi.sh MODE - the Python binding under Debian's uWSGI (uwsgi-core with
# uwsgi-plugin-python3), 4 processes; MODE: preload (the app is loaded once,
# then the master forks) or lazy (--lazy-apps: each worker loads it).
#
# The same app and the same shape as gunicorn.sh: tests/e2e/gunicorn_app.py
# (srl.wsgi.RateLimit over one shared segment, token_bucket:12/1d; its
# barrier makes every worker hold one request before any is decided), 40
# requests for one key in flight at once.  Checks:
#   1  where the app was loaded: once (preload) or in each of the 4 workers
#   2  exactly 12 of the 40 admitted host-wide, 28 answered 429 with
#      Retry-After of one token (7200 s); answered by all 4 worker pids
#      (uWSGI's request log, "[pid: N|...] ... (HTTP/1.1 STATUS)")
#   3  rlctl info agrees: allowed 12, denied 28, 1 key
#   4  uWSGI stopped by its pid (--die-on-term) takes its workers with it
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
mode=${1:?usage: uwsgi.sh preload|lazy}
: "${SRL_PYTHONPATH:?SRL_PYTHONPATH (python/ of the build tree) is not set}"
need "$SRL_PYTHONPATH/srl/__init__.py" "$SRL_PYTHONPATH/srl/wsgi.py" "$SRL_RLCTL"
command -v uwsgi >/dev/null && [ -e /usr/lib/uwsgi/plugins/python3_plugin.so ] \
  || { echo "SKIP: uwsgi-core and uwsgi-plugin-python3 are not installed"; exit 77; }

LIMIT=12 M=40 WORKERS=4
TOKEN_S=$((86400 / LIMIT))
e2e_tmpdir "uwsgi-$mode"
mkdir -m 1777 "$e2e_tmp/pids"
srl_token="srl-e2e-uwsgi-$mode-$$"
e2e_segments+=("/$srl_token")
port=$(free_port)

extra=()
[ "$mode" = lazy ] && extra+=(--lazy-apps)
[ "$(id -u)" -eq 0 ] && extra+=(--uid "$e2e_user" --gid "$e2e_group")
SRL_GUNICORN_DIR="$e2e_tmp/pids" SRL_GUNICORN_WORKERS=$WORKERS \
SRL_GUNICORN_SEGMENT="$srl_token" SRL_GUNICORN_POLICY="token_bucket:$LIMIT/1d" \
PYTHONDONTWRITEBYTECODE=1 \
  uwsgi --plugin python3 --master --processes $WORKERS --die-on-term \
    --http-socket "127.0.0.1:$port" --listen 64 \
    --pythonpath "$SRL_PYTHONPATH" --pythonpath "$SRL_E2E_DIR" \
    --module gunicorn_app:application --logto "$e2e_tmp/uwsgi.log" "${extra[@]}" &
upid=$!
e2e_pids+=("$upid")
e2e_logs+=("$e2e_tmp/uwsgi.log")

booted() { [ "$(grep -c 'spawned uWSGI worker' "$e2e_tmp/uwsgi.log")" -ge $WORKERS ] &&
           curl -sf -o /dev/null "http://127.0.0.1:$port/ping"; }
wait_until 30 booted || die "uwsgi did not start $WORKERS workers on port $port"
workers=$(sed -n 's/.*spawned uWSGI worker [0-9]* (pid: \([0-9]*\).*/\1/p' "$e2e_tmp/uwsgi.log" | sort -u | xargs)
check_eq "0: worker processes spawned" $WORKERS "$(wc -w <<<"$workers")"

# --- 1: where the app (and so the limiter) was loaded
loaded=$(cd "$e2e_tmp/pids" && ls loaded.* | sed 's/loaded\.//' | sort -u | xargs)
if [ "$mode" = preload ]; then
  check_eq "1: preload: the app was loaded once, by the master" "$upid" "$loaded"
else
  check_eq "1: --lazy-apps: the app was loaded by each worker" "$workers" "$loaded"
fi

# --- 2: one key, M requests in flight at once
wsgi_hold_hot "$port"
wait_until 10 test "$(grep -c 'GET /hit ' "$e2e_tmp/uwsgi.log")" -ge $M
check_eq "2: request log: admitted" $LIMIT "$(grep 'GET /hit ' "$e2e_tmp/uwsgi.log" | grep -c '(HTTP/1.[01] 200)')"
answered=$(sed -n 's/^\[pid: \([0-9]*\)|.*GET \/hit .*/\1/p' "$e2e_tmp/uwsgi.log" | sort -u | xargs)
check_eq "2: worker pids that answered (all of them)" "$workers" "$answered"

# --- 3: rlctl agrees
rlctl_agrees_hot "/$srl_token"

# --- 4: stopped by its pid, with its workers
stop_pid "$upid"
left=0
for p in $workers; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
check_eq "4: workers left after uwsgi stopped" 0 "$left"

e2e_finish "$mode"
