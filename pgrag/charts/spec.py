"""Reading a chart request leniently: chart type aliases and mapping / option keys in any
spelling, each reading that differs from what was sent noted as a correction."""

from __future__ import annotations

import re
from typing import Any

from pgrag.charts.models import CHART_TYPES, Fixes
from pgrag.errors import InvalidArgument

TYPE_ALIASES = {
    "bar": "bar",
    "bars": "bar",
    "column": "bar",
    "columns": "bar",
    "histogram": "bar",
    "line": "line",
    "lines": "line",
    "area": "line",
    "timeseries": "line",
    "pie": "pie",
    "donut": "pie",
    "doughnut": "pie",
    "ring": "pie",
    "scatter": "scatter",
    "point": "scatter",
    "points": "scatter",
    "bubble": "scatter",
    "graph": "graph",
    "network": "graph",
    "relation": "graph",
    "relations": "graph",
    "force": "graph",
    "knowledgegraph": "graph",
}
MAPPING_KEYS = {
    "x": "x",
    "xaxis": "x",
    "category": "x",
    "categories": "x",
    "dimension": "x",
    "y": "y",
    "ys": "y",
    "yaxis": "y",
    "measure": "y",
    "measures": "y",
    "metric": "y",
    "metrics": "y",
    "series": "series",
    "group": "series",
    "groupby": "series",
    "legend": "series",
    "color": "series",
    "name": "name",
    "label": "name",
    "value": "value",
    "values": "value",
    "size": "size",
    "symbolsize": "size",
}
OPTION_KEYS = {
    "unit": "unit",
    "stack": "stack",
    "stacked": "stack",
    "smooth": "smooth",
    "horizontal": "horizontal",
    "area": "area",
    "donut": "donut",
    "showlabels": "show_labels",
    "labels": "show_labels",
    "subtitle": "subtitle",
    "xname": "x_name",
    "yname": "y_name",
    "layout": "layout",
    "echarts": "echarts",
}
# top-level ECharts components an `options` key may set directly (deep-merged at the end)
ECHARTS_COMPONENTS = {
    "title",
    "legend",
    "grid",
    "xAxis",
    "yAxis",
    "tooltip",
    "toolbox",
    "dataZoom",
    "visualMap",
    "color",
    "backgroundColor",
    "textStyle",
    "animation",
    "animationDuration",
    "series",
}


def norm(name: str) -> str:
    """Lower case without spaces, underscores, dashes or dots: 'Sales_Amount' == 'sales amount'."""
    return re.sub(r"[\s_\-.]+", "", str(name)).casefold()


def key_of(name: str) -> str:
    """A mapping/option key in any spelling: xField, x_field, X -> x."""
    k = norm(name)
    for suffix in ("fields", "field", "column", "col", "key"):
        if k.endswith(suffix) and len(k) > len(suffix):
            k = k[: -len(suffix)]
            break
    return k


def chart_type_of(value: str, fixes: Fixes) -> tuple[str, dict[str, bool]]:
    """The chart type an alias names, and the options the alias implies (area, donut)."""
    raw = str(value or "").strip()
    k = re.sub(r"[^a-z]", "", raw.casefold()).removesuffix("chart") or raw.casefold()
    found = TYPE_ALIASES.get(k)
    if found is None:
        raise InvalidArgument(
            f"chart_type '{raw}' is not supported: use one of {', '.join(CHART_TYPES)}",
            detail={"field": "chart_type", "allowed": list(CHART_TYPES)},
        )
    if raw != found:
        fixes.add(f"chart_type '{raw}' read as '{found}'")
    implied = {
        "area": k == "area",
        "donut": k in ("donut", "doughnut", "ring"),
        "horizontal": False,
    }
    return found, implied


def normalize_mapping(mapping: dict[str, Any] | None, fixes: Fixes) -> dict[str, Any]:
    """Mapping keys in any spelling as roles; unknown keys and empty values dropped."""
    out: dict[str, Any] = {}
    for key, value in (mapping or {}).items():
        role = MAPPING_KEYS.get(key_of(key))
        if role is None:
            fixes.add(
                f"mapping.{key} is not a known role (x, y, series, name, value, size): ignored"
            )
            continue
        if value is None or value == "" or value == []:
            continue
        if role != key:
            fixes.add(f"mapping.{key} read as mapping.{role}")
        out[role] = value
    return out


def normalize_options(options: dict[str, Any] | None, fixes: Fixes) -> dict[str, Any]:
    """Known options by their canonical names; ECharts components gathered under `echarts`."""
    out: dict[str, Any] = {"echarts": {}}
    for key, value in (options or {}).items():
        known = OPTION_KEYS.get(norm(key))
        if known == "echarts":
            if isinstance(value, dict):
                out["echarts"].update(value)
            continue
        if known is not None:
            out[known] = value
            continue
        if key in ECHARTS_COMPONENTS:
            out["echarts"][key] = value
            continue
        fixes.add(f"options.{key} is not a known option: ignored")
    return out
