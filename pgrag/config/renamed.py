"""Renamed settings: the variable names are a public interface, so a renamed field keeps its
old variable as a deprecated alias (read, warned about, listed in docs/configuration.md)."""

from __future__ import annotations

from pydantic import AliasChoices

PREFIX = "PGRAG_"


def renamed_from(new: str, *old: str) -> AliasChoices:
    """The aliases of field `new`: its own variable first, then its former names (fields)."""
    return AliasChoices(*(PREFIX + name.upper() for name in (new, *old)))


def former_names(alias: object) -> list[str]:
    """The deprecated variables of a field's `validation_alias` (none when it was never renamed)."""
    if not isinstance(alias, AliasChoices):
        return []
    return [str(choice) for choice in alias.choices[1:]]
