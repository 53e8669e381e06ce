#!/usr/bin/env bash
# nginx_errors.sh - the nginx module's log names why a segment was refused:
# a segment of nobody (rlctl --owner nobody create), neither root's nor the
# workers' (www-data, which the module trusts), opened by `nginx -t` run as
# root, fails with srl_open_explain's sentence (the owner, the mode, the
# caller and the fix), not only "permission denied".  Needs root.
here=$(cd "$(dirname "$0")" && pwd)
export SRL_E2E_DIR=${SRL_E2E_DIR:-$here}
. "$here/lib.sh"
. "$here/nginx_lib.sh"
need "$SRL_NGX_MOD" "$SRL_RLCTL"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (a segment of nobody)"; exit 77; }
command -v /usr/sbin/nginx >/dev/null || die "nginx is not installed"
e2e_tmpdir nginx-errors
e2e_port=$(free_port)
name="srl-e2e-ngxerr-$$"
e2e_segments+=("$name")

"$SRL_RLCTL" --owner nobody create "/$name" --policy token_bucket:10/1h --capacity 100 >/dev/null \
  || die "rlctl create"
check_eq "the segment is nobody's, mode 0600" "nobody 600" "$(stat -c '%U %a' "/dev/shm/$name")"
uid=$(id -u nobody)
nginx_conf "    srl_limiter $name token_bucket:10/1h capacity=100;
    server { listen 127.0.0.1:$e2e_port; location / { srl $name key=\$http_x_key; } }"
nginx_test
check_eq "nginx -t refuses it (exit status)" 1 "$?"
want="segment /$name is owned by nobody (uid $uid), mode 0600; this process runs as root (uid 0), and srl maps only its caller's own segments or those of the one trusted owner: run as nobody (rlctl --owner nobody ...), or trust uid $uid (owner=$uid)"
if grep -qF "cannot open the segment: permission denied (segment owner or mode refused) (the segment belongs to another user than nginx's workers, or its mode was refused); $want" "$e2e_tmp/nginx-t.err"; then
  ok "the log names the owner, the mode, the caller and the fix"
else
  fail "the log: $(cat "$e2e_tmp/nginx-t.err")"
fi
e2e_finish
