#!/usr/bin/env bash
# php_ban_log.sh - Srl::setBanLog, the log line of a penalty ban's start, in
# the PHP CLI (tests/e2e/php_ban_log.php says what it checks), as the
# workers' user; error_log() goes to a file of the test's.
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
need "$SRL_LIBDIR/libsrl.so.0" "$SRL_PHP_DIR/Srl.php"
tag="b$$"
e2e_segments+=("/phpbanlog-$tag")
e2e_tmpdir banlog
errlog="$e2e_tmp/error.log"
touch "$errlog" && chmod 666 "$errlog"
out=$(SRL_PHP_DIR="$SRL_PHP_DIR" SRL_TAG="$tag" SRL_ERRLOG="$errlog" LD_LIBRARY_PATH="$SRL_LIBDIR" \
      as_worker php -n -d extension=ffi -d ffi.enable=1 -d error_log="$errlog" \
      "$SRL_E2E_DIR/php_ban_log.php" 2>&1)
rc=$?
echo "$out"
check_eq "php_ban_log.php exit status" 0 "$rc"
check_gt "php_ban_log.php checks passed" 20 "$(grep -c '^ok: ' <<<"$out")"
check_eq "php_ban_log.php checks failed" 0 "$(grep -c '^FAIL: ' <<<"$out")"
e2e_finish
