"""Search end to end on a small multilingual corpus embedded by the real local model:
modes, scopes, filters, threshold, CJK, fail-soft degradation, regex, pagination and its
tokens, explain and the search log, hostile queries, and the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool
from pydantic import ValidationError

from pgrag.cli.app import cli
from pgrag.db.database import open_database
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.embeddings.local import LocalE5Provider
from pgrag.errors import ErrorCode, InvalidArgument, NotFound, PgragError, UpstreamError
from pgrag.ingest.pipeline import Ingestor
from pgrag.search import engine, ranking
from pgrag.search.engine import SearchPage, SearchService
from pgrag.search.models import SearchData, SearchHit, SearchRequest
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


# --------------------------------------------------------------------------------------------
# fixtures: one corpus per module (embedding is the slow part), a pool per test
# --------------------------------------------------------------------------------------------

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


pytestmark = pytest.mark.anyio


# --------------------------------------------------------------------------------------------
# modes
# --------------------------------------------------------------------------------------------


async def test_hybrid_fuses_both_legs(service: SearchService) -> None:
    page = await run(service, query="contract signing", limit=10, explain=True)
    d = page.data
    assert d.mode == "hybrid" and d.degraded == [] and d.model == "local/multilingual-e5-small"
    assert paths(page)[0] == "policies/contract_signing.md"
    top = d.results[0]
    assert top.explain is not None
    assert top.explain.lexical_rank == 1 and top.explain.semantic_rank is not None
    assert any(h.explain and h.explain.lexical_rank is None for h in d.results)  # semantic-only
    assert [h.rank for h in d.results] == list(range(1, len(d.results) + 1))
    scores = [h.score for h in d.results]
    assert scores == sorted(scores, reverse=True)
    s = top.snippets[0]
    assert "contract" in s.keywords_matched
    assert (s.file_id, s.file_name) == (top.document_id, "contract_signing.md")
    assert top.matched_context and "contract" in top.matched_context.lower()


async def test_snippet_offsets_point_into_the_stored_text(
    service: SearchService, corpus_dsn: str
) -> None:
    checked = 0
    for q, mode in (("leave", "keyword"), ("合同签署", "hybrid"), ("报销 invoices", "hybrid")):
        page = await run(service, query=q, mode=mode, limit=10, return_scoring_details=True)
        with psycopg.connect(corpus_dsn) as conn:
            for h in page.data.results:
                body = conn.execute(
                    "SELECT u.body FROM pgrag.chunks c JOIN pgrag.units u ON u.id = c.unit_id"
                    " WHERE c.id = %s",
                    (h.chunk_id,),
                ).fetchone()[0]
                for s in h.snippets:
                    assert body[s.original_char_start : s.original_char_end] == s.content
                    assert s.scoring_details is not None
                    assert s.scoring_details.percent_in_doc == pytest.approx(
                        s.original_char_start / len(body), abs=1e-4
                    )
                    checked += 1
    assert checked >= 5


async def test_semantic_mode_finds_meaning_across_languages(service: SearchService) -> None:
    page = await run(
        service,
        query="How many days of paid vacation do employees get?",
        mode="semantic",
        limit=5,
        explain=True,
    )
    d = page.data
    assert d.mode == "semantic"
    assert d.results[0].path == "handbook/leave_policy.md"
    assert "vacation" in d.results[0].preview
    assert "zh/员工手册.md" in paths(page)  # the Chinese handbook (带薪年假), no shared word
    for h in d.results:
        assert h.explain and h.explain.lexical_rank is None and h.explain.semantic_rank
        assert h.score == pytest.approx(h.explain.semantic_score, abs=1e-6)
    assert [h.score for h in d.results] == sorted((h.score for h in d.results), reverse=True)


async def test_keyword_mode_is_lexical_only_and_exact_is_its_alias(
    service: SearchService,
) -> None:
    kw = await run(service, query="pgvector extension", mode="keyword", limit=10, explain=True)
    exact = await run(service, query="pgvector extension", mode="exact", limit=10, explain=True)
    assert kw.data.mode == exact.data.mode == "keyword"
    assert paths(kw) == ["it/server_setup.md"] and ids(kw) == ids(exact)
    assert kw.data.total_matches == 1
    assert kw.data.model is None  # the query was not embedded
    h = kw.data.results[0]
    assert h.explain and h.explain.semantic_rank is None and h.explain.lexical_rank == 1
    assert h.score == pytest.approx(h.explain.lexical_score, abs=1e-6)
    assert set(h.snippets[0].keywords_matched) == {"pgvector", "extension"}


async def test_keyword_mode_quoted_phrase_needs_adjacent_words(service: SearchService) -> None:
    loose = await run(service, query="contract review", mode="keyword", limit=20)
    phrase = await run(service, query='"contract review"', mode="keyword", limit=20)
    assert paths(phrase) == ["finance/2024/budget.csv"]
    assert {"policies/contract_signing.md", "finance/2024/budget.csv"} <= set(paths(loose))


async def test_keyword_mode_negation_excludes(service: SearchService) -> None:
    page = await run(service, query="contract -signing", mode="keyword", limit=20)
    assert paths(page) == ["finance/2024/budget.csv"]


async def test_regex_mode_finds_email_addresses(service: SearchService) -> None:
    page = await run(service, query=r"[[:alnum:]._%+-]+@[[:alnum:].-]+\.[[:alpha:]]+", mode="regex")
    d = page.data
    assert d.mode == "regex" and paths(page) == ["it/contacts.txt"]
    hit = d.results[0]
    assert hit.score == 2.0  # two addresses in the chunk
    found = {k for s in hit.snippets for k in s.keywords_matched}
    assert found == {"alice@example.com", "bob.smith@corp.example.org"}


async def test_regex_word_boundaries_work(service: SearchService) -> None:
    assert paths(await run(service, query=r"\bpgvector\b", mode="regex")) == ["it/server_setup.md"]
    assert paths(await run(service, query="vector", mode="regex")) == ["it/server_setup.md"]
    none = await run(service, query=r"\bvector\b", mode="regex")  # only inside pgvector
    assert none.data.results == [] and none.data.total_matches == 0


@pytest.mark.parametrize("pattern", ["(unclosed", "[z-a]", "a{3,1}"])
async def test_regex_invalid_pattern_is_an_invalid_argument(
    service: SearchService, pattern: str
) -> None:
    with pytest.raises(InvalidArgument) as info:
        await run(service, query=pattern, mode="regex")
    assert info.value.code == ErrorCode.INVALID_ARGUMENT
    assert "POSIX" in info.value.message
    ok = await run(service, query="helpdesk", mode="regex")  # the connection is still usable
    assert paths(ok) == ["it/contacts.txt"]


async def test_regex_documents_scope(service: SearchService) -> None:
    page = await run(service, query="leave", mode="regex", scope="documents", limit=10)
    assert paths(page) == ["handbook/leave_policy.md"]
    # the matches of all its chunks (headings included: they are part of the text)
    assert page.data.results[0].score == FILES["handbook/leave_policy.md"][0].lower().count("leave")


# --------------------------------------------------------------------------------------------
# scopes
# --------------------------------------------------------------------------------------------


async def test_documents_scope_ranks_documents_by_their_best_chunk(
    service: SearchService,
) -> None:
    chunks = await run(service, query="sick leave and vacation", limit=50)
    docs = await run(service, query="sick leave and vacation", scope="documents", limit=50)
    assert docs.data.scope == "documents"
    first_seen = list(dict.fromkeys(h.document_id for h in chunks.data.results))
    assert [h.document_id for h in docs.data.results] == first_seen
    assert docs.data.total_matches == len(first_seen)
    best = {h.document_id: h.chunk_id for h in reversed(chunks.data.results)}
    assert all(h.chunk_id == best[h.document_id] for h in docs.data.results)
    leave = docs.data.results[0]
    assert leave.path == "handbook/leave_policy.md"
    # snippets from several chunks (sections): each one names its own section
    assert any("Sick leave" in s.content and "vacation" not in s.content for s in leave.snippets)
    assert any("vacation" in s.content and "Sick" not in s.content for s in leave.snippets)


# --------------------------------------------------------------------------------------------
# filters (hybrid: the semantic leg returns every chunk, so results == documents passing)
# --------------------------------------------------------------------------------------------


def _in_folder(path: str, folder: str) -> bool:
    return path.rsplit("/", 1)[0] == folder or path.startswith(folder + "/")


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, EVERYTHING),
        ({"collection": "main"}, ALL_MAIN),
        ({"collection": "archive"}, set(ARCHIVE)),
        ({"folder": "finance"}, {p for p in FILES if p.startswith("finance/")}),
        ({"folder": "/finance/2024/"}, {"finance/2024/budget.csv"}),
        ({"folder": "fin"}, set()),  # a prefix of folders, not of names
        ({"file_type": "csv"}, {"finance/2024/budget.csv"}),
        ({"file_type": [".HTML", "txt"]}, {p for p in EVERYTHING if p.endswith((".html", ".txt"))}),
        ({"submitter": "bob"}, {p for p in FILES if p.startswith("policies/")}),
        ({"author": "Alice Wong"}, {"finance/2023/annual_report.html"}),
        ({"tags": ["hr"]}, {"handbook/leave_policy.md"}),
        ({"tags": ["hr", "legal"]}, {p for p in FILES if p.startswith(("policies/", "handbook/"))}),
        ({"date_from": "2024-06-01"}, {"policies/合同管理制度.txt", "it/server_setup.md"}),
        (
            {"date_to": "2023-12-31"},
            {p for p, (_, t) in {**FILES, **ARCHIVE}.items() if t.year < 2024},
        ),
        (
            {"date_from": "2024-03-01", "date_to": "2024-05-05"},
            {"policies/contract_signing.md", "zh/员工手册.md", "it/contacts.txt"},
        ),
        (
            {"date_from": "2024-03-01T13:00:00Z", "date_to": "2024-05-05T11:00:00Z"},
            {"zh/员工手册.md"},
        ),
        ({"folder": "policies", "file_type": "md"}, {"policies/contract_signing.md"}),
        ({"folder": "x' OR '1'='1"}, set()),
    ],
)
async def test_filters(service: SearchService, filters: dict[str, Any], expected: set[str]) -> None:
    page = await run(
        service, query="company documents", limit=50, filters=filters, content_mode="none"
    )
    assert set(paths(page)) == expected
    assert page.data.total_matches == len(page.data.results)


async def test_filter_by_document_ids(service: SearchService, doc_ids: dict[str, str]) -> None:
    wanted = ["it/contacts.txt", "zh/员工手册.md"]
    page = await run(
        service, query="contacts", limit=50, filters={"document_ids": [doc_ids[p] for p in wanted]}
    )
    assert set(paths(page)) == set(wanted)


async def test_filters_apply_to_the_lexical_leg_and_to_regex(service: SearchService) -> None:
    kw = await run(service, query="contract", mode="keyword", limit=20)
    assert set(paths(kw)) == {
        "policies/contract_signing.md",
        "finance/2024/budget.csv",
        "old/contract_2019.txt",
    }
    kw_fin = await run(service, query="contract", mode="keyword", filters={"folder": "finance"})
    assert paths(kw_fin) == ["finance/2024/budget.csv"]
    rx = await run(service, query="@", mode="regex", filters={"folder": "policies"})
    assert rx.data.results == []


async def test_unknown_collection_is_not_found(service: SearchService) -> None:
    with pytest.raises(NotFound):
        await run(service, query="contract", filters={"collection": "nope"})


# --------------------------------------------------------------------------------------------
# threshold
# --------------------------------------------------------------------------------------------


async def test_threshold_keeps_results_at_or_above_the_similarity(service: SearchService) -> None:
    q = "contract signing approval"
    full = await run(service, query=q, mode="semantic", limit=50, content_mode="none")
    scores = [h.score for h in full.data.results]
    t = (scores[2] + scores[3]) / 2
    cut = await run(service, query=q, mode="semantic", limit=50, threshold=t, content_mode="none")
    assert ids(cut) == ids(full)[:3] and cut.data.total_matches == 3
    hybrid = await run(service, query=q, limit=50, threshold=t, explain=True, content_mode="none")
    assert hybrid.data.results  # lexical-only rows have no similarity and are dropped
    assert all(h.explain and (h.explain.semantic_score or 0) >= t for h in hybrid.data.results)
    assert set(ids(hybrid)) == set(ids(cut))
    none = await run(service, query=q, mode="semantic", threshold=0.999)
    assert none.data.results == [] and none.data.total_matches == 0 and not none.has_more


# --------------------------------------------------------------------------------------------
# CJK and mixed-language documents
# --------------------------------------------------------------------------------------------


async def test_chinese_query_finds_text_with_a_particle_between(service: SearchService) -> None:
    page = await run(service, query="合同签署流程", mode="keyword")
    assert paths(page) == ["policies/合同管理制度.txt"]
    s = page.data.results[0].snippets[0]
    assert {"合同", "签署", "流程"} <= set(s.keywords_matched)
    assert "合同的签署流程" in s.content


async def test_chinese_hybrid_query(service: SearchService) -> None:
    page = await run(service, query="带薪年假", limit=5, explain=True)
    top = page.data.results[0]
    assert top.path == "zh/员工手册.md" and top.explain and top.explain.lexical_rank == 1
    assert "带薪年假" in top.snippets[0].content


async def test_mixed_language_document_found_by_either_language(service: SearchService) -> None:
    zh = await run(service, query="报销", mode="keyword")
    en = await run(service, query="invoices", mode="keyword")
    both = await run(service, query="报销 invoices", limit=3)
    assert paths(zh) == paths(en) == ["mixed/expenses_报销.md"]
    assert both.data.results[0].path == "mixed/expenses_报销.md"
    kws = set(both.data.results[0].snippets[0].keywords_matched)
    assert {"报销", "invoices"} <= kws


# --------------------------------------------------------------------------------------------
# fail soft
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "the of and which were",  # only stop words
        " ".join(["contract signing"] * 60),  # 120 words
        '"((',
        "&|!",
        "!!! ((( ))) <-> :*",
    ],
)
async def test_unusable_lexical_query_degrades_to_semantic(
    service: SearchService, query: str
) -> None:
    page = await run(service, query=query, limit=5, explain=True)
    assert page.data.degraded == ["lexical"]
    assert page.data.results
    assert all(h.explain and h.explain.lexical_rank is None for h in page.data.results)
    assert all(h.explain and h.explain.semantic_rank for h in page.data.results)
    kw = await run(service, query=query, mode="keyword", limit=5)
    assert kw.data.degraded == ["lexical"] and kw.data.results


async def test_operators_around_words_are_not_degraded(service: SearchService) -> None:
    page = await run(service, query="pgvector & | ! ((", mode="keyword")
    assert page.data.degraded == [] and paths(page) == ["it/server_setup.md"]


async def test_provider_down_degrades_hybrid_to_lexical(pool: AsyncConnectionPool) -> None:
    down = SearchService(pool, DownEmbedder("hash/384"))
    page = await run(down, query="contract signing", limit=10, explain=True)
    assert page.data.degraded == ["semantic"] and page.data.model is None
    assert set(paths(page)) == {"policies/contract_signing.md", "old/contract_2019.txt"} | {
        "finance/2024/budget.csv"
    }
    assert all(h.explain and h.explain.semantic_rank is None for h in page.data.results)
    with pytest.raises(UpstreamError) as info:
        await run(down, query="contract signing", mode="semantic")
    assert info.value.code == ErrorCode.UPSTREAM_ERROR
    with pytest.raises(UpstreamError):  # neither leg can answer
        await run(down, query="the of and", mode="hybrid")
    kw = await run(down, query="contract", mode="keyword")  # keyword never embeds
    assert kw.data.degraded == [] and kw.data.results


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


async def test_searches_waiting_for_the_model_hold_no_connection(
    pool: AsyncConnectionPool, provider: LocalE5Provider
) -> None:
    gated = GatedProvider(provider)
    slow = SearchService(pool, gated)
    waiting = [
        asyncio.create_task(run(slow, query=q, limit=3))
        for q in ("contract signing", "budget", "server setup")
    ]  # more searches than the pool (2) has connections
    for _ in range(500):  # bounded: with a connection held per search, the third never embeds
        if gated.waiting == len(waiting):
            break
        await asyncio.sleep(0.01)
    assert gated.waiting == len(waiting), "a search queued for a connection before embedding"
    assert pool.get_stats().get("requests_waiting", 0) == 0
    page = await run(slow, query="contract", mode="keyword")  # would time out behind them
    assert page.data.results
    gated.gate.set()
    pages = await asyncio.gather(*waiting)
    assert all(p.data.results and p.data.model == provider.model for p in pages)


# --------------------------------------------------------------------------------------------
# hostile and extreme queries
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "'; DROP TABLE pgrag.chunks; --",
        "%' OR 1=1 --",
        '" OR ""="',
        "1; DELETE FROM pgrag.documents",
    ],
)
async def test_sql_injection_looking_queries_are_just_text(
    service: SearchService, corpus_dsn: str, query: str
) -> None:
    before = chunk_count(corpus_dsn)
    for mode in ("hybrid", "keyword", "semantic", "regex"):
        page = await run(service, query=query, mode=mode, limit=5)
        assert isinstance(page.data, SearchData)
        if mode == "regex" or (mode == "keyword" and not page.data.degraded):
            assert page.data.results == []  # nothing in the corpus contains these words
        if page.data.degraded:  # only symbols: the semantic leg answers
            assert page.data.degraded == ["lexical"] and mode in ("hybrid", "keyword")
    assert chunk_count(corpus_dsn) == before
    assert before[0] > 0


def test_empty_and_blank_queries_are_rejected() -> None:
    for q in ("", "   ", "\n\t"):
        with pytest.raises(ValidationError):
            SearchRequest(query=q)
    with pytest.raises(ValidationError):
        SearchRequest(query="x" * 4001)


async def test_2000_character_queries_work(service: SearchService) -> None:
    zh = ("合同的签署流程需要法务审核" * 200)[:2000]  # ~2,000 bigrams in one tsquery
    page = await run(service, query=zh, mode="keyword", limit=3)
    assert page.data.degraded == [] and page.data.results[0].path == "policies/合同管理制度.txt"
    words = ("contract " + " ".join(f"supercalifragilistic{i:03d}" for i in range(100)))[:2000]
    assert len(words) == 2000 and len(words.split()) < engine.MAX_LEXICAL_WORDS
    en = await run(service, query=words, mode="keyword", limit=10)
    assert en.data.degraded == []
    assert set(paths(en)) == {
        "policies/contract_signing.md",
        "finance/2024/budget.csv",
        "old/contract_2019.txt",
    }
    long = ("Every supplier contract must be signed by two managers. " * 40)[:2000]
    deg = await run(service, query=long, limit=3)  # 300+ words: the semantic leg answers
    assert deg.data.degraded == ["lexical"]
    assert deg.data.results[0].path in {"policies/contract_signing.md", "old/contract_2019.txt"}


# --------------------------------------------------------------------------------------------
# content modes
# --------------------------------------------------------------------------------------------


async def test_content_modes_and_snippet_cap(
    pool: AsyncConnectionPool, provider: EmbeddingProvider
) -> None:
    svc = SearchService(pool, provider, max_snippets=1)
    full = await run(svc, query="sick leave", mode="keyword", content_mode="full", limit=1)
    hit = full.data.results[0]
    assert hit.snippets == [] and hit.content and "Sick leave" in hit.content
    none = await run(svc, query="sick leave", mode="keyword", content_mode="none", limit=1)
    assert none.data.results[0].snippets == [] and none.data.results[0].content is None
    smart = await run(svc, query="leave", mode="keyword", scope="documents", limit=1)
    assert len(smart.data.results[0].snippets) == 1 and smart.data.results[0].matched_context
    quiet = SearchService(pool, provider, snippet_summary=False)
    page = await run(quiet, query="leave", mode="keyword", limit=1)
    assert page.data.results[0].snippets and page.data.results[0].matched_context is None


# --------------------------------------------------------------------------------------------
# pagination and continuation tokens
# --------------------------------------------------------------------------------------------


async def test_pages_follow_tokens_without_overlap_or_gap(service: SearchService) -> None:
    q = "employee policy and procedures"
    everything = await run(service, query=q, limit=50)
    assert not everything.has_more and everything.next_token is None
    seen: list[int] = []
    token = None
    pages = 0
    while True:
        page = await service.search(
            SearchRequest(query=q, limit=5, max_tokens=400, continuation_token=token)
        )
        pages += 1
        if pages == 1:
            assert 0 < len(page.data.results) < 5 and page.has_more and page.next_token
        assert page.data.token_count <= 400 or page.first_exceeded
        assert [h.rank for h in page.data.results] == list(
            range(len(seen) + 1, len(seen) + 1 + len(page.data.results))
        )
        seen += ids(page)
        if not page.has_more:
            assert page.next_token is None
            break
        token = page.next_token
        assert pages < 30
    assert seen == ids(everything)
    assert len(set(seen)) == len(seen) == everything.data.total_matches


async def test_tampered_tokens_are_rejected(service: SearchService) -> None:
    first = await service.search(SearchRequest(query="leave policy", limit=5, max_tokens=300))
    token = first.next_token
    assert token
    body, sig = token.split(".")

    def flip(s: str, i: int) -> str:
        return s[:i] + ("A" if s[i] != "A" else "B") + s[i + 1 :]

    bad = [
        f"{flip(body, len(body) // 2)}.{sig}",
        f"{body}.{flip(sig, 3)}",
        body,
        "not-a-token",
        f"{body}.{sig}x!",
    ]
    for t in bad:
        with pytest.raises(InvalidArgument) as info:
            await service.search(
                SearchRequest(query="leave policy", limit=5, max_tokens=300, continuation_token=t)
            )
        assert info.value.detail == {"field": "continuation_token"}
    ok = await service.search(
        SearchRequest(query="leave policy", limit=5, max_tokens=300, continuation_token=token)
    )
    assert ok.data.results[0].rank == len(first.data.results) + 1


async def test_token_reused_with_another_request_is_rejected(service: SearchService) -> None:
    first = await service.search(SearchRequest(query="leave policy", limit=5, max_tokens=300))
    assert first.next_token
    for changed in (
        {"query": "contract signing"},
        {"query": "leave policy", "mode": "semantic"},
        {"query": "leave policy", "filters": {"folder": "handbook"}},
    ):
        with pytest.raises(InvalidArgument, match="different request"):
            await service.search(
                SearchRequest(
                    **{"limit": 5, "max_tokens": 300, **changed},
                    continuation_token=first.next_token,
                )
            )
    # the page budget is not part of the request identity
    again = await service.search(
        SearchRequest(
            query="leave policy", limit=5, max_tokens=2000, continuation_token=first.next_token
        )
    )
    assert again.data.results


async def test_first_result_over_budget_is_still_returned(service: SearchService) -> None:
    page = await service.search(
        SearchRequest(query="contract signing", limit=5, max_tokens=50, content_mode="full")
    )
    assert len(page.data.results) == 1
    assert page.first_exceeded and page.data.token_count > 50
    assert page.has_more and page.next_token
    normal = await service.search(SearchRequest(query="contract signing", limit=1))
    assert not normal.first_exceeded


# --------------------------------------------------------------------------------------------
# explain and the search log
# --------------------------------------------------------------------------------------------


async def test_explain_fields_reproduce_the_fused_score(service: SearchService) -> None:
    page = await run(service, query="contract signing", limit=10, explain=True)
    fused = []
    for h in page.data.results:
        e = h.explain
        assert e is not None and e.fusion == "adaptive"
        assert e.coverage_gain == 1.2 and e.max_lexical_share == 0.8
        assert e.lexical_weight == 1.0 and e.semantic_weight == 1.0
        # adaptive fusion: share * BM25/max + (1 - share) * min-max cosine, so within [0, 1]
        assert 0.0 <= e.fused_score <= 1.0 + 1e-9
        assert h.score == pytest.approx(e.fused_score, abs=1e-6)
        fused.append(e.fused_score)
    assert fused == sorted(fused, reverse=True)  # rank follows the fused score
    plain = await run(service, query="contract signing", limit=3)
    assert all(h.explain is None for h in plain.data.results)


async def _explained(dsn: str, search_id: int) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        return await (
            await conn.execute(
                "SELECT rank, logged_rank, chunk_id, document_path, rrf_k"
                " FROM pgrag.explain_search(%s)",
                (search_id,),
            )
        ).fetchall()


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
async def test_search_log_and_explain_search_reproduce_the_ranking(
    service: SearchService, corpus_dsn: str, mode: str
) -> None:
    page = await run(service, query="leave for employees", mode=mode, limit=4, max_tokens=2000)
    sid = page.data.search_id
    assert sid is not None
    async with await psycopg.AsyncConnection.connect(corpus_dsn) as conn:
        row = await (
            await conn.execute(
                "SELECT query, mode, scope, degraded, results, caller,"
                " query_embedding IS NOT NULL FROM pgrag.search_log WHERE id = %s",
                (sid,),
            )
        ).fetchone()
    assert row[:4] == ("leave for employees", mode, "chunks", [])
    assert [r["chunk_id"] for r in row[4]] == ids(page)
    assert row[6] == (mode != "keyword")
    rows = await _explained(corpus_dsn, sid)
    n = len(page.data.results)
    assert [r[2] for r in rows[:n]] == ids(page)
    assert (
        [r[0] for r in rows[:n]] == [r[1] for r in rows[:n]] == [h.rank for h in page.data.results]
    )
    assert [r[3] for r in rows[:n]] == paths(page)
    assert rows[0][4] == 60


async def test_explain_search_reproduces_a_later_page(
    service: SearchService, corpus_dsn: str
) -> None:
    first = await service.search(
        SearchRequest(query="leave for employees", limit=3, max_tokens=300)
    )
    second = await service.search(
        SearchRequest(
            query="leave for employees",
            limit=3,
            max_tokens=300,
            continuation_token=first.next_token,
        )
    )
    assert second.data.search_id and second.data.results
    rows = await _explained(corpus_dsn, second.data.search_id)
    n = len(second.data.results)
    assert [r[2] for r in rows[:n]] == ids(second)
    assert rows[0][0] == len(first.data.results) + 1


# --------------------------------------------------------------------------------------------
# regex timeout (its own database: a long text)
# --------------------------------------------------------------------------------------------


async def test_catastrophic_regex_hits_the_statement_timeout(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ranking, "REGEX_TIMEOUT_MS", 100)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgrag.collections (name) VALUES ('long');"
            "INSERT INTO pgrag.documents (collection_id, path, name, file_type, status)"
            " SELECT id, 'long.txt', 'long.txt', 'txt', 'ready' FROM pgrag.collections;"
        )
        conn.execute(
            "INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content, content_hash,"
            " token_count, char_start, char_end)"
            " SELECT d.id, d.collection_id, 1, %s, '\\x01'::bytea, 4000, 0, 20000"
            " FROM pgrag.documents d",
            ("word " * 4000,),
        )
    p = await _pool(dsn)
    try:
        svc = SearchService(p, HashEmbedder("hash/384"))
        with pytest.raises(PgragError) as info:
            await svc.search(SearchRequest(query=r"(.*)(.*)\2\1$", mode="regex"))
        assert info.value.code == ErrorCode.TIMEOUT
        ok = await svc.search(SearchRequest(query=r"^word", mode="regex"))  # timeout was LOCAL
        assert [h.path for h in ok.data.results] == ["long.txt"]
        async with p.connection() as conn:
            st = await (await conn.execute("SHOW statement_timeout")).fetchone()
        assert st[0] == "0"
    finally:
        await p.close()


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def test_cli_explain_prints_the_rank_table(corpus_dsn: str) -> None:
    result = CliRunner().invoke(
        cli, ["--database-url", corpus_dsn, "search", "contract signing", "--explain"]
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    for col in ("lexical", "semantic", "score"):  # each leg as `#rank score`
        assert col in out
    assert re.search(r"#1 \d+\.\d{2}", out) and re.search(r"#1 0\.\d{3}", out), out
    assert "policies/contract_signing.md" in out
    assert "hybrid search" in out
    assert "fusion: adaptive" in result.stderr and "coverage" in result.stderr
    assert "SELECT * FROM pgrag.explain_search(" in result.stderr


def test_cli_json_is_the_tool_data(corpus_dsn: str, provider: LocalE5Provider) -> None:
    result = CliRunner().invoke(
        cli, ["--database-url", corpus_dsn, "search", "sick leave", "--json", "-n", "3"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)

    async def direct() -> SearchPage:
        p = await _pool(corpus_dsn)
        try:
            return await SearchService(p, provider).search(
                SearchRequest(query="sick leave", limit=3, explain=True)
            )
        finally:
            await p.close()

    page = asyncio.run(direct())
    data = page.data.model_dump(mode="json")
    assert set(payload) - {"continuation"} == set(SearchData.model_fields) == set(data)
    assert payload["continuation"] == {
        "has_more": page.has_more,
        "token": payload["continuation"]["token"],
    }
    assert [r["chunk_id"] for r in payload["results"]] == ids(page)
    assert set(payload["results"][0]) == set(SearchHit.model_fields)
    assert payload["results"] == data["results"]
    assert payload["total_matches"] == data["total_matches"]
    assert payload["mode"] == "hybrid" and payload["search_id"] != data["search_id"]
