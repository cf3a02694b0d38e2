"""A long query gives back the memory it needed. ONNX Runtime's arena keeps what its
largest run needed: without the release, three 500-token queries (anyone can send one)
grew the query session by ~35 MB for good, the step the soak's hostile phase showed; with
it, ~5 MB. Measured in a child process of its own, RSS before and after."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.kb_server import child_env

GROWTH_BOUND_MB = 15.0
PROBE = """
import random, sys
from pathlib import Path
from pgrag.embeddings.e5.engine import load_engine
from pgrag.embeddings.local import clip_query
from pgrag.settings import LocalEngine

def rss_mb():
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**20

engine = load_engine(Path(sys.argv[1]), LocalEngine.ONNX, 1)
for i in range(20):
    engine.queries([f"budget forecast {i} for the vendor audit"])
before = rss_mb()
rng = random.Random(1)
words = ["".join(rng.choice("bdglmnprst") + rng.choice("aeiou") for _ in range(2)) for _ in range(900)]
text = " ".join(words)[:4000]
for i in range(3):
    clipped = clip_query(engine, text + str(i))
    assert engine.token_count(clipped) > 400
    engine.queries([clipped])
for i in range(20):
    engine.queries([f"budget forecast {i} for the vendor audit"])
print(rss_mb() - before)
"""


def test_long_queries_give_their_memory_back(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    grown_mb = float(done.stdout.split()[-1])
    assert grown_mb < GROWTH_BOUND_MB, grown_mb
