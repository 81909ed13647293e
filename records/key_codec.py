"""Coordinator record keys: `int16 record type` + the key message, never flexible.

Kafka (`CoordinatorRecordSerde`) uses the record type as the key schema's version, and every key
schema (`*Key.json`) has exactly that one version; only `OffsetCommitKey` has two, 0 and 1, with
the same fields (version 0 dates from before group metadata shared the topic). Kafka writes 1, so
do we, and both read back as `OffsetCommitKey`. Every other key is one or two strings:

    type 2  GroupMetadataKey                         group
    type 3  ConsumerGroupMetadataKey                 GroupId
    type 4  ConsumerGroupPartitionMetadataKey        GroupId
    type 5  ConsumerGroupMemberMetadataKey           GroupId, MemberId
    type 6  ConsumerGroupTargetAssignmentMetadataKey GroupId
    type 7  ConsumerGroupTargetAssignmentMemberKey   GroupId, MemberId
    type 8  ConsumerGroupCurrentMemberAssignmentKey  GroupId, MemberId
    type 16 ConsumerGroupRegularExpressionKey        GroupId, RegularExpression  (Kafka 4.0)

Decoders take the whole key (record type included) and are inlined: every record of a replay
goes through one of them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from records.classic_group import GroupMetadataKey
from records.connect_group import (
    ConnectGroupCurrentMemberAssignmentKey,
    ConnectGroupDelayedWorkKey,
    ConnectGroupMemberMetadataKey,
    ConnectGroupMetadataKey,
    ConnectGroupTargetAssignmentMemberKey,
    ConnectGroupTargetAssignmentMetadataKey,
)
from records.construct import positional_constructor
from records.consumer_group import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from records.coordinator import RecordKey
from records.offsets import OffsetCommitKey
from records.streams_group import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMetadataKey,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTopologyKey,
)
from records.wire import bad_string_length_error, check_string_length, trailing_bytes_error

__all__ = ["KEY_DECODERS", "KEY_ENCODERS"]

_I16_I16 = struct.Struct(">hh")
_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i32 = struct.Struct(">i").unpack_from
_pack_i16 = struct.Struct(">h").pack
_pack_i32 = struct.Struct(">i").pack

_new_offset_commit_key = positional_constructor(OffsetCommitKey)


def _decode_offset_commit_key(buf: bytes) -> OffsetCommitKey:
    # OffsetCommitKey.json v0/v1: group string, topic string, partition int32
    size = len(buf)
    (n,) = _unpack_i16(buf, 2)
    end = 4 + n
    if n < 0 or end > size:
        raise bad_string_length_error("group", n, 4, buf)
    group = buf[4:end].decode()
    (n,) = _unpack_i16(buf, end)
    start = end + 2
    end = start + n
    if n < 0 or end > size:
        raise bad_string_length_error("topic", n, start, buf)
    topic = buf[start:end].decode()
    (partition,) = _unpack_i32(buf, end)
    if end + 4 != size:
        raise trailing_bytes_error(end + 4, buf)
    return _new_offset_commit_key(group, topic, partition)


def _one_string_decoder(cls: type[Any], name: str) -> Callable[[bytes], Any]:
    make = positional_constructor(cls)

    def decode(buf: bytes) -> Any:
        size = len(buf)
        (n,) = _unpack_i16(buf, 2)
        end = 4 + n
        if n < 0 or end > size:
            raise bad_string_length_error(name, n, 4, buf)
        if end != size:
            raise trailing_bytes_error(end, buf)
        return make(buf[4:end].decode())

    decode.__name__ = f"decode_{cls.__name__}"
    return decode


def _two_string_decoder(cls: type[Any], first: str, second: str) -> Callable[[bytes], Any]:
    make = positional_constructor(cls)

    def decode(buf: bytes) -> Any:
        size = len(buf)
        (n,) = _unpack_i16(buf, 2)
        end = 4 + n
        if n < 0 or end > size:
            raise bad_string_length_error(first, n, 4, buf)
        a = buf[4:end].decode()
        (n,) = _unpack_i16(buf, end)
        start = end + 2
        end = start + n
        if n < 0 or end > size:
            raise bad_string_length_error(second, n, start, buf)
        if end != size:
            raise trailing_bytes_error(end, buf)
        return make(a, buf[start:end].decode())

    decode.__name__ = f"decode_{cls.__name__}"
    return decode


def _encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    group = check_string_length(key.group.encode())
    topic = check_string_length(key.topic.encode())
    return _I16_I16.pack(1, len(group)) + group + _pack_i16(len(topic)) + topic + _pack_i32(key.partition)


def _one_string_encoder(record_type: int, field: str) -> Callable[[Any], bytes]:
    def encode(key: Any) -> bytes:
        data = check_string_length(getattr(key, field).encode())
        return _I16_I16.pack(record_type, len(data)) + data

    return encode


def _two_string_encoder(record_type: int, first: str, second: str) -> Callable[[Any], bytes]:
    def encode(key: Any) -> bytes:
        a = check_string_length(getattr(key, first).encode())
        b = check_string_length(getattr(key, second).encode())
        return _I16_I16.pack(record_type, len(a)) + a + _pack_i16(len(b)) + b

    return encode


KEY_DECODERS: dict[int, Callable[[bytes], RecordKey]] = {
    0: _decode_offset_commit_key,
    1: _decode_offset_commit_key,
    2: _one_string_decoder(GroupMetadataKey, "group"),
    3: _one_string_decoder(ConsumerGroupMetadataKey, "GroupId"),
    4: _one_string_decoder(ConsumerGroupPartitionMetadataKey, "GroupId"),
    5: _two_string_decoder(ConsumerGroupMemberMetadataKey, "GroupId", "MemberId"),
    6: _one_string_decoder(ConsumerGroupTargetAssignmentMetadataKey, "GroupId"),
    7: _two_string_decoder(ConsumerGroupTargetAssignmentMemberKey, "GroupId", "MemberId"),
    8: _two_string_decoder(ConsumerGroupCurrentMemberAssignmentKey, "GroupId", "MemberId"),
    16: _two_string_decoder(ConsumerGroupRegularExpressionKey, "GroupId", "RegularExpression"),
    17: _one_string_decoder(StreamsGroupMetadataKey, "GroupId"),
    19: _two_string_decoder(StreamsGroupMemberMetadataKey, "GroupId", "MemberId"),
    20: _one_string_decoder(StreamsGroupTargetAssignmentMetadataKey, "GroupId"),
    21: _two_string_decoder(StreamsGroupTargetAssignmentMemberKey, "GroupId", "MemberId"),
    22: _two_string_decoder(StreamsGroupCurrentMemberAssignmentKey, "GroupId", "MemberId"),
    23: _one_string_decoder(StreamsGroupTopologyKey, "GroupId"),
    10000: _one_string_decoder(ConnectGroupMetadataKey, "GroupId"),
    10001: _two_string_decoder(ConnectGroupMemberMetadataKey, "GroupId", "MemberId"),
    10002: _one_string_decoder(ConnectGroupTargetAssignmentMetadataKey, "GroupId"),
    10003: _two_string_decoder(ConnectGroupTargetAssignmentMemberKey, "GroupId", "MemberId"),
    10004: _two_string_decoder(ConnectGroupCurrentMemberAssignmentKey, "GroupId", "MemberId"),
    10005: _two_string_decoder(ConnectGroupDelayedWorkKey, "GroupId", "MemberId"),
}
"""Record type -> decoder of the whole key bytes."""

KEY_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    OffsetCommitKey: _encode_offset_commit_key,
    GroupMetadataKey: _one_string_encoder(2, "group"),
    ConsumerGroupMetadataKey: _one_string_encoder(3, "group_id"),
    ConsumerGroupPartitionMetadataKey: _one_string_encoder(4, "group_id"),
    ConsumerGroupMemberMetadataKey: _two_string_encoder(5, "group_id", "member_id"),
    ConsumerGroupTargetAssignmentMetadataKey: _one_string_encoder(6, "group_id"),
    ConsumerGroupTargetAssignmentMemberKey: _two_string_encoder(7, "group_id", "member_id"),
    ConsumerGroupCurrentMemberAssignmentKey: _two_string_encoder(8, "group_id", "member_id"),
    ConsumerGroupRegularExpressionKey: _two_string_encoder(16, "group_id", "regular_expression"),
    StreamsGroupMetadataKey: _one_string_encoder(17, "group_id"),
    StreamsGroupMemberMetadataKey: _two_string_encoder(19, "group_id", "member_id"),
    StreamsGroupTargetAssignmentMetadataKey: _one_string_encoder(20, "group_id"),
    StreamsGroupTargetAssignmentMemberKey: _two_string_encoder(21, "group_id", "member_id"),
    StreamsGroupCurrentMemberAssignmentKey: _two_string_encoder(22, "group_id", "member_id"),
    StreamsGroupTopologyKey: _one_string_encoder(23, "group_id"),
    ConnectGroupMetadataKey: _one_string_encoder(10000, "group_id"),
    ConnectGroupMemberMetadataKey: _two_string_encoder(10001, "group_id", "member_id"),
    ConnectGroupTargetAssignmentMetadataKey: _one_string_encoder(10002, "group_id"),
    ConnectGroupTargetAssignmentMemberKey: _two_string_encoder(10003, "group_id", "member_id"),
    ConnectGroupCurrentMemberAssignmentKey: _two_string_encoder(10004, "group_id", "member_id"),
    ConnectGroupDelayedWorkKey: _two_string_encoder(10005, "group_id", "member_id"),
}
"""Key class -> encoder (record type included)."""
