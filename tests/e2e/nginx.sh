#!/usr/bin/env bash
# nginx.sh - ngx_http_srl_module in a throwaway nginx.
#
# Starts Debian's nginx on 127.0.0.1:<free port> (reuseport) with its own
# prefix and configuration in a temporary directory, 4 workers running as
# www-data, and checks, with exact counts:
#   A  60 requests for one key at once (60 connections, opened before any
#      is sent, spread over the workers by reuseport) against
#      token_bucket:10/1h: exactly 10 answered 200, by at least 2 worker pids
#      (add_header X-Pid $pid always), 50 answered 429 with Retry-After; every
#      answer's RateLimit-Policy / RateLimit / Retry-After parse per the IETF
#      draft (nginx_httpc.py), the policy is "NAME";q=10;w=3600
#   A2 20 requests of another key one after another, each on a new
#      connection: the first 10 admitted, by at least 2 workers
#   B  a second key: its own 10 of 15; a request without a key (empty
#      $http_x_key): 15 x 200, no rate-limit headers
#      two keys of 5001 bytes that differ in the last: 10 of 12 each
#      (srl_key_fit), never an error
#   C  the access log's $srl_status / $srl_remaining / $srl_retry_after /
#      $srl_binding: alpha's and beta's 10 allowed, 50 and 5 denied, 15 without a decision
#   D  rlctl info agrees: allowed 50, denied 69, 5 keys; the segment belongs
#      to the workers' user, mode 0600
#   E  dry_run: 15 requests of a key against 10/1h: all 200, the access log
#      has exactly 5 dry_run, rlctl info would_deny 5
#   E2 a full table (capacity=1, on_full allow): 40 new keys all pass, the
#      keys past its slots logged $srl_status untracked, rlctl's full agrees
#   F  srl_metrics: 200, the Prometheus text of the three segments, byte-identical
#      to `rlctl metrics` of the same segments
#   G  `nginx -s reload` (SIGHUP to the master) with the limit raised
#      (10/1h -> 20/1h): the key that used 10 of 10 gets exactly 10 more of
#      15; RateLimit-Policy says q=20
#   H  `nginx -t`: a bad spec fails with the library's message and byte
#      offset; redis= is refused saying why; another capacity under the same
#      name is refused saying what differs; a bad spec creates no segment
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
. "$here/nginx_lib.sh"
need "$SRL_NGX_MOD" "$SRL_RLCTL" /usr/sbin/nginx

e2e_tmpdir nginx
e2e_port=$(free_port)
name="srl-e2e-ngx-$$"
e2e_segments+=("$name" "$name-dry" "$name-bad" "$name-full")

body() {
  cat <<CONF
    srl_limiter $name token_bucket:${1:-10}/1h capacity=100 key_display=32;
    srl_limiter $name-dry token_bucket:10/1h capacity=100;
    srl_limiter $name-full token_bucket:10/1h capacity=1;
    server {
        listen 127.0.0.1:$e2e_port reuseport;
        add_header X-Pid \$pid always;
        location / {
            srl $name key=\$http_x_key;
        }
        location /dry {
            srl $name-dry key=\$http_x_key dry_run;
            try_files /index.html =404;
        }
        location /full {
            srl $name-full key=\$http_x_key;
            try_files /index.html =404;
        }
        location = /metrics {
            srl_metrics;
        }
    }
CONF
}

# --- H (first part): nginx -t before anything exists
nginx_conf "$(body)"
nginx_test
check_eq "H: nginx -t of a good configuration (exit status)" 0 "$?"
check_eq "H: nginx -t created no segment" "" "$(ls /dev/shm | grep -F "$name")"
nginx_conf "    srl_limiter $name-bad token_bucket:10/1x capacity=100;"
nginx_test
check_eq "H: nginx -t of a bad spec fails (exit status)" 1 "$?"
check_eq "H: the library's message and offset" 1 \
  "$(grep -cF "srl_limiter $name-bad: bad spec \"token_bucket:10/1x capacity=100\" at byte 17: unknown unit 'x'" "$e2e_tmp/nginx-t.err")"
