"""The `graph` toolset (SPEC §5.3, seed 002 §2): a property graph in Postgres tables.

Nodes (label, name, properties, an optional link to a document or chunk) and typed
relationships live in `pgrag.graph_nodes` / `pgrag.graph_relationships` (migration 0009).
Traversals and fuzzy search are SQL functions (`pgrag.graph_find_path`,
`pgrag.graph_neighbors`, `pgrag.graph_fuzzy_search`) that a DBA can call from psql; these
handlers validate, check the label / type allow-lists and shape the envelope. No tool takes
SQL or Cypher: every value is a bound parameter.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import psycopg
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from pydantic import BaseModel, Field

from pgrag.db.scope import scoped_connection
from pgrag.errors import Forbidden, InvalidArgument, NotFound
from pgrag.mcp.app_state import enveloped, require_unscoped, require_writable, scope_of, state_of
from pgrag.mcp.envelope import Envelope, Status
from pgrag.services import documents as docs
from pgrag.settings import Settings

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

MAX_PATH_DEPTH = 6
MAX_NEIGHBOR_DEPTH = 3
MAX_PROPERTIES_BYTES = 64_000
TRAVERSAL_TIMEOUT = "4s"  # below the 5 s tool timeout: the database stops, not only the client
# nodes and relationships belong to no collection, so row-level security cannot scope them:
# every graph tool refuses keys limited to collections (FORBIDDEN)
GRAPH_DATA = (
    "graph data is not limited to collections (a node may link to a document of any collection)"
)

# ---------------------------------------------------------------------------- data models


class NodeItem(BaseModel):
    id: str = Field(description="stable node id (UUID)")
    label: str
    name: str
    properties: dict[str, Any] = Field(default_factory=dict)
    document_id: str | None = Field(None, description="linked pgrag document, if any")
    chunk_id: int | None = Field(None, description="linked chunk of that document, if any")
    created_at: str
    updated_at: str


class RelationshipItem(BaseModel):
    id: str = Field(description="stable relationship id (UUID)")
    type: str
    from_id: str
    to_id: str
    properties: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    updated_at: str


class NodesData(BaseModel):
    items: list[NodeItem]
    total: int = Field(description="how many nodes matched (items holds at most `limit`)")


class RelationshipsData(BaseModel):
    items: list[RelationshipItem]
    total: int = Field(description="how many relationships matched")


class NodeUpdated(BaseModel):
    updated: bool
    node: NodeItem


class RelationshipUpdated(BaseModel):
    updated: bool
    relationship: RelationshipItem


class Deleted(BaseModel):
    deleted: bool
    id: str
    relationships_deleted: int = 0


class PathData(BaseModel):
    found: bool
    length: int | None = Field(None, description="number of relationships on the path")
    nodes: list[NodeItem] = Field(description="from the start node to the end node, in order")
    relationships: list[RelationshipItem] = Field(description="in path order")


class NeighborItem(NodeItem):
    distance: int = Field(description="relationships between this node and the start node")


class NeighborsData(BaseModel):
    node: NodeItem
    nodes: list[NeighborItem] = Field(description="nearest first, the start node excluded")
    relationships: list[RelationshipItem] = Field(description="every relationship followed")
    total: int = Field(description="nodes within the depth (nodes holds at most `limit`)")
    truncated: bool = False


class ScoredNode(NodeItem):
    score: float = Field(description="0..1, the best of the three scores below")
    rank: int
    trigram_score: float = Field(description="pg_trgm similarity of the name")
    name_score: float = Field(description="overlap of the query's words/bigrams with the name")
    text_score: float = Field(description="share of the query's words/bigrams in the node")


class FuzzyData(BaseModel):
    query: str
    items: list[ScoredNode]


# ------------------------------------------------------------------------- SQL statements

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

# ------------------------------------------------------------------ parameters and checks

NodeId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        description="node id (UUID) from graph_create_node, graph_find_node or graph_fuzzy_search",
    ),
]
RelationshipId = Annotated[
    str,
    Field(min_length=1, max_length=64, description="relationship id (UUID)"),
]
Label = Annotated[
    str,
    Field(
        min_length=1,
        max_length=63,
        description="node label from the allow-list (PGRAG_GRAPH_LABELS), e.g. Person",
    ),
]
RelType = Annotated[
    str,
    Field(
        min_length=1,
        max_length=63,
        description="relationship type from the allow-list (PGRAG_GRAPH_RELATIONSHIP_TYPES), "
        "e.g. RELATED_TO",
    ),
]
Types = Annotated[
    list[RelType] | None,
    Field(max_length=20, description="follow only these relationship types (default: all)"),
]
Properties = Annotated[
    dict[str, Any],
    Field(description='JSON object of properties, e.g. {"aliases": ["PG"], "type": "db"}'),
]
Direction = Annotated[
    Literal["both", "out", "in"],
    Field(description="follow relationships both ways (default), only from->to, or only to->from"),
]
Limit = Annotated[int, Field(ge=1, le=50, description="at most this many items (default 5)")]


def _allow_list(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


def _allowed(value: str, allowed: Sequence[str], what: str, variable: str) -> str:
    """The allow-list's spelling of `value` (matched case-insensitively), else FORBIDDEN."""
    wanted = value.strip().lower()
    for name in allowed:
        if name.lower() == wanted:
            return name
    raise Forbidden(
        f"{what} '{value}' is not allowed: use one of {', '.join(allowed)} "
        f"(the operator sets the list with {variable})",
        detail={what.replace(" ", "_"): value, "allowed": list(allowed)},
    )


