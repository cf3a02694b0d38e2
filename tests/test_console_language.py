"""The console's language switch in headless Chromium: chosen in the page's header, kept in a
cookie over the browser's Accept-Language, on the sign-in and OAuth consent pages too, with
the playground's mode, scope and location words; the switch returns to this server only."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page

from tests.support.axe import serious_violations
from tests.support.browser import tab
from tests.support.kb_server import HttpServer
from tests.support.oauth import KEY, Flow

pytest_plugins = ("tests.support.console", "tests.support.oauth_fixtures")
pytestmark = pytest.mark.requires("chromium")


def heading(page: Page) -> str:
    return page.locator("h1").inner_text()


def test_the_switch_translates_every_page_and_is_remembered(
    browser: Browser, oauth_http: HttpServer, flow: Flow
) -> None:
    base = oauth_http.base
    with tab(browser, locale="en-US") as t:
        page = t.page
        page.goto(base + "/console/login")
        assert heading(page) == "Sign in" and page.locator("html").get_attribute("lang") == "en"
        page.locator("#lang-zh").click()
        page.wait_for_url(base + "/console/login")
        assert heading(page) == "登录" and page.locator("html").get_attribute("lang") == "zh-CN"
        assert page.locator("#lang-zh").get_attribute("aria-current") == "true"
        page.get_by_label("API 密钥").fill(KEY)
        page.get_by_role("button", name="登录").click()
        page.wait_for_url(base + "/")
        # the mode, scope and location words, the values the URL carries unchanged
        query = {"q": "lighthouse", "mode": "exact", "scope": "chunks"}
        page.goto(base + "/console/search?" + urlencode(query))
        assert page.locator("#mode option:checked").inner_text() == "精确 (exact)"
        assert page.locator("#scope option:checked").text_content() == "分块 (chunks)"
        assert page.locator("#mode").input_value() == "exact"
        assert page.locator("#shown-mode").inner_text() == "关键词 (keyword) (exact)"
        assert page.locator("li.hit").count() >= 1
        # the OAuth consent page (signed in already: no sign-in step)
        started = flow.authorize()
        assert started.status_code == 302
        page.goto(started.headers["location"])
        page.wait_for_selector("#consent")
        assert heading(page) == "授权 Test Client"
        assert page.get_by_role("button", name="允许").count() == 1
        assert page.get_by_text("它可以读取的集合").count() == 1
        # back to English on the same page: the same consent, in English
        page.locator("#lang-en").click()
        page.wait_for_selector("#consent")
        assert page.get_by_role("button", name="Allow").count() == 1
        assert heading(page) == "Authorize Test Client"
        assert t.errors == []
    # the browser's language without the cookie, then the cookie over it: the OAuth
    # sign-in page of a new browser
    with tab(browser, locale="zh-CN") as t:
        started = flow.authorize()
        t.page.goto(started.headers["location"])
        assert heading(t.page) == "授权 Test Client"
        assert t.page.get_by_label("API 密钥或管理员密码").count() == 1
        t.page.locator("#lang-en").click()
        t.page.wait_for_selector("#key")
        assert t.page.get_by_label("API key or admin password").count() == 1
        t.page.goto(base + "/console/login")
        assert heading(t.page) == "Sign in"
        assert t.errors == []


def test_the_switch_returns_to_this_server_only(browser: Browser, oauth_http: HttpServer) -> None:
    with tab(browser) as t:
        for back in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "x"):
            answer = t.page.request.get(
                oauth_http.base + "/console/lang?" + urlencode({"to": "zh", "back": back}),
                max_redirects=0,
            )
            assert answer.status == 303 and answer.headers["location"] == "/", back
        bad = t.page.request.get(oauth_http.base + "/console/lang?to=fr", max_redirects=0)
        assert bad.status == 400 or bad.status == 422


@pytest.mark.requires("tests/js")
def test_axe_core_on_the_oauth_pages(browser: Browser, oauth_http: HttpServer, flow: Flow) -> None:
    """The OAuth sign-in and consent pages and the clients page, in both languages."""
    base = oauth_http.base
    for lang in ("en", "zh"):
        with tab(browser, bypass_csp=True) as t:
            t.page.context.add_cookies([{"name": "pgrag_lang", "value": lang, "url": base}])
            started = flow.authorize()
            t.page.goto(started.headers["location"])
            assert serious_violations(t.page) == [], (lang, "oauth sign-in")
            t.page.locator("#key").fill(KEY)
            t.page.locator("button[type=submit]").click()
            t.page.wait_for_selector("#consent")
            assert serious_violations(t.page) == [], (lang, "oauth consent")
            t.page.goto(base + "/console/oauth/clients")
            assert serious_violations(t.page) == [], (lang, "oauth clients")


def test_both_languages_have_every_text_the_templates_use() -> None:
    """Every `t.key` of the templates in both languages, and every word a template builds
    a key for (modes, scopes, location fields)."""
    from typing import get_args

    from pgrag.search.models import Location, SearchScope
    from pgrag.search.modes import SearchMode
    from pgrag.web.text_en import EN
    from pgrag.web.text_zh import ZH

    templates = Path(__file__).resolve().parents[1] / "pgrag" / "web" / "templates"
    used = {k for f in templates.glob("*.html") for k in re.findall(r"\bt\.(\w+)", f.read_text())}
    built = {f"mode_{m.value}" for m in SearchMode} | {f"scope_{s}" for s in get_args(SearchScope)}
    built |= {f"loc_{name}" for name in Location.model_fields}
    assert set(EN) == set(ZH)
    assert (used | built) - set(EN) == set()
