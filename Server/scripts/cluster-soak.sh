#!/usr/bin/env bash
# Cluster soak: PostgreSQL, three event-server nodes on it, nginx in front (Server/deploy/nginx.conf), and
# several soak-client processes writing notes and long-polling through nginx with URLSessionTransport.
# Meanwhile: node 1 is SIGKILLed and restarted, node 2 is SIGTERMed and restarted, PostgreSQL is stopped
# for ten seconds and started again (nodes answer 503; a node whose turn was cut mid-commit rebuilds itself
# from the log: none may stop on its own, asserted), and node 3 is SIGKILLed and restarted.
#
# Then every client checks: each note acknowledged is on the server exactly once, in order, and its state
# equals a fresh snapshot; the script adds up the figures, including registrations beyond each client's
# first (expected 0: a client whose node died goes on with the same queue on another node). Last, the
# replication lag: a long-poll parked on node 2, notes written through node 1, p50/p99 from the write's
# acknowledgement to the note reaching the poll.
#
# Usage: scripts/cluster-soak.sh [CLIENTS] [NOTES] [LAG_SAMPLES]   (defaults 4 150 200; CI runs 3 80 100)
# APP=notes (default: the stored board, its notes in a table) or APP=notes-memory (the in-memory board), or
# APP=checklist, the team workload: each client is the writer of a team of six (tN/u1), adding items to the
# team's checklist (every write delivered to the whole team); its five teammates joined first and register
# at their own points during the writes (soak-client --teammate). Every copy is checked against a fresh
# snapshot, and the script then audits the tables themselves (each member's count of writes equals the
# writes logged for them, each team's items equal its counted writes). With PARTITIONS it runs partitioned by
# team (TeamChecklist.partitionKey).
# NODES=N runs N nodes (default 3; the faults hit nodes 1 to 3). PARTITIONS=P partitions the log by user
# (docs/scaling.md): each node serves the partitions it leases and forwards other users' requests; the
# script then also prints how long each killed or stopped node's partitions went unserved (takeover).
# POLLS=lean runs each node's lean poll listener too (--poll-port) and nginx sends the events route there;
# with PARTITIONS, a poll reaching a node that does not serve its user is forwarded to the poll listener of
# the node that does.
# Everything listens on 127.0.0.1, every wait is bounded, every process is stopped by its pid.
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-4}
nodes=${NODES:-3}
partitions=${PARTITIONS:-}
notes=${2:-150}
lag_samples=${3:-200}
source scripts/build-flags.sh
swift build "${build_flags[@]}" --product event-server
swift build "${build_flags[@]}" --product soak-client
bin=$(swift build "${build_flags[@]}" --show-bin-path)
source scripts/cluster-common.sh
start_postgres
echo "cluster-soak: PostgreSQL on 127.0.0.1:$postgres_port (pid $postgres_pid)"

partition_options=()
# Partitioned: JSON logs (their times have milliseconds) for the takeover figures.
if [ -n "$partitions" ]; then partition_options=(--partitions "$partitions" --log-format json); fi
poll_ports=("")
nginx_poll_ports=""
for node in $(seq 1 "$nodes"); do
  if [ "${POLLS:-main}" = lean ]; then
    poll_ports+=("$(free_port)")
    nginx_poll_ports+="${poll_ports[$node]} "
  else
    poll_ports+=("")
  fi
done
keys="lag:lag-soak-key"
for index in $(seq 1 "$clients"); do keys+=",user$index:user$index-soak-key"; done
if [ "${APP:-}" = checklist ]; then
  for index in $(seq 1 "$clients"); do
    for member in 1 2 3 4 5 6; do keys+=",t$index/u$member:t$index-u$member-soak-key"; done
  done
fi
# client_options N: client N's user, key and workload.
client_options() {
  if [ "${APP:-}" = checklist ]; then
    printf '%s\n' --app checklist --user "t$1/u1" --key "t$1-u1-soak-key"
    for member in 2 3 4 5 6; do printf '%s\n' --teammate "t$1/u$member:t$1-u$member-soak-key"; done
  else
    printf '%s\n' --user "user$1" --key "user$1-soak-key"
  fi
}
export EVENT_SERVER_API_KEYS="$keys"

