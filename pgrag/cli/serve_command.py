"""`pgrag serve`: the MCP server over stdio, or HTTP (Streamable HTTP /mcp, SSE /sse, REST).

Before serving, the database is checked and migrated (so a bad set-up is one line and an
exit code, not a server traceback); once it serves, stderr says where and how, and when it
stops. stdout is left alone: over stdio it is the MCP channel."""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import click

from pgrag.cli.app import cli, run, state
from pgrag.cli.signals import note_interrupted, received_stop_signal, stop_signal_name
from pgrag.settings import Settings

_json_logs = False  # PGRAG_LOG_FORMAT=json: the start/stop lines are JSON records too


@cli.command()
@click.option(
    "--transport", "-t", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address")
@click.option("--port", "-p", type=click.IntRange(1, 65535), default=8765, show_default=True)
@click.option(
    "--watch",
    "-w",
    "watch",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="ingest this folder and follow its changes while serving (repeatable)",
)
@click.pass_context
def serve(
    ctx: click.Context, transport: str, host: str, port: int, watch: tuple[Path, ...]
) -> None:
    """Serve the MCP tools and resources (stdio for desktop/IDE clients, http for remote)."""
    settings = state(ctx).settings
    global _json_logs
    _json_logs = settings.log_format == "json"
    from pgrag.http.auth import parse_api_keys

    keys = parse_api_keys(settings.api_keys) if transport == "http" else []
    from pgrag.runtime import preflight

    dsn = run(lambda: preflight(settings, scoped=any(k.collections is not None for k in keys)))
    database = _describe_database(settings, dsn)
    from pgrag.services.context import read_only

    try:
        if transport == "stdio":
            from pgrag.mcp.server import build_server

            server = build_server(settings, watch=list(watch))
            _settle_heap()
            _say(
                "MCP over stdio (JSON-RPC on stdin/stdout)",
                _modes(settings, read_only=read_only(settings, remote=False), keys=None),
                f"database: {database}",
            )
            from pgrag.cli.stdio import run_stdio

            run_stdio(server)
            _say("stopped (stdin closed)")
            return
        from pgrag.http.app import create_app, run_http

        app = create_app(settings, host=host, port=port, watch=list(watch))
        url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
        _announce_when_started(
            app,
            f"listening on {url} (MCP Streamable HTTP {url}/mcp, SSE /sse, REST /api)",
            _modes(settings, read_only=read_only(settings, remote=True), keys=keys),
            f"database: {database}",
        )
        _settle_heap()
        # uvicorn returns only once it has handled a stop signal: SIGINT unless ours saw one
        run_http(app, settings, host=host, port=port)
        _say(f"stopped ({received_stop_signal() or 'SIGINT'})")
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: how a server ends, so exit 0
        note_interrupted()
        _say(f"stopped ({stop_signal_name()})")


def _describe_database(settings: Settings, dsn: str) -> str:
    from pgrag.doctor import describe_database

    return describe_database(settings, dsn)


def _modes(settings: Settings, *, read_only: bool, keys: list[Any] | None) -> str:
    parts = []
    if keys is not None:
        if keys:
            limited = sum(1 for k in keys if k.collections is not None)
            parts.append(
                f"auth: on ({len(keys)} bearer key{'s' if len(keys) != 1 else ''}"
                + (f", {limited} limited to collections" if limited else "")
                + ")"
            )
        elif not settings.oauth_on(has_keys=bool(keys)):
            parts.append("auth: off (no PGRAG_API_KEYS: whoever reaches the port may call)")
        if settings.oauth_on(has_keys=bool(keys)):
            issuer = settings.oauth_issuer or "pgrag's own authorization server"
            parts.append(f"OAuth: on ({issuer})")
    parts.append(f"read-only: {'yes' if read_only else 'no'}")
    parts.append(f"toolsets: {settings.toolsets}")
    return "; ".join(parts)


def _say(*lines: str) -> None:
    """Operator messages on stderr: over stdio, stdout belongs to the MCP client. With
    PGRAG_LOG_FORMAT=json they are JSON log records like every other stderr line (whatever
    the log level: they are the server's start and stop, not chatter)."""
    if _json_logs:
        from pgrag.cli.app import JsonLogFormatter

        record = logging.makeLogRecord(
            {
                "name": "pgrag.serve",
                "levelno": logging.INFO,
                "levelname": "INFO",
                "msg": "; ".join(line.strip() for line in lines),
            }
        )
        click.echo(JsonLogFormatter().format(record), err=True)
        return
    click.echo(f"pgrag serve: {lines[0]}", err=True)
    for line in lines[1:]:
        click.echo(f"  {line}", err=True)


def _announce_when_started(app: Any, *lines: str) -> None:
    """Say where the server listens once its start-up (database, services) has succeeded."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def announced(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as value:
            _say(*lines)
            yield value

    app.router.lifespan_context = announced


def _settle_heap() -> None:
    """What exists before serving (modules, schemas, the app) lives as long as the process:
    frozen out of the collector's generations, it is not walked again by every full
    collection a request's garbage triggers (~6 % of the server's CPU per search before)."""
    gc.collect()
    gc.freeze()
