"""The web console in real headless Chromium against `pgrag serve --transport http` on the
test knowledge base (tests/support/kb_server.py): sign-in, every page without console
errors, the playground's per-leg figures equal to MCP `explain`, "Copy as SQL" replayed
through psycopg, collection scopes, read-only and cross-site requests."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx2
import psycopg
import pytest
from playwright.sync_api import Browser, Page

from tests.support.axe import serious_violations
from tests.support.browser import Tab, chromium, tab
from tests.support.commands import pgrag_cmd
from tests.support.kb_server import (
    BULK_COLLECTION,
    FULL_KEY,
    HUGE_PATH,
    KB_COLLECTION,
    OTHER_COLLECTION,
    OTHER_PATH,
    SCOPED_KEY,
    HttpServer,
    KnowledgeBase,
    child_env,
)
from tests.support.playground import mcp_search

pytest_plugins = ("tests.support.kb_server",)
pytestmark = pytest.mark.requires("chromium")

BUDGET = "Finance/2024/Q1/Q1_Budget.xlsx"
VENDOR = "Legal/Acme_Vendor_Agreement.pdf"
STRATEGY_ZH = "Sales/2023年第四季度销售策略报告.md"
QUERY = {"q": "quarterly revenue budget", "mode": "hybrid", "limit": "5", "collection": "kb"}
SAVED = {"q": "limitation of liability", "mode": "hybrid", "limit": "3"}
LEGS = ("lexical_rank", "lexical_score", "semantic_rank", "semantic_score", "fused_score")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


def sign_in(t: Tab, base: str, key: str) -> None:
    t.page.goto(base + "/")
    assert t.page.url.endswith("/console/login")
    t.page.get_by_label("API key").fill(key)
    t.page.get_by_role("button", name="Sign in").click()
    t.page.wait_for_url(base + "/")


def collections_on(page: Page) -> list[str]:
    return page.locator("#collections tbody tr").evaluate_all(
        "rs => rs.map(r => r.dataset.collection)"
    )


def hits_on(page: Page) -> list[dict[str, Any]]:
    """Each result's ids and per-leg figures, from the data attributes the page renders."""
    return page.eval_on_selector_all(
        "li.hit",
        """els => els.map(e => Object.assign({}, e.dataset))""",
    )


def number(text: str) -> float | int | None:
    if text == "":
        return None
    return int(text) if re.fullmatch(r"-?\d+", text) else float(text)


def csrf_of(page: Page) -> str:
    return str(page.get_attribute("input[name=csrf]", "value"))


