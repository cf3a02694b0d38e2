"""Ingestion end to end on a real PostgreSQL with the deterministic hash embedder.

The test knowledge base is built and ingested once per module (read-only for the tests that
share it); edits, renames, deletions, failures and the CLI each get a fresh database."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.context import embed_text
from pgrag.ingest.pipeline import Outcome
from pgrag.tokens import count_tokens
from tests.fixtures.knowledge_base import (
    EXPECTED_ABSENT,
    EXPECTED_EMPTY,
    EXPECTED_FAILED,
    EXPECTED_FILES,
    EXPECTED_METADATA,
    EXPECTED_PAGE_TERMS,
    HUGE_TEXT_NEEDLE,
)
from tests.support.ingest import (
    CHUNK_TOKENS,
    GBK_PATH,
    HASH,
    HUGE_PATH,
    KB_HUGE_MB,
    KB_ROWS,
    OUTLINES,
    UNICODE_PATH,
    IngestedKB,
    _as_generated,
    documents,
    ingest,
    kb,  # noqa: F401 (a fixture)
    outcomes,
    query,
    squash,
    units_of,
)

pytestmark = pytest.mark.anyio


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
