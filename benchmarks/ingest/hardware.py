"""What this machine can compute: the fp32 GEMM rate of numpy's BLAS, the yardstick for how
close an embedding engine comes to the hardware.

    python benchmarks/ingest/hardware.py [--threads 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

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
        print(f"{threads} thread(s): {gemm_gflops(threads):.1f} GFLOP/s fp32 GEMM")
    return 0


if __name__ == "__main__":
    sys.exit(main())
