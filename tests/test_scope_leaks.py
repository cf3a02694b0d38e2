"""The scope-leak matrix (issue #8 item 5, SPEC §7): a key limited to collection A (`other`)
aims every tool, resource and REST route at collections B (`kb`, `bulk`): reads by id, path
and file name, searches whose only matches are in B (keyword, exact, regex, semantic,
hybrid), listings and folders, paging with continuation tokens the full key minted for B,
and inference through counts, statuses and error messages. Nothing of B may come back:

- no B document id, path, file name, title, folder or B-only word anywhere in the
  serialized response (unless the caller sent it: an error may echo the id it was given);
- no count above what A holds (`total_matches`, `total`, status counts...);
- an error for a B document is byte for byte the error for a document that does not exist.

The matrix is checked against the servers themselves: every tool of `tools/list`, every
resource template and every route of `/openapi.json` must have probes here, so a new one
cannot skip the check. Each attack is repeated with the full key, which must see B there
(the attack aims at something real) or, where no collection data can show (embeddings,
charts, the web, writes), simply succeed; and each tool has a control that a limited key
passes with its own data, so the matrix cannot pass because everything fails. Graph tools
are the exception: graph data belongs to no collection, so a limited key is refused them.

Deployments (one server each, started once for the module):
- `core`: the shared kb_http server (tests/support/kb_server.py), toolset core.
- `compat`: the same database with `rag,ldims,graph,chart,web` (rag excludes core) and a
  local SearXNG stand-in; graph rows linked to A's and B's documents exist for the module.
- `writable`: its own small database (hash embeddings), `core,write,graph`,
  PGRAG_READ_ONLY=false, writing to collection kb, plus a key limited to kb that attacks
  `other` through the write tools.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import psycopg
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.mcp.toolsets.compat.rag import int_id
from pgrag.settings import load_settings
from tests.conftest import create_database, drop_database
from tests.support.kb_server import (
    API_KEYS,
    BULK_COLLECTION,
    FORECAST_PATH,
    FULL_KEY,
    HASH_MODEL,
    HUGE_PATH,
    KB_COLLECTION,
    NOTE_PATH,
    OTHER_COLLECTION,
    OTHER_PATH,
    OTHER_TEXT,
    SCOPED_KEY,
    HttpServer,
    KnowledgeBase,
    http_server,
)
from tests.support.searxng import FakeSearxng

pytest_plugins = ("tests.support.kb_server",)
pytestmark = pytest.mark.anyio

# ---------------------------------------------------------------------------- the setting

A = OTHER_COLLECTION  # the scoped key's collection
WRITER_KEY = "writer-key"  # writable deployment only: limited to kb, so `other` is its B
WRITABLE_KEYS = f"{API_KEYS},{WRITER_KEY}={KB_COLLECTION}"
COMPAT_TOOLSETS = "rag,ldims,graph,chart,web"
WRITABLE_TOOLSETS = "core,write,graph"
DEPLOYMENT_TOOLSETS = {
    "core": "core",
    "compat": COMPAT_TOOLSETS,
    "writable": WRITABLE_TOOLSETS,
}
VENDOR = "Legal/Acme_Vendor_Agreement.pdf"
ANNUAL = "Finance/Annual_Report_2024.pdf"
BUDGET = "Finance/2024/Q1/Q1_Budget.xlsx"
CSV = "Sales/Customer_List.csv"
DECK = "Sales/Q4_Board_Deck.pptx"
CORRUPTED = "test-edge-cases/corrupted.xlsx"
KB_ROLES = {  # role -> B document of the shared knowledge base
    "doc": VENDOR,
    "pages": ANNUAL,
    "sheet": BUDGET,
    "forecast": FORECAST_PATH,
    "csv": CSV,
    "deck": DECK,
    "failed": CORRUPTED,
    "huge": HUGE_PATH,
    "note": NOTE_PATH.format(1),
}
# words only B's text holds (A's note is about an offsite in Lisbon, codeword heron): its
# companies, the bulk notes, the huge text's lorem ipsum, sheet headers, a slide
B_WORDS = ("Acme", "Northwind", "Bulk note", "销售策略", "pariatur", "occaecat", "Line Item")
B_WORDS += ("Week Starting", "Q4 highlights")
A_WORDS = ("heron", "Lisbon")

CONTRACT_MD = (
    "# Acme and Northwind supply contract\n\n"
    "The Northwind liability cap is two million; Acme pays within 30 days.\n"
)
VICTIM_MD = "# Acme victim memo\n\nA B document the full key deletes over REST.\n"
WRITABLE_FILES = {  # collection -> relative path -> text
    KB_COLLECTION: {"Legal/Acme_Contract.md": CONTRACT_MD, "Legal/Victim_Memo.md": VICTIM_MD},
    OTHER_COLLECTION: {OTHER_PATH: OTHER_TEXT + "\n"},
}
WRITABLE_ROLES = {"doc": "Legal/Acme_Contract.md", "victim": "Legal/Victim_Memo.md"}

NO_ID = "00000000-0000-4000-8000-000000000000"  # a document id that exists nowhere
VOLATILE = {"trace_id", "traceId", "took_ms", "meta", "query_time_ms", "executionTime"}
VOLATILE |= {"search_id", "fetched_at", "cached"}
COUNT_KEYS = {"total_matches", "totalMatches", "total_results", "total", "documents"}
LIST_KEYS = {"results", "items", "documents", "folders", "nodes", "resources"}
ID_KEYS = {"document_id", "documentId", "uuid", "document_uuid", "fileId", "file_id"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module scope: the servers and clients below live for the module


# ---------------------------------------------------------------------------- the world


@dataclass
class World:
    """What the probes aim at in one database, and how to recognise B in a response."""

    a: str  # A's document id
    a_path: str
    b: dict[str, str]  # role -> a B document id
    b_paths: dict[str, str]  # role -> its path
    markers: tuple[str, ...]  # strings only B's data holds
    a_counts: dict[str, int]  # A's documents by status
    a_total: int  # the most any count in a scoped response may say
    writer_markers: tuple[str, ...] = ()  # writable: what the kb-limited key must not see
    tokens: dict[str, str] = field(default_factory=dict)  # minted by the full key
    graph: dict[str, str] = field(default_factory=dict)  # node and relationship ids


DOCS_SQL = """
SELECT d.id::text, d.path, d.name, coalesce(d.title, ''), coalesce(d.folder, ''), c.name,
       d.status, ch.content
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
LEFT JOIN (SELECT document_id, collection_id, string_agg(content, ' ') AS content
           FROM pgrag.chunks GROUP BY 1, 2) ch
       ON ch.document_id = d.id AND ch.collection_id = d.collection_id
