"""Turning one file into what the store writes: parsed units, chunk rows, document fields.
CPU-bound and exposed to hostile files: runs in a parse worker process (parse_worker.py)."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgrag.errors import ErrorCode
from pgrag.ingest.bounds import OutputLimits
from pgrag.ingest.chunking import chunk_unit
from pgrag.ingest.context import (
    CONTEXT_TOKENS,
    chunk_context,
    composed_text,
    document_context,
    vector_context,
)
from pgrag.ingest.parsers import parse
from pgrag.ingest.parsers.base import ParsedDocument, ParseError, Unit
from pgrag.ingest.walker import FoundFile
from pgrag.store.documents import ChunkRow, DocumentFields

if TYPE_CHECKING:
    from pgrag.ingest.ocr import OcrOptions


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{n}B"


@dataclass
class PreparedDocument:
    found: FoundFile
    fields: DocumentFields
    units: list[Unit]
    chunks: list[ChunkRow]
    # what the model sees of each chunk's context (context.vector_context), decided in the
    # worker: it counts the chunk's tokens, CPU work the server's event loop must not do
    shown_contexts: list[str | None] = field(default_factory=list)

    def embed_texts(self) -> list[str]:
        """What the model sees for each chunk (context.embed_text). Short, but a large
        document's worth of string work: the server calls it in a thread."""
        shown = self.shown_contexts or [
            vector_context(c.context, c.draft.content) for c in self.chunks
        ]
        return [
            composed_text(c.heading, s, c.draft.content)
            for c, s in zip(self.chunks, shown, strict=True)
        ]


def base_fields(found: FoundFile, content_hash: str, size: int) -> DocumentFields:
    name = found.path.name
    return DocumentFields(
        path=found.rel,
        folder=found.folder,
        name=name,
        file_type=found.path.suffix.lower().lstrip(".") or "txt",
        size_bytes=size,
        content_hash=content_hash,
        title=None,
        author=None,
        created_at=None,
        modified_at=None,
        outline={},
        metadata={"root": str(found.root), "size": size},
    )


def _location(unit: Unit) -> dict[str, object]:
    if unit.kind == "page":
        return {"page": unit.number}
    if unit.kind == "section":
        return {"section": unit.title, "page": unit.meta.get("page")}
    if unit.kind == "sheet":
        return {"sheet": unit.title}
    if unit.kind == "slide":
        return {"slide": unit.number}
    return {}


def _join(title: str, path: list[str]) -> str:
    parts = [title, *(p for p in path if p and p != title)]
    return " / ".join(p for p in parts if p)


def section_paths(units: list[Unit]) -> list[list[str]]:
    """Each section's heading path: the titles of the enclosing sections (by heading level)
    and its own; a unit without a level (a preamble, a page, a sheet) keeps its own title."""
    stack: list[tuple[int, str]] = []
    paths: list[list[str]] = []
    for unit in units:
        level = unit.meta.get("level") if unit.kind == "section" else None
        if level is None or not unit.title:
            paths.append([unit.title] if unit.title else [])
            continue
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, unit.title))
        paths.append([t for _, t in stack])
    return paths


def page_paths(units: list[Unit], bookmarks: list[dict[str, Any]]) -> list[list[str]]:
    """A PDF page's heading path from its bookmarks: the sections in effect where the page
    starts, and the titles of those that start on it."""
    marks = [b for b in bookmarks if b.get("title") and isinstance(b.get("page"), int)]
    paths: list[list[str]] = []
    stack: list[tuple[int, str]] = []
    i = 0
    for unit in units:
        if unit.kind != "page":
            paths.append([unit.title] if unit.title else [])
            continue
        while i < len(marks) and marks[i]["page"] < unit.number:
            stack = [e for e in stack if e[0] < marks[i]["level"]] + [
                (marks[i]["level"], marks[i]["title"])
            ]
            i += 1
        starting = []
        while i < len(marks) and marks[i]["page"] == unit.number:
            starting.append(marks[i])
            i += 1
        if not starting:
            paths.append([t for _, t in stack])
            continue
        first = starting[0]["level"]
        outer = [t for lv, t in stack if lv < first]
        paths.append([*outer, "; ".join(b["title"] for b in starting)])
        for b in starting:
            stack = [e for e in stack if e[0] < b["level"]] + [(b["level"], b["title"])]
    return paths


