#!/usr/bin/env bash
# nginx_exempt.sh - the nginx module's address keys and exemptions in a
# throwaway nginx (srl NAME key=ip/V4,/V6; srl_exempt CIDR...), with exact
# counts, the same cases as apache_exempt.sh:
#   E  srl_exempt 127.0.0.0/8 ::1 over a limit of 3 whose client key
#      127.0.0.1 is banned by hand for 1 h (srl_key_ban, keyctl): 20
#      requests from 127.0.0.1 and 127.0.0.2 all 200, under the exempt key
#      127.0.0.0/8, counted exactly (allowed 20, exempt 20, denied 0)
#   B  the same limiter where srl_exempt is off: 127.0.0.1 gets 0 of 5,
#      each 429 with the ban's Retry-After; 127.0.0.3 the limit's 3 of 5
#   W  a ban by hand of the range's key wins over srl_exempt: 0 of 5
#   P  key=ip/24,/64: 127.0.0.1 and 127.0.0.2 share one limit of 3;
#      key=ip/32,/64: each its own 3
#   C  nginx -t refuses a range with host bits set, a prefix out of range
#      and a malformed key form, saying what is wrong
# Clients bind 127.0.0.x themselves (curl --interface); no realip module.
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
. "$here/nginx_lib.sh"
. "$here/exempt_lib.sh"
need "$SRL_NGX_MOD" "$SRL_KEYCTL" /usr/sbin/nginx

e2e_tmpdir nginx-exempt
e2e_port=$(free_port)
name="srl-e2e-ngx-ex-$$"
e2e_segments+=("$name" "$name-p24" "$name-p32")
started=$(date +%s)

body() {
  cat <<CONF
    srl_limiter $name token_bucket:3/1d capacity=64 key_display=48;
    srl_limiter $name-p24 token_bucket:3/1d capacity=64 key_display=48;
    srl_limiter $name-p32 token_bucket:3/1d capacity=64 key_display=48;
    server {
        listen 127.0.0.1:$e2e_port reuseport;
        location / { }
        location /ex {
            srl $name;
            srl_exempt 127.0.0.0/8 ::1;
            try_files /index.html =404;
        }
        location /noex {
            srl $name;
            try_files /index.html =404;
        }
        location /p24 {
            srl $name-p24 key=ip/24,/64;
            try_files /index.html =404;
        }
        location /p32 {
            srl $name-p32 key=ip/32,/64;
            try_files /index.html =404;
        }
        ${1:-}
    }
CONF
}


# --- C: configuration errors (nginx -t)
conf_refused() { # WHAT LINE MESSAGE
  nginx_conf "$(body "location /bad { $2 }")"
  nginx_test; local rc=$?
  check_eq "C: $1 is refused (nginx -t exit status)" 1 "$rc"
  check_eq "C: $1: the refusal says why" 1 "$(grep -cF "$3" "$e2e_tmp/nginx-t.err")"
}
conf_refused "srl_exempt 10.0.0.1/8 (host bits)" "srl_exempt 10.0.0.0/8 10.0.0.1/8;" \
  'srl_exempt "10.0.0.1/8": not an address range; give ADDRESS or ADDRESS/PREFIX (10.0.0.0/8, 2001:db8::/32, ::1), the address with no bits set past the prefix'
conf_refused "srl_exempt 10.0.0.0/33" "srl_exempt 10.0.0.0/33;" 'srl_exempt "10.0.0.0/33": not an address range'
conf_refused "key=ip/33" "srl $name key=ip/33;" \
  'srl: "key=ip/33": an address prefix key is key=ip/V4 or key=ip/V4,/V6, V4 0..32 and V6 0..128 in decimal'
conf_refused "key=ip/24,/129" "srl $name key=ip/24,/129;" 'srl: "key=ip/24,/129": an address prefix key'
conf_refused "key=ip/24/64" "srl $name key=ip/24/64;" 'srl: "key=ip/24/64": an address prefix key'
nginx_conf "$(body)"
nginx_test
check_eq "C: the test's configuration is accepted (nginx -t exit status)" 0 "$?"

nginx_start "$(body)"

exempt_checks "$name" "$started"

e2e_finish
