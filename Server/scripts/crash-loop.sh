#!/usr/bin/env bash
# Crash loop: the note-board server with its default snapshot settings (a snapshot every 60 s and by work)
# killed with SIGKILL again and again, at random intervals, while clients write; each restart's time to
# ready (from the process start to its "listening" line) and the records it replayed are measured. Asserts
# every restart ready within READY_BOUND_MS (default 1000), and the crash soak's audit: every acknowledged
# note there, none twice, in order, every client converged. Built in release (CONFIGURATION to change it).
# Usage: scripts/crash-loop.sh [KILLS] [MIN_SECONDS] [MAX_SECONDS]   (defaults 100 5 30; the long suite runs them)
# Everything listens on 127.0.0.1, every wait is bounded, every process is stopped by its pid.
set -euo pipefail
case "${1:-}" in
  -h | --help)
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
cd "$(dirname "$0")/.."
kills=${1:-100}
min_seconds=${2:-5}
max_seconds=${3:-30}
bound_ms=${READY_BOUND_MS:-1000}
clients=4
interval_ms=50
for value in "$kills" "$min_seconds" "$max_seconds" "$bound_ms"; do
  if ! [[ "$value" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    echo "crash-loop: '$value' is not a number (see --help)" >&2
    exit 2
  fi
done
export CONFIGURATION=${CONFIGURATION:-release}
source scripts/build-flags.sh
swift build "${build_flags[@]}" --product event-server
swift build "${build_flags[@]}" --product soak-client
bin=$(swift build "${build_flags[@]}" --show-bin-path)

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
keys=""
for index in $(seq 1 "$clients"); do keys+="${keys:+,}user$index:user$index-soak-key"; done
export EVENT_SERVER_API_KEYS="$keys"
life=0
ready_file="$work/ready.txt"

# Starts the server on the same data directory with its own log for this life, and records the time from
# the process start to its listening line (milliseconds) and the records it replayed.
start_server() {
  life=$((life + 1))
  local log="$work/server.$life.log"
  local spawned
  spawned=$(date +%s%N)
  "$bin/event-server" --app notes --host 127.0.0.1 --port "$port" --data-dir "$work/server" \
    --rate-burst 100000 --rate-per-second 100000 >"$log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 3000); do
    if grep -q "listening on http://127.0.0.1:$port (pid $server_pid)" "$log"; then
      local ready_ms=$((($(date +%s%N) - spawned) / 1000000))
      local replayed
      replayed=$(grep -o 'replayed=[0-9]*' "$log" | head -1 | cut -d= -f2)
      echo "$life $ready_ms ${replayed:-0}" >>"$ready_file"
      return 0
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    sleep 0.01
  done
  echo "crash-loop: the server did not start (life $life)"
  tail -30 "$log"
  exit 1
}

started=$(date +%s)
start_server
expected_seconds=$(python3 -c "print(int($kills * ($min_seconds + $max_seconds) / 2))")
notes=$((expected_seconds * 1000 / interval_ms))
echo "crash-loop: server pid $server_pid on port $port; $clients clients write $notes notes each (one every" \
  "$interval_ms ms); $kills kills every $min_seconds–$max_seconds s (about $expected_seconds s)"
client_pids=()
for index in $(seq 1 "$clients"); do
  "$bin/soak-client" --server "http://127.0.0.1:$port" --user "user$index" --key "user$index-soak-key" \
    --state-dir "$work/client$index" --count "$notes" --interval "$interval_ms" \
    --timeout $((expected_seconds * 3 + 300)) >"$work/client$index.log" 2>&1 &
  client_pids+=("$!")
  pids+=("$!")
done

for kill_number in $(seq 1 "$kills"); do
  sleep "$(python3 -c "import random; print(round(random.uniform($min_seconds, $max_seconds), 3))")"
  kill -KILL "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  start_server
  if ((kill_number % 10 == 0)); then
    echo "crash-loop: $kill_number kills in $(($(date +%s) - started)) s; last restart $(tail -1 "$ready_file" |
      awk '{print $2 " ms, " $3 " records replayed"}')"
  fi
done
echo "crash-loop: $kills kills done in $(($(date +%s) - started)) s; waiting for the clients"

failed=0
for index in $(seq 1 "$clients"); do
  if ! wait "${client_pids[$((index - 1))]}"; then failed=1; fi
  tail -1 "$work/client$index.log"
done
kill -TERM "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true

# The first life started on an empty directory; the restarts are the rest.
restarts=$(tail -n +2 "$ready_file")
read -r median worst worst_replay < <(echo "$restarts" | python3 -c '
import sys
rows = [line.split() for line in sys.stdin if line.strip()]
ready = sorted(int(row[1]) for row in rows)
print(ready[len(ready) // 2], ready[-1], max(int(row[2]) for row in rows))')
echo "crash-loop: $kills restarts: ready p50 $median ms, worst $worst ms (bound $bound_ms ms); at most" \
  "$worst_replay records replayed; $(python3 scripts/soak-totals.py "$work" "$clients")"
if ((failed)); then
  echo "crash-loop: FAILED (a client's audit)"
  exit 1
fi
if ((worst > bound_ms)); then
  echo "crash-loop: FAILED (a restart took $worst ms to be ready, over $bound_ms ms)"
  echo "$restarts" | sort -k2 -n | tail -5
  exit 1
fi
echo "crash-loop: passed"
