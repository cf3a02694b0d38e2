"""What the document context costs ingestion: the texts the model embeds for docbench's chunks
with and without the context, embedded by the bundled model back to back in one process
(alternating, repeated; medians), since embedding is nearly all of ingestion's time. Prints
the token counts (cl100k) and the throughput ratio in chunks per second.

By default only the chunks of documents that carry a context (not sheets): the worst case.

    python benchmarks/context_cost.py [--tokens 48] [--repeats 3] [--all-chunks]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "docbench"))
import build as docbench

from pgrag.embeddings.local import LocalE5Provider
from pgrag.ingest.context import embed_text
from pgrag.ingest.parsers import parse
from pgrag.ingest.prepare import build_chunks
from pgrag.tokens import count_tokens


def texts(root: Path, tokens: int, all_chunks: bool) -> list[str]:
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        doc = parse(path)
        if not all_chunks and any(u.kind == "sheet" for u in doc.units):
            continue
        prepared = build_chunks(doc, doc.title or path.stem, 350, 40, tokens)
        out += [embed_text(c.heading, c.context, c.draft.content) for c in prepared]
    return out


async def timed(provider: LocalE5Provider, batch: list[str]) -> float:
    t = time.perf_counter()
    await provider.embed_passages(batch)
    return time.perf_counter() - t


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = docbench.build(Path(tmp))
        without, with_ = texts(root, 0, args.all_chunks), texts(root, args.tokens, args.all_chunks)
    print(
        f"{len(without)} chunks; tokens (cl100k) without {sum(map(count_tokens, without)):,}"
        f", with {sum(map(count_tokens, with_)):,}"
    )
    provider = LocalE5Provider()
    try:
        await timed(provider, without[:8])  # load the model
        runs: dict[str, list[float]] = {"without": [], "with": []}
        for _ in range(args.repeats):
            runs["without"].append(await timed(provider, without))
            runs["with"].append(await timed(provider, with_))
    finally:
        await provider.aclose()
    a, b = statistics.median(runs["without"]), statistics.median(runs["with"])
    print(f"seconds without {runs['without']}, with {runs['with']}")
    print(f"throughput with / without the context: {a / b:.3f} (medians {a:.1f} s / {b:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--all-chunks", action="store_true")
    asyncio.run(main_async(p.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
