"""MCP resources, worst-case response sizes, bad input, API keys and the audit log."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from mcp import Client, ClientSession, MCPError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from pgrag.tokens import count_tokens
from tests.support.kb_server import (
    BULK_SHEET_ROWS,
    CORE_TOOLS,
    FULL_KEY,
    KB_COLLECTION,
    NOTE_PATH,
    OTHER_COLLECTION,
    OTHER_PATH,
    HttpServer,
    KnowledgeBase,
)
from tests.support.mcp import (
    ANNUAL,
    BOARD,
    BUDGET,
    BYTE_CAP,
    CORRUPTED,
    RAW_HEADERS,
    TOKEN_CAP,
    UNICODE,
    VENDOR,
    WORST_CASES,
    _http,
    _jsonrpc_reply,
    _leaves,
    anyio_backend,  # noqa: F401 (a fixture)
    call,
    client,  # noqa: F401 (a fixture)
    envelope,
    fail,
    http_client,  # noqa: F401 (a fixture)
    paths_of,
    scoped_client,  # noqa: F401 (a fixture)
    stdio_client,  # noqa: F401 (a fixture)
)

pytest_plugins = ("tests.support.kb_server",)
pytestmark = pytest.mark.anyio


async def test_resource_templates_are_listed(client: Client) -> None:
    templates = (await client.list_resource_templates()).resource_templates
    assert {t.uri_template for t in templates} == {
        "pgrag://documents/{document_id}",
        "pgrag://documents/{document_id}/content{?start}",
    }


async def test_resources_list_pages_with_a_cursor(client: Client, kb: KnowledgeBase) -> None:
    assert len(kb.ids) > 100  # more than one page of LIST_PAGE = 100
    first = await client.list_resources()
    assert first.next_cursor
    uris = [r.uri for r in first.resources]
    cursor = first.next_cursor
    while cursor:
        page = await client.list_resources(cursor=cursor)
        uris += [r.uri for r in page.resources]
        cursor = page.next_cursor
    assert len(uris) == len(set(uris))
    assert set(uris) == {f"pgrag://documents/{i}" for i in kb.ids.values()}
    with pytest.raises(MCPError):
        await client.list_resources(cursor=first.next_cursor[:-3] + "xyz")


async def test_resource_errors(client: Client, kb: KnowledgeBase) -> None:
    for bad in ("no-such-document", "00000000-0000-0000-0000-000000000000"):
        with pytest.raises(MCPError) as info:
            await client.read_resource(f"pgrag://documents/{bad}/content")
        assert "no document" in info.value.error.message
    with pytest.raises(MCPError) as info:
        await client.read_resource(f"pgrag://documents/{kb.id(CORRUPTED)}/content")
    assert "CONTENT_UNAVAILABLE" in info.value.error.message
    assert info.value.error.data["code"] == "CONTENT_UNAVAILABLE"
    note = NOTE_PATH.format(1)
    with kb.document_status(note, "processing") as doc_id:
        with pytest.raises(MCPError) as info:
            await client.read_resource(f"pgrag://documents/{doc_id}/content")
        assert "PROCESSING" in info.value.error.message
        assert (await fail(client, "get_document_data", document_id=doc_id))["code"] == (
            "PROCESSING"
        )
    text = (await client.read_resource(f"pgrag://documents/{kb.id(note)}/content")).contents[0]
    assert text.text.startswith("Bulk note 1:")


@pytest.mark.parametrize(
    ("tool", "args"), WORST_CASES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(WORST_CASES)]
)
async def test_worst_case_responses_stay_under_the_cap(
    http_client: Client, tool: str, args: dict[str, Any]
) -> None:
    result = await http_client.call_tool(tool, args)
    env = envelope(result)
    assert not result.is_error, env["error"]
    text = result.content[0].text
    assert count_tokens(text) <= TOKEN_CAP
    assert len(text.encode()) <= BYTE_CAP
    assert env["meta"]["token_count"] <= TOKEN_CAP


async def test_worst_cases_really_are_big(http_client: Client) -> None:
    """The cap tests above are not vacuous: these calls fill most of the 25k budget and
    have more to give."""
    for tool, args in (
        ("get_document_data", {"document_id": "huge_text.txt", "max_tokens": 25000}),
        ("get_pages", {"document_id": "huge_text.txt", "max_tokens": 25000}),
        ("get_sheet_data", {"document_id": "Q4_Forecast.xlsx", "max_tokens": 25000}),
    ):
        env = await call(http_client, tool, **args)
        assert env["continuation"]["has_more"] is True, tool
        assert env["meta"]["token_count"] > 15000, (tool, env["meta"])
    sheet = await call(http_client, "get_sheet_data", document_id="Q4_Forecast.xlsx")
    assert sheet["data"]["total_rows"] == BULK_SHEET_ROWS + 1


async def test_malformed_json_rpc_over_raw_http(kb_http: HttpServer) -> None:
    async with _http(FULL_KEY) as hc:
        for body, codes in (
            (b"{not json", {-32700}),
            (b"[1, 2", {-32700}),
            (b'{"jsonrpc": "2.0", "id": 1}', {-32600, -32602}),
            (b'"just a string"', {-32600, -32602}),
        ):
            r = await hc.post(kb_http.mcp_url, content=body, headers=RAW_HEADERS)
            assert r.status_code == 400, (body, r.status_code, r.text)
            reply = _jsonrpc_reply(r)
            assert reply["jsonrpc"] == "2.0" and "result" not in reply, reply
            assert reply["error"]["code"] in codes, reply
        ok = await hc.post(  # the server keeps serving
            kb_http.mcp_url,
            json={"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}},
            headers=RAW_HEADERS,
        )
        assert ok.status_code == 200
        reply = _jsonrpc_reply(ok)
        assert reply["id"] == 7 and {t["name"] for t in reply["result"]["tools"]} == CORE_TOOLS
        unknown = await hc.post(
            kb_http.mcp_url,
            json={"jsonrpc": "2.0", "id": 8, "method": "no/such/method", "params": {}},
            headers=RAW_HEADERS,
        )
        assert _jsonrpc_reply(unknown)["error"]["code"] == -32601


async def test_progress_notifications_reach_a_client_that_asks(client: Client) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await client.call_tool(
        "search", {"query": "Q1 budget", "limit": 3}, progress_callback=on_progress
    )
    assert envelope(result)["ok"]
    assert [p for p, _, _ in seen] == [0, 2] and seen[-1][1] == 2, seen
    assert seen[-1][2] and seen[-1][2].endswith("results"), seen


async def test_http_answers_json_unless_progress_is_asked(kb_http: HttpServer) -> None:
    """A call without a progress token gets one JSON body (no stream to run); with one, an
    SSE stream whose progress events come before the result."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    args = {"name": "search", "arguments": {"query": "Q1 budget", "limit": 1}}
    async with _http(FULL_KEY) as hc:
        plain = await hc.post(kb_http.mcp_url, json={**call, "params": args}, headers=RAW_HEADERS)
        assert plain.status_code == 200
        assert plain.headers["content-type"].startswith("application/json")
        assert plain.json()["result"]["structuredContent"]["ok"] is True
        asked = {**args, "_meta": {"progressToken": "p-1"}}
        streamed = await hc.post(
            kb_http.mcp_url, json={**call, "params": asked}, headers=RAW_HEADERS
        )
        assert streamed.headers["content-type"].startswith("text/event-stream")
        events = [
            json.loads(line[5:])
            for line in streamed.text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
        methods = [e.get("method") for e in events]
        assert methods[:2] == ["notifications/progress"] * 2, events
        assert events[0]["params"]["progressToken"] == "p-1"
        assert events[-1]["id"] == 1 and events[-1]["result"]["structuredContent"]["ok"] is True


async def test_unknown_tool_is_a_json_rpc_invalid_params_error(client: Client) -> None:
    with pytest.raises(MCPError) as info:
        await client.call_tool("no_such_tool", {"query": "x"})
    assert info.value.error.code == -32602
    assert info.value.error.data["code"] == "INVALID_ARGUMENT"
    assert "no_such_tool" in info.value.error.message
    assert "tools/list" in info.value.error.message


async def test_wrong_argument_types_list_the_fields(client: Client) -> None:
    error = await fail(client, "search", query="budget", limit="many", max_tokens=10)
    assert error["code"] == "INVALID_ARGUMENT"
    fields = {e["field"] for e in error["detail"]["errors"]}
    assert {"limit", "max_tokens"} <= fields
    assert "limit" in error["message"] and "max_tokens" in error["message"]
    error = await fail(client, "get_pages")
    assert {e["field"] for e in error["detail"]["errors"]} == {"document_id"}
    error = await fail(client, "search", query="budget", mode="telepathy")
    assert {e["field"] for e in error["detail"]["errors"]} == {"mode"}
    error = await fail(client, "get_pages", document_id=ANNUAL, page_range="3-x")
    assert error["code"] == "INVALID_ARGUMENT"


async def test_tampered_or_foreign_continuation_token(client: Client) -> None:
    first = await call(client, "get_pages", document_id=ANNUAL, max_tokens=100)
    token = first["continuation"]["token"]
    body, sig = token.split(".")
    forged = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + sig
    for bad in (forged, token[:-4] + "abcd", "not-a-token", token + "x"):
        error = await fail(client, "get_pages", document_id=ANNUAL, continuation_token=bad)
        assert error["code"] == "INVALID_ARGUMENT"
        assert error["detail"]["field"] == "continuation_token"
    # a real token, replayed against other arguments or another tool
    error = await fail(client, "get_pages", document_id=VENDOR, continuation_token=token)
    assert error["code"] == "INVALID_ARGUMENT" and "different request" in error["message"]
    error = await fail(client, "list_documents", continuation_token=token)
    assert error["code"] == "INVALID_ARGUMENT"


async def test_sql_injection_looking_document_ids(client: Client, kb: KnowledgeBase) -> None:
    before = kb.sql("SELECT count(*) FROM pgrag.documents")
    for evil in (
        "'; DROP TABLE pgrag.documents; --",
        "x' OR '1'='1",
        "1 OR 1=1",
        "%",
        "Q1_Budget.xlsx' --",
    ):
        for tool in ("get_document_outline", "get_pages", "get_document_data", "get_status"):
            error = await fail(client, tool, document_id=evil)
            assert error["code"] == "NOT_FOUND", (tool, evil, error)
    assert kb.sql("SELECT count(*) FROM pgrag.documents") == before
    env = await call(client, "list_documents", folder="'; DELETE FROM pgrag.documents; --")
    assert env["data"]["documents"] == []
    assert kb.sql("SELECT count(*) FROM pgrag.documents") == before


async def test_requests_without_a_valid_key_are_refused(kb_http: HttpServer) -> None:
    async with httpx2.AsyncClient(timeout=30) as hc:
        for headers in ({}, {"Authorization": "Bearer wrong-key"}, {"Authorization": FULL_KEY}):
            r = await hc.post(
                kb_http.mcp_url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={**RAW_HEADERS, **headers},
            )
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer ")
            assert r.json()["error"]["data"]["code"] == "UNAUTHORIZED"  # a JSON-RPC error
            for path in ("/sse", "/api/documents", "/api/status", "/readyz", "/openapi.json"):
                r = await hc.get(kb_http.base + path, headers=headers)
                assert r.status_code == 401, path
        assert (await hc.get(kb_http.base + "/healthz")).status_code == 200
    # and the MCP client surfaces the refusal
    async with _http("wrong-key") as hc:
        with pytest.raises(BaseExceptionGroup) as info:
            async with Client(
                streamable_http_client(kb_http.mcp_url, http_client=hc), cache=None
            ) as c:
                await c.list_tools()
        assert any(isinstance(e, MCPError) for e in _leaves(info.value))


async def test_sse_transport_with_a_key(kb_http: HttpServer) -> None:
    headers = {"Authorization": f"Bearer {FULL_KEY}"}
    async with (
        sse_client(kb_http.base + "/sse", headers=headers, timeout=30) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == CORE_TOOLS
        result = await session.call_tool("get_document_outline", {"document_id": BOARD})
        assert not result.is_error
        assert result.structured_content["data"]["outline"]["total_slides"] == 12


async def test_a_scoped_key_sees_only_its_collection(
    scoped_client: Client, kb: KnowledgeBase
) -> None:
    kb_paths = {p for p, c in kb.collections.items() if c != OTHER_COLLECTION}
    for mode in ("hybrid", "keyword", "semantic", "regex"):
        query = "[a-z]+@[a-z.]+" if mode == "regex" else "Q1 financial results budget"
        env = await call(scoped_client, "search", query=query, mode=mode, limit=50)
        assert not set(paths_of(env)) & kb_paths, mode
    mine = await call(scoped_client, "search", query="heron offsite Lisbon", mode="keyword")
    assert paths_of(mine) == [OTHER_PATH]
    listed = await call(scoped_client, "list_documents", max_tokens=25000)
    assert [d["path"] for d in listed["data"]["documents"]] == [OTHER_PATH]
    folders = await call(scoped_client, "list_folders")
    assert folders["data"]["folders"] == [{"folder": "Other", "documents": 1}]
    status = await call(scoped_client, "get_status")
    assert status["data"]["total"] == 1 and status["data"]["failed"] == []
    for path in (BUDGET, ANNUAL, CORRUPTED):
        for ref in (kb.id(path), path, path.rsplit("/", 1)[-1]):
            for tool in ("get_document_outline", "get_pages", "get_document_data", "get_status"):
                error = await fail(scoped_client, tool, document_id=ref)
                assert error["code"] == "NOT_FOUND", (tool, ref, error)
                assert "Acme" not in json.dumps(error)
        for uri in (f"pgrag://documents/{kb.id(path)}", f"pgrag://documents/{kb.id(path)}/content"):
            with pytest.raises(MCPError) as info:
                await scoped_client.read_resource(uri)
            assert "no document" in info.value.error.message
    resources = await scoped_client.list_resources()
    assert [r.uri for r in resources.resources] == [f"pgrag://documents/{kb.id(OTHER_PATH)}"]
    assert resources.next_cursor is None
    error = await fail(
        scoped_client, "search", query="budget", filters={"collection": KB_COLLECTION}
    )
    assert error["code"] == "FORBIDDEN"


async def test_audit_log_records_calls_without_document_content(
    http_client: Client, stdio_client: Client, kb: KnowledgeBase
) -> None:
    marker = "audit-marker-7f3a secret words for the embedding"
    await call(http_client, "get_embedding", text=marker)
    await fail(http_client, "get_pages", document_id="audit-missing-doc")
    await call(stdio_client, "get_document_data", document_id=kb.id(UNICODE))
    rows = kb.sql(
        "SELECT tool, arguments::text, caller, outcome, trace_id, duration_ms"
        " FROM pgrag.audit_log ORDER BY id"
    )
    assert rows
    by_tool: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_tool.setdefault(str(row[0]), []).append(row)
        assert row[4] and row[5] is not None and row[5] >= 0
    emb = [r for r in by_tool["get_embedding"] if str(len(marker)) in str(r[1])]
    assert emb and json.loads(str(emb[-1][1]))["text"] == f"<{len(marker)} chars>"
    assert emb[-1][2].startswith("key:") and FULL_KEY not in emb[-1][2]
    assert emb[-1][3] == "SUCCESS"
    missing = [r for r in by_tool["get_pages"] if "audit-missing-doc" in str(r[1])]
    assert missing and missing[-1][3] == "NOT_FOUND"
    local = [r for r in by_tool["get_document_data"] if kb.id(UNICODE) in str(r[1])]
    assert local and local[-1][2] == "local" and local[-1][3] == "SUCCESS"
    everything = " ".join(str(r[1]) for r in rows)
    assert marker not in everything
    assert "特殊字符测试文件" not in everything  # the document's text never lands in the log
    assert "Bulk note 1:" not in everything
    failures = {str(r[3]) for r in rows if r[3] not in ("SUCCESS", "SEARCH_COMPLETED")}
    assert failures & {"NOT_FOUND", "INVALID_ARGUMENT"}
