"""Headless Chromium for the console tests: Debian's /usr/bin/chromium driven by PyPI's
Playwright (never `playwright install`: the browser comes from apt). Every page a test opens
records its console errors, uncaught exceptions and Content-Security-Policy violations."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Tab:
    """A page and what went wrong on it (console errors, exceptions)."""

    page: Page
    errors: list[str] = field(default_factory=list)


@contextlib.contextmanager
def tab(
    browser: Browser,
    *,
    locale: str = "en-US",
    width: int = 1280,
    height: int = 900,
    bypass_csp: bool = False,  # only to inject a test's own script (axe-core)
) -> Iterator[Tab]:
    context: BrowserContext = browser.new_context(
        locale=locale, viewport={"width": width, "height": height}, bypass_csp=bypass_csp
    )
    try:
        page = context.new_page()
        opened = Tab(page)
        page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda exc: opened.errors.append(str(exc)))
        yield opened
    finally:
        context.close()
