#!/usr/bin/env bash
# test_deb.sh SRCDIR - build srl's Debian packages and test them installed.
#
# Copies the git tree of SRCDIR (tracked and untracked-not-ignored files)
# to a temporary directory, runs `dpkg-buildpackage -us -uc -b` there,
# requires lintian to report no error, installs the packages on this
# machine with `dpkg -i` (root only: it changes the system), and checks,
# with exact results, the installed files only:
#   R  /usr/bin/rlctl: create a token_bucket:3/1d segment, 5 x try: exactly
#      3 admitted (exit 0) and 2 refused; info counts allowed=3 denied=2;
#      destroy removes it from /dev/shm
#   A  libapache2-mod-srl: installation enabled it (mods-enabled/srl.load,
#      as `a2enmod srl` does); a throwaway apache2 (own ServerRoot, loopback
#      port, stopped by pid) loading the installed srl.load and srl.conf:
#      exactly 5 of 8 requests get 200, 3 get 429
#   D  the doc paths srl.conf names exist; design.md is shipped; python3-srl
#      depends on the Python version it was built for
#   N  libnginx-mod-http-srl: installation enabled it (modules-enabled/
#      50-mod-http-srl.conf links modules-available/mod-http-srl.conf, as
#      Debian's other libnginx-mod-* packages); a throwaway nginx (own
#      prefix, loopback port, stopped by pid) including that link: exactly
#      5 of 8 requests get 200, 3 get 429
#   P  php-srl: PHP CLI (FFI) with the installed Srl.php: exactly 5 of 8
#      admitted; the installed ini points at the installed files and was
#      enabled for php-fpm (phpenmod); the installed README names them
#   F  php-fpm on the system's ini: Srl.php preloaded, 5 of 6 admitted; then
#      `dpkg -r php-srl` (not purge): the conf.d links are gone, the ini kept,
#      and php-fpm starts
#   Y  python3-srl: /usr/bin/python3 imports srl from dist-packages and
#      admits exactly 5 of 8
#   M  srl-policyd: the shipped config passes `srl-policyd -t` (its quota's
#      segment opens), the unit is in /lib/systemd/system
#   U  dpkg --purge: every file the packages installed is gone, and the
#      apache/nginx/php configuration links too
# Packages that were installed before the test are refused (the test would
# remove them): it exits 77 (skipped) then, as it does when not root.
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "${1:-$here/../..}" && pwd)
export SRL_E2E_DIR="$src/tests/e2e"
. "$SRL_E2E_DIR/lib.sh"

pkgs=(libsrl0 libsrl-dev srl-tools libapache2-mod-srl libnginx-mod-http-srl php-srl python3-srl srl-policyd)
[ "$(id -u)" -eq 0 ] || { echo "SKIP: dpkg -i needs root"; exit 77; }
for t in dpkg-buildpackage lintian /usr/sbin/apache2 /usr/sbin/nginx php curl; do
  command -v "$t" >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
for p in "${pkgs[@]}"; do
  if dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok'; then
    echo "SKIP: $p is installed already; this test would remove it"; exit 77
  fi
done

e2e_tmpdir deb
mkdir "$e2e_tmp/src"
(cd "$src" && git ls-files -co --exclude-standard -z | tar --null -cf - -T -) \
  | tar -xf - -C "$e2e_tmp/src" || die "copying the tree"
rm -rf "$e2e_tmp/src"/build* 2>/dev/null
(cd "$e2e_tmp/src" && dpkg-buildpackage -us -uc -b) >"$e2e_tmp/build.log" 2>&1
rc=$?
e2e_logs+=("$e2e_tmp/build.log")
check_eq "dpkg-buildpackage -us -uc -b exits 0" 0 "$rc"
[ "$rc" -eq 0 ] || e2e_finish
debs=()
for p in "${pkgs[@]}"; do
  f=$(ls "$e2e_tmp"/${p}_*.deb 2>/dev/null | head -1)
  [ -n "$f" ] && ok "built $(basename "$f")" || fail "no .deb for $p"
  debs+=("$f")
done

lintian "$e2e_tmp"/srl_*.changes >"$e2e_tmp/lintian.log" 2>&1
grep -E '^[EWI]: ' "$e2e_tmp/lintian.log" | sed 's/^/lintian: /'
check_eq "lintian errors" 0 "$(grep -c '^E: ' "$e2e_tmp/lintian.log")"