"""  # joined on collection_id too: it also runs on a Citus cluster (test_citus_scopes.py)
CHUNKS_SQL = """
SELECT count(*) FROM pgrag.chunks ch JOIN pgrag.collections c ON c.id = ch.collection_id
WHERE c.name = %s
"""


def sql(dsn: str, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def markers_for(dsn: str, scope: set[str], words: tuple[str, ...]) -> tuple[str, ...]:
    """Ids, paths, names, long titles and folders (as JSON values) of every document outside
    `scope`, plus `words`; minus anything the scope's own data also contains."""
    rows = sql(dsn, DOCS_SQL)
    own = " ".join(json.dumps(r, ensure_ascii=False) for r in rows if r[5] in scope)
    found: set[str] = set(words)
    for doc_id, path, name, title, folder, collection, *_ in rows:
        if collection in scope:
            continue
        found |= {doc_id, path, name, json.dumps(folder, ensure_ascii=False)}
        if len(title) >= 8:  # short titles ("notes", "config") are ordinary words
            found.add(title)
    return tuple(sorted(m for m in found if m and m.strip('"') not in own))


def world_of(dsn: str, roles: dict[str, str]) -> World:
    rows = sql(dsn, DOCS_SQL)
    ids = {r[1]: r[0] for r in rows}
    a_rows = [r for r in rows if r[5] == OTHER_COLLECTION]
    assert len(a_rows) == 1, a_rows
    counts = {s: 0 for s in ("pending", "processing", "ready", "failed")}
    for r in a_rows:
        counts[r[6]] += 1
    a_chunks = sql(dsn, CHUNKS_SQL, (OTHER_COLLECTION,))[0][0]
    return World(
        a=a_rows[0][0],
        a_path=a_rows[0][1],
        b={role: ids[path] for role, path in roles.items()},
        b_paths=dict(roles),
        markers=markers_for(dsn, {OTHER_COLLECTION}, B_WORDS),
        a_counts=counts,
        a_total=max(a_chunks, len(a_rows)),
        writer_markers=markers_for(dsn, {KB_COLLECTION}, A_WORDS),
    )


