# Sourced by load.sh and edge-probe.sh after live-server.sh (which sets $work, $port, $server_pid): the
# server's resident memory, and what holding many connections adds to it. Needs $bin (event-server-load's
# folder) and $users.

# rss: the running server's resident memory in kB.
rss() { awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; }

# hold_and_measure LABEL MODE: runs the load tool's MODE (parked | idle) for $users users and prints the
# server's resident memory growth per user while it holds them.
hold_and_measure() {
  local label=$1 mode=$2 before max=0 peak load_pid
  before=$(rss)
  timeout 300 "$bin/event-server-load" "$mode" --port "$port" --users "$users" --hold 4 &
  load_pid=$!
  # Read the server's memory while the connections are held (the load tool prints when all are in place).
  for _ in $(seq 1 600); do
    if ! kill -0 "$load_pid" 2>/dev/null; then break; fi
    sleep 0.5
    peak=$(rss); if [ "${peak:-0}" -gt "$max" ]; then max=$peak; fi
  done
  wait "$load_pid"
  echo "$label RSS $before kB before, $max kB with $users users ($mode); per user: $(( (max - before) * 1024 / users )) B"
}
