"""The habits .ci/run checks before the tests hold for the whole tree, so the README's test
command covers them too: ruff's lint and format rules, mypy (strict, pyproject.toml) over
pgrag/, and the dependency rule (import-linter contracts in pyproject.toml)."""

from __future__ import annotations

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
