"""Parsing in a child process, so that a hostile file cannot take pgrag down.

A few kilobytes can expand to gigabytes (the parsers' bounds catch the known shapes; this
catches the rest): each worker is a child process (`python -m pgrag.ingest.parse_worker`)
with its address space limited (RLIMIT_AS, PGRAG_PARSE_MEMORY_MB). A file that runs it out
of memory fails with TOO_LARGE, one that crashes it with PARSER_CRASHED, one that makes no
progress for PGRAG_PARSE_TIMEOUT_S with TIMEOUT (OCR'd pages count as progress); the worker
is then replaced and the run goes on. OCR runs inside the worker (its engines are child
processes of the worker, under the same memory limit), its page progress relayed.

Protocol: multiprocessing Connections over the worker's stdin/stdout (pickled objects);
the worker's own stdout is /dev/null, so a library printing cannot break it.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import os
import pickle
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgrag.errors import ErrorCode
from pgrag.ingest import attempts
from pgrag.ingest.bounds import OutputLimits, answer_too_long
from pgrag.ingest.context import CONTEXT_TOKENS
from pgrag.ingest.parsers.base import ParseError
from pgrag.ingest.prepare import PreparedDocument, prepare_file
from pgrag.ingest.walker import FoundFile

if TYPE_CHECKING:
    from pgrag.ingest.ocr import OcrOptions
    from pgrag.ingest.ocr.runner import Progress

START_TIMEOUT_S = 60.0  # imports on a busy machine


@dataclass(frozen=True)
class ParseOptions:
    memory_mb: int = 1024
    timeout_s: float = 300.0  # without progress
    follow_links: bool = False
    attempts_dir: Path | None = None  # unfinished-attempt markers (attempts.py); None: off
    workers: int = 2  # per process; the first options given decide
    context_tokens: int = CONTEXT_TOKENS  # bound of the document context (ingest/context)
    limits: OutputLimits = dataclasses.field(default_factory=OutputLimits)  # ingest/bounds


@dataclass(frozen=True)
class _Request:
    found: FoundFile
    content_hash: str
    target: int
    overlap: int
    ocr: OcrOptions
    follow_links: bool
    context_tokens: int
    limits: OutputLimits


class ParseWorker:
    """One child process; parses one file at a time."""

    def __init__(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        package_root = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pgrag.ingest.parse_worker", str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # parser warnings would break progress bars
            env=env,
            start_new_session=True,  # Ctrl-C stops pgrag, which then kills its workers
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.tx = Connection(os.dup(self.proc.stdin.fileno()), readable=False)
        self.rx = Connection(os.dup(self.proc.stdout.fileno()), writable=False)
        self.proc.stdin.close()
        self.proc.stdout.close()
        self._closing = threading.Lock()
        _live.add(self)
        if not self.rx.poll(START_TIMEOUT_S) or self._receive()[0] != "ready":
            self.kill()
            raise RuntimeError("the parse worker did not start")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Kill the process but leave its pipes to the thread in `prepare`, which sees them
        close and tidies up: closing them under it could close a descriptor number another
        file has been given since."""
        if self.proc.poll() is None:
            self.proc.kill()

    def kill(self) -> None:
        """Kill the process and close its pipes; once, whichever thread comes first."""
        with self._closing:
            if self.tx.closed:
                return
            _live.discard(self)
            self.stop()
            self.proc.wait()
            self.tx.close()
            self.rx.close()

    def _receive(self, limit: int | None = None) -> tuple[Any, ...]:
        """The next message; ("too_long",) when it is over `limit` bytes: refused from its
        length header, before any of it is read (the worker is then killed)."""
        try:
            raw = self.rx.recv_bytes(limit)
        except (EOFError, OSError):
            return ("too_long",) if limit is not None and self.rx.closed else ("died",)
        message: tuple[Any, ...] = pickle.loads(raw)
        return message

    def prepare(self, request: _Request, progress: Progress | None, timeout_s: float) -> Any:
        """The PreparedDocument, or ParseError; the worker is killed when it did not end
        well (the caller then starts another)."""
        try:
            self.tx.send(request)
        except OSError:
            return self._died()
        deadline = time.monotonic() + timeout_s
        limit = request.limits.answer_bytes()
        while True:
            if not self.rx.poll(max(0.0, deadline - time.monotonic())):
                self.kill()
                return ParseError(
                    ErrorCode.TIMEOUT,
                    f"parsing made no progress for {timeout_s:g} s (PGRAG_PARSE_TIMEOUT_S)",
                )
            message = self._receive(limit)
            if message[0] == "too_long":
                self.kill()
                return answer_too_long(limit)
            if message[0] == "progress":
                deadline = time.monotonic() + timeout_s
                if progress:
                    progress(message[1], message[2])
            elif message[0] == "ok":
                return message[1]
            elif message[0] == "error":
                if message[1] == ErrorCode.TOO_LARGE:
                    self.kill()  # after a MemoryError its heap is best replaced
                return ParseError(message[1], message[2])
            else:
                return self._died()

    def _died(self) -> ParseError:
        code = self.proc.wait()
        self.kill()
        if code == -signal.SIGKILL:  # the kernel's out-of-memory killer, most likely
            return ParseError(
                ErrorCode.TOO_LARGE, "the parser was killed (out of memory?) on this file"
            )
        return ParseError(
            ErrorCode.PARSER_CRASHED, f"the parser crashed on this file (exit status {code})"
        )


