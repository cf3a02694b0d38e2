"""A document whose writer died stays `processing` no more: the next start (`pgrag serve`,
or an ingest run of its collection) marks it failed with INTERRUPTED, unless a live writer
still holds it (store/interrupted.py)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx2
import psycopg
import pytest

from pgrag.store import interrupted
from tests.support.ingest import documents, ingest, query
from tests.support.kb_server import http_server

WAIT_S = 300  # a deadline for a state to come, never a measured time


def _wait_status(dsn: str, path: str, wanted: set[str]) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        rows = query(dsn, "SELECT status FROM pgrag.documents WHERE path = %s", (path,))
        if rows and rows[0][0] in wanted:
            return str(rows[0][0])
        time.sleep(0.005)
    pytest.fail(f"{path} never became {wanted}: {documents(dsn).get(path)}")


def test_an_upload_killed_while_it_is_written_is_failed_at_the_next_start(
    dsn: str, tmp_path: Path
) -> None:
    env = {"PGRAG_READ_ONLY": "false", "PGRAG_TOOLSETS": "core,write"}
    env["PGRAG_HOME"] = str(tmp_path / "home")
    flags = ("--embedding-model", "hash/384")
    body = "".join(f"Paragraph {i} of the upload, in plain words.\n\n" for i in range(120_000))
    with (
        http_server(dsn, *flags, env=env) as server,
        httpx2.Client(base_url=server.base, timeout=120) as api,
    ):
        files = {"file": ("killed.txt", body.encode(), "text/plain")}
        assert api.post("/api/documents", files=files).status_code == 202
        _wait_status(dsn, "killed.txt", {"processing"})
        os.kill(server.pid, signal.SIGKILL)
    assert _wait_status(dsn, "killed.txt", {"processing", "ready"}) == "processing"
    with http_server(dsn, *flags, env=env):
        assert _wait_status(dsn, "killed.txt", {"failed"}) == "failed"
    (_, _, code, detail) = documents(dsn)["killed.txt"]
    assert code == "INTERRUPTED" and "killed" in detail, detail


@pytest.mark.anyio
async def test_a_document_with_a_live_writer_is_left_alone(dsn: str, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "doc.md").write_text("# Doc\n\nThe writerheld text.\n")
    await ingest(dsn, [kb])
    ((cid,),) = query(dsn, "SELECT collection_id FROM pgrag.documents")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgrag.documents SET status = 'processing'")
    async with (
        await psycopg.AsyncConnection.connect(dsn, autocommit=True) as writer,
        await psycopg.AsyncConnection.connect(dsn, autocommit=True) as starter,
    ):
        async with interrupted.writing(writer, cid, "doc.md"):
            assert await interrupted.fail_interrupted(starter) == []
        assert await interrupted.fail_interrupted(starter) == ["doc.md"]
    assert documents(dsn)["doc.md"][1:3] == ("failed", "INTERRUPTED")
