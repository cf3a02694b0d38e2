"""`pgrag eval` on a tiny corpus embedded by the real bundled model (figures that follow from
the corpus, the JSON shape, line-numbered errors for malformed files), and the document
benchmark's knowledge base: built deterministically, every query's answer at its location."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from pgrag.cli.app import cli
from pgrag.db.database import open_database
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.embeddings.local import LocalE5Provider
from pgrag.ingest.parsers import parse
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.models import Location
from pgrag.services.evaluation import (
    ExpectedLocation,
    QueryFileError,
    answer_in,
    detect_language,
    location_matches,
    parse_queries,
)
from pgrag.settings import load_settings
from tests.support.databases import create_database, drop_database

REPO = Path(__file__).resolve().parent.parent
DOCBENCH = REPO / "benchmarks" / "docbench"
sys.path.insert(0, str(DOCBENCH))
import build as docbench  # noqa: E402

TINY: dict[str, str] = {
    "leave.md": "# Leave Policy\n\n## Annual vacation\n\nEmployees receive twenty days of paid "
    "vacation per year.\n\n## Sick leave\n\nSick leave longer than ten days needs a "
    "doctor's note.\n",
    "servers.md": "# Server Setup\n\nInstall PostgreSQL 17 with the pgvector extension and set "
    "shared_buffers to a quarter of the memory.\n",
    "合同.txt": "合同管理制度\n\n合同由法务部门审核后，由授权代表签字并加盖公章。\n",
}


async def _ingest(dsn: str, root: Path, provider: EmbeddingProvider, collection: str) -> None:
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        summary = await Ingestor(db.pool, provider, collection=collection).run([root])
        assert not summary.failures, summary.failures


@pytest.fixture(scope="module")
def tiny_dsn(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    root = tmp_path_factory.mktemp("tiny")
    for name, text in TINY.items():
        (root / name).write_text(text, encoding="utf-8")
    url = create_database(server_dsn)
    provider = LocalE5Provider()
    try:
        asyncio.run(_ingest(url, root, provider, "tiny"))
    finally:
        asyncio.run(provider.aclose())
    yield url
    drop_database(server_dsn, url)


def _write(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "queries.jsonl"
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines)
        + "\n",
        encoding="utf-8",
    )
    return path


def _eval(dsn: str, path: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--database-url", dsn, "eval", str(path), *args])
    return result.exit_code, result.stdout, result.stderr


# --------------------------------------------------------------------------------------------
# pgrag eval
# --------------------------------------------------------------------------------------------

SURE = {
    "query": "How many days of paid vacation do employees get?",
    "document": "leave.md",
    "location": {"section": "Annual vacation"},
    "answer": "twenty days",
    "category": "direct",
}
IMPOSSIBLE = {"query": "pgvector shared_buffers", "document": "no-such-file.pdf"}
REGEX = {"query": "shared_[a-z]+", "document": "servers.md", "mode": "regex", "answer": "shared"}


def test_eval_json_figures_and_shape(tiny_dsn: str, tmp_path: Path) -> None:
    path = _write(tmp_path, SURE, IMPOSSIBLE, "", "# a comment line", REGEX)
    code, stdout, _ = _eval(tiny_dsn, path, "--json", "--collection", "tiny")
    assert code == 0, stdout
    data = json.loads(stdout)
    assert set(data) == {"summary", "missing_documents", "queries"}
    assert data["missing_documents"] == ["no-such-file.pdf"]
    hybrid = data["summary"]["hybrid"]
    assert set(hybrid) == {"overall", "categories", "languages"}
    assert hybrid["overall"] == {
        "n": 2,
        "hit@1": 0.5,
        "hit@3": 0.5,
        "mrr": 0.5,
        "location": 1.0,
        "location_n": 1,
        "location_mrr": 1.0,
        "answer": 1.0,
        "answer_n": 1,
    }
    assert hybrid["categories"]["direct"]["hit@1"] == 1.0
    assert hybrid["categories"]["uncategorised"]["hit@3"] == 0.0
    assert hybrid["categories"]["uncategorised"]["mrr"] == 0.0
    assert {k: v["n"] for k, v in hybrid["languages"].items()} == {"en→en": 1, "en→unknown": 1}
    regex = data["summary"]["regex"]["overall"]  # the regex line runs in its own mode only
    assert (regex["n"], regex["hit@1"], regex["answer"]) == (1, 1.0, 1.0)
    by_query = {(q["query"], q["mode"]): q for q in data["queries"]}
    assert len(data["queries"]) == 3
    sure = by_query[(SURE["query"], "hybrid")]
    assert sure["rank"] == 1 and sure["location_ok"] and sure["answer_ok"] and sure["found"]
    assert sure["first_location"]["section"] == "Annual vacation"
    assert sure["location_rank"] == 1 and sure["first_chunk_id"] is not None
    assert sure["top"][0] == "leave.md"
    missing = by_query[(IMPOSSIBLE["query"], "hybrid")]
    assert missing["rank"] is None and not missing["found"] and missing["location_ok"] is None


def test_eval_modes_and_table(tiny_dsn: str, tmp_path: Path) -> None:
    zh = {"query": "合同由谁签字？", "document": "合同.txt", "answer": "授权代表"}
    path = _write(tmp_path, SURE, zh, REGEX)
    code, stdout, _ = _eval(tiny_dsn, path, "-m", "hybrid", "-m", "keyword", "--details")
    assert code == 0, stdout
    assert "shared_[a-z]+" in stdout  # shown as written, not taken for rich markup
    for text in ("hit@1", "hit@3", "MRR@10", "location (n)", "answer (n)", "hybrid", "keyword"):
        assert text in stdout
    assert "category direct" in stdout and "language zh→zh" in stdout
    code, stdout, _ = _eval(tiny_dsn, path, "--json", "-m", "semantic", "-m", "keyword")
    summary = json.loads(stdout)["summary"]
    assert set(summary) == {"semantic", "keyword", "regex"}
    assert summary["semantic"]["overall"]["hit@1"] == 1.0
    assert summary["keyword"]["overall"]["hit@1"] == 1.0


def test_wrong_location_and_answer_are_scored_as_misses(tiny_dsn: str, tmp_path: Path) -> None:
    wrong = {**SURE, "location": {"section": "Sick leave"}, "answer": "thirty days"}
    code, stdout, _ = _eval(tiny_dsn, _write(tmp_path, wrong), "--json")
    assert code == 0, stdout
    overall = json.loads(stdout)["summary"]["hybrid"]["overall"]
    assert (overall["hit@1"], overall["location"], overall["answer"]) == (1.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([SURE, '{"query": "x", "document": '], "line 2: invalid JSON"),
        ([SURE, {"document": "leave.md"}], "line 2: missing field 'query'"),
        ([{"query": "x", "document": "a", "mode": "fuzzy"}], "line 1: 'mode' must be one of"),
        ([{"query": "x", "document": "a", "colour": 1}], "line 1: unknown field 'colour'"),
        ([SURE, "", '["a list"]'], "line 3: expected a JSON object"),
        ([{"query": "x", "document": "a", "location": {"rows": "a-b"}}], "line 1: 'location.rows"),
        (["", "# only a comment"], "no queries"),
        ([{"query": "x", "document": "a", "options": {"fusion": "borda"}}], "'options.fusion'"),
        ([{"query": "x", "document": "a", "options": {"limit": 3}}], "not a ranking option"),
    ],
)
def test_malformed_lines_exit_2_naming_the_line(
    tiny_dsn: str, tmp_path: Path, lines: list[object], message: str
) -> None:
    code, _, stderr = _eval(tiny_dsn, _write(tmp_path, *lines))
    assert code == 2
    assert message in stderr and "queries.jsonl" in stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr


def test_a_lines_ranking_options_reach_its_search(tiny_dsn: str, tmp_path: Path) -> None:
    """`options` are the search's own: sent, logged (explain_search replays them), scored."""
    tuned = {**SURE, "options": {"fusion": "rrf", "rrf_k": 7}}
    code, stdout, stderr = _eval(tiny_dsn, _write(tmp_path, tuned), "--json")
    assert code == 0, stderr
    (outcome,) = json.loads(stdout)["queries"]
    assert outcome["rank"] == 1
    with psycopg.connect(tiny_dsn) as conn:
        logged = conn.execute(
            "SELECT params ->> 'fusion', (params ->> 'rrf_k')::int FROM pgrag.search_log"
            " WHERE caller = 'eval' ORDER BY id DESC LIMIT 1"
        ).fetchone()
    assert logged == ("rrf", 7)