_live: set[ParseWorker] = set()
_idle: list[ParseWorker] = []
_lock = threading.Lock()
_slots: threading.Semaphore | None = None  # workers in use, across ingest, watch and uploads


def _acquire(options: ParseOptions) -> ParseWorker:
    global _slots
    with _lock:
        if _slots is None:
            _slots = threading.Semaphore(options.workers)
    _slots.acquire()
    try:
        with _lock:
            while _idle:
                worker = _idle.pop()
                if worker.alive() and worker.memory_mb == options.memory_mb:
                    return worker
                worker.kill()
        return ParseWorker(options.memory_mb)
    except BaseException:
        _slots.release()
        raise


def _release(worker: ParseWorker) -> None:
    if worker.alive():
        with _lock:
            _idle.append(worker)
    else:
        worker.kill()
    assert _slots is not None
    _slots.release()


@atexit.register
def close_workers() -> None:
    for worker in list(_live):
        worker.kill()


async def parse_file(
    found: FoundFile,
    content_hash: str,
    ocr: OcrOptions,
    *,
    target: int,
    overlap: int,
    options: ParseOptions,
) -> PreparedDocument:
    """Parse and chunk in a worker, under a marker that lets a later run give up on a file
    whose parse got this process killed twice (attempts.py); raises ParseError."""
    folder = options.attempts_dir
    if folder is None:
        return await _in_worker(found, content_hash, target, overlap, ocr, options)
    crashed = await asyncio.to_thread(attempts.unfinished, folder, found, content_hash)
    if len(crashed) >= attempts.MAX_UNFINISHED:
        attempts.forget(crashed)
        raise ParseError(
            ErrorCode.PARSER_CRASHED,
            f"pgrag stopped {len(crashed)} times while parsing this file (killed, or out of "
            "memory): not tried again until the file changes",
        )
    try:
        with attempts.attempt(folder, found, content_hash):
            return await _in_worker(found, content_hash, target, overlap, ocr, options)
    finally:
        attempts.forget(crashed)


async def _in_worker(
    found: FoundFile,
    content_hash: str,
    target: int,
    overlap: int,
    ocr: OcrOptions,
    options: ParseOptions,
) -> PreparedDocument:
    """prepare_file in a worker; raises ParseError. Cancelling kills the worker at once."""
    request = _Request(
        found,
        content_hash,
        target,
        overlap,
        dataclasses.replace(ocr, progress=None),
        options.follow_links,
        options.context_tokens,
        options.limits,
    )
    acquiring = asyncio.ensure_future(asyncio.to_thread(_acquire, options))
    try:
        worker = await asyncio.shield(acquiring)
    except asyncio.CancelledError:  # the thread still gets a worker: hand it back then
        acquiring.add_done_callback(_release_acquired)
        raise
    preparing = asyncio.ensure_future(
        asyncio.to_thread(worker.prepare, request, ocr.progress, options.timeout_s)
    )
    try:
        result = await asyncio.shield(preparing)
    finally:
        if preparing.done():
            _release(worker)
        else:  # cancelled: the thread ends as soon as the worker is dead
            worker.stop()
            preparing.add_done_callback(lambda _: _release(worker))
    if isinstance(result, ParseError):
        raise result
    assert isinstance(result, PreparedDocument)
    # the worker checked both; a cheap second look at what reaches the server
    size = result.fields.size_bytes
    options.limits.check_text(result.units, size)
    options.limits.check_chunks(len(result.chunks), size)
    return result


def _release_acquired(acquiring: asyncio.Future[ParseWorker]) -> None:
    if not acquiring.cancelled() and acquiring.exception() is None:
        _release(acquiring.result())


# ---- the worker process ---------------------------------------------------------------


def _limit_memory(memory_mb: int) -> None:
    """The soft limit only: the OCR engines it starts may need to raise theirs."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_mb << 20
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _exit_with_parent() -> None:
    """pgrag killed (SIGKILL, OOM): no worker keeps parsing for nobody."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _serve(rx: Connection, tx: Connection) -> None:
    lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        with lock:
            tx.send(message)

    def progress(done: int, total: int) -> None:
        send(("progress", done, total))

    send(("ready",))
    while True:
        try:
            request: _Request = rx.recv()
        except EOFError:
            return
        ocr = dataclasses.replace(request.ocr, progress=progress)
        try:
            prepared = prepare_file(
                request.found,
                request.content_hash,
                request.target,
                request.overlap,
                ocr,
                request.follow_links,
                request.context_tokens,
                request.limits,
            )
            reply: tuple[Any, ...] = ("ok", prepared)
        except ParseError as exc:
            reply = ("error", exc.code, exc.message)
        except MemoryError:
            reply = (
                "error",
                ErrorCode.TOO_LARGE,
                "the file needs more memory than a parse may take",
            )
        except Exception as exc:  # a bug of ours on this file: the run goes on
            reply = ("error", ErrorCode.CORRUPT_FILE, f"{type(exc).__name__}: {exc}")
        del ocr
        try:
            send(reply)
        except MemoryError:
            send(("error", ErrorCode.TOO_LARGE, "the parsed document is too large to hand over"))
        if reply[0] == "error" and reply[1] == ErrorCode.TOO_LARGE:
            return


def main() -> None:
    _limit_memory(int(sys.argv[1]))
    rx = Connection(os.dup(0), writable=False)
    tx = Connection(os.dup(1), readable=False)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    _serve(rx, tx)


if __name__ == "__main__":
    main()
