"""pgrag on a real local Citus cluster (a coordinator and two workers, built from the
vendored source by tests/support/citus.py), as docs/scale-out.md describes it.

- `PGRAG_DISTRIBUTED=true pgrag migrate` distributes the schema of migration 0018 by
  collection (reference tables for the small ones, co-located shards for the large ones);
  a schema with something Citus refuses is named and left alone.
- A folder ingested there (one transaction per document version) holds the same rows and
  per-language sums as on a single server; every search mode scoped to a collection
  returns what a single server returns, routed to one shard with its HNSW/GIN index.
- With PGRAG_DISTRIBUTED=false the tables stay local and every search mode works.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgrag.db import distributed
from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.errors import DatabaseError
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.settings import load_settings
from tests.support.citus import CitusCluster, explain, fresh_database, migrate, task_count
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database

FOLDERS: dict[str, dict[str, str]] = {
    "legal": {
        "contracts/signing.md": "# Contract signing\n\nEvery supplier contract is signed by two "
        "authorised managers after the legal review. Signed contracts go to the archive.\n",
        "contracts/合同.txt": "合同管理制度\n\n合同由业务部门起草，经法务部门审核后签署。\n",
        "notes/contacts.md": "# Contacts\n\nQuestions about contracts: legal@example.com, "
        "invoices: billing@example.com.\n",
    },
    "hr": {
        "leave.md": "# Leave policy\n\nEmployees receive twenty days of paid vacation leave. "
        "Vacation requests are made two weeks in advance.\n",
        "expenses.md": "# Travel expenses\n\nSubmit expense claims with the original invoices "
        "within 30 days; finance reviews each claim.\n",
    },
}
SEARCHES: list[dict[str, Any]] = [
    {"query": "contract signing review", "mode": "hybrid"},
    {"query": "vacation leave", "mode": "hybrid", "filters": {"collection": "hr"}},
    {"query": "who signs supplier contracts", "mode": "semantic"},
    {"query": "invoices claim", "mode": "keyword"},
    {"query": "合同签署", "mode": "keyword"},
    {"query": r"[a-z]+@example\.com", "mode": "regex"},
    {"query": "contract", "mode": "hybrid", "scope": "documents"},
]


async def _ingest(dsn: str, tmp: Path) -> None:
    provider = HashEmbedder("hash/384")
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        for collection, files in FOLDERS.items():
            root = tmp / collection
            for rel, text in files.items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text, encoding="utf-8")
            summary = await Ingestor(db.pool, provider, collection=collection).run([root])
            assert not summary.failures, summary.failures


async def _results(
    dsn: str, searches: list[dict[str, Any]] = SEARCHES
) -> list[list[tuple[str, float]]]:
    provider = HashEmbedder("hash/384")
    out = []
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        service = SearchService(db.pool, provider)
        for kw in searches:
            page = await service.search(SearchRequest(max_tokens=25000, limit=10, **kw))
            out.append([(h.path, round(h.score, 6)) for h in page.data.results])
    return out


def test_cluster_runs_a_coordinator_and_two_workers(citus: CitusCluster) -> None:
    with psycopg.connect(citus.dsn()) as conn:
        rows = conn.execute(
            "SELECT nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid > 0"
        ).fetchall()
        version = conn.execute("SELECT citus_version()").fetchone()
    assert version and "Citus 14.0.1" in version[0], version
    assert sorted(r[0] for r in rows) == sorted(citus.worker_ports)


def test_distributed_false_keeps_tables_local_and_every_mode_works(
    citus: CitusCluster, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PGRAG_DISTRIBUTED=false on a coordinator: ordinary tables, pgrag unchanged."""
    monkeypatch.setenv("PGRAG_DISTRIBUTED", "false")
    coordinator = fresh_database(citus)
    asyncio.run(_ingest(coordinator, tmp_path / "c"))
    asyncio.run(_ingest(dsn, tmp_path / "s"))
    with psycopg.connect(coordinator) as conn:
        assert conn.execute("SELECT count(*) FROM pg_dist_partition").fetchone() == (0,)
    on_citus, single = asyncio.run(_results(coordinator)), asyncio.run(_results(dsn))
    assert all(on_citus), f"a search found nothing: {on_citus}"
    assert on_citus == single


