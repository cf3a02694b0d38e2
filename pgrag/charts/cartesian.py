"""Bar, line and scatter charts: fields for x / y / series / size, one series per y field
(and per value of the series field), then the grid, axes, zoom and bubble sizes around them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pgrag.charts.axes import frame
from pgrag.charts.fields import (
    field_names,
    group_by,
    guess_category,
    hashable,
    is_numeric_field,
    numbers_of,
    numeric_fields,
    require_numeric,
    resolve_field,
    unique,
)
from pgrag.charts.layout import content_top, title_block
from pgrag.charts.models import Fixes
from pgrag.errors import InvalidArgument


@dataclass
class Roles:
    """The data fields the chart's roles were mapped to."""

    x: str
    ys: list[str]
    series: str | None
    size: str | None


@dataclass
class Plotted:
    """The series built, their legend names, the x categories and the largest bubble size."""

    series: list[dict[str, Any]] = field(default_factory=list)
    legend: list[str] = field(default_factory=list)
    categories: list[Any] = field(default_factory=list)
    biggest: float = 0


def _x_field(
    kind: str,
    records: list[dict[str, Any]],
    fields: list[str],
    wanted: Any,
    taken: set[str],
    fixes: Fixes,
) -> str:
    """The mapped x field, else a guess: a scatter's first numeric field, else a category."""
    if wanted is not None:
        return resolve_field(wanted, fields, "x", fixes)
    if kind == "scatter":
        numeric = numeric_fields(records, fields, taken)
        x_field = numeric[0] if len(numeric) >= 2 else guess_category(records, fields, taken)
    else:
        x_field = guess_category(records, fields, taken)
    fixes.add(f"mapping.x missing: guessed '{x_field}'")
    return x_field


def _y_fields(
    records: list[dict[str, Any]], fields: list[str], wanted: Any, taken: set[str], fixes: Fixes
) -> list[str]:
    """The mapped y field(s), else every numeric field not taken by another role."""
    if wanted is not None:
        y_fields: list[str] = []
        for w in wanted if isinstance(wanted, list) else [wanted]:
            f = resolve_field(w, fields, "y", fixes)
            if f not in y_fields:
                y_fields.append(f)
        return y_fields
    y_fields = numeric_fields(records, fields, taken)
    if not y_fields:
        raise InvalidArgument(
            "mapping.y missing and no numeric field to plot: give mapping.y (a field "
            f"holding numbers); the data's fields are {', '.join(fields)}",
            detail={"field": "mapping.y", "available": fields},
        )
    fixes.add(f"mapping.y missing: plotted the numeric field(s) {', '.join(y_fields)}")
    return y_fields


def roles_of(
    kind: str, records: list[dict[str, Any]], mapping: dict[str, Any], fixes: Fixes
) -> Roles:
    """Resolve every role against the data's fields; y and size must hold numbers."""
    fields = field_names(records)
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
    x_field = _x_field(kind, records, fields, x_wanted, taken, fixes)
    y_fields = _y_fields(records, fields, y_wanted, {x_field, *taken}, fixes)
    for f in y_fields:
        require_numeric(records, f, "y")
    if size_field:
        require_numeric(records, size_field, "size")
    return Roles(x=x_field, ys=y_fields, series=series_field, size=size_field)


def _series_name(group: Any, y: str, y_count: int, series_field: str | None) -> str:
    if series_field is None:
        return y
    label = "(none)" if group is None else str(group)
    return label if y_count == 1 else f"{label} · {y}"


def scatter_series(
    records: list[dict[str, Any]], roles: Roles, x_is_value: bool, fixes: Fixes
) -> Plotted:
    """Points [x, y] (or [x, y, size] for bubbles), one series per y field and group."""
    out = Plotted()
    for group_name, rows in group_by(records, roles.series):
        for y in roles.ys:
            name = _series_name(group_name, y, len(roles.ys), roles.series)
            xs = numbers_of(rows, roles.x, fixes) if x_is_value else [r.get(roles.x) for r in rows]
            ys = numbers_of(rows, y, fixes)
            points: list[Any] = []
            sizes = numbers_of(rows, roles.size, fixes) if roles.size else None
            for i, (xv, yv) in enumerate(zip(xs, ys, strict=True)):
                if xv is None or yv is None:
                    continue
                points.append([xv, yv, sizes[i]] if sizes else [xv, yv])
            if sizes:
                out.biggest = max([out.biggest, *(abs(v) for v in sizes if v is not None)])
            out.series.append({"name": name, "type": "scatter", "data": points})
            out.legend.append(name)
    if not x_is_value:
        out.categories = unique(r.get(roles.x) for r in records)
    return out


