"""The playground's chart from the score parts its search logged (search_log.score_parts):
the same terms as replaying the search with pgrag.explain_parts, in every explained mode."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser

from tests.support.browser import tab
from tests.support.kb_server import FULL_KEY, HttpServer, KnowledgeBase
from tests.test_console import QUERY, sign_in

pytest_plugins = ("tests.support.kb_server", "tests.support.console")
pytestmark = pytest.mark.requires("chromium")

PARTS_SQL = (
    "SELECT rank, chunk_id, fusion, lexical_part, semantic_part, fused_score, lexical_share,"
    " semantic_cosine, centred, query_lang, chunk_lang FROM pgrag.explain_parts(%s)"
)


def floats(rows: list[tuple[object, ...]]) -> list[float]:
    """The rows' figures (parts, fused score, share, cosine) in a row, NaN for none."""
    return [float(v) if isinstance(v, int | float) else float("nan") for r in rows for v in r[3:8]]


def test_the_chart_draws_the_logged_parts_which_equal_the_replay(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        for mode in ("hybrid", "semantic", "keyword"):
            url = kb_http.base + "/console/search?" + urlencode({**QUERY, "mode": mode})
            response = t.page.goto(url)
            assert response is not None and response.status == 200, (mode, t.page.content())
            search_id = int(str(t.page.get_attribute("#summary", "data-search-id")))
            chart = t.page.eval_on_selector_all(
                "#chart g",
                "gs => gs.map(g => [+g.dataset.rank, +g.dataset.lexicalPart,"
                " +g.dataset.semanticPart])",
            )
            (logged,) = kb.sql(
                "SELECT jsonb_array_length(score_parts) FROM pgrag.search_log WHERE id = %s",
                (search_id,),
            )
            stored = kb.sql(PARTS_SQL, (search_id,))
            assert logged == (len(chart),) and len(chart) >= 3, mode
            assert chart == [[r[0], r[3], r[4]] for r in stored], mode
            # without the logged parts, explain_parts replays the search: the same figures
            kb.sql("UPDATE pgrag.search_log SET score_parts = NULL WHERE id = %s", (search_id,))
            replayed = kb.sql(PARTS_SQL, (search_id,))
            assert [r[:3] + r[8:] for r in replayed] == [r[:3] + r[8:] for r in stored], mode
            assert floats(replayed) == pytest.approx(
                floats(stored), rel=1e-9, abs=1e-12, nan_ok=True
            ), mode
        assert t.errors == []
