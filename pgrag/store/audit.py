"""The SQL of the audit log: one row per tool call."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

AUDIT_SQL = """
INSERT INTO pgrag.audit_log (tool, arguments, caller, duration_ms, outcome, trace_id)
VALUES (%s, %s, %s, %s, %s, %s)
"""


async def record_call(
    conn: psycopg.AsyncConnection,
    tool: str,
    arguments: dict[str, Any],
    caller: str,
    ms: float,
    outcome: str,
    trace_id: str,
) -> None:
    await conn.execute(AUDIT_SQL, (tool, Jsonb(arguments), caller, ms, outcome, trace_id))
