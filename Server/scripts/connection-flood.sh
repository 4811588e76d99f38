#!/usr/bin/env bash
# A bounded connection flood against a live event-server on loopback: FLOOD idle TCP connections from
# 127.0.0.2 (every 127/8 address is loopback) that never send a byte, while a client with a key keeps making
# requests from 127.0.0.1. Passes when every normal request is answered and the server's caps hold (the
# flood's connections are refused or closed). The server listens on 127.0.0.1 only, the whole run is bounded
# by SECONDS, and the server is stopped by its pid. Usage: scripts/connection-flood.sh [FLOOD] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
flood=${1:-20000}
seconds=${2:-20}
source scripts/build-flags.sh
swift build "${build_flags[@]}" --product event-server
bin=$(swift build "${build_flags[@]}" --show-bin-path)

source scripts/live-server.sh
start_server env EVENT_SERVER_API_KEYS="alice:alice-key-1" "$bin/event-server" --port "$port" \
  --data-dir "$work/data" --snapshot-interval 0 --max-connections 1024 --max-unauthenticated-per-peer 64 \
  --unauthenticated-timeout 2

timeout $((seconds + 30)) python3 - "$port" "$flood" "$seconds" <<'PY'
import base64, http.client, socket, sys, threading, time
port, flood, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
deadline = time.time() + seconds
opened = refused = 0
held = []
def open_flood():
    global opened, refused
    while opened + refused < flood and time.time() < deadline:
        s = socket.socket()
        s.settimeout(2)
        try:
            s.bind(("127.0.0.2", 0))
            s.connect(("127.0.0.1", port))
            held.append(s)
            opened += 1
        except OSError:
            refused += 1
            s.close()
flooder = threading.Thread(target=open_flood)
flooder.start()
auth = "Basic " + base64.b64encode(b"alice:alice-key-1").decode()
answered = failed = 0
latencies = []
while time.time() < deadline:
    started = time.time()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/api/v1/uploads?key=videos%2Fprobe", headers={"Authorization": auth})
        r = c.getresponse(); r.read(); c.close()
        if r.status == 200: answered += 1
        else: failed += 1
    except OSError:
        failed += 1
    latencies.append(time.time() - started)
    time.sleep(0.05)
flooder.join()
time.sleep(3)  # past the unauthenticated timeout (2 s) of the last ones admitted
# The server closed what it did not refuse: a read on each flood connection ends (or it was reset).
closed = 0
for s in held:
    try:
        s.settimeout(0.2)
        if s.recv(1) == b"": closed += 1
    except ConnectionResetError:
        closed += 1
    except OSError:
        pass
    s.close()
latencies.sort()
p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000 if latencies else 0
print(f"flood: {opened} connections opened from 127.0.0.2 ({refused} failed to connect), "
      f"{closed} of them closed by the server; normal requests from 127.0.0.1: {answered} answered, "
      f"{failed} failed, p99 {p99:.1f} ms")
sys.exit(0 if failed == 0 and answered > 0 and closed == opened else 1)
PY
status=$?
stop_server
if [ "$status" -ne 0 ]; then echo "connection flood: FAILED"; tail -20 "$work/server.log"; exit 1; fi
echo "connection flood: normal requests answered throughout, the caps held"
