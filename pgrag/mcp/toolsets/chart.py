"""The `chart` toolset (SPEC §5.3, seed 002 §4): `echart_generate` turns records into an
ECharts `option` a front end renders as is.

The tool fills in what a chart needs (title, tooltip, legend, grid, axis types, series types)
and corrects what a model typically gets slightly wrong (seed 002: "补默认值/纠错/规整字段"):
chart type aliases (column → bar, donut → pie), mapping keys in the seed's spelling (`xField`,
`yField`, `seriesField`), field names that differ in case, spacing or by a typo from the
data's, numbers sent as text ("1,234", "12%"), missing x / y (guessed from the data), and
graph links given as graph-toolset relationships (`from_id`/`to_id`/`type`). Every correction
is listed in the answer. Pure Python: no database, no network.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
from collections.abc import Iterable
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from pgrag.errors import InvalidArgument
from pgrag.mcp.app_state import enveloped
from pgrag.mcp.envelope import Envelope, Status

CHART_TYPES = ("bar", "line", "pie", "scatter", "graph")
MAX_RECORDS = 10_000
MAX_NODES = 2_000
MAX_LINKS = 10_000
MAX_OPTION_BYTES = 180_000  # the envelope must stay under 200 KB (SPEC §5.1)

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
TIME_HINTS = ("date", "time", "day", "month", "year", "week", "quarter", "日期", "时间", "月", "年")
NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


class ChartData(BaseModel):
    option: dict[str, Any] = Field(description="the ECharts option: pass it to chart.setOption")
    chart_type: str
    fields: dict[str, Any] = Field(
        default_factory=dict, description="the data fields each role was mapped to"
    )
    corrections: list[str] = Field(
        default_factory=list, description="what was fixed or guessed in the input"
    )


# --------------------------------------------------------------------------- corrections


class Fixes:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def add(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)


def _norm(name: str) -> str:
    """Lower case without spaces, underscores, dashes or dots: 'Sales_Amount' == 'sales amount'."""
    return re.sub(r"[\s_\-.]+", "", str(name)).casefold()


def _key(name: str) -> str:
    """A mapping/option key in any spelling: xField, x_field, X -> x."""
    k = _norm(name)
    for suffix in ("fields", "field", "column", "col", "key"):
        if k.endswith(suffix) and len(k) > len(suffix):
            k = k[: -len(suffix)]
            break
    return k


def chart_type_of(value: str, fixes: Fixes) -> tuple[str, dict[str, bool]]:
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


def _to_number(value: Any) -> float | int | None:
    """A number, or a numeric string such as '1,234', '12.5%', '$3,000', '¥ 42'; else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        s = value.strip().replace(",", "").replace("，", "").replace(" ", "")
        s = s.lstrip("$€£¥￥").rstrip("%％")
        if NUMBER_RE.match(s):
            f = float(s)
            return int(f) if f.is_integer() and "." not in s and "e" not in s.lower() else f
    return None


def _is_numeric_field(records: list[dict[str, Any]], field: str) -> bool:
    seen = numeric = 0
    for r in records:
        v = r.get(field)
        if v is None or v == "":
            continue
        seen += 1
        if _to_number(v) is not None:
            numeric += 1
    return seen > 0 and numeric == seen


def _fields(records: list[dict[str, Any]]) -> list[str]:
    out: dict[str, None] = {}
    for r in records:
        for k in r:
            out.setdefault(str(k), None)
    return list(out)


