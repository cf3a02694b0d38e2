"""The corpus of scale.py, generated and loaded: documents of CHUNKS_PER_DOCUMENT chunks
made of SciFact sentences, in FOLDERS folders, vectors = the source passage's vector plus
noise; COPY with the indexes dropped, then each index rebuilt and timed."""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
import uuid
from typing import Any

import numpy as np
import psycopg
import scale_probes
import support

CHUNKS_PER_DOCUMENT = 5
FOLDERS = 100  # a folder filter keeps ~1% of the chunks
NOISE = 0.35  # norm of the noise added to a source vector, before renormalising
# enough for pgvector to build the HNSW graph in memory: ~2.2 KB a chunk at 384
# dimensions (the index is 2.0 KB a chunk on disk), 3 KB with a margin, 512 MB at least
MWM_BYTES_PER_CHUNK = 3 * 1024

TEXT_INDEXES = ("chunks_tsv_idx", "chunks_content_trgm_idx")
DOCUMENTS_COPY = (
    "COPY pgrag.documents (id, collection_id, path, folder, name, file_type, title, status,"
    " progress) FROM STDIN"
)
INDEX_DEF_SQL = "SELECT pg_get_indexdef(%s::regclass)"
RELOPTIONS_SQL = "SELECT reloptions FROM pg_class WHERE oid = %s::regclass"


