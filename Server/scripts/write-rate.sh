#!/usr/bin/env bash
# One device's acknowledged writes per second and their latency, over HTTP on loopback: the engine
# (URLSessionTransport, FileStore) against event-server on SQLite, first one write per round trip (--batch 1,
# as before batches), then with batches. The server listens on 127.0.0.1, is bounded in time and is stopped by
# its pid. Usage: scripts/write-rate.sh [RATE] [SECONDS]
# APP=notes serves the stored note board (its notes in the database's tables) instead of the in-memory one;
# STORE=postgres keeps the log (and a stored app's tables) in a PostgreSQL this script starts
# (scripts/postgres.sh) instead of SQLite. CONFIGURATION=debug measures the debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1000}
seconds=${2:-5}
configuration=${CONFIGURATION:-release}
swift build -c "$configuration" --product event-server
swift build -c "$configuration" --product soak-client
bin=$(swift build -c "$configuration" --show-bin-path)

source scripts/live-server.sh
echo "writer:writer-key-1234" > "$work/keys"
store=(--data-dir "$work/data")
if [ "${STORE:-sqlite}" = postgres ]; then
  source scripts/postgres.sh
  trap 'cleanup; remove_postgres' EXIT
  start_postgres
  store=(--postgres "$postgres_url")
fi
start_server "$bin/event-server" --app "${APP:-notes-memory}" --host 127.0.0.1 --port "$port" "${store[@]}" \
  --keys-file "$work/keys" --rate-burst 1000000 --rate-per-second 1000000
echo "== one device, $rate writes/s offered for $seconds s (cores: $(nproc), $configuration build," \
  "app ${APP:-notes-memory}, ${STORE:-sqlite})"
for batch in 1 32; do
  echo "-- --batch $batch"
  timeout 180 "$bin/soak-client" --server "http://127.0.0.1:$port" --user writer --key writer-key-1234 \
    --state-dir "$work/client-$batch" --write-rate "$rate" --write-seconds "$seconds" --batch "$batch" ||
    [ "$batch" = 1 ]  # one write per round trip may not keep up: reported, not a failure
done
stop_server
