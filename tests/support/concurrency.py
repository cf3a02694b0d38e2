"""Helpers and fixtures of tests/test_concurrency*.py."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import random
import re
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from mcp import Client

from pgrag.db.database import Database
from pgrag.db.scope import scoped_connection
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.errors import PgragError
from pgrag.http.app import create_app
from pgrag.ingest.pipeline import Ingestor, IngestSummary, Outcome
from pgrag.mcp.server import build_server
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.services import documents as docs
from pgrag.settings import Settings, load_settings
from pgrag.store import catalog, pages

HASH = "hash/384"


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]


WORDS += ["juliett", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo"]


WORDS += ["sierra", "tango"]  # one distinctive word per document


COMMON = "ledger"  # in every document, so one search returns many of them


CHUNK_TOKENS = 32  # the smallest allowed: a handful of chunks per small document


MARKER = re.compile(r"\b([a-z]+)V(\d+)\b")


DEADLINE_S = 150  # generous: only a hang (deadlock, lost wake-up) gets anywhere near it


NOT_FOUND = "NOT_FOUND"


PROCESSING = "PROCESSING"  # a document whose new version is being ingested may say so


def path_of(i: int) -> str:
    return f"doc_{i:02d}.txt"


def word_of(path: str) -> str:
    return WORDS[int(path[4:6])]


def body(path: str, version: int, paragraphs: int | None = None) -> str:
    """Version `version` of a document: every sentence carries the marker, and the number of
    paragraphs (so of chunks) changes from one version to the next."""
    word, mark = word_of(path), f"{word_of(path)}V{version}"
    count = paragraphs or 3 + (version + int(path[4:6])) % 4
    return "\n\n".join(
        f"The {word} {COMMON} entry {n} records {mark} for the audit. It keeps {mark} in view."
        for n in range(count)
    )


def version_in(path: str, texts: list[str]) -> int:
    """The one version all these texts show: every text has a marker, all markers agree and
    belong to this document."""
    assert texts and all(MARKER.search(t) for t in texts), f"{path}: a text without a marker"
    found = {(m[1], int(m[2])) for t in texts for m in MARKER.finditer(t)}
    assert len(found) == 1, f"{path}: one read mixes versions {sorted(found)}"
    word, version = found.pop()
    assert word == word_of(path), f"{path}: shows the text of '{word}'"
    return version


@dataclass(frozen=True)
class Before:
    """The book as a read started."""

    committed: dict[str, int]
    live: set[str]
    absent: set[str]
    changes: Counter[str]


@dataclass
class Book:
    """What the writers put on disk, what is known committed and what is known deleted: the
    bounds every read is checked against; and what the readers saw."""

    written: dict[str, int] = field(default_factory=dict)  # raised before a file changes
    committed: dict[str, int] = field(default_factory=dict)  # raised after the run returns
    hashes: dict[tuple[str, int], str] = field(default_factory=dict)
    versions: dict[tuple[str, int], tuple[str, set[int]]] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)  # committed, and no deletion under way
    absent: set[str] = field(default_factory=set)  # deleted, and not being brought back
    changes: Counter[str] = field(default_factory=Counter)  # of `live` and `absent`, per path
    hits: list[tuple[str, int, int, str]] = field(default_factory=list)
    seen: Counter[str] = field(default_factory=Counter)  # reads by kind, for sanity checks
    versions_seen: set[tuple[str, int]] = field(default_factory=set)

    def write(self, folder: Path, path: str, version: int, paragraphs: int | None = None) -> None:
        data = body(path, version, paragraphs).encode()
        self.hashes[(path, version)] = hashlib.sha256(data).hexdigest()
        self.written[path] = max(self.written.get(path, 0), version)
        (folder / path).write_bytes(data)

    def mark(self, path: str, *, live: bool | None = None, absent: bool | None = None) -> None:
        for flag, paths in ((live, self.live), (absent, self.absent)):
            if flag is not None:
                (paths.add if flag else paths.discard)(path)
        self.changes[path] += 1

    def before(self) -> Before:
        return Before(dict(self.committed), set(self.live), set(self.absent), +self.changes)

    def present_throughout(self, path: str, before: Before) -> bool:
        """Committed before the read started, and no deletion began until it ended."""
        return path in before.live and before.changes[path] == self.changes[path]

    def gone_throughout(self, path: str, before: Before) -> bool:
        """Deleted before the read started, and not brought back until it ended."""
        return path in before.absent and before.changes[path] == self.changes[path]

    def check(self, path: str, version: int, lo: dict[str, int], hi: dict[str, int]) -> None:
        """A read that started after `lo` was committed and ended before anything past `hi`
        was written shows a version in between."""
        assert lo.get(path, 0) <= version <= hi.get(path, 0), (
            f"{path}: saw version {version}, committed {lo.get(path)} before the read, "
            f"written {hi.get(path)} when it ended"
        )
        self.versions_seen.add((path, version))


def settings(dsn: str, **overrides: Any) -> Settings:
    return load_settings(database_url=dsn, embedding_model=HASH, **overrides)


class HeldEmbedder(HashEmbedder):
    """Embeds passages once `free` is set (queries at once)."""

    def __init__(self, free: asyncio.Event) -> None:
        super().__init__(HASH, batch_size=2)
        self.free = free

    async def embed_passages(self, texts: list[str]) -> Any:
        await self.free.wait()
        return await super().embed_passages(texts)


def ingestor(db: Database, **options: Any) -> Ingestor:
    provider = HashEmbedder(HASH, batch_size=options.pop("batch_size", 256))
    return Ingestor(db.pool, provider, chunk_tokens=CHUNK_TOKENS, chunk_overlap=0, **options)


@contextlib.asynccontextmanager
async def mcp_client(dsn: str, toolsets: str) -> AsyncIterator[Client]:
    async with Client(build_server(settings(dsn, toolsets=toolsets)), raise_exceptions=True) as c:
        yield c


@contextlib.asynccontextmanager
async def rest_client(dsn: str) -> AsyncIterator[httpx.AsyncClient]:
    """The REST app in this process (its own pool), writable so DELETE is allowed."""
    app = create_app(settings(dsn, toolsets="core,write", read_only=False))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=60) as c,
    ):
        yield c


async def tool(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A tool's data (pgrag envelope or seed-001 shape); an error comes back as its code."""
    result = await client.call_tool(name, args)
    body = result.structured_content
    assert body is not None
    if result.is_error:
        if "error" in body:
            return {"error": body["error"]["code"], "message": body["error"]["message"]}
        return {"error": body["errorCode"], "message": body["errorMessage"]}
    return body["data"] if "ok" in body else body  # type: ignore[no-any-return]


