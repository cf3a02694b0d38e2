"""Graph node tools: create, find (exactly), update and delete nodes."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.mcp.app_state import scope_of
from pgrag.mcp.envelope import Envelope, Status
from pgrag.mcp.toolsets.graph.access import graph_for
from pgrag.mcp.toolsets.graph.models import (
    Deleted,
    Label,
    Limit,
    NodeId,
    NodeItem,
    NodesData,
    NodeUpdated,
    Properties,
    node_item,
    result,
)


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
) -> result(NodeItem):  # type: ignore[valid-type]
    """Create a graph node (an entity: person, organisation, concept, a document...) with a
    label from the allow-list, a name and JSON properties; optionally linked to a stored
    document or chunk. Returns the node with its stable id. Connect nodes with
    graph_create_relationship (e.g. a Document node MENTIONS a Person)."""
    graph = graph_for(ctx, write=True)
    row = await graph.create_node(scope_of(ctx), label, name, properties, document_id, chunk_id)
    return Envelope[NodeItem](data=node_item(row), status=Status(message="NODE_CREATED"))


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
) -> result(NodesData):  # type: ignore[valid-type]
    """Find graph nodes exactly: by id, or by label + name, by properties containing given
    values (or property + value), or by the document they are linked to. For approximate
    or partial names use graph_fuzzy_search."""
    graph = graph_for(ctx)
    if id is not None:
        node = node_item(await graph.node(id))
        return Envelope[NodesData](data=NodesData(items=[node], total=1))
    rows = await graph.find_nodes(
        scope_of(ctx),
        label=label,
        name=name,
        properties=properties,
        property=property,
        value=value,
        document_id=document_id,
        limit=limit,
    )
    total = int(rows[0].total) if rows else 0
    return Envelope[NodesData](
        data=NodesData(items=[node_item(r) for r in rows], total=total),
        status=Status(message="SUCCESS" if rows else "NO_MATCHES"),
    )


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
) -> result(NodeUpdated):  # type: ignore[valid-type]
    """Change a node: its name, label, properties (merge patch by default) or its link to a
    document or chunk. Returns the node as stored."""
    graph = graph_for(ctx, write=True)
    row = await graph.update_node(
        scope_of(ctx),
        id,
        name=name,
        label=label,
        properties=properties,
        replace_properties=replace_properties,
        document_id=document_id,
        chunk_id=chunk_id,
        unlink=unlink,
    )
    return Envelope[NodeUpdated](data=NodeUpdated(updated=True, node=node_item(row)))


async def graph_delete_node(
    id: NodeId,
    ctx: Context[Any, Any],
    detach: Annotated[
        bool,
        Field(description="also delete the node's relationships (required when it has any)"),
    ] = False,
) -> result(Deleted):  # type: ignore[valid-type]
    """Delete a node. A node that still has relationships is only deleted with
    detach=true, which deletes those relationships too."""
    graph = graph_for(ctx, write=True)
    node_id, count = await graph.delete_node(id, detach)
    return Envelope[Deleted](
        data=Deleted(deleted=True, id=node_id, relationships_deleted=count),
        status=Status(message="NODE_DELETED"),
    )
