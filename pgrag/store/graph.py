"""The property graph's SQL: nodes and typed relationships in `pgrag.graph_nodes` /
`pgrag.graph_relationships` (migration 0009), and the traversal and fuzzy search functions
of `sql/functions/60_graph.sql`. Every value is a bound parameter; rows come back typed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb


@dataclass
class NodeRow:
    id: str
    label: str
    name: str
    properties: dict[str, Any] | None
    document_id: str | None
    chunk_id: int | None
    created_at: datetime
    updated_at: datetime


@dataclass
class FoundNode(NodeRow):
    total: int  # every match, not only the rows returned


@dataclass
class ScoredNodeRow(NodeRow):
    score: float
    trigram_score: float
    name_score: float
    text_score: float


@dataclass
class RelationshipRow:
    id: str
    type: str
    from_id: str
    to_id: str
    properties: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime


@dataclass
class FoundRelationship(RelationshipRow):
    total: int


@dataclass
class PathRow:
    depth: int
    node_ids: list[UUID]
    relationship_ids: list[UUID]


@dataclass
class NeighborRow:
    node_id: str
    distance: int
    relationship_ids: list[UUID]


NODE_COLS = """n.id::text AS id, n.label, n.name, n.properties, n.document_id::text AS document_id,
       n.chunk_id, n.created_at, n.updated_at"""
REL_COLS = """r.id::text AS id, r.type, r.from_id::text AS from_id, r.to_id::text AS to_id,
       r.properties, r.created_at, r.updated_at"""

INSERT_NODE_SQL = f"""
INSERT INTO pgrag.graph_nodes AS n (label, name, properties, document_id, chunk_id)
VALUES (%(label)s, %(name)s, %(properties)s, %(document_id)s::uuid, %(chunk_id)s)
RETURNING {NODE_COLS}
"""
NODE_BY_ID_SQL = f"SELECT {NODE_COLS} FROM pgrag.graph_nodes n WHERE n.id = %s::uuid"
NODES_BY_IDS_SQL = f"""
SELECT {NODE_COLS} FROM unnest(%s::uuid[]) WITH ORDINALITY AS u(id, i)
JOIN pgrag.graph_nodes n ON n.id = u.id ORDER BY u.i
"""
FIND_NODES_SQL = f"""
SELECT {NODE_COLS}, count(*) OVER () AS total
FROM pgrag.graph_nodes n
WHERE (%(label)s::text IS NULL OR n.label = %(label)s)
  AND (%(name)s::text IS NULL OR lower(n.name) = lower(%(name)s))
  AND (%(properties)s::jsonb IS NULL OR n.properties @> %(properties)s::jsonb)
  AND (%(document_id)s::uuid IS NULL OR n.document_id = %(document_id)s::uuid)
ORDER BY n.name = %(name)s DESC NULLS LAST, n.created_at, n.id
LIMIT %(limit)s
"""
UPDATE_NODE_SQL = f"""
UPDATE pgrag.graph_nodes AS n SET
    label = coalesce(%(label)s, n.label),
    name = coalesce(%(name)s, n.name),
    properties = CASE WHEN %(replace)s THEN %(set)s::jsonb
                      ELSE (n.properties || %(set)s::jsonb) - %(unset)s::text[] END,
    document_id = CASE WHEN %(clear)s THEN NULL
                       ELSE coalesce(%(document_id)s::uuid, n.document_id) END,
    chunk_id = CASE WHEN %(clear)s THEN NULL ELSE coalesce(%(chunk_id)s, n.chunk_id) END,
    updated_at = now()
WHERE n.id = %(id)s::uuid
RETURNING {NODE_COLS}
"""
LOCK_NODE_SQL = "SELECT id FROM pgrag.graph_nodes WHERE id = %s::uuid FOR UPDATE"
COUNT_NODE_RELS_SQL = """
SELECT count(*) FROM pgrag.graph_relationships WHERE from_id = %(id)s::uuid OR to_id = %(id)s::uuid
"""
DELETE_NODE_SQL = "DELETE FROM pgrag.graph_nodes WHERE id = %s::uuid"
EXISTING_NODES_SQL = "SELECT id::text FROM pgrag.graph_nodes WHERE id = ANY(%s::uuid[])"
# a new relationship's nodes stay until it is committed (a concurrent delete waits)
LOCK_ENDS_SQL = EXISTING_NODES_SQL + " FOR KEY SHARE"

INSERT_REL_SQL = f"""
INSERT INTO pgrag.graph_relationships AS r (type, from_id, to_id, properties)
VALUES (%(type)s, %(from_id)s::uuid, %(to_id)s::uuid, %(properties)s)
RETURNING {REL_COLS}
"""
REL_BY_ID_SQL = f"SELECT {REL_COLS} FROM pgrag.graph_relationships r WHERE r.id = %s::uuid"
RELS_BY_IDS_SQL = f"""
SELECT {REL_COLS} FROM unnest(%s::uuid[]) WITH ORDINALITY AS u(id, i)
JOIN pgrag.graph_relationships r ON r.id = u.id ORDER BY u.i
"""
FIND_RELS_SQL = f"""
SELECT {REL_COLS}, count(*) OVER () AS total
FROM pgrag.graph_relationships r
WHERE (%(from_id)s::uuid IS NULL OR r.from_id = %(from_id)s::uuid)
  AND (%(to_id)s::uuid IS NULL OR r.to_id = %(to_id)s::uuid)
  AND (%(types)s::text[] IS NULL OR r.type = ANY(%(types)s::text[]))
  AND (%(properties)s::jsonb IS NULL OR r.properties @> %(properties)s::jsonb)
