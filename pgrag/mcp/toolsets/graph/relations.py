"""Graph relationship tools: create, find, update and delete typed, directed relationships."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.mcp.envelope import Envelope, Status
from pgrag.mcp.toolsets.graph.access import graph_for
from pgrag.mcp.toolsets.graph.models import (
    Deleted,
    Limit,
    NodeId,
    Properties,
    RelationshipId,
    RelationshipItem,
    RelationshipsData,
    RelationshipUpdated,
    RelType,
    relationship_item,
    result,
)


async def graph_create_relationship(
    from_id: NodeId,
    to_id: NodeId,
    type: RelType,
    ctx: Context[Any, Any],
    properties: Properties | None = None,
) -> result(RelationshipItem):  # type: ignore[valid-type]
    """Connect two nodes with a typed, directed relationship (from_id -[type]-> to_id),
    e.g. a Person WORKS_FOR an Organization, a Document MENTIONS a Concept. The type
    must be in the allow-list."""
    graph = graph_for(ctx, write=True)
    row = await graph.create_relationship(from_id, to_id, type, properties)
    return Envelope[RelationshipItem](
        data=relationship_item(row), status=Status(message="RELATIONSHIP_CREATED")
    )


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
) -> result(RelationshipsData):  # type: ignore[valid-type]
    """Find relationships by id, or by start node, end node, type and properties (any
    combination). Directed: from_id is where the relationship starts."""
    graph = graph_for(ctx)
    if id is not None:
        item = relationship_item(await graph.relationship(id))
        return Envelope[RelationshipsData](data=RelationshipsData(items=[item], total=1))
    rows = await graph.find_relationships(
        from_id=from_id, to_id=to_id, rel_type=type, properties=properties, limit=limit
    )
    total = int(rows[0].total) if rows else 0
    return Envelope[RelationshipsData](
        data=RelationshipsData(items=[relationship_item(r) for r in rows], total=total),
        status=Status(message="SUCCESS" if rows else "NO_MATCHES"),
    )


async def graph_update_relationship(
    id: RelationshipId,
    ctx: Context[Any, Any],
    properties: Annotated[
        dict[str, Any] | None,
        Field(description="merge patch: keys set, keys given as null removed"),
    ] = None,
    replace_properties: bool = False,
    type: Annotated[str | None, Field(max_length=63, description="a new type")] = None,
) -> result(RelationshipUpdated):  # type: ignore[valid-type]
    """Change a relationship's properties (merge patch by default) or its type."""
    graph = graph_for(ctx, write=True)
    row = await graph.update_relationship(
        id, properties=properties, replace_properties=replace_properties, rel_type=type
    )
    return Envelope[RelationshipUpdated](
        data=RelationshipUpdated(updated=True, relationship=relationship_item(row))
    )


async def graph_delete_relationship(id: RelationshipId, ctx: Context[Any, Any]) -> result(Deleted):  # type: ignore[valid-type]
    """Delete one relationship (the nodes stay)."""
    graph = graph_for(ctx, write=True)
    rel_id = await graph.delete_relationship(id)
    return Envelope[Deleted](
        data=Deleted(deleted=True, id=rel_id), status=Status(message="RELATIONSHIP_DELETED")
    )
