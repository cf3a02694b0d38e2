"""The optional rerank stage against a real local HTTP server speaking the Cohere/Jina rerank
API (tests/support/rerank_server.py, which answers with the reverse of the order it was
sent): its order is applied to the first fused candidates; a timeout, an error status, an
unreadable, malformed or partial answer keeps the whole fused order and says degraded;
explain, the search log and pgrag.explain_search show the figures; the candidates sent are
bounded; `rerank: false` and `--no-rerank` skip it; REST and /metrics show it end to end."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families
from psycopg_pool import AsyncConnectionPool

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.mcp.server import build_server
from pgrag.search.engine import SearchPage, SearchService
from pgrag.search.models import SearchRequest
from pgrag.search.rerank import RerankConfig, Reranker
from pgrag.settings import load_settings
from pgrag.tokens import count_tokens
from tests.conftest import create_database, drop_database, pgrag_cmd
from tests.support.kb_server import http_server
from tests.support.pools import vector_pool
from tests.support.rerank_server import COST_PER_SEARCH, MODEL, FakeReranker

pytestmark = pytest.mark.anyio

QUERY = "contract renewal terms"
NOTES = 12
# one chunk a note; the query's words thin out note by note, so the fused order is clear
FILES = {
    f"notes/note_{i:02d}.txt": f"Note {i} on the supplier file. "
    + "The contract renewal terms were agreed. " * (NOTES - i)
    + f"Filed under topic {i} by the archive office."
    for i in range(NOTES)
}


@pytest.fixture(scope="module")
def corpus_dsn(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    url = create_database(server_dsn)
    root = tmp_path_factory.mktemp("rerank")
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")

    async def ingest() -> None:
        async with open_database(load_settings(), dsn=url, max_size=2) as db:
            summary = await Ingestor(db.pool, HashEmbedder(), collection="notes").run([root])
            assert not summary.failures, summary.failures

    asyncio.run(ingest())
    yield url
    drop_database(server_dsn, url)


@pytest.fixture
async def pool(corpus_dsn: str) -> AsyncIterator[AsyncConnectionPool]:
    async with vector_pool(corpus_dsn) as p:
        yield p


@pytest.fixture
def reranker() -> Iterator[FakeReranker]:
    with FakeReranker() as rr:
        yield rr


def service(pool: AsyncConnectionPool, rr: FakeReranker, **config: Any) -> SearchService:
    settings = {"top_n": 30, "max_tokens": 512, "max_total_tokens": 16000, "timeout_s": 5.0}
    settings.update(config)
    rerank = RerankConfig(MODEL, rr.url, "test-key", **settings)
    return SearchService(pool, HashEmbedder(), reranker=Reranker(rerank))


async def search(svc: SearchService, **args: Any) -> SearchPage:
    return await svc.search(SearchRequest(query=QUERY, explain=True, max_tokens=25000, **args))


def ids(page: SearchPage) -> list[int]:
    return [h.chunk_id for h in page.data.results]


def log_row(dsn: str, search_id: int | None) -> tuple[Any, ...]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT rerank_model, rerank_outcome, rerank, rerank_cost, degraded, timings"
            " FROM pgrag.search_log WHERE id = %s",
            (search_id,),
        ).fetchone()
    assert row is not None
    return row


def contents(dsn: str) -> dict[int, str]:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute("SELECT id, content FROM pgrag.chunks").fetchall())


async def test_the_models_order_is_applied_and_explained(
    pool: AsyncConnectionPool, reranker: FakeReranker, corpus_dsn: str
) -> None:
    svc = service(pool, reranker)
    fused = await search(svc, limit=NOTES, rerank=False)
    assert reranker.requests == []  # rerank=false asks nothing
    assert len(fused.data.results) == NOTES
    assert log_row(corpus_dsn, fused.data.search_id)[:4] == (None, None, None, None)

    page = await search(svc, limit=NOTES)
    assert page.data.degraded == []
    assert ids(page) == ids(fused)[::-1]  # the model's order, not the fused one
    assert [h.rank for h in page.data.results] == list(range(1, NOTES + 1))
    for h in page.data.results:
        e = h.explain
        assert e is not None and e.rerank_rank == h.rank
        assert e.fused_rank == NOTES + 1 - h.rank
        assert e.rerank_score == pytest.approx((NOTES + 1 - h.rank) / NOTES, abs=1e-5)
        # the hit's score stays the fused one: explain carries the model's
        assert h.score == pytest.approx(e.fused_score, abs=1e-6)

    sent = reranker.requests[-1]
    text = contents(corpus_dsn)
    assert sent["query"] == QUERY and sent["top_n"] == NOTES
    assert sent["documents"] == [text[i] for i in ids(fused)]  # in fused order, uncut

    model, outcome, figures, cost, degraded, timings = log_row(corpus_dsn, page.data.search_id)
    assert (model, outcome, degraded) == (MODEL, "ok", [])
    assert cost == pytest.approx(COST_PER_SEARCH)
    assert [f["chunk_id"] for f in figures] == ids(page)
    assert [f["fused_rank"] for f in figures] == list(range(NOTES, 0, -1))
    assert "rerank_ms" in timings


async def test_the_models_call_holds_no_pooled_connection(
    pool: AsyncConnectionPool, reranker: FakeReranker
) -> None:
    """While the model answers, every connection of the pool is free for other callers:
    the candidates are read first, the page after."""
    reranker.fault.hold = threading.Event()
    task = asyncio.create_task(search(service(pool, reranker), limit=NOTES))
    for _ in range(1500):  # until the model has the candidates (it does not answer yet)
        if reranker.requests:
            break
        await asyncio.sleep(0.02)
    try:
        async with pool.connection(timeout=10) as a, pool.connection(timeout=10) as b:
            assert (await (await a.execute("SELECT 1")).fetchone()) == (1,)
            assert (await (await b.execute("SELECT 1")).fetchone()) == (1,)
        assert not task.done()
    finally:
        reranker.fault.hold.set()
    page = await task
    assert page.data.results[0].explain is not None
    assert page.data.results[0].explain.rerank_rank == 1


@pytest.mark.parametrize(
    ("mode", "scope"),
    [("semantic", "chunks"), ("keyword", "chunks"), ("hybrid", "documents"), ("regex", "chunks")],
)
async def test_every_relevance_mode_and_scope_is_reranked_regex_is_not(
    pool: AsyncConnectionPool, reranker: FakeReranker, mode: str, scope: str
) -> None:
    svc = service(pool, reranker)
    fused = await search(svc, limit=NOTES, mode=mode, scope=scope, rerank=False)
    page = await search(svc, limit=NOTES, mode=mode, scope=scope)
    assert len(fused.data.results) == NOTES and page.data.degraded == []
    if mode == "regex":  # ordered by match counts, not by relevance: nothing to rerank
        assert reranker.requests == [] and ids(page) == ids(fused)
    else:
        assert len(reranker.requests) == 1 and ids(page) == ids(fused)[::-1]


@pytest.mark.parametrize(
    ("fault", "outcome"),
    [
        ({"status": 503}, "error"),
        ({"delay": 3.0}, "timeout"),
        ({"html": True}, "error"),
        ({"bad_index": True}, "malformed"),
        ({"partial": True}, "partial"),
    ],
)
async def test_a_failed_rerank_keeps_the_whole_fused_order(
    pool: AsyncConnectionPool,
    reranker: FakeReranker,
    corpus_dsn: str,
    fault: dict[str, Any],
    outcome: str,
) -> None:
    svc = service(pool, reranker, timeout_s=0.5)
    fused = await search(svc, limit=NOTES, rerank=False)
    for key, value in fault.items():
        setattr(reranker.fault, key, value)
    page = await search(svc, limit=NOTES)
    assert len(reranker.requests) == 1
    assert page.data.degraded == ["rerank"]
    # every candidate where fusion put it: the unscored ones are not pushed down
    assert ids(page) == ids(fused)
    assert [h.rank for h in page.data.results] == list(range(1, NOTES + 1))
    assert all(h.explain and h.explain.rerank_rank is None for h in page.data.results)
    assert all(h.explain and h.explain.fused_rank is None for h in page.data.results)
    model, logged, figures, _, degraded, _ = log_row(corpus_dsn, page.data.search_id)
    assert (model, logged, figures, degraded) == (MODEL, outcome, None, ["rerank"])


async def _replay(dsn: str, search_id: int | None) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute(
            "SELECT rank, logged_rank, chunk_id, fused_rank, rerank_rank, rerank_score"
            " FROM pgrag.explain_search(%s)",
            (search_id,),
        )
        return await cur.fetchall()


async def test_pages_walk_the_reranked_order_and_explain_search_replays_each(
    pool: AsyncConnectionPool, reranker: FakeReranker, corpus_dsn: str
) -> None:
    """Five candidates reranked, pages of three: the second page straddles the candidates'
    end (two reranked, one fused) and reuses the first page's answer; later ones are fused
    only."""
    svc = service(pool, reranker, top_n=5)
    fused = ids(await search(svc, limit=NOTES, rerank=False))
    walked: list[int] = []
    token = None
    pages = 0
    while True:
        page = await search(svc, limit=3, continuation_token=token)
        pages += 1
        walked += ids(page)
        rows = await _replay(corpus_dsn, page.data.search_id)
        assert [r[2] for r in rows] == ids(page)
        assert [r[0] for r in rows] == [r[1] for r in rows] == [h.rank for h in page.data.results]
        for r, h in zip(rows, page.data.results, strict=True):
            e = h.explain
            assert e is not None
            if pages <= 2:  # the pages among the candidates show every figure
                assert r[3] == e.fused_rank
            assert r[4] == e.rerank_rank
            assert r[5] == (None if e.rerank_score is None else pytest.approx(e.rerank_score))
        token = page.next_token
        if not page.has_more:
            break
    assert walked == fused[:5][::-1] + fused[5:]
    assert len(reranker.requests) == 1  # page two reads page one's answer; later ones: none


async def test_the_candidates_sent_are_bounded_in_tokens(
    pool: AsyncConnectionPool, reranker: FakeReranker
) -> None:
    svc = service(pool, reranker, max_tokens=20, max_total_tokens=70)
    fused = ids(await search(svc, limit=NOTES, rerank=False))
    page = await search(svc, limit=NOTES)
    sent = reranker.requests[-1]["documents"]
    assert [count_tokens(d) for d in sent] == [20, 20, 20]  # a fourth would get 10 (< 16)
    assert ids(page) == fused[:3][::-1] + fused[3:]  # those not sent keep their fused rank
    assert [h.explain.fused_rank for h in page.data.results if h.explain] == (
        [3, 2, 1, *range(4, NOTES + 1)]
    )


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=60) as r:
        body: dict[str, Any] = json.loads(r.read())
    return body


def _metric(base: str, name: str, **labels: str) -> float:
    with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


def test_rest_reranks_and_metrics_count_the_cost(
    corpus_dsn: str, reranker: FakeReranker, tmp_path: Path
) -> None:
    """A real `pgrag serve --transport http` configured by PGRAG_RERANK_*."""
    env = {
        "PGRAG_RERANK_MODEL": MODEL,
        "PGRAG_RERANK_API_BASE": reranker.url,
        "PGRAG_RERANK_API_KEY": "test-key",
        "PGRAG_HOME": str(tmp_path / "home"),
    }
    with http_server(corpus_dsn, "--embedding-model", "hash/384", env=env) as server:
        url = f"{server.base}/api/search?q=contract+renewal+terms&limit={NOTES}&max_tokens=25000"
        fused = _get(url + "&rerank=false")
        assert reranker.requests == [] and fused["degraded"] == []
        page = _get(url)
        assert page["degraded"] == []
        fused_ids = [h["chunk_id"] for h in fused["results"]]
        assert [h["chunk_id"] for h in page["results"]] == fused_ids[::-1]
        assert _metric(server.base, "pgrag_rerank_calls_total", outcome="ok") == 1
        assert _metric(server.base, "pgrag_rerank_cost_usd_count") == 1
        assert _metric(server.base, "pgrag_rerank_cost_usd_sum") == pytest.approx(COST_PER_SEARCH)

        reranker.fault.status = 500
        url = url.replace("terms", "terms+agreed")  # a query not answered before
        fused_ids = [h["chunk_id"] for h in _get(url + "&rerank=false")["results"]]
        failed = _get(url)
        assert failed["degraded"] == ["rerank"]
        assert [h["chunk_id"] for h in failed["results"]] == fused_ids
        assert _metric(server.base, "pgrag_rerank_calls_total", outcome="error") == 1


async def test_the_mcp_tool_takes_rerank_and_explains(
    corpus_dsn: str, reranker: FakeReranker
) -> None:
    settings = load_settings(
        database_url=corpus_dsn,
        embedding_model="hash/384",
        rerank_model=MODEL,
        rerank_api_base=reranker.url,
        rerank_api_key="test-key",
        rerank_top_n=4,
    )
    async with Client(build_server(settings), raise_exceptions=True) as client:
        args = {"query": QUERY, "limit": 5, "explain": True, "max_tokens": 25000}
        fused = (await client.call_tool("search", {**args, "rerank": False})).structured_content
        body = (await client.call_tool("search", args)).structured_content
    assert fused is not None and body is not None and body["ok"]
    fused_ids = [h["chunk_id"] for h in fused["data"]["results"]]
    hits = body["data"]["results"]
    assert [h["chunk_id"] for h in hits] == fused_ids[:4][::-1] + fused_ids[4:]
    assert [h["explain"]["fused_rank"] for h in hits] == [4, 3, 2, 1, 5]
    assert [h["explain"]["rerank_rank"] for h in hits] == [1, 2, 3, 4, None]
    assert len(reranker.requests) == 1


def test_cli_no_rerank(corpus_dsn: str, reranker: FakeReranker, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.update(PGRAG_HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1")
    base = ["--database-url", corpus_dsn, "--embedding-model", "hash/384"]
    rerank = ["--rerank-model", MODEL, "--rerank-api-base", reranker.url, "--rerank-api-key", "k"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = pgrag_cmd(*base, *rerank, "search", QUERY, "-n", str(NOTES), *args)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        return proc

    def ranked(*args: str) -> list[int]:
        return [h["chunk_id"] for h in json.loads(run("--json", *args).stdout)["results"]]

    fused = ranked("--no-rerank")
    assert reranker.requests == []
    assert ranked() == fused[::-1]
    table = run("--explain")
    assert "rerank" in table.stdout  # the column: rank before reranking and the score
    assert "rerank: the hit's rank before reranking" in table.stderr
    assert "#12 1.000" in table.stdout  # the last fused candidate, first with score 1
