"""Document resources: `pgrag://documents/{id}` (metadata + outline) and `.../content`
(extracted text, in parts under the response cap). Everything here is also reachable
through tools (get_document_outline, get_document_data), since many clients never read
resources."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from pgrag.errors import ErrorCode, NotFound, PgragError
from pgrag.mcp.app_state import scope_of, state_of
from pgrag.mcp.text_parts import parse_start, with_note
from pgrag.services import documents as docs
from pgrag.services.context import DEFAULT_TIMEOUT_S
from pgrag.services.guard import RESOURCES, Call, Transport, guarded
from pgrag.text_parts import text_part

RESOURCE_ERROR = -32002  # MCP: resource error (not found / unavailable)
LIST_PAGE = 100

READ = RESOURCES + "read "  # a resource read is audited as "resources/read document"
LIST = RESOURCES + "list"
NO_ID = "00000000-0000-0000-0000-000000000000"


def _mcp_error(exc: PgragError, uri: str) -> MCPError:
    return MCPError(
        code=RESOURCE_ERROR,
        message=f"{exc.code}: {exc.message}",
        data={"code": str(exc.code), "uri": uri, **exc.detail},
    )


def _json_default(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def document_body(doc: docs.DocumentRef) -> str:
    """What `pgrag://documents/{id}` returns (also measured for the listing's `size`)."""
    body = {
        "metadata": docs.metadata(doc),
        "outline": doc.row.outline or {},
        "status": doc.row.status,
        "error_code": doc.row.error_code,
    }
    return json.dumps(body, ensure_ascii=False, default=_json_default)


def register_resources(server: MCPServer[Any]) -> None:
    @server.resource(
        "pgrag://documents/{document_id}",
        name="document",
        mime_type="application/json",
        description="A document's metadata and cached outline (pages, sheets, slides, headings).",
    )
    async def document(document_id: str, ctx: Context[Any, Any]) -> str:
        uri = f"pgrag://documents/{document_id}"
        async with _resource_call(ctx, "document", uri):
            doc, _ = await _read(ctx, document_id, with_text=False)
            return document_body(doc)

    @server.resource(
        "pgrag://documents/{document_id}/content{?start}",
        name="document_content",
        mime_type="text/plain",
        description=(
            "A document's extracted text. A text over the response cap comes in parts: each "
            "ends with a note naming the next part's URI (?start= a character offset)."
        ),
    )
    async def document_content(
        document_id: str, ctx: Context[Any, Any], start: str | None = None
    ) -> str:
        uri = content_uri(document_id)
        offset = parse_start(start, uri)
        async with _resource_call(ctx, "document_content", uri, start=start):
            doc, text = await _read(ctx, document_id, with_text=True)
            part = await asyncio.to_thread(text_part, text or "", offset)  # tokenising
            return with_note(part, content_uri(doc.id, part.end))


def content_uri(document_id: str, start: int = 0) -> str:
    """The URI of a document's text, from character `start` on."""
    uri = f"pgrag://documents/{document_id}/content"
    return f"{uri}?start={start}" if start else uri


@contextlib.asynccontextmanager
async def _resource_call(
    ctx: Context[Any, Any], name: str, uri: str, **arguments: Any
) -> AsyncIterator[None]:
    """A resource read as a guarded call (pgrag/services/guard.py); its failures as MCP
    resource errors."""
    call = Call(Transport.MCP, READ + name, {"uri": uri, **arguments})
    try:
        async with guarded(state_of(ctx), call, DEFAULT_TIMEOUT_S):
            yield
    except NotFound as exc:  # the spec's "resource not found", with our stable code
        raise MCPError(
            code=INVALID_PARAMS,
            message=exc.message,
            data={"code": str(exc.code), "uri": uri, **exc.detail},
        ) from exc
    except PgragError as exc:
        raise _mcp_error(exc, uri) from exc


async def _read(
    ctx: Context[Any, Any], ref: str, *, with_text: bool
) -> tuple[docs.DocumentRef, str | None]:
    """Resolve under the caller's scope."""
    state, scope = state_of(ctx), scope_of(ctx)
    if not with_text:
        return await docs.find(state.pool, scope, ref), None
    return await docs.ready_text(state.pool, scope, ref)


async def list_document_resources(
    state: Any, scope: list[str] | None, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of documents as resources; the cursor is the last (path, id) (signed). Each
    resource's `size` is the byte length of what its URI returns (the JSON document body),
    not the source file's."""
    after, after_id = "", NO_ID
    if cursor:
        try:
            position = state.codec.decode(cursor, "resources/list", "documents")
            after = str(position.get("after", ""))
            after_id = str(position.get("id", NO_ID))
        except PgragError as exc:
            raise MCPError(
                code=INVALID_PARAMS,
                message=exc.message,
                data={"code": str(ErrorCode.INVALID_ARGUMENT)},
            ) from exc
    call = Call(Transport.MCP, LIST, {"cursor": cursor} if cursor else {})
    try:
        async with guarded(state, call, DEFAULT_TIMEOUT_S):
            refs = await docs.page_after(state.pool, scope, (after, after_id), LIST_PAGE + 1)
    except PgragError as exc:
        raise _mcp_error(exc, "resources/list") from exc
    items = [
        {
            "uri": f"pgrag://documents/{d.id}",
            "name": d.row.path,
            "title": d.row.title or d.row.name,
            "mime_type": "application/json",
            "size": len(document_body(d).encode()),
            "description": f"{d.file_type} document {d.row.path}",
        }
        for d in refs[:LIST_PAGE]
    ]
    last = refs[LIST_PAGE - 1] if len(refs) > LIST_PAGE else None
    next_cursor = (
        state.codec.encode("resources/list", "documents", {"after": last.row.path, "id": last.id})
        if last is not None
        else None
    )
    return items, next_cursor
