#!/usr/bin/env bash
# mixed.sh - Apache (mod_srl) and PHP (php-fpm + Srl.php) on one segment.
#
# apache2 (prefork, workers as www-data) declares the limiter
# (token_bucket:12/1d, capacity 1024) and creates the segment at startup;
# php-fpm (one static pool of 4, workers as www-data) opens the same
# name, policy and capacity from Srl.php.  One key is shared by both:
#   1  24 requests alternating Apache, PHP, Apache, ...: exactly 12
#      admitted in all, 6 by each, the remaining counts interleaved
#      (Apache r=11,9,..,1, PHP 10,8,..,0): one limit, not two
#   2  a second key hit at once by 20 held Apache connections and 20
#      concurrent fpm requests: exactly 12 admitted in all
#   3  rlctl info agrees: allowed 24, denied 28 + 12 = 40, keys 2
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
need "$SRL_MOD" "$SRL_LIBDIR/libsrl.so.0" "$SRL_RLCTL" "$SRL_PHP_DIR/Srl.php"

LIMIT=12
e2e_tmpdir mixed
e2e_port=$(free_port)
srl_token="srl-e2e-mix-$$"
srl_name="/$srl_token"
srl_policy="token_bucket:$LIMIT/1d"
srl_capacity=1024
srl_key_display=16       # for rlctl list; part of the geometry: both sides pass it
e2e_segments+=("$srl_name")
mkdir -p "$e2e_tmp/htdocs"; echo x >"$e2e_tmp/htdocs/x"

apache_start prefork "SrlLimiter $srl_name $srl_policy $srl_capacity key_display=$srl_key_display
SrlLimit $srl_name
SrlKey header:X-Key"
check_eq "the segment exists once Apache started" present \
  "$([ -e "/dev/shm/$srl_token" ] && echo present || echo absent)"
fpm_start m

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# --- 1: alternate
ap_status="" ap_r="" php_allowed="" php_rem=""
for i in $(seq 1 $LIMIT); do
  a=$(http seq 1 /x "X-Key: mixed")
  ap_status+="$(cut -f1 <<<"$a") "
  rl=$(cut -f3 <<<"$a"); rl=${rl#*;r=}; ap_r+="${rl%%;*} "
  p=$(fcgi m mixed | grep '^srl ')
  php_allowed+="$(field allowed "$p") "
  php_rem+="$(field remaining "$p") "
done
check_eq "1: Apache statuses" "200 200 200 200 200 200 429 429 429 429 429 429 " "$ap_status"
check_eq "1: PHP decisions" "1 1 1 1 1 1 0 0 0 0 0 0 " "$php_allowed"
check_eq "1: Apache RateLimit r (every other permit)" "11 9 7 5 3 1 0 0 0 0 0 0 " "$ap_r"
check_eq "1: PHP remaining (the permits in between)" "10 8 6 4 2 0 0 0 0 0 0 0 " "$php_rem"

# --- 2: both at once on another key
out="$e2e_tmp/out"; mkdir -p "$out"
jobs_pids=()
http hold 20 /x "X-Key: burst" >"$out/apache" 2>&1 & jobs_pids+=($!)
sleep 0.5   # httpc holds its connections 0.5 s before sending: start together
for i in $(seq 1 20); do
  fcgi m burst SRL_SLEEP_MS=100 >"$out/php$i" 2>&1 & jobs_pids+=($!)
done
for p in "${jobs_pids[@]}"; do wait "$p"; done
ap_ok=$(awk -F'\t' '$1 == 200' "$out/apache" | wc -l)
ap_no=$(awk -F'\t' '$1 == 429' "$out/apache" | wc -l)
php_ok=$(cat "$out"/php* | grep -c '^srl .* allowed=1 ')
php_no=$(cat "$out"/php* | grep -c '^srl .* allowed=0 ')
check_eq "2: answers (20 Apache + 20 PHP)" 40 $((ap_ok + ap_no + php_ok + php_no))
check_eq "2: admitted by Apache and PHP together" $LIMIT $((ap_ok + php_ok))
echo "note: 2: Apache admitted $ap_ok, PHP admitted $php_ok"

# --- 3: rlctl
check_eq "3: rlctl info: allowed" $((2 * LIMIT)) "$(rlctl_count "$srl_name" allowed)"
# denied: 6 + 6 in phase 1, 40 - 12 in phase 2
check_eq "3: rlctl info: denied" 40 "$(rlctl_count "$srl_name" denied)"
check_eq "3: rlctl info: keys tracked" 2 "$(rlctl_count "$srl_name" used)"

check_eq "3: rlctl list: Apache and PHP counted on the same key bytes (allowed/denied)" "12/12" \
  "$(rlctl_key "$srl_name" mixed allowed)/$(rlctl_key "$srl_name" mixed denied)"

stop_pid "$fpm_pid" QUIT
stop_pid "$apache_pid"
check_eq "both servers stopped by their pids" gone \
  "$(kill -0 "$fpm_pid" 2>/dev/null || kill -0 "$apache_pid" 2>/dev/null && echo running || echo gone)"
e2e_finish
