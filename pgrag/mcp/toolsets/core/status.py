"""get_status: ingestion counts and failures, or one document's status and progress."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.jsonable import jsonable
from pgrag.mcp.app_state import enveloped, scope_of, state_of
from pgrag.mcp.envelope import Envelope
from pgrag.mcp.schemas import StatusData
from pgrag.mcp.toolsets.core.common import result
from pgrag.services import documents as docs
from pgrag.services.status import report_for

MESSAGES = {"ready": "DOCUMENT_READY", "failed": "DOCUMENT_FAILED"}


@enveloped()
async def get_status(
    ctx: Context[Any, Any],
    document_id: Annotated[
        str | None, Field(max_length=1000, description="omit for all documents")
    ] = None,
) -> result(StatusData):  # type: ignore[valid-type]
    """Ingestion status: document counts by status (pending, processing, ready, failed)
    with failures and their reasons, the documents searchable by keyword whose vectors
    are still being computed, or one document's status and progress. Check it before
    searching newly added files."""
    pool, scope = state_of(ctx).pool, scope_of(ctx)
    if document_id:
        doc = await docs.find(pool, scope, document_id)
        return Envelope[StatusData](data=_document_status(doc))
    report = await report_for(pool, scope)
    return Envelope[StatusData](
        data=StatusData(
            counts=report["counts"],
            total=report["total"],
            processing=jsonable(report["processing"]),
            failed=jsonable(report["failed"]),
            waiting_for_vectors=jsonable(report["waiting_for_vectors"]),
            vectors_pending=report["vectors_pending"],
            ocr=report["ocr"],
            sources=report["sources"],
        )
    )


def _message(status: str, vectors_pending: int) -> str:
    if status == "ready" and vectors_pending:
        return "DOCUMENT_VECTORS_PENDING"  # keyword search finds it; semantic search not yet
    return MESSAGES.get(status, "DOCUMENT_PROCESSING")


def _document_status(doc: docs.DocumentRef) -> StatusData:
    r = doc.row
    return StatusData(
        status=r.status,
        progress=r.progress,
        message=_message(r.status, r.vectors_pending),
        document={
            "document_id": doc.id,
            "path": r.path,
            "vectors_pending": r.vectors_pending,
            "error_code": r.error_code,
            "error_detail": r.error_detail,
            "ingested": r.ingested_at.isoformat() if r.ingested_at else None,
            "ocr": r.ocr,
        },
    )
