"""pgrag.ranking_defaults() re-created with other values, as a later release might ship it."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql


def replace_ranking_defaults(conn: psycopg.Connection, **changed: Any) -> None:
    """The function with the values named changed and every other one kept (each field of
    pgrag.ranking_options in its order, as the current defaults list them)."""
    cur = conn.execute("SELECT * FROM pgrag.ranking_defaults()")
    current = cur.fetchone()
    names = [c.name for c in cur.description or []]
    assert current is not None and set(changed) <= set(names)
    values = sql.SQL(", ").join(
        sql.Literal(changed.get(n, v)) for n, v in zip(names, current, strict=True)
    )
    conn.execute(
        sql.SQL(
            "CREATE OR REPLACE FUNCTION pgrag.ranking_defaults() RETURNS pgrag.ranking_options "
            "LANGUAGE sql IMMUTABLE AS $$ SELECT ROW({})::pgrag.ranking_options $$"
        ).format(values)
    )
