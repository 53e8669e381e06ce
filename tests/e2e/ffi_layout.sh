#!/usr/bin/env bash
# ffi_layout.sh - php/srl_ffi.h has srl.h's layout, as PHP's FFI parses it.
#
# Compares, line by line, every struct size and field offset printed by
# ffi_layout (compiled against include/srl.h) with those FFI computes from
# srl_ffi.h (ffi_layout.php); also checks that FFI binds every function the
# header declares to the built libsrl.so.0 (FFI::load fails otherwise), and
# that php/Srl.php's error constants are exactly srl.h's SRL_ERRNO_MAP (the
# line count catches a constant PHP has and C does not).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need "$SRL_LAYOUT" "$SRL_LIBDIR/libsrl.so.0" "$SRL_PHP_DIR/srl_ffi.h"
c=$("$SRL_LAYOUT")
php=$(LD_LIBRARY_PATH="$SRL_LIBDIR" php -n -d extension=ffi -d ffi.enable=1 \
      "$here/ffi_layout.php" "$SRL_PHP_DIR" 2>&1)
check_eq "FFI loads srl_ffi.h against libsrl.so.0 (exit status)" 0 "$?"
check_eq "lines compared" "$(wc -l <<<"$c")" "$(wc -l <<<"$php")"
while read -r what cval; do
  check_eq "$what" "$cval" "$(awk -v w="$what" '$1 == w {print $2}' <<<"$php")"
done <<<"$c"
e2e_finish
