#!/usr/bin/env bash
# apache_ban_log.sh MPM - mod_srl's log line when a penalty= ban starts
# (issue 41 item 4), in a throwaway apache2 (MPM = prefork or event), with
# SrlBanLogLevel notice and a limiter token_bucket:1/1s,penalty=1h..1d:
#   S  key alice, 10 requests one after another: 1 x 200, 9 x 429 with
#      Retry-After 3600 (the 1h ban); error.log has exactly one "ban
#      started" line for alice, at notice, with the key, the policy and
#      until = the requests' time + 3600 s (UTC)
#   H  key bob, 24 requests held over every child at once: exactly 1
#      admitted, 23 refused, and exactly one line for bob (one per ban
#      start, whichever child decided it)
#   O  a second server generation with SrlBanLogLevel off: a new key's ban
#      logs nothing (graceful restart)
mpm=${1:?usage: apache_ban_log.sh prefork|event}
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
need "$SRL_MOD" /usr/sbin/apache2 /usr/lib/apache2/modules/mod_mpm_$mpm.so

e2e_tmpdir "apache-ban-$mpm"
e2e_port=$(free_port)
name="/srl-e2e-apban-$mpm-$$"
e2e_segments+=("$name")
POLICY="token_bucket:1/1s,penalty=1h..1d"
mkdir -p "$e2e_tmp/htdocs" && echo x >"$e2e_tmp/htdocs/x"
body() {
  echo "SrlLimiter $name $POLICY 4096 key_display=32
SrlBanLogLevel $1
SrlLimit $name
SrlKey header:X-Key"
}
apache_start "$mpm" "$(body notice)"
log="$e2e_tmp/error.log"
lines() { grep -c "ban started: key \"$1\"" "$log"; }

t0=$(date +%s)
out=$(http seq 10 /x "X-Key: alice")
t1=$(date +%s)
check_eq "S: 200s" 1 "$(grep -c '^200' <<<"$out")"
check_eq "S: 429s with Retry-After 3600" 9 "$(grep -c $'^429\t3600\t' <<<"$out")"
wait_until 10 test "$(lines alice)" -ge 1
check_eq "S: exactly one ban line for alice" 1 "$(lines alice)"
line=$(grep "ban started: key \"alice\"" "$log")
check_eq "S: at notice, the policy" 1 \
  "$(grep -c ":notice\] .*SrlLimit $name: ban started: key \"alice\", policy $POLICY, until " <<<"$line")"
until_s=$(date -u -d "$(sed -n 's/.*, until \([0-9T:-]*\)Z$/\1/p' <<<"$line")" +%s 2>/dev/null || echo 0)
check_range "S: until (UTC) = the requests' time + 3600" $((t0 + 3600)) $((t1 + 3601)) "$until_s"

out=$(http hold 24 /x "X-Key: bob")
check_eq "H: 200s" 1 "$(grep -c '^200' <<<"$out")"
check_eq "H: 429s" 23 "$(grep -c '^429' <<<"$out")"
wait_until 10 test "$(lines bob)" -ge 1
check_eq "H: exactly one ban line for bob" 1 "$(lines bob)"

sed -i "s/^SrlBanLogLevel notice$/SrlBanLogLevel off/" "$e2e_tmp/httpd.conf"
/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/httpd.conf" -k graceful
check_eq "O: apache2 -k graceful (exit status)" 0 "$?"
second_generation() { [ "$(grep -c 'resuming normal operations' "$log")" -ge 2 ]; }
wait_until 20 second_generation || fail "O: no second generation after -k graceful"
out=$(http seq 3 /x "X-Key: carol")
check_eq "O: carol refused" 2 "$(grep -c '^429' <<<"$out")"
check_eq "O: no ban line with SrlBanLogLevel off" 0 "$(lines carol)"
e2e_finish
