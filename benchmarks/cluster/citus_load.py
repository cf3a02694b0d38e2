"""SciFact split over the collections of citus.py, loaded the same way on one server and on the
cluster, with the queries' cached vectors standing in for the model."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
import zlib
from dataclasses import dataclass, field

import numpy as np
import support

from pgrag.embeddings.base import EmbeddingProvider
from pgrag.language import detect_language

COLLECTIONS = 4


def collection_of(doc_id: str) -> int:
    """The deterministic split: crc32 of the BEIR id (spreads every topic over all four)."""
    return zlib.crc32(doc_id.encode()) % COLLECTIONS


def subset(s: support.BeirSet, docs: int | None, queries: int | None) -> support.BeirSet:
    """The first `queries` judged queries and `docs` passages (every relevant one kept)."""
    qids = list(s.queries)[:queries] if queries else list(s.queries)
    qrels = {q: s.qrels[q] for q in qids}
    if docs and docs < len(s.doc_ids):
        relevant = {d for q in qrels for d in qrels[q]}
        keep = [i for i, d in enumerate(s.doc_ids) if d in relevant]
        others = [i for i, d in enumerate(s.doc_ids) if d not in relevant]
        rows = sorted(keep + others[: max(0, docs - len(keep))])
    else:
        rows = list(range(len(s.doc_ids)))
    return support.BeirSet(
        name=s.name,
        doc_ids=[s.doc_ids[i] for i in rows],
        titles=[s.titles[i] for i in rows],
        texts=[s.texts[i] for i in rows],
        queries={q: s.queries[q] for q in qids},
        qrels=qrels,
        vectors=s.vectors[rows],
        embedding_note=s.embedding_note,
    )


class CachedQueries(EmbeddingProvider):
    """The bundled model's query vectors, computed once (support.query_vectors, cached):
    the search path runs unchanged, the model's ~35 ms per query does not count."""

    model = support.MODEL

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    @property
    def dimensions(self) -> int:
        return support.DIMENSIONS

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


# documents, units and chunks load with support's COPY statements (as quality.py loads
# them); the vectors with every column Citus needs (no trigger fills collection_id,
# document_id and lang there)
EMBEDDINGS_COPY = (
    "COPY pgrag.embeddings (collection_id, set_id, chunk_id, document_id, lang, embedding)"
    " FROM STDIN (FORMAT BINARY)"
)


@dataclass
class Loaded:
    collections: dict[int, int]  # split index -> collection id
    names: dict[int, str]  # split index -> collection name
    sets: list[int]
    chunks: int
    timings: dict[str, float] = field(default_factory=dict)


def load(dsn: str, s: support.BeirSet) -> Loaded:
    """Documents, one `text` unit and one chunk per passage (heading = title), the cached
    vectors as each collection's active set; HNSW built once the rows are in, the
    per-language sums recounted (what the triggers keep on a single server and the
    writer on Citus), then VACUUM ANALYZE. Timed step by step."""
    import hashlib

    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    split = [collection_of(d) for d in s.doc_ids]
    uuids = [uuid.uuid5(uuid.NAMESPACE_URL, f"beir:{d}") for d in s.doc_ids]
    with support.connect(dsn) as conn:
        names = {i: f"scifact-{i}" for i in range(COLLECTIONS)}
        cids = {
            i: conn.execute(support.COLLECTION_SQL, (n,)).fetchone()[0] for i, n in names.items()
        }
        sets = [asyncio.run(support.create_active_set(dsn, cids[i])) for i in range(COLLECTIONS)]
        for set_id in sets:  # rebuilt below, faster than row by row
            conn.execute(f"DROP INDEX IF EXISTS pgrag.embeddings_hnsw_{set_id}")
        with conn.transaction():
            with conn.cursor() as cur, cur.copy(support.DOCUMENTS_COPY) as copy:
                for u, d, title, text, k in zip(
                    uuids, s.doc_ids, s.titles, s.texts, split, strict=True
                ):
                    body = text.encode()
                    copy.write_row(
                        (u, cids[k], f"{d}.txt", f"{d}.txt", "txt", len(body),
                         hashlib.sha256(body).hexdigest(), title or None, "ready", 100, "now",
                         json.dumps({"beir_id": d}))
                    )  # fmt: skip
            with conn.cursor() as cur, cur.copy(support.UNITS_COPY) as copy:
                for u, text, k in zip(uuids, s.texts, split, strict=True):
                    copy.write_row((cids[k], u, "text", 1, None, text))
            unit_of = dict(conn.execute("SELECT document_id, id FROM pgrag.units").fetchall())
            langs = [detect_language(t) for t in s.texts]  # as ingestion does
            with conn.cursor() as cur, cur.copy(support.CHUNKS_COPY) as copy:
                for u, title, text, k, lang in zip(
                    uuids, s.titles, s.texts, split, langs, strict=True
                ):
                    digest = hashlib.sha256(support.embed_text(title, text).encode()).digest()
                    tokens = max(1, round(len(text.split()) * 1.3))  # estimate: paging only
                    copy.write_row(
                        (u, cids[k], unit_of[u], 1, title or None, text, digest, tokens, 0,
                         len(text), lang)
                    )  # fmt: skip
        timings["rows_s"] = time.perf_counter() - t0
        t = time.perf_counter()
        row_of = {u: i for i, u in enumerate(uuids)}
        chunk_rows = conn.execute("SELECT id, document_id FROM pgrag.chunks").fetchall()
        with conn.cursor() as cur, cur.copy(EMBEDDINGS_COPY) as copy:
            copy.set_types(["int8", "int8", "int8", "uuid", "text", "vector"])
            for chunk_id, doc in chunk_rows:
                i = row_of[doc]
                copy.write_row(
                    (cids[split[i]], sets[split[i]], chunk_id, doc, langs[i] or "und", s.vectors[i])
                )
        timings["embeddings_s"] = time.perf_counter() - t
        t = time.perf_counter()
        for set_id in sets:
            conn.execute("SELECT pgrag.recount_language_sums(%s)", (set_id,))
        timings["language_sums_s"] = time.perf_counter() - t
        t = time.perf_counter()
        for set_id in sets:
            conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,))
        timings["hnsw_build_s"] = time.perf_counter() - t
        t = time.perf_counter()
        conn.execute("VACUUM ANALYZE pgrag.documents, pgrag.units, pgrag.chunks, pgrag.embeddings")
        timings["analyze_s"] = time.perf_counter() - t
    total = time.perf_counter() - t0
    timings = {k: round(v, 2) for k, v in timings.items()}
    timings["total_s"] = round(total, 2)
    timings["chunks_per_s"] = round(len(chunk_rows) / total, 1)
    return Loaded(cids, names, sets, len(chunk_rows), timings)