check_eq "H: and the file:line" 1 "$(grep -cF "in $e2e_tmp/nginx.conf:" "$e2e_tmp/nginx-t.err")"
check_eq "H: a bad spec created no segment" "" "$(ls /dev/shm | grep -F "$name-bad")"
nginx_conf "    srl_limiter $name-bad token_bucket:10/1h redis=redis://127.0.0.1:6379;"
nginx_test
check_eq "H: redis= fails nginx -t (exit status)" 1 "$?"
check_eq "H: redis= is refused saying why" 1 \
  "$(grep -cF "redis= is refused: the Redis store makes a network round trip on every decision and nginx's event loop never waits; this module does not yet run decisions in a thread pool, and on the event loop a slow or stopped Redis would stall every connection of the worker" "$e2e_tmp/nginx-t.err")"

nginx_start "$(body)"
workers=$(nginx_workers)
check_eq "nginx runs 4 workers" 4 "$(echo $workers | wc -w)"

# --- A: 60 at once for one key
ngx_http burst 60 / "X-Key: alpha" >"$e2e_tmp/a.out" || fail "A: the client failed"
check_eq "A: answered" 60 "$(wc -l <"$e2e_tmp/a.out")"
check_eq "A: exactly 10 admitted" 10 "$(awk -F'\t' '$1 == 200' "$e2e_tmp/a.out" | wc -l)"
check_eq "A: exactly 50 answered 429" 50 "$(awk -F'\t' '$1 == 429' "$e2e_tmp/a.out" | wc -l)"
pids=$(awk -F'\t' '{print $2}' "$e2e_tmp/a.out" | sort -u | wc -l)
check_range "A: worker pids that answered" 2 4 "$pids"
admitting=$(awk -F'\t' '$1 == 200 {print $2}' "$e2e_tmp/a.out" | sort -u)
check_eq "A: every X-Pid is one of the workers" "" \
  "$(for p in $(awk -F'\t' '{print $2}' "$e2e_tmp/a.out" | sort -u); do [[ " $workers " == *" $p "* ]] || echo "$p"; done)"
check_eq "A: every 429 has Retry-After (360 s: one token of 10/1h)" 50 \
  "$(awk -F'\t' '$1 == 429 && $3 == 360' "$e2e_tmp/a.out" | wc -l)"
check_eq "A: every answer's rate-limit headers parse (IETF draft)" 60 \
  "$(awk -F'\t' '$6 == "ok"' "$e2e_tmp/a.out" | wc -l)"
check_eq "A: RateLimit-Policy" 60 \
  "$(awk -F'\t' -v p="\"$name\";q=10;w=3600" '$5 == p' "$e2e_tmp/a.out" | wc -l)"
check_eq "A: the admitted' RateLimit r counts down 9..0" "0 1 2 3 4 5 6 7 8 9" \
  "$(awk -F'\t' '$1 == 200 {print $4}' "$e2e_tmp/a.out" | sed 's/.*;r=\([0-9]*\);.*/\1/' | sort -n | tr '\n' ' ' | sed 's/ $//')"
check_eq "A: the refused' RateLimit r=0;t=Retry-After" 50 \
  "$(awk -F'\t' -v p="\"$name\";r=0;t=360" '$1 == 429 && $4 == p' "$e2e_tmp/a.out" | wc -l)"
echo "note: admitted by workers $(echo $admitting | tr '\n' ' ')"

# --- A2: one after another, each on a new connection (reuseport hashes
# each to a worker): exactly 10 of 20 admitted, by at least 2 workers
ngx_http seq 20 / "X-Key: delta" >"$e2e_tmp/a2.out" || fail "A2: the client failed"
check_eq "A2: exactly 10 of 20 admitted" 10 "$(awk -F'\t' '$1 == 200' "$e2e_tmp/a2.out" | wc -l)"
check_eq "A2: the first 10" "$(printf '200\n%.0s' $(seq 10); printf '429\n%.0s' $(seq 10))" \
  "$(cut -f1 "$e2e_tmp/a2.out")"
check_range "A2: worker pids that admitted" 2 4 \
  "$(awk -F'\t' '$1 == 200 {print $2}' "$e2e_tmp/a2.out" | sort -u | wc -l)"

