"""The playground's ranking knobs in real Chromium (issue 42): the collapsed "Ranking"
section reorders exactly as MCP does with the same options, the knobs ride in the URL and in
"Copy as SQL", saved evaluation cases keep them (and no mode the user did not choose), and
saving stays on the results page; the first result above the fold; counts that say what
they count; `exact` shown as itself; "Copy as SQL" honest without a clipboard."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

import psycopg
import pytest
from playwright.sync_api import Browser

from tests.support.browser import tab
from tests.support.kb_server import (
    BULK_COLLECTION,
    FULL_KEY,
    KB_COLLECTION,
    OTHER_COLLECTION,
    SCOPED_KEY,
    HttpServer,
    KnowledgeBase,
)
from tests.support.playground import mcp_search, warm_up
from tests.test_console import hits_on, sign_in

pytest_plugins = ("tests.support.kb_server", "tests.support.console")
pytestmark = pytest.mark.requires("chromium")

QUERY = "quarterly revenue budget"


@pytest.fixture(scope="module", autouse=True)
def warm(kb_http: HttpServer) -> None:
    warm_up(kb_http)


def test_the_ranking_section_reorders_as_mcp_does(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        page = t.page
        page.goto(kb_http.base + "/console/search")
        assert page.locator("#ranking").get_attribute("open") is None  # collapsed at first
        page.get_by_label("Query").fill(QUERY)
        page.get_by_text("Filters and options").click()
        page.get_by_label("Collection").select_option(KB_COLLECTION)
        page.get_by_label("Results").fill("10")
        page.get_by_text("Ranking", exact=True).click()
        page.get_by_label("Fusion").select_option("rrf")
        page.get_by_label("RRF k").fill("1")
        page.get_by_role("button", name="Search").last.click()
        page.wait_for_selector("li.hit")
        asked = parse_qs(urlsplit(page.url).query)
        assert asked["fusion"] == ["rrf"] and asked["rrf_k"] == ["1"]
        assert page.locator("#ranking").get_attribute("open") == ""  # shown: knobs are set
        shown = [int(h["chunkId"]) for h in hits_on(page)]
        sql = page.locator("#sql").inner_text()
        assert t.errors == []
    args = {"query": QUERY, "limit": 10, "filters": {"collection": KB_COLLECTION}, "explain": True}
    # the whole ranking (a token budget may cut a page short at different places)
    rrf = mcp_search(kb_http.mcp_url, {**args, "max_tokens": 25000, "fusion": "rrf", "rrf_k": 1})
    default = mcp_search(kb_http.mcp_url, {**args, "max_tokens": 25000})
    assert len(shown) >= 3 and shown == [h["chunk_id"] for h in rrf["results"]][: len(shown)]
    assert shown != [h["chunk_id"] for h in default["results"]][: len(shown)]
    # "Copy as SQL" replays the knobs too: the whole page asked for (10), as MCP ranks it
    with psycopg.connect(kb.dsn) as conn:
        replayed = [r[1] for r in conn.execute(sql).fetchall()]
    assert replayed == [h["chunk_id"] for h in rrf["results"]] and len(replayed) == 10


def test_saving_two_hits_stays_on_the_results_page(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    name = "knobs-two-hits"
    query = {"q": "limitation of liability", "limit": "3", "fusion": "rrf", "lexical_weight": "2"}
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        page = t.page
        page.goto(kb_http.base + "/console/search?" + urlencode(query))
        paths = []
        for i in (0, 1):
            hit = page.locator("li.hit").nth(i)
            paths.append(hit.locator("h3 a").inner_text())
            hit.get_by_text("Save as evaluation case").click()
            hit.get_by_label("Evaluation set").fill(name)
            hit.get_by_role("button", name="Save").click()
            page.wait_for_selector("#saved")
            assert urlsplit(page.url).path == "/console/search"
            assert page.locator("#saved").inner_text().endswith(name)
            assert page.locator("li.hit").count() == 3
        assert parse_qs(urlsplit(page.url).query)["saved"] == [name]  # once, not twice
        # the way back is the playground's path only: never another site
        csrf = str(page.get_attribute("input[name=csrf]", "value"))
        for back in ("https://evil.example/console/search?q=x", "//evil.example/console/search"):
            form = {"csrf": csrf, "set": name, "query": "q", "document": paths[0], "back": back}
            answer = page.request.post(kb_http.base + "/console/eval/cases", form=form)
            assert answer.url == f"{kb_http.base}/console/eval?set={name}", back
        assert t.errors == []
    cases = [
        r[0]
        for r in kb.sql(
            "SELECT query FROM pgrag.eval_cases WHERE set_name = %s ORDER BY id", (name,)
        )
    ]
    assert [c["document"] for c in cases][:2] == paths  # type: ignore[index]
    for case in cases[:2]:
        assert "mode" not in case  # type: ignore[operator]
        assert case["options"] == {"fusion": "rrf", "lexical_weight": 2.0}  # type: ignore[index]


def test_a_chosen_mode_is_kept_and_exact_is_shown_as_itself(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        page = t.page
        query = {"q": "liability", "mode": "exact", "collection": KB_COLLECTION}
        page.goto(kb_http.base + "/console/search?" + urlencode(query))
        assert page.locator("#shown-mode").inner_text() == "keyword (exact)"
        assert page.get_by_label("Mode").input_value() == "exact"
        hidden = page.locator("li.hit").first.locator("input[name=mode]")
        assert hidden.get_attribute("value") == "exact"
        assert t.errors == []


def test_counts_say_what_they_count(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    keyword = {"query": "liability", "mode": "keyword", "filters": {"collection": KB_COLLECTION}}
    mcp = mcp_search(kb_http.mcp_url, keyword)
    ((matching,),) = kb.sql(
        "SELECT count(*) FROM pgrag.chunks c JOIN pgrag.collections k ON k.id = c.collection_id"
        " WHERE k.name = %s AND c.content ILIKE '%%liabilit%%'",
        (KB_COLLECTION,),
    )
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        page = t.page
        flat = {"q": "liability", "mode": "keyword", "collection": KB_COLLECTION}
        page.goto(kb_http.base + "/console/search?" + urlencode(flat))
        counted = page.locator("#counted")
        assert counted.get_attribute("data-counted") == "matching"
        total = int(str(counted.get_attribute("data-total")))
        assert total == mcp["total_matches"] and 0 < total <= int(str(matching))
        assert counted.inner_text() == f"{total} matching chunks"
        page.goto(kb_http.base + "/console/search?" + urlencode({**flat, "mode": "hybrid"}))
        assert page.locator("#counted").get_attribute("data-counted") == "ranked"
        assert "matching" not in page.locator("#counted").inner_text()
        assert t.errors == []


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_the_first_result_is_above_the_fold(
    browser: Browser, kb_http: HttpServer, width: int, height: int
) -> None:
    with tab(browser, width=width, height=height) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        query = {"q": QUERY, "mode": "hybrid", "limit": "5"}
        t.page.goto(kb_http.base + "/console/search?" + urlencode(query))
        first = t.page.locator("li.hit").first.locator("h3")
        box = first.bounding_box()
        assert box is not None and box["y"] + box["height"] <= height, box
        assert t.page.locator("#chart").count() == 1  # still there, below the results
        assert t.errors == []


def test_copy_as_sql_says_selected_without_a_clipboard(
    browser: Browser, kb_http: HttpServer
) -> None:
    query = {"q": QUERY, "collection": KB_COLLECTION, "limit": "3"}
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        page = t.page
        # a plain-HTTP LAN address is no secure context: the page has no clipboard
        page.add_init_script("Object.defineProperty(navigator, 'clipboard', {value: undefined})")
        page.goto(kb_http.base + "/console/search?" + urlencode(query))
        button = page.locator("button[data-copy=sql]")
        assert button.inner_text() == "Copy as SQL"
        button.click()
        assert button.inner_text() == "Selected — press Ctrl+C"
        selected = page.evaluate("window.getSelection().toString()")
        assert selected.strip() == page.locator("#sql").inner_text().strip()
        assert t.errors == []
    with tab(browser) as t:
        t.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        sign_in(t, kb_http.base, FULL_KEY)
        t.page.goto(kb_http.base + "/console/search?" + urlencode(query))
        button = t.page.locator("button[data-copy=sql]")
        button.click()
        t.page.wait_for_function("b => b.textContent === 'Copied'", arg=button.element_handle())
        copied = t.page.evaluate("navigator.clipboard.readText()")
        assert copied.strip() == t.page.locator("#sql").inner_text().strip()


def test_the_collection_filter_offers_the_callers_collections(
    browser: Browser, kb_http: HttpServer
) -> None:
    every = sorted([BULK_COLLECTION, KB_COLLECTION, OTHER_COLLECTION])
    for key, offered in ((FULL_KEY, every), (SCOPED_KEY, [OTHER_COLLECTION])):
        with tab(browser) as t:
            sign_in(t, kb_http.base, key)
            t.page.goto(kb_http.base + "/console/search")
            options = t.page.locator("#collection option").evaluate_all(
                "os => os.map(o => o.value)"
            )
            assert options == ["", *offered], key  # "" searches every one of them
            assert t.errors == []
