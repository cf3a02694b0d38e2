"""Helpers and fixtures of tests/test_search*.py."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool

from pgrag.db.database import open_database
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.embeddings.local import LocalE5Provider
from pgrag.errors import UpstreamError
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.engine import SearchPage, SearchService
from pgrag.search.models import SearchRequest
from pgrag.settings import load_settings
from tests.support.databases import create_database, drop_database

FILES: dict[str, tuple[str, datetime]] = {
    "policies/contract_signing.md": (
        "# Contract Signing Procedure\n\n"
        "Every supplier contract must be signed by two authorised managers. The legal team "
        "reviews the contract before signing. Signed contracts are archived in the records "
        "office within five days.\n",
        datetime(2024, 3, 1, 12, tzinfo=UTC),
    ),
    "policies/合同管理制度.txt": (
        "合同管理制度\n\n"
        "第一条 本制度规定合同的签署流程：合同由业务部门起草，经法务部门审核后，由授权代表签字并加盖公章。\n"
        "第二条 合同签订后五个工作日内交档案室归档。\n",
        datetime(2024, 6, 15, 12, tzinfo=UTC),
    ),
    "mixed/expenses_报销.md": (
        "# Travel expenses 差旅报销\n\n"
        "Employees submit 报销申请 (expense claims) with the original 发票 invoices within 30 "
        "days. 财务部 reviews each claim and pays it by bank transfer.\n",
        datetime(2024, 2, 20, 12, tzinfo=UTC),
    ),
    "handbook/leave_policy.md": (
        "# Leave Policy\n\n"
        "## Annual vacation\n\n"
        "Full-time employees receive twenty days of paid vacation leave per year. Vacation "
        "leave must be requested two weeks in advance.\n\n"
        "## Sick leave\n\n"
        "Sick leave of up to ten days needs no certificate. Longer sick leave requires a "
        "doctor's note.\n\n"
        "## Parental leave\n\n"
        "Parents may take sixteen weeks of parental leave after a birth or adoption.\n",
        datetime(2023, 9, 1, 12, tzinfo=UTC),
    ),
    "it/contacts.txt": (
        "IT support contacts: alice@example.com handles user accounts and "
        "bob.smith@corp.example.org handles the servers. Call the helpdesk for urgent issues.\n",
        datetime(2024, 5, 5, 12, tzinfo=UTC),
    ),
    "it/server_setup.md": (
        "# Database server setup\n\n"
        "Install PostgreSQL 17 with the pgvector extension. Set shared_buffers to a quarter "
        "of the memory and enable the pg_trgm extension for fuzzy text search.\n",
        datetime(2024, 7, 1, 12, tzinfo=UTC),
    ),
    "finance/2024/budget.csv": (
        "department,item,amount\n"
        "Marketing,Trade show booth,12000\n"
        "Engineering,Cloud servers,45000\n"
        "Legal,Contract review services,8000\n",
        datetime(2024, 1, 10, 12, tzinfo=UTC),
    ),
    "finance/2023/annual_report.html": (
        "<html><head><title>Annual report 2023</title>"
        '<meta name="author" content="Alice Wong"></head><body>'
        "<h1>Annual report 2023</h1><p>Revenue grew by twelve percent, driven by cloud "
        "subscriptions in Europe and Asia. Operating costs stayed flat.</p></body></html>",
        datetime(2023, 12, 31, 12, tzinfo=UTC),
    ),
    "zh/员工手册.md": (
        "# 员工手册\n\n员工每年享有十五天带薪年假。请假需提前两周通过系统申请，并由直属经理批准。\n",
        datetime(2024, 4, 1, 12, tzinfo=UTC),
    ),
}


ARCHIVE: dict[str, tuple[str, datetime]] = {
    "old/contract_2019.txt": (
        "Archived contract signing checklist from 2019: collect the signatures, stamp the "
        "contract and file it.\n",
        datetime(2019, 11, 2, 12, tzinfo=UTC),
    ),
}


def build_corpus(root: Path, files: dict[str, tuple[str, datetime]]) -> Path:
    for rel, (text, when) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        os.utime(path, (when.timestamp(), when.timestamp()))
    return root


async def ingest_corpus(dsn: str, tmp: Path, provider: EmbeddingProvider) -> None:
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        for name, files in (("main", FILES), ("archive", ARCHIVE)):
            root = build_corpus(tmp / name, files)
            summary = await Ingestor(db.pool, provider, collection=name).run([root])
            assert not summary.failures, summary.failures
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgrag.documents SET submitter = 'bob', tags = '{legal}'"
            " WHERE path LIKE 'policies/%%'"
        )
        conn.execute(
            "UPDATE pgrag.documents SET submitter = 'carol', tags = '{hr,policy}'"
            " WHERE path LIKE 'handbook/%%'"
        )


ALL_MAIN = set(FILES)


EVERYTHING = ALL_MAIN | set(ARCHIVE)


BIG = 25000  # max_tokens that never cuts a page


@pytest.fixture(scope="module")
def provider() -> Iterator[LocalE5Provider]:
    p = LocalE5Provider()
    yield p
    asyncio.run(p.aclose())


@pytest.fixture(scope="module")
def corpus_dsn(
    server_dsn: str,
    template_dsn: str,
    tmp_path_factory: pytest.TempPathFactory,
    provider: LocalE5Provider,
) -> Iterator[str]:
    url = create_database(server_dsn)
    asyncio.run(ingest_corpus(url, tmp_path_factory.mktemp("corpus"), provider))
    yield url
    drop_database(server_dsn, url)


@pytest.fixture(scope="module")
def doc_ids(corpus_dsn: str) -> dict[str, str]:
    with psycopg.connect(corpus_dsn) as conn:
        return dict(conn.execute("SELECT path, id::text FROM pgrag.documents").fetchall())


async def _pool(dsn: str) -> AsyncConnectionPool:
    pool = AsyncConnectionPool(
        dsn,
        min_size=1,
        max_size=2,
        open=False,
        configure=register_vector_async,
        kwargs={"autocommit": True},
    )
    await pool.open(wait=True, timeout=30)
    return pool


@pytest.fixture
async def pool(corpus_dsn: str) -> AsyncIterator[AsyncConnectionPool]:
    p = await _pool(corpus_dsn)
    yield p
    await p.close()


@pytest.fixture
def service(pool: AsyncConnectionPool, provider: LocalE5Provider) -> SearchService:
    return SearchService(pool, provider)


class DownEmbedder(HashEmbedder):
    """An embedding provider that is down."""

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        raise UpstreamError("embedding provider unreachable (test)")


async def run(service: SearchService, **kw: Any) -> SearchPage:
    kw.setdefault("max_tokens", BIG)
    return await service.search(SearchRequest(**kw))


def paths(page: SearchPage) -> list[str]:
    return [h.path for h in page.data.results]


def ids(page: SearchPage) -> list[int]:
    return [h.chunk_id for h in page.data.results]


def chunk_count(dsn: str) -> tuple[int, int, int]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM pgrag.chunks), (SELECT count(*) FROM pgrag.documents),"
            " (SELECT count(*) FROM pgrag.embeddings)"
        ).fetchone()


def _in_folder(path: str, folder: str) -> bool:
    return path.rsplit("/", 1)[0] == folder or path.startswith(folder + "/")


class GatedProvider(EmbeddingProvider):
    """The real model behind a gate: queries wait until the test opens it."""

    def __init__(self, inner: LocalE5Provider) -> None:
        self.inner = inner
        self.model = inner.model
        self.gate = asyncio.Event()
        self.waiting = 0

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        self.waiting += 1
        await self.gate.wait()
        return await self.inner._embed(texts, is_query=is_query)


async def _explained(dsn: str, search_id: int) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        return await (
            await conn.execute(
                "SELECT rank, logged_rank, chunk_id, document_path, rrf_k"
                " FROM pgrag.explain_search(%s)",
                (search_id,),
            )
        ).fetchall()
