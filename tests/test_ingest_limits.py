"""What one parsed file may cost the server (docs/ingest-limits.md): a small file that
expands inside every parser bound (a 758-byte ODS repeating a 2,000-character row 20,000
times) fails TOO_LARGE without growing the server; empty sheet rows never become chunks;
the work over every chunk of a large document runs off the event loop."""

from __future__ import annotations

import dataclasses
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx2
import pytest

from pgrag.errors import ErrorCode
from pgrag.ingest.bounds import OutputLimits
from pgrag.ingest.parse_worker import ParseWorker, _Request
from pgrag.ingest.parsers.base import ParseError
from pgrag.ingest.prepare import PreparedDocument
from pgrag.ingest.results import Outcome
from pgrag.ingest.walker import FoundFile
from tests.support.ingest import documents, ingest, outcomes, query
from tests.support.kb_server import http_server
from tests.test_hostile_files import ODS_MANIFEST, rows, run_ingest

WAIT_S = 600  # a deadline for the run to end, never a measured time
SERVER_GROWTH_BOUND = 256 << 20  # three such uploads grew the server by 1.15 GB


def amplifying_ods(path: Path, repeat: int = 20_000, width: int = 2_000) -> None:
    """Under a kilobyte: one row of a `width`-character cell, repeated `repeat` times."""
    cell = ("amplified " * (width // 10 + 1))[:width]
    content = (
        '<?xml version="1.0" encoding="UTF-8"?><office:document-content '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body>'
        '<office:spreadsheet><table:table table:name="S">'
        f'<table:table-row table:number-rows-repeated="{repeat}">'
        f'<table:table-cell office:value-type="string"><text:p>{cell}</text:p>'
        "</table:table-cell></table:table-row></table:table></office:spreadsheet>"
        "</office:body></office:document-content>"
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        z.writestr("META-INF/manifest.xml", ODS_MANIFEST)
        z.writestr("content.xml", content)


def sparse_xlsx(path: Path) -> None:
    """About 1.5 KB: cells in rows 1 and 1,048,576 only."""
    from openpyxl import Workbook

    wb = Workbook()
    wb.active["A1"] = "heading"
    wb.active["A1048576"] = "lastrowmarker"
    wb.save(path)


def peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _wait_done(dsn: str, paths: list[str]) -> dict[str, tuple[Any, ...]]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        docs = documents(dsn)
        if all(p in docs and docs[p][1] in ("ready", "failed") for p in paths):
            return docs
        time.sleep(0.2)
    pytest.fail(f"the uploads did not end: {documents(dsn)}")


def test_amplifying_ods_uploads_fail_too_large_and_the_server_stays_small(
    dsn: str, tmp_path: Path
) -> None:
    hostile = tmp_path / "amplified.ods"
    amplifying_ods(hostile)
    assert hostile.stat().st_size < 1024
    env = {"PGRAG_READ_ONLY": "false", "PGRAG_TOOLSETS": "core,write"}
    env["PGRAG_HOME"] = str(tmp_path / "home")
    with (
        http_server(dsn, "--embedding-model", "hash/384", env=env) as server,
        httpx2.Client(base_url=server.base, timeout=60) as api,
    ):
        before = peak_rss(server.pid)
        names = [f"amplified{i}.ods" for i in range(3)]
        for name in names:
            files = {"file": (name, hostile.read_bytes(), "application/octet-stream")}
            assert api.post("/api/documents", files=files).status_code == 202
        docs = _wait_done(dsn, names)
        grown = peak_rss(server.pid) - before
    for name in names:
        _, status, code, detail = docs[name]
        assert (status, code) == ("failed", "TOO_LARGE"), docs[name]
        assert "characters of text" in detail, detail
    assert query(dsn, "SELECT count(*) FROM pgrag.chunks")[0][0] == 0
    assert grown < SERVER_GROWTH_BOUND, f"the server grew by {grown >> 20} MB"


def test_empty_sheet_rows_never_become_chunks(dsn: str, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    sparse_xlsx(kb / "sparse.xlsx")
    code, stderr, _ = run_ingest(dsn, kb)
    assert code == 0, stderr
    assert rows(dsn, "SELECT status FROM pgrag.documents") == [("ready",)]
    chunks = rows(dsn, "SELECT content, row_start, row_end FROM pgrag.chunks")
    assert chunks == [("heading\nlastrowmarker", 1_048_576, 1_048_576)], chunks[:3]


def test_the_chunk_bound_is_a_setting_named_in_the_reason(dsn: str, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "long.md").write_text(
        "\n\n".join(f"# Part {i}\n\nSection {i} says little." for i in range(3_000))
    )
    (kb / "short.md").write_text("# Short\n\nA short note about the quayside.\n")
    code, stderr, _ = run_ingest(dsn, kb, "--parse-max-chunks", "1000")
    assert code == 0, stderr
    docs = {
        p: (s, c, d)
        for p, s, c, d in rows(
            dsn, "SELECT path, status, error_code, error_detail FROM pgrag.documents"
        )
    }
    assert docs["short.md"][0] == "ready"
    status, code_, detail = docs["long.md"]
    assert (status, code_) == ("failed", "TOO_LARGE") and "PGRAG_PARSE_MAX_CHUNKS" in detail


class _TinyAnswer(OutputLimits):
    """Limits the worker passes, but whose answer the server takes at most 1 KB of."""

    def answer_bytes(self) -> int:
        return 1024


def test_the_server_refuses_an_answer_over_its_bound_before_reading_it(tmp_path: Path) -> None:
    from pgrag.ingest.ocr import OcrOptions

    (tmp_path / "a.txt").write_text("words of a plain file " * 2_000)
    found = FoundFile(tmp_path, tmp_path / "a.txt", "a.txt")
    request = _Request(found, found.sha256()[0], 350, 40, OcrOptions(), False, 0, _TinyAnswer())
    worker = ParseWorker(512)
    try:
        result = worker.prepare(request, None, 120)
    finally:
        worker.kill()
    assert isinstance(result, ParseError) and result.code == ErrorCode.TOO_LARGE, result
    assert "refused before it was read" in result.message
    assert not worker.alive()


@pytest.mark.anyio
async def test_the_work_over_every_chunk_runs_off_the_event_loop(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PreparedDocument.embed_texts (a large document's worth of string and token work)
    runs in a thread: on the loop it held /healthz for 5 s on a 45 MB upload."""
    loop_thread = threading.current_thread()
    threads: list[threading.Thread] = []
    original = PreparedDocument.embed_texts

    def recording(self: PreparedDocument) -> list[str]:
        threads.append(threading.current_thread())
        return original(self)

    monkeypatch.setattr(PreparedDocument, "embed_texts", recording)
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "big.txt").write_text("A line of the large upload with a few words.\n" * 20_000)
    summary = await ingest(dsn, [kb])
    assert [r.outcome for r in summary.results] == ["added"]
    assert threads and loop_thread not in threads, threads


def test_healthz_answers_while_a_large_upload_is_processed(dsn: str, tmp_path: Path) -> None:
    """Answered before the upload's ingestion ends (it still has vectors to write)."""
    env = {"PGRAG_READ_ONLY": "false", "PGRAG_TOOLSETS": "core,write"}
    env["PGRAG_HOME"] = str(tmp_path / "home")
    body = "".join(f"Line {i} of the large upload, with words to count.\n" for i in range(40_000))
    with (
        http_server(dsn, "--embedding-model", "hash/384", env=env) as server,
        httpx2.Client(base_url=server.base, timeout=120) as api,
    ):
        files = {"file": ("large.txt", body.encode(), "text/plain")}
        assert api.post("/api/documents", files=files).status_code == 202
        answered_while_busy = False
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            assert api.get("/healthz").status_code == 200
            state = query(
                dsn,
                "SELECT status, vectors_pending FROM pgrag.documents WHERE path = %s",
                ("large.txt",),
            )
            if state and state[0][0] == "ready" and state[0][1] == 0:
                break
            answered_while_busy = answered_while_busy or bool(state)
            time.sleep(0.05)
        else:
            pytest.fail("the upload was not ingested")
    assert answered_while_busy


def test_limits_follow_the_file_size() -> None:
    limits = dataclasses.replace(OutputLimits(), max_chars=64_000_000, max_chunks=50_000)
    assert limits.chunks_for(1024) == 1_000  # a 1 KB file: never 20,000 chunks
    assert limits.chars_for(758) == 4_000_000
    assert limits.chars_for(10 << 20) == 64_000_000
    assert limits.chunks_for(45 << 20) == 50_000


def _bytes_read() -> int:
    """Bytes this process has read through read() calls (sparse holes count)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


@pytest.mark.anyio
async def test_a_sparse_huge_file_fails_on_its_size_without_being_read(
    dsn: str, tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    with (kb / "sparse.txt").open("wb") as f:
        f.truncate(20 << 30)  # 20 GB of holes: no disk used, but 20 GB to hash
    (kb / "note.md").write_text("# Note\n\nThe sparsecheck note.\n")
    before = _bytes_read()
    await ingest(dsn, [kb])
    again = await ingest(dsn, [kb])
    read = _bytes_read() - before
    assert read < 1 << 30, f"{read >> 20} MB read"  # hashing it reads 20 GB a run
    docs = documents(dsn)
    assert docs["sparse.txt"][1:3] == ("failed", "TOO_LARGE"), docs
    assert docs["note.md"][1] == "ready"
    assert outcomes(again)["sparse.txt"] == Outcome.UNCHANGED  # not marked again either
