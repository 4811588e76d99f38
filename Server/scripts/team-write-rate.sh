#!/usr/bin/env bash
# Team writes through a partitioned cluster: PostgreSQL, NODES event-server nodes serving the team checklist
# (--app checklist, --partitions 16, partitioned by team), and TEAMS teams of six, each one device writing
# items in batches of 32 while its five teammates listen (soak-client --write-rate --teammate): every write is
# delivered to six queues. Each team is chosen so that its partition is on the node its device talks to (as a
# proxy that routes by partition would send it), the teams spread over the nodes in turn.
#
# Prints the writes acknowledged per second in all and each device's p99, and each node's processor time per
# acknowledged write through it (from /proc: user + system time over the run), so that 1 node and 4 can be
# compared: `team-write-rate.sh 1` then `team-write-rate.sh 4` (docs/scaling.md).
#
# Usage: scripts/team-write-rate.sh [NODES] [RATE] [SECONDS]   (defaults 4 4000 5: RATE writes/s offered in
# all, RATE/TEAMS per device). TEAMS (default 4) teams; CONFIGURATION (default release) the build measured.
# Everything listens on 127.0.0.1, every wait is bounded, every process is stopped by its pid.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help)
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
  ;;
esac
nodes=${1:-4}
rate=${2:-4000}
seconds=${3:-5}
teams=${TEAMS:-4}
partitions=16
for value in "$nodes" "$rate" "$seconds" "$teams"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "team-write-rate: NODES, RATE, SECONDS and TEAMS must be positive integers (--help)"; exit 2; }
done
((nodes <= partitions)) || { echo "team-write-rate: at most $partitions nodes"; exit 2; }
configuration=${CONFIGURATION:-release}
swift build -c "$configuration" --product event-server
swift build -c "$configuration" --product soak-client
bin=$(swift build -c "$configuration" --show-bin-path)
source scripts/cluster-common.sh
start_postgres
echo "team-write-rate: PostgreSQL on 127.0.0.1:$postgres_port (pid $postgres_pid)"

# Keys for the candidate teams t1 … t64 (their members u1 … u6).
for team in $(seq 1 64); do
  for member in 1 2 3 4 5 6; do echo "t$team/u$member:t$team-u$member-key-1234"; done
done >"$work/keys"
admin_ports=("")
for node in $(seq 1 "$nodes"); do
  admin_ports+=("$(free_port)")
  "$bin/event-server" --app checklist --host 127.0.0.1 --port "${ports[$node]}" --admin-port "${admin_ports[$node]}" \
    --postgres "$postgres_url" --partitions "$partitions" --node-number "$node" --keys-file "$work/keys" \
    --rate-burst 1000000 --rate-per-second 1000000 >>"$work/node$node.log" 2>&1 &
  started_node "$node" "$!" "$work/node$node.log" team-write-rate
done

# served_by N: the partitions node N serves.
served_by() { partitions_served "${admin_ports[$1]}"; }
# The leases settle: every partition served, by nodes holding their shares (at most 20 s).
share=$(((partitions + nodes - 1) / nodes))
for _ in $(seq 1 200); do
  settled=1 total=0
  for node in $(seq 1 "$nodes"); do
    count=$(served_by "$node" | wc -w)
    total=$((total + count))
    ((count <= share)) || settled=0
  done
  ((settled && total == partitions)) && break
  sleep 0.1
done
((settled && total == partitions)) || { echo "team-write-rate: FAILED (the leases did not settle in 20 s)"; exit 1; }

