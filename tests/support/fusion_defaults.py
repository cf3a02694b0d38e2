"""pgrag.fusion_defaults() re-created with other values, as a later release might ship it."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql


def replace_fusion_defaults(conn: psycopg.Connection, **changed: Any) -> None:
    """The function with the values named changed and every other one kept."""
    cur = conn.execute("SELECT * FROM pgrag.fusion_defaults()")
    current = cur.fetchone()
    names = [c.name for c in cur.description or []]
    assert current is not None and set(changed) <= set(names)
    result = conn.execute("SELECT pg_get_function_result('pgrag.fusion_defaults'::regproc)")
    table = result.fetchone()
    assert table is not None and table[0].startswith("TABLE(")
    types = [column.split(" ", 1)[1] for column in table[0][6:-1].split(", ")]
    values = sql.SQL(", ").join(
        sql.SQL("{}::{}").format(sql.Literal(changed.get(n, v)), sql.SQL(t))
        for n, v, t in zip(names, current, types, strict=True)
    )
    conn.execute(
        sql.SQL(
            "CREATE OR REPLACE FUNCTION pgrag.fusion_defaults() RETURNS {} "
            "LANGUAGE sql IMMUTABLE AS $$ SELECT {} $$"
        ).format(sql.SQL(table[0]), values)
    )
