"""Retrieval quality on real office documents: the docbench knowledge base (18 files: PDF,
DOCX, XLSX, PPTX, CSV, Markdown, HTML, TXT in UTF-8 and GBK; English, Chinese and mixed)
ingested by pgrag itself with the bundled model, then 76 queries with expected document,
location and answer text through the search service, as `pgrag eval` runs them.

Every query runs in hybrid, semantic and keyword mode (regex queries in regex mode). Prints
hit@1, hit@3, MRR@10, location accuracy and answer-in-snippet per mode, category and
language pair; where the answer's chunk stands among its document's results (location
rank); then every query not answered at rank 1 at its location, with the chunk shown and
the chunk that holds the answer; writes JSON (`--label` keys the run). The queries are
split into `train` (tune on these) and `test` (judge on these): `docbench/split.py`;
`--split` runs one part, and a run of all reports each part besides the whole.

`--variants` measures the document context: USE:TOKENS, TOKENS its bound (0: none), USE
`both` (ingestion as is), `vector` (embedded, then removed from the chunks, so BM25 does not
see it) or `lexical` (ingested without, then written into the chunks, so only BM25 sees
it); `both:48/16`: BM25 sees the context of 48 tokens, the model that of 16 (ingested
with 16, then the 48-token context written into the chunks). Each variant in its own
collection of one database, so texts embedded once come from the embedding cache after.

    python benchmarks/quality/documents.py [--dsn DSN] [--modes hybrid,semantic,keyword]
        [--split train|test|all] [--variants both:48,both:0,vector:48,lexical:48]
        [--engines openvino,onnx]

The bundled model runs on PGRAG_EMBEDDING_ENGINE's engine (default `auto`); `--engines`
runs it all with each engine in turn, each into a fresh database (no embedding cache shared),
saved as LABEL/ENGINE, then prints every figure's difference from `onnx`'s (engines.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docbench"))
import build as docbench
import engines
import support
from split import Split, part_of, select, train_keys

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
from pgrag.search.modes import SearchMode
from pgrag.services.evaluation import (
    ExpectedLocation,
    Outcome,
    answer_in,
    location_matches,
    parse_queries,
    report,
    run_queries,
    summarise,
)
from pgrag.settings import load_settings

QUERIES = Path(__file__).resolve().parents[1] / "docbench" / "queries.jsonl"
DATABASE = "pgrag_bench_documents"
COLLECTION = "docbench"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dsn", default=None, help="use this server (database %s is recreated)")
    p.add_argument("--modes", default="hybrid,semantic,keyword", help="comma-separated")
    p.add_argument("--queries", type=Path, default=QUERIES)
    p.add_argument(
        "--split",
        type=Split,
        choices=list(Split),
        default=Split.ALL,
        help="the queries of one part (docbench/split.py), or all with each part reported",
    )
    p.add_argument("--out", type=Path, default=support.RESULTS / "documents.json")
    p.add_argument("--label", default="latest", help="key of this run in the JSON file")
    p.add_argument(
        "--variants",
        default=f"both:{CONTEXT_TOKENS}",
        help="comma list of USE:TOKENS (USE: both, vector, lexical; TOKENS 0: no context),"
        " each in its own collection of one database; labels LABEL/USE:TOKENS",
    )
    p.add_argument("--engines", default=None, help="e.g. openvino,onnx: each engine in turn")
    return p.parse_args(argv)


@dataclass(frozen=True)
class Variant:
    """Where the document context goes (both, vector, lexical) and its bound in tokens;
    `vector_tokens`, a shorter bound for what the model sees (`both` only)."""

    use: str
    tokens: int
    vector_tokens: int | None = None

    @classmethod
    def parse(cls, text: str) -> Variant:
        use, _, bounds = text.strip().partition(":")
        tokens, _, vector = bounds.partition("/")
        if (
            use not in ("both", "vector", "lexical")
            or not tokens.isdigit()
            or (vector and (use != "both" or not vector.isdigit()))
        ):
            raise SystemExit(f"bad variant {text!r}: USE:TOKENS[/VECTOR], USE both|vector|lexical")
        return cls(use, int(tokens), int(vector) if vector else None)

    @property
    def name(self) -> str:
        vector = "" if self.vector_tokens is None else f"/{self.vector_tokens}"
        return f"{self.use}:{self.tokens}{vector}"

    @property
    def ingested_tokens(self) -> int:
        """The bound ingestion (and so the model) works with."""
        if self.use == "lexical":
            return 0
        return self.tokens if self.vector_tokens is None else self.vector_tokens


CHUNKS_SQL = """
SELECT c.id, d.path, c.page, c.section, c.sheet, c.slide, c.row_start, c.row_end, c.content
FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id
JOIN pgrag.collections col ON col.id = c.collection_id
WHERE col.name = %s ORDER BY d.path, c.ordinal
"""
NO_CONTEXT_SQL = """
UPDATE pgrag.chunks c SET context = NULL FROM pgrag.collections col
WHERE col.id = c.collection_id AND col.name = %s
"""
# `lexical`: the context each chunk would carry, written after an ingestion without it
SET_CONTEXT_SQL = """
UPDATE pgrag.chunks c SET context = x.context
FROM unnest(%s::text[], %s::int[], %s::text[]) AS x(path, ordinal, context),
     pgrag.documents d, pgrag.collections col
WHERE d.id = c.document_id AND d.path = x.path AND c.ordinal = x.ordinal
  AND col.id = c.collection_id AND col.name = %s
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


