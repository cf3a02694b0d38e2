"""CSV/TSV: one implicit `sheet` unit (title None, `meta["implicit"]`), so `get_sheet_data`
serves CSV and spreadsheets alike and can refuse a sheet name for CSV."""

from __future__ import annotations

import csv
import io

from ._common import read_text, sheet_unit
from .base import ParsedDocument, Source
from .limits import CellBudget

_DELIMITERS = ",;\t|"
_SNIFF_CHARS = 64 * 1024


def sniff_delimiter(text: str) -> str:
    """The delimiter csv.Sniffer sees in the first lines, restricted to the usual ones
    (unrestricted, it happily picks a letter); comma when it cannot tell."""
    sample = text[:_SNIFF_CHARS]
    if len(text) > _SNIFF_CHARS and "\n" in sample:
        sample = sample[: sample.rfind("\n")]
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        return ","


def parse(src: Source) -> ParsedDocument:
    text, encoding = read_text(src)
    file_type = src.ext
    delimiter = "\t" if file_type == "tsv" else sniff_delimiter(text)
    csv.field_size_limit(16 * 1024 * 1024)  # default 128 KB rejects real exports
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    budget = CellBudget()
    rows = []
    for row in reader:
        budget.take(len(row) or 1)
        rows.append(row)
    unit = sheet_unit(1, None, rows)
    unit.meta["implicit"] = True
    return ParsedDocument(
        file_type=file_type,
        units=[unit],
        outline={
            "type": "csv",
            "rows": unit.meta["rows"],
            "columns": unit.meta["columns"],
            "delimiter": delimiter,
        },
        metadata={"encoding": encoding, "delimiter": delimiter},
    )
