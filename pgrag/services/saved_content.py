"""A saved document's content and names: checks, slug and path, Markdown parsing, chunks and
the version fields the store writes. Pure functions: no database, no embedding."""

from __future__ import annotations

import hashlib
import io
import json
import re
import unicodedata
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgrag.errors import InvalidArgument
from pgrag.ingest.parsers import markdown
from pgrag.ingest.parsers.base import ParsedDocument, Source
from pgrag.ingest.prepare import build_chunks, human_size
from pgrag.store.documents import ChunkRow, DocumentFields

SAVED_ROOT = "saved"
MAX_METADATA_CHARS = 10_000

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NOT_SLUG = re.compile(r"[^\w]+", re.UNICODE)


# ---- checks and names ---------------------------------------------------------------------


def slugify(title: str, limit: int = 60) -> str:
    """Lower-case words joined by '-'; CJK and other letters are kept."""
    text = unicodedata.normalize("NFKC", title).lower()
    slug = _NOT_SLUG.sub("-", text).strip("-_")
    return slug[:limit].rstrip("-_") or "note"


def clean_folder(raw: str | None) -> str:
    """A relative folder under saved/: '/'-separated names, no '.', '..' or control chars."""
    if not raw:
        return ""
    parts = [p.strip() for p in raw.replace("\\", "/").split("/") if p.strip()]
    for part in parts:
        if part in (".", "..") or _CONTROL.search(part) or len(part) > 100:
            raise InvalidArgument(
                f"invalid folder '{raw}': use names separated by '/', without '.' or '..'",
                detail={"field": "folder"},
            )
    return "/".join(parts)


def clean_tags(tags: list[str] | None) -> list[str]:
    """Tags with their whitespace collapsed, empty and repeated ones dropped, in order."""
    seen: dict[str, None] = {}
    for tag in tags or []:
        t = " ".join(tag.split())
        if t:
            seen.setdefault(t, None)
    return list(seen)


def check_content(content: str, limit: int) -> str:
    """The content with normalised line ends, refused when empty or over `limit` chars."""
    text = content.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        raise InvalidArgument(
            "content is empty: pass the text to save", detail={"field": "content"}
        )
    if len(text) > limit:
        raise InvalidArgument(
            f"content has {len(text)} characters; the limit is {limit}: split it into several "
            "documents or shorten it",
            detail={"field": "content", "chars": len(text), "max_chars": limit},
        )
    return text


def check_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """Small JSON metadata, as stored (values JSON cannot hold become strings)."""
    meta = metadata or {}
    if len(json.dumps(meta, ensure_ascii=False, default=str)) > MAX_METADATA_CHARS:
        raise InvalidArgument(
            f"metadata is larger than {MAX_METADATA_CHARS} characters as JSON: keep it small",
            detail={"field": "metadata"},
        )
    stored: dict[str, Any] = json.loads(json.dumps(meta, default=str))
    return stored


def paths_for(doc_id: uuid.UUID, title: str, folder: str) -> tuple[str, str, str]:
    """(path, documents.folder, name) of a saved document."""
    doc_folder = f"{SAVED_ROOT}/{folder}" if folder else SAVED_ROOT
    name = f"{slugify(title)}-{doc_id.hex[:12]}.md"
    return f"{doc_folder}/{name}", doc_folder, name


def parse_content(content: str) -> ParsedDocument:
    """Parse with the Markdown parser files go through, so saved notes get the same
    sections, headings and chunk offsets."""
    return markdown.parse(Source(Path("content.md"), io.BytesIO(content.encode("utf-8"))))


# ---- versions -----------------------------------------------------------------------------


def prepare(
    content: str, title: str, chunk_tokens: int, overlap: int, context_tokens: int
) -> tuple[ParsedDocument, list[ChunkRow]]:
    """Parse and chunk as ingestion does (CPU work: run it in a thread)."""
    parsed = parse_content(content)
    return parsed, build_chunks(parsed, title, chunk_tokens, overlap, context_tokens)


def version_fields(
    *,
    path: str,
    folder: str,
    name: str,
    content: str,
    title: str,
    parsed: ParsedDocument,
    created: datetime,
    meta: dict[str, Any],
) -> DocumentFields:
    """The document row of a new version (its outline as ingestion would cache it)."""
    now = datetime.now(UTC)
    size = len(content.encode("utf-8"))
    return DocumentFields(
        path=path,
        folder=folder,
        name=name,
        file_type="md",
        size_bytes=size,
        content_hash=hashlib.sha256(content.encode("utf-8")).hexdigest(),
        title=title,
        author=None,
        created_at=created,
        modified_at=now,
        outline={
            **parsed.outline,
            "type": "md",
            "file_size": human_size(size),
            "size_bytes": size,
            "title": title,
            "author": None,
            "created": created.isoformat(),
            "modified": now.isoformat(),
            "saved": True,
        },
        metadata=meta,
    )
