#!/usr/bin/env bash
# apache_concurrency.sh MPM - mod_srl's SrlConcurrency in a throwaway apache2
# (MPM = prefork or event; CGI through mod_cgi or mod_cgid).
#
# The slow handler is a CGI script (slow.cgi) that records its entry (a
# file in/PID in the phase's directory, PHASE being its query string) and
# then waits until the test creates the phase's release file, so the test,
# not a timer, decides when requests end.  Limiter concurrency:4 on the
# client address.  Every wave is settled before it is judged: each request
# has either entered the handler or been answered.  Checks, exact counts:
#   C  configuration: SrlLimit of a concurrency limiter, SrlConcurrency of a
#      rate limiter and of an undeclared one, a compound holding a
#      concurrency limit in Redis (redis=) are refused, each naming the fix
#   1  10 concurrent slow requests: exactly 4 inside at once, 6 answered 429
#      with Retry-After 1 and no RateLimit header; after the release the 4
#      answer 200 and every unit is given back (rlctl get: 0 in flight)
#   2  kill -9 the child serving one held request (found by its connection,
#      ss -p; rlctl get lists exactly those children as holders): its unit
#      is still counted and its pid listed until the key is next full (no
#      wait for the parent to reap it: a zombie holder is dead), then with
#      4 - k held by live children (k = the victim's requests: 1 under
#      prefork, 1 or 2 under event), k+1 new requests: exactly k admitted
#      (the dead child's units come back, its pid is no holder any more),
#      1 answered 429; after the release all units come back
#   3  a second wave of 5: exactly 4 admitted, 1 refused (nothing leaked,
#      nothing given back twice)
#   4  every exit path leaves: a CGI that fails (500) 6 times in a row is
#      never refused; 4 held requests whose clients hung up (killed) give
#      their units back once the handler ends
#   5  SrlConcurrency + SrlLimit + SrlStatus 503 on one directory: a
#      concurrency refusal is a 503 with Retry-After 1 and takes no rate
#      permit (rlctl info of the rate limiter); a rate refusal (503, with
#      RateLimit headers) gives its unit back
#   6  compound limiters: SrlConcurrency of concurrency:2 + token_bucket:3/1d
#      (all or nothing: a concurrency refusal takes no permit, a rate
#      refusal no unit), and SrlLimit of two token buckets (RateLimit-Policy
#      has one item per limit, RateLimit the binding one)
#   R  concurrency:3 on Redis (redis=, a redis-server of the test): 5 slow
#      requests at once, exactly 3 inside and 2 answered 429; the 3 units
#      held in Redis (the key's hash), all back after the release; again
#      exactly 3 admitted of 4
mpm=${1:?usage: apache_concurrency.sh prefork|event}
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
need "$SRL_MOD" "$SRL_RLCTL" /usr/sbin/apache2 /usr/lib/apache2/modules/mod_mpm_$mpm.so
command -v ss >/dev/null || die "ss (iproute2) is not installed"

LIMIT=4
e2e_tmpdir "apc-$mpm"
e2e_port=$(free_port)
token="srl-e2e-apc-$mpm-$$"
name="/$token"
e2e_segments+=("$name" "$name-b" "$name-r" "$name-m" "$name-c")
if [ "$mpm" = prefork ]; then cgimod="cgi_module /usr/lib/apache2/modules/mod_cgi.so"
else cgimod="cgid_module /usr/lib/apache2/modules/mod_cgid.so"; fi

ctl="$e2e_tmp/ctl"       # the handlers' phase directories (written by www-data)
res="$e2e_tmp/res"       # one file per answered request: "STATUS RETRY-AFTER RATELIMIT"
mkdir -p "$e2e_tmp/htdocs/cgi" "$e2e_tmp/htdocs/both" "$e2e_tmp/htdocs/mix" "$e2e_tmp/htdocs/two" \
  "$e2e_tmp/htdocs/fleet" "$ctl" "$res"
