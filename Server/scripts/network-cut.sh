#!/usr/bin/env bash
# Network cuts between partitioned nodes and PostgreSQL: silent drops, each direction, between network
# namespaces of the script's own. PostgreSQL (keepalives and tcp_user_timeout: postgres.sh) runs in one,
# three event-server nodes on a log of 6 partitions and soak-client processes writing notes through them in
# another, and a third forwards between them, as a router would. Each node reaches PostgreSQL at an address
# of its own (node N at 10.77.2.N+1), so that a traffic-control filter on the router can drop one node's
# packets alone, in flight: neither end's own stack sees the drop (a filter on the sender's interface would
# tell its TCP, which then never gives up), as on a real network. The cuts:
#   - node 1: both directions, for CUT_SECONDS (default 25), then healed;
#   - node 2: only what PostgreSQL sends it (its queries arrive, no answer does);
#   - node 3: only what it sends PostgreSQL.
# Asserted (partition-takeover.py, kind "cut"): another node serves each of the cut-off node's partitions
# within 10 s (p99; CUT_LIMIT_MS), and the cut-off node had stopped serving (its /readyz not 200) before any
# of them was taken; a partition the healed node takes back is unserved at most 2 s (HEAL_LIMIT_MS); 2 s
# after each heal and again before the next cut every partition is served by some node (their /metrics,
# within 2 s of looking), nothing restarted; no node stopped on its own; at the end every client's notes are
# on the server exactly once, in order, and its state equals a fresh snapshot (0 lost, 0 twice).
#
# Usage: scripts/network-cut.sh [CLIENTS] [NOTES]   (defaults 3 120; the long suite runs the defaults)
# Needs root (ip netns, veth, tc with htb, from Debian's iproute2). Everything listens inside the script's
# namespaces, which nothing outside them can reach; every wait is bounded; every process is stopped by its
# pid, and the namespaces are deleted at exit.
set -euo pipefail
# The script's own path, absolute: it runs itself again inside the nodes' namespace after the `cd` below.
script="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$script")/.."
case "${1:-}" in -h | --help)
  sed -n '2,/^set -euo/p' "$script" | sed '$d; s/^# \{0,1\}//'
  exit 0
  ;;
esac
clients=${1:-3}
notes=${2:-120}
[[ "$clients" =~ ^[1-9][0-9]*$ && "$notes" =~ ^[1-9][0-9]*$ ]] ||
  { echo "network-cut: CLIENTS and NOTES must be positive integers (--help)"; exit 2; }
cut_seconds=${CUT_SECONDS:-25}
nodes=3
partitions=6

# The router's interfaces: toward PostgreSQL's namespace and toward the nodes'.
to_database=r-db
to_nodes=r-n

if [ -z "${NETWORK_CUT_ROUTER:-}" ]; then
  [ "$(id -u)" = 0 ] || { echo "network-cut: FAILED (needs root for network namespaces)"; exit 1; }
  command -v tc >/dev/null || apt-get install -y iproute2 >/dev/null 2>&1 ||
    { echo "network-cut: FAILED (tc, from iproute2, is missing and cannot be installed)"; exit 1; }
  # Built outside the namespaces (the package cache is reached as usual), run inside them.
  source scripts/build-flags.sh
  swift build "${build_flags[@]}" --product event-server
  swift build "${build_flags[@]}" --product soak-client
  suffix=$$
  nodes_ns="um-cut-nodes-$suffix" router_ns="um-cut-router-$suffix" database_ns="um-cut-db-$suffix"
  trap 'for ns in "$nodes_ns" "$router_ns" "$database_ns"; do ip netns del "$ns" 2>/dev/null || true; done' EXIT
  for ns in "$nodes_ns" "$router_ns" "$database_ns"; do
    ip netns add "$ns"
    ip netns exec "$ns" ip link set lo up
  done
  # nodes (10.77.1.1) <-> router (10.77.1.254 | 10.77.2.254) <-> PostgreSQL (10.77.2.1, and .2 to .4).
  ip link add n0 netns "$nodes_ns" type veth peer name "$to_nodes" netns "$router_ns"
  ip link add db0 netns "$database_ns" type veth peer name "$to_database" netns "$router_ns"
  ip -n "$nodes_ns" addr add 10.77.1.1/24 dev n0
  ip -n "$router_ns" addr add 10.77.1.254/24 dev "$to_nodes"
  ip -n "$router_ns" addr add 10.77.2.254/24 dev "$to_database"
  ip -n "$database_ns" addr add 10.77.2.1/24 dev db0
  for node in $(seq 1 "$nodes"); do ip -n "$database_ns" addr add "10.77.2.$((node + 1))/24" dev db0; done
  ip -n "$nodes_ns" link set n0 up
  ip -n "$database_ns" link set db0 up
  ip -n "$router_ns" link set "$to_nodes" up
  ip -n "$router_ns" link set "$to_database" up
  ip -n "$nodes_ns" route add default via 10.77.1.254
  ip -n "$database_ns" route add default via 10.77.2.254
  ip netns exec "$router_ns" sysctl -qw net.ipv4.ip_forward=1
  # On each of the router's interfaces, filters send the packets a cut names to a class whose queue holds
  # none (pfifo limit 0): dropped in flight. Everything else takes the default class. Only classification
  # is used (htb, pfifo, u32): no action module (act_gact), which kernels without modules may lack.
  for device in "$to_nodes" "$to_database"; do
    ip netns exec "$router_ns" tc qdisc add dev "$device" root handle 1: htb default 1 r2q 10000
    ip netns exec "$router_ns" tc class add dev "$device" parent 1: classid 1:1 htb rate 10gbit
    ip netns exec "$router_ns" tc class add dev "$device" parent 1: classid 1:2 htb rate 10gbit
    ip netns exec "$router_ns" tc qdisc add dev "$device" parent 1:2 handle 20: pfifo limit 0
  done
  status=0
  NETWORK_CUT_ROUTER=$router_ns POSTGRES_NETNS=$database_ns ip netns exec "$nodes_ns" bash "$script" "$@" || status=$?
  exit "$status"
