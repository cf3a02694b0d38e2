"""One guard for every transport (pgrag/services/guard.py), on a real `pgrag serve`:
- a key's console searches are charged to that key (they used to skip admission);
- once over its share, the key is refused on every REST route, every console route, every
  MCP tool and every MCP resource read: the walk enumerates the app's routes and the
  server's tools, so a new route that skips the guard fails here;
- another key's 30 parallel slow calls never get a victim refused (a call is charged its
  own cost, not the wait others caused);
- a forged X-Forwarded-For is ignored unless PGRAG_TRUSTED_PROXIES names the peer."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import re
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import psycopg
import pytest
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from pgrag.errors import ErrorCode
from pgrag.http.app import create_app
from pgrag.services.auth_throttle import BURST, REFILL_S, AuthThrottle, TooManyFailures
from pgrag.settings import load_settings
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import HASH_MODEL, HttpServer, child_env, http_server
from tests.support.oauth import REDIRECT, Flow, bearer, json_server

pytest_plugins = ("tests.support.oauth_fixtures",)


NORMAL, HOSTILE, VICTIM, SWARM = "normal-key", "hostile-key", "victim-key", "swarm-key"
WALKER = "walker-key"
KEYS = (NORMAL, HOSTILE, VICTIM, SWARM, WALKER)
TOOLSETS = "core,write,graph,chart,web"
REGEX = "(.|..)+#|e"  # backtracks at every start in text without '#'
SETTINGS = {
    "PGRAG_API_KEYS": ",".join(KEYS),
    "PGRAG_CALLER_SLOW_SHARE": "0.05",  # one maximal call: 10 s x 5 % = 0.5 s
    # a slow call: past 2 s of its own; the hostile regex runs 3 s, a victim's search
    # ~0.2 s alone and seconds beside 30 hostile regex searches (a host shared with other
    # work must not make a lone call look slow)
    "PGRAG_SLOW_CALL_MS": "2000",
    "PGRAG_REGEX_TIMEOUT_MS": "3000",
    "PGRAG_TOOLSETS": TOOLSETS,
    "PGRAG_READ_ONLY": "false",
}
WORDS = "the contract renews every year unless either party sends notice before the term ends"

# Routes that are not guarded calls, and why: probes and metrics do no work worth a share;
# the MCP transports guard each tool call and resource read inside; the OAuth endpoints
# are the authorization server's (bounded there); the rest are static.
UNGUARDED = {
    "/healthz": "liveness",
    "/readyz": "one SELECT 1",
    "/metrics": "this process's counters",
    "/openapi.json": "static",
    "/docs": "static",
    "/docs/oauth2-redirect": "static",
    "/redoc": "static",
    "/console/static": "static files",
    "/console/lang": "a cookie and a redirect: the language switch, no database",
    "/mcp": "MCP: each tool call and resource read is guarded",
    "/sse": "MCP: each tool call and resource read is guarded",
    "/messages": "MCP: each tool call and resource read is guarded",
    "/authorize": "OAuth authorization server",
    "/token": "OAuth authorization server",
    "/register": "OAuth authorization server",
    "/revoke": "OAuth authorization server",
    "/.well-known/": "OAuth metadata",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def slow_corpus(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """~2.4 MB of text without '#': the backtracking regex needs its whole budget."""
    folder = tmp_path_factory.mktemp("guard") / "notes"
    folder.mkdir()
    rng = random.Random(5)
    words = WORDS.split()
    for i in range(200):
        text = ". ".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(180))
        (folder / f"note_{i:03d}.txt").write_text(text + ".", encoding="utf-8")
    dsn = create_database(server_dsn)
    ingest = pgrag_cmd("--database-url", dsn, "--embedding-model", HASH_MODEL, "ingest", "-q")
    done = subprocess.run([*ingest, str(folder)], capture_output=True, timeout=300, env=child_env())
    assert done.returncode == 0, done.stderr
    try:
        yield dsn
    finally:
        drop_database(server_dsn, dsn)


@pytest.fixture(scope="module")
def server(slow_corpus: str) -> Iterator[HttpServer]:
    with http_server(slow_corpus, "--embedding-model", HASH_MODEL, env=SETTINGS) as running:
        yield running


@pytest.fixture(scope="module")
def patient_server(slow_corpus: str) -> Iterator[HttpServer]:
    """A server whose calls are never held (admission off) and whose regex may run 30 s: only
    the guard's time limit ends a call."""
    env = {**SETTINGS, "PGRAG_REGEX_TIMEOUT_MS": "30000", "PGRAG_CALLER_SLOW_SHARE": "0"}
    with http_server(slow_corpus, "--embedding-model", HASH_MODEL, env=env) as running:
        yield running


def _rest(server: HttpServer, key: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        base_url=server.base,
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx2.Timeout(120),
        follow_redirects=False,
    )


