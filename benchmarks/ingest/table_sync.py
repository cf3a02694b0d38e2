"""Table sources (issue 40): what the triggers cost the user's writes, how fast a change
becomes searchable, and the backfill's rate, in one run.

- write cost (table_sync_writes.py): a bulk `INSERT … SELECT` of --bulk rows and --single
  single-row INSERTs and UPDATEs into two identical tables, one a source and one not, the
  variants alternating (targets: bulk ≤ 1.3×, single-row p95 ≤ +0.3 ms);
- unindexed UPDATE: every row's unindexed column changed; the queue entries and the
  embedding calls it caused (target: zero);
- change → searchable: one TableSync follower (what `pgrag serve` runs, with the bundled
  model unless --change-model hash) while a writer changes --rate rows a second; each
  change's time until the keyword leg finds it (target: p95 ≤ 2 s) and until all its
  vectors are written, against the model's time to embed its text alone (target: the
  vectors follow within that);
- backfill: --backfill rows added as a source, drained to the end with the hash embedder
  (or --backfill-model local: the bundled model; a large backfill builds the vector index
  once at its end: whether it was there is checked);
  rows/s and XLM-R-counted tokens/s, peak RSS, and the pending count checked to be exact at
  every step (the checks' time is not counted as the backfill's); against the file
  pipeline's tokens/s (`pgrag ingest` of Markdown files made of the same ticket texts, the
  same embedder) in the same process, before and after the backfill (their mean).

    python benchmarks/ingest/table_sync.py [--bulk 100000] [--single 2000] [--rounds 7]
        [--rate 10] [--changes 100] [--change-model local|hash] [--backfill 100000] [--files 100]
        [--backfill-model hash|local]
        [--only write_cost,unindexed_update,change_to_keyword,backfill,file_pipeline]
        [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
sys.path.insert(0, str(Path(__file__).resolve().parent))  # table_sync_writes.py
import support
from table_sync_writes import BULK_SQL, TABLE_SQL, write_cost

from pgrag.embeddings.hashing import HashEmbedder
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.services import table_sources as service
from pgrag.settings import load_settings

# a support ticket of ~60 tokens, different in every row (the embedding cache never hits)
TICKET_SQL = (
    "'Customer ' || g || ' reports that the printer on floor ' || (g %% 9) || ' shows error E'"
    " || g || ' after the toner cartridge was replaced. The job queue stalls, the status page"
    " says offline, and restarting the spooler did not help. Ticket opened by site ' || (g %% 37)"
)
# the default collection's vector index, valid
INDEX_SQL = """
SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pgrag.collections c
               ON i.indexrelid = to_regclass('pgrag.embeddings_hnsw_' || c.active_set_id)
               WHERE c.name = 'default' AND i.indisvalid)
"""
BACKFILL_SQL = (
    """
INSERT INTO {name} (id, subject, body, customer)
SELECT g, 'Ticket ' || g, """
    + TICKET_SQL
    + """, (ARRAY['acme', 'globex', 'initech'])[1 + g %% 3]
FROM generate_series(%s::bigint, %s::bigint) g
"""
)


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.passages = 0

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        if not is_query:
            self.passages += len(texts)
        return await super()._embed(texts, is_query=is_query)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bulk", type=int, default=100_000)
    p.add_argument("--single", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--rate", type=float, default=10.0, help="changes per second")
    p.add_argument("--changes", type=int, default=100)
    p.add_argument(
        "--change-model",
        choices=("local", "hash"),
        default="local",
        help="the follower's embedder in change_to_keyword (local: the bundled model)",
    )
    p.add_argument("--backfill", type=int, default=100_000)
    p.add_argument("--files", type=int, default=100, help="files of 100 tickets each")
    p.add_argument(
        "--backfill-model",
        choices=("hash", "local"),
        default="hash",
        help="the embedder of backfill and file_pipeline (local: the bundled model)",
    )
    p.add_argument("--only", default=",".join(PARTS), help="comma-separated parts to run")
    p.add_argument("--database-url", default=None)
    p.add_argument(
        "--out", type=Path, default=Path(__file__).parents[1] / "results/table_sync.json"
    )
    return p.parse_args(argv)


async def unindexed_update(dsn: str, pool: Any, settings: Any) -> dict[str, Any]:
    provider = CountingEmbedder()
    with support.connect(dsn) as conn:
        conn.execute(TABLE_SQL.format(name="u_tickets"))
        conn.execute(BULK_SQL.format(name="u_tickets"), (1, 2000))
        conn.execute("SELECT pgrag.add_table_source('u_tickets', ARRAY['body'])")
    await service.sync(pool, provider, settings, "u_tickets")
    before = provider.passages
    with support.connect(dsn) as conn:
        conn.execute("UPDATE u_tickets SET views = views + 1")
        (queued,) = conn.execute("SELECT count(*) FROM pgrag.source_queue").fetchone()
    await service.sync(pool, provider, settings, "u_tickets")
    return {"rows": 2000, "queue_entries": queued, "embedding_calls": provider.passages - before}


# the changed row's document has all its vectors
VECTORS_DONE_SQL = """
SELECT d.vectors_pending = 0 AND EXISTS (SELECT 1 FROM pgrag.embeddings e
                                         WHERE e.document_id = d.id)
