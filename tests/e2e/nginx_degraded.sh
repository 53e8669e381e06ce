#!/usr/bin/env bash
# nginx_degraded.sh - $srl_status degraded: a key whose bucket lock is held
# by a stopped process, in a throwaway nginx (4 workers).
#
# lock_stopper (tests/e2e/lock_stopper.c), run as the workers' user, opens
# the segment and stops (SIGSTOP) inside srl_acquire of key "hot", holding
# its bucket lock; the test waits until the kernel shows it stopped.
# Checks, exact counts, for a limiter with on_full allow and one with
# on_full=deny:
#   1  3 requests of "hot" before: allowed
#   2  while the lock is held: 5 requests of "hot" each answer on_full's
#      decision (200, resp. 429) after nginx's 2 ms lock_timeout, logged
#      $srl_status degraded; the error log warns 5 times per limiter
#   3  after SIGCONT (the helper finishes its acquire and exits 0): 2 more
#      requests are allowed again, and the key's allowed count is exactly
#      3 + 1 (the helper's) + 2: degraded answers changed no state
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
. "$here/nginx_lib.sh"
need "$SRL_NGX_MOD" "$SRL_RLCTL" "$SRL_LOCK_STOPPER" /usr/sbin/nginx

e2e_tmpdir nginx-degraded
e2e_port=$(free_port)
name="srl-e2e-ngxg-$$"
e2e_segments+=("$name" "$name-deny")
spec="token_bucket:10/1h capacity=100 key_display=16"

nginx_start "
    srl_limiter $name $spec;
    srl_limiter $name-deny $spec on_full=deny;
    server {
        listen 127.0.0.1:$e2e_port reuseport;
        location /allow {
            srl $name key=\$http_x_key;
            try_files /index.html =404;
        }
        location /deny {
            srl $name-deny key=\$http_x_key;
            try_files /index.html =404;
        }
    }"

stopped() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = T ]; }
logged() { [ "$(grep -c "$1" "$e2e_tmp/access.log")" -ge "$2" ]; }
statuses() { cut -f1 "$1" | sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ' | sed 's/ $//'; }

for loc in allow deny; do
  seg=$name; [ $loc = deny ] && seg=$name-deny
  want=200; [ $loc = deny ] && want=429
  ngx_http seq 3 /$loc "X-Key: hot" >"$e2e_tmp/$loc.1" || fail "$loc: the client failed"
  check_eq "$loc 1: 3 requests before: allowed" "200x3" "$(statuses "$e2e_tmp/$loc.1")"

  # as the workers' user (as_worker), but started here so that $! is its pid
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid="$e2e_user" --regid="$e2e_group" --clear-groups -- \
      "$SRL_LOCK_STOPPER" "/$seg" "$spec" hot &
  else
    "$SRL_LOCK_STOPPER" "/$seg" "$spec" hot &
  fi
  stopper=$!
  e2e_pids+=("$stopper")
  wait_until 20 stopped "$stopper" || die "$loc: lock_stopper did not stop holding the lock"

  ngx_http seq 5 /$loc "X-Key: hot" >"$e2e_tmp/$loc.2" || fail "$loc: the client failed"
  check_eq "$loc 2: lock held: on_full's answer to each of 5" "${want}x5" "$(statuses "$e2e_tmp/$loc.2")"
  wait_until 10 logged " /$loc key=hot " 8
  check_eq "$loc 2: \$srl_status degraded for exactly those 5" "3 5" \
    "$(grep " /$loc key=hot " "$e2e_tmp/access.log" | grep -c ' st=allowed ') $(grep " /$loc key=hot " "$e2e_tmp/access.log" | grep -c "^[0-9]* $want /$loc key=hot st=degraded ")"
  check_eq "$loc 2: the error log warns of each" 5 \
    "$(grep -c "srl $seg: .*; decided by on_full ($([ $loc = deny ] && echo denied || echo allowed))" "$e2e_tmp/error.log")"

  kill -CONT "$stopper"
  wait "$stopper"
  check_eq "$loc 3: lock_stopper finished its acquire (exit status)" 0 "$?"
  ngx_http seq 2 /$loc "X-Key: hot" >"$e2e_tmp/$loc.3" || fail "$loc: the client failed"
  check_eq "$loc 3: allowed again" "200x2" "$(statuses "$e2e_tmp/$loc.3")"
  check_eq "$loc 3: the key's allowed count: 3 + the helper's 1 + 2, degraded ones not counted" 6 \
    "$(rlctl_key "$seg" hot allowed)"
done

e2e_finish
