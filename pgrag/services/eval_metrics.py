"""An evaluation's figures: each query's outcome, hit@1, hit@3, MRR@10, location and answer
accuracy per mode, category and language pair (the report `pgrag eval --json` prints), and
two reports side by side (a before/after of two ranking settings, or of two runs)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pgrag.search.modes import DISTINCT_MODES, SearchMode

EVAL_MODES = DISTINCT_MODES


@dataclass
class Outcome:
    """One query in one mode."""

    query: str
    mode: SearchMode
    category: str
    document: str
    query_language: str
    document_language: str
    found: bool  # the expected document exists in the collection
    rank: int | None  # position of the first result from the expected document (1-based)
    location_ok: bool | None  # None when the query gives no location
    answer_ok: bool | None  # None when the query gives no answer
    first_location: dict[str, Any] | None = None  # that result's location
    top: list[str] = field(default_factory=list)  # paths of the first three results
    id: str | None = None
    # among the expected document's results, the position of the first at the expected
    # location (1: location_ok); None when none of them is
    location_rank: int | None = None
    first_chunk_id: int | None = None  # the chunk shown first for the expected document

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------
# metrics
# ------------------------------------------------------------------------------------------

METRICS = ("hit@1", "hit@3", "mrr", "location", "answer")


def metrics(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """hit@k and MRR@10 over all outcomes; location and answer accuracy over the outcomes
    that give one (a query whose document is not returned counts as wrong there too)."""
    n = len(outcomes)
    ranks = [o.rank for o in outcomes]
    loc = [o.location_ok for o in outcomes if o.location_ok is not None]
    located = [o.location_rank for o in outcomes if o.location_ok is not None]
    ans = [o.answer_ok for o in outcomes if o.answer_ok is not None]

    def ratio(values: Sequence[bool]) -> float | None:
        return round(sum(values) / len(values), 4) if values else None

    return {
        "n": n,
        "hit@1": ratio([r is not None and r <= 1 for r in ranks]),
        "hit@3": ratio([r is not None and r <= 3 for r in ranks]),
        "mrr": round(sum(1 / r for r in ranks if r) / n, 4) if n else None,
        "location": ratio(loc),
        "location_n": len(loc),
        # where the answer's chunk stands among its document's results (MRR over them)
        "location_mrr": round(sum(1 / r for r in located if r) / len(located), 4)
        if located
        else None,
        "answer": ratio(ans),
        "answer_n": len(ans),
    }


def summarise(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Per mode: overall, per category and per language pair (query → document)."""
    by_mode: dict[SearchMode, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_mode[o.mode].append(o)
    out: dict[str, Any] = {}
    for mode in sorted(by_mode, key=EVAL_MODES.index):
        group = by_mode[mode]
        cats: dict[str, list[Outcome]] = defaultdict(list)
        langs: dict[str, list[Outcome]] = defaultdict(list)
        for o in group:
            cats[o.category].append(o)
            langs[f"{o.query_language}→{o.document_language}"].append(o)
        out[mode.value] = {
            "overall": metrics(group),
            "categories": {c: metrics(v) for c, v in sorted(cats.items())},
            "languages": {k: metrics(v) for k, v in sorted(langs.items())},
        }
    return out


def report(outcomes: Sequence[Outcome], missing: Sequence[str]) -> dict[str, Any]:
    """The JSON of `pgrag eval --json` and of the benchmark."""
    return {
        "summary": summarise(outcomes),
        "missing_documents": list(missing),
        "queries": [o.as_dict() for o in outcomes],
    }


def side_by_side(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Two summaries (summarise()) per mode, overall and per category: each metric's value
    before, after and the change."""
    out: dict[str, Any] = {}
    compared = [m.value for m in EVAL_MODES if m.value in before or m.value in after]
    for mode in compared:
        b, a = before.get(mode, {}), after.get(mode, {})
        b_cats, a_cats = b.get("categories", {}), a.get("categories", {})
        out[mode] = {
            "overall": _pairs(b.get("overall"), a.get("overall")),
            "categories": {
                c: _pairs(b_cats.get(c), a_cats.get(c)) for c in sorted({*b_cats, *a_cats})
            },
        }
    return out


def _pairs(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    pairs: dict[str, Any] = {}
    for m in ("n", *METRICS):
        x = (before or {}).get(m)
        y = (after or {}).get(m)
        change = round(y - x, 4) if x is not None and y is not None else None
        pairs[m] = {"before": x, "after": y, "change": change}
    return pairs
