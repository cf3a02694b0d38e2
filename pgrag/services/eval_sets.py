"""Stored evaluation sets: cases saved from the console's playground or by `pgrag eval
--save-set`, run by the console or `pgrag eval --set`, each run kept with its report for a
before/after. The SQL is in store/eval_sets.py. Operator data, like the search log: callers
keep collection-limited keys away from it (an expected document may lie anywhere)."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg_pool import AsyncConnectionPool

from pgrag.errors import InvalidArgument, NotFound
from pgrag.search.engine import SearchService
from pgrag.search.modes import SearchMode
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
