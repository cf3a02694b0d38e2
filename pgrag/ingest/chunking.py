"""Token-aware chunking inside one structural unit (never across pages, slides or sheets).

Text units are cut at paragraph/sentence boundaries (Latin and CJK punctuation) into chunks
of about `target` tokens with `overlap` tokens repeated; each chunk is an exact slice of the
unit body, so its offsets point into the stored text. Sheets are cut into row blocks with
the header row repeated at the top of every block.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from pgrag.ingest.parsers.base import Unit
from pgrag.tokens import count_tokens, count_tokens_many

# a segment ends after a paragraph break, a line break, or sentence-final punctuation
_SEGMENT = re.compile(r".*?(?:\n\s*\n|\n|[.!?](?=\s)|[。！？；]|$)", re.S)


@dataclass(frozen=True)
class ChunkDraft:
    content: str
    char_start: int
    char_end: int
    token_count: int
    row_start: int | None = None
    row_end: int | None = None


def _segments(body: str) -> Iterator[tuple[int, int]]:
    for m in _SEGMENT.finditer(body):
        if m.end() > m.start():
            yield m.start(), m.end()


def _split_long(body: str, start: int, end: int, target: int) -> Iterator[tuple[int, int]]:
    """A segment longer than the target (no punctuation): cut near whitespace. The step is
    guessed from the average density and then checked, since mixed Latin/CJK text is far
    denser in places than on average."""
    text = body[start:end]
    tokens = count_tokens(text)
    step = max(1, int(len(text) * target / max(tokens, 1)))
    pos = 0
    while pos < len(text):
        size = step
        while True:
            cut = min(len(text), pos + size)
            if cut < len(text):
                space = text.rfind(" ", pos + size // 2, cut)
                cut = space + 1 if space > pos else cut
            n = count_tokens(text[pos:cut])
            if n <= target or cut - pos <= 1:
                break
            size = max(1, (cut - pos) * target // n)
        yield start + pos, start + cut
        pos = cut


def _trim(body: str, start: int, end: int) -> tuple[int, int]:
    while start < end and body[start].isspace():
        start += 1
    while end > start and body[end - 1].isspace():
        end -= 1
    return start, end


def chunk_text(body: str, target: int, overlap: int) -> list[ChunkDraft]:
    pieces: list[tuple[int, int, int]] = []  # start, end, tokens
    spans = list(_segments(body))
    counts = count_tokens_many([body[s:e] for s, e in spans])
    for (s, e), n in zip(spans, counts, strict=True):
        if n > target:
            pieces.extend(
                (a, b, count_tokens(body[a:b])) for a, b in _split_long(body, s, e, target)
            )
        else:
            pieces.append((s, e, n))
    chunks: list[ChunkDraft] = []
    i = 0
    while i < len(pieces):
        j, total = i, 0
        while j < len(pieces) and (j == i or total + pieces[j][2] <= target):
            total += pieces[j][2]
            j += 1
        start, end = _trim(body, pieces[i][0], pieces[j - 1][1])
        # a chunk ending where the previous one did holds only overlap: nothing new to embed
        if end > start and not (chunks and end <= chunks[-1].char_end):
            chunks.append(ChunkDraft(body[start:end], start, end, total))
        if j >= len(pieces):
            break
        # step back over trailing pieces worth at most `overlap` tokens, but past the first
        # non-blank piece, so that the next chunk does not start where this one did
        first = i
        while first < j - 1 and body[pieces[first][0] : pieces[first][1]].isspace():
            first += 1
        k, back = j, 0
        while k - 1 > first and back + pieces[k - 1][2] <= overlap:
            back += pieces[k - 1][2]
            k -= 1
        i = k
    return chunks


def chunk_sheet(unit: Unit, target: int) -> list[ChunkDraft]:
    rows = unit.rows or []
    offsets = unit.row_offsets or []
    if len(rows) < 2:
        if unit.body.strip():
            return [
                ChunkDraft(
                    unit.body, 0, len(unit.body), count_tokens(unit.body), 1, max(len(rows), 1)
                )
            ]
        return []
    lines = unit.body.split("\n")
    header = lines[0]
    header_tokens = count_tokens(header)
    chunks: list[ChunkDraft] = []
    r = 1  # index into rows (row 2 of the sheet)
    while r < len(rows):
        if not lines[r].strip():  # empty rows start no chunk, nor end one
            r += 1
            continue
        total, first, last, kept = header_tokens, r, r, header_tokens
        while r < len(rows):
            blank = not lines[r].strip()
            n = 1 if blank else count_tokens(lines[r]) + 1
            if r > first and total + n > target:
                break
            total += n
            if not blank:
                last, kept = r, total
            r += 1
        start = offsets[first]
        end = offsets[last + 1] - 1 if last + 1 < len(offsets) else len(unit.body)
        content = header + "\n" + unit.body[start:end]
        chunks.append(ChunkDraft(content, start, end, kept, first + 1, last + 1))
    return chunks


def chunk_unit(unit: Unit, target: int, overlap: int) -> list[ChunkDraft]:
    if unit.kind == "sheet" and unit.rows is not None:
        return chunk_sheet(unit, target)
    return chunk_text(unit.body, target, overlap)
