#!/usr/bin/env bash
# One device's acknowledged writes per second and their latency, over HTTP on loopback: the engine
# (URLSessionTransport, FileStore) against event-server on SQLite, first one write per round trip (--batch 1,
# as before batches), then with batches. The server listens on 127.0.0.1, is bounded in time and is stopped by
# its pid. Usage: scripts/write-rate.sh [RATE] [SECONDS]
# APP=notes serves the stored note board (its notes in the database's tables) instead of the in-memory one;
# STORE=postgres keeps the log (and a stored app's tables) in a PostgreSQL this script starts
# (scripts/postgres.sh) instead of SQLite. CONFIGURATION=debug measures the debug build. DEVICES=N runs N
# devices at once (N users, RATE/N writes/s each, batches of 32 only) and prints their sum and worst p99.
# BATCHES="32" runs only the phases named (default "1 32": one write per round trip, then batches of 32).
# APP=checklist serves the team checklist (event-server --app checklist: items, per-member counts and a
# write log in tables; every write delivered to the whole team): the devices are members of teams of 6
# (t1/u1 … t1/u6, t2/u1 …), and a team with fewer devices than 6 has the rest joined and long-polling in its
# first device's process (soak-client --teammate), so every write reaches six queues.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1000}
seconds=${2:-5}
configuration=${CONFIGURATION:-release}
swift build -c "$configuration" --product event-server
swift build -c "$configuration" --product soak-client
bin=$(swift build -c "$configuration" --show-bin-path)

devices=${DEVICES:-1}
if ! [[ "$devices" =~ ^[0-9]+$ ]] || ((devices < 1 || devices > 64)); then
  echo "write-rate.sh: DEVICES must be a whole number in 1...64, not '$devices'" >&2
  exit 2
fi
source scripts/live-server.sh
echo "writer:writer-key-1234" > "$work/keys"
for index in $(seq 1 "$devices"); do echo "writer$index:writer$index-key-1234" >>"$work/keys"; done
app_options=()
# device_user N: the user device N writes as; device_options N: its extra soak-client options.
device_user() { echo "writer$1"; }
device_options() { :; }
if [ "${APP:-}" = checklist ]; then
  teams=$(((devices + 5) / 6))
  for team in $(seq 1 "$teams"); do
    for member in 1 2 3 4 5 6; do echo "t$team/u$member:t$team-u$member-key-1234" >>"$work/keys"; done
  done
  app_options=(--app checklist)
  device_user() { echo "t$((($1 - 1) / 6 + 1))/u$((($1 - 1) % 6 + 1))"; }
  # A team's first device hosts the members no device writes as.
  device_options() {
    local team=$((($1 - 1) / 6 + 1)) first_member=$((($1 - 1) % 6 + 1)) writing member
    [ "$first_member" = 1 ] || return 0
    writing=$((devices - (team - 1) * 6))
    for member in $(seq $((writing > 6 ? 7 : writing + 1)) 6); do
      printf -- '--teammate\nt%s/u%s:t%s-u%s-key-1234\n' "$team" "$member" "$team" "$member"
    done
  }
fi
store=(--data-dir "$work/data")
if [ "${STORE:-sqlite}" = postgres ]; then
  source scripts/postgres.sh
  trap 'cleanup; remove_postgres' EXIT
  start_postgres
  store=(--postgres "$postgres_url" --data-dir "$work/data")  # its lock file, out of the tree
fi
start_server "$bin/event-server" --app "${APP:-notes-memory}" --host 127.0.0.1 --port "$port" "${store[@]}" \
  --keys-file "$work/keys" --rate-burst 1000000 --rate-per-second 1000000
if ((devices > 1)); then
  echo "== $devices devices at once, $rate writes/s offered in all for $seconds s, batches of 32 (cores: $(nproc)," \
    "$configuration build, app ${APP:-notes-memory}, ${STORE:-sqlite})"
  device_pids=()
  for index in $(seq 1 "$devices"); do
    user=$(device_user "$index")
    mapfile -t extra < <(device_options "$index")
    timeout 180 "$bin/soak-client" --server "http://127.0.0.1:$port" --user "$user" \
      --key "$(grep "^$user:" "$work/keys" | cut -d: -f2)" --state-dir "$work/device-$index" \
      --write-rate $(((rate + devices - 1) / devices)) --write-seconds "$seconds" --batch 32 \
      ${app_options[@]+"${app_options[@]}"} ${extra[@]+"${extra[@]}"} >"$work/device-$index.log" 2>&1 &
    device_pids+=("$!")
  done
  failed=0
  for pid in "${device_pids[@]}"; do wait "$pid" || failed=1; done
  python3 - "$work" "$devices" <<'PY'
import re, sys
work, devices = sys.argv[1], int(sys.argv[2])
rates, p99s = [], []
for index in range(1, devices + 1):
    text = open(f"{work}/device-{index}.log").read()
    rate = re.search(r"([0-9]+) acknowledged/s", text)
    p99 = re.search(r"p99 ([0-9.]+) ms", text)
    if rate is None or p99 is None:
        print(f"device {index}: {text.strip().splitlines()[-1] if text.strip() else 'no output'}")
        continue
    rates.append(int(rate.group(1)))
    p99s.append(float(p99.group(1)))
print(f"write-rate: {len(rates)} of {devices} devices kept up: {sum(rates)} acknowledged/s in all "
      f"(each {min(rates, default=0)}-{max(rates, default=0)}); worst p99 {max(p99s, default=0):.1f} ms")
PY
  stop_server
  exit "$failed"
fi
echo "== one device, $rate writes/s offered for $seconds s (cores: $(nproc), $configuration build," \
  "app ${APP:-notes-memory}, ${STORE:-sqlite})"
user=$(device_user 1)
if [ "${APP:-}" != checklist ]; then user=writer; fi
mapfile -t extra < <(device_options 1)
for batch in ${BATCHES:-1 32}; do
  echo "-- --batch $batch"
  timeout 180 "$bin/soak-client" --server "http://127.0.0.1:$port" --user "$user" \
    --key "$(grep "^$user:" "$work/keys" | cut -d: -f2)" --state-dir "$work/client-$batch" --write-rate "$rate" \
    --write-seconds "$seconds" --batch "$batch" ${app_options[@]+"${app_options[@]}"} ${extra[@]+"${extra[@]}"} ||
    [ "$batch" = 1 ]  # one write per round trip may not keep up: reported, not a failure
done
stop_server
