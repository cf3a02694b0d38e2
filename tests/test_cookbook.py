"""Every ```sql block of docs/psql-cookbook.md runs as written against a database with a
few ingested documents (one of them failed) and one logged search."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.support.commands import pgrag_cmd

ROOT = Path(__file__).resolve().parents[1]
COOKBOOK = ROOT / "docs" / "psql-cookbook.md"
MODEL = ["--embedding-model", "hash/384"]


def sql_blocks() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", COOKBOOK.read_text(encoding="utf-8"), re.S)


def statements(block: str) -> list[str]:
    """Statements end with `;` at the end of a line (the cookbook's style)."""
    parts = re.split(r";[ \t]*(?:--[^\n]*)?\n", block + "\n")
    return [p.strip() for p in parts if re.sub(r"--[^\n]*", "", p).strip()]


def _run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.update(PGRAG_HOME=str(home), OMP_NUM_THREADS="1")
    return subprocess.run(pgrag_cmd(*args), capture_output=True, text=True, timeout=180, env=env)


@pytest.fixture
def cookbook_dsn(dsn: str, tmp_path: Path) -> str:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "contracts.md").write_text(
        "# Contracts\n\nContract signing: both parties sign the contract before work starts.\n"
        "\n## 合同\n\n合同签署流程：双方签字后生效。\n",
        encoding="utf-8",
    )
    (folder / "travel.txt").write_text(
        "Travel expenses are reimbursed within 30 days of signing the expense report.",
        encoding="utf-8",
    )
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7 this is not really a pdf")
    ingest = _run("--database-url", dsn, *MODEL, "ingest", "-q", str(folder), home=tmp_path)
    assert ingest.returncode == 0, ingest.stderr
    search = _run("--database-url", dsn, *MODEL, "search", "contract signing", home=tmp_path)
    assert search.returncode == 0, search.stderr
    with psycopg.connect(dsn, autocommit=True) as conn:  # a table source (its recipe)
        conn.execute(
            "CREATE TABLE tickets (id int PRIMARY KEY, subject text, body text, customer text)"
        )
        conn.execute(
            "INSERT INTO tickets VALUES (1, 'Printer', 'The printer jams on page two', 'acme'),"
            " (2, 'Login', 'Password reset mail never arrives', 'globex')"
        )
    for args in (
        ("source", "add", "tickets", "--text", "body", "--title", "subject"),
        ("source", "sync"),
    ):
        done = _run("--database-url", dsn, *MODEL, *args, home=tmp_path)
        assert done.returncode == 0, done.stderr
    return dsn


def test_the_cookbook_has_the_promised_recipes() -> None:
    text = " ".join(sql_blocks())
    for needle in (
        "pgrag.explain_search",
        "pgrag.hybrid_search(",
        "status IN ('failed', 'pending')",
        "pg_indexes",
        "pg_relation_size",
        "hnsw.ef_search",
        "pgrag.disable_chunk(",
    ):
        assert needle in text, needle
    assert "pgrag reindex --collection" in COOKBOOK.read_text(encoding="utf-8")
    assert "docs/psql-cookbook.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    for block in sql_blocks():
        assert not re.search(r"<[a-z_ ]+>|(?<!:):[a-z_]\w*|\$\d|%s|%\(", block), (
            f"placeholder in:\n{block}"
        )


def test_every_sql_block_runs_and_returns_rows(cookbook_dsn: str) -> None:
    blocks = sql_blocks()
    assert len(blocks) >= 10
    ran = 0
    with psycopg.connect(cookbook_dsn, autocommit=True) as conn:
        for block in blocks:
            for stmt in statements(block):
                cur = conn.execute(stmt)  # type: ignore[arg-type]  # literal SQL from the docs
                ran += 1
                if cur.description is not None:
                    rows = cur.fetchall()
                    assert rows, f"no rows from:\n{stmt}"
    assert ran >= 15


def test_explain_search_reproduces_the_logged_ranking(cookbook_dsn: str) -> None:
    """The first recipe's promise: today's rank equals the logged one when nothing changed."""
    explain = next(b for b in sql_blocks() if "explain_search((SELECT max(id)" in b)
    with psycopg.connect(cookbook_dsn, autocommit=True) as conn:
        cur = conn.execute(statements(explain)[0])  # type: ignore[arg-type]
        cols = [c.name for c in cur.description or []]
        rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    logged = [r for r in rows if r["logged_rank"] is not None]
    assert logged, rows
    assert all(r["rank"] == r["logged_rank"] for r in logged)


def test_failed_ingestion_recipe_names_the_broken_file(cookbook_dsn: str) -> None:
    failures = next(b for b in sql_blocks() if "status IN ('failed', 'pending')" in b)
    with psycopg.connect(cookbook_dsn, autocommit=True) as conn:
        rows = conn.execute(statements(failures)[0]).fetchall()  # type: ignore[arg-type]
    assert [(r[1], r[2]) for r in rows] == [("broken.pdf", "failed")]
    assert rows[0][3]  # an error code
