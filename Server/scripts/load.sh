#!/usr/bin/env bash
# HTTP figures for docs/performance.md: parked long-polls held by one server process, its memory per
# parked poll, and dont_block polls per second; then the same polls through the lean poll listener
# (--poll-port). The server listens on 127.0.0.1, is bounded in time and is stopped by its pid.
# Usage: scripts/load.sh [USERS] [CONNECTIONS] [SECONDS]
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
source scripts/hold-and-measure.sh

# The records in the server's log (SQLite, read beside the running server).
records() { python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM log").fetchone()[0])' "$work/data/event-server.sqlite"; }
echo "== dont_block polls, $connections keep-alive connections, $seconds s (cores: $(nproc))"
records_before=$(records)
rate_and_cpu event-server "$connections" "$seconds"
sleep 3  # longer than the acknowledgement flush interval (2 s): what the polls left is written by now
echo "log records written during the polls (registrations and acknowledgements included): $(( $(records) - records_before ))"

echo "== $users parked long-polls"
hold_and_measure server parked
stop_server
# The same users on a fresh server, registered on connections that then stay idle: what a parked poll costs
# beyond its connection and queue is the difference.
rm -rf "$work/data"
start_server "$bin/event-server" --port "$port" --keys-file "$work/keys" --data-dir "$work/data" \
  --snapshot-interval 0 --rate-burst 1000000 --rate-per-second 1000000
echo "== $users users on idle keep-alive connections (registered, no poll)"
hold_and_measure server idle
stop_server

# The lean poll listener: registrations on the main port (connections closed after), polls on --poll-port.
poll_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rm -rf "$work/data"
start_server "$bin/event-server" --port "$port" --poll-port "$poll_port" --keys-file "$work/keys" \
  --data-dir "$work/data" --snapshot-interval 0 --rate-burst 1000000 --rate-per-second 1000000
for _ in $(seq 1 100); do grep -q "polls on" "$work/server.log" && break; sleep 0.1; done
load_flags="--poll-port $poll_port"
echo "== lean poll listener: dont_block polls, $connections keep-alive connections, $seconds s"
rate_and_cpu event-server-polls "$connections" "$seconds"
echo "== lean poll listener: $users parked long-polls (all registered first on the main port; growth from then)"
hold_and_measure server-polls parked
stop_server
