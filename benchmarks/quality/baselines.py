"""The two references outside PostgreSQL: BM25 (bm25s) over pgrag's own lexemes, and exact
brute-force cosine over the same vectors the HNSW index holds."""

from __future__ import annotations

import time

import bm25s
import numpy as np
import psycopg

# Lexemes of each stored chunk tsvector, repeated by their number of positions (= term
# frequency), so that bm25s sees exactly the tokens pgrag's lexical leg indexes:
# pgrag.chunk_tsv(heading, content) = English stemming + stop words, CJK bigrams.
DOC_TOKENS_SQL = """
SELECT c.id, array_agg(l.lexeme), array_agg(cardinality(l.positions))
FROM pgrag.chunks c, unnest(c.tsv) l
WHERE c.collection_id = %s
GROUP BY c.id
"""
# Queries go through the same lexical form (pgrag.lexical_text + the pgrag.search config).
QUERY_TOKENS_SQL = """
SELECT q.ord, tsvector_to_array(to_tsvector('pgrag.search', pgrag.lexical_text(q.text)))
FROM unnest(%s::text[]) WITH ORDINALITY AS q(text, ord)
"""
TOKENISATION = (
    "bm25s (k1=0.9, b=0.4, method=lucene) over the lexemes of pgrag.chunks.tsv "
    "(pgrag.chunk_tsv(title, text): NFKC, lower case, CJK bigrams, English stemming and stop "
    "words), term frequency = number of positions, read back from PostgreSQL with unnest(tsv); "
    "query tokens = to_tsvector('pgrag.search', pgrag.lexical_text(query)), computed in SQL"
)


def bm25_run(
    conn: psycopg.Connection,
    collection_id: int,
    chunk_doc: dict[int, str],
    queries: dict[str, str],
    k: int = 100,
) -> tuple[dict[str, list[str]], float]:
    """Top-k BM25 per query; returns (run, seconds spent in bm25s retrieval)."""
    rows = conn.execute(DOC_TOKENS_SQL, (collection_id,)).fetchall()
    ids = [r[0] for r in rows]
    corpus = [
        [w for w, n in zip(lex, counts, strict=True) for _ in range(n)] for _, lex, counts in rows
    ]
    index = bm25s.BM25(k1=0.9, b=0.4)
    index.index(corpus, show_progress=False)
    vocab = index.vocab_dict
    qids = list(queries)
    tokens = dict(conn.execute(QUERY_TOKENS_SQL, ([queries[q] for q in qids],)).fetchall())
    qtoks = {q: [t for t in tokens[i + 1] if t in vocab] for i, q in enumerate(qids)}
    asked = [q for q in qids if qtoks[q]]  # a query without indexed tokens finds nothing
    run: dict[str, list[str]] = {q: [] for q in qids}
    t = time.perf_counter()
    if asked:
        docs, scores = index.retrieve(
            [qtoks[q] for q in asked], k=min(k, len(ids)), show_progress=False
        )
        for j, q in enumerate(asked):
            run[q] = [chunk_doc[ids[d]] for d, s in zip(docs[j], scores[j], strict=True) if s > 0]
    seconds = time.perf_counter() - t
    return run, seconds


def exact_cosine_run(
    query_vectors: np.ndarray, doc_vectors: np.ndarray, doc_ids: list[str], k: int = 100
) -> list[list[str]]:
    """Brute force: every passage scored against every query (vectors are normalised)."""
    sims = query_vectors @ doc_vectors.T
    k = min(k, sims.shape[1])
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(sims, top, axis=1).argsort(axis=1)[:, ::-1]
    ranked = np.take_along_axis(top, order, axis=1)
    return [[doc_ids[i] for i in row] for row in ranked]