def _aligned(
    rows: list[dict[str, Any]], y: str, roles: Roles, categories: list[Any], fixes: Fixes
) -> list[Any]:
    """A group's y values on the shared categories (long format): repeated x values summed."""
    if roles.series is None and len(categories) == len(rows):
        return numbers_of(rows, y, fixes)
    sums: dict[Any, float | int | None] = {}
    for r, v in zip(rows, numbers_of(rows, y, fixes), strict=True):
        key = hashable(r.get(roles.x))
        if v is not None:
            sums[key] = (sums.get(key) or 0) + v
        else:
            sums.setdefault(key, None)
    if roles.series is None:
        fixes.add(f"repeated x values in '{roles.x}' summed")
    return [sums.get(hashable(c)) for c in categories]


def category_series(
    kind: str,
    records: list[dict[str, Any]],
    roles: Roles,
    opts: dict[str, Any],
    horizontal: bool,
    fixes: Fixes,
) -> Plotted:
    """Bar or line series over the x categories, styled by the options."""
    out = Plotted(categories=unique(r.get(roles.x) for r in records))
    for group_name, rows in group_by(records, roles.series):
        for y in roles.ys:
            name = _series_name(group_name, y, len(roles.ys), roles.series)
            values = _aligned(rows, y, roles, out.categories, fixes)
            s: dict[str, Any] = {"name": name, "type": kind, "data": values}
            if kind == "line":
                s["smooth"] = bool(opts.get("smooth"))
                s["showSymbol"] = len(out.categories) <= 60
                s["connectNulls"] = False
                if opts.get("area"):
                    s["areaStyle"] = {}
            if opts.get("stack"):
                s["stack"] = "total"
            if opts.get("show_labels"):
                s["label"] = {"show": True, "position": "right" if horizontal else "top"}
            s["emphasis"] = {"focus": "series"}
            out.series.append(s)
            out.legend.append(name)
    return out


def cartesian_option(
    kind: str,
    records: list[dict[str, Any]],
    mapping: dict[str, Any],
    opts: dict[str, Any],
    title: str | None,
    fixes: Fixes,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A bar, line or scatter option and the fields each role was mapped to."""
    roles = roles_of(kind, records, mapping, fixes)
    horizontal = bool(opts.get("horizontal")) and kind == "bar"
    x_is_value = kind == "scatter" and is_numeric_field(records, roles.x)
    if kind == "scatter":
        plotted = scatter_series(records, roles, x_is_value, fixes)
    else:
        plotted = category_series(kind, records, roles, opts, horizontal, fixes)
    t = title_block(title, opts)
    top = content_top(t)
    option: dict[str, Any] = {}
    if t:
        option["title"] = t
    option["tooltip"] = (
        {"trigger": "item"}
        if kind == "scatter"
        else {"trigger": "axis", "axisPointer": {"type": "shadow" if kind == "bar" else "line"}}
    )
    legend = plotted.legend
    option["legend"] = {"type": "scroll", "top": top, "data": legend, "show": len(legend) > 1}
    names = (
        str(opts.get("x_name") or roles.x),
        str(opts.get("y_name") or (roles.ys[0] if len(roles.ys) == 1 else "")),
    )
    option.update(
        frame(
            kind,
            plotted.categories,
            len(legend),
            names,
            opts,
            top,
            horizontal=horizontal,
            x_is_value=x_is_value,
        )
    )
    if roles.size:  # bubbles: the third value of each point sets its size (JSON has no functions)
        option["visualMap"] = {
            "show": False,
            "dimension": 2,
            "min": 0,
            "max": plotted.biggest or 1,
            "inRange": {"symbolSize": [6, 40]},
        }
    option["series"] = plotted.series
    used: dict[str, Any] = {"x": roles.x, "y": roles.ys}
    if roles.series:
        used["series"] = roles.series
    if roles.size:
        used["size"] = roles.size
    return option, used
