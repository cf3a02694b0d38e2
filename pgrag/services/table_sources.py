"""Table sources as every transport sees them: add, list, remove, sync, and the follower
`pgrag serve` runs (woken by NOTIFY on `pgrag_sources`, never a poll for work; a slow
sweep only covers notifications missed while its connection was down).

The database does the bookkeeping (triggers, the queue, the registry: sql/migrations/0030,
sql/functions/80_table_sources.sql); psql users call pgrag.add_table_source() directly.
The role pgrag connects as needs SELECT on each source table (and TRIGGER to add one):
pgrag.table_source_problem() names the GRANT when it is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field

from pgrag import metrics
from pgrag.config.ingest import IngestSettings
from pgrag.db.scope import scoped_connection
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.errors import Forbidden, InvalidArgument, NotFound
from pgrag.store import table_sources as store

if TYPE_CHECKING:  # the ingestion modules load when a drain runs, not with every server
    from pgrag.ingest.table_rows import Chunking
    from pgrag.ingest.table_sync import Progress, SourceProgress, TableSync

log = logging.getLogger(__name__)

SWEEP_S = 60.0  # a drain even without a notification (one missed while reconnecting)
SETTLE_S = 0.05  # gather a burst of notifications into one drain
FAILED_SHOWN = 5  # failed rows a source's state lists with their reasons


class NewSource(BaseModel):
    """A table to index, one document per row (`pgrag source add`)."""

    table: str = Field(
        min_length=1, max_length=400, description="table name, schema-qualified if needed"
    )
    text_columns: list[str] = Field(min_length=1, description="columns whose text is indexed")
    id_columns: list[str] | None = Field(None, description="key columns (default: primary key)")
    title_column: str | None = None
    metadata_columns: list[str] = Field(default_factory=list)
    collection: str = Field("default", min_length=1, max_length=200)
    name: str | None = Field(None, max_length=200, description="source name (default: table)")


class FailedRowInfo(BaseModel):
    """A row that could not become a document: its key, a stable code and the reason."""

    key: dict[str, Any]
    code: str
    reason: str


class SourceInfo(BaseModel):
    """A source's state: what is indexed, what is pending (exact), what failed and why."""

    name: str
    table: str
    collection: str
    state: str
    failure: str | None
    rows_indexed: int
    rows_failed: int
    failed_rows: list[FailedRowInfo] = Field(
        default_factory=list, description=f"the first {FAILED_SHOWN} failed rows, with why"
    )
    pending: int = Field(description="rows queued or not yet backfilled (exact)")
    queued: int
    backfill_done: int
    backfill_total: int | None
    lag_seconds: float = Field(description="age of the oldest queued change")
    synced_at: datetime | None


def chunking(settings: IngestSettings) -> Chunking:
    from pgrag.ingest.table_rows import Chunking

    return Chunking(
        settings.chunk_tokens,
        settings.chunk_overlap,
        settings.chunk_context_tokens,
        settings.parse_max_chars,
        settings.parse_max_chunks,
    )


def syncer(
    pool: AsyncConnectionPool,
    provider: EmbeddingProvider,
    settings: IngestSettings,
    progress: Progress | None = None,
) -> TableSync:
    from pgrag.ingest.backfill_index import IndexPolicy
    from pgrag.ingest.table_sync import TableSync

    index = IndexPolicy(settings.backfill_index_rows, settings.index_build_memory)
    return TableSync(pool, provider, chunking(settings), progress, index)


def _info(s: store.SourceStats, failed: list[store.FailedRow] | None = None) -> SourceInfo:
    return SourceInfo(
        name=s.name,
        table=s.relation,
        collection=s.collection,
        state=s.state,
        failure=s.failure,
        rows_indexed=s.indexed,
        rows_failed=s.failed,
        failed_rows=[FailedRowInfo(key=f.key, code=f.code, reason=f.reason) for f in failed or []],
        pending=s.pending,
        queued=s.queued,
        backfill_done=s.backfill_done,
        backfill_total=s.backfill_total,
        lag_seconds=round(s.lag_seconds, 3),
        synced_at=s.synced_at,
    )