async def record_version(db: Database, book: Book, path: str) -> None:
    """After a commit nobody races with: the version a path now shows, its chunk ids."""
    async with db.pool.connection() as conn:
        doc = await docs.resolve(conn, path, None)
        rows = await catalog.chunks(conn, doc.id, after=0, limit=2000)
    version = version_in(path, [r["content"] for r in rows])
    book.versions[(path, version)] = (doc.id, {r["chunk_id"] for r in rows})
    book.committed[path] = version


def assert_clean(summary: IngestSummary, expected: dict[str, set[Outcome]]) -> None:
    """No file ended with an error, and the files expected to change did."""
    errors = [(r.path, r.error_code, r.error) for r in summary.results if r.error]
    assert not errors, errors
    got = {r.path: r.outcome for r in summary.results if r.outcome != Outcome.UNCHANGED}
    assert set(got) == set(expected), got
    for path, outcome in got.items():
        assert outcome in expected[path], (path, outcome)


def assert_hits_existed(book: Book) -> None:
    """Every search hit pointed to a chunk of the version (and document row) it showed."""
    assert book.hits
    for path, version, chunk_id, document_id in book.hits:
        doc_id, chunk_ids = book.versions[(path, version)]
        assert document_id == doc_id, f"{path}: hit on another document row"
        assert chunk_id in chunk_ids, f"{path}: chunk {chunk_id} is not one of v{version}'s"


