"""Document resources: `pgrag://documents/{id}` (metadata + outline) and `.../content`
(extracted text). Everything here is also reachable through tools (get_document_outline,
get_document_data), since many clients never read resources."""

from __future__ import annotations

import json
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.shared.exceptions import MCPError

from pgrag.db.scope import scoped_connection
from pgrag.errors import ErrorCode, NotFound, PgragError
from pgrag.mcp.app_state import scope_of, state_of
from pgrag.services import documents as docs

RESOURCE_ERROR = -32002  # MCP: resource error (not found / unavailable)
LIST_PAGE = 100

LIST_RESOURCES_SQL = """
SELECT d.id::text, d.name, d.path, d.file_type, d.title, d.size_bytes
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[])) AND d.path > %(after)s
ORDER BY d.path LIMIT %(limit)s
"""


def _mcp_error(exc: PgragError, uri: str) -> MCPError:
    return MCPError(
        code=RESOURCE_ERROR,
        message=f"{exc.code}: {exc.message}",
        data={"code": str(exc.code), "uri": uri, **exc.detail},
    )


def _json_default(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def register_resources(server: MCPServer[Any]) -> None:
    @server.resource(
        "pgrag://documents/{document_id}",
        name="document",
        mime_type="application/json",
        description="A document's metadata and cached outline (pages, sheets, slides, headings).",
    )
    async def document(document_id: str, ctx: Context[Any, Any]) -> str:
        doc, _ = await _read(ctx, document_id, f"pgrag://documents/{document_id}", with_text=False)
        body = {
            "metadata": docs.metadata(doc),
            "outline": doc.row["outline"] or {},
            "status": doc.row["status"],
            "error_code": doc.row["error_code"],
        }
        return json.dumps(body, ensure_ascii=False, default=_json_default)

    @server.resource(
        "pgrag://documents/{document_id}/content",
        name="document_content",
        mime_type="text/plain",
        description="A document's extracted text.",
    )
    async def document_content(document_id: str, ctx: Context[Any, Any]) -> str:
        _, text = await _read(
            ctx, document_id, f"pgrag://documents/{document_id}/content", with_text=True
        )
        return text or ""


async def _read(
    ctx: Context[Any, Any], ref: str, uri: str, *, with_text: bool
) -> tuple[docs.DocumentRef, str | None]:
    """Resolve under the caller's scope; map errors to MCP resource errors."""
    try:
        async with scoped_connection(state_of(ctx).pool, scope_of(ctx)) as conn:
            doc = await docs.resolve(conn, ref, scope_of(ctx))
            if not with_text:
                return doc, None
            docs.require_ready(doc)
            return doc, await docs.extracted_text(conn, doc.id)
    except NotFound as exc:
        raise ResourceNotFoundError(exc.message) from exc
    except PgragError as exc:
        raise _mcp_error(exc, uri) from exc


async def list_document_resources(
    state: Any, scope: list[str] | None, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of documents as resources; the cursor is the last path (signed)."""
    after = ""
    if cursor:
        try:
            after = str(state.codec.decode(cursor, "resources/list", "documents").get("after", ""))
        except PgragError as exc:
            raise MCPError(
                code=-32602, message=exc.message, data={"code": str(ErrorCode.INVALID_ARGUMENT)}
            ) from exc
    async with scoped_connection(state.pool, scope) as conn:
        rows = await (
            await conn.execute(
                LIST_RESOURCES_SQL, {"scope": scope, "after": after, "limit": LIST_PAGE + 1}
            )
        ).fetchall()
    items = [
        {
            "uri": f"pgrag://documents/{r[0]}",
            "name": r[2],
            "title": r[4] or r[1],
            "mime_type": "application/json",
            "size": r[5],
            "description": f"{r[3]} document {r[2]}",
        }
        for r in rows[:LIST_PAGE]
    ]
    next_cursor = (
        state.codec.encode("resources/list", "documents", {"after": rows[LIST_PAGE - 1][2]})
        if len(rows) > LIST_PAGE
        else None
    )
    return items, next_cursor
