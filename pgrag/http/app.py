"""One HTTP process: Streamable HTTP at /mcp (stateless; JSON bodies unless a call asks for
progress, see mcp_mode.py), legacy SSE at /sse, the REST API
(SPEC §6, seed 000's codes and error bodies), /healthz, /readyz and the OpenAPI description."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import FastAPI, File, Form, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import Match, Route

from pgrag import __version__, metrics
from pgrag.db.scope import ensure_scoping_possible, scoped_connection
from pgrag.errors import ErrorCode, Forbidden, InvalidArgument, PgragError
from pgrag.http.auth import BearerAuth, parse_api_keys
from pgrag.http.host_guard import HostGuard, host_policy
from pgrag.http.jsonrpc import QuietRejections
from pgrag.http.mcp_mode import ResponseModeRouter
from pgrag.ingest.parsers import SUPPORTED_EXTENSIONS
from pgrag.mcp.app_state import AppState
from pgrag.mcp.auth import current_scope
from pgrag.mcp.server import SharedState, build_server, open_app_state
from pgrag.search.models import SearchData, SearchFilters, SearchRequest
from pgrag.services import documents as docs
from pgrag.services.status import status_report
from pgrag.settings import Settings

log = logging.getLogger(__name__)

HTTP_STATUS = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.PROCESSING: 202,
    ErrorCode.CONTENT_UNAVAILABLE: 409,
    ErrorCode.DB_ERROR: 503,
    ErrorCode.UPSTREAM_ERROR: 502,
    ErrorCode.TIMEOUT: 504,
    ErrorCode.INTERNAL: 500,
}
MAX_UPLOAD_BYTES = 50 * 1024 * 1024


class ErrorBody(BaseModel):
    """Every REST error (SPEC §6, seed 000): a stable code an agent can act on."""

    isError: Literal[True]
    errorCode: ErrorCode | Literal["UNAUTHORIZED"]
    errorMessage: str
    errorDetails: dict[str, Any]
    status: Literal["processing"] | None = None  # only with 202 PROCESSING


class Continuation(BaseModel):
    has_more: bool
    token: str | None


class SearchBody(SearchData):
    continuation: Continuation


class UploadAccepted(BaseModel):
    status: Literal["pending"]
    path: str
    collection: str
    status_url: str


class Readiness(BaseModel):
    status: Literal["ready", "unavailable"]


_ERRORS: dict[int, str] = {
    202: "PROCESSING: ingestion still running; retry after Retry-After seconds",
    400: "INVALID_ARGUMENT: a parameter cannot be used (the message says which)",
    401: "UNAUTHORIZED: API keys are configured and none or an unknown one was sent",
    403: "FORBIDDEN: out of the key's collections, or writes on a read-only server",
    404: "NOT_FOUND: no such document or collection (or not visible to this key)",
    409: "CONTENT_UNAVAILABLE: ingestion of the document failed",
    502: "UPSTREAM_ERROR: the embedding provider failed",
    503: "DB_ERROR: the database is unavailable; retry after Retry-After seconds",
    504: "TIMEOUT: the call took too long",
}


def _errors(*codes: int, plain_text_route: bool = False) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` for the error statuses a route can answer (always 400/401/503).
    Errors are JSON even where the route's success is text/plain."""
    if plain_text_route:
        ref = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        return {c: {"description": _ERRORS[c], "content": ref} for c in sorted({401, *codes})}
    return {
        c: {"model": ErrorBody, "description": _ERRORS[c]} for c in sorted({400, 401, 503, *codes})
    }


def error_response(exc: PgragError) -> JSONResponse:
    status = HTTP_STATUS.get(exc.code, 500)
    body: dict[str, Any] = {
        "isError": True,
        "errorCode": str(exc.code),
        "errorMessage": exc.message,
        "errorDetails": exc.detail,
    }
    if exc.code == ErrorCode.PROCESSING:
        body["status"] = "processing"
    headers = {"Retry-After": "5"} if status in (202, 503) else None
    return JSONResponse(body, status_code=status, headers=headers)


def _mcp_endpoint(mcp_app: Starlette) -> Any:
    """The ASGI endpoint the SDK mounts at /mcp in its app."""
    return next(r.endpoint for r in mcp_app.routes if isinstance(r, Route) and r.path == "/mcp")


