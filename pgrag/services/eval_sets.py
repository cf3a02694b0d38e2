"""Stored evaluation sets: cases saved from the console's playground or by `pgrag eval
--save-set`, run by the console or `pgrag eval --set`, each run kept with its report for a
before/after. The SQL is in store/eval_sets.py. Operator data, like the search log: callers
keep collection-limited keys away from it (an expected document may lie anywhere)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from pgrag.errors import InvalidArgument, NotFound
from pgrag.search.engine import SearchService
from pgrag.search.modes import SearchMode
from pgrag.services.eval_compare import Compared, kept_summary, run_compared
from pgrag.services.evaluation import EvalQuery, Outcome, report, run_queries
from pgrag.store import eval_sets as store
from pgrag.store.eval_sets import EvalRun, EvalSet

RUNS_SHOWN = 10


def _checked(set_name: str) -> str:
    name = set_name.strip()
    if not 1 <= len(name) <= 200:
        raise InvalidArgument("an evaluation set's name is 1 to 200 characters")
    return name


async def save_cases(
    pool: AsyncConnectionPool, set_name: str, queries: Sequence[EvalQuery], caller: str
) -> None:
    cases = [q.model_dump(exclude_none=True, mode="json") for q in queries]
    async with pool.connection() as conn:
        await store.add_cases(conn, _checked(set_name), cases, caller)


async def load_set(pool: AsyncConnectionPool, set_name: str) -> list[EvalQuery]:
    async with pool.connection() as conn:
        rows = await store.cases(conn, _checked(set_name))
    if not rows:
        raise NotFound(f"no evaluation set '{set_name}': save cases into it first")
    return [EvalQuery.model_validate(r) for r in rows]


async def list_sets(pool: AsyncConnectionPool) -> list[EvalSet]:
    async with pool.connection() as conn:
        return await store.sets(conn)


async def run_set(
    service: SearchService, set_name: str, modes: Sequence[SearchMode], collection: str | None
) -> tuple[list[Outcome], list[str]]:
    """Run a stored set and keep the run with its report (what `pgrag eval --json` prints)."""
    queries = await load_set(service.pool, set_name)
    outcomes, missing = await run_queries(service, queries, modes=modes, collection=collection)
    async with service.pool.connection() as conn:
        await store.add_run(
            conn,
            set_name.strip(),
            service.provider.model,
            [m.value for m in modes],
            report(outcomes, missing),
        )
    return outcomes, missing


async def earlier_runs(pool: AsyncConnectionPool, set_name: str) -> list[EvalRun]:
    async with pool.connection() as conn:
        return await store.runs(conn, _checked(set_name), RUNS_SHOWN)


async def run_set_compared(
    service: SearchService,
    set_name: str,
    options: dict[str, dict[str, Any]],
    modes: Sequence[SearchMode],
    collection: str | None,
) -> Compared:
    """A stored set run with two ranking settings, kept as one run with both summaries."""
    queries = await load_set(service.pool, set_name)
    compared = await run_compared(service, queries, options, modes=modes, collection=collection)
    kept = {
        "summary": kept_summary(compared),
        "queries": {"before": compared.before["queries"], "after": compared.after["queries"]},
    }
    async with service.pool.connection() as conn:
        await store.add_run(
            conn, set_name.strip(), service.provider.model, [m.value for m in modes], kept
        )
    return compared


@dataclass(frozen=True)
class HistoryRow:
    """One run in one mode, and its before/after: the two settings of a comparison run,
    else the run before it in the same mode (None for the first)."""

    run: EvalRun
    mode: str
    overall: dict[str, Any]
    compared: bool  # before/after are the two settings of this run
    before: dict[str, Any] | None
    after: dict[str, Any]

    def change(self, metric: str) -> float | None:
        x = (self.before or {}).get(metric)
        y = self.after.get(metric)
        return round(y - x, 4) if x is not None and y is not None else None


def history(runs: Sequence[EvalRun]) -> list[HistoryRow]:
    """The runs (newest first) as rows with a before/after for every metric of METRICS."""
    rows: list[HistoryRow] = []
    for i, run in enumerate(runs):
        for mode, s in run.summary.items():
            overall = s.get("overall") or {}
            after = (s.get("after") or {}).get("overall")
            if after is not None:
                rows.append(HistoryRow(run, mode, overall, True, overall, after))
                continue
            older = next((r.summary[mode] for r in runs[i + 1 :] if mode in r.summary), None)
            earlier = None if older is None else (older.get("after") or older).get("overall")
            rows.append(HistoryRow(run, mode, overall, False, earlier, overall))
    return rows
