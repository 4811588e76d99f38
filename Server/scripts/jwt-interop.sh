#!/usr/bin/env bash
# Tokens from another stack: a Python identity provider (PyPI `joserfc`, installed when missing) publishes
# a JWKS file and signs tokens that a live event-server takes (--jwt-jwks-file); scripts/jwt_interop_check.py
# says what it checks. The server listens on 127.0.0.1, is bounded in time, and is stopped by its pid.
#
# Usage: scripts/jwt-interop.sh   (CONFIGURATION and SANITIZE as build-flags.sh reads them)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --help ]; then sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
source scripts/build-flags.sh
python3 -c 'import joserfc' 2>/dev/null || python3 -m pip install --quiet "joserfc>=1.0,<2"
swift build "${build_flags[@]}" --product event-server
bin=$(swift build "${build_flags[@]}" --show-bin-path)

source scripts/live-server.sh
timeout 60 python3 scripts/jwt_interop_check.py keygen "$work"
start_server env EVENT_SERVER_API_KEYS="carol:carol-key-1" timeout 300 "$bin/event-server" \
  --app notes --port "$port" --data-dir "$work/data" --snapshot-interval 0 \
  --jwt-jwks-file "$work/jwks.json" --jwt-issuer https://id.test/ --jwt-audience sync-api

status=0
timeout 120 python3 scripts/jwt_interop_check.py check "$port" "$work" || status=$?
stop_server
if [ "$status" -ne 0 ]; then echo "jwt interop: FAILED (exit $status)"; tail -20 "$work/server.log"; exit 1; fi
echo "jwt interop: passed"
