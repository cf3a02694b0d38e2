"""Changes to an ingested folder, failures, bounded memory and the ingest CLI."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from pgrag.embeddings.remote import LiteLLMProvider
from pgrag.ingest.pipeline import Outcome
from tests.fixtures.knowledge_base import (
    build_knowledge_base,
)
from tests.support.commands import pgrag_cmd
from tests.support.ingest import (
    HASH,
    HUGE_PATH,
    KB_ROWS,
    RSS_LIMIT_MB,
    NamedHashEmbedder,
    _paragraphs,
    _poll,
    _workbook,
    broken,
    documents,
    ingest,
    ingest_cmd,
    kb,  # noqa: F401 (a fixture)
    outcomes,
    query,
    run_cli,
    run_measured,
    summary_counts,
    write_tree,
)
from tests.support.servers import free_port

pytestmark = pytest.mark.anyio


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
