"""The MCP protocol surface as clients we did not write exercise it (issue 15 items 2, 3, 5,
6, 7, 8, 17): JSON-RPC edge cases over raw HTTP, the 401 body, capabilities that say what
is sent, protocol errors for unknown tools/prompts/resources, resource errors with stable
codes, total-order resource cursors and resource sizes, one list_changed per change.

A small database embedded with hash/384 (cheap) in two collections that hold the same
relative paths, served by real `pgrag serve` processes (HTTP and stdio)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.settings import load_settings
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import HttpServer, child_env, http_server

pytestmark = pytest.mark.anyio

MODEL = ["--embedding-model", "hash/384"]
KEY = "proto-key"
PER_COLLECTION = 60
RAW = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}


async def _ingest(dsn: str, root: Path) -> None:
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        for name in ("alpha", "beta"):
            folder = root / name
            for i in range(PER_COLLECTION):  # the same relative paths in both collections
                path = folder / f"notes/n{i:03d}.md"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"# Note {i} of {name}\n\nshelf {i % 7} holds {i} boxes.\n")
            if name == "alpha":  # one more: the page boundary falls inside a pair of paths
                (folder / "a_first.md").write_text("# First\n\nthe first note.\n")
            summary = await Ingestor(db.pool, HashEmbedder(), collection=name).run([folder])
            assert not summary.failures


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def proto_dsn(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    url = create_database(server_dsn)
    asyncio.run(_ingest(url, tmp_path_factory.mktemp("proto")))
    yield url
    drop_database(server_dsn, url)


@pytest.fixture(scope="module")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("proto-log") / "serve.log"


@pytest.fixture(scope="module")
def http(proto_dsn: str, server_log: Path) -> Iterator[HttpServer]:
    with http_server(proto_dsn, *MODEL, "--api-keys", KEY, log_path=server_log) as server:
        yield server


def _client(key: str | None = KEY) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(20, read=60))


@pytest.fixture(scope="module")
async def legacy(http: HttpServer) -> AsyncIterator[Client]:
    """The handshake-era (initialize) client over Streamable HTTP."""
    async with (
        _client() as hc,
        Client(streamable_http_client(http.mcp_url, http_client=hc), mode="legacy") as client,
    ):
        yield client


@pytest.fixture(scope="module")
async def modern(http: HttpServer) -> AsyncIterator[Client]:
    """The default client: lands on the 2026-07-28 protocol (no handshake)."""
    async with (
        _client() as hc,
        Client(streamable_http_client(http.mcp_url, http_client=hc)) as client,
    ):
        yield client


def _no_tracebacks(log: Path) -> None:
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]


# ------------------------------------------------------------------------ item 7: JSON-RPC


@pytest.mark.parametrize(
    ("body", "status", "code", "reply_id"),
    [
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, 400, -32600, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, 400, -32600, None),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, 400, -32600, None),
        ({"id": 3, "method": "ping"}, 400, -32600, 3),
        ({"jsonrpc": "1.0", "id": 4, "method": "ping"}, 400, -32600, 4),
        ([{"jsonrpc": "2.0", "id": 5, "method": "ping"}], 400, -32600, None),
        ([], 400, -32600, None),
        ({"jsonrpc": "2.0", "id": 6, "method": 7}, 400, -32600, 6),
        ({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": [1]}, 400, -32602, 8),
        ({"jsonrpc": "2.0", "id": 9}, 400, -32600, 9),
        ({"jsonrpc": "2.0", "id": 10, "result": {}, "error": {}}, 400, -32600, 10),
    ],
    ids=[
        "id-null",
        "id-float",
        "id-bool",
        "no-jsonrpc",
        "jsonrpc-1.0",
        "batch",
        "empty-batch",
        "method-not-a-string",
        "params-array",
        "neither-method-nor-result",
        "result-and-error",
    ],
)
async def test_malformed_messages_get_a_json_rpc_error_at_once(
    http: HttpServer, body: Any, status: int, code: int, reply_id: Any
) -> None:
    async with _client() as hc:
        r = await hc.post(http.mcp_url, content=json.dumps(body), headers=RAW)
    assert r.status_code == status, r.text
    reply = r.json()
    assert reply["jsonrpc"] == "2.0" and reply["id"] == reply_id, reply
    assert reply["error"]["code"] == code and "validation error" not in reply["error"]["message"]


async def test_wrong_content_type_and_bad_json_are_json_rpc_errors(http: HttpServer) -> None:
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    async with _client() as hc:
        plain = await hc.post(
            http.mcp_url, content=ping, headers={**RAW, "content-type": "text/plain"}
        )
        assert plain.status_code == 415 and plain.json()["error"]["code"] == -32600
        broken = await hc.post(http.mcp_url, content=b"{not json", headers=RAW)
        assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
        binary = await hc.post(http.mcp_url, content=b"\xff\xfe{", headers=RAW)
        assert binary.status_code == 400 and binary.json()["error"]["code"] == -32700


async def test_deeply_nested_json_is_a_parse_error_without_traceback(
    http: HttpServer, server_log: Path
) -> None:
    """Nesting past what the parser recurses into: -32700, not a 500 and a RecursionError
    in the log; nesting the parser takes but the server will not walk is refused alike."""
    deep_arguments = {"name": "search", "arguments": {"query": "x", "filters": "@"}}
    bodies = [
        b"[" * 100_000 + b"]" * 100_000,
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": deep_arguments})
        .replace('"@"', "{" + '"a":{' * 5_000 + "}" * 5_001)
        .encode(),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"x": "@"}})
        .replace('"@"', "[" * 900 + "]" * 900)
        .encode(),
    ]
    async with _client() as hc:
        for body in bodies:
            r = await hc.post(http.mcp_url, content=body, headers=RAW)
            assert r.status_code == 400 and r.json()["error"]["code"] == -32700, r.text[:300]
        ping = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": [[[1]]]}})
        assert (await hc.post(http.mcp_url, content=ping, headers=RAW)).status_code == 200
    _no_tracebacks(server_log)


async def test_a_nul_character_in_arguments_is_audited_sanitised(
    legacy: Client, http: HttpServer, server_log: Path
) -> None:
    """The call is audited like any other (its arguments with the NUL replaced), and no
    traceback is logged; the search itself answers."""
    result = await legacy.call_tool("search", {"query": "shelf\x00boxes nul-probe", "limit": 1})
    assert result.structured_content is not None
    trace_id = result.structured_content["meta"]["trace_id"]
    with psycopg.connect(http.dsn) as conn:
        row = conn.execute(
            "SELECT arguments->>'query' FROM pgrag.audit_log WHERE trace_id = %s", (trace_id,)
        ).fetchone()
    assert row == ("shelf\ufffdboxes nul-probe",)
    _no_tracebacks(server_log)


async def test_a_query_mentioning_progress_token_is_answered_as_json(http: HttpServer) -> None:
    """Only a real params._meta.progressToken asks for a stream; Accept: application/json
    alone is then honoured (it was a 406)."""
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "progressToken shelf", "limit": 1}},
    }
    async with _client() as hc:
        r = await hc.post(http.mcp_url, json=call, headers={**RAW, "accept": "application/json"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert r.json()["result"]["structuredContent"]["ok"] is True


@pytest.mark.parametrize("method", ["tools/list", "resources/templates/list", "resources/list"])
async def test_garbage_cursors_are_invalid_params(legacy: Client, method: str) -> None:
    call = {
        "tools/list": legacy.list_tools,
        "resources/templates/list": legacy.list_resource_templates,
        "resources/list": legacy.list_resources,
    }[method]
    with pytest.raises(MCPError) as info:
        await call(cursor="garbage")
    assert info.value.error.code == -32602


async def test_refused_sse_connections_log_no_traceback(http: HttpServer, server_log: Path) -> None:
    async with _client() as hc:
        foreign = await hc.get(http.base + "/sse", headers={"Host": "evil.example.com"})
        assert foreign.status_code == 421
        origin = await hc.get(http.base + "/sse", headers={"Origin": "http://evil.example.com"})
        assert origin.status_code == 403
        # and everything above is logged without a traceback (client errors, all of them)
        await hc.post(http.mcp_url, content=b"[1", headers=RAW)
    _no_tracebacks(server_log)


# ----------------------------------------------------------------------------- item 6: 401


async def test_401_carries_a_json_rpc_error_and_www_authenticate(http: HttpServer) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for key, reason in ((None, "no key"), ("wrong", "unknown key")):
        async with _client(key) as hc:
            r = await hc.post(http.mcp_url, json=ping, headers=RAW)
        assert r.status_code == 401 and "resource_metadata=" in r.headers["www-authenticate"]
        error = r.json()["error"]
        assert error["data"] == {"code": "UNAUTHORIZED", "reason": reason}
        assert "bearer key" in error["message"]
    async with _client(None) as hc:  # REST keeps its own error body
        rest = await hc.get(http.base + "/api/documents")
    assert rest.status_code == 401 and rest.json()["errorCode"] == "UNAUTHORIZED"


async def test_an_sdk_client_says_why_it_was_refused(http: HttpServer) -> None:
    async with _client("wrong") as hc:
        with pytest.raises(BaseExceptionGroup) as info:
            async with Client(
                streamable_http_client(http.mcp_url, http_client=hc), mode="legacy"
            ) as c:
                await c.list_tools()
    errors = [e for e in _leaves(info.value) if isinstance(e, MCPError)]
    assert errors and "Unauthorized" in errors[0].error.message, errors


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


# --------------------------------------------------- items 2 and 5: capabilities, -32602


async def test_capabilities_say_what_is_sent(legacy: Client) -> None:
    caps = legacy.server_capabilities
    assert caps.prompts is None  # no prompts: not advertised
    assert caps.resources is not None and caps.resources.list_changed is True
    assert caps.tools is not None and not caps.tools.list_changed


async def test_prompts_are_not_served(legacy: Client, modern: Client) -> None:
    for client in (legacy, modern):
        for call in (client.list_prompts(), client.get_prompt("nope")):
            with pytest.raises(MCPError) as info:
                await call
            assert info.value.error.code == -32601


async def test_unknown_tool_is_invalid_params_while_failures_keep_the_envelope(
    legacy: Client, modern: Client
) -> None:
    for client in (legacy, modern):
        with pytest.raises(MCPError) as info:
            await client.call_tool("no_such_tool", {"query": "x"})
        assert info.value.error.code == -32602
        assert info.value.error.data["code"] == "INVALID_ARGUMENT"
        failed = await client.call_tool("get_pages", {"document_id": "no-such-document"})
        assert failed.is_error and failed.structured_content["error"]["code"] == "NOT_FOUND"


# ------------------------------------------------------- item 17: resource error codes


async def test_resource_errors_carry_stable_codes(legacy: Client, proto_dsn: str) -> None:
    for uri in (
        "pgrag://documents/no-such-document/content",
        "pgrag://documents/00000000-0000-0000-0000-000000000000",
        "nope://x",
    ):
        with pytest.raises(MCPError) as info:
            await legacy.read_resource(uri)
        assert info.value.error.code == -32602, uri
        assert info.value.error.data["code"] == "NOT_FOUND", info.value.error.data
    with psycopg.connect(proto_dsn, autocommit=True) as conn:
        (doc_id,) = conn.execute(
            "UPDATE pgrag.documents SET status = 'processing' WHERE path = 'a_first.md'"
            " RETURNING id::text"
        ).fetchone()
        try:
            with pytest.raises(MCPError) as info:
                await legacy.read_resource(f"pgrag://documents/{doc_id}/content")
            assert info.value.error.data["code"] == "PROCESSING"
        finally:
            conn.execute("UPDATE pgrag.documents SET status = 'ready' WHERE id = %s", (doc_id,))


# ------------------------------------------------------- items 3 and 8: resources/list


async def test_resource_cursors_list_every_document_once(legacy: Client, proto_dsn: str) -> None:
    with psycopg.connect(proto_dsn) as conn:
        ids = {r[0] for r in conn.execute("SELECT id::text FROM pgrag.documents").fetchall()}
    assert len(ids) == 2 * PER_COLLECTION + 1 > 100
    uris: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await legacy.list_resources(cursor=cursor)
        uris += [r.uri for r in page.resources]
        pages += 1
        cursor = page.next_cursor
        if not cursor:
            break
    assert pages == 2
    assert len(uris) == len(set(uris)) == len(ids)
    assert set(uris) == {f"pgrag://documents/{i}" for i in ids}


async def test_listed_size_is_the_size_of_what_the_uri_returns(legacy: Client) -> None:
    listed = (await legacy.list_resources()).resources[:25]
    for resource in listed:
        body = (await legacy.read_resource(resource.uri)).contents[0].text
        assert resource.size == len(body.encode()), resource.uri


# ------------------------------------------------------- item 2: one list_changed per change


async def test_one_list_changed_per_change_even_for_a_session_that_only_listed_tools(
    proto_dsn: str, tmp_path: Path
) -> None:
    got: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/resources/list_changed":
            got.append(method)

    folder = tmp_path / "new"
    folder.mkdir()
    (folder / "fresh.md").write_text("# Fresh\n\na new note about shelves.\n")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pgrag", "--database-url", proto_dsn, *MODEL, "serve"],
        env=child_env(),
    )
    ingest = pgrag_cmd("--database-url", proto_dsn, *MODEL, "ingest", "-q", "-c", "alpha")
    async with Client(
        params, mode="legacy", message_handler=on_message, read_timeout_seconds=60
    ) as client:
        assert (await client.list_tools()).tools  # and nothing else
        # a status that comes and goes is no change of the list (it notified before)
        with psycopg.connect(proto_dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE pgrag.documents SET status = 'processing' WHERE path = 'a_first.md'"
            )
            conn.execute("UPDATE pgrag.documents SET status = 'ready' WHERE path = 'a_first.md'")
        # a new file: written `processing`, then finished: one change
        done = subprocess.run(
            [*ingest, str(folder)], capture_output=True, text=True, timeout=120, env=child_env()
        )
        assert done.returncode == 0, done.stderr
        assert await _wait_for(lambda: len(got) >= 1)
        # its removal: one more. NOTIFYs arrive in order, so when this one is here every
        # earlier burst has been relayed
        (folder / "fresh.md").unlink()
        done = subprocess.run(
            [*ingest, str(folder)], capture_output=True, text=True, timeout=120, env=child_env()
        )
        assert done.returncode == 0, done.stderr
        assert await _wait_for(lambda: len(got) >= 2)
        assert len(got) == 2, got


async def _wait_for(predicate: Any, timeout: float = 30.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.1)
    return bool(predicate())
