"""Build a versioned kio entity from plain values: one handler body serves every version.

kio generates one frozen dataclass per (message, version), and fields come and go between
versions (Metadata v0 has no `cluster_id`, Fetch v13 replaces `topic` by `topic_id`, ...).
Handlers therefore describe a response once, as nested mappings holding the union of fields
across versions, and `build(ResponseClass, values)` keeps the fields the target version has,
fills schema defaults for the ones left out, and converts plain values into kio's wire types
(`int` error codes to `ErrorCode`, millisecond ints to `timedelta`, epoch-ms ints to datetimes).
A field the version requires but the mapping lacks is a programming error and raises.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
)

E = TypeVar("E")

_Convert = Callable[[Any], Any] | None


def _error_code(v: Any) -> ErrorCode:
    return v if isinstance(v, ErrorCode) else ErrorCode(int(v))


def _timedelta(v: Any) -> datetime.timedelta:
    return v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=v)


def _datetime(v: Any) -> datetime.datetime | None:
    if v is None or isinstance(v, datetime.datetime):
        return v
    if v < 0:  # Kafka's "no timestamp" (-1); only nullable fields accept it
        return None
    return datetime.datetime.fromtimestamp(v / 1000, tz=datetime.UTC)


def _entity(sub: type) -> Callable[[Any], Any]:
    def convert(v: Any) -> Any:
        if v is None or isinstance(v, sub):
            return v
        return build(sub, v)

    return convert


def _entities(sub: type) -> Callable[[Any], Any]:
    def convert(v: Any) -> Any:
        if v is None:
            return None
        return tuple(x if isinstance(x, sub) else build(sub, x) for x in v)

    return convert


def _tuple(v: Any) -> Any:
    return v if v is None or isinstance(v, tuple) else tuple(v)


_BY_KAFKA_TYPE: dict[str, Callable[[Any], Any]] = {
    "error_code": _error_code,
    "timedelta_i32": _timedelta,
    "timedelta_i64": _timedelta,
    "datetime_i64": _datetime,
}


@cache
def _plan(cls: type) -> tuple[tuple[str, _Convert, bool], ...]:
    """(field name, converter, required) per field of `cls`."""
    plan = []
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        convert: _Convert
        if isinstance(kind, EntityTupleField):
            convert = _entities(kind.type_)
        elif isinstance(kind, EntityField):
            convert = _entity(kind.type_)
        elif isinstance(kind, PrimitiveTupleField):
            convert = _tuple
        else:
            convert = _BY_KAFKA_TYPE.get(f.metadata.get("kafka_type", ""))
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan.append((f.name, convert, required))
    return tuple(plan)


def build(cls: type[E], values: Mapping[str, Any]) -> E:
    """`cls(**values)` restricted to the fields `cls` has, with wire-type conversion."""
    kwargs: dict[str, Any] = {}
    for name, convert, required in _plan(cls):  # type: ignore[arg-type]
        if name in values:
            v = values[name]
            kwargs[name] = v if convert is None else convert(v)
        elif required:
            version = getattr(cls, "__version__", "?")
            raise TypeError(f"{cls.__qualname__} v{version} needs field {name!r}")
    return cls(**kwargs)


def field_names(cls: type) -> frozenset[str]:
    """The fields a versioned entity has (to branch on presence instead of version numbers)."""
    return frozenset(name for name, _, _ in _plan(cls))
