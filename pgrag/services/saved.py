"""Saved documents: notes and documents an agent saves, changes, deletes and finds again.

A saved document is an ordinary pgrag document with `source = 'saved'` and a path like
`saved/<folder>/<slug>-<shortid>.md`: its content is parsed as Markdown, chunked, embedded
(through the embedding cache) and written in one transaction with the same store function
ingestion uses, so search finds it like any file. Ingestion runs never remove it (they
only remove `source = 'file'` documents whose files disappeared).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field

from pgrag.config.ingest import IngestSettings
from pgrag.db.scope import scoped_connection
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.cache import embed_passages_cached
from pgrag.errors import Forbidden, InvalidArgument, NotFound
from pgrag.ingest.context import embed_text
from pgrag.ingest.parsers.base import ParsedDocument
from pgrag.services import documents as docs
from pgrag.services.ingestion import make_ingestor
from pgrag.services.saved_content import (
    check_content,
    check_metadata,
    clean_folder,
    clean_tags,
    paths_for,
    prepare,
    version_fields,
)
from pgrag.store import documents as doc_store
from pgrag.store import pages, removals
from pgrag.store import saved as store
from pgrag.store.collections import Collection
from pgrag.store.documents import ChunkRow, DocumentFields
from pgrag.store.rows import LockedSaved, SavedRow

PREVIEW_CHARS = 300


class DocumentSource(BaseModel):
    """Where the content came from (kept with the saved document as its `source`)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["web", "user", "system"] = Field("user", description="web, user or system")
    url: str | None = Field(None, max_length=2000, description="the page it came from")
    title: str | None = Field(None, max_length=500, description="the source's title")


