"""OCR engines on a rendered page set: pages per second, character error rate, peak RSS.

Each engine runs in its own child process so its peak RSS is its own; the engine's own
processes (the `tesseract` binary, RapidOCR's worker) are reported apart as
`peak_rss_engine_mb`, the largest of them. The set: English,
Chinese and mixed sentences rendered at 300 dpi (A4 width) with a CJK font, plus a
low-resolution page. Usage: python benchmarks/ingest/ocr.py [--pages N]; JSON to
benchmarks/results/ocr.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import time
from pathlib import Path
from typing import Any

SENTENCES = [
    "The warranty on the hydraulic pump expires on 30 June 2027.",
    "本合同自双方签字之日起生效，乙方应在十五个工作日内支付全部货款。",
    "Screenshot: 服务器 gateway-7 的磁盘使用率达到百分之九十二。",
    "Invoice 7731 covers 480 steel brackets delivered to the Lisbon warehouse.",
    "甲方有权在提前三十日书面通知的情况下解除本协议。",
    "Both parties agree that disputes are settled by arbitration in Shanghai.",
]


def _pages(n: int) -> list[tuple[Any, str]]:
    from tests.test_ocr import render

    out = []
    for i in range(n):
        lines = [SENTENCES[(i + k) % len(SENTENCES)] for k in range(3)]
        out.append((render(lines), "\n".join(lines)))
    return out


def _run(engine: str, n: int, queue: Any) -> None:
    from pgrag.ingest.ocr import engines
    from pgrag.ingest.ocr.runner import reading_order
    from tests.test_ocr import cer

    try:
        reader = engines.load(engine, "chi_sim+eng", 1)
    except engines.OcrUnavailable as exc:
        queue.put({"engine": engine, "error": exc.message})
        return
    pages = _pages(n)
    reader.read(pages[0][0], 300)  # warm-up: model load is not per page
    start = time.perf_counter()
    rates = [cer(truth, reading_order(reader.read(image, 300))) for image, truth in pages]
    seconds = time.perf_counter() - start
    close = getattr(reader, "close", None)
    if close:
        close()  # RapidOCR's workers exit and are waited for: counted in RUSAGE_CHILDREN
    queue.put(
        {
            "engine": engine,
            "pages": n,
            "pages_per_s": round(n / seconds, 3),
            "cer": round(sum(rates) / len(rates), 4),
            "cer_max": round(max(rates), 4),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "peak_rss_engine_mb": round(
                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            ),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=6)
    args = parser.parse_args()
    results = []
    ctx = multiprocessing.get_context("spawn")
    for engine in ("rapidocr", "tesseract"):
        queue = ctx.Queue()
        child = ctx.Process(target=_run, args=(engine, args.pages, queue))
        child.start()
        results.append(queue.get())
        child.join()
        print(json.dumps(results[-1], ensure_ascii=False))
    out = Path(__file__).resolve().parents[1] / "results" / "ocr.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
