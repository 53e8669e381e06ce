#!/usr/bin/env bash
# gunicorn.sh MODE - the Python binding under Debian's gunicorn (MODE: preload
# or nopreload, i.e. with or without --preload).
#
# Starts gunicorn with 4 sync workers on 127.0.0.1 (workers as www-data when
# we are root), serving tests/e2e/gunicorn_app.py: srl.wsgi.RateLimit over one
# shared segment, policy token_bucket:12/1d (nothing refills during the
# test), in front of an app that answers its pid.  40 requests for one key
# are in flight at once (httpc.py hold); the app's barrier makes every worker
# hold one before any is decided.  Checks:
#   1  --preload loaded the app (and opened the limiter) once, in the master;
#      without it, in each of the 4 workers
#   2  exactly 12 of the 40 admitted host-wide, 28 answered 429 with
#      Retry-After (one token: 7200 s, rounded up) and RateLimit r=0; every
#      answer carries RateLimit-Policy; answered by all 4 worker pids
#   3  rlctl info on the segment agrees (allowed 12, denied 28, 1 key), and
#      the segment's owner is the process that created it
#   5  an empty X-Key is not limited, a 5000-byte one is limited (fitted),
#      neither raises (issue 39: the middleware used to answer them 500)
#   4  gunicorn stopped by its pid takes its workers with it
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
mode=${1:?usage: gunicorn.sh preload|nopreload}
: "${SRL_PYTHONPATH:?SRL_PYTHONPATH (python/ of the build tree) is not set}"
need "$SRL_PYTHONPATH/srl/__init__.py" "$SRL_PYTHONPATH/srl/wsgi.py" "$SRL_RLCTL"
command -v gunicorn >/dev/null || die "gunicorn is not installed (apt-get install gunicorn)"

LIMIT=12 M=40 WORKERS=4
TOKEN_S=$((86400 / LIMIT))
e2e_tmpdir "gunicorn-$mode"
mkdir -m 1777 "$e2e_tmp/pids"
srl_token="srl-e2e-gunicorn-$mode-$$"
e2e_segments+=("/$srl_token")
port=$(free_port)

extra=()
[ "$mode" = preload ] && extra+=(--preload)
[ "$(id -u)" -eq 0 ] && extra+=(--user "$e2e_user" --group "$e2e_group")
SRL_GUNICORN_DIR="$e2e_tmp/pids" SRL_GUNICORN_WORKERS=$WORKERS \
SRL_GUNICORN_SEGMENT="$srl_token" SRL_GUNICORN_POLICY="token_bucket:$LIMIT/1d" \
PYTHONPATH="$SRL_PYTHONPATH:$SRL_E2E_DIR" PYTHONDONTWRITEBYTECODE=1 \
  gunicorn --workers $WORKERS --worker-class sync --bind "127.0.0.1:$port" \
    --backlog 64 --timeout 60 --graceful-timeout 5 "${extra[@]}" \
    --error-logfile "$e2e_tmp/error.log" --access-logfile "$e2e_tmp/access.log" \
    --access-logformat '%(p)s %(s)s key=%({x-key}i)s' \
    gunicorn_app:application &
gpid=$!
e2e_pids+=("$gpid")
e2e_logs+=("$e2e_tmp/error.log" "$e2e_tmp/access.log")

booted() { [ "$(grep -c 'Booting worker with pid' "$e2e_tmp/error.log")" -ge $WORKERS ] &&
           curl -sf -o /dev/null "http://127.0.0.1:$port/ping"; }
wait_until 30 booted || die "gunicorn did not start 4 workers on port $port"
workers=$(sed -n 's/.*Booting worker with pid: \([0-9]*\).*/\1/p' "$e2e_tmp/error.log" | sort -u | xargs)
check_eq "0: worker processes booted" $WORKERS "$(wc -w <<<"$workers")"

# --- 1: where the app (and so the limiter) was opened
loaded=$(cd "$e2e_tmp/pids" && ls loaded.* | sed 's/loaded\.//' | sort -u | xargs)
if [ "$mode" = preload ]; then
  check_eq "1: --preload: the app was loaded once, by the master" "$gpid" "$loaded"
else
  check_eq "1: no --preload: the app was loaded by each worker" "$workers" "$loaded"
fi

# --- 2: one key, M requests in flight at once
T=$'\t'
policy_hdr="\"$srl_token\";q=$LIMIT;w=86400"   # the limiter's name, as mod_srl and PHP
wsgi_hold_hot "$port"
out=$wsgi_out
check_eq "2: every answer has RateLimit-Policy" $M \
  "$(awk -F '\t' -v p="$policy_hdr" '$4 == p' <<<"$out" | wc -l)"
check_eq "2: admitted answers count remaining down (sorted)" "$(seq 0 $((LIMIT - 1)) | tr '\n' ' ')" \
  "$(grep "^200$T" <<<"$out" | sed 's/.*;r=\([0-9]*\);t=.*/\1/' | sort -n | tr '\n' ' ')"
wait_until 10 test "$(grep -c 'key=hot' "$e2e_tmp/access.log")" -ge $M
check_eq "2: access log: admitted" $LIMIT "$(grep -c '^<[0-9]*> 200 key=hot$' "$e2e_tmp/access.log")"
answered=$(sed -n 's/^<\([0-9]*\)> [0-9]* key=hot$/\1/p' "$e2e_tmp/access.log" | sort -u | xargs)
check_eq "2: worker pids that answered (all of them)" "$workers" "$answered"
check_gt "2: distinct worker pids that answered" 1 "$(wc -w <<<"$answered")"

# --- 3: rlctl agrees
rlctl_agrees_hot "/$srl_token"
owner=$e2e_user; [ "$mode" = preload ] && owner=$(id -un)
check_eq "3: segment owner (its creator) and mode" "$owner 600" "$(stat -c '%U %a' "/dev/shm/$srl_token")"

# --- 5: client keys that once raised out of the middleware (HTTP 500): an
# empty X-Key is not limited (no RateLimit header), a 5000-byte one is
# limited under its srl_key_fit form (a new key: r=LIMIT-1)
hdrs=$(curl -s -D - -o /dev/null -H 'X-Key;' "http://127.0.0.1:$port/" | tr -d '\r')
check_eq "5: an empty X-Key: status, RateLimit headers" "HTTP/1.1 200 OK 0" \
  "$(head -1 <<<"$hdrs") $(grep -ci '^ratelimit' <<<"$hdrs")"
long=$(head -c 5000 /dev/zero | tr '\0' L)
hdrs=$(curl -s -D - -o /dev/null -H "X-Key: $long" "http://127.0.0.1:$port/" | tr -d '\r')
check_eq "5: a 5000-byte X-Key: status, RateLimit" "HTTP/1.1 200 OK RateLimit: \"$srl_token\";r=$((LIMIT - 1));t=$TOKEN_S" \
  "$(head -1 <<<"$hdrs") $(grep -i '^ratelimit:' <<<"$hdrs")"
check_eq "5: error log: no traceback" 0 "$(grep -c Traceback "$e2e_tmp/error.log")"

# --- 4: stopped by its pid, with its workers
stop_pid "$gpid"
left=0
for p in $workers; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
check_eq "4: workers left after gunicorn stopped" 0 "$left"

e2e_finish "$mode"
