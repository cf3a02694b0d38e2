"""What every docbench writer shares: fixed dates, text helpers and the zip normaliser
that makes two builds of an OOXML file the same bytes."""

from __future__ import annotations

import io
import re
import zipfile
from datetime import UTC, datetime
from pathlib import Path

_ZIP_TIME = (2025, 1, 1, 0, 0, 0)


def utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 9, 0, 0, tzinfo=UTC)


def squash(text: str) -> str:
    """One paragraph from an indented triple-quoted literal."""
    return " ".join(text.split())


def zh(text: str) -> str:
    """A Chinese paragraph: line breaks in the source are not word boundaries."""
    return re.sub(r"\n\s*", "", text).strip()


# ------------------------------------------------------------------------------------------
# zip normalisation: OOXML writers stamp the current time into entries and core.xml
# ------------------------------------------------------------------------------------------

_CORE_DATE = re.compile(
    rb"(<dcterms:(created|modified)\b[^>]*>)[^<]*(</dcterms:(?:created|modified)>)"
)


def normalise_ooxml(path: Path, when: datetime) -> None:
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as src:
        entries = [(info.filename, src.read(info)) for info in src.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for name, content in entries:
            if name == "docProps/core.xml":
                content = _CORE_DATE.sub(lambda m: m.group(1) + stamp + m.group(3), content)
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            dst.writestr(info, content)
    path.write_bytes(buf.getvalue())
