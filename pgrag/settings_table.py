"""The README's configuration table, generated from the settings model: `python -m
pgrag.settings_table` prints it (tests/test_readme.py keeps the README in step)."""

from __future__ import annotations

from pgrag.settings import Settings


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
    """The README's configuration table, generated from the settings model."""
    lines = ["| variable | flag | default | meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        desc = (field.description or "").replace("|", "\\|")
        lines.append(f"| `PGRAG_{name.upper()}` | `{flag}` | {default_text(name)} | {desc} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(configuration_table())