# ------------------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Outcome:
    """What one call returned: "ok" or its stable error code, the JSON-able body, and any
    other text that came with it (an MCP result's text content)."""

    code: str
    body: Any
    extra: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        body = json.dumps(self.body, ensure_ascii=False, sort_keys=True, default=str)
        return "\n".join((body, *self.extra))


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


async def call_tool(client: Client, tool: str, args: dict[str, Any]) -> Outcome:
    result = await client.call_tool(tool, args)
    body = result.structured_content or {}
    texts = tuple(c.text for c in result.content if getattr(c, "text", None) is not None)
    if not result.is_error:
        return Outcome("ok", body, texts)
    error = body.get("error") if isinstance(body.get("error"), dict) else None
    code = error["code"] if error else body.get("errorCode", "UNKNOWN")  # envelope / compat
    return Outcome(str(code), body, texts)


async def read_resource(client: Client, uri: str) -> Outcome:
    try:
        result = await client.read_resource(uri)
    except MCPError as exc:
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        body = {"rpc": exc.error.code, "message": exc.error.message, "data": exc.error.data}
        return Outcome(str(data.get("code", f"MCP{exc.error.code}")), body)
    return Outcome("ok", [_dump(c) for c in result.contents])


async def list_resources(client: Client, cursor: str | None) -> Outcome:
    try:
        result = await client.list_resources(cursor=cursor)
    except MCPError as exc:
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        return Outcome(str(data.get("code", f"MCP{exc.error.code}")), exc.error.message)
    return Outcome(
        "ok", {"resources": [_dump(r) for r in result.resources], "next": result.next_cursor}
    )


async def call_rest(http: httpx2.AsyncClient, route: str, args: dict[str, Any]) -> Outcome:
    method, template = route.split(" ", 1)
    path = template.format(**{k: quote(str(v), safe="") for k, v in args.items() if k != "q"})
    params = args.get("q", {})
    if method == "POST":
        name, text, collection = params["upload"]
        form = {"collection": collection} if collection else {}
        r = await http.post(path, files={"file": (name, text.encode(), "text/plain")}, data=form)
    else:
        r = await http.request(method, path, params=params)
    try:
        body: Any = r.json()
    except ValueError:
        body = r.text
    if r.status_code < 300:
        return Outcome("ok", body)
    code = body.get("errorCode") if isinstance(body, dict) else None
    return Outcome(str(code or f"HTTP{r.status_code}"), body)


# ----------------------------------------------------------------------------- the probes
#
# Arguments are JSON templates: strings starting with "$" are filled in from the World:
#   $a, $a_path                       A's document id and path
#   $b.ROLE $path.ROLE $name.ROLE     a B document's id, path and file name
#   $int.ROLE                         its integer id in the rag toolset ($int.a: A's)
#   $token.TOOL                       the continuation token the full key got for B
#   $graph.a $graph.b $graph.rel      graph nodes linked to A's / B's document, their edge


def fill(value: Any, w: World) -> Any:
    if isinstance(value, dict):
        return {k: fill(v, w) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, w) for v in value]
    if not (isinstance(value, str) and value.startswith("$")):
        return value
    kind, _, key = value[1:].partition(".")
    lookups: dict[str, Callable[[], Any]] = {
        "a": lambda: w.a,
        "a_path": lambda: w.a_path,
        "b": lambda: w.b[key],
        "path": lambda: w.b_paths[key],
        "name": lambda: w.b_paths[key].rsplit("/", 1)[-1],
        "int": lambda: int_id(w.a if key == "a" else w.b[key]),
        "token": lambda: w.tokens[key],
        "graph": lambda: w.graph[key],
    }
    return lookups[kind]()


