"""Watch mode on a real folder and database: creations, edits, renames and deletions are
picked up, ignored files stay out, and a file still being written is read once it settles."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor, IngestSummary, Outcome
from pgrag.ingest.watch import DEBOUNCE_MS, WAKE_MS, watch_and_ingest
from pgrag.settings import load_settings

pytestmark = pytest.mark.anyio

HASH = "hash/384"
WAIT_S = 10.0


class Watcher:
    """A running `watch_and_ingest` task and the summaries it reported."""

    def __init__(self, dsn: str, folder: Path) -> None:
        self.dsn = dsn
        self.folder = folder
        self.summaries: list[IngestSummary] = []

    def outcomes(self, path: str) -> list[Outcome]:
        return [r.outcome for s in self.summaries for r in s.results if r.path == path]

    async def rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            return await (await conn.execute(sql, params)).fetchall()

    async def document(self, path: str) -> tuple[Any, ...] | None:
        """(id, status, all chunk text) of a document, or None."""
        rows = await self.rows(
            "SELECT d.id, d.status, coalesce(string_agg(c.content, ' ' ORDER BY c.ordinal), '')"
            " FROM pgrag.documents d LEFT JOIN pgrag.chunks c ON c.document_id = d.id"
            " WHERE d.path = %s GROUP BY d.id",
            (path,),
        )
        return rows[0] if rows else None

    async def until(self, check: Callable[[], Awaitable[bool]], what: str) -> None:
        """Poll the database until `check` holds (the watcher works in the background)."""
        with anyio_fail_after(WAIT_S, what):
            while not await check():
                await asyncio.sleep(0.1)

    async def until_ready(self, path: str, text: str) -> tuple[Any, ...]:
        async def ready() -> bool:
            doc = await self.document(path)
            return doc is not None and doc[1] == "ready" and text in doc[2]

        await self.until(ready, f"{path} ready with {text!r}")
        doc = await self.document(path)
        assert doc is not None
        return doc

    async def until_gone(self, path: str) -> None:
        async def gone() -> bool:
            return await self.document(path) is None

        await self.until(gone, f"{path} removed")


@contextlib.contextmanager
def anyio_fail_after(seconds: float, what: str) -> Iterator[None]:
    try:
        with anyio.fail_after(seconds):
            yield
    except TimeoutError:
        pytest.fail(f"watch mode did not get there in {seconds:.0f}s: {what}")


@contextlib.asynccontextmanager
async def watching(
    dsn: str, folder: Path, pause: float = WAKE_MS / 1000 + 0.5
) -> AsyncIterator[Watcher]:
    """Run the watcher for the duration of the block, then stop it with its stop event.
    After `pause` its first scan (once the OS watch exists, <= WAKE_MS) is done: the test's
    changes arrive as events."""
    watcher = Watcher(dsn, folder)
    stop = asyncio.Event()
    async with open_database(load_settings(embedding_model=HASH), dsn=dsn, max_size=4) as db:
        ingestor = Ingestor(db.pool, HashEmbedder(HASH), collection="watched")
        await ingestor.collection()
        task = asyncio.create_task(
            watch_and_ingest(
                ingestor, [folder], on_summary=watcher.summaries.append, stop_event=stop
            )
        )
        await asyncio.sleep(pause)
        try:
            yield watcher
        finally:
            stop.set()
            with anyio.fail_after(WAIT_S):
                await task  # returns by itself once the stop event is set
    assert task.done() and task.exception() is None


async def test_watch_follows_create_edit_rename_and_delete(dsn: str, tmp_path: Path) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    async with watching(dsn, folder) as w:
        (folder / "memo.md").write_text("# Memo\n\nThe quarterly memo draft.", encoding="utf-8")
        doc_id, *_ = await w.until_ready("memo.md", "quarterly memo draft")
        assert w.outcomes("memo.md") == [Outcome.ADDED]

        (folder / "memo.md").write_text("# Memo\n\nThe final zanzibar memo.", encoding="utf-8")
        edited = await w.until_ready("memo.md", "final zanzibar memo")
        assert edited[0] == doc_id and "draft" not in edited[2]

        (folder / "archive").mkdir()
        (folder / "memo.md").rename(folder / "archive" / "memo-2024.md")
        await w.until_ready("archive/memo-2024.md", "final zanzibar memo")
        await w.until_gone("memo.md")

        (folder / "archive" / "memo-2024.md").unlink()
        await w.until_gone("archive/memo-2024.md")
        assert await w.rows("SELECT count(*) FROM pgrag.chunks") == [(0,)]
        assert Outcome.REMOVED in w.outcomes("archive/memo-2024.md")


async def test_a_file_written_before_the_watch_is_in_place_is_not_missed(
    dsn: str, tmp_path: Path
) -> None:
    """`serve --watch` and `ingest --watch` ingest first, then watch: a file written in
    between raises no event the watcher could see; its first scan finds it."""
    folder = tmp_path / "watched"
    folder.mkdir()
    (folder / "early.txt").write_text("Written before watching.", encoding="utf-8")
    async with watching(dsn, folder, pause=0) as w:
        await w.until_ready("early.txt", "Written before watching.")
        (folder / "late.txt").write_text("Written later.", encoding="utf-8")
        await w.until_ready("late.txt", "Written later.")
        assert w.outcomes("early.txt") == [Outcome.ADDED]


async def test_watch_skips_ignored_files(dsn: str, tmp_path: Path) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    (folder / ".pgragignore").write_text("private/\n", encoding="utf-8")
    async with watching(dsn, folder) as w:
        (folder / "~$lock.docx").write_bytes(b"\x00owner lock")
        (folder / "private").mkdir()
        (folder / "private" / "secret.txt").write_text("Do not index.", encoding="utf-8")
        (folder / ".hidden.txt").write_text("Hidden.", encoding="utf-8")
        (folder / "public.txt").write_text("Public notes.", encoding="utf-8")
        await w.until_ready("public.txt", "Public notes.")
        await asyncio.sleep(DEBOUNCE_MS / 1000 + 0.3)  # any later batch would have landed
    paths = await w.rows("SELECT path FROM pgrag.documents")
    assert paths == [("public.txt",)]


async def test_a_file_written_in_pieces_is_ingested_once_complete(dsn: str, tmp_path: Path) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    pieces = [f"Part {i} of the long report about harbour logistics.\n\n" for i in range(5)]
    pause = DEBOUNCE_MS / 1000 / 3  # well inside the debounce window
    async with watching(dsn, folder) as w:
        with (folder / "report.txt").open("w", encoding="utf-8") as out:
            for piece in pieces:
                out.write(piece)
                out.flush()
                await asyncio.sleep(pause)
        doc = await w.until_ready("report.txt", "Part 4 of the long report")
        assert all(p.strip() in doc[2] for p in pieces)
        await asyncio.sleep(DEBOUNCE_MS / 1000 + 0.3)
    # the pauses were shorter than the debounce: the half-written file was never stored
    written = [o for o in w.outcomes("report.txt") if o != Outcome.UNCHANGED]
    assert written == [Outcome.ADDED]


async def test_a_file_replaced_by_delete_and_recreate_stays_ingested(
    dsn: str, tmp_path: Path
) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    (folder / "plan.md").write_text("# Plan\n\nFirst plan.", encoding="utf-8")
    async with watching(dsn, folder) as w:
        (folder / "plan.md").write_text("# Plan\n\nSecond plan.", encoding="utf-8")
        doc_id, *_ = await w.until_ready("plan.md", "Second plan.")
        # how some editors save: the old file goes away and a new one takes its name
        (folder / "plan.md").unlink()
        (folder / "plan.md").write_text(
            "# Plan\n\nThird plan, saved by replacing.", encoding="utf-8"
        )
        await w.until_ready("plan.md", "Third plan")
        await asyncio.sleep(DEBOUNCE_MS / 1000 + 0.3)
        doc = await w.document("plan.md")
    assert doc is not None and doc[1] == "ready" and "Third plan" in doc[2]
    assert doc[0] == doc_id


async def test_folders_moved_in_and_out_are_ingested_and_dropped(dsn: str, tmp_path: Path) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "a.txt").write_text("Alpha moved in.", encoding="utf-8")
    (outside / "deep" / "b.md").write_text("# Beta\n\nBeta moved in.", encoding="utf-8")
    async with watching(dsn, folder) as w:
        outside.rename(folder / "project")  # one event, for the folder only
        await w.until_ready("project/a.txt", "Alpha moved in.")
        await w.until_ready("project/deep/b.md", "Beta moved in.")

        (folder / "project").rename(tmp_path / "gone")
        await w.until_gone("project/a.txt")
        await w.until_gone("project/deep/b.md")
    assert await w.rows("SELECT count(*) FROM pgrag.documents") == [(0,)]
