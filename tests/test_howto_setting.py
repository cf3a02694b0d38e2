"""docs/extending.md's "Add a setting" walk done for real: a field with its description in a
group is the whole declaration. The variable is read, the flag exists, and the rows of
docs/configuration.md and .env.example are generated from the field (pgrag/settings_table.py)."""

from __future__ import annotations

import click
import pytest
from pydantic import BaseModel, Field

from pgrag import settings_table
from pgrag.cli import app as cli_app
from pgrag.settings import GROUPS, Settings
from pgrag.settings_table import ENV_EXAMPLE, configuration_table, with_env_section


class NoteSettings(BaseModel):
    """Notes: how many a document keeps."""

    note_limit: int = Field(5, ge=1, le=100, description="notes one document keeps")


class Composed(Settings, NoteSettings):
    """Settings with the new group composed in, as `class Settings(...)` would list it."""


def test_a_new_setting_is_its_field(monkeypatch: pytest.MonkeyPatch) -> None:
    # the variable: read from the environment, validated by the field's bounds
    monkeypatch.setenv("PGRAG_NOTE_LIMIT", "9")
    assert Composed().note_limit == 9  # type: ignore[call-arg]
    monkeypatch.setenv("PGRAG_NOTE_LIMIT", "0")
    with pytest.raises(ValueError, match="note_limit"):
        Composed()  # type: ignore[call-arg]
    monkeypatch.delenv("PGRAG_NOTE_LIMIT")

    # the flag: the root command builds one per field
    monkeypatch.setattr(cli_app, "Settings", Composed)
    command = click.command()(cli_app._settings_options(lambda **_: None))
    flags = {opt for p in command.params for opt in p.opts}
    assert "--note-limit" in flags and "--embedding-model" in flags

    # its row in docs/configuration.md and its lines in .env.example
    monkeypatch.setattr(settings_table, "GROUPS", (*GROUPS, NoteSettings))
    monkeypatch.setattr(settings_table, "Settings", Composed)
    assert "| `PGRAG_NOTE_LIMIT` | `--note-limit` | `5` | notes one document keeps |" in (
        configuration_table()
    )
    env = with_env_section(ENV_EXAMPLE.read_text(encoding="utf-8"))
    assert "# --- note ---" in env
    assert "# notes one document keeps\n# PGRAG_NOTE_LIMIT=5\n" in env


def test_env_example_is_generated_from_the_groups() -> None:
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    assert with_env_section(text) == text, (
        ".env.example drifted: regenerate it with `python -m pgrag.settings_table`"
    )


def test_the_registry_table_lists_the_groups() -> None:
    page = (ENV_EXAMPLE.parent / "docs" / "extending.md").read_text(encoding="utf-8")
    row = page.split("| settings | `pgrag.settings.GROUPS` |", 1)[1].split("\n", 1)[0]
    listed = [w.strip() for w in row.strip(" |").rsplit(" | ", 1)[1].split(",")]
    assert listed == [g.__name__.removesuffix("Settings").lower() for g in GROUPS]
