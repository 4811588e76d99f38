#!/usr/bin/env bash
# Fuzzes a live event-server against Server/openapi.yaml with schemathesis (from PyPI), every check enabled:
# no 5xx, every answer (status, headers, body) as the spec says, schema-invalid requests refused and valid
# ones accepted (positive_data_acceptance, with the refusals the spec allows per route in
# Server/schemathesis.toml). Bounded in examples and time; the server listens on 127.0.0.1 and is stopped by
# its pid. Usage: scripts/schemathesis.sh [MAX_EXAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
examples=${1:-40}
source scripts/build-flags.sh
command -v schemathesis >/dev/null || python3 -m pip install --quiet "schemathesis>=4,<5"
swift build "${build_flags[@]}" --product event-server
bin=$(swift build "${build_flags[@]}" --show-bin-path)

source scripts/live-server.sh
# The service route is fuzzed with the same credentials: a service named alice (service keys are their own
# table; its writes are alice's own, under the client id service:alice).
echo "alice:alice-key-1" >"$work/service-keys"
# A short heartbeat: a generated long-poll on a real queue ends in a second, not in 45.
start_server env EVENT_SERVER_API_KEYS="alice:alice-key-1,bob:bob-key-22" "$bin/event-server" --port "$port" \
  --data-dir "$work/data" --service-keys-file "$work/service-keys" --snapshot-interval 0 --heartbeat 1 --rate-burst 100000 --rate-per-second 100000

status=0
timeout 600 schemathesis run openapi.yaml --url "http://127.0.0.1:$port" --auth alice:alice-key-1 \
  --checks all --max-examples "$examples" --seed 2026 \
  --request-timeout 10 --workers 1 --suppress-health-check all --output-sanitize false || status=$?
stop_server
if [ "$status" -ne 0 ]; then echo "schemathesis: FAILED (exit $status)"; tail -20 "$work/server.log"; exit 1; fi
echo "schemathesis: every answer matched openapi.yaml, no 5xx"
