"""The MCP server end to end: real clients over real transports (stdio, Streamable HTTP, SSE)
against `pgrag serve` processes over the seed-004 knowledge base (tests/support/kb_server.py).

Covers seed 004's test plan and user stories, seed 000's two Chinese scenarios, resources,
the 25k-token response cap, bad input, bearer keys with collection scopes and the audit log.
No handler is called directly: every request goes through a transport.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client, ClientSession, MCPError
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from pgrag.tokens import count_tokens
from tests.fixtures.knowledge_base import (
    EXPECTED_PAGE_TERMS,
    expected_outlines,
)
from tests.support.kb_server import (
    BULK_NOTES,
    BULK_SHEET_ROWS,
    CORE_TOOLS,
    FULL_KEY,
    KB_COLLECTION,
    KB_SHEET_ROWS,
    NOTE_PATH,
    OTHER_COLLECTION,
    OTHER_PATH,
    SCOPED_KEY,
    HttpServer,
    KnowledgeBase,
    child_env,
)

pytest_plugins = ("tests.support.kb_server",)
pytestmark = pytest.mark.anyio

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


# ------------------------------------------------------------------------------- clients


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


# ------------------------------------------------------------------------------- helpers


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


# --------------------------------------------------------------------- tools and discovery


async def test_lists_the_ten_read_only_core_tools(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == CORE_TOOLS
    for tool in tools.values():
        assert tool.description and tool.annotations and tool.annotations.read_only_hint
        assert tool.input_schema["type"] == "object"
        # self-contained (tests/test_output_schema.py: same meaning as pydantic's)
        assert tool.output_schema and "$ref" not in json.dumps(tool.output_schema)
    assert tools["search"].input_schema["required"] == ["query"]
    assert set(tools["get_pages"].input_schema["required"]) == {"document_id"}


# -------------------------------------------------------------- seed 004: navigation


async def test_list_folders_shows_the_top_level_folders(client: Client, kb: KnowledgeBase) -> None:
    env = await call(client, "list_folders")
    folders = {f["folder"]: f["documents"] for f in env["data"]["folders"]}
    for top in ("Finance", "Legal", "Sales", "Marketing", "Engineering", "test-edge-cases"):
        assert top in folders
    expected = dict(kb.sql("SELECT folder, count(*) FROM pgrag.documents GROUP BY folder"))
    assert folders == expected
    assert folders["bulk-notes"] == BULK_NOTES


async def test_list_documents_pages_by_token_budget(client: Client, kb: KnowledgeBase) -> None:
    first = await call(client, "list_documents", folder="test-edge-cases", max_tokens=200)
    assert first["continuation"]["has_more"] is True
    assert first["status"] == {"code": "success", "message": "TOKEN_LIMIT_REACHED"}
    pages = await all_pages(client, "list_documents", max_tokens=1500)
    assert len(pages) > 3
    listed = [d["path"] for p in pages for d in p["data"]["documents"]]
    assert len(listed) == len(set(listed)), "a document was listed twice"
    assert set(listed) == set(kb.ids)
    for page in pages:
        assert page["data"]["token_count"] <= 1500 or len(page["data"]["documents"]) == 1
    edge = await all_pages(client, "list_documents", folder="test-edge-cases", max_tokens=200)
    edge_paths = [d["path"] for p in edge for d in p["data"]["documents"]]
    assert sorted(edge_paths) == sorted(p for p in kb.ids if p.startswith("test-edge-cases/"))
    doc = next(d for p in pages for d in p["data"]["documents"] if d["path"] == BUDGET)
    assert doc["document_id"] == kb.id(BUDGET) and doc["file_type"] == "xlsx"
    assert doc["status"] == "ready" and doc["collection"] == KB_COLLECTION


# ---------------------------------------------------------------- seed 004: search


async def test_semantic_search_finds_the_q1_documents(client: Client) -> None:
    args = {"query": "financial performance Q1", "mode": "semantic", "scope": "documents"}
    pages = [await call(client, "search", **args)]  # seed 004's call, default 2000 tokens
    while len({r["name"] for p in pages for r in p["data"]["results"]}) < 2:
        assert pages[-1]["continuation"]["has_more"], "no second document"
        token = pages[-1]["continuation"]["token"]
        pages.append(await call(client, "search", **args, continuation_token=token))
    names = [r["name"] for p in pages for r in p["data"]["results"]]
    assert set(names[:2]) == {"Q1_Budget.xlsx", "Q1_Report.pdf"}
    assert len(set(names)) == len(names), "scope=documents returned a document twice"
    assert [r["rank"] for p in pages for r in p["data"]["results"]] == list(
        range(1, len(names) + 1)
    )
    env = pages[0]
    assert env["data"]["mode"] == "semantic" and env["data"]["model"] == LOCAL_MODEL
    assert env["status"]["message"] in ("SEARCH_COMPLETED", "TOKEN_LIMIT_REACHED")
    # without snippets both fit on the first page, ranked first and second
    light = await call(client, "search", **args, content_mode="none", limit=5)
    assert {r["name"] for r in light["data"]["results"][:2]} == {"Q1_Budget.xlsx", "Q1_Report.pdf"}


async def test_regex_search_finds_the_email_addresses(client: Client, kb: KnowledgeBase) -> None:
    env = await call(
        client,
        "search",
        query=r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}",
        mode="regex",
        filters={"folder": "Legal"},
        content_mode="full",
        limit=20,
        max_tokens=25000,
    )
    hits = env["data"]["results"]
    on_page_5 = [
        h for h in hits if h["path"] == VENDOR and h["location"]["page"] == 5
    ]  # seed 004: the e-mails sit on page 5 of the vendor agreement
    assert on_page_5, [(h["path"], h["location"]) for h in hits]
    assert EXPECTED_PAGE_TERMS[VENDOR]["contact@acme.com"] == [5]
    assert on_page_5[0]["metadata"]["document_type"] == "pdf"
    assert on_page_5[0]["document_id"] == kb.id(VENDOR)
    text = " ".join((h["content"] or "") + h["preview"] for h in on_page_5)
    for email in SEED_EMAILS:
        assert email in text
    assert {h["path"] for h in hits} <= {p for p in kb.ids if p.startswith("Legal/")}


async def test_search_returns_rich_location_data(client: Client) -> None:
    env = await call(client, "search", query="limitation of liability", mode="semantic")
    top = env["data"]["results"][0]
    assert top["path"] == VENDOR
    assert top["location"]["page"] in EXPECTED_PAGE_TERMS[VENDOR]["limitation of liability"]
    assert top["metadata"]["document_type"] == "pdf"


# ------------------------------------------------------------ seed 004: outlines


async def test_document_outlines(client: Client) -> None:
    pdf = (await call(client, "get_document_outline", document_id="Annual_Report_2024.pdf"))["data"]
    want = OUTLINES[ANNUAL]
    assert pdf["type"] == "pdf" and pdf["outline"]["total_pages"] == want["total_pages"]
    got_marks = pdf["outline"]["bookmarks"]
    assert [(b["title"], b["page"]) for b in got_marks] == [
        (b["title"], b["page"]) for b in want["bookmarks"]
    ]
    base = got_marks[0]["level"] - want["bookmarks"][0]["level"]
    assert [b["level"] - base for b in got_marks] == [b["level"] for b in want["bookmarks"]]
    assert pdf["metadata"]["title"] == "Acme Corp Annual Report 2024"

    xlsx = (await call(client, "get_document_outline", document_id=BUDGET))["data"]
    assert xlsx["outline"]["sheets"] == OUTLINES[BUDGET]["sheets"]
    assert xlsx["name"] == "Q1_Budget.xlsx"

    pptx = (await call(client, "get_document_outline", document_id="Q4_Board_Deck.pptx"))["data"]
    slides = sorted(pptx["outline"]["slides"], key=lambda s: s["number"])
    assert [s["title"] for s in slides] == OUTLINES[BOARD]["titles"]
    assert pptx["outline"]["total_slides"] == OUTLINES[BOARD]["total_slides"]


# ----------------------------------------------------- seed 004: content retrieval


async def test_get_pages_respects_the_token_budget_and_continues(client: Client) -> None:
    pages = await all_pages(
        client, "get_pages", document_id="Annual_Report_2024.pdf", max_tokens=400
    )
    assert pages[0]["continuation"]["has_more"] is True
    numbers = [p["page_number"] for env in pages for p in env["data"]["pages"]]
    assert numbers == list(range(1, OUTLINES[ANNUAL]["total_pages"] + 1))
    for env in pages:
        data = env["data"]
        assert data["token_count"] <= 400 or len(data["pages"]) == 1
        assert data["total_pages"] == OUTLINES[ANNUAL]["total_pages"]
    # a page range; then a docx whose second page starts after the first one's last page
    some = await call(client, "get_pages", document_id=ANNUAL, page_range="5-6,12")
    assert [p["page_number"] for p in some["data"]["pages"]] == [5, 6, 12]
    assert "Income Statement" in some["data"]["pages"][0]["content"]
    first = await call(client, "get_pages", document_id="Supply_Contract_2024.docx", max_tokens=60)
    assert first["continuation"]["has_more"] is True
    second = await call(  # seed 004: the second call repeats only the document_id
        client,
        "get_pages",
        document_id="Supply_Contract_2024.docx",
        continuation_token=first["continuation"]["token"],
    )
    last = first["data"]["pages"][-1]["page_number"]
    assert second["data"]["pages"][0]["page_number"] > last


async def test_get_sheet_data_with_sheet_and_cell_range(client: Client) -> None:
    env = await call(
        client, "get_sheet_data", document_id=BUDGET, sheet_name="Summary", cell_range="A1:C6"
    )
    data = env["data"]
    assert data["sheet_name"] == "Summary"
    assert data["available_sheets"] == ["Summary", "Details", "Charts"]
    assert len(data["headers"]) == 3 and data["first_row"] == 1
    assert len(data["rows"]) == 6 and all(len(r) == 3 for r in data["rows"])
    assert data["total_rows"] == 50 and data["columns"] == 6
    details = await call(
        client, "get_sheet_data", document_id=BUDGET, sheet_name="Details", cell_range="B10:D12"
    )
    assert details["data"]["first_row"] == 10 and len(details["data"]["rows"]) == 3
    assert all(len(r) == 3 for r in details["data"]["rows"])


async def test_get_sheet_data_rejects_a_sheet_name_for_csv(client: Client) -> None:
    error = await fail(client, "get_sheet_data", document_id="Customer_List.csv", sheet_name="S1")
    assert error["code"] == "INVALID_ARGUMENT"
    assert "CSV_NO_SHEETS" in error["message"]
    assert "CSV files don't have multiple sheets" in error["message"]
    rows = await call(client, "get_sheet_data", document_id="Customer_List.csv")
    assert rows["data"]["total_rows"] == OUTLINES[CSV]["rows"]
    assert len(rows["data"]["headers"]) == OUTLINES[CSV]["columns"]
    error = await fail(client, "get_sheet_data", document_id=BUDGET, sheet_name="Nope")
    assert error["code"] == "INVALID_ARGUMENT" and "Summary" in error["message"]


async def test_get_slides_with_speaker_notes(client: Client) -> None:
    env = await call(client, "get_slides", document_id="Q4_Board_Deck.pptx", max_tokens=25000)
    slides = env["data"]["slides"]
    assert env["data"]["total_slides"] == OUTLINES[BOARD]["total_slides"] == len(slides)
    with_notes = [s["slide_number"] for s in slides if s["notes"]]
    assert with_notes == OUTLINES[BOARD]["slides_with_notes"]
    assert [s["title"] for s in slides] == OUTLINES[BOARD]["titles"]
    some = await call(client, "get_slides", document_id="Product_Demo.pptx", slide_numbers="2-3")
    assert [s["slide_number"] for s in some["data"]["slides"]] == [2, 3]
    assert all(s["notes"] is None for s in some["data"]["slides"])


# ------------------------------------------------------------ seed 004: edge cases


async def test_empty_file_reads_as_empty_content(client: Client) -> None:
    env = await call(client, "get_document_data", document_id="empty.txt", format="raw")
    assert env["data"]["content"] == ""
    assert env["status"]["code"] == "success"


async def test_unicode_file_name(client: Client, kb: KnowledgeBase) -> None:
    env = await call(client, "get_document_data", document_id="special_chars_文件名.txt")
    assert env["status"]["code"] == "success"
    assert env["data"]["document_id"] == kb.id(UNICODE)
    assert "特殊字符测试文件" in env["data"]["content"] and "🚀" in env["data"]["content"]


async def test_first_page_over_a_tiny_limit_is_included(client: Client) -> None:
    env = await call(client, "get_pages", document_id="huge_text.txt", max_tokens=100)
    assert env["status"] == {
        "code": "partial_success",
        "message": "TOKEN_LIMIT_EXCEEDED_BUT_INCLUDED",
    }
    assert len(env["data"]["pages"]) == 1 and env["data"]["pages"][0]["page_number"] == 1
    assert env["data"]["token_count"] > 100
    actions = {a["id"]: a for a in env["actions"]}
    assert actions["INCREASE_LIMIT"]["params"]["max_tokens"] > 100
    assert env["continuation"]["has_more"] is True and "CONTINUE" in actions


# -------------------------------------------------- seed 004: user story, status, embedding


async def test_user_story_find_q1_financials_and_analyze(client: Client, kb: KnowledgeBase) -> None:
    found = await call(
        client,
        "search",
        query="Q1 financial results budget",
        mode="semantic",
        scope="documents",
        limit=5,
        max_tokens=8000,
    )
    hits = {r["path"]: r["document_id"] for r in found["data"]["results"]}
    assert BUDGET in hits
    outline = await call(client, "get_document_outline", document_id=hits[BUDGET])
    sheets = {s["name"]: s for s in outline["data"]["outline"]["sheets"]}
    assert "Summary" in sheets
    data = await call(
        client, "get_sheet_data", document_id=hits[BUDGET], sheet_name="Summary", max_tokens=25000
    )
    revenue = [row for row in data["data"]["rows"] if any("$1,234,567" in c for c in row)]
    assert revenue and any("Revenue" in c for c in revenue[0])
    assert len(data["data"]["rows"]) == sheets["Summary"]["rows"] - 1  # all rows below the header


async def test_get_status_counts_and_failures(client: Client, kb: KnowledgeBase) -> None:
    env = await call(client, "get_status")
    counts = dict(kb.sql("SELECT status, count(*) FROM pgrag.documents GROUP BY status"))
    assert {k: v for k, v in env["data"]["counts"].items() if v} == counts
    assert env["data"]["total"] == len(kb.ids)
    failed = {f["path"]: f for f in env["data"]["failed"]}
    assert set(failed) == {CORRUPTED}
    assert failed[CORRUPTED]["error_code"] == "CORRUPT_FILE"
    assert "zip" in failed[CORRUPTED]["error_detail"].lower()
    one = await call(client, "get_status", document_id="corrupted.xlsx")
    assert one["data"]["status"] == "failed" and one["data"]["message"] == "DOCUMENT_FAILED"
    assert one["data"]["document"]["error_code"] == "CORRUPT_FILE"
    ready = await call(client, "get_status", document_id=kb.id(BUDGET))
    assert ready["data"]["message"] == "DOCUMENT_READY"
    error = await fail(client, "get_document_outline", document_id="corrupted.xlsx")
    assert error["code"] == "CONTENT_UNAVAILABLE" and "CORRUPT_FILE" in error["message"]


async def test_get_embedding(client: Client) -> None:
    a = (await call(client, "get_embedding", text="quarterly revenue"))["data"]
    b = (await call(client, "get_embedding", text="季度收入"))["data"]
    c = (await call(client, "get_embedding", text="the cat sat on the mat"))["data"]
    assert a["dimensions"] == len(a["embedding"]) == 384 and a["model"] == LOCAL_MODEL
    assert math.isclose(math.fsum(x * x for x in a["embedding"]), 1.0, abs_tol=1e-3)

    def cos(u: list[float], v: list[float]) -> float:
        return math.fsum(x * y for x, y in zip(u, v, strict=True))

    assert cos(a["embedding"], b["embedding"]) > cos(a["embedding"], c["embedding"])


# ------------------------------------------------------------- seed 000: the two scenarios


async def test_seed000_scenario1_find_last_years_q4_sales_strategy(client: Client) -> None:
    env = await call(
        client, "search", query="查找关于去年第四季度销售策略的文档", scope="documents"
    )
    top = env["data"]["results"][0]
    assert top["path"] == STRATEGY_ZH and top["name"] == "2023年第四季度销售策略报告.md"
    assert top["document_id"]


async def test_seed000_scenario2_answer_from_an_unnamed_document(client: Client) -> None:
    env = await call(client, "search", query="我们的客户服务改进计划中提到了哪些关键指标？")
    top = env["data"]["results"][0]
    assert top["path"] == STRATEGY_ZH
    uri = f"pgrag://documents/{top['document_id']}/content"
    read = await client.read_resource(uri)
    assert read.contents[0].uri == uri and read.contents[0].mime_type == "text/plain"
    assert "客户满意度（CSAT）不低于 92%" in read.contents[0].text
    meta = json.loads((await client.read_resource(uri.removesuffix("/content"))).contents[0].text)
    assert meta["metadata"]["name"] == "2023年第四季度销售策略报告.md"


# ------------------------------------------------------------------------------- resources


async def test_resource_templates_are_listed(client: Client) -> None:
    templates = (await client.list_resource_templates()).resource_templates
    assert {t.uri_template for t in templates} == {
        "pgrag://documents/{document_id}",
        "pgrag://documents/{document_id}/content",
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


# ---------------------------------------------------------------- worst-case response size


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


# ------------------------------------------------------------------------------ bad input


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


def _jsonrpc_reply(r: httpx2.Response) -> dict[str, Any]:
    """A JSON body, or the first `data:` event of an SSE body."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        for line in r.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])  # type: ignore[no-any-return]
        raise AssertionError(f"no data event in {r.text!r}")
    return r.json()  # type: ignore[no-any-return]


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


# ----------------------------------------------------------------------------------- auth


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


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


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


# ---------------------------------------------------------------------------------- audit


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