# team_partition NAME: the partition of a team's key (PartitionMap: FNV-1a of the key, modulo P).
team_partition() {
  python3 -c '
import sys
hash = 0xcbf29ce484222325
for byte in sys.argv[1].encode():
    hash = ((hash ^ byte) * 0x100000001b3) % (1 << 64)
print(hash % int(sys.argv[2]))' "$1" "$2"
}
# Team i talks to node ((i - 1) % NODES) + 1 and is the first unused team whose partition that node serves.
chosen=()
device_node=()
for index in $(seq 1 "$teams"); do
  node=$(((index - 1) % nodes + 1))
  served=" $(served_by "$node") "
  for candidate in $(seq 1 64); do
    [[ " ${chosen[*]:-} " == *" t$candidate "* ]] && continue
    if [[ "$served" == *" $(team_partition "t$candidate" "$partitions") "* ]]; then chosen+=("t$candidate"); break; fi
  done
  ((${#chosen[@]} == index)) || { echo "team-write-rate: FAILED (no free team on node $node's partitions)"; exit 1; }
  device_node+=("$node")
done
echo "== $teams teams of 6 on $nodes node(s), $partitions partitions, $rate writes/s offered in all for $seconds s," \
  "batches of 32 (cores: $(nproc), $configuration build): teams ${chosen[*]} on nodes ${device_node[*]}"

# cpu_ticks PID: the process's user + system time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
before=()
for node in $(seq 1 "$nodes"); do before+=("$(cpu_ticks "${node_pids[$node]}")"); done
device_pids=()
for index in $(seq 1 "$teams"); do
  team=${chosen[$((index - 1))]} node=${device_node[$((index - 1))]}
  teammates=()
  for member in 2 3 4 5 6; do teammates+=(--teammate "$team/u$member:$team-u$member-key-1234"); done
  timeout 180 "$bin/soak-client" --app checklist --server "http://127.0.0.1:${ports[$node]}" --user "$team/u1" \
    --key "$team-u1-key-1234" --state-dir "$work/device-$index" --write-rate $(((rate + teams - 1) / teams)) \
    --write-seconds "$seconds" --batch 32 "${teammates[@]}" >"$work/device-$index.log" 2>&1 &
  device_pids+=("$!")
  pids+=("$!")
done
failed=0
for pid in "${device_pids[@]}"; do wait "$pid" || failed=1; done
after=()
for node in $(seq 1 "$nodes"); do after+=("$(cpu_ticks "${node_pids[$node]}")"); done
python3 - "$work" "$teams" "$nodes" "$(getconf CLK_TCK)" "${device_node[*]}" "${before[*]}" "${after[*]}" <<'PY'
import re, sys
work, teams, nodes, ticks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
device_node = [int(n) for n in sys.argv[5].split()]
before = [int(n) for n in sys.argv[6].split()]
after = [int(n) for n in sys.argv[7].split()]
rates, p99s, written = [], [], [0] * nodes
for index in range(1, teams + 1):
    text = open(f"{work}/device-{index}.log").read()
    rate = re.search(r"([0-9]+) acknowledged/s", text)
    p99 = re.search(r"p99 ([0-9.]+) ms", text)
    total = re.search(r"write-rate: ([0-9]+) writes offered", text)
    if rate is None or p99 is None or total is None:
        print(f"device {index}: {text.strip().splitlines()[-1] if text.strip() else 'no output'}")
        continue
    rates.append(int(rate.group(1)))
    p99s.append(float(p99.group(1)))
    written[device_node[index - 1] - 1] += int(total.group(1))
print(f"team-write-rate: {len(rates)} of {teams} devices kept up: {sum(rates)} acknowledged writes/s in all "
      f"(each {min(rates, default=0)}-{max(rates, default=0)}), each delivered to 6 queues; "
      f"worst p99 {max(p99s, default=0):.1f} ms")
for node in range(nodes):
    cpu = (after[node] - before[node]) / ticks * 1000
    per_write = f"{cpu / written[node]:.3f} ms" if written[node] else "no writes"
    print(f"team-write-rate: node {node + 1}: {written[node]} writes, {cpu:.0f} ms of processor time, "
          f"{per_write} per acknowledged write")
PY
for index in $(seq 1 "$teams"); do tail -1 "$work/device-$index.log" | grep -q "teammates heard" || true; done
exit "$failed"
