"""The README's promises and the configuration page: the generated settings table, the
CI command and the quick start match the code."""

from __future__ import annotations

import re
from pathlib import Path

from pgrag.settings_table import END, PAGE, START, configuration_table, with_table

ROOT = Path(__file__).resolve().parents[1]


def test_configuration_table_is_generated_from_settings() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- config-table:start -->\n(.*?)\n<!-- config-table:end -->", page, re.S)
    assert m, "docs/configuration.md lost its configuration table markers"
    assert m.group(1).strip() == configuration_table().strip(), (
        "configuration table drifted: regenerate it with `python -m pgrag.settings_table`"
    )


def test_the_generator_rewrites_only_the_table() -> None:
    page = PAGE.read_text(encoding="utf-8")
    head, _, rest = page.partition(START)
    tail = rest.partition(END)[2]
    stale = f"{head}{START}\n| a stale row |\n{END}{tail}"
    assert with_table(stale) == f"{head}{START}\n{configuration_table()}\n{END}{tail}"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    test_cmd = next(b for b in blocks if b.strip().startswith("scripts/test")).strip()
    assert test_cmd in ci.splitlines()
    assert (ROOT / test_cmd.split()[0]).stat().st_mode & 0o111, "the test command is executable"


def test_quick_start_uses_the_shipped_sample_folder() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.findall(r"```bash\n(.*?)\n```", readme, re.S)[0]
    assert "pgrag ingest examples/sample" in first
    assert any((ROOT / "examples" / "sample").iterdir())


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_docs_close_their_code_blocks_and_their_links_resolve() -> None:
    pages = [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "benchmarks").rglob("*.md"),
    ]
    broken = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        fences = [ln for ln in text.splitlines() if ln.startswith("```")]
        assert len(fences) % 2 == 0, f"{page.relative_to(ROOT)} leaves a code block open"
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for link in re.findall(r"\]\(([^)\s]+)\)", prose):
            path, _, fragment = link.partition("#")
            if link.startswith(("http://", "https://", "mailto:")):
                continue
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link}")
            elif fragment and target.suffix == ".md":
                headings = re.findall(r"^#+ (.*)$", target.read_text(encoding="utf-8"), re.M)
                if fragment not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.relative_to(ROOT)}: {link}")
    assert not broken, broken


def test_every_guarantee_names_tests_that_exist() -> None:
    page = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    promises = page.count("\n### ")
    assert promises >= 40 and len(re.findall(r"`tests/[\w/]+\.(?:py|sql)", page)) >= promises
    pages = [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "benchmarks").rglob("*.md"),
    ]
    for doc in pages:
        text = doc.read_text(encoding="utf-8")
        for path in re.findall(r"`(tests/[\w/]+\.(?:py|sql))", text):
            assert (ROOT / path).exists(), f"{doc.relative_to(ROOT)} names {path}, which is gone"
        for name, function in re.findall(r"`(?:tests/)?(test_\w+\.py)::(\w+)`", text):
            source = (ROOT / "tests" / name).read_text(encoding="utf-8")
            assert re.search(rf"def {function}\(", source), (
                f"{doc.relative_to(ROOT)}: tests/{name} has no {function}"
            )
