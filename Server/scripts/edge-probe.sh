#!/usr/bin/env bash
# The floor of the HTTP edge, beside event-server's figures (scripts/load.sh): edge-probe, a bare SwiftNIO
# HTTP/1.1 server answering the events API's shapes with fixed bodies, under the same load tool: dont_block
# polls per second on keep-alive connections (and the probe's own CPU per poll), and the resident memory per
# parked long-poll and per idle connection; then again with --in-tasks (each request through an actor in a
# Swift task, each long-poll parked as a task on the actor's continuation). The probe listens on
# 127.0.0.1, is bounded in time and is stopped by its pid.
# Usage: scripts/edge-probe.sh [USERS] [CONNECTIONS] [SECONDS]   (defaults 5000 8 5)
set -euo pipefail
cd "$(dirname "$0")/.."
users=${1:-5000}
connections=${2:-8}
seconds=${3:-5}
flags=(-Xswiftc -cross-module-optimization)
swift build -c release "${flags[@]}" --product edge-probe
swift build -c release "${flags[@]}" --product event-server-load
bin=$(swift build -c release "${flags[@]}" --show-bin-path)

source scripts/live-server.sh
source scripts/hold-and-measure.sh
start_server "$bin/edge-probe" --port "$port" --seconds 600
echo "== edge-probe: dont_block polls, $connections keep-alive connections, $seconds s (cores: $(nproc))"
rate_and_cpu edge-probe "$connections" "$seconds"

echo "== edge-probe: $users parked long-polls"
hold_and_measure edge-probe parked
stop_server
start_server "$bin/edge-probe" --port "$port" --seconds 600
echo "== edge-probe: $users idle keep-alive connections (registered, no poll)"
hold_and_measure edge-probe idle
stop_server

# The same, each request answered from a Swift task through an actor and each long-poll parked as a task on
# the actor's continuation: what a lean route calling the event server's actor adds to the floor.
start_server "$bin/edge-probe" --port "$port" --seconds 600 --in-tasks
echo "== edge-probe --in-tasks: dont_block polls, $connections keep-alive connections, $seconds s"
rate_and_cpu edge-probe-in-tasks "$connections" "$seconds"
echo "== edge-probe --in-tasks: $users parked long-polls"
hold_and_measure edge-probe-in-tasks parked
stop_server
