"""From a single server to a cluster, as docs/scale-out.md tells a user to do it: a pgrag
database that already holds documents (single-server mode on the future coordinator) is
distributed in place by `PGRAG_DISTRIBUTED=true pgrag migrate`; afterwards the shards hold
every row, the coordinator keeps no stale local copy, and every search mode returns what
a single server with the same folders returns."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from tests.support.citus import CitusCluster, fresh_database
from tests.support.databases import create_database, drop_database
from tests.test_citus import _cli_migrate, _counts, _ingest, _results


def test_a_populated_database_is_distributed_in_place(
    citus: CitusCluster,
    server_dsn: str,
    template_dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = fresh_database(citus)
    with monkeypatch.context() as m:  # the single server this database used to be
        m.setenv("PGRAG_DISTRIBUTED", "false")
        asyncio.run(_ingest(url, tmp_path / "c"))
    before = _counts(url)
    assert before["chunks"], "nothing was ingested before distributing"
    _cli_migrate(url)
    single = create_database(server_dsn)
    try:
        asyncio.run(_ingest(single, tmp_path / "s"))
        with psycopg.connect(url) as conn:
            kinds = dict(
                conn.execute(
                    "SELECT logicalrelid::regclass::text, partmethod::text FROM pg_dist_partition"
                ).fetchall()
            )
            # the coordinator's own (shell) tables: their old rows are not a second copy
            stale = [
                t
                for t in ("documents", "units", "chunks", "embeddings")
                if conn.execute("SELECT pg_relation_size(%s::regclass)", (f"pgrag.{t}",)).fetchone()
                != (0,)
            ]
        assert kinds["pgrag.chunks"] == "h" and kinds["pgrag.collections"] == "n"
        assert stale == [], f"local data left on the coordinator: {stale}"
        assert _counts(url) == before == _counts(single)
        distributed, plain = asyncio.run(_results(url)), asyncio.run(_results(single))
        assert all(distributed), f"a search found nothing: {distributed}"
        assert distributed == plain
    finally:
        drop_database(server_dsn, single)
