"""Documents: browse by collection, folder, status and type; one page per document with
its metadata, outline, text by unit, chunks and failure; deletion, re-ingestion and
disabling or enabling a chunk where writes are on."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, Path, Query
from fastapi.responses import RedirectResponse, Response

from pgrag.services import documents as docs
from pgrag.services.chunk_state import set_chunk_enabled
from pgrag.services.context import require_remote_writes
from pgrag.services.document_view import MAX_CHUNKS, document_view
from pgrag.services.documents import DocumentSort
from pgrag.services.overview import file_types
from pgrag.services.reingest import reingest
from pgrag.web.core import View, html_errors, view_of

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]
PAGE_SIZE = 50
STATUSES = ("pending", "processing", "ready", "failed")


@router.get("/console/documents")
@html_errors
async def documents_page(
    view: Page,
    collection: Annotated[str | None, Query(max_length=200)] = None,
    folder: Annotated[str | None, Query(max_length=1000)] = None,
    file_type: Annotated[str | None, Query(max_length=20)] = None,
    status: Literal["", "pending", "processing", "ready", "failed"] = "",
    ocr: Literal["", "yes", "no"] = "",
    language: Annotated[str, Query(max_length=20)] = "",
    sort: DocumentSort = DocumentSort.PATH,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> Response:
    # one collection asked for narrows the listing; the caller's scope still applies (RLS
    # under the caller's scope): another collection's name lists nothing
    listed = [collection] if collection else view.scope
    found = await docs.browse(
        view.context.pool,
        view.scope,
        listed,
        folder=folder or None,
        file_type=file_type or None,
        status=status or None,
        offset=offset,
        limit=PAGE_SIZE + 1,
        sort=sort,
        ocr={"yes": True, "no": False}.get(ocr),
        language=language or None,
    )
    rows = found.rows
    form = {"collection": collection or "", "folder": folder or "", "file_type": file_type or ""}
    return view.page(
        "documents.html",
        nav="documents",
        rows=rows[:PAGE_SIZE],
        languages=found.languages,
        more=len(rows) > PAGE_SIZE,
        offset=offset,
        page_size=PAGE_SIZE,
        form={**form, "status": status, "ocr": ocr, "language": language, "sort": sort.value},
        statuses=STATUSES,
        sorts=[s.value for s in DocumentSort],
        folders=found.folders,
        file_types=await file_types(view.context.pool, view.scope),
        deleted=view.request.query_params.get("deleted") == "1",
    )


@router.get("/console/documents/{document_id}")
@html_errors
async def document_page(view: Page, document_id: str) -> Response:
    follow = view.console.settings.follow_links_inside_root
    doc = await document_view(view.context.pool, document_id, view.scope, follow_links=follow)
    # after "Re-ingest": the page follows the document's status to ready or failed
    # (static/upload.js), then loads again with `reingested=1`: the new version, and how
    # the re-ingest ended
    params = view.request.query_params
    return view.page(
        "document.html",
        nav="documents",
        doc=doc,
        max_chunks=MAX_CHUNKS,
        following=params.get("reingest") == "1",
        reingested=params.get("reingested") == "1",
    )


@router.post("/console/documents/{document_id}/delete")
@html_errors
async def delete(
    view: Page, document_id: str, csrf: Annotated[str, Form(max_length=200)] = ""
) -> Response:
    caller = view.posted(csrf)
    require_remote_writes(view.console.settings)
    await docs.delete_document(view.context.pool, caller.scope, document_id)
    return RedirectResponse("/console/documents?deleted=1", status_code=303)


@router.post("/console/documents/{document_id}/reingest")
@html_errors
async def reingest_document(
    view: Page, document_id: str, csrf: Annotated[str, Form(max_length=200)] = ""
) -> Response:
    caller = view.posted(csrf)
    require_remote_writes(view.console.settings)
    doc_id = await reingest(view.context, caller.scope, document_id)
    return RedirectResponse(f"/console/documents/{doc_id}?reingest=1", status_code=303)


@router.post("/console/chunks/{chunk_id}/{action}")
@html_errors
async def chunk_action(
    view: Page,
    chunk_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    action: Literal["enable", "disable"],
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Disable a chunk (no search returns it) or enable it again; back to its document. The
    action is in the path, so the audit row names the chunk and what was done."""
    caller = view.posted(csrf)
    require_remote_writes(view.console.settings)
    state = await set_chunk_enabled(view.context.pool, caller.scope, chunk_id, action == "enable")
    return RedirectResponse(
        f"/console/documents/{state.document_id}#chunk-{chunk_id}", status_code=303
    )
