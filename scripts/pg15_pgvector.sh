#!/usr/bin/env bash
# Builds pgvector for the second test server (Debian's PostgreSQL 15, tests/support/pg15.py),
# once per machine; scripts/test calls it as root after apt installed postgresql-15 and
# postgresql-server-dev-15. Idempotent: a stamp holds the hash of what was built from.
#
#   pgvector 0.8.6 -> installed into the system PostgreSQL 15 (/usr/lib/postgresql/15);
#   pgvector 0.7.4 -> a private, relocated copy of that installation under
#                     $PGRAG_PG15_ROOT/pgvector-0.7.4 (PostgreSQL finds its share/ and lib/
#                     relative to its bin/), used only to test the refusal of a too-old
#                     pgvector; the system's 0.8.6 is never touched by it.
#
# Sources: ../shared/vendor/pgvector-{0.8.6,0.7.4}.tar.gz (checked against their sha256).
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
ROOT="${PGRAG_PG15_ROOT:-/var/tmp/pgrag-pg15}"
VENDOR="${PGRAG_VENDOR_DIR:-$(cd .. && pwd)/shared/vendor}"
[ -d "$VENDOR" ] || VENDOR=/work/shared/vendor
declare -A SHA=(
  [0.8.6]=5743dac39fdfa740533cf95e71b033bd5513b71dda194b3cf19464ccbf76f3fb
  [0.7.4]=c6df0ba2187924b24c4405301a4a00d075e86a98f41b08c4ac2aba8fb4f4730e
)
STAMP="$ROOT/.built"
want="$($PG_CONFIG --version) ${SHA[0.8.6]} ${SHA[0.7.4]}"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] \
  && [ -f /usr/lib/postgresql/15/lib/vector.so ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test: pgvector for PostgreSQL 15 not built; run scripts/test as root once" >&2
  exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for v in 0.8.6 0.7.4; do
  tarball="$VENDOR/pgvector-$v.tar.gz"
  echo "${SHA[$v]}  $tarball" | sha256sum -c --quiet
  tar -xzf "$tarball" -C "$work"
  make -s -C "$work/pgvector-$v" PG_CONFIG="$PG_CONFIG" >"$work/build-$v.log" 2>&1 \
    || { tail -30 "$work/build-$v.log" >&2; exit 1; }
done
make -s -C "$work/pgvector-0.8.6" install PG_CONFIG="$PG_CONFIG" >/dev/null

# the private copy: bin/, lib/ and share/ of PostgreSQL 15 at the same relative places
old="$ROOT/pgvector-0.7.4"
rm -rf "$old" "$work/stage"
mkdir -p "$old/lib/postgresql" "$old/share/postgresql"
cp -a /usr/lib/postgresql/15 "$old/lib/postgresql/"
cp -a /usr/share/postgresql/15 "$old/share/postgresql/"
rm -f "$old/lib/postgresql/15/lib/vector.so" "$old/share/postgresql/15/extension/vector"*
make -s -C "$work/pgvector-0.7.4" install PG_CONFIG="$PG_CONFIG" DESTDIR="$work/stage" >/dev/null
cp -a "$work/stage/usr/lib/postgresql/15/lib/vector.so" "$old/lib/postgresql/15/lib/"
cp -a "$work/stage/usr/share/postgresql/15/extension/." "$old/share/postgresql/15/extension/"
chmod -R a+rX "$ROOT"
echo "$want" >"$STAMP"
echo "scripts/test: pgvector 0.8.6 installed into PostgreSQL 15, 0.7.4 in $old" >&2
