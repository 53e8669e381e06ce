#!/bin/sh
# configure-nginx.sh SRC OUT - the generated headers a dynamic module of the
# installed nginx is compiled with, from Debian's nginx-dev.
#
# nginx-dev ships nginx's headers and its configure script
# (/usr/share/nginx/src) but not the two headers configure writes
# (objs/ngx_auto_config.h, objs/ngx_auto_headers.h): they hold the build's
# feature macros, and with them the module signature that load_module
# compares (NGX_MODULE_SIGNATURE), so they must come from the same flags as
# Debian's nginx binary (conf_flags, beside configure).  configure writes
# into its working directory (Makefile, objs/), so it runs in a copy of SRC
# under OUT, never in SRC.  Run by meson at setup time; a second run with
# the same SRC finds OUT/objs/ngx_auto_config.h and does nothing.
# Prints OUT's absolute path of the configured tree.
set -eu
src=$1
out=$2
tree="$out/ngx-src"
if [ -s "$tree/objs/ngx_auto_config.h" ] && [ -s "$tree/objs/ngx_auto_headers.h" ] &&
   [ "$tree/objs/ngx_auto_config.h" -nt "$src/conf_flags" ]; then
  echo "$tree"
  exit 0
fi
rm -rf "$tree"
mkdir -p "$out"
cp -r "$src" "$tree"
cd "$tree"
# conf_flags: NGX_CONF_FLAGS=( ... ), a bash array; read the words without
# bash (they hold no spaces or quotes).
flags=$(sed -n 's/^NGX_CONF_FLAGS=( *\(.*\) *)$/\1/p' conf_flags)
[ -n "$flags" ] || { echo "configure-nginx.sh: no NGX_CONF_FLAGS in $src/conf_flags" >&2; exit 1; }
# shellcheck disable=SC2086
if ! ./configure $flags >configure.log 2>&1; then
  echo "configure-nginx.sh: nginx's configure failed in $tree (see configure.log):" >&2
  tail -5 configure.log >&2
  exit 1
fi
echo "$tree"
