"""Stored evaluation sets and their runs (migration 0020): cases as JSON objects in the
`pgrag eval` format, runs with their report."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from pgrag.db.one import scalar

ADD_CASE_SQL = (
    "INSERT INTO pgrag.eval_cases (set_name, query, created_by) VALUES (%s, %s, %s) RETURNING id"
)
CASES_SQL = "SELECT query FROM pgrag.eval_cases WHERE set_name = %s ORDER BY id"
SETS_SQL = """
SELECT c.set_name AS name, count(*) AS cases,
       (SELECT max(r.created_at) FROM pgrag.eval_runs r WHERE r.set_name = c.set_name) AS last_run
FROM pgrag.eval_cases c GROUP BY c.set_name ORDER BY c.set_name
"""
ADD_RUN_SQL = """
INSERT INTO pgrag.eval_runs (set_name, model, modes, summary, queries)
VALUES (%s, %s, %s, %s, %s) RETURNING id
"""
RUNS_SQL = """
SELECT id, created_at, model, modes, summary FROM pgrag.eval_runs
WHERE set_name = %s ORDER BY id DESC LIMIT %s
"""


@dataclass(frozen=True)
class EvalSet:
    name: str
    cases: int
    last_run: datetime | None


@dataclass(frozen=True)
class EvalRun:
    id: int
    created_at: datetime
    model: str | None
    modes: list[str]
    summary: dict[str, Any]


async def add_cases(
    conn: psycopg.AsyncConnection, set_name: str, cases: list[dict[str, Any]], caller: str
) -> None:
    async with conn.cursor() as cur:
        await cur.executemany(ADD_CASE_SQL, [(set_name, Jsonb(c), caller) for c in cases])


async def cases(conn: psycopg.AsyncConnection, set_name: str) -> list[dict[str, Any]]:
    rows = await (await conn.execute(CASES_SQL, (set_name,))).fetchall()
    return [r[0] for r in rows]


async def sets(conn: psycopg.AsyncConnection) -> list[EvalSet]:
    async with conn.cursor(row_factory=class_row(EvalSet)) as cur:
        await cur.execute(SETS_SQL)
        return await cur.fetchall()


async def add_run(
    conn: psycopg.AsyncConnection,
    set_name: str,
    model: str | None,
    modes: list[str],
    report: dict[str, Any],
) -> int:
    return int(
        await scalar(
            conn,
            ADD_RUN_SQL,
            (set_name, model, modes, Jsonb(report["summary"]), Jsonb(report["queries"])),
        )
    )


async def runs(conn: psycopg.AsyncConnection, set_name: str, limit: int) -> list[EvalRun]:
    async with conn.cursor(row_factory=class_row(EvalRun)) as cur:
        await cur.execute(RUNS_SQL, (set_name, limit))
        return await cur.fetchall()
