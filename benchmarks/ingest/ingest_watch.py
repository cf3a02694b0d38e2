"""What the ingestion benchmark watches from outside while `pgrag ingest` runs: CPU per core,
the CPU and memory of the ingest's process tree and of PostgreSQL, and, from a second
connection, when the planted code becomes keyword-findable and when every chunk has a
vector.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

SAMPLE_S = 0.5  # psutil and the search poll; the times below are this precise

# every file has its final version (its status is terminal) and no chunk of the collection
# lacks a vector in the active set
EMBEDDED_SQL = """
SELECT (SELECT count(*) FROM pgrag.documents d WHERE d.collection_id = c.id
        AND d.status IN ('ready', 'failed')),
       (SELECT count(*) FROM pgrag.chunks k WHERE k.collection_id = c.id AND NOT EXISTS
           (SELECT 1 FROM pgrag.embeddings e
            WHERE e.set_id = c.active_set_id AND e.chunk_id = k.id))
FROM pgrag.collections c WHERE c.name = %s
"""


def _cpu_s(times: Any) -> float:
    return float(times.user + times.system)


@dataclass
class Usage:
    """psutil samples of one process tree: the last CPU seen per pid (a process that has
    exited keeps its last sample) and the peak of the tree's summed RSS."""

    root: int
    cpu_at_start: dict[int, float] = field(default_factory=dict)
    cpu_last: dict[int, float] = field(default_factory=dict)
    peak_rss_mb: float = 0.0

    def procs(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.root)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def sample(self, *, start: bool = False) -> None:
        rss = 0
        for p in self.procs():
            try:
                with p.oneshot():
                    cpu, mem = _cpu_s(p.cpu_times()), p.memory_info().rss
            except psutil.Error:
                continue
            if start:
                self.cpu_at_start[p.pid] = cpu
            self.cpu_last[p.pid] = cpu
            rss += mem
        self.peak_rss_mb = max(self.peak_rss_mb, rss / 2**20)

    @property
    def cpu_s(self) -> float:
        return sum(v - self.cpu_at_start.get(pid, 0.0) for pid, v in self.cpu_last.items())


class Sampler:
    """A thread sampling the ingest's tree and PostgreSQL's every SAMPLE_S, and the
    machine's per-core CPU time between start() and stop()."""

    def __init__(self, ingest_pid: int, postgres_pid: int | None) -> None:
        self.ingest = Usage(ingest_pid)
        self.postgres = Usage(postgres_pid) if postgres_pid else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._cores_start = psutil.cpu_times(percpu=True)
        self._cores_end: list[Any] = []

    def start(self) -> None:
        self.ingest.sample(start=True)
        if self.postgres:
            self.postgres.sample(start=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.ingest.sample()
            if self.postgres:
                self.postgres.sample()

    def stop(self) -> None:
        self._cores_end = psutil.cpu_times(percpu=True)
        self._stop.set()
        self._thread.join()
        if self.postgres:
            self.postgres.sample()

    def core_busy_pct(self) -> list[float]:
        """Each core's busy share over the run, whoever used it (the box is shared)."""
        out = []
        for a, b in zip(self._cores_start, self._cores_end, strict=True):
            total = sum(b) - sum(a)
            idle = (b.idle + getattr(b, "iowait", 0)) - (a.idle + getattr(a, "iowait", 0))
            out.append(round(100.0 * (total - idle) / total, 1) if total > 0 else 0.0)
        return out


@dataclass
class Milestones:
    keyword_at: float | None = None  # epoch seconds
    embedded_at: float | None = None
    polls: int = 0
    errors: list[str] = field(default_factory=list)


async def poll(
    dsn: str, collection: str, code: str, rel: str, files: int, done: asyncio.Event
) -> Milestones:
    """From a second connection until `done`: the first keyword search (pgrag's own search
    service, keyword mode) that returns the planted code's file, and the first moment all
    `files` have their final status and no chunk lacks a vector."""
    from pgrag.db.database import open_database
    from pgrag.embeddings.hashing import HashEmbedder
    from pgrag.errors import PgragError
    from pgrag.search.engine import SearchService
    from pgrag.search.models import SearchFilters, SearchRequest
    from pgrag.settings import load_settings

    m = Milestones()
    request = SearchRequest(
        query=code, mode="keyword", filters=SearchFilters(collection=collection)
    )
    async with open_database(load_settings(), dsn=dsn, min_size=1, max_size=2) as db:
        # keyword mode never embeds: the hash provider only fills the constructor
        service = SearchService(db.pool, HashEmbedder("hash/384"), log_searches=False)
        while True:
            finished = done.is_set()  # one last look after the ingest has exited
            m.polls += 1
            if m.keyword_at is None:
                try:
                    page = await service.search(request)
                    if any(h.path == rel for h in page.data.results):
                        m.keyword_at = time.time()
                except PgragError as exc:  # the collection may not exist yet
                    m.errors = [*m.errors[-4:], str(exc.code)]
            if m.embedded_at is None:
                async with db.pool.connection() as conn:
                    row = await (await conn.execute(EMBEDDED_SQL, (collection,))).fetchone()
                if row is not None and row[0] >= files and row[1] == 0:
                    m.embedded_at = time.time()
            if finished or (m.keyword_at and m.embedded_at):
                return m
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), SAMPLE_S)