class DocumentPatch(BaseModel):
    """The fields to change; omitted fields keep their value."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(None, min_length=1, max_length=500, description="new title")
    topic: str | None = Field(None, min_length=1, max_length=500, description="new topic")
    content: str | None = Field(
        None, min_length=1, description="new Markdown content (replaces the old content)"
    )
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(
        None, max_length=50, description="new tags (replace the old ones)"
    )
    metadata: dict[str, Any] | None = Field(None, description="new metadata (replaces)")
    folder: str | None = Field(None, max_length=300, description="move to this folder")
    source: DocumentSource | None = None


@dataclass(frozen=True)
class NewDocument:
    """What save_document was given (content, and topic or title, are required)."""

    content: str
    topic: str | None = None
    title: str | None = None
    tags: list[str] | None = None
    source: DocumentSource | None = None
    folder: str | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class Written:
    """A saved document after a create or an update."""

    document_id: str
    path: str
    folder: str  # under saved/, '' for the top
    title: str
    chunks: int


@dataclass(frozen=True)
class Deleted:
    deleted: bool
    document_id: str
    path: str


class SavedItem(BaseModel):
    """A saved document as find lists it: a preview, and the whole text when asked (also
    the find_documents tool's output item)."""

    document_id: str
    title: str | None
    topic: str | None
    path: str
    folder: str
    tags: list[str]
    source: DocumentSource | None
    metadata: dict[str, Any]
    created_at: str | None
    updated_at: str | None
    preview: str
    content: str | None = None


# ---- operations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Version:
    """A new version of a saved document, parsed and chunked, ready to embed and write."""

    doc_id: uuid.UUID
    fields: DocumentFields
    parsed: ParsedDocument
    chunks: list[ChunkRow]


@dataclass(frozen=True)
class SavedDocuments:
    """The saved documents of the server's collection (settings.collection) as one caller
    sees them: `scope` is the collections the caller may read (None = all), `max_chars` a
    document's longest text (PGRAG_WRITE_MAX_CHARS)."""

    pool: AsyncConnectionPool
    provider: EmbeddingProvider
    settings: IngestSettings
    max_chars: int
    scope: list[str] | None

    def require_collection_in_scope(self) -> None:
        """Writes go to the server's collection: refused to a key scoped to others."""
        collection = self.settings.collection
        if self.scope is not None and collection not in self.scope:
            raise Forbidden(
                f"saved documents go to the collection '{collection}', "
                "which is outside this key's scope",
                detail={"collection": collection},
            )

    async def create(self, new: NewDocument) -> Written:
        """Save a new document: parsed, chunked, embedded and written in one transaction."""
        self.require_collection_in_scope()
        name_title = (new.title or new.topic or "").strip()
        if not name_title:
            raise InvalidArgument("give the document a topic or a title", detail={"field": "topic"})
        text = check_content(new.content, self.max_chars)
        user_meta = check_metadata(new.metadata)
        sub = clean_folder(new.folder)
        doc_id = uuid.uuid4()
        meta = _stored_meta((new.topic or name_title).strip(), new.source, sub, user_meta)
        version = await self._version(doc_id, name_title, sub, text, datetime.now(UTC), meta)
        col = await self._collection()
        assert col.set_id is not None
        fields = version.fields
        async with self.pool.connection() as conn, conn.transaction():
            await store.insert(
                conn,
                doc_id=doc_id,
                collection_id=col.id,
                path=fields.path,
                folder=fields.folder,
                name=fields.name,
                tags=clean_tags(new.tags),
                metadata=meta,
            )
            await self._write(conn, version, col.id, col.set_id)
        return Written(str(doc_id), fields.path, sub, name_title, len(version.chunks))

    async def update(self, ref: str, patch: DocumentPatch) -> Written:
        """Apply `patch` to a saved document: re-chunked and re-embedded in one transaction
        (searches see the old version or the new one), the document_id kept."""
        self.require_collection_in_scope()
        s = self.settings
        new_content = (
            check_content(patch.content, self.max_chars) if patch.content is not None else None
        )
        new_meta = check_metadata(patch.metadata) if patch.metadata is not None else None
        new_folder = clean_folder(patch.folder) if patch.folder is not None else None
        col = await self._collection()
        doc = await self._resolve(ref)
        async with self.pool.connection() as conn, conn.transaction():
            row = await _lock_saved(conn, ref, doc)
            if row.collection_id != col.id or col.set_id is None:
                raise Forbidden(
                    "this saved document belongs to another collection than the server's "
                    f"'{s.collection}': update it from a server configured for it"
                )
            title, sub, meta = _patched(row, patch, new_meta, new_folder)
            tags = clean_tags(patch.tags) if patch.tags is not None else list(row.tags)
            text = new_content
            if text is None:
                text = await pages.extracted_text(conn, doc.id)
            created = row.created_at or datetime.now(UTC)
            version = await self._version(uuid.UUID(doc.id), title, sub, text, created, meta)
            fields = version.fields
            await store.move(
                conn,
                doc_id=version.doc_id,
                collection_id=col.id,
                path=fields.path,
                folder=fields.folder,
                name=fields.name,
                tags=tags,
            )
            await self._write(conn, version, col.id, col.set_id)
        return Written(doc.id, fields.path, sub, title, len(version.chunks))

    async def delete(self, ref: str) -> Deleted:
        """Delete a saved document with its chunks and embeddings (never an ingested file)."""
        self.require_collection_in_scope()
        doc = await self._resolve(ref)
        async with self.pool.connection() as conn, conn.transaction():
            row = await _lock_saved(conn, ref, doc)
            # with its vectors out of the per-language sums (no trigger does it on Citus)
            deleted = bool(await removals.delete_documents(conn, row.collection_id, [doc.id]))
        return Deleted(deleted=deleted, document_id=doc.id, path=doc.row.path)

    async def find(
        self, topic: str | None, tags: list[str] | None, limit: int, include_content: bool
    ) -> list[SavedItem]:
        """Saved documents by part of their topic or title (any case) and any of `tags`,
        newest first."""
        pattern = None
        if topic and topic.strip():
            escaped = re.sub(r"([\\%_])", r"\\\1", topic.strip())
            pattern = f"%{escaped}%"
        async with scoped_connection(self.pool, self.scope) as conn:
            rows = await store.find(
                conn, self.scope, topic=pattern, tags=clean_tags(tags) or None, limit=limit
            )
        return [_note(r, include_content) for r in rows]

    async def _collection(self) -> Collection:
        return await make_ingestor(self.settings, self.pool, self.provider).collection()

    async def _resolve(self, ref: str) -> docs.DocumentRef:
        """Find the document under row-level security, not only by the WHERE of the lookup:
        the write itself runs on an unscoped connection (the scoped role cannot write)."""
        async with scoped_connection(self.pool, self.scope) as conn:
            return await docs.resolve(conn, ref, self.scope)

    async def _version(
        self,
        doc_id: uuid.UUID,
        title: str,
        folder: str,
        text: str,
        created: datetime,
        meta: dict[str, Any],
    ) -> _Version:
        s = self.settings
        path, doc_folder, name = paths_for(doc_id, title, folder)
        parsed, chunks = await asyncio.to_thread(
            prepare, text, title, s.chunk_tokens, s.chunk_overlap, s.chunk_context_tokens
        )
        fields = version_fields(
            path=path,
            folder=doc_folder,
            name=name,
            content=text,
            title=title,
            parsed=parsed,
            created=created,
            meta=meta,
        )
        return _Version(doc_id, fields, parsed, chunks)

    async def _write(
        self, conn: psycopg.AsyncConnection, version: _Version, collection_id: int, set_id: int
    ) -> None:
        """Embed (cached) and replace units, chunks and embeddings; the caller's transaction."""
        texts = [embed_text(c.heading, c.context, c.draft.content) for c in version.chunks]
        vectors, _ = await embed_passages_cached(conn, self.provider, texts)
        await doc_store.write_version(
            conn,
            document_id=version.doc_id,
            collection_id=collection_id,
            set_id=set_id,
            fields=version.fields,
            units=version.parsed.units,
            chunks=version.chunks,
            vectors=list(vectors),
        )


# ---- helpers ------------------------------------------------------------------------------


async def _lock_saved(
    conn: psycopg.AsyncConnection, ref: str, doc: docs.DocumentRef
) -> LockedSaved:
    """Lock the document's row for a change; refused unless save_document created it."""
    row = await store.lock(conn, doc.id)
    if row is None:
        raise NotFound(f"document '{ref}' was deleted meanwhile")
    _require_saved(row.source, doc)
    return row


def _patched(
    row: LockedSaved,
    patch: DocumentPatch,
    new_meta: dict[str, Any] | None,
    new_folder: str | None,
) -> tuple[str, str, dict[str, Any]]:
    """(title, folder under saved/, stored metadata) after the patch."""
    old_meta = row.metadata or {}
    title = (patch.title or row.title or "").strip() or "note"
    topic = (patch.topic or old_meta.get("topic") or title).strip()
    sub = new_folder if new_folder is not None else old_meta.get("saved_folder", "")
    source = patch.source
    if source is None and isinstance(old_meta.get("source"), dict):
        source = DocumentSource(**old_meta["source"])
    user = new_meta if new_meta is not None else old_meta.get("metadata") or {}
    return title, sub, _stored_meta(topic, source, sub, user)


def _stored_meta(
    topic: str, source: DocumentSource | None, folder: str, user: dict[str, Any]
) -> dict[str, Any]:
    return {
        "topic": topic,
        "source": source.model_dump() if source else None,
        "saved_folder": folder,
        "metadata": user,
    }


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _note(row: SavedRow, include_content: bool) -> SavedItem:
    meta = row.metadata or {}
    content = row.content or ""
    source = meta.get("source")
    return SavedItem(
        document_id=row.document_id,
        title=row.title,
        topic=meta.get("topic"),
        path=row.path,
        folder=meta.get("saved_folder", ""),
        tags=list(row.tags or []),
        source=DocumentSource(**source) if isinstance(source, dict) else None,
        metadata=meta.get("metadata") or {},
        created_at=_iso(row.created_at),
        updated_at=_iso(row.modified_at),
        preview=" ".join(content[:PREVIEW_CHARS].split()),
        content=content if include_content else None,
    )


def _require_saved(source: str, ref: docs.DocumentRef) -> None:
    if source != "saved":
        raise Forbidden(
            f"'{ref.row.path}' is an ingested file: only documents created with "
            "save_document can be changed or deleted here; edit the file and ingest it again",
            detail={"document_id": ref.id, "source": source},
        )
