"""`pgrag` itself with stage timers, for the ingestion benchmark:

    python benchmarks/ingest/ingest_probe.py STATS.json ARGS...      (ARGS as for `pgrag`)

Before the command runs, each stage's functions are wrapped wherever pgrag holds them
(`from x import f` included): parsing (OCR included), chunking, the embedding model (the
provider's `embed_passages`), the embedding cache's SQL, and writing versions and vectors.
The ingestion reporter's events are recorded too. pgrag's code is untouched; a function a
later pipeline no longer has is listed under `unhooked` rather than failing the run.

At exit STATS holds, per stage: calls, thread-seconds (the sum of call durations: above the
wall time when calls overlap), busy seconds (wall time with at least one call running),
first start and last end (epoch seconds, comparable across processes).
"""

from __future__ import annotations

import atexit
import functools
import importlib
import inspect
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (module, function, stage); a module missing from this pgrag is skipped
HOOKS = [
    ("pgrag.ingest.prepare", "parse", "parse"),
    ("pgrag.ingest.prepare", "build_chunks", "chunk"),
    ("pgrag.embeddings.cache", "lookup", "cache"),
    ("pgrag.embeddings.cache", "store", "cache"),
    ("pgrag.store.documents", "write_version", "write"),
    ("pgrag.store.vectors", "write_vectors", "write"),
]
# imported before hooking, so that names bound by `from x import f` are found and replaced
COMMAND_MODULES = ["pgrag.cli", "pgrag.ingest.pipeline", "pgrag.runtime"]


class Stage:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.thread_s = 0.0
        self.busy_s = 0.0
        self.active = 0
        self.busy_since = 0.0
        self.first = 0.0
        self.last = 0.0

    def enter(self) -> float:
        now = time.time()
        with self.lock:
            if self.active == 0:
                self.busy_since = now
            self.active += 1
            self.first = self.first or now
        return now

    def leave(self, started: float) -> None:
        now = time.time()
        with self.lock:
            self.calls += 1
            self.thread_s += now - started
            self.active -= 1
            if self.active == 0:
                self.busy_s += now - self.busy_since
            self.last = max(self.last, now)

    def as_dict(self) -> dict[str, float]:
        return {
            "calls": self.calls,
            "thread_s": round(self.thread_s, 3),
            "busy_s": round(self.busy_s, 3),
            "first": self.first,
            "last": self.last,
        }


class Probe:
    def __init__(self) -> None:
        self.started = time.time()
        self.stages: dict[str, Stage] = {}
        self.hooked: list[str] = []
        self.unhooked: list[str] = []
        self.events: list[tuple[float, str, str, str]] = []  # time, kind, path, outcome
        self.embed_texts = 0

    def stage(self, name: str) -> Stage:
        return self.stages.setdefault(name, Stage())

    def timed(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        stage = self.stage(name)
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                started = stage.enter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    stage.leave(started)

            return timed_async

        @functools.wraps(fn)
        def timed_sync(*args: Any, **kwargs: Any) -> Any:
            started = stage.enter()
            try:
                return fn(*args, **kwargs)
            finally:
                stage.leave(started)

        return timed_sync

    def replace_everywhere(self, original: Any, replacement: Any) -> int:
        """Rebind every pgrag module attribute that is `original`."""
        n = 0
        for mod_name, mod in list(sys.modules.items()):
            if not mod_name.startswith("pgrag") or mod is None:
                continue
            for attr, value in list(vars(mod).items()):
                if value is original:
                    setattr(mod, attr, replacement)
                    n += 1
        return n

    def hook(self, module: str, function: str, stage: str) -> None:
        try:
            original = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError):
            self.unhooked.append(f"{module}.{function}")
            return
        self.replace_everywhere(original, self.timed(original, stage))
        self.hooked.append(f"{module}.{function} -> {stage}")

    def hook_provider(self) -> None:
        """Every provider made gets its `embed_passages` timed: the model's own time."""
        from pgrag.embeddings import registry

        original = registry.make_provider
        probe = self

        def make_provider(*args: Any, **kwargs: Any) -> Any:
            provider = original(*args, **kwargs)
            embed = probe.timed(provider.embed_passages, "embed")

            async def embed_passages(texts: list[str]) -> Any:
                probe.embed_texts += len(texts)
                return await embed(texts)

            provider.embed_passages = embed_passages
            return provider

        self.replace_everywhere(original, make_provider)
        self.hooked.append("pgrag.embeddings.registry.make_provider -> embed")

    def hook_reporter(self) -> None:
        from pgrag import metrics

        original = metrics.counting_reporter
        probe = self

        def counting_reporter(reporter: Callable[[Any], None]) -> Callable[[Any], None]:
            inner = original(reporter)

            def report(event: Any) -> None:
                kind = str(getattr(event, "kind", ""))
                if kind in ("scan", "file_done"):
                    result = getattr(event, "result", None)
                    outcome = str(getattr(result, "outcome", "")) if result else ""
                    probe.events.append((time.time(), kind, str(event.path), outcome))
                inner(event)

            return report

        self.replace_everywhere(original, counting_reporter)
        self.hooked.append("pgrag.metrics.counting_reporter -> events")

    def install(self) -> None:
        for module in COMMAND_MODULES:
            importlib.import_module(module)
        for module, function, stage in HOOKS:
            self.hook(module, function, stage)
        self.hook_provider()
        self.hook_reporter()

    def dump(self, path: Path) -> None:
        data = {
            "started": self.started,
            "ended": time.time(),
            "stages": {k: v.as_dict() for k, v in self.stages.items()},
            "texts_to_model": self.embed_texts,
            "events": self.events,
            "hooked": self.hooked,
            "unhooked": self.unhooked,
            "engines": _engines_loaded(),
        }
        path.write_text(json.dumps(data), encoding="utf-8")


def _engines_loaded() -> list[str]:
    """Which bundled-model engine(s) ran in this process (`PGRAG_EMBEDDING_ENGINE`'s
    fallback chain may have picked another than the one asked for)."""
    engine = sys.modules.get("pgrag.embeddings.e5.engine")
    loaded = getattr(engine, "_engines", {}) if engine else {}
    return sorted({str(e.kind) for e in loaded.values()})


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    stats = Path(sys.argv[1])
    probe = Probe()
    probe.install()
    atexit.register(probe.dump, stats)
    from pgrag.cli import main as pgrag_main

    pgrag_main(sys.argv[2:])


if __name__ == "__main__":
    main()
