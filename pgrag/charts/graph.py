"""Node/link charts: nodes in any of the usual spellings (ids, names, categories, sizes),
links as source/target or from/to (graph-toolset relationships chart as they are), nodes a
link names but the input lacks added, and a force, circular or fixed layout."""

from __future__ import annotations

import math
from typing import Any

from pgrag.charts.fields import to_number
from pgrag.charts.layout import content_top, title_block
from pgrag.charts.models import MAX_LINKS, MAX_NODES, Fixes
from pgrag.errors import InvalidArgument


def _graph_input(
    graph: dict[str, Any] | None, records: list[Any] | None, fixes: Fixes
) -> tuple[list[Any], list[Any]]:
    """(nodes, links) as sent: from `graph`, or from data[0]; links under any alias."""
    graph = dict(graph or {})
    if not graph and records and isinstance(records[0], dict) and {"nodes"} & set(records[0]):
        graph = records[0]
        fixes.add("graph read from data[0]")
    raw_nodes = graph.get("nodes")
    raw_links = graph.get("links")
    if raw_links is None:
        for alias in ("edges", "relationships", "relations"):
            if graph.get(alias) is not None:
                raw_links = graph[alias]
                fixes.add(f"graph.{alias} read as graph.links")
                break
    if not raw_nodes and not raw_links:
        raise InvalidArgument(
            'chart_type graph needs graph.nodes (and graph.links): {"nodes": [{"id": "a", '
            '"name": "A", "category": "Person"}], "links": [{"source": "a", "target": "b"}]}',
            detail={"field": "graph.nodes"},
        )
    if len(raw_nodes or []) > MAX_NODES or len(raw_links or []) > MAX_LINKS:
        raise InvalidArgument(
            f"graph too large: at most {MAX_NODES} nodes and {MAX_LINKS} links",
            detail={"field": "graph.nodes"},
        )
    return raw_nodes or [], raw_links or []


def _as_node(n: Any, i: int) -> tuple[dict[str, Any], str]:
    """A node as an object (a bare string or number is its own id and name) and its id."""
    if isinstance(n, str | int | float):
        n = {"id": str(n), "name": str(n)}
    if not isinstance(n, dict):
        raise InvalidArgument(
            f"graph.nodes[{i}] is not an object", detail={"field": f"graph.nodes[{i}]"}
        )
    node_id = n.get("id", n.get("name"))
    if node_id is None or str(node_id) == "":
        raise InvalidArgument(
            f"graph.nodes[{i}] needs an id or a name", detail={"field": f"graph.nodes[{i}].id"}
        )
    return n, str(node_id)


def _node(n: dict[str, Any], node_id: str, categories: list[str], fixes: Fixes) -> dict[str, Any]:
    """One ECharts node; a new category is appended to `categories`."""
    name = n.get("name")
    if name is None:
        name = node_id
        if "id" in n:
            fixes.add("nodes without a name are labelled with their id")
    category = n.get("category", n.get("label", n.get("type", n.get("group"))))
    node: dict[str, Any] = {"id": node_id, "name": str(name)}
    if category is not None and str(category) != "":
        if str(category) not in categories:
            categories.append(str(category))
        node["category"] = categories.index(str(category))
    if to_number(n.get("value")) is not None:
        node["value"] = to_number(n.get("value"))
    size = to_number(n.get("symbolSize", n.get("size")))
    if size is not None:
        node["symbolSize"] = size
    return node


def _nodes(raw_nodes: list[Any], fixes: Fixes) -> tuple[list[dict[str, Any]], list[str]]:
    """The nodes (duplicates by id merged) and their categories in first-seen order."""
    nodes: list[dict[str, Any]] = []
    seen: set[str] = set()
    categories: list[str] = []
    for i, raw in enumerate(raw_nodes):
        n, node_id = _as_node(raw, i)
        if node_id in seen:
            fixes.add(f"duplicate node '{node_id}' merged")
            continue
        seen.add(node_id)
        nodes.append(_node(n, node_id, categories, fixes))
    return nodes, categories


