"""Auditing tool calls: what was asked, by whom, how long it took and how it ended."""

from __future__ import annotations

import logging

from psycopg_pool import AsyncConnectionPool

from pgrag.store import audit as store
from pgrag.store.audit import ToolCall

__all__ = ["ToolCall", "record_tool_call"]

log = logging.getLogger(__name__)


async def record_tool_call(pool: AsyncConnectionPool, call: ToolCall) -> None:
    """One audit row, within 2 s of waiting for a connection; a failure is logged, never
    raised: auditing must not turn a good answer into an error."""
    try:
        async with pool.connection(timeout=2) as conn:
            await store.record_call(conn, call)
    except Exception:
        log.warning("audit write failed for %s", call.tool, exc_info=True)
