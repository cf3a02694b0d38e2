"""The scope-leak matrix's probe table (tests/test_scope_leaks.py): the resources, compat,
graph, write and REST probes, their controls, and the deployments they run on."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.kb_server import (
    API_KEYS,
    FULL_KEY,
    KB_COLLECTION,
    SCOPED_KEY,
    HttpServer,
    KnowledgeBase,
    http_server,
)
from tests.support.scope_leaks import (
    COMPAT_TOOLSETS,
    KB_ROLES,
    NO_ID,
    A,
    Probe,
    World,
    a_status,
    fill,
    no_hits,
    nothing_listed,
    only_a,
    refs_to,
    same_as_full,
    sql,
    world_of,
)
from tests.support.scope_leaks_chunks import CHUNK_ATTACKS
from tests.support.scope_leaks_core import CORE, CORE_CONTROLS, TOKEN_REQUESTS
from tests.support.searxng import FakeSearxng

CONTENT_RESOURCE = "pgrag://documents/{document_id}/content{?start}"
RESOURCES = [
    *refs_to("core", "pgrag://documents/{document_id}", "doc", {}, ("id", "file name")),
    *refs_to("core", CONTENT_RESOURCE, "huge", {}, ("id",)),
    *refs_to("core", CONTENT_RESOURCE, "failed", {}, ("id",)),
    Probe("core", "resources/list", "first page", {}, check=only_a),
    Probe(
        "core",
        "resources/list",
        "cursor the full key got",
        {"cursor": "$token.resources"},
        "ok|INVALID_ARGUMENT",
    ),
    *refs_to("ldims", "ldims://docs/{document_id}/extracted_content", "doc", {}, ("id",)),
    *refs_to("ldims", "ldims://docs/{document_id}/extracted_content", "failed", {}, ("id",)),
]


COMPAT = [
    Probe(
        "ldims",
        "searchDocuments",
        "semantic, B is nearest",
        {"query": "limitation of liability in the vendor agreement", "maxResults": 50},
    ),
    Probe(
        "ldims",
        "searchDocuments",
        "exact, only B matches",
        {"query": "Acme vendor agreement", "filters": {"searchMode": "exact"}},
        check=no_hits,
    ),
    Probe(
        "ldims",
        "searchDocuments",
        "B document type",
        {
            "query": "agreement report",
            "maxResults": 50,
            "filters": {"searchMode": "exact", "documentType": "pdf"},
        },
        check=no_hits,
    ),
    Probe(
        "rag",
        "rag_search",
        "semantic, B is nearest",
        {"query": "limitation of liability", "threshold": 0.0, "limit": 50},
    ),
    Probe(
        "rag",
        "rag_search",
        "B integer ids",
        {"query": "agreement", "threshold": 0.0, "document_ids": ["$int.doc", "$int.pages"]},
        check=no_hits,
        oracle={"query": "agreement", "threshold": 0.0, "document_ids": [1, 2]},
    ),
    Probe("rag", "list_documents", "everything", {}, check=only_a),
    Probe(
        "rag", "list_documents", "page past A", {"offset": 1, "limit": 500}, check=nothing_listed
    ),
    Probe(
        "rag",
        "get_document",
        "B integer id",
        {"document_id": "$int.doc"},
        "NOT_FOUND",
        oracle={"document_id": 4503599627370495},
    ),
    *refs_to("rag", "get_document", "doc", {}, ("id", "path")),
    *refs_to("rag", "get_document", "failed", {}, ("id",)),
    Probe(
        "chart",
        "echart_generate",
        "a chart of the caller's own data",
        {"chart_type": "bar", "data": [{"x": "a", "y": 1}, {"x": "b", "y": 2}]},
        full="ok",
        check=same_as_full,
    ),
    Probe(
        "web",
        "web_search",
        "the web holds no collection data",
        {"query": "lisbon weather"},
        full="ok",
        counts=False,
    ),
]


# graph data is not scoped by collection: every graph tool refuses a scoped key; the full
# key's same call shows B (reads) or works (writes, on the writable server only)
GRAPH_CALLS = [  # tool, arguments aimed at B's graph data, writes
    ("graph_find_node", {"id": "$graph.b"}, False),
    ("graph_find_node", {"document_id": "$b.doc"}, False),
    ("graph_find_node", {"label": "Organization"}, False),
    ("graph_find_relationship", {"id": "$graph.rel"}, False),
    ("graph_find_relationship", {"from_id": "$graph.a"}, False),
    ("graph_find_path", {"from_id": "$graph.a", "to_id": "$graph.b"}, False),
    ("graph_find_neighbors", {"id": "$graph.a", "depth": 2}, False),
    ("graph_fuzzy_search", {"query": "Northwind"}, False),
    ("graph_create_node", {"label": "Concept", "name": "probe", "document_id": "$b.doc"}, True),
    (
        "graph_create_relationship",
        {"from_id": "$graph.a", "to_id": "$graph.b", "type": "MENTIONS"},
        True,
    ),
    ("graph_update_node", {"id": "$graph.b", "properties": {"seen": True}}, True),
    ("graph_update_relationship", {"id": "$graph.rel", "properties": {"seen": True}}, True),
    ("graph_delete_relationship", {"id": "$graph.rel"}, True),
    ("graph_delete_node", {"id": "$graph.b", "detach": True}, True),
]


GRAPH = [
    Probe(
        "graph",
        name,
        " ".join(f"{k}={v}" for k, v in args.items()),
        args,
        "FORBIDDEN",
        full="ok" if writes else "sees_b",
        writes=writes,
    )
    for name, args, writes in GRAPH_CALLS
]


WRITE = [
    Probe(
        "write",
        "find_documents",
        "B's saved documents by topic",
        {"topic": "Northwind", "include_content": True},
        check=nothing_listed,
    ),
    Probe(
        "write",
        "find_documents",
        "B's saved documents by tag",
        {"tags": ["northwind"], "limit": 50},
        check=nothing_listed,
    ),
    Probe(
        "write",
        "save_document",
        "into the server's collection kb",
        {"topic": "probe", "content": "A scoped key's note."},
        "FORBIDDEN",
        full="ok",
        writes=True,
    ),
    Probe(
        "write",
        "update_document",
        "B's saved document",
        {"document_id": "$b.saved", "patch": {"title": "taken over"}},
        "FORBIDDEN",
        full="ok",
        writes=True,
    ),
    Probe(
        "write",
        "delete_document",
        "B's saved document",
        {"document_id": "$b.doomed"},
        "FORBIDDEN",
        full="ok",
        writes=True,
    ),
    # a key limited to kb (so it may write there) aims the writes at `other`
    Probe(
        "write",
        "update_document",
        "other's document, by a key limited to kb",
        {"document_id": "$a", "patch": {"title": "x"}},
        "NOT_FOUND",
        oracle={"document_id": NO_ID, "patch": {"title": "x"}},
        attacker="writer",
    ),
    Probe(
        "write",
        "delete_document",
        "other's document, by a key limited to kb",
        {"document_id": "$a_path"},
        "NOT_FOUND",
        oracle={"document_id": "Other/no_such_note.txt"},
        attacker="writer",
    ),
    *CHUNK_ATTACKS,
]


def rest(
    where: str, route: str, attack: str, args: dict[str, Any], expect: str = "ok", **kw: Any
) -> Probe:
    """A REST probe; `q` holds the query parameters (or the upload), `document_id` the path."""
    return Probe(f"rest@{where}", route, attack, args, expect, **kw)


SEARCH_ROUTE = "GET /api/search"


DOC_ROUTE = "GET /api/documents/{document_id}"


CONTENT_ROUTE = "GET /api/documents/{document_id}/content"


UPLOAD_ROUTE = "POST /api/documents"


DELETE_ROUTE = "DELETE /api/documents/{document_id}"


REST_SEARCHES = [  # mode, a query only B's documents match, further parameters, check
    ("keyword", "Acme vendor agreement", {}, no_hits),
    ("regex", r"[a-z.]+@[a-z]+\.com", {}, no_hits),
    ("semantic", "limitation of liability", {}, None),
    ("hybrid", "Q1 budget revenue", {"scope": "documents"}, None),
    ("keyword", "agreement", {"folder": "Legal"}, no_hits),
]


REST = [
    *[
        rest(
            "core",
            SEARCH_ROUTE,
            f"{mode}: only B matches {q!r} {extra}",
            {"q": {"q": q, "mode": mode, "limit": 50, **extra}},
            check=check,
        )
        for mode, q, extra, check in REST_SEARCHES
    ],
    rest(
        "core",
        SEARCH_ROUTE,
        "collection kb",
        {"q": {"q": "budget", "collection": KB_COLLECTION}},
        "FORBIDDEN",
        oracle={"q": {"q": "budget", "collection": "no-such"}},
    ),
    rest(
        "core",
        SEARCH_ROUTE,
        "continuation token the full key got for B",
        {
            "q": {
                "q": "agreement",
                "mode": "keyword",
                "limit": 1,
                "continuation_token": "$token.rest_search",
            }
        },
        "INVALID_ARGUMENT",
    ),
    rest("core", "GET /api/documents", "everything", {"q": {"limit": 500}}, check=only_a),
    rest(
        "core",
        "GET /api/documents",
        "failed documents (only B has one)",
        {"q": {"status": "failed"}},
        check=nothing_listed,
    ),
    rest(
        "core", "GET /api/documents", "B folder", {"q": {"folder": "Legal"}}, check=nothing_listed
    ),
    rest(
        "core",
        "GET /api/documents",
        "page past A",
        {"q": {"offset": 1, "limit": 500}},
        check=nothing_listed,
    ),
    *[
        p
        for route in (DOC_ROUTE, CONTENT_ROUTE)
        for role in ("doc", "failed", "huge")
        for p in refs_to("rest@core", route, role, {}, ("id", "file name"))
    ],
    rest("core", "GET /api/status", "counts by status", {}, check=a_status),
    *refs_to("rest@core", "GET /api/status", "doc", {}, ("id", "path")),
    *refs_to("rest@core", "GET /api/status", "failed", {}, ("id",)),
    rest(
        "core",
        UPLOAD_ROUTE,
        "upload into kb (read-only server)",
        {"q": {"upload": ("x.txt", "x", KB_COLLECTION)}},
        "FORBIDDEN",
        full="",
    ),
    rest(
        "core",
        DELETE_ROUTE,
        "B document (read-only server)",
        {"document_id": "$b.doc"},
        "FORBIDDEN",
        full="",
    ),
    rest("core", "GET /healthz", "liveness", {}, full="ok"),
    rest("core", "GET /readyz", "readiness", {}, full="ok"),
    rest("core", "GET /metrics", "process metrics", {}, full="ok", counts=False),
    # the writable server: out-of-scope uploads and deletions
    rest(
        "writable",
        UPLOAD_ROUTE,
        "upload into kb",
        {"q": {"upload": ("p1.txt", "probe", KB_COLLECTION)}},
        "FORBIDDEN",
        full="ok",
        writes=True,
    ),
    rest(
        "writable",
        UPLOAD_ROUTE,
        "upload into the server's collection (kb)",
        {"q": {"upload": ("p2.txt", "probe", None)}},
        "FORBIDDEN",
        full="ok",
        writes=True,
    ),
    rest(
        "writable",
        DELETE_ROUTE,
        "B document",
        {"document_id": "$b.victim"},
        "NOT_FOUND",
        oracle={"document_id": NO_ID},
        full="ok",
        writes=True,
    ),
]


CONTROLS = [  # toolset, target, arguments, what the answer with A's data holds
    *[("core", tool, args, holds) for tool, args, holds in CORE_CONTROLS],
    ("core", "pgrag://documents/{document_id}", {"document_id": "$a"}, "$a_path"),
    ("core", CONTENT_RESOURCE, {"document_id": "$a"}, "heron"),
    ("core", "resources/list", {}, "$a"),
    ("ldims", "ldims://docs/{document_id}/extracted_content", {"document_id": "$a"}, "heron"),
    ("ldims", "searchDocuments", {"query": "heron", "filters": {"searchMode": "exact"}}, "$a"),
    ("rag", "list_documents", {"limit": 1}, "$a"),
    ("rag", "get_document", {"document_id": "$int.a"}, "heron"),
    ("chart", "echart_generate", {"chart_type": "bar", "data": [{"x": "heron", "y": 1}]}, "heron"),
    ("web", "web_search", {"query": "heron habitats"}, "example.org"),
    ("rest@core", SEARCH_ROUTE, {"q": {"q": "heron offsite Lisbon", "mode": "keyword"}}, "$a"),
    ("rest@core", "GET /api/documents", {}, "$a"),
    ("rest@core", DOC_ROUTE, {"document_id": "$a"}, "$a_path"),
    ("rest@core", CONTENT_ROUTE, {"document_id": "$a"}, "heron"),
    ("rest@core", "GET /api/status", {"q": {"document": "$a_path"}}, "$a"),
    ("rest@core", "GET /healthz", {}, "ok"),
    ("rest@core", "GET /readyz", {}, "ready"),
    ("rest@core", "GET /metrics", {}, "pgrag_tool_calls_total"),
    ("rest@writable", UPLOAD_ROUTE, {"q": {"upload": ("own.txt", "mine", A)}}, "pending"),
]


# A has no spreadsheet and no slides: the scoped key reaches its document, which has none
NOTHING_OF_THE_KIND = [("get_sheet_data", "no sheets"), ("get_slides", "no slides")]


WRITER_CONTROLS = [  # the kb-limited key writes and finds in its own collection
    ("save_document", {"topic": "writer note", "content": "The writer saves into kb."}, "saved/"),
    ("find_documents", {"topic": "Northwind"}, "$b.saved"),
    (
        "update_document",
        {"document_id": "$b.saved", "patch": {"tags": ["northwind", "x"]}},
        "$b.saved",
    ),
    ("delete_document", {"document_id": "$b.writer_doomed"}, "$b.writer_doomed"),
    ("set_chunk_enabled", {"chunk_id": "$chunk.doc", "enabled": True}, "CHUNK_ENABLED"),
]


PROBES = [
    *CORE,
    *RESOURCES,
    *COMPAT,
    *GRAPH,
    *WRITE,
    *REST,
    *[
        Probe(
            toolset,
            target,
            "A's own data",
            args,
            full="",
            contains=contains,
            counts=toolset != "web",
        )
        for toolset, target, args, contains in CONTROLS
    ],
    *[
        Probe(
            "core",
            name,
            "A's own data",
            {"document_id": "$a"},
            "INVALID_ARGUMENT",
            full="",
            contains=contains,
        )
        for name, contains in NOTHING_OF_THE_KIND
    ],
    *[
        Probe(
            "write",
            name,
            "the writer's own collection",
            args,
            full="",
            contains=contains,
            attacker="writer",
        )
        for name, args, contains in WRITER_CONTROLS
    ],
]


# targets whose scoped calls are all refused by design: the full key's calls show they work
NO_SCOPED_CONTROL = {
    "rag_search": "semantic only, and A is hash-embedded: a local-model server never ranks it",
    **dict.fromkeys((c[0] for c in GRAPH_CALLS), "graph data spans collections: all refused"),
    DELETE_ROUTE: "A's one document is shared by the other probes; the full key deletes B's",
}


PROBED_ON = {  # toolset -> the deployments its probes run on
    "core": ("core",),
    "rag": ("compat",),
    "ldims": ("compat",),
    "chart": ("compat",),
    "web": ("compat",),
    "graph": ("compat", "writable"),
    "write": ("writable",),
    "rest@core": ("core",),
    "rest@writable": ("writable",),
}


CASES = [(where, p) for p in PROBES for where in PROBED_ON[p.toolset]]


@dataclass
class Deployment:
    name: str
    server: HttpServer
    world: World
    clients: dict[str, Client]  # by attacker: full, scoped, writer
    rest: dict[str, httpx2.AsyncClient]
    writable: bool = False


@contextlib.asynccontextmanager
async def connected(
    server: HttpServer, keys: dict[str, str]
) -> AsyncIterator[tuple[dict[str, Client], dict[str, httpx2.AsyncClient]]]:
    """An MCP client and a REST client per key."""
    async with contextlib.AsyncExitStack() as stack:
        clients, rests = {}, {}
        for who, key in keys.items():
            headers = {"Authorization": f"Bearer {key}"}
            timeout = httpx2.Timeout(30, read=120)
            hc = await stack.enter_async_context(
                httpx2.AsyncClient(headers=headers, timeout=timeout)
            )
            clients[who] = await stack.enter_async_context(
                Client(streamable_http_client(server.mcp_url, http_client=hc), cache=None)
            )
            rests[who] = await stack.enter_async_context(
                httpx2.AsyncClient(base_url=server.base, headers=headers, timeout=timeout)
            )
        yield clients, rests


async def mint_tokens(w: World, full: Client, rest_full: httpx2.AsyncClient) -> None:
    """Continuation tokens and a resources/list cursor the full key got for B's pages."""
    for tool_name, args in TOKEN_REQUESTS.items():
        result = await full.call_tool(tool_name, fill(args, w))
        cont = (result.structured_content or {}).get("continuation") or {}
        assert cont.get("has_more") and cont.get("token"), (tool_name, result.structured_content)
        w.tokens[tool_name] = cont["token"]
    listed = await full.list_resources()
    assert listed.next_cursor, "the full key's resources/list should span several pages"
    w.tokens["resources"] = listed.next_cursor
    r = await rest_full.get("/api/search", params={"q": "agreement", "mode": "keyword", "limit": 1})
    w.tokens["rest_search"] = r.json()["continuation"]["token"]
    assert w.tokens["rest_search"], r.text