chmod 0777 "$ctl"
cat >"$e2e_tmp/htdocs/cgi/slow.cgi" <<CGI
#!/bin/sh
# Record the entry, wait for the phase's release file, answer.
d="$ctl/\$QUERY_STRING"
: >"\$d/in.\$\$"
while [ ! -e "\$d/release" ]; do sleep 0.05; done
printf 'Content-Type: text/plain\n\nok\n'
CGI
printf '#!/bin/sh\nexit 1\n' >"$e2e_tmp/htdocs/cgi/broken.cgi"     # no headers: a 500
printf '#!/bin/sh\nprintf "Content-Type: text/plain\\n\\nquick\\n"\n' >"$e2e_tmp/htdocs/cgi/quick.cgi"
for d in both mix two fleet; do
  cp "$e2e_tmp/htdocs/cgi/slow.cgi" "$e2e_tmp/htdocs/cgi/quick.cgi" "$e2e_tmp/htdocs/$d/"
done
chmod 0755 "$e2e_tmp"/htdocs/*/*.cgi

redis_start
rprefix=e2e-apc-$mpm
body="LoadModule $cgimod
SrlLimiter $name concurrency:$LIMIT 64 key_display=32
SrlLimiter $name-b concurrency:1 64 key_display=32
SrlLimiter $name-r token_bucket:3/1d 64 key_display=32
<Directory \"$e2e_tmp/htdocs/cgi\">
    Options +ExecCGI
    SetHandler cgi-script
    SrlConcurrency $name
</Directory>
<Directory \"$e2e_tmp/htdocs/both\">
    Options +ExecCGI
    SetHandler cgi-script
    SrlConcurrency $name-b
    SrlLimit $name-r
    SrlStatus 503
</Directory>
SrlLimiter $name-m \"concurrency:2 + token_bucket:3/1d\" 64
SrlLimiter $name-c \"token_bucket:10/1d + token_bucket:2/1d\" 64
<Directory \"$e2e_tmp/htdocs/mix\">
    Options +ExecCGI
    SetHandler cgi-script
    SrlConcurrency $name-m
</Directory>
<Directory \"$e2e_tmp/htdocs/two\">
    Options +ExecCGI
    SetHandler cgi-script
    SrlLimit $name-c
</Directory>
SrlLimiter $name-f concurrency:3 64 redis=unix://$redis_sock?prefix=$rprefix&timeout_ms=2000
<Directory \"$e2e_tmp/htdocs/fleet\">
    Options +ExecCGI
    SetHandler cgi-script
    SrlConcurrency $name-f
</Directory>"

# --- C: configuration-time refusals (apache2 -t, nothing started)
confcheck() { # confcheck BODY: apache2 -t on a config with BODY; its output
  apache_check_conf "$mpm" "$1"
  /usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/check.conf" -t 2>&1
}
out=$(confcheck "$body"); rc=$?
check_eq "C: apache2 -t accepts the configuration (exit status)" 0 "$rc"
out=$(confcheck "SrlLimiter $name concurrency:$LIMIT 64
SrlLimit $name"); rc=$?
check_eq "C: SrlLimit of a concurrency limiter is refused (exit status)" 1 "$rc"
check_eq "C: ... naming the fix" 1 \
  "$(grep -c "SrlLimit $name: limiter $name (.*) has the in-flight policy 'concurrency:$LIMIT': apply it with SrlConcurrency $name" <<<"$out")"
out=$(confcheck "SrlLimiter $name-r token_bucket:3/1d 64
SrlConcurrency $name-r"); rc=$?
check_eq "C: SrlConcurrency of a rate limiter is refused (exit status)" 1 "$rc"
check_eq "C: ... naming the fix" 1 \
  "$(grep -c "SrlConcurrency $name-r: limiter $name-r (.*) has a rate policy 'token_bucket:3/1d': apply it with SrlLimit $name-r" <<<"$out")"
out=$(confcheck "SrlLimiter $name-x \"concurrency:$LIMIT + token_bucket:5/1s\" 64 redis=redis://127.0.0.1:1"); rc=$?
check_eq "C: a compound holding a concurrency limit in Redis is refused (exit status)" 1 "$rc"
check_eq "C: ... naming why and the fix" 1 \
  "$(grep -c "SrlLimiter $name-x: redis= takes a concurrency limit alone, not in a compound: give it a limiter of its own, or use a segment" <<<"$out")"
out=$(confcheck "SrlConcurrency /no-such-limiter"); rc=$?
check_eq "C: SrlConcurrency of an undeclared limiter is refused (exit status)" 1 "$rc"
check_eq "C: ... naming the problem" 1 "$(grep -c 'SrlConcurrency /no-such-limiter: no such limiter' <<<"$out")"

apache_start "$mpm" "$body"

# fire PHASE N [PATH]: N requests of PATH?PHASE at once, in the background;
# each answered one leaves res/PHASE.I = "STATUS RETRY-AFTER RATELIMIT"
# ("-" for an absent header; status 000: the connection died).
fire() {
  local phase=$1 n=$2 path=${3:-/cgi/slow.cgi} i
  wave_dir "$phase"
  for i in $(seq 1 "$n"); do
    ( IFS='|' read -r st ra rl < <(curl -s -m 120 -o /dev/null \
            -w '%{http_code}|%header{retry-after}|%header{ratelimit}\n' \
            "http://127.0.0.1:$e2e_port$path?$phase")
      echo "${st:-000} ${ra:--} ${rl:--}" >"$res/$phase.$i.tmp"
      mv "$res/$phase.$i.tmp" "$res/$phase.$i" ) &
    wave_pids+=($!)
  done
}
# with STATUS PHASE: answers of PHASE with that status
with() { cat "$res/$2".* 2>/dev/null | awk -v s="$1" '$1 == s' | wc -l; }

# --- 1: 10 at once, limit 4
fire w1 10
wait_until 30 settled w1 10 || fail "1: the 10 requests did not settle (entered $(entered w1), answered $(answered w1))"
check_eq "1: inside the handler at once" $LIMIT "$(entered w1)"
check_eq "1: answered while 4 are inside" 6 "$(answered w1)"
check_eq "1: ... all 429" 6 "$(with 429 w1)"
check_eq "1: every 429 has Retry-After 1 and no RateLimit" 6 \
  "$(cat "$res"/w1.* | grep -cx '429 1 -')"
check_eq "1: rlctl get: in flight" $LIMIT "$(in_flight "$name" 127.0.0.1)"
release w1; wave_wait
check_eq "1: after the release: 200" $LIMIT "$(with 200 w1)"
wait_until 20 idle "$name" 127.0.0.1 || true
check_eq "1: every unit given back: in flight" 0 "$(in_flight "$name" 127.0.0.1)"
idle "$name" 127.0.0.1 || die "1: units leaked: every wave below would be judged on a full key"

# --- 2: kill -9 the child serving a held request
fire k1 $LIMIT
wait_until 30 settled k1 $LIMIT || fail "2: the held requests did not enter"
check_eq "2: held" $LIMIT "$(entered k1)"
conns=$(ss -tnpH state established "( sport = :$e2e_port )")
victim=$(sed -n 's/.*pid=\([0-9]*\),.*/\1/p' <<<"$conns" | head -1)
k=$(grep -c "pid=$victim," <<<"$conns")
[ -n "$victim" ] || die "2: no server-side connection found (ss -tnp): $conns"
check_eq "2: server-side connections of the held requests" $LIMIT "$(grep -c . <<<"$conns")"
check_range "2: requests the victim child ($victim) serves" 1 2 "$k"
[ "$mpm" = prefork ] && check_eq "2: prefork: one request per child" 1 "$k"
check_eq "2: rlctl get: the holders are the children serving the held requests" \
  "$(sed -n 's/.*pid=\([0-9]*\),.*/\1/p' <<<"$conns" | sort | paste -sd' ')" "$(holders "$name" 127.0.0.1)"
