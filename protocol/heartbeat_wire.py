"""Hand-written readers for steady heartbeats: ConsumerGroupHeartbeat (68) v0-1 and Heartbeat (12)
v0-4, the two requests a stable group sends most (issue 30 point 1).

The wire layouts are Kafka's `ConsumerGroupHeartbeatRequest.json` and `HeartbeatRequest.json`
behind `RequestHeader` v2 (flexible versions: ConsumerGroupHeartbeat always, Heartbeat v4) or v1
(Heartbeat v0-3); the header's client id is a nullable int16-length string in both, and v2 adds
a tagged-field section. A steady ConsumerGroupHeartbeat is what Kafka's clients send once a
member is reconciled (`ConsumerHeartbeatRequestManager.HeartbeatState`: fields that did not
change since the last heartbeat are sent null): no subscription, no regex, no owned partitions,
no tagged fields.

kio decodes these requests natively, but in three steps around the generated length guard
(`protocol.length_guard`), and builds a frozen dataclass per request: a third of the decode
cost is the guard alone. These readers do one pass over the frame, bound every length by the
bytes present, and build only the fields a handler reads. They return None for anything that
is not a steady shape (a non-null array, a tagged field, a multi-byte length, a null where the
schema has no null, trailing bytes, a malformed or truncated frame): the dispatcher then
decodes the frame with kio as before, which answers or rejects it exactly as it always did. So
these readers never decide what a request means, only that it is one they can read faster;
tests/test_heartbeat_wire.py compares them with kio over generated frames of every version.
"""

from __future__ import annotations

import struct
from typing import Final

CONSUMER_GROUP_HEARTBEAT_KEY: Final = 68
HEARTBEAT_KEY: Final = 12

_HEADER: Final = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_INT32: Final = struct.Struct(">i")
_FRAME_V0: Final = struct.Struct(">ii")  # size, correlation id (ResponseHeader v0)
_FRAME_V1: Final = struct.Struct(">iiB")  # size, correlation id, no tagged fields (v1)


class SteadyConsumerGroupHeartbeat:
    """The fields of a steady ConsumerGroupHeartbeat (the rest are null on the wire)."""

    __slots__ = (
        "client_id",
        "correlation_id",
        "group_id",
        "instance_id",
        "member_epoch",
        "member_id",
        "rack_id",
        "rebalance_timeout_ms",
        "server_assignor",
        "version",
    )

    def __init__(
        self,
        version: int,
        correlation_id: int,
        client_id: str | None,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        server_assignor: str | None,
    ) -> None:
        self.version = version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.group_id = group_id
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor


