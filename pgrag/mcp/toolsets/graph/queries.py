"""Graph traversal and search tools: shortest path, neighbourhood, fuzzy node search."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.mcp.envelope import Action, Envelope, Status
from pgrag.mcp.toolsets.graph.access import graph_for
from pgrag.mcp.toolsets.graph.models import (
    Direction,
    FuzzyData,
    Label,
    Limit,
    NeighborItem,
    NeighborsData,
    NodeId,
    PathData,
    ScoredNode,
    Types,
    node_item,
    relationship_item,
    result,
)
from pgrag.services.graph import MAX_NEIGHBOR_DEPTH, MAX_PATH_DEPTH


def _path_actions(max_depth: int) -> list[Action]:
    """Offer the deepest search when a path was not found within a shallower one."""
    if max_depth >= MAX_PATH_DEPTH:
        return []
    return [
        Action(
            id="INCREASE_DEPTH",
            description="Look for a longer path",
            params={"max_depth": MAX_PATH_DEPTH},
        )
    ]


async def graph_find_path(
    from_id: NodeId,
    to_id: NodeId,
    ctx: Context[Any, Any],
    max_depth: Annotated[
        int, Field(ge=1, le=MAX_PATH_DEPTH, description="longest path, in relationships")
    ] = 4,
    types: Types = None,
    direction: Direction = "both",
) -> result(PathData):  # type: ignore[valid-type]
    """The shortest path between two nodes (at most max_depth ≤ 6 relationships),
    optionally only over some relationship types: the nodes and relationships in order.
    found=false when the nodes are not connected within max_depth."""
    graph = graph_for(ctx)
    path = await graph.find_path(from_id, to_id, max_depth, types, direction)
    if path is None:
        return Envelope[PathData](
            data=PathData(found=False, nodes=[], relationships=[]),
            status=Status(message="NO_PATH"),
            actions=_path_actions(max_depth),
        )
    return Envelope[PathData](
        data=PathData(
            found=True,
            length=path.depth,
            nodes=[node_item(n) for n in path.nodes],
            relationships=[relationship_item(r) for r in path.relationships],
        ),
        status=Status(message="PATH_FOUND"),
    )


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
) -> result(NeighborsData):  # type: ignore[valid-type]
    """The nodes within `depth` relationships of a node (each with its distance) and the
    relationships followed to reach them, optionally only over some relationship types.
    Cycles are safe: every node appears once, at its shortest distance."""
    graph = graph_for(ctx)
    hood = await graph.neighbors(id, depth, types, direction, limit)
    nodes = [NeighborItem(**node_item(n).model_dump(), distance=d) for n, d in hood.nodes]
    return Envelope[NeighborsData](
        data=NeighborsData(
            node=node_item(hood.start),
            nodes=nodes,
            relationships=[relationship_item(r) for r in hood.relationships],
            total=hood.total,
            truncated=hood.truncated,
        ),
        status=Status(
            code="partial_success" if hood.truncated else "success",
            message="LIMIT_REACHED" if hood.truncated else "SUCCESS",
        ),
    )


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
) -> result(FuzzyData):  # type: ignore[valid-type]
    """Find nodes by approximate name or words in their properties: trigram similarity
    (typos) plus CJK-aware full text. Each item has a score in 0..1 and its rank."""
    graph = graph_for(ctx)
    text, rows = await graph.fuzzy_search(query, labels, limit)
    items = [
        ScoredNode(
            **node_item(r).model_dump(),
            score=round(float(r.score), 4),
            rank=i,
            trigram_score=round(float(r.trigram_score), 4),
            name_score=round(float(r.name_score), 4),
            text_score=round(float(r.text_score), 4),
        )
        for i, r in enumerate(rows, 1)
    ]
    return Envelope[FuzzyData](
        data=FuzzyData(query=text, items=items),
        status=Status(message="SUCCESS" if items else "NO_MATCHES"),
    )
