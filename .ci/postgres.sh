#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1 for the sweep storage tests, installing
# Debian's package when no server binaries are found. Prints one line: the database URL.
# Usage: url=$(bash .ci/postgres.sh [DATA_DIR] [PORT])   (stop it with: pg_ctl -D DATA_DIR stop)
set -euo pipefail
datadir=${1:-$(mktemp -d /tmp/ablate-pg.XXXXXX)}
port=${2:-55432}
password=${ABLATE_PG_PASSWORD:-ablate-test-pw}

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bindir" ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) >&2
  else
    sudo -n sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql' >/dev/null >&2
  fi
  bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi

# The server refuses to run as root: run it as the postgres user when we are root.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir -p "$datadir"
[ "$(id -u)" = 0 ] && chown postgres "$datadir"
if [ ! -f "$datadir/PG_VERSION" ]; then
  pwfile=$(mktemp); echo "$password" > "$pwfile"; chmod 644 "$pwfile"
  as_pg "$bindir/initdb" -D "$datadir" -U ablate --pwfile="$pwfile" -A scram-sha-256 >/dev/null
  rm -f "$pwfile"
fi
as_pg "$bindir/pg_ctl" -D "$datadir" -l "$datadir/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $datadir" start >/dev/null
PGPASSWORD=$password "$bindir/psql" -h 127.0.0.1 -p "$port" -U ablate -d postgres -tAc \
  "SELECT 1 FROM pg_database WHERE datname='ablate'" | grep -q 1 || \
  PGPASSWORD=$password "$bindir/createdb" -h 127.0.0.1 -p "$port" -U ablate ablate
echo "postgresql+psycopg2://ablate:${password}@127.0.0.1:${port}/ablate"
