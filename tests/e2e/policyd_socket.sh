#!/usr/bin/env bash
# policyd_socket.sh - srl-policyd on its own unix socket (listen mode, one
# forked handler per connection), spoken to by policyd_client.py:
#   4 client processes at once, 10 requests each for one SASL user, quota
#   12: exactly 12 DUNNO and 28 "DEFER_IF_PERMIT 4.7.1 ... retry in N
#   seconds" across them (the handlers share the segment);
#   a line over max_line, a NUL byte, and a request whose empty line never
#   comes each get default_action, then the server closes the connection,
#   and its log names the fault;
#   rlctl sees the user's key; SIGTERM stops the server and removes its socket.
. "$(dirname "$0")/lib.sh"
policyd=${SRL_POLICYD:?} rlctl=${SRL_RLCTL:?}
need "$policyd" "$rlctl"
e2e_tmpdir policyd-socket
T=$e2e_tmp seg=srl-e2e-pdsock-$$
e2e_segments+=("$seg")
client="python3 $(dirname "$0")/policyd_client.py $T/sock"
cat >"$T/p.conf" <<CONF
listen unix:$T/sock
log $T/policyd.log
max_line 128
request_timeout 1
default_action DEFER_IF_PERMIT 4.3.0 bad policy request
quota sasl sliding_counter:12/1h
  key sasl_username
  cost recipient_count
  segment $seg
  key_display 32
CONF
"$policyd" -c "$T/p.conf" 2>"$T/stderr" &
pd=$!
e2e_pids+=("$pd")
e2e_logs+=("$T/policyd.log" "$T/stderr")
wait_until 10 test -S "$T/sock" || die "srl-policyd did not make $T/sock"

cpids=()
for i in 1 2 3 4; do $client burst alice 10 >"$T/burst.$i" & cpids+=($!); done
wait "${cpids[@]}"
cat "$T"/burst.* >"$T/all"
check_eq "answers" 40 "$(wc -l <"$T/all")"
check_eq "DUNNO across 4 concurrent clients" 12 "$(grep -cx 'action=DUNNO' "$T/all")"
check_eq "deferred with 4.7.1 and the retry time" 28 \
  "$(grep -cx 'action=DEFER_IF_PERMIT 4.7.1 quota sasl exceeded, retry in [0-9]* seconds' "$T/all")"
check_eq "another user: its own quota" "action=DUNNO" "$($client burst bob 1)"

hex() { python3 -c 'import sys; print(sys.argv[1].encode().decode("unicode_escape").encode("latin-1").hex())' "$1"; }
bad="action=DEFER_IF_PERMIT 4.3.0 bad policy request | closed"
long=$(hex "request=smtpd_access_policy\\nsender=$(printf 'a%.0s' $(seq 200))\\n\\n")
check_eq "a line over max_line" "$bad" "$($client raw "$long")"
check_eq "a NUL byte" "$bad" "$($client raw "$(hex 'request=x\nsender=a\x00b\n\n')")"
check_eq "no empty line (request_timeout 1)" "$bad" \
  "$($client raw "$(hex 'request=smtpd_access_policy\nsender=a@b\n')")"
for w in "longer than 128 bytes (max_line)" "a NUL byte at column" \
         "no empty line within 1000 ms of the request's first byte"; do
  grep -q "bad request: line .*$w\|bad request: $w" "$T/policyd.log" && ok "log: $w" || fail "log lacks '$w'"
done
kill -0 "$pd" && ok "the server still runs after the bad clients" || fail "srl-policyd died"
list=$("$rlctl" list "$seg" --all-keys 2>&1) # whole, then grep: grep -q would cut rlctl off
grep -q alice <<<"$list" && ok "rlctl list shows alice" || fail "rlctl list lacks alice: $list"
stop_pid "$pd"
[ -e "$T/sock" ] && fail "socket left after SIGTERM" || ok "SIGTERM removed the socket"
e2e_finish
