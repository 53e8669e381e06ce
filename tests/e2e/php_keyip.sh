#!/usr/bin/env bash
# php_keyip.sh - Srl::ipKey, Srl::cidr*, Srl::exempt and Srl::acquireAddr
# (php/Srl.php) in the PHP CLI: tests/e2e/php_keyip.php, as the workers'
# user (see that file for what it checks).
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
need "$SRL_LIBDIR/libsrl.so.0" "$SRL_PHP_DIR/Srl.php" "$SRL_PHP_DIR/srl_ffi.h"
name="/srl-e2e-php-keyip-$$"
e2e_segments+=("$name")
out=$(SRL_PHP_DIR="$SRL_PHP_DIR" SRL_NAME="$name" LD_LIBRARY_PATH="$SRL_LIBDIR" \
      as_worker php -n -d extension=ffi -d ffi.enable=1 "$SRL_E2E_DIR/php_keyip.php" 2>&1)
rc=$?
echo "$out"
check_eq "php_keyip.php exit status" 0 "$rc"
check_eq "php_keyip.php checks passed" 39 "$(grep -c '^ok: ' <<<"$out")"
check_eq "php_keyip.php checks failed" 0 "$(grep -c '^FAIL: ' <<<"$out")"
check_eq "php_keyip.php: its segment removed" absent \
  "$([ -e "/dev/shm/${name#/}" ] && echo present || echo absent)"
e2e_finish
