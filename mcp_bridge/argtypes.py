"""fleet/'s declared argument types (fleet/ops/catalog.py: `Annotated` with an `Arg`) as the pydantic types a tool
signature takes: each `Arg` becomes a `Field` with the same bounds and description (its refusal wording is the
preview's, not published), each record (a TypedDict) a model that refuses unknown keys. The published inputSchema is what a hand-written signature gave
(tests/test_mcp_golden.py holds it byte for byte)."""

from __future__ import annotations

import functools
import types
from typing import Annotated, Any, NotRequired, Union, get_args, get_origin, get_type_hints, is_typeddict

from pydantic import BaseModel, ConfigDict, Field, create_model

from fleet.ops.catalog import Arg

BOUNDS = ("description", "min_length", "max_length", "pattern", "ge", "le")


def field_of(arg: Arg, **extra: Any) -> Any:
    """The pydantic Field of an `Arg`: only the bounds it sets."""
    return Field(**{k: getattr(arg, k) for k in BOUNDS if getattr(arg, k) is not None}, **extra)


def pydantic_type(hint: Any) -> Any:
    """`hint` with every `Arg` a Field and every TypedDict a model (in lists, unions and `Annotated` alike)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        inner, *meta = args
        arg = next((m for m in meta if isinstance(m, Arg)), None)
        published = arg is not None and any(getattr(arg, k) is not None for k in BOUNDS)
        return Annotated[pydantic_type(inner), field_of(arg)] if published else pydantic_type(inner)
    if is_typeddict(hint):
        return record_model(hint)
    if origin is list:
        return list[pydantic_type(args[0])]
    if origin in (Union, types.UnionType):
        return Union[tuple(pydantic_type(a) for a in args)]
    return hint


@functools.cache
def record_model(record: type) -> type[BaseModel]:
    """A TypedDict of arguments as a model with its name (its `$defs` entry); a NotRequired key takes its
    Arg's default_factory."""
    fields: dict[str, Any] = {}
    for name, hint in get_type_hints(record, include_extras=True).items():
        if get_origin(hint) is NotRequired:
            inner = get_args(hint)[0]
            arg = next(m for m in get_args(inner) if isinstance(m, Arg))
            fields[name] = (pydantic_type(get_args(inner)[0]), field_of(arg, default_factory=arg.default_factory))
        else:
            fields[name] = (pydantic_type(hint), ...)
    return create_model(record.__name__, __config__=ConfigDict(extra="forbid"), **fields)


def plain(value: Any) -> Any:
    """An argument as fleet/ takes it: records as dicts, lists as lists."""
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
