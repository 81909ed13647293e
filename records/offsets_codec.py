"""Committed-offset values: `OffsetCommitValue` (record types 0 and 1), versions 0-4.

    v0, v2  offset int64, metadata string, commitTimestamp int64
    v1      offset int64, metadata string, commitTimestamp int64, expireTimestamp int64
    v3      offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
    v4      v3, flexible (compact metadata, tagged fields)

We write what Kafka >= 3.5 writes (`MetadataVersion.offsetCommitValueVersion`): v1 when the
commit carries an explicit expire timestamp (OffsetCommit v2-v4 retention; only v1 can hold it,
and like Kafka we then drop the leader epoch, which v1 lacks), else v3, the highest
non-flexible version, so that brokers older than 3.5 can read our log. v4 would only be needed
for a tagged field, and none is defined. Missing fields read as Kafka's defaults: leaderEpoch
-1, expireTimestamp -1.

Offset commits are most of a replay, so each version's decoder is written out in full.
"""

from __future__ import annotations

import struct

from records.construct import positional_constructor
from records.offsets import OffsetCommitValue
from records.wire import (
    bad_string_length_error,
    check_string_length,
    read_compact_string,
    skip_tagged_fields,
    trailing_bytes_error,
    unsupported_version_error,
)

__all__ = ["decode_offset_commit_value", "encode_offset_commit_value"]

_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i64 = struct.Struct(">q").unpack_from
_pack_i64 = struct.Struct(">q").pack
_I64_I16 = struct.Struct(">qh")
_I64_I32 = struct.Struct(">qi")
_I64_I32_I16 = struct.Struct(">qih")
_I64_I64 = struct.Struct(">qq")
_V1_HEAD = struct.Struct(">hqh")  # version, offset, metadata length
_V3_HEAD = struct.Struct(">hqih")  # version, offset, leaderEpoch, metadata length

_new = positional_constructor(OffsetCommitValue)


def decode_offset_commit_value(buf: bytes) -> OffsetCommitValue:
    """Decode `int16 version` + OffsetCommitValue of that version."""
    size = len(buf)
    (version,) = _unpack_i16(buf, 0)
    if version == 3:
        offset, leader_epoch, n = _I64_I32_I16.unpack_from(buf, 2)
        end = 16 + n
        if n < 0 or end > size:
            raise bad_string_length_error("metadata", n, 16, buf)
        metadata = buf[16:end].decode()
        (commit_timestamp,) = _unpack_i64(buf, end)
        if end + 8 != size:
            raise trailing_bytes_error(end + 8, buf)
        return _new(offset, leader_epoch, metadata, commit_timestamp, -1)
    if version == 1:
        offset, n = _I64_I16.unpack_from(buf, 2)
        end = 12 + n
        if n < 0 or end > size:
            raise bad_string_length_error("metadata", n, 12, buf)
        metadata = buf[12:end].decode()
        commit_timestamp, expire_timestamp = _I64_I64.unpack_from(buf, end)
        if end + 16 != size:
            raise trailing_bytes_error(end + 16, buf)
        return _new(offset, -1, metadata, commit_timestamp, expire_timestamp)
    if version == 0 or version == 2:
        offset, n = _I64_I16.unpack_from(buf, 2)
        end = 12 + n
        if n < 0 or end > size:
            raise bad_string_length_error("metadata", n, 12, buf)
        metadata = buf[12:end].decode()
        (commit_timestamp,) = _unpack_i64(buf, end)
        if end + 8 != size:
            raise trailing_bytes_error(end + 8, buf)
        return _new(offset, -1, metadata, commit_timestamp, -1)
    if version == 4:
        offset, leader_epoch = _I64_I32.unpack_from(buf, 2)
        metadata, pos = read_compact_string(buf, 14, "metadata")
        (commit_timestamp,) = _unpack_i64(buf, pos)
        pos = skip_tagged_fields(buf, pos + 8)
        if pos != size:
            raise trailing_bytes_error(pos, buf)
        return _new(offset, leader_epoch, metadata, commit_timestamp, -1)
    raise unsupported_version_error(version, "0-4")


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """v1 if an expire timestamp is set (leader epoch dropped, as Kafka does), else v3."""
    metadata = check_string_length(value.metadata.encode())
    if value.expire_timestamp != -1:
        return (
            _V1_HEAD.pack(1, value.offset, len(metadata))
            + metadata
            + _I64_I64.pack(value.commit_timestamp, value.expire_timestamp)
        )
    return (
        _V3_HEAD.pack(3, value.offset, value.leader_epoch, len(metadata))
        + metadata
        + _pack_i64(value.commit_timestamp)
    )
