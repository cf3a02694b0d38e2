"""The ingestion benchmark's generated knowledge base (benchmarks/ingest/kbgen.py): the same bytes
from the same seed, every format and language asked for, each file readable by pgrag, and
the planted code in the last file walked only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks" / "ingest"))
import kbgen

from pgrag.ingest.prepare import prepare_file
from pgrag.ingest.walker import walk

DOCS = 8  # one of each format; languages cycle alongside


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> kbgen.GeneratedKb:
    return kbgen.build(DOCS, seed=7, mean_sections=2, cache=tmp_path_factory.mktemp("a"))


def test_same_seed_same_bytes_other_seed_other_text(kb: kbgen.GeneratedKb, tmp_path: Path) -> None:
    again = kbgen.build(DOCS, seed=7, mean_sections=2, cache=tmp_path / "b")
    assert [(f.rel, f.sha256) for f in again.files] == [(f.rel, f.sha256) for f in kb.files]
    for f in kb.files:
        assert (again.root / f.rel).read_bytes() == (kb.root / f.rel).read_bytes()
    other = kbgen.build(DOCS, seed=8, mean_sections=2, cache=tmp_path / "c")
    assert {f.sha256 for f in other.files}.isdisjoint({f.sha256 for f in kb.files})


def test_a_small_knowledge_base_is_the_start_of_a_bigger_one(
    kb: kbgen.GeneratedKb, tmp_path: Path
) -> None:
    bigger = kbgen.build(DOCS + 3, seed=7, mean_sections=2, cache=tmp_path)
    # the last file differs: it carries the planted code
    assert [f.sha256 for f in bigger.files[: DOCS - 1]] == [f.sha256 for f in kb.files[:-1]]


def test_every_format_and_language_is_there(kb: kbgen.GeneratedKb) -> None:
    assert {f.format for f in kb.files} == {
        "docx", "pdf", "xlsx", "pptx", "md", "txt", "csv", "html"
    }  # fmt: skip
    assert {f.lang for f in kb.files} == {"en", "zh", "mixed"}
    on_disk = sorted(p.relative_to(kb.root).as_posix() for p in kb.root.rglob("*") if p.is_file())
    assert on_disk == sorted(f.rel for f in kb.files)


def test_pgrag_reads_every_file_and_finds_the_code_only_in_the_last_one_walked(
    kb: kbgen.GeneratedKb,
) -> None:
    _, found = walk(kb.root)
    assert [f.rel for f in found] == [f.rel for f in kb.files]
    assert found[-1].rel == kb.planted_rel
    by_rel = {f.rel: f for f in kb.files}
    for f in found:
        chunks = prepare_file(f, f.sha256()[0], 350, 40).chunks
        text = "\n".join(c.draft.content for c in chunks)
        assert len(chunks) >= by_rel[f.rel].sections, f.rel
        assert (kb.code in text) == (f.rel == kb.planted_rel), f.rel
        if by_rel[f.rel].lang != "en":
            assert any("\u4e00" <= ch <= "\u9fff" for ch in text), f.rel  # Chinese survived