ORDER BY r.created_at, r.id
LIMIT %(limit)s
"""
UPDATE_REL_SQL = f"""
UPDATE pgrag.graph_relationships AS r SET
    type = coalesce(%(type)s, r.type),
    properties = CASE WHEN %(replace)s THEN %(set)s::jsonb
                      ELSE (r.properties || %(set)s::jsonb) - %(unset)s::text[] END,
    updated_at = now()
WHERE r.id = %(id)s::uuid
RETURNING {REL_COLS}
"""
DELETE_REL_SQL = "DELETE FROM pgrag.graph_relationships WHERE id = %s::uuid"

PATH_SQL = "SELECT depth, node_ids, relationship_ids FROM pgrag.graph_find_path(%s, %s, %s, %s, %s)"
NEIGHBORS_SQL = """
SELECT node_id::text, distance, relationship_ids
FROM pgrag.graph_neighbors(%s, %s, %s, %s)
"""
FUZZY_SQL = f"""
SELECT {NODE_COLS}, s.score, s.trigram_score, s.name_score, s.text_score
FROM pgrag.graph_fuzzy_search(%s, %s, %s) s
JOIN pgrag.graph_nodes n ON n.id = s.node_id
ORDER BY s.score DESC, n.id
"""
CHUNK_DOCUMENT_SQL = "SELECT document_id::text FROM pgrag.chunks WHERE id = %s"


async def _one(conn: psycopg.AsyncConnection, row: type[Any], sql: str, params: Any) -> Any:
    async with conn.cursor(row_factory=class_row(row)) as cur:
        await cur.execute(sql, params)
        return await cur.fetchone()


async def _all(conn: psycopg.AsyncConnection, row: type[Any], sql: str, params: Any) -> list[Any]:
    async with conn.cursor(row_factory=class_row(row)) as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()


# ---- nodes ----------------------------------------------------------------------------------


async def insert_node(
    conn: psycopg.AsyncConnection,
    label: str,
    name: str,
    properties: dict[str, Any],
    document_id: str | None,
    chunk_id: int | None,
) -> NodeRow:
    params = {
        "label": label,
        "name": name,
        "properties": Jsonb(properties),
        "document_id": document_id,
        "chunk_id": chunk_id,
    }
    row: NodeRow = await _one(conn, NodeRow, INSERT_NODE_SQL, params)
    return row


async def node_by_id(conn: psycopg.AsyncConnection, node_id: str) -> NodeRow | None:
    row: NodeRow | None = await _one(conn, NodeRow, NODE_BY_ID_SQL, (node_id,))
    return row


async def nodes_by_ids(conn: psycopg.AsyncConnection, ids: list[Any]) -> list[NodeRow]:
    """The nodes in the order of `ids` (missing ones left out)."""
    return await _all(conn, NodeRow, NODES_BY_IDS_SQL, (ids,))


async def find_nodes(
    conn: psycopg.AsyncConnection,
    *,
    label: str | None,
    name: str | None,
    properties: dict[str, Any] | None,
    document_id: str | None,
    limit: int,
) -> list[FoundNode]:
    """Nodes matching every given condition (exact name first), each with the match count."""
    params = {
        "label": label,
        "name": name,
        "properties": Jsonb(properties) if properties is not None else None,
        "document_id": document_id,
        "limit": limit,
    }
    return await _all(conn, FoundNode, FIND_NODES_SQL, params)


async def update_node(
    conn: psycopg.AsyncConnection,
    node_id: str,
    *,
    label: str | None,
    name: str | None,
    replace: bool,
    set_: dict[str, Any],
    unset: list[str],
    unlink: bool,
    document_id: str | None,
    chunk_id: int | None,
) -> NodeRow | None:
    """Apply a change (None keeps a column); the node as stored, None if there is none."""
    params = {
        "id": node_id,
        "label": label,
        "name": name,
        "replace": replace,
        "set": Jsonb(set_),
        "unset": unset,
        "clear": unlink,
        "document_id": document_id,
        "chunk_id": chunk_id,
    }
    row: NodeRow | None = await _one(conn, NodeRow, UPDATE_NODE_SQL, params)
    return row


async def lock_node(conn: psycopg.AsyncConnection, node_id: str) -> bool:
    """Lock the node's row until the transaction ends (new relationships to it wait)."""
    return await (await conn.execute(LOCK_NODE_SQL, (node_id,))).fetchone() is not None


