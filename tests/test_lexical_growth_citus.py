"""Capped postings on a real Citus cluster (tests/support/citus.py): with a candidate budget
small enough that the query's common terms are capped, the tiers (pgrag.capped_postings)
run on the shards, unscoped and for one collection, and find the same pool as reading every
posting would, where the budget still covers the chunks there are."""

from __future__ import annotations

import psycopg
import pytest

from tests.support.citus import CitusCluster, ingested_database, three_collections

QUERY = "contract signing vacation"
POOL_SQL = """
SELECT array_agg(x.chunk_id ORDER BY x.chunk_id)
FROM pgrag.lexical_candidates(
    %s, collection_ids => %s, opts => pgrag.ranking_options(candidate_budget => %s)) x
"""
TERMS_SQL = """
SELECT count(*) FILTER (WHERE t.capped)
FROM pgrag.bm25_terms(pgrag.lexical_query(%s), %s, %s, 3) t
"""


@pytest.fixture(scope="module")
def cluster_dsn(citus: CitusCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    return ingested_database(citus, tmp_path_factory.mktemp("growth"), three_collections(3))


def test_capped_terms_run_on_the_cluster(cluster_dsn: str) -> None:
    with psycopg.connect(cluster_dsn) as conn:
        alpha = conn.execute("SELECT id FROM pgrag.collections WHERE name = 'alpha'").fetchone()
        assert alpha is not None
        for ids in (None, [alpha[0]]):
            capped = conn.execute(TERMS_SQL, (QUERY, ids, 3)).fetchone()
            assert capped is not None and capped[0] >= 1, ids  # the path under test
            every = conn.execute(POOL_SQL, (QUERY, ids, 1e9)).fetchone()
            # a budget of 3 caps each common term at 3 chunks; the pool loop and the
            # fallback still fill the pool with every matching chunk (fewer than the pool)
            small = conn.execute(POOL_SQL, (QUERY, ids, 3)).fetchone()
            assert every is not None and every[0], ids
            assert small == every, (ids, small, every)
