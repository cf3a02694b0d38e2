"""Per-caller admission: the time limits bound each call, this bounds each caller.

The rule: a call is charged what it cost its caller's share of the server, never the time
other callers made it wait. While a call runs, each second counts at the rate

    rate = min(1, C / n) / min(1, C / m)

(C: the cores serving calls; n: calls running on this server; m: the caller's own calls
among them). That is the time the call would have taken had only its caller's calls been
running: others' load is taken out, the caller's own parallelism is not. Alone (n <= C) a
call counts its whole wall time; a victim's call slowed by another key's 30 slow calls
counts 1/31 of it; a key that pads its slow call with idle ones only raises its own rate.
Time spent held before a call starts is never counted. Where the database's backends are
on this host, a call that kept one busy is charged that CPU time if it is more (the even split
undercounts a busy backend beside calls that mostly wait: db/backend_cpu.py). A call that ran
out of its own work budget (a regex past PGRAG_REGEX_TIMEOUT_MS: TIMEOUT) is charged its whole
wall time: alone it would have run at least that long, since it was cut, not finished. Under
load neither estimate sees that (a regex backend given half a core for its 1.2 s spends 0.5 s
of CPU, under the threshold), so a client looping over cut regexes went uncharged.

A call whose cost passes the slow-call threshold is charged, whole, to its caller; a caller
whose charges run ahead of its share of the server waits before its next call starts. So one
client looping over slow requests (a regex that ends `TIMEOUT`, a 4,000-character query)
takes at most that share, while callers whose calls stay under the threshold never wait.
Holding is work-conserving: a caller is held only while other callers have calls running,
so a lone client (a local agent, a script) is never slowed by it. While others run, a caller
also runs at most C calls at once (its further calls queue): a charge is known only when a
call ends, so without the cap one key's 30 parallel slow calls would all start, unpaid, at
once.

Callers are API keys and OAuth grants; anonymous HTTP callers are their peer address (behind
a configured proxy: the address it forwards). Local callers (stdio, the CLI) are never held."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from pgrag.errors import BudgetExceeded, ErrorCode, PgragError
from pgrag.metrics import count_held_call

MAX_HOLD_S = 10.0  # a longer wait is refused RATE_LIMITED (with retry_after_s) instead
MAX_ACCOUNTS = 4096  # then accounts with nothing owed are forgotten
LOCAL = "local"


def serving_cores() -> int:
    """The cores this process may run on: what its calls (and, on one host, the database's
    backends) share."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def ran_out_of_budget(exc: BaseException) -> bool:
    """The call's own work hit its budget. Not any TIMEOUT: a busy pool's or the guard's
    limit on the whole call are waits others can cause."""
    return isinstance(exc, BudgetExceeded)


class RateLimited(PgragError):
    code = ErrorCode.RATE_LIMITED


@dataclass
class _Account:
    balance: float  # slow seconds the caller may still spend; negative: owed
    at: float  # when the balance was last brought up to date