async def count_node_relationships(conn: psycopg.AsyncConnection, node_id: str) -> int:
    row = await (await conn.execute(COUNT_NODE_RELS_SQL, {"id": node_id})).fetchone()
    return int(row[0]) if row else 0


async def delete_node(conn: psycopg.AsyncConnection, node_id: str) -> None:
    await conn.execute(DELETE_NODE_SQL, (node_id,))


async def existing_nodes(
    conn: psycopg.AsyncConnection, ids: list[str], *, lock: bool = False
) -> set[str]:
    """Which of `ids` are nodes; `lock` keeps them until the transaction ends."""
    sql = LOCK_ENDS_SQL if lock else EXISTING_NODES_SQL
    return {r[0] for r in await (await conn.execute(sql, (ids,))).fetchall()}


async def chunk_document(conn: psycopg.AsyncConnection, chunk_id: int) -> str | None:
    """The document a chunk belongs to (None: no such chunk, or not visible to the caller)."""
    row = await (await conn.execute(CHUNK_DOCUMENT_SQL, (chunk_id,))).fetchone()
    return row[0] if row else None


# ---- relationships --------------------------------------------------------------------------


async def insert_relationship(
    conn: psycopg.AsyncConnection, rel_type: str, from_id: str, to_id: str, props: dict[str, Any]
) -> RelationshipRow:
    params = {"type": rel_type, "from_id": from_id, "to_id": to_id, "properties": Jsonb(props)}
    row: RelationshipRow = await _one(conn, RelationshipRow, INSERT_REL_SQL, params)
    return row


async def relationship_by_id(conn: psycopg.AsyncConnection, rel_id: str) -> RelationshipRow | None:
    row: RelationshipRow | None = await _one(conn, RelationshipRow, REL_BY_ID_SQL, (rel_id,))
    return row


async def relationships_by_ids(
    conn: psycopg.AsyncConnection, ids: list[Any]
) -> list[RelationshipRow]:
    """The relationships in the order of `ids` (missing ones left out)."""
    return await _all(conn, RelationshipRow, RELS_BY_IDS_SQL, (ids,))


async def find_relationships(
    conn: psycopg.AsyncConnection,
    *,
    from_id: str | None,
    to_id: str | None,
    types: list[str] | None,
    properties: dict[str, Any] | None,
    limit: int,
) -> list[FoundRelationship]:
    """Relationships matching every given condition, oldest first, with the match count."""
    params = {
        "from_id": from_id,
        "to_id": to_id,
        "types": types,
        "properties": Jsonb(properties) if properties else None,
        "limit": limit,
    }
    return await _all(conn, FoundRelationship, FIND_RELS_SQL, params)


async def update_relationship(
    conn: psycopg.AsyncConnection,
    rel_id: str,
    *,
    rel_type: str | None,
    replace: bool,
    set_: dict[str, Any],
    unset: list[str],
) -> RelationshipRow | None:
    params = {
        "id": rel_id,
        "type": rel_type,
        "replace": replace,
        "set": Jsonb(set_),
        "unset": unset,
    }
    row: RelationshipRow | None = await _one(conn, RelationshipRow, UPDATE_REL_SQL, params)
    return row


async def delete_relationship(conn: psycopg.AsyncConnection, rel_id: str) -> bool:
    cur = await conn.execute(DELETE_REL_SQL, (rel_id,))
    return cur.rowcount > 0


# ---- traversals and search (SQL functions) ---------------------------------------------------


async def limit_statement_time(conn: psycopg.AsyncConnection, timeout: str) -> None:
    """Stop this transaction's statements after `timeout` (a Postgres interval literal)."""
    await conn.execute(f"SET LOCAL statement_timeout = '{timeout}'")


async def find_path(
    conn: psycopg.AsyncConnection,
    from_id: str,
    to_id: str,
    max_depth: int,
    types: list[str] | None,
    direction: str,
) -> PathRow | None:
    row: PathRow | None = await _one(
        conn, PathRow, PATH_SQL, (from_id, to_id, max_depth, types, direction)
    )
    return row


async def neighbors(
    conn: psycopg.AsyncConnection,
    node_id: str,
    depth: int,
    types: list[str] | None,
    direction: str,
) -> list[NeighborRow]:
    """Every node within `depth` (the start node too), nearest first."""
    return await _all(conn, NeighborRow, NEIGHBORS_SQL, (node_id, depth, types, direction))


async def fuzzy_search(
    conn: psycopg.AsyncConnection, text: str, labels: list[str] | None, limit: int
) -> list[ScoredNodeRow]:
    return await _all(conn, ScoredNodeRow, FUZZY_SQL, (text, labels, limit))
