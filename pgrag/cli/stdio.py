"""MCP over stdio whose stdin reader a stop signal can cancel.

The SDK reads stdin in a worker thread; a read waiting for the client cannot be cancelled,
so on SIGTERM the server waited for the client to close stdin before it unwound (and the
embedded PostgreSQL it started stayed up meanwhile). Here stdin, when it is a pipe, socket or
terminal, is read through the event loop instead; a regular file (`serve < requests.jsonl`)
never blocks and keeps the SDK's reader. As the SDK does, fd 0 points at the null device
while serving, so nothing else in the process (a converter's child process) eats requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from collections.abc import AsyncIterator
from typing import Any

import anyio

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024 * 1024  # one JSON-RPC message per line; longer ones are dropped


class _Lines:
    """What the SDK's stdio transport iterates: text lines, newline included."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            try:
                line = await self.reader.readline()
            except ValueError:  # longer than MAX_LINE: the reader dropped it
                log.warning("dropped a stdin message longer than %d bytes", MAX_LINE)
                continue
            if not line:
                return
            yield line.decode("utf-8", errors="replace")


def _pollable(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@contextlib.asynccontextmanager
async def cancellable_stdin() -> AsyncIterator[_Lines | None]:
    """stdin's lines read by the event loop, or None when stdin is a regular file."""
    if not _pollable(0):
        yield None
        return
    loop = asyncio.get_running_loop()
    saved = os.dup(0)  # ours, to put fd 0 back; the transport closes its own copy at EOF
    wire = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    reader = asyncio.StreamReader(limit=MAX_LINE)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire, "rb", buffering=0)
    )
    try:
        yield _Lines(reader)
    finally:
        os.dup2(saved, 0)  # stdin back on the wire, blocking again (a terminal's shell needs it)
        os.close(saved)
        with contextlib.suppress(OSError):
            os.set_blocking(0, True)
        transport.close()


async def serve_stdio(server: Any) -> None:
    """What `MCPServer.run("stdio")` does, with the cancellable stdin."""
    from mcp.server.stdio import stdio_server

    from pgrag.mcp.sdk import lowlevel as lowlevel_of

    lowlevel = lowlevel_of(server)
    async with cancellable_stdin() as lines, stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
        await lowlevel.run(read, write, lowlevel.create_initialization_options())


def run_stdio(server: Any) -> None:
    anyio.run(serve_stdio, server)
