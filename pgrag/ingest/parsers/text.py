"""Plain text (.txt): decoded with encoding detection and cut into estimated pages.

A text file has no pages, but `get_pages` and chunk locators need some unit smaller
than "the whole 10 MB file", so we cut ~3,000-character pages at paragraph, then line,
then word boundaries. Each cut searches only a bounded window, so this is linear.
"""

from __future__ import annotations

from ._common import read_text
from .base import ParsedDocument, Source, Unit

PAGE_CHARS = 3000
_MIN_PAGE = PAGE_CHARS // 2  # never cut a page shorter than this to find a nice boundary


def split_pages(text: str, size: int = PAGE_CHARS) -> list[str]:
    """Cut `text` into pieces of at most `size` characters, at the last blank line, else
    newline, else space within the second half of the window."""
    pages: list[str] = []
    start, n = 0, len(text)
    while start < n:
        end = start + size
        if end >= n:
            cut = n
        else:
            lo = start + min(_MIN_PAGE, size // 2)
            cut = text.rfind("\n\n", lo, end)
            if cut != -1:
                cut += 2
            else:
                cut = text.rfind("\n", lo, end)
                cut = cut + 1 if cut != -1 else text.rfind(" ", lo, end) + 1 or end
        page = text[start:cut].strip("\n")
        if page.strip() or not pages:
            pages.append(page)
        start = cut
    return pages or [""]


def parse(src: Source) -> ParsedDocument:
    text, encoding = read_text(src)
    pages = split_pages(text)
    units = [Unit(kind="page", number=i, body=body) for i, body in enumerate(pages, 1)]
    return ParsedDocument(
        file_type="txt",
        units=units,
        outline={
            "type": "txt",
            "total_pages": len(units),
            "pages_estimated": True,
            "characters": len(text),
            "lines": text.count("\n") + (1 if text and not text.endswith("\n") else 0),
        },
        metadata={"encoding": encoding},
    )
