"""Parsing the ranges agents pass: page/slide lists ("1-5,8") and A1 cell ranges ("A1:D10")."""

from __future__ import annotations

import re

from openpyxl.utils.cell import range_boundaries

from pgrag.errors import InvalidArgument

MAX_NUMBERS = 10_000
_PART = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_number_list(text: str | None, field: str, upper: int) -> list[int]:
    """'1-5,8' -> [1, 2, 3, 4, 5, 8] (sorted, unique, clipped to 1..upper)."""
    if text is None or not str(text).strip():
        return list(range(1, upper + 1))
    numbers: set[int] = set()
    for part in str(text).split(","):
        m = _PART.match(part)
        if m is None:
            raise InvalidArgument(
                f"{field} '{text}' is not a list of numbers and ranges like '1-5,8'",
                detail={"field": field},
            )
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if lo < 1 or hi < lo:
            raise InvalidArgument(
                f"{field}: range '{part.strip()}' is empty or starts below 1",
                detail={"field": field},
            )
        if hi - lo > MAX_NUMBERS:
            raise InvalidArgument(
                f"{field}: range '{part.strip()}' is too large", detail={"field": field}
            )
        numbers.update(range(lo, min(hi, upper) + 1))
    if not numbers:
        raise InvalidArgument(
            f"{field} '{text}' is outside the document (it has {upper})",
            detail={"field": field, "available": upper},
        )
    return sorted(numbers)


def parse_cell_range(text: str | None) -> tuple[int, int, int | None, int | None] | None:
    """'B2:D10' -> (min_col, min_row, max_col, max_row), 1-based; 'A:C' and '2:5' work too."""
    if text is None or not text.strip():
        return None
    try:
        min_col, min_row, max_col, max_row = range_boundaries(text.strip().upper())
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(
            f"cell_range '{text}' is not an A1 range like 'A1:D10'", detail={"field": "cell_range"}
        ) from exc
    return (min_col or 1, min_row or 1, max_col, max_row)
