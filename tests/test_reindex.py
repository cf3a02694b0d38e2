"""`pgrag reindex`: a new embedding set is built while searches use the old one, the switch is
atomic, an interrupted run resumes without re-embedding, and the old set can be dropped."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.errors import ErrorCode, InvalidArgument, UpstreamError
from pgrag.ingest.pipeline import Ingestor
from pgrag.ingest.reindex import ReindexEvent, reindex
from pgrag.settings import load_settings
from tests.support.commands import pgrag_cmd

pytestmark = pytest.mark.anyio

NOTES = {
    "harbor.txt": "The harbor master logs every ferry arrival and departure at dawn.",
    "orchard.txt": "Apple orchards need pruning in late winter before the buds swell.",
    "glacier.txt": "Glacier ice records centuries of snowfall in compressed layers.",
    "violin.txt": "A violin bow is strung with horsehair and rosined before playing.",
    "compiler.txt": "The compiler folds constants and inlines small functions early.",
    "volcano.txt": "Basalt forms when volcanic lava cools quickly near the surface.",
    "bakery.txt": "Sourdough bakers feed their starter with flour and water daily.",
}
EXTRA = ("lighthouse.txt", "The lighthouse keeper trims the lamp wick every evening.")

CHUNKS_SQL = "SELECT id, heading, content, content_hash FROM pgrag.chunks ORDER BY id"
SETS_SQL = "SELECT id, model, dimensions, state FROM pgrag.embedding_sets ORDER BY id"
ACTIVE_SQL = "SELECT id, active_set_id FROM pgrag.collections WHERE name = 'c'"
SET_ROWS_SQL = "SELECT count(*), count(DISTINCT chunk_id) FROM pgrag.embeddings WHERE set_id = %s"
INDEX_SQL = "SELECT indexdef FROM pg_indexes WHERE schemaname = 'pgrag' AND indexname = %s"
INSERT_CHUNK_SQL = """
INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content, content_hash, token_count,
                          char_start, char_end)
