#!/usr/bin/env bash
# What an idle client costs: one event-server process (`--app notes`) and one `soak-client --idle-seconds`,
# whose machine registers and then holds its long-poll open on a queue nobody writes to. The client's
# processor time over that window must stay under LIMIT (a share of the wall time, default 0.05): an idle
# long-poll waits on a socket. It catches a long-poll that spins (FoundationNetworking's URLSession does
# while the first request on a fresh connection waits for its answer; docs/embedding.md).
# Processor time over wall time can only fall on a busy machine, so the verdict does not depend on its speed.
#
# Usage: scripts/idle-cost.sh [SECONDS]   (default 10)
# Everything listens on 127.0.0.1, every wait is bounded, every process is stopped by its pid.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
limit=${LIMIT:-0.05}
source scripts/build-flags.sh
swift build "${build_flags[@]}" --product event-server
swift build "${build_flags[@]}" --product soak-client
bin=$(swift build "${build_flags[@]}" --show-bin-path)

work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
EVENT_SERVER_API_KEYS="idle:idle-key" "$bin/event-server" --app notes --host 127.0.0.1 --port "$port" \
  --data-dir "$work/server" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  if grep -q "listening on http://127.0.0.1:$port (pid $server_pid)" "$work/server.log"; then break; fi
  sleep 0.1
done
grep -q "listening on http://127.0.0.1:$port" "$work/server.log" || { echo "idle-cost: the server did not start"; cat "$work/server.log"; exit 1; }
echo "idle-cost: server pid $server_pid on port $port; one client idles for $seconds s"
timeout $((seconds + 60)) "$bin/soak-client" --server "http://127.0.0.1:$port" --user idle --key idle-key \
  --state-dir "$work/client" --idle-seconds "$seconds" --idle-cpu-limit "$limit"