def _label(settings: Settings, value: str) -> str:
    return _allowed(value, _allow_list(settings.graph_labels), "label", "PGRAG_GRAPH_LABELS")


def _rel_type(settings: Settings, value: str) -> str:
    return _allowed(
        value,
        _allow_list(settings.graph_relationship_types),
        "relationship type",
        "PGRAG_GRAPH_RELATIONSHIP_TYPES",
    )


def _types(settings: Settings, values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return sorted({_rel_type(settings, v) for v in values})


def _uuid(value: str, field: str, kind: str = "node") -> str:
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise InvalidArgument(
            f"{field}: '{value[:80]}' is not a {kind} id (a UUID); get ids from "
            "graph_find_node, graph_fuzzy_search or graph_find_relationship",
            detail={"field": field},
        ) from None


def _properties(value: dict[str, Any] | None, field: str = "properties") -> dict[str, Any]:
    value = value or {}
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        raise InvalidArgument(f"{field} must be a JSON object", detail={"field": field}) from None
    if size > MAX_PROPERTIES_BYTES:
        raise InvalidArgument(
            f"{field} is {size} bytes; keep properties under {MAX_PROPERTIES_BYTES} bytes "
            "(store long text as a document and link it)",
            detail={"field": field, "bytes": size},
        )
    return value


def _patch(value: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """A merge patch: keys set to null are removed, the others set."""
    value = _properties(value)
    return (
        {k: v for k, v in value.items() if v is not None},
        [k for k, v in value.items() if v is None],
    )


def _node(row: dict[str, Any]) -> NodeItem:
    return NodeItem(
        id=row["id"],
        label=row["label"],
        name=row["name"],
        properties=row["properties"] or {},
        document_id=row["document_id"],
        chunk_id=row["chunk_id"],
        created_at=row["created_at"].isoformat(),
        updated_at=row["updated_at"].isoformat(),
    )


def _rel(row: dict[str, Any]) -> RelationshipItem:
    return RelationshipItem(
        id=row["id"],
        type=row["type"],
        from_id=row["from_id"],
        to_id=row["to_id"],
        properties=row["properties"] or {},
        created_at=row["created_at"].isoformat(),
        updated_at=row["updated_at"].isoformat(),
    )


def _no_node(node_id: str, field: str = "id") -> NotFound:
    return NotFound(
        f"no graph node {node_id}: find nodes with graph_find_node or graph_fuzzy_search",
        detail={"field": field, "id": node_id},
    )


def _no_rel(rel_id: str) -> NotFound:
    return NotFound(
        f"no graph relationship {rel_id}: list them with graph_find_relationship",
        detail={"id": rel_id},
    )


async def _fetch_one(conn: psycopg.AsyncConnection, sql: str, params: Any) -> dict[str, Any] | None:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchone()


async def _fetch_all(conn: psycopg.AsyncConnection, sql: str, params: Any) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()


async def _node_by_id(conn: psycopg.AsyncConnection, node_id: str, field: str = "id") -> NodeItem:
    row = await _fetch_one(conn, NODE_BY_ID_SQL, (node_id,))
    if row is None:
        raise _no_node(node_id, field)
    return _node(row)


async def _require_nodes(conn: psycopg.AsyncConnection, sql: str, src: str, dst: str) -> None:
    found = {r[0] for r in await (await conn.execute(sql, ([src, dst],))).fetchall()}
    for field, node_id in (("from_id", src), ("to_id", dst)):
        if node_id not in found:
            raise _no_node(node_id, field)


async def _link(
    ctx: Context[Any, Any], document_id: str | None, chunk_id: int | None
) -> tuple[str | None, int | None]:
    """Resolve a document reference (id, unique path or name; within the caller's scope) and
    check a chunk belongs to it; a chunk alone links its document too."""
    if document_id is None and chunk_id is None:
        return None, None
    state = state_of(ctx)
    async with scoped_connection(state.pool, scope_of(ctx)) as conn:
        doc_id = None
        if document_id is not None:
            doc_id = (await docs.resolve(conn, document_id, scope_of(ctx))).id
        if chunk_id is not None:
            row = await (await conn.execute(CHUNK_DOCUMENT_SQL, (chunk_id,))).fetchone()
            if row is None:
                raise NotFound(
                    f"no chunk {chunk_id}: chunk ids come from get_document_data "
                    "(format=chunks) or search results",
                    detail={"field": "chunk_id", "chunk_id": chunk_id},
                )
            if doc_id is not None and row[0] != doc_id:
                raise InvalidArgument(
                    f"chunk {chunk_id} belongs to document {row[0]}, not {doc_id}",
                    detail={"field": "chunk_id", "document_id": row[0]},
                )
            doc_id = row[0]
    return doc_id, chunk_id


# ------------------------------------------------------------------------------ the tools


def _result(model: type[Any]) -> Any:
    return Annotated[CallToolResult, Envelope[model]]  # type: ignore[valid-type]


def register(server: MCPServer[Any]) -> None:
    @server.tool(annotations=WRITE)
    @enveloped("graph_create_node")
    async def graph_create_node(
        label: Label,
        ctx: Context[Any, Any],
        name: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=1000,
                description="the node's name (default: properties.name)",
            ),
        ] = None,
        properties: Properties | None = None,
        document_id: Annotated[
            str | None,
            Field(
                max_length=1000,
                description="link the node to a document (document_id, or a unique path or name)",
            ),
        ] = None,
        chunk_id: Annotated[
            int | None, Field(ge=1, description="link the node to one chunk of a document")
        ] = None,
    ) -> _result(NodeItem):  # type: ignore[valid-type]
        """Create a graph node (an entity: person, organisation, concept, a document...) with a
        label from the allow-list, a name and JSON properties; optionally linked to a stored
        document or chunk. Returns the node with its stable id. Connect nodes with
        graph_create_relationship (e.g. a Document node MENTIONS a Person)."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        require_writable(state, ctx)
        label = _label(state.settings, label)
        props = _properties(properties)
        if name is None:
            fallback = props.get("name")
            if not isinstance(fallback, str) or not fallback.strip():
                raise InvalidArgument(
                    "name is required (or give properties.name)", detail={"field": "name"}
                )
            name = fallback.strip()
        doc_id, chunk = await _link(ctx, document_id, chunk_id)
        async with state.pool.connection() as conn:
            row = await _fetch_one(
                conn,
                INSERT_NODE_SQL,
                {
                    "label": label,
                    "name": name[:1000],
                    "properties": Jsonb(props),
                    "document_id": doc_id,
                    "chunk_id": chunk,
                },
            )
        assert row is not None
        return Envelope[NodeItem](data=_node(row), status=Status(message="NODE_CREATED"))

    @server.tool(annotations=READ_ONLY)
    @enveloped("graph_find_node")
    async def graph_find_node(
        ctx: Context[Any, Any],
        id: Annotated[NodeId | None, Field(description="a node id: returns that node")] = None,
        label: Annotated[str | None, Field(max_length=63, description="only this label")] = None,
        name: Annotated[
            str | None,
            Field(max_length=1000, description="exact name (case-insensitive)"),
        ] = None,
        properties: Annotated[
            dict[str, Any] | None,
            Field(description='nodes whose properties contain this JSON, e.g. {"city": "北京"}'),
        ] = None,
        property: Annotated[
            str | None,
            Field(max_length=200, description="with `value`: one property to match ('name' too)"),
        ] = None,
        value: Annotated[Any, Field(description="the value `property` must have")] = None,
        document_id: Annotated[
            str | None,
            Field(max_length=1000, description="nodes linked to this document"),
        ] = None,
        limit: Limit = 5,
    ) -> _result(NodesData):  # type: ignore[valid-type]
        """Find graph nodes exactly: by id, or by label + name, by properties containing given
        values (or property + value), or by the document they are linked to. For approximate
        or partial names use graph_fuzzy_search."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        if id is not None:
            node_id = _uuid(id, "id")
            async with state.pool.connection() as conn:
                node = await _node_by_id(conn, node_id)
            return Envelope[NodesData](data=NodesData(items=[node], total=1))
        props = dict(_properties(properties)) if properties else None
        if property is not None:
            if value is None:
                raise InvalidArgument("give `value` with `property`", detail={"field": "value"})
            if property == "name" and isinstance(value, str):
                name = name or value
            else:
                props = {**(props or {}), property: value}
        elif value is not None:
            raise InvalidArgument("give `property` with `value`", detail={"field": "property"})
        if label is None and name is None and props is None and document_id is None:
            raise InvalidArgument(
                "say what to find: id, label, name, properties (or property + value) "
                "or document_id",
                detail={"field": "id"},
            )
        doc_id = (await _link(ctx, document_id, None))[0] if document_id else None
        async with state.pool.connection() as conn:
            rows = await _fetch_all(
                conn,
                FIND_NODES_SQL,
                {
                    "label": _label(state.settings, label) if label else None,
                    "name": name,
                    "properties": Jsonb(props) if props is not None else None,
                    "document_id": doc_id,
                    "limit": limit,
                },
            )
        total = int(rows[0]["total"]) if rows else 0
        return Envelope[NodesData](
            data=NodesData(items=[_node(r) for r in rows], total=total),
            status=Status(message="SUCCESS" if rows else "NO_MATCHES"),
        )

    @server.tool(annotations=WRITE)
    @enveloped("graph_update_node")
    async def graph_update_node(
        id: NodeId,
        ctx: Context[Any, Any],
        name: Annotated[str | None, Field(min_length=1, max_length=1000)] = None,
        label: Annotated[str | None, Field(max_length=63, description="a new label")] = None,
        properties: Annotated[
            dict[str, Any] | None,
            Field(
                description="merge patch: these keys are set, keys given as null are removed, "
                "others are kept (replace_properties=true replaces them all)"
            ),
        ] = None,
        replace_properties: bool = False,
        document_id: Annotated[
            str | None, Field(max_length=1000, description="link to this document")
        ] = None,
        chunk_id: Annotated[int | None, Field(ge=1, description="link to this chunk")] = None,
        unlink: Annotated[bool, Field(description="remove the document/chunk link")] = False,
    ) -> _result(NodeUpdated):  # type: ignore[valid-type]
        """Change a node: its name, label, properties (merge patch by default) or its link to a
        document or chunk. Returns the node as stored."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        require_writable(state, ctx)
        node_id = _uuid(id, "id")
        set_, unset = _patch(properties)
        if replace_properties:
            set_, unset = _properties(properties), []
        new_label = _label(state.settings, label) if label else None
        doc_id, chunk = (None, None) if unlink else await _link(ctx, document_id, chunk_id)
        async with state.pool.connection() as conn:
            row = await _fetch_one(
                conn,
                UPDATE_NODE_SQL,
                {
                    "id": node_id,
                    "label": new_label,
                    "name": name,
                    "replace": replace_properties,
                    "set": Jsonb(set_),
                    "unset": unset,
                    "clear": unlink,
                    "document_id": doc_id,
                    "chunk_id": chunk,
                },
            )
        if row is None:
            raise _no_node(node_id)
        return Envelope[NodeUpdated](data=NodeUpdated(updated=True, node=_node(row)))

    @server.tool(annotations=DESTRUCTIVE)
    @enveloped("graph_delete_node")
    async def graph_delete_node(
        id: NodeId,
        ctx: Context[Any, Any],
        detach: Annotated[
            bool,
            Field(description="also delete the node's relationships (required when it has any)"),
        ] = False,
    ) -> _result(Deleted):  # type: ignore[valid-type]
        """Delete a node. A node that still has relationships is only deleted with
        detach=true, which deletes those relationships too."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        require_writable(state, ctx)
        node_id = _uuid(id, "id")
        async with state.pool.connection() as conn, conn.transaction():
            # the row lock blocks new relationships to the node until we are done
            if await (await conn.execute(LOCK_NODE_SQL, (node_id,))).fetchone() is None:
                raise _no_node(node_id)
            count = (await (await conn.execute(COUNT_NODE_RELS_SQL, {"id": node_id})).fetchone())[0]
            if count and not detach:
                raise InvalidArgument(
                    f"node {node_id} still has {count} relationship(s): call graph_delete_node "
                    "again with detach=true to delete them with it, or delete them first with "
                    "graph_delete_relationship",
                    detail={"id": node_id, "relationships": count, "detach": False},
                )
            await conn.execute(DELETE_NODE_SQL, (node_id,))
        return Envelope[Deleted](
            data=Deleted(deleted=True, id=node_id, relationships_deleted=count),
            status=Status(message="NODE_DELETED"),
        )

    @server.tool(annotations=WRITE)
    @enveloped("graph_create_relationship")
    async def graph_create_relationship(
        from_id: NodeId,
        to_id: NodeId,
        type: RelType,
        ctx: Context[Any, Any],
        properties: Properties | None = None,
    ) -> _result(RelationshipItem):  # type: ignore[valid-type]
        """Connect two nodes with a typed, directed relationship (from_id -[type]-> to_id),
        e.g. a Person WORKS_FOR an Organization, a Document MENTIONS a Concept. The type
        must be in the allow-list."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        require_writable(state, ctx)
        rel_type = _rel_type(state.settings, type)
        src, dst = _uuid(from_id, "from_id"), _uuid(to_id, "to_id")
        props = _properties(properties)
        async with state.pool.connection() as conn, conn.transaction():
            await _require_nodes(conn, LOCK_ENDS_SQL, src, dst)
            row = await _fetch_one(
                conn,
                INSERT_REL_SQL,
                {"type": rel_type, "from_id": src, "to_id": dst, "properties": Jsonb(props)},
            )
        assert row is not None
        return Envelope[RelationshipItem](
            data=_rel(row), status=Status(message="RELATIONSHIP_CREATED")
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("graph_find_relationship")
    async def graph_find_relationship(
        ctx: Context[Any, Any],
        id: Annotated[
            str | None, Field(max_length=64, description="a relationship id: returns it")
        ] = None,
        from_id: Annotated[str | None, Field(max_length=64, description="start node id")] = None,
        to_id: Annotated[str | None, Field(max_length=64, description="end node id")] = None,
        type: Annotated[str | None, Field(max_length=63, description="relationship type")] = None,
        properties: Annotated[
            dict[str, Any] | None, Field(description="properties containing this JSON")
        ] = None,
        limit: Limit = 5,
    ) -> _result(RelationshipsData):  # type: ignore[valid-type]
        """Find relationships by id, or by start node, end node, type and properties (any
        combination). Directed: from_id is where the relationship starts."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        if id is not None:
            rel_id = _uuid(id, "id", "relationship")
            async with state.pool.connection() as conn:
                row = await _fetch_one(conn, REL_BY_ID_SQL, (rel_id,))
            if row is None:
                raise _no_rel(rel_id)
            return Envelope[RelationshipsData](data=RelationshipsData(items=[_rel(row)], total=1))
        if from_id is None and to_id is None and type is None and not properties:
            raise InvalidArgument(
                "say what to find: id, from_id, to_id, type or properties",
                detail={"field": "id"},
            )
        params = {
            "from_id": _uuid(from_id, "from_id") if from_id else None,
            "to_id": _uuid(to_id, "to_id") if to_id else None,
            "types": _types(state.settings, [type] if type else None),
            "properties": Jsonb(_properties(properties)) if properties else None,
            "limit": limit,
        }
        async with state.pool.connection() as conn:
            rows = await _fetch_all(conn, FIND_RELS_SQL, params)
        total = int(rows[0]["total"]) if rows else 0
        return Envelope[RelationshipsData](
            data=RelationshipsData(items=[_rel(r) for r in rows], total=total),
            status=Status(message="SUCCESS" if rows else "NO_MATCHES"),
        )

    @server.tool(annotations=WRITE)
    @enveloped("graph_update_relationship")
    async def graph_update_relationship(
        id: RelationshipId,
        ctx: Context[Any, Any],
        properties: Annotated[
            dict[str, Any] | None,
            Field(description="merge patch: keys set, keys given as null removed"),
        ] = None,
        replace_properties: bool = False,
        type: Annotated[str | None, Field(max_length=63, description="a new type")] = None,
    ) -> _result(RelationshipUpdated):  # type: ignore[valid-type]
        """Change a relationship's properties (merge patch by default) or its type."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        require_writable(state, ctx)
        rel_id = _uuid(id, "id", "relationship")
        set_, unset = _patch(properties)
        if replace_properties:
            set_, unset = _properties(properties), []
        params = {
            "id": rel_id,
            "type": _rel_type(state.settings, type) if type else None,
            "replace": replace_properties,
            "set": Jsonb(set_),
            "unset": unset,
        }
        async with state.pool.connection() as conn:
            row = await _fetch_one(conn, UPDATE_REL_SQL, params)
        if row is None:
            raise _no_rel(rel_id)
        return Envelope[RelationshipUpdated](
            data=RelationshipUpdated(updated=True, relationship=_rel(row))
        )

    @server.tool(annotations=DESTRUCTIVE)
    @enveloped("graph_delete_relationship")
    async def graph_delete_relationship(id: RelationshipId, ctx: Context[Any, Any]) -> _result(
        Deleted
    ):  # type: ignore[valid-type]
        """Delete one relationship (the nodes stay)."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        require_writable(state, ctx)
        rel_id = _uuid(id, "id", "relationship")
        async with state.pool.connection() as conn:
            cur = await conn.execute(DELETE_REL_SQL, (rel_id,))
        if cur.rowcount == 0:
            raise _no_rel(rel_id)
        return Envelope[Deleted](
            data=Deleted(deleted=True, id=rel_id), status=Status(message="RELATIONSHIP_DELETED")
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("graph_find_path")
    async def graph_find_path(
        from_id: NodeId,
        to_id: NodeId,
        ctx: Context[Any, Any],
        max_depth: Annotated[
            int, Field(ge=1, le=MAX_PATH_DEPTH, description="longest path, in relationships")
        ] = 4,
        types: Types = None,
        direction: Direction = "both",
    ) -> _result(PathData):  # type: ignore[valid-type]
        """The shortest path between two nodes (at most max_depth ≤ 6 relationships),
        optionally only over some relationship types: the nodes and relationships in order.
        found=false when the nodes are not connected within max_depth."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        src, dst = _uuid(from_id, "from_id"), _uuid(to_id, "to_id")
        rel_types = _types(state.settings, types)
        async with state.pool.connection() as conn, conn.transaction():
            await conn.execute(f"SET LOCAL statement_timeout = '{TRAVERSAL_TIMEOUT}'")
            await _require_nodes(conn, EXISTING_NODES_SQL, src, dst)
            row = await (
                await conn.execute(PATH_SQL, (src, dst, max_depth, rel_types, direction))
            ).fetchone()
            if row is None:
                return Envelope[PathData](
                    data=PathData(found=False, nodes=[], relationships=[]),
                    status=Status(message="NO_PATH"),
                    actions=_path_actions(max_depth),
                )
            depth, node_ids, rel_ids = row
            nodes = [_node(r) for r in await _fetch_all(conn, NODES_BY_IDS_SQL, (node_ids,))]
            rels = [_rel(r) for r in await _fetch_all(conn, RELS_BY_IDS_SQL, (rel_ids,))]
        return Envelope[PathData](
            data=PathData(found=True, length=depth, nodes=nodes, relationships=rels),
            status=Status(message="PATH_FOUND"),
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("graph_find_neighbors")
    async def graph_find_neighbors(
        id: NodeId,
        ctx: Context[Any, Any],
        depth: Annotated[
            int,
            Field(ge=1, le=MAX_NEIGHBOR_DEPTH, description="how many relationships away (≤ 3)"),
        ] = 1,
        types: Types = None,
        direction: Direction = "both",
        limit: Annotated[
            int, Field(ge=1, le=50, description="at most this many nodes, nearest first")
        ] = 20,
    ) -> _result(NeighborsData):  # type: ignore[valid-type]
        """The nodes within `depth` relationships of a node (each with its distance) and the
        relationships followed to reach them, optionally only over some relationship types.
        Cycles are safe: every node appears once, at its shortest distance."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        node_id = _uuid(id, "id")
        rel_types = _types(state.settings, types)
        async with state.pool.connection() as conn, conn.transaction():
            await conn.execute(f"SET LOCAL statement_timeout = '{TRAVERSAL_TIMEOUT}'")
            start = await _node_by_id(conn, node_id)
            rows = await (
                await conn.execute(NEIGHBORS_SQL, (node_id, depth, rel_types, direction))
            ).fetchall()
            others = [r for r in rows if r[0] != node_id]
            kept = others[:limit]
            distance = {r[0]: r[1] for r in kept}
            wanted = {node_id, *distance}
            rel_ids = sorted({str(rel) for r in rows if r[0] in wanted for rel in r[2]})
            node_rows = await _fetch_all(conn, NODES_BY_IDS_SQL, ([r[0] for r in kept],))
            rel_rows = await _fetch_all(conn, RELS_BY_IDS_SQL, (rel_ids,))
        nodes = [
            NeighborItem(**_node(r).model_dump(), distance=distance[r["id"]]) for r in node_rows
        ]
        rels = [_rel(r) for r in rel_rows if r["from_id"] in wanted and r["to_id"] in wanted]
        truncated = len(others) > len(kept)
        return Envelope[NeighborsData](
            data=NeighborsData(
                node=start, nodes=nodes, relationships=rels, total=len(others), truncated=truncated
            ),
            status=Status(
                code="partial_success" if truncated else "success",
                message="LIMIT_REACHED" if truncated else "SUCCESS",
            ),
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("graph_fuzzy_search")
    async def graph_fuzzy_search(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=500,
                description="a name or words, misspelt or partial; Chinese works (北京 finds 北京大学)",
            ),
        ],
        ctx: Context[Any, Any],
        labels: Annotated[
            list[Label] | None, Field(max_length=20, description="only nodes with these labels")
        ] = None,
        limit: Limit = 5,
    ) -> _result(FuzzyData):  # type: ignore[valid-type]
        """Find nodes by approximate name or words in their properties: trigram similarity
        (typos) plus CJK-aware full text. Each item has a score in 0..1 and its rank."""
        require_unscoped(ctx, GRAPH_DATA)
        state = state_of(ctx)
        wanted = sorted({_label(state.settings, label) for label in labels}) if labels else None
        text = query.strip()
        if not text:
            raise InvalidArgument("query is empty", detail={"field": "query"})
        async with state.pool.connection() as conn:
            rows = await _fetch_all(conn, FUZZY_SQL, (text, wanted, limit))
        items = [
            ScoredNode(
                **_node(r).model_dump(),
                score=round(float(r["score"]), 4),
                rank=i,
                trigram_score=round(float(r["trigram_score"]), 4),
                name_score=round(float(r["name_score"]), 4),
                text_score=round(float(r["text_score"]), 4),
            )
            for i, r in enumerate(rows, 1)
        ]
        return Envelope[FuzzyData](
            data=FuzzyData(query=text, items=items),
            status=Status(message="SUCCESS" if items else "NO_MATCHES"),
        )


def _path_actions(max_depth: int) -> list[Any]:
    from pgrag.mcp.envelope import Action

    if max_depth >= MAX_PATH_DEPTH:
        return []
    return [
        Action(
            id="INCREASE_DEPTH",
            description="Look for a longer path",
            params={"max_depth": MAX_PATH_DEPTH},
        )
    ]