Check = Callable[[Outcome, Outcome | None, World], None]


@dataclass(frozen=True)
class Probe:
    """One call of the matrix. An attack: the `attacker` aims `args` at B and must get
    `expect` (a code, or several joined by |) with nothing of B inside. A control (it has
    `contains`): the attacker reaches its own data, so the tool is not simply refusing it."""

    toolset: str  # the toolset it belongs to, or rest@DEPLOYMENT
    target: str  # a tool name, a resource URI template, resources/list or "METHOD /path"
    attack: str
    args: dict[str, Any]
    expect: str = "ok"
    full: str = "sees_b"  # the full key's same call: sees_b | ok | "" (not made)
    oracle: dict[str, Any] | None = None  # the same call aimed at something nonexistent
    check: Check | None = None
    counts: bool = True  # every collection-wide count in an answer stays within A's
    writes: bool = False  # the full key's call needs a writable server
    attacker: str = "scoped"  # scoped (limited to other) | writer (limited to kb)
    contains: str | None = None  # controls: what the answer must hold (a template)

    @property
    def kind(self) -> str:
        if self.target == "resources/list":
            return "resources/list"
        if "://" in self.target:
            return "resource"
        return "rest" if " /" in self.target else "tool"

    @property
    def is_control(self) -> bool:
        return self.contains is not None

    @property
    def id(self) -> str:
        words = re.sub(r"[^A-Za-z0-9]+", "-", self.attack).strip("-").lower()
        return f"{self.target}:{'control' if self.is_control else 'attack'}:{words}"


# checks: (the scoped outcome, the full key's outcome of the same call, the world)


def _values(body: Any, keys: set[str]) -> Iterator[Any]:
    """Every value stored under one of `keys`, at any depth."""
    if isinstance(body, dict):
        for k, v in body.items():
            if k in keys:
                yield v
            yield from _values(v, keys)
    elif isinstance(body, list):
        for v in body:
            yield from _values(v, keys)


def _data(body: Any) -> Any:
    return body["data"] if isinstance(body, dict) and "data" in body else body


def nothing_listed(o: Outcome, full: Outcome | None, w: World) -> None:
    """A filter or a page past everything A holds: empty lists."""
    assert all(v == [] for v in _values(o.body, LIST_KEYS) if isinstance(v, list)), o.body


def no_hits(o: Outcome, full: Outcome | None, w: World) -> None:
    """Only B matches: nothing comes back, and every count says so."""
    nothing_listed(o, full, w)
    assert all(v == 0 for v in _values(o.body, COUNT_KEYS) if isinstance(v, int)), o.body


def only_a(o: Outcome, full: Outcome | None, w: World) -> None:
    """Every document the answer names is A's, and it names A's document."""
    ids = set(_values(o.body, ID_KEYS))
    ids |= {u.rsplit("/", 1)[-1] for u in _values(o.body, {"uri"})}
    assert ids == {w.a}, ids


def a_status(o: Outcome, full: Outcome | None, w: World) -> None:
    data = _data(o.body)
    assert data["counts"] == w.a_counts and data["total"] == sum(w.a_counts.values()), data
    assert full is not None and _data(full.body)["total"] > data["total"]  # B has documents


def a_folders(o: Outcome, full: Outcome | None, w: World) -> None:
    folders = _data(o.body)["folders"]
    assert folders == [{"folder": w.a_path.rsplit("/", 1)[0], "documents": 1}], folders


def same_as_full(o: Outcome, full: Outcome | None, w: World) -> None:
    """Nothing in the answer depends on the caller's scope."""
    assert full is not None and shape(o) == shape(full)


