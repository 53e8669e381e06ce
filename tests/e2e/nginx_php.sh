#!/usr/bin/env bash
# nginx_php.sh - nginx (ngx_http_srl_module) in front of php-fpm (php/Srl.php),
# both limiting one segment.
#
# nginx (4 workers as www-data) and php-fpm (one static pool of 4 children
# as www-data, fastcgi_pass over a unix socket), both started by the test.
# One segment, token_bucket:12/1d, capacity 1024: nginx declares it with
# srl_limiter and limits /static with it; tests/e2e/limit.php opens the same
# NAME, policy and capacity through Srl.php and limits /php.  Checks:
#   1  the segment nginx's root master created belongs to the workers' user
#      (mode 0600), and php-fpm's children (that user) open it
#   2  30 + 30 interleaved requests for one key (static, php, static, ...):
#      exactly 12 admitted in total, the first 12 (6 by nginx, 6 by PHP),
#      every later one answered 429 (by nginx or by PHP)
#   3  another key, 30 to each location at once: exactly 12 admitted in all
#   4  rlctl info agrees: allowed 25 (a probe, 12, 12), denied 96, 3 keys
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
. "$here/nginx_lib.sh"
need "$SRL_NGX_MOD" /usr/sbin/nginx
fpm_need

e2e_tmpdir nginx-php
e2e_port=$(free_port)
srl_name="/srl-e2e-ngxphp-$$"
srl_policy="token_bucket:12/1d"
e2e_segments+=("$srl_name")

fpm_start a
nginx_start "
    srl_limiter $srl_name $srl_policy capacity=1024;
    server {
        listen 127.0.0.1:$e2e_port reuseport;
        location /static {
            srl $srl_name key=\$http_x_key;
            try_files /index.html =404;
        }
        location /php {
            fastcgi_pass unix:$e2e_tmp/a.sock;
            fastcgi_param REQUEST_METHOD \$request_method;
            fastcgi_param SCRIPT_FILENAME $SRL_E2E_DIR/limit.php;
            fastcgi_param SRL_PHP_DIR $SRL_PHP_DIR;
            fastcgi_param SRL_NAME $srl_name;
            fastcgi_param SRL_POLICY $srl_policy;
            fastcgi_param SRL_CAPACITY 1024;
            fastcgi_param SRL_KEY \$http_x_key;
        }
    }"

check_eq "1: the segment belongs to the workers' user, mode 0600" "$e2e_user 600" \
  "$(stat -c '%U %a' "/dev/shm/${srl_name#/}")"
r=$(curl -s -i -H "X-Key: probe" "http://127.0.0.1:$e2e_port/php")
check_eq "1: php-fpm's child opened it and decided (remaining 11)" 1 \
  "$(grep -c '^srl pool=a .* allowed=1 remaining=11 ' <<<"$r")"

# --- 2: interleaved, one after another
for i in $(seq 1 30); do
  for p in static php; do
    echo "$p $(curl -s -o /dev/null -w '%{http_code}' -H "X-Key: one" "http://127.0.0.1:$e2e_port/$p")"
  done
done >"$e2e_tmp/two.out"
check_eq "2: 60 answers" 60 "$(wc -l <"$e2e_tmp/two.out")"
check_eq "2: exactly 12 admitted in total" 12 "$(grep -c ' 200$' "$e2e_tmp/two.out")"
check_eq "2: the first 12 (6 by nginx, 6 by PHP)" "6 6 12" \
  "$(head -12 "$e2e_tmp/two.out" | grep -c '^static 200$') $(head -12 "$e2e_tmp/two.out" | grep -c '^php 200$') $(head -12 "$e2e_tmp/two.out" | grep -c ' 200$')"
check_eq "2: every later one refused (24 by nginx, 24 by PHP)" "24 24" \
  "$(grep -c '^static 429$' "$e2e_tmp/two.out") $(grep -c '^php 429$' "$e2e_tmp/two.out")"

# --- 3: at once
ngx_http burst 30 /static "X-Key: two" >"$e2e_tmp/s.out" &
sp=$!
ngx_http burst 30 /php "X-Key: two" >"$e2e_tmp/p.out"
wait "$sp"
check_eq "3: 60 answers" 60 "$(cat "$e2e_tmp/s.out" "$e2e_tmp/p.out" | wc -l)"
check_eq "3: exactly 12 admitted in all" 12 "$(cat "$e2e_tmp/s.out" "$e2e_tmp/p.out" | awk -F'\t' '$1 == 200' | wc -l)"
check_eq "3: the rest 429" 48 "$(cat "$e2e_tmp/s.out" "$e2e_tmp/p.out" | awk -F'\t' '$1 == 429' | wc -l)"
echo "note: 3: nginx admitted $(awk -F'\t' '$1 == 200' "$e2e_tmp/s.out" | wc -l), PHP $(awk -F'\t' '$1 == 200' "$e2e_tmp/p.out" | wc -l)"

# --- 4: rlctl
check_eq "4: rlctl info allowed (probe 1, one 12, two 12)" 25 "$(rlctl_count "$srl_name" allowed)"
check_eq "4: rlctl info denied" 96 "$(rlctl_count "$srl_name" denied)"
check_eq "4: rlctl info keys" 3 "$(rlctl_count "$srl_name" used)"

e2e_finish
