"""save_document, update_document, delete_document: refused on a read-only server."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.mcp.app_state import enveloped, require_writable, state_of
from pgrag.mcp.envelope import Envelope, Status
from pgrag.mcp.toolsets.write.common import result, saved_documents
from pgrag.mcp.toolsets.write.models import DeletedData, SavedData, UpdatedData
from pgrag.services.context import WRITE_TIMEOUT_S
from pgrag.services.saved import DocumentPatch, DocumentSource, NewDocument

DocumentRef = Annotated[
    str, Field(min_length=1, max_length=1000, description="from save_document or search")
]
Tags = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=100)]] | None,
    Field(max_length=50, description="labels to find it again"),
]


@enveloped(timeout=WRITE_TIMEOUT_S)
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
    tags: Tags = None,
    source: DocumentSource | None = None,
    folder: Annotated[
        str | None, Field(max_length=300, description="folder under saved/, e.g. 'notes/q3'")
    ] = None,
    metadata: Annotated[
        dict[str, Any] | None, Field(description="any small JSON object kept with it")
    ] = None,
) -> result(SavedData):  # type: ignore[valid-type]
    """Save a note, summary or fetched page as a document of the knowledge base: it is
    chunked, embedded and then found by `search` like any ingested file (path
    saved/<folder>/<slug>-<id>.md). Needs topic or title. Content is limited in size
    (error INVALID_ARGUMENT says the limit). Refused with FORBIDDEN on a read-only server."""
    require_writable(state_of(ctx), ctx)
    new = NewDocument(
        content=content,
        topic=topic,
        title=title,
        tags=tags,
        source=source,
        folder=folder,
        metadata=metadata,
    )
    saved = await saved_documents(ctx).create(new)
    return Envelope[SavedData](
        data=SavedData(
            document_id=saved.document_id,
            path=saved.path,
            folder=saved.folder,
            title=saved.title,
            chunks=saved.chunks,
        ),
        status=Status(message="DOCUMENT_SAVED"),
    )


@enveloped(timeout=WRITE_TIMEOUT_S)
async def update_document(
    document_id: DocumentRef, patch: DocumentPatch, ctx: Context[Any, Any]
) -> result(UpdatedData):  # type: ignore[valid-type]
    """Change a saved document (title, topic, content, tags, metadata, folder, source).
    It is re-chunked and re-embedded in one transaction: searches see the old version
    or the new one, never a mix; the document_id stays the same. Only documents created
    with save_document can be changed (files change by re-ingesting them)."""
    require_writable(state_of(ctx), ctx)
    saved = await saved_documents(ctx).update(document_id, patch)
    return Envelope[UpdatedData](
        data=UpdatedData(
            updated=True, document_id=saved.document_id, path=saved.path, chunks=saved.chunks
        ),
        status=Status(message="DOCUMENT_UPDATED"),
    )


@enveloped()
async def delete_document(document_id: DocumentRef, ctx: Context[Any, Any]) -> result(DeletedData):  # type: ignore[valid-type]
    """Delete a saved document with its chunks and embeddings. Only documents created
    with save_document can be deleted here."""
    require_writable(state_of(ctx), ctx)
    gone = await saved_documents(ctx).delete(document_id)
    return Envelope[DeletedData](
        data=DeletedData(deleted=gone.deleted, document_id=gone.document_id, path=gone.path),
        status=Status(message="DOCUMENT_DELETED"),
    )
