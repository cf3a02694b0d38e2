"""Watch mode: re-ingest on create/edit/rename/delete, debounced, via watchfiles.

Paths are classified with lstat: a linked folder is never walked, and links and special
files go to the ingestor, whose open refuses them with their code (files.py)."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pathspec
from watchfiles import Change, awatch
from watchfiles.main import FileChange

from pgrag.ingest.pipeline import FileResult, Ingestor, IngestSummary, Outcome
from pgrag.ingest.walker import FoundFile, ignore_spec, walk_under

DEBOUNCE_MS = 800  # a file still being written settles before we read it
WAKE_MS = 1000  # the watcher reports in at least this often (the first time: it is ready)
SETTLE_LIMIT_S = 60.0  # a file that never stops growing is read after this long anyway


async def watch_and_ingest(
    ingestor: Ingestor,
    targets: list[Path],
    *,
    on_summary: Callable[[IngestSummary], None] | None = None,
    stop_event: object | None = None,
) -> None:
    """Follow changes under targets until stop_event. Starts with one full scan once the OS
    watch is in place (unchanged files cost a hash), so a change made after the caller's
    own initial ingest but before the watch existed is not lost."""
    roots = [t.expanduser().resolve() for t in targets]
    roots = [r if r.is_dir() else r.parent for r in roots]
    specs = {r: ignore_spec(r) for r in roots}
    scanned = False
    async for changes in awatch(
        *roots,
        debounce=DEBOUNCE_MS,
        step=100,
        stop_event=stop_event,
        rust_timeout=WAKE_MS,
        yield_on_timeout=True,
    ):
        if not scanned:  # the OS watch is in place now: what changed before it is found here
            scanned = True  # (and this first batch too: the scan reads the disk after it)
            caught = await ingestor.run(targets)
            if on_summary and any(r.outcome != Outcome.UNCHANGED for r in caught.results):
                on_summary(caught)
            continue
        for root in roots if changes else []:
            touched, deleted = _on_disk_now(root, specs[root], changes)
            if touched:
                await _settle(list(touched.values()))
                deleted += [rel for rel, p in touched.items() if not os.path.lexists(p)]
            summary = IngestSummary(ingestor.collection_name)
            files = [
                FoundFile(root, p, rel) for rel, p in sorted(touched.items()) if os.path.lexists(p)
            ]
            if files:
                summary.results += (await ingestor.ingest_files(root, files)).results
                deleted += summary.refused()  # a file replaced by a link: its text goes
            if deleted:
                removed = await ingestor.remove(root, sorted(set(deleted)))
                summary.results += [FileResult(p, Outcome.REMOVED) for p in removed]
            if summary.results and on_summary:
                on_summary(summary)


def _on_disk_now(
    root: Path, spec: pathspec.GitIgnoreSpec, changes: set[FileChange]
) -> tuple[dict[str, Path], list[str]]:
    """Files to (re)ingest and paths to drop, by what exists now rather than by event kind:
    a batch can hold both the deletion and the re-creation of one path (editors that save
    by replacing the file), and a folder moved in arrives as one event for the folder."""
    touched: dict[str, Path] = {}
    deleted: list[str] = []
    for change, raw in changes:
        path = Path(raw)
        if not path.is_relative_to(root) or path == root:
            continue
        rel = path.relative_to(root).as_posix()
        try:
            mode = path.lstat().st_mode
        except OSError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            if change == Change.added and not spec.match_file(rel + "/"):
                touched.update((f.rel, f.path) for f in walk_under(root, spec, path))
        elif spec.match_file(rel):
            continue
        elif mode is not None:
            touched[rel] = path
        else:
            deleted.append(rel)
    return touched, deleted


def _stamps(paths: list[Path]) -> list[tuple[int, int] | None]:
    stamps: list[tuple[int, int] | None] = []
    for p in paths:
        try:
            st = p.lstat()
            stamps.append((st.st_size, st.st_mtime_ns))
        except OSError:
            stamps.append(None)
    return stamps


async def _settle(paths: list[Path]) -> None:
    """Wait until the files have not changed for DEBOUNCE_MS. watchfiles reports a change
    once events pause for a moment, and repeated writes to one file collapse into one event,
    so a file written in pieces would otherwise be read half-written."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_LIMIT_S
    last = _stamps(paths)
    while loop.time() < deadline:
        await asyncio.sleep(DEBOUNCE_MS / 1000)
        now = _stamps(paths)
        if now == last:
            return
        last = now