def _cli_migrate(url: str) -> str:
    """`PGRAG_DISTRIBUTED=true pgrag migrate`, as a user runs it."""
    env = {**os.environ, "PGRAG_DISTRIBUTED": "true"}
    proc = subprocess.run(
        pgrag_cmd("--database-url", url, "migrate"),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_a_blocker_stops_distributed_true_and_nothing_is_half_done(citus: CitusCluster) -> None:
    url = fresh_database(citus)
    asyncio.run(migrate(url, False))
    with psycopg.connect(url, autocommit=True) as conn:  # something Citus would refuse
        conn.execute(
            "CREATE TRIGGER units_audit BEFORE INSERT ON pgrag.units"
            " FOR EACH ROW EXECUTE FUNCTION pgrag.embedding_lang()"
        )
    with pytest.raises(DatabaseError) as exc:
        asyncio.run(migrate(url, True))
    assert "1 blockers" in str(exc.value) and "pgrag.units: trigger units_audit" in str(exc.value)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_dist_partition").fetchone() == (0,)
        conn.execute("DROP TRIGGER units_audit ON pgrag.units")
    asyncio.run(migrate(url, True))
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_dist_partition").fetchone() == (10,)


def test_distributed_true_without_citus_is_refused(empty_dsn: str) -> None:
    with pytest.raises(DatabaseError, match="citus extension is not installed"):
        asyncio.run(migrate(empty_dsn, True))


@pytest.fixture(scope="module")
def kb(
    citus: CitusCluster,
    server_dsn: str,
    template_dsn: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, Path]]:
    """FOLDERS ingested into a cluster database distributed by `pgrag migrate` and into a
    single server: (cluster url, single-server url, the folders: c/ and s/ under it)."""
    url = fresh_database(citus)
    out = _cli_migrate(url)
    single = create_database(server_dsn)
    tmp = tmp_path_factory.mktemp("kb")
    asyncio.run(_ingest(url, tmp / "c"))
    asyncio.run(_ingest(single, tmp / "s"))
    assert "applied" in out
    yield url, single, tmp
    drop_database(server_dsn, single)


def test_pgrag_migrate_distributes_by_collection(kb: tuple[str, str, Path]) -> None:
    url = kb[0]
    with psycopg.connect(url) as conn:
        rows = dict(
            conn.execute(
                "SELECT logicalrelid::regclass::text, partmethod::text || ':' || colocationid"
                " FROM pg_dist_partition"
            ).fetchall()
        )
        left = conn.execute(distributed.SQL_FUNCTION_SQL, distributed._params()).fetchall()
        keys = conn.execute(
            "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conname IN ('documents_pkey', 'chunks_pkey') ORDER BY 1"
        ).fetchall()
    kinds = {t: v.split(":")[0] for t, v in rows.items()}
    assert kinds["pgrag.collections"] == kinds["pgrag.embedding_sets"] == "n"
    big = [f"pgrag.{t}" for t in distributed.DISTRIBUTED_TABLES]
    assert {kinds[t] for t in big} == {"h"}
    assert len({rows[t] for t in big}) == 1, rows  # one co-location group
    assert left == []  # every parameterised SQL function over them is PL/pgSQL now
    assert [k[1] for k in keys] == ["PRIMARY KEY (id, collection_id)"] * 2
    _cli_migrate(url)  # a re-run finds it distributed and changes nothing


