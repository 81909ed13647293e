"""A pre-decode check that every array length in a request fits in the bytes left in the frame.

Why this exists: kio's native reader sizes each array with `Vec::with_capacity(n)` straight from
the wire before reading any element. A 5-byte compact length (up to 2**35) or an int32 legacy
length makes it allocate tens of gigabytes, and a failed allocation in Rust aborts the whole
process -- one hostile frame would take down every connection. Kafka itself bounds such lengths
by the remaining buffer (`MessageUtil` / `ByteBufferAccessor` checks), so we do the same before
handing the bytes to kio: each array element occupies at least one byte, hence a count larger
than the bytes left is malformed.

The check walks the schema without building values. Per (entity type) it is generated once as
straight-line Python (fixed-width fields become one `pos += k`), and it is skipped entirely for
schemas with no array anywhere (e.g. classic Heartbeat), so the hot path pays only where arrays
can appear. Everything else about validity (UTF-8, nulls, truncation) is left to kio.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from protocol.varint import OverlongVarintError, read_uvarint

Guard = Callable[[bytes, int, int], int]


class MalformedLength(ValueError):
    """An array length exceeds the bytes left in the frame (or the frame ends early)."""


_FIXED = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}

_unpack_h = struct.Struct(">h").unpack_from
_unpack_i = struct.Struct(">i").unpack_from


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """`protocol.varint.read_uvarint`, an over-long varint refused as a malformed length."""
    try:
        return read_uvarint(buf, pos)
    except OverlongVarintError:
        raise MalformedLength("varint longer than 5 bytes") from None


def _too_long(n: int, pos: int, end: int) -> None:
    raise MalformedLength(f"array length {n} exceeds the {end - pos} bytes left")


@cache
def has_arrays(entity_type: type) -> bool:
    """True if the entity (or anything nested in it, tagged fields included) holds an array."""
    for f in dataclasses.fields(entity_type):
        kind = classify_field(f)
        if kind.is_array:
            return True
        if isinstance(kind, EntityField) and has_arrays(kind.type_):
            return True
    return False


class _Gen:
    """Emits the body of `check(buf, pos, end) -> pos` for one entity type."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.helpers: dict[str, Any] = {
            "_uvarint": _uvarint,
            "_unpack_h": _unpack_h,
            "_unpack_i": _unpack_i,
            "_too_long": _too_long,
        }
        self._n = 0

    def var(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def uvarint(self, ind: int, name: str) -> None:
        """`name, pos = _uvarint(buf, pos)`, with the one-byte case (nearly all) inlined."""
        self.emit(ind, f"{name} = buf[pos]")
        self.emit(ind, f"if {name} < 0x80:")
        self.emit(ind + 1, "pos += 1")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"{name}, pos = _uvarint(buf, pos)")

    def entity(self, t: type, flexible: bool, ind: int) -> None:
        tagged: list[tuple[int, dataclasses.Field[Any]]] = []
        for f in dataclasses.fields(t):
            tag = get_field_tag(f)
            if tag is not None:
                tagged.append((int(tag), f))
                continue
            self.field(f, flexible, ind)
        if flexible:
            self.tagged_fields(tagged, ind)

    def tagged_fields(self, tagged: list[tuple[int, dataclasses.Field[Any]]], ind: int) -> None:
        # Tagged values carry their size, so only tags whose type holds arrays are walked.
        walk: dict[int, str] = {}
        for tag_number, f in tagged:
            kind = classify_field(f)
            if kind.is_array or (isinstance(kind, EntityField) and has_arrays(kind.type_)):
                name = self.var("_tag")
                self.helpers[name] = _field_guard(f)
                walk[tag_number] = name
        count, i, tag, size = self.var("c"), self.var("i"), self.var("t"), self.var("s")
        self.uvarint(ind, count)
        self.emit(ind, f"for {i} in range({count}):")
        self.uvarint(ind + 1, tag)
        self.uvarint(ind + 1, size)
        for number, name in walk.items():
            self.emit(ind + 1, f"if {tag} == {number}:")
            self.emit(ind + 2, f"{name}(buf, pos, pos + {size})")
        self.emit(ind + 1, f"pos += {size}")

    def field(self, f: dataclasses.Field[Any], flexible: bool, ind: int) -> None:
        kind = classify_field(f)
        if isinstance(kind, PrimitiveField):
            self.primitive(f.metadata["kafka_type"], flexible, ind)
        elif isinstance(kind, EntityField):
            if is_optional(f):
                self.emit(ind, "marker = buf[pos]")
                self.emit(ind, "pos += 1")
                self.emit(ind, "if marker != 0xFF:")
                self.entity(kind.type_, flexible, ind + 1)
                self.emit(ind + 1, "pass")
            else:
                self.entity(kind.type_, flexible, ind)
        elif isinstance(kind, PrimitiveTupleField | EntityTupleField):
            self.array(f, kind, flexible, ind)
        else:  # pragma: no cover - kio only has the four kinds
            raise TypeError(f"unexpected field kind {kind!r}")

    def primitive(self, kafka_type: str, flexible: bool, ind: int) -> None:
        if kafka_type in _FIXED:
            self.emit(ind, f"pos += {_FIXED[kafka_type]}")
        elif flexible:  # compact string/bytes/records: uvarint(len + 1), 0 = null
            n = self.var("n")
            self.uvarint(ind, n)
            self.emit(ind, f"if {n} > 1:")
            self.emit(ind + 1, f"pos += {n} - 1")
        elif kafka_type == "string":  # int16 length, -1 = null
            n = self.var("n")
            self.emit(ind, f"{n} = _unpack_h(buf, pos)[0]")
            self.emit(ind, f"pos += 2 + ({n} if {n} > 0 else 0)")
        else:  # legacy bytes/records: int32 length, -1 = null
            n = self.var("n")
            self.emit(ind, f"{n} = _unpack_i(buf, pos)[0]")
            self.emit(ind, f"pos += 4 + ({n} if {n} > 0 else 0)")

    def array(
        self,
        f: dataclasses.Field[Any],
        kind: PrimitiveTupleField | EntityTupleField,
        flexible: bool,
        ind: int,
    ) -> None:
        n = self.var("n")
        if flexible:
            self.uvarint(ind, n)
            self.emit(ind, f"{n} -= 1")
        else:
            self.emit(ind, f"{n} = _unpack_i(buf, pos)[0]")
            self.emit(ind, "pos += 4")
        self.emit(ind, f"if {n} > 0:")
        self.emit(ind + 1, f"if {n} > end - pos:")
        self.emit(ind + 2, f"_too_long({n}, pos, end)")
        if isinstance(kind, PrimitiveTupleField):
            kafka_type = f.metadata["kafka_type"]
            if kafka_type in _FIXED:
                self.emit(ind + 1, f"pos += {n} * {_FIXED[kafka_type]}")
                return
            i = self.var("i")
            self.emit(ind + 1, f"for {i} in range({n}):")
            self.primitive(kafka_type, flexible, ind + 2)
        else:
            i = self.var("i")
            self.emit(ind + 1, f"for {i} in range({n}):")
            self.entity(kind.type_, flexible, ind + 2)


