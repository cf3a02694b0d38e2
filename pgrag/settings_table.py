"""The configuration table of docs/configuration.md, generated from the settings model:
`python -m pgrag.settings_table` rewrites it there (tests/test_readme.py keeps it in step)."""

from __future__ import annotations

import sys
from pathlib import Path

from pgrag.settings import Settings

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def default_text(name: str) -> str:
    field = Settings.model_fields[name]
    if name == "home":
        return "`~/.local/share/pgrag`"
    if name == "read_only":
        return "true for HTTP, false for the CLI"
    if name == "distributed":
        return "unset (detect)"
    default = field.default
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return str(default).lower()
    return f"`{default}`"


def configuration_table() -> str:
    """The configuration table, generated from the settings model."""
    lines = ["| variable | flag | default | meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        desc = (field.description or "").replace("|", "\\|")
        lines.append(f"| `PGRAG_{name.upper()}` | `{flag}` | {default_text(name)} | {desc} |")
    return "\n".join(lines)


def with_table(page: str) -> str:
    """The page with the text between its markers replaced by the generated table."""
    head, found, rest = page.partition(START)
    _, found_end, tail = rest.partition(END)
    if not (found and found_end):
        raise ValueError(f"{PAGE} lost its markers {START} … {END}")
    return f"{head}{START}\n{configuration_table()}\n{END}{tail}"


if __name__ == "__main__":
    if not PAGE.exists():  # an installed package: no docs beside it
        print(configuration_table())
        sys.exit(0)
    PAGE.write_text(with_table(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the configuration table to {PAGE}")
