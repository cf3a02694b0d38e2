"""Ingestion end to end on a real PostgreSQL with the deterministic hash embedder.

The test knowledge base is built and ingested once per module (read-only for the tests that
share it); edits, renames, deletions, failures and the CLI each get a fresh database.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from pgrag.db.database import open_database
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.embeddings.remote import LiteLLMProvider
from pgrag.ingest.context import embed_text
from pgrag.ingest.pipeline import Ingestor, IngestSummary, Outcome
from pgrag.settings import load_settings
from pgrag.tokens import count_tokens
from tests.conftest import create_database, drop_database, pgrag_cmd
from tests.fixtures.knowledge_base import (
    EXPECTED_ABSENT,
    EXPECTED_EMPTY,
    EXPECTED_FAILED,
    EXPECTED_FILES,
    EXPECTED_METADATA,
    EXPECTED_PAGE_TERMS,
    HUGE_TEXT_NEEDLE,
    KB_DIRNAME,
    build_knowledge_base,
    expected_outlines,
)
from tests.support.servers import free_port

pytestmark = pytest.mark.anyio

HASH = "hash/384"
KB_HUGE_MB = 2  # the 10 MB file is ingested once, by the memory test
KB_ROWS = 5200
OUTLINES = expected_outlines(big_sheet_rows=KB_ROWS)
CHUNK_TOKENS = 350  # the Ingestor default the shared knowledge base is chunked with
RSS_LIMIT_MB = 600
GBK_PATH = "Sales/市场分析_GBK.txt"
UNICODE_PATH = "test-edge-cases/special_chars_文件名.txt"
HUGE_PATH = "test-edge-cases/huge_text.txt"


# ------------------------------------------------------------------------------- helpers


async def ingest(
    dsn: str,
    targets: list[Path],
    *,
    provider: EmbeddingProvider | None = None,
    collection: str = "kb",
    **options: Any,
) -> IngestSummary:
    """One run with its own pool, like one `pgrag ingest` invocation."""
    async with open_database(load_settings(embedding_model=HASH), dsn=dsn, max_size=4) as db:
        ingestor = Ingestor(
            db.pool, provider or HashEmbedder(HASH), collection=collection, **options
        )
        return await ingestor.run(targets)


def outcomes(summary: IngestSummary) -> dict[str, Outcome]:
    return {r.path: r.outcome for r in summary.results}


def query(dsn: str, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


def documents(dsn: str) -> dict[str, tuple[Any, ...]]:
    """path -> (id, status, error_code, error_detail)"""
    rows = query(dsn, "SELECT path, id, status, error_code, error_detail FROM pgrag.documents")
    return {r[0]: r[1:] for r in rows}


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def broken(header: bytes, seed: int) -> bytes:
    """A file that starts like its format and then is garbage."""
    return header + random.Random(seed).randbytes(3000)


def squash(text: str) -> str:
    return " ".join(text.split()).lower()


# ---------------------------------------------------------- the shared knowledge base


@dataclass(frozen=True)
class IngestedKB:
    dsn: str
    folder: Path
    summary: IngestSummary


@pytest.fixture(scope="module")
def kb(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IngestedKB]:
    """The whole knowledge base ingested once into its own database; tests only read it."""
    dsn = create_database(server_dsn)
    root = tmp_path_factory.mktemp("kb")
    build_knowledge_base(root, huge_mb=KB_HUGE_MB, big_sheet_rows=KB_ROWS)
    folder = root / KB_DIRNAME
    summary = asyncio.run(ingest(dsn, [folder]))
    yield IngestedKB(dsn, folder, summary)
    drop_database(server_dsn, dsn)


def units_of(dsn: str, path: str) -> list[tuple[str, int, str | None, str, dict[str, Any]]]:
    return query(
        dsn,
        "SELECT u.kind, u.number, u.title, u.body, u.meta FROM pgrag.units u"
        " JOIN pgrag.documents d ON d.id = u.document_id WHERE d.path = %s ORDER BY u.number",
        (path,),
    )


def test_kb_good_files_are_ready_and_the_corrupt_workbook_failed(kb: IngestedKB) -> None:
    expected = {
        p: Outcome.FAILED if p in EXPECTED_FAILED else Outcome.ADDED for p in EXPECTED_FILES
    }
    assert outcomes(kb.summary) == expected
    docs = documents(kb.dsn)
    assert set(docs) == set(EXPECTED_FILES)
    for path, (_, status, code, detail) in docs.items():
        if path in EXPECTED_FAILED:
            assert (status, code) == ("failed", "CORRUPT_FILE")
            assert ".xlsx" in detail and "\n" not in detail and len(detail) < 300, detail
        else:
            assert (status, code, detail) == ("ready", None, None), path
    failed_chunks = query(
        kb.dsn,
        "SELECT count(*) FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id"
        " WHERE d.status = 'failed'",
    )
    assert failed_chunks == [(0,)]


def _as_generated(kind: str, outline: dict[str, Any], units: list[tuple]) -> dict[str, Any]:
    """The stored outline in the generator's vocabulary: its PDF bookmark levels count from
    0 (ours from 1, like headings), its docx headings leave out the Title paragraph (our
    level 0), and textless pages / slide notes are read from the stored units."""
    if kind == "pdf":
        return {
            "type": outline["type"],
            "total_pages": outline["total_pages"],
            "bookmarks": [{**b, "level": b["level"] - 1} for b in outline["bookmarks"]],
            "textless_pages": [n for k, n, _, body, _ in units if k == "page" and not body.strip()],
        }
    if kind == "pptx":
        return {
            "type": outline["type"],
            "total_slides": outline["total_slides"],
            "titles": [s["title"] for s in outline["slides"]],
            "slides_with_notes": [n for _, n, _, _, meta in units if meta.get("notes")],
        }
    if kind in ("md", "html", "docx"):
        headings = [(h["level"], h["title"]) for h in outline["headings"] if h["level"] > 0]
        return {**outline, "headings": headings}
    return outline


@pytest.mark.parametrize("path", sorted(OUTLINES))
def test_kb_outline_is_stored_as_the_generator_describes_it(kb: IngestedKB, path: str) -> None:
    expected = OUTLINES[path]
    ((outline,),) = query(kb.dsn, "SELECT outline FROM pgrag.documents WHERE path = %s", (path,))
    got = _as_generated(expected["type"], outline, units_of(kb.dsn, path))
    comparable = {k: v for k, v in expected.items() if k not in ("tables", "explicit_page_breaks")}
    assert {k: got.get(k) for k in comparable} == comparable
    if expected["type"] == "docx":
        titles = [h for h in outline["headings"] if h["level"] == 0]
        assert titles == outline["headings"][:1]  # the Title paragraph, first and only once
        breaks = expected["explicit_page_breaks"]
        assert outline["total_pages"] == (breaks + 1 if breaks else None)
    assert outline["size_bytes"] == (kb.folder / path).stat().st_size


@pytest.mark.parametrize("path", sorted(EXPECTED_METADATA))
def test_kb_document_metadata(kb: IngestedKB, path: str) -> None:
    ((title, author, created),) = query(
        kb.dsn, "SELECT title, author, created_at FROM pgrag.documents WHERE path = %s", (path,)
    )
    expected = EXPECTED_METADATA[path]
    assert (title, author, created) == (expected["title"], expected["author"], expected["created"])


@pytest.mark.parametrize("path", sorted(EXPECTED_PAGE_TERMS))
def test_kb_pdf_text_is_stored_per_page(kb: IngestedKB, path: str) -> None:
    pages = {n: squash(body) for kind, n, _, body, _ in units_of(kb.dsn, path) if kind == "page"}
    assert sorted(pages) == list(range(1, OUTLINES[path]["total_pages"] + 1))
    found = {
        term: [n for n, text in sorted(pages.items()) if term in text]
        for term in EXPECTED_PAGE_TERMS[path]
    }
    assert found == EXPECTED_PAGE_TERMS[path]


def test_kb_text_edge_cases(kb: IngestedKB) -> None:
    (empty,) = EXPECTED_EMPTY
    counts = dict(
        query(
            kb.dsn,
            "SELECT d.path, count(c.id) FROM pgrag.documents d"
            " LEFT JOIN pgrag.chunks c ON c.document_id = d.id GROUP BY d.path",
        )
    )
    assert documents(kb.dsn)[empty][1] == "ready" and counts[empty] == 0
    ((name, folder),) = query(
        kb.dsn, "SELECT name, folder FROM pgrag.documents WHERE path = %s", (UNICODE_PATH,)
    )
    assert (name, folder) == ("special_chars_文件名.txt", "test-edge-cases")
    special = "".join(body for *_, body, _ in units_of(kb.dsn, UNICODE_PATH))
    assert "Zürich" in special and "中文文件名测试" in special and "🚀" in special
    gbk = "".join(body for *_, body, _ in units_of(kb.dsn, GBK_PATH))
    assert "华东地区工业传感器市场" in gbk and "86 亿元" in gbk
    assert counts[GBK_PATH] > 0
    huge = " ".join(body for *_, body, _ in units_of(kb.dsn, HUGE_PATH))
    assert squash(HUGE_TEXT_NEEDLE) in squash(huge)
    assert len(huge) >= KB_HUGE_MB * 1024 * 1024 * 0.99


def test_kb_html_script_style_and_comments_are_not_indexed(kb: IngestedKB) -> None:
    for path, sentinels in EXPECTED_ABSENT.items():
        stored = query(
            kb.dsn,
            "SELECT string_agg(u.body, ' ') || (SELECT string_agg(c.content, ' ')"
            " FROM pgrag.chunks c WHERE c.document_id = d.id)"
            " FROM pgrag.units u JOIN pgrag.documents d ON d.id = u.document_id"
            " WHERE d.path = %s GROUP BY d.id",
            (path,),
        )[0][0]
        assert stored and not [s for s in sentinels if s in stored]


def test_kb_chunks_are_exact_slices_of_their_unit(kb: IngestedKB) -> None:
    bad = query(
        kb.dsn,
        "SELECT d.path, c.ordinal FROM pgrag.chunks c"
        " JOIN pgrag.units u ON u.id = c.unit_id JOIN pgrag.documents d ON d.id = c.document_id"
        " WHERE u.kind <> 'sheet'"
        "   AND substr(u.body, c.char_start + 1, c.char_end - c.char_start) IS DISTINCT FROM c.content",
    )
    assert bad == []
    ((checked,),) = query(
        kb.dsn,
        "SELECT count(*) FROM pgrag.chunks c JOIN pgrag.units u ON u.id = c.unit_id"
        " WHERE u.kind <> 'sheet'",
    )
    assert checked > 1000


def test_kb_chunks_never_cross_units(kb: IngestedKB) -> None:
    bad = query(
        kb.dsn,
        """
        SELECT d.path, c.ordinal, u.kind, u.number, c.page, c.slide, c.sheet, c.section
        FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id
        LEFT JOIN pgrag.units u ON u.id = c.unit_id
        WHERE u.id IS NULL OR u.document_id <> c.document_id
           OR c.char_start < 0 OR c.char_end > length(u.body) OR c.content = ''
           OR (u.kind = 'page' AND c.page IS DISTINCT FROM u.number)
           OR (u.kind = 'slide' AND c.slide IS DISTINCT FROM u.number)
           OR (u.kind = 'sheet' AND c.sheet IS DISTINCT FROM u.title)
           OR (u.kind = 'section' AND c.section IS DISTINCT FROM u.title)
        """,
    )
    assert bad == []
    # ordinals run 1..n per document, in unit order
    gaps = query(
        kb.dsn,
        """
        SELECT document_id FROM (
            SELECT c.document_id, c.ordinal,
                   row_number() OVER (PARTITION BY c.document_id
                                      ORDER BY u.number, c.char_start, c.row_start) AS expected
            FROM pgrag.chunks c JOIN pgrag.units u ON u.id = c.unit_id) t
        WHERE ordinal <> expected
        """,
    )
    assert gaps == []


def test_kb_chunks_carry_their_location(kb: IngestedKB) -> None:
    missing = dict(
        query(
            kb.dsn,
            """
            SELECT d.file_type, count(*) FILTER (WHERE CASE d.file_type
                       WHEN 'pdf' THEN c.page IS NULL
                       WHEN 'pptx' THEN c.slide IS NULL
                       WHEN 'xlsx' THEN c.sheet IS NULL OR c.row_start IS NULL OR c.row_end IS NULL
                       WHEN 'csv' THEN c.row_start IS NULL OR c.row_end IS NULL
                       WHEN 'md' THEN c.section IS NULL
                       WHEN 'docx' THEN c.section IS NULL
                       WHEN 'html' THEN c.section IS NULL
                       ELSE false END)
            FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id
            GROUP BY d.file_type
            """,
        )
    )
    assert {"pdf", "pptx", "xlsx", "csv", "md", "docx", "html", "txt"} <= set(missing)
    assert missing == dict.fromkeys(missing, 0)
    # paged docx chunks know their page too
    ((pages,),) = query(
        kb.dsn,
        "SELECT array_agg(DISTINCT c.page) FROM pgrag.chunks c"
        " JOIN pgrag.documents d ON d.id = c.document_id WHERE d.path = %s",
        ("Legal/Supply_Contract_2024.docx",),
    )
    assert pages == [1, 2, 3, 4]


def test_kb_sheet_chunks_repeat_the_header_and_cover_every_row_once(kb: IngestedKB) -> None:
    with psycopg.connect(kb.dsn) as conn:
        units = conn.execute(
            "SELECT u.id, u.body, (u.meta ->> 'rows')::int,"
            " (SELECT count(*) FROM pgrag.sheet_rows r WHERE r.unit_id = u.id)"
            " FROM pgrag.units u WHERE u.kind = 'sheet'"
        ).fetchall()
        chunks = conn.execute(
            "SELECT c.unit_id, c.content, c.char_start, c.char_end, c.row_start, c.row_end"
            " FROM pgrag.chunks c JOIN pgrag.units u ON u.id = c.unit_id"
            " WHERE u.kind = 'sheet' ORDER BY c.unit_id, c.ordinal"
        ).fetchall()
    by_unit: dict[int, list[tuple[Any, ...]]] = {}
    for c in chunks:
        by_unit.setdefault(c[0], []).append(c)
    checked_rows = 0
    for unit_id, body, rows, stored_rows in units:
        assert stored_rows == rows  # every row addressable in pgrag.sheet_rows
        lines = body.split("\n") if body else []
        covered: list[int] = []
        for _, content, start, end, row_start, row_end in by_unit.get(unit_id, []):
            if rows == 1:
                assert (content, row_start, row_end) == (body, 1, 1)
                continue
            assert 2 <= row_start <= row_end <= rows
            assert content == "\n".join([lines[0], *lines[row_start - 1 : row_end]])
            assert body[start:end] == "\n".join(lines[row_start - 1 : row_end])
            covered += range(row_start, row_end + 1)
        if rows > 1:
            assert covered == list(range(2, rows + 1)), unit_id
            checked_rows += len(covered)
    assert checked_rows > 2 * KB_ROWS


def test_kb_every_chunk_has_its_own_embedding_in_the_active_set(kb: IngestedKB) -> None:
    with psycopg.connect(kb.dsn) as conn:
        register_vector(conn)
        missing = conn.execute(
            "SELECT count(*) FROM pgrag.chunks c JOIN pgrag.collections col ON col.id = c.collection_id"
            " LEFT JOIN pgrag.embeddings e ON e.chunk_id = c.id AND e.set_id = col.active_set_id"
            " WHERE e.chunk_id IS NULL"
        ).fetchone()
        rows = conn.execute(
            "SELECT c.heading, c.context, c.content, e.embedding::vector(384) FROM pgrag.chunks c"
            " JOIN pgrag.collections col ON col.id = c.collection_id"
            " JOIN pgrag.embeddings e ON e.chunk_id = c.id AND e.set_id = col.active_set_id"
            " WHERE c.ordinal % 5 = 1"
        ).fetchall()
    assert missing == (0,)
    assert len(rows) > 300
    # the vector stored with a chunk is the embedding of that chunk's text (not a neighbour's)
    texts = [embed_text(h, ctx, c) for h, ctx, c, _ in rows]
    expected = asyncio.run(HashEmbedder(HASH).embed_passages(texts))
    stored = np.stack([v.to_numpy() for *_, v in rows])
    assert np.allclose(stored, expected, atol=1e-5)


def test_kb_chunks_stay_within_the_token_budget(kb: IngestedKB) -> None:
    rows = query(
        kb.dsn,
        "SELECT u.kind, c.token_count, c.content, c.row_start, c.row_end"
        " FROM pgrag.chunks c JOIN pgrag.units u ON u.id = c.unit_id",
    )
    assert len(rows) > 2000
    for kind, stored, content, row_start, row_end in rows:
        if kind == "sheet" and row_start == row_end:
            continue  # one row longer than the budget is kept whole
        assert stored <= CHUNK_TOKENS
        # counted per piece before the leading space is trimmed: a word can re-tokenise
        assert count_tokens(content) <= CHUNK_TOKENS + 3, content[:80]


async def test_kb_rerun_changes_nothing(kb: IngestedKB) -> None:
    snapshot = """
        SELECT d.path, d.id, d.status, d.content_hash, d.ingested_at, d.updated_at,
               array_agg(c.id ORDER BY c.ordinal) FILTER (WHERE c.id IS NOT NULL),
               count(e.chunk_id)
        FROM pgrag.documents d LEFT JOIN pgrag.chunks c ON c.document_id = d.id
        LEFT JOIN pgrag.embeddings e ON e.chunk_id = c.id
        GROUP BY d.id ORDER BY d.path
    """
    before = query(kb.dsn, snapshot)
    summary = await ingest(kb.dsn, [kb.folder])
    assert outcomes(summary) == dict.fromkeys(EXPECTED_FILES, Outcome.UNCHANGED)
    assert sum(r.embedded for r in summary.results) == 0
    assert query(kb.dsn, snapshot) == before


# -------------------------------------------------------- changes to an ingested folder


def _paragraphs(n: int, word: str) -> list[str]:
    return [
        f"Paragraph {i} explains {word} procedure number {i} for the warehouse." for i in range(n)
    ]


async def test_edit_updates_the_same_document_and_reuses_cached_embeddings(
    dsn: str, tmp_path: Path
) -> None:
    paragraphs = _paragraphs(40, "loading")
    docs = write_tree(
        tmp_path / "docs",
        {"guide.md": "# Guide\n\n" + "\n\n".join(paragraphs), "other.txt": "Unrelated notes."},
    )
    first = await ingest(dsn, [docs], chunk_tokens=48, chunk_overlap=0)
    assert outcomes(first) == {"guide.md": Outcome.ADDED, "other.txt": Outcome.ADDED}
    doc_id = documents(dsn)["guide.md"][0]

    paragraphs[30] = "Paragraph 30 now requires a zanzibar forklift certificate."
    (docs / "guide.md").write_text("# Guide\n\n" + "\n\n".join(paragraphs), encoding="utf-8")
    second = await ingest(dsn, [docs], chunk_tokens=48, chunk_overlap=0)

    assert outcomes(second) == {"guide.md": Outcome.UPDATED, "other.txt": Outcome.UNCHANGED}
    (result,) = [r for r in second.results if r.path == "guide.md"]
    assert 0 < result.embedded < result.chunks  # unchanged chunks came from the cache
    assert documents(dsn)["guide.md"][:2] == (doc_id, "ready")
    hits = query(
        dsn,
        "SELECT d.id, c.content FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id"
        " WHERE c.tsv @@ pgrag.lexical_query('zanzibar forklift')",
    )
    assert [h[0] for h in hits] == [doc_id] and "zanzibar forklift" in hits[0][1]
    stale = query(
        dsn, "SELECT count(*) FROM pgrag.chunks WHERE content LIKE '%%procedure number 30 %%'"
    )
    assert stale == [(0,)]


def _workbook(path: Path) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Stock"
    ws.append(["Item", "Count"])
    for i in range(30):
        ws.append([f"bolt {i}", i])
    wb.save(str(path))


async def test_delete_removes_the_document_and_everything_under_it(
    dsn: str, tmp_path: Path
) -> None:
    docs = write_tree(
        tmp_path / "docs",
        {"keep.txt": "Keep this file.", "gone.md": "# Gone\n\nThis file will be deleted."},
    )
    _workbook(docs / "stock.xlsx")
    first = await ingest(dsn, [docs])
    assert set(outcomes(first).values()) == {Outcome.ADDED}
    ids = {p: row[0] for p, row in documents(dsn).items()}
    gone = [ids["gone.md"], ids["stock.xlsx"]]
    under = """
        SELECT (SELECT count(*) FROM pgrag.units WHERE document_id = ANY(%(ids)s)),
               (SELECT count(*) FROM pgrag.sheet_rows r JOIN pgrag.units u ON u.id = r.unit_id
                 WHERE u.document_id = ANY(%(ids)s)),
               (SELECT count(*) FROM pgrag.chunks WHERE document_id = ANY(%(ids)s)),
               (SELECT count(*) FROM pgrag.embeddings e JOIN pgrag.chunks c ON c.id = e.chunk_id
                 WHERE c.document_id = ANY(%(ids)s))
    """
    ((units, rows, chunks, vectors),) = query(dsn, under, {"ids": gone})
    assert units >= 2 and rows == 31 and chunks >= 2 and vectors == chunks
    chunk_ids = [
        r[0] for r in query(dsn, "SELECT id FROM pgrag.chunks WHERE document_id = ANY(%s)", (gone,))
    ]

    (docs / "gone.md").unlink()
    (docs / "stock.xlsx").unlink()
    second = await ingest(dsn, [docs])

    assert outcomes(second) == {
        "keep.txt": Outcome.UNCHANGED,
        "gone.md": Outcome.REMOVED,
        "stock.xlsx": Outcome.REMOVED,
    }
    assert set(documents(dsn)) == {"keep.txt"}
    assert query(dsn, under, {"ids": gone}) == [(0, 0, 0, 0)]
    orphans = query(
        dsn, "SELECT count(*) FROM pgrag.embeddings WHERE chunk_id = ANY(%s)", (chunk_ids,)
    )
    assert orphans == [(0,)]
    # the embedding cache outlives the document: putting it back costs no model call
    write_tree(docs, {"gone.md": "# Gone\n\nThis file will be deleted."})
    third = await ingest(dsn, [docs])
    (back,) = [r for r in third.results if r.path == "gone.md"]
    assert back.outcome == Outcome.ADDED and back.chunks > 0 and back.embedded == 0


async def test_rename_removes_the_old_path_and_adds_the_new_one(dsn: str, tmp_path: Path) -> None:
    docs = write_tree(
        tmp_path / "docs", {"a.md": "# Alpha\n\nThe alpha memo.", "b.txt": "The beta memo."}
    )
    await ingest(dsn, [docs])
    old_id = documents(dsn)["a.md"][0]
    (docs / "archive").mkdir()
    (docs / "a.md").rename(docs / "archive" / "alpha.md")
    summary = await ingest(dsn, [docs])
    assert outcomes(summary) == {
        "archive/alpha.md": Outcome.ADDED,
        "b.txt": Outcome.UNCHANGED,
        "a.md": Outcome.REMOVED,
    }
    rows = query(dsn, "SELECT id, path, folder, name, status FROM pgrag.documents ORDER BY path")
    assert [r[1:] for r in rows] == [
        ("archive/alpha.md", "archive", "alpha.md", "ready"),
        ("b.txt", "", "b.txt", "ready"),
    ]
    assert old_id not in [r[0] for r in rows]
    assert query(dsn, "SELECT count(*) FROM pgrag.chunks WHERE document_id = %s", (old_id,)) == [
        (0,)
    ]


POLL_SQL = """
SELECT d.status, d.content_hash, count(c.id), count(c.id) FILTER (WHERE c.content LIKE '%%omega%%'),
       count(e.chunk_id)
