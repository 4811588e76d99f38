#!/usr/bin/env bash
# event-server refuses an option its mode cannot honour, in one line on standard error with exit status 2,
# before it opens anything (never ignored): each case below must fail so, its line naming the option.
#
# Usage: scripts/option-errors.sh   (SANITIZE=thread and CONFIGURATION as build-flags.sh reads them; the
# gate runs it on its sanitizer build)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --help ]; then sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
source scripts/build-flags.sh
swift build "${build_flags[@]}" --product event-server >/dev/null
bin=$(swift build "${build_flags[@]}" --show-bin-path)
postgres="postgres://postgres@127.0.0.1:1/postgres"
failed=0

# refused EXPECTED ARGUMENTS...: event-server ARGUMENTS must exit 2 with one line that contains EXPECTED.
refused() {
  local expected=$1 status=0 output
  shift
  output=$(env -u EVENT_SERVER_POSTGRES_URL timeout 30 "$bin/event-server" "$@" 2>&1 >/dev/null) || status=$?
  if [ "$status" = 2 ] && [ "$(printf '%s\n' "$output" | wc -l)" = 1 ] && [[ "$output" == *"$expected"* ]]; then
    echo "option-errors: refused as it must: $*"
  else
    echo "option-errors: FAILED: event-server $* answered exit $status: $output (expected exit 2, one line with '$expected')"
    failed=1
  fi
}

refused "--data-dir is not used by a node of a partitioned cluster" \
  --app notes --postgres "$postgres" --partitions 4 --data-dir /tmp/unused
refused "--partitions needs the log in PostgreSQL" --app notes --partitions 4
refused "--partitions serves the stored applications" --app notes-memory --postgres "$postgres" --partitions 4
refused "--partitions keeps the video files in the database" \
  --app videos --postgres "$postgres" --partitions 4 --blobs files
refused "--advertise-polls is for a node of a partitioned cluster" --advertise-polls http://127.0.0.1:9
refused "--port" --port 70000
refused "--service-keys-file is served by a single server" \
  --app notes --postgres "$postgres" --partitions 4 --service-keys-file /tmp/unused
refused "bearer tokens need exactly one of --jwt-jwks-url and --jwt-jwks-file" --jwt-issuer https://id.test/
refused "algorithm 'none' is not one of" \
  --jwt-jwks-file /tmp/unused.json --jwt-issuer https://id.test/ --jwt-audience sync --jwt-algorithms none
refused "bearer tokens need --jwt-audience" --jwt-jwks-file /tmp/unused.json --jwt-issuer https://id.test/
refused "--jwt-jwks-url must be an http:// or https:// URL" --jwt-jwks-url ftp://id.test --jwt-issuer i --jwt-audience a
exit "$failed"
