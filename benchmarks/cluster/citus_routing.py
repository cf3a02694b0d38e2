"""What the distribution key costs, measured on a local Citus cluster.

Loads the same rows (COLLECTIONS collections x CHUNKS chunks, DIMS-dimension random
vectors, an HNSW index per embedding set, the GIN tsvector index) into a plain database on
the coordinator (PGRAG_DISTRIBUTED=false) and into one distributed by collection
(PGRAG_DISTRIBUTED=true), then times per query, p50/p95 over REPEAT runs:

- `knn scoped`: the 10 nearest of one collection. By collection: one shard. By document,
  it would be the `knn fan-out` line: every shard searched, top-k merged on the coordinator.
- `fts scoped` / `fts fan-out`: the same for a full-text match count.

Plain SQL, not pgrag's search functions (the key's cost, not the ranking's). Builds
Citus the first time like the tests do (cached). About 2 minutes on 2 cores.

    python benchmarks/cluster/citus_routing.py [--chunks 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.support

from tests.support.citus import citus_cluster, migrate

COLLECTIONS = 4
DIMS = 384
REPEAT = 40


def load(conn: psycopg.Connection, chunks: int) -> float:
    """Insert the rows and build the indexes; returns the seconds it took."""
    t0 = time.monotonic()
    conn.execute(
        "INSERT INTO pgrag.collections (name) SELECT 'c' || i FROM generate_series(1, %s) i",
        (COLLECTIONS,),
    )
    conn.execute(
        "INSERT INTO pgrag.embedding_sets (collection_id, model, dimensions, state)"
        " SELECT id, 'random', %s, 'active' FROM pgrag.collections",
        (DIMS,),
    )
    conn.execute(
        "INSERT INTO pgrag.documents (collection_id, path, name, file_type, status)"
        " SELECT c.id, 'd' || i, 'd' || i, 'md', 'ready'"
        " FROM pgrag.collections c, generate_series(1, %s) i",
        (chunks // 10,),
    )
    conn.execute(
        "INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content, content_hash,"
        " token_count, char_start, char_end, lang)"
        " SELECT d.id, d.collection_id, o, 'word' || (random() * 500)::int || ' signing contract'"
        " || CASE WHEN random() < 0.05 THEN ' vacation' ELSE '' END, '\\x00', 5, 0, 5, 'en'"
        " FROM pgrag.documents d, generate_series(1, 10) o"
    )
    conn.execute(
        "INSERT INTO pgrag.embeddings (collection_id, set_id, chunk_id, embedding, lang)"
        f" SELECT c.collection_id, es.id, c.id,"
        f" (SELECT array_agg(random() - 0.5)::vector FROM generate_series(1, {DIMS} + c.id * 0)),"
        " 'en' FROM pgrag.chunks c JOIN pgrag.embedding_sets es"
        " ON es.collection_id = c.collection_id"
    )
    for (set_id,) in conn.execute("SELECT id FROM pgrag.embedding_sets").fetchall():
        conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,))
    conn.execute("ANALYZE")
    return time.monotonic() - t0


def timed(conn: psycopg.Connection, sql: str, params: tuple[object, ...]) -> tuple[float, float]:
    """(p50, p95) in milliseconds, after two warm-up runs."""
    runs = []
    for i in range(REPEAT + 2):
        t0 = time.perf_counter()
        conn.execute(sql, params).fetchall()
        if i >= 2:
            runs.append((time.perf_counter() - t0) * 1000)
    runs.sort()
    return statistics.median(runs), runs[int(len(runs) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=5000, help="chunks per collection")
    args = parser.parse_args()
    t0 = time.monotonic()
    with citus_cluster(workers=2) as cluster:
        print(f"cluster: build (cached) + start {time.monotonic() - t0:.1f}s")
        single, dist = cluster.create_database("single"), cluster.create_database("dist")
        asyncio.run(migrate(single, False))
        asyncio.run(migrate(dist, True))
        q = "[" + ",".join("0.1" if i % 3 else "-0.2" for i in range(DIMS)) + "]"
        knn = (
            f"SELECT chunk_id FROM pgrag.embeddings WHERE set_id = %s {{scope}}"
            f" ORDER BY embedding::vector({DIMS}) <=> %s::vector LIMIT 10"
        )
        fts = (
            "SELECT count(*) FROM pgrag.chunks WHERE tsv @@ to_tsquery('pgrag.search', 'vacation')"
            " {scope}"
        )
        total = COLLECTIONS * args.chunks
        print(f"{total} chunks, {COLLECTIONS} collections, {DIMS} dimensions; ms p50/p95")
        for name, dsn in (("single node", single), ("by collection", dist)):
            by_collection = "AND collection_id = 2" if dsn == dist else ""
            with psycopg.connect(dsn, autocommit=True) as conn:
                secs = load(conn, args.chunks)
                print(f"{name}: load + index {secs:.1f}s ({total / secs:.0f} chunks/s)")
                for label, sql, params in (
                    # a single node's embeddings have no collection_id: the set scopes it
                    ("knn scoped ", knn.format(scope=by_collection), (2, q)),
                    ("knn fan-out", knn.format(scope=""), (2, q)),
                    ("fts scoped ", fts.format(scope="AND collection_id = 2"), ()),
                    ("fts fan-out", fts.format(scope=""), ()),
                ):
                    p50, p95 = timed(conn, sql, params)
                    print(f"  {label}  {p50:7.2f} / {p95:7.2f}")


if __name__ == "__main__":
    main()
