#!/usr/bin/env bash
# nginx_ban_log.sh - the nginx module's log line when a penalty= ban starts
# (issue 41 item 4), in a throwaway nginx (4 workers), with
# srl_ban_log_level notice and a limiter token_bucket:1/1s,penalty=1h..1d:
#   S  key alice, 10 requests one after another: 1 x 200, 9 x 429 with
#      Retry-After 3600 (the 1h ban); error.log has exactly one "ban
#      started" line for alice, at notice, with the key, the policy and
#      until = the requests' time + 3600 s (UTC)
#   B  key bob, 24 requests at once over the workers: exactly 1 admitted,
#      23 refused, exactly one line for bob, whichever worker decided it
#   E  a key with a quote and a backslash is escaped (\xNN)
#   O  location /quiet with srl_ban_log_level off: a ban there logs nothing
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
. "$here/nginx_lib.sh"
need "$SRL_NGX_MOD" /usr/sbin/nginx

e2e_tmpdir nginx-ban
e2e_port=$(free_port)
name="srl-e2e-ngxban-$$"
e2e_segments+=("$name")
POLICY="token_bucket:1/1s,penalty=1h..1d"
nginx_start "    srl_limiter $name $POLICY capacity=100 key_display=32;
    srl_ban_log_level notice;
    server {
        listen 127.0.0.1:$e2e_port reuseport;
        add_header X-Pid \$pid always;
        location / {
            srl $name key=\$http_x_key;
        }
        location /quiet {
            srl $name key=\$http_x_key;
            srl_ban_log_level off;
            try_files /index.html =404;
        }
    }"
log="$e2e_tmp/error.log"
lines() { grep -cF "ban started: key \"$1\"" "$log"; }

t0=$(date +%s)
out=$(ngx_http seq 10 / "X-Key: alice")
t1=$(date +%s)
check_eq "S: 200s" 1 "$(grep -c '^200' <<<"$out")"
check_eq "S: 429s with Retry-After 3600" 9 "$(awk -F'\t' '$1 == 429 && $3 == 3600' <<<"$out" | wc -l)"
wait_until 10 test "$(lines alice)" -ge 1
check_eq "S: exactly one ban line for alice" 1 "$(lines alice)"
line=$(grep -F "ban started: key \"alice\"" "$log")
check_eq "S: at notice, the policy" 1 \
  "$(grep -c "\[notice\] .*srl $name: ban started: key \"alice\", policy $POLICY, until " <<<"$line")"
until_s=$(date -u -d "$(sed -n 's/.*, until \([0-9T:-]*\)Z.*$/\1/p' <<<"$line")" +%s 2>/dev/null || echo 0)
check_range "S: until (UTC) = the requests' time + 3600" $((t0 + 3600)) $((t1 + 3601)) "$until_s"

out=$(ngx_http burst 24 / "X-Key: bob")
check_eq "B: 200s" 1 "$(grep -c '^200' <<<"$out")"
check_eq "B: 429s" 23 "$(grep -c '^429' <<<"$out")"
check_gt "B: answered by more than one worker" 1 "$(cut -f2 <<<"$out" | sort -u | wc -l)"
wait_until 10 test "$(lines bob)" -ge 1
check_eq "B: exactly one ban line for bob" 1 "$(lines bob)"

out=$(ngx_http seq 2 / 'X-Key: e"v\il')
check_eq "E: the odd key banned" 429 "$(sed -n 2p <<<"$out" | cut -f1)"
wait_until 10 grep -qF 'ban started: key "e\x22v\x5cil"' "$log"
check_eq "E: its line, escaped" 1 "$(grep -cF 'ban started: key "e\x22v\x5cil"' "$log")"

out=$(ngx_http seq 3 /quiet "X-Key: carol")
check_eq "O: carol refused" 2 "$(grep -c '^429' <<<"$out")"
check_eq "O: no ban line with srl_ban_log_level off" 0 "$(lines carol)"
e2e_finish
