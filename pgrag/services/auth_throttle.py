"""A budget of failed sign-ins and bearer-key guesses per address: each address may fail
BURST times at once and then once every REFILL_S seconds; past that every attempt from it is
refused RATE_LIMITED (429) before its key is even compared, until the budget refills. So a
guesser gets ~10 tries a minute instead of hundreds a second, and the answer it gets while
throttled says nothing about the key it sent."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from pgrag.config.serving import AUTH_FAILURE_BURST
from pgrag.errors import ErrorCode, PgragError

BURST = AUTH_FAILURE_BURST  # failures an address may make at once (PGRAG_AUTH_FAILURE_BURST)
REFILL_S = 6.0  # then one more every 6 s (10 a minute)
MAX_ADDRESSES = 65536  # then addresses with a full budget are forgotten


class TooManyFailures(PgragError):
    code = ErrorCode.RATE_LIMITED


@dataclass
class _Budget:
    left: float
    at: float


class AuthThrottle:
    """One process's failed-authentication budgets, by address."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, burst: int = BURST) -> None:
        self.clock = clock
        self.burst = burst  # PGRAG_AUTH_FAILURE_BURST
        self.budgets: dict[str, _Budget] = {}

    def check(self, address: str) -> None:
        """Raise TooManyFailures while `address` has no failures left."""
        budget = self._budget(address)
        if budget.left < 1:
            wait = math.ceil((1 - budget.left) * REFILL_S)
            raise TooManyFailures(
                f"too many failed sign-ins or unknown keys from this address: retry in {wait} s",
                detail={"retry_after_s": wait},
            )

    def failed(self, address: str) -> None:
        self._budget(address).left -= 1
        if len(self.budgets) > MAX_ADDRESSES:
            for name in [a for a in self.budgets if self._budget(a).left >= self.burst]:
                del self.budgets[name]

    def _budget(self, address: str) -> _Budget:
        now = self.clock()
        budget = self.budgets.setdefault(address, _Budget(self.burst, now))
        budget.left = min(self.burst, budget.left + (now - budget.at) / REFILL_S)
        budget.at = now
        return budget
