"""Pie and donut charts: one slice per name, repeated names summed, negative sums dropped."""

from __future__ import annotations

from typing import Any

from pgrag.charts.fields import (
    field_names,
    guess_category,
    hashable,
    numbers_of,
    numeric_fields,
    require_numeric,
    resolve_field,
)
from pgrag.charts.layout import content_top, title_block
from pgrag.charts.models import Fixes
from pgrag.errors import InvalidArgument


def _pie_fields(
    records: list[dict[str, Any]], mapping: dict[str, Any], fixes: Fixes
) -> tuple[str, str]:
    """(name field, value field): mapped (x / y are read as name / value), else guessed."""
    fields = field_names(records)
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
        name_field = guess_category(records, fields, set())
        fixes.add(f"mapping.name missing: guessed '{name_field}'")
    if value_wanted is not None:
        value_field = resolve_field(value_wanted, fields, "value", fixes)
    else:
        numeric = numeric_fields(records, fields, {name_field})
        if not numeric:
            raise InvalidArgument(
                "mapping.value missing and no numeric field for the slices: give "
                f"mapping.value; the data's fields are {', '.join(fields)}",
                detail={"field": "mapping.value", "available": fields},
            )
        value_field = numeric[0]
        fixes.add(f"mapping.value missing: guessed '{value_field}'")
    require_numeric(records, value_field, "value")
    return name_field, value_field


def _slices(
    records: list[dict[str, Any]], name_field: str, value_field: str, fixes: Fixes
) -> list[dict[str, Any]]:
    """{name, value} per distinct name, in first-seen order."""
    sums: dict[Any, float | int] = {}
    labels: dict[Any, Any] = {}
    for r, v in zip(records, numbers_of(records, value_field, fixes), strict=True):
        key = hashable(r.get(name_field))
        labels.setdefault(key, r.get(name_field))
        if v is None:
            continue
        if key in sums:
            fixes.add(f"repeated names in '{name_field}' summed")
        sums[key] = sums.get(key, 0) + v
    negative = [k for k, v in sums.items() if v < 0]
    if negative:
        fixes.add(f"negative values cannot be pie slices: dropped {len(negative)}")
    return [
        {"name": "" if labels[k] is None else str(labels[k]), "value": v}
        for k, v in sums.items()
        if v >= 0
    ]


def pie_option(
    records: list[dict[str, Any]],
    mapping: dict[str, Any],
    opts: dict[str, Any],
    title: str | None,
    fixes: Fixes,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A pie (or donut) option and the name / value fields it used."""
    name_field, value_field = _pie_fields(records, mapping, fixes)
    data = _slices(records, name_field, value_field, fixes)
    unit = opts.get("unit")
    t = title_block(title, opts)
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
        "top": content_top(t),
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