# --- B: another key, and no key
ngx_http burst 15 / "X-Key: beta" >"$e2e_tmp/b.out" || fail "B: the client failed"
check_eq "B: the second key gets its own 10 of 15" 10 "$(awk -F'\t' '$1 == 200' "$e2e_tmp/b.out" | wc -l)"
check_eq "B: and 5 x 429" 5 "$(awk -F'\t' '$1 == 429' "$e2e_tmp/b.out" | wc -l)"
ngx_http burst 15 / >"$e2e_tmp/n.out" || fail "B: the client failed"
check_eq "B: no key: 15 x 200" 15 "$(awk -F'\t' '$1 == 200' "$e2e_tmp/n.out" | wc -l)"
check_eq "B: no key: no rate-limit headers" 15 "$(awk -F'\t' '$6 == "none"' "$e2e_tmp/n.out" | wc -l)"

# two keys longer than srl takes (5000 bytes, the last one differs):
# never an error, and srl_key_fit keeps them apart (10 of 12 each)
long=$(printf 'k%.0s' $(seq 5000))
ngx_http burst 12 / "X-Key: ${long}1" >"$e2e_tmp/l1.out" || fail "B: the client failed"
ngx_http burst 12 / "X-Key: ${long}2" >"$e2e_tmp/l2.out" || fail "B: the client failed"
check_eq "B: long keys: 10 of 12 each, the rest 429" "10 2 10 2" \
  "$(for f in l1 l2; do awk -F'\t' '$1 == 200' "$e2e_tmp/$f.out" | wc -l; awk -F'\t' '$1 == 429' "$e2e_tmp/$f.out" | wc -l; done | tr '\n' ' ' | sed 's/ $//')"

# --- C: the variables in the access log (written when each request ends)
wait_until 10 test "$(grep -c ' key=' "$e2e_tmp/access.log")" -ge 134
log() { grep -E "^[0-9]+ [0-9]+ / key=$1 " "$e2e_tmp/access.log"; }
check_eq "C: \$srl_status allowed (alpha, beta)" "10 10" \
  "$(log alpha | grep -c ' st=allowed ') $(log beta | grep -c ' st=allowed ')"
check_eq "C: \$srl_status denied (alpha, beta)" "50 5" \
  "$(log alpha | grep -c '^[0-9]* 429 .* st=denied rem=0 ra=360 ') $(log beta | grep -c '^[0-9]* 429 .* st=denied rem=0 ra=360 ')"
check_eq "C: \$srl_remaining of alpha's admitted 9..0" "0 1 2 3 4 5 6 7 8 9" \
  "$(log alpha | grep ' 200 ' | sed 's/.* rem=\([0-9]*\) .*/\1/' | sort -n | tr '\n' ' ' | sed 's/ $//')"
check_eq "C: \$srl_binding names the limiter" 60 "$(log alpha | grep -c " b=$name\$")"
check_eq "C: no key: no \$srl_status" 15 "$(log - | grep -c ' st=- rem=- ra=- b=-$')"

# --- D: rlctl info agrees
check_eq "D: rlctl info allowed" 50 "$(rlctl_count "$name" allowed)"
check_eq "D: rlctl info denied" 69 "$(rlctl_count "$name" denied)"
check_eq "D: rlctl info keys" 5 "$(rlctl_count "$name" used)"
check_eq "D: rlctl list: alpha's key, as nginx used it" "absent" "$(rlctl_key "$name" alphax allowed)"
check_eq "D: rlctl list: alpha allowed 10" 10 "$(rlctl_key "$name" alpha allowed)"
check_eq "D: the segment's owner and mode" "$e2e_user 600" "$(stat -c '%U %a' "/dev/shm/$name")"

# --- E: dry run
ngx_http burst 15 /dry "X-Key: gamma" >"$e2e_tmp/e.out" || fail "E: the client failed"
check_eq "E: dry run: nothing refused" 15 "$(awk -F'\t' '$1 == 200' "$e2e_tmp/e.out" | wc -l)"
check_eq "E: dry run: no rate-limit headers" 15 "$(awk -F'\t' '$6 == "none"' "$e2e_tmp/e.out" | wc -l)"
wait_until 10 test "$(grep -c ' /dry key=gamma ' "$e2e_tmp/access.log")" -ge 15
check_eq "E: exactly 5 logged \$srl_status dry_run" 5 \
  "$(grep ' /dry key=gamma ' "$e2e_tmp/access.log" | grep -c ' st=dry_run ')"
