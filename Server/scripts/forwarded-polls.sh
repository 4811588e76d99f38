#!/usr/bin/env bash
# What a long-poll forwarded between partitioned nodes costs each node, for docs/performance.md: PostgreSQL,
# node A serving the log's one partition and node B serving none (so B forwards every request to A), both
# with their lean poll listeners; USERS users register through B's main listener and park their polls on
# B's poll listener, which forwards each to A's. Prints each node's resident memory growth per parked poll
# (from when every user is registered); the load tool checks that no poll was answered early. Release build with
# cross-module optimisation. Everything listens on 127.0.0.1, every wait is bounded, every process is
# stopped by its pid.
# Usage: scripts/forwarded-polls.sh [USERS]   (default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --help ]; then sed -n '2,9p' "$0"; exit 0; fi
users=${1:-2000}
case "$users" in '' | *[!0-9]*) echo "forwarded-polls: USERS must be a number, not '$users'" >&2; exit 2 ;; esac
nodes=2
flags=(-Xswiftc -cross-module-optimization)
swift build -c release "${flags[@]}" --product event-server
swift build -c release "${flags[@]}" --product event-server-load
bin=$(swift build -c release "${flags[@]}" --show-bin-path)
source scripts/cluster-common.sh
start_postgres
echo "forwarded-polls: PostgreSQL on 127.0.0.1:$postgres_port (pid $postgres_pid)"
python3 - "$users" >"$work/keys" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f"load-{i}:load-key-{i}")
PY
poll_ports=("" "$(free_port)" "$(free_port)")

# start_node N: node N (1 is A, 2 is B) on its ports.
start_node() {
  local node=$1 log="$work/node$1.log"
  "$bin/event-server" --app notes --host 127.0.0.1 --port "${ports[$node]}" --poll-port "${poll_ports[$node]}" \
    --keys-file "$work/keys" --postgres "$postgres_url" --partitions 1 \
    --node-number "$node" --rate-burst 1000000 --rate-per-second 1000000 --max-connections 100000 \
    >>"$log" 2>&1 &
  started_node "$node" "$!" "$log" forwarded-polls
}
start_node 1
sleep 2  # node A takes the one partition at its first look
start_node 2
sleep 3  # node B's looks learn where node A answers
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

timeout 300 "$bin/event-server-load" parked --port "${ports[2]}" --poll-port "${poll_ports[2]}" --users "$users" \
  --hold 4 | tee "$work/load.log" &
load_pid=$!
for _ in $(seq 1 600); do grep -q "^registered .* parking" "$work/load.log" && break; sleep 0.5; done
before_a=$(rss "${node_pids[1]}")
before_b=$(rss "${node_pids[2]}")
max_a=0
max_b=0
while kill -0 "$load_pid" 2>/dev/null; do
  sleep 0.5
  a=$(rss "${node_pids[1]}"); b=$(rss "${node_pids[2]}")
  if [ "${a:-0}" -gt "$max_a" ]; then max_a=$a; fi
  if [ "${b:-0}" -gt "$max_b" ]; then max_b=$b; fi
done
wait "$load_pid"
grep -q "^answered early: 0" "$work/load.log" || { echo "forwarded-polls: the load tool failed (above)" >&2; exit 1; }
echo "node A (serves every user; polls arrive forwarded from B): RSS $before_a kB, then $max_a kB with $users parked polls; per poll: $(( (max_a - before_a) * 1024 / users )) B"
echo "node B (serves no user; forwards every poll to A's poll listener): RSS $before_b kB, then $max_b kB; per forwarded poll: $(( (max_b - before_b) * 1024 / users )) B"
echo "forwarded-polls: cores $(nproc)"
