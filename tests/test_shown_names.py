"""Names from an ingested folder holding ESC, RLO or a newline: `pgrag search`, `pgrag ingest`
and `pgrag status` show them with those characters as visible escapes (a name cannot recolour
the terminal, fake a line or reorder what is shown); `--json` keeps them exact."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.support.commands import pgrag_cmd

HOSTILE = {
    "esc\x1b[2J\x1b[31mred.md": "the escapeword note",
    "invoice\u202etxt.md": "the bidiword note",
    "two\nlines.md": "the newlineword note",
}
RAW = ("\x1b", "\u202e")


def _run(dsn: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.update(PGRAG_HOME=str(tmp / "home"), COLUMNS="200")
    proc = subprocess.run(
        pgrag_cmd("--database-url", dsn, "--embedding-model", "hash/384", *args),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_terminal_output_neutralises_control_and_bidi_characters(dsn: str, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in HOSTILE.items():
        (kb / name).write_text(f"# Note\n\n{text}.\n")
    (kb / "broken\x1b[31m.docx").write_bytes(b"PK\x03\x04 not a zip")  # a failure's name
    ingested = _run(dsn, tmp_path, "ingest", str(kb))
    assert not any(c in ingested.stderr + ingested.stdout for c in RAW), ingested.stderr
    assert "broken\\x1b[31m.docx" in ingested.stderr, ingested.stderr

    for word in ("escapeword", "bidiword", "newlineword"):
        table = _run(dsn, tmp_path, "search", "-m", "keyword", word)
        assert not any(c in table.stdout for c in RAW), repr(table.stdout)
    shown = _run(dsn, tmp_path, "search", "-m", "keyword", "escapeword").stdout
    assert "esc\\x1b[2J\\x1b[31mred.md" in shown.replace("\n", "").replace("│", ""), shown
    bidi = _run(dsn, tmp_path, "search", "-m", "keyword", "bidiword").stdout
    assert "invoice\\u202etxt.md" in bidi, bidi
    newline = _run(dsn, tmp_path, "search", "-m", "keyword", "newlineword").stdout
    assert "two\\nlines.md" in newline, newline

    exact = json.loads(
        _run(dsn, tmp_path, "search", "--json", "-m", "keyword", "escapeword").stdout
    )
    assert exact["results"][0]["name"] == "esc\x1b[2J\x1b[31mred.md"  # exact

    status = _run(dsn, tmp_path, "status")
    assert not any(c in status.stdout for c in RAW), repr(status.stdout)
