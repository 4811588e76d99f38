# Sourced by the scripts that run one event-server: a work folder removed on exit, a free port on 127.0.0.1,
# the server started in the background (its output in $work/server.log) and stopped by its pid.
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# start_server COMMAND...: runs the server command (env VAR=… allowed first) and waits until it listens.
start_server() {
  "$@" >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do grep -q "listening" "$work/server.log" && break; sleep 0.1; done
}

# stop_server: SIGTERM by pid, then waits for it.
stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=""
}
