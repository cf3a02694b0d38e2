"""Concurrent edits while searching, on a real PostgreSQL.

Writers keep re-ingesting new versions of small documents, two writers (tasks, then two
`pgrag ingest` processes) race on the same paths, and documents are deleted - also while
their new version is being ingested - while readers search, list and read through the
project's own read paths: SearchService, the document services, the MCP tools (core and the
seed-001 `rag` toolset) and the REST API. Every version of a document carries its own
marker word (`alphaV3`) in every sentence, so every chunk names the one version it is from.

The guarantees (SPEC §1 "Nothing lost": readers see the old version or the new one, never
half): no read mixes versions, and none shows a version older than one already committed or
newer than one written; a ready document always has chunks; one row per path; search hits
point to chunks of the version they show; a deleted document reads as a clean NOT_FOUND,
never as a 5xx or an empty success; no ingestion run dies on a concurrent edit; nothing
deadlocks (each test runs under a deadline that fails instead of hanging). A thread checks
the same invariants in raw SQL, one REPEATABLE READ snapshot at a time, with real
parallelism: a version committed in two transactions would show there as a mix or as a
ready document without chunks."""

from __future__ import annotations

import asyncio
import random
import subprocess
from pathlib import Path

import anyio
import pytest

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import IngestEvent, Outcome
from pgrag.search.engine import SearchService
from tests.support.commands import pgrag_cmd
from tests.support.concurrency import (
    CHUNK_TOKENS,
    DEADLINE_S,
    HASH,
    NOT_FOUND,
    WORDS,
    Book,
    HeldEmbedder,
    alongside,
    assert_clean,
    assert_hits_existed,
    checking,
    final_state,
    ingestor,
    mcp_client,
    path_of,
    readers_for,
    record_version,
    rest_client,
    settings,
)

pytestmark = pytest.mark.anyio


async def test_readers_never_see_a_mixed_or_missing_version(dsn: str, tmp_path: Path) -> None:
    """One writer re-ingests new versions of 20 documents, round after round, while readers
    search, list and read them: every read shows one whole version, within the bounds of
    what was committed before it and written by its end."""
    folder = tmp_path / "kb"
    folder.mkdir()
    book = Book()
    paths = [path_of(i) for i in range(len(WORDS))]
    with anyio.fail_after(DEADLINE_S):
        async with (
            open_database(settings(dsn), dsn=dsn, max_size=4) as wdb,
            open_database(settings(dsn), dsn=dsn, max_size=6) as rdb,
            mcp_client(dsn, "core") as core,
            mcp_client(dsn, "rag") as rag,
        ):
            writer = ingestor(wdb)
            for path in paths:
                book.write(folder, path, 1)
            assert_clean(await writer.run([folder]), {p: {Outcome.ADDED} for p in paths})
            for path in paths:
                await record_version(wdb, book, path)
                book.mark(path, live=True)

            async def rounds() -> None:
                for r in range(6):
                    changed = paths[r % 2 :: 2] if r % 3 else paths  # half of them, or all
                    for path in changed:
                        book.write(folder, path, book.written[path] + 1)
                    summary = await writer.run([folder])
                    assert_clean(summary, {p: {Outcome.UPDATED} for p in changed})
                    for path in changed:
                        await record_version(wdb, book, path)
                        assert book.committed[path] == book.written[path]

            svc = SearchService(rdb.pool, HashEmbedder(HASH))
            readers = readers_for(book, paths, svc=svc, db=rdb, core=core, rag=rag)
            async with checking(dsn, book, len(paths)):
                await alongside(rounds(), readers)

    assert_hits_existed(book)
    # the test did what it claims: many reads of every kind, of several versions, meanwhile
    for kind in ("search", "service", "core", "rag", "snapshot"):
        assert book.seen[kind] >= 5, book.seen
    assert len({v for _, v in book.versions_seen}) >= 4, sorted(book.versions_seen)
    assert final_state(dsn, book, len(paths)) == {p: ("ready", book.written[p]) for p in paths}


