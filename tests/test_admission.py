"""Per-caller admission: the accounts' arithmetic on a clock the test moves, then a real
`pgrag serve` with two keys, where one key's slow calls get it held and refused while the
other key's calls answer, over REST and through the official MCP client."""

from __future__ import annotations

import asyncio
import contextlib
import random
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pgrag.errors import BudgetExceeded, ErrorCode, PgragError
from pgrag.services.admission import Admission, RateLimited
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import HASH_MODEL, HttpServer, child_env, http_server

SHARE = 0.05
SLOW_S = 0.05


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def admission(clock: Clock) -> Admission:
    return Admission(SHARE, SLOW_S, max_hold_s=10.0, clock=clock)


def test_calls_under_the_threshold_are_never_charged(admission: Admission) -> None:
    for _ in range(1000):
        admission.charge("key:a", SLOW_S)
    assert admission.wait_s("key:a") == 0


def test_a_caller_past_its_share_waits_until_its_share_repays_it(
    admission: Admission, clock: Clock
) -> None:
    burst = admission.burst_s  # 10 s x 5 %: what one maximal call may be charged
    assert burst == pytest.approx(0.5)
    admission.charge("key:a", 0.3)
    assert admission.wait_s("key:a") == 0  # within the burst
    admission.charge("key:a", 0.4)  # a slow call is charged whole: 0.2 s owed
    assert admission.wait_s("key:a") == pytest.approx(0.2 / SHARE)
    assert admission.wait_s("key:b") == 0  # another caller owes nothing
    clock.now += 2.0  # repays 2 s x 5 % = 0.1 s
    assert admission.wait_s("key:a") == pytest.approx(0.1 / SHARE)
    clock.now += 100.0
    assert admission.wait_s("key:a") == 0


def test_one_long_call_is_charged_at_most_a_maximal_wait(admission: Admission) -> None:
    admission.charge("key:a", 3600.0)
    assert admission.wait_s("key:a") == 0  # the burst pays for it: held after, never refused
    admission.charge("key:a", 3600.0)
    assert admission.wait_s("key:a") == pytest.approx(admission.max_hold_s)


@pytest.mark.anyio
async def test_a_caller_is_held_or_refused_only_while_others_run(admission: Admission) -> None:
    for _ in range(3):
        admission.charge("key:a", 3600.0)  # owes two maximal calls: 20 s to wait
    async with admission.admitted("key:a"):  # alone: not held
        pass
    async with admission.admitted("key:b"):
        with pytest.raises(RateLimited) as refused:
            async with admission.admitted("key:a"):
                pytest.fail("a caller owing more than the longest hold ran")
    assert refused.value.code is ErrorCode.RATE_LIMITED
    assert refused.value.detail["retry_after_s"] >= 10


@pytest.mark.anyio
async def test_local_callers_and_a_zero_share_are_never_held(clock: Clock) -> None:
    off = Admission(0.0, SLOW_S, clock=clock)
    on = Admission(SHARE, SLOW_S, clock=clock)
    for _ in range(5):
        off.charge("key:a", 3600.0)
        on.charge("local", 3600.0)
    async with (
        off.admitted("key:b"),
        off.admitted("key:a"),
        on.admitted("key:b"),
        on.admitted("local"),
    ):
        pass


def _enter(admission: Admission, caller: str, stack: contextlib.AsyncExitStack) -> Any:
    return stack.enter_async_context(admission.admitted(caller))


@pytest.mark.anyio
async def test_a_call_is_charged_its_own_cost_not_the_wait_others_caused(clock: Clock) -> None:
    """Two cores; a hostile caller's 30 calls run beside one victim call for 3 s: the
    victim's call counts 3 s x 2/31, under the threshold; each hostile call 3 s x 30/31."""
    admission = Admission(SHARE, 0.25, max_hold_s=10.0, cores=2, clock=clock)
    async with contextlib.AsyncExitStack() as hostile:
        for _ in range(30):
            await _enter(admission, "key:hostile", hostile)
        async with admission.admitted("key:victim"):
            clock.now += 3.0
            victim_meter = admission.counted("key:victim")
        assert victim_meter == pytest.approx(3.0 * 2 / 31)
        assert admission.wait_s("key:victim") == 0  # 0.19 s: not a slow call
        hostile_meter = admission.counted("key:hostile")
    assert hostile_meter == pytest.approx(3.0 * 30 / 31)
    # each of the 30 calls was charged (capped at a burst): far past its share
    assert admission.wait_s("key:hostile") == pytest.approx(29 * admission.burst_s / SHARE)