def shape(o: Outcome, refs: tuple[str, ...] = ()) -> str:
    """The outcome without volatile fields (trace ids, timings), `refs` replaced."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    text = json.dumps([o.code, strip(o.body)], ensure_ascii=False, sort_keys=True, default=str)
    for ref in sorted(refs, key=len, reverse=True):
        text = text.replace(json.dumps(ref, ensure_ascii=False)[1:-1], "<ref>")
    return text


# a B document named three ways, each with a name that exists nowhere (for the oracle)
REFS = {"id": ("$b.{}", NO_ID), "path": ("$path.{}", "Legal/No_Such_File.pdf")}
REFS["file name"] = ("$name.{}", "No_Such_File.pdf")


def refs_to(
    toolset: str, target: str, role: str, extra: dict[str, Any], forms: tuple[str, ...]
) -> list[Probe]:
    """NOT_FOUND for B's document however it is named, exactly as for a missing one."""

    def named(ref: str) -> dict[str, Any]:
        if target == "GET /api/status":
            return {"q": {"document": ref}}
        return {"document_id": ref, **extra}

    # resources answer MCP's "invalid params" with NOT_FOUND in error.data, like the tools
    expect = "NOT_FOUND"
    return [
        Probe(
            toolset,
            target,
            f"B {role} by {form}",
            named(ref.format(role)),
            expect,
            oracle=named(missing),
        )
        for form in forms
        for ref, missing in [REFS[form]]
    ]


DOCUMENT_READS = [  # tool, a B document (role), further arguments
    ("get_document_outline", "doc", {}),
    ("get_document_outline", "failed", {}),  # NOT_FOUND, not CONTENT_UNAVAILABLE
    ("get_document_outline", "forecast", {}),
    ("get_document_data", "note", {}),
    ("get_document_data", "doc", {"format": "chunks"}),
    ("get_document_data", "failed", {"format": "metadata"}),
    ("get_pages", "pages", {"page_range": "1-3"}),
    ("get_sheet_data", "sheet", {"cell_range": "A1:F20"}),
    ("get_sheet_data", "forecast", {}),
    ("get_sheet_data", "csv", {}),
    ("get_slides", "deck", {"slide_numbers": "1-3"}),
    ("get_status", "doc", {}),
    ("get_status", "failed", {}),
]
SEARCHES = [  # mode, a query only B's documents match, further arguments, check
    (
        "keyword",
        "Acme vendor agreement",
        {"explain": True, "return_scoring_details": True},
        no_hits,
    ),
    ("exact", '"limitation of liability"', {}, no_hits),
    ("regex", r"[a-z.]+@[a-z]+\.com", {}, no_hits),
    ("semantic", "limitation of liability in the vendor agreement", {"explain": True}, None),
    ("hybrid", "Q1 budget revenue forecast", {"scope": "documents"}, None),
    ("hybrid", "第四季度销售策略", {"explain": True}, None),
    ("keyword", "inventory count shelf", {}, no_hits),  # the bulk collection
]
TOKEN_REQUESTS = {  # tool -> the full key's first page of B (the scoped key replays its token)
    "search": {"query": "agreement", "mode": "keyword", "limit": 1},
    "list_documents": {"max_tokens": 50},
    "get_document_data": {"document_id": "$b.huge", "max_tokens": 50},
    "get_pages": {"document_id": "$b.pages", "max_tokens": 50},
    "get_sheet_data": {"document_id": "$b.forecast", "max_tokens": 50},
    "get_slides": {"document_id": "$b.deck", "max_tokens": 50},
}
NO_DOCS = {"document_ids": [NO_ID, "00000000-0000-4000-8000-000000000001"]}