FROM pgrag.documents d LEFT JOIN pgrag.chunks c ON c.document_id = d.id
LEFT JOIN pgrag.embeddings e ON e.chunk_id = c.id
WHERE d.id = %s GROUP BY d.id
"""


def _poll(dsn: str, doc_id: Any, stop: threading.Event, seen: list[tuple[Any, ...]]) -> None:
    """What another client sees of the document while it is re-ingested, one statement each."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            last = stop.is_set()
            seen.append(conn.execute(POLL_SQL, (doc_id,)).fetchone())
            if last:
                return


async def test_a_new_version_replaces_all_chunks_at_once(dsn: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    big = write_tree(docs, {"big.txt": "\n\n".join(_paragraphs(1500, "alpha"))}) / "big.txt"
    options = {"chunk_tokens": 24, "chunk_overlap": 0}  # one paragraph per chunk
    await ingest(dsn, [docs], **options)
    doc_id, status, *_ = documents(dsn)["big.txt"]
    ((old_hash, old_count),) = query(
        dsn,
        "SELECT d.content_hash, count(*) FROM pgrag.documents d"
        " JOIN pgrag.chunks c ON c.document_id = d.id WHERE d.id = %s GROUP BY d.id",
        (doc_id,),
    )
    assert status == "ready" and old_count > 1000

    big.write_text("\n\n".join(_paragraphs(2000, "omega")), encoding="utf-8")
    seen: list[tuple[Any, ...]] = []
    stop = threading.Event()
    poller = threading.Thread(target=_poll, args=(dsn, doc_id, stop, seen))
    poller.start()
    try:
        summary = await ingest(dsn, [docs], **options)
    finally:
        stop.set()
        poller.join()

    (result,) = summary.results
    assert result.outcome == Outcome.UPDATED and result.chunks > old_count
    ((new_hash,),) = query(dsn, "SELECT content_hash FROM pgrag.documents WHERE id = %s", (doc_id,))
    old_state = (old_hash, old_count, 0, old_count)
    # the new version's chunks commit first (keyword search works), all its vectors follow
    # in one later transaction: never a mix of versions, never some of the vectors
    lexical_only = (new_hash, result.chunks, result.chunks, 0)
    new_state = (new_hash, result.chunks, result.chunks, result.chunks)
    states = [s[1:] for s in seen]
    allowed = (old_state, lexical_only, new_state)
    assert set(states) <= set(allowed), [s for s in states if s not in allowed][:3]
    assert states[0] == old_state and states[-1] == new_state
    # the poller watched the re-ingestion itself: old chunks kept serving while processing
    assert ("processing", *old_state) in seen


# ------------------------------------------------------------------------------- failures


async def test_a_broken_file_fails_alone_and_is_retried_only_once_changed(
    dsn: str, tmp_path: Path
) -> None:
    docs = write_tree(
        tmp_path / "docs",
        {
            "a.txt": "Alpha text.",
            "b_broken.docx": broken(b"PK\x03\x04", 1),
            "c_broken.pdf": broken(b"%PDF-1.7\n", 2),
            "d.md": "# Delta\n\nDelta text.",
        },
    )
    first = await ingest(dsn, [docs])
    assert outcomes(first) == {
        "a.txt": Outcome.ADDED,
        "b_broken.docx": Outcome.FAILED,
        "c_broken.pdf": Outcome.FAILED,
        "d.md": Outcome.ADDED,
    }
    state = documents(dsn)
    for path, ext in (("b_broken.docx", ".docx"), ("c_broken.pdf", ".pdf")):
        _, status, code, detail = state[path]
        assert (status, code) == ("failed", "CORRUPT_FILE") and ext in detail
    assert (state["a.txt"][1], state["d.md"][1]) == ("ready", "ready")

    second = await ingest(dsn, [docs])  # same bytes: a corrupt file is not parsed again
    assert set(outcomes(second).values()) == {Outcome.UNCHANGED}

    import docx

    fixed = docx.Document()
    fixed.add_paragraph("Bravo contract text, readable now.")
    fixed.save(str(docs / "b_broken.docx"))
    third = await ingest(dsn, [docs])
    assert outcomes(third)["b_broken.docx"] == Outcome.UPDATED
    assert documents(dsn)["b_broken.docx"][1:] == ("ready", None, None)
    hits = query(dsn, "SELECT count(*) FROM pgrag.chunks WHERE content LIKE '%%Bravo contract%%'")
    assert hits == [(1,)]


async def test_nul_bytes_in_text_files_are_dropped_and_do_not_stop_the_run(
    dsn: str, tmp_path: Path
) -> None:
    # PostgreSQL text cannot hold NUL: storing it raised out of the run and left the
    # document `processing` forever
    docs = write_tree(
        tmp_path / "docs",
        {
            "a_log.txt": b"service started\x00\x00 at boot\n",
            "b_table.csv": b"name,code\nvalve,V\x001\n",
            "c.txt": "Gamma.",
        },
    )
    summary = await ingest(dsn, [docs])
    assert outcomes(summary) == dict.fromkeys(["a_log.txt", "b_table.csv", "c.txt"], Outcome.ADDED)
    texts = dict(
        query(
            dsn,
            "SELECT d.path, string_agg(c.content, ' ') FROM pgrag.chunks c"
            " JOIN pgrag.documents d ON d.id = c.document_id GROUP BY d.path",
        )
    )
    assert texts["a_log.txt"] == "service started at boot"
    assert texts["b_table.csv"] == "name | code\nvalve | V1"


class NamedHashEmbedder(HashEmbedder):
    """The hash test embedder under another model name: the provider "comes back up"."""

    def __init__(self, model: str, dimensions: int) -> None:
        super().__init__(f"hash/{dimensions}")
        self.model = model


async def test_provider_down_leaves_documents_pending_until_it_is_back(
    dsn: str, tmp_path: Path
) -> None:
    docs = write_tree(
        tmp_path / "docs",
        {"a.txt": "Alpha memo.", "b.md": "# Beta\n\nBeta memo.", "empty.txt": ""},
    )
    port = free_port()  # nothing listens here
    down = LiteLLMProvider(
        "openai/x",
        api_base=f"http://127.0.0.1:{port}/v1",
        api_key="k",
        dimensions=384,
        retries=0,
        timeout=2,
    )
    first = await ingest(dsn, [docs], provider=down)
    assert outcomes(first) == {
        "a.txt": Outcome.PENDING,
        "b.md": Outcome.PENDING,
        "empty.txt": Outcome.ADDED,  # nothing to embed
    }
    assert sorted(r.path for r in first.waiting) == ["a.txt", "b.md"]
    state = documents(dsn)
    for path in ("a.txt", "b.md"):
        _, status, code, detail = state[path]
        # searchable by keyword already; why the vectors wait is on the document
        assert (status, code) == ("ready", "UPSTREAM_ERROR")
        assert f"127.0.0.1:{port}" in detail
    assert query(
        dsn, "SELECT count(*), sum(vectors_pending) FROM pgrag.documents WHERE path <> 'empty.txt'"
    ) == [(2, 2)]
    assert query(dsn, "SELECT count(*) FROM pgrag.chunks") == [(2,)]
    assert query(dsn, "SELECT count(*) FROM pgrag.embeddings") == [(0,)]

    second = await ingest(dsn, [docs], provider=NamedHashEmbedder("openai/x", 384))
    assert outcomes(second) == {  # the files did not change: their vectors are resumed
        "a.txt": Outcome.UNCHANGED,
        "b.md": Outcome.UNCHANGED,
        "empty.txt": Outcome.UNCHANGED,
    }
    assert sorted((r.path, r.embedded) for r in second.resumed) == [("a.txt", 1), ("b.md", 1)]
    assert not second.waiting
    assert {row[1:3] for row in documents(dsn).values()} == {("ready", None)}
    ((chunks, vectors, pending),) = query(
        dsn,
        "SELECT count(DISTINCT c.id), count(e.chunk_id),"
        " (SELECT sum(vectors_pending) FROM pgrag.documents) FROM pgrag.chunks c"
        " LEFT JOIN pgrag.embeddings e ON e.chunk_id = c.id",
    )
    assert (chunks, vectors, pending) == (2, 2, 0)


async def test_ignore_rules_and_unsupported_types(dsn: str, tmp_path: Path) -> None:
    docs = write_tree(
        tmp_path / "docs",
        {
            "keep.txt": "Kept.",
            "sub/keep.md": "# Kept\n\nAlso kept.",
            ".git/config": "[core]",
            ".git/notes.txt": "git internals",
            "~$lock.docx": b"\x00lock",
            ".DS_Store": b"\x00\x01",
            "node_modules/pkg/readme.md": "# vendored",
            "draft.tmp": "temporary",
            "build/out.txt": "generated",
            "sub/debug.log.txt": "log lines",
            "movie.mp4": b"\x00\x00\x00\x18ftypmp42",
            "data.bin": b"\x00\x01\x02",
            ".pgragignore": "# generated output\nbuild/\n*.log.txt\n",
        },
    )
    summary = await ingest(dsn, [docs])
    assert outcomes(summary) == {
        "keep.txt": Outcome.ADDED,
        "sub/keep.md": Outcome.ADDED,
        "movie.mp4": Outcome.SKIPPED,
        "data.bin": Outcome.SKIPPED,
    }
    assert set(documents(dsn)) == {"keep.txt", "sub/keep.md"}


# --------------------------------------------------------------------------- memory bound


# Measured from a small launcher: a child forked from the (large) pytest process carries the
# parent's resident set into its own peak until it execs, so wait4's ru_maxrss would report
# pytest's size, not pgrag's.
LAUNCHER = (
    "import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(rc)"
)


def run_measured(args: list[str]) -> tuple[int, str, str, float]:
    """Run a command; return (exit code, stdout, stderr, peak RSS in MB) of that process."""
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *args], capture_output=True, text=True, env=env
    )
    err, _, peak_kib = done.stderr.rstrip("\n").rpartition("\n")
    if not err and not peak_kib.strip().isdigit():
        err, peak_kib = peak_kib, "0"
    return done.returncode, done.stdout, err, int(peak_kib) / 1024  # KiB on Linux


