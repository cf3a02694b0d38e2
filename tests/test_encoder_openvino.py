"""The bundled model on OpenVINO (the `pgrag[fast]` extra) against today's ONNX Runtime
engine: the same vectors (cosine >= 0.9999 mean, >= 0.999 min) for passages and queries in
English, Chinese and code, short and full length; safe under concurrent calls; its compile
cache beside the graph; and the fallback to ONNX Runtime, said in one log line, where
OpenVINO cannot load."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from pgrag.embeddings.e5.engine import OnnxEngine, OpenVinoEngine, load_engine
from pgrag.settings import LocalEngine
from tests.support.kb_server import child_env
from tests.test_encoder import CHINESE, CODE, ENGLISH, LONG, SHORT, cosines, mixed_strings

REPO = Path(__file__).resolve().parents[1]


def full_length(n: int) -> list[str]:
    """~500-token passages, the chunk size: English, Chinese and code in turn."""
    rng = random.Random(43)
    words = ENGLISH.split()
    lines = CODE.splitlines()
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(" ".join(rng.choice(words) for _ in range(225)))
        elif i % 3 == 1:
            out.append("".join(rng.choice(CHINESE) for _ in range(480)))
        else:
            out.append("\n".join(rng.choice(lines) for _ in range(23)))
    return out


MIXED = [*SHORT, LONG, *full_length(6), *mixed_strings(40)]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def ov_engine(home: Path) -> OpenVinoEngine:
    engine = load_engine(home, LocalEngine.OPENVINO, 2)
    assert isinstance(engine, OpenVinoEngine), engine.reason
    return engine


@pytest.fixture(scope="module")
def ort_engine(home: Path) -> OnnxEngine:
    engine = load_engine(home, LocalEngine.ONNX, 2)
    assert isinstance(engine, OnnxEngine)
    return engine


def test_the_set_spans_scripts_and_lengths(ort_engine: OnnxEngine) -> None:
    counts = [ort_engine.token_count(t) for t in MIXED]
    assert min(counts) <= 5 and sum(400 <= c <= 512 for c in counts) >= 6
    assert max(counts) > 512  # LONG: two windows


@pytest.mark.parametrize("role", ["passages", "queries"])
def test_vectors_equal_onnx_runtimes(
    ov_engine: OpenVinoEngine, ort_engine: OnnxEngine, role: str
) -> None:
    if role == "passages":
        fast, today = ov_engine.passages(MIXED, 2), ort_engine.passages(MIXED, 2)
    else:
        fast, today = ov_engine.queries(MIXED), ort_engine.queries(MIXED)
    assert fast.shape == today.shape == (len(MIXED), 384)
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    c = cosines(fast, today)
    assert c.mean() >= 0.9999 and c.min() >= 0.999, (c.mean(), c.min())


def test_concurrent_calls_are_safe(ov_engine: OpenVinoEngine) -> None:
    """Six threads share the passage model's one request and the query model's two: each
    gets the vectors it gets alone."""
    texts = [[ENGLISH * 4, CODE], [CHINESE * 6], [LONG], [ENGLISH, CHINESE, CODE]]
    alone = {i: (ov_engine.passages(t, 2), ov_engine.queries(t)) for i, t in enumerate(texts)}
    got: dict[tuple[int, str], np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i: int, role: str) -> None:
        try:
            for _ in range(3):
                t = texts[i]
                got[i, role] = ov_engine.passages(t, 2) if role == "p" else ov_engine.queries(t)
                want = alone[i][0 if role == "p" else 1]
                assert cosines(got[i, role], want).min() > 0.99999
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i, r)) for i in range(4) for r in "pq"]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert len(got) == 8


def test_compiled_models_are_cached_beside_the_graph(ov_engine: OpenVinoEngine, home: Path) -> None:
    cache = ov_engine.cache_dir
    assert cache.parent == home / "models" and cache.is_dir()
    blobs = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert len(blobs) >= 2  # the passage and the query model
    OpenVinoEngine(home, 2, 2)  # as a second process would: reads them, writes nothing
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == blobs


def test_a_server_answering_queries_never_compiles_the_passage_model(tmp_path: Path) -> None:
    """`serve` mostly embeds queries: the passage model (~45 MB) compiles at the first passage
    call, not at load (the query probe already ran every op it has)."""
    engine = OpenVinoEngine(tmp_path, 2, 2)
    engine.queries(["what does the query model cost"])
    assert len(list(engine.cache_dir.iterdir())) == 1  # the query model only
    engine.passages(["the first passage compiles the passage model"], 2)
    assert len(list(engine.cache_dir.iterdir())) == 2


PROBE = """
import json, logging, sys
from pathlib import Path
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
from pgrag.embeddings import make_provider
from pgrag.settings import load_settings
provider = make_provider(load_settings(home=Path(sys.argv[1])))
import asyncio
vector = asyncio.run(provider.embed_query("contract approval"))
note = provider.engine_note()
print(json.dumps({"kind": provider.engine.kind, "reason": note.reason, "fastest": note.fastest,
                  "dims": len(vector)}))