kill -KILL "$victim"
# No wait for the parent to reap it (its maintenance loop, about once a
# second): until then the victim is a zombie, which srl counts as dead.
wait_until 30 at_least answered k1 "$k" || fail "2: the killed requests were not cut off"
check_eq "2: requests cut off by the kill" "$k" "$(with 000 k1)"
check_eq "2: the dead child's units still counted until the key is next full" $LIMIT \
  "$(in_flight "$name" 127.0.0.1)"
check_eq "2: rlctl get: ... and its pid still listed among the holders" "$k" \
  "$(holders "$name" 127.0.0.1 | tr ' ' '\n' | grep -cx "$victim")"
fire k2 $((k + 1))
wait_until 30 settled k2 $((k + 1)) || fail "2: the new requests did not settle"
check_eq "2: new requests admitted (the dead child's units came back)" "$k" "$(entered k2)"
check_eq "2: rlctl get: the dead child is no holder any more" 0 \
  "$(holders "$name" 127.0.0.1 | tr ' ' '\n' | grep -cx "$victim")"
check_eq "2: new requests refused (the live holders keep theirs)" 1 "$(with 429 k2)"
release k1; release k2; wave_wait
check_eq "2: the surviving held requests: 200" $((LIMIT - k)) "$(with 200 k1)"
check_eq "2: the admitted new requests: 200" "$k" "$(with 200 k2)"
wait_until 20 idle "$name" 127.0.0.1 || true
check_eq "2: every unit back: in flight" 0 "$(in_flight "$name" 127.0.0.1)"

