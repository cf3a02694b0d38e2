"""What the document context costs ingestion, counted in tokens (never timed): the context
does not move where chunks are cut, a long chunk shows the model only the start of it (BM25
all of it), so a document of long sections embeds within 5 % more tokens with the context
than without; a short section keeps the whole context, where it says what the section is
about."""

from __future__ import annotations

import pathlib

import pytest

from pgrag.db.database import open_database
from pgrag.embeddings.local import LocalE5Provider
from pgrag.ingest.context import (
    CONTEXT_TOKENS,
    LONG_CHUNK_TOKENS,
    VECTOR_CONTEXT_TOKENS,
    embed_text,
)
from pgrag.ingest.parse_worker import ParseOptions
from pgrag.ingest.parsers import parse
from pgrag.ingest.pipeline import Ingestor
from pgrag.ingest.prepare import build_chunks
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchFilters, SearchRequest
from pgrag.settings import load_settings
from pgrag.store.documents import ChunkRow
from pgrag.tokens import count_tokens

pytestmark = pytest.mark.anyio

LEAD = (
    "On 14 May 2025 the Wuxi plant of Kestrel Instruments lost power to its calibration line"
    " for nine hours; the customer Huaneng Power received 38 transmitters late."
)
# sections of their own words, long enough to be cut like the sections of most reports
TOPICS = {
    "Timeline": "alarms on the line controller, maintenance staff arriving on site, the spare"
    " part ordered from the central store and the line restarted in the afternoon",
    "Root cause": "a cracked busbar joint in the main switchboard, loosened by thermal cycling,"
    " overheated until the protection relay tripped the feeder of the calibration line",
    "Corrective actions": "thermographic inspection of every switchboard twice a year, a torque"
    " check of bolted joints during the annual shutdown and a spare busbar kit kept on site",
    "Costs": "overtime of the maintenance crew, express freight of the late transmitters and a"
    " penalty under the delivery terms of the framework agreement with the customer",
}


def _section(title: str, words: str, sentences: int) -> str:
    body = " ".join(f"Point {i} of the {title.lower()}: {words}." for i in range(1, sentences))
    return f"## {title}\n\n{body}\n"


def report(tmp_path: pathlib.Path, sentences: int = 8) -> pathlib.Path:
    """An incident report whose summary alone names the site, the date and the customer;
    its other sections hold about 40 tokens per sentence."""
    parts = ["# Incident report IR-2025-031\n", f"## Summary\n\n{LEAD}\n"]
    parts += [_section(t, w, sentences) for t, w in TOPICS.items()]
    path = tmp_path / "IR-2025-031.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def chunks(path: pathlib.Path, context_tokens: int) -> list[ChunkRow]:
    doc = parse(path)
    return build_chunks(doc, doc.title or path.stem, 350, 40, context_tokens)


def embedded_tokens(rows: list[ChunkRow]) -> int:
    return sum(count_tokens(embed_text(c.heading, c.context, c.draft.content)) for c in rows)


def test_the_context_does_not_move_where_chunks_are_cut(tmp_path: pathlib.Path) -> None:
    """Taking the context's tokens from the chunk's target would cut more chunks, each
    repeating the overlap and the heading: more tokens to embed, not fewer."""
    path = report(tmp_path, sentences=12)
    with_, without = chunks(path, CONTEXT_TOKENS), chunks(path, 0)
    assert [c.draft for c in with_] == [c.draft for c in without]
    assert any(c.draft.token_count > 300 for c in with_)  # some are cut at the target


def test_a_long_chunk_shows_the_model_the_start_of_the_context_and_bm25_all_of_it(
    tmp_path: pathlib.Path,
) -> None:
    rows = {c.section: c for c in chunks(report(tmp_path), CONTEXT_TOKENS)}
    root = rows["Root cause"]
    assert root.draft.token_count > LONG_CHUNK_TOKENS
    assert root.context is not None and root.context.startswith("On 14 May 2025 the Wuxi plant")
    assert count_tokens(root.context) > VECTOR_CONTEXT_TOKENS  # what BM25 indexes
    text = embed_text(root.heading, root.context, root.draft.content)
    head, _, content = text.partition("\n\n")
    assert content == root.draft.content
    shown = head.removeprefix(f"{root.heading}\n")
    assert root.context.startswith(shown) and "Wuxi" in shown
    assert 0 < count_tokens(shown) <= VECTOR_CONTEXT_TOKENS
    # a short section keeps the whole context: it says little about itself
    short = {c.section: c for c in chunks(report(tmp_path, sentences=2), CONTEXT_TOKENS)}
    brief = short["Root cause"]
    assert brief.context == root.context and brief.draft.token_count <= LONG_CHUNK_TOKENS
    assert embed_text(brief.heading, brief.context, brief.draft.content) == (
        f"{brief.heading}\n{brief.context}\n\n{brief.draft.content}"
    )


def test_a_document_of_long_sections_embeds_within_5_percent_more_tokens(
    tmp_path: pathlib.Path,
) -> None:
    path = report(tmp_path)
    with_, without = chunks(path, CONTEXT_TOKENS), chunks(path, 0)
    assert sum(c.context is not None for c in with_) >= 4
    ratio = embedded_tokens(with_) / embedded_tokens(without)
    assert ratio <= 1.05
    # the whole context next to every chunk, as the model saw it before: well over 5 %
    whole = sum(
        count_tokens("\n".join(p for p in (c.heading, c.context) if p) + "\n\n" + c.draft.content)
        for c in with_
    )
    assert whole / embedded_tokens(without) > 1.08


async def _first_section(service: SearchService, collection: str, query: str) -> str | None:
    req = SearchRequest(query=query, limit=10, filters=SearchFilters(collection=collection))
    hits = (await service.search(req)).data.results
    return next(h.location.section for h in hits if h.path.endswith("IR-2025-031.md"))


async def test_a_long_root_cause_section_still_ranks_first_for_its_document(
    dsn: str, tmp_path: pathlib.Path
) -> None:
    """The issue's report with long sections, the bundled model, hybrid search: without
    the context the summary, which alone names the site and the month, comes first; with
    it the section that answers, although the model sees only the start of the context."""
    root = tmp_path / "kb"
    root.mkdir()
    report(root)
    provider = LocalE5Provider()
    try:
        async with open_database(load_settings(), dsn=dsn) as db:
            for name, tokens in (("without", 0), ("with", CONTEXT_TOKENS)):
                options = ParseOptions(context_tokens=tokens)
                done = await Ingestor(db.pool, provider, collection=name, parse=options).run([root])
                assert not done.failures
            service = SearchService(db.pool, provider, log_searches=False)
            query = "What caused the Wuxi outage in May?"
            assert await _first_section(service, "without", query) == "Summary"
            assert await _first_section(service, "with", query) == "Root cause"
    finally:
        await provider.aclose()
