"""The SQL of the audit log: one row per tool call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

AUDIT_SQL = """
INSERT INTO pgrag.audit_log (tool, arguments, caller, duration_ms, outcome, trace_id)
VALUES (%s, %s, %s, %s, %s, %s)
"""


@dataclass(frozen=True)
class ToolCall:
    """One audited call: what was asked (payloads elided), by whom, how long, how it ended."""

    tool: str
    arguments: dict[str, Any]
    caller: str
    duration_ms: float
    outcome: str
    trace_id: str


async def record_call(conn: psycopg.AsyncConnection, call: ToolCall) -> None:
    await conn.execute(
        AUDIT_SQL,
        (
            call.tool,
            Jsonb(call.arguments),
            call.caller,
            call.duration_ms,
            call.outcome,
            call.trace_id,
        ),
    )
