#!/usr/bin/env bash
# Start a throw-away PostgreSQL cluster on loopback for Horus's tests and benchmarks (Debian).
#
#   bash scripts/pg-dev.sh            # prints the URL: postgresql://postgres@127.0.0.1:55432/postgres
#   export HORUS_TEST_PG=$(bash scripts/pg-dev.sh)
#   bash scripts/pg-dev.sh stop
#
# Idempotent: installs Debian's `postgresql` package only if initdb is missing, creates the cluster
# only if its folder is empty, starts it only if it does not answer. Trust authentication on
# 127.0.0.1 only (a test cluster: never expose it). Run as root (it installs a package and starts
# the server as the `postgres` user), or as any user when PostgreSQL is already installed.
#
# Environment knobs:
#   HORUS_PG_DIR    the cluster's folder (default /tmp/horus-pg)
#   HORUS_PG_PORT   its port (default 55432)
set -euo pipefail

DIR=${HORUS_PG_DIR:-/tmp/horus-pg}
PORT=${HORUS_PG_PORT:-55432}
say() { echo "pg-dev: $*" >&2; }

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

if [ -z "$(bindir)" ]; then
    if [ "$(id -u)" != 0 ]; then
        say "PostgreSQL is not installed and installing it needs root (apt-get install postgresql)"
        exit 1
    fi
    say "installing postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
BIN=$(bindir)

as_owner() {  # initdb and postgres refuse to run as root
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

if [ "${1:-start}" = stop ]; then
    [ -f "$DIR/postmaster.pid" ] && as_owner "$BIN/pg_ctl" -D "$DIR" -m fast -w stop >/dev/null
    exit 0
fi

if [ ! -f "$DIR/PG_VERSION" ]; then
    mkdir -p "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres "$DIR"
    chmod 700 "$DIR"
    as_owner "$BIN/initdb" -D "$DIR" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
fi

if ! "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
    # fsync stays on: the store's promise (an acknowledgement means committed) is what the tests
    # check. Few connections are needed; the socket directory is the cluster's own folder.
    as_owner "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w -t 60 start -o \
        "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DIR -c max_connections=300" \
        >/dev/null
fi
echo "postgresql://postgres@127.0.0.1:$PORT/postgres"
