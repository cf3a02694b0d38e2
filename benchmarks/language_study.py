"""Why the semantic leg centres vectors by language: xquad-mixed in numpy, exact cosine.

The bundled model embeds the 240 paragraphs (half English, half Chinese) and the 2,380
questions (each asked in both languages; cached in benchmarks/results/cache), languages come
from pgrag.language.detect_language, and nDCG@10 is printed on `cross` (question in the
other language), `same` and `test` (all) for: plain cosine, both sides centred by their
language's mean (what sql/functions/30_semantic.sql computes), documents only centred, one
global mean, and a per-language score shift. About 3 minutes on 2 cores the first time.

    python benchmarks/language_study.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import support

from pgrag.language import detect_language

beir_io = support.beir_io  # next to the data, on the path support sets
SET = "xquad-mixed"


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def main() -> None:
    root = support.DATA / SET
    corpus = beir_io.load_corpus(str(root))
    queries = beir_io.load_queries(str(root))
    ids = list(corpus)
    docs = unit(support.passage_vectors(SET, ids, [corpus[i]["text"] for i in ids]))
    qids = list(queries)
    qtext = {q: queries[q] if isinstance(queries[q], str) else queries[q]["text"] for q in qids}
    qv, _ = support.query_vectors(SET, qtext)
    qv = unit(qv)
    dlang = [detect_language(corpus[i]["text"]) for i in ids]
    qlang = [detect_language(qtext[q]) for q in qids]
    means = {lang: docs[[d == lang for d in dlang]].mean(0) for lang in set(dlang)}
    overall = docs.mean(0)
    dmean = np.stack([means[lang] for lang in dlang])
    qmean = np.stack([means.get(lang, overall) for lang in qlang])
    scores = {
        "plain cosine": qv @ docs.T,
        "both centred (pgrag)": unit(qv - qmean) @ unit(docs - dmean).T,
        "documents centred": qv @ unit(docs - dmean).T,
        "global mean": unit(qv - overall) @ unit(docs - overall).T,
        "per-language shift": qv @ docs.T - qv @ dmean.T,
    }
    out: dict[str, dict[str, float]] = {}
    for split in ("cross", "same", "test"):
        qrels = beir_io.load_qrels(str(root), split)
        rows = [i for i, q in enumerate(qids) if q in qrels]
        for name, s in scores.items():
            run = {qids[i]: [ids[j] for j in np.argsort(-s[i])[:100]] for i in rows}
            metrics = support.evaluate(run, {qids[i]: qrels[qids[i]] for i in rows})
            out.setdefault(name, {})[split] = round(metrics["nDCG@10"], 3)
    print(f"{'nDCG@10':<22}{'cross':>8}{'same':>8}{'test':>8}")
    for name, by_split in out.items():
        print(f"{name:<22}" + "".join(f"{by_split[s]:>8.3f}" for s in ("cross", "same", "test")))
    (support.RESULTS / "language_study.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
