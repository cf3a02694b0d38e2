"""An evaluation of two ranking settings side by side in headless Chromium: each metric
before, after and changed, per mode and per category, above the fold at 1280×800; the set's
history with its before/after column (the two settings of a comparison run, else the run
before); a bad setting refused with a clear error."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.support.browser import tab
from tests.support.commands import pgrag_cmd
from tests.support.kb_server import HASH_MODEL, HttpServer, child_env

pytest_plugins = ("tests.support.console",)
pytestmark = pytest.mark.requires("chromium")

NOTES = {
    "heron.md": "# Herons\n\nThe grey heron nests in the reeds by the lake every spring.\n",
    "osprey.md": "# Ospreys\n\nThe osprey dives for fish off the north pier at dawn.\n",
    "budget.md": "# Budget\n\nThe quarterly paint budget is two thousand euros.\n",
}
CASES = [
    {"query": "grey heron nests", "document": "heron.md", "category": "birds"},
    {"query": "osprey dives for fish", "document": "osprey.md", "category": "birds"},
    {"query": "quarterly paint budget", "document": "budget.md", "category": "money"},
]


@pytest.fixture(scope="module")
def server(writable: HttpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder: Path = tmp_path_factory.mktemp("notes")
    for name, text in NOTES.items():
        (folder / name).write_text(text)
    cmd = pgrag_cmd("--database-url", writable.dsn, "--embedding-model", HASH_MODEL, "ingest")
    done = subprocess.run(
        [*cmd, "-q", "-c", "birds", str(folder)], capture_output=True, timeout=300, env=child_env()
    )
    assert done.returncode == 0, done.stderr
    yield writable


def test_two_settings_side_by_side_and_in_the_history(browser: Browser, server: HttpServer) -> None:
    with tab(browser, width=1280, height=800) as t:
        page = t.page
        page.goto(server.base + "/console/eval")  # loopback without keys: no sign-in
        page.get_by_label("Queries").fill("\n".join(json.dumps(c) for c in CASES))
        page.get_by_label("Evaluation set").fill("compare")
        page.get_by_text("Compare two ranking settings").click()
        page.locator("#after_threshold").fill("0.99")  # no hash-model cosine is that close
        page.get_by_role("button", name="Run").click()
        compare = page.locator("#compare")
        box = compare.bounding_box()
        assert box is not None and box["y"] < 800  # above the fold
        assert "threshold=0.99" in page.locator("#compare-options").inner_text()
        hybrid = compare.locator("[data-mode=hybrid]")
        overall = hybrid.locator("tr[data-row=all] [data-metric='hit@1']")
        assert overall.get_attribute("data-before") == "1.0"
        assert overall.get_attribute("data-after") == "0.0"
        assert overall.get_attribute("data-change") == "-1.0"
        assert "1.000 → 0.000" in overall.inner_text()
        for category in ("birds", "money"):
            cell = hybrid.locator(f"tr[data-row={category}] [data-metric=mrr]")
            assert cell.get_attribute("data-before") == "1.0", category
            assert cell.get_attribute("data-after") == "0.0", category
        row = page.locator("#runs tbody tr[data-mode=hybrid]").first
        assert row.locator("td.before-after").get_attribute("data-compared") == "true"
        assert (
            row.locator("td.before-after [data-metric='hit@1']").get_attribute("data-change")
            == "-1.0"
        )
        # a plain run of the set: its before is the run before (that run's "after")
        page.locator("#queries").fill("")
        page.locator("#eval-set").fill("compare")
        page.locator("#after_threshold").fill("")
        page.get_by_role("button", name="Run").click()
        assert page.locator("#compare").count() == 0
        rows = page.locator("#runs tbody tr[data-mode=hybrid]")
        assert rows.count() == 2
        newest = rows.first.locator("td.before-after")
        assert newest.get_attribute("data-compared") == "false"
        assert newest.locator("[data-metric='hit@1']").get_attribute("data-change") == "1.0"
        assert t.errors == []
        # a setting out of its bounds: a clear refusal, not a failed run
        csrf = str(page.get_attribute("input[name=csrf]", "value"))
        form = {"csrf": csrf, "set": "compare", "after_rrf_k": "0"}
        refused = page.request.post(server.base + "/console/eval", multipart=form)
        assert refused.status == 400 and "INVALID_ARGUMENT" in refused.text()
        assert "rrf_k" in refused.text()