def build_chunks(
    doc: ParsedDocument,
    title: str,
    target: int,
    overlap: int,
    context_tokens: int = CONTEXT_TOKENS,
    bound: Callable[[int], None] | None = None,
    shown: list[str | None] | None = None,
) -> list[ChunkRow]:
    """The document's chunks. `bound(n)` is called before the n-th chunk is added (it raises
    TOO_LARGE past the bounds.py bound, as soon as the chunks are cut); `shown`, when given,
    receives what the model sees of each chunk's context."""
    rows: list[ChunkRow] = []
    bookmarks = doc.outline.get("bookmarks") or []
    paths = page_paths(doc.units, bookmarks) if bookmarks else section_paths(doc.units)
    lead = document_context(doc, title, context_tokens)
    for index, unit in enumerate(doc.units):
        heading = _join(title, paths[index]) or None
        loc = _location(unit)
        for draft in chunk_unit(unit, target, overlap):
            if bound is not None:
                bound(len(rows) + 1)
            context = chunk_context(lead, index, draft.char_start)
            shown_context = vector_context(context, draft.content)
            if shown is not None:
                shown.append(shown_context)
            text = composed_text(heading, shown_context, draft.content)
            rows.append(
                ChunkRow(
                    unit_index=index,
                    draft=draft,
                    heading=heading,
                    context=context,
                    content_hash=hashlib.sha256(text.encode()).digest(),
                    **loc,  # type: ignore[arg-type]
                )
            )
    return rows


def prepare_file(
    found: FoundFile,
    content_hash: str,
    target: int,
    overlap: int,
    ocr: OcrOptions | None = None,
    follow_links: bool = False,
    context_tokens: int = CONTEXT_TOKENS,
    limits: OutputLimits | None = None,
) -> PreparedDocument:
    """Parse and chunk; raises ParseError for files we cannot read (OSError as UNREADABLE),
    files.UnsafeFile for links and special files, TOO_LARGE past the `limits`."""
    limits = limits or OutputLimits()
    try:
        f = found.open(follow_links=follow_links)
    except OSError as exc:
        raise ParseError(
            ErrorCode.UNREADABLE, f"cannot read the file: {exc.strerror or exc}"
        ) from None
    with f:
        stat = os.fstat(f.fileno())
        doc = parse(found.path, ocr=ocr, opened=f)
    limits.check_text(doc.units, stat.st_size)  # before chunking it
    fields = base_fields(found, content_hash, stat.st_size)
    mtime = datetime.fromtimestamp(stat.st_mtime, tz=UTC)
    title = doc.title or Path(found.rel).stem
    fields.file_type = doc.file_type or fields.file_type
    fields.title = title
    fields.author = doc.author
    fields.created_at = doc.created or mtime
    fields.modified_at = doc.modified or mtime
    fields.outline = {
        **doc.outline,
        "type": doc.outline.get("type", fields.file_type),
        "file_size": human_size(stat.st_size),
        "size_bytes": stat.st_size,
        "title": title,
        "author": doc.author,
        "created": fields.created_at.isoformat(),
        "modified": fields.modified_at.isoformat(),
        "file_modified": mtime.isoformat(),  # the file's own (the console's document page)
    }
    fields.metadata = {**doc.metadata, **fields.metadata}
    shown: list[str | None] = []
    chunks = build_chunks(
        doc,
        title,
        target,
        overlap,
        context_tokens,
        functools.partial(limits.check_chunks, file_size=stat.st_size),
        shown,
    )
    return PreparedDocument(found, fields, doc.units, chunks, shown)
