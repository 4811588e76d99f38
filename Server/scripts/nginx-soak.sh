#!/usr/bin/env bash
# A clean soak through the shipped nginx configuration: event-server nodes (SQLite, or PostgreSQL with
# STORE=postgres) behind Server/deploy/nginx.conf, soak clients writing notes and long-polling through nginx,
# no fault at all. Passes when every note is applied exactly once and nginx logged no error (no "upstream
# prematurely closed connection", no 502). Each node's 4xx/5xx answers, rebuilds from the log and replication
# lag are printed: a node's 503 (the database slower than its deadline) is passed to the client, which backs
# off, and is reported, not a failure. Servers on 127.0.0.1, bounded in time, stopped by their pids.
# With POLLS=lean each node also runs its lean poll listener (--poll-port) and nginx sends the events route
# there (the shipped configuration's `location = /api/v1/events`).
# Usage: Server/scripts/nginx-soak.sh [CLIENTS] [NOTES]   (default 4 clients, 150 notes each)
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-4}
notes=${2:-150}
source scripts/build-flags.sh
swift build "${build_flags[@]}" --product event-server
swift build "${build_flags[@]}" --product soak-client
bin=$(swift build "${build_flags[@]}" --show-bin-path)

source scripts/live-server.sh
source scripts/nginx.sh
keys=""
for index in $(seq 1 "$clients"); do keys+="${keys:+,}user$index:user$index-soak-key"; done
export EVENT_SERVER_API_KEYS="$keys"
store=()
nodes=1
if [ "${STORE:-sqlite}" = postgres ]; then
  source scripts/postgres.sh
  start_postgres
  store=(--postgres "$postgres_url")
  nodes=3
fi
node_pids=()
ports=()
admin_ports=()
finish() {
  stop_nginx
  # SIGTERM, then at most 10 s for each node to write its state, then SIGKILL: a node never outlives the soak.
  for pid in "${node_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${node_pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ ${#store[@]} -gt 0 ]; then remove_postgres; fi
  cleanup
}
trap finish EXIT
for node in $(seq 1 "$nodes"); do
  node_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  admin_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  polls=()
  if [ "${POLLS:-main}" = lean ]; then
    poll_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    polls=(--poll-port "$poll_port")
    nginx_poll_ports+="$poll_port "
  fi
  "$bin/event-server" --app notes-memory --host 127.0.0.1 --port "$node_port" --admin-port "$admin_port" \
    --data-dir "$work/node$node" --rate-burst 100000 --rate-per-second 100000 "${store[@]}" "${polls[@]}" \
    >"$work/node$node.log" 2>&1 &
  admin_ports+=("$admin_port")
  node_pids+=("$!")
  ports+=("$node_port")
  for _ in $(seq 1 300); do grep -q "listening" "$work/node$node.log" && break; sleep 0.05; done
  if [ ${#polls[@]} -gt 0 ]; then
    for _ in $(seq 1 300); do grep -q "polls on" "$work/node$node.log" && break; sleep 0.05; done
  fi
done
start_nginx "${ports[@]}"
echo "nginx-soak: $nodes node(s) behind nginx on $nginx_port (polls: ${POLLS:-main} listener); $clients clients write $notes notes each, no fault"
client_pids=()
for index in $(seq 1 "$clients"); do
  timeout 300 "$bin/soak-client" --server "http://127.0.0.1:$nginx_port" --user "user$index" \
    --key "user$index-soak-key" --state-dir "$work/client$index" --count "$notes" --interval 40 --timeout 240 \
    >"$work/client$index.log" 2>&1 &
  client_pids+=("$!")
done
failed=0
for index in $(seq 1 "$clients"); do
  if ! wait "${client_pids[$((index - 1))]}"; then failed=1; fi
  cat "$work/client$index.log"
done
# What each node answered besides 200s (5xx by route, API errors by code) and, for cluster nodes, its
# rebuilds from the log and its replication lag now.
for node in $(seq 1 "$nodes"); do
  summary=$(curl -s --max-time 5 "http://127.0.0.1:${admin_ports[$((node - 1))]}/metrics" |
    grep -E '^event_server_(requests_total\{[^}]*status="[45][0-9][0-9]"|refusals_total|log_rejoins|replication_lag)' |
    tr '\n' ' ' || true)
  echo "nginx-soak: node $node: ${summary:-no 4xx or 5xx}"
done
errors=$(grep -c -E "\[(error|crit|alert|emerg)\]" "$nginx_dir/error.log" || true)
echo "nginx-soak: nginx logged $errors errors"
grep -E "\[(error|crit|alert|emerg)\]" "$nginx_dir/error.log" | head -10 || true
if [ "$failed" -ne 0 ] || [ "$errors" -ne 0 ]; then
  for node in $(seq 1 "$nodes"); do
    echo "nginx-soak: node $node's warnings and errors:"
    grep -E '"level":"(warning|error|critical)"|warning|error' "$work/node$node.log" | head -10 || true
  done
fi
if [ "$failed" -ne 0 ]; then echo "nginx-soak: FAILED (a client did not converge)"; exit 1; fi
if [ "$errors" -ne 0 ]; then echo "nginx-soak: FAILED (nginx logged errors with no fault injected)"; exit 1; fi
echo "nginx-soak: passed"