def _ends(link: Any, i: int, fixes: Fixes) -> tuple[dict[str, Any], str, str]:
    """A link as an object ([a, b] pairs too) and its source and target as sent."""
    if isinstance(link, list | tuple) and len(link) >= 2:
        link = {"source": link[0], "target": link[1]}
    if not isinstance(link, dict):
        raise InvalidArgument(
            f"graph.links[{i}] is not an object", detail={"field": f"graph.links[{i}]"}
        )
    src = link.get("source", link.get("from", link.get("from_id", link.get("fromId"))))
    dst = link.get("target", link.get("to", link.get("to_id", link.get("toId"))))
    if src is None or dst is None:
        missing = "source" if src is None else "target"
        raise InvalidArgument(
            f"graph.links[{i}] needs a {missing}",
            detail={"field": f"graph.links[{i}].{missing}"},
        )
    if "source" not in link or "target" not in link:
        fixes.add("link endpoints from/to (from_id/to_id) read as source/target")
    return link, str(src), str(dst)


def _links(raw_links: list[Any], nodes: list[dict[str, Any]], fixes: Fixes) -> list[dict[str, Any]]:
    """Links by node id: an end naming a node by its name is read as that node; an end
    naming no node adds one (appended to `nodes`)."""
    index = {n["id"]: n for n in nodes}
    links: list[dict[str, Any]] = []
    for i, raw in enumerate(raw_links):
        link, src, dst = _ends(raw, i, fixes)
        for end in (src, dst):
            if end not in index:
                by_name = next((n for n in nodes if n["name"] == end), None)
                if by_name is not None:
                    continue
                node = {"id": end, "name": end}
                index[end] = node
                nodes.append(node)
                fixes.add(f"node '{end}' added: a link refers to it")
        src = src if src in index else next(n["id"] for n in nodes if n["name"] == src)
        dst = dst if dst in index else next(n["id"] for n in nodes if n["name"] == dst)
        out: dict[str, Any] = {"source": src, "target": dst}
        text = link.get("label", link.get("type", link.get("name")))
        if text is not None:
            out["value"] = str(text)
        links.append(out)
    return links


def _place_on_circle(nodes: list[dict[str, Any]]) -> None:
    """layout=none needs x/y: nodes without them go on a circle."""
    count = max(len(nodes), 1)
    for i, n in enumerate(nodes):
        n.setdefault("x", round(300 + 200 * math.cos(2 * math.pi * i / count), 2))
        n.setdefault("y", round(300 + 200 * math.sin(2 * math.pi * i / count), 2))


def _series(
    nodes: list[dict[str, Any]], links: list[dict[str, Any]], categories: list[str], layout: str
) -> dict[str, Any]:
    series: dict[str, Any] = {
        "type": "graph",
        "layout": layout,
        "roam": True,
        "draggable": layout == "force",
        "data": nodes,
        "links": links,
        "categories": [{"name": c} for c in categories],
        "label": {"show": True, "position": "right"},
        "edgeSymbol": ["none", "arrow"],
        "edgeSymbolSize": 8,
        "edgeLabel": {"show": any("value" in link for link in links), "formatter": "{c}"},
        "lineStyle": {"color": "source", "curveness": 0.1},
        "emphasis": {"focus": "adjacency", "lineStyle": {"width": 3}},
        "symbolSize": 24,
    }
    if layout == "force":
        series["force"] = {"repulsion": 220, "edgeLength": [60, 140], "gravity": 0.1}
    if layout == "circular":
        series["circular"] = {"rotateLabel": True}
    if layout == "none":
        _place_on_circle(nodes)
    return series


def graph_option(
    graph: dict[str, Any] | None,
    records: list[Any] | None,
    opts: dict[str, Any],
    title: str | None,
    fixes: Fixes,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A graph option and what it holds (node, link counts and the categories)."""
    raw_nodes, raw_links = _graph_input(graph, records, fixes)
    nodes, categories = _nodes(raw_nodes, fixes)
    links = _links(raw_links, nodes, fixes)
    layout = str(opts.get("layout") or "force").lower()
    if layout not in ("force", "circular", "none"):
        fixes.add(f"options.layout '{layout}' is not force, circular or none: used force")
        layout = "force"
    t = title_block(title, opts)
    option: dict[str, Any] = {}
    if t:
        option["title"] = t
    option["tooltip"] = {"trigger": "item"}
    option["legend"] = {
        "type": "scroll",
        "top": content_top(t),
        "data": categories,
        "show": bool(categories),
    }
    option["series"] = [_series(nodes, links, categories, layout)]
    return option, {"nodes": len(nodes), "links": len(links), "categories": categories}
