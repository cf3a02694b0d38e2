"""Every REST error in one shape (the `isError` body LDIMS clients read, built from the
ErrorBody every transport shares): the status each stable code answers with, the OpenAPI
description of a route's error statuses, and the exception handlers that turn anything a
route raises into that body."""

from __future__ import annotations

import json
from typing import Any, Literal

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import Send

from pgrag.errors import (
    ErrorBody,
    ErrorCode,
    InvalidArgument,
    PgragError,
    as_pgrag_error,
    new_trace_id,
)

HTTP_STATUS = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.TOO_LARGE: 413,
    ErrorCode.PROCESSING: 202,
    ErrorCode.CONTENT_UNAVAILABLE: 409,
    ErrorCode.DB_ERROR: 503,
    ErrorCode.DB_SETUP: 500,  # an operator must act (the message says what): no Retry-After
    ErrorCode.UPSTREAM_ERROR: 502,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.TIMEOUT: 504,
    ErrorCode.INTERNAL: 500,
    ErrorCode.UNSAFE_PERMISSIONS: 503,  # PGRAG_HOME writable by others (home.py)
}


# the ErrorBody under the field names LDIMS clients read, described as ErrorBody in OpenAPI
class RestErrorBody(BaseModel):
    """Every REST error: a stable code an agent can act on, and a message saying what to do."""

    model_config = ConfigDict(title="ErrorBody")

    isError: Literal[True]
    errorCode: ErrorCode | Literal["UNAUTHORIZED"]  # UNAUTHORIZED: HTTP only, no key or unknown
    errorMessage: str
    errorDetails: dict[str, Any]
    status: Literal["processing"] | None = None  # only with 202 PROCESSING

    @classmethod
    def of(cls, error: ErrorBody) -> RestErrorBody:
        processing = error.code is ErrorCode.PROCESSING
        return cls(
            isError=True,
            errorCode=error.code,
            errorMessage=error.message,
            errorDetails=error.detail,
            status="processing" if processing else None,
        )

    def content(self) -> dict[str, Any]:
        """The JSON body (no `status` but with PROCESSING)."""
        return self.model_dump(mode="json", exclude_none=True)


async def send_rest_error(
    send: Send, status: int, error: RestErrorBody, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    """REST's error body from a middleware, before any route (or its handlers) runs."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(error.content()).encode()})


def error_schemas() -> dict[str, Any]:
    """The OpenAPI components of REST's error body, under the name clients know, ErrorBody,
    with the enum it refers to (routes refer to it by name: error_docs)."""
    schema = RestErrorBody.model_json_schema(
        ref_template="#/components/schemas/{model}", mode="serialization"
    )
    return {**schema.pop("$defs", {}), "ErrorBody": schema}


ERROR_DESCRIPTIONS: dict[int, str] = {
    202: "PROCESSING: ingestion still running; retry after Retry-After seconds",
    400: "INVALID_ARGUMENT: a parameter cannot be used (the message says which)",
    401: "UNAUTHORIZED: API keys are configured and none or an unknown one was sent",
    403: "FORBIDDEN: out of the key's collections, or writes on a read-only server",
    404: "NOT_FOUND: no such document or collection (or not visible to this key)",
    409: "CONTENT_UNAVAILABLE: ingestion of the document failed",
    429: "RATE_LIMITED: this caller's slow calls used its share; retry after Retry-After seconds",
    502: "UPSTREAM_ERROR: the embedding provider failed",
    503: "DB_ERROR: the database is unavailable; retry after Retry-After seconds",
    504: "TIMEOUT: the call took too long",
}


def error_doc(status: int) -> dict[str, Any]:
    """One error status in a route's OpenAPI `responses=`: REST's error body."""
    schema = {"$ref": "#/components/schemas/ErrorBody"}
    return {
        "description": ERROR_DESCRIPTIONS[status],
        "content": {"application/json": {"schema": schema}},
    }


def error_docs(*codes: int, plain_text_route: bool = False) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` for the error statuses a route can answer (always 401, and 400 and
    503 unless its success is text/plain). Errors are JSON even where the success is not."""
    always = {401} if plain_text_route else {400, 401, 503}
    return {c: error_doc(c) for c in sorted({*always, *codes})}


def error_response(exc: PgragError) -> JSONResponse:
    """The ErrorBody with the code's status; Retry-After where retrying is the answer."""
    status = HTTP_STATUS.get(exc.code, 500)
    retry_after = exc.detail.get("retry_after_s", 5) if status in (202, 429, 503) else None
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse(RestErrorBody.of(exc.body()).content(), status_code=status, headers=headers)


def allowed_methods(app: FastAPI, request: Request) -> str:
    """Every method the path has: Starlette's own 405 names only the first matching
    route's (GET /api/documents hid POST)."""
    methods: set[str] = set()
    for route in _every_route(app):
        route_methods = getattr(route, "methods", None)
        if route_methods:
            match, _ = route.matches(request.scope)
            if match != Match.NONE:
                methods |= route_methods
    return ", ".join(sorted(methods))


def _every_route(app: FastAPI) -> list[Any]:
    """The app's routes with those of its included routers: FastAPI from 0.16x keeps an
    included router as one entry (iter_route_contexts expands it); older ones copy its
    routes into the app's list."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:
        return list(app.router.routes)
    return list(iter_route_contexts(app.router.routes))


def _field_errors(errors: Any) -> list[dict[str, str]]:
    """Which field failed and why; the values are the caller's, not echoed."""
    return [{"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in errors]


async def _pgrag_error(_: Request, exc: PgragError) -> JSONResponse:
    return error_response(exc)


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
        response.headers["Allow"] = allowed_methods(request.app, request)
    return response


async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
    """A request that fails validation: 400 INVALID_ARGUMENT (FastAPI's 422 is not used)."""
    fields = _field_errors(exc.errors())
    return error_response(
        InvalidArgument(
            "invalid request: " + "; ".join(f"{f['field']}: {f['problem']}" for f in fields),
            detail={"errors": fields},
        )
    )


async def _model_validation(_: Request, exc: ValidationError) -> JSONResponse:
    fields = _field_errors(exc.errors())
    return error_response(InvalidArgument("invalid request", detail={"errors": fields}))


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    """Anything else: mapped as tool calls map it (timeouts, pool, database, internal)."""
    return error_response(as_pgrag_error(exc, new_trace_id()))


def install_error_handlers(app: FastAPI) -> None:
    """Every failure a route can raise answers with the ErrorBody."""
    app.add_exception_handler(PgragError, _pgrag_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(ValidationError, _model_validation)  # type: ignore[arg-type]
    # failures mapped to a stable code are handled here, not by the catch-all: Starlette
    # re-raises what its `Exception` handler answered, and the server logged it once more
    for mapped in (psycopg.Error, TimeoutError, PoolTimeout):
        app.add_exception_handler(mapped, _unexpected)
    app.add_exception_handler(Exception, _unexpected)