# --- 3: the full capacity again, exactly
fire w3 $((LIMIT + 1))
wait_until 30 settled w3 $((LIMIT + 1)) || fail "3: the wave did not settle"
check_eq "3: admitted" $LIMIT "$(entered w3)"
check_eq "3: refused" 1 "$(with 429 w3)"
release w3; wave_wait
check_eq "3: 200" $LIMIT "$(with 200 w3)"
wait_until 20 idle "$name" 127.0.0.1 || true

# --- 4: a failing handler and clients that hang up both give units back
for i in $(seq 1 6); do
  curl -s -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$e2e_port/cgi/broken.cgi"
done >"$e2e_tmp/broken.out"
check_eq "4: a failing CGI 6 times in a row: 500, never refused" 6 "$(grep -cx 500 "$e2e_tmp/broken.out")"
wait_until 20 idle "$name" 127.0.0.1 || true
check_eq "4: after the 500s: in flight" 0 "$(in_flight "$name" 127.0.0.1)"
wave_dir a4
hang=()
for i in $(seq 1 $LIMIT); do
  curl -s -m 120 -o /dev/null "http://127.0.0.1:$e2e_port/cgi/slow.cgi?a4" & hang+=($!)
done
wait_until 30 at_least entered a4 $LIMIT || fail "4: the requests did not enter"
check_eq "4: held before the clients hang up" $LIMIT "$(in_flight "$name" 127.0.0.1)"
for p in "${hang[@]}"; do kill -TERM "$p"; wait "$p" 2>/dev/null; done
release a4
wait_until 30 idle "$name" 127.0.0.1 || true
check_eq "4: clients gone, handlers ended: in flight" 0 "$(in_flight "$name" 127.0.0.1)"

# --- 5: SrlConcurrency (1) + SrlLimit (3 a day) + SrlStatus 503
fire b1 1 /both/slow.cgi
wait_until 30 settled b1 1 || fail "5: the held request did not enter"
check_eq "5: one held" 1 "$(entered b1)"
fire b2 2 /both/quick.cgi
wait_until 30 at_least answered b2 2 || fail "5: no answer to the quick requests"
check_eq "5: concurrency refusals: 503 with Retry-After 1, no RateLimit" 2 \
  "$(cat "$res"/b2.* | grep -cx '503 1 -')"
check_eq "5: ... took no rate permit (rlctl info: allowed)" 1 "$(rlctl_count "$name-r" allowed)"
check_eq "5: ... and were not rate-denied (rlctl info: denied)" 0 "$(rlctl_count "$name-r" denied)"
release b1; wave_wait
wait_until 20 idle "$name-b" 127.0.0.1 || true
for i in 1 2 3; do
  # the previous request's unit goes back when Apache destroys its pool,
  # which may be just after its client has read the answer
  wait_until 20 idle "$name-b" 127.0.0.1 || true
  curl -s -o /dev/null -w '%{http_code} %header{ratelimit}\n' "http://127.0.0.1:$e2e_port/both/quick.cgi"
