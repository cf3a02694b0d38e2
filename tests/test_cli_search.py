"""`pgrag search` for a person at a terminal: `--limit N` shows N rows (the MCP token budget
does not apply unless asked for), the title says what its number counts (matches only when
they are matches), and `--explain` fits an 80-column terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database

ROOT = Path(__file__).resolve().parents[1]
MODEL = ["--embedding-model", "hash/384"]
ROW = re.compile(r"^│\s*(\d+)\s*│")


def _env(tmp: Path, columns: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.update(PGRAG_HOME=str(tmp / "home"), OMP_NUM_THREADS="1", COLUMNS=str(columns))
    return env


def _pgrag(dsn: str, tmp: Path, *args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        pgrag_cmd("--database-url", dsn, *MODEL, *args),
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(tmp, columns),
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def _ranks(proc: subprocess.CompletedProcess[str]) -> list[int]:
    return [int(m.group(1)) for ln in proc.stdout.splitlines() if (m := ROW.match(ln))]


def _title(proc: subprocess.CompletedProcess[str]) -> str:
    return next(ln.strip() for ln in proc.stdout.splitlines() if " search: " in ln)


@pytest.fixture(scope="module")
def kb(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The shipped sample folder plus three notes that name an aardvark."""

    tmp = tmp_path_factory.mktemp("cli-search")
    notes = tmp / "notes"
    notes.mkdir()
    for i in range(3):
        (notes / f"aardvark-{i}.md").write_text(
            f"# Note {i}\n\nThe aardvark digs burrow number {i}.\n", encoding="utf-8"
        )
    dsn = create_database(server_dsn)
    for folder, collection in ((ROOT / "examples" / "sample", "default"), (notes, "default")):
        _pgrag(dsn, tmp, "ingest", "-q", "-c", collection, str(folder))
    yield dsn
    drop_database(server_dsn, dsn)


def test_limit_shows_that_many_rows_and_how_many_more(kb: str, tmp_path: Path) -> None:
    proc = _pgrag(kb, tmp_path, "search", "how are contracts signed?", "--limit", "10")
    assert _ranks(proc) == list(range(1, 11)), proc.stdout
    total = int(re.search(r"10 of (\d+) ranked chunks", _title(proc)).group(1))
    assert total > 10
    assert f"{total - 10} more: --limit {min(total, 50)}" in proc.stderr

    as_json = json.loads(
        _pgrag(kb, tmp_path, "search", "how are contracts signed?", "-n", "10", "--json").stdout
    )
    assert len(as_json["results"]) == 10


def test_an_explicit_token_budget_says_what_it_cut(kb: str, tmp_path: Path) -> None:
    proc = _pgrag(
        kb, tmp_path, "search", "how are contracts signed?", "-n", "10", "--max-tokens", "300"
    )
    shown = len(_ranks(proc))
    assert 1 <= shown < 10
    assert f"the --max-tokens budget (300) holds {shown} of the 10 asked for" in proc.stderr


def test_matches_are_counted_only_where_they_are_matches(kb: str, tmp_path: Path) -> None:
    keyword = _pgrag(kb, tmp_path, "search", "aardvark", "--mode", "keyword")
    assert _title(keyword).startswith("keyword search: 3 of 3 matching chunks"), keyword.stdout

    hybrid = _pgrag(kb, tmp_path, "search", "aardvark")
    title = _title(hybrid)
    assert "match" not in title, title  # every chunk is ranked by meaning: no match count
    assert re.match(r"hybrid search: 5 of \d+ ranked chunks", title), title

    semantic = _pgrag(kb, tmp_path, "search", "aardvark", "--mode", "semantic")
    assert re.match(r"semantic search: 5 of \d+ nearest chunks", _title(semantic))


def test_explain_fits_an_80_column_terminal(kb: str, tmp_path: Path) -> None:
    proc = _pgrag(
        kb,
        tmp_path,
        "search",
        "how are contracts signed? 合同如何签署",
        "--explain",
        "--limit",
        "10",
        columns=80,
    )
    wide = [ln for ln in (proc.stdout + proc.stderr).splitlines() if cell_len(ln) > 80]
    assert not wide, "\n".join(wide)
    header = next(ln for ln in proc.stdout.splitlines() if "document" in ln)
    for column in ("#", "document", "lexical", "semantic", "score"):
        assert column in header, header
    assert _ranks(proc) == list(range(1, 11))
    assert "explain_search(" in proc.stderr
