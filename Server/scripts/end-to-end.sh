#!/usr/bin/env bash
# End to end over loopback: two video-client processes (alice and bob) exchange videos through one
# event-server process, which is stopped (SIGTERM, by its pid) and restarted from its saved state in the
# middle. Both clients must converge: every video sent is downloaded, verified and viewed.
# Everything listens on 127.0.0.1, every wait is bounded, every process is stopped by its pid.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/build-flags.sh
swift build "${build_flags[@]}" --product event-server
swift build "${build_flags[@]}" --product video-client
bin=$(swift build "${build_flags[@]}" --show-bin-path)

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export EVENT_SERVER_API_KEYS="alice:alice-key-1,bob:bob-key-22"
server_log="$work/server.log"

start_server() {
  "$bin/event-server" --host 127.0.0.1 --port "$port" --data-dir "$work/server" --snapshot-interval 0 >>"$server_log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 100); do
    if grep -q "listening on http://127.0.0.1:$port (pid $server_pid)" "$server_log"; then return 0; fi
    sleep 0.1
  done
  echo "end-to-end: the server did not start"; cat "$server_log"; exit 1
}

stop_server() {
  kill -TERM "$server_pid"
  for _ in $(seq 1 200); do
    if ! kill -0 "$server_pid" 2>/dev/null; then wait "$server_pid" || true; return 0; fi
    sleep 0.1
  done
  echo "end-to-end: the server did not stop within 20 s"; tail -20 "$server_log"; kill -KILL "$server_pid"; exit 1
}

start_server
echo "end-to-end: server pid $server_pid on port $port"
count=8
# Each client gives up after 120 s (it was 60). About 1 run in 8 here takes ~30 s longer than the others,
# which fits one request caught by the restart waiting out its 30 s deadline (submitTimeout) before its
# retry (not confirmed); one run of 75 failed at 60 s with a peer's statuses still missing.
for user in alice bob; do
  peer=$([ "$user" = alice ] && echo bob || echo alice)
  key=$([ "$user" = alice ] && echo alice-key-1 || echo bob-key-22)
  "$bin/video-client" --server "http://127.0.0.1:$port" --user "$user" --key "$key" --peer "$peer" \
    --state-dir "$work/$user" --count "$count" --expect "$count" --interval 0.3 --timeout 120 \
    >"$work/$user.log" 2>&1 &
  pids+=("$!")
  eval "${user}_pid=$!"
done

sleep 1.2
echo "end-to-end: stopping the server (pid $server_pid) in the middle of the exchange"
stop_server
sleep 1
start_server
echo "end-to-end: restarted from its saved state, pid $server_pid"

status=0
for user in alice bob; do
  pid_var="${user}_pid"
  if ! wait "${!pid_var}"; then status=1; fi
  cat "$work/$user.log"
done
stop_server
grep -qE "queues=[1-9][0-9]* .*recovered from the log" "$server_log" || { echo "end-to-end: the restart did not restore the queues"; status=1; }
if [ "$status" -ne 0 ]; then echo "end-to-end: FAILED"; cat "$server_log"; exit 1; fi
echo "end-to-end: both clients converged across a server restart"