async def ingest(db: Any, provider: LocalE5Provider, root: Path, v: Variant) -> float:
    """Ingest docbench into the variant's collection; the wall time of the ingestion proper
    (texts another variant embedded already come from the embedding cache)."""
    collection = f"{COLLECTION}-{v.name}"
    options = ParseOptions(context_tokens=v.ingested_tokens)
    t = time.perf_counter()
    summary = await Ingestor(db.pool, provider, collection=collection, parse=options).run([root])
    ingest_s = time.perf_counter() - t
    if summary.failures:
        raise SystemExit(f"ingestion failed: {summary.failures}")
    async with db.pool.connection() as conn:
        if v.use == "vector":
            await conn.execute(NO_CONTEXT_SQL, (collection,))
        elif v.ingested_tokens != v.tokens:
            await conn.execute(SET_CONTEXT_SQL, (*contexts(root, v.tokens), collection))
    return ingest_s


async def evaluate(
    db: Any, provider: LocalE5Provider, root: Path, v: Variant, args: argparse.Namespace
) -> dict[str, Any]:
    every = parse_queries(args.queries.read_text(encoding="utf-8"), args.queries.name)
    queries = select(every, args.split)
    collection = f"{COLLECTION}-{v.name}"
    ingest_s = await ingest(db, provider, root, v)
    async with db.pool.connection() as conn:
        chunks = await (await conn.execute(CHUNKS_SQL, (collection,))).fetchall()
    service = SearchService(db.pool, provider, log_searches=False)
    t = time.perf_counter()
    modes = [SearchMode(m.strip()) for m in args.modes.split(",") if m.strip()]
    outcomes, missing = await run_queries(service, queries, modes=modes, collection=collection)
    result = report(outcomes, missing)
    train = train_keys(every)
    parts = {q.query: part_of(q, train) for q in every}
    result["split"] = args.split.value
    result["parts"] = {
        part.value: summarise([o for o in outcomes if parts[o.query] is part])
        for part in (Split.TRAIN, Split.TEST)
        if args.split in (part, Split.ALL)
    }
    result["misses"] = [
        {**m, "split": parts[m["query"]].value} for m in location_misses(outcomes, queries, chunks)
    ]
    result["corpus"] = {
        "files": len(docbench.FILES),
        "documents": len({c[1] for c in chunks}),
        "chunks": len(chunks),
        "queries": len(queries),
        "ingest_s": round(ingest_s, 1),
        "search_s": round(time.perf_counter() - t, 1),
        "context": v.name,
    }
    return result


async def ingest_and_evaluate(
    dsn: str, root: Path, args: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    """Every variant in one database (one embedding cache), in the order given."""
    variants = [Variant.parse(x) for x in args.variants.split(",") if x.strip()]
    provider = support.local_provider()
    results = {}
    try:
        async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
            for v in variants:
                results[v.name] = await evaluate(db, provider, root, v, args)
    finally:
        await provider.aclose()
    return results


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


def print_parts(result: dict[str, Any]) -> None:
    """Each mode's figures on the train and test queries and on all of those run."""
    print("\nper part: hit@1 / hit@3 / MRR@10 / location@1 / location MRR (queries)")
    parts = {**result["parts"], result["split"]: result["summary"]}
    for mode in result["summary"]:
        for part, summary in parts.items():
            m = summary.get(mode, {}).get("overall")
            if m:
                figures = " / ".join(
                    f"{m[k]:.3f}" if m[k] is not None else "-"
                    for k in ("hit@1", "hit@3", "mrr", "location", "location_mrr")
                )
                print(f"  {mode:<10} {part:<6} {figures}  ({m['n']})")


def print_misses(misses: list[dict[str, Any]]) -> None:
    print(f"\n{len(misses)} queries whose document's first result is not where the answer is")
    for m in misses:
        rank = f"document rank {m['rank']}" if m["rank"] else "document not in top 10"
        where = m["location_rank"] or "not among its results"
        print(
            f"  {m['mode']} {m['split']} [{m['category']}] {m['query']}"
            f"  ({rank}; answer chunk: {where})"
        )
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
    names = engines.parse(args.engines)
    by_engine: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pgrag-docbench-") as tmp:
        root = docbench.build(Path(tmp))
        with support.server(args.dsn) as admin:
            for name in names or [None]:
                with engines.engine(name) if name else contextlib.nullcontext():
                    label = f"{args.label}/{name}" if name else args.label
                    by_engine[str(name)] = run_once(admin, root, args, label)
    if names:
        save(args.out, f"{args.label}/engine-differences", engines.differences(by_engine))
    return 0


def run_once(admin: str, root: Path, args: argparse.Namespace, label: str) -> dict[str, Any]:
    """Every variant into a fresh database, printed and saved under `label`."""
    started = time.perf_counter()
    load = [round(x, 2) for x in os.getloadavg()]
    dsn = support.fresh_database(admin, DATABASE)
    try:
        results = asyncio.run(ingest_and_evaluate(dsn, root, args))
    finally:
        support.drop_database(admin, dsn)
    for name, result in results.items():
        print(f"\n==== document context {name}")
        print_summary(result["summary"])
        print_location(result["summary"])
        print_parts(result)
        print_misses(result["misses"])
        key = label if len(results) == 1 else f"{label}/{name}"
        save(
            args.out,
            key,
            {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "model": support.MODEL,
                "engine": support.engine_name(),
                "environment": {
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "loadavg_at_start": load,
                },
                "method": "each query through SearchService.search (limit 10, chunk scope, "
                "default fusion); rank = position of the first result from the expected "
                "document; location/answer judged on that result",
                **result,
                "wall_s": round(time.perf_counter() - started, 1),
            },
        )
        print(f"\nwrote {args.out} [{key}]")
    return results


if __name__ == "__main__":
    sys.exit(main())
