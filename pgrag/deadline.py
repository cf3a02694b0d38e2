"""The time limit of the current call, visible to all the work it runs.

Every call runs under `limited` (the guard, pgrag/services/guard.py); `within` bounds
one awaitable inside a call. Cancelling a coroutine cannot stop a worker thread, so CPU-bound steps run in `off_loop`
and check the deadline themselves: a call that timed out leaves no work behind."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

# threads for CPU-bound request work: regex matching releases the GIL, the rest is short
CPU_WORKERS = 4

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "pgrag_deadline", default=None
)
_executor = ThreadPoolExecutor(CPU_WORKERS, thread_name_prefix="pgrag-cpu")


async def within(call: Awaitable[T], timeout: float) -> T:
    """`call` under a time limit of `timeout` seconds (TimeoutError past it), the deadline
    visible to `remaining()` inside. A nested limit never extends an outer one."""
    ends = time.monotonic() + timeout
    outer = _deadline.get()
    token = _deadline.set(ends if outer is None else min(ends, outer))
    try:
        return await asyncio.wait_for(call, timeout)
    finally:
        _deadline.reset(token)


@contextlib.asynccontextmanager
async def limited(timeout: float) -> AsyncIterator[None]:
    """The block under a time limit of `timeout` seconds (TimeoutError past it), the
    deadline visible to `remaining()` inside: `within` for a block rather than an
    awaitable (the guard of every call, pgrag/services/guard.py)."""
    ends = time.monotonic() + timeout
    outer = _deadline.get()
    token = _deadline.set(ends if outer is None else min(ends, outer))
    try:
        async with asyncio.timeout(timeout):
            yield
    finally:
        _deadline.reset(token)


def remaining() -> float | None:
    """Seconds left to the current call (None: no limit)."""
    ends = _deadline.get()
    return None if ends is None else ends - time.monotonic()


def check() -> None:
    """TimeoutError when the current call is out of time."""
    left = remaining()
    if left is not None and left <= 0:
        raise TimeoutError("the call's time limit passed")


async def off_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn` on a worker thread with the caller's context (its deadline included), so the
    event loop keeps serving other requests meanwhile."""
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, lambda: context.run(fn, *args, **kwargs))