# start_node N: starts node N on its port and waits until it listens (at most 15 s).
start_node() {
  local node=$1 log="$work/node$1.log"
  # A partitioned node keeps nothing on disk (--data-dir is refused): its state is all in PostgreSQL.
  local data_dir=(--data-dir "$work/node$node")
  if [ -n "$partitions" ]; then data_dir=(); fi
  "$bin/event-server" --app "${APP:-notes}" --host 127.0.0.1 --port "${ports[$node]}" ${data_dir[@]+"${data_dir[@]}"} \
    --postgres "$postgres_url" --rate-burst 100000 --rate-per-second 100000 \
    ${partition_options[@]+"${partition_options[@]}"} ${partitions:+--node-number "$node"} \
    ${poll_ports[$node]:+--poll-port "${poll_ports[$node]}"} >>"$log" 2>&1 &
  started_node "$node" "$!" "$log" cluster-soak
}

# restart_if_stopped N: a node that stopped on its own starts again, as a supervisor would, and is counted:
# a node whose turn the outage cut rebuilds itself from the log, so none should have stopped.
stopped_on_their_own=0
restart_if_stopped() {
  if ! kill -0 "${node_pids[$1]}" 2>/dev/null; then
    wait "${node_pids[$1]}" 2>/dev/null || true
    echo "cluster-soak: node $1 had stopped on its own during the outage; starting it again"
    tail -5 "$work/node$1.log" || true
    stopped_on_their_own=$((stopped_on_their_own + 1))
    start_node "$1"
  fi
}

for node in $(seq 1 "$nodes"); do start_node "$node"; done
start_nginx "${ports[@]:1}"
echo "cluster-soak: nodes on ${ports[*]:1} (pids ${node_pids[*]:1}); nginx on $nginx_port (pid $nginx_pid); polls: ${POLLS:-main} listener ${nginx_poll_ports}"
if [ -n "$partitions" ]; then
  # The nodes look at the leases every second: a few looks spread the partitions before the clients start.
  sleep 3
  echo "cluster-soak: $partitions partitions over $nodes nodes"
fi
# The notes are spread over about 20 s, so that every fault below lands while the clients write.
interval=${INTERVAL:-$((20000 / notes > 40 ? 20000 / notes : 40))}
echo "cluster-soak: $clients clients write $notes notes each through nginx, one every $interval ms"
client_pids=()
for index in $(seq 1 "$clients"); do
  mapfile -t workload < <(client_options "$index")
  "$bin/soak-client" --server "http://127.0.0.1:$nginx_port" "${workload[@]}" \
    --state-dir "$work/client$index" --count "$notes" --interval "$interval" --timeout 240 >"$work/client$index.log" 2>&1 &
  client_pids+=("$!")
  pids+=("$!")
done

sleep 1
echo "cluster-soak: SIGKILL node 1 (pid ${node_pids[1]}), then start it again"
note_fault kill 1
kill -KILL "${node_pids[1]}"; wait "${node_pids[1]}" 2>/dev/null || true
start_node 1
sleep 1
echo "cluster-soak: SIGTERM node 2 (pid ${node_pids[2]}), then start it again"
note_fault term 2
kill -TERM "${node_pids[2]}"; wait "${node_pids[2]}" 2>/dev/null || true
start_node 2
sleep 1
echo "cluster-soak: stopping PostgreSQL (pid $postgres_pid) for 10 s while the clients write"
note_fault dbstop 0
stop_postgres
sleep 2
# Each node answers a write with 503 within its deadline (the default 5 s) while the database is away (a node
# whose turn the outage cut mid-commit is rebuilding itself, and answers 503 too).
outage_statuses=""
expected_statuses=""
for node in $(seq 1 "$nodes"); do
  expected_statuses+=" 503"
  if kill -0 "${node_pids[$node]}" 2>/dev/null; then
    status=$(curl -s -m 8 -o /dev/null -w '%{http_code}' -u user1:user1-soak-key -X POST \
      "http://127.0.0.1:${ports[$node]}/api/v1/register" || true)
    outage_statuses+=" $status"
  fi
done
echo "cluster-soak: a registration on each running node during the outage is answered HTTP$outage_statuses"
if [ "$outage_statuses" != "$expected_statuses" ]; then
  echo "cluster-soak: FAILED (every node must answer 503 while the database is away)"; exit 1
fi
sleep 6
start_postgres
note_fault dbstart 0
back=$(date +%s%N)
for node in $(seq 1 "$nodes"); do restart_if_stopped "$node"; done
# Recovery: how long after the database is back a write is answered again, with the defaults (the database
# timeout, the nodes' fail-fast second): the first 200 to a registration on any node, tried every 100 ms.
recovered=""
for _ in $(seq 1 300); do
  for node in $(seq 1 "$nodes"); do
    status=$(curl -s -m 2 -o /dev/null -w '%{http_code}' -u user1:user1-soak-key -X POST \
      "http://127.0.0.1:${ports[$node]}/api/v1/register" || true)
    if [ "$status" = 200 ]; then recovered=$((($(date +%s%N) - back) / 1000000)); break 2; fi
  done
  sleep 0.1