class Admission:
    """One process's accounts of slow work, by caller. `share` 0 turns it off."""

    def __init__(
        self,
        share: float,
        slow_s: float,
        *,
        max_hold_s: float = MAX_HOLD_S,
        cores: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.share, self.slow_s = share, slow_s
        self.max_hold_s = max_hold_s
        self.cores = cores or serving_cores()
        # one call is charged at most what a maximal wait repays, and a caller may spend
        # that much before its first wait: a single long call is held after, never refused
        self.burst_s = max_hold_s * share
        self.clock = clock
        self.accounts: dict[str, _Account] = {}
        self.running: dict[str, int] = {}  # calls under way, by caller
        # by caller with calls running: the seconds its calls have counted so far (each
        # call's cost is the difference between its end and its start), brought up to date
        # at every start and end, when the rates change
        self._meters: dict[str, float] = {}
        self._metered_at = clock()
        self._ended = asyncio.Event()  # set (and replaced) whenever a call ends

    def others_running(self, caller: str) -> bool:
        return sum(self.running.values()) > self.running.get(caller, 0)

    def rate(self, mine: int, total: int) -> float:
        """How fast a call's cost grows while `total` calls run, `mine` of them its caller's."""
        return min(1.0, self.cores / total) / min(1.0, self.cores / mine)

    def counted(self, caller: str) -> float:
        """The seconds the caller's running calls have counted so far, all together."""
        self._meter()
        return self._meters.get(caller, 0.0)

    def wait_s(self, caller: str) -> float:
        """How long the caller's next call must wait for its balance to reach zero."""
        account = self._account(caller)
        return max(0.0, -account.balance / self.share)

    def charge(self, caller: str, seconds: float) -> None:
        """A call cost `seconds`: a slow one (past the threshold) is the caller's, whole."""
        slow = min(seconds, self.burst_s) if seconds > self.slow_s else 0.0
        if slow > 0:
            self._account(caller).balance -= slow
            if len(self.accounts) > MAX_ACCOUNTS:
                self._forget_settled()

    @contextlib.asynccontextmanager
    async def admitted(
        self,
        caller: str,
        measured: Callable[[], float] | None = None,
        ran_out: Callable[[], bool] | None = None,
    ) -> AsyncIterator[None]:
        """Wait for the caller's share while others run (or refuse past MAX_HOLD_S), run the
        call, charge what it cost: its metered time, or what `measured` says it used of
        the cores (its database backends' CPU time), whichever is more; a call that ran out
        of its own work budget (TIMEOUT raised, or `ran_out` says so) its whole wall time."""
        if self.share <= 0 or caller == LOCAL:
            yield
            return
        deadline = self.clock() + self.max_hold_s
        wait = self.wait_s(caller) if self.others_running(caller) else 0.0
        if wait > self.max_hold_s:
            count_held_call("refused", 0.0)
            raise self._refusal(wait)
        if wait > 0:
            count_held_call("held", wait)
            await asyncio.sleep(wait)
        await self._turn(caller, deadline)  # no await between it and the start
        began, started = self.clock(), self._start(caller)
        cut = False
        try:
            yield
        except BaseException as exc:
            cut = ran_out_of_budget(exc)
            raise
        finally:
            cost = self._end(caller) - started
            if measured:
                cost = max(cost, measured())
            if cut or (ran_out is not None and ran_out()):
                cost = max(cost, self.clock() - began)
            self.charge(caller, cost)

    def parallel_full(self, caller: str) -> bool:
        """The caller has C calls running while others run too: its next one queues."""
        return self.running.get(caller, 0) >= self.cores and self.others_running(caller)

    async def _turn(self, caller: str, deadline: float) -> None:
        """Queue until the caller has a free one of its C parallel calls (or others stop)."""
        if not self.parallel_full(caller):
            return
        queued = self.clock()
        while self.parallel_full(caller):
            left = deadline - self.clock()
            if left <= 0:
                count_held_call("refused", 0.0)
                raise self._refusal(self.max_hold_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), left)
        count_held_call("held", self.clock() - queued)

    def _refusal(self, wait: float) -> RateLimited:
        return RateLimited(
            f"this caller's slow calls took more than {self.share:.0%} of the server's "
            f"time: retry in {math.ceil(wait)} s, and narrow slow searches (a regex "
            "without literal text, very long queries)",
            detail={"retry_after_s": math.ceil(wait)},
        )

    def _start(self, caller: str) -> float:
        self._meter()
        self.running[caller] = self.running.get(caller, 0) + 1
        return self._meters.setdefault(caller, 0.0)

    def _end(self, caller: str) -> float:
        self._meter()
        ended = self._meters[caller]
        self.running[caller] -= 1
        if not self.running[caller]:
            del self.running[caller], self._meters[caller]
        self._ended.set()
        self._ended = asyncio.Event()
        return ended

    def _meter(self) -> None:
        """Count the time since the last change for every caller with calls running."""
        now = self.clock()
        elapsed, self._metered_at = now - self._metered_at, now
        total = sum(self.running.values())
        for caller, mine in self.running.items():
            self._meters[caller] += elapsed * self.rate(mine, total)

    def _account(self, caller: str) -> _Account:
        now = self.clock()
        account = self.accounts.get(caller)
        if account is None:
            account = self.accounts[caller] = _Account(self.burst_s, now)
        account.balance = min(self.burst_s, account.balance + (now - account.at) * self.share)
        account.at = now
        return account

    def _forget_settled(self) -> None:
        for caller in list(self.accounts):
            if self._account(caller).balance >= self.burst_s:
                del self.accounts[caller]
