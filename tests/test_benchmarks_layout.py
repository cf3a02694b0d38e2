"""benchmarks/ stays a house one can walk: a folder per question, each with a README that
names every script it holds, no file over the module cap, and every benchmark path the docs
name still there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
MAX_LINES = 400  # the cap tests/test_lint.py keeps for pgrag/
NOT_QUESTIONS = {"results", "docbench", "__pycache__"}  # data and shared builders


def _questions() -> list[Path]:
    return sorted(d for d in BENCH.iterdir() if d.is_dir() and d.name not in NOT_QUESTIONS)


def test_no_benchmark_file_is_over_the_cap() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in BENCH.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these by concern: {long}"


def test_every_question_has_a_readme_naming_its_scripts_and_the_index_lists_it() -> None:
    index = (BENCH / "README.md").read_text(encoding="utf-8")
    assert _questions(), "benchmarks/ has its question folders"
    for folder in _questions():
        readme = folder / "README.md"
        assert readme.exists(), f"{folder.name}/ has no README.md"
        text = readme.read_text(encoding="utf-8")
        for script in folder.glob("*.py"):
            assert f"`{script.name}`" in text, f"{folder.name}/README.md omits {script.name}"
        assert f"]({folder.name}/README.md)" in index, f"the index omits {folder.name}/"
    assert not list(BENCH.glob("*.py"))[1:], "only support.py sits at the top of benchmarks/"


def test_every_benchmark_path_the_docs_name_exists() -> None:
    retired = ROOT / "docs" / "studies.md"  # names scripts that live in the history only
    docs = [p for p in (ROOT / "docs").glob("*.md") if p != retired]
    pages = [ROOT / "README.md", *docs, *BENCH.rglob("*.md")]
    pages += [*(ROOT / "tests").glob("*.py"), *(ROOT / "pgrag").rglob("*.py")]
    named = {
        m
        for page in pages
        for m in re.findall(r"benchmarks/[\w/]+\.(?:py|md|jsonl)", page.read_text("utf-8"))
    }
    assert len(named) > 20
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"named but gone: {missing}"
