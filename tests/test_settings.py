from pathlib import Path

import pytest

from pgrag.errors import ConfigError
from pgrag.settings import LOCAL_MODEL, load_settings


def test_defaults_are_zero_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("PGRAG_DATABASE_URL", "PGRAG_EMBEDDING_MODEL", "PGRAG_TOOLSETS", "PGRAG_HOME"):
        monkeypatch.delenv(var, raising=False)
    s = load_settings()
    assert s.uses_embedded_postgres
    assert s.embedding_model == LOCAL_MODEL
    assert s.toolset_list == ["core"]
    assert s.search_max_snippets == 10
    assert s.default_content_mode == "smart_extract"
    assert s.home.name == "pgrag"


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PGRAG_DATABASE_URL", "postgresql://u@h/db")
    monkeypatch.setenv("PGRAG_HOME", str(tmp_path))
    monkeypatch.setenv("PGRAG_TOOLSETS", "core, write,graph")
    monkeypatch.setenv("PGRAG_SEARCH_MAX_SNIPPETS", "50")
    s = load_settings()
    assert not s.uses_embedded_postgres
    assert s.home == tmp_path
    assert s.toolset_list == ["core", "write", "graph"]
    assert s.search_max_snippets == 50


@pytest.mark.parametrize(
    ("var", "value", "needle"),
    [
        ("PGRAG_SEARCH_MAX_SNIPPETS", "51", "PGRAG_SEARCH_MAX_SNIPPETS"),
        ("PGRAG_SEARCH_MAX_SNIPPETS", "0", "PGRAG_SEARCH_MAX_SNIPPETS"),
        ("PGRAG_TOOLSETS", "core,bogus", "accepts core, write"),
        ("PGRAG_DEFAULT_CONTENT_MODE", "summary", "PGRAG_DEFAULT_CONTENT_MODE"),
        ("PGRAG_READ_ONLY", "maybe", "PGRAG_READ_ONLY"),
        ("PGRAG_EMBEDDING_MODEL", "nomodel", "provider/model"),
        ("PGRAG_EMBEDDING_MODEL", "local/other", "bundled local model"),
        ("PGRAG_CHUNK_TOKENS", "ten", "PGRAG_CHUNK_TOKENS"),
    ],
)
def test_bad_values_fail_with_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, needle: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(var)
    assert needle in message


def test_overlap_must_be_below_chunk_size() -> None:
    with pytest.raises(ConfigError, match="chunk_overlap"):
        load_settings(chunk_tokens=100, chunk_overlap=100)


def test_overrides_beat_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGRAG_COLLECTION", "from-env")
    assert load_settings(collection="from-flag").collection == "from-flag"
