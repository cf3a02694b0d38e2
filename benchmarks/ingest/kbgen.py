"""A generated knowledge base for the ingestion benchmark: N office documents of a fictional
company (docx, pdf, xlsx, pptx, md, txt, csv, html; English, Chinese and mixed; about 30
chunks each on average), built deterministically from a seed and cached on disk, so it is
built once per (seed, size).

Document i is the same in every size (its own random stream), so a small knowledge base is
the start of a big one. Files are walked in index order (`dNN/NNNN-...`); the last one ends
with a planted unique code, PLANTED_CODE, for the time-to-findable measurement.

    python benchmarks/ingest/kbgen.py [--docs 1000] [--seed 1] [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kbformats import CREATED, WRITERS
from kbtext import TOPICS, DocText, Lang, document, section_count

FORMATS = list(WRITERS)
LANGS = [Lang.EN, Lang.ZH, Lang.MIXED]
PLANTED_CODE = "ZQX-7741-KB"
PLANTED = {
    Lang.EN: f"Audit reference {PLANTED_CODE} closes this document.",
    Lang.ZH: f"本文件的审计参考编号为 {PLANTED_CODE} 。",
    Lang.MIXED: f"本文件的 audit reference 为 {PLANTED_CODE} 。",
}
VERSION = 2  # bump when the output changes: cached knowledge bases are keyed by it
CACHE = Path(__file__).resolve().parents[1] / "results" / "cache" / "kbgen"
MAX_DOCS = 9999


@dataclass(frozen=True)
class GeneratedFile:
    rel: str
    format: str
    lang: str
    sections: int
    sha256: str


@dataclass(frozen=True)
class GeneratedKb:
    root: Path  # the folder to ingest
    seed: int
    mean_sections: float
    files: list[GeneratedFile]
    planted_rel: str  # the last file walked, which holds PLANTED_CODE
    code: str = PLANTED_CODE


def doc_spec(i: int, seed: int, mean_sections: float) -> tuple[str, str, DocText]:
    """Document i: its path, format and text. Formats and languages cycle together
    (8 x 3, coprime): any 24 consecutive documents hold every pair."""
    rng = random.Random(f"kbgen:{seed}:{i}")
    fmt, lang = FORMATS[i % len(FORMATS)], LANGS[i % len(LANGS)]
    topic = rng.randrange(len(TOPICS))
    doc = document(rng, lang, topic, section_count(rng, mean_sections), i + 1)
    return f"d{i // 100:02d}/{i:04d}-{doc.topic}-{lang}.{fmt}", fmt, doc


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write(root: Path, docs: int, seed: int, mean_sections: float) -> list[GeneratedFile]:
    files = []
    for i in range(docs):
        rel, fmt, doc = doc_spec(i, seed, mean_sections)
        if i == docs - 1:
            doc.append(PLANTED[doc.lang])
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        WRITERS[fmt](doc, path)
        os.utime(path, (CREATED.timestamp(), CREATED.timestamp()))
        files.append(GeneratedFile(rel, fmt, str(doc.lang), len(doc.sections), _sha256(path)))
    return files


def build(
    docs: int, seed: int = 1, mean_sections: float = 26.0, cache: Path = CACHE
) -> GeneratedKb:
    """The knowledge base of `docs` documents, from the cache or written there now."""
    if not 1 <= docs <= MAX_DOCS:
        raise ValueError(f"docs must be within 1..{MAX_DOCS}")
    home = cache / f"kb-v{VERSION}-s{seed}-m{mean_sections:g}-n{docs}"
    manifest = home / "manifest.json"
    if not manifest.exists():
        tmp = home.with_name(home.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        files = _write(tmp / "kb", docs, seed, mean_sections)
        data = {"seed": seed, "mean_sections": mean_sections, "files": [asdict(f) for f in files]}
        (tmp / "manifest.json").write_text(json.dumps(data, indent=1, ensure_ascii=False))
        shutil.rmtree(home, ignore_errors=True)
        tmp.rename(home)
    data = json.loads(manifest.read_text())
    files = [GeneratedFile(**f) for f in data["files"]]
    return GeneratedKb(home / "kb", seed, mean_sections, files, files[-1].rel)


def check(kb: GeneratedKb) -> None:
    """Parse and chunk every file with pgrag itself: chunks per format and language, and
    the planted code in the last file walked."""
    from pgrag.ingest.prepare import prepare_file
    from pgrag.ingest.walker import walk

    _, found = walk(kb.root)
    chunks: Counter[str] = Counter()
    docs: Counter[str] = Counter()
    by_rel = {f.rel: f for f in kb.files}
    last = ""
    for f in found:
        prepared = prepare_file(f, f.sha256()[0], 350, 40)
        meta = by_rel[f.rel]
        for key in (meta.format, meta.lang, "all"):
            chunks[key] += len(prepared.chunks)
            docs[key] += 1
        last = "\n".join(c.draft.content for c in prepared.chunks)
    for key in sorted(docs):
        print(
            f"{key:6} {docs[key]:5} files {chunks[key]:7} chunks {chunks[key] / docs[key]:6.1f}/file"
        )
    planted = found[-1].rel == kb.planted_rel and kb.code in last
    print(f"last file walked {found[-1].rel}: planted code {'found' if planted else 'MISSING'}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--docs", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mean-sections", type=float, default=26.0, help="about 1.15 chunks each")
    p.add_argument("--check", action="store_true", help="parse and chunk it with pgrag")
    args = p.parse_args(argv)
    kb = build(args.docs, args.seed, args.mean_sections)
    print(f"{len(kb.files)} files under {kb.root}")
    if args.check:
        check(kb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
