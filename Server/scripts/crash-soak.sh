#!/usr/bin/env bash
# Crash soak: several soak-client processes write notes through the engine's outbox (URLSessionTransport)
# while the event-server is killed with SIGKILL at random moments and restarted on the same data directory.
# At the end each client checks the server's state and its own: every note acknowledged is there, none is
# applied twice, all are in order, every client converged; the script adds up the figures.
#
# Snapshots are written every 0.1 s, so some kills land while a snapshot is being written.
# Usage: scripts/crash-soak.sh [KILLS] [CLIENTS] [NOTES]   (defaults 20 4 150; CI runs the defaults)
# STORE=postgres keeps the log in a PostgreSQL this script starts (scripts/postgres.sh) instead of SQLite.
# PROXY=nginx puts nginx (Server/deploy/nginx.conf, scripts/nginx.sh) between the clients and the server.
# Everything listens on 127.0.0.1, every wait is bounded, every process is stopped by its pid.
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-20}
clients=${2:-4}
notes=${3:-150}
source scripts/build-flags.sh
swift build "${build_flags[@]}" --product event-server
swift build "${build_flags[@]}" --product soak-client
bin=$(swift build "${build_flags[@]}" --show-bin-path)

work=$(mktemp -d)
pids=()
store=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  if [ ${#store[@]} -gt 0 ]; then remove_postgres; fi
  if [ -n "${nginx_pid:-}" ]; then stop_nginx; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ "${STORE:-sqlite}" = postgres ]; then
  source scripts/postgres.sh
  start_postgres
  store=(--postgres "$postgres_url" --postgres-timeout 4)
  echo "crash-soak: the log in PostgreSQL on 127.0.0.1:$postgres_port (pid $postgres_pid)"
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
keys=""
for index in $(seq 1 "$clients"); do keys+="${keys:+,}user$index:user$index-soak-key"; done
export EVENT_SERVER_API_KEYS="$keys"
server_log="$work/server.log"

start_server() {
  "$bin/event-server" --app notes --host 127.0.0.1 --port "$port" --data-dir "$work/server" \
    --snapshot-interval 0.1 --rate-burst 100000 --rate-per-second 100000 "${store[@]}" >>"$server_log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 300); do
    if grep -q "listening on http://127.0.0.1:$port (pid $server_pid)" "$server_log"; then return 0; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    sleep 0.05
  done
  echo "crash-soak: the server did not start"; tail -30 "$server_log"; exit 1
}

started=$(date +%s)
start_server
client_port=$port
if [ "${PROXY:-none}" = nginx ]; then
  source scripts/nginx.sh
  start_nginx "$port"
  client_port=$nginx_port
  echo "crash-soak: clients go through nginx on 127.0.0.1:$nginx_port (pid $nginx_pid)"
fi
echo "crash-soak: server pid $server_pid on port $port; $clients clients write $notes notes each; $kills kills"
client_pids=()
for index in $(seq 1 "$clients"); do
  "$bin/soak-client" --server "http://127.0.0.1:$client_port" --user "user$index" --key "user$index-soak-key" \
    --state-dir "$work/client$index" --count "$notes" --interval 40 --timeout 180 >"$work/client$index.log" 2>&1 &
  client_pids+=("$!")
  pids+=("$!")
done

# The database goes away for ten seconds while the clients write: the server (a cluster node of one with
# --postgres) answers writes 503 within --postgres-timeout (4 s) and the clients back off; a server whose
# write was cut mid-commit stops instead, as under a supervisor, and is started again once PostgreSQL is
# back. Nothing acknowledged may be missing.
database_outage() {
  echo "crash-soak: stopping PostgreSQL (pid $postgres_pid) for 10 s while the clients write"
  stop_postgres
  sleep 2
  local status="stopped"
  if kill -0 "$server_pid" 2>/dev/null; then
    status=$(curl -s -m 8 -o /dev/null -w '%{http_code}' -u user1:user1-soak-key -X POST \
      "http://127.0.0.1:$port/api/v1/register" || true)
    # Any other answer is only right from a server on its way out (a write was cut): it must be gone soon.
    if [ "$status" != 503 ]; then
      for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
      if ! kill -0 "$server_pid" 2>/dev/null; then status="stopped"; fi
    fi
  fi
  echo "crash-soak: a registration during the outage: HTTP $status"
  if [ "$status" != 503 ] && [ "$status" != stopped ]; then
    echo "crash-soak: FAILED (the server answered $status without its database, not 503)"
    exit 1
  fi
  sleep 8
  start_postgres
  if ! kill -0 "$server_pid" 2>/dev/null; then
    wait "$server_pid" 2>/dev/null || true
    echo "crash-soak: the server had stopped (a write was cut mid-commit); starting it again"
    start_server
  fi
}

for kill_number in $(seq 1 "$kills"); do
  sleep "$(python3 -c 'import random; print(round(random.uniform(0.1, 0.6), 3))')"
  kill -KILL "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  start_server
  if ((kill_number % 5 == 0)); then echo "crash-soak: $kill_number kills so far"; fi
  # Early, while every client is still writing.
  if ((kill_number == 2)) && [ ${#store[@]} -gt 0 ]; then database_outage; fi
done
echo "crash-soak: $kills kills done in $(($(date +%s) - started)) s; waiting for the clients (at most 180 s)"

failed=0
for index in $(seq 1 "$clients"); do
  if ! wait "${client_pids[$((index - 1))]}"; then failed=1; fi
  cat "$work/client$index.log" | tail -1
done
kill -TERM "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true

recovered=$(grep -c "recovered from the log" "$server_log" || true)
echo "crash-soak: $kills SIGKILLs, $recovered recoveries; $(python3 scripts/soak-totals.py "$work" "$clients")"
if ((failed)); then echo "crash-soak: FAILED"; tail -30 "$server_log"; exit 1; fi

# Blobs: each upload chunk answered 200 is on disk, and its owner is bound, across a SIGKILL right after the
# answer (the video application, its blob routes and the file blob store).
export EVENT_SERVER_API_KEYS="alice:alice-soak-key,bob:bob-soak-key"
blob_log="$work/blob-server.log"
start_video_server() {
  "$bin/event-server" --app videos --host 127.0.0.1 --port "$port" --data-dir "$work/videos" >>"$blob_log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 300); do
    if grep -q "listening on http://127.0.0.1:$port (pid $server_pid)" "$blob_log"; then return 0; fi
    sleep 0.05
  done
  echo "crash-soak: the video server did not start"; tail -30 "$blob_log"; exit 1
}
uploads="http://127.0.0.1:$port/api/v1/uploads?key=videos/soak"
blob_lost=0
start_video_server
head -c 65536 /dev/urandom >"$work/chunk"
for round in 0 1 2 3 4; do
  curl -sf -u alice:alice-soak-key -X PUT --data-binary @"$work/chunk" "$uploads&offset=$((round * 65536))" >/dev/null
  kill -KILL "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  start_video_server
  length=$(curl -sf -u alice:alice-soak-key "$uploads" | python3 -c 'import json, sys; print(json.load(sys.stdin)["length"])')
  if ((length != (round + 1) * 65536)); then blob_lost=1; echo "crash-soak: after kill $round the upload holds $length bytes"; fi
done
bob_status=$(curl -s -o /dev/null -w '%{http_code}' -u bob:bob-soak-key -X PUT --data-binary x "$uploads&offset=327680")
kill -TERM "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
echo "crash-soak: blobs: 5 chunks of 64 KiB each answered then SIGKILLed: lost $blob_lost; another user's append after the kills: HTTP $bob_status"
if ((blob_lost)) || [ "$bob_status" != 404 ]; then echo "crash-soak: FAILED (blobs)"; tail -30 "$blob_log"; exit 1; fi
echo "crash-soak: passed in $(($(date +%s) - started)) s"
