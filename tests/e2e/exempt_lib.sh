# exempt_lib.sh - the address-key and exemption checks of apache_exempt.sh
# and nginx_exempt.sh (sourced after lib.sh), on a server already started on
# $e2e_port that serves, with a limit of 3 a day each:
#   /ex    limiter NAME keyed by the address, 127.0.0.0/8 and ::1 exempt
#   /noex  limiter NAME keyed by the address, no exemption
#   /p24   limiter NAME-p24 keyed by the address's /24 (/64)
#   /p32   limiter NAME-p32 keyed by the address's /32 (/64)
# exempt_checks NAME STARTED: the cases E, B, W, P (see apache_exempt.sh),
# STARTED the test's start (date +%s), for the Retry-After bounds.
# Clients bind 127.0.0.x themselves (curl --interface; Linux lets any 127/8
# address be a source on lo).  keyctl (keyctl.c) bans and reads keys.

# req SRC PATH COUNT: COUNT requests from 127.0.0.SRC, one line each,
# "STATUS RETRY-AFTER" ("-" when absent).
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

exempt_checks() {
  local name=$1 started=$2 e1 e2 b w p1 p2 q1 q2 st ra elapsed
  check_eq "E: ban 127.0.0.1 for 1 h (keyctl exit)" 0 "$(keyctl "$name" ban 127.0.0.1 3600 >/dev/null; echo $?)"
  check_eq "E: 127.0.0.1 is banned" banned "$(keyctl "$name" flags 127.0.0.1)"

  # --- E: exempt /8 over the banned key
  e1=$(req 1 /ex 10); e2=$(req 2 /ex 10)
  check_eq "E: from 127.0.0.1 (banned, exempt /8): admitted of 10" 10 "$(admitted "$e1")"
  check_eq "E: from 127.0.0.2 (exempt /8): admitted of 10" 10 "$(admitted "$e2")"
  check_eq "E: no Retry-After on an exempt answer" 20 "$(printf '%s\n%s\n' "$e1" "$e2" | grep -c ' -$')"
  check_eq "E: the library counted them (allowed, denied, exempt)" "allowed 20 denied 0 exempt 20" \
    "$(keyctl "$name" stats)"
  check_eq "E: the range's key is exempt in the segment" exempt "$(keyctl "$name" flags 127.0.0.0/8)"
  check_eq "E: the client key is still only banned" banned "$(keyctl "$name" flags 127.0.0.1)"

  # --- B: exemption off, the ban decides
  b=$(req 1 /noex 5)
  check_eq "B: 127.0.0.1 banned, no exemption: admitted of 5" 0 "$(admitted "$b")"
  elapsed=$(( $(date +%s) - started + 1 ))
  while read -r st ra; do
    check_eq "B: refusal status" 429 "$st"
    check_range "B: Retry-After is the ban's (3600 s less elapsed)" $((3600 - elapsed)) 3600 "$ra"
  done <<<"$b"
  check_eq "B: 127.0.0.3 with no ban: admitted of 5 (the limit, 3)" 3 "$(admitted "$(req 3 /noex 5)")"
  check_eq "B: counts now (allowed 20+3, denied 5+2, exempt 20)" "allowed 23 denied 7 exempt 20" \
    "$(keyctl "$name" stats)"

  # --- W: a ban of the range key wins over SrlExempt
  keyctl "$name" ban 127.0.0.0/8 3600 >/dev/null
  w=$(req 2 /ex 5)
  check_eq "W: range key banned: admitted of 5" 0 "$(admitted "$w")"
  elapsed=$(( $(date +%s) - started + 1 ))
  check_range "W: Retry-After is the ban's" $((3600 - elapsed)) 3600 "$(head -1 <<<"$w" | cut -d' ' -f2)"
  check_eq "W: exempt count unchanged (bans win before the exemption counts)" "exempt 20" \
    "$(keyctl "$name" stats | grep -o 'exempt [0-9]*')"

  # --- P: prefix keys
  p1=$(req 1 /p24 3); p2=$(req 2 /p24 3)
  check_eq "P: ip/24 from 127.0.0.1: admitted of 3" 3 "$(admitted "$p1")"
  check_eq "P: ip/24 from 127.0.0.2 (same /24): admitted of 3" 0 "$(admitted "$p2")"
  check_eq "P: one key 127.0.0.0/24 holds them (stats)" "allowed 3 denied 3 exempt 0" "$(keyctl "$name-p24" stats)"
  check_eq "P: the key is 127.0.0.0/24" - "$(keyctl "$name-p24" flags 127.0.0.0/24)"
  q1=$(req 1 /p32 4); q2=$(req 2 /p32 4)
  check_eq "P: ip/32 from 127.0.0.1: admitted of 4" 3 "$(admitted "$q1")"
  check_eq "P: ip/32 from 127.0.0.2 (its own key): admitted of 4" 3 "$(admitted "$q2")"
  check_eq "P: key 127.0.0.2/32 tracked" - "$(keyctl "$name-p32" flags 127.0.0.2/32)"
}
