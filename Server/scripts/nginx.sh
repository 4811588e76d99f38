# Sourced by scripts that put nginx in front of event-server nodes: installs Debian's nginx-light when it is
# missing, runs Server/deploy/nginx.conf on 127.0.0.1 and a free port with the nodes given as upstreams,
# and stops it by its process id.
#
# start_nginx PORT...: sets nginx_port and nginx_pid; stop_nginx stops it.
nginx_dir=""
nginx_pid=""
nginx_port=""

ensure_nginx() {
  if ! [ -x /usr/sbin/nginx ]; then
    echo "installing nginx (apt-get install -y nginx-light)"
    (apt-get install -y nginx-light >/dev/null 2>&1 || (apt-get update >/dev/null 2>&1 && apt-get install -y nginx-light >/dev/null 2>&1)) ||
      { echo "nginx is not installed and cannot be installed here"; return 1; }
  fi
}

start_nginx() {
  ensure_nginx || return 1
  nginx_dir=$(mktemp -d)
  nginx_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local upstreams="" poll_upstreams="" node
  for node in "$@"; do upstreams+="server 127.0.0.1:$node max_fails=1 fail_timeout=1s; "; done
  # $nginx_poll_ports (optional): the nodes' lean poll listeners, for the events route.
  for node in ${nginx_poll_ports:-$*}; do poll_upstreams+="server 127.0.0.1:$node max_fails=1 fail_timeout=1s; "; done
  local template
  template="$(dirname "${BASH_SOURCE[0]}")/../deploy/nginx.conf"
  sed -e "s|__WORK__|$nginx_dir|g" -e "s|__LISTEN__|127.0.0.1:$nginx_port|g" -e "s|__UPSTREAMS__|$upstreams|g" \
    -e "s|__POLL_UPSTREAMS__|$poll_upstreams|g" \
    "$template" >"$nginx_dir/nginx.conf"
  /usr/sbin/nginx -t -q -c "$nginx_dir/nginx.conf" -p "$nginx_dir" || { cat "$nginx_dir/error.log"; return 1; }
  /usr/sbin/nginx -c "$nginx_dir/nginx.conf" -p "$nginx_dir" >>"$nginx_dir/out.log" 2>&1 &
  nginx_pid=$!
  for _ in $(seq 1 100); do
    if python3 -c "import socket; socket.create_connection(('127.0.0.1', $nginx_port), 0.2)" 2>/dev/null; then
      return 0
    fi
    sleep 0.05
  done
  echo "nginx did not start:"; cat "$nginx_dir/error.log"; return 1
}

stop_nginx() {
  if [ -n "$nginx_pid" ]; then
    kill -TERM "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
    nginx_pid=""
  fi
  if [ -n "$nginx_dir" ]; then rm -rf "$nginx_dir"; nginx_dir=""; fi
}
