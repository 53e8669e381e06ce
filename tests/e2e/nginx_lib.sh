# nginx_lib.sh - helpers of the nginx end-to-end tests (sourced after lib.sh).
#
# nginx_conf BODY [MAIN]: write $e2e_tmp/nginx.conf: the built module
#   ($SRL_NGX_MOD), $ngx_workers workers (default 4; as www-data when we
#   are root), its pid file,
#   logs and temp paths in $e2e_tmp, no keepalive, an access log of the
#   $srl_* variables, and BODY inside http {}; MAIN before events {}.
# nginx_start BODY [MAIN]: nginx_conf, then start nginx in the foreground
#   (master as our child, its own session), wait until it answers on
#   $e2e_port; sets nginx_pid (stopped by pid at exit, lib.sh).
# nginx_test: `nginx -t` of $e2e_tmp/nginx.conf; its stderr in
#   $e2e_tmp/nginx-t.err, its exit status returned.
# ngx_http MODE COUNT PATH [HEADER...]: nginx_httpc.py on $e2e_port.

nginx_conf() {
  local user=""
  [ "$(id -u)" -eq 0 ] && user="user $e2e_user $e2e_group;"
  mkdir -p "$e2e_tmp/html" "$e2e_tmp/tmp"
  [ -f "$e2e_tmp/html/index.html" ] || echo ok >"$e2e_tmp/html/index.html"
  cat >"$e2e_tmp/nginx.conf" <<CONF
load_module $SRL_NGX_MOD;
$user
worker_processes ${ngx_workers:-4};
pid $e2e_tmp/nginx.pid;
error_log $e2e_tmp/error.log info;
${2:-}
events { worker_connections 512; }
http {
    log_format srl '\$pid \$status \$request_uri key=\$http_x_key st=\$srl_status rem=\$srl_remaining ra=\$srl_retry_after b=\$srl_binding';
    access_log $e2e_tmp/access.log srl;
    keepalive_timeout 0;
    client_body_temp_path $e2e_tmp/tmp/body;
    proxy_temp_path $e2e_tmp/tmp/proxy;
    fastcgi_temp_path $e2e_tmp/tmp/fastcgi;
    uwsgi_temp_path $e2e_tmp/tmp/uwsgi;
    scgi_temp_path $e2e_tmp/tmp/scgi;
    root $e2e_tmp/html;
$1
}
CONF
}

nginx_start() {
  nginx_conf "$@"
  e2e_logs+=("$e2e_tmp/error.log" "$e2e_tmp/access.log")
  # Its own session (as apache_start): setsid execs in place, so $! is
  # the master's pid.
  setsid /usr/sbin/nginx -p "$e2e_tmp/" -c "$e2e_tmp/nginx.conf" -g 'daemon off;' \
    2>>"$e2e_tmp/error.log" &
  nginx_pid=$!
  e2e_pids+=("$nginx_pid")
  wait_until 20 curl -s -o /dev/null "http://127.0.0.1:$e2e_port/__ready" \
    || die "nginx did not answer on port $e2e_port"
  wait_until 10 test -s "$e2e_tmp/nginx.pid" || die "nginx wrote no pid file"
  check_eq "nginx pid file names the master we started" "$nginx_pid" "$(cat "$e2e_tmp/nginx.pid")"
}

nginx_test() {
  /usr/sbin/nginx -t -p "$e2e_tmp/" -c "$e2e_tmp/nginx.conf" -g 'daemon off;' \
    >"$e2e_tmp/nginx-t.err" 2>&1
}

ngx_http() {
  local mode=$1 count=$2 path=$3; shift 3
  python3 "$SRL_E2E_DIR/nginx_httpc.py" "$mode" 127.0.0.1 "$e2e_port" "$path" "$count" "$@"
}

# The workers' pids now (the master's children).
nginx_workers() { pgrep -P "$nginx_pid" | sort -n | tr '\n' ' '; }
