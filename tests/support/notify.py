"""Change notifications as a listening pgrag server sees them, and the writers that cause
them (shared by tests/test_citus_notify.py and tests/test_two_servers.py)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import psycopg

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.services import documents as docs
from pgrag.services.saved import DocumentPatch, NewDocument, SavedDocuments
from pgrag.settings import load_settings
from pgrag.store import removals

CHANNEL = "pgrag_documents"
_markers = itertools.count(1)


class Listener:
    """LISTENs on the servers' channel. `since_last()` returns the payloads that arrived
    since its previous call, in order: it sends a marker and reads up to it, and NOTIFYs
    are delivered in commit order, so every change committed before the call is in it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: psycopg.AsyncConnection | None = None

    async def __aenter__(self) -> Listener:
        self.conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        await self.conn.execute(f"LISTEN {CHANNEL}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.conn is not None:
            await self.conn.close()

    async def since_last(self) -> list[str]:
        assert self.conn is not None
        marker = f"marker-{next(_markers)}"
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as other:
            await other.execute("SELECT pg_notify(%s, %s)", (CHANNEL, marker))
        got: list[str] = []
        async for note in self.conn.notifies(timeout=30):
            if note.payload == marker:
                return got
            got.append(note.payload)
        raise AssertionError(f"the marker {marker} never arrived; got {got}")


async def writer_steps(url: str, tmp: Path) -> dict[str, list[str]]:
    """Every way pgrag changes pgrag.documents, one step at a time, and the notifications
    each step sent (sorted: documents are written concurrently, the order is not fixed);
    plus a rolled-back delete and a change made by hand in SQL."""
    steps: dict[str, list[str]] = {}
    provider = HashEmbedder("hash/384")
    settings = load_settings(collection="notes")
    root = tmp / "folder"
    root.mkdir(parents=True)
    (root / "a.md").write_text("# Alpha\n\nzebras live in Africa.\n", encoding="utf-8")
    (root / "b.md").write_text("# Beta\n\ngiraffes too.\n", encoding="utf-8")
    (root / "c.md").write_text("# Gamma\n\nokapis in the forest.\n", encoding="utf-8")
    (root / "broken.docx").write_bytes(b"not a zip archive at all")
    async with open_database(settings, dsn=url, max_size=4) as db, Listener(url) as listener:

        async def step(name: str) -> None:
            steps[name] = sorted(await listener.since_last())

        ingestor = Ingestor(db.pool, provider, collection="notes")
        summary = await ingestor.run([root])
        assert len(summary.failures) == 1, summary.results  # broken.docx: marked failed
        await step("ingest 3 new files and 1 broken one")
        (root / "a.md").write_text("# Alpha\n\nzebras live in East Africa.\n", encoding="utf-8")
        await ingestor.run([root])
        await step("ingest a changed file")
        (root / "b.md").unlink()
        await ingestor.run([root])
        await step("ingest after a file was removed")
        assert await ingestor.remove(root.resolve(), ["c.md"]) == ["c.md"]
        await step("watch mode: a file deleted")

        saved = SavedDocuments(db.pool, provider, settings, settings.write_max_chars, None)
        note = await saved.create(NewDocument(content="# Note\n\nremember the okapis.", topic="t"))
        await step("write toolset: save")
        await saved.update(note.document_id, DocumentPatch(folder="moved", tags=["x"]))
        await step("write toolset: update")
        assert (await saved.delete(note.document_id)).deleted
        await step("write toolset: delete")

        async with db.pool.connection() as conn:
            (a_id,) = await (
                await conn.execute("SELECT id::text FROM pgrag.documents WHERE path = 'a.md'")
            ).fetchone() or (None,)
        assert a_id is not None
        try:
            async with db.pool.connection() as conn, conn.transaction():
                await removals.delete_document(conn, a_id)
                raise _RolledBack
        except _RolledBack:
            pass
        await step("a delete rolled back")
        async with db.pool.connection() as conn:
            row = await (
                await conn.execute("SELECT count(*) FROM pgrag.documents WHERE id = %s", (a_id,))
            ).fetchone()
        assert row == (1,), "the rolled-back delete deleted"
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("UPDATE pgrag.documents SET status = 'ready' WHERE id = %s", (a_id,))
        await step("by hand in SQL")
        await docs.delete_document(db.pool, None, a_id)
        await step("REST/CLI delete of a document")
    return steps


class _RolledBack(Exception):
    pass


async def wait_for(predicate: Any, timeout: float = 60.0) -> bool:
    """Poll `predicate` until it holds (notifications are debounced and relayed)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.1)
    return bool(predicate())
