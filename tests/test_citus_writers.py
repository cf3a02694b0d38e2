"""Concurrent writers on a Citus cluster: ingestion runs at the same time (background
uploads beside an update, several folders at once) must not deadlock on the collections
reference table. A row lock there takes two shard locks in turn, so writers meet on an
advisory lock instead (pgrag/store/reindex.py WRITER_LOCK_SQL)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg

from pgrag.db.database import open_database
from pgrag.ingest.pipeline import Ingestor
from pgrag.settings import load_settings
from tests.support.citus import CitusCluster, fresh_database, migrate
from tests.support.citus_ops import PROVIDER, _write_folder

WRITERS = 6
ROUNDS = 4


async def _concurrent_rounds(url: str, tmp: Path) -> list[str]:
    failures: list[str] = []
    async with open_database(load_settings(), dsn=url, max_size=WRITERS + 2) as db:
        for rnd in range(ROUNDS):
            runs = []
            for w in range(WRITERS):
                root = tmp / f"c{w}"
                files = {
                    f"note{i}.md": f"# Note {i}\n\nRound {rnd} of writer {w}: alpha bravo {i}."
                    for i in range(3)
                }
                _write_folder(root, files)
                runs.append(Ingestor(db.pool, PROVIDER, collection=f"c{w}").run([root]))
            for summary in await asyncio.gather(*runs):
                failures += [f"{r.path}: {r.error_code} {r.error}" for r in summary.failures]
    return failures


def test_concurrent_ingestion_runs_do_not_deadlock(citus: CitusCluster, tmp_path: Path) -> None:
    url = fresh_database(citus)
    asyncio.run(migrate(url, True))
    assert asyncio.run(_concurrent_rounds(url, tmp_path)) == []
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.name, count(*), min(d.status), max(d.status)"
            " FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id"
            " GROUP BY c.name ORDER BY c.name"
        ).fetchall()
        text = conn.execute(
            "SELECT count(*) FROM pgrag.chunks WHERE content LIKE %s", (f"%Round {ROUNDS - 1} %",)
        ).fetchone()
    assert rows == [(f"c{w}", 3, "ready", "ready") for w in range(WRITERS)]
    assert text is not None and text[0] == 3 * WRITERS
