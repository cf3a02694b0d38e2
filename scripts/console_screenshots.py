"""Screenshots of the web console's main pages into docs/console/ (README's pictures).

Ingests examples/sample into a throw-away embedded PostgreSQL (the default local model),
starts `pgrag serve --transport http` on it with one API key, signs in with headless
Debian Chromium (/usr/bin/chromium, driven by Playwright) and saves overview, search
playground, documents, one document and an evaluation of examples/eval/queries.jsonl at
1280 px, and the playground at 390 px.

    python scripts/console_screenshots.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "console"
KEY = "screenshot-key"
PORT = 18765
QUERY = {"q": "how are contracts signed?", "mode": "hybrid", "limit": "5"}
EVAL_SET = ROOT / "examples" / "eval" / "queries.jsonl"


def pgrag(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pgrag", "--home", str(home), *args]


def wait(url: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def shoot(base: str) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for width, height, suffix in ((1280, 860, ""), (390, 844, "-phone")):
            context = browser.new_context(viewport={"width": width, "height": height})
            page = context.new_page()
            page.goto(base + "/console/login")
            page.get_by_label("API key").fill(KEY)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(base + "/")
            pages = {"search": "/console/search?" + urlencode(QUERY)}
            if not suffix:
                first = page.locator("#activity, #collections").first
                first.wait_for()
                pages = {"overview": "/", **pages, "documents": "/console/documents"}
            for _ in range(5):  # the model loads (a busy machine: past the page's limit)
                warm = page.goto(base + pages["search"])  # so the picture's search is warm
                if warm is not None and warm.status == 200:
                    break
            for name, path in pages.items():
                page.goto(base + path)
                page.screenshot(path=str(OUT / f"{name}{suffix}.png"), full_page=not suffix)
            if not suffix:
                page.goto(base + "/console/documents")
                page.locator("#documents tbody a").first.click()
                page.screenshot(path=str(OUT / "document.png"))
                page.goto(base + "/console/eval")
                page.get_by_label("or a JSONL file").set_input_files(str(EVAL_SET))
                page.get_by_label("Evaluation set").fill("sample")
                page.get_by_role("button", name="Run").click()
                page.wait_for_selector("#misses")
                page.screenshot(path=str(OUT / "evaluation.png"), full_page=True)
            context.close()
        browser.close()


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env["OMP_NUM_THREADS"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        subprocess.run(
            pgrag(home, "ingest", "-q", str(ROOT / "examples" / "sample")), check=True, env=env
        )
        server = subprocess.Popen(
            pgrag(home, "--api-keys", KEY, "serve", "--transport", "http", "--port", str(PORT)),
            env=env,
        )
        try:
            wait(f"http://127.0.0.1:{PORT}/healthz")
            shoot(f"http://127.0.0.1:{PORT}")
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"screenshots in {OUT}")


if __name__ == "__main__":
    main()
