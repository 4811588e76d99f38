# Sourced by the cluster soaks (cluster-soak.sh, video-partition-soak.sh) after they set `nodes`: PostgreSQL
# and nginx helpers, a work folder, the processes to stop by pid at exit, a free port per node, and when each
# fault happened (for partition-takeover.py).
#
# Sets: work, pids (append each started process), ports[1..nodes], node_pids[1..nodes], started.
# Provides: note_fault KIND N; started_node N PID LOG NAME. At exit every process in pids is killed, nginx
# and PostgreSQL are stopped, and the work folder is removed (KEEP=DIR copies it there first, for a look at
# the logs).
source scripts/postgres.sh
source scripts/nginx.sh

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  stop_nginx
  remove_postgres
  if [ -n "${KEEP:-}" ]; then rm -rf "$KEEP"; cp -r "$work" "$KEEP"; fi
  rm -rf "$work"
}
trap cleanup EXIT
started=$(date +%s)

# partitions_served ADMIN_PORT: the partitions the node with that admin port serves, as its /metrics say
# (event_server_partition_served 1), separated by spaces.
partitions_served() {
  curl -s -m 2 "http://127.0.0.1:$1/metrics" |
    sed -n 's/^event_server_partition_served{partition="\([0-9]*\)"} 1\(\.0*\)\{0,1\}$/\1/p' | tr '\n' ' ' || true
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ports=("")
node_pids=("")
for _ in $(seq 1 "$nodes"); do ports+=("$(free_port)"); node_pids+=(""); done
# note_fault KIND N: when node N was killed or stopped (KIND kill or term), for the takeover figures.
note_fault() { echo "$1 $2 $(date +%s%3N)" >>"$work/faults"; }

# started_node N PID LOG NAME: records node N's process and waits (at most 15 s) until LOG says it listens on
# its port; exits the script, naming NAME, when it does not.
started_node() {
  local node=$1 pid=$2 log=$3 name=$4
  node_pids[$node]=$pid
  pids+=("$pid")
  for _ in $(seq 1 300); do
    if grep -q "listening on http://127.0.0.1:${ports[$node]} (pid $pid)" "$log"; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.05
  done
  echo "$name: node $node did not start"; tail -30 "$log"; exit 1
}
