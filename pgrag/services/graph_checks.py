"""What the graph accepts: ids as UUIDs, labels and relationship types from the operator's
allow-lists (matched case-insensitively, answered in the list's spelling), properties as
size-limited JSON objects, updates as merge patches; and the NOT_FOUND errors for ids."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from pgrag.errors import Forbidden, InvalidArgument, NotFound

MAX_PROPERTIES_BYTES = 64_000


def allow_list(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


def allowed_name(value: str, allowed: Sequence[str], what: str, variable: str) -> str:
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


def parse_uuid(value: str, field: str, kind: str = "node") -> str:
    """The canonical form of a node or relationship id; INVALID_ARGUMENT naming `field`."""
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise InvalidArgument(
            f"{field}: '{value[:80]}' is not a {kind} id (a UUID); get ids from "
            "graph_find_node, graph_fuzzy_search or graph_find_relationship",
            detail={"field": field},
        ) from None


def check_properties(value: dict[str, Any] | None, field: str = "properties") -> dict[str, Any]:
    """A JSON object within the size limit (long text belongs in a document)."""
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


def changes(value: dict[str, Any] | None, replace: bool) -> tuple[dict[str, Any], list[str]]:
    """(keys to set, keys to remove): a merge patch (null removes), or a full replacement."""
    value = check_properties(value)
    if replace:
        return value, []
    return (
        {k: v for k, v in value.items() if v is not None},
        [k for k, v in value.items() if v is None],
    )


def no_node(node_id: str, field: str = "id") -> NotFound:
    """NOT_FOUND for a node id, naming the argument it came in."""
    return NotFound(
        f"no graph node {node_id}: find nodes with graph_find_node or graph_fuzzy_search",
        detail={"field": field, "id": node_id},
    )


def no_relationship(rel_id: str) -> NotFound:
    """NOT_FOUND for a relationship id."""
    return NotFound(
        f"no graph relationship {rel_id}: list them with graph_find_relationship",
        detail={"id": rel_id},
    )
