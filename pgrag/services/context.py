"""The application context every transport shares (MCP over stdio or HTTP, the REST API):
pool, provider, settings, search service, continuation codec, change relay; and the policy
that must not differ between transports: one read-only rule, one set of time limits."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from psycopg_pool import AsyncConnectionPool

from pgrag import language
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.errors import Forbidden
from pgrag.paging import ContinuationCodec
from pgrag.runtime import open_runtime
from pgrag.search.engine import SearchService
from pgrag.services import caller_names
from pgrag.services.admission import Admission
from pgrag.services.ingestion import make_ingestor, resume_vectors
from pgrag.services.retention import prune_periodically
from pgrag.services.table_sources import follow as follow_tables
from pgrag.settings import Settings
from pgrag.tokens import encoding

log = logging.getLogger(__name__)

# Time limits of one call, whatever the transport: most reads answer well within the
# default; a search embeds the query first; a write embeds a whole document.
DEFAULT_TIMEOUT_S = 5.0
SEARCH_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 60.0  # embedding 20k characters with the local model takes seconds


class ChangeNotifier(Protocol):
    """Tells connected clients that documents changed (the MCP relay, pgrag/mcp/notify.py).
    A protocol so that services need not import the transport that delivers it."""

    bus: Any

    def remember(self, session: Any) -> None: ...


RelayFactory = Callable[[str], AbstractAsyncContextManager[ChangeNotifier]]


def read_only(settings: Settings, *, remote: bool) -> bool:
    """The one read-only rule. An explicit setting (PGRAG_READ_ONLY) wins; unset means
    writable for local callers (stdio, the CLI, in-process) and read-only for remote ones
    (anything that arrived over HTTP)."""
    return remote if settings.read_only is None else settings.read_only


@dataclass
class AppContext:
    """What every request can reach, opened once per process by open_context."""

    settings: Settings
    pool: AsyncConnectionPool
    provider: EmbeddingProvider
    search: SearchService
    codec: ContinuationCodec
    relay: ChangeNotifier
    admission: Admission


class SharedContext:
    """The context the HTTP app opened, so MCP sessions and REST routes share one pool."""

    context: AppContext | None = None


@contextlib.asynccontextmanager
async def open_context(
    settings: Settings, *, relay: RelayFactory, watch: list[Path] | None = None
) -> AsyncIterator[AppContext]:
    """Pool, provider, services, the change relay `relay(dsn)` opens, the log retention job
    and (serve --watch) the watcher; all closed on the way out."""
    async with contextlib.AsyncExitStack() as stack:
        rt = await stack.enter_async_context(open_runtime(settings, max_pool=20))
        notifier = await stack.enter_async_context(relay(rt.db.dsn))
        service = SearchService.configured(rt.db.pool, rt.provider, settings)
        # the tokenizer and the language model load in about a second each: before the
        # first call, not on the event loop while it runs
        encoding()
        language.load()
        if service.reranker is not None:
            await service.reranker.load()
        async with rt.db.pool.connection() as conn:
            codec = await service.codec(conn)  # one secret for every tool's tokens
        caller_names.use_database_secret(codec.secret.decode())
        context = AppContext(
            settings=settings,
            pool=rt.db.pool,
            provider=rt.provider,
            search=service,
            codec=codec,
            relay=notifier,
            admission=Admission(settings.caller_slow_share, settings.slow_call_ms / 1000),
        )
        if watch:  # its first scan resumes the vectors earlier runs left missing
            await stack.enter_async_context(_watching(context, watch))
        if settings.log_retention_days > 0:
            await stack.enter_async_context(
                _background(prune_periodically(rt.db.pool, settings.log_retention_days))
            )
        if not read_only(settings, remote=False):  # table sources: drained on NOTIFY
            await stack.enter_async_context(
                _background(follow_tables(rt.db.dsn, rt.db.pool, rt.provider, settings))
            )
        if not watch and not read_only(settings, remote=False):  # cancelled first on exit
            await stack.enter_async_context(_background(_resuming(context)))
        yield context


@contextlib.asynccontextmanager
async def _background(job: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run `job` while the server runs; cancel it on the way out."""
    task = asyncio.create_task(job)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _resuming(context: AppContext) -> None:
    try:
        await resume_vectors(context.settings, context.pool, context.provider)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("computing the vectors earlier runs left missing failed")


@contextlib.asynccontextmanager
async def _watching(context: AppContext, paths: list[Path]) -> AsyncIterator[None]:
    """`pgrag serve --watch`: ingest and follow changes inside the server process (the
    watcher's first scan is the initial ingest: nothing changed meanwhile is missed)."""
    from pgrag.ingest.watch import watch_and_ingest

    ingestor = make_ingestor(context.settings, context.pool, context.provider)

    async def run() -> None:
        try:
            await watch_and_ingest(ingestor, paths)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("watching %s failed", paths)

    async with _background(run()):
        yield


def require_remote_writes(settings: Settings) -> None:
    """REST uploads and deletions: refused on a read-only server (the rule above, for a
    remote caller) and unless the `write` toolset is on, the switch MCP writes need too."""
    if read_only(settings, remote=True) or "write" not in settings.toolset_list:
        raise Forbidden(
            "this server is read-only: start it with PGRAG_READ_ONLY=false and the "
            "`write` toolset to accept uploads and deletions"
        )
