#!/usr/bin/env bash
# mixed_python.sh - gunicorn (srl.wsgi), php-fpm (Srl.php) and Apache
# (mod_srl) on one segment, for one key.
#
# apache2 (prefork) declares the limiter (token_bucket:12/1d, capacity
# 1024, key_display=32) and creates the segment; php-fpm (a static pool of
# 4) and gunicorn (4 sync workers, tests/e2e/gunicorn_app.py) open the same
# name and geometry.  Each server alone would admit 12 for a key.  Checks:
#   1  12 held Apache connections, 12 concurrent fpm requests and 12 held
#      gunicorn requests, all for key "shared", at once: exactly 12 admitted
#      in all (one limit, not three), 24 refused
#   2  afterwards one more request through each server: all three refused
#   3  rlctl info agrees: allowed 12, denied 27, 1 key
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
: "${SRL_PYTHONPATH:?SRL_PYTHONPATH (python/ of the build tree) is not set}"
need "$SRL_MOD" "$SRL_LIBDIR/libsrl.so.0" "$SRL_RLCTL" "$SRL_PHP_DIR/Srl.php" \
  "$SRL_PYTHONPATH/srl/wsgi.py"
command -v gunicorn >/dev/null || die "gunicorn is not installed (apt-get install gunicorn)"

LIMIT=12 N=12
e2e_tmpdir mixed-python
e2e_port=$(free_port)
srl_token="srl-e2e-mixpy-$$"
srl_name="/$srl_token"
srl_policy="token_bucket:$LIMIT/1d"
srl_capacity=1024
srl_key_display=32       # gunicorn_app.py's geometry
e2e_segments+=("$srl_name")
mkdir -p "$e2e_tmp/htdocs" && echo x >"$e2e_tmp/htdocs/x"
mkdir -m 1777 "$e2e_tmp/pids"

apache_start prefork "SrlLimiter $srl_name $srl_policy $srl_capacity key_display=$srl_key_display
<Location /x>
    SrlLimit $srl_name
    SrlKey header:X-Key
</Location>"
fpm_start m

gport=$(free_port)
guser=(); [ "$(id -u)" -eq 0 ] && guser=(--user "$e2e_user" --group "$e2e_group")
SRL_GUNICORN_DIR="$e2e_tmp/pids" SRL_GUNICORN_WORKERS=4 \
SRL_GUNICORN_SEGMENT="$srl_token" SRL_GUNICORN_POLICY="$srl_policy" \
PYTHONPATH="$SRL_PYTHONPATH:$SRL_E2E_DIR" PYTHONDONTWRITEBYTECODE=1 \
  gunicorn --workers 4 --worker-class sync --bind "127.0.0.1:$gport" --backlog 64 \
    --timeout 60 --graceful-timeout 5 "${guser[@]}" \
    --error-logfile "$e2e_tmp/gunicorn.log" gunicorn_app:application &
gpid=$!
e2e_pids+=("$gpid")
e2e_logs+=("$e2e_tmp/gunicorn.log")
gbooted() { [ "$(grep -c 'Booting worker with pid' "$e2e_tmp/gunicorn.log")" -ge 4 ] &&
            curl -sf -o /dev/null "http://127.0.0.1:$gport/ping"; }
wait_until 30 gbooted || die "gunicorn did not start 4 workers on port $gport"

# --- 1: all three at once
out="$e2e_tmp/out"; mkdir -p "$out"
jobs_pids=()
http hold $N /x "X-Key: shared" >"$out/apache" 2>&1 & jobs_pids+=($!)
python3 "$SRL_E2E_DIR/httpc.py" hold 127.0.0.1 "$gport" /hit $N "X-Key: shared" \
  >"$out/gunicorn" 2>&1 & jobs_pids+=($!)
sleep 0.5   # httpc holds its connections 0.5 s before sending: start together
for i in $(seq 1 $N); do
  fcgi m shared SRL_SLEEP_MS=100 >"$out/php$i" 2>&1 & jobs_pids+=($!)
done
for p in "${jobs_pids[@]}"; do wait "$p"; done
ap_ok=$(awk -F'\t' '$1 == 200' "$out/apache" | wc -l)
ap_no=$(awk -F'\t' '$1 == 429' "$out/apache" | wc -l)
gu_ok=$(awk -F'\t' '$1 == 200' "$out/gunicorn" | wc -l)
gu_no=$(awk -F'\t' '$1 == 429' "$out/gunicorn" | wc -l)
php_ok=$(cat "$out"/php* | grep -c '^srl .* allowed=1 ')
php_no=$(cat "$out"/php* | grep -c '^srl .* allowed=0 ')
check_eq "1: answers ($N each from Apache, gunicorn, PHP)" $((3 * N)) \
  $((ap_ok + ap_no + gu_ok + gu_no + php_ok + php_no))
check_eq "1: admitted by the three together" $LIMIT $((ap_ok + gu_ok + php_ok))
check_eq "1: refused by the three together" $((3 * N - LIMIT)) $((ap_no + gu_no + php_no))
echo "note: 1: Apache admitted $ap_ok, gunicorn $gu_ok, PHP $php_ok"

# --- 2: the key is exhausted for every server
check_eq "2: Apache after" 429 "$(http seq 1 /x "X-Key: shared" | cut -f1)"
check_eq "2: PHP after" 0 "$(fcgi m shared | sed -n 's/^srl .* allowed=\([01]\) .*/\1/p')"
check_eq "2: gunicorn after" 429 "$(python3 "$SRL_E2E_DIR/httpc.py" hold 127.0.0.1 "$gport" /hit 4 \
  "X-Key: shared" | cut -f1 | sort -u | xargs)"

# --- 3: rlctl
check_eq "3: rlctl info: allowed" $LIMIT "$(rlctl_count "$srl_name" allowed)"
check_eq "3: rlctl info: denied" $((3 * N - LIMIT + 6)) "$(rlctl_count "$srl_name" denied)"
check_eq "3: rlctl info: keys tracked" 1 "$(rlctl_count "$srl_name" used)"

stop_pid "$gpid"
stop_pid "$fpm_pid" QUIT
stop_pid "$apache_pid"
e2e_finish
