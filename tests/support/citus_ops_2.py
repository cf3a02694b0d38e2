"""Helpers and fixtures of tests/test_citus_ops*.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg

from pgrag.db.database import open_database
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.settings import load_settings
from tests.support.citus_ops import (
    PROVIDER,
    TWO_PHASE,
    FailingEmbedder,
    GatedEmbedder,
    _write_folder,
)


async def _two_phase(dsn: str, root: Path) -> dict[str, Any]:
    """Ingest with the vectors held back: what keyword and hybrid search show between the
    phases; then a provider that fails, and a run that resumes."""
    _write_folder(root, TWO_PHASE)
    provider = GatedEmbedder()
    out: dict[str, Any] = {}
    async with open_database(load_settings(), dsn=dsn, max_size=4) as db:
        run = asyncio.create_task(Ingestor(db.pool, provider, collection="phases").run([root]))
        for _ in range(600):
            async with db.pool.connection() as conn:
                rows = await (
                    await conn.execute(
                        "SELECT count(*) FROM pgrag.documents d JOIN pgrag.collections c"
                        " ON c.id = d.collection_id WHERE c.name = 'phases'"
                        " AND d.status = 'ready' AND d.vectors_pending > 0"
                    )
                ).fetchone()
            if rows and rows[0] == len(TWO_PHASE):
                break
            await asyncio.sleep(0.05)
        service = SearchService(db.pool, provider)
        for mode in ("keyword", "hybrid"):
            page = await service.search(
                SearchRequest(
                    query="PO-55821-KESTREL",
                    mode=mode,
                    explain=True,
                    filters={"collection": "phases"},
                )
            )
            out[mode] = [
                (h.path, h.explain.semantic_note if h.explain else None) for h in page.data.results
            ]
        out["between"] = _phases_state(dsn)
        provider.gate.set()
        await run
        out["after"] = _phases_state(dsn)
        # a change while the provider is down, then a run that resumes its vectors
        _write_folder(root, {"memo.md": TWO_PHASE["memo.md"] + "\n\nUpdated: checked yearly."})
        down = await Ingestor(db.pool, FailingEmbedder(ok=0), collection="phases").run([root])
        out["down"] = [(r.path, r.outcome, r.vectors_pending) for r in down.waiting]
        out["waiting"] = _phases_state(dsn)
        resumed = await Ingestor(db.pool, PROVIDER, collection="phases").resume()
        out["resumed"] = [(r.path, r.vectors_pending) for r in resumed.resumed]
    out["end"] = _phases_state(dsn)
    return out


def _phases_state(dsn: str) -> list[tuple[Any, ...]]:
    """Per document of the `phases` collection: status, chunks, vectors, vectors_pending."""
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT d.path, d.status, d.vectors_pending,"
            " (SELECT count(*) FROM pgrag.chunks ch WHERE ch.collection_id = d.collection_id"
            "   AND ch.document_id = d.id),"
            " (SELECT count(*) FROM pgrag.embeddings e WHERE e.collection_id = d.collection_id"
            "   AND e.document_id = d.id AND e.set_id = c.active_set_id)"
            " FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id"
            " WHERE c.name = 'phases' ORDER BY d.path"
        ).fetchall()
