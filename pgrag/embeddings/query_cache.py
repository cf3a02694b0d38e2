"""Recent query vectors, in process.

Agents repeat themselves: every continuation page, a retry, the same question from several
sessions. A query vector costs ~40 ms of CPU on the bundled model and nothing to keep, so the
last few thousand are held in an LRU, and concurrent requests for the same text share one
model call instead of queueing twice.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import numpy as np


class QueryVectorCache:
    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self.hits = 0
        self.misses = 0
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._pending: dict[str, asyncio.Future[np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self._vectors)

    async def get(self, text: str, compute: Callable[[str], Awaitable[np.ndarray]]) -> np.ndarray:
        vector = self._vectors.get(text)
        if vector is not None:
            self._vectors.move_to_end(text)
            self.hits += 1
            return vector
        pending = self._pending.get(text)
        if pending is not None:  # the same text is being embedded right now: wait for it
            self.hits += 1
            return await asyncio.shield(pending)
        self.misses += 1
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending[text] = future
        try:
            vector = await compute(text)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody logs "never retrieved"
            raise
        else:
            vector.setflags(write=False)  # shared between callers
            future.set_result(vector)
            if self.size > 0:
                self._vectors[text] = vector
                if len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
            return vector
        finally:
            del self._pending[text]