async def _slow(rest: httpx2.AsyncClient) -> httpx2.Response:
    return await rest.get("/api/search", params={"q": REGEX, "mode": "regex"})


@contextlib.asynccontextmanager
async def _others_running(server: HttpServer) -> AsyncIterator[list[str]]:
    """Another key's slow searches back to back, in three staggered loops: a caller over its
    share is refused only while others' calls run. Yields the outcomes."""
    stop, outcomes = asyncio.Event(), []

    async def loop(rest: httpx2.AsyncClient, delay: float) -> None:
        await asyncio.sleep(delay)
        while not stop.is_set():
            r = await _slow(rest)
            outcomes.append("ok" if r.status_code == 200 else r.json()["errorCode"])

    async with _rest(server, NORMAL) as normal:
        tasks = [asyncio.create_task(loop(normal, 0.4 * i)) for i in range(3)]
        await asyncio.sleep(1.2)
        try:
            yield outcomes
        finally:
            stop.set()
            await asyncio.gather(*tasks)


async def _console_session(rest: httpx2.AsyncClient, key: str) -> None:
    page = await rest.get("/console/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf, page.text
    signed = await rest.post("/console/login", data={"key": key, "csrf": csrf.group(1)})
    assert signed.status_code == 303, signed.text


@contextlib.asynccontextmanager
async def _mcp(server: HttpServer, key: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
    ):
        yield client


def _code(error: MCPError) -> object:
    return (error.error.data or {}).get("code")


@pytest.mark.anyio
async def test_a_keys_console_searches_are_charged_to_it_and_every_transport_refuses_it(
    server: HttpServer,
) -> None:
    """#38 High 4 / #41 item 4: the console's searches used to skip admission."""
    document = f"pgrag://documents/{uuid.uuid4()}"
    async with _rest(server, HOSTILE) as hostile, _mcp(server, HOSTILE) as client:
        await _console_session(hostile, HOSTILE)
        params = {"q": REGEX, "mode": "regex"}
        for _ in range(2):
            pages = await asyncio.gather(
                *(hostile.get("/console/search", params=params) for _ in range(10))
            )
            assert {p.status_code for p in pages} <= {200, 504}, [p.status_code for p in pages]
        # twenty slow console searches: the key owes 9.5 s of a 5 % share, 190 s of waiting
        async with _others_running(server) as normal:
            refused = await hostile.get("/api/documents")
            page = await hostile.get("/console/documents")
            tool = await client.call_tool("list_documents", {})
            with pytest.raises(MCPError) as read:
                await client.read_resource(document)
            with pytest.raises(MCPError) as listing:
                await client.list_resources()
        assert refused.status_code == 429, refused.text  # the console's work was the key's
        assert int(refused.headers["Retry-After"]) > 120
        assert page.status_code == 429, page.text
        # a console page answers the console's error page, not REST's JSON
        assert page.headers["content-type"].startswith("text/html"), page.text
        assert '<code id="error-code">RATE_LIMITED</code>' in page.text
        assert int(page.headers["Retry-After"]) > 0
        assert (tool.structured_content or {})["error"]["code"] == "RATE_LIMITED"
        assert _code(read.value) == "RATE_LIMITED" and _code(listing.value) == "RATE_LIMITED"
        assert "RATE_LIMITED" not in normal, normal


@pytest.mark.anyio
async def test_a_console_page_past_its_time_limit_answers_the_error_page(
    patient_server: HttpServer, slow_corpus: str
) -> None:
    """#42: the guard's TIMEOUT, raised around the page, answered REST's JSON body. The
    page's search waits on a lock the test holds on the chunks, past the page's 10 s,
    however fast the machine."""
    async with _rest(patient_server, NORMAL) as browser:
        await _console_session(browser, NORMAL)
        with psycopg.connect(slow_corpus) as locker:
            locker.execute("LOCK TABLE pgrag.chunks IN ACCESS EXCLUSIVE MODE")
            page = await browser.get("/console/search", params={"q": "contract", "mode": "keyword"})
            locker.rollback()
    assert page.status_code == 504, page.text
    assert page.headers["content-type"].startswith("text/html"), page.text
    assert '<code id="error-code">TIMEOUT</code>' in page.text
    assert 'href="/console/search"' in page.text  # the console's page, its nav included


@pytest.mark.anyio
async def test_every_route_tool_and_resource_runs_as_a_guarded_call(
    server: HttpServer, slow_corpus: str
) -> None:
    """Every route of the app, every MCP tool and resource, called once: each leaves the
    audit row only the guard writes (the guard's admission, time limit, metrics and audit
    are one code path), named after the route, tool or resource. Only UNGUARDED is not."""
    routes = _app_routes(slow_corpus)
    first = _last_audit_id(slow_corpus)
    async with _rest(server, WALKER) as walker:
        await _console_session(walker, WALKER)
        walked = await _walk_http(walker, routes)
    async with _mcp(server, WALKER) as client:
        walked += await _walk_mcp(client)
    audited = set(_audited_since(slow_corpus, first))
    assert len(walked) >= 55, walked  # 28 routes and methods, 27 tools, 3 resource calls
    assert [w for w in walked if w not in audited] == []


def _last_audit_id(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT coalesce(max(id), 0) FROM pgrag.audit_log").fetchone()
    return int(row[0]) if row else 0


def _audited_since(dsn: str, first: int) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT tool FROM pgrag.audit_log WHERE id > %s", (first,)).fetchall()
    return [str(r[0]) for r in rows]


def _app_routes(dsn: str) -> list[RouteContext]:
    """The routes of the app `pgrag serve` runs with these settings."""
    settings = load_settings(
        database_url=dsn,
        embedding_model=HASH_MODEL,
        api_keys=SETTINGS["PGRAG_API_KEYS"],
        toolsets=TOOLSETS,
        read_only=False,
    )
    return list(iter_route_contexts(create_app(settings).router.routes))


def _exempt(path: str) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in UNGUARDED)


async def _walk_http(rest: httpx2.AsyncClient, routes: list[RouteContext]) -> list[str]:
    """Call every route of the app but the exempt ones; the calls, as the audit names them."""
    walked = []
    for route in routes:
        path = route.path or ""
        if _exempt(path):
            continue
        assert isinstance(route.original_route, APIRoute), f"{path}: outside FastAPI's, unguarded"
        url = re.sub(r"\{grant_id\}", "1", path)
        url = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), url)
        for method in sorted((route.methods or set()) - {"HEAD"}):
            form = {"csrf": "x"} if method == "POST" else None
            # valid arguments: a request that fails validation is refused before any work
            await rest.request(method, url, params={"q": "x"}, data=form)
            walked.append(f"{method} {path}")
    assert {p for p in UNGUARDED if not p.endswith("/")} <= {r.path for r in routes}
    return walked


