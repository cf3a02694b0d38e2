"""Watch mode: re-ingest on create/edit/rename/delete, debounced, via watchfiles."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from watchfiles import Change, awatch

from pgrag.ingest.pipeline import FileResult, Ingestor, IngestSummary, Outcome
from pgrag.ingest.walker import FoundFile, ignore_spec

DEBOUNCE_MS = 800  # a file still being written settles before we read it


async def watch_and_ingest(
    ingestor: Ingestor,
    targets: list[Path],
    *,
    on_summary: Callable[[IngestSummary], None] | None = None,
    stop_event: object | None = None,
) -> None:
    roots = [t.expanduser().resolve() for t in targets]
    roots = [r if r.is_dir() else r.parent for r in roots]
    specs = {r: ignore_spec(r) for r in roots}
    async for changes in awatch(*roots, debounce=DEBOUNCE_MS, step=100, stop_event=stop_event):  # type: ignore[arg-type]
        for root in roots:
            touched: dict[str, Path] = {}
            deleted: list[str] = []
            for change, raw in changes:
                path = Path(raw)
                if not path.is_relative_to(root):
                    continue
                rel = path.relative_to(root).as_posix()
                if specs[root].match_file(rel):
                    continue
                if change == Change.deleted or not path.exists():
                    deleted.append(rel)
                elif path.is_file():
                    touched[rel] = path
            summary = IngestSummary(ingestor.collection_name)
            if touched:
                files = [FoundFile(root, p, rel) for rel, p in sorted(touched.items())]
                summary.results += (await ingestor.ingest_files(root, files)).results
            if deleted:
                removed = await ingestor.remove(root, deleted)
                summary.results += [FileResult(p, Outcome.REMOVED) for p in removed]
            if summary.results and on_summary:
                on_summary(summary)
