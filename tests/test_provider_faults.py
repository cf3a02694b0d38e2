"""The litellm provider against a real local server that returns 429/500, drops
connections or is slow: retries with backoff, then a clear UPSTREAM_ERROR."""

from __future__ import annotations

import numpy as np
import pytest

from pgrag.embeddings.remote import LiteLLMProvider
from pgrag.errors import ErrorCode, UpstreamError
from tests.support.fake_embeddings import DIMS, Behaviour, fake_embedding_server, vector

pytestmark = pytest.mark.anyio


def _provider(base: str, **kw: object) -> LiteLLMProvider:
    return LiteLLMProvider("openai/fake-embed", api_base=base, api_key="k", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_transient_errors_are_retried_until_the_server_answers(status: int) -> None:
    b = Behaviour(fail_first=2, status=status)
    with fake_embedding_server(b) as base:
        vecs = await _provider(base, retries=3).embed_passages(["alpha", "beta"])
    assert b.calls == 3  # two failures, then the answer
    expected = np.array(vector("alpha"), dtype=np.float32)
    assert vecs.shape == (2, DIMS)
    assert np.allclose(vecs[0], expected / np.linalg.norm(expected), atol=1e-5)


async def _calls_until_failure(status: int, retries: int) -> tuple[int, UpstreamError]:
    b = Behaviour(fail_first=1000, status=status)
    with fake_embedding_server(b) as base, pytest.raises(UpstreamError) as info:
        await _provider(base, retries=retries).embed_query("alpha")
    return b.calls, info.value


async def test_persistent_failure_ends_as_upstream_error_after_the_retries() -> None:
    once, _ = await _calls_until_failure(500, retries=0)
    thrice, err = await _calls_until_failure(500, retries=2)
    # the HTTP client underneath may repeat a call itself; our retries multiply that
    assert thrice == 3 * once
    assert err.code == ErrorCode.UPSTREAM_ERROR
    assert "127.0.0.1" in err.message and "PGRAG_EMBEDDING_API_BASE" in err.message


async def test_dropped_connections_are_retried_then_reported() -> None:
    b = Behaviour(fail_first=1, status=0)
    with fake_embedding_server(b) as base:
        vec = await _provider(base, retries=2).embed_query("alpha")
    assert vec.shape == (DIMS,) and b.calls >= 2
    b2 = Behaviour(fail_first=100, status=0)
    with fake_embedding_server(b2) as base, pytest.raises(UpstreamError):
        await _provider(base, retries=1).embed_query("alpha")


async def test_a_slow_server_times_out_as_upstream_error() -> None:
    b = Behaviour(delay_s=3.0)
    with fake_embedding_server(b) as base, pytest.raises(UpstreamError) as info:
        await _provider(base, retries=0, timeout=0.5).embed_query("alpha")
    assert info.value.code == ErrorCode.UPSTREAM_ERROR


async def test_a_client_error_is_not_retried() -> None:
    once, _ = await _calls_until_failure(400, retries=0)
    with_retries, err = await _calls_until_failure(400, retries=3)
    assert with_retries == once  # a bad request will not get better by repeating it
    assert err.code == ErrorCode.UPSTREAM_ERROR
