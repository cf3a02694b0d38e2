"""What is derived from the settings groups (pgrag/config/): the configuration tables of
docs/configuration.md and the variables of .env.example. `python -m pgrag.settings_table`
rewrites both (tests/test_readme.py and tests/test_deploy.py keep them in step), so a new
setting is its field, the code that reads it and a test."""

from __future__ import annotations

import re
import sys
import textwrap
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from pgrag.config.renamed import PREFIX
from pgrag.settings import DEPRECATED, GROUPS, Settings

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration.md"
ENV_EXAMPLE = ROOT / ".env.example"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"
ENV_MARK = "# --- below: generated from pgrag/config/ by `python -m pgrag.settings_table` ---"
ASSIGNMENT = re.compile(r"^#?\s?([A-Z][A-Z0-9_]*)=(.*)$")


def group_fields() -> list[tuple[type[BaseModel], dict[str, FieldInfo]]]:
    """Each group with its own fields (a field shared by inheritance counts in the first)."""
    seen: set[str] = set()
    out = []
    for group in GROUPS:
        own = {n: f for n, f in group.model_fields.items() if n not in seen}
        seen |= own.keys()
        out.append((group, own))
    return out


def short(group: type[BaseModel]) -> str:
    """`Database` for DatabaseSettings."""
    return group.__name__.removesuffix("Settings")


def summary(group: type[BaseModel]) -> str:
    return " ".join((group.__doc__ or "").split())


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
    if isinstance(default, Enum):
        return f"`{default.value}`"
    return f"`{default}`"


def configuration_table() -> str:
    """The configuration tables, one per group, then the former names still read."""
    parts: list[str] = []
    for group, fields in group_fields():
        where = f"`{group.__name__}` in `pgrag/config/{group.__module__.rsplit('.', 1)[1]}.py`"
        parts += [f"### {short(group)}", "", f"{summary(group)} ({where})", ""]
        parts.append("| variable | flag | default | meaning |")
        parts.append("|---|---|---|---|")
        for name, field in fields.items():
            flag = "--" + name.replace("_", "-")
            desc = (field.description or "").replace("|", "\\|")
            var = f"{PREFIX}{name.upper()}"
            parts.append(f"| `{var}` | `{flag}` | {default_text(name)} | {desc} |")
        parts.append("")
    parts += ["### Former names", ""]
    parts.append("Renamed variables (and their flags) still work, with a warning at start-up:")
    parts += ["", "| former variable | now |", "|---|---|"]
    parts += [f"| `{old}` | `{new}` |" for old, new in sorted(DEPRECATED.items())]
    return "\n".join(parts)


def with_table(page: str) -> str:
    """The page with the text between its markers replaced by the generated table."""
    head, found, rest = page.partition(START)
    _, found_end, tail = rest.partition(END)
    if not (found and found_end):
        raise ValueError(f"{PAGE} lost its markers {START} … {END}")
    return f"{head}{START}\n{configuration_table()}\n{END}{tail}"


def example_value(field: FieldInfo) -> str:
    """What the commented line shows: the field's example, else its default."""
    value = field.examples[0] if field.examples else field.default
    if value is None or isinstance(value, SecretStr) or field.default_factory is not None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


def is_secret(name: str, field: FieldInfo) -> bool:
    return field.annotation in (SecretStr, SecretStr | None) or name.endswith(
        ("api_key", "api_keys", "password")
    )


def env_lines(name: str, field: FieldInfo) -> list[str]:
    desc = (field.description or "").replace("`", "")
    if is_secret(name, field):
        desc += " (a secret: keep it in .env only)"
    wrapped = textwrap.wrap(desc, width=90) if desc else []
    return [f"# {line}" for line in wrapped] + [f"# {PREFIX}{name.upper()}={example_value(field)}"]


def env_section(assigned: set[str]) -> str:
    """Every variable the hand-written head does not set or show, by group, commented out."""
    out = [ENV_MARK]
    for group, fields in group_fields():
        rest = {n: f for n, f in fields.items() if f"{PREFIX}{n.upper()}" not in assigned}
        if not rest:
            continue
        out += ["", f"# --- {short(group).lower()} ".ljust(90, "-")]
        for name, field in rest.items():
            out += env_lines(name, field)
    return "\n".join(out) + "\n"


def with_env_section(text: str) -> str:
    """.env.example with everything below its mark regenerated (the head is hand-written:
    the compose values and the variables it explains in its own words)."""
    head, found, _ = text.partition(ENV_MARK)
    if not found:
        raise ValueError(f"{ENV_EXAMPLE} lost its mark {ENV_MARK!r}")
    assigned = {m.group(1) for ln in head.splitlines() if (m := ASSIGNMENT.match(ln))}
    return head + env_section(assigned)


def main() -> None:
    if not PAGE.exists():  # an installed package: no docs beside it
        print(configuration_table())
        sys.exit(0)
    PAGE.write_text(with_table(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    ENV_EXAMPLE.write_text(with_env_section(ENV_EXAMPLE.read_text(encoding="utf-8")), "utf-8")
    print(f"wrote the configuration tables to {PAGE} and the variables to {ENV_EXAMPLE}")


if __name__ == "__main__":
    main()
