"""Write cost of BM25's per-collection sums (migration 0023): ingestion throughput of the
same files with the sums kept by the triggers on pgrag.chunks (a single server), by the
writer's explicit calls (pgrag.write_bm25_sums: what Citus runs), and not kept at all (the
code before the sums), in one run, the three variants alternating round by round.

Each round, per variant:
- chunk writes: WRITES documents of 5 chunks (SciFact abstracts) written as a version's
  transaction writes them (the writer's -1 call, delete the old chunks, insert the new,
  the +1 call; pgrag.store.documents.write_version), first as new documents, then each
  again as a new version: the SQL cost the sums add, without parsing or embedding;
- pipeline: DOCS markdown files (4 abstracts each) ingested into a fresh collection by
  pgrag's own pipeline with the hash embedder (no model time), then every file rewritten
  and ingested again; then the sums compacted.

    python benchmarks/ingest/bm25_writes.py [--writes 2000] [--docs 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
import support

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.settings import load_settings

TRIGGERS = ("chunks_bm25_added", "chunks_bm25_removed", "chunks_bm25_updated")
# the code before the sums: no trigger, and the writer's call does nothing
OFF_SQL = (
    "CREATE OR REPLACE FUNCTION pgrag.write_bm25_sums(p_collection_id bigint,"
    " p_document_id uuid, p_sign int) RETURNS void LANGUAGE sql AS 'SELECT'"
)
VARIANTS = ("off", "triggers", "writer")
WRITE_SQL = "SELECT pgrag.write_bm25_sums(%s, %s, %s)"
DELETE_SQL = "DELETE FROM pgrag.chunks WHERE collection_id = %s AND document_id = %s"
INSERT_SQL = """
INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content, content_hash,
                          token_count, char_start, char_end)
SELECT %s, %s, o, t, sha256(convert_to(t, 'UTF8')), 100, 0, length(t)
FROM unnest(%s::text[]) WITH ORDINALITY AS x(t, o)
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--writes", type=int, default=2000, help="documents of the chunk writes")
    p.add_argument("--docs", type=int, default=100, help="files of the pipeline runs")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dsn", default=None, help="use this server instead of an embedded one")
    p.add_argument("--out", type=Path, default=support.RESULTS / "bm25_writes.json")
    p.add_argument("--label", default="latest")
    return p.parse_args(argv)


