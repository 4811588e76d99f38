# Sourced by load.sh and edge-probe.sh after live-server.sh (which sets $work, $port, $server_pid): the
# server's resident memory, what holding many connections adds to it, and the server's own CPU time per
# dont_block poll. Needs $bin (event-server-load's folder) and $users; $load_flags (optional) is passed to
# the load tool as it is (the lean poll listener's `--poll-port N`).

# rss: the running server's resident memory in kB.
rss() { awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; }

# hold_and_measure LABEL MODE: runs the load tool's MODE (parked | idle) for $users users and prints the
# server's resident memory growth per user while it holds them.
hold_and_measure() {
  local label=$1 mode=$2 before max=0 peak load_pid
  before=$(rss)
  # shellcheck disable=SC2086
  timeout 300 "$bin/event-server-load" "$mode" --port "$port" ${load_flags:-} --users "$users" --hold 4 \
    | tee "$work/load.log" &
  load_pid=$!
  # With the lean listener the tool registers every user first and says so: the baseline is taken then.
  if [ -n "${load_flags:-}" ]; then
    for _ in $(seq 1 600); do grep -q "^registered .* parking" "$work/load.log" && break; sleep 0.5; done
    before=$(rss)
  fi
  # Read the server's memory while the connections are held (the load tool prints when all are in place).
  for _ in $(seq 1 600); do
    if ! kill -0 "$load_pid" 2>/dev/null; then break; fi
    sleep 0.5
    peak=$(rss); if [ "${peak:-0}" -gt "$max" ]; then max=$peak; fi
  done
  wait "$load_pid"
  grep -q "^answered early: 0" "$work/load.log" || { echo "$label: the load tool failed (above)" >&2; exit 1; }
  echo "$label RSS $before kB before, $max kB with $users users ($mode); per user: $(( (max - before) * 1024 / users )) B"
}

# cpu_ticks: the running server's user + system CPU time, in clock ticks (/proc/PID/stat fields 14 and 15).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }

# rate_and_cpu LABEL CONNECTIONS SECONDS: runs the load tool's dont_block polls and prints, beside their
# rate, the server process's own CPU time per poll and the polls one core would answer at that cost: the
# load tool shares the machine's cores, so the rate alone understates what the server could do.
rate_and_cpu() {
  local label=$1 connections=$2 seconds=$3 before after output polls ticks_per_second
  ticks_per_second=$(getconf CLK_TCK)
  before=$(cpu_ticks)
  # shellcheck disable=SC2086
  output=$(timeout 120 "$bin/event-server-load" rate --port "$port" ${load_flags:-} --connections "$connections" \
    --seconds "$seconds")
  after=$(cpu_ticks)
  echo "$output"
  polls=$(echo "$output" | sed -n 's/^dont_block polls: \([0-9]*\) in.*/\1/p')
  python3 - "$label" "$polls" "$(( after - before ))" "$ticks_per_second" <<'PY'
import sys
label, polls, ticks, per_second = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cpu = ticks / per_second
micros = cpu * 1e6 / max(polls, 1)
print(f"{label} server CPU {cpu:.2f} s for {polls} polls: {micros:.1f} us per poll, "
      f"{1e6 / max(micros, 0.001):,.0f} polls/s per core at that cost")
PY
}