"""


def _probe(home: Path, engine: str, pythonpath: str, hide: bool = False) -> tuple[dict, str]:
    code = ("import sys; sys.modules['openvino'] = None\n" if hide else "") + PROBE
    env = child_env(PYTHONPATH=pythonpath, PGRAG_EMBEDDING_ENGINE=engine)
    done = subprocess.run(
        [sys.executable, "-c", code, str(home)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if "bundled model:" in ln]
    assert len(lines) == 1, done.stderr  # one line says which engine runs and why
    return json.loads(done.stdout.splitlines()[-1]), lines[0]


@pytest.mark.parametrize("engine", ["openvino", "auto"])
def test_a_broken_openvino_falls_back_to_onnx_runtime(
    ov_engine: OpenVinoEngine, home: Path, tmp_path: Path, engine: str
) -> None:
    """An `openvino` package that fails on import (first on the path): ONNX Runtime runs
    and a warning says why."""
    broken = tmp_path / "broken" / "openvino"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('libopenvino.so: cannot open')\n")
    got, line = _probe(home, engine, f"{broken.parent}:{REPO}")
    assert got["kind"] == "onnx" and got["dims"] == 384 and not got["fastest"]
    assert line.startswith("WARNING")
    assert "OpenVINO engine unavailable (ImportError: libopenvino.so" in line
    assert "embedding with ONNX Runtime instead" in line


def test_auto_without_the_extra_says_how_to_get_it(ov_engine: OpenVinoEngine, home: Path) -> None:
    got, line = _probe(home, "auto", str(REPO), hide=True)
    assert got["kind"] == "onnx"
    assert line.startswith("INFO")  # the extra is optional: not a warning
    want = "OpenVINO not installed (`pip install openvino`, the `fast` extra, adds it)"
    assert want in got["reason"]


def test_auto_runs_openvino_where_it_loads(ov_engine: OpenVinoEngine, home: Path) -> None:
    got, line = _probe(home, "auto", str(REPO))
    assert got["kind"] == "openvino" and got["fastest"]
    assert line == "INFO bundled model: " + got["reason"]
    assert "OpenVINO" in got["reason"] and "PGRAG_EMBEDDING_ENGINE=auto" in got["reason"]


@pytest.mark.anyio
@pytest.mark.parametrize("engine", ["auto", "onnx"])
async def test_doctor_says_which_engine_runs(
    ov_engine: OpenVinoEngine, ort_engine: OnnxEngine, home: Path, engine: str
) -> None:
    from pgrag.doctor import run_checks

    unreachable = "postgresql://nobody@127.0.0.1:1/none"  # the checks stop at the database
    overrides = {"home": home, "database_url": unreachable, "embedding_engine": engine}
    checks = {c.name: c for c in await run_checks(overrides)}
    line = checks["embedding engine"]
    assert line.ok and f"PGRAG_EMBEDDING_ENGINE={engine}" in line.detail
    if engine == "auto":
        assert "embedding with OpenVINO" in line.detail and not line.note
    else:  # a note, with how to get the faster engine
        assert "embedding with ONNX Runtime" in line.detail and line.note
        assert "`pip install openvino`" in line.detail


BOUNDED = """
import random, sys
from pathlib import Path
from pgrag.embeddings.e5.engine import load_engine
from pgrag.settings import LocalEngine

def rss_mb():
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**20

engine = load_engine(Path(sys.argv[1]), LocalEngine.OPENVINO, 1)
assert engine.kind == "openvino", engine.reason
rng = random.Random(1)
words = ["".join(rng.choice("bdglmnprst") + rng.choice("aeiou") for _ in range(2)) for _ in range(900)]
def query(tokens):
    engine.queries([" ".join(rng.choice(words) for _ in range(tokens // 2))])
for i in range(20):
    engine.queries([f"budget forecast {i} for the vendor audit"])
for tokens in (500, 440, 380, 320, 250, 190, 150, 120, 90, 500, 440, 380):
    query(tokens)
plateau = rss_mb()
for _ in range(30):
    query(rng.randint(90, 500))
print(rss_mb() - plateau)
"""


def test_queries_of_any_length_leave_memory_bounded(tmp_path: Path) -> None:
    """OpenVINO builds and keeps kernels for every input length it sees (~1 MB each: 60
    long queries of varying lengths grew a process by ~95 MB). Runs are padded to a few
    bucket lengths, so memory reaches a plateau (~40 MB above idle here, once) and stays:
    30 more queries of new lengths add nothing."""
    done = subprocess.run(
        [sys.executable, "-c", BOUNDED, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    grown_mb = float(done.stdout.split()[-1])
    assert grown_mb < 15.0, grown_mb