CORE = [
    *[
        Probe(
            "core",
            "search",
            f"{mode}: only B matches {query!r}",
            {"query": query, "mode": mode, "limit": 50, **extra},
            check=check,
        )
        for mode, query, extra, check in SEARCHES
    ],
    Probe(
        "core",
        "search",
        "filter collection kb",
        {"query": "budget", "filters": {"collection": KB_COLLECTION}},
        "FORBIDDEN",
        oracle={"query": "budget", "filters": {"collection": "no-such"}},
    ),
    Probe(
        "core",
        "search",
        "filter collection bulk",
        {"query": "inventory", "mode": "keyword", "filters": {"collection": BULK_COLLECTION}},
        "FORBIDDEN",
    ),
    Probe(
        "core",
        "search",
        "filter B document ids",
        {
            "query": "agreement report",
            "mode": "keyword",
            "filters": {"document_ids": ["$b.doc", "$b.pages"]},
        },
        check=no_hits,
        oracle={"query": "agreement report", "mode": "keyword", "filters": NO_DOCS},
    ),
    Probe(
        "core",
        "search",
        "filter B folder",
        {"query": "agreement liability", "filters": {"folder": "Legal"}},
        check=no_hits,
    ),
    *[
        Probe(
            "core",
            name,
            "continuation token the full key got for B",
            {**args, "continuation_token": f"$token.{name}"},
            "INVALID_ARGUMENT",
        )
        for name, args in TOKEN_REQUESTS.items()
    ],
    Probe(
        "core",
        "get_document_data",
        "B's token on A's document",
        {"document_id": "$a", "max_tokens": 50, "continuation_token": "$token.get_document_data"},
        "INVALID_ARGUMENT",
        full="",
    ),
    Probe("core", "list_folders", "every folder", {}, check=a_folders),
    Probe("core", "list_documents", "everything", {"max_tokens": 25000}, check=only_a),
    Probe("core", "list_documents", "B folder", {"folder": "Legal"}, check=nothing_listed),
    Probe(
        "core",
        "list_documents",
        "failed documents (only B has one)",
        {"status": "failed"},
        check=nothing_listed,
    ),
    Probe("core", "list_documents", "B file type", {"file_type": "pdf"}, check=nothing_listed),
    *[
        p
        for name, role, extra in DOCUMENT_READS
        for p in refs_to("core", name, role, extra, ("id", "path", "file name"))
    ],
    Probe("core", "get_status", "counts by status", {}, check=a_status),
    # get_embedding embeds the text it gets: a B id or B's words give no stored vector
    Probe(
        "core",
        "get_embedding",
        "B document id as text",
        {"text": "$b.doc"},
        full="ok",
        check=same_as_full,
    ),
    Probe(
        "core",
        "get_embedding",
        "B chunk text",
        {"text": "Acme Northwind limitation of liability"},
        full="ok",
        check=same_as_full,
    ),
]
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
    ("core", "search", {"query": "heron offsite Lisbon", "mode": "keyword"}, "$a"),
    ("core", "list_folders", {}, '"Other"'),
    ("core", "list_documents", {}, "$a"),
    ("core", "get_document_outline", {"document_id": "$a"}, "$a_path"),
    ("core", "get_document_data", {"document_id": "$a_path"}, "heron"),
    ("core", "get_pages", {"document_id": "$a"}, "heron"),
    ("core", "get_status", {"document_id": "$a_path"}, "$a"),
    ("core", "get_embedding", {"text": OTHER_TEXT}, "dimensions"),
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


# --------------------------------------------------------------------------- deployments


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


async def _ingest_small(dsn: str, root: Path) -> None:
    for collection, files in WRITABLE_FILES.items():
        for rel, text in files.items():
            (root / collection / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / collection / rel).write_text(text, encoding="utf-8")
        async with open_database(load_settings(), dsn=dsn) as db:
            await Ingestor(db.pool, HashEmbedder(HASH_MODEL), collection=collection).run(
                [root / collection]
            )


