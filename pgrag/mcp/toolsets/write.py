"""The `write` toolset (SPEC §5.3, seed 002 §1): notes and documents an agent saves.

A saved document is an ordinary pgrag document with `source = 'saved'` and a path like
`saved/<folder>/<slug>-<shortid>.md`: its content is parsed as Markdown, chunked, embedded
(through the embedding cache) and written in one transaction with the same store function
ingestion uses, so `search` finds it like any file. Ingestion runs never remove it (they
only remove `source = 'file'` documents whose files disappeared).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import tempfile
import unicodedata
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import psycopg
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field

from pgrag.db.scope import scoped_connection
from pgrag.embeddings.cache import embed_passages_cached
from pgrag.errors import Forbidden, InvalidArgument, NotFound
from pgrag.ingest.parsers import markdown
from pgrag.ingest.parsers.base import ParsedDocument
from pgrag.ingest.pipeline import Ingestor
from pgrag.ingest.prepare import build_chunks, human_size
from pgrag.mcp.app_state import enveloped, require_writable, scope_of, state_of
from pgrag.mcp.envelope import Envelope, Status
from pgrag.services import documents as docs
from pgrag.services.context import WRITE_TIMEOUT_S, AppContext
from pgrag.services.documents import DocumentRef
from pgrag.store import documents as store
from pgrag.store.documents import ChunkRow, DocumentFields

SAVED_ROOT = "saved"
MAX_METADATA_CHARS = 10_000
PREVIEW_CHARS = 300

WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

INSERT_SQL = """
INSERT INTO pgrag.documents (id, collection_id, path, folder, name, file_type, source, status,
                             tags, metadata)
VALUES (%(id)s, %(cid)s, %(path)s, %(folder)s, %(name)s, 'md', 'saved', 'processing',
        %(tags)s, %(metadata)s)
"""
LOCK_SAVED_SQL = """
SELECT id, source, title, tags, metadata, created_at, collection_id
FROM pgrag.documents WHERE id = %s FOR UPDATE
"""
MOVE_SQL = """
UPDATE pgrag.documents SET path = %(path)s, folder = %(folder)s, name = %(name)s,
       tags = %(tags)s
 WHERE id = %(id)s
