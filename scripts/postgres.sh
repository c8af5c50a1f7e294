#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for tests and benchmarks, on 127.0.0.1 and a free port.
#
#   scripts/postgres.sh [start]   install PostgreSQL 15 if missing, start a cluster, print its URL
#   scripts/postgres.sh url       print the URL of the running cluster
#   scripts/postgres.sh stop      stop the cluster and delete its files
#
#   export ONECLUSTER_TEST_PG_URL=$(scripts/postgres.sh)
#
# The cluster lives under $ONECLUSTER_PG_DIR (default /tmp/onecluster-pg) with trust auth on
# loopback only.  PostgreSQL refuses to run as root, so as root the server runs as the
# `postgres` user (created by the Debian package).
set -euo pipefail

PG_DIR=${ONECLUSTER_PG_DIR:-/tmp/onecluster-pg}
PG_VERSION=15
DB_NAME=onecluster

log() { echo "postgres.sh: $*" >&2; }

find_bindir() {
    for dir in "/usr/lib/postgresql/$PG_VERSION/bin" "$(dirname "$(command -v pg_ctl 2>/dev/null || echo /x/x)")"; do
        if [[ -x "$dir/pg_ctl" && -x "$dir/initdb" && -x "$dir/postgres" ]]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

ensure_installed() {
    if find_bindir >/dev/null; then
        return 0
    fi
    if [[ $(id -u) -ne 0 ]]; then
        log "PostgreSQL $PG_VERSION is not installed; run this once as root to install it"
        exit 1
    fi
    log "installing postgresql-$PG_VERSION with apt-get"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "postgresql-$PG_VERSION" >&2; then
        # A fresh machine may have no package lists yet.
        apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "postgresql-$PG_VERSION" >&2
    fi
}

as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

url() {
    if [[ ! -f "$PG_DIR/port" ]]; then
        log "no cluster is running under $PG_DIR; start one with: $0 start"
        exit 1
    fi
    echo "postgresql+psycopg://postgres@127.0.0.1:$(cat "$PG_DIR/port")/$DB_NAME"
}

start() {
    ensure_installed
    local bin port
    bin=$(find_bindir)
    if [[ -f "$PG_DIR/port" ]] && as_owner "$bin/pg_ctl" -D "$PG_DIR/data" status >/dev/null 2>&1; then
        url
        return 0
    fi
    rm -rf "$PG_DIR"
    mkdir -p "$PG_DIR"
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$PG_DIR"
    fi
    port=$(free_port)
    as_owner "$bin/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 >"$PG_DIR/initdb.log" 2>&1 \
        || { log "initdb failed:"; cat "$PG_DIR/initdb.log" >&2; exit 1; }
    as_owner "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 start \
        -o "-p $port -k $PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=200" >/dev/null \
        || { log "the server did not start:"; cat "$PG_DIR/server.log" >&2; exit 1; }
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$DB_NAME"
    echo "$port" >"$PG_DIR/port"
    url
}

stop() {
    if [[ ! -d "$PG_DIR/data" ]]; then
        log "no cluster under $PG_DIR"
        return 0
    fi
    as_owner "$(find_bindir)/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null || true
    rm -rf "$PG_DIR"
    log "stopped and removed $PG_DIR"
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    url) url ;;
    *) log "usage: $0 [start|url|stop]"; exit 2 ;;
esac
