#!/usr/bin/env python3
"""How long partitions went unserved in a partitioned cluster soak, after each fault and each live move.

Usage: partition-takeover.py WORK NODES
Reads WORK/faults (lines "kill|term NODE EPOCH_MS", written by cluster-soak.sh as it kills or stops a node)
and WORK/node1.log ... WORK/nodeN.log (JSON logs: each "partitions moved" line says what the node took,
let go or lost). For every fault, the partitions the node held then, and for each the time until some node
(another, or the same one started again) took it; for every partition a live node let go (a rebalance), the
time until another took it. Prints one line per fault, the live moves and the totals; exits 1 when a
partition was never served again or a bound is passed (p99 over each kind): a SIGKILL 5,000 ms
(KILL_LIMIT_MS), a SIGTERM 2,000 ms (TERM_LIMIT_MS); a live move only when MOVE_LIMIT_MS is set.
"""
import datetime
import json
import os
import sys

work, nodes = sys.argv[1], int(sys.argv[2])
LIMITS_MS = {
    "kill": int(os.environ.get("KILL_LIMIT_MS", 5000)),
    "term": int(os.environ.get("TERM_LIMIT_MS", 2000)),
    # Printed, asserted only when MOVE_LIMIT_MS is set: a release followed by a fault (the database stopped,
    # the taker killed) counts the fault's time too, so the figure is not yet a live move's alone.
    "move": int(os.environ["MOVE_LIMIT_MS"]) if "MOVE_LIMIT_MS" in os.environ else None,
}


def millis(text):
    return int(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


moves = []  # (time ms, node, kind, partitions)
for node in range(1, nodes + 1):
    for line in open(f"{work}/node{node}.log", errors="replace"):
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("message") != "partitions moved":
            continue
        metadata = entry.get("metadata", {})
        for kind in ("taken", "released", "lost"):
            partitions = json.loads(metadata.get(kind, "[]"))
            if partitions:
                moves.append((millis(entry["time"]), node, kind, set(partitions)))
moves.sort(key=lambda move: move[0])

faults = []
for line in open(f"{work}/faults"):
    kind, node, at = line.split()
    faults.append((kind, int(node), int(at)))

gaps = {"kill": [], "term": [], "move": []}
failed = False


def next_taken(partition, after):
    return next((time for time, _, what, partitions in moves
                 if time > after and what == "taken" and partition in partitions), None)


for kind, node, at in faults:
    held = set()
    for time, mover, what, partitions in moves:
        if time >= at:
            break
        if mover != node:
            continue
        if what == "taken":
            held |= partitions
        else:
            held -= partitions
    fault_gaps = []
    for partition in sorted(held):
        taken = next_taken(partition, at)
        if taken is None:
            print(f"takeover: partition {partition} of node {node} ({kind}) was never served again")
            failed = True
        else:
            fault_gaps.append(taken - at)
    gaps[kind] += fault_gaps
    worst = max(fault_gaps) if fault_gaps else 0
    print(f"takeover: {kind} node {node}: {len(held)} partitions served again within {worst} ms")

# A live node letting a partition go to rebalance: unserved until another takes it.
slowest = []
for time, node, what, partitions in moves:
    if what != "released":
        continue
    for partition in sorted(partitions):
        taken = next_taken(partition, time)
        if taken is None:
            print(f"takeover: partition {partition} let go by node {node} was never served again")
            failed = True
        else:
            gaps["move"].append(taken - time)
            slowest.append((taken - time, partition, node, time))
if gaps["move"]:
    print(f"takeover: {len(gaps['move'])} partitions moved between live nodes within {max(gaps['move'])} ms; "
          "slowest: " + ", ".join(f"p{partition} from node {node} {gap} ms"
                                  for gap, partition, node, _ in sorted(slowest, reverse=True)[:5]))

for kind, kind_gaps in gaps.items():
    if not kind_gaps:
        continue
    kind_gaps.sort()
    p50 = kind_gaps[len(kind_gaps) // 2]
    p99 = kind_gaps[min(len(kind_gaps) - 1, int(len(kind_gaps) * 0.99))]
    limit = LIMITS_MS[kind]
    target = f"target p99 <= {limit} ms" if limit is not None else "not asserted"
    print(f"takeover ({kind}): {len(kind_gaps)} partitions unserved p50 {p50} ms, p99 {p99} ms, "
          f"max {kind_gaps[-1]} ms ({target})")
    if limit is not None and p99 > limit:
        failed = True
sys.exit(1 if failed else 0)
