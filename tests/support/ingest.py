"""Helpers and fixtures of tests/test_ingest*.py."""

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

import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor, IngestSummary, Outcome
from pgrag.settings import load_settings
from tests.fixtures.knowledge_base import (
    KB_DIRNAME,
    build_knowledge_base,
    expected_outlines,
)
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database

HASH = "hash/384"


KB_HUGE_MB = 2  # the 10 MB file is ingested once, by the memory test


KB_ROWS = 5200


OUTLINES = expected_outlines(big_sheet_rows=KB_ROWS)


CHUNK_TOKENS = 350  # the Ingestor default the shared knowledge base is chunked with


RSS_LIMIT_MB = 600


GBK_PATH = "Sales/市场分析_GBK.txt"


UNICODE_PATH = "test-edge-cases/special_chars_文件名.txt"


HUGE_PATH = "test-edge-cases/huge_text.txt"


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


def _paragraphs(n: int, word: str) -> list[str]:
    return [
        f"Paragraph {i} explains {word} procedure number {i} for the warehouse." for i in range(n)
    ]


def _workbook(path: Path) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Stock"
    ws.append(["Item", "Count"])
    for i in range(30):
        ws.append([f"bolt {i}", i])
    wb.save(str(path))


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


class NamedHashEmbedder(HashEmbedder):
    """The hash test embedder under another model name: the provider "comes back up"."""

    def __init__(self, model: str, dimensions: int) -> None:
        super().__init__(f"hash/{dimensions}")
        self.model = model


# Measured from a small launcher: a child forked from the (large) pytest process carries the
# parent's resident set into its own peak until it execs, so wait4's ru_maxrss would report
# pytest's size, not pgrag's. argv: address-space limit in bytes (0: none), timeout in seconds
# (the command is killed then, exit status TIMED_OUT), the command.
LAUNCHER = (
    "import resource, subprocess, sys\n"
    "limit, timeout, args = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]\n"
    "if limit: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "try: rc = subprocess.call(args, timeout=timeout)\n"
    "except subprocess.TimeoutExpired: rc = 124\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(rc)"
)
TIMED_OUT = 124


def run_measured(
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    address_space: int = 0,
    timeout_s: float = 600.0,
) -> tuple[int, str, str, float]:
    """Run a command; return (exit code, stdout, stderr, peak RSS in MB) of that process and
    the children it waited for, under an address-space limit when one is given."""
    env = {**os.environ, "COLUMNS": "200", **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(address_space), str(timeout_s), *args],
        capture_output=True,
        text=True,
        env=env,
    )
    err, _, peak_kib = done.stderr.rstrip("\n").rpartition("\n")
    if not err and not peak_kib.strip().isdigit():
        err, peak_kib = peak_kib, "0"
    return done.returncode, done.stdout, err, int(peak_kib) / 1024  # KiB on Linux


def ingest_cmd(dsn: str, *args: str) -> list[str]:
    return pgrag_cmd("--database-url", dsn, "--embedding-model", HASH, "ingest", "--quiet", *args)


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
