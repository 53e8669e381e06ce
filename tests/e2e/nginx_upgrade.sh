#!/usr/bin/env bash
# nginx_upgrade.sh - nginx's binary upgrade keeps every key's state.
#
# The upgrade as nginx documents it: USR2 to the master (it renames its pid
# file to nginx.pid.oldbin and starts a new master, its child, from the
# binary, which parses the configuration and opens the segments again),
# WINCH then QUIT to the old master (its workers, then itself, exit).
# Checks, exact counts, on token_bucket:10/1h:
#   1  before: key alpha 10 of 15 admitted, 5 answered 429
#   2  USR2: a second master runs (nginx.pid names it, nginx.pid.oldbin the
#      old one); QUIT of the old one: it exits, the new master answers
#   3  after: alpha 0 of 10 (it used its 10), every answer 429 with
#      Retry-After at most 360 s (one token of 10/1h); beta gets its own 10 of 12; by the new master's
#      workers (X-Pid); rlctl info: allowed 20, denied 17
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
. "$here/nginx_lib.sh"
need "$SRL_NGX_MOD" "$SRL_RLCTL" /usr/sbin/nginx

e2e_tmpdir nginx-upgrade
e2e_port=$(free_port)
name="srl-e2e-ngxu-$$"
e2e_segments+=("$name")

# Daemonized, as a packaged nginx runs (systemd's Type=forking): nginx
# ignores USR2 while the parent that started its master is alive (it takes
# it for a new binary whose old one still runs), so the master must not be
# our child.  Stopped by pid (the pid file's) at exit.
nginx_conf "
    srl_limiter $name token_bucket:10/1h capacity=100 key_display=16;
    server {
        listen 127.0.0.1:$e2e_port reuseport;
        add_header X-Pid \$pid always;
        location / {
            srl $name key=\$http_x_key;
            try_files /index.html =404;
        }
    }"
e2e_logs+=("$e2e_tmp/error.log" "$e2e_tmp/access.log")
/usr/sbin/nginx -p "$e2e_tmp/" -c "$e2e_tmp/nginx.conf" 2>>"$e2e_tmp/error.log" \
  || die "nginx did not start"
wait_until 10 test -s "$e2e_tmp/nginx.pid" || die "nginx wrote no pid file"
nginx_pid=$(cat "$e2e_tmp/nginx.pid")
e2e_pids+=("$nginx_pid")
wait_until 20 curl -s -o /dev/null "http://127.0.0.1:$e2e_port/__ready" \
  || die "nginx did not answer on port $e2e_port"
four_workers() { [ "$(pgrep -P "$1" | wc -l)" -eq 4 ]; }
wait_until 10 four_workers "$nginx_pid" || die "nginx started no 4 workers"
old_master=$nginx_pid
old_workers=$(nginx_workers)

# --- 1
ngx_http seq 15 / "X-Key: alpha" >"$e2e_tmp/1.out" || fail "1: the client failed"
check_eq "1: alpha: 10 of 15 admitted, then 429" "10 5" \
  "$(awk -F'\t' '$1 == 200' "$e2e_tmp/1.out" | wc -l) $(awk -F'\t' '$1 == 429' "$e2e_tmp/1.out" | wc -l)"

# --- 2: USR2, then WINCH and QUIT of the old master
kill -USR2 "$old_master"
new_master_up() {
  [ -s "$e2e_tmp/nginx.pid.oldbin" ] && [ -s "$e2e_tmp/nginx.pid" ] &&
    [ "$(cat "$e2e_tmp/nginx.pid")" != "$old_master" ] &&
    [ -n "$(pgrep -P "$(cat "$e2e_tmp/nginx.pid")")" ]
}
wait_until 30 new_master_up || die "2: USR2 started no new master with workers"
new_master=$(cat "$e2e_tmp/nginx.pid")
e2e_pids+=("$new_master")   # stopped by pid at exit
check_eq "2: nginx.pid.oldbin names the old master" "$old_master" "$(cat "$e2e_tmp/nginx.pid.oldbin")"
check_eq "2: the new master is the old one's child" "$old_master" "$(awk '{print $4}' "/proc/$new_master/stat")"
kill -WINCH "$old_master"
kill -QUIT "$old_master"
old_gone() { ! kill -0 "$old_master" 2>/dev/null && for p in $old_workers; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
wait_until 30 old_gone || fail "2: the old master or its workers did not exit"
check_eq "2: the new master answers" 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$e2e_port/")"
new_workers=$(pgrep -P "$new_master" | sort -n | tr '\n' ' ')
check_eq "2: the new master runs 4 workers" 4 "$(echo $new_workers | wc -w)"

# --- 3: the state survived
ngx_http seq 10 / "X-Key: alpha" >"$e2e_tmp/3a.out" || fail "3: the client failed"
check_eq "3: alpha (10 of 10 used before the upgrade): 0 of 10, each 429 with Retry-After 1..360" 10 \
  "$(awk -F'\t' '$1 == 429 && $3 >= 1 && $3 <= 360' "$e2e_tmp/3a.out" | wc -l)"
ngx_http seq 12 / "X-Key: beta" >"$e2e_tmp/3b.out" || fail "3: the client failed"
check_eq "3: beta: its own 10 of 12" "10 2" \
  "$(awk -F'\t' '$1 == 200' "$e2e_tmp/3b.out" | wc -l) $(awk -F'\t' '$1 == 429' "$e2e_tmp/3b.out" | wc -l)"
check_eq "3: answered by the new master's workers" "" \
  "$(for p in $(cut -f2 "$e2e_tmp/3a.out" "$e2e_tmp/3b.out" | sort -u); do [[ " $new_workers " == *" $p "* ]] || echo "$p"; done)"
check_eq "3: rlctl info: allowed 20 (alpha 10, beta 10), denied 17 (5 + 10 + 2)" "20 17" \
  "$(rlctl_count "$name" allowed) $(rlctl_count "$name" denied)"
check_eq "3: rlctl list: alpha allowed 10, denied 15" "10 15" \
  "$(rlctl_key "$name" alpha allowed) $(rlctl_key "$name" alpha denied)"

e2e_finish
