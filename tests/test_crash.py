"""SIGKILL during ingestion: nothing half-written is ever visible, and the next run resumes.

`pgrag ingest` runs as a subprocess (deterministic hash embedder) on a folder with many
small files, a multi-megabyte text and a large sheet, and is killed at several points:
while it parses, while a written document waits for its vectors (`vectors_pending` > 0)
and at timed moments that land inside document transactions. After every kill the
database must be consistent; a final run must finish everything without redoing finished
documents.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from tests.support.commands import pgrag_cmd

MODEL = ["--embedding-model", "hash/384"]
# the embedder is instant; a tiny batch makes the embedding phase of big documents long
# enough (many cache round trips) to be caught in the act
SLOW = ["--embedding-batch-size", "4"]


def _make_folder(root: Path) -> Path:
    folder = root / "kb"
    folder.mkdir()
    for i in range(40):
        (folder / f"note_{i:02d}.md").write_text(
            f"# Note {i}\n\n" + f"Paragraph {i} about topic {i % 7}. " * 40, encoding="utf-8"
        )
    para = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. "
    with (folder / "zz_big.txt").open("w", encoding="utf-8") as f:  # after the notes
        for i in range(12_000):  # ~1 MB
            f.write(f"{i}: {para}\n\n")
    lines = ["id,name,amount"] + [f"{i},item {i},{i * 3}" for i in range(6000)]
    (folder / "sheet.csv").write_text("\n".join(lines), encoding="utf-8")
    return folder


def _start(dsn: str, folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        pgrag_cmd("--database-url", dsn, *MODEL, *SLOW, "ingest", "-q", str(folder)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _kill_when(proc: subprocess.Popen[str], ready: Callable[[], bool], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if ready():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            return True
        time.sleep(0.02)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    return False


def _query(dsn: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


CONSISTENCY_SQL = """
SELECT d.path, d.status,
       count(c.id) AS chunks,
       coalesce(max(c.ordinal), 0) AS max_ordinal,
       count(e.chunk_id) AS embedded,
       d.vectors_pending
FROM pgrag.documents d
LEFT JOIN pgrag.chunks c ON c.document_id = d.id
LEFT JOIN pgrag.collections col ON col.id = d.collection_id
LEFT JOIN pgrag.embeddings e ON e.chunk_id = c.id AND e.set_id = col.active_set_id
GROUP BY d.path, d.status, d.vectors_pending
"""


def _assert_consistent(dsn: str, *, embedded_all: bool = False) -> None:
    """Every visible version is whole: chunks numbered 1..n, each with its embedding or
    counted in the document's vectors_pending (what the next run embeds); a ready
    document has its units; no path appears twice."""
    rows = _query(dsn, CONSISTENCY_SQL)
    paths = [r[0] for r in rows]
    assert len(paths) == len(set(paths)), "duplicate documents"
    for path, status, chunks, max_ordinal, embedded, pending in rows:
        assert chunks == max_ordinal, (
            f"{path}: chunk ordinals have gaps ({chunks} of {max_ordinal})"
        )
        assert embedded + pending == chunks, f"{path}: {chunks - embedded} chunks uncounted"
        if embedded_all:
            assert pending == 0, f"{path}: {pending} chunks without an embedding"
        if status == "ready":  # every file of this folder has text
            assert chunks > 0, f"{path}: ready without chunks"
    orphans = _query(
        dsn,
        "SELECT count(*) FROM pgrag.units u LEFT JOIN pgrag.chunks c ON c.unit_id = u.id"
        " JOIN pgrag.documents d ON d.id = u.document_id"
        " WHERE d.status = 'ready' GROUP BY d.id HAVING count(c.id) = 0",
    )
    assert not orphans, "a ready document has units but no chunks"


def test_sigkill_at_several_points_never_leaves_half_a_document(dsn: str, tmp_path: Path) -> None:
    folder = _make_folder(tmp_path)

    # 1. early: the first document row appears (the big files are still ahead)
    proc = _start(dsn, folder)
    _kill_when(proc, lambda: bool(_query(dsn, "SELECT 1 FROM pgrag.documents LIMIT 1")))
    _assert_consistent(dsn)

    # 2. between the phases: a document is written and waits for its vectors
    proc = _start(dsn, folder)
    caught = _kill_when(
        proc,
        lambda: bool(
            _query(
                dsn, "SELECT 1 FROM pgrag.documents WHERE status = 'ready' AND vectors_pending > 0"
            )
        ),
    )
    _assert_consistent(dsn)
    assert caught, "never saw a document between the phases: the test no longer exercises it"

    # 3. timed kills that land inside parsing, embedding or a version's transaction
    for delay in (2.5, 4.0, 6.0):
        proc = _start(dsn, folder)
        time.sleep(delay)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        _assert_consistent(dsn)

    ready_before = {
        r[0] for r in _query(dsn, "SELECT path FROM pgrag.documents WHERE status = 'ready'")
    }
    assert ready_before, "nothing finished across the killed runs"

    # 4. a full run resumes: finished documents are unchanged, everything ends ready
    final = subprocess.run(
        pgrag_cmd("--database-url", dsn, *MODEL, "ingest", str(folder)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert final.returncode == 0, final.stderr
    _assert_consistent(dsn, embedded_all=True)
    statuses = dict(_query(dsn, "SELECT path, status FROM pgrag.documents"))
    assert set(statuses) == {p.name for p in folder.iterdir()}
    assert set(statuses.values()) == {"ready"}
    summary = final.stderr
    unchanged = int(_summary_value(summary, "unchanged"))
    assert unchanged >= len(ready_before), summary


def _summary_value(table: str, column: str) -> str:
    """The number under `column` in the rich summary table printed on stderr."""
    lines = [ln for ln in table.splitlines() if column in ln]
    header = lines[0]
    cols = [c.strip() for c in header.replace("┃", "|").split("|")]
    values_line = next(
        ln
        for ln in table.splitlines()[table.splitlines().index(header) + 1 :]
        if any(ch.isdigit() for ch in ln)
    )
    values = [v.strip() for v in values_line.replace("│", "|").split("|")]
    return values[cols.index(column)]


def test_two_processes_ingesting_one_folder_at_once(dsn: str, tmp_path: Path) -> None:
    """Concurrent runs over the same folder: no duplicates, no deadlock, every file ready."""
    folder = tmp_path / "shared"
    folder.mkdir()
    for i in range(30):
        (folder / f"doc_{i:02d}.md").write_text(
            f"# Doc {i}\n\n" + f"Body {i}. " * 200, encoding="utf-8"
        )
    procs = [
        subprocess.Popen(
            pgrag_cmd("--database-url", dsn, *MODEL, "ingest", "-q", str(folder)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    _assert_consistent(dsn, embedded_all=True)
    rows = _query(dsn, "SELECT status, count(*) FROM pgrag.documents GROUP BY status")
    assert rows == [("ready", 30)]
    assert _query(dsn, "SELECT count(*) FROM pgrag.embedding_sets") == [(1,)]
