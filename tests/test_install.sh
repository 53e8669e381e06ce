#!/usr/bin/env bash
# What a user of the installed library relies on: `meson install` puts the
# header, both libraries, the pkg-config file, rlctl and its man page in
# place; the shared library exports only srl_* symbols; and a program built
# with nothing but `pkg-config --cflags --libs srl` links and runs.
set -euo pipefail
build=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild >/dev/null
prefix=$(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
root=$dest$prefix
for f in include/srl.h bin/rlctl share/man/man1/rlctl.1; do
  [ -e "$root/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
pc=$(find "$root" -name srl.pc | head -1)
[ -n "$pc" ] || { echo "FAIL: srl.pc not installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
for f in libsrl.so libsrl.so.0 libsrl.a; do
  [ -e "$libdir/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
soname=$(objdump -p "$libdir/libsrl.so" | awk '/SONAME/ {print $2}')
[ "$soname" = libsrl.so.0 ] || { echo "FAIL: soname is '$soname'"; exit 1; }
leaked=$(nm -D --defined-only "$libdir/libsrl.so" | awk '{print $3}' | grep -v '^srl_' || true)
[ -z "$leaked" ] || { echo "FAIL: symbols exported beyond srl_*:"; echo "$leaked"; exit 1; }
exported=$(nm -D --defined-only "$libdir/libsrl.so" | wc -l)

cat >"$dest/user.c" <<'C'
#include <srl.h>
#include <stdio.h>
int main(void)
{
    srl_policy p;
    srl_decision d;
    unsigned char state[64];
    if (srl_policy_parse("gcra:2/1s", &p) != 0 || srl_state_size(&p) > sizeof state)
        return 1;
    srl_state_init(&p, state, 0);
    int a = srl_state_acquire(&p, state, 0, 1, &d) == 0 && d.allowed;
    int b = srl_state_acquire(&p, state, 0, 1, &d) == 0 && d.allowed;
    int c = srl_state_acquire(&p, state, 0, 1, &d) == 0 && !d.allowed;
    printf("%d%d%d retry %llu\n", a, b, c, (unsigned long long)d.retry_after_ns);
    return a && b && c && d.retry_after_ns == 500000000ull ? 0 : 1;
}
C
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --define-variable=prefix="$root" --cflags --libs srl)
cc -Wall -Wextra -Werror -o "$dest/user" "$dest/user.c" $flags
out=$(LD_LIBRARY_PATH=$libdir "$dest/user")
[ "$out" = "111 retry 500000000" ] || { echo "FAIL: user program printed '$out'"; exit 1; }
echo "install: header, libs (soname $soname, $exported srl_* exports, nothing else), srl.pc, rlctl, rlctl.1; a pkg-config user program links and runs"