async def add_source(pool: AsyncConnectionPool, new: NewSource) -> SourceInfo:
    """Register (or change in place) a source; its triggers start queueing at once."""
    try:
        async with pool.connection() as conn:
            sid = await store.add(
                conn,
                table=new.table,
                text_columns=new.text_columns,
                id_columns=new.id_columns,
                title_column=new.title_column,
                metadata_columns=new.metadata_columns,
                collection=new.collection,
                name=new.name,
            )
    except pg_errors.InsufficientPrivilege as exc:
        raise Forbidden(_message(exc)) from None
    except (pg_errors.UndefinedTable, pg_errors.InvalidTextRepresentation) as exc:
        raise NotFound(f"no table {new.table}: {_message(exc)}") from None
    except (
        pg_errors.UndefinedColumn,
        pg_errors.InvalidParameterValue,
        pg_errors.WrongObjectType,
        pg_errors.FeatureNotSupported,
        pg_errors.ObjectInUse,
        pg_errors.InvalidName,
    ) as exc:
        raise InvalidArgument(_message(exc)) from None
    async with pool.connection() as conn:
        return next(_info(s) for s in await store.stats(conn) if s.id == sid)


def _message(exc: psycopg.Error) -> str:
    text = (exc.diag.message_primary or str(exc)).strip()
    return text.removeprefix("pgrag: ")


async def list_sources(
    pool: AsyncConnectionPool, scope: list[str] | None = None
) -> list[SourceInfo]:
    """Every source the caller may see (a scoped caller: its collections' only)."""
    async with scoped_connection(pool, scope) as conn:
        return await source_infos(conn)


async def source_infos(conn: psycopg.AsyncConnection) -> list[SourceInfo]:
    """The sources `conn` may see (status reports read them in their own snapshot)."""
    found = [s for s in await store.stats(conn) if s.state != "removed"]
    return [
        _info(s, await store.failed_rows(conn, s.id, FAILED_SHOWN) if s.failed else None)
        for s in found
    ]


async def refresh_metrics(pool: AsyncConnectionPool) -> None:
    """Set pgrag_source_pending and pgrag_source_lag_seconds before /metrics renders."""
    async with pool.connection() as conn:
        found = await source_infos(conn)
    metrics.set_sources([(i.name, i.pending, i.lag_seconds) for i in found])


async def remove_source(
    pool: AsyncConnectionPool, provider: EmbeddingProvider, settings: IngestSettings, name: str
) -> None:
    """Drop the triggers and queue, then the documents, then the source."""
    async with pool.connection() as conn:
        if not await store.remove(conn, name):
            raise NotFound(f"no table source named '{name}': `pgrag source list` shows them")
    await syncer(pool, provider, settings).drain(name)


async def sync(
    pool: AsyncConnectionPool,
    provider: EmbeddingProvider,
    settings: IngestSettings,
    name: str | None = None,
    progress: Progress | None = None,
) -> list[SourceProgress]:
    """Drain once: every source (or the one named) until its queue and backfill are done."""
    if name is not None:
        async with pool.connection() as conn:
            if not await store.sources(conn, name):
                raise NotFound(f"no table source named '{name}': `pgrag source list` shows them")
    drainer = syncer(pool, provider, settings, progress)
    async with pool.connection() as conn:
        collections = sorted({s.collection for s in await store.sources(conn, name)})
    for collection in collections:  # vectors a killed drain left missing
        with contextlib.suppress(NotFound):
            await drainer.resume_vectors(collection)
    return await drainer.drain(name)


async def follow(
    dsn: str, pool: AsyncConnectionPool, provider: EmbeddingProvider, settings: IngestSettings
) -> None:
    """`pgrag serve`: drain whenever a source's triggers NOTIFY (several servers drain one
    queue safely), until cancelled; reconnect when the database goes away."""
    drainer = syncer(pool, provider, settings)
    wake = asyncio.Event()
    wake.set()  # what queued up while no server ran

    async def drain_when_woken() -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), SWEEP_S)
            await asyncio.sleep(SETTLE_S)
            wake.clear()
            try:
                await drainer.drain(wait_for_index=False)  # a build goes on beside
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("draining the table sources failed; retrying on the next change")

    worker = asyncio.create_task(drain_when_woken())
    try:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                    await store.listen(conn)
                    wake.set()
                    async for _ in conn.notifies():
                        wake.set()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("table source listener lost its connection; retrying", exc_info=True)
                await asyncio.sleep(2)
    finally:
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
        await drainer.close()