def ingest_cmd(dsn: str, *args: str) -> list[str]:
    return pgrag_cmd("--database-url", dsn, "--embedding-model", HASH, "ingest", "--quiet", *args)


def test_memory_stays_bounded_on_a_10_mb_text_file(dsn: str, tmp_path: Path) -> None:
    built = build_knowledge_base(tmp_path / "kb", huge_mb=10, big_sheet_rows=1)
    folder = tmp_path / "huge"
    folder.mkdir()
    built[HUGE_PATH].rename(folder / "huge_text.txt")
    assert (folder / "huge_text.txt").stat().st_size >= 10 * 1024 * 1024

    code, _, err, peak_mb = run_measured(ingest_cmd(dsn, str(folder)))

    assert code == 0, err
    assert peak_mb < RSS_LIMIT_MB
    ((status, chunks, needle),) = query(
        dsn,
        "SELECT d.status, count(c.id), count(c.id) FILTER (WHERE c.content LIKE %s)"
        " FROM pgrag.documents d JOIN pgrag.chunks c ON c.document_id = d.id GROUP BY d.id",
        ("%legacy billing cluster%",),
    )
    assert status == "ready" and chunks > 1000 and needle >= 1


def test_memory_stays_bounded_on_a_5200_row_sheet(dsn: str, tmp_path: Path) -> None:
    built = build_knowledge_base(tmp_path / "kb", huge_mb=0, big_sheet_rows=KB_ROWS)
    folder = tmp_path / "sheet"
    folder.mkdir()
    built["Finance/2024/Q4/Q4_Forecast.xlsx"].rename(folder / "forecast.xlsx")

    code, _, err, peak_mb = run_measured(ingest_cmd(dsn, str(folder)))

    assert code == 0, err
    assert peak_mb < RSS_LIMIT_MB
    ((status, chunks, last_row, stored_rows),) = query(
        dsn,
        "SELECT d.status, count(c.id), max(c.row_end),"
        " (SELECT count(*) FROM pgrag.sheet_rows r JOIN pgrag.units u ON u.id = r.unit_id"
        "   WHERE u.document_id = d.id AND u.title = 'Forecast')"
        " FROM pgrag.documents d JOIN pgrag.chunks c ON c.document_id = d.id"
        " WHERE c.sheet = 'Forecast' GROUP BY d.id",
    )
    assert status == "ready" and chunks > 100
    assert last_row == stored_rows == KB_ROWS + 1


