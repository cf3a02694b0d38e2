"""A large table-source backfill builds its collection's vector index once at its end.

Each vector inserted into an HNSW graph walks it, and the walk grows with the graph: at
10⁵ vectors an insert cost ~15 ms here against ~1.3 ms a vector for one build with the
graph in memory (benchmarks/ingest/hnsw_build.py). So a backfill of at least
`backfill_rows` rows into a collection holding fewer vectors drops the index before its
first row; when no such backfill is left, the drain builds it (store/vector_index.py).
A process that stopped before or during the build leaves the index missing or invalid:
the next drain of the collection builds it."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag.store import table_sources as store
from pgrag.store import vector_index
from pgrag.store.collections import Collection
from pgrag.store.table_sources import SourceRow
from pgrag.store.vector_index import IndexState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexPolicy:
    """When a backfill builds its collection's vector index once at its end."""

    backfill_rows: int = 0  # a backfill of at least this many rows (0: never)
    memory: str = "1GB"  # maintenance_work_mem for the build


class BackfillIndex:
    """The drop before a large backfill and the build after it, for one drainer."""

    def __init__(self, pool: AsyncConnectionPool, policy: IndexPolicy) -> None:
        self.pool = pool
        self.policy = policy
        self._builds: dict[int, asyncio.Task[None]] = {}  # by embedding set

    async def defer(self, source: SourceRow, col: Collection) -> None:
        """Drop the collection's index before a backfill of at least `backfill_rows` rows
        into a collection with fewer vectors than it has rows left."""
        if not self.policy.backfill_rows or col.set_id is None:
            return
        async with self.pool.connection() as conn:
            done, total = await store.backfill_state(conn, source.id)
            left = (total or 0) - done
            if left < self.policy.backfill_rows:
                return
            if await vector_index.state(conn, col.set_id) is IndexState.MISSING:
                return
            if await vector_index.vectors(conn, col.id, col.set_id) >= left:
                return  # a graph that size already: inserting costs less than rebuilding it
            log.info(
                "table source %s: %s rows to backfill into %s; its vector index is built "
                "once at the end (semantic search scans exactly meanwhile)",
                source.name,
                left,
                col.name,
            )
            await vector_index.drop(conn, col.set_id, concurrently=True)

    async def settle(self, col: Collection) -> None:
        """Start building the collection's index if it has none (or an invalid one) and
        no backfill large enough to defer it is left."""
        set_id = col.set_id
        if set_id is None or (set_id in self._builds and not self._builds[set_id].done()):
            return
        async with self.pool.connection() as conn:
            if await vector_index.state(conn, set_id) is IndexState.VALID:
                return
            left = await store.backfill_left(conn, col.name)
            if self.policy.backfill_rows and left >= self.policy.backfill_rows:
                return
        self._builds[set_id] = asyncio.create_task(self._build(col.name, set_id))

    async def built(self) -> None:
        """Wait for the builds under way (a failed one is logged; the next drain retries)."""
        await asyncio.gather(*self._builds.values(), return_exceptions=True)

    async def close(self) -> None:
        """Cancel the builds under way (a cancelled build leaves an invalid index, which the
        next build drops first)."""
        for task in self._builds.values():
            task.cancel()
        await self.built()

    async def _build(self, collection: str, set_id: int) -> None:
        started = time.monotonic()
        log.info("building the vector index of %s", collection)
        try:
            async with self.pool.connection() as conn:
                built = await vector_index.build(conn, set_id, self.policy.memory)
        except psycopg.Error as exc:  # e.g. out of disk: semantic search scans exactly
            reason = (exc.diag.message_primary or str(exc)).splitlines()[0]
            log.warning(
                "building the vector index of %s failed (%s); the next drain retries",
                collection,
                reason,
            )
            return
        if built:
            log.info(
                "built the vector index of %s in %.0f s", collection, time.monotonic() - started
            )
