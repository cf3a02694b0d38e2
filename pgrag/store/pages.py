"""SQL reading a document's stored units (pages, sheets, slides, sections) and sheet rows."""

from __future__ import annotations

import psycopg
from psycopg.rows import class_row

from pgrag.store.rows import SheetRow, UnitRow

UNITS_SQL = """
SELECT id, kind, number, title, body, meta FROM pgrag.units
WHERE document_id = %(doc)s::uuid AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(numbers)s::int[] IS NULL OR number = ANY(%(numbers)s::int[]))
ORDER BY kind, number
"""
# the same, naming the document's collection: on Citus routed to the collection's shard
UNITS_IN_SQL = UNITS_SQL.replace(
    "WHERE document_id", "WHERE collection_id = %(collection_id)s AND document_id"
)

UNIT_COUNT_SQL = "SELECT kind, count(*) FROM pgrag.units WHERE document_id = %s::uuid GROUP BY kind"

SHEET_ROWS_SQL = """
SELECT row_number, cells FROM pgrag.sheet_rows
WHERE unit_id = %(unit)s AND row_number BETWEEN %(lo)s AND %(hi)s
ORDER BY row_number
"""
SHEET_ROW_CELLS_SQL = SHEET_ROWS_SQL.replace(
    "row_number, cells", "row_number, cells[%(first)s:%(last)s] AS cells", 1
)


async def units(
    conn: psycopg.AsyncConnection,
    doc_id: str,
    kind: str | None = None,
    numbers: list[int] | None = None,
    collection_id: int | None = None,
) -> list[UnitRow]:
    """The document's units ordered by kind and number, optionally of one kind and numbers;
    `collection_id` (the document's) sends the read to one shard on Citus, not every one."""
    params = {"doc": doc_id, "kind": kind, "numbers": numbers, "collection_id": collection_id}
    async with conn.cursor(row_factory=class_row(UnitRow)) as cur:
        await cur.execute(UNITS_SQL if collection_id is None else UNITS_IN_SQL, params)
        return await cur.fetchall()


async def extracted_text(
    conn: psycopg.AsyncConnection, doc_id: str, collection_id: int | None = None
) -> str:
    """The whole extracted text: unit bodies in order (what resources, REST and full-content
    search hits return); `collection_id` as in `units`."""
    units_ = await units(conn, doc_id, collection_id=collection_id)
    return "\n\n".join(u.body for u in units_ if u.body)


async def unit_counts(conn: psycopg.AsyncConnection, doc_id: str) -> dict[str, int]:
    """How many units of each kind the document has (e.g. {'slide': 12})."""
    return dict(await (await conn.execute(UNIT_COUNT_SQL, (doc_id,))).fetchall())


async def sheet_rows(
    conn: psycopg.AsyncConnection,
    unit_id: int,
    lo: int,
    hi: int,
    columns: tuple[int, int] | None = None,
) -> list[SheetRow]:
    """Rows lo..hi (1-based, inclusive) of one sheet unit; only the cells of columns
    first..last (1-based, inclusive) when given, so a wide sheet is not read whole."""
    sql, params = SHEET_ROWS_SQL, {"unit": unit_id, "lo": lo, "hi": hi}
    if columns is not None:
        sql = SHEET_ROW_CELLS_SQL
        params |= {"first": columns[0], "last": columns[1]}
    async with conn.cursor(row_factory=class_row(SheetRow)) as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()
