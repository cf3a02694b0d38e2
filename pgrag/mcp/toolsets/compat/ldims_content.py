"""LDIMS's resource `ldims://docs/{document_id}/extracted_content`: a document's extracted
text, with documentName, extractedAt and format as the contents' `_meta`, and LDIMS's error
bodies (as MCP errors whose `code` keeps pgrag's stable code)."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.mcpserver.resources.base import Resource
from mcp.server.mcpserver.resources.templates import ResourceTemplate
from mcp.server.mcpserver.resources.types import FunctionResource
from mcp.server.mcpserver.utilities.context_injection import inject_context
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from pgrag.errors import ErrorCode, NotFound, PgragError, as_pgrag_error, new_trace_id
from pgrag.mcp import sdk
from pgrag.mcp.app_state import scope_of, state_of
from pgrag.mcp.resources import RESOURCE_ERROR, content_uri
from pgrag.mcp.text_parts import with_note
from pgrag.services import documents as docs
from pgrag.text_parts import text_part


def iso(value: Any) -> str | None:
    """A timestamp as ISO 8601 text (None stays None)."""
    return value.isoformat() if value is not None else None


class _PerReadMetaTemplate(ResourceTemplate):
    """A template whose function returns (text, meta): the meta travels as the contents'
    `_meta` (LDIMS's `metadata`: documentName, extractedAt, format)."""

    async def create_resource(self, uri: str, params: dict[str, Any], context: Any) -> Resource:
        try:
            params = inject_context(self.fn, params, context, self.context_kwarg)
            text, meta = await self.fn(**params)
        except (ResourceError, MCPError):
            raise
        return FunctionResource(
            uri=uri,
            name=self.name,
            title=self.title,
            description=self.description,
            mime_type=self.mime_type,
            meta=meta,
            fn=lambda: text,
        )


RESOURCE_DESCRIPTION = (  # LDIMS's own description, verbatim (clients match on it)
    "This resource provides access to the full extracted text content of a document stored "
    "in the LDIMS system.\nUse this when you need to:\n"
    "- Read the actual content of a specific document\n"
    "- Answer questions about the content of a known document\n"
    "- Analyze or understand the details within a document\n"
    "The content is pre-processed and extracted from various file formats (PDF, DOCX, etc.) "
    "into plain text."
)

_RESOURCE_ERRORS = {
    ErrorCode.PROCESSING: (
        "PROCESSING",
        "Content extraction is in progress. Please try again later.",
    ),
    ErrorCode.CONTENT_UNAVAILABLE: (
        "CONTENT_UNAVAILABLE_OR_FAILED",
        "Content extraction failed or content is in an unusable state.",
    ),
    ErrorCode.FORBIDDEN: ("FORBIDDEN", "Access to the requested content is forbidden."),
}


def _resource_error(exc: PgragError, uri: str) -> MCPError:
    """Seed 000's error bodies as MCP errors; `code` keeps pgrag's stable code."""
    if isinstance(exc, NotFound):
        ldims, message, rpc = (
            "RESOURCE_NOT_FOUND",
            "Document or its content not found.",
            INVALID_PARAMS,
        )
    elif exc.code in _RESOURCE_ERRORS:
        (ldims, message), rpc = _RESOURCE_ERRORS[exc.code], RESOURCE_ERROR
    else:
        ldims, message, rpc = (
            "SERVER_ERROR",
            "An unexpected error occurred on the server.",
            RESOURCE_ERROR,
        )
    data: dict[str, Any] = {
        "isError": True,
        "errorCode": ldims,
        "errorMessage": message,
        "errorDetails": {"reason": exc.message, **exc.detail},
        "code": str(exc.code),
        "uri": uri,
    }
    if exc.code == ErrorCode.PROCESSING:
        data["status"] = "processing"
    return MCPError(code=rpc, message=f"{ldims}: {message} {exc.message}", data=data)


async def extracted_content(document_id: str, ctx: Context[Any, Any]) -> tuple[str, dict[str, Any]]:
    uri = f"ldims://docs/{document_id}/extracted_content"
    trace_id = new_trace_id()
    try:
        doc, text = await docs.ready_text(state_of(ctx).pool, scope_of(ctx), document_id)
        if not text.strip():
            raise NotFound(
                "the document has no extracted text (e.g. a scanned PDF without a text layer)",
                detail={"document_id": doc.id, "reason": "empty"},
            )
    except Exception as exc:
        raise _resource_error(as_pgrag_error(exc, trace_id), uri) from exc
    meta = {
        "documentId": doc.id,
        "documentName": doc.row.name,
        "extractedAt": iso(doc.row.ingested_at),
        "format": doc.file_type,
    }
    part = await asyncio.to_thread(text_part, text, 0)  # the rest: the core resource's ?start=
    return with_note(part, content_uri(doc.id, part.end)), meta


def register_extracted_content(server: MCPServer[Any]) -> None:
    """Add the resource template (its reads carry per-document `_meta`)."""
    template = _PerReadMetaTemplate.from_function(
        extracted_content,
        uri_template="ldims://docs/{document_id}/extracted_content",
        name="extracted_content",
        title="LDIMS extracted content",
        description=RESOURCE_DESCRIPTION,
        mime_type="text/plain",
    )
    sdk.add_resource_template(server, template)