FROM pgrag.documents d WHERE d.path = %s
"""


async def change_latency(
    dsn: str, pool: Any, settings: Any, rate: float, changes: int, model: str
) -> dict[str, Any]:
    """A follower drains while a writer changes rows: each change's time to keyword hits
    and to all its vectors, against the time the model takes to embed its text alone (the
    target: the vectors follow the keyword hit by about that)."""
    provider = await _embedder(model)
    with support.connect(dsn) as conn:
        conn.execute(TABLE_SQL.format(name="l_tickets"))
        conn.execute(
            "SELECT pgrag.add_table_source('l_tickets', ARRAY['body'], collection => 'changes')"
        )
    follower = asyncio.create_task(service.follow(dsn, pool, provider, settings))
    search = SearchService(pool, provider)
    keyword: list[float] = []
    vectors: list[float] = []
    texts: list[str] = []
    try:
        with support.connect(dsn) as conn:
            for i in range(changes):
                word = f"zq{i:05d}marker"
                (ticket,) = conn.execute(
                    "SELECT " + TICKET_SQL + " FROM (SELECT %s::int AS g) x", (i,)
                ).fetchone()
                texts.append(f"Ticket about {word}: {ticket}")
                t0 = time.perf_counter()
                conn.execute(
                    "INSERT INTO l_tickets (id, subject, body) VALUES (%s, 's', %s)",
                    (i, texts[-1]),
                )
                while not (
                    await search.search(SearchRequest(query=word, mode="keyword"))
                ).data.results:
                    await asyncio.sleep(0.01)
                keyword.append(time.perf_counter() - t0)
                while not await _vectors_done(pool, f"tables/l_tickets/{i}"):
                    await asyncio.sleep(0.01)
                vectors.append(time.perf_counter() - t0)
                await asyncio.sleep(max(0.0, 1 / rate - vectors[-1]))
    finally:
        follower.cancel()
    embed = []
    for text in texts:  # the same texts alone, the model warm
        t0 = time.perf_counter()
        await provider.embed_passages([text])
        embed.append(time.perf_counter() - t0)
    after = [v - k for v, k in zip(vectors, keyword, strict=True)]
    return {
        "rate_per_s": rate,
        "changes": changes,
        "model": provider.model,
        **support.percentiles_ms(keyword),
        "to_vectors": support.percentiles_ms(vectors),
        "vectors_after_keyword": support.percentiles_ms(after),
        "embedding_alone": support.percentiles_ms(embed),
    }


async def _vectors_done(pool: Any, path: str) -> bool:
    async with pool.connection() as conn:
        row = await (await conn.execute(VECTORS_DONE_SQL, (path,))).fetchone()
    return bool(row and row[0])


async def _embedder(model: str) -> Any:
    """The bundled model (local) or the hash embedder (no model time at all), loaded."""
    provider = support.local_provider() if model == "local" else HashEmbedder()
    await provider.embed_passages(["a warm-up before the clock starts"])
    return provider


async def backfill(dsn: str, pool: Any, settings: Any, rows: int, model: str) -> dict[str, Any]:
    provider = await _embedder(model)
    with support.connect(dsn) as conn:
        conn.execute(TABLE_SQL.format(name="b_tickets"))
        conn.execute(BACKFILL_SQL.format(name="b_tickets"), (1, rows))
        conn.execute("SELECT pgrag.add_table_source('b_tickets', ARRAY['body'])")
    checks: list[bool] = []
    indexed_meanwhile: list[bool] = []
    checking = [0.0]  # seconds the checks held the event loop: not the backfill's

    def progress(_: Any) -> None:
        """Between two batches every row is either indexed or pending, never both or
        neither: pending (keys queued, counted in the entries' arrays, plus the rows the
        backfill has yet to queue) + indexed = rows, exactly. And whether the collection's
        vector index is there (a large backfill builds it at its end)."""
        t = time.perf_counter()
        with support.connect(dsn) as conn:
            (pending, indexed) = conn.execute(
                "SELECT pending, indexed FROM pgrag.table_source_stats() WHERE name = 'b_tickets'"
            ).fetchone()
            indexed_meanwhile.append(bool(conn.execute(INDEX_SQL).fetchone()[0]))
        checks.append(pending + indexed == rows)
        checking[0] += time.perf_counter() - t

    t0 = time.perf_counter()
    await service.sync(pool, provider, settings, "b_tickets", progress)
    wall = time.perf_counter() - t0
    seconds = wall - checking[0]
    tokens, chunks = _tokens(dsn, "tables/b_tickets/", "default")
    with support.connect(dsn) as conn:
        index_after = bool(conn.execute(INDEX_SQL).fetchone()[0])
    return {
        "model": provider.model,
        "rows": rows,
        "wall_seconds": round(wall, 2),
        "checks_seconds": round(checking[0], 2),  # the exactness checks, synchronous
        "seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds, 1),
        "tokens": tokens,
        "chunks": chunks,
        "tokens_per_s": round(tokens / seconds, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "pending_checks": len(checks),
        "pending_exact": all(checks),
        "index_during_backfill": sum(indexed_meanwhile),  # checks that found it there
        "index_after": index_after,
    }


def _tokens(dsn: str, prefix: str, collection: str) -> tuple[int, int]:
    """The chunks' tokens (XLM-R, as the chunker counts them) and the chunks (one vector
    each) of the collection's documents under prefix."""
    with support.connect(dsn) as conn:
        (n, chunks) = conn.execute(
            "SELECT coalesce(sum(c.token_count), 0), count(*) FROM pgrag.chunks c"
            " JOIN pgrag.documents d ON d.id = c.document_id"
            " JOIN pgrag.collections k ON k.id = d.collection_id"
            " WHERE d.path ^@ %s AND k.name = %s",
            (prefix, collection),
        ).fetchone()
    return int(n), int(chunks)


