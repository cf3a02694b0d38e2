"""An evaluation of two ranking settings side by side: every query run with the "before"
options and again with the "after" ones (fusion, weights, RRF k, threshold, rerank: the
options a case may set), each metric shown before, after and changed, per mode and per
category. A stored set's comparison is kept as one run with both summaries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from pgrag.errors import InvalidArgument
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.search.modes import SearchMode
from pgrag.services.eval_metrics import report, side_by_side
from pgrag.services.evaluation import CASE_OPTIONS, EvalQuery, run_queries

SIDES = ("before", "after")


@dataclass(frozen=True)
class Compared:
    """Both reports, and their summaries side by side."""

    before: dict[str, Any]
    after: dict[str, Any]
    options: dict[str, dict[str, Any]]  # each side's ranking options
    table: dict[str, Any]


def knob_settings(form: Mapping[str, str]) -> dict[str, dict[str, Any]] | None:
    """Each side's options from fields `before_<option>` / `after_<option>` (empty: the
    server's default), checked as a search checks them; None when no field is set."""
    if not any(form.get(f"{side}_{o}", "").strip() for side in SIDES for o in CASE_OPTIONS):
        return None
    settings: dict[str, dict[str, Any]] = {}
    for side in SIDES:
        given = {o: v.strip() for o in CASE_OPTIONS if (v := form.get(f"{side}_{o}", "")).strip()}
        try:
            req = SearchRequest(query="-", **given)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise InvalidArgument(
                f"{side}: {where}: {first.get('msg')}", detail={"side": side, "field": where}
            ) from None
        settings[side] = req.model_dump(mode="json", include=set(given))
    return settings


def _with(queries: Sequence[EvalQuery], options: dict[str, Any]) -> list[EvalQuery]:
    """The cases with one side's options over their own."""
    return [q.model_copy(update={"options": {**(q.options or {}), **options}}) for q in queries]


async def run_compared(
    service: SearchService,
    queries: Sequence[EvalQuery],
    options: dict[str, dict[str, Any]],
    *,
    modes: Sequence[SearchMode],
    collection: str | None,
) -> Compared:
    reports = []
    for side in SIDES:
        outcomes, missing = await run_queries(
            service, _with(queries, options[side]), modes=modes, collection=collection
        )
        reports.append(report(outcomes, missing))
    before, after = reports
    return Compared(before, after, options, side_by_side(before["summary"], after["summary"]))


def kept_summary(compared: Compared) -> dict[str, Any]:
    """The summary a stored run keeps: the "before" one, each mode with its "after"."""
    return {
        mode: {**s, "after": compared.after["summary"].get(mode), "options": compared.options}
        for mode, s in compared.before["summary"].items()
    }
