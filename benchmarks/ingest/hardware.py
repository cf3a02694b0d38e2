"""What this machine can compute: the fp32 GEMM rate of numpy's BLAS and the int8 GEMM rate
of ONNX Runtime's MatMulInteger (uint8 x int8 -> int32: MLAS's VNNI/AVX512 kernels where the
CPU has them), the yardsticks for how close an embedding engine comes to the hardware.

    python benchmarks/ingest/hardware.py [--threads 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

# the shape of e5-small's feed-forward matmul over a batch of 2,048 tokens: the largest
# GEMMs an encoder of this size runs, so the rate is one it could reach
M, K, N = 2048, 384, 1536
REPEATS = 20


def _measure() -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    out = np.empty((M, N), dtype=np.float32)
    np.matmul(a, b, out=out)  # warm-up: threads started, pages touched
    best = float("inf")
    for _ in range(REPEATS):
        t = time.perf_counter()
        np.matmul(a, b, out=out)
        best = min(best, time.perf_counter() - t)
    return 2.0 * M * K * N / best / 1e9


def int8_session(shapes: list[tuple[int, int, int]], threads: int) -> tuple[Any, dict[str, Any]]:
    """One ONNX Runtime session (one thread pool: a session per shape would leave each pool
    spinning against the next) of a MatMulInteger per shape: a uint8 (m, k) input by a
    constant int8 (k, n) weight (prepacked, as a quantized model's), on `threads` threads.
    Returns the session and its inputs."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inputs, outputs, weights, feeds = [], [], [], [], {}
    for i, (m, k, n) in enumerate(shapes):
        nodes.append(helper.make_node("MatMulInteger", [f"a{i}", f"w{i}"], [f"y{i}"]))
        inputs.append(helper.make_tensor_value_info(f"a{i}", TensorProto.UINT8, [m, k]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.INT32, [m, n]))
        w = rng.integers(-128, 128, (k, n), dtype=np.int8)
        weights.append(numpy_helper.from_array(w, f"w{i}"))
        feeds[f"a{i}"] = rng.integers(0, 256, (m, k), dtype=np.uint8)
    graph = helper.make_graph(nodes, "int8_gemm", inputs, outputs, weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), opts), feeds


def int8_gops(
    session: tuple[Any, dict[str, Any]], shapes: list[tuple[int, int, int]], repeats: int
) -> float:
    """GOP/s (2 ops per multiply-add) of one run of every shape, best of `repeats`."""
    run, feeds = session[0].run, session[1]
    run(None, feeds)  # warm-up: threads started, weights packed
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        run(None, feeds)
        best = min(best, time.perf_counter() - t)
    return sum(2 * m * k * n for m, k, n in shapes) / best / 1e9


def gemm_gflops(threads: int) -> float:
    """fp32 GEMM GFLOP/s on `threads` threads (best of REPEATS). Measured in a fresh process:
    BLAS fixes its thread count when it loads."""
    n = str(threads)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": n, "OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n}
    done = subprocess.run(
        [sys.executable, __file__, "--child"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return float(json.loads(done.stdout)["gflops"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps({"gflops": _measure()}))
        return 0
    for threads in args.threads:
        int8 = int8_gops(int8_session([(M, K, N)], threads), [(M, K, N)], REPEATS)
        print(
            f"{threads} thread(s): {gemm_gflops(threads):.1f} GFLOP/s fp32 GEMM,"
            f" {int8:.1f} GOP/s int8 GEMM (ONNX Runtime MatMulInteger), {M}x{K}x{N}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
