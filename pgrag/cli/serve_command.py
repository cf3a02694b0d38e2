"""`pgrag serve`: the MCP server over stdio, or HTTP (Streamable HTTP /mcp, SSE /sse, REST)."""

from __future__ import annotations

import click

from pgrag.cli.app import cli, state


@cli.command()
@click.option(
    "--transport", "-t", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address")
@click.option("--port", "-p", type=click.IntRange(1, 65535), default=8765, show_default=True)
@click.pass_context
def serve(ctx: click.Context, transport: str, host: str, port: int) -> None:
    """Serve the MCP tools and resources (stdio for desktop/IDE clients, http for remote)."""
    settings = state(ctx).settings
    if transport == "stdio":
        from pgrag.mcp.server import build_server

        build_server(settings).run()
        return
    from pgrag.http.app import run_http

    run_http(settings, host=host, port=port)
