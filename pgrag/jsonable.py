"""One conversion of Python values to what JSON can carry, for REST bodies, audit rows and
tool results: pydantic models as their JSON dump, dates as ISO 8601, anything else
unknown (UUID, Decimal, Path) as its string."""

from __future__ import annotations

from typing import Any


def jsonable(value: Any) -> Any:
    """`value` with every nested value JSON-encodable; dicts and lists keep their shape."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)
