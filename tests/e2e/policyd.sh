#!/usr/bin/env bash
# policyd.sh - srl-policyd under Debian's postfix, end to end.
#
# A postfix of the test (its own config dir, queue and data directories in a
# temp dir, smtpd on a high loopback port, relayhost an smtp-sink on another
# port) asks srl-policyd, run by spawn(8), at DATA (smtpd_data_restrictions,
# where recipient_count is the message's recipients).  The quota is
# "sliding_counter:3/1h + sliding_counter:10/1d" per sender, cost
# recipient_count.  smtp-source sends:
#   sender a: 2 messages; srl-policyd is killed -9 while smtpd keeps its
#             policy connection open; 4 more: postfix's retry spawns a new
#             srl-policyd, the segment still holds a's 2, so exactly 1 more
#             passes and 3 are deferred with "4.7.1 ... retry in N seconds";
#   sender b: 5 messages, its own 3 pass, 2 deferred;
#   sender c: 2 messages of 2 recipients: the first passes (cost 2), the
#             second (2 + 2 > 3) is deferred: cost is recipient_count.
# Counts come from postfix's log (maillog_file): qmgr's "from=<...>" lines
# are the accepted messages, smtpd's "reject: DATA ... 450 4.7.1" lines the
# deferred ones; rlctl list shows the three senders in the segment.
# Needs: postfix (smtp-source, smtp-sink), run as root.  SRL_POLICYD and
# SRL_RLCTL from meson.
. "$(dirname "$0")/lib.sh"
policyd=${SRL_POLICYD:?} rlctl=${SRL_RLCTL:?}
command -v postfix >/dev/null && command -v smtp-source >/dev/null || { echo "SKIP: no postfix"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: postfix needs root"; exit 77; }
need "$policyd" "$rlctl"
e2e_tmpdir policyd
T=$e2e_tmp
seg=srl-e2e-policyd-$$
pf_started=0
pd_cleanup() {
  [ $pf_started = 1 ] && postfix -c "$T/etc" stop >/dev/null 2>&1
  # spawn(8)'s children of this postfix: ours, found by their config path.
  for p in $(policyd_pids); do kill -9 "$p" 2>/dev/null; done
  [ -n "${sink_pid:-}" ] && kill "$sink_pid" 2>/dev/null
  rm -f "/dev/shm/$seg"
}
policyd_pids() {
  local d
  for d in /proc/[0-9]*; do
    tr "\\0" " " 2>/dev/null <"$d/cmdline" | grep -q "^$policyd -c $T/policyd.conf" && echo "${d#/proc/}"
  done
}
trap 'pd_cleanup; e2e_cleanup' EXIT

smtpd_port=$(free_port) sink_port=$(free_port)
mkdir -p "$T/etc" "$T/queue" "$T/data"
chown postfix "$T/data"
cat >"$T/policyd.conf" <<CONF
# srl-policyd for the e2e test
log $T/policyd.log
request_timeout 5
quota sender sliding_counter:3/1h + sliding_counter:10/1d
  key sender
  cost recipient_count
  segment $seg
  key_display 64
CONF
: >"$T/policyd.log"; chmod 0666 "$T/policyd.log"
chmod 0644 "$T/policyd.conf"
"$policyd" -c "$T/policyd.conf" -t >/dev/null 2>"$T/check.err" && rm -f "/dev/shm/$seg" ||
  die "srl-policyd -t: $(cat "$T/check.err")"

cat >"$T/etc/main.cf" <<CF
compatibility_level = 3.6
queue_directory = $T/queue
data_directory = $T/data
maillog_file = $T/maillog
maillog_file_prefixes = $T
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = policyd.e2e.test
mydestination =
mynetworks = 127.0.0.0/8
relayhost = [127.0.0.1]:$sink_port
alias_maps =
alias_database =
smtp_tls_security_level = none
smtpd_tls_security_level = none
smtpd_relay_restrictions = permit_mynetworks, reject
smtpd_data_restrictions = check_policy_service unix:private/srl-policy
smtpd_policy_service_retry_delay = 1s
smtpd_policy_service_try_limit = 2
srl-policy_time_limit = 3600
CF
# Debian's master.cf: no chroot (the spool is not set up for one), smtpd on
# our port, and the policy service.
awk -v port="127.0.0.1:$smtpd_port" '
  /^smtp +inet/ { $1 = port }
  /^[a-z]/ && NF >= 8 { $5 = "n" }
  { print }' /etc/postfix/master.cf >"$T/etc/master.cf"
cat >>"$T/etc/master.cf" <<CF
srl-policy unix - n n - 0 spawn
  user=nobody argv=$policyd -c $T/policyd.conf
CF

smtp-sink -u nobody "127.0.0.1:$sink_port" 100 >"$T/sink.out" 2>&1 &
sink_pid=$!
postfix -c "$T/etc" check >"$T/check.out" 2>&1 || die "postfix check: $(cat "$T/check.out")"
postfix -c "$T/etc" start >"$T/start.out" 2>&1 || { cat "$T/start.out" "$T/maillog" 2>/dev/null; die "postfix start"; }
pf_started=1
e2e_logs+=("$T/maillog" "$T/policyd.log")
port_open() { python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),1)"; }
wait_until 20 port_open "$smtpd_port" || die "smtpd does not listen on $smtpd_port"
wait_until 20 port_open "$sink_port" || die "smtp-sink does not listen on $sink_port"

