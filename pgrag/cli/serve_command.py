"""`pgrag serve`: the MCP server over stdio, or HTTP (Streamable HTTP /mcp, SSE /sse, REST)."""

from __future__ import annotations

from pathlib import Path

import click

from pgrag.cli.app import cli, state


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
    if transport == "stdio":
        from pgrag.mcp.server import build_server

        build_server(settings, watch=list(watch)).run()
        return
    from pgrag.http.app import run_http

    run_http(settings, host=host, port=port, watch=list(watch))