class SteadyHeartbeat:
    """A classic Heartbeat (every one is steady: the request has no optional parts)."""

    __slots__ = (
        "client_id",
        "correlation_id",
        "generation_id",
        "group_id",
        "group_instance_id",
        "member_id",
        "version",
    )

    def __init__(
        self,
        version: int,
        correlation_id: int,
        client_id: str | None,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> None:
        self.version = version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id


class _NotSteady(Exception):
    """Internal: the frame is not a shape these readers handle (kio reads it instead)."""


def _compact_string(frame: bytes, pos: int, end: int) -> str | None:
    """A compact (uvarint length + 1) string at `pos`; one length byte only (up to 126
    bytes: every group and member id Kafka's clients generate). The caller advances by
    `_compact_size`."""
    n = frame[pos]
    if n >= 0x80 or pos + n > end:
        raise _NotSteady
    if n == 0:
        return None
    return frame[pos + 1 : pos + n].decode()


def _compact_size(frame: bytes, pos: int) -> int:
    n = frame[pos]
    return 1 if n == 0 else n


def _legacy_string(frame: bytes, pos: int, end: int) -> tuple[str | None, int]:
    """An int16-length string at `pos` (-1: null) and the position after it."""
    if pos + 2 > end:
        raise _NotSteady
    n = (frame[pos] << 8) | frame[pos + 1]
    if n == 0xFFFF:
        return None, pos + 2
    if n >= 0x8000 or pos + 2 + n > end:
        raise _NotSteady
    return frame[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def _header(frame: bytes, key: int, flexible: bool) -> tuple[int, int, str | None, int]:
    """(api version, correlation id, client id, body offset) of a request header."""
    end = len(frame)
    if end < 10:
        raise _NotSteady
    api_key, version, correlation_id, _ = _HEADER.unpack_from(frame, 0)
    if api_key != key:
        raise _NotSteady
    client_id, pos = _legacy_string(frame, 8, end)
    if flexible:
        if pos >= end or frame[pos] != 0:  # header tagged fields: none
            raise _NotSteady
        pos += 1
    return version, correlation_id, client_id, pos


def read_consumer_group_heartbeat(frame: bytes) -> SteadyConsumerGroupHeartbeat | None:
    """A steady ConsumerGroupHeartbeat v0-1 (the frame after its size), or None."""
    try:
        return _read_cgh(frame)
    except (_NotSteady, IndexError, UnicodeDecodeError):
        return None


def _read_cgh(frame: bytes) -> SteadyConsumerGroupHeartbeat:
    end = len(frame)
    version, correlation_id, client_id, pos = _header(frame, CONSUMER_GROUP_HEARTBEAT_KEY, True)
    if version != 0 and version != 1:
        raise _NotSteady
    group_id = _compact_string(frame, pos, end)
    pos += _compact_size(frame, pos)
    member_id = _compact_string(frame, pos, end)
    pos += _compact_size(frame, pos)
    if group_id is None or member_id is None or pos + 4 > end:
        raise _NotSteady
    member_epoch = _INT32.unpack_from(frame, pos)[0]
    pos += 4
    instance_id = _compact_string(frame, pos, end)
    pos += _compact_size(frame, pos)
    rack_id = _compact_string(frame, pos, end)
    pos += _compact_size(frame, pos)
    if pos + 5 > end:
        raise _NotSteady
    rebalance_timeout_ms = _INT32.unpack_from(frame, pos)[0]
    pos += 4
    if frame[pos] != 0:  # subscribed topic names: null
        raise _NotSteady
    pos += 1
    if version >= 1:
        if pos >= end or frame[pos] != 0:  # subscribed topic regex: null
            raise _NotSteady
        pos += 1
    server_assignor = _compact_string(frame, pos, end)
    pos += _compact_size(frame, pos)
    # owned partitions: null; no tagged fields; nothing after them
    if pos + 2 != end or frame[pos] != 0 or frame[pos + 1] != 0:
        raise _NotSteady
    return SteadyConsumerGroupHeartbeat(
        version,
        correlation_id,
        client_id,
        group_id,
        member_id,
        member_epoch,
        instance_id,
        rack_id,
        rebalance_timeout_ms,
        server_assignor,
    )


def read_heartbeat(frame: bytes) -> SteadyHeartbeat | None:
    """A Heartbeat v0-4 (the frame after its size), or None."""
    try:
        return _read_heartbeat(frame)
    except (_NotSteady, IndexError, UnicodeDecodeError):
        return None


def _read_heartbeat(frame: bytes) -> SteadyHeartbeat:
    end = len(frame)
    if end < 4:
        raise _NotSteady
    version = (frame[2] << 8) | frame[3]
    if version > 4:
        raise _NotSteady
    flexible = version >= 4
    version, correlation_id, client_id, pos = _header(frame, HEARTBEAT_KEY, flexible)
    group_instance_id: str | None = None
    if flexible:
        group_id = _compact_string(frame, pos, end)
        pos += _compact_size(frame, pos)
        if pos + 4 > end:
            raise _NotSteady
        generation_id = _INT32.unpack_from(frame, pos)[0]
        pos += 4
        member_id = _compact_string(frame, pos, end)
        pos += _compact_size(frame, pos)
        group_instance_id = _compact_string(frame, pos, end)
        pos += _compact_size(frame, pos)
        if pos + 1 != end or frame[pos] != 0:  # no tagged fields, nothing after them
            raise _NotSteady
    else:
        group_id, pos = _legacy_string(frame, pos, end)
        if pos + 4 > end:
            raise _NotSteady
        generation_id = _INT32.unpack_from(frame, pos)[0]
        pos += 4
        member_id, pos = _legacy_string(frame, pos, end)
        if version >= 3:
            group_instance_id, pos = _legacy_string(frame, pos, end)
        if pos != end:
            raise _NotSteady
    if group_id is None or member_id is None:
        raise _NotSteady
    return SteadyHeartbeat(
        version, correlation_id, client_id, group_id, generation_id, member_id, group_instance_id
    )


def response_frame(correlation_id: int, flexible_header: bool, body: bytes) -> bytes:
    """A size-prefixed response frame around an encoded body: `ResponseHeader` v1 (with its
    empty tagged-field section) when `flexible_header`, else v0. The same bytes as
    `protocol.codec.encode_response` with a bytes body."""
    if flexible_header:
        return _FRAME_V1.pack(len(body) + 5, correlation_id, 0) + body
    return _FRAME_V0.pack(len(body) + 4, correlation_id) + body
