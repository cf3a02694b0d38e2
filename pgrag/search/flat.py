"""The search request as flat named values: a REST query string, the console's form and the
CLI's options. Its fields and its filters' fields stand side by side (no name is in both),
so a field added to SearchRequest or SearchFilters reaches every transport from here."""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Mapping
from datetime import date, datetime
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
)
from pydantic.fields import FieldInfo

from pgrag.errors import InvalidArgument
from pgrag.search.models import SearchFilters, SearchRequest, iso_date_text

NESTED = "filters"
REQUEST_FIELDS: dict[str, FieldInfo] = {
    n: f for n, f in SearchRequest.model_fields.items() if n != NESTED
}
FILTER_FIELDS: dict[str, FieldInfo] = dict(SearchFilters.model_fields)
FLAT_FIELDS: dict[str, FieldInfo] = {**REQUEST_FIELDS, **FILTER_FIELDS}
QUERY_ALIAS = "q"  # the query's name in a URL (REST and the console)
assert not set(REQUEST_FIELDS) & set(FILTER_FIELDS), "a flat name must be unique"


def members(annotation: Any) -> tuple[Any, ...]:
    """The types of a union (`int | None` -> (int, NoneType)), or the type alone."""
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def listed(annotation: Any) -> Any | None:
    """The item type when a value may be a list (`str | list[str]` -> str), else None."""
    for m in members(annotation):
        if get_origin(m) is list:
            return get_args(m)[0]
    return None


def keyed(annotation: Any) -> bool:
    """A mapping field: flat, it is KEY=VALUE text, one pair or several."""
    return any(get_origin(m) is dict for m in members(annotation))


def pairs(name: str, items: str | list[str]) -> dict[str, str | int | float | bool]:
    """KEY=VALUE pairs (several per item when separated by commas) as a mapping: a whole
    number, a decimal or true/false as such, anything else as text."""
    found: dict[str, str | int | float | bool] = {}
    for item in [items] if isinstance(items, str) else items:
        for pair in filter(None, (p.strip() for p in item.split(","))):
            key, sep, raw = (x.strip() for x in pair.partition("="))
            if not sep or not key:
                raise InvalidArgument(
                    f"{name}: {pair!r} is not KEY=VALUE (e.g. customer=acme)",
                    detail={"field": name},
                )
            value: str | int | float | bool = raw
            if raw in ("true", "false"):
                value = raw == "true"
            elif re.fullmatch(r"-?\d{1,18}", raw):
                value = int(raw)
            elif re.fullmatch(r"-?\d+\.\d+", raw):
                value = float(raw)
            found[key] = value
    return found


def whole_number(value: object) -> object:
    """Flat values are text: "2" is a whole number, "2.0" is not (pydantic's lax mode would
    take it, and the OpenAPI document promises an integer)."""
    if isinstance(value, str) and not re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        raise ValueError("must be a whole number")
    return value


def flat_annotation(field: FieldInfo) -> Any:
    """What one flat value may be: a list field takes one item or several, a mapping field
    KEY=VALUE text, constraints kept, integers whole, dates ISO."""
    if keyed(field.annotation):
        return str | list[str] | None
    item = listed(field.annotation)
    # one value or several (a repeated parameter): a URL cannot tell a list of one apart
    base = item | list[item] | None if item is not None else field.annotation  # type: ignore[valid-type]
    kinds = members(field.annotation)
    whole = [BeforeValidator(whole_number)] if int in kinds else []
    dated = [BeforeValidator(iso_date_text)] if date in kinds or datetime in kinds else []
    extra = [*field.metadata, *whole, *dated]
    return Annotated[base, *extra] if extra else base


def from_flat(values: Mapping[str, Any], **fixed: Any) -> SearchRequest:
    """The request from flat values (`q` or `query`; None, "", [] and () mean not given), with
    `fixed` values over them; a bad value is INVALID_ARGUMENT naming its field."""
    given = {k: v for k, v in values.items() if v is not None and v not in ("", [], ())}
    if QUERY_ALIAS in given:
        given.setdefault("query", given.pop(QUERY_ALIAS))
    given.update(fixed)
    try:  # the flat rules first (whole numbers), then the request's own
        flat = SearchQuery.model_validate(given).model_dump(exclude_unset=True)
        for k, v in flat.items():  # one item of a list field is a list of one
            if keyed(FLAT_FIELDS[k].annotation):
                flat[k] = pairs(k, v)
            elif listed(FLAT_FIELDS[k].annotation) is not None and not isinstance(v, list):
                flat[k] = [v]
        top = {k: v for k, v in flat.items() if k in REQUEST_FIELDS}
        filters = {k: v for k, v in flat.items() if k in FILTER_FIELDS}
        return SearchRequest.model_validate({**top, NESTED: filters})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"] if p != NESTED]
        name = loc[0] if loc else "query"
        raise InvalidArgument(f"{name}: {err['msg']}", detail={"field": name}) from None


def flat_values(getlist: Callable[[str], list[str]]) -> dict[str, Any]:
    """The flat fields a query string or form holds (`getlist` of a multi-dict, such as
    Starlette's QueryParams.getlist): a list field all its values, any other its last."""
    found: dict[str, Any] = {}
    for name, field in {QUERY_ALIAS: FLAT_FIELDS["query"], **FLAT_FIELDS}.items():
        if got := [v.strip() for v in getlist(name)]:
            several = listed(field.annotation) is not None or keyed(field.annotation)
            found[name] = got if several else got[-1]
    return found


def _query_field(name: str, field: FieldInfo) -> tuple[Any, Any]:
    alias = QUERY_ALIAS if name == "query" else None
    default = field.get_default(call_default_factory=True) if name != "query" else ...
    return flat_annotation(field), Field(default, alias=alias, description=field.description)


# the REST query string: every flat field, `q` the query (FastAPI: Annotated[…, Query()])
SearchQuery: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "SearchQuery",
    __config__=ConfigDict(populate_by_name=True),
    __doc__="A search as URL parameters: the fields of the MCP `search` tool, filters flat.",
    **{n: _query_field(n, f) for n, f in FLAT_FIELDS.items()},
)