def resolve_field(wanted: Any, fields: list[str], role: str, fixes: Fixes) -> str:
    """The data field `wanted` names: exact, then ignoring case/spacing, then a close typo."""
    if isinstance(wanted, list):
        if not wanted:
            raise InvalidArgument(
                f"mapping.{role} is an empty list", detail={"field": f"mapping.{role}"}
            )
        fixes.add(f"mapping.{role} takes one field: used the first of {wanted}")
        wanted = wanted[0]
    wanted = str(wanted)
    if wanted in fields:
        return wanted
    by_norm = {_norm(f): f for f in fields}
    if _norm(wanted) in by_norm:
        found = by_norm[_norm(wanted)]
        fixes.add(f"mapping.{role} '{wanted}' matched field '{found}'")
        return found
    close = difflib.get_close_matches(_norm(wanted), list(by_norm), n=1, cutoff=0.75)
    if close:
        found = by_norm[close[0]]
        fixes.add(f"mapping.{role} '{wanted}' matched the similar field '{found}'")
        return found
    raise InvalidArgument(
        f"mapping.{role}: the data has no field '{wanted}'; its fields are "
        f"{', '.join(fields) or '(none)'}",
        detail={"field": f"mapping.{role}", "missing": wanted, "available": fields},
    )


def normalize_mapping(mapping: dict[str, Any] | None, fixes: Fixes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (mapping or {}).items():
        role = MAPPING_KEYS.get(_key(key))
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
    out: dict[str, Any] = {"echarts": {}}
    for key, value in (options or {}).items():
        known = OPTION_KEYS.get(_norm(key))
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


def _records(data: list[Any] | None, fixes: Fixes) -> list[dict[str, Any]]:
    if not data:
        raise InvalidArgument(
            "data is required for this chart type: a list of records such as "
            '[{"month": "Jan", "sales": 10}]',
            detail={"field": "data"},
        )
    if len(data) > MAX_RECORDS:
        raise InvalidArgument(
            f"data has {len(data)} records; at most {MAX_RECORDS}: aggregate first",
            detail={"field": "data", "records": len(data)},
        )
    out = []
    for i, r in enumerate(data):
        if isinstance(r, dict):
            out.append({str(k): v for k, v in r.items()})
        elif isinstance(r, list | tuple) and len(r) >= 2:
            out.append({"x": r[0], "y": r[1]})
            fixes.add("data rows given as [x, y] pairs read as records {x, y}")
        else:
            raise InvalidArgument(
                f"data[{i}] is not a record (a JSON object of field: value)",
                detail={"field": f"data[{i}]"},
            )
    return out


def _guess_category(records: list[dict[str, Any]], fields: list[str], exclude: set[str]) -> str:
    candidates = [f for f in fields if f not in exclude]
    if not candidates:
        raise InvalidArgument(
            "the data has no field left for the x axis / names", detail={"field": "mapping.x"}
        )
    text = [f for f in candidates if not _is_numeric_field(records, f)]
    hinted = [f for f in candidates if any(h in _norm(f) for h in TIME_HINTS)]
    for group in (
        [f for f in text if f in hinted],
        text,
        hinted,
        candidates,
    ):
        if group:
            return group[0]
    return candidates[0]


def _numeric_fields(
    records: list[dict[str, Any]], fields: list[str], exclude: set[str]
) -> list[str]:
    return [f for f in fields if f not in exclude and _is_numeric_field(records, f)]


def _numbers(records: list[dict[str, Any]], field: str, fixes: Fixes) -> list[float | int | None]:
    out: list[float | int | None] = []
    converted = False
    for r in records:
        v = r.get(field)
        n = _to_number(v)
        if n is not None and not isinstance(v, int | float):
            converted = True
        out.append(n)
    if converted:
        fixes.add(f"numbers given as text in '{field}' converted")
    return out


def _require_numeric(records: list[dict[str, Any]], field: str, role: str) -> None:
    if not _is_numeric_field(records, field):
        sample = next((r.get(field) for r in records if r.get(field) not in (None, "")), None)
        raise InvalidArgument(
            f"mapping.{role}: field '{field}' is not numeric (e.g. {sample!r}); map a field "
            "holding numbers",
            detail={"field": f"mapping.{role}", "data_field": field},
        )


# ------------------------------------------------------------------------------ builders


def _title(title: str | None, opts: dict[str, Any]) -> dict[str, Any] | None:
    if not title and not opts.get("subtitle"):
        return None
    out: dict[str, Any] = {"text": title or "", "left": "center", "top": 8}
    if opts.get("subtitle"):
        out["subtext"] = str(opts["subtitle"])
    return out


def _top(title: dict[str, Any] | None) -> int:
    if title is None:
        return 8
    return 62 if title.get("subtext") else 40


def _unit_formatter(unit: str | None) -> dict[str, Any]:
    return {"formatter": f"{{value}} {unit}"} if unit else {}


def cartesian_option(
    kind: str,
    records: list[dict[str, Any]],
    mapping: dict[str, Any],
    opts: dict[str, Any],
    title: str | None,
    fixes: Fixes,
) -> tuple[dict[str, Any], dict[str, Any]]:
    fields = _fields(records)
    if not fields:
        raise InvalidArgument("data records have no fields", detail={"field": "data"})
    series_field = (
        resolve_field(mapping["series"], fields, "series", fixes) if "series" in mapping else None
    )
    size_field = (
        resolve_field(mapping["size"], fields, "size", fixes) if "size" in mapping else None
    )
    x_wanted = mapping.get("x", mapping.get("name") if "x" not in mapping else None)
    if "x" not in mapping and "name" in mapping:
        fixes.add("mapping.name used as the x field")
    y_wanted = mapping.get("y", mapping.get("value"))
    if "y" not in mapping and "value" in mapping:
        fixes.add("mapping.value used as the y field")
    taken = {f for f in (series_field, size_field) if f}
    if x_wanted is not None:
        x_field = resolve_field(x_wanted, fields, "x", fixes)
    elif kind == "scatter":
        numeric = _numeric_fields(records, fields, taken)
        x_field = numeric[0] if len(numeric) >= 2 else _guess_category(records, fields, taken)
        fixes.add(f"mapping.x missing: guessed '{x_field}'")
    else:
        x_field = _guess_category(records, fields, taken)
        fixes.add(f"mapping.x missing: guessed '{x_field}'")
    if y_wanted is not None:
        wanted = y_wanted if isinstance(y_wanted, list) else [y_wanted]
        y_fields = []
        for w in wanted:
            f = resolve_field(w, fields, "y", fixes)
            if f not in y_fields:
                y_fields.append(f)
    else:
        y_fields = _numeric_fields(records, fields, {x_field, *taken})
        if not y_fields:
            raise InvalidArgument(
                "mapping.y missing and no numeric field to plot: give mapping.y (a field "
                f"holding numbers); the data's fields are {', '.join(fields)}",
                detail={"field": "mapping.y", "available": fields},
            )
        fixes.add(f"mapping.y missing: plotted the numeric field(s) {', '.join(y_fields)}")
    for f in y_fields:
        _require_numeric(records, f, "y")
    if size_field:
        _require_numeric(records, size_field, "size")

    unit = opts.get("unit")
    horizontal = bool(opts.get("horizontal")) and kind == "bar"
    x_is_value = kind == "scatter" and _is_numeric_field(records, x_field)
    series: list[dict[str, Any]] = []
    legend: list[str] = []
    categories: list[Any] = []
    biggest: float = 0  # the largest bubble size value
    if kind == "scatter":
        groups = _group(records, series_field)
        for group_name, rows in groups:
            for y in y_fields:
                name = _series_name(group_name, y, len(y_fields), series_field)
                xs = (
                    _numbers(rows, x_field, fixes) if x_is_value else [r.get(x_field) for r in rows]
                )
                ys = _numbers(rows, y, fixes)
                points: list[Any] = []
                sizes = _numbers(rows, size_field, fixes) if size_field else None
                for i, (xv, yv) in enumerate(zip(xs, ys, strict=True)):
                    if xv is None or yv is None:
                        continue
                    points.append([xv, yv, sizes[i]] if sizes else [xv, yv])
                if sizes:
                    biggest = max([biggest, *(abs(v) for v in sizes if v is not None)])
                series.append({"name": name, "type": "scatter", "data": points})
                legend.append(name)
        if not x_is_value:
            categories = _unique(r.get(x_field) for r in records)
    else:
        categories = _unique(r.get(x_field) for r in records)
        groups = _group(records, series_field)
        for group_name, rows in groups:
            for y in y_fields:
                name = _series_name(group_name, y, len(y_fields), series_field)
                if series_field is None and len(categories) == len(rows):
                    values: list[Any] = _numbers(rows, y, fixes)
                else:  # long format: align each group on the shared categories, sum repeats
                    sums: dict[Any, float | int | None] = {}
                    for r, v in zip(rows, _numbers(rows, y, fixes), strict=True):
                        key = _hashable(r.get(x_field))
                        if v is not None:
                            sums[key] = (sums.get(key) or 0) + v
                        else:
                            sums.setdefault(key, None)
                    if series_field is None:
                        fixes.add(f"repeated x values in '{x_field}' summed")
                    values = [sums.get(_hashable(c)) for c in categories]
                s = {"name": name, "type": kind, "data": values}
                if kind == "line":
                    s["smooth"] = bool(opts.get("smooth"))
                    s["showSymbol"] = len(categories) <= 60
                    s["connectNulls"] = False
                    if opts.get("area"):
                        s["areaStyle"] = {}
                if opts.get("stack"):
                    s["stack"] = "total"
                if opts.get("show_labels"):
                    s["label"] = {"show": True, "position": "right" if horizontal else "top"}
                s["emphasis"] = {"focus": "series"}
                series.append(s)
                legend.append(name)

    t = _title(title, opts)
    top = _top(t)
    option: dict[str, Any] = {}
    if t:
        option["title"] = t
    option["tooltip"] = (
        {"trigger": "item"}
        if kind == "scatter"
        else {"trigger": "axis", "axisPointer": {"type": "shadow" if kind == "bar" else "line"}}
    )
    option["legend"] = {"type": "scroll", "top": top, "data": legend, "show": len(legend) > 1}
    many = len(categories) > 30
    rotate = len(categories) > 8 and max((len(str(c)) for c in categories), default=0) > 6
    option["grid"] = {
        "left": "3%",
        "right": 48 if horizontal and many else "4%",
        "top": top + (36 if len(legend) > 1 else 12) + (16 if horizontal else 0),
        "bottom": 40 + (28 if rotate else 0) + (32 if many and not horizontal else 0),
        "containLabel": True,
    }
    if kind == "scatter":
        x_axis: dict[str, Any] = (
            {"type": "value", "scale": True, "boundaryGap": ["5%", "5%"]}
            if x_is_value
            else {"type": "category", "data": categories}
        )
        y_axis: dict[str, Any] = {"type": "value", "scale": True, "boundaryGap": ["5%", "5%"]}
    else:
        x_axis = {"type": "category", "data": categories, "boundaryGap": kind == "bar"}
        y_axis = {"type": "value"}
        if rotate:
            x_axis["axisLabel"] = {"rotate": 30, "hideOverlap": True}
    x_axis["name"] = str(opts.get("x_name") or x_field)
    y_axis["name"] = str(opts.get("y_name") or (y_fields[0] if len(y_fields) == 1 else ""))
    y_axis["axisLabel"] = {**y_axis.get("axisLabel", {}), **_unit_formatter(unit)}
    if not y_axis["axisLabel"]:
        del y_axis["axisLabel"]
    if horizontal:
        x_axis, y_axis = y_axis, x_axis
        y_axis["inverse"] = True  # first category on top, as read
        y_axis["nameLocation"] = "start"  # above the axis (it is inverted)
    # the horizontal axis' name goes under its labels, where the grid keeps room for it
    x_axis["nameLocation"] = "middle"
    x_axis["nameGap"] = 56 if rotate and not horizontal else 28
    option["xAxis"] = x_axis
    option["yAxis"] = y_axis
    if many and kind != "scatter":
        if horizontal:
            slider = {"type": "slider", "yAxisIndex": 0, "width": 18, "right": 8}
            option["dataZoom"] = [{"type": "inside", "yAxisIndex": 0}, slider]
        else:
            slider = {"type": "slider", "xAxisIndex": 0, "height": 18, "bottom": 8}
            option["dataZoom"] = [{"type": "inside", "xAxisIndex": 0}, slider]
    if size_field:  # bubbles: the third value of each point sets its size (JSON has no functions)
        option["visualMap"] = {
            "show": False,
            "dimension": 2,
            "min": 0,
            "max": biggest or 1,
            "inRange": {"symbolSize": [6, 40]},
        }
    option["series"] = series
    used: dict[str, Any] = {"x": x_field, "y": y_fields}
    if series_field:
        used["series"] = series_field
    if size_field:
        used["size"] = size_field
    return option, used


def pie_option(
    records: list[dict[str, Any]],
    mapping: dict[str, Any],
    opts: dict[str, Any],
    title: str | None,
    fixes: Fixes,
) -> tuple[dict[str, Any], dict[str, Any]]:
    fields = _fields(records)
    if not fields:
        raise InvalidArgument("data records have no fields", detail={"field": "data"})
    name_wanted = mapping.get("name", mapping.get("x"))
    if "name" not in mapping and "x" in mapping:
        fixes.add("mapping.x used as the pie's name field")
    value_wanted = mapping.get("value", mapping.get("y"))
    if "value" not in mapping and "y" in mapping:
        fixes.add("mapping.y used as the pie's value field")
    if name_wanted is not None:
        name_field = resolve_field(name_wanted, fields, "name", fixes)
    else:
        name_field = _guess_category(records, fields, set())
        fixes.add(f"mapping.name missing: guessed '{name_field}'")
    if value_wanted is not None:
        value_field = resolve_field(value_wanted, fields, "value", fixes)
    else:
        numeric = _numeric_fields(records, fields, {name_field})
        if not numeric:
            raise InvalidArgument(
                "mapping.value missing and no numeric field for the slices: give "
                f"mapping.value; the data's fields are {', '.join(fields)}",
                detail={"field": "mapping.value", "available": fields},
            )
        value_field = numeric[0]
        fixes.add(f"mapping.value missing: guessed '{value_field}'")
    _require_numeric(records, value_field, "value")
    sums: dict[Any, float | int] = {}
    labels: dict[Any, Any] = {}
    for r, v in zip(records, _numbers(records, value_field, fixes), strict=True):
        key = _hashable(r.get(name_field))
        labels.setdefault(key, r.get(name_field))
        if v is None:
            continue
        if key in sums:
            fixes.add(f"repeated names in '{name_field}' summed")
        sums[key] = sums.get(key, 0) + v
    negative = [k for k, v in sums.items() if v < 0]
    if negative:
        fixes.add(f"negative values cannot be pie slices: dropped {len(negative)}")
    data = [
        {"name": "" if labels[k] is None else str(labels[k]), "value": v}
        for k, v in sums.items()
        if v >= 0
    ]
    unit = opts.get("unit")
    t = _title(title, opts)
    option: dict[str, Any] = {}
    if t:
        option["title"] = t
    option["tooltip"] = {
        "trigger": "item",
        "formatter": "{a}<br/>{b}: {c}" + (f" {unit}" if unit else "") + " ({d}%)",
    }
    option["legend"] = {
        "type": "scroll",
        "orient": "vertical",
        "left": "left",
        "top": _top(t),
        "data": [d["name"] for d in data],
    }
    series: dict[str, Any] = {
        "name": str(title or value_field),
        "type": "pie",
        "radius": ["40%", "70%"] if opts.get("donut") else "60%",
        "center": ["55%", "55%"],
        "avoidLabelOverlap": True,
        "data": data,
        "label": {"show": True, "formatter": "{b}: {d}%"},
        "emphasis": {
            "itemStyle": {"shadowBlur": 10, "shadowOffsetX": 0, "shadowColor": "rgba(0, 0, 0, 0.5)"}
        },
    }
    option["series"] = [series]
    return option, {"name": name_field, "value": value_field}


def graph_option(
    graph: dict[str, Any] | None,
    records: list[Any] | None,
    opts: dict[str, Any],
    title: str | None,
    fixes: Fixes,
) -> tuple[dict[str, Any], dict[str, Any]]:
    graph = dict(graph or {})
    if not graph and records and isinstance(records[0], dict) and {"nodes"} & set(records[0]):
        graph = records[0]
        fixes.add("graph read from data[0]")
    raw_nodes = graph.get("nodes")
    raw_links = graph.get("links")
    if raw_links is None:
        for alias in ("edges", "relationships", "relations"):
            if graph.get(alias) is not None:
                raw_links = graph[alias]
                fixes.add(f"graph.{alias} read as graph.links")
                break
    if not raw_nodes and not raw_links:
        raise InvalidArgument(
            'chart_type graph needs graph.nodes (and graph.links): {"nodes": [{"id": "a", '
            '"name": "A", "category": "Person"}], "links": [{"source": "a", "target": "b"}]}',
            detail={"field": "graph.nodes"},
        )
    if len(raw_nodes or []) > MAX_NODES or len(raw_links or []) > MAX_LINKS:
        raise InvalidArgument(
            f"graph too large: at most {MAX_NODES} nodes and {MAX_LINKS} links",
            detail={"field": "graph.nodes"},
        )
    nodes: list[dict[str, Any]] = []
    index: dict[str, dict[str, Any]] = {}
    categories: list[str] = []
    for i, n in enumerate(raw_nodes or []):
        if isinstance(n, str | int | float):
            n = {"id": str(n), "name": str(n)}
        if not isinstance(n, dict):
            raise InvalidArgument(
                f"graph.nodes[{i}] is not an object", detail={"field": f"graph.nodes[{i}]"}
            )
        node_id = n.get("id", n.get("name"))
        if node_id is None or str(node_id) == "":
            raise InvalidArgument(
                f"graph.nodes[{i}] needs an id or a name", detail={"field": f"graph.nodes[{i}].id"}
            )
        node_id = str(node_id)
        if node_id in index:
            fixes.add(f"duplicate node '{node_id}' merged")
            continue
        name = n.get("name")
        if name is None:
            name = node_id
            if "id" in n:
                fixes.add("nodes without a name are labelled with their id")
        category = n.get("category", n.get("label", n.get("type", n.get("group"))))
        node: dict[str, Any] = {"id": node_id, "name": str(name)}
        if category is not None and str(category) != "":
            if str(category) not in categories:
                categories.append(str(category))
            node["category"] = categories.index(str(category))
        if _to_number(n.get("value")) is not None:
            node["value"] = _to_number(n.get("value"))
        size = _to_number(n.get("symbolSize", n.get("size")))
        if size is not None:
            node["symbolSize"] = size
        index[node_id] = node
        nodes.append(node)
    links: list[dict[str, Any]] = []
    for i, link in enumerate(raw_links or []):
        if isinstance(link, list | tuple) and len(link) >= 2:
            link = {"source": link[0], "target": link[1]}
        if not isinstance(link, dict):
            raise InvalidArgument(
                f"graph.links[{i}] is not an object", detail={"field": f"graph.links[{i}]"}
            )
        src = link.get("source", link.get("from", link.get("from_id", link.get("fromId"))))
        dst = link.get("target", link.get("to", link.get("to_id", link.get("toId"))))
        if src is None or dst is None:
            missing = "source" if src is None else "target"
            raise InvalidArgument(
                f"graph.links[{i}] needs a {missing}",
                detail={"field": f"graph.links[{i}].{missing}"},
            )
        if "source" not in link or "target" not in link:
            fixes.add("link endpoints from/to (from_id/to_id) read as source/target")
        src, dst = str(src), str(dst)
        for end in (src, dst):
            if end not in index:
                by_name = next((n for n in nodes if n["name"] == end), None)
                if by_name is not None:
                    continue
                node = {"id": end, "name": end}
                index[end] = node
                nodes.append(node)
                fixes.add(f"node '{end}' added: a link refers to it")
        src = src if src in index else next(n["id"] for n in nodes if n["name"] == src)
        dst = dst if dst in index else next(n["id"] for n in nodes if n["name"] == dst)
        out: dict[str, Any] = {"source": src, "target": dst}
        text = link.get("label", link.get("type", link.get("name")))
        if text is not None:
            out["value"] = str(text)
        links.append(out)
    layout = str(opts.get("layout") or "force").lower()
    if layout not in ("force", "circular", "none"):
        fixes.add(f"options.layout '{layout}' is not force, circular or none: used force")
        layout = "force"
    t = _title(title, opts)
    option: dict[str, Any] = {}
    if t:
        option["title"] = t
    option["tooltip"] = {"trigger": "item"}
    option["legend"] = {
        "type": "scroll",
        "top": _top(t),
        "data": categories,
        "show": bool(categories),
    }
    series: dict[str, Any] = {
        "type": "graph",
        "layout": layout,
        "roam": True,
        "draggable": layout == "force",
        "data": nodes,
        "links": links,
        "categories": [{"name": c} for c in categories],
        "label": {"show": True, "position": "right"},
        "edgeSymbol": ["none", "arrow"],
        "edgeSymbolSize": 8,
        "edgeLabel": {"show": any("value" in link for link in links), "formatter": "{c}"},
        "lineStyle": {"color": "source", "curveness": 0.1},
        "emphasis": {"focus": "adjacency", "lineStyle": {"width": 3}},
        "symbolSize": 24,
    }
    if layout == "force":
        series["force"] = {"repulsion": 220, "edgeLength": [60, 140], "gravity": 0.1}
    if layout == "circular":
        series["circular"] = {"rotateLabel": True}
    if layout == "none":
        _place_on_circle(nodes)
    option["series"] = [series]
    return option, {"nodes": len(nodes), "links": len(links), "categories": categories}


def _place_on_circle(nodes: list[dict[str, Any]]) -> None:
    """layout=none needs x/y: nodes without them go on a circle."""
    count = max(len(nodes), 1)
    for i, n in enumerate(nodes):
        n.setdefault("x", round(300 + 200 * math.cos(2 * math.pi * i / count), 2))
        n.setdefault("y", round(300 + 200 * math.sin(2 * math.pi * i / count), 2))


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def _unique(values: Iterable[Any]) -> list[Any]:
    seen: dict[Any, Any] = {}
    for v in values:
        seen.setdefault(_hashable(v), v)
    return list(seen.values())


def _group(
    records: list[dict[str, Any]], field: str | None
) -> list[tuple[Any, list[dict[str, Any]]]]:
    if field is None:
        return [(None, records)]
    groups: dict[Any, list[dict[str, Any]]] = {}
    labels: dict[Any, Any] = {}
    for r in records:
        key = _hashable(r.get(field))
        labels.setdefault(key, r.get(field))
        groups.setdefault(key, []).append(r)
    return [(labels[k], rows) for k, rows in groups.items()]


def _series_name(group: Any, y: str, y_count: int, series_field: str | None) -> str:
    if series_field is None:
        return y
    label = "(none)" if group is None else str(group)
    return label if y_count == 1 else f"{label} · {y}"


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `extra` into `base` (dicts merge; a dict onto each item of a list of dicts,
    e.g. {"series": {"barWidth": 20}} styles every series; other values replace)."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        current = out.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            out[key] = _merge(current, value)
        elif isinstance(current, list) and isinstance(value, dict):
            out[key] = [_merge(c, value) if isinstance(c, dict) else c for c in current]
        else:
            out[key] = copy.deepcopy(value)
    return out


def generate_option(
    chart_type: str,
    *,
    title: str | None = None,
    data: list[Any] | None = None,
    mapping: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    graph: dict[str, Any] | None = None,
) -> ChartData:
    """An ECharts option for `data` (or `graph`), with defaults and corrections."""
    fixes = Fixes()
    kind, implied = chart_type_of(chart_type, fixes)
    opts = normalize_options(options, fixes)
    for key, on in implied.items():
        if on:
            opts.setdefault(key, True)
    roles = normalize_mapping(mapping, fixes)
    if kind == "graph":
        option, used = graph_option(graph, data, opts, title, fixes)
    else:
        records = _records(data, fixes)
        if kind == "pie":
            option, used = pie_option(records, roles, opts, title, fixes)
        else:
            option, used = cartesian_option(kind, records, roles, opts, title, fixes)
    if opts["echarts"]:
        option = _merge(option, opts["echarts"])
        fixes.add(f"options applied to the ECharts option: {', '.join(sorted(opts['echarts']))}")
    size = len(json.dumps(option, ensure_ascii=False, default=str).encode())
    if size > MAX_OPTION_BYTES:
        raise InvalidArgument(
            f"the chart would be {size // 1000} KB, over the {MAX_OPTION_BYTES // 1000} KB "
            "response limit: aggregate or sample the data first",
            detail={"field": "graph" if kind == "graph" else "data", "bytes": size},
        )
    return ChartData(option=option, chart_type=kind, fields=used, corrections=fixes.notes)


def _result(model: type[Any]) -> Any:
    return Annotated[CallToolResult, Envelope[model]]  # type: ignore[valid-type]


def register(server: MCPServer[Any]) -> None:
    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    @enveloped("echart_generate")
    async def echart_generate(
        chart_type: Annotated[
            str,
            Field(
                min_length=1,
                max_length=40,
                description="bar | line | pie | scatter | graph (aliases such as column, "
                "area, donut, bubble, network are understood)",
            ),
        ],
        ctx: Context[Any, Any],
        title: Annotated[str | None, Field(max_length=200)] = None,
        data: Annotated[
            list[Any] | None,
            Field(
                max_length=MAX_RECORDS,
                description='records, e.g. [{"month": "Jan", "sales": 120}, ...] '
                "(not needed for graph)",
            ),
        ] = None,
        mapping: Annotated[
            dict[str, Any] | None,
            Field(
                description="which field plays which role: x (categories / x values), y (a field "
                "or a list of fields to plot), series (one series per value of this field), "
                "name + value (pie), size (bubble). Seed spellings xField/yField/seriesField "
                "work; missing roles are guessed from the data"
            ),
        ] = None,
        options: Annotated[
            dict[str, Any] | None,
            Field(
                description="unit, stack, smooth, area, horizontal, donut, show_labels, "
                "subtitle, x_name, y_name, layout (graph: force|circular|none), and any "
                "top-level ECharts component (color, legend, grid, ...) to merge in"
            ),
        ] = None,
        graph: Annotated[
            dict[str, Any] | None,
            Field(
                description='for chart_type graph: {"nodes": [{"id", "name", "category"}], '
                '"links": [{"source", "target", "label"}]}; graph-tool output (label, '
                "from_id, to_id, type) works as is"
            ),
        ] = None,
    ) -> _result(ChartData):  # type: ignore[valid-type]
        """Turn records (or a node/link graph) into an ECharts `option` ready for
        chart.setOption: fills in title, tooltip, legend, grid, axis and series types,
        matches field names loosely, guesses missing x/y fields, converts numbers sent as
        text, and lists every correction it made."""
        result = generate_option(
            chart_type, title=title, data=data, mapping=mapping, options=options, graph=graph
        )
        message = "CHART_GENERATED_WITH_CORRECTIONS" if result.corrections else "CHART_GENERATED"
        return Envelope[ChartData](data=result, status=Status(message=message))