def test_matching_rules() -> None:
    hit = Location(page=2, section="3. Prices and Payment", sheet=None, slide=None, rows=None)
    assert location_matches(ExpectedLocation(section="3. prices and payment"), hit)
    assert location_matches(ExpectedLocation(section="3. Prices and Payment", page=2), hit)
    assert not location_matches(ExpectedLocation(page=3), hit)
    rows = Location(sheet="Price List", rows="2860-2890")
    assert location_matches(ExpectedLocation(sheet="Price List", rows="2876"), rows)
    assert location_matches(ExpectedLocation(rows="2870-2890"), rows)
    assert not location_matches(ExpectedLocation(rows="2850-2870"), rows)
    assert not location_matches(ExpectedLocation(sheet="Discounts", rows="2876"), rows)
    assert answer_in("950 CNY", "Shanghai\n950  cny")
    assert answer_in("合计 10 天", "合计10天")
    assert [detect_language(t) for t in ("hotel cap", "酒店标准", "XR-7000 的工作温度范围")] == [
        "en",
        "zh",
        "zh",
    ]
    assert detect_language("Firmware update 固件升级 over Bluetooth") == "mixed"
    with pytest.raises(QueryFileError, match="line 1"):
        parse_queries('{"query": "", "document": "a"}')


# --------------------------------------------------------------------------------------------
# the document benchmark's knowledge base
# --------------------------------------------------------------------------------------------