def test_every_page_renders_without_console_errors(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        assert collections_on(t.page) == sorted([BULK_COLLECTION, KB_COLLECTION, OTHER_COLLECTION])
        ((kb_docs, kb_chunks),) = kb.sql(
            "SELECT (SELECT count(*) FROM pgrag.documents d WHERE d.collection_id = c.id),"
            " (SELECT count(*) FROM pgrag.chunks ch WHERE ch.collection_id = c.id)"
            " FROM pgrag.collections c WHERE c.name = %s",
            (KB_COLLECTION,),
        )
        cells = t.page.locator("tr[data-collection=kb] td.num").all_inner_texts()
        assert sum(int(c) for c in cells[1:5]) == kb_docs and int(cells[5]) == kb_chunks
        assert t.page.locator("#database-size").inner_text().endswith("MB")
        with t.page.expect_response(lambda r: r.url.endswith("/console/activity.json")) as polled:
            pass  # the activity panel polls without a reload
        assert polled.value.json()["counts"]["ready"] >= kb_docs - 1
        for path in (
            "/console/search?" + urlencode(QUERY),
            "/console/documents",
            "/console/documents?" + urlencode({"collection": KB_COLLECTION, "status": "failed"}),
            f"/console/documents/{kb.id(BUDGET)}",
            "/console/searches",
            "/console/doctor",
        ):
            response = t.page.goto(kb_http.base + path)
            assert response is not None and response.status == 200, path
            assert t.page.locator("h1").count() == 1, path
        assert t.page.locator("#doctor td.ok").count() >= 3
        zh = kb.id(STRATEGY_ZH)
        t.page.goto(f"{kb_http.base}/console/documents/{zh}")
        languages = t.page.locator("#chunks tbody td:nth-child(4)").all_inner_texts()
        ((chunks,),) = kb.sql("SELECT count(*) FROM pgrag.chunks WHERE document_id = %s", (zh,))
        assert len(languages) == chunks and "zh" in languages
        assert t.errors == []


def test_the_playground_shows_the_figures_of_mcp_explain(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        t.page.get_by_role("link", name="Search", exact=True).click()
        t.page.get_by_label("Query").fill(QUERY["q"])
        t.page.get_by_text("Filters and options").click()
        t.page.get_by_label("Collection").select_option(QUERY["collection"])
        t.page.get_by_label("Results").fill(QUERY["limit"])
        t.page.get_by_role("button", name="Search").last.click()
        t.page.wait_for_selector("li.hit")
        shown = hits_on(t.page)
        url = t.page.url
        sql = t.page.locator("#sql").inner_text()
        chart = t.page.eval_on_selector_all(
            "#chart g", "gs => gs.map(g => [g.dataset.lexicalPart, g.dataset.semanticPart])"
        )
        # the URL reproduces the search
        t.page.goto(url)
        assert [h["chunkId"] for h in hits_on(t.page)] == [h["chunkId"] for h in shown]
        assert t.errors == []
    mcp = mcp_search(
        kb_http.mcp_url,
        {
            "query": QUERY["q"],
            "mode": "hybrid",
            "limit": 5,
            "filters": {"collection": KB_COLLECTION},
            "explain": True,
            "max_tokens": 4000,
        },
    )
    assert len(shown) == len(mcp["results"]) >= 3
    for on_page, hit in zip(shown, mcp["results"], strict=True):
        assert int(on_page["chunkId"]) == hit["chunk_id"]
        assert on_page["documentId"] == hit["document_id"]
        for leg in LEGS:
            camel = re.sub(r"_(\w)", lambda m: m.group(1).upper(), leg)
            assert number(on_page[camel]) == hit["explain"][leg], (leg, on_page, hit["explain"])
    # each chart row's parts add up to the fused score MCP gives
    for (lexical, semantic), hit in zip(chart, mcp["results"], strict=True):
        assert float(lexical) + float(semantic) == pytest.approx(hit["explain"]["fused_score"])
    # "Copy as SQL" run through psycopg ranks the same chunks in the same order
    with psycopg.connect(kb.dsn) as conn:
        replayed = [row[1] for row in conn.execute(sql).fetchall()]
    assert replayed == [h["chunk_id"] for h in mcp["results"]]


def test_a_scoped_key_reaches_no_other_collection(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, SCOPED_KEY)
        page = t.page
        assert collections_on(page) == [OTHER_COLLECTION]
        assert page.locator("#database-size").count() == 0
        assert page.locator("[data-count=ready]").inner_text() == "1"
        page.goto(kb_http.base + "/console/documents")
        listed = page.locator("#documents tbody tr").evaluate_all(
            "rs => rs.map(r => r.dataset.documentId)"
        )
        assert listed == [kb.id(OTHER_PATH)]
        hidden = kb.id(BUDGET)
        for path, status, code in (
            (f"/console/documents/{hidden}", 404, "NOT_FOUND"),
            ("/console/documents/Q1_Budget.xlsx", 404, "NOT_FOUND"),
            ("/console/search?" + urlencode(QUERY), 403, "FORBIDDEN"),
        ):
            response = page.goto(kb_http.base + path)
            assert response is not None and response.status == status, path
            assert page.locator("#error-code").inner_text() == code
            assert page.locator("#metadata, li.hit, #documents").count() == 0
        page.goto(kb_http.base + "/console/documents?collection=kb")  # RLS shows none
        assert page.locator("#documents tr[data-document-id]").count() == 0
        assert page.locator(".folders li").count() == 0
        page.goto(kb_http.base + "/console/search?" + urlencode({"q": "budget revenue"}))
        docs = {h["documentId"] for h in hits_on(page)}
        assert docs <= {kb.id(OTHER_PATH)}
        activity = page.request.get(kb_http.base + "/console/activity.json").json()
        assert activity["total"] == 1
        for ref in (hidden, BUDGET):  # as for a document that does not exist
            status = page.request.get(
                kb_http.base + "/console/status.json?" + urlencode({"document": ref})
            )
            assert status.json() == {"status": "waiting", "progress": 0}
        saved = page.request.post(
            kb_http.base + "/console/eval/cases",
            form={"csrf": csrf_of(page), "set": "x", "query": "q", "document": BUDGET},
        )
        assert saved.status == 403
        page.goto(kb_http.base + "/console/doctor")
        assert page.locator("#doctor").count() == 0


def test_read_only_hides_and_refuses_a_delete(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        doc = kb.id(BUDGET)
        t.page.goto(f"{kb_http.base}/console/documents/{doc}")
        assert t.page.locator("#delete").count() == 0
        assert t.page.locator("#read-only").is_visible()
        refused = t.page.request.post(
            f"{kb_http.base}/console/documents/{doc}/delete", form={"csrf": csrf_of(t.page)}
        )
        assert refused.status == 403 and "read-only" in refused.text()
    assert kb.sql("SELECT count(*) FROM pgrag.documents WHERE id = %s", (doc,)) == [(1,)]


def test_cross_site_and_tokenless_posts_are_refused(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        req = t.page.request
        base = kb_http.base
        delete = f"{base}/console/documents/{kb.id(BUDGET)}/delete"
        for form in ({}, {"csrf": "forged"}):
            r = req.post(delete, form=form)
            assert r.status == 403 and "CSRF" in r.text()
            r = req.post(base + "/console/logout", form=form)
            assert r.status == 403
        foreign = req.post(
            delete, form={"csrf": csrf_of(t.page)}, headers={"Origin": "http://evil.example"}
        )
        assert foreign.status == 403 and foreign.json()["errorCode"] == "FORBIDDEN"
        # still signed in: none of these ended the session
        assert t.page.goto(base + "/") is not None and t.page.url == base + "/"
    with httpx2.Client(base_url=kb_http.base, timeout=30) as client:
        # a key posted without the sign-in form's token does not sign in
        assert client.post("/console/login", data={"key": FULL_KEY}).status_code == 403
        assert client.get("/").headers["location"] == "/console/login"


def test_sign_in_cookie_headers_and_language(browser: Browser, kb_http: HttpServer) -> None:
    with tab(browser, locale="zh-CN", width=390, height=844) as t:
        t.page.goto(kb_http.base + "/console/login")
        t.page.get_by_label("API 密钥").fill("not-a-key")
        t.page.get_by_role("button", name="登录").click()
        assert t.page.locator("#login-error").inner_text() == "密钥无效。"
        # the refused sign-in answers 401: the one console error of this page
        assert len(t.errors) == 1 and "401" in t.errors.pop()
        t.page.get_by_label("API 密钥").fill(FULL_KEY)
        t.page.get_by_role("button", name="登录").click()
        t.page.wait_for_url(kb_http.base + "/")
        assert FULL_KEY not in t.page.url
        assert t.page.get_by_role("link", name="概览").get_attribute("aria-current") == "page"
        (cookie,) = t.page.context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert FULL_KEY not in cookie["value"]
        response = t.page.goto(kb_http.base + "/console/search?" + urlencode(QUERY))
        assert response is not None
        csp = response.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "unsafe-inline" not in csp
        # readable on a 390 px phone: nothing wider than the screen but scrollable tables
        assert t.page.evaluate("document.documentElement.scrollWidth") <= 390
        t.page.keyboard.press("Tab")
        assert t.page.evaluate("document.activeElement.className") == "skip"
        assert t.errors == []


def test_an_evaluation_run_scores_a_set_and_links_its_misses(
    browser: Browser, kb_http: HttpServer
) -> None:
    lines = [
        {"query": "limitation of liability", "document": VENDOR, "category": "legal"},
        {"query": "limitation of liability", "document": OTHER_PATH, "category": "elsewhere"},
    ]
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        page = t.page
        page.get_by_role("link", name="Evaluation").click()
        page.get_by_label("Queries").fill("\n".join(json.dumps(line) for line in lines))
        page.get_by_role("checkbox", name="hybrid").uncheck()
        page.get_by_role("checkbox", name="semantic").check()
        page.get_by_role("button", name="Run").click()
        section = page.locator("section[data-mode=semantic]")
        legal = section.locator("tr[data-row=legal] [data-metric='hit@1']")
        assert legal.inner_text() == "1.000"
        assert section.locator("tr[data-row=elsewhere] [data-metric='hit@3']").inner_text() == (
            "0.000"
        )
        (miss,) = page.locator("#misses a").all()
        miss.click()
        page.wait_for_selector("li.hit")
        assert page.get_by_label("Query").input_value() == "limitation of liability"
        assert page.get_by_label("Mode").input_value() == "semantic"
        assert t.errors == []
    with tab(browser) as t:
        sign_in(t, kb_http.base, SCOPED_KEY)
        assert t.page.get_by_role("link", name="Evaluation").count() == 0
        response = t.page.goto(kb_http.base + "/console/eval")
        assert response is not None and response.status == 403


def test_a_saved_case_appears_in_evaluation_runs_of_console_and_cli(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        page = t.page
        page.goto(kb_http.base + "/console/search?" + urlencode(SAVED))
        first = page.locator("li.hit").first
        path = first.locator("h3 a").inner_text()
        first.get_by_text("Save as evaluation case").click()
        first.get_by_label("Evaluation set").fill("saved-from-playground")
        first.get_by_role("button", name="Save").click()
        page.locator("#saved a").click()  # saved from the results page, which stays
        page.wait_for_url("**/console/eval?set=saved-from-playground")
        page.get_by_role("button", name="Run").click()
        section = page.locator("section[data-mode=hybrid]")
        assert section.locator("tr[data-row=all] td.num").first.inner_text() == "1"
        assert section.locator("tr[data-row=all] [data-metric='hit@1']").inner_text() == "1.000"
        assert t.errors == []
    stored = kb.sql("SELECT query FROM pgrag.eval_cases WHERE set_name = 'saved-from-playground'")
    ((case,),) = stored
    assert case["query"] == SAVED["q"] and case["document"] == path and case["mode"] == "hybrid"
    done = subprocess.run(
        pgrag_cmd("--database-url", kb.dsn, "eval", "--set", "saved-from-playground", "--json"),
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    (outcome,) = json.loads(done.stdout)["queries"]
    assert outcome["query"] == SAVED["q"] and outcome["rank"] == 1
    assert kb.sql(
        "SELECT count(*) FROM pgrag.eval_runs WHERE set_name = 'saved-from-playground'"
    ) == [(2,)]


def test_the_why_not_panel_names_what_kept_a_document_out(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    def reasons(page: Page) -> list[str]:
        return page.locator("#why-reasons li").evaluate_all("ls => ls.map(l => l.dataset.reason)")

    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        page = t.page
        filtered = {"q": "limitation of liability", "file_type": "xlsx", "why_not": VENDOR}
        page.goto(kb_http.base + "/console/search?" + urlencode(filtered))
        assert reasons(page) == ["why_filter"]
        assert page.locator("#why-legs").count() == 1  # its best chunk's scores all the same
        assert t.errors == []
    with tab(browser) as t:
        sign_in(t, kb_http.base, SCOPED_KEY)
        for ref in (kb.id(VENDOR), "no-such-document.pdf"):  # hidden reads as absent
            query = {"q": "limitation of liability", "why_not": ref}
            t.page.goto(kb_http.base + "/console/search?" + urlencode(query))
            assert reasons(t.page) == ["why_not_visible"]
            assert t.page.locator("#why-legs").count() == 0


@pytest.mark.requires("tests/js")
def test_axe_core_finds_no_serious_violation(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    """WCAG 2 A/AA rules of axe-core (tests/js) on every page of a read-only server with
    keys, at both widths: signed out (sign-in), then signed in, in English and Chinese
    (the other pages: tests/test_console_rough_edges.py, tests/test_console_language.py)."""
    pages = [
        "/",
        "/console/search?" + urlencode({**SAVED, "why_not": VENDOR}),
        "/console/documents",
        f"/console/documents/{kb.id(VENDOR)}",
        "/console/documents/no-such-document",  # the error page
        "/console/eval",
        "/console/searches",
    ]
    for width, lang in ((1280, "en"), (390, "zh")):
        with tab(browser, width=width, bypass_csp=True) as t:
            t.page.goto(kb_http.base + "/console/login")
            assert serious_violations(t.page) == [], (width, "/console/login")
            sign_in(t, kb_http.base, FULL_KEY)
            cookie = {"name": "pgrag_lang", "value": lang, "url": kb_http.base}
            t.page.context.add_cookies([cookie])  # the header's switch, as a cookie
            for path in pages:
                t.page.goto(kb_http.base + path)
                assert serious_violations(t.page) == [], (width, path)


def test_documents_sort_and_filter(browser: Browser, kb_http: HttpServer) -> None:
    def paths(query: dict[str, str]) -> list[str]:
        t.page.goto(kb_http.base + "/console/documents?" + urlencode(query))
        return t.page.locator("#documents tbody td:first-child").all_inner_texts()

    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        assert paths({"collection": BULK_COLLECTION, "sort": "size"})[0] == HUGE_PATH
        paths({"collection": KB_COLLECTION, "sort": "modified"})
        dates = t.page.locator("#documents tbody td:last-child").all_inner_texts()
        assert len(dates) > 5 and dates == sorted(dates, reverse=True)
        failed = paths({"collection": KB_COLLECTION, "status": "failed"})
        assert failed and all(p.startswith("test-edge-cases/") for p in failed)
        assert t.errors == []
