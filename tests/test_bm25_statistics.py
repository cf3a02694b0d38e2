"""BM25's statistics (chunk count N, document frequencies) are those of the collections a
search covers: a search of one collection, or with a key limited to it, ranks as if that
collection were alone in the database. (On Citus this keeps such a search on the
collection's shard: tests/test_citus_routing.py.) Every document frequency comes from the
per-collection sums, added up over the collections searched."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.db.scope import scoped_connection
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.settings import load_settings

pytestmark = pytest.mark.anyio

SMALL = {
    "zebra.md": "# Stripes\n\nThe zebra crossing near the depot is repainted every spring.\n",
    "lorry.md": "# Depot\n\nLorries leave the depot at dawn with the spring deliveries.\n",
    "invoice.md": "# Billing\n\nInvoices for the depot are paid within thirty days.\n",
}
# zebra is rare in `small` and everywhere in `big`: its idf differs between the two scopes
BIG = {f"herd{i}.md": f"# Herd {i}\n\nZebra herd {i} grazes on the savanna.\n" for i in range(8)}
QUERY = "zebra depot spring"
SCORES_SQL = """
SELECT d.path, round(x.score::numeric, 9)
FROM pgrag.lexical_candidates(%s, collection_ids => %s::bigint[]) x
JOIN pgrag.chunks c ON c.id = x.chunk_id JOIN pgrag.documents d ON d.id = c.document_id
ORDER BY x.rank
"""


async def _ingest(dsn: str, folder: Path, files: dict[str, str], collection: str) -> None:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    async with open_database(load_settings(), dsn=dsn) as db:
        summary = await Ingestor(db.pool, HashEmbedder("hash/64"), collection=collection).run(
            [folder]
        )
    assert not summary.failures, summary.failures


def _scores(dsn: str, ids: list[int] | None) -> list[tuple[str, float]]:
    with psycopg.connect(dsn) as conn:
        return [(p, float(s)) for p, s in conn.execute(SCORES_SQL, (QUERY, ids)).fetchall()]


async def _scoped_scores(dsn: str, scope: list[str]) -> list[tuple[str, float]]:
    async with (
        open_database(load_settings(), dsn=dsn) as db,
        scoped_connection(db.pool, scope) as conn,
    ):
        rows = await (await conn.execute(SCORES_SQL, (QUERY, None))).fetchall()
    return [(p, float(s)) for p, s in rows]


def _id(dsn: str, name: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id FROM pgrag.collections WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_collection_is_scored_as_if_it_were_alone(dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        # no ANALYZE in between: the unscoped N stays the exact count
        conn.execute("ALTER TABLE pgrag.chunks SET (autovacuum_enabled = off)")
    await _ingest(dsn, tmp_path / "small", SMALL, "small")
    small = _id(dsn, "small")
    alone = _scores(dsn, [small])
    alone_unscoped = _scores(dsn, None)
    assert [p for p, _ in alone][:1] == ["zebra.md"] and len(alone) == 3, alone
    assert alone == alone_unscoped  # one collection: the same statistics either way

    await _ingest(dsn, tmp_path / "big", BIG, "big")
    # searched alone, or through a key limited to it: the other collection changes nothing
    assert _scores(dsn, [small]) == alone
    assert await _scoped_scores(dsn, ["small"]) == alone
    # over both collections (zebra common, depot and spring rare) small's chunks score
    # differently
    both = dict(_scores(dsn, None))
    assert {p: both[p] for p, _ in alone} != dict(alone), both
    with psycopg.connect(dsn) as conn:
        n = conn.execute(
            "SELECT pgrag.chunk_count_estimate(%s::bigint[]),"
            " (SELECT count(*) FROM pgrag.chunks WHERE collection_id = %s)",
            ([small], small),
        ).fetchone()
    assert n is not None and n[0] == n[1] == 3
