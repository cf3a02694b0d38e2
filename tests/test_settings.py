import logging
from pathlib import Path

import pytest

from pgrag import settings as settings_module
from pgrag.cli import cli
from pgrag.errors import ConfigError
from pgrag.settings import DEPRECATED, LOCAL_MODEL, Settings, load_settings


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


@pytest.mark.parametrize(
    ("old", "field", "value"),
    [
        ("PGRAG_EMBEDDING_TIMEOUT", "embedding_timeout_s", 7.5),
        ("PGRAG_OAUTH_ACCESS_TTL", "oauth_access_ttl_s", 600),
        ("PGRAG_OAUTH_REFRESH_TTL", "oauth_refresh_ttl_s", 7200),
    ],
)
def test_a_renamed_variable_still_works_and_is_named_deprecated(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    old: str,
    field: str,
    value: float,
) -> None:
    new = f"PGRAG_{field.upper()}"
    assert DEPRECATED[old] == new
    monkeypatch.delenv(new, raising=False)
    monkeypatch.setenv(old, str(value))
    monkeypatch.setattr(settings_module, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="pgrag.settings"):
        assert getattr(load_settings(), field) == value
    assert f"{old} is deprecated: set {new} instead" in caplog.text
    monkeypatch.setenv(new, str(value * 2))  # the new name wins
    assert getattr(load_settings(), field) == value * 2


def test_a_bad_value_under_a_former_name_names_that_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PGRAG_OAUTH_ACCESS_TTL_S", raising=False)
    monkeypatch.setenv("PGRAG_OAUTH_ACCESS_TTL", "5")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).startswith("PGRAG_OAUTH_ACCESS_TTL: ")


def test_a_renamed_setting_keeps_its_former_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGRAG_EMBEDDING_TIMEOUT_S", raising=False)
    monkeypatch.delenv("PGRAG_EMBEDDING_TIMEOUT", raising=False)
    for flag in ("--embedding-timeout", "--embedding-timeout-s"):
        params = cli.make_context("pgrag", [flag, "4.5", "doctor"]).params
        assert load_settings(**params).embedding_timeout_s == 4.5


def test_every_duration_names_its_unit() -> None:
    """Times end in `_s`, `_ms` or `_days` (issue 41: units in names were mixed)."""
    words = ("timeout", "ttl", "retention", "slow_call")
    timed = [name for name in Settings.model_fields if any(w in name for w in words)]
    assert timed, "the check found the time settings"
    assert [n for n in timed if not n.endswith(("_s", "_ms", "_days"))] == []