def _counts(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Rows per collection of each large table, and the per-language sums."""
    out = {}
    with psycopg.connect(url) as conn:
        for table in ("documents", "units", "sheet_rows", "chunks", "embeddings"):
            out[table] = conn.execute(
                f"SELECT c.name, count(*) FROM pgrag.{table} t"
                " JOIN pgrag.collections c ON c.id = t.collection_id GROUP BY 1 ORDER BY 1"
            ).fetchall()
        out["language_sums"] = conn.execute(
            "SELECT c.name, ls.lang, sum(ls.n), sum(ls.documents) FROM pgrag.language_sums ls"
            " JOIN pgrag.collections c ON c.id = ls.collection_id"
            " GROUP BY 1, 2 HAVING sum(ls.documents) <> 0 ORDER BY 1, 2"
        ).fetchall()
    return out


def test_ingestion_writes_what_a_single_server_writes(kb: tuple[str, str, Path]) -> None:
    """Units, chunks, embeddings (with the chunk's language and document) and per-language
    sums, all written with the collection's id by the ingest code (no trigger on Citus)."""
    url, single, _ = kb
    assert _counts(url) == _counts(single)
    with psycopg.connect(url) as conn:
        wrong = conn.execute(
            "SELECT count(*) FROM pgrag.embeddings e JOIN pgrag.chunks c"
            " ON c.collection_id = e.collection_id AND c.id = e.chunk_id"
            " WHERE e.document_id IS DISTINCT FROM c.document_id"
            " OR e.lang IS DISTINCT FROM coalesce(c.lang, 'und')"
        ).fetchone()
    assert wrong == (0,)


def test_a_new_version_replaces_the_old_in_one_transaction(kb: tuple[str, str, Path]) -> None:
    """The changed file on both sides (later tests compare them): the cluster holds the new
    version only, and its per-language sums lost the old one's vectors."""
    url, single, tmp = kb
    for side, dsn in (("c", url), ("s", single)):
        (tmp / side / "hr" / "leave.md").write_text(
            "# Leave policy\n\nEmployees receive twenty-five days of paid leave.\n\n"
            "## Parental leave\n\nSixteen weeks, paid in full.\n",
            encoding="utf-8",
        )
        asyncio.run(_reingest(dsn, tmp / side / "hr"))
    with psycopg.connect(url) as conn:
        contents = conn.execute(
            "SELECT string_agg(c.content, ' ') FROM pgrag.chunks c"
            " JOIN pgrag.documents d ON d.collection_id = c.collection_id AND d.id = c.document_id"
            " WHERE d.path = 'leave.md'"
        ).fetchone()
        sums = conn.execute(
            "SELECT s.set_id, s.n, (SELECT count(*) FROM pgrag.embeddings e"
            "   WHERE e.set_id = s.set_id AND e.collection_id = s.collection_id)"
            " FROM (SELECT collection_id, set_id, sum(n) AS n FROM pgrag.language_sums"
            "       GROUP BY 1, 2) s"
        ).fetchall()
    assert contents and "twenty-five" in contents[0] and "twenty days" not in contents[0]
    assert sums and all(n == count for _, n, count in sums), sums  # old version subtracted
    assert _counts(url) == _counts(single)


async def _reingest(dsn: str, folder: Path) -> None:
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        summary = await Ingestor(db.pool, HashEmbedder("hash/384"), collection="hr").run([folder])
        assert not summary.failures, summary.failures


def _semantic(url: str, query: str, collection: str, filters: str) -> list[tuple[str, float]]:
    vector = asyncio.run(HashEmbedder("hash/384").embed_query(query))
    with psycopg.connect(url) as conn:
        cid = conn.execute(
            "SELECT id FROM pgrag.collections WHERE name = %s", (collection,)
        ).fetchone()
        rows = conn.execute(
            "SELECT d.path, round(s.similarity::numeric, 6)::float8"
            " FROM pgrag.semantic_candidates(%s::vector, 10, %s::bigint[], %s::jsonb) s"
            " JOIN pgrag.chunks c ON c.id = s.chunk_id"
            " JOIN pgrag.documents d ON d.collection_id = c.collection_id AND d.id = c.document_id"
            " ORDER BY s.similarity DESC, d.path, c.ordinal",
            (str([float(x) for x in vector]), [cid[0]] if cid else [], filters),
        ).fetchall()
    return [(r[0], r[1]) for r in rows]


@pytest.mark.parametrize(
    ("query", "collection", "filters"),
    [
        ("who signs supplier contracts", "legal", "{}"),
        ("vacation leave", "hr", "{}"),
        ("contract review", "legal", '{"folder": "contracts"}'),
    ],
)
def test_scoped_semantic_leg_matches_a_single_server(
    kb: tuple[str, str, Path], query: str, collection: str, filters: str
) -> None:
    url, single, _ = kb
    got = _semantic(url, query, collection, filters)
    assert got and got == _semantic(single, query, collection, filters)


def test_regex_search_matches_a_single_server(kb: tuple[str, str, Path]) -> None:
    url, single, _ = kb
    regex = [s for s in SEARCHES if s["mode"] == "regex"]
    assert asyncio.run(_results(url, regex)) == asyncio.run(_results(single, regex))


def test_keyword_semantic_and_hybrid_search_match_a_single_server(
    kb: tuple[str, str, Path],
) -> None:
    url, single, _ = kb
    ranked = [s for s in SEARCHES if s["mode"] != "regex"]
    assert asyncio.run(_results(url, ranked)) == asyncio.run(_results(single, ranked))


@pytest.mark.parametrize("filters", [{}, {"collection": "legal"}])
def test_a_phrase_or_negation_search_scores_the_rest_as_a_single_server(
    kb: tuple[str, str, Path], filters: dict[str, str]
) -> None:
    """A phrase or a negation leaves fewer candidates than the pool, so the lexical fallback
    scores the other matching chunks of the scope. Joined to pgrag.chunks in one query, the
    fallback function ran on the workers and failed there ("cannot execute a distributed
    query from a query on a shard"; every SciFact query with a negated compound did)."""
    url, single, _ = kb
    searches = [
        {"query": '"supplier contract" archive', "mode": "keyword", "filters": filters},
        {"query": "contracts -invoices", "mode": "hybrid", "filters": filters},
    ]
    got = asyncio.run(_results(url, searches))
    assert all(got), got
    assert got == asyncio.run(_results(single, searches))


def test_a_scoped_semantic_leg_is_routed_to_one_shard_with_hnsw(kb: tuple[str, str, Path]) -> None:
    url = kb[0]
    with psycopg.connect(url) as conn:
        set_id, cid, leg = conn.execute(
            "SELECT es.id, es.collection_id, pgrag.semantic_leg_sql(es.id, es.dimensions,"
            " true, false, es.collection_id) FROM pgrag.collections c"
            " JOIN pgrag.embedding_sets es ON es.id = c.active_set_id WHERE c.name = 'legal'"
        ).fetchone()
    vector = str([float(x) for x in asyncio.run(HashEmbedder("hash/384").embed_query("contracts"))])
    literal = leg.replace("$1", f"'{vector}'").replace("$2", "'{}'::jsonb").replace("$3", "10")
    plan = explain(url, literal)
    assert task_count(plan) == 1, plan
    assert f"embeddings_hnsw_{set_id}_" in plan, plan
    assert cid


DISABLED = "contracts/signing.md"  # one chunk


def _set_chunks_disabled(dsn: str, disabled: bool) -> int:
    """pgrag.disable_chunk / enable_chunk on every chunk of DISABLED (on Citus: an UPDATE
    routed by the coordinator); how many it changed."""
    fn = "pgrag.disable_chunk" if disabled else "pgrag.enable_chunk"
    with psycopg.connect(dsn, autocommit=True) as conn:
        ids = conn.execute(
            "SELECT c.id FROM pgrag.chunks c JOIN pgrag.documents d"
            " ON d.id = c.document_id AND d.collection_id = c.collection_id WHERE d.path = %s",
            (DISABLED,),
        ).fetchall()
        return sum(len(conn.execute(f"SELECT * FROM {fn}(%s)", i).fetchall()) for i in ids)


def test_a_disabled_chunk_is_left_out_as_on_a_single_server(kb: tuple[str, str, Path]) -> None:
    """Every mode leaves a disabled chunk out on the cluster (lexical postings and fallback
    on the shards, the semantic leg's routed list of disabled ids) as a single server does."""
    url, single, _ = kb
    before = asyncio.run(_results(url))
    assert any(path == DISABLED for hits in before for path, _ in hits)
    try:
        assert _set_chunks_disabled(url, True) == _set_chunks_disabled(single, True) > 0
        got = asyncio.run(_results(url))
        assert not any(path == DISABLED for hits in got for path, _ in hits), got
        assert got == asyncio.run(_results(single))
    finally:
        _set_chunks_disabled(url, False)
        _set_chunks_disabled(single, False)
    assert asyncio.run(_results(url)) == before
