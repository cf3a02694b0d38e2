"""Client ID metadata documents under the SSRF rules (pgrag/http/oauth/client_documents.py):
internal hosts are refused in every spelling before any connection is made (a real
listener counts the connections), a name with one internal address is refused, and the
connection goes to the address that was checked, the name kept in `Host`."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from pgrag.http.oauth.client_documents import DocumentFetcher, RefusedDocument
from tests.support.oauth import REDIRECT, json_server, listener

pytestmark = pytest.mark.anyio
SPELLINGS = [
    "https://localhost:{port}/c.json",
    "https://127.1:{port}/c.json",
    "https://2130706433:{port}/c.json",
    "https://0x7f000001:{port}/c.json",
    "https://0177.0.0.1:{port}/c.json",
    "https://[::1]:{port}/c.json",
    "https://[::ffff:127.0.0.1]:{port}/c.json",
    "https://[::ffff:7f00:1]:{port}/c.json",
    "https://0.0.0.0:{port}/c.json",
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("spelling", SPELLINGS)
async def test_no_spelling_of_an_internal_host_is_fetched(spelling: str) -> None:
    with listener() as (port, accepted):
        url = spelling.format(port=port)
        with pytest.raises(RefusedDocument, match="public host"):
            await DocumentFetcher(loopback_allowed=False).fetch(url)
    assert accepted == []


def resolver(answers: dict[str, list[str]]) -> Any:
    async def resolve(host: str, port: int) -> list[str]:
        return answers[host]

    return resolve


@pytest.mark.parametrize(
    "addresses",
    [["93.184.216.34", "10.0.0.8"], ["169.254.169.254"], ["100.64.0.1"], ["64:ff9b::a00:8"]],
)
async def test_a_name_with_an_internal_address_is_refused(addresses: list[str]) -> None:
    fetcher = DocumentFetcher(loopback_allowed=False, resolve=resolver({"app.test": addresses}))
    with pytest.raises(RefusedDocument, match="public host"):
        await fetcher.fetch("https://app.test/client.json")


async def test_the_connection_goes_to_the_checked_address() -> None:
    """`client.test` exists only in this resolver: the fetch reaches the address the check
    passed (a later lookup could not rebind it), asking for the name in `Host`."""
    docs: dict[str, Any] = {}
    hosts: list[str] = []
    with json_server(docs, hosts) as base:
        port = base.rsplit(":", 1)[1]
        client_id = f"http://client.test:{port}/client.json"
        docs["/client.json"] = {
            "client_id": client_id,
            "client_name": "Pinned",
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
        }
        fetcher = DocumentFetcher(
            loopback_allowed=True, resolve=resolver({"client.test": ["127.0.0.1"]})
        )
        client = await fetcher.fetch(client_id)
    assert client.client_name == "Pinned"
    assert hosts == [f"client.test:{port}"]


async def test_a_slow_document_ends_at_the_deadline() -> None:
    """The listener accepts and never answers: refused, not hung."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/c.json"
        with pytest.raises(RefusedDocument, match=r"did not arrive|could not be fetched"):
            await DocumentFetcher(loopback_allowed=True).fetch(url)
    finally:
        sock.close()
