"""Each explained hit's fused-score terms as the ranking SQL computed them, logged with the
search (search_log.score_parts), where pgrag.explain_parts reads them: the console's chart
then needs no replay of the search."""

from __future__ import annotations

from typing import Any

from pgrag.search.models import SearchHit
from pgrag.store.rows import RankedRow


def logged_parts(rows: list[RankedRow], hits: list[SearchHit]) -> list[dict[str, Any]] | None:
    """The parts of the hits the page kept; None when the ranking computed none."""
    ranked = {r.chunk_id: r for r in rows if r.fusion is not None}
    if not ranked:
        return None
    return [
        {
            "rank": h.rank,
            "chunk_id": h.chunk_id,
            "fusion": r.fusion,
            "lexical_part": r.lexical_part,
            "semantic_part": r.semantic_part,
            "fused_score": r.fused_score,
            "lexical_share": r.lexical_share,
            "semantic_cosine": r.semantic_cosine,
            "centred": r.centred,
            "chunk_lang": h.explain.chunk_lang if h.explain else None,
        }
        for h in hits
        if (r := ranked.get(h.chunk_id)) is not None
    ]
