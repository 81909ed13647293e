"""Byte codecs of the Connect-group values (types 10000-10005, `records.connect_group`).

value = int16 version (0) + a flexible body: compact strings and arrays, a tag section at the end
of every struct, the same shapes as the Connect extension APIs (`protocol.connect_wire`). Keys
use Kafka's key layout (`records.key_codec`). A malformed value raises `WireFormatError`, which
`records.codec` reports as a RecordDecodeError naming the type.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from protocol.connect_wire import read_assignor, write_assignor, write_work
from protocol.connect_wire import read_work as _work
from protocol.extension_wire import BoundedReader, MalformedExtension
from protocol.varint import encode_uvarint
from records.connect_group import (
    ConnectClassicWorker,
    ConnectGroupCurrentMemberAssignmentValue,
    ConnectGroupDelayedWorkValue,
    ConnectGroupMemberMetadataValue,
    ConnectGroupMetadataValue,
    ConnectGroupTargetAssignmentMemberValue,
    ConnectGroupTargetAssignmentMetadataValue,
)
from records.consumer_group import ClassicProtocol
from records.coordinator import RecordValue
from records.wire import WireFormatError

__all__ = ["VALUE_DECODERS", "VALUE_ENCODERS"]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VERSION = _I16.pack(0)


def _s(text: str) -> bytes:
    b = text.encode()
    return encode_uvarint(len(b) + 1) + b


def _b(data: bytes) -> bytes:
    return encode_uvarint(len(data) + 1) + data


def _i64(r: BoundedReader) -> int:
    return int(_I64.unpack_from(r.buf, r._take(8))[0])


# --- encoders ----------------------------------------------------------------------------------


def _enc_metadata(v: ConnectGroupMetadataValue) -> bytes:
    return _VERSION + _I32.pack(v.epoch) + b"\x00"


def _enc_member(v: ConnectGroupMemberMetadataValue) -> bytes:
    out = [
        _VERSION,
        _s(v.client_id),
        _s(v.client_host),
        _s(v.url),
        _I32.pack(v.rebalance_timeout_ms),
        _I64.pack(v.config_offset),
        encode_uvarint(len(v.assignors) + 1),
    ]
    out.extend(write_assignor(a) for a in v.assignors)
    if v.classic is None:
        out.append(b"\x00")
    else:
        # tag 0: SessionTimeoutMs int32, JoinedGroupEpoch int32, SinceEpoch int32,
        #        [Name string, Metadata bytes, TAG_BUFFER], TAG_BUFFER
        c = v.classic
        body = [_I32.pack(c.session_timeout_ms), _I32.pack(c.joined_group_epoch), _I32.pack(c.since_epoch)]
        body.append(encode_uvarint(len(c.protocols) + 1))
        body.extend(_s(p.name) + _b(p.metadata) + b"\x00" for p in c.protocols)
        body.append(b"\x00")
        tag = b"".join(body)
        out.append(encode_uvarint(1) + encode_uvarint(0) + encode_uvarint(len(tag)) + tag)
    return b"".join(out)


def _enc_target_metadata(v: ConnectGroupTargetAssignmentMetadataValue) -> bytes:
    return _VERSION + _I32.pack(v.assignment_epoch) + b"\x00"


def _enc_target_member(v: ConnectGroupTargetAssignmentMemberValue) -> bytes:
    return _VERSION + write_work(v.work) + _I16.pack(v.metadata_version) + _b(v.metadata) + b"\x00"


def _enc_current(v: ConnectGroupCurrentMemberAssignmentValue) -> bytes:
    return (
        _VERSION
        + _I32.pack(v.member_epoch)
        + _I32.pack(v.previous_member_epoch)
        + _I8.pack(v.state)
        + write_work(v.assigned)
        + write_work(v.pending_revocation)
        + b"\x00"
    )


def _enc_delayed(v: ConnectGroupDelayedWorkValue) -> bytes:
    return _VERSION + _s(v.url) + _I64.pack(v.deadline_ms) + write_work(v.work) + b"\x00"


# --- decoders ----------------------------------------------------------------------------------


def _dec_metadata(r: BoundedReader) -> Any:
    return ConnectGroupMetadataValue(r.int32())


def _dec_member(r: BoundedReader) -> Any:
    client_id, host, url, timeout, offset = r.string(), r.string(), r.string(), r.int32(), _i64(r)
    n = r.array_count()
    if n < 0:
        raise MalformedExtension("null assignor array")
    assignors = tuple(read_assignor(r) for _ in range(n))
    classic = None
    tags = r.skip_tags()
    if 0 in tags:
        start, end = tags[0]
        t = BoundedReader(r.buf, start, end)
        session, joined, since = t.int32(), t.int32(), t.int32()
        count = t.array_count()
        if count < 0:
            raise MalformedExtension("null classic protocol array")
        protocols = []
        for _ in range(count):
            name, metadata = t.string(), t.bytes_()
            t.skip_tags()
            protocols.append(ClassicProtocol(name, metadata))
        t.skip_tags()
        if t.pos != end:
            raise MalformedExtension(f"{end - t.pos} trailing bytes in the classic worker tag")
        classic = ConnectClassicWorker(session, joined, since, tuple(protocols))
    return ConnectGroupMemberMetadataValue(client_id, host, url, timeout, offset, assignors, classic)


def _dec_target_metadata(r: BoundedReader) -> Any:
    return ConnectGroupTargetAssignmentMetadataValue(r.int32())


def _dec_target_member(r: BoundedReader) -> Any:
    return ConnectGroupTargetAssignmentMemberValue(_work(r), r.int16(), r.bytes_())


def _dec_current(r: BoundedReader) -> Any:
    return ConnectGroupCurrentMemberAssignmentValue(r.int32(), r.int32(), r.int8(), _work(r), _work(r))


def _dec_delayed(r: BoundedReader) -> Any:
    return ConnectGroupDelayedWorkValue(r.string(), _i64(r), _work(r))


def _decoder(
    read: Callable[[BoundedReader], Any], reads_tags: bool = False
) -> Callable[[bytes], RecordValue]:
    def decode(buf: bytes) -> RecordValue:
        try:
            r = BoundedReader(buf, 0)
            version = r.int16()
            if version != 0:
                raise WireFormatError(f"unsupported value version {version} (supported: 0)")
            value = read(r)
            if not reads_tags:
                r.skip_tags()
            if r.pos != len(buf):
                raise WireFormatError(f"{len(buf) - r.pos} trailing bytes")
        except MalformedExtension as e:
            raise WireFormatError(str(e)) from None
        result: RecordValue = value
        return result

    return decode


VALUE_DECODERS: dict[int, Callable[[bytes], RecordValue]] = {
    10000: _decoder(_dec_metadata),
    10001: _decoder(_dec_member, reads_tags=True),
    10002: _decoder(_dec_target_metadata),
    10003: _decoder(_dec_target_member),
    10004: _decoder(_dec_current),
    10005: _decoder(_dec_delayed),
}

VALUE_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    ConnectGroupMetadataValue: _enc_metadata,
    ConnectGroupMemberMetadataValue: _enc_member,
    ConnectGroupTargetAssignmentMetadataValue: _enc_target_metadata,
    ConnectGroupTargetAssignmentMemberValue: _enc_target_member,
    ConnectGroupCurrentMemberAssignmentValue: _enc_current,
    ConnectGroupDelayedWorkValue: _enc_delayed,
}
