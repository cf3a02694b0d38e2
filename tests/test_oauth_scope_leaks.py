"""The scope-leak matrix (tests/test_scope_leaks.py) with an OAuth token in the attacker's
place: the shared knowledge-base server (keys configured, so OAuth is on) grants a client
the scoped key's collection on the consent page, and every core probe - MCP tools,
resources, REST - runs with that token and must show nothing of the other collections."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest

from tests.support.kb_server import FULL_KEY, OTHER_COLLECTION, HttpServer, KnowledgeBase
from tests.support.oauth import Flow
from tests.support.scope_leaks import KB_ROLES, Probe, world_of
from tests.support.scope_leaks_checks import check_probe
from tests.support.scope_leaks_probes import PROBED_ON, PROBES, Deployment, connected, mint_tokens

pytest_plugins = ("tests.support.kb_server",)
pytestmark = pytest.mark.anyio
CORE = [p for p in PROBES if "core" in PROBED_ON[p.toolset]]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def granted_token(server: HttpServer) -> str:
    """An access token the owner granted for the scoped key's collection only."""
    with httpx2.Client(timeout=60) as http:
        flow = Flow(server.base, http)
        flow.register()
        tokens = flow.tokens(key=FULL_KEY, collections=(OTHER_COLLECTION,))
    return str(tokens["access_token"])


@pytest.fixture(scope="module")
async def oauth_core(kb: KnowledgeBase, kb_http: HttpServer) -> AsyncIterator[Deployment]:
    w = world_of(kb.dsn, KB_ROLES)
    callers = {"full": FULL_KEY, "scoped": granted_token(kb_http)}
    async with connected(kb_http, callers) as (clients, rests):
        await mint_tokens(w, clients["full"], rests["full"])
        yield Deployment("oauth_core", kb_http, w, clients, rests)


@pytest.mark.parametrize("probe", CORE, ids=[p.id for p in CORE])
async def test_probe_with_an_oauth_token(probe: Probe, oauth_core: Deployment) -> None:
    await check_probe(oauth_core, probe)
