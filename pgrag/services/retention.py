"""Pruning search_log and audit_log: without it both grow by every call."""

from __future__ import annotations

import asyncio
import logging

from psycopg_pool import AsyncConnectionPool

from pgrag.store.logs import prune_batch

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 3600.0


async def prune_logs(pool: AsyncConnectionPool, days: int, batch: int = 10_000) -> tuple[int, int]:
    """Delete log rows older than `days` in batches; returns (search_log, audit_log) rows."""
    total_search = total_audit = 0
    if days <= 0:
        return 0, 0
    while True:
        async with pool.connection() as conn:
            searched, audited = await prune_batch(conn, days, batch)
        total_search += searched
        total_audit += audited
        if searched < batch and audited < batch:
            return total_search, total_audit


async def prune_periodically(
    pool: AsyncConnectionPool, days: int, every_s: float = PRUNE_EVERY_S
) -> None:
    """The server's housekeeping loop; a failed round is logged and retried next time."""
    while True:
        try:
            removed = await prune_logs(pool, days)
            if any(removed):
                log.info("pruned %d search_log and %d audit_log rows", *removed)
        except Exception:
            log.warning("pruning the logs failed; retrying in %.0f s", every_s, exc_info=True)
        await asyncio.sleep(every_s)
