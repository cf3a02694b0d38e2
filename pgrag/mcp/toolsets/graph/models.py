"""What the graph tools answer (pydantic models published as output schemas), the argument
types they share, and the conversion from the store's rows."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from pgrag.mcp.envelope import Envelope
from pgrag.store.graph import NodeRow, RelationshipRow

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


def result(model: type[Any]) -> Any:
    """A tool's return annotation: the wrapper returns a CallToolResult holding Envelope[model]."""
    return Annotated[CallToolResult, Envelope[model]]  # type: ignore[valid-type]


# ---- answers ----------------------------------------------------------------------------------


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


def node_item(row: NodeRow) -> NodeItem:
    return NodeItem(
        id=row.id,
        label=row.label,
        name=row.name,
        properties=row.properties or {},
        document_id=row.document_id,
        chunk_id=row.chunk_id,
        created_at=row.created_at.isoformat(),
        updated_at=row.updated_at.isoformat(),
    )


def relationship_item(row: RelationshipRow) -> RelationshipItem:
    return RelationshipItem(
        id=row.id,
        type=row.type,
        from_id=row.from_id,
        to_id=row.to_id,
        properties=row.properties or {},
        created_at=row.created_at.isoformat(),
        updated_at=row.updated_at.isoformat(),
    )


# ---- arguments --------------------------------------------------------------------------------

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
