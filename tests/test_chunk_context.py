"""What a chunk carries besides its own text: the document title and the heading path of
its section (nested headings, PDF bookmarks), and its document's context (the lead after the
title), so that a chunk from deep inside a document still says where it is and what it is
about, to BM25 (weighted A) and to the embedding model alike."""

from __future__ import annotations

import os
import pathlib
import subprocess
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.embeddings.local import LocalE5Provider
from pgrag.ingest.context import CONTEXT_TOKENS, document_context, embed_text
from pgrag.ingest.parse_worker import ParseOptions
from pgrag.ingest.parsers import parse
from pgrag.ingest.parsers.base import ParsedDocument, Unit
from pgrag.ingest.pipeline import Ingestor
from pgrag.ingest.prepare import build_chunks, page_paths, section_paths
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchFilters, SearchRequest
from pgrag.settings import load_settings
from pgrag.store.documents import ChunkRow
from pgrag.tokens import count_tokens
from tests.support.commands import pgrag_cmd
from tests.support.parsers import make_docx, make_pdf

pytestmark = pytest.mark.anyio


def section(title: str | None, level: int | None) -> Unit:
    return Unit(kind="section", number=1, body="text", title=title, meta={"level": level})


def page(number: int) -> Unit:
    return Unit(kind="page", number=number, body=f"page {number} text")


def test_a_section_carries_the_titles_of_the_sections_around_it() -> None:
    units = [
        section(None, None),  # preamble
        section("1. Scope", 1),
        section("1.1 Definitions", 2),
        section("1.1.1 Goods", 3),
        section("1.2 Orders", 2),
        section("2. Prices", 1),
        section("Appendix", 1),
    ]
    assert section_paths(units) == [
        [],
        ["1. Scope"],
        ["1. Scope", "1.1 Definitions"],
        ["1. Scope", "1.1 Definitions", "1.1.1 Goods"],
        ["1. Scope", "1.2 Orders"],
        ["2. Prices"],
        ["Appendix"],
    ]


def test_a_pdf_page_carries_the_bookmarks_in_effect_and_those_starting_on_it() -> None:
    units = [page(n) for n in range(1, 6)]
    marks = [
        {"title": "1. Travel", "page": 1, "level": 1},
        {"title": "1.1 Flights", "page": 2, "level": 2},
        {"title": "1.2 Hotels", "page": 2, "level": 2},
        {"title": "2. Claims", "page": 4, "level": 1},
        {"title": "dangling", "page": None, "level": 1},
    ]
    assert page_paths(units, marks) == [
        ["1. Travel"],
        ["1. Travel", "1.1 Flights; 1.2 Hotels"],
        ["1. Travel", "1.2 Hotels"],  # no bookmark starts here: the one in effect
        ["2. Claims"],
        ["2. Claims"],
    ]


def test_chunk_headings_join_title_and_path_without_repeating_the_title() -> None:
    doc = ParsedDocument(
        file_type="md",
        units=[section("Guide", 1), section("Install", 2), section("Linux", 3)],
        title="Guide",
    )
    headings = [c.heading for c in build_chunks(doc, "Guide", 350, 40)]
    assert headings == ["Guide", "Guide / Install", "Guide / Install / Linux"]


def test_docx_and_pdf_chunks_carry_their_heading_paths(tmp_path: pathlib.Path) -> None:
    make_docx(tmp_path / "c.docx")
    doc = parse(tmp_path / "c.docx")
    headings = {c.heading for c in build_chunks(doc, doc.title or "c", 350, 40)}
    # Chapter Two is a level-2 heading under Chapter One
    assert "Supply Contract / Chapter One / Chapter Two" in headings
    make_pdf(tmp_path / "p.pdf")
    pdf = parse(tmp_path / "p.pdf")
    marks = [b for b in pdf.outline["bookmarks"] if b["page"]]
    assert marks, "the fixture PDF has bookmarks"
    chunks = build_chunks(pdf, "Report", 350, 40)
    first = next(c for c in chunks if c.page == marks[0]["page"])
    assert first.heading is not None and marks[0]["title"] in first.heading


# ---- the document context --------------------------------------------------------------

