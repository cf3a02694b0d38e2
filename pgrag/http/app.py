"""One HTTP process: Streamable HTTP at /mcp (stateless; JSON bodies unless a call asks for
progress, see mcp_mode.py), legacy SSE at /sse, the REST API (routes/; stable
codes and error bodies in errors.py), /healthz, /readyz, the OpenAPI description and the
web console at / (pgrag/web)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route

from pgrag import __version__
from pgrag.db.scope import ensure_scoping_possible
from pgrag.http.auth import BearerAuth, admin_keys, parse_api_keys
from pgrag.http.errors import HTTP_STATUS, error_schemas, install_error_handlers
from pgrag.http.form_bounds import FormBounds
from pgrag.http.host_guard import HostGuard, host_policy, is_loopback
from pgrag.http.jsonrpc import QuietRejections
from pgrag.http.mcp_mode import ResponseModeRouter, ScopeCheck, ScopeGate
from pgrag.http.oauth.mount import oauth_gate
from pgrag.http.routes import documents, ops, search
from pgrag.mcp.notify import running_relay
from pgrag.mcp.server import PgragServer, build_server
from pgrag.services.auth_throttle import AuthThrottle
from pgrag.services.context import SharedContext, open_context
from pgrag.services.oauth import OAuthScope
from pgrag.settings import Settings
from pgrag.web import app as console


def create_app(
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    watch: list[Path] | None = None,
) -> FastAPI:
    """The REST routes, the MCP transports, auth and the Host/Origin guard, over one
    context that the app's lifespan opens and MCP sessions share."""
    shared = SharedContext()
    keys = parse_api_keys(settings.api_keys)
    server = build_server(settings, shared=shared)
    oauth = oauth_gate(settings, keys, host, port, shared)
    scope_check = None
    if oauth is not None:  # a read-only grant calling a write tool: 403 insufficient_scope
        challenge = oauth.challenge("insufficient_scope", OAuthScope.WRITE.value)
        scope_check = ScopeCheck(server.write_tools, challenge)
    mcp_routes, run_mcp = _mcp_transports(server, host, scope_check)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with open_context(settings, relay=running_relay, watch=watch) as context:
            if any(k.collections is not None for k in keys):
                await ensure_scoping_possible(context.pool)
            shared.context = context
            async with run_mcp():
                yield
            shared.context = None

    app = FastAPI(
        title="pgrag",
        version=__version__,
        lifespan=lifespan,
        description="REST API of pgrag; MCP is served at /mcp (Streamable HTTP) and /sse.",
    )
    app.state.shared = shared
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    install_error_handlers(app)
    for router in (ops.probes, search.router, documents.router, ops.status):
        app.include_router(router)
    app.router.routes.extend(mcp_routes)
    if oauth is not None:  # OAuth 2.1 beside the keys (pgrag/http/oauth)
        app.router.routes.extend(oauth.routes())
        if oauth.own_server:  # the consent page answers only for pgrag's own server
            app.state.oauth_issuer = oauth.issuer
    console_keys = [*keys, *admin_keys(settings)]
    # one budget of failed guesses: bearer keys and sign-ins
    throttle = AuthThrottle(burst=settings.auth_failure_burst)
    console.mount(
        app,
        settings,
        shared,
        keys=console_keys,
        loopback=is_loopback(host),
        error_status=HTTP_STATUS,
        throttle=throttle,
    )
    cross_origin = oauth.is_open if oauth is not None else _nowhere
    app.add_middleware(FormBounds, skip=console.owns, cross_origin=cross_origin)
    app.add_middleware(BearerAuth, keys=keys, own_auth=console.owns, oauth=oauth, throttle=throttle)
    policy = host_policy(host, settings.allowed_hosts, settings.allowed_origins)
    app.add_middleware(HostGuard, policy=policy)  # outermost
    return app


def _nowhere(path: str) -> bool:
    return False


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's description minus the 422 it adds by itself (a request that fails
    validation is answered 400 INVALID_ARGUMENT), plus the error body routes refer to."""
    if app.openapi_schema is None:
        schema = FastAPI.openapi(app)
        for item in schema["paths"].values():
            for operation in item.values():
                operation["responses"].pop("422", None)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        components.update(error_schemas())
    return app.openapi_schema  # type: ignore[return-value]


def _mcp_transports(
    server: PgragServer, host: str, scope_check: ScopeCheck | None
) -> tuple[list[BaseRoute], Callable[[], AbstractAsyncContextManager[None]]]:
    """/mcp (Streamable HTTP, JSON or SSE bodies per call), /sse and /messages; and a
    context manager that runs their session managers."""
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
    router = ResponseModeRouter(
        _mcp_endpoint(json_http), _mcp_endpoint(stream_http), scope_check=scope_check
    )
    mcp_route = Route("/mcp", router)
    sse = server.sse_app(host=host, transport_security=sdk_security)
    for route in sse.routes:  # GET /sse: a refused request is answered, not raised
        if isinstance(route, Route) and route.path == "/sse":
            route.app = QuietRejections(route.app)
        elif isinstance(route, Mount) and scope_check is not None:  # POST /messages
            route.app = ScopeGate(route.app, scope_check)

    @contextlib.asynccontextmanager
    async def run() -> AsyncIterator[None]:
        async with stream_manager.run(), json_manager.run():
            yield

    return [mcp_route, *sse.routes], run


def _mcp_endpoint(mcp_app: Starlette) -> Any:
    """The ASGI endpoint the SDK mounts at /mcp in its app."""
    return next(r.endpoint for r in mcp_app.routes if isinstance(r, Route) and r.path == "/mcp")


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
        **proxy_options(settings),
    )


def proxy_options(settings: Settings) -> dict[str, Any]:
    """Whose X-Forwarded-For (and -Proto) uvicorn believes: PGRAG_TRUSTED_PROXIES only.
    Left to itself uvicorn trusts 127.0.0.1 (or $FORWARDED_ALLOW_IPS), and any local
    process could then name itself any caller."""
    trusted = settings.trusted_proxies
    return {"proxy_headers": trusted is not None, "forwarded_allow_ips": trusted or ""}
