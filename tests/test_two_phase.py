"""Two-phase ingestion: a document is searchable by keyword as soon as its chunks commit;
its vectors follow. Observed with a passage embedder held at a gate (queries pass), so the
state between the phases lasts as long as the test needs: keyword hits, explain's note,
status, an update while vectors are pending, exact per-language sums; and a `pgrag ingest`
killed between the phases, resumed by the next run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.context import embed_text
from pgrag.ingest.pipeline import Ingestor, IngestSummary, Outcome
from pgrag.ingest.walker import FoundFile
from pgrag.search.engine import NO_VECTOR, SearchService
from pgrag.search.models import SearchRequest
from pgrag.services.status import status_report
from pgrag.settings import load_settings
from tests.support.commands import pgrag_cmd
from tests.support.fake_embeddings import Behaviour, fake_embedding_server
from tests.support.servers import free_port, wait_http

pytestmark = pytest.mark.anyio

HASH = "hash/384"
CODE = "QX-7731-ZEBRA"


class GatedEmbedder(HashEmbedder):
    """Passages wait at a gate; queries never do (as the bundled model's query executor)."""

    def __init__(self) -> None:
        super().__init__(HASH)
        self.gate = asyncio.Event()
        self.passages = 0

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        await self.gate.wait()
        self.passages += len(texts)
        return await super().embed_passages(texts)


def _query(dsn: str, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


# per document: chunks, vectors in the active set, vectors_pending
STATE_SQL = """
SELECT d.path, d.status, count(c.id)::int,
       (SELECT count(*)::int FROM pgrag.embeddings e
        WHERE e.set_id = col.active_set_id AND e.document_id = d.id),
       d.vectors_pending
FROM pgrag.documents d JOIN pgrag.collections col ON col.id = d.collection_id
LEFT JOIN pgrag.chunks c ON c.document_id = d.id
GROUP BY d.id, col.active_set_id ORDER BY d.path
"""

# the per-language sums against a recount from the vectors: chunks, documents, mean sum
SUMS_SQL = """
SELECT ls.lang, sum(ls.n)::int, sum(ls.documents)::int, sum(ls.total)::text
FROM pgrag.language_sums ls
WHERE ls.set_id = (SELECT active_set_id FROM pgrag.collections WHERE name = 'kb')
GROUP BY 1 HAVING sum(ls.n) <> 0 ORDER BY 1
"""
RECOUNT_SQL = """
SELECT d.lang, sum(d.n)::int, count(*)::int, sum(d.mean)::text FROM (
    SELECT e.lang, count(*) AS n, avg(e.embedding) AS mean FROM pgrag.embeddings e
    WHERE e.set_id = (SELECT active_set_id FROM pgrag.collections WHERE name = 'kb')
    GROUP BY e.lang, e.document_id) d
GROUP BY 1 ORDER BY 1
"""


def state(dsn: str) -> dict[str, tuple[str, int, int, int]]:
    return {r[0]: r[1:] for r in _query(dsn, STATE_SQL)}


def assert_sums_exact(dsn: str) -> list[tuple[str, int, int]]:
    """The running sums equal a recount: every document counted once, with the mean of
    the vectors it has."""
    sums, counted = _query(dsn, SUMS_SQL), _query(dsn, RECOUNT_SQL)
    assert [r[:3] for r in sums] == [r[:3] for r in counted]
    for got, want in zip(sums, counted, strict=True):
        a = np.array([float(x) for x in got[3].strip("[]").split(",")])
        b = np.array([float(x) for x in want[3].strip("[]").split(",")])
        assert np.abs(a - b).max() < 1e-4
    return [r[:3] for r in sums]


def paragraphs(word: str, n: int) -> str:
    return "\n\n".join(
        f"{word} paragraph {i}: " + f"{word} notes number {i}. " * 30 for i in range(n)
    )


@pytest.fixture
async def pool(dsn: str) -> AsyncIterator[AsyncConnectionPool]:
    async with open_database(load_settings(embedding_model=HASH), dsn=dsn, max_size=6) as db:
        yield db.pool


async def _until(check: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def _search(service: SearchService, query: str, mode: str) -> Any:
    req = SearchRequest(query=query, mode=mode, limit=5, explain=True, max_tokens=25000)
    return (await service.search(req)).data


async def test_keyword_hit_status_and_explain_before_the_vectors_then_all_embedded(
    dsn: str, pool: AsyncConnectionPool, tmp_path: Path
) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a_notes.md").write_text("# Notes\n\n" + paragraphs("alpha", 8), encoding="utf-8")
    (root / "z_last.txt").write_text(f"The contract code is {CODE}.\n", encoding="utf-8")
    provider = GatedEmbedder()
    run = asyncio.create_task(Ingestor(pool, provider, collection="kb").run([root]))
    # both files written (phase 1) while no passage has been embedded
    await _until(lambda: {s[0] for s in state(dsn).values()} == {"ready"} and len(state(dsn)) == 2)
    before = state(dsn)
    assert all(
        vectors == 0 and pending == chunks > 0 for _, chunks, vectors, pending in before.values()
    )
    assert provider.passages == 0

    service = SearchService(pool, provider)
    found = await _search(service, CODE, "keyword")
    assert [h.path for h in found.results] == ["z_last.txt"]
    hybrid = await _search(service, CODE, "hybrid")  # the query embeds: queries pass the gate
    top = hybrid.results[0]
    assert top.path == "z_last.txt" and top.explain is not None
    assert top.explain.semantic_rank is None and top.explain.semantic_note == NO_VECTOR
    assert top.explain.lexical_rank == 1
    note = _query(dsn, "SELECT semantic_note FROM pgrag.explain_search(%s)", (hybrid.search_id,))
    assert note[0] == ("no vector",)

    async with pool.connection() as conn:
        report = await status_report(conn)
        one = await status_report(conn, "z_last.txt")
    waiting = {w["path"]: w for w in report["waiting_for_vectors"]}
    assert set(waiting) == {"a_notes.md", "z_last.txt"}
    assert waiting["z_last.txt"]["embedded"] == 0 and waiting["z_last.txt"]["chunks"] == 1
    assert report["vectors_pending"] == {
        "documents": 2,
        "chunks": sum(s[3] for s in before.values()),
    }
    assert report["counts"]["ready"] == 2  # searchable: ready, with vectors still to come
    assert one["status"] == "ready" and one["vectors_pending"] == 1

    provider.gate.set()
    summary: IngestSummary = await run
    assert {r.path: r.outcome for r in summary.results} == {
        "a_notes.md": Outcome.ADDED,
        "z_last.txt": Outcome.ADDED,
    }
    assert not summary.waiting
    after = state(dsn)
    assert all(vectors == chunks and pending == 0 for _, chunks, vectors, pending in after.values())
    # the vectors arrive as computed (packed in binary, exactly)
    ((heading, context, content, stored),) = _query(
        dsn,
        "SELECT c.heading, c.context, c.content, e.embedding::real[] FROM pgrag.chunks c"
        " JOIN pgrag.embeddings e ON e.chunk_id = c.id WHERE c.content LIKE %s",
        (f"%{CODE}%",),
    )
    expected = await HashEmbedder(HASH).embed_passages([embed_text(heading, context, content)])
    assert np.array_equal(np.array(stored, dtype=np.float32), expected[0])
    hybrid = await _search(service, CODE, "hybrid")
    assert hybrid.results[0].explain.semantic_note is None
    assert hybrid.results[0].explain.semantic_rank is not None
    async with pool.connection() as conn:
        report = await status_report(conn)
    assert report["waiting_for_vectors"] == [] and report["vectors_pending"]["documents"] == 0
    assert_sums_exact(dsn)


async def test_an_update_while_vectors_are_pending_shows_the_new_version_with_cached_vectors(
    dsn: str, pool: AsyncConnectionPool, tmp_path: Path
) -> None:
    """The new version at once: its unchanged chunks keep their vectors (embedding cache),
    its new chunks are found by keyword only until their vectors are written."""
    root = tmp_path / "kb"
    root.mkdir()
    doc = root / "memo.md"
    doc.write_text("# Memo\n\n" + paragraphs("alpha", 6), encoding="utf-8")
    (root / "other.md").write_text("# Other\n\n" + paragraphs("gamma", 3), encoding="utf-8")
    plain = HashEmbedder(HASH)
    await Ingestor(pool, plain, collection="kb", chunk_tokens=80, chunk_overlap=0).run([root])
    (_, old_chunks, old_vectors, _) = state(dsn)["memo.md"]
    assert old_vectors == old_chunks
    assert_sums_exact(dsn)

    doc.write_text(
        "# Memo\n\n" + paragraphs("alpha", 6) + "\n\n" + paragraphs("omega", 4), encoding="utf-8"
    )
    provider = GatedEmbedder()
    ingestor = Ingestor(pool, provider, collection="kb", chunk_tokens=80, chunk_overlap=0)
    run = asyncio.create_task(ingestor.run([root]))
    await _until(
        lambda: state(dsn)["memo.md"][1] > old_chunks and state(dsn)["memo.md"][0] == "ready"
    )
    _, chunks, vectors, pending = state(dsn)["memo.md"]
    # the unchanged paragraphs' chunks got their vectors with the version, from the cache
    assert 0 < vectors < chunks and vectors + pending == chunks
    assert vectors >= old_chunks - 1  # the last old chunk may differ (cut before new text)
    assert_sums_exact(dsn)  # the document counts once, with the vectors it has
    service = SearchService(pool, provider)
    found = await _search(service, "omega", "keyword")
    assert found.results and {h.path for h in found.results} == {"memo.md"}
    assert all(h.explain.semantic_note == NO_VECTOR for h in found.results)

    provider.gate.set()
    summary = await run
    assert {r.path: r.outcome for r in summary.results}["memo.md"] == Outcome.UPDATED
    memo = next(r for r in summary.results if r.path == "memo.md")
    assert memo.embedded == pending and memo.vectors_pending == 0  # only the new text
    _, chunks, vectors, pending = state(dsn)["memo.md"]
    assert vectors == chunks and pending == 0
    sums = assert_sums_exact(dsn)
    assert sum(n for _, n, _ in sums) == sum(s[1] for s in state(dsn).values())


async def test_a_newer_version_while_the_old_one_waits_gets_the_vectors(
    dsn: str, pool: AsyncConnectionPool, tmp_path: Path
) -> None:
    """Two writers (as a watch and an upload of one file): the first version's vectors are
    computed while the second version replaced its chunks; they are not written, and the
    document ends with exactly the second version's vectors."""
    root = tmp_path / "kb"
    root.mkdir()
    doc = root / "memo.md"
    doc.write_text("# Memo\n\n" + paragraphs("first", 2), encoding="utf-8")
    provider = GatedEmbedder()
    ingestor = Ingestor(pool, provider, collection="kb")
    found = [FoundFile(root, doc, "memo.md")]
    first = asyncio.create_task(ingestor.ingest_files(root, found))
    await _until(lambda: state(dsn).get("memo.md", ("",))[0] == "ready")
    doc.write_text("# Memo\n\n" + paragraphs("second", 3), encoding="utf-8")
    second = asyncio.create_task(ingestor.ingest_files(root, found))
    await _until(lambda: state(dsn)["memo.md"][1] > 0 and _has_second(dsn))
    _, chunks, vectors, pending = state(dsn)["memo.md"]
    assert vectors == 0 and pending == chunks  # the new version, by keyword only

    provider.gate.set()
    await first
    await second
    _, chunks, vectors, pending = state(dsn)["memo.md"]
    assert vectors == chunks and pending == 0
    texts = _query(
        dsn, "SELECT c.content FROM pgrag.embeddings e JOIN pgrag.chunks c ON c.id = e.chunk_id"
    )
    assert len(texts) == chunks and all("second" in t for (t,) in texts)
    assert_sums_exact(dsn)


def _has_second(dsn: str) -> bool:
    return bool(_query(dsn, "SELECT 1 FROM pgrag.chunks WHERE content LIKE '%%second%%'"))


# ------------------------------------------------------------------ killed between phases


def _cli(dsn: str, *args: str) -> list[str]:
    return pgrag_cmd("--database-url", dsn, "--embedding-model", "openai/fake-embed", *args)


def _env(base: str) -> dict[str, str]:
    return {
        **os.environ,
        "PGRAG_EMBEDDING_API_BASE": base,
        "PGRAG_EMBEDDING_API_KEY": "k",
        "PGRAG_EMBEDDING_RETRIES": "0",
    }


def test_sigkill_between_the_phases_loses_nothing_and_the_next_run_embeds_the_rest(
    dsn: str, tmp_path: Path
) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(3):
        (root / f"doc_{i}.md").write_text(f"# Doc {i}\n\n" + paragraphs(f"topic{i}", 3))
    (root / "z_code.txt").write_text(f"Order {CODE} shipped.\n")
    slow = Behaviour(delay_s=4.0)  # every provider call: the embedding phase is caught open
    with fake_embedding_server(slow) as base:
        proc = subprocess.Popen(
            _cli(dsn, "ingest", "-q", "-c", "kb", str(root)),
            env=_env(base),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                rows = state(dsn)
                if len(rows) == 4 and all(r[0] == "ready" for r in rows.values()):
                    break
                time.sleep(0.05)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        killed = state(dsn)
        assert len(killed) == 4, killed
        for path, (status, chunks, vectors, pending) in killed.items():
            # a whole version, its missing vectors counted exactly
            assert status == "ready" and chunks > 0 and vectors + pending == chunks, path
        assert sum(r[3] for r in killed.values()) > 0, "the kill did not land between the phases"
        hits = _query(
            dsn,
            "SELECT d.path FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id"
            " WHERE c.tsv @@ plainto_tsquery('pgrag.search', pgrag.lexical_text(%s))",
            (CODE,),
        )
        assert hits == [("z_code.txt",)]
        assert_sums_exact(dsn)
        status = subprocess.run(
            _cli(dsn, "status", "--json"), env=_env(base), capture_output=True, text=True
        )
        report = json.loads(status.stdout)
        waiting = sorted(w["path"] for w in report["waiting_for_vectors"])
        assert waiting == sorted(p for p, r in killed.items() if r[3]), report
        assert report["vectors_pending"]["chunks"] == sum(r[3] for r in killed.values())

        slow.delay_s = 0.0
        final = subprocess.run(
            _cli(dsn, "ingest", "-c", "kb", str(root)),
            env=_env(base),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert final.returncode == 0, final.stderr
    assert "vectors left by earlier runs" in final.stderr
    resumed = state(dsn)
    assert all(v == c and p == 0 for _, c, v, p in resumed.values()), (resumed, final.stderr)
    assert _query(dsn, "SELECT count(*) FROM pgrag.chunks") == [
        (sum(r[1] for r in killed.values()),)
    ]  # the chunks were not rewritten: the files were unchanged
    assert_sums_exact(dsn)


# ------------------------------------------------------------------ a large watched file


def test_a_large_watched_file_never_stalls_healthz(dsn: str, tmp_path: Path) -> None:
    """`pgrag serve --watch` ingesting a 1.5 MB text (about 1,000 chunks): language
    detection and the vectors' encoding run off the event loop, so /healthz answers every
    poll (before, the loop was blocked for seconds: ~10 ms per chunk to detect its
    language, ~3 ms to print each vector as text)."""
    watched = tmp_path / "watched"
    watched.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        pgrag_cmd(
            "--database-url",
            dsn,
            "--embedding-model",
            HASH,
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
            "--watch",
            str(watched),
        ),
        env={**os.environ, "PGRAG_COLLECTION": "kb"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    healthz = f"http://127.0.0.1:{port}/healthz"
    try:
        wait_http(healthz)
        staged = tmp_path / "big.txt"
        with staged.open("w", encoding="utf-8") as f:
            for i in range(2400):
                f.write(f"Section {i}: " + "Ledger entries are reconciled every month. " * 14)
                f.write("\n\n")
        staged.rename(watched / "big.txt")
        polls, missed = 0, []
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            done = _query(
                dsn,
                "SELECT 1 FROM pgrag.documents WHERE path = 'big.txt' AND status = 'ready'"
                " AND vectors_pending = 0",
            )
            if done:
                break
            try:
                with urllib.request.urlopen(healthz, timeout=2) as r:
                    assert r.status == 200
            except OSError as exc:
                missed.append(repr(exc))
            polls += 1
            time.sleep(0.1)
        assert done, "the watched file was not ingested"
        assert polls > 10, "ingestion ended before /healthz was polled during it"
        assert not missed, f"{len(missed)} of {polls} /healthz polls got no answer: {missed[:3]}"
        chunks = _query(dsn, "SELECT count(*) FROM pgrag.chunks")[0][0]
        assert chunks > 800
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