@pytest.mark.anyio
async def test_padding_a_slow_call_with_idle_ones_raises_its_own_rate(clock: Clock) -> None:
    """A caller cannot dilute its slow call's cost with calls of its own: alone, or with 100
    idle calls beside it, its call counts its whole wall time."""
    admission = Admission(SHARE, 0.25, max_hold_s=10.0, cores=2, clock=clock)
    assert admission.rate(1, 1) == 1.0
    assert admission.rate(101, 101) == 1.0  # all its own: the caller's doing
    assert admission.rate(1, 31) == pytest.approx(2 / 31)  # 30 others: their doing
    assert admission.rate(10, 40) == pytest.approx(10 / 40)
    async with contextlib.AsyncExitStack() as pads:
        for _ in range(100):
            await _enter(admission, "key:a", pads)
        for _ in range(2):  # the first spends the burst, the second is owed
            async with admission.admitted("key:a"):
                clock.now += 1.0
        assert admission.wait_s("key:a") > 0  # charged: 1 s of its own, past 0.25


@pytest.mark.anyio
async def test_a_call_that_kept_its_backend_busy_is_charged_that_cpu(clock: Clock) -> None:
    """Beside ten other calls, a 1.3 s call counts 2/11 of its wall time (0.24 s, under the
    threshold); but its backend spent 1.2 s of CPU on it, the call's own cost: charged."""
    admission = Admission(SHARE, 0.25, max_hold_s=10.0, cores=2, clock=clock)
    async with contextlib.AsyncExitStack() as others:
        for _ in range(10):
            await _enter(admission, "key:normal", others)
        async with admission.admitted("key:light", lambda: 0.01):
            clock.now += 1.3
        for _ in range(2):  # the first spends the burst, the second is owed
            async with admission.admitted("key:busy", lambda: 1.2):
                clock.now += 1.3
    assert admission.wait_s("key:light") == 0  # neither its share of the time nor CPU
    assert admission.wait_s("key:busy") > 0


@pytest.mark.anyio
async def test_a_call_cut_by_its_own_budget_is_charged_its_wall_time(clock: Clock) -> None:
    """Beside ten other calls a regex cut at its budget after 1.2 s counts 2/11 of it and its
    backend, given half a core, 0.5 s of CPU: both under the threshold. Cut, not finished,
    it would have run at least that long alone: charged. A busy pool's TIMEOUT (a wait
    others cause) and a page that reports a cut regex without raising follow the same rule."""
    admission = Admission(SHARE, 0.6, max_hold_s=10.0, cores=2, clock=clock)

    async def call(caller: str, error: Exception | None, ran_out: bool = False) -> None:
        with contextlib.suppress(PgragError):
            async with admission.admitted(caller, lambda: 0.5, lambda: ran_out):
                clock.now += 1.2
                if error is not None:
                    raise error

    async with contextlib.AsyncExitStack() as others:
        for _ in range(10):
            await _enter(admission, "key:normal", others)
        for _ in range(2):  # the first spends the burst, the second is owed
            await call("key:regex", BudgetExceeded("the regular expression took longer"))
            await call("key:page", None, ran_out=True)
            await call("key:pool", PgragError("the server is busy", code=ErrorCode.TIMEOUT))
            await call("key:plain", None)
    assert admission.wait_s("key:regex") > 0
    assert admission.wait_s("key:page") > 0
    assert admission.wait_s("key:pool") == 0
    assert admission.wait_s("key:plain") == 0


@pytest.mark.anyio
async def test_while_others_run_a_caller_runs_at_most_one_call_per_core(clock: Clock) -> None:
    """A charge is known only when a call ends: one key's 30 parallel calls beside another
    caller start two at a time on two cores, the rest queue; alone, they all start."""
    admission = Admission(SHARE, 0.25, max_hold_s=10.0, cores=2, clock=clock)
    started: list[int] = []

    async def call(release: asyncio.Event) -> None:
        async with admission.admitted("key:hostile"):
            started.append(admission.running["key:hostile"])
            await release.wait()

    async with admission.admitted("key:victim"):
        release = asyncio.Event()
        calls = [asyncio.create_task(call(release)) for _ in range(30)]
        await asyncio.sleep(0.05)
        assert len(started) == 2  # two cores: two running, 28 queued
        release.set()
        await asyncio.sleep(0.05)
        assert max(started) == 2
    await asyncio.gather(*calls)
    assert len(started) == 30  # every queued call ran (the victim ended meanwhile)
    lone = asyncio.Event()
    alone = [asyncio.create_task(call(lone)) for _ in range(30)]
    await asyncio.sleep(0.05)
    assert admission.running["key:hostile"] == 30  # a lone caller is never queued
    lone.set()
    await asyncio.gather(*alone)


