"""A search hit as the caller sees it: snippets around the matches, the chunk's location and
context, a preview, the document's metadata. Built from rows the ranking SQL chose; the
order stays the SQL's."""

from __future__ import annotations

from dataclasses import dataclass

from pgrag import deadline
from pgrag.search.keywords import Matcher
from pgrag.search.models import (
    ContentMode,
    Context,
    Explain,
    Location,
    RowSource,
    SearchHit,
    SearchRequest,
    Snippet,
)
from pgrag.search.modes import ModeSpec, ShownScore
from pgrag.search.snippets import SnippetSource, finalise, make_snippets, summary
from pgrag.store.rows import ChunkDetail

CONTEXT_CHARS = 200  # context.before / context.after
PREVIEW_CHARS = 240
DOCUMENT_SNIPPETS = 3  # scope=documents: each document's best snippets, so a page holds several
OUTLINE_FACTS = ("total_pages", "total_slides", "total_rows", "pages_estimated")


@dataclass(frozen=True)
class HitSource:
    """One ranked row with what its hit is made of."""

    req: SearchRequest
    spec: ModeSpec
    rank: int
    chunk: ChunkDetail  # the hit's chunk
    chunks: list[ChunkDetail]  # scope=documents: the document's chunks on the page
    matcher: Matcher  # the request's, shared by all its hits
    content_mode: ContentMode


def score_of(spec: ModeSpec, e: Explain) -> float:
    """The score a hit shows: what its mode ranked by."""
    if spec.score is ShownScore.MATCHES:
        return float(e.regex_matches or 0)
    if spec.score is ShownScore.SEMANTIC:
        return round(float(e.semantic_score or 0.0), 6)
    if spec.score is ShownScore.LEXICAL and e.lexical_score is not None:
        return round(float(e.lexical_score), 6)
    return round(float(e.fused_score or 0.0), 6)


def hit_snippets(h: HitSource, max_snippets: int) -> list[Snippet]:
    """smart_extract: the matches of the query in each chunk's window, merged and capped."""
    req = h.req
    snippets: list[Snippet] = []
    for ch in h.chunks:
        deadline.check()
        w = ch.window or ch.content
        src = SnippetSource(
            text=w,
            base=ch.base,
            text_len=ch.body_len or len(w),
            lo=ch.char_start - ch.base,
            hi=ch.char_end - ch.base,
            file_id=ch.document_id,
            file_name=ch.name,
        )
        snippets += make_snippets(
            src,
            h.matcher.find(w),
            context_chars=req.context_chars,
            merge_overlapping=req.merge_overlapping,
            with_details=req.return_scoring_details,
        )
    cap = max_snippets if req.scope == "chunks" else min(max_snippets, DOCUMENT_SNIPPETS)
    return finalise(snippets, cap)


def _metadata(d: ChunkDetail) -> dict[str, object]:
    meta: dict[str, object] = {"document_type": d.file_type, "title": d.title}
    if d.author:
        meta["author"] = d.author
    if d.modified_at:
        meta["modified"] = d.modified_at.isoformat()
    for key in OUTLINE_FACTS:
        if isinstance(d.outline, dict) and key in d.outline:
            meta[key] = d.outline[key]
    return meta


def _row_source(d: ChunkDetail) -> RowSource | None:
    """A table source's row, from the document's outline (ingest/table_rows.py)."""
    found = d.outline.get("source") if isinstance(d.outline, dict) else None
    return RowSource.model_validate(found) if isinstance(found, dict) else None


def build_hit(
    h: HitSource,
    full_text: tuple[str, bool] | None,
    explain: Explain,
    *,
    max_snippets: int,
    snippet_summary: bool,
) -> SearchHit:
    d = h.chunk
    window = d.window or d.content
    lo, hi = d.char_start - d.base, d.char_end - d.base
    snippets = hit_snippets(h, max_snippets) if h.content_mode == "smart_extract" else []
    rows = f"{d.row_start}-{d.row_end}" if d.row_start is not None else None
    preview_src = snippets[0].content if snippets else d.content
    return SearchHit(
        rank=h.rank,
        document_id=d.document_id,
        chunk_id=d.id,
        name=d.name,
        path=d.path,
        score=score_of(h.spec, explain),
        location=Location(page=d.page, section=d.section, sheet=d.sheet, slide=d.slide, rows=rows),
        preview=" ".join(preview_src.split())[:PREVIEW_CHARS],
        snippets=snippets,
        matched_context=summary(snippets) if snippets and snippet_summary else None,
        content=full_text[0] if full_text else None,
        content_truncated=full_text[1] if full_text else None,
        context=Context(
            before=window[max(0, lo - CONTEXT_CHARS) : max(lo, 0)].lstrip(),
            after=window[hi : hi + CONTEXT_CHARS].rstrip(),
        ),
        metadata=_metadata(d),
        source=_row_source(d),
        explain=explain if h.req.explain else None,
    )
