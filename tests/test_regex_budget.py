"""The regex ranking's budget is the operator's setting, PGRAG_REGEX_TIMEOUT_MS: through the
real CLI, a backtracking pattern ends TIMEOUT with a message that names the setting to raise,
an ordinary pattern under the same budget still answers, and a bad value stops start-up."""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database

MODEL = ["--embedding-model", "hash/384"]
HOSTILE_REGEX = "(.|..)+#|e"  # backtracks at every start in text without '#'
BUDGET_MS = "100"
DOCUMENTS = 60  # ~180 KB: the hostile pattern needs about ten times the budget
TICKET = "QX-4821"  # planted in one document for the ordinary regex to find
SENTENCE = (
    "the contract renews every year unless either party sends notice before the term ends "
    "employees receive leave pay overtime and travel expenses under the staff handbook"
)


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.update(PGRAG_HOME=str(tmp / "home"), OMP_NUM_THREADS="1", COLUMNS="200", **extra)
    return env


def _pgrag(dsn: str, tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        pgrag_cmd("--database-url", dsn, *MODEL, *args),
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(tmp, **env),
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _prose(rng: random.Random, chars: int) -> str:
    """Sentences with no '#': the hostile pattern backtracks from every position."""
    words = SENTENCE.split()
    out: list[str] = []
    while sum(map(len, out)) < chars:
        out.append(" ".join(rng.choice(words) for _ in range(12)).capitalize() + ".")
    return " ".join(out)


@pytest.fixture(scope="module")
def corpus(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("regex-budget")
    folder = tmp / "notes"
    folder.mkdir()
    rng = random.Random(5)
    for i in range(DOCUMENTS):
        ticket = f"\n\nSee ticket {TICKET}." if i == 0 else ""
        (folder / f"note_{i:02d}.txt").write_text(_prose(rng, 3000) + ticket, encoding="utf-8")
    dsn = create_database(server_dsn)
    assert _pgrag(dsn, tmp, "ingest", "-q", str(folder)).returncode == 0
    yield dsn, tmp
    drop_database(server_dsn, dsn)


@pytest.mark.parametrize("given_as", ["flag", "environment"])
def test_a_backtracking_regex_ends_timeout_naming_the_setting(
    corpus: tuple[str, Path], given_as: str
) -> None:
    dsn, tmp = corpus
    search = ("search", "--mode", "regex", HOSTILE_REGEX)
    if given_as == "flag":
        proc = _pgrag(dsn, tmp, "--regex-timeout-ms", BUDGET_MS, *search)
    else:
        proc = _pgrag(dsn, tmp, *search, PGRAG_REGEX_TIMEOUT_MS=BUDGET_MS)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("pgrag: TIMEOUT: ")
    assert f"longer than {BUDGET_MS} ms (PGRAG_REGEX_TIMEOUT_MS)" in proc.stderr


def test_an_ordinary_regex_answers_under_the_same_budget(corpus: tuple[str, Path]) -> None:
    dsn, tmp = corpus
    proc = _pgrag(
        dsn,
        tmp,
        "search",
        "--mode",
        "regex",
        "--json",
        r"qx-[0-9]{4}",
        PGRAG_REGEX_TIMEOUT_MS=BUDGET_MS,
    )
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)["results"]
    assert [Path(h["path"]).name for h in hits] == ["note_00.txt"]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("49", "greater than or equal to 50"),
        ("60001", "less than or equal to 60000"),
        ("1s", "valid integer"),
    ],
)
def test_a_bad_budget_stops_the_server_at_start_up(tmp_path: Path, value: str, reason: str) -> None:
    unreachable = "postgresql://pgrag@127.0.0.1:1/none"  # a broken check fails fast, not hangs
    proc = subprocess.run(
        pgrag_cmd("--database-url", unreachable, "serve", "--transport", "http"),
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(tmp_path, PGRAG_REGEX_TIMEOUT_MS=value),
    )
    assert proc.returncode == 2
    message = proc.stderr.strip()
    assert message.startswith("pgrag: configuration error: PGRAG_REGEX_TIMEOUT_MS: ")
    assert reason in message
    assert "\n" not in message
