"""Issue 17's done-check, end to end through the command line: a folder holding a scanned
Chinese contract (an image-only PDF of two A4 pages at 300 dpi) and a screenshot (English
and Chinese UI text) is searchable after `pgrag ingest`, each planted sentence found at its
page by keyword and by hybrid search, and `pgrag status`, the document services and the MCP
tools (get_status, list_documents, get_document_outline) say OCR read the pages."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from PIL import Image, ImageDraw, ImageFont

from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database
from tests.test_ocr import FONT, NO_FONT

pytestmark = pytest.mark.requires("tesseract")

A4_300DPI = (2480, 3508)
CONTRACT = [
    [
        "设备采购合同",
        "甲方：华东精密机械有限公司",
        "乙方：苏州远航自动化设备有限公司",
        "第一条 乙方向甲方供应数控机床十二台，型号见附件一。",
        "第二条 合同总价为人民币三百六十万元整，含税及运输费用。",
        "第三条 乙方应于二〇二七年三月一日前将全部设备运抵甲方昆山工厂。",
        "第四条 设备验收合格后，甲方在三十日内支付百分之九十的货款。",
    ],
    [
        "第五条 质量保证期为验收合格之日起二十四个月。",
        "第六条 任何一方延迟履行义务的，每日按合同总价的千分之一支付违约金。",
        "第七条 因本合同发生的争议，双方应提交上海仲裁委员会仲裁解决。",
        "第八条 本合同一式四份，双方各执两份，自双方签字盖章之日起生效。",
        "甲方代表签字：          乙方代表签字：",
    ],
]
SCREENSHOT = [
    "Backup finished: 1204 files synced to nas-archive-02.",
    "同步失败的文件已移至隔离区，请联系运维值班工程师。",
    "Next run scheduled for Sunday 03:00.",
]
# (query, file, page): words of the planted sentences, each on one page only
PLANTED = [
    ("昆山工厂 运抵", "contract_scan.pdf", 1),
    ("上海仲裁委员会 仲裁", "contract_scan.pdf", 2),
    ("nas-archive-02 backup", "screenshot.png", 1),
    ("隔离区 运维值班", "screenshot.png", 1),
]


def contract_page(lines: list[str]) -> Image.Image:
    """One A4 page of the contract as a 300 dpi scan would show it: slightly grey paper."""
    assert FONT is not None
    page = Image.new("RGB", A4_300DPI, (250, 250, 247))
    draw = ImageDraw.Draw(page)
    body = ImageFont.truetype(FONT, 46)
    y = 300
    for i, line in enumerate(lines):
        font = ImageFont.truetype(FONT, 72) if line == "设备采购合同" else body
        draw.text((260, y), line, fill=(20, 20, 20), font=font)
        y += 150 if i == 0 else 120
    return page


def screenshot() -> Image.Image:
    """A 1280x720 application window: title bar, sidebar, a panel of messages, a button."""
    assert FONT is not None
    font, small = ImageFont.truetype(FONT, 24), ImageFont.truetype(FONT, 20)
    image = Image.new("RGB", (1280, 720), (243, 244, 246))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 1280, 48), fill=(31, 41, 55))
    draw.text((20, 12), "pgrag Console — 同步设置", fill="white", font=font)
    draw.rectangle((0, 48, 220, 720), fill=(229, 231, 235))
    for i, item in enumerate(["Dashboard 仪表盘", "Sync jobs 同步任务", "Settings 设置"]):
        draw.text((20, 80 + i * 44), item, fill=(55, 65, 81), font=small)
    draw.rectangle((260, 90, 1240, 330), fill="white", outline=(209, 213, 219))
    for i, line in enumerate(SCREENSHOT):
        draw.text((290, 120 + i * 60), line, fill=(17, 24, 39), font=font)
    draw.rectangle((1040, 360, 1240, 410), fill=(37, 99, 235))
    draw.text((1070, 372), "Retry 重试", fill="white", font=small)
    return image


def build_folder(root: Path) -> Path:
    root.mkdir(parents=True)
    pages = [contract_page(lines) for lines in CONTRACT]
    pages[0].save(
        root / "contract_scan.pdf", save_all=True, append_images=pages[1:], resolution=300
    )
    screenshot().save(root / "screenshot.png")
    return root


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.update(PGRAG_HOME=str(home), OMP_NUM_THREADS="1", COLUMNS="200")
    return env


def pgrag(dsn: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        pgrag_cmd("--database-url", dsn, "--embedding-model", "hash/384", *args),
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(home),
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture(scope="module")
def ingested(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """The folder ingested once by `pgrag ingest`; (database, PGRAG_HOME)."""
    if FONT is None:
        pytest.fail(NO_FONT)
    tmp = tmp_path_factory.mktemp("ocr-done")
    folder = build_folder(tmp / "scans")
    dsn = create_database(server_dsn)
    pgrag(dsn, tmp / "home", "ingest", str(folder))
    yield dsn, tmp / "home"
    drop_database(server_dsn, dsn)


def _json(proc: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(proc.stdout)


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize(("query", "path", "page"), PLANTED)
def test_planted_sentence_found_at_its_page_after_pgrag_ingest(
    ingested: tuple[str, Path], mode: str, query: str, path: str, page: int
) -> None:
    dsn, home = ingested
    found = _json(pgrag(dsn, home, "search", query, "--mode", mode, "-n", "3", "--json"))
    hits = [(h["path"], h["location"]["page"]) for h in found["results"]]
    assert hits and hits[0] == (path, page), hits


def test_status_says_ocr_read_the_pages(ingested: tuple[str, Path]) -> None:
    dsn, home = ingested
    report = _json(pgrag(dsn, home, "status", "--json"))
    assert report["counts"]["ready"] == 2 and not report["failed"], report
    ocr = report["ocr"]
    assert (ocr["documents"], ocr["pages"], ocr["failed_pages"], ocr["unavailable"]) == (2, 3, 0, 0)
    assert ocr["mean_confidence"] > 0.8, ocr
    assert "read by OCR" in pgrag(dsn, home, "status").stdout

    one = _json(pgrag(dsn, home, "status", "contract_scan.pdf", "--json"))
    assert one["status"] == "ready" and one["ocr"]["pages"] == [1, 2], one
    assert one["ocr"]["engine"] in ("tesseract", "rapidocr") and "failed_pages" not in one["ocr"]


async def _metadata_and_listing(dsn: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from pgrag.services import documents as docs
    from pgrag.store.catalog import documents

    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        doc = await docs.resolve(conn, "screenshot.png", None)
        rows = await documents(
            conn, None, folder=None, file_type=None, status=None, offset=0, limit=10
        )
    return docs.metadata(doc), rows


def test_document_metadata_and_listing_say_ocr_read_the_pages(
    ingested: tuple[str, Path],
) -> None:
    meta, rows = asyncio.run(_metadata_and_listing(ingested[0]))
    assert meta["ocr"]["pages"] == [1] and meta["ocr"]["mean_confidence"] > 0.8, meta
    assert meta["ocr"]["languages"] == "chi_sim+eng"
    assert {r["path"]: r["ocr_pages"] for r in rows} == {
        "contract_scan.pdf": 2,
        "screenshot.png": 1,
    }


async def _mcp_calls(dsn: str, home: Path) -> dict[str, dict[str, Any]]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=pgrag_cmd()[0],
        args=[*pgrag_cmd()[1:], "--database-url", dsn, "--embedding-model", "hash/384", "serve"],
        env=_env(home),
        cwd=os.getcwd(),
    )
    calls = {
        "status": ("get_status", {}),
        "one": ("get_status", {"document_id": "screenshot.png"}),
        "list": ("list_documents", {}),
        "outline": ("get_document_outline", {"document_id": "contract_scan.pdf"}),
    }
    out = {}
    async with Client(params, cache=None, read_timeout_seconds=180) as client:
        for name, (tool, args) in calls.items():
            result = await client.call_tool(tool, args)
            assert not result.is_error and result.structured_content, result
            out[name] = result.structured_content["data"]
    return out


def test_mcp_tools_say_ocr_read_the_pages(ingested: tuple[str, Path]) -> None:
    data = asyncio.run(_mcp_calls(*ingested))
    assert data["status"]["ocr"]["pages"] == 3 and data["status"]["ocr"]["documents"] == 2
    assert data["one"]["document"]["ocr"]["pages"] == [1]
    assert {d["path"]: d["ocr_pages"] for d in data["list"]["documents"]} == {
        "contract_scan.pdf": 2,
        "screenshot.png": 1,
    }
    outline = data["outline"]
    assert outline["outline"]["ocr"]["pages"] == [1, 2] and outline["metadata"]["ocr"]["pages"]
