"""The scope-leak matrix's world (tests/test_scope_leaks.py): two collections, keys limited
to each, their data and the markers a leak would show."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx2
import psycopg
import pytest
from mcp import Client, MCPError

from pgrag.mcp.toolsets.compat.rag import int_id
from tests.support.kb_server import (
    API_KEYS,
    FORECAST_PATH,
    HUGE_PATH,
    KB_COLLECTION,
    NOTE_PATH,
    OTHER_COLLECTION,
    OTHER_PATH,
    OTHER_TEXT,
)

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
    chunks: dict[str, int] = field(default_factory=dict)  # "a" or a role -> its first chunk


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


FIRST_CHUNKS_SQL = """
SELECT DISTINCT ON (document_id) document_id::text, id FROM pgrag.chunks
WHERE document_id = ANY (%s::uuid[]) ORDER BY document_id, ordinal
"""


def world_of(dsn: str, roles: dict[str, str]) -> World:
    rows = sql(dsn, DOCS_SQL)
    ids = {r[1]: r[0] for r in rows}
    a_rows = [r for r in rows if r[5] == OTHER_COLLECTION]
    assert len(a_rows) == 1, a_rows
    counts = {s: 0 for s in ("pending", "processing", "ready", "failed")}
    for r in a_rows:
        counts[r[6]] += 1
    a_chunks = sql(dsn, CHUNKS_SQL, (OTHER_COLLECTION,))[0][0]
    docs = {"a": a_rows[0][0], **{role: ids[path] for role, path in roles.items()}}
    firsts = dict(sql(dsn, FIRST_CHUNKS_SQL, (list(docs.values()),)))
    return World(
        a=a_rows[0][0],
        a_path=a_rows[0][1],
        b={role: ids[path] for role, path in roles.items()},
        b_paths=dict(roles),
        markers=markers_for(dsn, {OTHER_COLLECTION}, B_WORDS),
        a_counts=counts,
        a_total=max(a_chunks, len(a_rows)),
        writer_markers=markers_for(dsn, {KB_COLLECTION}, A_WORDS),
        chunks={k: firsts[d] for k, d in docs.items() if d in firsts},
    )


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
        "chunk": lambda: w.chunks[key],
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
