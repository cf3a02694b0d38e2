"""Retrieval quality on real office documents: the docbench knowledge base (18 files: PDF,
DOCX, XLSX, PPTX, CSV, Markdown, HTML, TXT in UTF-8 and GBK; English, Chinese and mixed)
ingested by pgrag itself with the bundled model, then 76 queries with expected document,
location and answer text through the search service, as `pgrag eval` runs them.

Every query runs in hybrid, semantic and keyword mode (regex queries in regex mode). Prints
hit@1, hit@3, MRR@10, location accuracy and answer-in-snippet per mode, category and
language pair, then the hybrid misses; writes JSON (`--label` keys the run).

    python benchmarks/documents.py [--dsn DSN] [--modes hybrid,semantic,keyword]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "docbench"))
import build as docbench
import support

from pgrag.cli.eval_command import print_summary
from pgrag.db.database import open_database
from pgrag.embeddings.local import LocalE5Provider
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.engine import SearchService
from pgrag.search.modes import SearchMode
from pgrag.services.evaluation import Outcome, parse_queries, report, run_queries
from pgrag.settings import load_settings

QUERIES = Path(__file__).resolve().parent / "docbench" / "queries.jsonl"
DATABASE = "pgrag_bench_documents"
COLLECTION = "docbench"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dsn", default=None, help="use this server (database %s is recreated)")
    p.add_argument("--modes", default="hybrid,semantic,keyword", help="comma-separated")
    p.add_argument("--queries", type=Path, default=QUERIES)
    p.add_argument("--out", type=Path, default=support.RESULTS / "documents.json")
    p.add_argument("--label", default="latest", help="key of this run in the JSON file")
    return p.parse_args(argv)


async def ingest_and_evaluate(
    dsn: str, root: Path, modes: list[SearchMode], queries_path: Path
) -> dict[str, Any]:
    queries = parse_queries(queries_path.read_text(encoding="utf-8"), queries_path.name)
    provider = LocalE5Provider()
    try:
        async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
            t = time.perf_counter()
            summary = await Ingestor(db.pool, provider, collection=COLLECTION).run([root])
            ingest_s = time.perf_counter() - t
            if summary.failures:
                raise SystemExit(f"ingestion failed: {summary.failures}")
            async with db.pool.connection() as conn:
                counts = await (
                    await conn.execute(
                        "SELECT (SELECT count(*) FROM pgrag.documents),"
                        " (SELECT count(*) FROM pgrag.chunks)"
                    )
                ).fetchone()
            service = SearchService(db.pool, provider, log_searches=False)
            t = time.perf_counter()
            outcomes, missing = await run_queries(
                service, queries, modes=modes, collection=COLLECTION
            )
            search_s = time.perf_counter() - t
    finally:
        await provider.aclose()
    result = report(outcomes, missing)
    result["corpus"] = {
        "files": len(docbench.FILES),
        "documents": counts[0],
        "chunks": counts[1],
        "queries": len(queries),
        "ingest_s": round(ingest_s, 1),
        "search_s": round(search_s, 1),
    }
    return result


def print_misses(outcomes: list[Outcome], mode: str) -> None:
    """The queries of one mode whose document was not first, or whose hit missed."""
    rows = [
        o
        for o in outcomes
        if o.mode == mode and (o.rank != 1 or o.location_ok is False or o.answer_ok is False)
    ]
    print(f"\n{mode}: {len(rows)} queries not answered at rank 1 with location and answer")
    for o in rows:
        flags = [
            f"rank {o.rank}" if o.rank else "not in top 10",
            "location ok" if o.location_ok else f"location {o.first_location}",
            "answer shown" if o.answer_ok else "answer not shown",
        ]
        print(f"  [{o.category}] {o.query}\n      want {o.document}; {'; '.join(flags)}")
        print(f"      first: {o.top[0] if o.top else '-'}")


def save(path: Path, label: str, result: dict[str, Any]) -> None:
    data = json.loads(path.read_text()) if path.exists() else {}
    data[label] = result
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    modes = [SearchMode(m.strip()) for m in args.modes.split(",") if m.strip()]
    started = time.perf_counter()
    load = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="pgrag-docbench-") as tmp:
        root = docbench.build(Path(tmp))
        with support.server(args.dsn) as admin:
            dsn = support.fresh_database(admin, DATABASE)
            try:
                result = asyncio.run(ingest_and_evaluate(dsn, root, modes, args.queries))
            finally:
                support.drop_database(admin, dsn)
    outcomes = [Outcome(**q) for q in result["queries"]]
    print_summary(result["summary"])
    print_misses(outcomes, "hybrid")
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": support.MODEL,
        "environment": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_at_start": load,
        },
        "method": "each query through SearchService.search (limit 10, chunk scope, default "
        "fusion); rank = position of the first result from the expected document; "
        "location/answer judged on that result",
        **result,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    save(args.out, args.label, result)
    print(f"\nwrote {args.out} [{args.label}] in {result['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
