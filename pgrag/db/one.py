"""Reading the single row a statement always returns (SHOW, SELECT count(*), INSERT …
RETURNING): typed for the checker, and a missing row fails loudly instead of as a
`'NoneType' object is not subscriptable`."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.abc import Params


async def one_row(
    conn: psycopg.AsyncConnection[Any],
    query: str | sql.SQL | sql.Composed,
    params: Params | None = None,
) -> tuple[Any, ...]:
    """The statement's one row."""
    row: tuple[Any, ...] | None = await (await conn.execute(query, params)).fetchone()
    if row is None:
        raise LookupError(f"the statement returned no row: {str(query).strip()[:80]}")
    return row


async def scalar(
    conn: psycopg.AsyncConnection[Any],
    query: str | sql.SQL | sql.Composed,
    params: Params | None = None,
) -> Any:
    """The first column of the statement's one row."""
    return (await one_row(conn, query, params))[0]
