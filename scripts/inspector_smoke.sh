#!/usr/bin/env bash
# Smoke test with an external MCP client: the MCP Inspector CLI talks to `pgrag serve` over
# stdio, lists the tools and calls `search`, against any database (the test suite runs the
# same client over the test knowledge base: tests/test_inspector.py). `npx -y` downloads
# the Inspector from npm the first time.
#
#   scripts/inspector_smoke.sh [DATABASE_URL] [QUERY]
#
# DATABASE_URL defaults to $PGRAG_DATABASE_URL (unset: pgrag's embedded cluster under
# $PGRAG_HOME). PYTHON defaults to the interpreter on PATH that can import pgrag.
set -euo pipefail

INSPECTOR="@modelcontextprotocol/inspector@2.12.0"
DSN="${1:-${PGRAG_DATABASE_URL:-}}"
QUERY="${2:-limitation of liability}"
PYTHON="${PYTHON:-python}"
export NPM_CONFIG_LOGLEVEL=error NPM_CONFIG_UPDATE_NOTIFIER=false

command -v npx >/dev/null || { echo "npx not found: install Node.js >= 20" >&2; exit 2; }
"$PYTHON" -c "import pgrag" || { echo "$PYTHON cannot import pgrag (set PYTHON=...)" >&2; exit 2; }

# the server's settings travel as environment variables (-e), so no pgrag flag can be taken
# for one of the Inspector's own options
env_args=()
if [[ -n "$DSN" ]]; then
  env_args+=(-e "PGRAG_DATABASE_URL=$DSN")
fi

inspect() {
  npx -y "$INSPECTOR" --cli "${env_args[@]}" "$PYTHON" -m pgrag serve "$@"
}

echo "== tools/list"
tools="$(inspect --method tools/list)"
echo "$tools"
for tool in search list_folders list_documents get_document_outline get_document_data \
  get_pages get_sheet_data get_slides get_status get_embedding; do
  grep -q "\"name\": \"$tool\"" <<<"$tools" || { echo "missing tool: $tool" >&2; exit 1; }
done

echo "== tools/call search query=$QUERY"
result="$(inspect --method tools/call --tool-name search --tool-arg "query=$QUERY" limit=3)"
echo "$result"
grep -q '"isError": false' <<<"$result" || { echo "search failed" >&2; exit 1; }

echo "== resources/templates/list"
inspect --method resources/templates/list

echo "inspector smoke test passed"