def maintenance_work_mem(chunks: int) -> str:
    mb = max(512, -(-chunks * MWM_BYTES_PER_CHUNK // (256 << 20)) * 256)
    return f"{mb}MB"


def sentences(text: str) -> list[str]:
    return [x for x in re.split(r"(?<=[.!?])\s+", text) if len(x) > 20]


def synthesize(
    src: support.BeirSet, n_chunks: int, rng: np.random.Generator
) -> tuple[list[str], list[str], np.ndarray]:
    """(headings, contents, vectors) of n_chunks synthetic chunks. A document borrows a
    SciFact passage: its title as heading, its vector (plus noise) for every chunk, and one
    of its sentences to open each chunk; 2-6 sentences from anywhere follow."""
    per_doc = [sentences(t) or [t] for t in src.texts]
    pool = [x for ss in per_doc for x in ss]
    n_docs = -(-n_chunks // CHUNKS_PER_DOCUMENT)
    origin = np.repeat(rng.integers(0, len(src.doc_ids), n_docs), CHUNKS_PER_DOCUMENT)[:n_chunks]
    lengths = rng.integers(2, 7, n_chunks)
    picks = rng.integers(0, len(pool), int(lengths.sum()))
    contents, at = [], 0
    for o, k in zip(origin, lengths, strict=True):
        own = per_doc[o][int(rng.integers(0, len(per_doc[o])))]
        contents.append(" ".join([own, *(pool[i] for i in picks[at : at + k])]))
        at += k
    headings = [src.titles[o] for o in origin]
    noise = rng.standard_normal((n_chunks, src.vectors.shape[1])).astype(np.float32)
    noise *= NOISE / np.linalg.norm(noise, axis=1, keepdims=True)
    vectors = src.vectors[origin] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return headings, contents, vectors


def load(
    dsn: str, headings: list[str], contents: list[str], vectors: np.ndarray, mwm: str
) -> dict[str, Any]:
    """Documents of CHUNKS_PER_DOCUMENT chunks in FOLDERS folders; indexes rebuilt and timed."""
    timings: dict[str, Any] = {}
    with support.connect(dsn) as conn:
        cid = conn.execute(support.COLLECTION_SQL, ("scale",)).fetchone()[0]
        set_id = asyncio.run(support.create_active_set(dsn, cid))
        hnsw = conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,)).fetchone()[0]
        defs = {i: conn.execute(INDEX_DEF_SQL, (f"pgrag.{i}",)).fetchone()[0] for i in TEXT_INDEXES}
        for index in (*TEXT_INDEXES, hnsw):
            conn.execute(support.DROP_INDEX_SQL.format(index))
        t = time.perf_counter()
        chunk_ids = _copy_rows(conn, cid, headings, contents)
        timings["rows_s"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        support.copy_embeddings(conn, set_id, list(zip(chunk_ids, vectors, strict=True)))
        timings["embeddings_s"] = round(time.perf_counter() - t, 1)
        timings.update(_build_indexes(conn, defs, set_id, hnsw, mwm))
        t = time.perf_counter()
        conn.execute("VACUUM ANALYZE pgrag.documents, pgrag.units, pgrag.chunks, pgrag.embeddings")
        timings["vacuum_analyze_s"] = round(time.perf_counter() - t, 1)
    return timings


def _build_indexes(
    conn: psycopg.Connection, defs: dict[str, str], set_id: int, hnsw: str, mwm: str
) -> dict[str, Any]:
    """Each index built and timed, the server's memory sampled meanwhile; pgvector's notice
    that the HNSW graph outgrew maintenance_work_mem (the build then goes on disk) is kept."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
    conn.execute(f"SET maintenance_work_mem = '{mwm}'")
    builds = {}
    with scale_probes.ServerMemory(conn, every=1.0) as memory:
        for name, ddl in defs.items():
            t = time.perf_counter()
            conn.execute(ddl)
            builds[name] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,))
        seconds = round(time.perf_counter() - t, 1)
        options = conn.execute(RELOPTIONS_SQL, (f"pgrag.{hnsw}",)).fetchone()[0]
        builds[f"{hnsw} (HNSW {', '.join(options)})"] = seconds
    in_memory = not any("no longer fits" in n for n in notices)
    return {
        "index_build_s": builds,
        "maintenance_work_mem": mwm,
        "max_parallel_maintenance_workers": conn.execute(
            "SHOW max_parallel_maintenance_workers"
        ).fetchone()[0],
        "hnsw_graph_in_memory": in_memory,
        "build_notices": notices,
        "server_memory_during_builds": memory.result(),
    }


def _copy_rows(
    conn: psycopg.Connection, cid: int, headings: list[str], contents: list[str]
) -> list[int]:
    """Documents, one unit each (the chunks joined) and the chunks; chunk ids in input order."""
    n_docs = -(-len(contents) // CHUNKS_PER_DOCUMENT)
    doc_ids = [uuid.UUID(int=i + 1) for i in range(n_docs)]
    parts = [
        contents[i * CHUNKS_PER_DOCUMENT : (i + 1) * CHUNKS_PER_DOCUMENT] for i in range(n_docs)
    ]
    with conn.transaction():
        with conn.cursor() as cur, cur.copy(DOCUMENTS_COPY) as copy:
            for i, d in enumerate(doc_ids):
                folder, name = f"f{i % FOLDERS:03d}", f"doc{i:06d}.txt"
                title = headings[i * CHUNKS_PER_DOCUMENT]
                copy.write_row(
                    (d, cid, f"{folder}/{name}", folder, name, "txt", title, "ready", 100)
                )
        with conn.cursor() as cur, cur.copy(support.UNITS_COPY) as copy:
            for d, part in zip(doc_ids, parts, strict=True):
                copy.write_row((cid, d, "text", 1, None, "\n\n".join(part)))
        unit_of = dict(conn.execute("SELECT document_id, id FROM pgrag.units").fetchall())
        with conn.cursor() as cur, cur.copy(support.CHUNKS_COPY) as copy:
            for i, (d, part) in enumerate(zip(doc_ids, parts, strict=True)):
                heading, offset = headings[i * CHUNKS_PER_DOCUMENT], 0
                for ordinal, text in enumerate(part, start=1):
                    digest = hashlib.sha256(support.embed_text(heading, text).encode()).digest()
                    tokens = max(1, round(len(text.split()) * 1.3))
                    end = offset + len(text)
                    row = (
                        d,
                        cid,
                        unit_of[d],
                        ordinal,
                        heading,
                        text,
                        digest,
                        tokens,
                        offset,
                        end,
                        "en",
                    )
                    copy.write_row(row)
                    offset = end + 2
    rows = conn.execute("SELECT id, document_id, ordinal FROM pgrag.chunks").fetchall()
    at = {(doc, ordinal): cid_ for cid_, doc, ordinal in rows}
    return [
        at[(doc_ids[j // CHUNKS_PER_DOCUMENT], j % CHUNKS_PER_DOCUMENT + 1)]
        for j in range(len(contents))
    ]