done >"$e2e_tmp/both.out"
check_eq "5: rate limit of 3: the holder's permit, then 2 admitted, then a 503 with RateLimit" \
  "200 \"$token-r\";r=1|200 \"$token-r\";r=0|503 \"$token-r\";r=0" \
  "$(sed 's/;t=[0-9]*$//' "$e2e_tmp/both.out" | paste -sd'|')"
wait_until 20 idle "$name-b" 127.0.0.1 || true
check_eq "5: the rate-refused request gave its unit back: in flight" 0 "$(in_flight "$name-b" 127.0.0.1)"

# --- 6: compound limiters
fire m1 3 /mix/slow.cgi
wait_until 30 settled m1 3 || fail "6: the compound wave did not settle"
check_eq "6: concurrency:2 + token_bucket:3/1d: inside at once" 2 "$(entered m1)"
check_eq "6: the third refused by the unit count: 429 with Retry-After 1" 1 \
  "$(cat "$res"/m1.* | grep -cx '429 1 -')"
release m1; wave_wait
wait_until 20 idle "$name-m" 127.0.0.1 || fail "6: the compound's units did not come back"
for i in 1 2; do
  curl -s -o /dev/null -w '%{http_code} %header{retry-after}\n' "http://127.0.0.1:$e2e_port/mix/quick.cgi"
done >"$e2e_tmp/mix.out"
check_eq "6: the refusal took no permit: one more admitted" 200 "$(sed -n 1p "$e2e_tmp/mix.out" | cut -d" " -f1)"
read -r st ra < <(sed -n 2p "$e2e_tmp/mix.out")
check_eq "6: then the token bucket refuses" 429 "$st"
check_range "6: ... with Retry-After of one token (1d/3)" 28000 28800 "$ra"
for i in 1 2 3; do
  curl -s -o /dev/null -D - "http://127.0.0.1:$e2e_port/two/quick.cgi" | tr -d '\r' |
    awk 'NR == 1 {s = $2} tolower($1) == "ratelimit-policy:" {sub(/^[^ ]* /, ""); p = $0}
         tolower($1) == "ratelimit:" {sub(/^[^ ]* /, ""); sub(/;t=.*/, ""); r = $0}
         END {print s "|" r "|" p}'
done >"$e2e_tmp/two.out"
pol="\"$token-c.0\";q=10;w=86400, \"$token-c.1\";q=2;w=86400"
check_eq "6: SrlLimit of two token buckets: status|RateLimit (binding)|RateLimit-Policy" \
  "200|\"$token-c.1\";r=1|$pol 200|\"$token-c.1\";r=0|$pol 429|\"$token-c.1\";r=0|$pol" \
  "$(paste -sd' ' "$e2e_tmp/two.out")"

# --- R: concurrency on Redis
# units held in Redis for the client's key: the fields of its hash but the
# generation counter '#' (src/redis/concurrency.lua)
fleet_held() { redis-cli -s "$redis_sock" HKEYS "$rprefix:k:127.0.0.1" | grep -cvx '#'; }
fleet_idle() { [ "$(fleet_held)" = 0 ]; }
fire r1 5 /fleet/slow.cgi
wait_until 30 settled r1 5 || fail "R: the Redis wave did not settle"
check_eq "R: concurrency:3 on Redis: inside at once" 3 "$(entered r1)"
check_eq "R: the other 2: 429" 2 "$(with 429 r1)"
check_eq "R: the units held in Redis" 3 "$(fleet_held)"
release r1; wave_wait
check_eq "R: after the release: 200" 3 "$(with 200 r1)"
wait_until 20 fleet_idle || true
check_eq "R: every unit given back in Redis" 0 "$(fleet_held)"
fire r2 4 /fleet/slow.cgi
wait_until 30 settled r2 4 || fail "R: the second Redis wave did not settle"
check_eq "R: again exactly 3 of 4 inside" 3 "$(entered r2)"
release r2; wave_wait
wait_until 20 fleet_idle || true

stop_pid "$apache_pid"
check_eq "apache2 stopped by its pid" gone "$(kill -0 "$apache_pid" 2>/dev/null && echo running || echo gone)"
e2e_finish "$mpm"
