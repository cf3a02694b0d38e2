"""The MCP server end to end: real clients over real transports (stdio, Streamable HTTP, SSE)
against `pgrag serve` processes over the seed-004 knowledge base (tests/support/kb_server.py).

Covers seed 004's test plan and user stories, seed 000's two Chinese scenarios, resources,
the 25k-token response cap, bad input, bearer keys with collection scopes and the audit log.
No handler is called directly: every request goes through a transport."""

from __future__ import annotations

import json
import math

import pytest
from mcp import Client

from tests.fixtures.knowledge_base import (
    EXPECTED_PAGE_TERMS,
)
from tests.support.kb_server import (
    BULK_NOTES,
    CORE_TOOLS,
    KB_COLLECTION,
    KnowledgeBase,
)
from tests.support.mcp import (
    ANNUAL,
    BOARD,
    BUDGET,
    CORRUPTED,
    CSV,
    LOCAL_MODEL,
    OUTLINES,
    SEED_EMAILS,
    STRATEGY_ZH,
    UNICODE,
    VENDOR,
    all_pages,
    anyio_backend,  # noqa: F401 (a fixture)
    call,
    client,  # noqa: F401 (a fixture)
    fail,
    http_client,  # noqa: F401 (a fixture)
    scoped_client,  # noqa: F401 (a fixture)
    stdio_client,  # noqa: F401 (a fixture)
)

pytest_plugins = ("tests.support.kb_server",)
pytestmark = pytest.mark.anyio


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
