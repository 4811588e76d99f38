#!/usr/bin/env python3
"""How long each killed or stopped node's partitions went unserved, from a partitioned cluster soak.

Usage: partition-takeover.py WORK NODES
Reads WORK/faults (lines "kill|term NODE EPOCH_MS", written by cluster-soak.sh as it kills or stops a node)
and WORK/node1.log ... WORK/nodeN.log (JSON logs: each "partitions moved" line says what the node took,
let go or lost). For every fault, the partitions the node held then, and for each the time until some node
(another, or the same one started again) took it. Prints one line per fault and the totals; exits 1 when a
partition was never served again or a takeover took more than 5 s (the target of docs/scaling.md).
"""
import datetime
import json
import sys

work, nodes = sys.argv[1], int(sys.argv[2])
LIMIT_MS = 5000


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

gaps = []
failed = False
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
        taken = next((time for time, _, what, partitions in moves
                      if time > at and what == "taken" and partition in partitions), None)
        if taken is None:
            print(f"takeover: partition {partition} of node {node} ({kind}) was never served again")
            failed = True
        else:
            fault_gaps.append(taken - at)
    gaps += fault_gaps
    worst = max(fault_gaps) if fault_gaps else 0
    print(f"takeover: {kind} node {node}: {len(held)} partitions served again within {worst} ms")

if gaps:
    gaps.sort()
    p50 = gaps[len(gaps) // 2]
    p99 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))]
    print(f"takeover: {len(gaps)} partitions moved; unserved p50 {p50} ms, p99 {p99} ms, max {gaps[-1]} ms "
          f"(target p99 <= {LIMIT_MS} ms)")
    if p99 > LIMIT_MS:
        failed = True
sys.exit(1 if failed else 0)
