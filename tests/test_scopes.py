"""Collection scopes are enforced by PostgreSQL row-level security: a scoped connection
cannot read another collection's rows even with a query that has no WHERE clause."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.db.scope import scoped_connection
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.settings import load_settings

pytestmark = pytest.mark.anyio

TABLES = [
    "collections",
    "embedding_sets",
    "documents",
    "units",
    "sheet_rows",
    "chunks",
    "embeddings",
]


@pytest.fixture
async def two_collections(dsn: str, tmp_path: Path) -> str:
    for name, text in (
        ("alpha", "alpha secret about zebras"),
        ("beta", "beta secret about zebras"),
    ):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}.md").write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
        (folder / f"{name}.csv").write_text("k,v\nzebra,1\n", encoding="utf-8")
        async with open_database(load_settings(), dsn=dsn) as db:
            await Ingestor(db.pool, HashEmbedder("hash/64"), collection=name).run([folder])
    return dsn


async def _counts(pool: object, scope: list[str] | None) -> dict[str, int]:
    out = {}
    async with scoped_connection(pool, scope) as conn:  # type: ignore[arg-type]
        for t in TABLES:
            out[t] = (await (await conn.execute(f"SELECT count(*) FROM pgrag.{t}")).fetchone())[0]
    return out


async def test_rls_hides_other_collections_without_any_where(two_collections: str) -> None:
    async with open_database(load_settings(), dsn=two_collections) as db:
        everything = await _counts(db.pool, None)
        alpha = await _counts(db.pool, ["alpha"])
        nothing = await _counts(db.pool, ["no-such-collection"])
        async with scoped_connection(db.pool, ["alpha"]) as conn:
            paths = [
                r[0]
                for r in await (await conn.execute("SELECT path FROM pgrag.documents")).fetchall()
            ]
            texts = [
                r[0]
                for r in await (await conn.execute("SELECT content FROM pgrag.chunks")).fetchall()
            ]
    assert everything["documents"] == 4 and alpha["documents"] == 2
    assert all(alpha[t] > 0 for t in TABLES)
    assert all(
        alpha[t] < everything[t]
        for t in ("documents", "units", "chunks", "embeddings", "sheet_rows")
    )
    assert all(v == 0 for v in nothing.values())
    assert sorted(paths) == ["alpha.csv", "alpha.md"]
    assert not any("beta" in t for t in texts)


async def test_scoped_role_cannot_write(two_collections: str) -> None:
    async with open_database(load_settings(), dsn=two_collections) as db:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with scoped_connection(db.pool, ["alpha"]) as conn:
                await conn.execute("DELETE FROM pgrag.documents")
        assert (await _counts(db.pool, None))["documents"] == 4


async def test_search_under_a_scope_returns_only_that_collection(two_collections: str) -> None:
    async with open_database(load_settings(), dsn=two_collections) as db:
        service = SearchService(db.pool, HashEmbedder("hash/64"))
        req = SearchRequest(query="secret zebras", limit=10)
        scoped = await service.search(req, collection_scope=["beta"])
        unscoped = await service.search(req)
    assert {h.path for h in scoped.data.results} <= {"beta.md", "beta.csv"}
    assert "beta.md" in {h.path for h in scoped.data.results}
    assert {"alpha.md", "beta.md"} <= {h.path for h in unscoped.data.results}


LEXICAL_SQL = (
    "SELECT c.content FROM pgrag.lexical_candidates(%s) l JOIN pgrag.chunks c ON c.id = l.chunk_id"
)
DIRECT_SQL = "SELECT count(*) FROM pgrag.lexical_candidates_in(%s, readable => NULL)"


async def test_the_lexical_leg_keeps_the_scope_while_it_runs_as_owner(
    two_collections: str,
) -> None:
    """BM25 runs SECURITY DEFINER (RLS would make every text match a full
    scan) and restricts rows itself to the collections the caller's RLS lets it read. With no
    collection filter at all, a scoped call still gets only its own chunks; the inner
    function called directly under the scoped role with no restriction gets nothing."""
    async with open_database(load_settings(), dsn=two_collections) as db:
        async with scoped_connection(db.pool, None) as conn:
            everything = [
                r[0] for r in await (await conn.execute(LEXICAL_SQL, ("secret",))).fetchall()
            ]
            readable = (
                await (await conn.execute("SELECT pgrag.readable_collections()")).fetchone()
            )[0]
        async with scoped_connection(db.pool, ["beta"]) as conn:
            scoped = [r[0] for r in await (await conn.execute(LEXICAL_SQL, ("secret",))).fetchall()]
            direct = (await (await conn.execute(DIRECT_SQL, ("secret",))).fetchone())[0]
            ids = (await (await conn.execute("SELECT pgrag.readable_collections()")).fetchone())[0]
        async with scoped_connection(db.pool, ["no-such-collection"]) as conn:
            none = await (await conn.execute(LEXICAL_SQL, ("secret",))).fetchall()
    assert readable is None  # the owner: every collection
    assert any("alpha" in t for t in everything) and any("beta" in t for t in everything)
    assert scoped and all("beta" in t and "alpha" not in t for t in scoped)
    assert len(ids) == 1 and direct == 0 and none == []


def _scoped_counts(dsn: str, *enter: str) -> dict[str, int]:
    """Row counts of every table after `enter` (statements), as the scoped role would."""
    with psycopg.connect(dsn) as conn:  # one transaction, rolled back
        for statement in enter:
            conn.execute(statement.encode())
        counts = {}
        for t in TABLES:
            row = conn.execute(f"SELECT count(*) FROM pgrag.{t}".encode()).fetchone()
            counts[t] = row[0] if row else -1
        conn.rollback()
    return counts


async def test_only_enter_scope_opens_a_scope(two_collections: str) -> None:
    """The policies compare a row's collection with the ids pgrag.enter_scope sets
    (migration 0019, the same definition as on a Citus cluster): the scoped role with a
    bare `SET pgrag.scope` (names, the old mechanism) sees nothing at all (fail closed)."""
    dsn = two_collections
    bare = _scoped_counts(dsn, "SET LOCAL ROLE pgrag_scoped", "SET LOCAL pgrag.scope = 'alpha'")
    entered = _scoped_counts(dsn, "SELECT pgrag.enter_scope('alpha')")
    assert all(v == 0 for v in bare.values()), bare
    assert entered["collections"] == 1 and entered["documents"] == 2, entered
    assert all(v > 0 for v in entered.values()), entered
    with psycopg.connect(dsn) as conn:
        body = conn.execute(
            "SELECT prosrc FROM pg_proc WHERE oid = 'pgrag.collection_in_scope'::regproc"
        ).fetchone()
        policies = conn.execute(
            "SELECT tablename, qual FROM pg_policies WHERE schemaname = 'pgrag'"
            " AND policyname = 'scoped' ORDER BY 1"
        ).fetchall()
        # the other policies let every role but pgrag_scoped through (an app role, 0028)
        others = conn.execute(
            "SELECT DISTINCT qual FROM pg_policies WHERE schemaname = 'pgrag'"
            " AND policyname <> 'scoped'"
        ).fetchall()
    assert others == [("(CURRENT_USER <> 'pgrag_scoped'::name)",)], others
    assert body and "pgrag.scope_ids" in body[0] and "pgrag.collections" not in body[0]
    # every policy, pgrag.collections' too, is the one function of the row's collection
    assert {t for t, _ in policies} >= set(TABLES) | {"language_sums"}
    assert all(qual.startswith("pgrag.collection_in_scope(") for _, qual in policies), policies
