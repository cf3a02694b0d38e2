"""Retrieval quality on real office documents: the docbench knowledge base (18 files: PDF,
DOCX, XLSX, PPTX, CSV, Markdown, HTML, TXT in UTF-8 and GBK; English, Chinese and mixed)
ingested by pgrag itself with the bundled model, then 76 queries with expected document,
location and answer text through the search service, as `pgrag eval` runs them.

Every query runs in hybrid, semantic and keyword mode (regex queries in regex mode). Prints
hit@1, hit@3, MRR@10, location accuracy and answer-in-snippet per mode, category and
language pair; where the answer's chunk stands among its document's results (location
rank); then every query not answered at rank 1 at its location, with the chunk shown and
the chunk that holds the answer; writes JSON (`--label` keys the run).

`--context-tokens` bounds the document context chunks carry (0: none); `--context-use`
measures where it helps: `both` (ingestion as is), `vector` (embedded, then removed from
the chunks, so BM25 does not see it), `lexical` (ingested without, then written into the
chunks, so only BM25 sees it).

    python benchmarks/documents.py [--dsn DSN] [--modes hybrid,semantic,keyword]
        [--context-tokens 48] [--context-use both|vector|lexical]
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
from pgrag.ingest.context import CONTEXT_TOKENS
from pgrag.ingest.parse_worker import ParseOptions
from pgrag.ingest.pipeline import Ingestor
from pgrag.ingest.prepare import prepare_file
from pgrag.ingest.walker import walk
from pgrag.search.engine import SearchService
from pgrag.search.models import Location
from pgrag.services.evaluation import (
    ExpectedLocation,
    Outcome,
    answer_in,
    location_matches,
    parse_queries,
    report,
    run_queries,
)
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
    p.add_argument("--context-tokens", type=int, default=CONTEXT_TOKENS)
    p.add_argument("--context-use", choices=("both", "vector", "lexical"), default="both")
    return p.parse_args(argv)


CHUNKS_SQL = """
SELECT c.id, d.path, c.page, c.section, c.sheet, c.slide, c.row_start, c.row_end, c.content
FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id ORDER BY d.path, c.ordinal
"""
# `--context-use lexical`: the context each chunk would carry, written after ingestion
SET_CONTEXT_SQL = """
UPDATE pgrag.chunks c SET context = x.context
FROM unnest(%s::text[], %s::int[], %s::text[]) AS x(path, ordinal, context), pgrag.documents d
WHERE d.id = c.document_id AND d.path = x.path AND c.ordinal = x.ordinal
"""


def contexts(root: Path, tokens: int) -> tuple[list[str], list[int], list[str | None]]:
    """(path, ordinal, context) of every chunk, as ingestion computes them."""
    paths, ordinals, texts = [], [], []
    for found in walk(root)[1]:
        prepared = prepare_file(found, "", 350, 40, context_tokens=tokens)
        for ordinal, chunk in enumerate(prepared.chunks, 1):
            paths.append(found.rel)
            ordinals.append(ordinal)
            texts.append(chunk.context)
    return paths, ordinals, texts


async def ingest(db: Any, provider: LocalE5Provider, root: Path, args: argparse.Namespace) -> float:
    """Ingest docbench with the context as asked; the wall time of the ingestion proper."""
    tokens = 0 if args.context_use == "lexical" else args.context_tokens
    t = time.perf_counter()
    summary = await Ingestor(
        db.pool, provider, collection=COLLECTION, parse=ParseOptions(context_tokens=tokens)
    ).run([root])
    ingest_s = time.perf_counter() - t
    if summary.failures:
        raise SystemExit(f"ingestion failed: {summary.failures}")
    async with db.pool.connection() as conn:
        if args.context_use == "vector":
            await conn.execute("UPDATE pgrag.chunks SET context = NULL")
        elif args.context_use == "lexical":
            await conn.execute(SET_CONTEXT_SQL, contexts(root, args.context_tokens))
    return ingest_s


async def ingest_and_evaluate(
    dsn: str, root: Path, modes: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    queries = parse_queries(args.queries.read_text(encoding="utf-8"), args.queries.name)
    provider = LocalE5Provider()
    try:
        async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
            ingest_s = await ingest(db, provider, root, args)
            async with db.pool.connection() as conn:
                chunks = await (await conn.execute(CHUNKS_SQL)).fetchall()
            service = SearchService(db.pool, provider, log_searches=False)
            t = time.perf_counter()
            outcomes, missing = await run_queries(
                service, queries, modes=modes, collection=COLLECTION
            )
            search_s = time.perf_counter() - t
    finally:
        await provider.aclose()
    result = report(outcomes, missing)
    result["misses"] = location_misses(outcomes, queries, chunks)
    counts = (len({c[1] for c in chunks}), len(chunks))
    result["corpus"] = {
        "files": len(docbench.FILES),
        "documents": counts[0],
        "chunks": counts[1],
        "queries": len(queries),
        "ingest_s": round(ingest_s, 1),
        "search_s": round(search_s, 1),
    }
    return result


def _where(row: tuple[Any, ...]) -> str:
    _, _, page, section, sheet, slide, r0, r1, _ = row
    loc = Location(
        page=page, section=section, sheet=sheet, slide=slide, rows=f"{r0}-{r1}" if r0 else None
    )
    return json.dumps(loc.model_dump(exclude_none=True), ensure_ascii=False)


def _excerpt(row: tuple[Any, ...] | None) -> str:
    if row is None:
        return "-"
    return f"{_where(row)} {' '.join(row[8].split())[:150]!r}"


def location_misses(
    outcomes: list[Outcome], queries: list[Any], chunks: list[tuple[Any, ...]]
) -> list[dict[str, Any]]:
    """Every outcome whose first result for the expected document is not where the answer
    is: the chunk shown and the chunk that holds the answer (its location and text)."""
    by_id = {c[0]: c for c in chunks}
    expected = {q.query: q for q in queries}
    misses = []
    for o in outcomes:
        if o.location_ok is not False:
            continue
        q = expected[o.query]
        want = q.location or ExpectedLocation()
        answer = next(
            (
                c
                for c in chunks
                if c[1] == o.document
                and location_matches(want, Location.model_validate(json.loads(_where(c))))
                and answer_in(q.answer or "", c[8])
            ),
            None,
        )
        misses.append(
            {
                "mode": o.mode,
                "category": o.category,
                "query": o.query,
                "document": o.document,
                "rank": o.rank,
                "location_rank": o.location_rank,
                "shown": _excerpt(by_id.get(o.first_chunk_id)) if o.first_chunk_id else "-",
                "answer": _excerpt(answer),
            }
        )
    return misses


def print_location(summary: dict[str, Any]) -> None:
    """Location as its own figure: where the answer's chunk stands among its document's
    results (1: shown first; MRR over the queries with a location)."""
    print("\nlocation: rank of the answer chunk among its document's results (top 10)")
    print(f"  {'mode':<10} {'queries':<10} {'location@1':>10} {'MRR':>7}")
    for mode, m in summary.items():
        for name, figures in (("all", m["overall"]), *m["categories"].items()):
            if figures.get("location_n") and name in ("all", "context"):
                loc, mrr = figures["location"], figures["location_mrr"]
                print(f"  {mode:<10} {name:<10} {loc:>10.3f} {mrr:>7.3f}")


def print_misses(misses: list[dict[str, Any]]) -> None:
    print(f"\n{len(misses)} queries whose document's first result is not where the answer is")
    for m in misses:
        rank = f"document rank {m['rank']}" if m["rank"] else "document not in top 10"
        where = m["location_rank"] or "not among its results"
        print(f"  {m['mode']} [{m['category']}] {m['query']}  ({rank}; answer chunk: {where})")
        print(f"      shown:  {m['shown']}\n      answer: {m['answer']}")


def save(path: Path, label: str, result: dict[str, Any]) -> None:
    data = json.loads(path.read_text()) if path.exists() else {}
    data[label] = result
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    started = time.perf_counter()
    load = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="pgrag-docbench-") as tmp:
        root = docbench.build(Path(tmp))
        with support.server(args.dsn) as admin:
            dsn = support.fresh_database(admin, DATABASE)
            try:
                result = asyncio.run(ingest_and_evaluate(dsn, root, modes, args))
            finally:
                support.drop_database(admin, dsn)
    print_summary(result["summary"])
    print_location(result["summary"])
    print_misses(result["misses"])
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
