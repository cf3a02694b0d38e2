"""The property graph: nodes (label, name, properties, an optional link to a document or
chunk) and typed, directed relationships, checked against the operator's allow-lists.

Ids are validated before any SQL runs; properties are size-limited JSON objects; updates
take a merge patch (keys set to null are removed). Traversals run under a statement time
limit below the tool's own, so the database stops, not only the caller. Graph data belongs
to no collection (a node may link to a document of any collection): the transports refuse
it to callers limited to collections (`UNSCOPED_REASON` says why)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag.config.serving import ServingSettings
from pgrag.db.scope import scoped_connection
from pgrag.errors import InvalidArgument, NotFound
from pgrag.services import documents as docs
from pgrag.services.graph_checks import (
    allow_list,
    allowed_name,
    changes,
    check_properties,
    no_node,
    no_relationship,
    parse_uuid,
)
from pgrag.store import graph as store
from pgrag.store.graph import FoundNode, FoundRelationship, NodeRow, RelationshipRow, ScoredNodeRow

MAX_PATH_DEPTH = 6
MAX_NEIGHBOR_DEPTH = 3
TRAVERSAL_TIMEOUT = "4s"  # below the 5 s tool timeout: the database stops, not only the client
UNSCOPED_REASON = (
    "graph data is not limited to collections (a node may link to a document of any collection)"
)


@dataclass
class Path:
    depth: int
    nodes: list[NodeRow]  # from the start node to the end node
    relationships: list[RelationshipRow]  # in path order


@dataclass
class Neighborhood:
    start: NodeRow
    nodes: list[tuple[NodeRow, int]]  # (node, distance), nearest first, the start excluded
    relationships: list[RelationshipRow]  # every relationship followed to reach them
    total: int  # nodes within the depth
    truncated: bool


@dataclass(frozen=True)
class GraphService:
    """Graph reads and writes over a pool, with the operator's label / type allow-lists."""

    pool: AsyncConnectionPool
    settings: ServingSettings

    def label(self, value: str) -> str:
        allowed = allow_list(self.settings.graph_labels)
        return allowed_name(value, allowed, "label", "PGRAG_GRAPH_LABELS")

    def rel_type(self, value: str) -> str:
        allowed = allow_list(self.settings.graph_relationship_types)
        return allowed_name(value, allowed, "relationship type", "PGRAG_GRAPH_RELATIONSHIP_TYPES")

    def types(self, values: list[str] | None) -> list[str] | None:
        if not values:
            return None
        return sorted({self.rel_type(v) for v in values})

    async def link(
        self, scope: list[str] | None, document_id: str | None, chunk_id: int | None
    ) -> tuple[str | None, int | None]:
        """Resolve a document reference (id, unique path or name; within `scope`) and check
        a chunk belongs to it; a chunk alone links its document too."""
        if document_id is None and chunk_id is None:
            return None, None
        async with scoped_connection(self.pool, scope) as conn:
            doc_id = None
            if document_id is not None:
                doc_id = (await docs.resolve(conn, document_id, scope)).id
            if chunk_id is not None:
                owner = await store.chunk_document(conn, chunk_id)
                if owner is None:
                    raise NotFound(
                        f"no chunk {chunk_id}: chunk ids come from get_document_data "
                        "(format=chunks) or search results",
                        detail={"field": "chunk_id", "chunk_id": chunk_id},
                    )
                if doc_id is not None and owner != doc_id:
                    raise InvalidArgument(
                        f"chunk {chunk_id} belongs to document {owner}, not {doc_id}",
                        detail={"field": "chunk_id", "document_id": owner},
                    )
                doc_id = owner
        return doc_id, chunk_id

    # ---- nodes ---------------------------------------------------------------------------

    async def create_node(
        self,
        scope: list[str] | None,
        label: str,
        name: str | None,
        properties: dict[str, Any] | None,
        document_id: str | None,
        chunk_id: int | None,
    ) -> NodeRow:
        """A new node; without a name, properties.name names it."""
        label = self.label(label)
        props = check_properties(properties)
        if name is None:
            fallback = props.get("name")
            if not isinstance(fallback, str) or not fallback.strip():
                raise InvalidArgument(
                    "name is required (or give properties.name)", detail={"field": "name"}
                )
            name = fallback.strip()
        doc_id, chunk = await self.link(scope, document_id, chunk_id)
        async with self.pool.connection() as conn:
            return await store.insert_node(conn, label, name[:1000], props, doc_id, chunk)

    async def node(self, node_id: str) -> NodeRow:
        node_id = parse_uuid(node_id, "id")
        async with self.pool.connection() as conn:
            row = await store.node_by_id(conn, node_id)
        if row is None:
            raise no_node(node_id)
        return row

    async def find_nodes(
        self,
        scope: list[str] | None,
        *,
        label: str | None,
        name: str | None,
        properties: dict[str, Any] | None,
        property: str | None,
        value: Any,
        document_id: str | None,
        limit: int,
    ) -> list[FoundNode]:
        """Nodes by label, exact name, contained properties (or one property + value) and
        linked document; at least one condition is required."""
        props = dict(check_properties(properties)) if properties else None
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
        doc_id = (await self.link(scope, document_id, None))[0] if document_id else None
        wanted_label = self.label(label) if label else None
        async with self.pool.connection() as conn:
            return await store.find_nodes(
                conn,
                label=wanted_label,
                name=name,
                properties=props,
                document_id=doc_id,
                limit=limit,
            )

    async def update_node(
        self,
        scope: list[str] | None,
        node_id: str,
        *,
        name: str | None,
        label: str | None,
        properties: dict[str, Any] | None,
        replace_properties: bool,
        document_id: str | None,
        chunk_id: int | None,
        unlink: bool,
    ) -> NodeRow:
        """The node after the change (None values keep what is stored)."""
        node_id = parse_uuid(node_id, "id")
        set_, unset = changes(properties, replace_properties)
        new_label = self.label(label) if label else None
        doc_id, chunk = (None, None) if unlink else await self.link(scope, document_id, chunk_id)
        async with self.pool.connection() as conn:
            row = await store.update_node(
                conn,
                node_id,
                label=new_label,
                name=name,
                replace=replace_properties,
                set_=set_,
                unset=unset,
                unlink=unlink,
                document_id=doc_id,
                chunk_id=chunk,
            )
        if row is None:
            raise no_node(node_id)
        return row

    async def delete_node(self, node_id: str, detach: bool) -> tuple[str, int]:
        """(node id, relationships deleted with it): a node with relationships needs detach."""
        node_id = parse_uuid(node_id, "id")
        async with self.pool.connection() as conn, conn.transaction():
            # the row lock blocks new relationships to the node until we are done
            if not await store.lock_node(conn, node_id):
                raise no_node(node_id)
            count = await store.count_node_relationships(conn, node_id)
            if count and not detach:
                raise InvalidArgument(
                    f"node {node_id} still has {count} relationship(s): call graph_delete_node "
                    "again with detach=true to delete them with it, or delete them first with "
                    "graph_delete_relationship",
                    detail={"id": node_id, "relationships": count, "detach": False},
                )
            await store.delete_node(conn, node_id)
        return node_id, count

    # ---- relationships -------------------------------------------------------------------

    async def create_relationship(
        self, from_id: str, to_id: str, rel_type: str, properties: dict[str, Any] | None
    ) -> RelationshipRow:
        """from_id -[rel_type]-> to_id; both nodes stay locked until it is committed."""
        rel_type = self.rel_type(rel_type)
        src, dst = parse_uuid(from_id, "from_id"), parse_uuid(to_id, "to_id")
        props = check_properties(properties)
        async with self.pool.connection() as conn, conn.transaction():
            await _require_nodes(conn, src, dst, lock=True)
            return await store.insert_relationship(conn, rel_type, src, dst, props)

    async def relationship(self, rel_id: str) -> RelationshipRow:
        rel_id = parse_uuid(rel_id, "id", "relationship")
        async with self.pool.connection() as conn:
            row = await store.relationship_by_id(conn, rel_id)
        if row is None:
            raise no_relationship(rel_id)
        return row

    async def find_relationships(
        self,
        *,
        from_id: str | None,
        to_id: str | None,
        rel_type: str | None,
        properties: dict[str, Any] | None,
        limit: int,
    ) -> list[FoundRelationship]:
        """Relationships by start node, end node, type and properties (at least one)."""
        if from_id is None and to_id is None and rel_type is None and not properties:
            raise InvalidArgument(
                "say what to find: id, from_id, to_id, type or properties",
                detail={"field": "id"},
            )
        src = parse_uuid(from_id, "from_id") if from_id else None
        dst = parse_uuid(to_id, "to_id") if to_id else None
        types = self.types([rel_type] if rel_type else None)
        props = check_properties(properties) if properties else None
        async with self.pool.connection() as conn:
            return await store.find_relationships(
                conn, from_id=src, to_id=dst, types=types, properties=props, limit=limit
            )

    async def update_relationship(
        self,
        rel_id: str,
        *,
        properties: dict[str, Any] | None,
        replace_properties: bool,
        rel_type: str | None,
    ) -> RelationshipRow:
        rel_id = parse_uuid(rel_id, "id", "relationship")
        set_, unset = changes(properties, replace_properties)
        new_type = self.rel_type(rel_type) if rel_type else None
        async with self.pool.connection() as conn:
            row = await store.update_relationship(
                conn, rel_id, rel_type=new_type, replace=replace_properties, set_=set_, unset=unset
            )
        if row is None:
            raise no_relationship(rel_id)
        return row

    async def delete_relationship(self, rel_id: str) -> str:
        rel_id = parse_uuid(rel_id, "id", "relationship")
        async with self.pool.connection() as conn:
            deleted = await store.delete_relationship(conn, rel_id)
        if not deleted:
            raise no_relationship(rel_id)
        return rel_id

    # ---- traversals and search -----------------------------------------------------------

    async def find_path(
        self,
        from_id: str,
        to_id: str,
        max_depth: int,
        types: list[str] | None,
        direction: str,
    ) -> Path | None:
        """The shortest path within max_depth (None: not connected that closely)."""
        src, dst = parse_uuid(from_id, "from_id"), parse_uuid(to_id, "to_id")
        rel_types = self.types(types)
        async with self.pool.connection() as conn, conn.transaction():
            await store.limit_statement_time(conn, TRAVERSAL_TIMEOUT)
            await _require_nodes(conn, src, dst)
            row = await store.find_path(conn, src, dst, max_depth, rel_types, direction)
            if row is None:
                return None
            nodes = await store.nodes_by_ids(conn, row.node_ids)
            rels = await store.relationships_by_ids(conn, row.relationship_ids)
        return Path(depth=row.depth, nodes=nodes, relationships=rels)

    async def neighbors(
        self,
        node_id: str,
        depth: int,
        types: list[str] | None,
        direction: str,
        limit: int,
    ) -> Neighborhood:
        """The nodes within `depth` (at most `limit`, nearest first) and the relationships
        among them and the start node."""
        node_id = parse_uuid(node_id, "id")
        rel_types = self.types(types)
        async with self.pool.connection() as conn, conn.transaction():
            await store.limit_statement_time(conn, TRAVERSAL_TIMEOUT)
            start = await store.node_by_id(conn, node_id)
            if start is None:
                raise no_node(node_id)
            rows = await store.neighbors(conn, node_id, depth, rel_types, direction)
            others = [r for r in rows if r.node_id != node_id]
            kept = others[:limit]
            distance = {r.node_id: r.distance for r in kept}
            wanted = {node_id, *distance}
            rel_ids = sorted(
                {str(rel) for r in rows if r.node_id in wanted for rel in r.relationship_ids}
            )
            node_rows = await store.nodes_by_ids(conn, [r.node_id for r in kept])
            rel_rows = await store.relationships_by_ids(conn, rel_ids)
        return Neighborhood(
            start=start,
            nodes=[(n, distance[n.id]) for n in node_rows],
            relationships=[r for r in rel_rows if r.from_id in wanted and r.to_id in wanted],
            total=len(others),
            truncated=len(others) > len(kept),
        )

    async def fuzzy_search(
        self, query: str, labels: list[str] | None, limit: int
    ) -> tuple[str, list[ScoredNodeRow]]:
        """(the query as searched, nodes by approximate name or words, best first)."""
        wanted = sorted({self.label(label) for label in labels}) if labels else None
        text = query.strip()
        if not text:
            raise InvalidArgument("query is empty", detail={"field": "query"})
        async with self.pool.connection() as conn:
            return text, await store.fuzzy_search(conn, text, wanted, limit)


async def _require_nodes(
    conn: psycopg.AsyncConnection, src: str, dst: str, *, lock: bool = False
) -> None:
    """NOT_FOUND naming the missing end (from_id first); `lock` keeps both until commit."""
    found = await store.existing_nodes(conn, [src, dst], lock=lock)
    for field, node_id in (("from_id", src), ("to_id", dst)):
        if node_id not in found:
            raise no_node(node_id, field)
