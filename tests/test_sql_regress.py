"""SQL regression tests in the pg_regress style (as pgvector's test/sql and test/expected):
each tests/sql/input/NAME.sql runs through psql (echoing every statement) against a fresh
migrated database, and its output must equal tests/sql/expected/NAME.out byte for byte.

After an intended change, regenerate the expected files and read their diff:

    SQL_REGRESS_UPDATE=1 pytest tests/test_sql_regress.py
    git diff tests/sql/expected
"""

from __future__ import annotations

import difflib
import os
import subprocess
from pathlib import Path

import pytest

from pgrag.db.embedded import psql_path

SQL = Path(__file__).resolve().parent / "sql"
INPUTS = sorted((SQL / "input").glob("*.sql"))
# psql as pg_regress runs it: no psqlrc, every input line echoed, errors in the output
PSQL_FLAGS = ["-X", "-a", "-q", "-v", "VERBOSITY=terse"]


def run_psql(dsn: str, script: Path) -> str:
    """The script's echoed output and errors (stdin, from tests/sql: `\\i setup/...`)."""
    env = {**os.environ, "PGTZ": "UTC", "PGDATESTYLE": "ISO, MDY", "LC_MESSAGES": "C"}
    with script.open(encoding="utf-8") as stdin:
        done = subprocess.run(
            [str(psql_path()), dsn, *PSQL_FLAGS],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # errors where they happen, as pg_regress shows them
            text=True,
            timeout=120,
            cwd=SQL,
            env=env,
            check=False,
        )
    return done.stdout


def false_checks(out: str) -> list[str]:
    """The rows of psql's aligned output holding a false boolean: the inputs' checks
    (`... AS same_score`) are the only booleans they print, so each must read `t`."""
    return [line for line in out.splitlines() if "f" in (c.strip() for c in line.split("|"))]


def test_a_false_check_is_caught() -> None:
    assert false_checks(" 3 | f\n 4 | t\n") == [" 3 | f"]
    assert false_checks(" f\n") == [" f"]
    assert not false_checks(" tea | t\n fused | 0.5\n")


def test_every_input_has_an_expected_output() -> None:
    assert INPUTS, "no SQL regression inputs"
    expected = {p.stem for p in (SQL / "expected").glob("*.out")}
    assert expected == {p.stem for p in INPUTS}


@pytest.mark.parametrize("script", INPUTS, ids=[p.stem for p in INPUTS])
def test_sql_output_matches_expected(dsn: str, script: Path) -> None:
    out = run_psql(dsn, script)
    expected = SQL / "expected" / f"{script.stem}.out"
    # a check that turned false must fail, not be written into the expected output as `f`
    assert not (false := false_checks(out)), f"{script.name}: checks false: {false}"
    if os.environ.get("SQL_REGRESS_UPDATE") == "1":
        # an error the expected output did not hold is a broken input, not a new expectation
        errors = expected.read_text(encoding="utf-8").count("ERROR:") if expected.exists() else 0
        assert out.count("ERROR:") <= errors, f"{script.name}: new errors:\n{out}"
        expected.write_text(out, encoding="utf-8")
    want = expected.read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(
            want.splitlines(keepends=True),
            out.splitlines(keepends=True),
            f"expected/{expected.name}",
            f"actual/{expected.name}",
        )
    )
    assert out == want, diff