SNAPSHOT_SQL = r"""
SELECT d.path, d.status, d.content_hash,
       (SELECT count(*) FROM pgrag.chunks c WHERE c.document_id = d.id),
       (SELECT count(*) FROM pgrag.embeddings e JOIN pgrag.chunks c ON c.id = e.chunk_id
         WHERE c.document_id = d.id),
       (SELECT array_agg(DISTINCT m[1] ORDER BY m[1]) FROM pgrag.chunks c,
               regexp_matches(c.content, '([a-z]+V[0-9]+)', 'g') AS m WHERE c.document_id = d.id),
       (SELECT array_agg(DISTINCT m[1] ORDER BY m[1]) FROM pgrag.units u,
               regexp_matches(u.body, '([a-z]+V[0-9]+)', 'g') AS m WHERE u.document_id = d.id),
       (SELECT count(*) FROM pgrag.chunks c
         WHERE c.document_id = d.id AND c.content !~ '[a-z]+V[0-9]+'),
       d.vectors_pending
FROM pgrag.documents d
"""


ORPHANS_SQL = """
SELECT (SELECT count(*) FROM pgrag.chunks c
         WHERE NOT EXISTS (SELECT 1 FROM pgrag.documents d WHERE d.id = c.document_id)),
       (SELECT count(*) FROM pgrag.units u
         WHERE NOT EXISTS (SELECT 1 FROM pgrag.documents d WHERE d.id = u.document_id)),
       (SELECT count(*) FROM pgrag.embeddings e
         WHERE NOT EXISTS (SELECT 1 FROM pgrag.chunks c WHERE c.id = e.chunk_id))
"""


def check_snapshot(
    conn: psycopg.Connection[Any], book: Book, expect_docs: int | None, *, embedded_all: bool
) -> dict[str, tuple[str, int]]:
    """The invariants of one snapshot, in raw SQL; path -> (status, version shown). A
    version's chunks commit before their vectors (two-phase ingestion): each chunk has its
    embedding or is counted in the document's vectors_pending; `embedded_all`: every one
    has its embedding (no run is under way)."""
    with conn.transaction():
        rows = conn.execute(SNAPSHOT_SQL).fetchall()
        orphans = conn.execute(ORPHANS_SQL).fetchone()
    paths = [r[0] for r in rows]
    assert len(paths) == len(set(paths)), f"duplicate documents: {sorted(paths)}"
    if expect_docs is not None:
        assert len(paths) == expect_docs, sorted(paths)
    assert orphans == (0, 0, 0), f"orphan chunks, units, embeddings: {orphans}"
    shown: dict[str, tuple[str, int]] = {}
    for (
        path,
        status,
        content_hash,
        chunks,
        embedded,
        chunk_marks,
        unit_marks,
        bare,
        pending,
    ) in rows:
        assert status in ("ready", "processing"), (path, status)
        if status == "ready":
            assert chunks > 0, f"{path}: ready with no chunks"
        if chunks == 0:  # a new document before its first version
            continue
        assert bare == 0, f"{path}: {bare} chunks without a version marker"
        assert embedded + pending == chunks, (
            f"{path}: {chunks - embedded} chunks, {pending} pending"
        )
        if embedded_all:
            assert pending == 0, f"{path}: {pending} chunks without an embedding"
        assert chunk_marks is not None and len(chunk_marks) == 1, f"{path}: mix {chunk_marks}"
        assert unit_marks == chunk_marks, f"{path}: units {unit_marks}, chunks {chunk_marks}"
        version = version_in(path, chunk_marks)
        assert book.hashes[(path, version)] == content_hash, (
            f"{path}: the row's content_hash is not that of v{version}, which its chunks show"
        )
        shown[path] = (status, version)
    return shown


