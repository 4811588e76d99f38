#!/usr/bin/env bash
# The floor of the HTTP edge, beside event-server's figures (scripts/load.sh): edge-probe, a bare SwiftNIO
# HTTP/1.1 server answering the events API's shapes with fixed bodies, under the same load tool: dont_block
# polls per second on keep-alive connections, and the resident memory per parked long-poll and per idle
# connection. The probe listens on 127.0.0.1, is bounded in time and is stopped by its pid.
# Usage: scripts/edge-probe.sh [USERS] [CONNECTIONS] [SECONDS]   (defaults 5000 8 5)
set -euo pipefail
cd "$(dirname "$0")/.."
users=${1:-5000}
connections=${2:-8}
seconds=${3:-5}
flags=(-Xswiftc -cross-module-optimization)
swift build -c release "${flags[@]}" --product edge-probe
swift build -c release "${flags[@]}" --product event-server-load
bin=$(swift build -c release "${flags[@]}" --show-bin-path)

source scripts/live-server.sh
rss() { awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; }
start_server "$bin/edge-probe" --port "$port" --seconds 600
echo "== edge-probe: dont_block polls, $connections keep-alive connections, $seconds s (cores: $(nproc))"
timeout 120 "$bin/event-server-load" rate --port "$port" --connections "$connections" --seconds "$seconds"

# hold_and_measure MODE: the load tool's MODE (parked | idle) for $users users; the probe's resident growth.
hold_and_measure() {
  local before max=0 peak load_pid
  before=$(rss)
  timeout 300 "$bin/event-server-load" "$1" --port "$port" --users "$users" --hold 4 &
  load_pid=$!
  for _ in $(seq 1 600); do
    if ! kill -0 "$load_pid" 2>/dev/null; then break; fi
    sleep 0.5
    peak=$(rss); if [ "${peak:-0}" -gt "$max" ]; then max=$peak; fi
  done
  wait "$load_pid"
  echo "edge-probe RSS $before kB before, $max kB with $users users ($1); per user: $(( (max - before) * 1024 / users )) B"
}
echo "== edge-probe: $users parked long-polls"
hold_and_measure parked
stop_server
start_server "$bin/edge-probe" --port "$port" --seconds 600
echo "== edge-probe: $users idle keep-alive connections (registered, no poll)"
hold_and_measure idle
stop_server
