"""Search end to end on a small multilingual corpus embedded by the real local model:
modes, scopes, filters, threshold, CJK, fail-soft degradation, regex, pagination and its
tokens, explain and the search log, hostile queries, and the CLI."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from pgrag.errors import ErrorCode, InvalidArgument, NotFound
from pgrag.search.engine import SearchService
from tests.support.search import (
    ALL_MAIN,
    ARCHIVE,
    EVERYTHING,
    FILES,
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
