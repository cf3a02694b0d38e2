"""Everything besides plain search on a real Citus cluster: each test
does the same thing to a database distributed by collection and to a single server holding
the same data, and compares what comes out.

- a document version whose vectors cannot be computed is searchable by keyword, its
  vectors counted as pending; one whose file cannot be parsed leaves the previous version;
- two-phase ingestion: keyword hits before the vectors, the vectors after, exact sums;
- pages of a search walked by continuation token equal the single server's;
- a search over two collections (two shards) gets BM25 statistics of the whole scope;
- `pgrag search --explain` and `pgrag.explain_search(...)` run there;
- deletes outside an ingest version keep the per-language sums right;
- `pgrag reindex` switches a collection to another embedding set there;
- the write and graph toolsets and log retention, through their services."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg

from pgrag.ingest.pipeline import Outcome
from tests.support.citus_ops import (
    CORPUS,
    EXPLAINED,
    PAGED,
    SECTIONS,
    FailingEmbedder,
    WrongDimensionsEmbedder,
    _both,
    _cli_explain,
    _explained,
    _ingest,
    _recounted_sums,
    _search,
    _settle_vectors,
    _state,
    _two_collections,
    _write_folder,
    pair,  # noqa: F401 (a fixture)
)


def test_a_version_that_fails_midway_leaves_the_previous_one(pair: tuple[str, str, Path]) -> None:
    before = _state(pair[0])
    assert before == _state(pair[1])
    for _, dsn, root in _both(pair):
        # a bigger new version of the review procedure: the provider fails after 3 chunks;
        # the version is written (keyword search finds it) and its new vectors wait
        review = root / "legal" / "contracts" / "review.md"
        review.write_text(review.read_text() + "\n\n" + SECTIONS.replace("Step", "Phase"))
        summary = asyncio.run(_ingest(dsn, root / "legal", "legal", FailingEmbedder(ok=3)))
        assert not summary.failures
        assert [(r.path, r.outcome, r.error_code) for r in summary.waiting] == [
            ("contracts/review.md", Outcome.PENDING, "UPSTREAM_ERROR")
        ]
        # the next run resumes those vectors, which do not fit the set: refused in their
        # transaction, the document keeps waiting with why, and the run goes on
        summary = asyncio.run(_ingest(dsn, root / "legal", "legal", WrongDimensionsEmbedder()))
        assert not summary.failures
        assert [(r.path, r.error_code) for r in summary.waiting] == [
            ("contracts/review.md", "DB_ERROR")
        ]
        assert "expected 384 dimensions, not 383" in (summary.waiting[0].error or "")
        # a parser error: a PDF that is not one
        (root / "hr" / "leave.md").unlink()
        (root / "hr" / "leave.pdf").write_bytes(b"%PDF-1.7 this is no pdf")
        summary = asyncio.run(_ingest(dsn, root / "hr", "hr"))
        assert [(r.path, r.outcome) for r in summary.failures] == [("leave.pdf", Outcome.FAILED)]
    after = _state(pair[0])
    assert after == _state(pair[1])
    # the new version of the review is there, some of its vectors pending; the rest of the
    # collection as it was
    docs_after = {(r[0], r[1]): r for r in after["documents"]}
    review_row = docs_after[("legal", "contracts/review.md")]
    assert review_row[2:4] == ("ready", "DB_ERROR") and review_row[5] > 0
    for key in ("units", "chunks", "contents"):
        changed = [r for r in after[key] if r[0] == "legal" and r[1] != "contracts/review.md"]
        assert changed == [
            r for r in before[key] if r[0] == "legal" and r[1] != "contracts/review.md"
        ], key
    # leave.md went (its file did), the unparsable leave.pdf wrote nothing
    assert {r[1] for r in after["chunks"] if r[0] == "hr"} == {"expenses.md", "old/handbook.md"}
    assert after["language_sums"] == _recounted_sums(pair[0])
    statuses = {(r[0], r[1]): r[2] for r in after["documents"]}
    assert statuses[("hr", "leave.pdf")] == "failed"
    # restore the review procedure for the later tests (same text on both sides)
    for _, dsn, root in _both(pair):
        (root / "legal" / "contracts" / "review.md").write_text(
            CORPUS["legal"]["contracts/review.md"]
        )
        (root / "hr" / "leave.pdf").unlink()
        _write_folder(root / "hr", {"leave.md": CORPUS["hr"]["leave.md"]})
        for collection in ("legal", "hr"):
            summary = asyncio.run(_ingest(dsn, root / collection, collection))
            assert not summary.failures, summary.failures
    assert _state(pair[0]) == _state(pair[1])


def test_pages_walked_by_token_equal_a_single_server(pair: tuple[str, str, Path]) -> None:
    url, single, _ = pair
    _settle_vectors(pair)
    walked = asyncio.run(_search(url, PAGED, walk=True))
    # equal scores rank by chunk id, which the two databases may hand out in another order
    # (files are ingested concurrently): compare the scores, and the paths of each score
    assert _by_score(walked) == _by_score(asyncio.run(_search(single, PAGED, walk=True)))
    whole = asyncio.run(_search(url, [{**s, "limit": 50} for s in PAGED]))
    for search, pages, (one_page,) in zip(PAGED, walked, whole, strict=True):
        hits = [h for page in pages for h in page]
        assert len(pages) > 1, search  # really paged
        assert [h[1] for h in hits] == list(range(1, len(hits) + 1)), search  # no gap, no dup
        assert hits == one_page, search  # the pages are the one ranking, cut


def _by_score(
    walked: list[list[list[tuple[str, int, float]]]],
) -> list[list[tuple[float, list[str]]]]:
    """Each search's hits as (score, the sorted paths with that score), best first, with the
    number of pages."""
    out = []
    for pages in walked:
        hits = [h for page in pages for h in page]
        groups: dict[float, list[str]] = {}
        for path, _, score in hits:
            groups.setdefault(score, []).append(path)
        out.append([(float(len(pages)), [])] + [(s, sorted(p)) for s, p in groups.items()])
    return out


def test_a_two_collection_search_scores_with_the_whole_scope(pair: tuple[str, str, Path]) -> None:
    url, single, _ = pair
    with psycopg.connect(url) as conn:
        shards = conn.execute(
            "SELECT get_shard_id_for_distribution_column('pgrag.chunks', id) FROM"
            " pgrag.collections WHERE name IN ('legal', 'hr')"
        ).fetchall()
    assert len(set(shards)) == 2  # the scope spans two shards
    for query in ("contract review invoices", "supplier contract claims", "合同 contract"):
        got, want = _two_collections(url, query), _two_collections(single, query)
        assert got["lexical"] and got["hybrid"], got
        assert {k: v for k, v in got.items() if k != "ids"} == {
            k: v for k, v in want.items() if k != "ids"
        }, query


def test_explain_search_replays_a_search_as_on_a_single_server(
    pair: tuple[str, str, Path],
) -> None:
    url, single, _ = pair
    got = _explained(url, EXPLAINED)
    assert all(got) and got == _explained(single, EXPLAINED)
    for rows in got:  # the replay ranks what the search logged
        assert [r[0] for r in rows] == [r[1] for r in rows]


def test_pgrag_search_explain_runs_on_the_cluster(pair: tuple[str, str, Path]) -> None:
    url, single, _ = pair
    got = _cli_explain(url, "true")
    assert len(got) == 4 and got == _cli_explain(single, "false")
