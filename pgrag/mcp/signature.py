"""A tool's parameters derived from a request model: the MCP SDK reads a tool's input
schema from its function's signature, so a tool that takes a model's fields declares them
through the model alone (a field added to the model appears in the tool)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

F = TypeVar("F", bound=Callable[..., Any])
CTX = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context[Any, Any])


def model_parameters(model: type[BaseModel]) -> list[inspect.Parameter]:
    """One keyword parameter per field, with its type, constraints, default and description;
    a nested model is optional (None: the field's own default)."""
    params = []
    for name, f in model.model_fields.items():
        annotation: Any = f.annotation
        default: Any = inspect.Parameter.empty
        if f.default_factory is not None:
            annotation, default = annotation | None, None
        elif not f.is_required():
            default = f.default
        info = Field(description=f.description)
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=Annotated[annotation, *f.metadata, info],
            )
        )
    return params


def takes(model: type[BaseModel], *, returns: Any) -> Callable[[F], F]:
    """The tool body's parameters are `ctx` and the fields of `model` (it takes **fields)."""

    def apply(body: F) -> F:
        sig = inspect.Signature([CTX, *model_parameters(model)], return_annotation=returns)
        body.__signature__ = sig  # type: ignore[attr-defined]
        return body

    return apply


def fields_of(model: type[BaseModel], fields: dict[str, Any]) -> dict[str, Any]:
    """The tool's arguments for `model`: an omitted nested model left to its default."""
    return {k: v for k, v in fields.items() if v is not None or k not in _nested(model)}


def _nested(model: type[BaseModel]) -> set[str]:
    return {n for n, f in model.model_fields.items() if f.default_factory is not None}
