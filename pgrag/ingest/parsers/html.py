"""HTML (.html, .htm): visible text, one `section` unit per h1-h6 heading.

We walk the tree ourselves (iteratively: deep pages must not hit the recursion limit)
instead of calling `get_text()`, because block elements must become line breaks, table
cells "a | b", and headings section boundaries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bs4 import BeautifulSoup
from bs4.dammit import EncodingDetector
from bs4.element import NavigableString, PreformattedString, Tag

from ._common import clean, decode_bytes
from .base import ParsedDocument, Source, Unit
from .limits import MAX_TEXT_BYTES

_DROP = ("script", "style", "noscript", "template", "head", "svg", "canvas", "iframe", "object")
# elements that end a line of text (h1-h6 and td/th are handled on their own)
_BLOCK = frozenset(
    (
        *("address", "article", "aside", "blockquote", "body", "br", "caption", "dd"),
        *("details", "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure"),
        *("footer", "form", "header", "hgroup", "hr", "legend", "li", "main", "nav", "ol"),
        *("option", "p", "pre", "section", "summary", "table", "tbody", "tfoot", "thead"),
        *("tr", "ul"),
    )
)
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_SPACE = re.compile(r"\s+")


@dataclass
class _Section:
    title: str | None
    level: int | None
    lines: list[str] = field(default_factory=list)


class _Collector:
    """Turns start/end/text events into sections of lines."""

    def __init__(self) -> None:
        self.sections = [_Section(None, None)]
        self.inline: list[str] = []
        self.pre = 0
        self.heading: list[str] | None = None
        self.cells: list[int] = []  # cells seen in each open <tr>

    def flush(self) -> None:
        text = "".join(self.inline)
        self.inline = []
        if self.pre:
            self.sections[-1].lines.extend(text.strip("\n").split("\n") if text.strip() else [])
            return
        text = _SPACE.sub(" ", text).strip()
        if text:
            self.sections[-1].lines.append(text)

    def text(self, s: str) -> None:
        if self.heading is not None:
            self.heading.append(s)
        else:
            self.inline.append(s)

    def start(self, tag: Tag) -> None:
        name = tag.name
        if name in _HEADINGS:
            self.flush()
            self.heading = []
        elif name in ("td", "th") and self.cells:
            if self.cells[-1]:
                self.inline.append(" | ")
            self.cells[-1] += 1
        elif name in _BLOCK:
            self.flush()
            if name == "pre":
                self.pre += 1
            elif name == "tr":
                self.cells.append(0)

    def end(self, tag: Tag) -> None:
        name = tag.name
        if name in _HEADINGS and self.heading is not None:
            title = _SPACE.sub(" ", "".join(self.heading)).strip()
            self.heading = None
            if title:
                self.sections.append(_Section(title, _HEADINGS[name], [title]))
        elif name in _BLOCK:
            self.flush()
            if name == "pre":
                self.pre -= 1
            elif name == "tr" and self.cells:
                self.cells.pop()


def _walk(root: Tag, out: _Collector) -> None:
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        if isinstance(node, NavigableString):
            if not isinstance(node, PreformattedString):  # comments, doctype, CDATA...
                out.text(str(node))
        elif isinstance(node, Tag):
            if closing:
                out.end(node)
                continue
            out.start(node)
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.contents))
    out.flush()


def parse(src: Source) -> ParsedDocument:
    data = src.read(MAX_TEXT_BYTES)
    markup: str | bytes = data
    if not EncodingDetector.find_declared_encoding(data, is_html=True):
        markup, _ = decode_bytes(data)
    soup = BeautifulSoup(markup, "lxml")
    title = clean(soup.title.get_text()) if soup.title else None
    author_tag = soup.find("meta", attrs={"name": re.compile("^author$", re.I)})
    author = clean(author_tag.get("content")) if isinstance(author_tag, Tag) else None
    for tag in soup.find_all(_DROP):
        tag.decompose()
    collector = _Collector()
    _walk(soup, collector)
    sections = collector.sections
    if not sections[0].lines and len(sections) > 1:
        sections = sections[1:]
    units = [
        Unit(
            kind="section",
            number=i,
            body="\n".join(s.lines),
            title=s.title,
            meta={"level": s.level},
        )
        for i, s in enumerate(sections, 1)
    ]
    headings = [{"title": s.title, "level": s.level} for s in sections if s.title]
    return ParsedDocument(
        file_type=src.ext or "html",
        units=units,
        title=title,
        author=author,
        outline={"type": "html", "title": title, "headings": headings},
    )