async def test_two_writers_on_the_same_paths_leave_one_whole_version(
    dsn: str, tmp_path: Path
) -> None:
    """Two writers ingest different contents for the same paths at once (two folders, same
    relative paths, same collection), round after round, first as two tasks with their own
    pools, then as two `pgrag ingest` processes: no run fails, and every path ends as one
    ready row whose chunks, units and content_hash all come from one of the two versions."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    book = Book()
    paths = [path_of(i) for i in range(8)]

    def write_round(r: int) -> tuple[int, int]:
        va, vb = 2 * r + 1, 2 * r + 2  # A's and B's versions in round r
        for path in paths:
            book.write(a, path, va, paragraphs=3 + r % 3)
            book.write(b, path, vb, paragraphs=6 - r % 3)
        return va, vb

    def settle(va: int, vb: int) -> None:
        shown = final_state(dsn, book, len(paths))
        for path in paths:
            status, version = shown[path]
            assert status == "ready" and version in (va, vb), (path, status, version)
            book.committed[path] = version
            book.mark(path, live=True)

    with anyio.fail_after(DEADLINE_S):
        async with (
            open_database(settings(dsn), dsn=dsn, max_size=3) as da,
            open_database(settings(dsn), dsn=dsn, max_size=3) as db_,
            open_database(settings(dsn), dsn=dsn, max_size=4) as rdb,
        ):
            wa, wb = ingestor(da), ingestor(db_)

            async def rounds() -> None:
                for r in range(6):
                    va, vb = write_round(r)
                    sa, sb = await asyncio.gather(wa.run([a]), wb.run([b]))
                    for summary in (sa, sb):
                        assert_clean(summary, {p: {Outcome.ADDED, Outcome.UPDATED} for p in paths})
                    settle(va, vb)

            svc = SearchService(rdb.pool, HashEmbedder(HASH))
            readers = readers_for(book, paths, svc=svc, db=rdb)
            async with checking(dsn, book):
                await alongside(rounds(), readers)

            # the same race between two real processes
            va, vb = write_round(6)
            cli = [
                *("--database-url", dsn, "--embedding-model", HASH),
                *("--chunk-tokens", str(CHUNK_TOKENS), "--chunk-overlap", "0"),
            ]
            procs = [
                subprocess.Popen(
                    pgrag_cmd(*cli, "ingest", "-q", str(folder)),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for folder in (a, b)
            ]
            try:
                async with checking(dsn, book):
                    errors = [await asyncio.to_thread(p.communicate, timeout=120) for p in procs]
            finally:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
            assert [p.returncode for p in procs] == [0, 0], errors
            settle(va, vb)
    assert book.seen["search"] >= 5 and book.seen["snapshot"] >= 5, book.seen


async def test_deleting_documents_while_readers_read(dsn: str, tmp_path: Path) -> None:
    """Documents are deleted one by one - through the REST API (twice at once), the watcher's
    removal and a re-run of the ingestion over a folder they left - and brought back, while
    readers search and read them: a read gets the whole document or a clean NOT_FOUND, a
    deleted document is never found, and no chunk outlives its document."""
    folder = tmp_path / "kb"
    folder.mkdir()
    book = Book()
    paths = [path_of(i) for i in range(len(WORDS))]
    with anyio.fail_after(DEADLINE_S):
        async with (
            open_database(settings(dsn), dsn=dsn, max_size=4) as wdb,
            open_database(settings(dsn), dsn=dsn, max_size=6) as rdb,
            mcp_client(dsn, "core") as core,
            mcp_client(dsn, "rag") as rag,
            rest_client(dsn) as api,
        ):
            writer = ingestor(wdb)
            for path in paths:
                book.write(folder, path, 1)
            await writer.run([folder])
            for path in paths:
                await record_version(wdb, book, path)
                book.mark(path, live=True)

            async def delete(k: int, path: str) -> None:
                book.mark(path, live=False)
                (folder / path).unlink()  # nothing brings it back but the writer below
                if k % 3 == 0:
                    doc_id = book.versions[(path, book.committed[path])][0]
                    twice = await asyncio.gather(
                        api.delete(f"/api/documents/{doc_id}"),
                        api.delete(f"/api/documents/{path}"),
                    )
                    codes = [r.status_code for r in twice]
                    assert set(codes) <= {204, 404} and 204 in codes, [r.text for r in twice]
                elif k % 3 == 1:
                    assert await writer.remove(folder.resolve(), [path]) == [path]
                else:
                    summary = await writer.run([folder])
                    assert_clean(summary, {path: {Outcome.REMOVED}})
                book.mark(path, absent=True)

            async def cycles() -> None:
                rng = random.Random(7)
                for _ in range(2):
                    for k, path in enumerate(rng.sample(paths, len(paths))):
                        await delete(k, path)
                        await asyncio.sleep(0.01)  # let the readers see each deletion
                    assert final_state(dsn, book, 0) == {}
                    for path in paths:  # bring them back, as new rows with a new version
                        book.mark(path, absent=False)
                        book.write(folder, path, book.written[path] + 1)
                    summary = await writer.run([folder])
                    assert_clean(summary, {p: {Outcome.ADDED} for p in paths})
                    for path in paths:
                        await record_version(wdb, book, path)
                        book.mark(path, live=True)

            svc = SearchService(rdb.pool, HashEmbedder(HASH))
            readers = readers_for(book, paths, svc=svc, db=rdb, core=core, rag=rag, api=api)
            async with checking(dsn, book):
                await alongside(cycles(), readers)

    assert_hits_existed(book)
    for kind in ("search", "core", "rag", "rest", "snapshot"):
        assert book.seen[kind] >= 5, book.seen
    assert sum(n for k, n in book.seen.items() if k.endswith("not_found")) >= 5, book.seen
    assert final_state(dsn, book, len(paths)) == {p: ("ready", book.written[p]) for p in paths}


async def test_a_document_deleted_while_it_is_being_ingested(dsn: str, tmp_path: Path) -> None:
    """A document deleted through the REST API while its new version's vectors are being
    computed (its chunks are written, two-phase ingestion): the run goes on with the other
    files and reports that one as NOT_FOUND (no foreign-key error escaping the run),
    nothing of the new version is left behind, and the next run adds the file back whole."""
    folder = tmp_path / "kb"
    folder.mkdir()
    book = Book()
    big, after = path_of(0), path_of(19)  # the walk takes `after` after `big`
    for path in (big, after):
        book.write(folder, path, 1)
    with anyio.fail_after(DEADLINE_S):
        async with (
            open_database(settings(dsn), dsn=dsn, max_size=4) as wdb,
            rest_client(dsn) as api,
        ):
            await ingestor(wdb).run([folder])
            for path in (big, after):
                await record_version(wdb, book, path)
            # v2 of `big` has ~200 chunks; the model is held until the REST call is done,
            # which lands between the version's transaction and its vectors'
            book.write(folder, big, 2, paragraphs=200)
            book.write(folder, after, 2)
            embedding, deleted = asyncio.Event(), asyncio.Event()

            def report(event: IngestEvent) -> None:
                if event.kind == "embed" and event.path == big:
                    embedding.set()

            async def delete_when_embedding() -> None:
                await embedding.wait()
                r = await api.delete(f"/api/documents/{big}")
                assert r.status_code == 204, r.text
                deleted.set()

            writer = ingestor(wdb, batch_size=2, reporter=report)
            writer.provider = HeldEmbedder(deleted)
            async with checking(dsn, book):
                summary, _ = await asyncio.gather(writer.run([folder]), delete_when_embedding())
            results = {r.path: r for r in summary.results}
            assert results[after].outcome == Outcome.UPDATED
            assert (results[big].outcome, results[big].error_code) == (Outcome.FAILED, NOT_FOUND)
            assert set(final_state(dsn, book, 1)) == {after}

            again = await ingestor(wdb).run([folder])
            assert_clean(again, {big: {Outcome.ADDED}})
    assert final_state(dsn, book, 2) == {big: ("ready", 2), after: ("ready", 2)}


async def test_a_cancelled_ingestion_stops_and_leaves_whole_versions(
    dsn: str, tmp_path: Path
) -> None:
    """A run cancelled mid-way (a server stopping its watcher, Ctrl-C, a failure next to it)
    stops at once instead of waiting forever to hand its parse-ahead queue an end mark
    nobody will read, and leaves only whole versions; the next run finishes the job."""
    folder = tmp_path / "kb"
    folder.mkdir()
    book = Book()
    paths = [path_of(i) for i in range(len(WORDS))]
    for path in paths:
        book.write(folder, path, 1)
    with anyio.fail_after(DEADLINE_S):
        async with open_database(settings(dsn), dsn=dsn, max_size=4) as wdb:
            first_done = asyncio.Event()

            def report(event: IngestEvent) -> None:
                if event.kind == "file_done":
                    first_done.set()

            run = asyncio.create_task(ingestor(wdb, reporter=report).run([folder]))
            await first_done.wait()  # the parser is ahead by now: its queue is full
            run.cancel()
            done, _ = await asyncio.wait({run}, timeout=30)
            if not done:  # a second cancel frees it; the test fails either way
                run.cancel()
                await asyncio.wait({run})
            assert done and run.cancelled(), "the cancelled ingestion run did not stop"
            # only whole versions, whatever is there, some perhaps without their vectors
            shown = final_state(dsn, book, embedded_all=False)
            assert 0 < len(shown) < len(paths), shown

            again = await ingestor(wdb).run([folder])
            assert not [r for r in again.results if r.error], again.results
    assert final_state(dsn, book, len(paths)) == dict.fromkeys(paths, ("ready", 1))