def _value(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A value the SDK's validation accepts, for a required argument."""
    if "$ref" in schema:
        return _value(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return _value(schema["anyOf"][0], defs)
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _value(props[k], defs) for k in schema.get("required", [])}
    return {"string": "x", "integer": 1, "number": 1, "boolean": False, "array": []}.get(
        str(kind), "x"
    )


async def _walk_mcp(client: Client) -> list[str]:
    """Call every tool (with arguments its schema accepts) and read every resource."""
    walked = []
    for tool in (await client.list_tools()).tools:
        schema = tool.input_schema
        args = {
            k: _value(schema["properties"][k], schema.get("$defs", {}))
            for k in schema.get("required", [])
        }
        await client.call_tool(tool.name, args)
        walked.append(tool.name)
    assert len(walked) >= 25, walked
    document = f"pgrag://documents/{uuid.uuid4()}"
    for name, uri in (("document", document), ("document_content", document + "/content")):
        with pytest.raises(MCPError):
            await client.read_resource(uri)
        walked.append(f"resources/read {name}")
    await client.list_resources()
    return [*walked, "resources/list"]


@pytest.mark.anyio
async def test_a_keys_parallel_slow_calls_never_get_a_victim_refused(server: HttpServer) -> None:
    """#38 High 4: 30 parallel slow calls of one key slow every call on the server; the
    victim's calls are charged their own cost (a small part of their wall time), never
    refused, while the swarming key runs out of its share."""
    stop = asyncio.Event()
    swarm: list[int] = []

    async def swarming(rest: httpx2.AsyncClient) -> None:
        while not stop.is_set():
            r = await _slow(rest)
            swarm.append(r.status_code)
            if r.status_code == 429:
                await asyncio.sleep(0.5)

    victim: list[tuple[int, str]] = []
    async with _rest(server, SWARM) as attacker, _rest(server, VICTIM) as rest:
        tasks = [asyncio.create_task(swarming(attacker)) for _ in range(30)]
        await asyncio.sleep(1.0)
        for i in range(12):  # three searches at a time, as an agent's parallel tool calls
            words = [f"contract notice party {i} {j}" for j in range(3)]
            answers = await asyncio.gather(
                *(
                    rest.get("/api/search", params={"q": w, "mode": "hybrid", "limit": "10"})
                    for w in words
                )
            )
            victim += [
                (r.status_code, r.text[:200] if r.status_code != 200 else "") for r in answers
            ]
        stop.set()
        await asyncio.gather(*tasks)
    assert [v for v in victim if v[0] != 200] == []
    assert 429 in swarm, sorted(set(swarm))  # the swarming key ran out of its share


def _audited_callers(dsn: str, route: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT caller FROM pgrag.audit_log WHERE tool = %s ORDER BY id", (route,)
        ).fetchall()
    return [str(r[0]) for r in rows]


@pytest.mark.parametrize("trusted", [None, "127.0.0.1"])
def test_x_forwarded_for_names_the_caller_only_from_a_trusted_proxy(
    server_dsn: str, template_dsn: str, trusted: str | None
) -> None:
    dsn = create_database(server_dsn)
    env = {"PGRAG_TRUSTED_PROXIES": trusted} if trusted else {}
    forged = {"X-Forwarded-For": "198.51.100.7"}
    try:
        with http_server(dsn, "--embedding-model", HASH_MODEL, env=env) as anonymous:
            r = httpx2.get(anonymous.base + "/api/documents", headers=forged, timeout=60)
            assert r.status_code == 200, r.text
        callers = _audited_callers(dsn, "GET /api/documents")
    finally:
        drop_database(server_dsn, dsn)
    expected = "address:198.51.100.7" if trusted else "address:127.0.0.1"
    assert callers == [expected]


def test_the_failed_guess_budget_refills_and_forgets_nothing_early() -> None:
    clock = Clock()
    throttle = AuthThrottle(clock)
    for _ in range(BURST):
        throttle.check("203.0.113.9")
        throttle.failed("203.0.113.9")
    with pytest.raises(TooManyFailures) as refused:
        throttle.check("203.0.113.9")
    assert refused.value.code is ErrorCode.RATE_LIMITED
    assert refused.value.detail["retry_after_s"] == REFILL_S
    throttle.check("198.51.100.1")  # another address has its own budget
    clock.now += REFILL_S
    throttle.check("203.0.113.9")  # one more guess, a refill later


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


GUESSED = "the-right-key"


def test_key_guesses_and_sign_ins_are_throttled_per_address(
    server_dsn: str, template_dsn: str
) -> None:
    """#38 Low 16: 532 guesses a second became 20, then one every 6 s; past the budget even
    the right key is refused before it is compared (the answer tells nothing), and the
    console's sign-in shares the budget. Stored names are keyed hashes."""
    dsn = create_database(server_dsn)
    try:
        with (
            http_server(dsn, "--embedding-model", HASH_MODEL, env={"PGRAG_API_KEYS": GUESSED}) as s,
            httpx2.Client(base_url=s.base, timeout=60) as http,
        ):
            right = {"Authorization": f"Bearer {GUESSED}"}
            assert http.get("/api/documents", headers=right).status_code == 200
            answers = [
                http.get("/api/documents", headers={"Authorization": f"Bearer guess-{i}"})
                for i in range(BURST + 1)
            ]
            assert [r.status_code for r in answers] == [401] * BURST + [429]
            assert answers[-1].json()["errorCode"] == "RATE_LIMITED"
            assert int(answers[-1].headers["Retry-After"]) >= 1
            assert http.get("/api/documents", headers=right).status_code == 429
            page = http.get("/console/login")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf, page.text
            form = {"key": GUESSED, "csrf": csrf.group(1)}
            assert http.post("/console/login", data=form).status_code == 429
        callers = _audited_callers(dsn, "GET /api/documents")
    finally:
        drop_database(server_dsn, dsn)
    legacy = "key:" + hashlib.sha256(GUESSED.encode()).hexdigest()[:10]
    assert len(callers) == 1 and re.fullmatch(r"key:[0-9a-f]{16}", callers[0]), callers
    assert callers[0] != legacy and not callers[0].startswith(legacy)


def test_two_oauth_clients_on_one_host_are_two_callers(
    oauth_http: HttpServer, oauth_dsn: str
) -> None:
    """#38 High 4: callers were named by the first 12 characters of their client_id, so two
    metadata-document clients on one host were one account and one audit name."""
    docs: dict[str, Any] = {}
    tokens = []
    with json_server(docs) as base, httpx2.Client(timeout=30) as http:
        for name in ("first", "second"):
            client_id = f"{base}/{name}/client.json"
            docs[f"/{name}/client.json"] = {
                "client_id": client_id,
                "client_name": name,
                "redirect_uris": [REDIRECT],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            }
            tokens.append(Flow(oauth_http.base, http, client_id=client_id).tokens())
        first = _last_audit_id(oauth_dsn)
        for t in tokens:
            r = http.get(oauth_http.base + "/api/status", headers=bearer(t["access_token"]))
            assert r.status_code == 200, r.text
    with psycopg.connect(oauth_dsn) as conn:
        rows = conn.execute(
            "SELECT caller FROM pgrag.audit_log WHERE id > %s AND tool = 'GET /api/status'"
            " ORDER BY id",
            (first,),
        ).fetchall()
    callers = [str(r[0]) for r in rows]
    assert len(callers) == 2 and callers[0] != callers[1], callers
    assert all(c.startswith("oauth:") for c in callers), callers
