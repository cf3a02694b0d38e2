"""The playground's why-not panel: for a document the caller names, what kept it out of
the results. It asks the services only: the document as the caller's scope shows it
(status, collection, folder, type against the search's filters), then the same search
limited to that document, whose best chunk's per-leg ranks and scores stand next to the
last result shown. BM25 and cosine are raw scores, comparable across the two searches;
fused scores are not (they are normalised over each search's own pool)."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from pgrag.db.scope import scoped_connection
from pgrag.errors import NotFound
from pgrag.search.models import SearchData, SearchFilters, SearchHit, SearchRequest
from pgrag.services import documents as docs
from pgrag.web.core import View


@dataclass
class WhyNot:
    ref: str
    path: str | None = None
    reasons: list[tuple[str, str]] = field(default_factory=list)  # (i18n key, detail)
    best: SearchHit | None = None  # the document's best chunk for this query
    last: SearchHit | None = None  # the last result shown
    shown_rank: int | None = None  # the document's rank when it is among the results


def _filter_reasons(row: dict[str, object], filters: SearchFilters) -> list[tuple[str, str]]:
    reasons = []
    if filters.collection and row["collection"] != filters.collection:
        reasons.append(("why_filter", f"collection {row['collection']} ≠ {filters.collection}"))
    folder = str(row["folder"] or "")
    if filters.folder and not (folder + "/").startswith(filters.folder + "/"):
        reasons.append(("why_filter", f"folder {folder or '/'} ∉ {filters.folder}"))
    types = filters.file_type if isinstance(filters.file_type, list) else []
    if types and row["file_type"] not in types:
        reasons.append(("why_filter", f"file_type {row['file_type']} ∉ {', '.join(types)}"))
    return reasons


async def why_not(view: View, req: SearchRequest, data: SearchData, ref: str) -> WhyNot:
    out = WhyNot(ref)
    try:
        async with scoped_connection(view.context.pool, view.scope) as conn:
            doc = await docs.resolve(conn, ref, view.scope)
    except NotFound:
        out.reasons.append(("why_not_visible", ref))
        return out
    out.path = doc.row["path"]
    out.last = data.results[-1] if data.results else None
    out.shown_rank = next((h.rank for h in data.results if h.document_id == doc.id), None)
    if doc.row["status"] != "ready":
        detail = (
            f"{doc.row['status']} {doc.row['error_code'] or ''} {doc.row['error_detail'] or ''}"
        )
        out.reasons.append(("why_status", detail.strip()))
    out.reasons += _filter_reasons(doc.row, req.filters)
    own = req.model_copy(
        update={
            "filters": SearchFilters(collection=doc.row["collection"], document_ids=[UUID(doc.id)]),
            "limit": 1,
            "continuation_token": None,
        }
    )
    caller = view.signed_in
    page = await view.context.search.search(own, collection_scope=caller.scope, caller=caller.name)
    out.best = page.data.results[0] if page.data.results else None
    if out.best is None:
        out.reasons.append(("why_no_match", ""))
    elif (
        out.best.explain
        and out.best.explain.semantic_score is None
        and req.normalised_mode != "keyword"
    ):
        out.reasons.append(("why_not_embedded", ""))
    if not out.reasons and out.shown_rank is None:
        out.reasons.append(("why_ranked_lower", ""))
    return out