# -------------------------------------------------------------------------------------- CLI


def summary_counts(stderr: str) -> dict[str, int]:
    """The numbers row under the outcome header of `pgrag ingest`'s summary table."""
    lines = stderr.splitlines()
    (at,) = [i for i, line in enumerate(lines) if re.search(r"\badded\b.*\bskipped\b", line)]
    names = re.findall(r"[a-z]+", lines[at])
    numbers = next(row for row in lines[at + 1 :] if re.search(r"\d", row))
    return dict(zip(names, map(int, re.findall(r"\d+", numbers)), strict=True))


def run_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_cli_ingest_prints_the_summary_and_why_files_failed(dsn: str, tmp_path: Path) -> None:
    docs = write_tree(
        tmp_path / "docs",
        {"notes.md": "# Notes\n\nMeeting notes.", "a.txt": "Alpha.", "bad.docx": broken(b"PK", 3)},
    )
    first = run_cli(ingest_cmd(dsn, str(docs)))
    assert first.returncode == 0, first.stderr
    assert summary_counts(first.stderr) == {
        "added": 2,
        "updated": 0,
        "unchanged": 0,
        "removed": 0,
        "failed": 1,
        "pending": 0,
        "skipped": 0,
    }
    (failed_line,) = [line for line in first.stderr.splitlines() if "bad.docx" in line]
    assert "failed" in failed_line and "CORRUPT_FILE" in failed_line and ".docx" in failed_line

    (docs / "a.txt").unlink()
    again = run_cli(ingest_cmd(dsn, str(docs)))
    assert again.returncode == 0, again.stderr
    counts = summary_counts(again.stderr)
    assert (counts["unchanged"], counts["removed"], counts["added"]) == (2, 1, 0)

    only_bad = write_tree(tmp_path / "bad", {"bad.pptx": broken(b"PK", 4)})
    none_ok = run_cli(ingest_cmd(dsn, str(only_bad)))
    assert none_ok.returncode == 1 and "CORRUPT_FILE" in none_ok.stderr