done
if [ -z "$recovered" ]; then echo "cluster-soak: FAILED (no write answered within 30 s of the database's return)"; exit 1; fi
echo "cluster-soak: writes answered again ${recovered} ms after PostgreSQL was back"
if ((stopped_on_their_own > 0)); then
  echo "cluster-soak: FAILED ($stopped_on_their_own node(s) stopped on their own in the outage)"; exit 1
fi
if ((recovered > 10000)); then echo "cluster-soak: FAILED (recovery took over 10 s)"; exit 1; fi
sleep 1
echo "cluster-soak: SIGKILL node 3 (pid ${node_pids[3]}), then start it again"
note_fault kill 3
kill -KILL "${node_pids[3]}"; wait "${node_pids[3]}" 2>/dev/null || true
start_node 3
echo "cluster-soak: faults done after $(($(date +%s) - started)) s; waiting for the clients (at most 240 s)"

failed=0
for index in $(seq 1 "$clients"); do
  if ! wait "${client_pids[$((index - 1))]}"; then failed=1; fi
  tail -1 "$work/client$index.log"
done
echo "cluster-soak: $(python3 scripts/soak-totals.py "$work" "$clients")"
if ((failed)); then
  echo "cluster-soak: FAILED after $(($(date +%s) - started)) s"
  for index in $(seq 1 "$clients"); do echo "--- client $index"; tail -5 "$work/client$index.log"; done
  for node in $(seq 1 "$nodes"); do echo "--- node $node"; tail -15 "$work/node$node.log"; done
  exit 1
fi
reregistered=$(cat "$work"/client*.log | grep -o "registers [0-9]*" | awk '{ n += $2 - 1 } END { print n + 0 }')

if [ "${APP:-}" = checklist ]; then
  # The tables themselves: every member's count of writes is the number of writes logged for them, and every
  # team's items are its members' counted writes (the soak only adds): nothing applied twice or lost between
  # the tables of one transaction.
  audit=$(psql "$postgres_url" -At -c "
    SELECT (SELECT count(*) FROM checklist_members m
              WHERE m.writes <> (SELECT count(*) FROM checklist_writes w WHERE w.author = m.member)),
           (SELECT count(*) FROM (SELECT team, count(*) AS n FROM checklist_items GROUP BY team) i
              FULL JOIN (SELECT team, sum(writes) AS s FROM checklist_members GROUP BY team) m USING (team)
              WHERE i.n IS DISTINCT FROM m.s),
           (SELECT count(*) FROM checklist_members), (SELECT count(*) FROM checklist_items)")
  IFS='|' read -r counts_off teams_off members items <<<"$audit"
  echo "cluster-soak: tables: $members members, $items items; members whose count differs from their logged" \
    "writes $counts_off, teams whose items differ from their counted writes $teams_off"
  if [ "$counts_off" != 0 ] || [ "$teams_off" != 0 ] || [ "$items" != $((clients * notes)) ]; then
    echo "cluster-soak: FAILED (the tables disagree: expected $((clients * notes)) items, 0 and 0)"; exit 1
  fi
else
  "$bin/soak-client" --user lag --key lag-soak-key --lag-samples "$lag_samples" \
    --lag-write-server "http://127.0.0.1:${ports[1]}" --lag-poll-server "http://127.0.0.1:${ports[2]}" 2>/dev/null |
    tee "$work/lag.log"
  grep -q "p50" "$work/lag.log" || { echo "cluster-soak: FAILED (lag probe)"; exit 1; }
fi
for status in $outage_statuses; do
  if [ "$status" != 503 ] && [ "$status" != stopped ]; then echo "cluster-soak: FAILED (HTTP $status during the outage, not 503)"; exit 1; fi
done
if ((reregistered > 0)); then echo "cluster-soak: FAILED ($reregistered re-registrations)"; exit 1; fi
if [ -n "$partitions" ]; then
  python3 scripts/partition-takeover.py "$work" "$nodes" || { echo "cluster-soak: FAILED (takeover)"; exit 1; }
fi
echo "cluster-soak: passed in $(($(date +%s) - started)) s"
