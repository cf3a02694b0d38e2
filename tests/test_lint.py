"""The habits .ci/run checks before the tests hold for the whole tree, so the README's test
command covers them too: ruff's lint and format rules, mypy (strict, pyproject.toml) over
pgrag/, the dependency rule (import-linter contracts in pyproject.toml), and the size limits
(no module over 400 lines, no function over 80, no test file over 600)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff_is_clean(args: list[str]) -> None:
    done = _run(sys.executable, "-m", "ruff", *args)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean() -> None:
    done = _run(sys.executable, "-m", "mypy", "pgrag")
    assert done.returncode == 0, done.stdout + done.stderr


def test_dependencies_point_one_way() -> None:
    done = _run(BIN / "lint-imports")
    assert done.returncode == 0, done.stdout + done.stderr


MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def _sizes() -> tuple[list[str], list[str]]:
    """Modules over MAX_MODULE_LINES and functions over MAX_FUNCTION_LINES in pgrag/."""
    modules, functions = [], []
    for path in sorted((ROOT / "pgrag").rglob("*.py")):
        source = path.read_text()
        name = path.relative_to(ROOT).as_posix()
        if (lines := len(source.splitlines())) > MAX_MODULE_LINES:
            modules.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    functions.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return modules, functions


def test_modules_and_functions_stay_small() -> None:
    """One job per module and per function: a newcomer reads either in one sitting."""
    modules, functions = _sizes()
    assert modules == [], f"modules over {MAX_MODULE_LINES} lines: split them: {modules}"
    assert functions == [], f"functions over {MAX_FUNCTION_LINES} lines: split them: {functions}"


MAX_SQL_FUNCTION_LINES = 80
SQL_FUNCTION = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([\w.]+)\s*\(.*?\bAS\s+(\$\w*\$)(.*?)\2",
    re.S | re.I,
)


def _sql_function_sizes() -> dict[str, int]:
    """Body lines (between the dollar quotes) of each function in sql/functions/."""
    sizes = {}
    for path in sorted((ROOT / "sql" / "functions").glob("*.sql")):
        for m in SQL_FUNCTION.finditer(path.read_text(encoding="utf-8")):
            sizes[f"{path.name} {m[1]}"] = len(m[3].strip("\n").splitlines())
    return sizes


def test_sql_functions_stay_small() -> None:
    """The Python rule for SQL too: a function of the ranking SQL reads in one sitting."""
    sizes = _sql_function_sizes()
    assert len(sizes) > 50 and "20_lexical.sql pgrag.lexical_candidates_in" in sizes
    over = {name: n for name, n in sizes.items() if n > MAX_SQL_FUNCTION_LINES}
    assert over == {}, f"SQL functions over {MAX_SQL_FUNCTION_LINES} lines: split them: {over}"


MAX_TEST_FILE_LINES = 600


def test_test_files_stay_small() -> None:
    """A test module is split by what it tests, its helpers and fixtures live in
    tests/support/: no file under tests/ is over MAX_TEST_FILE_LINES."""
    tests = ROOT / "tests"
    over = {
        str(p.relative_to(ROOT)): n
        for p in tests.rglob("*.py")
        if "node_modules" not in p.parts
        and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_TEST_FILE_LINES
    }
    assert over == {}, f"test files over {MAX_TEST_FILE_LINES} lines: split them: {over}"
