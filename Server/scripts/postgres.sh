# Sourced by scripts that need a PostgreSQL server: installs Debian's package when it is missing, creates a
# cluster in a temporary folder (initdb runs as the postgres user: it refuses root), listens on 127.0.0.1 on
# a free port only, and stops it by its process id (the postmaster's, from postmaster.pid) on exit.
#
# start_postgres sets postgres_url (postgres://postgres@127.0.0.1:PORT/postgres), postgres_pid and
# postgres_dir; stop_postgres stops it (start_postgres again restarts the same cluster on the same port).
# POSTGRES_LISTEN (default 127.0.0.1) lists the addresses it listens on, and POSTGRES_NETNS names a network
# namespace to run it in: network-cut.sh runs it in a namespace of its own, listening on one address per node
# there (beside 127.0.0.1), so that it can cut each node's path alone.
postgres_dir=""
postgres_pid=""
postgres_port=""

postgres_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

# as_postgres COMMAND...: runs a command as the postgres user when this script runs as root.
as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# in_postgres_netns COMMAND...: runs a program in POSTGRES_NETNS, when it is set (as the postgres user with
# AS_POSTGRES=1 and root).
in_postgres_netns() {
  local prefix=()
  if [ -n "${POSTGRES_NETNS:-}" ]; then prefix=(ip netns exec "$POSTGRES_NETNS"); fi
  if [ "${AS_POSTGRES:-}" = 1 ] && [ "$(id -u)" = 0 ]; then prefix+=(runuser -u postgres --); fi
  ${prefix[@]+"${prefix[@]}"} "$@"
}

ensure_postgres() {
  if [ -z "$(postgres_bin)" ]; then
    echo "installing PostgreSQL (apt-get install -y postgresql)"
    (apt-get install -y postgresql >/dev/null 2>&1 || (apt-get update >/dev/null 2>&1 && apt-get install -y postgresql >/dev/null 2>&1)) ||
      { echo "PostgreSQL is not installed and cannot be installed here"; return 1; }
  fi
}

start_postgres() {
  ensure_postgres || return 1
  local bin
  bin=$(postgres_bin)
  if [ -z "$postgres_dir" ]; then
    postgres_dir=$(mktemp -d)
    chmod 755 "$postgres_dir"
    if [ "$(id -u)" = 0 ]; then chown postgres "$postgres_dir"; fi
    as_postgres "$bin/initdb" -D "$postgres_dir/data" -A trust -U postgres >"$postgres_dir/initdb.log" 2>&1 ||
      { cat "$postgres_dir/initdb.log"; return 1; }
    # POSTGRES_TRUST: a network (CIDR) whose clients are trusted too (network-cut.sh's nodes' namespace).
    if [ -n "${POSTGRES_TRUST:-}" ]; then
      echo "host all all $POSTGRES_TRUST trust" >>"$postgres_dir/data/pg_hba.conf"
    fi
    postgres_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  fi
  # Connections: a host of a partitioned log holds up to 3 P + 10 pooled ones beside 6 per partition it
  # serves; the suites run side by side, three hosts of 16 partitions among them (270 at most), and at 200
  # the excess waited for "too many clients" until the log's 5 s deadline. Keepalives and the user timeout:
  # a session whose node the network cut off ends within about 11 s, and its leases with it
  # (docs/deploying.md, "PostgreSQL settings"); the kernel's defaults keep it about two hours.
  AS_POSTGRES=1 in_postgres_netns "$bin/postgres" -D "$postgres_dir/data" -h "${POSTGRES_LISTEN:-127.0.0.1}" -p "$postgres_port" -k "$postgres_dir" \
    -c fsync=on -c synchronous_commit=on -c max_connections=1000 \
    -c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 -c tcp_user_timeout=5000 \
    >>"$postgres_dir/server.log" 2>&1 &
  for _ in $(seq 1 100); do
    if [ -s "$postgres_dir/data/postmaster.pid" ] &&
      in_postgres_netns "$bin/pg_isready" -q -h 127.0.0.1 -p "$postgres_port" 2>/dev/null; then
      postgres_pid=$(head -1 "$postgres_dir/data/postmaster.pid")
      postgres_url="postgres://postgres@127.0.0.1:$postgres_port/postgres"
      return 0
    fi
    sleep 0.1
  done
  echo "PostgreSQL did not start:"; tail -20 "$postgres_dir/server.log"; return 1
}

# stop_postgres: a fast shutdown (SIGINT to the postmaster), waiting until it is gone.
stop_postgres() {
  if [ -n "$postgres_pid" ]; then
    kill -INT "$postgres_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$postgres_pid" 2>/dev/null || break; sleep 0.1; done
    postgres_pid=""
  fi
}

remove_postgres() {
  stop_postgres
  if [ -n "$postgres_dir" ]; then rm -rf "$postgres_dir"; postgres_dir=""; fi
}