fi

source scripts/build-flags.sh
bin=$(swift build "${build_flags[@]}" --show-bin-path)
POSTGRES_LISTEN="127.0.0.1,10.77.2.2,10.77.2.3,10.77.2.4"
POSTGRES_TRUST=10.77.1.0/24
source scripts/cluster-common.sh
start_postgres
echo "network-cut: nodes in namespace $(ip netns identify), PostgreSQL in $POSTGRES_NETNS on port $postgres_port" \
  "(pid $postgres_pid), forwarded by $NETWORK_CUT_ROUTER"
# Each node's first look must reach PostgreSQL through the router.
for node in $(seq 1 "$nodes"); do
  timeout 10 bash -c "until (exec 3<>/dev/tcp/10.77.2.$((node + 1))/$postgres_port) 2>/dev/null; do sleep 0.1; done" ||
    { echo "network-cut: FAILED (PostgreSQL unreachable at 10.77.2.$((node + 1)) from the nodes' namespace)"; exit 1; }
done

admin_ports=("")
for _ in $(seq 1 "$nodes"); do admin_ports+=("$(free_port)"); done
keys=""
for index in $(seq 1 "$clients"); do keys+="${keys:+,}user$index:user$index-soak-key"; done
export EVENT_SERVER_API_KEYS="$keys"

# The address node N reaches PostgreSQL at.
database_address() { echo "10.77.2.$(($1 + 1))"; }

# start_node N: starts node N on its port and waits until it listens (at most 15 s).
start_node() {
  local node=$1 log="$work/node$1.log"
  "$bin/event-server" --app notes --host 127.0.0.1 --port "${ports[$node]}" --admin-port "${admin_ports[$node]}" \
    --postgres "postgres://postgres@$(database_address "$node"):$postgres_port/postgres" \
    --rate-burst 100000 --rate-per-second 100000 --partitions "$partitions" --node-number "$node" \
    --log-format json >>"$log" 2>&1 &
  started_node "$node" "$!" "$log" network-cut
}

# cut N DIRECTION: drops node N's packets to PostgreSQL (to-db), PostgreSQL's to node N (from-db), or both.
cut() {
  local node=$1 direction=$2 address
  address=$(database_address "$node")
  note_fault cut "$node"
  if [ "$direction" != from-db ]; then
    ip netns exec "$NETWORK_CUT_ROUTER" tc filter add dev "$to_database" parent 1: protocol ip prio $((10 + node)) \
      u32 match ip dst "$address"/32 match ip dport "$postgres_port" 0xffff flowid 1:2
  fi
  if [ "$direction" != to-db ]; then
    ip netns exec "$NETWORK_CUT_ROUTER" tc filter add dev "$to_nodes" parent 1: protocol ip prio $((20 + node)) \
      u32 match ip src "$address"/32 match ip sport "$postgres_port" 0xffff flowid 1:2
  fi
}

