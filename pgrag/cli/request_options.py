"""`pgrag search`'s options, derived from the search request's flat fields (search/flat.py):
each field an option with its type, bounds, default and help, so a field added to
SearchRequest or SearchFilters is an option here too."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from enum import Enum
from typing import Any, Literal, TypeVar, get_args, get_origin

import annotated_types as at
import click
from pydantic.fields import FieldInfo

from pgrag.search.flat import FLAT_FIELDS, keyed, listed, members

F = TypeVar("F", bound=Callable[..., Any])
SHORT = {"mode": "-m", "limit": "-n", "collection": "-c"}
SKIP = ("query", "continuation_token")  # the argument; pages are followed, not named


def _choices(annotation: Any) -> list[str] | None:
    for m in members(annotation):
        if isinstance(m, type) and issubclass(m, Enum):
            return [str(e.value) for e in m]
        if get_origin(m) is Literal:
            return [str(v) for v in get_args(m)]
    return None


def _bounds(field: FieldInfo) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for m in field.metadata:
        if isinstance(m, at.Ge):
            found["min"] = m.ge
        elif isinstance(m, at.Le):
            found["max"] = m.le
    return found


def _type(field: FieldInfo) -> Any:
    kinds = members(field.annotation)
    if (choices := _choices(field.annotation)) is not None:
        return click.Choice(choices)
    if int in kinds:
        return click.IntRange(**_bounds(field))
    if float in kinds:
        return click.FloatRange(**_bounds(field))
    if date in kinds or datetime in kinds:
        return click.STRING  # ISO text: the request validates it
    return click.STRING


def option(name: str, field: FieldInfo, **changed: Any) -> Callable[[F], F]:
    """One field as a click option (`changed`: click settings of the CLI's own)."""
    flag = "--" + name.replace("_", "-")
    decls = [flag, *([SHORT[name]] if name in SHORT else []), name]
    kw: dict[str, Any] = {"help": field.description, "show_default": True}
    if field.annotation is bool:
        decls[0] = f"{flag}/--no-{flag[2:]}"
        kw["default"] = field.default
    elif keyed(field.annotation):
        kw.update(multiple=True, type=click.STRING, metavar="KEY=VALUE")
        kw["help"] = f"{field.description or name} (repeatable)"
    elif listed(field.annotation) is not None:
        kw.update(multiple=True, type=click.STRING)
        kw["help"] = f"{field.description or name} (repeatable)"
    else:
        default = field.get_default(call_default_factory=True)
        kw.update(
            type=_type(field), default=default.value if isinstance(default, Enum) else default
        )
    return click.option(*decls, **{**kw, **changed})


def request_options(**overrides: dict[str, Any]) -> Callable[[F], F]:
    """Every flat field of the search request as an option; `overrides` changes an
    option's click settings (e.g. a CLI's own default)."""

    def apply(command: F) -> F:
        for name, field in reversed(FLAT_FIELDS.items()):
            if name in SKIP:
                continue
            command = option(name, field, **overrides.get(name, {}))(command)
        return command

    return apply