VALUES (%s, %s, 99, %s, '\\x00'::bytea, 1, 0, 1)
"""
SEMANTIC_SQL = """
SELECT chunk_id FROM pgrag.hybrid_search(NULL, %s::vector, 50, ARRAY[%s]::bigint[])
WHERE semantic_rank IS NOT NULL ORDER BY semantic_rank
"""


class ScriptedEmbedder(HashEmbedder):
    """A hash embedder that logs what it embeds and can fail or pause at a given call."""

    def __init__(
        self, model: str, *, fail_at: int | None = None, pause_at: int | None = None
    ) -> None:
        super().__init__(model)
        self.calls = 0
        self.texts: list[str] = []
        self.fail_at = fail_at
        self.pause_at = pause_at
        self.paused = asyncio.Event()
        self.resume = asyncio.Event()

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_at:
            raise UpstreamError(f"{self.model} went away")
        if self.calls == self.pause_at:
            self.paused.set()
            await self.resume.wait()
        self.texts += texts
        return await super()._embed(texts, is_query=is_query)


def write_notes(folder: Path, notes: dict[str, str]) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in notes.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@contextlib.asynccontextmanager
async def collection_c(dsn: str, folder: Path) -> AsyncIterator[AsyncConnectionPool]:
    """Collection `c` with one chunk per note, embedded by hash/384."""
    async with open_database(load_settings(), dsn=dsn) as db:
        summary = await Ingestor(db.pool, HashEmbedder("hash/384"), collection="c").run([folder])
        assert not summary.failures
        yield db.pool


async def fetch(pool: AsyncConnectionPool, query: str, params: tuple = ()) -> list[tuple]:
    async with pool.connection() as conn:
        return await (await conn.execute(query, params)).fetchall()


async def semantic_hits(pool: AsyncConnectionPool, model: str, text: str) -> list[int]:
    """Chunk ids the semantic leg of pgrag.hybrid_search returns for the text."""
    vector = await HashEmbedder(model).embed_query(text)
    collection_id = (await fetch(pool, ACTIVE_SQL))[0][0]
    return [r[0] for r in await fetch(pool, SEMANTIC_SQL, (vector, collection_id))]


async def sets(pool: AsyncConnectionPool) -> dict[str, tuple[int, int, str]]:
    return {model: (sid, dims, state) for sid, model, dims, state in await fetch(pool, SETS_SQL)}


def chunk_text(heading: str | None, content: str) -> str:
    return f"{heading}\n\n{content}" if heading else content


async def test_reindex_switches_to_a_new_set_that_search_uses(dsn: str, tmp_path: Path) -> None:
    async with collection_c(dsn, write_notes(tmp_path / "kb", NOTES)) as pool:
        chunks = await fetch(pool, CHUNKS_SQL)
        provider = ScriptedEmbedder("hash/128")
        events: list[ReindexEvent] = []
        result = await reindex(pool, "c", provider, batch=3, reporter=events.append)

        by_model = await sets(pool)
        assert by_model["hash/384"][2] == "retired"
        assert by_model["hash/128"] == (result.set_id, 128, "active")
        assert (await fetch(pool, ACTIVE_SQL))[0][1] == result.set_id
        assert await fetch(pool, SET_ROWS_SQL, (result.set_id,)) == [(len(chunks), len(chunks))]
        old_rows = await fetch(pool, SET_ROWS_SQL, (by_model["hash/384"][0],))
        assert old_rows == [(len(chunks), len(chunks))]  # retired, not deleted
        assert (result.switched, result.chunks, result.embedded) == (True, len(chunks), len(chunks))
        assert result.previous_model == "hash/384" and result.dropped_set_ids == ()

        # the model saw exactly what ingestion embeds: heading + blank line + content
        embedded = {hashlib.sha256(t.encode()).digest() for t in provider.texts}
        assert embedded == {bytes(c[3]) for c in chunks}
        assert events[0].kind == "start" and events[-1].kind == "switch"
        assert events[-1].done == events[-1].total == len(chunks)

        heading, content = chunks[2][1], chunks[2][2]
        hits = await semantic_hits(pool, "hash/128", chunk_text(heading, content))
        assert hits[0] == chunks[2][0] and len(hits) == len(chunks)
        assert await semantic_hits(pool, "hash/384", content) == []


async def test_searches_use_the_old_set_until_the_switch(dsn: str, tmp_path: Path) -> None:
    folder = write_notes(tmp_path / "kb", NOTES)
    async with collection_c(dsn, folder) as pool:
        old_set = (await fetch(pool, ACTIVE_SQL))[0][1]
        provider = ScriptedEmbedder("hash/128", pause_at=3)
        task = asyncio.create_task(reindex(pool, "c", provider, batch=2))
        await asyncio.wait_for(provider.paused.wait(), 60)

        # mid-build: 2 batches are in the building set, searches still use hash/384
        building = (await sets(pool))["hash/128"]
        assert building[2] == "building"
        assert await fetch(pool, SET_ROWS_SQL, (building[0],)) == [(4, 4)]
        assert (await fetch(pool, ACTIVE_SQL))[0][1] == old_set
        assert len(await semantic_hits(pool, "hash/384", NOTES["violin.txt"])) == len(NOTES)
        assert await semantic_hits(pool, "hash/128", NOTES["violin.txt"]) == []

        # a document ingested meanwhile (with the old model) is embedded before the switch
        write_notes(folder, dict([EXTRA]))
        summary = await Ingestor(pool, HashEmbedder("hash/384"), collection="c").run([folder])
        assert summary.count("added") == 1

        provider.resume.set()
        result = await asyncio.wait_for(task, 120)
        assert result.switched and result.chunks == len(NOTES) + 1
        assert await fetch(pool, SET_ROWS_SQL, (result.set_id,)) == [(len(NOTES) + 1,) * 2]
        assert any(EXTRA[1] in t for t in provider.texts)
        assert await semantic_hits(pool, "hash/384", NOTES["violin.txt"]) == []


async def test_the_switch_waits_for_a_document_write_and_embeds_it(
    dsn: str, tmp_path: Path
) -> None:
    """A chunk committed after the last catch-up pass is still in the new set when searches
    switch to it: the switch locks the collection row and embeds it in the same transaction."""
    async with collection_c(dsn, write_notes(tmp_path / "kb", NOTES)) as pool:
        doc, cid = (await fetch(pool, "SELECT document_id, collection_id FROM pgrag.chunks"))[0]
        writer = await psycopg.AsyncConnection.connect(dsn)
        try:
            await writer.execute(INSERT_CHUNK_SQL, (doc, cid, "a late chunk about tides"))
            provider = ScriptedEmbedder("hash/128")
            task = asyncio.create_task(reindex(pool, "c", provider))
            await _until_waiting_or_done(pool, task)
            await writer.commit()
        finally:
            await writer.close()
        result = await asyncio.wait_for(task, 120)
        assert result.chunks == len(NOTES) + 1
        assert await fetch(pool, SET_ROWS_SQL, (result.set_id,)) == [(len(NOTES) + 1,) * 2]
        assert "a late chunk about tides" in provider.texts


async def test_an_ingester_still_on_the_old_model_writes_nothing_after_the_switch(
    dsn: str, tmp_path: Path
) -> None:
    """An ingestion still embedding a file with the old model when a reindex switches the
    collection writes no vector into the retired set (invisible to searches). Its chunks
    were written before (two-phase ingestion), so the reindex embedded them into the new
    set: the file ends added, nothing waits, and every chunk of the collection has a
    vector in the active set."""
    folder = write_notes(tmp_path / "kb", NOTES)
    async with collection_c(dsn, folder) as pool:
        write_notes(folder, dict([EXTRA]))
        old_model = ScriptedEmbedder("hash/384", pause_at=1)
        ingesting = asyncio.create_task(Ingestor(pool, old_model, collection="c").run([folder]))
        await asyncio.wait_for(old_model.paused.wait(), 60)  # the new file is being embedded
        result = await reindex(pool, "c", ScriptedEmbedder("hash/128"))
        assert result.switched
        old_model.resume.set()
        summary = await asyncio.wait_for(ingesting, 120)

        added = [r for r in summary.results if r.path == EXTRA[0]]
        assert added and added[0].outcome == "added" and not added[0].error, summary.results
        assert added[0].vectors_pending == 0
        status = await fetch(
            pool,
            "SELECT status, error_detail, vectors_pending FROM pgrag.documents WHERE name = %s",
            (EXTRA[0],),
        )
        assert status == [("ready", None, 0)]
        contents = [c[2] for c in await fetch(pool, CHUNKS_SQL)]
        assert any(EXTRA[1] in c for c in contents)
        chunk_count = len(contents)
        assert await fetch(pool, SET_ROWS_SQL, (result.set_id,)) == [(chunk_count, chunk_count)]
        # the old model's vectors of the new file went nowhere
        retired = await fetch(
            pool,
            "SELECT count(*) FROM pgrag.embeddings e JOIN pgrag.chunks c ON c.id = e.chunk_id"
            " WHERE e.set_id = %s AND c.content LIKE %s",
            (result.previous_set_id, f"%{EXTRA[1]}%"),
        )
        assert retired == [(0,)]


async def test_an_interrupted_reindex_resumes_where_it_stopped(dsn: str, tmp_path: Path) -> None:
    async with collection_c(dsn, write_notes(tmp_path / "kb", NOTES)) as pool:
        old_set = (await fetch(pool, ACTIVE_SQL))[0][1]
        failing = ScriptedEmbedder("hash/128", fail_at=3)
        with pytest.raises(UpstreamError):
            await reindex(pool, "c", failing, batch=2)
        building = (await sets(pool))["hash/128"]
        assert building[2] == "building"
        assert await fetch(pool, SET_ROWS_SQL, (building[0],)) == [(4, 4)]
        assert (await fetch(pool, ACTIVE_SQL))[0][1] == old_set

        second = ScriptedEmbedder("hash/128")
        result = await reindex(pool, "c", second, batch=2)
        assert result.set_id == building[0] and result.switched
        assert result.resumed == 4 and result.chunks == len(NOTES)
        assert len(second.texts) == len(NOTES) - 4  # only the chunks the first run missed
        assert not set(second.texts) & set(failing.texts)
        assert (await fetch(pool, ACTIVE_SQL))[0][1] == result.set_id


async def test_drop_old_removes_the_old_rows_and_index(dsn: str, tmp_path: Path) -> None:
    async with collection_c(dsn, write_notes(tmp_path / "kb", NOTES)) as pool:
        old_set = (await fetch(pool, ACTIVE_SQL))[0][1]
        assert await fetch(pool, INDEX_SQL, (f"embeddings_hnsw_{old_set}",))
        result = await reindex(pool, "c", HashEmbedder("hash/128"), drop_old=True)

        assert result.dropped_set_ids == (old_set,)
        assert list(await sets(pool)) == ["hash/128"]
        assert await fetch(pool, SET_ROWS_SQL, (old_set,)) == [(0, 0)]
        assert await fetch(pool, INDEX_SQL, (f"embeddings_hnsw_{old_set}",)) == []
        assert await fetch(pool, INDEX_SQL, (f"embeddings_hnsw_{result.set_id}",))
        assert len(await semantic_hits(pool, "hash/128", NOTES["bakery.txt"])) == len(NOTES)


async def test_back_to_a_retired_model_reuses_its_vectors(dsn: str, tmp_path: Path) -> None:
    async with collection_c(dsn, write_notes(tmp_path / "kb", NOTES)) as pool:
        first = await reindex(pool, "c", HashEmbedder("hash/128"))
        back = ScriptedEmbedder("hash/384")
        result = await reindex(pool, "c", back, drop_old=True)
        assert result.previous_set_id == first.set_id
        assert result.resumed == len(NOTES) and back.texts == []
        assert list(await sets(pool)) == ["hash/384"]
        assert len(await semantic_hits(pool, "hash/384", NOTES["orchard.txt"])) == len(NOTES)


async def test_over_2000_dimensions_uses_a_halfvec_index(dsn: str, tmp_path: Path) -> None:
    async with collection_c(dsn, write_notes(tmp_path / "kb", NOTES)) as pool:
        result = await reindex(pool, "c", HashEmbedder("hash/3072"))
        [(indexdef,)] = await fetch(pool, INDEX_SQL, (f"embeddings_hnsw_{result.set_id}",))
        assert "halfvec(3072)" in indexdef and "halfvec_cosine_ops" in indexdef
        chunks = await fetch(pool, CHUNKS_SQL)
        assert await fetch(pool, SET_ROWS_SQL, (result.set_id,)) == [(len(chunks),) * 2]
        hits = await semantic_hits(pool, "hash/3072", chunk_text(chunks[4][1], chunks[4][2]))
        assert hits[0] == chunks[4][0] and len(hits) == len(chunks)


async def test_reindex_to_the_active_model_is_refused(dsn: str, tmp_path: Path) -> None:
    async with collection_c(dsn, write_notes(tmp_path / "kb", NOTES)) as pool:
        before = await sets(pool)
        with pytest.raises(InvalidArgument) as info:
            await reindex(pool, "c", HashEmbedder("hash/384"), drop_old=True)
        assert info.value.code == ErrorCode.INVALID_ARGUMENT
        assert "already embedded with hash/384" in info.value.message
        assert await sets(pool) == before


async def test_drop_waits_for_a_concurrent_reingestion_instead_of_deadlocking(
    dsn: str, tmp_path: Path
) -> None:
    """A document being re-written holds its old embeddings' rows and then needs the
    collection row; dropping the old set must not hold the collection row meanwhile."""
    async with collection_c(dsn, write_notes(tmp_path / "kb", NOTES)) as pool:
        doc, cid = (await fetch(pool, "SELECT document_id, collection_id FROM pgrag.chunks"))[0]
        provider = ScriptedEmbedder("hash/128", pause_at=1)  # its set and index exist by then
        task = asyncio.create_task(reindex(pool, "c", provider, drop_old=True))
        await asyncio.wait_for(provider.paused.wait(), 60)
        writer = await psycopg.AsyncConnection.connect(dsn)
        try:
            await writer.execute("DELETE FROM pgrag.chunks WHERE document_id = %s", (doc,))
            provider.resume.set()
            await _until_waiting_or_done(pool, task)
            await writer.execute(INSERT_CHUNK_SQL, (doc, cid, "the rewritten version"))
            await writer.commit()
        finally:
            await writer.close()
        result = await asyncio.wait_for(task, 120)
        assert result.switched and len(result.dropped_set_ids) == 1
        assert list(await sets(pool)) == ["hash/128"]


async def _until_waiting_or_done(pool: AsyncConnectionPool, task: asyncio.Task) -> None:
    waiting = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    )
    async with asyncio.timeout(60):
        while not task.done() and not (await fetch(pool, waiting))[0][0]:
            await asyncio.sleep(0.05)


def test_cli_reindexes_end_to_end(dsn: str, tmp_path: Path) -> None:
    async def setup() -> None:
        async with collection_c(dsn, write_notes(tmp_path / "kb", NOTES)):
            pass

    asyncio.run(setup())
    proc = subprocess.run(
        pgrag_cmd("--database-url", dsn, "reindex", "-c", "c", "-m", "hash/128", "--drop-old"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "hash/128 (128 dimensions)" in proc.stdout
    assert "PGRAG_EMBEDDING_MODEL=hash/128" in proc.stderr
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT es.model, es.state, count(e.chunk_id) FROM pgrag.embedding_sets es"
            " LEFT JOIN pgrag.embeddings e ON e.set_id = es.id GROUP BY es.id"
        ).fetchall()
    assert rows == [("hash/128", "active", len(NOTES))]
