"""The data side of a chart: records, their fields, numbers read from text, and the field
each role (x, y, series, name, value, size) maps to, guessed when the request omits it."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from typing import Any

from pgrag.charts.models import MAX_RECORDS, Fixes
from pgrag.charts.spec import norm
from pgrag.errors import InvalidArgument

TIME_HINTS = ("date", "time", "day", "month", "year", "week", "quarter", "日期", "时间", "月", "年")
NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def to_number(value: Any) -> float | int | None:
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


def is_numeric_field(records: list[dict[str, Any]], field: str) -> bool:
    """True when every non-empty value of `field` reads as a number (and there is one)."""
    seen = numeric = 0
    for r in records:
        v = r.get(field)
        if v is None or v == "":
            continue
        seen += 1
        if to_number(v) is not None:
            numeric += 1
    return seen > 0 and numeric == seen


def field_names(records: list[dict[str, Any]]) -> list[str]:
    """Every field of any record, in first-seen order."""
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
    name = str(wanted)
    if name in fields:
        return name
    by_norm = {norm(f): f for f in fields}
    if norm(name) in by_norm:
        found = by_norm[norm(name)]
        fixes.add(f"mapping.{role} '{name}' matched field '{found}'")
        return found
    close = difflib.get_close_matches(norm(name), list(by_norm), n=1, cutoff=0.75)
    if close:
        found = by_norm[close[0]]
        fixes.add(f"mapping.{role} '{name}' matched the similar field '{found}'")
        return found
    raise InvalidArgument(
        f"mapping.{role}: the data has no field '{name}'; its fields are "
        f"{', '.join(fields) or '(none)'}",
        detail={"field": f"mapping.{role}", "missing": name, "available": fields},
    )


def read_records(data: list[Any] | None, fixes: Fixes) -> list[dict[str, Any]]:
    """The data as records with string keys ([x, y] pairs read as {x, y}), within the limit."""
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


def guess_category(records: list[dict[str, Any]], fields: list[str], exclude: set[str]) -> str:
    """The field for categories: a text field with a time-like name, else any text field,
    else a time-like name, else the first field left."""
    candidates = [f for f in fields if f not in exclude]
    if not candidates:
        raise InvalidArgument(
            "the data has no field left for the x axis / names", detail={"field": "mapping.x"}
        )
    text = [f for f in candidates if not is_numeric_field(records, f)]
    hinted = [f for f in candidates if any(h in norm(f) for h in TIME_HINTS)]
    for group in (
        [f for f in text if f in hinted],
        text,
        hinted,
        candidates,
    ):
        if group:
            return group[0]
    return candidates[0]


def numeric_fields(
    records: list[dict[str, Any]], fields: list[str], exclude: set[str]
) -> list[str]:
    """The fields holding numbers, other than `exclude`."""
    return [f for f in fields if f not in exclude and is_numeric_field(records, f)]


def numbers_of(records: list[dict[str, Any]], field: str, fixes: Fixes) -> list[float | int | None]:
    """The values of `field` as numbers (None where not one); text read as numbers is noted."""
    out: list[float | int | None] = []
    converted = False
    for r in records:
        v = r.get(field)
        n = to_number(v)
        if n is not None and not isinstance(v, int | float):
            converted = True
        out.append(n)
    if converted:
        fixes.add(f"numbers given as text in '{field}' converted")
    return out


def require_numeric(records: list[dict[str, Any]], field: str, role: str) -> None:
    """Refuse a role mapped to a field that does not hold numbers, showing a value."""
    if not is_numeric_field(records, field):
        sample = next((r.get(field) for r in records if r.get(field) not in (None, "")), None)
        raise InvalidArgument(
            f"mapping.{role}: field '{field}' is not numeric (e.g. {sample!r}); map a field "
            "holding numbers",
            detail={"field": f"mapping.{role}", "data_field": field},
        )


def hashable(value: Any) -> Any:
    """`value`, or its repr when it cannot be a dict key (a list or an object as a label)."""
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def unique(values: Iterable[Any]) -> list[Any]:
    """Distinct values in first-seen order."""
    seen: dict[Any, Any] = {}
    for v in values:
        seen.setdefault(hashable(v), v)
    return list(seen.values())


def group_by(
    records: list[dict[str, Any]], field: str | None
) -> list[tuple[Any, list[dict[str, Any]]]]:
    """(value, records) per distinct value of `field` in first-seen order; one group without it."""
    if field is None:
        return [(None, records)]
    groups: dict[Any, list[dict[str, Any]]] = {}
    labels: dict[Any, Any] = {}
    for r in records:
        key = hashable(r.get(field))
        labels.setdefault(key, r.get(field))
        groups.setdefault(key, []).append(r)
    return [(labels[k], rows) for k, rows in groups.items()]
