"""Turning one file into what the store writes: parsed units, chunk rows, document fields.
CPU-bound; runs in a worker thread so the event loop keeps serving."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pgrag.ingest.chunking import chunk_unit
from pgrag.ingest.parsers import parse
from pgrag.ingest.parsers.base import ParsedDocument, Unit
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

    def embed_texts(self) -> list[str]:
        """What the model sees: the heading (title, section) gives the chunk its context."""
        return [
            f"{c.heading}\n\n{c.draft.content}" if c.heading else c.draft.content
            for c in self.chunks
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


def _heading(title: str, unit: Unit) -> str:
    parts = [title]
    if unit.title and unit.title != title:
        parts.append(unit.title)
    return " / ".join(p for p in parts if p)


def build_chunks(doc: ParsedDocument, title: str, target: int, overlap: int) -> list[ChunkRow]:
    rows: list[ChunkRow] = []
    for index, unit in enumerate(doc.units):
        heading = _heading(title, unit)
        loc = _location(unit)
        for draft in chunk_unit(unit, target, overlap):
            embed_text = f"{heading}\n\n{draft.content}" if heading else draft.content
            rows.append(
                ChunkRow(
                    unit_index=index,
                    draft=draft,
                    heading=heading or None,
                    content_hash=hashlib.sha256(embed_text.encode()).digest(),
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
) -> PreparedDocument:
    """Parse and chunk; raises ParseError for files we cannot read."""
    stat = found.path.stat()
    fields = base_fields(found, content_hash, stat.st_size)
    doc = parse(found.path, ocr=ocr)
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
    }
    fields.metadata = {**doc.metadata, **fields.metadata}
    return PreparedDocument(found, fields, doc.units, build_chunks(doc, title, target, overlap))
