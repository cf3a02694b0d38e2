"""OAuth 2.1 against a live `pgrag serve --transport http` (tests/support/oauth.py): the
flow over plain HTTP through the consent page, grants limited to collections, refresh
rotation, revocation, and bearer keys beside OAuth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.kb_server import HttpServer
from tests.support.oauth import (
    ADMIN_PASSWORD,
    ALPHA,
    BETA,
    KEY,
    Flow,
    bearer,
    hidden,
    oauth_server,
)

pytest_plugins = ("tests.support.oauth_fixtures",)


def collections_found(base: str, headers: dict[str, str]) -> set[str]:
    r = httpx2.get(base + "/api/search", params={"q": "lighthouse", "limit": 10}, headers=headers)
    assert r.status_code == 200, r.text
    return {Path(hit["path"]).stem for hit in r.json()["results"]}  # alpha.md, beta.md


def test_discovery_starts_from_a_401(oauth_http: HttpServer) -> None:
    r = httpx2.post(oauth_http.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401
    challenge = r.headers["www-authenticate"]
    resource_metadata = f"{oauth_http.base}/.well-known/oauth-protected-resource"
    assert f'resource_metadata="{resource_metadata}"' in challenge
    assert r.json()["error"]["data"]["code"] == "UNAUTHORIZED"  # the JSON-RPC body stays
    prm = httpx2.get(resource_metadata).json()
    assert prm["resource"] == oauth_http.base and prm["authorization_servers"] == [oauth_http.base]
    asm = httpx2.get(oauth_http.base + "/.well-known/oauth-authorization-server").json()
    assert asm["issuer"] == oauth_http.base
    assert asm["code_challenge_methods_supported"] == ["S256"]
    assert asm["registration_endpoint"] == oauth_http.base + "/register"
    sent = httpx2.get(oauth_http.base + "/api/search?q=x", headers=bearer("not-a-token"))
    assert sent.status_code == 401
    assert 'error="invalid_token"' in sent.headers["www-authenticate"]


def test_token_reads_granted_collections_refreshes_and_is_revoked(flow: Flow) -> None:
    tokens = flow.tokens(collections=(ALPHA,))
    assert tokens["scope"] == "pgrag:read"
    assert collections_found(flow.base, bearer(tokens["access_token"])) == {ALPHA}
    assert collections_found(flow.base, bearer(KEY)) == {ALPHA, BETA}  # keys still work
    renewed = flow.refresh(tokens["refresh_token"])
    assert renewed.status_code == 200, renewed.text
    fresh = renewed.json()
    assert fresh["refresh_token"] != tokens["refresh_token"]
    assert collections_found(flow.base, bearer(fresh["access_token"])) == {ALPHA}
    revoked = flow.http.post(
        flow.base + "/revoke",
        # the SDK's revocation form wants client_secret present, even empty for a public client
        data={"client_id": flow.client_id, "client_secret": "", "token": fresh["access_token"]},
    )
    assert revoked.status_code == 200
    for token in (fresh["access_token"], tokens["access_token"]):
        r = httpx2.get(flow.base + "/api/search?q=lighthouse", headers=bearer(token))
        assert r.status_code == 401
    assert flow.refresh(fresh["refresh_token"]).json()["error"] == "invalid_grant"


def test_read_token_cannot_write(flow: Flow) -> None:
    tokens = flow.tokens(access="read")
    headers = bearer(tokens["access_token"])
    r = httpx2.delete(
        flow.base + "/api/documents/00000000-0000-0000-0000-000000000000", headers=headers
    )
    assert r.status_code == 403
    assert 'error="insufficient_scope"' in r.headers["www-authenticate"]
    assert 'scope="pgrag:write"' in r.headers["www-authenticate"]
    assert r.json()["errorDetails"]["scope"] == "pgrag:write"
    writer = flow.tokens(access="write")
    r = httpx2.delete(
        flow.base + "/api/documents/00000000-0000-0000-0000-000000000000",
        headers=bearer(writer["access_token"]),
    )
    assert r.status_code == 404  # past auth: the document does not exist


async def mcp_error(server: HttpServer, token: str, tool: str, args: dict[str, Any]) -> Any:
    """The error body of an MCP tool call made with `token` (None when it succeeded)."""
    async with (
        httpx2.AsyncClient(headers=bearer(token), timeout=60) as hc,
        Client(streamable_http_client(server.mcp_url, http_client=hc)) as client,
    ):
        result = await client.call_tool(tool, args)
    return (result.structured_content or {}).get("error") if result.is_error else None


async def tools_listed(server: HttpServer, token: str) -> set[str]:
    async with (
        httpx2.AsyncClient(headers=bearer(token), timeout=60) as hc,
        Client(streamable_http_client(server.mcp_url, http_client=hc)) as client,
    ):
        return {t.name for t in (await client.list_tools()).tools}


def raw_tool_call(server: HttpServer, token: str, tool: str, args: dict[str, Any]) -> Any:
    """tools/call as one stateless Streamable HTTP POST: the HTTP answer itself."""
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args},
    }
    headers = {**bearer(token), "Accept": "application/json, text/event-stream"}
    headers["MCP-Protocol-Version"] = "2025-06-18"
    return httpx2.post(server.mcp_url, json=message, headers=headers, timeout=60)


@pytest.mark.anyio
async def test_read_token_cannot_call_write_tools(oauth_http: HttpServer, flow: Flow) -> None:
    """A read grant never sees the write tools, and calling one anyway is HTTP 403 with
    the step-up challenge (docs/oauth.md), not a 200 carrying a tool error."""
    args = {"document_id": "00000000-0000-0000-0000-000000000000"}
    reader = flow.tokens(access="read")["access_token"]
    listed = await tools_listed(oauth_http, reader)
    assert "search" in listed and "find_documents" in listed
    assert not listed & {"save_document", "update_document", "delete_document"}
    r = raw_tool_call(oauth_http, reader, "delete_document", args)
    assert r.status_code == 403, r.text
    challenge = r.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="pgrag:write"' in challenge
    assert r.json()["error"]["data"] == {
        "code": "FORBIDDEN",
        "error": "insufficient_scope",
        "scope": "pgrag:write",
    }
    writer = flow.tokens(access="write")["access_token"]
    assert "delete_document" in await tools_listed(oauth_http, writer)
    error = await mcp_error(oauth_http, writer, "delete_document", args)
    assert error["code"] == "NOT_FOUND"  # past the scope check


def test_read_token_cannot_call_write_tools_over_legacy_sse(
    oauth_http: HttpServer, flow: Flow
) -> None:
    """POST /messages is refused before any session lookup: 403 with the challenge."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "delete_document", "arguments": {"document_id": "x"}},
    }
    url = oauth_http.base + "/messages/?session_id=" + "0" * 32
    reader = flow.tokens(access="read")["access_token"]
    r = httpx2.post(url, json=message, headers=bearer(reader))
    assert r.status_code == 403
    assert 'error="insufficient_scope"' in r.headers["www-authenticate"]
    search = {**message, "params": {"name": "search", "arguments": {"query": "x"}}}
    assert httpx2.post(url, json=search, headers=bearer(reader)).status_code != 403
    writer = flow.tokens(access="write")["access_token"]
    assert httpx2.post(url, json=message, headers=bearer(writer)).status_code != 403


