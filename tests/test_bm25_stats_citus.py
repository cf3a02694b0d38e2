"""BM25's per-collection sums on a real Citus cluster (tests/support/citus.py): the tables
are distributed by collection beside the chunks, no trigger keeps them (Citus runs none on
distributed tables), the writer does, exactly, through ingestion, new versions, deletes and
compaction; and a search of one collection reads its statistics on that collection's shard
(every statement of it: tests/test_citus_routing.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.services import documents as docs
from pgrag.settings import load_settings
from tests.support.bm25_sums import assert_exact, row_counts
from tests.support.citus import CitusCluster, ingested_database, three_collections

FOLDERS = three_collections(6)


@pytest.fixture(scope="module")
def cluster_dsn(citus: CitusCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    return ingested_database(citus, tmp_path_factory.mktemp("bm25"), FOLDERS)


def test_the_sums_live_on_each_collections_shard(cluster_dsn: str) -> None:
    with psycopg.connect(cluster_dsn) as conn:
        distributed = conn.execute(
            "SELECT logicalrelid::text, colocationid = (SELECT colocationid FROM pg_dist_partition"
            "  WHERE logicalrelid = 'pgrag.chunks'::regclass)"
            " FROM pg_dist_partition WHERE logicalrelid::text LIKE 'pgrag.bm25%%' ORDER BY 1"
        ).fetchall()
        triggers = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'pgrag.chunks'::regclass"
            " AND tgname LIKE 'chunks_bm25%%'"
        ).fetchall()
    assert distributed == [("pgrag.bm25_collection_sums", True), ("pgrag.bm25_term_sums", True)]
    assert triggers == []  # the writer keeps them


def test_the_writer_keeps_the_sums_exact_on_the_cluster(cluster_dsn: str, tmp_path: Path) -> None:
    assert_exact(cluster_dsn)
    folder = tmp_path / "alpha"
    folder.mkdir()
    files = dict(FOLDERS["alpha"])
    files["a1.md"] = "# Contract 1\n\nA shorter contract: signing only.\n"  # a new version
    del files["a2.md"]  # a removed file
    files["a9.md"] = "# Contract 9\n\nA new supplier contract for zebra crossings.\n"
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")

    async def writes() -> None:
        from pgrag.embeddings.hashing import HashEmbedder
        from pgrag.ingest.pipeline import Ingestor

        async with open_database(load_settings(), dsn=cluster_dsn, max_size=2) as db:
            summary = await Ingestor(db.pool, HashEmbedder("hash/384"), collection="alpha").run(
                [folder]
            )
            assert not summary.failures, summary.failures
            await docs.delete_document(db.pool, None, "b1.md")  # the write API's delete

    asyncio.run(writes())
    exact = assert_exact(cluster_dsn)
    with psycopg.connect(cluster_dsn, autocommit=True) as conn:
        conn.execute("SELECT pgrag.compact_bm25_sums()")
    assert assert_exact(cluster_dsn) == exact
    assert row_counts(cluster_dsn) == (len(exact["counted"][0]), len(exact["counted"][1]))