# send SENDER COUNT [RECIPIENTS]: COUNT smtp-source sessions of one message
# each, one after another (smtp-source ends a session at its first 4xx),
# through smtpd processes that keep their policy connection.
send() {
  for _ in $(seq 1 "$2"); do
    smtp-source -m 1 -r "${3:-1}" -f "$1" -t "to@remote.test" "127.0.0.1:$smtpd_port" \
      >>"$T/source.out" 2>&1
  done
}
accepted() { grep -c "qmgr.*: from=<$1>" "$T/maillog"; }
deferred() { grep "reject: DATA from .*: 450 4.7.1 .*quota sender exceeded, retry in [0-9]* seconds; from=<$1>" "$T/maillog" | wc -l; }
settle() { # postfix's log is written by postlogd: wait for the lines we expect
  wait_until 30 test "$(( $(accepted "$1") + $(deferred "$1") ))" -ge "$2"
}

send a@e2e.test 2
settle a@e2e.test 2
check_eq "sender a: accepted before the kill" 2 "$(accepted a@e2e.test)"
pids=$(policyd_pids)
[ -n "$pids" ] || fail "no srl-policyd running under spawn after 2 messages"
for p in $pids; do kill -9 "$p"; done
ok "killed srl-policyd ($pids) with smtpd's policy connection open"
send a@e2e.test 4
settle a@e2e.test 6
check_eq "sender a: accepted in all (2 before the kill, 1 after)" 3 "$(accepted a@e2e.test)"
check_eq "sender a: deferred with 4.7.1 and the retry time" 3 "$(deferred a@e2e.test)"
new=$(policyd_pids)
[ -n "$new" ] && [ "$new" != "$pids" ] && ok "spawn ran a new srl-policyd ($new)" ||
  fail "no new srl-policyd after the kill (before: $pids, now: $new)"

send b@e2e.test 5
settle b@e2e.test 5
check_eq "sender b: its own 3 accepted" 3 "$(accepted b@e2e.test)"
check_eq "sender b: deferred" 2 "$(deferred b@e2e.test)"

send c@e2e.test 2 2
settle c@e2e.test 2
check_eq "sender c (2 recipients each): accepted" 1 "$(accepted c@e2e.test)"
check_eq "sender c: the second message (cost 2 + 2 > 3) deferred" 1 "$(deferred c@e2e.test)"
retry=$(sed -n 's/.*retry in \([0-9]*\) seconds; from=<b@e2e.test>.*/\1/p' "$T/maillog" | head -1)
check_range "the retry time postfix passed on (seconds)" 1 3600 "$retry"

list=$("$rlctl" --owner nobody list "$seg" --all-keys 2>&1)
for s in a b c; do
  grep -q "$s@e2e.test" <<<"$list" && ok "rlctl list $seg shows $s@e2e.test" ||
    fail "rlctl list $seg lacks $s@e2e.test: $list"
done
e2e_finish