# the shape: only the summary names the site and the month; the root cause page
# explains the failure without saying which incident it is about
INCIDENT = """# Incident report IR-2025-031

## Summary

On 14 May 2025 the Wuxi plant of Kestrel Instruments lost power to its calibration line for
nine hours. The customer Huaneng Power received 38 transmitters late; 212 machines were
affected.

## Timeline

06:10 alarms on the line controller. 07:30 maintenance on site. 15:20 line restarted after
the spare part arrived from the central store.

## Root cause

The failure was caused by a cracked busbar joint in the main switchboard. Thermal cycling
loosened the bolted connection, the joint overheated and the protection relay tripped the
feeder. The joint had not been inspected with thermography since installation.

## Corrective actions

Thermographic inspection of every switchboard twice a year; torque check of bolted joints
during the annual shutdown; a spare busbar kit kept on site.
"""
OTHER_INCIDENT = """# Incident report IR-2025-017

## Summary

On 3 March 2025 the Suzhou warehouse shipped 40 pressure transmitters with the wrong
firmware to the customer Sinopec Zhenhai.

## Root cause

The firmware image on the packing station was outdated: the release process did not update
the station after the 4.2 release.
"""
QUESTION = "What caused the Wuxi outage in May?"


def incident_chunks(tmp_path: pathlib.Path, tokens: int = CONTEXT_TOKENS) -> dict[str, ChunkRow]:
    path = tmp_path / "IR-2025-031.md"
    path.write_text(INCIDENT, encoding="utf-8")
    doc = parse(path)
    chunks = build_chunks(doc, doc.title or "IR-2025-031", 350, 40, tokens)
    return {c.section or "": c for c in chunks}


def test_later_sections_carry_the_documents_lead_and_keep_their_own_text(
    tmp_path: pathlib.Path,
) -> None:
    chunks = incident_chunks(tmp_path)
    root = chunks["Root cause"]
    assert root.context is not None
    assert root.context.startswith("On 14 May 2025 the Wuxi plant of Kestrel Instruments")
    assert "Wuxi" not in root.draft.content  # the text stays the page's own
    assert root.draft.content.startswith("## Root cause")
    assert chunks["Timeline"].context == root.context == chunks["Corrective actions"].context
    # the summary holds the lead itself; the title alone comes before it
    assert chunks["Summary"].context is None
    assert chunks["Incident report IR-2025-031"].context is None
    # what the model embeds (and the cache key) holds heading, context and text
    assert embed_text(root.heading, root.context, "x") == f"{root.heading}\n{root.context}\n\nx"
    assert incident_chunks(tmp_path, 0)["Root cause"].context is None


def test_the_context_is_bounded_in_tokens_and_ends_at_a_sentence() -> None:
    lead = "Approved on 2 May 2025 by the board. " + "The plant runs three shifts a day. " * 20
    doc = ParsedDocument(
        file_type="pdf",
        units=[Unit("page", 1, "Handbook\n" + lead), Unit("page", 2, "Later page.")],
        title="Handbook",
    )
    for bound in (12, 24, 48):
        ctx = document_context(doc, "Handbook", bound)
        assert ctx is not None and count_tokens(ctx.text) <= bound
        assert ctx.text.startswith("Approved on 2 May 2025") and ctx.text.endswith(".")
    zh = ParsedDocument(
        file_type="docx",
        units=[
            Unit("section", 1, "事故报告\n\n" + "2025年5月14日，无锡工厂校准线停电九小时。" * 10)
        ],
        title="事故报告",
    )
    ctx = document_context(zh, "事故报告", 30)
    assert ctx is not None and count_tokens(ctx.text) <= 30
    assert ctx.text.startswith("2025年5月14日，无锡工厂") and ctx.text.endswith("。")


def test_a_deck_carries_its_title_slide_and_a_sheet_nothing_more() -> None:
    deck = ParsedDocument(
        file_type="pptx",
        units=[
            Unit(
                "slide", 1, "Q2 Review\nSales & Marketing\nBoard meeting, 8 July 2025", "Q2 Review"
            ),
            Unit("slide", 2, "Churn\nChurn went up to 6.8 %", "Churn"),
        ],
        title="Q2 Review",
    )
    chunks = build_chunks(deck, "Q2 Review", 350, 40)
    assert [c.context for c in chunks] == [
        None,
        "Sales & Marketing Board meeting, 8 July 2025",
    ]
    # a sheet's name (its heading) and header row (atop every row block) describe it already
    sheet = ParsedDocument(
        file_type="csv",
        units=[
            Unit("sheet", 1, "sku | site\nXR-1 | Wuxi", rows=[["sku", "site"], ["XR-1", "Wuxi"]])
        ],
    )
    assert document_context(sheet, "inventory", 48) is None


