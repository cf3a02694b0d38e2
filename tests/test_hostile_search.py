"""No search can freeze the server: a query of hundreds of distinct words and a backtracking
regex, looping over MCP and REST with a collection-limited key, leave `/healthz` answering
within a second; and whatever the query's shape, the search's time limit covers the whole
call, snippets included."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pgrag.db.database import open_database
from pgrag.deadline import within
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.errors import as_pgrag_error
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.engine import SearchService
from pgrag.search.keywords import REGEX_BUDGET_S
from pgrag.search.models import SearchData, SearchRequest
from pgrag.settings import load_settings
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import HASH_MODEL, HttpServer, http_server

T = TypeVar("T")

COLLECTION = "prose"
KEY = "prose-reader"
DOCUMENTS = 60
HEALTH_POLLS = 10
HEALTH_BOUND_S = 1.0  # the responsiveness the issue asks for, not a benchmark
HOSTILE_REGEX = "(.|..)+#|e"  # backtracks at every start in text without '#'

_ONSETS = ("b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "br", "st", "pl")
_RIMES = ("a", "e", "i", "o", "u", "ar", "en", "il", "on", "us", "er", "al")


def vocabulary(n: int, seed: int = 7) -> list[str]:
    """`n` distinct pronounceable words of 4-6 letters (none a stop word)."""
    rng = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < n:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_RIMES) for _ in range(2))
        if 4 <= len(w) <= 6:
            words.setdefault(w, None)
    return list(words)


VOCAB = vocabulary(600)
HOSTILE_WORDS = " ".join(VOCAB[:570])  # ~570 distinct words, under the 4,000-character cap


def prose(rng: random.Random, chars: int) -> str:
    """Paragraphs of sentences in the vocabulary: every query word occurs everywhere."""
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(6, 14)))
        out.append(sentence.capitalize() + ".")
        size += len(out[-1]) + 1
        if rng.random() < 0.2:
            out.append("\n\n")
    return " ".join(out)


async def ingest_prose(dsn: str, root: Path) -> None:
    rng = random.Random(11)
    for i in range(DOCUMENTS):
        (root / f"note_{i:02d}.txt").write_text(prose(rng, 3000), encoding="utf-8")
    async with open_database(load_settings(), dsn=dsn) as db:
        await Ingestor(db.pool, HashEmbedder(HASH_MODEL), collection=COLLECTION).run([root])


@pytest.fixture(scope="module")
def prose_dsn(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    dsn = create_database(server_dsn)
    root = tmp_path_factory.mktemp("prose")
    asyncio.run(ingest_prose(dsn, root))
    yield dsn
    drop_database(server_dsn, dsn)


@pytest.fixture(scope="module")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("prose-log") / "serve.log"


@pytest.fixture(scope="module")
def prose_http(prose_dsn: str, server_log: Path) -> Iterator[HttpServer]:
    flags = ("--embedding-model", HASH_MODEL, "--api-keys", f"{KEY}={COLLECTION}")
    with http_server(prose_dsn, *flags, log_path=server_log) as server:
        yield server


HOSTILE_CALLS: list[dict[str, Any]] = [
    {"query": HOSTILE_WORDS, "limit": 50},
    {"query": HOSTILE_REGEX, "mode": "regex", "limit": 50},
]


def _client(base: str | None = None) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Bearer {KEY}"}
    timeout = httpx2.Timeout(30, read=120)
    if base is None:
        return httpx2.AsyncClient(headers=headers, timeout=timeout)
    return httpx2.AsyncClient(base_url=base, headers=headers, timeout=timeout)


async def mcp_loop(server: HttpServer, args: dict[str, Any], outcomes: list[str]) -> None:
    async with (
        _client() as hc,
        Client(streamable_http_client(server.mcp_url, http_client=hc), cache=None) as client,
    ):
        while True:
            result = await client.call_tool("search", args)
            body = result.structured_content or {}
            outcomes.append("ok" if body.get("ok") else body.get("error", {}).get("code", "?"))


async def rest_loop(server: HttpServer, args: dict[str, Any], outcomes: list[str]) -> None:
    params = {"q": args["query"], "mode": args.get("mode", "hybrid"), "limit": args["limit"]}
    async with _client(server.base) as rest:
        while True:
            r = await rest.get("/api/search", params=params)
            outcomes.append("ok" if r.status_code == 200 else r.json()["errorCode"])


def healthz_seconds(base: str) -> float:
    """How long one /healthz took (the bound plus a second at most: a frozen server fails)."""
    t = time.perf_counter()
    with urllib.request.urlopen(base + "/healthz", timeout=HEALTH_BOUND_S + 1) as r:
        assert r.status == 200
    return time.perf_counter() - t


@contextlib.asynccontextmanager
async def hostile_clients(server: HttpServer, outcomes: list[str]) -> AsyncIterator[None]:
    loops = [
        loop(server, args, outcomes) for loop in (mcp_loop, rest_loop) for args in HOSTILE_CALLS
    ]
    tasks = [asyncio.create_task(c) for c in loops]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest.mark.anyio
async def test_healthz_answers_within_a_second_while_hostile_searches_loop(
    prose_http: HttpServer, server_log: Path
) -> None:
    outcomes: list[str] = []
    async with hostile_clients(prose_http, outcomes):
        await asyncio.sleep(1.0)  # the hostile work is under way
        waits = []
        for _ in range(HEALTH_POLLS):
            try:
                waits.append(await asyncio.to_thread(healthz_seconds, prose_http.base))
            except OSError:
                waits.append(float("inf"))
            await asyncio.sleep(0.2)
    assert max(waits) < HEALTH_BOUND_S, f"/healthz waits {[round(w, 2) for w in waits]}"
    assert outcomes, "no hostile search ended while /healthz was polled"
    assert set(outcomes) <= {"ok", "TIMEOUT"}, outcomes
    log = server_log.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]


# -- the time limit covers the whole call, whatever the query ---------------------------------

LIMIT_S = 0.5  # a short limit, so that each example stays fast
MARGIN_S = 1.0  # cancelling the SQL and answering, on a loaded 2-core machine
_CJK_CHARS = st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF)
_REGEX_PIECES = ("(.|..)+", "(a*)*", ".*", "\\b", "[a-z]+", "(?:", ")", "|", "#", "e", "\\w+")


def _shapes() -> st.SearchStrategy[tuple[str, str]]:
    """(query, mode) of many kinds: many words, long words, CJK runs, regex
    metacharacters, repeated terms."""
    words = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=600).map(" ".join)
    long_words = st.lists(
        st.integers(50, 1500).map(lambda n: (VOCAB[n % len(VOCAB)] * n)[:n]), min_size=1, max_size=4
    ).map(" ".join)
    cjk = st.lists(st.text(_CJK_CHARS, min_size=1, max_size=400), min_size=1, max_size=8).map(
        " ".join
    )
    repeated = st.tuples(st.sampled_from(VOCAB), st.integers(1, 500)).map(
        lambda t: " ".join([t[0]] * t[1])
    )
    metachars = st.lists(st.sampled_from(_REGEX_PIECES), min_size=1, max_size=60).map("".join)
    text = st.one_of(words, long_words, cjk, repeated, metachars).map(lambda q: q[:4000])
    modes = st.sampled_from(["hybrid", "keyword", "semantic", "regex"])
    return st.tuples(text, modes).filter(lambda t: t[0].strip() != "")


class Searcher:
    """The search service on a loop of its own thread, so hypothesis can drive it."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._db = open_database(load_settings(), dsn=dsn)
        db = self._run(self._db.__aenter__())
        # the SQL side of regex mode well clear of the hostile pattern's ~0.25 s here, so
        # that highlighting's own budget is what these tests reach
        self.service = SearchService(db.pool, HashEmbedder(HASH_MODEL), regex_timeout_ms=3000)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def search(self, req: SearchRequest) -> SearchData:
        """One search without a time limit, as the CLI runs it."""
        return self._run(self.service.search(req, collection_scope=[COLLECTION])).data

    def timed(self, req: SearchRequest, limit: float) -> tuple[str, float]:
        """(outcome, seconds) of one search under `limit`, as the transports run it."""

        async def one() -> tuple[str, float]:
            started = time.perf_counter()
            try:
                await within(self.service.search(req, collection_scope=[COLLECTION]), limit)
                outcome = "ok"
            except Exception as exc:
                outcome = str(as_pgrag_error(exc, "test").code)
            return outcome, time.perf_counter() - started

        return self._run(one())

    def close(self) -> None:
        self._run(self._db.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def searcher(prose_dsn: str) -> Iterator[Searcher]:
    s = Searcher(prose_dsn)
    yield s
    s.close()


@given(
    shape=_shapes(),
    limit=st.integers(1, 50),
    context_chars=st.sampled_from([0, 400, 4000]),
    merge=st.booleans(),
    content_mode=st.sampled_from(["smart_extract", "full"]),
)
@example(
    shape=(HOSTILE_WORDS, "hybrid"),
    limit=50,
    context_chars=4000,
    merge=False,
    content_mode="smart_extract",
)
@example(
    shape=(HOSTILE_REGEX, "regex"),
    limit=50,
    context_chars=4000,
    merge=True,
    content_mode="smart_extract",
)
def test_the_time_limit_covers_the_whole_search_whatever_the_query(
    searcher: Searcher,
    shape: tuple[str, str],
    limit: int,
    context_chars: int,
    merge: bool,
    content_mode: str,
) -> None:
    query, mode = shape
    req = SearchRequest(
        query=query,
        mode=mode,
        limit=limit,
        context_chars=context_chars,
        merge_overlapping=merge,
        content_mode=content_mode,
    )
    outcome, seconds = searcher.timed(req, LIMIT_S)
    assert outcome in ("ok", "TIMEOUT", "INVALID_ARGUMENT"), (outcome, query[:80])
    assert seconds < LIMIT_S + MARGIN_S, (outcome, round(seconds, 2), mode, query[:80])


def test_regex_highlighting_stops_at_its_budget_and_says_so(searcher: Searcher) -> None:
    """Without a call limit (the CLI) a backtracking pattern still ends: highlighting shares
    REGEX_BUDGET_S over all hits, then the rest come without highlights, `degraded` says
    `snippets`; a plain pattern is highlighted in every hit."""
    started = time.perf_counter()
    data = searcher.search(SearchRequest(query=HOSTILE_REGEX, mode="regex", limit=50))
    seconds = time.perf_counter() - started
    assert data.results and "snippets" in data.degraded
    assert seconds < REGEX_BUDGET_S + 3 * MARGIN_S, seconds
    word = VOCAB[0]
    plain = searcher.search(SearchRequest(query=word, mode="regex", limit=5))
    assert plain.results and plain.degraded == []
    assert all(word in s.keywords_matched for h in plain.results for s in h.snippets)