def write_files(folder: Path, src: support.BeirSet, docs: int, version: int) -> None:
    """docs files of 4 abstracts each (one section per abstract); version changes a word."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(docs):
        parts = [
            f"## {src.titles[(4 * i + k) % len(src.texts)]}\n\n{src.texts[(4 * i + k) % len(src.texts)]}"
            for k in range(4)
        ]
        body = "\n\n".join(parts)
        (folder / f"doc{i:05d}.md").write_text(f"# Document {i} v{version}\n\n{body}\n")


async def ingest(dsn: str, folder: Path, collection: str) -> tuple[float, int]:
    """Seconds of one pipeline run, and the chunks of the collection after it."""
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        t = time.perf_counter()
        summary = await Ingestor(db.pool, HashEmbedder("hash/384"), collection=collection).run(
            [folder]
        )
        seconds = time.perf_counter() - t
        assert not summary.failures, summary.failures
        async with db.pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT count(*) FROM pgrag.chunks c JOIN pgrag.collections k"
                    " ON k.id = c.collection_id WHERE k.name = %s",
                    (collection,),
                )
            ).fetchone()
    return seconds, int(row[0]) if row else 0


def prepare_variant(dsn: str, variant: str) -> None:
    with support.connect(dsn) as conn:
        if variant in ("off", "writer"):
            for name in TRIGGERS:
                conn.execute(f"DROP TRIGGER IF EXISTS {name} ON pgrag.chunks")
        if variant == "off":
            conn.execute(OFF_SQL)


def chunk_writes(dsn: str, src: support.BeirSet, docs: int, name: str) -> dict[str, Any]:
    """Seconds to write `docs` documents of 5 chunks as new documents, then as new versions."""
    out: dict[str, Any] = {"chunks": 5 * docs}
    with support.connect(dsn) as conn:
        cid = conn.execute(support.COLLECTION_SQL, (name,)).fetchone()[0]
        ids = [
            r[0]
            for r in conn.execute(
                "INSERT INTO pgrag.documents (collection_id, path, name, file_type, status)"
                " SELECT %s, 'd' || g, 'd' || g, 'md', 'ready' FROM generate_series(1, %s) g"
                " RETURNING id",
                (cid, docs),
            ).fetchall()
        ]
        for version in (1, 2):
            t = time.perf_counter()
            for i, d in enumerate(ids):
                texts = [src.texts[(5 * i + k + version) % len(src.texts)] for k in range(5)]
                with conn.transaction():
                    conn.execute(WRITE_SQL, (cid, d, -1))
                    conn.execute(DELETE_SQL, (cid, d))
                    conn.execute(INSERT_SQL, (d, cid, texts))
                    conn.execute(WRITE_SQL, (cid, d, 1))
            out["insert_s" if version == 1 else "version_s"] = time.perf_counter() - t
    return out


def one_round(dsn: str, tmp: Path, src: support.BeirSet, docs: int, name: str) -> dict[str, Any]:
    first = tmp / name
    write_files(first, src, docs, 1)
    insert_s, chunks = asyncio.run(ingest(dsn, first, name))
    write_files(first, src, docs, 2)
    version_s, _ = asyncio.run(ingest(dsn, first, name))
    with support.connect(dsn) as conn:
        t = time.perf_counter()
        conn.execute("SELECT pgrag.compact_bm25_sums()")
        compact_s = time.perf_counter() - t
    return {"chunks": chunks, "insert_s": insert_s, "version_s": version_s, "compact_s": compact_s}


def _summary(per_variant: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Median chunks per second per variant and phase, and each against `off`."""
    out: dict[str, Any] = {}
    for v, runs in zip(VARIANTS, per_variant, strict=True):
        chunks = runs[0]["chunks"]
        out[v] = {
            f"{phase}_chunks_per_s": round(
                chunks / statistics.median(x[f"{phase}_s"] for x in runs), 1
            )
            for phase in ("insert", "version")
        }
    for v in ("triggers", "writer"):
        for k in list(out[v]):
            out[v][f"{k}_vs_off"] = round(out[v][k] / out["off"][k], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    src = support.load_set("scifact", "test")
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    with support.server(args.dsn) as admin:
        dsns = {v: support.fresh_database(admin, f"pgrag_bench_bm25_{v}") for v in VARIANTS}
        try:
            for v, dsn in dsns.items():
                prepare_variant(dsn, v)
            with tempfile.TemporaryDirectory() as tmp:
                for r in range(args.rounds):
                    for v in VARIANTS if r % 2 == 0 else reversed(VARIANTS):
                        got = {
                            "chunk_writes": chunk_writes(dsns[v], src, args.writes, f"w{v}{r}"),
                            "pipeline": one_round(
                                dsns[v], Path(tmp) / v, src, args.docs, f"{v}{r}"
                            ),
                        }
                        runs[v].append(got)
                        print(f"   round {r} {v:<8} {got}", flush=True)
        finally:
            for dsn in dsns.values():
                support.drop_database(admin, dsn)
    summary = {
        measure: _summary([[x[measure] for x in runs[v]] for v in VARIANTS])
        for measure in ("chunk_writes", "pipeline")
    }
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "writes": args.writes,
        "docs": args.docs,
        "rounds": args.rounds,
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
        "summary": summary,
        "runs": runs,
    }
    print(json.dumps(summary, indent=2))
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    data[args.label] = result
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {args.out} [{args.label}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
