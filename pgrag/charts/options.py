"""The entry point: read the request leniently, build the option for its chart type, apply
the caller's own ECharts components, and refuse an option too large to send."""

from __future__ import annotations

import json
from typing import Any

from pgrag.charts.cartesian import cartesian_option
from pgrag.charts.fields import read_records
from pgrag.charts.graph import graph_option
from pgrag.charts.layout import merge
from pgrag.charts.models import MAX_OPTION_BYTES, ChartData, Fixes
from pgrag.charts.pie import pie_option
from pgrag.charts.spec import chart_type_of, normalize_mapping, normalize_options
from pgrag.errors import InvalidArgument


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
        records = read_records(data, fixes)
        if kind == "pie":
            option, used = pie_option(records, roles, opts, title, fixes)
        else:
            option, used = cartesian_option(kind, records, roles, opts, title, fixes)
    if opts["echarts"]:
        option = merge(option, opts["echarts"])
        fixes.add(f"options applied to the ECharts option: {', '.join(sorted(opts['echarts']))}")
    size = len(json.dumps(option, ensure_ascii=False, default=str).encode())
    if size > MAX_OPTION_BYTES:
        raise InvalidArgument(
            f"the chart would be {size // 1000} KB, over the {MAX_OPTION_BYTES // 1000} KB "
            "response limit: aggregate or sample the data first",
            detail={"field": "graph" if kind == "graph" else "data", "bytes": size},
        )
    return ChartData(option=option, chart_type=kind, fields=used, corrections=fixes.notes)