@pytest.mark.anyio
async def test_a_call_queued_past_the_longest_hold_is_refused(clock: Clock) -> None:
    admission = Admission(SHARE, 0.25, max_hold_s=0.2, cores=1, clock=clock)
    async with admission.admitted("key:victim"), admission.admitted("key:hostile"):
        queued = asyncio.create_task(_enter_and_leave(admission, "key:hostile"))
        await asyncio.sleep(0.05)
        assert not queued.done()
        clock.now += 0.3  # past the hold: its next look (within 0.2 s) refuses it
        with pytest.raises(RateLimited):
            await queued


async def _enter_and_leave(admission: Admission, caller: str) -> None:
    async with admission.admitted(caller):
        pass


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- a real server, two keys --------------------------------------------------------------

NORMAL, HOSTILE = "normal-key", "hostile-key"
HOSTILE_REGEX = "(.|..)+#|e"  # backtracks at every start in text without '#'
REGEX_TIMEOUT_MS = 2000  # every hostile call runs this long, then ends TIMEOUT
DOCUMENTS = 200  # ~2.4 MB: the hostile pattern needs seconds more than the budget
WORDS = "the contract renews every year unless either party sends notice before the term ends"


@pytest.fixture(scope="module")
def two_keys(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("admission") / "notes"
    folder.mkdir()
    rng = random.Random(3)
    words = WORDS.split()
    for i in range(DOCUMENTS):
        text = ". ".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(180))
        (folder / f"note_{i:03d}.txt").write_text(text + ".", encoding="utf-8")
    dsn = create_database(server_dsn)
    ingest = pgrag_cmd("--database-url", dsn, "--embedding-model", HASH_MODEL, "ingest", "-q")
    done = subprocess.run([*ingest, str(folder)], capture_output=True, timeout=300, env=child_env())
    assert done.returncode == 0, done.stderr
    env = {
        "PGRAG_API_KEYS": f"{NORMAL},{HOSTILE}",
        "PGRAG_CALLER_SLOW_SHARE": str(SHARE),  # one maximal call: 10 s x 5 % = 0.5 s
        "PGRAG_SLOW_CALL_MS": str(int(SLOW_S * 1000)),
        "PGRAG_REGEX_TIMEOUT_MS": str(REGEX_TIMEOUT_MS),
    }
    try:
        with http_server(dsn, "--embedding-model", HASH_MODEL, env=env) as server:
            yield server
    finally:
        drop_database(server_dsn, dsn)


def _rest(server: HttpServer, key: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        base_url=server.base,
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx2.Timeout(60),
    )


async def _hostile_search(rest: httpx2.AsyncClient) -> httpx2.Response:
    return await rest.get("/api/search", params={"q": HOSTILE_REGEX, "mode": "regex"})


async def _searching(rest: httpx2.AsyncClient, stop: asyncio.Event) -> list[str]:
    """Slow searches back to back until `stop`: the other caller's calls keep running."""
    outcomes = []
    while not stop.is_set():
        r = await _hostile_search(rest)
        outcomes.append("ok" if r.status_code == 200 else r.json()["errorCode"])
    return outcomes


@pytest.mark.anyio
async def test_one_keys_slow_calls_get_it_refused_while_another_key_answers(
    two_keys: HttpServer,
) -> None:
    async with _rest(two_keys, NORMAL) as normal, _rest(two_keys, HOSTILE) as hostile:
        first = await asyncio.gather(*(_hostile_search(hostile) for _ in range(3)))
        assert {r.status_code for r in first} <= {200, 504}, [r.text for r in first]
        # three maximal charges against a burst of one: 20 s owed, past the 10 s hold
        stop = asyncio.Event()
        running = [asyncio.create_task(_searching(normal, stop)) for _ in range(2)]
        await asyncio.sleep(0.5)
        refused = await hostile.get("/api/documents")
        assert refused.status_code == 429, refused.text
        assert refused.json()["errorCode"] == "RATE_LIMITED"
        assert int(refused.headers["Retry-After"]) >= 10
        headers = {"Authorization": f"Bearer {HOSTILE}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as hc,
            Client(streamable_http_client(two_keys.mcp_url, http_client=hc)) as client,
        ):
            result = await client.call_tool("list_documents", {})
        body = result.structured_content or {}
        assert result.is_error and body["error"]["code"] == "RATE_LIMITED", body
        listing = await normal.get("/api/documents")  # the other key is not held
        assert listing.status_code == 200, listing.text
        stop.set()
        outcomes = [o for done in await asyncio.gather(*running) for o in done]
        assert set(outcomes) <= {"ok", "TIMEOUT"}, outcomes
        # alone on the server, the owing key is served: holding only ever protects others
        alone = await hostile.get("/api/documents")
        assert alone.status_code == 200, alone.text
        metrics = (await normal.get("/metrics")).text
    assert 'pgrag_calls_held_total{outcome="refused"}' in metrics
