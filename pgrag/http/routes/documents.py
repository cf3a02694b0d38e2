"""Documents: list, metadata and outline, extracted text (in parts under the response
cap), upload, delete."""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, Query, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel

from pgrag.http.deps import Context, QueryInt, Scope, guard
from pgrag.http.errors import error_docs
from pgrag.jsonable import jsonable
from pgrag.services import documents as docs
from pgrag.services.context import WRITE_TIMEOUT_S, require_remote_writes
from pgrag.services.uploads import accept_upload
from pgrag.text_parts import MAX_START, text_part

router = APIRouter(tags=["documents"], dependencies=[guard(WRITE_TIMEOUT_S)])


class UploadAccepted(BaseModel):
    status: Literal["pending"]
    path: str
    collection: str
    status_url: str


@router.get("/api/documents", responses=error_docs(429))
async def api_documents(
    context: Context,
    scope: Scope,
    folder: str | None = None,
    file_type: str | None = None,
    status: Literal["pending", "processing", "ready", "failed"] | None = None,
    offset: Annotated[QueryInt, Query(ge=0, le=1_000_000)] = 0,
    limit: Annotated[QueryInt, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """Documents, ordered by path."""
    rows = await docs.listing(
        context.pool,
        scope,
        folder=folder,
        file_type=file_type,
        status=status,
        offset=offset,
        limit=limit,
    )
    return {"documents": [jsonable(r) for r in rows], "offset": offset, "limit": limit}


@router.get("/api/documents/{document_id}", responses=error_docs(404, 429))
async def api_document(context: Context, scope: Scope, document_id: str) -> dict[str, Any]:
    """A document's metadata and cached outline."""
    doc = await docs.find(context.pool, scope, document_id)
    return {
        "metadata": jsonable(docs.metadata(doc)),
        "outline": doc.row.outline or {},
        "status": doc.row.status,
        "error_code": doc.row.error_code,
        "error_detail": doc.row.error_detail,
    }


CONTENT_LINK: dict[str, Any] = {
    "Link": {
        "description": 'When the text goes on: `</api/documents/{id}/content?start=N>; rel="next"`',
        "schema": {"type": "string"},
    }
}


@router.get(
    "/api/documents/{document_id}/content",
    response_class=PlainTextResponse,
    responses={
        200: {"description": "The part of the text from `start`", "headers": CONTENT_LINK},
        **error_docs(202, 400, 404, 409, 429, 503, plain_text_route=True),
    },
)
async def api_document_content(
    context: Context,
    scope: Scope,
    document_id: str,
    start: Annotated[
        QueryInt, Query(ge=0, le=MAX_START, description="the character where the part begins")
    ] = 0,
) -> Response:
    """Extracted text: 200, 202 while processing, 409 when ingestion failed, 404 unknown.

    A text over the response cap (25,000 tokens, 200 KB) comes in parts, as MCP's content
    resource gives it: `start` is the character where a part begins, and a `Link` header
    with `rel="next"` names the next part until the last one. The parts put together are
    the text."""
    doc, text = await docs.ready_text(context.pool, scope, document_id)
    part = await asyncio.to_thread(text_part, text, start)  # tokenising: off the loop
    headers: dict[str, str] = {}
    if part.rest:
        headers["Link"] = f'</api/documents/{doc.id}/content?start={part.end}>; rel="next"'
    return PlainTextResponse(part.text, headers=headers)


@router.post(
    "/api/documents",
    status_code=202,
    responses={202: {"model": UploadAccepted}, **error_docs(403, 429)},
)
async def api_upload(
    context: Context,
    scope: Scope,
    file: Annotated[UploadFile, File()],
    collection: Annotated[str | None, Form(max_length=200)] = None,
) -> JSONResponse:
    """Upload a file to ingest: 202 with the URL to poll for its status."""
    require_remote_writes(context.settings)
    upload = await accept_upload(
        context, scope, file_name=file.filename, collection=collection, read=file.read
    )
    return JSONResponse(
        {
            "status": "pending",
            "path": upload.path,
            "collection": upload.collection,
            "status_url": "/api/status?" + urllib.parse.urlencode({"document": upload.path}),
        },
        status_code=202,
    )


@router.delete("/api/documents/{document_id}", status_code=204, responses=error_docs(403, 404, 429))
async def api_delete(context: Context, scope: Scope, document_id: str) -> Response:
    """Delete a document and everything derived from it."""
    require_remote_writes(context.settings)
    await docs.delete_document(context.pool, scope, document_id)
    return Response(status_code=204)