def _digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return docbench.build(tmp_path_factory.mktemp("docbench"))


def test_build_is_deterministic_and_complete(kb: Path, tmp_path: Path) -> None:
    again = docbench.build(tmp_path)
    assert _digests(kb) == _digests(again)
    assert set(_digests(kb)) == set(docbench.FILES)
    suffixes = {Path(p).suffix for p in docbench.FILES}
    assert {".pdf", ".docx", ".xlsx", ".pptx", ".csv", ".md", ".html", ".txt"} <= suffixes
    assert len(docbench.FILES) >= 15
    gbk = kb / "meetings" / "2025年4月管理层会议纪要.txt"
    with pytest.raises(UnicodeDecodeError):
        gbk.read_bytes().decode("utf-8")
    big = parse(kb / "sales" / "Price_List_2025.xlsx").units[0]
    assert big.title == "Price List" and len(big.rows or []) == docbench.PRICE_ROWS + 1
    outline = parse(kb / "policies" / "Travel_and_Expense_Policy_2025.pdf").outline
    assert len(outline["bookmarks"]) == 8 and outline["total_pages"] == 5
    notes = parse(kb / "sales" / "Q2_2025_Sales_Review.pptx").units[4]
    assert notes.meta["notes"] and "Huaxin Trading" in notes.meta["notes"]


def test_queries_cover_the_categories() -> None:
    queries = parse_queries((DOCBENCH / "queries.jsonl").read_text(encoding="utf-8"))
    assert len(queries) >= 60
    cats = {q.category for q in queries}
    assert cats == {
        "direct",
        "paraphrase",
        "keyword_code",
        "phrase",
        "speaker_notes",
        "sheet_row",
        "regex",
        "cross_lingual",
        "context",  # the answer's page lacks the words that identify its document
    }
    cross = [q for q in queries if q.category == "cross_lingual"]
    assert len(cross) >= 10
    assert all(q.mode == "regex" for q in queries if q.category == "regex")
    assert all(q.location and q.answer for q in queries)


def _answers_at_their_locations(dsn: str, root: Path, queries_file: Path) -> list[str]:
    """Ingest `root` with the cheap hash embedder; for every query, is there a chunk of the
    expected document at the expected location whose text contains the answer?"""
    asyncio.run(_ingest(dsn, root, HashEmbedder("hash/384"), "check"))
    queries = parse_queries(queries_file.read_text(encoding="utf-8"))
    with psycopg.connect(dsn) as conn:
        failed = conn.execute("SELECT path FROM pgrag.documents WHERE status <> 'ready'")
        assert failed.fetchall() == []
        rows = conn.execute(
            "SELECT d.path, c.content, c.page, c.section, c.sheet, c.slide, c.row_start,"
            " c.row_end FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id"
        ).fetchall()
    chunks: dict[str, list[tuple[Location, str]]] = {}
    for path, content, page, section, sheet, slide, r0, r1 in rows:
        loc = Location(
            page=page,
            section=section,
            sheet=sheet,
            slide=slide,
            rows=f"{r0}-{r1}" if r0 is not None else None,
        )
        chunks.setdefault(path, []).append((loc, content))
    problems = []
    for q in queries:
        want = q.location or ExpectedLocation()
        here = [
            text
            for loc, text in chunks.get(q.document, [])
            if location_matches(want, loc) and answer_in(q.answer or "", text)
        ]
        if not here:
            problems.append(f"{q.query!r}: {q.answer!r} not at {q.location} in {q.document}")
    return problems


def test_every_query_answer_is_at_its_location(kb: Path, dsn: str) -> None:
    problems = _answers_at_their_locations(dsn, kb, DOCBENCH / "queries.jsonl")
    assert not problems, "\n".join(problems)


def test_the_readme_example_queries_match_the_sample_folder(dsn: str) -> None:
    example = REPO / "examples" / "eval" / "queries.jsonl"
    problems = _answers_at_their_locations(dsn, REPO / "examples" / "sample", example)
    assert not problems, "\n".join(problems)
    assert {q.document for q in parse_queries(example.read_text(encoding="utf-8"))} <= {
        p.name for p in (REPO / "examples" / "sample").iterdir()
    }
