"""The SQL of log retention: pgrag.prune_logs (sql/functions/70_ops.sql)."""

from __future__ import annotations

import psycopg

from pgrag.db.one import one_row

PRUNE_SQL = (
    "SELECT search_log_rows, audit_log_rows FROM pgrag.prune_logs(make_interval(days => %s), %s)"
)


async def prune_batch(conn: psycopg.AsyncConnection, days: int, batch: int) -> tuple[int, int]:
    """One batch of log rows older than `days` deleted: (search_log, audit_log) rows."""
    row = await one_row(conn, PRUNE_SQL, (days, batch))
    return int(row[0]), int(row[1])