"""
SET_TAGS_SQL = "UPDATE pgrag.documents SET tags = %s WHERE id = %s"
DELETE_SQL = "DELETE FROM pgrag.documents WHERE id = %s AND source = 'saved' RETURNING path"
CHUNK_COUNT_SQL = "SELECT count(*) FROM pgrag.chunks WHERE document_id = %s"

FIND_SQL = """
SELECT d.id::text AS document_id, d.title, d.path, d.folder, d.tags, d.metadata,
       d.created_at, d.modified_at, c.name AS collection,
       (SELECT string_agg(u.body, E'\\n\\n' ORDER BY u.number)
          FROM pgrag.units u WHERE u.document_id = d.id AND u.body <> '') AS content
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE d.source = 'saved'
  AND (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
  AND (%(topic)s::text IS NULL
       OR d.title ILIKE %(topic)s ESCAPE '\\' OR d.metadata ->> 'topic' ILIKE %(topic)s ESCAPE '\\')
  AND (%(tags)s::text[] IS NULL OR d.tags && %(tags)s::text[])
ORDER BY d.created_at DESC, d.id
LIMIT %(limit)s
"""


# ---- models -------------------------------------------------------------------------------


class DocumentSource(BaseModel):
    """Where the content came from (seed 002 `source`)."""

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


class SavedData(BaseModel):
    document_id: str
    path: str
    folder: str = Field(description="the folder under saved/, '' for the top")
    title: str
    chunks: int


class UpdatedData(BaseModel):
    updated: bool
    document_id: str
    path: str
    chunks: int


class DeletedData(BaseModel):
    deleted: bool
    document_id: str
    path: str


class SavedItem(BaseModel):
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


class FoundData(BaseModel):
    items: list[SavedItem]


# ---- helpers ------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NOT_SLUG = re.compile(r"[^\w]+", re.UNICODE)


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
    seen: dict[str, None] = {}
    for tag in tags or []:
        t = " ".join(tag.split())
        if t:
            seen.setdefault(t, None)
    return list(seen)


def check_content(content: str, limit: int) -> str:
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
    meta = metadata or {}
    if len(json.dumps(meta, ensure_ascii=False, default=str)) > MAX_METADATA_CHARS:
        raise InvalidArgument(
            f"metadata is larger than {MAX_METADATA_CHARS} characters as JSON: keep it small",
            detail={"field": "metadata"},
        )
    return json.loads(json.dumps(meta, default=str))


def paths_for(doc_id: uuid.UUID, title: str, folder: str) -> tuple[str, str, str]:
    """(path, documents.folder, name) of a saved document."""
    doc_folder = f"{SAVED_ROOT}/{folder}" if folder else SAVED_ROOT
    name = f"{slugify(title)}-{doc_id.hex[:12]}.md"
    return f"{doc_folder}/{name}", doc_folder, name


def parse_content(content: str) -> ParsedDocument:
    """Parse with the Markdown parser files go through, so saved notes get the same
    sections, headings and chunk offsets."""
    with tempfile.TemporaryDirectory(prefix="pgrag-save-") as tmp:
        path = Path(tmp) / "content.md"
        path.write_text(content, encoding="utf-8")
        return markdown.parse(path)


def _prepare(
    content: str, title: str, chunk_tokens: int, overlap: int
) -> tuple[ParsedDocument, list[ChunkRow]]:
    parsed = parse_content(content)
    return parsed, build_chunks(parsed, title, chunk_tokens, overlap)


def _fields(
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


def _stored_meta(
    topic: str, source: DocumentSource | None, folder: str, user: dict[str, Any]
) -> dict[str, Any]:
    return {
        "topic": topic,
        "source": source.model_dump() if source else None,
        "saved_folder": folder,
        "metadata": user,
    }


def _require_collection_in_scope(state: AppContext, ctx: Context[Any, Any]) -> None:
    scope = scope_of(ctx)
    if scope is not None and state.settings.collection not in scope:
        raise Forbidden(
            f"saved documents go to the collection '{state.settings.collection}', "
            "which is outside this key's scope",
            detail={"collection": state.settings.collection},
        )


async def _resolve_in_scope(state: AppContext, ctx: Context[Any, Any], ref: str) -> DocumentRef:
    """Find the document under row-level security, not only by the WHERE of the lookup: the
    write itself runs on an unscoped connection (the scoped role cannot write)."""
    async with scoped_connection(state.pool, scope_of(ctx)) as conn:
        return await docs.resolve(conn, ref, scope_of(ctx))


async def _write(
    conn: psycopg.AsyncConnection,
    state: AppContext,
    *,
    doc_id: uuid.UUID,
    collection_id: int,
    set_id: int,
    fields: DocumentFields,
    parsed: ParsedDocument,
    chunks: list[ChunkRow],
) -> None:
    """Embed (cached) and replace units, chunks and embeddings; the caller's transaction."""
    texts = [f"{c.heading}\n\n{c.draft.content}" if c.heading else c.draft.content for c in chunks]
    vectors, _ = await embed_passages_cached(conn, state.provider, texts)
    await store.write_version(
        conn,
        document_id=doc_id,
        collection_id=collection_id,
        set_id=set_id,
        fields=fields,
        units=parsed.units,
        chunks=chunks,
        vectors=vectors,
    )


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _item(row: dict[str, Any], include_content: bool) -> SavedItem:
    meta = row["metadata"] or {}
    content = row["content"] or ""
    source = meta.get("source")
    return SavedItem(
        document_id=row["document_id"],
        title=row["title"],
        topic=meta.get("topic"),
        path=row["path"],
        folder=meta.get("saved_folder", ""),
        tags=list(row["tags"] or []),
        source=DocumentSource(**source) if isinstance(source, dict) else None,
        metadata=meta.get("metadata") or {},
        created_at=_iso(row["created_at"]),
        updated_at=_iso(row["modified_at"]),
        preview=" ".join(content[:PREVIEW_CHARS].split()),
        content=content if include_content else None,
    )


def _result(model: type[Any]) -> Any:
    return Annotated[CallToolResult, Envelope[model]]  # type: ignore[valid-type]


# ---- tools --------------------------------------------------------------------------------


def register(server: MCPServer[Any]) -> None:
    @server.tool(annotations=WRITE)
    @enveloped("save_document", timeout=WRITE_TIMEOUT_S)
    async def save_document(
        content: Annotated[
            str,
            Field(min_length=1, max_length=1_000_000, description="the text, Markdown welcome"),
        ],
        ctx: Context[Any, Any],
        topic: Annotated[
            str | None, Field(min_length=1, max_length=500, description="what it is about")
        ] = None,
        title: Annotated[
            str | None, Field(min_length=1, max_length=500, description="title (default: topic)")
        ] = None,
        tags: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=100)]] | None,
            Field(max_length=50, description="labels to find it again"),
        ] = None,
        source: DocumentSource | None = None,
        folder: Annotated[
            str | None, Field(max_length=300, description="folder under saved/, e.g. 'notes/q3'")
        ] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="any small JSON object kept with it")
        ] = None,
    ) -> _result(SavedData):  # type: ignore[valid-type]
        """Save a note, summary or fetched page as a document of the knowledge base: it is
        chunked, embedded and then found by `search` like any ingested file (path
        saved/<folder>/<slug>-<id>.md). Needs topic or title. Content is limited in size
        (error INVALID_ARGUMENT says the limit). Refused with FORBIDDEN on a read-only server."""
        state = state_of(ctx)
        require_writable(state, ctx)
        _require_collection_in_scope(state, ctx)
        s = state.settings
        name_title = (title or topic or "").strip()
        if not name_title:
            raise InvalidArgument("give the document a topic or a title", detail={"field": "topic"})
        text = check_content(content, s.write_max_chars)
        user_meta = check_metadata(metadata)
        sub = clean_folder(folder)
        doc_id = uuid.uuid4()
        path, doc_folder, name = paths_for(doc_id, name_title, sub)
        parsed, chunks = await asyncio.to_thread(
            _prepare, text, name_title, s.chunk_tokens, s.chunk_overlap
        )
        meta = _stored_meta((topic or name_title).strip(), source, sub, user_meta)
        fields = _fields(
            path=path,
            folder=doc_folder,
            name=name,
            content=text,
            title=name_title,
            parsed=parsed,
            created=datetime.now(UTC),
            meta=meta,
        )
        col = await Ingestor(state.pool, state.provider, collection=s.collection).collection()
        assert col.set_id is not None
        async with state.pool.connection() as conn, conn.transaction():
            await conn.execute(
                INSERT_SQL,
                {
                    "id": doc_id,
                    "cid": col.id,
                    "path": path,
                    "folder": doc_folder,
                    "name": name,
                    "tags": clean_tags(tags),
                    "metadata": Jsonb(meta),
                },
            )
            await _write(
                conn,
                state,
                doc_id=doc_id,
                collection_id=col.id,
                set_id=col.set_id,
                fields=fields,
                parsed=parsed,
                chunks=chunks,
            )
        return Envelope[SavedData](
            data=SavedData(
                document_id=str(doc_id),
                path=path,
                folder=sub,
                title=name_title,
                chunks=len(chunks),
            ),
            status=Status(message="DOCUMENT_SAVED"),
        )

    @server.tool(annotations=WRITE)
    @enveloped("update_document", timeout=WRITE_TIMEOUT_S)
    async def update_document(
        document_id: Annotated[
            str, Field(min_length=1, max_length=1000, description="from save_document or search")
        ],
        patch: DocumentPatch,
        ctx: Context[Any, Any],
    ) -> _result(UpdatedData):  # type: ignore[valid-type]
        """Change a saved document (title, topic, content, tags, metadata, folder, source).
        It is re-chunked and re-embedded in one transaction: searches see the old version
        or the new one, never a mix; the document_id stays the same. Only documents created
        with save_document can be changed (files change by re-ingesting them)."""
        state = state_of(ctx)
        require_writable(state, ctx)
        _require_collection_in_scope(state, ctx)
        s = state.settings
        new_content = (
            check_content(patch.content, s.write_max_chars) if patch.content is not None else None
        )
        new_meta = check_metadata(patch.metadata) if patch.metadata is not None else None
        new_folder = clean_folder(patch.folder) if patch.folder is not None else None
        col = await Ingestor(state.pool, state.provider, collection=s.collection).collection()
        ref = await _resolve_in_scope(state, ctx, document_id)
        async with state.pool.connection() as conn, conn.transaction():
            async with conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(LOCK_SAVED_SQL, (ref.id,))
                row = await cur.fetchone()
            if row is None:
                raise NotFound(f"document '{document_id}' was deleted meanwhile")
            _require_saved(row["source"], ref)
            if row["collection_id"] != col.id or col.set_id is None:
                raise Forbidden(
                    "this saved document belongs to another collection than the server's "
                    f"'{s.collection}': update it from a server configured for it"
                )
            old_meta = row["metadata"] or {}
            title = (patch.title or row["title"] or "").strip() or "note"
            topic = (patch.topic or old_meta.get("topic") or title).strip()
            sub = new_folder if new_folder is not None else old_meta.get("saved_folder", "")
            source = (
                patch.source
                if patch.source is not None
                else (
                    DocumentSource(**old_meta["source"])
                    if isinstance(old_meta.get("source"), dict)
                    else None
                )
            )
            user = new_meta if new_meta is not None else old_meta.get("metadata") or {}
            tags = clean_tags(patch.tags) if patch.tags is not None else list(row["tags"])
            text = new_content
            if text is None:
                text = await docs.extracted_text(conn, ref.id)
            doc_uuid = uuid.UUID(ref.id)
            path, doc_folder, name = paths_for(doc_uuid, title, sub)
            parsed, chunks = await asyncio.to_thread(
                _prepare, text, title, s.chunk_tokens, s.chunk_overlap
            )
            meta = _stored_meta(topic, source, sub, user)
            fields = _fields(
                path=path,
                folder=doc_folder,
                name=name,
                content=text,
                title=title,
                parsed=parsed,
                created=row["created_at"] or datetime.now(UTC),
                meta=meta,
            )
            await conn.execute(
                MOVE_SQL,
                {
                    "id": doc_uuid,
                    "path": path,
                    "folder": doc_folder,
                    "name": name,
                    "tags": tags,
                },
            )
            await _write(
                conn,
                state,
                doc_id=doc_uuid,
                collection_id=col.id,
                set_id=col.set_id,
                fields=fields,
                parsed=parsed,
                chunks=chunks,
            )
        return Envelope[UpdatedData](
            data=UpdatedData(updated=True, document_id=ref.id, path=path, chunks=len(chunks)),
            status=Status(message="DOCUMENT_UPDATED"),
        )

    @server.tool(annotations=DESTRUCTIVE)
    @enveloped("delete_document")
    async def delete_document(
        document_id: Annotated[
            str, Field(min_length=1, max_length=1000, description="from save_document or search")
        ],
        ctx: Context[Any, Any],
    ) -> _result(DeletedData):  # type: ignore[valid-type]
        """Delete a saved document with its chunks and embeddings. Only documents created
        with save_document can be deleted here."""
        state = state_of(ctx)
        require_writable(state, ctx)
        _require_collection_in_scope(state, ctx)
        ref = await _resolve_in_scope(state, ctx, document_id)
        async with state.pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(LOCK_SAVED_SQL, (ref.id,))).fetchone()
            if row is None:
                raise NotFound(f"document '{document_id}' was deleted meanwhile")
            _require_saved(row[1], ref)
            deleted = await (await conn.execute(DELETE_SQL, (ref.id,))).fetchone()
        return Envelope[DeletedData](
            data=DeletedData(deleted=deleted is not None, document_id=ref.id, path=ref.row["path"]),
            status=Status(message="DOCUMENT_DELETED"),
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("find_documents")
    async def find_documents(
        ctx: Context[Any, Any],
        topic: Annotated[
            str | None,
            Field(max_length=500, description="part of the topic or title (case-insensitive)"),
        ] = None,
        tags: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=100)]] | None,
            Field(max_length=50, description="documents having any of these tags"),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=50)] = 5,
        include_content: Annotated[
            bool, Field(description="include the whole text, not only a preview")
        ] = False,
    ) -> _result(FoundData):  # type: ignore[valid-type]
        """Find documents saved with save_document by topic or title and tags, newest
        first. For questions about their content use `search` instead."""
        state = state_of(ctx)
        pattern = None
        if topic and topic.strip():
            escaped = re.sub(r"([\\%_])", r"\\\1", topic.strip())
            pattern = f"%{escaped}%"
        wanted = clean_tags(tags) or None
        async with (
            scoped_connection(state.pool, scope_of(ctx)) as conn,
            conn.cursor(row_factory=dict_row) as cur,
        ):
            await cur.execute(
                FIND_SQL,
                {"scope": scope_of(ctx), "topic": pattern, "tags": wanted, "limit": limit},
            )
            rows = await cur.fetchall()
        return Envelope[FoundData](data=FoundData(items=[_item(r, include_content) for r in rows]))


def _require_saved(source: str, ref: docs.DocumentRef) -> None:
    if source != "saved":
        raise Forbidden(
            f"'{ref.row['path']}' is an ingested file: only documents created with "
            "save_document can be changed or deleted here; edit the file and ingest it again",
            detail={"document_id": ref.id, "source": source},
        )
