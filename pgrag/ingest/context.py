"""A document's context: a short description, taken from the document's own text, that every
chunk carries to BM25 and to the embedding model next to its heading. A page deep inside a
report ("Root cause") does not say which incident it is about; its document's lead does
(the site, the date, the customer). Built once per document version, bounded in tokens so
that a chunk with its heading and context still fits the model's window, and stored apart
from the chunk's text: snippets, offsets and pages stay the original text."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from pgrag.ingest.parsers.base import ParsedDocument, Unit
from pgrag.tokens import count_tokens, encoding

CONTEXT_TOKENS = 48  # default bound (cl100k tokens); 0 turns the context off
LONG_CHUNK_TOKENS = 150  # a chunk longer than this shows the model only the context's start
VECTOR_CONTEXT_TOKENS = 16  # that start
_SPACE = re.compile(r"\s+")
_MARKUP = re.compile(r"^[#>*\-\s]+", re.MULTILINE)  # Markdown heading and list marks
# where a lead may end: a sentence end in either script, or a line of its own
_SENTENCE_END = re.compile(r"(?<=[.!?])(\s|$)|[。！？；]|\n")
_NUMBERING = re.compile(r"\s\d+(\.\d+)*\.?\s*$")  # "1." of a numbered heading cut off after it


@dataclass(frozen=True)
class DocumentContext:
    """The lead, and where it comes from: chunks of `unit_index` starting before `end` hold
    (part of) it already and carry no context."""

    text: str
    unit_index: int
    end: int


def _lead(doc: ParsedDocument, titles: list[str]) -> tuple[int, int] | None:
    """The unit that introduces the document and where its lead starts: the first with
    text besides titles (a deck's title slide, a report's first page or section). Sheets
    describe themselves by their name and header row, which every row block carries."""
    for index, unit in enumerate(doc.units):
        if unit.kind == "sheet":
            return None
        start = _skip_titles(unit, [*titles, *([unit.title] if unit.title else [])])
        if unit.body[start:].strip():
            return index, start
    return None


def _skip_titles(unit: Unit, titles: list[str]) -> int:
    """Where the unit's text starts after the lines that only repeat a title."""
    pos = 0
    body = unit.body
    while pos < len(body):
        end = body.find("\n", pos)
        end = len(body) if end < 0 else end
        line = _MARKUP.sub("", body[pos:end]).strip()
        if line and line not in titles:
            break
        pos = end + 1
    return min(pos, len(body))


def _bounded(text: str, max_tokens: int) -> str:
    """The text cut to `max_tokens`: at the last sentence end inside the bound when that
    keeps at least half of it (whole lead sentences), else at the last space."""
    enc = encoding()
    ids = enc.encode_ordinary(text)
    if len(ids) <= max_tokens:
        return text
    cut: str = enc.decode(ids[:max_tokens]).rstrip("\ufffd")  # a character cut in two
    ends = [m.end() for m in _SENTENCE_END.finditer(cut)]
    if ends and ends[-1] >= len(cut) // 2:
        return _NUMBERING.sub("", cut[: ends[-1]])
    space = cut.rfind(" ")
    return cut[:space] if space >= len(cut) // 2 else cut


def document_context(doc: ParsedDocument, title: str, max_tokens: int) -> DocumentContext | None:
    """The lead of the document after its title: a subtitle, the first heading and lead
    sentence, a title slide's lines; None when the document has none or the bound is 0."""
    found = _lead(doc, [t for t in (title, doc.title) if t]) if max_tokens > 0 else None
    if found is None:
        return None
    index, start = found
    raw = _bounded(doc.units[index].body[start:], max_tokens * 2)  # before spaces collapse
    text = _bounded(_SPACE.sub(" ", _MARKUP.sub("", raw)).strip(), max_tokens).strip()
    if not text:
        return None
    return DocumentContext(text, index, start + len(raw))


def chunk_context(
    context: DocumentContext | None, unit_index: int, char_start: int | None
) -> str | None:
    """A chunk's context: the document's, unless the chunk holds the lead itself or comes
    before it (a unit of titles only, which would then hold little else)."""
    if context is None or unit_index < context.unit_index:
        return None
    if unit_index == context.unit_index and (char_start or 0) < context.end:
        return None
    return context.text


@lru_cache(maxsize=256)
def _context_start(context: str) -> str:
    return _bounded(context, VECTOR_CONTEXT_TOKENS).strip()


def vector_context(context: str | None, content: str) -> str | None:
    """What the model sees of a chunk's context: all of it next to a short chunk, its first
    VECTOR_CONTEXT_TOKENS next to a long one (BM25 sees all of it either way). A short
    section deep in a report needs the context to say what it is about; a long chunk says
    more about itself and pools the context with many tokens of its own, where the whole
    context would weigh little in its vector and still cost as many tokens to embed: in
    collections of long sections, nearly all of the context's embedding time."""
    if not context or count_tokens(content) <= LONG_CHUNK_TOKENS:
        return context
    return _context_start(context)


def embed_text(heading: str | None, context: str | None, content: str) -> str:
    """What the model sees for a chunk: its heading (title, section path), its document's
    context (vector_context), then its text. Ingestion, resume and reindex embed the same
    text, so it hashes to the same cache key and a vector is never computed twice."""
    return composed_text(heading, vector_context(context, content), content)


def composed_text(heading: str | None, shown_context: str | None, content: str) -> str:
    """embed_text given what the model sees of the context (vector_context) already."""
    head = "\n".join(p for p in (heading, shown_context) if p)
    return f"{head}\n\n{content}" if head else content
