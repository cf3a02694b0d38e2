"""Operations: liveness, readiness, Prometheus metrics, ingestion status."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel

from pgrag import metrics
from pgrag.http.deps import Context, Scope, guard, shared_context
from pgrag.http.errors import error_doc, error_docs
from pgrag.jsonable import jsonable
from pgrag.services import documents as docs
from pgrag.services.context import DEFAULT_TIMEOUT_S, SharedContext
from pgrag.services.status import database_ready, document_status, report_for
from pgrag.services.table_sources import refresh_metrics

# Two routers so the OpenAPI document keeps its order: probes first, status after the
# document routes. The probes do no work worth guarding: liveness, one `SELECT 1`, and the
# metrics of this process.
probes = APIRouter(tags=["ops"])
status = APIRouter(tags=["ops"], dependencies=[guard(DEFAULT_TIMEOUT_S)])


class Readiness(BaseModel):
    status: Literal["ready", "unavailable"]


@probes.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers (never needs a key)."""
    return {"status": "ok"}


@probes.get(
    "/readyz",
    response_model=Readiness,
    responses={
        401: error_doc(401),
        503: {"model": Readiness, "description": "the database does not answer"},
    },
)
async def readyz(shared: Annotated[SharedContext, Depends(shared_context)]) -> JSONResponse:
    """Readiness: the database answers."""
    if not await database_ready(shared.context.pool if shared.context else None):
        return JSONResponse(
            {"status": "unavailable"}, status_code=503, headers={"Retry-After": "5"}
        )
    return JSONResponse({"status": "ready"})


@probes.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses=error_docs(plain_text_route=True),
)
async def metrics_endpoint(
    shared: Annotated[SharedContext, Depends(shared_context)],
) -> Response:
    """Prometheus metrics: searches, tool calls, ingested documents, search latency, table
    sources' pending rows and lag."""
    if shared.context is not None:
        with contextlib.suppress(Exception):  # a metric never fails the scrape
            await refresh_metrics(shared.context.pool)
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)


@status.get("/api/status", responses=error_docs(404))
async def api_status(context: Context, scope: Scope, document: str | None = None) -> dict[str, Any]:
    """Counts by status, or one document's status, progress and error."""
    if document:
        report = document_status(await docs.find(context.pool, scope, document))
    else:
        report = await report_for(context.pool, scope)
    body: dict[str, Any] = jsonable(report)
    return body
