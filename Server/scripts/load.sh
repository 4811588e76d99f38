#!/usr/bin/env bash
# HTTP figures for docs/performance.md: parked long-polls held by one server process, its memory per
# parked poll, and dont_block polls per second. The server listens on 127.0.0.1, is bounded in time and
# is stopped by its pid. Usage: scripts/load.sh [USERS] [CONNECTIONS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
users=${1:-5000}
connections=${2:-8}
seconds=${3:-5}
configuration=${CONFIGURATION:-release}
flags=()
if [ "$configuration" = release ]; then flags=(-Xswiftc -cross-module-optimization); fi
swift build -c "$configuration" "${flags[@]}" --product event-server
swift build -c "$configuration" "${flags[@]}" --product event-server-load
bin=$(swift build -c "$configuration" "${flags[@]}" --show-bin-path)

source scripts/live-server.sh
python3 - "$users" "$connections" > "$work/keys" <<'PY'
import sys
for i in range(max(int(sys.argv[1]), int(sys.argv[2]))):
    print(f"load-{i}:load-key-{i}")
PY
start_server "$bin/event-server" --port "$port" --keys-file "$work/keys" --data-dir "$work/data" \
  --snapshot-interval 0 --rate-burst 1000000 --rate-per-second 1000000
rss() { awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; }

# The records in the server's log (SQLite, read beside the running server).
records() { python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM log").fetchone()[0])' "$work/data/event-server.sqlite"; }
echo "== dont_block polls, $connections keep-alive connections, $seconds s (cores: $(nproc))"
records_before=$(records)
timeout 120 "$bin/event-server-load" rate --port "$port" --connections "$connections" --seconds "$seconds"
sleep 3  # longer than the acknowledgement flush interval (2 s): what the polls left is written by now
echo "log records written during the polls (registrations and acknowledgements included): $(( $(records) - records_before ))"

# hold_and_measure MODE: runs the load tool's MODE (parked | idle) for $users users and prints the server's
# resident memory growth per user while it holds them.
hold_and_measure() {
  local before max=0 peak load_pid
  before=$(rss)
  timeout 300 "$bin/event-server-load" "$1" --port "$port" --users "$users" --hold 4 &
  load_pid=$!
  # Read the server's memory while the connections are held (the load tool prints when all are in place).
  for _ in $(seq 1 600); do
    if ! kill -0 "$load_pid" 2>/dev/null; then break; fi
    sleep 0.5
    peak=$(rss); if [ "${peak:-0}" -gt "$max" ]; then max=$peak; fi
  done
  wait "$load_pid"
  echo "server RSS $before kB before, $max kB with $users users ($1); per user: $(( (max - before) * 1024 / users )) B"
}
echo "== $users parked long-polls"
hold_and_measure parked
stop_server
# The same users on a fresh server, registered on connections that then stay idle: what a parked poll costs
# beyond its connection and queue is the difference.
rm -rf "$work/data"
start_server "$bin/event-server" --port "$port" --keys-file "$work/keys" --data-dir "$work/data" \
  --snapshot-interval 0 --rate-burst 1000000 --rate-per-second 1000000
echo "== $users users on idle keep-alive connections (registered, no poll)"
hold_and_measure idle
stop_server