async def file_pipeline(
    dsn: str, pool: Any, files: int, model: str, collection: str = "files", first: int = 1
) -> dict[str, Any]:
    """`pgrag ingest` (the Ingestor, hash embedder) of Markdown files of 100 tickets each,
    the same texts as the backfill's rows: the yardstick of the backfill's tokens/s."""
    from pgrag.ingest.pipeline import Ingestor

    with support.connect(dsn) as conn:
        texts = [
            r[0]
            for r in conn.execute(
                "SELECT " + TICKET_SQL + " FROM generate_series(%s::int, %s::int) g",
                (first, first + files * 100 - 1),
            ).fetchall()
        ]
    provider = await _embedder(model)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tickets"
        folder.mkdir()
        for f in range(files):
            sections = texts[f * 100 : (f + 1) * 100]
            body = "\n\n".join(f"## Ticket {f * 100 + i}\n\n{t}" for i, t in enumerate(sections))
            (folder / f"tickets{f:04d}.md").write_text(f"# Tickets {f}\n\n{body}\n")
        t0 = time.perf_counter()
        summary = await Ingestor(pool, provider, collection=collection).run([folder])
        seconds = time.perf_counter() - t0
    assert not summary.failures, summary.failures
    tokens, chunks = _tokens(dsn, "tickets", collection)
    return {
        "model": provider.model,
        "files": files,
        "seconds": round(seconds, 2),
        "tokens": tokens,
        "chunks": chunks,
        "tokens_per_s": round(tokens / seconds, 1),
    }


PARTS = ("write_cost", "unindexed_update", "change_to_keyword", "backfill", "file_pipeline")


async def measure(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    settings = load_settings(database_url=dsn, embedding_model="hash/384")
    from pgrag.db.database import open_database

    only = set(args.only.split(","))
    out: dict[str, Any] = {}
    async with open_database(settings, dsn=dsn, max_size=4) as db:
        if "unindexed_update" in only:
            out["unindexed_update"] = await unindexed_update(dsn, db.pool, settings)
        if "change_to_keyword" in only:
            out["change_to_keyword"] = await change_latency(
                dsn, db.pool, settings, args.rate, args.changes, args.change_model
            )
        yardstick = []  # the file pipeline before and after the backfill: the box drifts
        if "file_pipeline" in only:
            yardstick.append(await file_pipeline(dsn, db.pool, args.files, args.backfill_model))
        if "backfill" in only:
            out["backfill"] = await backfill(
                dsn, db.pool, settings, args.backfill, args.backfill_model
            )
        if yardstick and "backfill" in only:
            yardstick.append(
                # other tickets: none of its texts is in the embedding cache
                await file_pipeline(
                    dsn,
                    db.pool,
                    args.files,
                    args.backfill_model,
                    "files_after",
                    args.files * 100 + 1,
                )
            )
    if yardstick:
        out["file_pipeline"] = {
            **yardstick[0],
            "runs_tokens_per_s": [y["tokens_per_s"] for y in yardstick],
            "tokens_per_s": round(statistics.mean(y["tokens_per_s"] for y in yardstick), 1),
        }
    if "backfill" in out and "file_pipeline" in out:
        out["backfill_vs_files_tokens_per_s"] = round(
            out["backfill"]["tokens_per_s"] / out["file_pipeline"]["tokens_per_s"], 3
        )
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with support.server(args.database_url) as admin:
        dsn = support.fresh_database(admin, "pgrag_bench_table_sync")
        try:
            result: dict[str, Any] = {
                "when": datetime.now(UTC).isoformat(timespec="seconds"),
                "load_average": list(os.getloadavg()),
            }
            if "write_cost" in args.only.split(","):
                result["write_cost"] = write_cost(dsn, args.bulk, args.single, args.rounds)
            result.update(asyncio.run(measure(dsn, args)))
        finally:
            support.drop_database(admin, dsn)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
