"""The Host/Origin policy's defaults (the HTTP behaviour is in tests/test_rest.py)."""

from __future__ import annotations

import pytest

from pgrag.http.host_guard import host_policy


@pytest.mark.parametrize("bind", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_a_loopback_server_answers_loopback_names_only(bind: str) -> None:
    policy = host_policy(bind, None, None)
    for host in ("127.0.0.1:8765", "localhost:8765", "localhost", "[::1]:8765"):
        assert policy.host_allowed(host), host
    for host in ("evil.example.com:8765", "localhost.evil.example.com", "127.0.0.1.nip.io", ""):
        assert not policy.host_allowed(host), host
    assert policy.origin_allowed("http://localhost:6274", "127.0.0.1:8765")
    assert not policy.origin_allowed("https://evil.example.com", "127.0.0.1:8765")
    assert not policy.origin_allowed("http://localhost.evil.example.com", "127.0.0.1:8765")


def test_a_public_bind_answers_any_host_but_only_its_own_origin() -> None:
    policy = host_policy("0.0.0.0", None, None)
    assert policy.host_allowed("rag.example.com") and policy.host_allowed("10.1.2.3:8765")
    assert not policy.host_allowed("")
    assert policy.origin_allowed("", "rag.example.com")
    assert policy.origin_allowed("https://rag.example.com", "rag.example.com")
    assert not policy.origin_allowed("https://evil.example.com", "rag.example.com")
    assert not policy.origin_allowed("http://localhost:3000", "rag.example.com")


def test_configured_lists_replace_the_defaults() -> None:
    policy = host_policy("0.0.0.0", "RAG.example.com, 10.0.0.5:*", "https://app.example.com/")
    assert policy.host_allowed("rag.example.com")
    assert not policy.host_allowed("other.example.com")
    assert policy.origin_allowed("https://APP.example.com", "rag.example.com")
    assert not policy.origin_allowed("https://app.example.com.evil.io", "rag.example.com")


@pytest.mark.parametrize(
    "host",
    [
        "localhost:evil.com",
        "localhost:8801@evil.com",
        "localhost:8801, evil.com",
        "localhost:8801 evil.com",
        "localhost:123456",
        "user@localhost:8801",
    ],
)
def test_a_loose_host_is_refused_even_by_a_public_bind(host: str) -> None:
    assert not host_policy("127.0.0.1", None, None).host_allowed(host)
    assert not host_policy("0.0.0.0", None, None).host_allowed(host)


@pytest.mark.parametrize(
    "origin",
    ["http://localhost:8801.evil.com", "http://localhost:8801@evil.com", "http://localhost:x"],
)
def test_a_loose_origin_is_refused(origin: str) -> None:
    assert not host_policy("127.0.0.1", None, None).origin_allowed(origin, "127.0.0.1:8801")
