"""Compiled response encoders: the same bytes as kio's writer, about three times faster.

kio encodes in pure Python, one small `struct.pack` call and several phantom-type checks per
field, and that is half the cost of a small request (FindCoordinator, Heartbeat) end to end.
Heartbeats are expected at tens of thousands per second, so each response class gets a writer
generated once as straight-line Python: runs of fixed-width fields become one `struct.pack`,
pieces are appended to a list and joined once. The output is byte-for-byte kio's (a property
test compares the two on random entities of every response schema).

Encoding rules mirrored from `kio.serial._serialize` / `writers`: legacy (non-flexible) strings
have an int16 length and bytes an int32 length, -1 for null; flexible ones a uvarint of length+1,
0 for null; arrays likewise (int32 count or uvarint count+1); nullable structs a marker byte
(-1 null, 1 present); flexible structs end with tagged fields, written in tag order and only
when they differ from their default; `error_code` is int16, timedeltas are milliseconds, uuids
16 bytes (null as zeros).
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
from collections.abc import Callable
from dataclasses import MISSING
from functools import cache
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from protocol.varint import encode_uvarint

Writer = Callable[[Callable[[bytes], None], Any], None]

_FORMATS = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
    "bool": "?",
    "error_code": "h",
    "timedelta_i32": "i",
    "timedelta_i64": "q",
    "datetime_i64": "q",
}
_ZERO_UUID = bytes(16)


_uvarint = encode_uvarint


def _ms(td: datetime.timedelta) -> int:
    return round(td.total_seconds() * 1000)


def _epoch_ms(dt: Any) -> int:
    return -1 if dt is None else round(dt.timestamp() * 1000)


def _uuid(u: Any) -> bytes:
    return _ZERO_UUID if u is None else u.bytes


def _compact(v: str | bytes | None) -> bytes:
    if v is None:
        return b"\x00"
    raw = v.encode() if isinstance(v, str) else v
    return _uvarint(len(raw) + 1) + raw


def _legacy_string(v: str | None) -> bytes:
    if v is None:
        return b"\xff\xff"
    raw = v.encode()
    return struct.pack(">h", len(raw)) + raw


def _legacy_bytes(v: bytes | None) -> bytes:
    if v is None:
        return b"\xff\xff\xff\xff"
    return struct.pack(">i", len(v)) + v


class _Gen:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {
            "_uvarint": _uvarint,
            "_ms": _ms,
            "_epoch_ms": _epoch_ms,
            "_uuid": _uuid,
            "_compact": _compact,
            "_legacy_string": _legacy_string,
            "_legacy_bytes": _legacy_bytes,
            "_pack_i": struct.Struct(">i").pack,
        }
        self._n = 0
        self._pending: list[tuple[str, str]] = []  # fixed-width (format char, expression)
        self._ind = 1

    def var(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def emit(self, line: str) -> None:
        self.flush()
        self.lines.append("    " * self._ind + line)

    def flush(self) -> None:
        if not self._pending:
            return
        fmt = ">" + "".join(f for f, _ in self._pending)
        name = self.var("_S")
        self.env[name] = struct.Struct(fmt).pack
        args = ", ".join(expr for _, expr in self._pending)
        self._pending = []
        self.lines.append("    " * self._ind + f"out({name}({args}))")

    def fixed(self, kafka_type: str, expr: str) -> None:
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            expr = f"_ms({expr})"
        elif kafka_type == "datetime_i64":
            expr = f"_epoch_ms({expr})"
        self._pending.append((_FORMATS[kafka_type], expr))

    def primitive(self, kafka_type: str, flexible: bool, expr: str) -> None:
        if kafka_type in _FORMATS:
            self.fixed(kafka_type, expr)
        elif kafka_type == "uuid":
            self.emit(f"out(_uuid({expr}))")
        elif flexible:
            self.emit(f"out(_compact({expr}))")
        elif kafka_type == "string":
            self.emit(f"out(_legacy_string({expr}))")
        else:  # bytes / records
            self.emit(f"out(_legacy_bytes({expr}))")

    def entity(self, t: type, flexible: bool, obj: str) -> None:
        tagged = []
        for f in dataclasses.fields(t):
            tag = get_field_tag(f)
            if tag is None:
                self.field(f, flexible, f"{obj}.{f.name}")
            else:
                tagged.append((int(tag), f))
        if flexible:
            self.tags(sorted(tagged, key=lambda tf: tf[0]), obj)

    def tags(self, tagged: list[tuple[int, dataclasses.Field[Any]]], obj: str) -> None:
        if not tagged:
            self.emit("out(b'\\x00')")
            return
        pieces = self.var("tags")
        self.emit(f"{pieces} = []")
        for tag, f in tagged:
            default = f.default if f.default is not MISSING else get_tagged_field_default(f)
            skip = self.var("_default")
            self.env[skip] = default
            value = self.var("v")
            self.emit(f"{value} = {obj}.{f.name}")
            self.emit(f"if {value} != {skip}:")
            self._ind += 1
            inner = self.var("inner")
            self.emit(f"{inner} = []")
            self.lines.append("    " * self._ind + f"_outer_{inner} = out")
            self.lines.append("    " * self._ind + f"out = {inner}.append")
            self.field(f, True, value, tagged=True)
            self.flush()
            self.lines.append("    " * self._ind + f"out = _outer_{inner}")
            data = self.var("data")
            self.emit(f"{data} = b''.join({inner})")
            self.emit(f"{pieces}.append(_uvarint({tag}) + _uvarint(len({data})) + {data})")
            self._ind -= 1
        self.emit(f"out(_uvarint(len({pieces})))")
        self.emit(f"for _piece in {pieces}:")
        self._ind += 1
        self.emit("out(_piece)")
        self._ind -= 1

    def field(self, f: dataclasses.Field[Any], flexible: bool, expr: str, *, tagged: bool = False) -> None:
        kind = classify_field(f)
        if isinstance(kind, PrimitiveField):
            self.primitive(f.metadata["kafka_type"], flexible, expr)
        elif isinstance(kind, EntityField):
            if not tagged and is_optional(f):
                value = self.var("o")
                self.emit(f"{value} = {expr}")
                self.emit(f"if {value} is None:")
                self._ind += 1
                self.emit("out(b'\\xff')")
                self._ind -= 1
                self.emit("else:")
                self._ind += 1
                self.emit("out(b'\\x01')")
                self.entity(kind.type_, flexible, value)
                self.flush()
                self._ind -= 1
            else:
                value = self.var("o")
                self.emit(f"{value} = {expr}")
                self.entity(kind.type_, flexible, value)
        else:
            self.array(f, kind, flexible, expr)

    def array(self, f: dataclasses.Field[Any], kind: Any, flexible: bool, expr: str) -> None:
        items, item = self.var("items"), self.var("item")
        self.emit(f"{items} = {expr}")
        self.emit(f"if {items} is None:")
        self._ind += 1
        self.emit("out(b'\\x00')" if flexible else "out(b'\\xff\\xff\\xff\\xff')")
        self._ind -= 1
        self.emit("else:")
        self._ind += 1
        self.emit(f"out(_uvarint(len({items}) + 1))" if flexible else f"out(_pack_i(len({items})))")
        self.emit(f"for {item} in {items}:")
        self._ind += 1
        if isinstance(kind, PrimitiveTupleField):
            self.primitive(f.metadata["kafka_type"], flexible, item)
        elif isinstance(kind, EntityTupleField):
            self.entity(kind.type_, flexible, item)
        self.flush()
        self._ind -= 2


@cache
def writer_for(entity_type: type) -> Writer:
    """`write(out, entity)` calling `out(piece)` with the encoded pieces of `entity`."""
    gen = _Gen()
    gen.entity(entity_type, bool(entity_type.__flexible__), "e")  # type: ignore[attr-defined]
    gen.flush()
    name = f"write_{entity_type.__name__}"
    src = "\n".join([f"def {name}(out, e):", *gen.lines, "    return None"])
    namespace = dict(gen.env)
    exec(compile(src, f"<response_writer {entity_type.__qualname__}>", "exec"), namespace)
    fn: Writer = namespace[name]
    return fn


def encode(entity: Any) -> bytes:
    """The encoded body of `entity` (a kio response entity)."""
    parts: list[bytes] = []
    writer: Writer = writer_for(type(entity))  # type: ignore[arg-type]
    writer(parts.append, entity)
    return b"".join(parts)