def snapshot_checker(dsn: str, book: Book, stop: threading.Event, expect: int | None) -> None:
    """In its own thread and connection: runs truly in parallel with the writers."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        while not stop.is_set():
            check_snapshot(conn, book, expect, embedded_all=False)
            book.seen["snapshot"] += 1


@contextlib.asynccontextmanager
async def checking(dsn: str, book: Book, expect: int | None = None) -> AsyncIterator[None]:
    """The snapshot checker runs for the duration of the block; its failure fails it."""
    stop = threading.Event()
    task = asyncio.create_task(asyncio.to_thread(snapshot_checker, dsn, book, stop, expect))
    try:
        yield
    finally:
        stop.set()
        await asyncio.shield(task)


async def alongside(work: Awaitable[None], readers: list[Callable[[], Awaitable[None]]]) -> None:
    """`work`, with every reader looping beside it until it ends; any failure fails it."""
    stop = asyncio.Event()

    async def main() -> None:
        try:
            await work
        finally:
            stop.set()

    async def loop(read: Callable[[], Awaitable[None]]) -> None:
        while not stop.is_set():
            await read()
            await asyncio.sleep(0)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(main())
        for read in readers:
            tg.create_task(loop(read))


async def search_reader(
    svc: SearchService, book: Book, rng: random.Random, paths: list[str]
) -> None:
    """SearchService, keyword and hybrid, whole chunk text: each hit shows one version, of
    its own document; a document that exists is found; a deleted one is not."""
    path = rng.choice(paths)
    query = rng.choice([word_of(path), COMMON, f"{word_of(path)} {COMMON}"])
    before = book.before()
    page = await svc.search(
        SearchRequest(
            query=query,
            mode=rng.choice(["keyword", "hybrid"]),
            limit=20,
            content_mode="full",
            max_tokens=25000,
        )
    )
    hi = dict(book.written)
    results = page.data.results
    if query == word_of(path) and book.present_throughout(path, before):
        # it existed all along, as one version or another: the page cannot be empty
        assert results, f"nothing found for {query!r} (total_matches {page.data.total_matches})"
    for hit in results:
        assert not book.gone_throughout(hit.path, before), f"{hit.path}: found after deletion"
        assert hit.content is not None
        version = version_in(hit.path, [hit.content])
        book.check(hit.path, version, before.committed, hi)
        book.hits.append((hit.path, version, hit.chunk_id, hit.document_id))
    book.seen["search"] += 1


async def service_reader(db: Database, book: Book, rng: random.Random, paths: list[str]) -> None:
    """The reads the document services are built on, on one connection: the listing has
    one row per path, and a ready document's text and chunks show one whole version."""
    path = rng.choice(paths)
    before = book.before()
    async with scoped_connection(db.pool, None) as conn:  # one snapshot, as the tools use
        listed = await catalog.documents(
            conn, None, folder=None, file_type=None, status=None, offset=0, limit=500
        )
        names = [r["path"] for r in listed]
        assert len(names) == len(set(names)), f"duplicate documents: {sorted(names)}"
        if all(book.present_throughout(p, before) for p in paths):
            assert sorted(names) == paths
        try:
            doc = await docs.resolve(conn, path, None)
        except PgragError as exc:
            clean_error(book, path, before, str(exc.code), "service")
            return
        assert not book.gone_throughout(path, before), f"{path}: resolved after deletion"
        if doc.row.status != "ready":
            clean_error(book, path, before, PROCESSING, "service")
            return
        rows = await catalog.chunks(conn, doc.id, after=0, limit=2000)
        text = await pages.extracted_text(conn, doc.id)
    hi = dict(book.written)
    assert [r["ordinal"] for r in rows] == list(range(1, len(rows) + 1)), f"{path}: gaps"
    version = version_in(path, [text, *(r["content"] for r in rows)])
    book.check(path, version, before.committed, hi)
    book.seen["service"] += 1


