"""The playground's why-not panel: for a document the caller names, what kept it out of
the results. It asks the services only: the document as the caller's scope shows it (its
status), the same search limited to that document (its best chunk, whose per-leg scores
stand next to the last result shown), and that again under the search's filters (did they
exclude it). BM25 and cosine are raw scores, comparable across the two searches;
fused scores are not (they are normalised over each search's own pool)."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from pgrag.errors import NotFound
from pgrag.search.models import SearchData, SearchFilters, SearchHit, SearchRequest
from pgrag.services import documents as docs
from pgrag.services.chunk_state import disabled_chunks
from pgrag.web.core import View


@dataclass
class WhyNot:
    ref: str
    path: str | None = None
    reasons: list[tuple[str, str]] = field(default_factory=list)  # (i18n key, detail)
    best: SearchHit | None = None  # the document's best chunk for this query
    last: SearchHit | None = None  # the last result shown
    shown_rank: int | None = None  # the document's rank when it is among the results


async def _best(view: View, req: SearchRequest, filters: SearchFilters) -> SearchHit | None:
    """The best hit of `req` under `filters` (which name one document)."""
    own = req.model_copy(update={"filters": filters, "limit": 1, "continuation_token": None})
    caller = view.signed_in
    page = await view.context.search.search(own, collection_scope=caller.scope, caller=caller.name)
    return page.data.results[0] if page.data.results else None


async def why_not(view: View, req: SearchRequest, data: SearchData, ref: str) -> WhyNot:
    out = WhyNot(ref)
    try:
        doc = await docs.find(view.context.pool, view.scope, ref)
    except NotFound:
        out.reasons.append(("why_not_visible", ref))
        return out
    out.path = doc.row.path
    out.last = data.results[-1] if data.results else None
    out.shown_rank = next((h.rank for h in data.results if h.document_id == doc.id), None)
    if out.shown_rank is not None:  # nothing kept it out: say where it is, no score table
        return out
    if doc.row.status != "ready":
        detail = f"{doc.row.status} {doc.row.error_code or ''} {doc.row.error_detail or ''}"
        out.reasons.append(("why_status", detail.strip()))
    only = [UUID(doc.id)]
    out.best = await _best(
        view, req, SearchFilters(collection=doc.row.collection, document_ids=only)
    )
    # the search's own filters, asked of the search service (never re-implemented here)
    active = req.filters.model_dump(exclude_none=True)
    if out.best is not None and active:
        filtered = req.filters.model_copy(update={"document_ids": only})
        if await _best(view, req, filtered) is None:
            out.reasons.append(("why_filter", ", ".join(f"{k}={v}" for k, v in active.items())))
    if disabled := await disabled_chunks(view.context.pool, view.scope, doc.id):
        out.reasons.append(("why_disabled", str(disabled)))
    if out.best is None:
        out.reasons.append(("why_no_match", ""))
    elif out.best.explain and out.best.explain.semantic_score is None and req.spec.semantic:
        out.reasons.append(("why_not_embedded", ""))
    if not out.reasons and out.shown_rank is None:
        out.reasons.append(("why_ranked_lower", ""))
    return out