def test_cli_status_counts_one_document_and_unknown_ones(dsn: str, tmp_path: Path) -> None:
    docs = write_tree(
        tmp_path / "docs",
        {"notes.md": "# Notes\n\nMeeting notes.", "a.txt": "Alpha.", "bad.docx": broken(b"PK", 5)},
    )
    assert run_cli(ingest_cmd(dsn, str(docs))).returncode == 0
    base = pgrag_cmd("--database-url", dsn, "--embedding-model", HASH, "status")

    overall = run_cli(base)
    assert overall.returncode == 0, overall.stderr
    counts = {
        m[0]: int(m[1])
        for m in re.findall(
            r"^\s*(pending|processing|ready|failed)\s+\S\s+(\d+)", overall.stdout, re.M
        )
    }
    assert counts == {"pending": 0, "processing": 0, "ready": 2, "failed": 1}
    assert re.search(r"failed.*bad\.docx.*CORRUPT_FILE", overall.stdout)

    one = run_cli([*base, "notes.md"])
    assert one.returncode == 0, one.stderr
    fields = dict(re.findall(r"^\s*(\w+)\s+\S\s+(\S.*?)\s*$", one.stdout, re.M))
    assert fields["path"] == "notes.md" and fields["status"] == "ready"
    assert fields["chunks"] == "1" and fields["collection"] == "default"
    as_json = run_cli([*base, "notes.md", "--json"])
    assert '"status": "ready"' in as_json.stdout

    unknown = run_cli([*base, "no-such-file.txt"])
    assert unknown.returncode == 1 and unknown.stdout == ""
    (line,) = unknown.stderr.strip().splitlines()
    assert "NOT_FOUND" in line and "no-such-file.txt" in line