def test_admin_password_signs_in_and_manages_clients(flow: Flow) -> None:
    tokens = flow.tokens(key=ADMIN_PASSWORD, collections=(BETA,))
    assert collections_found(flow.base, bearer(tokens["access_token"])) == {BETA}
    assert (
        httpx2.get(flow.base + "/api/search?q=x", headers=bearer(ADMIN_PASSWORD)).status_code == 401
    )
    page = flow.http.get(flow.base + "/console/oauth/clients")
    assert page.status_code == 200 and "Test Client" in page.text
    grant = page.text.split('data-grant="')[1].split('"')[0]
    r = flow.http.post(
        f"{flow.base}/console/oauth/clients/{grant}/revoke",
        data={"csrf": hidden(page.text, "csrf")},
    )
    assert r.status_code == 303
    r = httpx2.get(flow.base + "/api/search?q=x", headers=bearer(tokens["access_token"]))
    assert r.status_code == 401


def test_tokens_survive_a_restart_and_are_bound_to_their_resource(
    oauth_http: HttpServer, flow: Flow, oauth_dsn: str
) -> None:
    """Another process on the same database: with the same public URL it accepts the token
    (state in PostgreSQL, nothing in memory); with its own URL the token is for another
    resource and refused."""
    token = flow.tokens()["access_token"]
    with oauth_server(oauth_dsn, PGRAG_PUBLIC_URL=oauth_http.base) as same:
        assert collections_found(same.base, bearer(token)) == {ALPHA, BETA}
    with oauth_server(oauth_dsn) as other:
        r = httpx2.get(other.base + "/api/search?q=x", headers=bearer(token))
        assert r.status_code == 401
