# Sourced by .ci/run (the gate) and scripts/long-suite: section headings with the seconds since the start,
# ThreadSanitizer's settings and the digest of its reports at exit, background work stopped at exit, and
# the busy machine the root's tests run on.
started=$(date +%s)
# Each section's heading with the seconds since the start, so a slow run shows where its time went.
section() { echo "== [$(($(date +%s) - started)) s] $*"; }

# ThreadSanitizer writes its reports to files here (from test runs and from the processes a soak starts);
# if the run stops, their digest (the top frames of each stack, and the tests still running) is the last
# thing it prints, so it survives in a log's tail.
tsan_reports=$(mktemp -d)
tsan_test_log=$(mktemp)
tsan_options="suppressions=$PWD/.ci/tsan-suppressions.txt:halt_on_error=1:log_path=$tsan_reports/report"

# Process groups started in the background (builds, the kanban package): stopped at exit with their
# children, whatever ended the run.
background_groups=()
stop_background() {
  local group
  for group in "${background_groups[@]}"; do kill -- -"$group" 2>/dev/null || true; done
}
on_exit() {
  local status=$?
  stop_background
  # The tests still open are named only when the run failed: a passing run has none worth naming.
  if [ "$status" -ne 0 ]; then .ci/tsan-digest "$tsan_reports" "$tsan_test_log"; else .ci/tsan-digest "$tsan_reports"; fi
}
trap on_exit EXIT

# fail_on_warnings LOG WHAT PATTERN: fails when LOG has a warning or error in files matching PATTERN.
fail_on_warnings() {
  if grep -E "$3.*(warning|error):" "$1"; then echo "$2 has warnings"; exit 1; fi
}

# run_swift_test LOG COMMAND...: runs a test command with its output in LOG, prints the failures and the
# summary (every line stays in LOG), and fails with the command's status.
run_swift_test() {
  local log=$1 status=0
  shift
  "$@" >"$log" 2>&1 || status=$?
  grep -E "✘|error:|Test run with|Executed [0-9]+ tests" "$log" | head -200
  if [ "$status" -ne 0 ]; then tail -60 "$log"; return "$status"; fi
}

# Two CPU-bound processes started by the caller put their pids here, so the root's tests run on a busy
# machine; stop_busy stops them by pid.
busy_pids=()
stop_busy() { local pid; for pid in "${busy_pids[@]}"; do kill "$pid" 2>/dev/null || true; done; busy_pids=(); }