check_eq "E: rlctl info would_deny" 5 "$(rlctl_count "$name-dry" would_deny)"
check_eq "E: rlctl info allowed" 10 "$(rlctl_count "$name-dry" allowed)"

# --- E2: a full table (capacity=1: one bucket's slots), on_full allow
ngx_http seq 40 /full "X-Key: f{i}" >"$e2e_tmp/f.out" || fail "E2: the client failed"
slots=$(rlctl_count "$name-full" capacity)
check_eq "E2: a full table: all 40 new keys pass (on_full allow)" 40 "$(awk -F'\t' '$1 == 200' "$e2e_tmp/f.out" | wc -l)"
wait_until 10 test "$(grep -c ' /full key=' "$e2e_tmp/access.log")" -ge 40
check_eq "E2: \$srl_status untracked for exactly the keys past the table's $slots slots" \
  "$((40 - slots)) $slots" \
  "$(grep -c ' /full key=f[0-9]* st=untracked ' "$e2e_tmp/access.log") $(grep -c ' /full key=f[0-9]* st=allowed ' "$e2e_tmp/access.log")"
check_eq "E2: rlctl info counts them (full)" $((40 - slots)) "$(rlctl_count "$name-full" full)"

# --- F: srl_metrics is rlctl metrics, byte for byte
curl -s -D "$e2e_tmp/metrics.hdr" -o "$e2e_tmp/metrics.txt" "http://127.0.0.1:$e2e_port/metrics"
check_eq "F: srl_metrics: status" 200 "$(awk 'NR==1 {print $2}' "$e2e_tmp/metrics.hdr")"
check_eq "F: srl_metrics: Content-Type" "text/plain; version=0.0.4; charset=utf-8" \
  "$(tr -d '\r' <"$e2e_tmp/metrics.hdr" | sed -n 's/^Content-Type: //Ip')"
rlctl_as_owner metrics "/$name" "/$name-dry" "/$name-full" >"$e2e_tmp/rlctl-metrics.txt"
if cmp -s "$e2e_tmp/metrics.txt" "$e2e_tmp/rlctl-metrics.txt"; then
  ok "F: srl_metrics is byte-identical to rlctl metrics ($(wc -c <"$e2e_tmp/metrics.txt") bytes)"
else
  fail "F: srl_metrics differs from rlctl metrics: $(diff "$e2e_tmp/metrics.txt" "$e2e_tmp/rlctl-metrics.txt" | head -5 | tr '\n' '|')"
fi
check_eq "F: the counts of A and B" 1 \
  "$(grep -cxF "srl_decisions_total{segment=\"/$name\",result=\"allowed\"} 50" "$e2e_tmp/metrics.txt")"

# --- G: reload with the limit raised keeps alpha's use
nginx_conf "$(body 20)"
old=$(nginx_workers)
kill -HUP "$nginx_pid"
gone() { for p in $old; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
wait_until 30 gone || fail "G: the old workers did not exit after the reload"
check_eq "G: the master stayed" "$nginx_pid" "$(cat "$e2e_tmp/nginx.pid")"
ngx_http burst 15 / "X-Key: alpha" >"$e2e_tmp/g.out" || fail "G: the client failed"
check_eq "G: alpha (10 of 10 used) gets exactly 10 more after 10 -> 20" 10 \
  "$(awk -F'\t' '$1 == 200' "$e2e_tmp/g.out" | wc -l)"
check_eq "G: RateLimit-Policy says q=20" 15 \
  "$(awk -F'\t' -v p="\"$name\";q=20;w=3600" '$5 == p' "$e2e_tmp/g.out" | wc -l)"
check_eq "G: one worker logged the change" 1 \
  "$(grep -c "srl_limiter $name: policy changed; every key keeps its use" "$e2e_tmp/error.log")"

# --- H (second part): another capacity under the same name
nginx_conf "$(body 20 | sed "s/token_bucket:20\/1h capacity=100/token_bucket:20\/1h capacity=500/")"
nginx_test
check_eq "H: another capacity fails nginx -t (exit status)" 1 "$?"
check_eq "H: and says what differs and what to do" 1 \
  "$(grep -c "srl_limiter $name (.*): cannot open the segment: .*capacity.*rlctl destroy" "$e2e_tmp/nginx-t.err")"
check_eq "H: nginx -t left the running server alone" 200 \
  "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$e2e_port/")"

e2e_finish
