"""Search paging is stable: walking every page of a query, whatever the
mode, scope, collection scope, page size and token budget, returns each hit exactly once,
in the order one big page would show, with one total on every page.

The corpus is larger than the fused pool (more than 100 chunks match every query, in two
collections holding the same relative paths), so a walk crosses the pool boundary where
the pool used to grow with the offset and the ranking reshuffled."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import given
from hypothesis import strategies as st
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.settings import load_settings
from pgrag.store.pages import extracted_text
from pgrag.tokens import count_tokens
from tests.support.databases import create_database, drop_database

WORDS = [
    "contract",
    "invoice",
    "budget",
    "leave",
    "policy",
    "server",
    "database",
    "travel",
    "expense",
    "report",
    "audit",
    "payment",
    "supplier",
    "review",
    "archive",
    "signature",
    "approval",
    "meeting",
    "schedule",
    "vacation",
]
QUERIES = {
    "hybrid": "contract invoice review",
    "semantic": "budget policy approval",
    "keyword": "contract OR invoice OR budget",
    "regex": "contr[a-z]+",
}
BIG = 25000


def _text(i: int) -> str:
    """Paragraphs that share words (so everything matches) in varying proportions."""
    paras = []
    for p in range(3):
        words = [WORDS[(i * 7 + p * 3 + k * k) % len(WORDS)] for k in range(60 + (i + p) % 40)]
        paras.append(f"## Part {p}\n\n" + " ".join(words) + ".")
    return f"# Note {i}\n\n" + "\n\n".join(paras) + "\n"


async def _ingest(dsn: str, root: Path, provider: HashEmbedder) -> None:
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        for name, count in (("alpha", 45), ("beta", 40)):
            folder = root / name
            for i in range(count):  # the same relative paths in both collections
                path = folder / f"notes/n{i:03d}.md"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(_text(i + (0 if name == "alpha" else 1000)), encoding="utf-8")
            summary = await Ingestor(db.pool, provider, collection=name, chunk_tokens=80).run(
                [folder]
            )
            assert not summary.failures


@pytest.fixture(scope="module")
def paging_dsn(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    url = create_database(server_dsn)
    asyncio.run(_ingest(url, tmp_path_factory.mktemp("paging"), HashEmbedder()))
    yield url
    drop_database(server_dsn, url)


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal("asyncio") as p:
        yield p


@pytest.fixture(scope="module")
def service(paging_dsn: str, portal: BlockingPortal) -> Iterator[SearchService]:
    async def open_pool() -> AsyncConnectionPool:
        pool = AsyncConnectionPool(
            paging_dsn,
            min_size=1,
            max_size=2,
            open=False,
            configure=register_vector_async,
            kwargs={"autocommit": True},
        )
        await pool.open(wait=True, timeout=30)
        return pool

    pool = portal.call(open_pool)
    yield SearchService(pool, HashEmbedder(), log_searches=False)
    portal.call(pool.close)


def _key(hit: Any, scope: str) -> Any:
    return hit.document_id if scope == "documents" else hit.chunk_id


async def _walk(
    service: SearchService, req: dict[str, Any], budget: int, collection_scope: list[str] | None
) -> tuple[list[Any], set[int]]:
    keys: list[Any] = []
    totals: set[int] = set()
    token = None
    for _ in range(500):
        page = await service.search(
            SearchRequest(**req, max_tokens=budget, continuation_token=token),
            collection_scope=collection_scope,
        )
        totals.add(page.data.total_matches)
        assert [h.rank for h in page.data.results] == list(
            range(len(keys) + 1, len(keys) + 1 + len(page.data.results))
        )
        keys += [_key(h, req["scope"]) for h in page.data.results]
        if not page.has_more:
            assert page.next_token is None
            return keys, totals
        assert page.data.results, "a page that promises more must not be empty"
        token = page.next_token
    raise AssertionError("the walk did not end")


async def _reference(
    service: SearchService, req: dict[str, Any], collection_scope: list[str] | None
) -> list[Any]:
    """The same ranking read in the biggest pages there are."""
    keys, _ = await _walk(service, {**req, "limit": 50}, BIG, collection_scope)
    return keys


@given(
    mode=st.sampled_from(sorted(QUERIES)),
    scope=st.sampled_from(["chunks", "documents"]),
    collection_scope=st.sampled_from([None, ["alpha"], ["beta"], ["alpha", "beta"]]),
    limit=st.integers(min_value=1, max_value=50),
    budget=st.sampled_from([50, 120, 400, 1500, BIG]),
)
def test_walking_every_page_returns_each_hit_once_in_one_order(
    service: SearchService,
    portal: BlockingPortal,
    mode: str,
    scope: str,
    collection_scope: list[str] | None,
    limit: int,
    budget: int,
) -> None:
    req = {"query": QUERIES[mode], "mode": mode, "scope": scope, "limit": limit}
    keys, totals = portal.call(_walk, service, req, budget, collection_scope)
    assert len(totals) == 1, f"total_matches drifted across pages: {sorted(totals)}"
    assert len(keys) == len(set(keys)), "a hit came back twice"
    assert len(keys) == totals.pop(), "the walk did not return total_matches hits"
    assert keys == portal.call(_reference, service, req, collection_scope)


def test_the_corpus_is_bigger_than_the_pool(service: SearchService, portal: BlockingPortal) -> None:
    """Otherwise the property above would not cross the pool boundary."""

    async def first() -> Any:
        return await service.search(SearchRequest(query=QUERIES["hybrid"], limit=5))

    assert portal.call(first).data.total_matches > 100


def test_full_content_is_the_whole_document_text_cut_to_the_budget(
    service: SearchService, portal: BlockingPortal, paging_dsn: str
) -> None:
    """content_mode=full (seed 003): the document's extracted text, not the hit's chunk."""

    async def run(max_tokens: int) -> Any:
        return await service.search(
            SearchRequest(
                query=QUERIES["keyword"],
                mode="keyword",
                content_mode="full",
                limit=3,
                max_tokens=max_tokens,
            )
        )

    async def whole(doc_id: str) -> str:
        async with service.pool.connection() as conn:
            return await extracted_text(conn, doc_id)

    page = portal.call(run, BIG)
    assert page.data.results
    for hit in page.data.results:
        text = portal.call(whole, hit.document_id)
        assert hit.content == text and hit.content_truncated is False
        assert text.count("## Part") == 3  # several chunks: a chunk alone would be less
    small = portal.call(run, 60)
    hit = small.data.results[0]
    text = portal.call(whole, hit.document_id)
    assert hit.content_truncated is True and hit.content and text.startswith(hit.content)
    assert count_tokens(hit.content) <= 60