def _read_only(settings: Settings) -> bool:
    return True if settings.read_only is None else settings.read_only


def _allowed_methods(app: FastAPI, request: Request) -> str:
    """Every method the path has: Starlette's own 405 names only the first matching
    route's (GET /api/documents hid POST)."""
    methods: set[str] = set()
    for route in app.router.routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches(request.scope)
            if match != Match.NONE:
                methods |= route.methods
    return ", ".join(sorted(methods))


def create_app(
    settings: Settings, *, host: str = "127.0.0.1", watch: list[Path] | None = None
) -> FastAPI:
    shared = SharedState()
    keys = parse_api_keys(settings.api_keys)
    server = build_server(settings, shared=shared)
    policy = host_policy(host, settings.allowed_hosts, settings.allowed_origins)
    # HostGuard applies one Host/Origin policy to every route; the SDK's own check is off
    sdk_security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    stream_http = server.streamable_http_app(
        stateless_http=True, host=host, transport_security=sdk_security
    )
    stream_manager = server.session_manager
    json_http = server.streamable_http_app(
        stateless_http=True, json_response=True, host=host, transport_security=sdk_security
    )
    json_manager = server.session_manager
    mcp_route = Route(
        "/mcp", ResponseModeRouter(_mcp_endpoint(json_http), _mcp_endpoint(stream_http))
    )
    sse = server.sse_app(host=host, transport_security=sdk_security)
    for route in sse.routes:  # GET /sse: a refused request is answered, not raised
        if isinstance(route, Route) and route.path == "/sse":
            route.app = QuietRejections(route.app)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with open_app_state(settings, watch) as state:
            if any(k.collections is not None for k in keys):
                await ensure_scoping_possible(state.pool)
            shared.state = state
            async with stream_manager.run(), json_manager.run():
                yield
            shared.state = None

    app = FastAPI(
        title="pgrag",
        version=__version__,
        lifespan=lifespan,
        description="REST API of pgrag; MCP is served at /mcp (Streamable HTTP) and /sse.",
    )

    def openapi() -> dict[str, Any]:
        """FastAPI's description minus the 422 it adds by itself: a request that fails
        validation is answered 400 INVALID_ARGUMENT with the ErrorBody (see _validation)."""
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            for item in schema["paths"].values():
                for operation in item.values():
                    operation["responses"].pop("422", None)
            for unused in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(unused, None)
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]

    def state() -> AppState:
        if shared.state is None:
            raise PgragError("the server is starting", code=ErrorCode.DB_ERROR)
        return shared.state

    @app.exception_handler(PgragError)
    async def _pgrag_error(_: Request, exc: PgragError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        """Starlette's own errors (a malformed multipart body, no such route, a method the
        route lacks) in the stable shape, with their status code and headers."""
        if exc.status_code == 404:
            error = PgragError(
                f"no route {request.method} {request.url.path}: see /openapi.json",
                code=ErrorCode.NOT_FOUND,
            )
        elif exc.status_code < 500:
            error = InvalidArgument(str(exc.detail))
        else:
            error = PgragError(str(exc.detail), code=ErrorCode.INTERNAL)
        response = error_response(error)
        response.status_code = exc.status_code
        response.headers.update(exc.headers or {})
        if exc.status_code == 405:
            response.headers["Allow"] = _allowed_methods(app, request)
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        fields = [
            {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()
        ]
        return error_response(
            InvalidArgument(
                "invalid request: " + "; ".join(f"{f['field']}: {f['problem']}" for f in fields),
                detail={"errors": fields},
            )
        )

    @app.exception_handler(ValidationError)
    async def _model_validation(_: Request, exc: ValidationError) -> JSONResponse:
        fields = [
            {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()
        ]
        return error_response(InvalidArgument("invalid request", detail={"errors": fields}))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        from pgrag.mcp.app_state import _as_pgrag_error
        from pgrag.mcp.envelope import new_trace_id

        return error_response(_as_pgrag_error(exc, new_trace_id()))

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers (never needs a key)."""
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["ops"],
        response_model=Readiness,
        responses={
            401: {"model": ErrorBody, "description": _ERRORS[401]},
            503: {"model": Readiness, "description": "the database does not answer"},
        },
    )
    async def readyz() -> JSONResponse:
        """Readiness: the database answers."""
        try:
            async with state().pool.connection(timeout=2) as conn:
                await conn.execute("SELECT 1")
        except Exception:
            return JSONResponse(
                {"status": "unavailable"}, status_code=503, headers={"Retry-After": "5"}
            )
        return JSONResponse({"status": "ready"})

    @app.get(
        "/metrics",
        tags=["ops"],
        response_class=PlainTextResponse,
        responses=_errors(plain_text_route=True),
    )
    async def metrics_endpoint() -> Response:
        """Prometheus metrics: searches, tool calls, ingested documents, search latency."""
        return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)

    @app.get(
        "/api/search",
        tags=["search"],
        response_model=None,
        responses={200: {"model": SearchBody}, **_errors(403, 404, 502, 504)},
    )
    async def api_search(
        q: Annotated[str, Query(min_length=1, max_length=4000)],
        mode: Literal["hybrid", "semantic", "keyword", "exact", "regex"] = "hybrid",
        scope: Literal["chunks", "documents"] = "chunks",
        limit: Annotated[int, Query(ge=1, le=50)] = 5,
        folder: str | None = None,
        file_type: str | None = None,
        collection: str | None = None,
        max_tokens: Annotated[int, Query(ge=50, le=25000)] = 2000,
        continuation_token: str | None = None,
    ) -> dict[str, Any]:
        """Search (same data as the MCP `search` tool)."""
        req = SearchRequest(
            query=q,
            mode=mode,
            scope=scope,
            limit=limit,
            max_tokens=max_tokens,
            continuation_token=continuation_token,
            filters=SearchFilters(folder=folder, file_type=file_type, collection=collection),
        )
        page = await asyncio.wait_for(
            state().search.search(req, collection_scope=current_scope(), caller="rest"), 10
        )
        body = page.data.model_dump(mode="json")
        body["continuation"] = {"has_more": page.has_more, "token": page.next_token}
        return body

    @app.get("/api/documents", tags=["documents"], responses=_errors())
    async def api_documents(
        folder: str | None = None,
        file_type: str | None = None,
        status: Literal["pending", "processing", "ready", "failed"] | None = None,
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> dict[str, Any]:
        """Documents, ordered by path."""
        async with scoped_connection(state().pool, current_scope()) as conn:
            rows = await docs.list_documents(
                conn,
                current_scope(),
                folder=folder,
                file_type=file_type,
                status=status,
                offset=offset,
                limit=limit,
            )
        return {"documents": [_jsonable(r) for r in rows], "offset": offset, "limit": limit}

    @app.get("/api/documents/{document_id}", tags=["documents"], responses=_errors(404))
    async def api_document(document_id: str) -> dict[str, Any]:
        """A document's metadata and cached outline."""
        async with scoped_connection(state().pool, current_scope()) as conn:
            doc = await docs.resolve(conn, document_id, current_scope())
        return {
            "metadata": _jsonable(docs.metadata(doc)),
            "outline": doc.row["outline"] or {},
            "status": doc.row["status"],
            "error_code": doc.row["error_code"],
            "error_detail": doc.row["error_detail"],
        }

    @app.get(
        "/api/documents/{document_id}/content",
        tags=["documents"],
        response_class=PlainTextResponse,
        responses=_errors(202, 400, 404, 409, 503, plain_text_route=True),
    )
    async def api_document_content(document_id: str) -> Response:
        """Extracted text: 200, 202 while processing, 409 when ingestion failed, 404 unknown."""
        async with scoped_connection(state().pool, current_scope()) as conn:
            doc = await docs.resolve(conn, document_id, current_scope())
            docs.require_ready(doc)
            text = await docs.extracted_text(conn, doc.id)
        return PlainTextResponse(text)

    @app.post(
        "/api/documents",
        tags=["documents"],
        status_code=202,
        responses={202: {"model": UploadAccepted}, **_errors(403)},
    )
    async def api_upload(
        file: Annotated[UploadFile, File()],
        collection: Annotated[str | None, Form(max_length=200)] = None,
    ) -> JSONResponse:
        """Upload a file to ingest: 202 with the URL to poll for its status."""
        st = state()
        _require_write(st.settings)
        col = collection or st.settings.collection
        if "\x00" in col:
            raise InvalidArgument("the collection name may not contain a NUL character")
        scope = current_scope()
        if scope is not None and col not in scope:
            raise Forbidden(f"this key may not write to collection '{col}'")
        name = Path(file.filename or "upload").name
        ext = Path(name).suffix.lower().lstrip(".")
        if not name or name.startswith(".") or ext not in SUPPORTED_EXTENSIONS:
            # refused now rather than accepted and failed later: the client learns at once
            raise InvalidArgument(
                "the upload needs a file name with a supported extension: "
                + ", ".join(sorted(SUPPORTED_EXTENSIONS)),
                detail={"file_name": name, "supported": sorted(SUPPORTED_EXTENSIONS)},
            )
        if "\x00" in name or len(name.encode()) > 255:
            raise InvalidArgument("the file name must be at most 255 bytes, without NUL")
        data = await file.read(MAX_UPLOAD_BYTES + 1)
        if len(data) > MAX_UPLOAD_BYTES:
            raise InvalidArgument(f"file larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB")
        # the collection name is the client's: never a path (no "..", no absolute path)
        root = st.settings.home / "uploads" / hashlib.sha256(col.encode()).hexdigest()[:16]
        root.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
        asyncio.get_running_loop().create_task(_ingest_upload(st, root, name, col))
        return JSONResponse(
            {
                "status": "pending",
                "path": name,
                "collection": col,
                "status_url": "/api/status?" + urllib.parse.urlencode({"document": name}),
            },
            status_code=202,
        )

    @app.delete(
        "/api/documents/{document_id}",
        tags=["documents"],
        status_code=204,
        responses=_errors(403, 404),
    )
    async def api_delete(document_id: str) -> Response:
        """Delete a document and everything derived from it."""
        st = state()
        _require_write(st.settings)
        async with scoped_connection(st.pool, current_scope()) as conn:
            doc = await docs.resolve(conn, document_id, current_scope())
        async with st.pool.connection() as conn:  # visibility checked above, under the scope
            await conn.execute("DELETE FROM pgrag.documents WHERE id = %s::uuid", (doc.id,))
        return Response(status_code=204)

    @app.get("/api/status", tags=["ops"], responses=_errors(404))
    async def api_status(document: str | None = None) -> dict[str, Any]:
        """Counts by status, or one document's status, progress and error."""
        async with scoped_connection(state().pool, current_scope()) as conn:
            if document:
                doc = await docs.resolve(conn, document, current_scope())
                return _jsonable(
                    {
                        k: doc.row[k]
                        for k in (
                            "document_id",
                            "path",
                            "status",
                            "progress",
                            "error_code",
                            "error_detail",
                            "ocr",
                        )
                    }
                )
            return _jsonable(await status_report(conn, None, current_scope()))

    app.router.routes.append(mcp_route)
    app.router.routes.extend(sse.routes)
    app.add_middleware(BearerAuth, keys=keys)  # type: ignore[arg-type]
    app.add_middleware(HostGuard, policy=policy)  # type: ignore[arg-type]  # outermost
    return app


def _require_write(settings: Settings) -> None:
    if _read_only(settings) or "write" not in settings.toolset_list:
        raise Forbidden(
            "this server is read-only: start it with PGRAG_READ_ONLY=false and the "
            "`write` toolset to accept uploads and deletions"
        )


async def _ingest_upload(state: AppState, root: Path, name: str, collection: str) -> None:
    from pgrag.ingest.ocr import OcrOptions
    from pgrag.ingest.pipeline import Ingestor
    from pgrag.ingest.walker import FoundFile

    try:
        ingestor = Ingestor(
            state.pool,
            state.provider,
            collection=collection,
            chunk_tokens=state.settings.chunk_tokens,
            chunk_overlap=state.settings.chunk_overlap,
            ocr=OcrOptions.from_settings(state.settings),
        )
        await ingestor.ingest_files(root, [FoundFile(root, root / name, name)])
    except Exception:
        log.exception("ingesting upload %s failed", name)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def run_http(app: FastAPI, settings: Settings, *, host: str, port: int) -> None:
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=settings.log_level.lower(),
        # JSON logs: uvicorn's loggers propagate to the root handler the CLI configured
        log_config=None if settings.log_format == "json" else LOGGING_CONFIG,
        timeout_graceful_shutdown=10,
    )
