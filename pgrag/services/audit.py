"""Auditing tool calls: what was asked, by whom, how long it took and how it ended."""

from __future__ import annotations

import logging
from typing import Any

from psycopg_pool import AsyncConnectionPool

from pgrag.store import audit as store

log = logging.getLogger(__name__)


async def record_tool_call(
    pool: AsyncConnectionPool,
    tool: str,
    arguments: dict[str, Any],
    caller: str,
    ms: float,
    outcome: str,
    trace_id: str,
) -> None:
    """One audit row, within 2 s of waiting for a connection; a failure is logged, never
    raised: auditing must not turn a good answer into an error."""
    try:
        async with pool.connection(timeout=2) as conn:
            await store.record_call(conn, tool, arguments, caller, ms, outcome, trace_id)
    except Exception:
        log.warning("audit write failed for %s", tool, exc_info=True)
