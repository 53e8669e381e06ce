#!/usr/bin/env bash
# flask_limiter.sh STRATEGY - Flask-Limiter (Debian's python3-flask-limiter
# 3.3 over python3-limits 2.8) on srl's storage, storage_uri "srl:///PREFIX",
# under Debian's gunicorn, 4 sync workers on 127.0.0.1 (as www-data when we
# are root).  STRATEGY: fixed-window or moving-window.
#
# tests/e2e/flask_app.py limits GET /hit to 12/hour per X-Key, with
# headers_enabled.  40 requests for one key are in flight at once
# (flask_client.py; the app's barrier makes every worker take one before
# any is decided).  Checks:
#   1  every worker answered a /hit (the barrier saw 4 pids)
#   2  exactly 12 x 200 and 28 x 429, host-wide; every answer has
#      X-RateLimit-Limit 12, X-RateLimit-Remaining (0 on every 429, 0..11
#      on a 200), X-RateLimit-Reset one hour after a hit of this run, and
#      Retry-After the seconds to it (3598..3600)
#   3  rlctl info on the storage's segment: fixed-window counts every hit
#      in PREFIX.fw.3600 (limits' incr: 40 allowed, none denied); moving-
#      window decides in PREFIX.mw.12.3600 (12 allowed, 28 denied); 1 key
#   4  gunicorn stopped by its pid takes its workers with it
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
strategy=${1:?usage: flask_limiter.sh fixed-window|moving-window}
: "${SRL_PYTHONPATH:?SRL_PYTHONPATH (python/ of the build tree) is not set}"
need "$SRL_PYTHONPATH/srl/__init__.py" "$SRL_PYTHONPATH/srl/limits_storage.py" "$SRL_RLCTL"
command -v gunicorn >/dev/null || die "gunicorn is not installed (apt-get install gunicorn)"
/usr/bin/python3 -c 'import flask_limiter, limits' 2>/dev/null || {
  echo "python3-flask-limiter or python3-limits not installed: skipped"; exit 77; }

LIMIT=12 M=40 WORKERS=4
e2e_tmpdir "flask-$strategy"
mkdir -m 1777 "$e2e_tmp/pids"
prefix="srl-e2e-flask-$strategy-$$"
case $strategy in
  fixed-window) seg="$prefix.fw.3600" seg_allowed=$M seg_denied=0 ;;
  moving-window) seg="$prefix.mw.$LIMIT.3600" seg_allowed=$LIMIT seg_denied=$((M - LIMIT)) ;;
  *) die "unknown strategy $strategy" ;;
esac
e2e_segments+=("/$seg")
port=$(free_port)

extra=()
[ "$(id -u)" -eq 0 ] && extra+=(--user "$e2e_user" --group "$e2e_group")
SRL_FLASK_DIR="$e2e_tmp/pids" SRL_FLASK_WORKERS=$WORKERS SRL_FLASK_STRATEGY=$strategy \
SRL_FLASK_STORAGE="srl:///$prefix?capacity=1024" \
PYTHONPATH="$SRL_PYTHONPATH:$SRL_E2E_DIR" PYTHONDONTWRITEBYTECODE=1 \
  gunicorn --workers $WORKERS --worker-class sync --bind "127.0.0.1:$port" \
    --backlog 64 --timeout 60 --graceful-timeout 5 "${extra[@]}" \
    --error-logfile "$e2e_tmp/error.log" --access-logfile "$e2e_tmp/access.log" \
    flask_app:application &
gpid=$!
e2e_pids+=("$gpid")
e2e_logs+=("$e2e_tmp/error.log" "$e2e_tmp/access.log")

booted() { [ "$(grep -c 'Booting worker with pid' "$e2e_tmp/error.log")" -ge $WORKERS ] &&
           curl -sf -o /dev/null "http://127.0.0.1:$port/ping"; }
wait_until 30 booted || die "gunicorn did not start 4 workers on port $port"
workers=$(sed -n 's/.*Booting worker with pid: \([0-9]*\).*/\1/p' "$e2e_tmp/error.log" | sort -u | xargs)

# --- 2 (and 1): one key, M requests in flight at once
T=$'\t'
t0=$(date +%s)
out=$(python3 "$SRL_E2E_DIR/flask_client.py" 127.0.0.1 "$port" /hit $M "X-Key: hot")
t1=$(date +%s)
check_eq "1: worker pids that took a /hit (the barrier's)" "$workers" \
  "$(cd "$e2e_tmp/pids" && ls worker.* | sed 's/worker\.//' | sort -u | xargs)"
check_eq "2: answers" $M "$(grep -c . <<<"$out")"
check_eq "2: admitted host-wide" $LIMIT "$(grep -c "^200$T" <<<"$out")"
check_eq "2: answered 429" $((M - LIMIT)) "$(grep -c "^429$T" <<<"$out")"
check_eq "2: every 429 says X-RateLimit-Limit 12, Remaining 0" $((M - LIMIT)) \
  "$(grep -c "^429${T}12${T}0$T" <<<"$out")"
check_eq "2: every 200 says Limit 12, Remaining 0..11, and its worker's pid" $LIMIT \
  "$(awk -F '\t' -v w=" $workers " '$1 == 200 && $2 == 12 && $3 >= 0 && $3 <= 11 &&
        index(w, " " $6 " ")' <<<"$out" | wc -l)"
check_eq "2: X-RateLimit-Reset is a hit of this run + 3600 s on every answer" $M \
  "$(awk -F '\t' -v a=$((t0 + 3599)) -v b=$((t1 + 3601)) '$4 >= a && $4 <= b' <<<"$out" | wc -l)"
check_eq "2: Retry-After is the seconds to it (3598..3600) on every answer" $M \
  "$(awk -F '\t' '$5 >= 3598 && $5 <= 3600' <<<"$out" | wc -l)"

# --- 3: rlctl agrees
check_eq "3: rlctl info $seg: allowed" $seg_allowed "$(rlctl_count "/$seg" allowed)"
check_eq "3: rlctl info $seg: denied" $seg_denied "$(rlctl_count "/$seg" denied)"
check_eq "3: rlctl info $seg: keys tracked" 1 "$(rlctl_count "/$seg" used)"

# --- 4: stopped by its pid, with its workers
stop_pid "$gpid"
left=0
for p in $workers; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
check_eq "4: workers left after gunicorn stopped" 0 "$left"

e2e_finish "$strategy"
