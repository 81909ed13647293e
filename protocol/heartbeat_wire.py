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
_INT16: Final = struct.Struct(">h")
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


# Each reader is one straight function, every field inline: in the pure-Python build a call per
# field made the reader slower than kio's native decode; inline it costs about what kio does,
# and compiled (mypyc) it is native code. `try` is free until something raises, and anything
# raised (a truncated frame, bad UTF-8) means "not read here": kio then reads or rejects it.


def read_consumer_group_heartbeat(frame: bytes) -> SteadyConsumerGroupHeartbeat | None:
    """A steady ConsumerGroupHeartbeat v0-1 (the frame after its size), or None."""
    try:
        end = len(frame)
        api_key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
        if api_key != CONSUMER_GROUP_HEARTBEAT_KEY or (version != 0 and version != 1):
            return None
        # RequestHeader v2: client id (int16 length, -1 null), then its tagged fields (none)
        pos = 10
        client_id: str | None = None
        if n >= 0:
            if pos + n > end:
                return None
            client_id = frame[pos : pos + n].decode()
            pos += n
        elif n != -1:
            return None
        if pos >= end or frame[pos] != 0:
            return None
        pos += 1
        # compact strings (length + 1 in one byte; 0 null), non-null group and member ids
        n = frame[pos]
        if n == 0 or n >= 0x80 or pos + n > end:
            return None
        group_id = frame[pos + 1 : pos + n].decode()
        pos += n
        n = frame[pos]
        if n == 0 or n >= 0x80 or pos + n > end:
            return None
        member_id = frame[pos + 1 : pos + n].decode()
        pos += n
        member_epoch: int = _INT32.unpack_from(frame, pos)[0]
        pos += 4
        n = frame[pos]
        if n >= 0x80 or pos + n > end:
            return None
        instance_id = frame[pos + 1 : pos + n].decode() if n else None
        pos += n if n else 1
        n = frame[pos]
        if n >= 0x80 or pos + n > end:
            return None
        rack_id = frame[pos + 1 : pos + n].decode() if n else None
        pos += n if n else 1
        rebalance_timeout_ms: int = _INT32.unpack_from(frame, pos)[0]
        pos += 4
        if frame[pos] != 0:  # subscribed topic names: null
            return None
        pos += 1
        if version >= 1:
            if frame[pos] != 0:  # subscribed topic regex: null
                return None
            pos += 1
        n = frame[pos]
        if n >= 0x80 or pos + n > end:
            return None
        server_assignor = frame[pos + 1 : pos + n].decode() if n else None
        pos += n if n else 1
        # owned partitions null, no tagged fields, nothing after them
        if pos + 2 != end or frame[pos] != 0 or frame[pos + 1] != 0:
            return None
    except (IndexError, UnicodeDecodeError, struct.error):
        return None
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
        end = len(frame)
        api_key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
        if api_key != HEARTBEAT_KEY or not 0 <= version <= 4:
            return None
        # RequestHeader v1 (v0-3) or v2 (v4): client id (int16 length, -1 null)
        pos = 10
        client_id: str | None = None
        if n >= 0:
            if pos + n > end:
                return None
            client_id = frame[pos : pos + n].decode()
            pos += n
        elif n != -1:
            return None
        group_instance_id: str | None = None
        if version >= 4:
            if pos >= end or frame[pos] != 0:  # header tagged fields: none
                return None
            pos += 1
            n = frame[pos]
            if n == 0 or n >= 0x80 or pos + n > end:
                return None
            group_id = frame[pos + 1 : pos + n].decode()
            pos += n
            generation_id: int = _INT32.unpack_from(frame, pos)[0]
            pos += 4
            n = frame[pos]
            if n == 0 or n >= 0x80 or pos + n > end:
                return None
            member_id = frame[pos + 1 : pos + n].decode()
            pos += n
            n = frame[pos]
            if n >= 0x80 or pos + n > end:
                return None
            group_instance_id = frame[pos + 1 : pos + n].decode() if n else None
            pos += n if n else 1
            if pos + 1 != end or frame[pos] != 0:  # no tagged fields, nothing after them
                return None
        else:
            # legacy strings: int16 length (-1 null), non-null group and member ids
            n = _INT16.unpack_from(frame, pos)[0]
            if n < 0 or pos + 2 + n > end:
                return None
            group_id = frame[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            generation_id = _INT32.unpack_from(frame, pos)[0]
            pos += 4
            n = _INT16.unpack_from(frame, pos)[0]
            if n < 0 or pos + 2 + n > end:
                return None
            member_id = frame[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            if version >= 3:
                n = _INT16.unpack_from(frame, pos)[0]
                if n >= 0:
                    if pos + 2 + n > end:
                        return None
                    group_instance_id = frame[pos + 2 : pos + 2 + n].decode()
                    pos += 2 + n
                elif n == -1:
                    pos += 2
                else:
                    return None
            if pos != end:
                return None
    except (IndexError, UnicodeDecodeError, struct.error):
        return None
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
