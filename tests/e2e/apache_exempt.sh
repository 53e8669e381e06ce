#!/usr/bin/env bash
# apache_exempt.sh MPM - mod_srl's address keys and exemptions in a
# throwaway apache2 (SrlKey ip/V4,/V6, SrlExempt), with exact counts:
#   E  SrlExempt 127.0.0.0/8 ::1 over a limit of 3 whose client key
#      127.0.0.1 is banned by hand for 1 h (srl_key_ban, keyctl): 20
#      requests from 127.0.0.1 and 127.0.0.2 all 200, decided under the
#      exempt key 127.0.0.0/8, counted exactly (srl_stats allowed 20,
#      exempt 20, denied 0); the client's own key is untouched
#   B  the same limiter where SrlExempt is off: 127.0.0.1 gets exactly 0
#      of 5 admitted, every 429 with the ban's Retry-After (3600 s less
#      the seconds elapsed), and the limit decides 127.0.0.3 (3 of 5)
#   W  a ban by hand of the range's key 127.0.0.0/8 wins over SrlExempt:
#      0 of 5 admitted, Retry-After the ban's
#   P  SrlKey ip/24,/64: 127.0.0.1 and 127.0.0.2 share one limit of 3
#      (3 of 3, then 0 of 3 from the other), under the key 127.0.0.0/24;
#      SrlKey ip/32,/64: each address its own 3
#   C  configuration errors, refused by apache2 -t saying what is wrong:
#      a range with host bits set, a prefix out of range, a key form
# Clients bind 127.0.0.x themselves (curl --interface; Linux lets any
# 127/8 address be a source on lo), no proxy header is trusted.
mpm=${1:?usage: apache_exempt.sh prefork|event}
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
. "$here/exempt_lib.sh"
need "$SRL_MOD" "$SRL_KEYCTL" /usr/sbin/apache2 /usr/lib/apache2/modules/mod_mpm_$mpm.so

e2e_tmpdir "apache-exempt-$mpm"
e2e_port=$(free_port)
token="srl-e2e-apx-$$"
name="/$token"
e2e_segments+=("$name" "$name-p24" "$name-p32")
started=$(date +%s)
mkdir -p "$e2e_tmp/htdocs"
for f in ex noex p24 p32; do echo "$f" >"$e2e_tmp/htdocs/$f"; done

body="SrlLimiter $name token_bucket:3/1d 64 key_display=48
SrlLimiter $name-p24 token_bucket:3/1d 64 key_display=48
SrlLimiter $name-p32 token_bucket:3/1d 64 key_display=48
SrlKey ip
<Location /ex>
    SrlLimit $name
    SrlExempt 127.0.0.0/8 ::1
</Location>
<Location /noex>
    SrlLimit $name
</Location>
<Location /p24>
    SrlLimit $name-p24
    SrlKey ip/24,/64
</Location>
<Location /p32>
    SrlLimit $name-p32
    SrlKey ip/32,/64
</Location>"


# --- C: configuration errors
conf_refused() { # WHAT LINE MESSAGE
  apache_check_conf "$mpm" "SrlLimiter $name token_bucket:3/1d 64
SrlLimit $name
$2"
  local out rc
  out=$(/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/check.conf" -t 2>&1); rc=$?
  check_eq "C: $1 is refused (exit status)" 1 "$rc"
  check_eq "C: $1: the refusal says why" 1 "$(grep -cF "$3" <<<"$out")"
}
conf_refused "SrlExempt 10.0.0.1/8 (host bits)" "SrlExempt 10.0.0.0/8 10.0.0.1/8" \
  "SrlExempt 10.0.0.1/8: not an address range; give ADDRESS or ADDRESS/PREFIX (10.0.0.0/8, 2001:db8::/32, ::1), the address with no bits set past the prefix"
conf_refused "SrlExempt 10.0.0.0/33" "SrlExempt 10.0.0.0/33" "SrlExempt 10.0.0.0/33: not an address range"
conf_refused "SrlKey ip/33" "SrlKey ip/33" \
  "SrlKey ip/33: an address prefix key is ip/V4 or ip/V4,/V6, V4 0..32 and V6 0..128 in decimal"
conf_refused "SrlKey ip/24,/129" "SrlKey ip/24,/129" "SrlKey ip/24,/129: an address prefix key"
conf_refused "SrlKey ip/24/64" "SrlKey ip/24/64" "SrlKey ip/24/64: an address prefix key"
apache_check_conf "$mpm" "$body"
out=$(/usr/sbin/apache2 -d "$e2e_tmp" -f "$e2e_tmp/check.conf" -t 2>&1)
check_eq "C: the test's configuration is accepted (exit status)" 0 "$?"

apache_start "$mpm" "$body"

# The segments exist once apache2 runs: the checks (exempt_lib.sh).
exempt_checks "$name" "$started"

e2e_finish "$mpm"
