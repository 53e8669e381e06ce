#!/usr/bin/env bash
# symfony_unit.sh - the Symfony RateLimiter adapter (php/Srl/Symfony) in the
# PHP CLI: tests/e2e/symfony_unit.php, as the workers' user, against
# Debian's php-symfony-rate-limiter (see that file for what it checks).
# Its segments (/dev/shm/symfony.unit-*-TAG.*) are removed at the end.
# A redis-server of its own (lib.sh's redis_start, a unix socket) serves
# the 'exempt' option on a Redis store.
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
need "$SRL_LIBDIR/libsrl.so.0" "$SRL_PHP_DIR/Srl.php" "$SRL_PHP_DIR/Srl/Symfony/autoload.php"
[ -f /usr/share/php/Symfony/Component/RateLimiter/RateLimiterFactory.php ] ||
  die "php-symfony-rate-limiter is not installed (tools/install-deps)"
tag="u$$"
e2e_tmpdir symfony-unit
redis_start
for p in token_bucket sliding_window fixed_window; do
  for id in tb tb5 sw fw typo ex exr; do e2e_segments+=("/symfony.unit-$id-$tag.$p"); done
done
out=$(SRL_PHP_DIR="$SRL_PHP_DIR" SRL_TAG="$tag" SRL_REDIS_URI="unix://$redis_sock?prefix=unit-$tag" \
      LD_LIBRARY_PATH="$SRL_LIBDIR" \
      as_worker php -n -d extension=ffi -d ffi.enable=1 "$SRL_E2E_DIR/symfony_unit.php" 2>&1)
rc=$?
echo "$out"
check_eq "symfony_unit.php exit status" 0 "$rc"
check_gt "symfony_unit.php checks passed" 100 "$(grep -c '^ok: ' <<<"$out")"
check_eq "symfony_unit.php checks failed" 0 "$(grep -c '^FAIL: ' <<<"$out")"
check_eq "symfony_unit.php: its segments removed" "" \
  "$(ls /dev/shm | grep -- "-$tag\." || true)"
e2e_finish