@pytest.fixture(scope="module")
async def core(kb: KnowledgeBase, kb_http: HttpServer) -> AsyncIterator[Deployment]:
    """The shared server: core toolset, read-only."""
    w = world_of(kb.dsn, KB_ROLES)
    async with connected(kb_http, {"full": FULL_KEY, "scoped": SCOPED_KEY}) as (clients, rests):
        await mint_tokens(w, clients["full"], rests["full"])
        yield Deployment("core", kb_http, w, clients, rests)


GRAPH_NODES_SQL = """
INSERT INTO pgrag.graph_nodes (label, name, properties, document_id) VALUES
    ('Organization', 'Northwind Supplies LLC', '{"role": "vendor"}', %(b)s::uuid),
    ('Location', 'Lisbon offsite venue', '{}', %(a)s::uuid)
RETURNING id::text
"""


GRAPH_REL_SQL = """
INSERT INTO pgrag.graph_relationships (type, from_id, to_id) VALUES ('RELATED_TO', %s, %s)
RETURNING id::text
"""


@contextlib.asynccontextmanager
async def compat_deployment(dsn: str, *flags: str) -> AsyncIterator[Deployment]:
    """The knowledge base in `dsn` with the other read-side toolsets, and graph rows linked
    to A's and B's documents (removed afterwards: the graph is not scoped, other modules
    share it). Also run on a Citus cluster (tests/test_citus_scopes.py)."""
    w = world_of(dsn, KB_ROLES)
    (b_node,), (a_node,) = sql(dsn, GRAPH_NODES_SQL, {"a": w.a, "b": w.b["doc"]})
    ((rel,),) = sql(dsn, GRAPH_REL_SQL, (a_node, b_node))
    w.graph = {"a": a_node, "b": b_node, "rel": rel}
    w.markers += (b_node,)  # a node linked to a B document is B's
    env = {"PGRAG_TOOLSETS": COMPAT_TOOLSETS}
    try:
        with FakeSearxng() as searxng:
            env["PGRAG_SEARXNG_URL"] = searxng.url
            with http_server(dsn, *flags, "--api-keys", API_KEYS, env=env) as server:
                keys = {"full": FULL_KEY, "scoped": SCOPED_KEY}
                async with connected(server, keys) as (clients, rests):
                    yield Deployment("compat", server, w, clients, rests)
    finally:
        sql(dsn, "DELETE FROM pgrag.graph_nodes WHERE id = ANY(%s::uuid[])", ([a_node, b_node],))


@pytest.fixture(scope="module")
async def compat(kb: KnowledgeBase) -> AsyncIterator[Deployment]:
    async with compat_deployment(kb.dsn) as dep:
        yield dep
