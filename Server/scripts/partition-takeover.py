#!/usr/bin/env python3
"""How long partitions went unserved in a partitioned cluster soak, after each fault and each live move.

Usage: partition-takeover.py WORK NODES
Reads WORK/faults (lines "kill|term NODE EPOCH_MS", written by cluster-soak.sh as it kills or stops a node,
"dbstop|dbstart 0 EPOCH_MS" around a database outage, and, from network-cut.sh, "cut|heal NODE EPOCH_MS"
around a cut between a node and the database and "stopped NODE EPOCH_MS" when the cut-off node stopped
serving)
and WORK/node1.log ... WORK/nodeN.log (JSON logs: each "partitions moved" line says what the node took,
let go or lost). For every fault, the partitions the node held then, and for each the time until some node
(another, or the same one started again) took it; for every partition a live node let go (a rebalance), the
time until another took it. For a cut, the partitions must be taken by another node (CUT_LIMIT_MS, 10,000
ms), and after the cut-off node stopped serving; a partition let go within FAULT_SETTLE_MS after a heal (the
healed node taking its share again) is served again within 2,000 ms (HEAL_LIMIT_MS). A live move during which a fault happened (a node killed or stopped, the
database away, or within FAULT_SETTLE_MS = 10,000 ms after it came back) is a fault's time, not a move's: it
is printed apart and not counted. Prints one line per fault, the live moves and the totals; exits 1 when a
partition was never served again or a bound is passed (p99 over each kind): a SIGKILL 5,000 ms
(KILL_LIMIT_MS), a SIGTERM 2,000 ms (TERM_LIMIT_MS), a live move 1,000 ms (MOVE_LIMIT_MS; "none" prints it
only).
"""
import datetime
import json
import os
import sys

work, nodes = sys.argv[1], int(sys.argv[2])
LIMITS_MS = {
    "kill": int(os.environ.get("KILL_LIMIT_MS", 5000)),
    "term": int(os.environ.get("TERM_LIMIT_MS", 2000)),
    "cut": int(os.environ.get("CUT_LIMIT_MS", 10000)),
    "heal": int(os.environ.get("HEAL_LIMIT_MS", 2000)),
    "move": None if os.environ.get("MOVE_LIMIT_MS") == "none" else int(os.environ.get("MOVE_LIMIT_MS", 1000)),
}
FAULT_SETTLE_MS = int(os.environ.get("FAULT_SETTLE_MS", 10000))


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
        logged = millis(entry["time"])
        for kind in ("taken", "released", "lost"):
            partitions = json.loads(metadata.get(kind, "[]"))
            if not partitions:
                continue
            # The line is written when the look ends. A take is served from then on. The partitions let go
            # stopped being served during the look's release phase, one after another, before it went on to
            # acquire and start nodes: their time is the phase's start (the longest each may have been
            # unserved), since another node may take and log one before this line is written.
            at = logged
            if kind == "released":
                at -= sum(int(metadata.get(phase, 0)) for phase in ("release_ms", "acquire_ms", "start_ms"))
            moves.append((at, node, kind, set(partitions)))
moves.sort(key=lambda move: move[0])

faults = []
# Times when a live move's gap is a fault's: [start, end] windows of node faults, database outages and cuts.
disturbed = []
outage_began = None
cut_began = {}
healed = []  # [heal, heal + settle] windows: the healed node takes its share back
stopped_serving = []  # (node, time ms): a cut-off node's /readyz stopped answering 200
for line in open(f"{work}/faults"):
    kind, node, at = line.split()
    node, at = int(node), int(at)
    if kind == "dbstop":
        outage_began = at
    elif kind == "dbstart":
        disturbed.append((outage_began if outage_began is not None else at, at + FAULT_SETTLE_MS))
        outage_began = None
    elif kind == "heal":
        disturbed.append((cut_began.pop(node, at), at))
        healed.append((at, at + FAULT_SETTLE_MS))
    elif kind == "stopped":
        stopped_serving.append((node, at))
    else:
        faults.append((kind, node, at))
        if kind == "cut":
            cut_began[node] = at
        else:
            disturbed.append((at, at))
if outage_began is not None:
    disturbed.append((outage_began, float("inf")))
for began in cut_began.values():
    disturbed.append((began, float("inf")))


def overlaps_fault(start, end):
    return any(begin <= end and start <= finish for begin, finish in disturbed)


def after_heal(start):
    return any(begin <= start <= finish for begin, finish in healed)

gaps = {"kill": [], "term": [], "cut": [], "heal": [], "move": []}
failed = False


def next_taken(partition, after, not_by=None):
    return next((time for time, taker, what, partitions in moves
                 if time > after and what == "taken" and partition in partitions and taker != not_by), None)


for kind, node, at in faults:
    # Who held each partition when the fault came: the last node to take it, unless it let it go since. A
    # take by another node means the holder had let it go (a lease has one holder), even when the holder's
    # look was cut short by the fault before it logged so.
    holder = {}
    for time, mover, what, partitions in moves:
        if time >= at:
            break
        for partition in partitions:
            if what == "taken":
                holder[partition] = mover
            elif holder.get(partition) == mover:
                del holder[partition]
    held = {partition for partition, holding in holder.items() if holding == node}
    fault_gaps = []
    # A cut-off node still runs: its partitions must go to another node, after it stopped serving them.
    stopped = next((time for stopper, time in stopped_serving if stopper == node and time >= at), None)
    for partition in sorted(held):
        taken = next_taken(partition, at, not_by=node if kind == "cut" else None)
        if taken is None:
            print(f"takeover: partition {partition} of node {node} ({kind}) was never served again")
            failed = True
            continue
        fault_gaps.append(taken - at)
        if kind == "cut" and (stopped is None or stopped >= taken):
            print(f"takeover: partition {partition} of node {node} was taken {taken - at} ms after the cut, "
                  f"before its node stopped serving ({'never' if stopped is None else f'{stopped - at} ms'})")
            failed = True
    gaps[kind] += fault_gaps
    worst = max(fault_gaps) if fault_gaps else 0
    served_again = "served by another node" if kind == "cut" else "served again"
    stop_note = f"; it stopped serving {stopped - at} ms after the cut" if kind == "cut" and stopped else ""
    print(f"takeover: {kind} node {node}: {len(held)} partitions {served_again} within {worst} ms{stop_note}")

# A live node letting a partition go to rebalance: unserved until another takes it.
slowest = []
beside_faults = []
for time, node, what, partitions in moves:
    if what != "released":
        continue
    for partition in sorted(partitions):
        taken = next_taken(partition, time)
        if taken is None:
            print(f"takeover: partition {partition} let go by node {node} was never served again")
            failed = True
        elif overlaps_fault(time, taken):
            beside_faults.append(taken - time)
        elif after_heal(time):
            gaps["heal"].append(taken - time)
        else:
            gaps["move"].append(taken - time)
            slowest.append((taken - time, partition, node, time))
if beside_faults:
    print(f"takeover: {len(beside_faults)} partitions let go while a fault was under way, served again within "
          f"{max(beside_faults)} ms (a fault's time: not counted as live moves)")
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