async def _ok(client: Client, tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool_name, args)
    assert not result.is_error, result.structured_content
    return result.structured_content["data"]  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def writable_deployment(dsn: str, tmp: Path) -> AsyncIterator[Deployment]:
    """`dsn`, a database of its own (hash embeddings), behind a writable server saving to
    kb, with saved documents and graph rows to aim at. Also run on a Citus cluster
    (tests/test_citus_scopes.py)."""
    env = {
        "PGRAG_TOOLSETS": WRITABLE_TOOLSETS,
        "PGRAG_READ_ONLY": "false",
        "PGRAG_COLLECTION": KB_COLLECTION,
        "PGRAG_HOME": str(tmp / "home"),
    }
    await _ingest_small(dsn, tmp / "tree")
    flags = ("--embedding-model", HASH_MODEL, "--api-keys", WRITABLE_KEYS)
    with http_server(dsn, *flags, env=env) as server:
        keys = {"full": FULL_KEY, "scoped": SCOPED_KEY, "writer": WRITER_KEY}
        async with connected(server, keys) as (clients, rests):
            full = clients["full"]
            saved = {}
            for role in ("saved", "doomed", "writer_doomed"):
                note = {"topic": f"Northwind {role} notes", "tags": ["northwind"]}
                data = await _ok(full, "save_document", {**note, "content": CONTRACT_MD})
                saved[role] = data["path"]
            w = world_of(dsn, {**WRITABLE_ROLES, **saved})
            a_node = await _ok(
                full,
                "graph_create_node",
                {"label": "Location", "name": "Lisbon offsite venue", "document_id": w.a},
            )
            b_node = await _ok(
                full,
                "graph_create_node",
                {"label": "Organization", "name": "Northwind", "document_id": w.b["doc"]},
            )
            rel = await _ok(
                full,
                "graph_create_relationship",
                {"from_id": a_node["id"], "to_id": b_node["id"], "type": "RELATED_TO"},
            )
            w.graph = {"a": a_node["id"], "b": b_node["id"], "rel": rel["id"]}
            w.markers += (b_node["id"],)  # a node linked to a B document is B's
            yield Deployment("writable", server, w, clients, rests, writable=True)


@pytest.fixture(scope="module")
async def writable(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Deployment]:
    """Its own small database, writable, saving to kb: the writes the matrix tries never
    touch the shared knowledge base."""
    dsn = create_database(server_dsn)
    try:
        async with writable_deployment(dsn, tmp_path_factory.mktemp("scope-leaks")) as dep:
            yield dep
    finally:
        drop_database(server_dsn, dsn)


# ----------------------------------------------------------------------------- the checks


async def run(dep: Deployment, who: str, probe: Probe, args: dict[str, Any]) -> Outcome:
    if probe.kind == "tool":
        return await call_tool(dep.clients[who], probe.target, args)
    if probe.kind == "resource":
        uri = re.sub(r"\{\?\w+\}", "", probe.target)  # an RFC 6570 query part: omitted
        return await read_resource(dep.clients[who], uri.format(**args))
    if probe.kind == "resources/list":
        return await list_resources(dep.clients[who], args.get("cursor"))
    return await call_rest(dep.rest[who], probe.target, args)


def leaked(o: Outcome, markers: tuple[str, ...], args: dict[str, Any]) -> list[str]:
    """The markers in the answer that the caller did not send itself."""
    asked = json.dumps(args, ensure_ascii=False, default=str)
    text = o.text
    return [m for m in markers if m in text and m not in asked]


def over_counts(o: Outcome, bound: int) -> list[Any]:
    """Collection-wide counts in the answer (totals, status counts, documents per folder)
    larger than what A holds. Per-result counts (snippets of one hit) are not looked at."""
    found: list[Any] = []
    for level in (o.body, _data(o.body)):
        if not isinstance(level, dict):
            continue
        found += [level[k] for k in COUNT_KEYS if isinstance(level.get(k), int)]
        if isinstance(level.get("counts"), dict):
            found.append(sum(level["counts"].values()))
        if isinstance(level.get("folders"), list):
            found += [f["documents"] for f in level["folders"]]
    return [v for v in found if v > bound]


@pytest.fixture
def deployment(where: str, request: pytest.FixtureRequest) -> Deployment:
    """The deployment a case runs on (a sync fixture: async ones cannot be looked up from
    inside a running test)."""
    return request.getfixturevalue(where)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("where", "probe"), CASES, ids=[f"{w}:{p.id}" for w, p in CASES])
async def test_probe(probe: Probe, deployment: Deployment) -> None:
    await check_probe(deployment, probe)


