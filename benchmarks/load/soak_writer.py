"""The soak's writer: files saved, changed and removed in a collection of their own while the
clients search, through pgrag's ingestion."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import sys
from pathlib import Path

import psycopg
from soak_report import Stats
from soak_server import WRITER_APP

WRITE_COLLECTION = "soakwrite"


WRITE_MODEL = "hash/384"


WRITTEN_SQL = (
    "SELECT d.path, d.content_hash, d.status FROM pgrag.documents d"
    " JOIN pgrag.collections c ON c.id = d.collection_id WHERE c.name = %s"
)


class Writer:
    """Keeps `files` generated text files (2-6 KB of SciFact passages) in a folder: each
    round adds, changes and deletes a few, ingests the folder with the CLI and checks that
    the collection then holds exactly the folder's files, ready, with matching hashes."""

    def __init__(self, folder: Path, dsn: str, texts: list[str], files: int, churn: int) -> None:
        self.folder, self.dsn, self.texts = folder, dsn, texts
        self.rng = random.Random(8)
        self.files, self.churn = files, churn
        self.next_id = 0
        self.round = 0

    def _write(self, path: Path) -> None:
        size = self.rng.randint(2000, 6000)
        parts = [f"soak round {self.round} file {path.stem}"]
        while sum(len(p) for p in parts) < size:
            parts.append(self.rng.choice(self.texts))
        path.write_text("\n\n".join(parts), encoding="utf-8")

    def _new(self) -> None:
        self._write(self.folder / f"doc{self.next_id:05d}.txt")
        self.next_id += 1

    def mutate(self) -> tuple[int, int]:
        """(files added or changed, files deleted) for this round."""
        self.round += 1
        existing = sorted(self.folder.glob("*.txt"))
        if not existing:
            for _ in range(self.files):
                self._new()
            return self.files, 0
        doomed = self.rng.sample(existing, min(self.churn, len(existing)))
        for p in doomed:
            p.unlink()
        kept = [p for p in existing if p not in doomed]
        changed = self.rng.sample(kept, min(self.churn, len(kept)))
        for p in changed:
            self._write(p)
        for _ in range(len(doomed)):
            self._new()
        return len(changed) + len(doomed), len(doomed)

    async def ingest(self) -> str | None:
        """Run `pgrag ingest` on the folder; None or what went wrong."""
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PGAPPNAME": WRITER_APP}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "pgrag",
            "--database-url",
            self.dsn,
            "--embedding-model",
            WRITE_MODEL,
            "ingest",
            "-q",
            "-c",
            WRITE_COLLECTION,
            str(self.folder),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _, err = await asyncio.wait_for(proc.communicate(), timeout=300)
        finally:
            if proc.returncode is None:  # cancelled or timed out: do not leave it running
                proc.kill()
                await proc.wait()
        text = err.decode(errors="replace")
        if proc.returncode != 0:
            return f"ingest exit {proc.returncode}: {text[-300:]}"
        if "not ingested" in text:  # the CLI exits 0 when some files of the run succeeded
            return f"ingest reported failures: {text[text.index('not ingested') :][:300]}"
        return None

    async def verify(self, conn: psycopg.AsyncConnection) -> str | None:
        want = {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in self.folder.glob("*.txt")
        }
        rows = await (await conn.execute(WRITTEN_SQL, (WRITE_COLLECTION,))).fetchall()
        have = {path: (digest, status) for path, digest, status in rows}
        wrong = sorted(n for n, d in want.items() if have.get(n) != (d, "ready")) + sorted(
            n for n in have if n not in want
        )
        if wrong:
            return f"{len(wrong)} documents differ from the folder after ingest, e.g. {wrong[:3]}"
        return None

    async def run_round(self, conn: psycopg.AsyncConnection, stats: Stats) -> None:
        written, deleted = self.mutate()
        error = await self.ingest() or await self.verify(conn)
        stats.writer_rounds += 1
        stats.window.writer_rounds += 1
        if error:
            stats.writer_error(f"round {self.round}: {error}")
        else:
            stats.files_written += written
            stats.files_deleted += deleted


async def writer_loop(
    writer: Writer, conn: psycopg.AsyncConnection, stats: Stats, stop: asyncio.Event, pause: float
) -> None:
    while not stop.is_set():
        try:
            await writer.run_round(conn, stats)
        except Exception as exc:  # a crashed round is an error
            stats.writer_error(f"round {writer.round}: {type(exc).__name__}: {exc}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=pause)