# From here on the system is changed: purge whatever got installed on exit.
# The maintainer scripts (a2enmod's apache2 reload) must not start or
# restart this machine's services: a policy-rc.d refusing them, ours only
# when none was there.
deb_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d
  deb_policy=/usr/sbin/policy-rc.d
fi
deb_purge() { dpkg --purge "${pkgs[@]}" >"$e2e_tmp/purge.log" 2>&1; }
trap 'deb_purge; [ -n "$deb_policy" ] && rm -f "$deb_policy"; e2e_cleanup' EXIT
dpkg -i "${debs[@]}" >"$e2e_tmp/install.log" 2>&1
e2e_logs+=("$e2e_tmp/install.log")
check_eq "dpkg -i of the ${#pkgs[@]} packages exits 0" 0 "$?"
for p in "${pkgs[@]}"; do dpkg -L "$p"; done 2>/dev/null | sort -u >"$e2e_tmp/files"
for p in "${pkgs[@]}"; do
  check_eq "$p installed" "install ok installed" "$(dpkg-query -W -f '${Status}' "$p" 2>&1)"
done

# ---- R: the installed rlctl
SRL_RLCTL=/usr/bin/rlctl
seg="/srl-deb-$$"
e2e_segments+=("$seg")
/usr/bin/rlctl create "$seg" --policy token_bucket:3/1d --capacity 16 >/dev/null
check_eq "rlctl create $seg exits 0" 0 "$?"
adm=0; ref=0
for _ in 1 2 3 4 5; do
  if /usr/bin/rlctl try "$seg" k >/dev/null 2>&1; then adm=$((adm + 1)); else ref=$((ref + 1)); fi
done
check_eq "rlctl try: admitted of 5" 3 "$adm"
check_eq "rlctl try: refused of 5" 2 "$ref"
check_eq "rlctl info: allowed" 3 "$(rlctl_count "$seg" allowed)"
check_eq "rlctl info: denied" 2 "$(rlctl_count "$seg" denied)"
/usr/bin/rlctl destroy "$seg" >/dev/null
check_eq "rlctl destroy exits 0" 0 "$?"
[ ! -e "/dev/shm/${seg#/}" ] && ok "destroy unlinked /dev/shm${seg}" || fail "/dev/shm$seg still there"
[ -f /usr/share/man/man1/rlctl.1.gz ] && ok "man page installed" || fail "no rlctl.1.gz"

# ---- D: documentation paths the installed files name exist
for f in $(grep -ho '/usr/share/doc/[^ )]*' /etc/apache2/mods-available/srl.conf | sort -u); do
  [ -e "$f" ] && ok "srl.conf names an installed file: $f" || fail "srl.conf names $f: missing"
done
[ -f /usr/share/doc/libsrl-dev/design.md.gz ] && ok "design.md shipped (libsrl-dev)" ||
  fail "no /usr/share/doc/libsrl-dev/design.md.gz"
check_eq "python3-srl depends on the Python it was built for" yes \
  "$(dpkg-query -W -f '${Depends}' python3-srl | grep -q "python3 (<< 3.$(( $(python3 -c 'import sys; print(sys.version_info[1])') + 1 )))" && echo yes || echo no)"

# ---- A: the installed Apache module
check_eq "mods-enabled/srl.load links the installed srl.load" \
  /etc/apache2/mods-available/srl.load "$(readlink -f /etc/apache2/mods-enabled/srl.load)"
check_eq "srl.load loads the installed module" \
  "LoadModule srl_module /usr/lib/apache2/modules/mod_srl.so" \
  "$(grep -v '^#' /etc/apache2/mods-available/srl.load)"
SRL_MOD=/usr/lib/apache2/modules/mod_srl.so
e2e_port=$(free_port)
aseg="/srl-deb-ap-$$"
e2e_segments+=("$aseg")
apache_start prefork "Include /etc/apache2/mods-available/srl.conf
SrlLimiter $aseg token_bucket:5/1d 64
<Location /x>
    SrlLimit $aseg
    SrlKey ip
</Location>"
echo x >"$e2e_tmp/htdocs/x"
a=$(http seq 8 /x)
check_eq "apache2 + installed mod_srl: 200s of 8" 5 "$(grep -c '^200' <<<"$a")"
check_eq "apache2 + installed mod_srl: 429s of 8" 3 "$(grep -c '^429' <<<"$a")"
stop_pid "$apache_pid"

# ---- N: the installed nginx module
nconf=/etc/nginx/modules-enabled/50-mod-http-srl.conf
check_eq "modules-enabled/50-mod-http-srl.conf links the installed snippet" \
  /usr/share/nginx/modules-available/mod-http-srl.conf "$(readlink -f "$nconf")"
