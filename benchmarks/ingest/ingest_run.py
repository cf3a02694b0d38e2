"""One measured ingest: `pgrag ingest` as a subprocess (through ingest_probe.py, which adds
stage timers) into a fresh database, watched from outside (ingest_watch.py), then what it
stored read back: counts, and the distinct texts the model embedded.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from ingest_watch import Milestones, Sampler, poll

from pgrag.ingest.context import embed_text

HERE = Path(__file__).resolve().parent
COLLECTION = "bench"


@dataclass
class KbSource:
    name: str
    root: Path
    files: int  # supported files under root
    planted_rel: str
    code: str
    note: str


@dataclass
class IngestRun:
    spawned: float  # epoch seconds: every time below is relative to it
    exit_code: int
    wall_s: float
    peak_rss_mb: float  # ru_maxrss of `pgrag ingest` (wait4), its reaped children included
    ingest_cpu_s: float  # user + system of the process (wait4)
    stats: dict[str, Any]  # from ingest_probe.py
    milestones: Milestones
    sampler: Sampler
    counts: dict[str, int] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    log_tail: str = ""


def postmaster_pid(dsn: str) -> int | None:
    """The server's main pid (same machine): the first line of postmaster.pid."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
    try:
        return int((Path(row[0]) / "postmaster.pid").read_text().split()[0]) if row else None
    except (OSError, ValueError, IndexError):
        return None


def _wait(pid: int) -> tuple[int, Any]:
    _, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), usage


async def _ingest(kb: KbSource, dsn: str, model: str, env: dict[str, str], work: Path) -> IngestRun:
    stats_path, log_path = work / f"{kb.name}.probe.json", work / f"{kb.name}.log"
    command = [sys.executable, str(HERE / "ingest_probe.py"), str(stats_path)]
    command += ["--embedding-model", model, "ingest", "-q", "-c", COLLECTION, str(kb.root)]
    child_env = {**env, "PGRAG_DATABASE_URL": dsn}
    done = asyncio.Event()
    with log_path.open("w") as log:
        spawned = time.time()
        proc = subprocess.Popen(command, env=child_env, stdout=log, stderr=subprocess.STDOUT)
    sampler = Sampler(proc.pid, postmaster_pid(dsn))
    sampler.start()
    watcher = asyncio.create_task(poll(dsn, COLLECTION, kb.code, kb.planted_rel, kb.files, done))
    try:
        code, usage = await asyncio.to_thread(_wait, proc.pid)
    except BaseException:
        proc.kill()
        raise
    proc.returncode = code  # reaped by wait4 above, for its rusage
    ended = time.time()
    sampler.stop()
    done.set()
    milestones = await watcher
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    return IngestRun(
        spawned=spawned,
        exit_code=code,
        wall_s=ended - spawned,
        peak_rss_mb=usage.ru_maxrss / 1024,  # KiB on Linux
        ingest_cpu_s=usage.ru_utime + usage.ru_stime,
        stats=stats,
        milestones=milestones,
        sampler=sampler,
        log_tail="\n".join(log_path.read_text(errors="replace").splitlines()[-15:]),
    )


COUNTS_SQL = """
SELECT count(*) FILTER (WHERE d.status = 'ready'), count(*) FILTER (WHERE d.status = 'failed'),
       (SELECT count(*) FROM pgrag.chunks k WHERE k.collection_id = c.id)
FROM pgrag.collections c LEFT JOIN pgrag.documents d ON d.collection_id = c.id
WHERE c.name = %s GROUP BY c.id
"""
# each distinct chunk's parts of what the model saw (pgrag.ingest.context.embed_text)
TEXTS_SQL = """
SELECT DISTINCT ON (content_hash) content_hash, heading, context, content
FROM pgrag.chunks WHERE collection_id = (SELECT id FROM pgrag.collections WHERE name = %s)
ORDER BY content_hash
"""


def stored(dsn: str) -> tuple[dict[str, int], list[str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(COUNTS_SQL, (COLLECTION,)).fetchone() or (0, 0, 0)
        rows = conn.execute(TEXTS_SQL, (COLLECTION,)).fetchall()
    hashes = [bytes(h) for h, *_ in rows]
    texts = [embed_text(heading, context, content) for _, heading, context, content in rows]
    if any(h != hashlib.sha256(t.encode()).digest() for h, t in zip(hashes, texts, strict=True)):
        raise RuntimeError("a chunk's text read back is not the text its hash was taken of")
    return {"documents_ready": row[0], "documents_failed": row[1], "chunks": row[2]}, texts


def ingest(kb: KbSource, dsn: str, model: str, env: dict[str, str], work: Path) -> IngestRun:
    run = asyncio.run(_ingest(kb, dsn, model, env, work))
    run.counts, run.texts = stored(dsn)
    return run