def _rows(dsn: str, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def _knowledge_base(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "IR-2025-031.md").write_text(INCIDENT, encoding="utf-8")
    (root / "IR-2025-017.md").write_text(OTHER_INCIDENT, encoding="utf-8")
    return root


async def _ingest(pool: AsyncConnectionPool, provider: Any, root: pathlib.Path, **kw: Any) -> None:
    options = ParseOptions(context_tokens=kw.pop("context_tokens", CONTEXT_TOKENS))
    summary = await Ingestor(pool, provider, parse=options, **kw).run([root])
    assert not summary.failures


async def _first_section(service: SearchService, collection: str, mode: str = "hybrid") -> str:
    """The section of the first hit from the Wuxi report."""
    req = SearchRequest(
        query=QUESTION, mode=mode, limit=10, filters=SearchFilters(collection=collection)
    )
    hits = (await service.search(req)).data.results
    first = next(h for h in hits if h.path.endswith("IR-2025-031.md"))
    return first.location.section or ""


async def test_the_context_is_stored_apart_indexed_embedded_and_explained(
    dsn: str, tmp_path: pathlib.Path
) -> None:
    provider = HashEmbedder("hash/384")
    async with open_database(load_settings(embedding_model="hash/384"), dsn=dsn) as db:
        await _ingest(db.pool, provider, _knowledge_base(tmp_path))
        rows = _rows(
            dsn,
            "SELECT c.section, c.heading, c.context, c.content, e.embedding::real[],"
            " c.tsv @@ to_tsquery('pgrag.search', 'wuxi')"
            " FROM pgrag.chunks c JOIN pgrag.embeddings e ON e.chunk_id = c.id"
            " JOIN pgrag.documents d ON d.id = c.document_id"
            " WHERE d.path = 'IR-2025-031.md'",
        )
        by_section = {r[0]: r for r in rows}
        _, heading, context, content, vector, indexed = by_section["Root cause"]
        assert context.startswith("On 14 May 2025 the Wuxi plant")
        assert indexed and "Wuxi" not in content  # BM25 finds the site on the root-cause page
        want = await provider.embed_passages([embed_text(heading, context, content)])
        assert np.array_equal(np.array(vector, dtype=np.float32), want[0])
        # pages stay the document's own text: the context is nowhere in the units
        ((body,),) = _rows(
            dsn,
            "SELECT string_agg(u.body, '') FROM pgrag.units u"
            " JOIN pgrag.documents d ON d.id = u.document_id WHERE d.path = 'IR-2025-031.md'",
        )
        assert body.count("On 14 May 2025") == 1
        service = SearchService(db.pool, provider, log_searches=True)
        req = SearchRequest(query="busbar joint Wuxi", mode="keyword", limit=3, explain=True)
        page = (await service.search(req)).data
        top = page.results[0]
        assert top.location.section == "Root cause"
        assert top.explain is not None and top.explain.document_context == context
        assert "On 14 May" not in top.preview + " ".join(s.content for s in top.snippets)
        shown = _rows(
            dsn,
            "SELECT document_context FROM pgrag.explain_search(%s) WHERE rank = 1",
            (page.search_id,),
        )
        assert shown == [(context,)]


async def test_the_root_cause_page_ranks_first_for_its_document_with_the_context(
    dsn: str, tmp_path: pathlib.Path
) -> None:
    """The issue's incident report with the bundled model, one collection without the
    context and one with it: the first hit of the report moves from the summary, which
    alone names the site and the month, to the root-cause section that answers."""
    root = _knowledge_base(tmp_path)
    provider = LocalE5Provider()
    try:
        async with open_database(load_settings(), dsn=dsn) as db:
            await _ingest(db.pool, provider, root, collection="without", context_tokens=0)
            await _ingest(db.pool, provider, root, collection="with")
            service = SearchService(db.pool, provider, log_searches=False)
            assert await _first_section(service, "without") == "Summary"
            assert await _first_section(service, "with") == "Root cause"
    finally:
        await provider.aclose()


def test_a_new_context_applies_on_change_or_on_refresh(dsn: str, tmp_path: pathlib.Path) -> None:
    """Unchanged files keep the chunks they were written with; `ingest --refresh` re-chunks
    them with the current settings."""
    root = _knowledge_base(tmp_path)
    base = ["--database-url", dsn, "--embedding-model", "hash/384"]
    root_cause = (
        "SELECT c.context FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id"
        " WHERE d.path = 'IR-2025-031.md' AND c.section = 'Root cause'"
    )

    def ingest(*args: str, tokens: str = "48") -> None:
        env = {**os.environ, "PGRAG_CHUNK_CONTEXT_TOKENS": tokens}
        cmd = pgrag_cmd(*base, "ingest", "--quiet", str(root), *args)
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr

    ingest(tokens="0")
    assert _rows(dsn, root_cause) == [(None,)]
    ingest()  # unchanged: skipped
    assert _rows(dsn, root_cause) == [(None,)]
    ingest("--refresh")
    ((context,),) = _rows(dsn, root_cause)
    assert context.startswith("On 14 May 2025 the Wuxi plant")