def clean_error(book: Book, path: str, before: Before, code: str, kind: str) -> None:
    """A read may fail only with NOT_FOUND for a deleted document or PROCESSING for one being
    (re-)ingested; a document deleted before the read and not back yet must be NOT_FOUND."""
    assert code in (NOT_FOUND, PROCESSING), (path, code)
    if code == NOT_FOUND:
        assert not book.present_throughout(path, before), f"{path}: NOT_FOUND, but it exists"
    else:
        assert not book.gone_throughout(path, before), f"{path}: {code} after deletion"
    book.seen[f"{kind}_{code.lower()}"] += 1


async def core_reader(client: Client, book: Book, rng: random.Random, paths: list[str]) -> None:
    """The core MCP tool get_document_data, as chunks or as raw text."""
    path = rng.choice(paths)
    before = book.before()
    fmt = rng.choice(["chunks", "raw"])
    data = await tool(
        client, "get_document_data", {"document_id": path, "format": fmt, "max_tokens": 25000}
    )
    if "error" in data:
        clean_error(book, path, before, data["error"], "core")
        return
    assert not book.gone_throughout(path, before), f"{path}: read after deletion"
    texts = [c["content"] for c in data["chunks"]] if fmt == "chunks" else [data["content"]]
    book.check(path, version_in(path, texts), before.committed, dict(book.written))
    book.seen["core"] += 1


async def rag_reader(client: Client, book: Book, rng: random.Random, paths: list[str]) -> None:
    """Seed 001's get_document answers with a document's text and its chunks at once: both
    the same version, and total_chunks counts those chunks."""
    path = rng.choice(paths)
    before = book.before()
    data = await tool(client, "get_document", {"document_id": path, "max_tokens": 10000})
    hi = dict(book.written)
    if "error" in data:
        clean_error(book, path, before, data["error"], "rag")
        return
    assert not book.gone_throughout(path, before), f"{path}: read after deletion"
    document = data["document"]
    assert not document["content_truncated"] and document["next_chunk_offset"] is None
    chunks = [c["content"] for c in document["chunks"]]
    version = version_in(path, [document["content"], *chunks])
    assert document["total_chunks"] == len(chunks), f"{path}: counted another version"
    book.check(path, version, before.committed, hi)
    book.seen["rag"] += 1


async def rest_reader(
    api: httpx.AsyncClient, book: Book, rng: random.Random, paths: list[str]
) -> None:
    """GET /api/documents/{path}/content: the whole text of one version, 202 while it is
    being ingested, or 404 NOT_FOUND - never a 5xx, never an empty 200."""
    path = rng.choice(paths)
    before = book.before()
    r = await api.get(f"/api/documents/{path}/content")
    if r.status_code != 200:
        assert r.status_code in (202, 404), (r.status_code, r.text)
        clean_error(book, path, before, r.json()["errorCode"], "rest")
        return
    assert not book.gone_throughout(path, before), f"{path}: read after deletion"
    book.check(path, version_in(path, [r.text]), before.committed, dict(book.written))
    book.seen["rest"] += 1


def readers_for(
    book: Book,
    paths: list[str],
    *,
    svc: SearchService | None = None,
    db: Database | None = None,
    core: Client | None = None,
    rag: Client | None = None,
    api: httpx.AsyncClient | None = None,
) -> list[Callable[[], Awaitable[None]]]:
    """Two search readers, two service readers and one of each client given, each with its
    own seeded random choices."""
    kinds: list[tuple[Callable[..., Awaitable[None]], Any]] = [
        (search_reader, svc),
        (search_reader, svc),
        (service_reader, db),
        (service_reader, db),
        (core_reader, core),
        (rag_reader, rag),
        (rest_reader, api),
    ]
    return [
        functools.partial(read, source, book, random.Random(n), paths)
        for n, (read, source) in enumerate(kinds)
        if source is not None
    ]


def final_state(
    dsn: str, book: Book, expect: int | None = None, *, embedded_all: bool = True
) -> dict[str, tuple[str, int]]:
    """check_snapshot on a connection of its own: path -> (status, version shown)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return check_snapshot(conn, book, expect, embedded_all=embedded_all)
