"""Word (.docx): one `section` unit per heading, with the pages each section spans.

We walk the WordprocessingML ourselves (python-docx only opens the package) because we
need paragraphs and tables in document order, the character position of every page
break, and no duplicated text-box content (a text box is stored twice, as mc:Choice
and mc:Fallback).

DOCX stores no pages. Word records where it last broke pages (`w:lastRenderedPageBreak`)
and the author may insert hard breaks (`w:br w:type="page"`, "page break before",
section breaks). When rendered breaks exist they are used alone: Word also renders a
page start after each hard break, so counting both would double-count. Without any
break, page numbers are unknown (None), never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import docx
from docx.oxml.ns import qn

from ._common import clean, to_utc
from .base import ParsedDocument, Source, Unit

_P, _TBL, _TR, _TC, _R = qn("w:p"), qn("w:tbl"), qn("w:tr"), qn("w:tc"), qn("w:r")
_T, _TAB, _BR, _CR = qn("w:t"), qn("w:tab"), qn("w:br"), qn("w:cr")
_RENDERED, _NB_HYPHEN = qn("w:lastRenderedPageBreak"), qn("w:noBreakHyphen")
_VAL, _TYPE = qn("w:val"), qn("w:type")
_BLOCK_WRAPPERS = {qn("w:sdt"), qn("w:sdtContent"), qn("w:customXml")}
_RUN_WRAPPERS = {
    qn(f"w:{t}")
    for t in (
        "hyperlink",
        "ins",
        "smartTag",
        "fldSimple",
        "customXml",
        "sdt",
        "sdtContent",
        "moveTo",
        "dir",
        "bdo",
    )
}
_HEADING_NAME = re.compile(r"^heading ([1-9])$", re.IGNORECASE)
_FALSE = ("0", "false", "off")


def _blocks(parent: Any) -> Iterator[Any]:
    """w:p and w:tbl children in document order, looking through content controls."""
    for child in parent:
        if child.tag in (_P, _TBL):
            yield child
        elif child.tag in _BLOCK_WRAPPERS:
            yield from _blocks(child)


def _children(parent: Any, tag: str) -> Iterator[Any]:
    """Table rows/cells, looking through content controls (not into nested tables)."""
    for child in parent:
        if child.tag == tag:
            yield child
        elif child.tag in _BLOCK_WRAPPERS:
            yield from _children(child, tag)


def _runs(parent: Any) -> Iterator[Any]:
    for child in parent:
        if child.tag == _R:
            yield child
        elif child.tag in _RUN_WRAPPERS:  # not w:del, w:moveFrom: deleted text
            yield from _runs(child)


class _Styles:
    """Heading level and "page break before" of paragraph styles, following basedOn."""

    def __init__(self, styles_el: Any) -> None:
        self._el = {s.get(qn("w:styleId")): s for s in styles_el.iter(qn("w:style"))}
        self._cache: dict[str | None, tuple[int | None, bool]] = {}

    def get(self, style_id: str | None) -> tuple[int | None, bool]:
        if style_id not in self._cache:
            self._cache[style_id] = self._resolve(style_id)
        return self._cache[style_id]

    def _resolve(self, style_id: str | None) -> tuple[int | None, bool]:
        level: int | None = None
        break_before: bool | None = None
        el = self._el.get(style_id)
        for _ in range(10):  # basedOn chain; bounded against cycles
            if el is None:
                break
            name_el = el.find(qn("w:name"))
            name = (name_el.get(_VAL) if name_el is not None else "") or ""
            m = _HEADING_NAME.match(name)
            ppr = el.find(qn("w:pPr"))
            if level is None:
                if ppr is not None:
                    level = _outline_level(ppr)
                if level is None and (m or name.lower() == "title"):
                    level = int(m.group(1)) if m else 0
            if break_before is None and ppr is not None:
                flag = ppr.find(qn("w:pageBreakBefore"))
                break_before = _on(flag) if flag is not None else None
            based = el.find(qn("w:basedOn"))
            el = self._el.get(based.get(_VAL)) if based is not None else None
        return (level if level is not None and level >= 0 else None), bool(break_before)


def _on(flag: Any) -> bool:
    return flag is not None and flag.get(_VAL, "true") not in _FALSE


def _outline_level(ppr: Any) -> int | None:
    el = ppr.find(qn("w:outlineLvl"))
    if el is None:
        return None
    try:
        value = int(el.get(_VAL, ""))
    except ValueError:
        return None
    if 0 <= value <= 8:
        return value + 1
    return -1  # 9: explicitly body text (e.g. "TOC Heading", based on Heading 1)


@dataclass
class _Section:
    title: str | None
    level: int | None
    page: int
    parts: list[str] = field(default_factory=list)
    length: int = 0
    page_starts: list[list[int]] = field(default_factory=list)  # [offset in body, page]


class _Builder:
    def __init__(self, rendered: bool, styles: _Styles) -> None:
        self.rendered = rendered
        self.styles = styles
        self.page = 1
        self.breaks = 0
        self.pending = 0  # breaks that take effect at the start of the next block
        self.sections = [_Section(None, None, 1, page_starts=[[0, 1]])]

    def paragraph(self, p: Any) -> tuple[str, list[int], int | None]:
        """Text, page-break positions in it, heading level."""
        ppr = p.find(qn("w:pPr"))
        style_el = ppr.find(qn("w:pStyle")) if ppr is not None else None
        level, break_before = self.styles.get(style_el.get(_VAL) if style_el is not None else None)
        if ppr is not None:
            direct = _outline_level(ppr)
            if direct is not None:
                level = direct if direct >= 0 else None
            flag = ppr.find(qn("w:pageBreakBefore"))
            break_before = _on(flag) if flag is not None else break_before
        breaks = [0] * self.pending
        self.pending = 0
        if break_before and not self.rendered:
            breaks.append(0)
        parts: list[str] = []
        length = 0
        for run in _runs(p):
            for child in run:
                tag = child.tag
                if tag == _T:
                    s = child.text or ""
                elif tag == _TAB:
                    s = "\t"
                elif tag == _BR and child.get(_TYPE) == "page":
                    if not self.rendered:
                        breaks.append(length)
                    continue
                elif tag in (_BR, _CR):
                    s = "\n"
                elif tag == _RENDERED:
                    if self.rendered:
                        breaks.append(length)
                    continue
                elif tag == _NB_HYPHEN:
                    s = "-"
                else:
                    continue
                parts.append(s)
                length += len(s)
        if ppr is not None and not self.rendered:
            sect = ppr.find(qn("w:sectPr"))
            if sect is not None:
                kind = sect.find(qn("w:type"))
                if kind is None or kind.get(_VAL, "nextPage") != "continuous":
                    self.pending += 1
        return "".join(parts), breaks, level

    def table(self, tbl: Any) -> tuple[str, list[int]]:
        lines: list[str] = []
        breaks = [0] * self.pending
        self.pending = 0
        offset = 0
        for tr in _children(tbl, _TR):
            cells: list[str] = []
            turns = 0  # a row continuing on a new page has a break in each of its cells
            for tc in _children(tr, _TC):
                texts = []
                cell_breaks = 0
                for block in _blocks(tc):
                    for p in [block] if block.tag == _P else block.iter(_P):
                        text, p_breaks, _ = self.paragraph(p)
                        cell_breaks += len(p_breaks)
                        if text.strip():
                            texts.append(" ".join(text.split()))
                cells.append(" ".join(texts))
                turns = max(turns, cell_breaks)
            breaks.extend([offset] * turns)
            line = " | ".join(cells)
            lines.append(line)
            offset += len(line) + 1
        return "\n".join(lines), breaks

    def add(self, text: str, breaks: list[int], heading: int | None) -> None:
        text = text.strip()
        if heading is not None and text:
            leading = sum(1 for b in breaks if b == 0)
            self._turn(leading, None)
            self.sections.append(_Section(text, heading, self.page, page_starts=[[0, self.page]]))
            breaks = [b for b in breaks if b != 0]
        section = self.sections[-1]
        start = section.length + (2 if section.parts else 0)
        for b in breaks:
            self._turn(1, start + min(b, len(text)))
        if text:
            if section.parts:
                section.parts.append("\n\n")
            section.parts.append(text)
            section.length = start + len(text)

    def _turn(self, count: int, at: int | None) -> None:
        if not count:
            return
        self.page += count
        self.breaks += count
        if at is not None:
            starts = self.sections[-1].page_starts
            if starts[-1][0] == at:
                starts[-1][1] = self.page
            else:
                starts.append([at, self.page])


def parse(src: Source) -> ParsedDocument:
    document = docx.Document(src.file)
    body = document.element.body
    rendered = next(body.iter(_RENDERED), None) is not None
    builder = _Builder(rendered, _Styles(document.styles.element))
    for block in _blocks(body):
        if block.tag == _P:
            builder.add(*builder.paragraph(block))
        else:
            builder.add(*builder.table(block), None)
    known = builder.breaks > 0
    sections = builder.sections
    if not sections[0].parts and len(sections) > 1:
        sections = sections[1:]
    units = []
    for number, s in enumerate(sections, 1):
        text = "".join(s.parts)
        s.page = s.page_starts[0][1]  # a break at offset 0 moved the start
        meta: dict[str, Any] = {"level": s.level, "page": s.page if known else None}
        if known:
            meta["page_starts"] = [ps for ps in s.page_starts if ps[0] < len(text) or ps[0] == 0]
        units.append(Unit(kind="section", number=number, body=text, title=s.title, meta=meta))
    props = document.core_properties
    headings = [
        {"title": s.title, "level": s.level, "page": s.page if known else None}
        for s in sections
        if s.title is not None
    ]
    title = clean(props.title) or next((str(h["title"]) for h in headings if h["level"] == 0), None)
    return ParsedDocument(
        file_type="docx",
        units=units,
        title=title,
        author=clean(props.author),
        created=to_utc(props.created),
        modified=to_utc(props.modified),
        outline={
            "type": "docx",
            "headings": headings,
            "total_pages": builder.page if known else None,
            "pages_estimated": not known,
        },
        metadata={"page_breaks": "rendered" if rendered else "hard" if known else None},
    )


def page_texts(units: list[Unit]) -> list[tuple[int, str]]:
    """(page number, text) for a parsed docx, cut at the recorded page starts: what
    `get_pages` serves for Word files. One page 1 when page numbers are unknown."""
    pages: dict[int, list[str]] = {}
    for unit in units:
        starts = unit.meta.get("page_starts") or [[0, unit.meta.get("page") or 1]]
        for i, (offset, page) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(unit.body)
            piece = unit.body[offset:end].strip()
            if piece:
                pages.setdefault(page, []).append(piece)
    return [(page, "\n\n".join(parts)) for page, parts in sorted(pages.items())] or [(1, "")]
