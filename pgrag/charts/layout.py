"""Option parts every chart type shares: the title block, where the content starts below
it, axis unit labels, and the deep merge that applies a caller's own ECharts components."""

from __future__ import annotations

import copy
from typing import Any


def title_block(title: str | None, opts: dict[str, Any]) -> dict[str, Any] | None:
    """The centred title (and subtitle), or None when the request has neither."""
    if not title and not opts.get("subtitle"):
        return None
    out: dict[str, Any] = {"text": title or "", "left": "center", "top": 8}
    if opts.get("subtitle"):
        out["subtext"] = str(opts["subtitle"])
    return out


def content_top(title: dict[str, Any] | None) -> int:
    """Pixels from the top where the legend starts: below the title block, if any."""
    if title is None:
        return 8
    return 62 if title.get("subtext") else 40


def unit_label(unit: str | None) -> dict[str, Any]:
    """An axis label formatter that appends the unit (nothing without one)."""
    return {"formatter": f"{{value}} {unit}"} if unit else {}


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `extra` into `base` (dicts merge; a dict onto each item of a list of dicts,
    e.g. {"series": {"barWidth": 20}} styles every series; other values replace)."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        current = out.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            out[key] = merge(current, value)
        elif isinstance(current, list) and isinstance(value, dict):
            out[key] = [merge(c, value) if isinstance(c, dict) else c for c in current]
        else:
            out[key] = copy.deepcopy(value)
    return out
