"""Markdown (.md): one `section` unit per ATX (`#`) or setext heading.

A line-based scanner rather than a Markdown library: we only need heading positions,
and the body must stay the original Markdown source so chunk offsets stay exact. It
follows CommonMark where it matters: no headings inside fenced code or YAML front
matter, and a setext underline only counts after a plain paragraph.
"""

from __future__ import annotations

import re

from ._common import read_text
from .base import ParsedDocument, Source, Unit

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH = re.compile(r"^\s*(?:[-*+]\s|\d{1,9}[.)]\s|>|\||<)|^ {4,}|^\t")
_FRONT_TITLE = re.compile(r"^title:\s*['\"]?(.*?)['\"]?\s*$")


def find_headings(lines: list[str]) -> tuple[list[tuple[int, int, str]], str | None]:
    """(start line, level, title) per heading, plus a front-matter `title:` if any."""
    headings: list[tuple[int, int, str]] = []
    front_title: str | None = None
    i = 0
    if lines and lines[0].strip() == "---":
        for j in range(1, min(len(lines), 200)):
            if lines[j].strip() in ("---", "..."):
                for line in lines[1:j]:
                    m = _FRONT_TITLE.match(line)
                    if m and m.group(1):
                        front_title = m.group(1)
                i = j + 1
                break
    fence: str | None = None
    para_start: int | None = None  # first line of the current plain paragraph
    for n in range(i, len(lines)):
        line = lines[n]
        if fence is not None:
            m = _FENCE.match(line)
            closing = m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)
            if closing and not line.strip().lstrip(fence[0]):
                fence = None
            continue
        m = _FENCE.match(line)
        if m:
            fence, para_start = m.group(1), None
            continue
        if not line.strip():
            para_start = None
            continue
        m = _ATX.match(line)
        if m:
            title = (m.group(2) or "").strip()
            if title:
                headings.append((n, len(m.group(1)), title))
            para_start = None
            continue
        m = _SETEXT.match(line)
        if m:
            if para_start is not None:  # otherwise a thematic break
                title = " ".join(s.strip() for s in lines[para_start:n])
                headings.append((para_start, 1 if m.group(1)[0] == "=" else 2, title))
            para_start = None
            continue
        if para_start is None and not _NOT_PARAGRAPH.match(line):
            para_start = n
    return headings, front_title


def parse(src: Source) -> ParsedDocument:
    text, encoding = read_text(src)
    lines = text.split("\n")
    headings, front_title = find_headings(lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def body(first: int, last: int) -> str:
        return text[starts[first] : starts[last]].strip("\n")

    units: list[Unit] = []
    first_heading = headings[0][0] if headings else len(lines)
    preamble = body(0, first_heading)
    if preamble.strip() or not headings:
        units.append(Unit(kind="section", number=1, body=preamble, meta={"level": None}))
    bounds = [h[0] for h in headings[1:]] + [len(lines)] * bool(headings)
    for (start, level, title), end in zip(headings, bounds, strict=True):
        units.append(
            Unit(
                kind="section",
                number=len(units) + 1,
                body=body(start, end),
                title=title,
                meta={"level": level},
            )
        )
    doc_title = next((t for _, level, t in headings if level == 1), None) or front_title
    return ParsedDocument(
        file_type="md",
        units=units,
        title=doc_title,
        outline={
            "type": "md",
            "headings": [{"title": t, "level": lv} for _, lv, t in headings],
        },
        metadata={"encoding": encoding},
    )
