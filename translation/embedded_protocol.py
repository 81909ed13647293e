"""The embedded consumer protocol: ConsumerProtocolSubscription and ConsumerProtocolAssignment
v0-v3 (Kafka `ConsumerProtocol`; Kafka `ConsumerProtocol`, `CMSG/ConsumerProtocolSubscription.json`,
`CMSG/ConsumerProtocolAssignment.json`).

Classic consumers carry their subscription in JoinGroup protocol metadata and receive their
assignment in SyncGroup as these opaque byte strings: `int16 version` then a non-flexible body.
Versions above 3 are read as 3 (Kafka does, for forward compatibility); negative versions and
short buffers are a `SchemaError`. Assignments are written with the member's own subscription
version and null user data, as Kafka's coordinator writes them.

    Subscription v0: Topics []string, UserData bytes?
                 v1: + OwnedPartitions []{Topic string, Partitions []int32}
                 v2: + GenerationId int32 (default -1)
                 v3: + RackId string?
    Assignment v0-v3: AssignedPartitions []{Topic string, Partitions []int32}, UserData bytes?
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAX_VERSION = 3

_H = struct.Struct(">h")
_I = struct.Struct(">i")


class SchemaError(ValueError):
    """The bytes are not a valid embedded consumer protocol message."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    version: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    user_data: bytes | None = None


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise SchemaError(
                f"buffer too short: need {n} bytes at {self.pos}, have {len(self.buf) - self.pos}"
            )
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def int16(self) -> int:
        v: int = _H.unpack(self._take(2))[0]
        return v

    def int32(self) -> int:
        v: int = _I.unpack(self._take(4))[0]
        return v

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise SchemaError("null string where a string is required")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise SchemaError(f"invalid UTF-8 string: {e}") from None

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise SchemaError(f"invalid string length {n}")
        self.pos -= 2
        return self.string()

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise SchemaError(f"invalid bytes length {n}")
        return self._take(n)

    def count(self) -> int:
        n = self.int32()
        if n < 0:
            raise SchemaError(f"invalid array length {n}")
        if n > len(self.buf) - self.pos:  # every element takes at least one byte
            raise SchemaError(f"array length {n} exceeds the remaining {len(self.buf) - self.pos} bytes")
        return n

    def topic_partitions(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        out = []
        for _ in range(self.count()):
            topic = self.string()
            n = self.count()
            parts = struct.unpack(f">{n}i", self._take(4 * n)) if n else ()
            out.append((topic, tuple(parts)))
        return tuple(out)


def read_version(data: bytes) -> int:
    """The version header, capped at 3 (newer versions are read as 3)."""
    if len(data) < 2:
        raise SchemaError("buffer too short for the version header")
    v: int = _H.unpack_from(data)[0]
    if v < 0:
        raise SchemaError(f"negative version {v}")
    return min(v, MAX_VERSION)


def parse_subscription(data: bytes) -> Subscription:
    version = read_version(data)
    r = _Reader(data)
    r.pos = 2
    topics = tuple(r.string() for _ in range(r.count()))
    user_data = r.nullable_bytes()
    owned: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation = -1
    rack: str | None = None
    if version >= 1:
        owned = r.topic_partitions()
    if version >= 2:
        generation = r.int32()
    if version >= 3:
        rack = r.nullable_string()
    return Subscription(version, topics, user_data, owned, generation, rack)


def parse_assignment(data: bytes) -> Assignment:
    version = read_version(data)
    r = _Reader(data)
    r.pos = 2
    parts = r.topic_partitions()
    user_data = r.nullable_bytes()
    return Assignment(version, parts, user_data)


def _write_string(out: list[bytes], s: str) -> None:
    b = s.encode("utf-8")
    out.append(_H.pack(len(b)))
    out.append(b)


def _write_topic_partitions(out: list[bytes], parts: Sequence[tuple[str, Sequence[int]]]) -> None:
    out.append(_I.pack(len(parts)))
    for topic, ps in parts:
        _write_string(out, topic)
        out.append(_I.pack(len(ps)))
        if ps:
            out.append(struct.pack(f">{len(ps)}i", *ps))


def serialize_subscription(sub: Subscription) -> bytes:
    v = min(sub.version, MAX_VERSION)
    out = [_H.pack(v), _I.pack(len(sub.topics))]
    for t in sub.topics:
        _write_string(out, t)
    out.append(_I.pack(-1) if sub.user_data is None else _I.pack(len(sub.user_data)) + sub.user_data)
    if v >= 1:
        _write_topic_partitions(out, sub.owned_partitions)
    if v >= 2:
        out.append(_I.pack(sub.generation_id))
    if v >= 3:
        if sub.rack_id is None:
            out.append(_H.pack(-1))
        else:
            _write_string(out, sub.rack_id)
    return b"".join(out)


def serialize_assignment(
    partitions: Mapping[str, Sequence[int]] | Sequence[tuple[str, Sequence[int]]],
    version: int,
    user_data: bytes | None = None,
) -> bytes:
    """An assignment in the given version's header (the body is the same for v0-v3)."""
    items = list(partitions.items()) if isinstance(partitions, Mapping) else list(partitions)
    out = [_H.pack(min(max(version, 0), MAX_VERSION))]
    _write_topic_partitions(out, items)
    out.append(_I.pack(-1) if user_data is None else _I.pack(len(user_data)) + user_data)
    return b"".join(out)
