#!/usr/bin/env bash
# php_errors.sh - SrlException names the cause (the PHP CLI, ffi.enable=1):
#   1  a Redis store whose server refuses the connection: refund() throws
#      with srl_last_error's sentence (connect 127.0.0.1:PORT: connection
#      refused), acquire() still answers on_full's degraded decision;
#   2  a peer that is not Redis (tests/fake_redis.py http): the open throws
#      "reply from 127.0.0.1:PORT is not RESP: is it Redis?";
#   3  a 0600 segment of root opened as nobody (plain and with redis): the
#      exception names the owner, the mode, this process and the fix
#      (srl_open_explain), never a bare "permission denied";
# Needs root (3 runs PHP as nobody), python3 and php with FFI.
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
need "$SRL_LIBDIR/libsrl.so.0" "$SRL_PHP_DIR/Srl.php" "$SRL_PHP_DIR/srl_ffi.h"
command -v php >/dev/null || die "php is not installed"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (runs PHP as nobody)"; exit 77; }
e2e_tmpdir php-errors
export SRL_PHP_DIR

# php_as USER CODE: run CODE (after require Srl.php) as USER (root, or
# nobody with group nogroup); print the exception's message, or what CODE
# echoes.
php_as() {
  local group=$1
  [ "$1" = nobody ] && group=nogroup
  LD_LIBRARY_PATH="$SRL_LIBDIR" setpriv --reuid="$1" --regid="$group" --clear-groups -- \
    php -n -d extension=ffi -d ffi.enable=1 -r '
    require getenv("SRL_PHP_DIR") . "/Srl.php";
    try { '"$2"'; } catch (SrlException $e) { echo $e->getMessage(), " [", $e->getCode(), "]\n"; }'
}

# --- 1: connection refused
port=$(free_port)
export U1="redis://127.0.0.1:$port?prefix=x"
seg1="srl-e2e-phperr-$$-a"
e2e_segments+=("$seg1")
out=$(php_as root '$s = new Srl("'"$seg1"'", "token_bucket:5/1d", 64, ["redis" => getenv("U1")]);
  $d = $s->acquire("k"); echo "acquire allowed=", var_export($d["allowed"], true),
  " degraded=", var_export($d["degraded"], true), "\n"; $s->refund("k")')
check_eq "1: acquire on a refused server answers on_full, degraded" "acquire allowed=true degraded=true" \
  "$(head -1 <<<"$out")"
if [[ "$(tail -1 <<<"$out")" =~ ^"srl: refund: system or network error: connect 127.0.0.1:$port: connection refused"( \(retrying in [0-9]+ ms\))?" [-19]"$ ]]; then
  ok "1: refund's exception names the server and the cause: $(tail -1 <<<"$out")"
else
  fail "1: refund's exception: got '$(tail -1 <<<"$out")'"
fi

# --- 2: a peer that is not Redis
coproc FAKE { exec python3 "$SRL_E2E_DIR/../fake_redis.py" http; }
e2e_pids+=("$FAKE_PID")
read -r _ fport <&"${FAKE[0]}"
export U2="redis://127.0.0.1:$fport?prefix=x"
seg2="srl-e2e-phperr-$$-b"
e2e_segments+=("$seg2")
check_eq "2: a peer that is not Redis: the open's exception" \
  "srl: open redis store '$seg2': system or network error: reply from 127.0.0.1:$fport is not RESP: is it Redis? [-19]" \
  "$(php_as root 'new Srl("'"$seg2"'", "token_bucket:5/1d", 64, ["redis" => getenv("U2")])')"

# --- 3: another user's 0600 segment, opened as nobody
seg3="srl-e2e-phperr-$$-c"
e2e_segments+=("$seg3")
php_as root 'new Srl("'"$seg3"'", "token_bucket:5/1d", 64); echo "made\n"' >/dev/null
check_eq "3: the segment is root's, mode 0600" "root 600" "$(stat -c '%U %a' "/dev/shm/$seg3")"
why="permission denied (segment owner or mode refused): segment /$seg3 is owned by root (uid 0), mode 0600; this process runs as nobody (uid 65534), which cannot open it: run as root, or create it owned by the user that uses it (rlctl --owner USER create ...), or with mode 0660 and a group both share [-14]"
check_eq "3: nobody opening it: owner, mode, caller and fix" "srl: open '$seg3': $why" \
  "$(php_as nobody 'new Srl("'"$seg3"'", "token_bucket:5/1d", 64)')"
check_eq "3: the same with redis (the host segment refused it, Redis down)" \
  "srl: open redis store '$seg3': $why" \
  "$(php_as nobody 'new Srl("'"$seg3"'", "token_bucket:5/1d", 64, ["redis" => getenv("U1")])')"

exec {FAKE[1]}>&-
e2e_finish