check_eq "the snippet loads the installed module" \
  "load_module modules/ngx_http_srl_module.so;" "$(cat /usr/share/nginx/modules-available/mod-http-srl.conf)"
. "$SRL_E2E_DIR/nginx_lib.sh"
SRL_NGX_MOD=/usr/lib/nginx/modules/ngx_http_srl_module.so
nseg="srl-deb-ngx-$$"
e2e_segments+=("$nseg")
e2e_port=$(free_port)
# nginx_conf loads $SRL_NGX_MOD by path: here the enabled snippet instead,
# whose relative path nginx resolves against its compiled-in prefix.
nginx_conf "    srl_limiter $nseg token_bucket:5/1d capacity=64;
    server {
        listen 127.0.0.1:$e2e_port;
        location /x { srl $nseg; try_files /index.html =404; }
    }"
sed -i "s|^load_module .*|include $nconf;|" "$e2e_tmp/nginx.conf"
# nginx_start without rewriting the file: start it the same way.
e2e_logs+=("$e2e_tmp/error.log")
setsid /usr/sbin/nginx -c "$e2e_tmp/nginx.conf" -g 'daemon off;' 2>>"$e2e_tmp/error.log" &
nginx_pid=$!
e2e_pids+=("$nginx_pid")
wait_until 20 curl -s -o /dev/null "http://127.0.0.1:$e2e_port/" || fail "nginx did not start"
n=$(for _ in $(seq 1 8); do curl -s -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$e2e_port/x"; done)
check_eq "nginx + installed module: 200s of 8" 5 "$(grep -c '^200' <<<"$n")"
check_eq "nginx + installed module: 429s of 8" 3 "$(grep -c '^429' <<<"$n")"
stop_pid "$nginx_pid"

check_eq "php-srl ships the Symfony adapter" yes \
  "$([ -f /usr/share/srl/php/Srl/Symfony/SrlRateLimiterFactory.php ] && echo yes || echo no)"

# ---- P: PHP from the installed files
SRL_PHP_DIR=/usr/share/srl/php
SRL_LIBDIR=/usr/lib/x86_64-linux-gnu
srl_name="/srl-deb-php-$$"; srl_policy="token_bucket:5/1d"; srl_capacity=64
e2e_segments+=("$srl_name")
c=$(cli k 8 2>&1)
check_eq "php (FFI) with installed Srl.php: admitted of 8" 5 "$(grep -c ' allowed=1 ' <<<"$c")"
check_eq "php: refused of 8" 3 "$(grep -c ' allowed=0 ' <<<"$c")"
ini=$(ls /etc/php/*/mods-available/srl.ini 2>/dev/null | head -1)
check_eq "srl.ini preloads the installed preload.php" \
  "opcache.preload = /usr/share/srl/php/preload.php" "$(grep '^opcache.preload =' "$ini")"
phpver=$(basename "$(dirname "$(dirname "$ini")")")
check_eq "srl.ini is for an installed PHP (php-fpm$phpver)" yes \
  "$(command -v "php-fpm$phpver" >/dev/null && echo yes || echo no)"
check_eq "installation enabled srl.ini for php-fpm (phpenmod)" "$ini" \
  "$(readlink -f "/etc/php/$phpver/fpm/conf.d/30-srl.ini")"
pdoc=$(zcat /usr/share/doc/php-srl/README.md.gz 2>/dev/null)
check_eq "the installed php README's require_once names the installed Srl.php" \
  "require_once '/usr/share/srl/php/Srl.php';" "$(grep -m1 '^require_once' <<<"$pdoc")"
check_eq "the installed php README names no /usr/local path" 0 "$(grep -c /usr/local <<<"$pdoc")"

# ---- F: php-fpm on the system's php.ini and conf.d (what `systemctl start
# php-fpm` reads), its own pool on a unix socket: with php-srl it preloads
# Srl.php and decides; after `dpkg -r php-srl` (remove, not purge: the ini
# stays in mods-available) it must still start
fpm_sys_start() {
  {
    echo "[global]"; echo "pid = $e2e_tmp/$1.pid"; echo "error_log = $e2e_tmp/$1.log"
    echo "daemonize = no"
    echo "[$1]"; echo "user = $e2e_user"; echo "group = $e2e_group"
    echo "listen = $e2e_tmp/$1.sock"; echo "listen.mode = 0666"
    echo "pm = static"; echo "pm.max_children = 2"
  } >"$e2e_tmp/$1.conf"
  e2e_logs+=("$e2e_tmp/$1.log" "$e2e_tmp/$1.out")
  "php-fpm$phpver" -y "$e2e_tmp/$1.conf" -F >"$e2e_tmp/$1.out" 2>&1 &
  fpm_pid=$!
  e2e_pids+=("$fpm_pid")
  wait_until 20 test -S "$e2e_tmp/$1.sock"
}
if command -v cgi-fcgi >/dev/null; then
  fpm_sys_start fpm-srl
  check_eq "php-fpm$phpver with php-srl enabled: started (socket)" yes \
    "$([ -S "$e2e_tmp/fpm-srl.sock" ] && kill -0 "$fpm_pid" 2>/dev/null && echo yes || echo no)"
  srl_name="/srl-deb-fpm-$$"; e2e_segments+=("$srl_name")
  f=$(fcgi fpm-srl k SRL_REPEAT=6 2>&1)
  check_eq "php-fpm: Srl.php preloaded (ffi=scope), admitted of 6" "5 6" \
    "$(grep -c ' allowed=1 ' <<<"$f") $(grep -c ' ffi=scope$' <<<"$f")"
  stop_pid "$fpm_pid"
else
  fail "cgi-fcgi (libfcgi-bin) is not installed"
fi
dpkg -r php-srl >"$e2e_tmp/remove.log" 2>&1
e2e_logs+=("$e2e_tmp/remove.log")
check_eq "dpkg -r php-srl exits 0" 0 "$?"
check_eq "php-srl removed, its ini kept (config-files)" "deinstall ok config-files" \
  "$(dpkg-query -W -f '${Status}' php-srl 2>&1)"
[ -f "$ini" ] && ok "kept: $ini (a conffile)" || fail "gone before purge: $ini"
left=$(find /etc/php -lname "*mods-available/srl.ini" 2>/dev/null | xargs)
check_eq "removal disabled srl.ini (phpdismod): links left in /etc/php" "" "$left"
fpm_sys_start fpm-removed
check_eq "php-fpm$phpver starts after dpkg -r php-srl (socket, alive)" yes \
  "$([ -S "$e2e_tmp/fpm-removed.sock" ] && kill -0 "$fpm_pid" 2>/dev/null && echo yes || echo no)"
check_eq "php-fpm after the removal: no FFI error" 0 \
  "$(cat "$e2e_tmp/fpm-removed.out" "$e2e_tmp/fpm-removed.log" 2>/dev/null | grep -c FFI)"
stop_pid "$fpm_pid"

# ---- Y: python3-srl
yseg="/srl-deb-py-$$"
e2e_segments+=("$yseg")
y=$(cd / && env -u PYTHONPATH /usr/bin/python3 -c "
import srl
print(srl.__file__)
l = srl.Limiter.shared('$yseg', 'token_bucket:5/1d', 64)
print(sum(1 for _ in range(8) if l.acquire('k').allowed))" 2>&1)
check_eq "python3 imports srl from dist-packages" /usr/lib/python3/dist-packages/srl/__init__.py \
  "$(sed -n 1p <<<"$y")"
check_eq "python3-srl: admitted of 8" 5 "$(sed -n 2p <<<"$y")"

# ---- M: srl-policyd
e2e_segments+=(/srl-policyd-sasl)
check_eq "srl-policyd -t on the shipped config" \
  "srl-policyd: /etc/srl/policyd.conf: 1 quotas, segments open" "$(/usr/sbin/srl-policyd -t 2>&1)"
check_eq "srl-policyd's unit is installed" yes \
  "$([ -f /lib/systemd/system/srl-policyd.service ] && echo yes || echo no)"

# ---- U: removal
deb_purge
check_eq "dpkg --purge exits 0" 0 "$?"
left=0
while read -r f; do
  [ -d "$f" ] && continue
  if [ -e "$f" ] || [ -L "$f" ]; then echo "left: $f"; left=$((left + 1)); fi
done <"$e2e_tmp/files"
check_eq "files of the packages left after purge" 0 "$left"
check_eq "phpenmod's state for srl left after purge" "" \
  "$(ls -d /var/lib/php/modules/*/*/*/srl 2>/dev/null | xargs)"
for f in /etc/apache2/mods-enabled/srl.load /etc/apache2/mods-enabled/srl.conf \
         /etc/apache2/mods-available/srl.conf /etc/nginx/modules-enabled/50-mod-http-srl.conf \
         $ini; do
  [ ! -e "$f" ] && [ ! -L "$f" ] && ok "gone: $f" || fail "left: $f"
done
e2e_finish
