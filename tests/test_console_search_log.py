"""The console's search log page (issue 42) with two keys: recent searches by caller, mode
and collection with result counts, latency per hour, the searches that found nothing, each
linked back to the playground; a collection-limited key sees its own searches only."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from playwright.sync_api import Browser, Page

from tests.support.browser import tab
from tests.support.kb_server import FULL_KEY, OTHER_COLLECTION, SCOPED_KEY, HttpServer
from tests.support.playground import warm_up
from tests.test_console import hits_on, sign_in

pytest_plugins = ("tests.support.kb_server", "tests.support.console")
pytestmark = pytest.mark.requires("chromium")

SCOPED_QUERY = "codeword heron offsite"
NOTHING = "zzqxvw"
FULL_QUERY = "vendor agreement termination notice"


@pytest.fixture(scope="module", autouse=True)
def warm(kb_http: HttpServer) -> None:
    warm_up(kb_http)


def rows(page: Page, table: str) -> list[dict[str, str]]:
    return page.eval_on_selector_all(
        f"#{table} tbody tr[data-search-id]",
        """rs => rs.map(r => ({caller: r.dataset.caller,
                               query: r.querySelector('a').textContent}))""",
    )


def search(page: Page, base: str, query: dict[str, str]) -> None:
    page.goto(base + "/console/search?" + urlencode(query))
    page.wait_for_selector("#summary")


def test_the_search_log_is_scoped_per_key(browser: Browser, kb_http: HttpServer) -> None:
    base = kb_http.base
    with tab(browser) as full:
        sign_in(full, base, FULL_KEY)
        search(full.page, base, {"q": FULL_QUERY, "fusion": "rrf"})
        with tab(browser) as scoped:
            sign_in(scoped, base, SCOPED_KEY)
            search(scoped.page, base, {"q": SCOPED_QUERY})
            search(scoped.page, base, {"q": NOTHING, "mode": "keyword"})
            scoped.page.get_by_role("link", name="Search log").click()
            mine = rows(scoped.page, "recent")
            assert {r["query"] for r in mine} >= {SCOPED_QUERY, NOTHING}
            assert FULL_QUERY not in {r["query"] for r in mine}
            (me,) = {r["caller"] for r in mine}
            assert scoped.page.locator("#own-only").is_visible()
            assert scoped.page.locator("#caller").count() == 0
            assert rows(scoped.page, "empty")[0]["query"] == NOTHING
            options = scoped.page.locator("#collection option").all_inner_texts()
            assert options[1:] == [OTHER_COLLECTION]
            # asking for another caller's searches still shows only its own
            page = scoped.page
            page.goto(base + "/console/searches?" + urlencode({"caller": "someone"}))
            assert {r["caller"] for r in rows(page, "recent")} == {me}
            assert scoped.errors == []
        page = full.page
        page.get_by_role("link", name="Search log").click()
        everyone = rows(page, "recent")
        assert {r["caller"] for r in everyone} >= {me} and len({r["caller"] for r in everyone}) > 1
        assert {FULL_QUERY, SCOPED_QUERY} <= {r["query"] for r in everyone}
        hours = page.locator("#latency tbody tr[data-hour] td[data-searches]").all_inner_texts()
        assert sum(int(h) for h in hours) >= len(everyone)
        page.get_by_label("Caller").select_option(me)
        page.get_by_role("button", name="Filter").click()
        assert {r["caller"] for r in rows(page, "recent")} == {me}
        page.get_by_label("Caller").select_option("")
        page.get_by_label("Mode").select_option("keyword")
        page.get_by_role("button", name="Filter").click()
        assert NOTHING in {r["query"] for r in rows(page, "recent")}
        assert SCOPED_QUERY not in {r["query"] for r in rows(page, "recent")}
        # each search links back to the playground with what it was sent
        page.goto(base + "/console/searches")
        page.locator("#recent a", has_text=FULL_QUERY).first.click()
        page.wait_for_selector("li.hit")
        asked = parse_qs(urlsplit(page.url).query)
        assert asked["q"] == [FULL_QUERY] and asked["fusion"] == ["rrf"]
        assert hits_on(page)
        assert full.errors == []