def _compile(emit_body: Callable[[_Gen], None], name: str) -> Guard:
    gen = _Gen()
    emit_body(gen)
    src = "\n".join([f"def {name}(buf, pos, end):", *("    " + line for line in gen.lines), "    return pos"])
    namespace = dict(gen.helpers)
    exec(compile(src, f"<length_guard {name}>", "exec"), namespace)
    fn: Guard = namespace[name]
    return fn


def _field_guard(f: dataclasses.Field[Any]) -> Guard:
    """A guard for one (tagged) field value, flexible encoding."""
    return _compile(lambda g: g.field(f, True, 0), "check_" + f.name)


@cache
def guard_for(entity_type: type) -> Guard | None:
    """The checker for `entity_type`, or None when it has no arrays (nothing to bound)."""
    if not has_arrays(entity_type):
        return None
    flexible = bool(entity_type.__flexible__)  # type: ignore[attr-defined]
    return _compile(lambda g: g.entity(entity_type, flexible, 0), "check_" + entity_type.__name__)


def check_lengths(guard: Guard, buf: bytes, pos: int) -> int:
    """Run `guard` over `buf[pos:]`; raise `MalformedLength` on an oversized or truncated frame."""
    end = len(buf)
    try:
        stop = guard(buf, pos, end)
    except (IndexError, struct.error) as e:
        raise MalformedLength("frame ends inside the request") from e
    if stop > end:
        raise MalformedLength("frame ends inside the request")
    return stop
