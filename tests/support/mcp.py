"""Helpers and fixtures of tests/test_mcp*.py."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.fixtures.knowledge_base import (
    expected_outlines,
)
from tests.support.kb_server import (
    FULL_KEY,
    KB_SHEET_ROWS,
    SCOPED_KEY,
    HttpServer,
    KnowledgeBase,
    child_env,
)

TOKEN_CAP = 25_000


BYTE_CAP = 200_000


LOCAL_MODEL = "local/multilingual-e5-small"


OUTLINES = expected_outlines(big_sheet_rows=KB_SHEET_ROWS)


BUDGET = "Finance/2024/Q1/Q1_Budget.xlsx"


Q1_REPORT = "Finance/2024/Q1/Q1_Report.pdf"


ANNUAL = "Finance/Annual_Report_2024.pdf"


VENDOR = "Legal/Acme_Vendor_Agreement.pdf"


SUPPLY = "Legal/Supply_Contract_2024.docx"


BOARD = "Sales/Q4_Board_Deck.pptx"


DEMO = "Sales/Product_Demo.pptx"


CSV = "Sales/Customer_List.csv"


EMPTY = "test-edge-cases/empty.txt"


CORRUPTED = "test-edge-cases/corrupted.xlsx"


UNICODE = "test-edge-cases/special_chars_文件名.txt"


STRATEGY_ZH = "Sales/2023年第四季度销售策略报告.md"


SEED_EMAILS = (
    "john@acme.com",
    "contact@acme.com",
    "sarah.smith@bigco.com",
    "procurement@supplier.com",
)


RAW_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module scope: the clients below live for the whole module


@pytest.fixture(scope="module")
async def stdio_client(kb: KnowledgeBase) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pgrag", "--database-url", kb.dsn, "serve"],
        env=child_env(),
        cwd=os.getcwd(),
    )
    async with Client(params, cache=None, read_timeout_seconds=180) as client:
        yield client


def _http(key: str) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=180))


@pytest.fixture(scope="module")
async def http_client(kb_http: HttpServer) -> AsyncIterator[Client]:
    async with (
        _http(FULL_KEY) as hc,
        Client(streamable_http_client(kb_http.mcp_url, http_client=hc), cache=None) as client,
    ):
        yield client


@pytest.fixture(scope="module")
async def scoped_client(kb_http: HttpServer) -> AsyncIterator[Client]:
    async with (
        _http(SCOPED_KEY) as hc,
        Client(streamable_http_client(kb_http.mcp_url, http_client=hc), cache=None) as client,
    ):
        yield client


@pytest.fixture(params=["stdio", "http"])
def client(request: pytest.FixtureRequest) -> Client:
    """The same test over stdio and over Streamable HTTP (one long-lived client each)."""
    return request.getfixturevalue(f"{request.param}_client")  # type: ignore[no-any-return]


def envelope(result: CallToolResult) -> dict[str, Any]:
    """The envelope, checked to be the same in structuredContent and in the text content."""
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content
    env = result.structured_content
    assert env["ok"] is (not result.is_error)
    return env


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """A call that must succeed; returns the envelope."""
    result = await client.call_tool(tool, args)
    env = envelope(result)
    assert not result.is_error, env["error"]
    return env


async def fail(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """A call that must fail with an error envelope (isError); returns the error body."""
    result = await client.call_tool(tool, args)
    env = envelope(result)
    assert result.is_error, env
    assert env["status"]["code"] == "error" and env["data"] is None
    assert env["status"]["message"] == env["error"]["code"]
    return env["error"]  # type: ignore[no-any-return]


async def all_pages(client: Client, tool: str, **args: Any) -> list[dict[str, Any]]:
    """Follow continuation tokens to the end; returns every page's envelope."""
    pages = [await call(client, tool, **args)]
    while pages[-1]["continuation"]["has_more"]:
        token = pages[-1]["continuation"]["token"]
        actions = {a["id"]: a for a in pages[-1]["actions"]}
        assert actions["CONTINUE"]["params"] == {"continuation_token": token}
        pages.append(await call(client, tool, **args, continuation_token=token))
        assert len(pages) < 200, "paging does not end"
    assert pages[-1]["continuation"]["token"] is None
    return pages


def paths_of(env: dict[str, Any]) -> list[str]:
    return [r["path"] for r in env["data"]["results"]]


WORST_CASES: list[tuple[str, dict[str, Any]]] = [
    (
        "search",
        {
            "query": "lorem ipsum dolor sit amet",
            "mode": "keyword",
            "limit": 50,
            "content_mode": "full",
            "context_chars": 4000,
            "max_tokens": 25000,
            "return_scoring_details": True,
            "explain": True,
        },
    ),
    (
        "search",
        {
            "query": "[a-z]+",
            "mode": "regex",
            "limit": 50,
            "content_mode": "full",
            "max_tokens": 25000,
        },
    ),
    ("list_folders", {}),
    ("list_documents", {"max_tokens": 25000}),
    ("get_document_outline", {"document_id": "Q4_Forecast.xlsx"}),
    ("get_document_data", {"document_id": "huge_text.txt", "max_tokens": 25000}),
    (
        "get_document_data",
        {"document_id": "huge_text.txt", "format": "chunks", "max_tokens": 25000},
    ),
    ("get_pages", {"document_id": "huge_text.txt", "max_tokens": 25000}),
    ("get_sheet_data", {"document_id": "Q4_Forecast.xlsx", "max_tokens": 25000}),
    (
        "get_sheet_data",
        {"document_id": "Q4_Forecast.xlsx", "cell_range": "A1:Z5000", "max_tokens": 25000},
    ),
    ("get_slides", {"document_id": "Q4_Board_Deck.pptx", "max_tokens": 25000}),
    ("get_status", {}),
    ("get_embedding", {"text": "lorem ipsum " * 160}),  # the reply's size is fixed (384 floats)
]


def _jsonrpc_reply(r: httpx2.Response) -> dict[str, Any]:
    """A JSON body, or the first `data:` event of an SSE body."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        for line in r.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])  # type: ignore[no-any-return]
        raise AssertionError(f"no data event in {r.text!r}")
    return r.json()  # type: ignore[no-any-return]


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
