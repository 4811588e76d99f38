#!/usr/bin/env bash
# Drives a live event-server with Zulip's own Python client (PyPI `zulip`, installed when missing):
# scripts/zulip_client_check.py says what it checks. The server listens on 127.0.0.1, is bounded in time,
# and is stopped by its pid.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/build-flags.sh
python3 -c 'import zulip' 2>/dev/null || python3 -m pip install --quiet "zulip>=0.9,<1"
swift build "${build_flags[@]}" --product event-server
bin=$(swift build "${build_flags[@]}" --show-bin-path)

source scripts/live-server.sh
start_server env EVENT_SERVER_API_KEYS="alice:alice-key-1,bob:bob-key-22" timeout 300 "$bin/event-server" \
  --app notes --port "$port" --data-dir "$work/data" --snapshot-interval 0

status=0
timeout 120 python3 scripts/zulip_client_check.py "$port" || status=$?
stop_server
if [ "$status" -ne 0 ]; then echo "zulip client: FAILED (exit $status)"; tail -20 "$work/server.log"; exit 1; fi