async def check_probe(dep: Deployment, probe: Probe) -> None:
    """One case of the matrix (also run on a Citus cluster: tests/test_citus_scopes.py)."""
    w = dep.world
    args = fill(probe.args, w)
    markers = w.writer_markers if probe.attacker == "writer" else w.markers
    got = await run(dep, probe.attacker, probe, args)

    assert got.code in probe.expect.split("|"), (probe.expect, got.code, got.body)
    assert not (bad := leaked(got, markers, args)), f"B leaked: {bad}\n{got.text[:3000]}"
    if got.code == "ok" and probe.counts:
        assert not (big := over_counts(got, w.a_total)), f"counts above A's: {big}"
    if probe.contains is not None:  # a control: it reached the attacker's own data
        assert fill(probe.contains, w) in got.text, got.text[:3000]

    full = None
    if probe.full and (dep.writable or not probe.writes):
        full = await run(dep, "full", probe, args)
        if probe.full == "sees_b":  # the probe aims at something real
            assert leaked(full, markers, args), f"the full key saw no B: {full.text[:2000]}"
        else:
            assert full.code == "ok", full.body
    if probe.check is not None:
        probe.check(got, full, w)
    if probe.oracle is not None:  # the error for B is the error for nothing
        fake = fill(probe.oracle, w)
        nothing = await run(dep, probe.attacker, probe, fake)
        refs = tuple(
            str(v)
            for d in (args, fake)
            for v in _leaf_values(d)
            if v not in set(_leaf_values(args)) & set(_leaf_values(fake))
        )
        assert shape(got, refs) == shape(nothing, refs), (got.body, nothing.body)


def _leaf_values(d: Any) -> list[str]:
    if isinstance(d, dict):
        return [x for v in d.values() for x in _leaf_values(v)]
    if isinstance(d, list | tuple):
        return [x for v in d for x in _leaf_values(v)]
    return [str(d)]


# ----------------------------------------------------------------------------- coverage


def _matrix_tools(toolsets: str) -> set[str]:
    names = set(toolsets.split(","))
    return {p.target for p in PROBES if p.kind == "tool" and p.toolset in names}


def test_every_probed_tool_has_an_attack_and_a_control() -> None:
    """Attacks without controls could pass by refusing everything."""
    targets = {p.target for p in PROBES}
    for target in targets:
        mine = [p for p in PROBES if p.target == target]
        assert any(not p.is_control for p in mine), f"{target}: no attack"
        assert any(p.is_control for p in mine) or target in NO_SCOPED_CONTROL, (
            f"{target}: no control with A's data"
        )
    assert set(NO_SCOPED_CONTROL) <= targets


@pytest.mark.parametrize("where", list(DEPLOYMENT_TOOLSETS))
async def test_every_tool_resource_and_route_is_in_the_matrix(
    where: str, deployment: Deployment
) -> None:
    """What the server offers is what the matrix probes: a new tool, resource template or
    REST route fails here until it has probes."""
    await check_coverage(where, deployment)


async def check_coverage(where: str, dep: Deployment) -> None:
    """The tools, resource templates and routes of one deployment are the probed ones (also
    run on a Citus cluster: tests/test_citus_scopes.py)."""
    client = dep.clients["scoped"]
    listed = {t.name for t in (await client.list_tools()).tools}
    assert listed == _matrix_tools(DEPLOYMENT_TOOLSETS[where]), (
        f"tools without probes: {listed - _matrix_tools(DEPLOYMENT_TOOLSETS[where])}"
    )
    templates = {
        t.uri_template for t in (await client.list_resource_templates()).resource_templates
    }
    probed = {p.target for p in PROBES if p.kind == "resource"}
    assert templates <= probed, f"resource templates without probes: {templates - probed}"
    static = await client.list_resources()
    assert all(str(r.uri).startswith("pgrag://documents/") for r in static.resources)
    spec = (await dep.rest["full"].get("/openapi.json")).json()
    routes = {f"{m.upper()} {path}" for path, ops in spec["paths"].items() for m in ops}
    rest_probed = {p.target for p in PROBES if p.kind == "rest"}
    assert routes == rest_probed, (
        f"routes without probes: {routes - rest_probed}; probes without routes: "
        f"{rest_probed - routes}"
    )
    if where == "core":
        on_core = {p.target for where_, p in CASES if where_ == "core" and p.kind == "rest"}
        assert on_core == routes, routes - on_core