heal() {
  ip netns exec "$NETWORK_CUT_ROUTER" tc filter del dev "$to_database" parent 1: prio $((10 + $1)) 2>/dev/null || true
  ip netns exec "$NETWORK_CUT_ROUTER" tc filter del dev "$to_nodes" parent 1: prio $((20 + $1)) 2>/dev/null || true
  note_fault heal "$1"
}

# watch_readiness N: notes when node N's /readyz first answers anything but 200 (at most 60 s of looking).
watch_readiness() {
  local node=$1 code
  for _ in $(seq 1 1200); do
    code=$(curl -s -m 1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:${admin_ports[$node]}/readyz" || true)
    if [ "$code" != 200 ]; then note_fault stopped "$node"; return 0; fi
    sleep 0.05
  done
}

# served_everywhere: whether every partition is served by some node, as their /metrics say.
served_everywhere() {
  local served="" node
  for node in $(seq 1 "$nodes"); do
    served+=" $(partitions_served "${admin_ports[$node]}")"
  done
  for partition in $(seq 0 $((partitions - 1))); do
    [[ " $served " == *" $partition "* ]] || { echo "partition $partition unserved (served: $served)"; return 1; }
  done
}

# check_served WHEN: fails the script unless every partition is served at some moment within the next 2 s
# (looked at every 100 ms: a partition moving between live nodes is unserved for a moment).
check_served() {
  local missing
  for _ in $(seq 1 20); do
    if missing=$(served_everywhere); then break; fi
    sleep 0.1
  done
  if ! missing=$(served_everywhere); then
    echo "network-cut: FAILED ($missing $1)"
    for node in $(seq 1 "$nodes"); do echo "--- node $node"; tail -8 "$work/node$node.log"; done
    exit 1
  fi
  echo "network-cut: every partition served $1"
}

for node in $(seq 1 "$nodes"); do start_node "$node"; done
sleep 3
check_served "before the first cut"
interval=$(((3 * (cut_seconds + 12) * 1000 + 10000) / notes))
echo "network-cut: $clients clients write $notes notes each, one every $interval ms, each through one node"
client_pids=()
for index in $(seq 1 "$clients"); do
  node=$(((index - 1) % nodes + 1))
  "$bin/soak-client" --server "http://127.0.0.1:${ports[$node]}" --user "user$index" --key "user$index-soak-key" \
    --state-dir "$work/client$index" --count "$notes" --interval "$interval" --timeout 300 >"$work/client$index.log" 2>&1 &
  client_pids+=("$!")
  pids+=("$!")
done
sleep 3

directions=("" both from-db to-db)
for node in 1 2 3; do
  echo "network-cut: cutting node $node from PostgreSQL (${directions[$node]}) for $cut_seconds s"
  cut "$node" "${directions[$node]}"
  watch_readiness "$node" &
  pids+=("$!")
  sleep "$cut_seconds"
  heal "$node"
  echo "network-cut: node $node healed"
  sleep 2
  check_served "2 s after node $node's heal"
  sleep 4
  check_served "8 s after node $node's heal"
  for other in $(seq 1 "$nodes"); do
    if ! kill -0 "${node_pids[$other]}" 2>/dev/null; then
      echo "network-cut: FAILED (node $other stopped on its own)"; tail -20 "$work/node$other.log"; exit 1
    fi
  done
done
echo "network-cut: cuts done after $(($(date +%s) - started)) s; waiting for the clients (at most 300 s)"

failed=0
for index in $(seq 1 "$clients"); do
  if ! wait "${client_pids[$((index - 1))]}"; then failed=1; fi
  tail -1 "$work/client$index.log"
done
echo "network-cut: $(python3 scripts/soak-totals.py "$work" "$clients")"
if ((failed)); then
  for index in $(seq 1 "$clients"); do echo "--- client $index"; tail -5 "$work/client$index.log"; done
  for node in $(seq 1 "$nodes"); do echo "--- node $node"; tail -15 "$work/node$node.log"; done
  echo "network-cut: FAILED after $(($(date +%s) - started)) s"
  exit 1
fi
python3 scripts/partition-takeover.py "$work" "$nodes" || { echo "network-cut: FAILED (takeover)"; exit 1; }
echo "network-cut: passed in $(($(date +%s) - started)) s"
