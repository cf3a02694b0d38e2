"""BM25's parameters (k1, b, candidate_budget, rescore_size) are defaulted once, in
pgrag.ranking_defaults() (read here through pgrag.fusion_defaults(), derived from it),
sent with every search and written to the search log, so
pgrag.explain_search replays an old search with the values it ran with after a default
changed."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.settings import load_settings
from tests.support.ranking_defaults import replace_ranking_defaults

pytestmark = pytest.mark.anyio

FILES = {
    "tea.md": "# Tea\n\nGreen tea is brewed with water below boiling. Tea, tea and more tea.\n",
    "garden.md": "# Garden\n\nBoiling water kills the weeds between the paving stones.\n",
    "coffee.md": "# Coffee\n\nEspresso forces hot water through finely ground coffee beans.\n",
    "mint.md": "# Mint\n\nMint grows fast in the garden; mint tea is fresh and needs no milk.\n",
}
QUERY = "boiling water for tea"
BM25 = ("bm25_k1", "bm25_b", "candidate_budget", "rescore_size")
DEFAULTS_SQL = "SELECT bm25_k1, bm25_b, candidate_budget, rescore_size FROM pgrag.fusion_defaults()"
SCORES_SQL = "SELECT chunk_id, lexical_score FROM pgrag.explain_search(%s) ORDER BY rank"
TODAY_SQL = "SELECT chunk_id, lexical_score FROM pgrag.hybrid_search(%s, NULL, 10) ORDER BY rank"


async def _logged_search(dsn: str, folder: Path) -> tuple[int, dict[int, float | None]]:
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    async with open_database(load_settings(), dsn=dsn) as db:
        embedder = HashEmbedder("hash/64")
        summary = await Ingestor(db.pool, embedder, collection="kb").run([folder])
        assert not summary.failures, summary.failures
        page = await SearchService(db.pool, embedder).search(
            SearchRequest(query=QUERY, mode="keyword", limit=10, explain=True)
        )
    assert page.data.search_id is not None and len(page.data.results) == 4
    scores = {h.chunk_id: h.explain.lexical_score for h in page.data.results if h.explain}
    return page.data.search_id, scores


async def test_explain_search_replays_bm25_parameters_after_the_defaults_change(
    dsn: str, tmp_path: Path
) -> None:
    search_id, scores = await _logged_search(dsn, tmp_path / "kb")
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT params FROM pgrag.search_log WHERE id = %s", (search_id,))
        params = row.fetchone()
        assert params is not None
        defaults = dict(zip(BM25, conn.execute(DEFAULTS_SQL).fetchone() or (), strict=True))
        assert {k: params[0][k] for k in BM25} == defaults
        assert conn.execute(SCORES_SQL, (search_id,)).fetchall() == list(scores.items())
        # other BM25 defaults, as a later release might ship them
        k1, b = defaults["bm25_k1"] * 2 + 0.1, 1.0 if defaults["bm25_b"] != 1.0 else 0.5
        replace_ranking_defaults(conn, bm25_k1=k1, bm25_b=b, candidate_budget=1, rescore_size=1)
        replayed = conn.execute(SCORES_SQL, (search_id,)).fetchall()
        today = conn.execute(TODAY_SQL, (QUERY,)).fetchall()
    # the logged search, replayed after the change: its own parameters, the same scores
    assert replayed == list(scores.items())
    # a search run today ranks with the new defaults: the same chunks, other scores
    assert sorted(dict(today)) == sorted(scores)
    assert all(dict(today)[c] != s for c, s in scores.items())
