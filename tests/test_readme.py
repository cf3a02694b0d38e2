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
