"""Search under degraded legs, hostile queries, paging tokens, explain replay and the CLI."""

from __future__ import annotations

import asyncio
import json
import re

import psycopg
import pytest
from click.testing import CliRunner
from psycopg_pool import AsyncConnectionPool
from pydantic import ValidationError

from pgrag.cli.app import cli
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.embeddings.local import LocalE5Provider
from pgrag.errors import ErrorCode, InvalidArgument, PgragError, UpstreamError
from pgrag.search import engine
from pgrag.search.engine import SearchPage, SearchService
from pgrag.search.models import SearchData, SearchHit, SearchRequest
from tests.support.search import (
    DownEmbedder,
    GatedProvider,
    _explained,
    _pool,
    chunk_count,
    corpus_dsn,  # noqa: F401 (a fixture)
    doc_ids,  # noqa: F401 (a fixture)
    ids,
    paths,
    pool,  # noqa: F401 (a fixture)
    provider,  # noqa: F401 (a fixture)
    run,
    service,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.anyio


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
    async with await psycopg.AsyncConnection.connect(corpus_dsn) as conn:
        cur = await conn.execute("SELECT rrf_k FROM pgrag.fusion_defaults()")
        rrf_k = (await cur.fetchone())[0]
    assert rows[0][4] == rrf_k


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


async def test_catastrophic_regex_hits_the_statement_timeout(dsn: str) -> None:
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
        svc = SearchService(p, HashEmbedder("hash/384"), regex_timeout_ms=100)
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
