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

# req SRC PATH COUNT: COUNT requests from 127.0.0.SRC, "STATUS RETRY-AFTER".
req() {
  local i
  for i in $(seq "$3"); do
    curl -s -o /dev/null -D - --interface "127.0.0.$1" "http://127.0.0.1:$e2e_port$2" \
      | tr -d '\r' | awk 'NR == 1 { s = $2 } tolower($1) == "retry-after:" { r = $2 }
                          END { print s, (r == "" ? "-" : r) }'
  done
}
admitted() { grep -c '^200 ' <<<"$1"; }
keyctl() { as_worker "$SRL_KEYCTL" "$@"; }

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

check_eq "E: ban 127.0.0.1 for 1 h (keyctl exit)" 0 "$(keyctl "$name" ban 127.0.0.1 3600 >/dev/null; echo $?)"
check_eq "E: 127.0.0.1 is banned" banned "$(keyctl "$name" flags 127.0.0.1)"

# --- E
e1=$(req 1 /ex 10); e2=$(req 2 /ex 10)
check_eq "E: from 127.0.0.1 (banned, exempt /8): admitted of 10" 10 "$(admitted "$e1")"
check_eq "E: from 127.0.0.2 (exempt /8): admitted of 10" 10 "$(admitted "$e2")"
check_eq "E: the library counted them (allowed, denied, exempt)" "allowed 20 denied 0 exempt 20" \
  "$(keyctl "$name" stats)"
check_eq "E: the range's key is exempt in the segment" exempt "$(keyctl "$name" flags 127.0.0.0/8)"
check_eq "E: the client key is still only banned" banned "$(keyctl "$name" flags 127.0.0.1)"

# --- B
b=$(req 1 /noex 5)
check_eq "B: 127.0.0.1 banned, no exemption: admitted of 5" 0 "$(admitted "$b")"
elapsed=$(( $(date +%s) - started + 1 ))
while read -r st ra; do
  check_eq "B: refusal status" 429 "$st"
  check_range "B: Retry-After is the ban's (3600 s less elapsed)" $((3600 - elapsed)) 3600 "$ra"
done <<<"$b"
check_eq "B: 127.0.0.3 with no ban: admitted of 5 (the limit, 3)" 3 "$(admitted "$(req 3 /noex 5)")"
check_eq "B: counts now" "allowed 23 denied 7 exempt 20" "$(keyctl "$name" stats)"

# --- W
keyctl "$name" ban 127.0.0.0/8 3600 >/dev/null
w=$(req 2 /ex 5)
check_eq "W: range key banned: admitted of 5" 0 "$(admitted "$w")"
elapsed=$(( $(date +%s) - started + 1 ))
check_range "W: Retry-After is the ban's" $((3600 - elapsed)) 3600 "$(head -1 <<<"$w" | cut -d' ' -f2)"

# --- P
p1=$(req 1 /p24 3); p2=$(req 2 /p24 3)
check_eq "P: key=ip/24 from 127.0.0.1: admitted of 3" 3 "$(admitted "$p1")"
check_eq "P: key=ip/24 from 127.0.0.2 (same /24): admitted of 3" 0 "$(admitted "$p2")"
check_eq "P: one key holds them (stats)" "allowed 3 denied 3 exempt 0" "$(keyctl "$name-p24" stats)"
check_eq "P: the key is 127.0.0.0/24" - "$(keyctl "$name-p24" flags 127.0.0.0/24)"
q1=$(req 1 /p32 4); q2=$(req 2 /p32 4)
check_eq "P: key=ip/32 from 127.0.0.1: admitted of 4" 3 "$(admitted "$q1")"
check_eq "P: key=ip/32 from 127.0.0.2 (its own key): admitted of 4" 3 "$(admitted "$q2")"
check_eq "P: key 127.0.0.2/32 tracked" - "$(keyctl "$name-p32" flags 127.0.0.2/32)"

e2e_finish
