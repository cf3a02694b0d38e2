"""RapidOCR in worker processes, so that a page's time limit can stop it for real.

onnxruntime cannot be interrupted inside a thread: a page over its limit would keep a core
busy until it finished. Each worker is a child process (`python -m pgrag.ingest.ocr.rapid`)
holding one RapidOCR instance; a page that runs out of time kills its worker and the next
page starts a fresh one. Workers are reused across pages and documents, closed after
`IDLE_S` without work and at exit. The models load in the worker, not in pgrag's process.

Protocol on the worker's stdin/stdout: request = `!IIQ` (width, height, byte count) + RGB
bytes; reply = `!I` length + JSON (`{"lines": [[text, score, [x0, y0, x1, y1]], ...]}`,
`{"error": ...}`, or `{"ready": true}` once the models are loaded).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import select
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from PIL import Image

from .engines import Line, timed_out

START_TIMEOUT_S = 300.0  # loading the models on a busy machine; not part of a page's limit
IDLE_S = 120.0  # an idle worker is closed after this long
REQUEST = struct.Struct("!IIQ")
REPLY = struct.Struct("!I")


class Worker:
    """One child process with RapidOCR loaded."""

    def __init__(self, threads: int) -> None:
        package_root = str(Path(__file__).resolve().parents[3])  # importable as in this process
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pgrag.ingest.ocr.rapid", str(threads)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,  # onnxruntime's warnings would break progress bars
                env=env,
                start_new_session=True,  # Ctrl-C stops pgrag, which then closes its workers
            )
        except OSError as exc:
            raise ImportError(f"the RapidOCR worker did not start: {exc}") from None
        _live.add(self)
        assert self.proc.stdin is not None
        os.set_blocking(self.proc.stdin.fileno(), False)  # a page's bytes go in under its limit
        self.idle_since = time.monotonic()
        try:
            reply = self._receive(time.monotonic() + START_TIMEOUT_S)
        except (TimeoutError, RuntimeError) as exc:
            reply = {"error": str(exc) or f"no answer within {START_TIMEOUT_S:g} s"}
        if not reply.get("ready"):
            self.kill()
            raise ImportError(reply.get("error") or "the RapidOCR worker did not start")

    def read(self, image: Image.Image, timeout_s: float) -> list[Line]:
        deadline = time.monotonic() + timeout_s
        rgb = image.convert("RGB")
        header = REQUEST.pack(rgb.width, rgb.height, rgb.width * rgb.height * 3)
        try:
            self._send(header + rgb.tobytes(), deadline)
            reply = self._receive(deadline)
        except TimeoutError:
            raise timed_out(timeout_s) from None
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return [Line(text, score, (b[0], b[1], b[2], b[3])) for text, score, b in reply["lines"]]

    def _send(self, data: bytes, deadline: float) -> None:
        assert self.proc.stdin is not None
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise TimeoutError
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue

    def _receive(self, deadline: float) -> dict[str, Any]:
        (size,) = REPLY.unpack(self._read(REPLY.size, deadline))
        value: dict[str, Any] = json.loads(self._read(size, deadline))
        return value

    def _read(self, size: int, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buffer = bytearray()
        while len(buffer) < size:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, size - len(buffer))
            if not chunk:
                raise RuntimeError(f"the RapidOCR worker exited (code {self.proc.wait()})")
            buffer += chunk
        return bytes(buffer)

    def kill(self) -> None:
        _live.discard(self)
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()

    def close(self) -> None:
        """End of input: the worker exits by itself; killed if it does not."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class RapidEngine:
    """RapidOCR behind the Engine protocol: as many workers as pages read at once."""

    name = "rapidocr"

    def __init__(self, threads: int) -> None:
        if importlib.util.find_spec("rapidocr_onnxruntime") is None:
            raise ImportError("rapidocr_onnxruntime", name="rapidocr_onnxruntime")
        self.threads = threads
        self._lock = threading.Lock()
        self._idle: list[Worker] = [Worker(threads)]  # fails here when it cannot load
        threading.Thread(target=self._close_idle, daemon=True, name="pgrag-ocr-idle").start()

    def read(self, image: Image.Image, timeout_s: float) -> list[Line]:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        worker = worker or Worker(self.threads)
        try:
            lines = worker.read(image, timeout_s)
        except BaseException:
            worker.kill()  # over its time, crashed or broken pipe: never reused
            raise
        worker.idle_since = time.monotonic()
        with self._lock:
            self._idle.append(worker)
        return lines

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()

    def _close_idle(self) -> None:
        while True:
            time.sleep(IDLE_S / 4)
            now = time.monotonic()
            with self._lock:
                stale = [w for w in self._idle if now - w.idle_since > IDLE_S]
                self._idle = [w for w in self._idle if w not in stale]
            for worker in stale:
                worker.close()


_live: set[Worker] = set()


@atexit.register
def _close_all() -> None:
    """Workers end with pgrag (an orphan would also end at its next read: stdin closes)."""
    for worker in list(_live):
        worker.close()


def _lift_memory_limit() -> None:
    """A parse worker (parse_worker.py) starts us under its own soft address-space limit,
    meant for parsers: the models need more, and a page's time limit bounds us anyway."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def _serve(threads: int) -> None:
    """The worker: load the models, then answer requests until stdin closes."""
    _lift_memory_limit()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the libraries print must not reach the protocol stream

    def reply(value: dict[str, Any]) -> None:
        data = json.dumps(value, ensure_ascii=False).encode()
        out.write(REPLY.pack(len(data)) + data)
        out.flush()

    try:
        import numpy as np
        from rapidocr_onnxruntime import RapidOCR

        ocr = RapidOCR(intra_op_num_threads=threads, inter_op_num_threads=1)
    except Exception as exc:
        reply({"error": f"{type(exc).__name__}: {exc}"})
        return
    reply({"ready": True})
    source = sys.stdin.buffer
    while header := source.read(REQUEST.size):
        width, height, size = REQUEST.unpack(header)
        pixels = source.read(size)
        try:
            # RapidOCR takes BGR arrays (OpenCV order)
            bgr = np.frombuffer(pixels, np.uint8).reshape(height, width, 3)[:, :, ::-1]
            result, _ = ocr(np.ascontiguousarray(bgr))
            lines = [[str(text), float(score), _bounds(box)] for box, text, score in result or []]
            reply({"lines": lines})
        except Exception as exc:
            reply({"error": f"{type(exc).__name__}: {exc}"})


def _bounds(box: Any) -> list[float]:
    xs = [float(p[0]) for p in box]
    ys = [float(p[1]) for p in box]
    return [min(xs), min(ys), max(xs), max(ys)]


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
