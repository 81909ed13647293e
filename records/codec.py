"""Byte codecs of the coordinator records in Kafka's `__consumer_offsets` topic.

Implements Kafka's `CoordinatorRecordSerde` format for the group coordinator's records
(`group-coordinator/src/main/resources/common/message/*.json`, Kafka 3.8+ / 4.0 layouts):

    key   = int16 record type  + key message   (non-flexible; key schema version = record type)
    value = int16 value version + value message, or no value at all (a tombstone)

so that the log groupshift writes is read by Kafka's own loader and tools, and the other way
round. Primitive layouts are in `records.wire`.

Versions written, and why (each is what Kafka >= 3.5 writes, so any broker from 2.3 on reads us):

* `OffsetCommitValue` **v1** when an expire timestamp is set (v1 is the only version with
  `expireTimestamp`; like Kafka we then drop `leaderEpoch`, which v1 lacks), else **v3**: the
  highest non-flexible version. v4 (flexible) would only be needed for a tagged field, and we set
  none; pre-3.5 brokers cannot read v4.
* `GroupMetadataValue` **v3**, for the same reason (KIP-915: v4 only once a tagged field exists).
* KIP-848 values (types 3-8, 16) **v0**, their only version; flexible.

Read side: `OffsetCommitValue` and `GroupMetadataValue` v0-v4, KIP-848 values v0. Fields a
version lacks take the schema default: `leaderEpoch` -1, `expireTimestamp` -1,
`currentStateTimestamp` -1, `groupInstanceId` null, and `rebalanceTimeout` -1 in
GroupMetadataValue v0, which the classic group replay reads as "same as the session timeout".
Unknown tagged fields are skipped (later Kafka versions add some: `MetadataHash` in type 3,
`AssignmentEpochs` inside type 8's partitions); tag 0 of the member value,
`ClassicMemberMetadata`, is kept.

Errors: a key whose record type we do not know raises `UnknownRecordTypeError` (Kafka >= 3.5
skips such records with a warning: they may be left over from a newer version or an aborted
upgrade; share-group types 9-15 are among them since groupshift has no share groups). Bytes of a
known type that the schema cannot produce raise `RecordDecodeError` naming the record type. We are
stricter than Kafka in one way: trailing bytes after a message are an error, since they mean the
bytes were not written with the schema we read them with (for instance a Kafka 3.7
early-access KIP-848 record, whose layouts are incompatible and not supported).

Speed: this runs on every record of a replay (target: a million records in seconds), so the
offset-commit, member and assignment records are decoded with inlined steps and precompiled
`struct.Struct` objects instead of one call per field.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.consumer_group import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
)
from records.coordinator import CoordinatorRecord, RecordKey, RecordValue
from records.offsets import OffsetCommitKey, OffsetCommitValue
from records.wire import (
    MAX_STRING_LENGTH,
    WireFormatError,
    compact_bytes,
    compact_nullable_string,
    compact_string,
    compact_string_array,
    int32_compact_array,
    nullable_string,
    read_array_length,
    read_bytes,
    read_compact_array_length,
    read_compact_bytes,
    read_compact_nullable_string,
    read_compact_string,
    read_compact_string_array,
    read_int32_compact_array,
    read_nullable_string,
    read_string,
    read_tagged_fields,
    read_uuid,
    read_uvarint,
    skip_tagged_fields,
    string,
    uvarint,
    wire_bytes,
)

__all__ = [
    "CoordinatorRecordError",
    "RecordDecodeError",
    "RecordEncodeError",
    "UnknownRecordTypeError",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_record",
    "encode_value",
]


# --- errors -------------------------------------------------------------------------------------


class CoordinatorRecordError(Exception):
    """Base of the errors raised for bytes that do not decode into a coordinator record."""


class UnknownRecordTypeError(CoordinatorRecordError):
    """The key's record type is not one we know; the loader skips the record with a warning."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"unknown coordinator record type {record_type}")
        self.record_type = record_type


class RecordDecodeError(CoordinatorRecordError):
    """Bytes of a known record type that its schema cannot have produced; the load must stop,
    as Kafka's does, rather than rebuild a wrong state. `record_type` is None when the key is too
    short to hold one."""

    def __init__(self, record_type: int | None, description: str) -> None:
        where = "record" if record_type is None else f"record type {record_type}"
        super().__init__(f"malformed {where}: {description}")
        self.record_type = record_type
        self.description = description


class RecordEncodeError(ValueError):
    """An object that cannot be written in its schema (wrong type, out-of-range integer,
    string over 32767 UTF-8 bytes, key and value of different record types)."""


# --- precompiled layouts ------------------------------------------------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16_I16 = struct.Struct(">hh")
_I16_I32 = struct.Struct(">hi")
_I64_I16 = struct.Struct(">qh")
_I64_I32_I16 = struct.Struct(">qih")
_I64_I32 = struct.Struct(">qi")
_I64_I64 = struct.Struct(">qq")
_I16_I64_I32_I16 = struct.Struct(">hqih")
_I16_I64_I16 = struct.Struct(">hqh")
_I16_I32_I32_I8 = struct.Struct(">hiib")
_I32_I32 = struct.Struct(">ii")

_unpack_i16 = _I16.unpack_from
_unpack_i32 = _I32.unpack_from
_unpack_i64 = _I64.unpack_from
_pack_i16 = _I16.pack
_pack_i32 = _I32.pack
_pack_i64 = _I64.pack

_EARLY_ACCESS_HINT = (
    "; a Kafka 3.7 early-access KIP-848 record would look like this (its layouts are not supported)"
)
_EARLY_ACCESS_TYPES = frozenset({4, 5, 7, 8})
"""Record types whose Kafka 3.7 value layout differs from 3.8+ (see kafka-reference.md §7.2)."""


def _trailing(end: int, buf: bytes) -> WireFormatError:
    return WireFormatError(f"{len(buf) - end} trailing bytes after the message")


def _bad_length(name: str, n: int, pos: int, buf: bytes) -> WireFormatError:
    if n < 0:
        return WireFormatError(f"{name}: non-nullable string has length {n}")
    return WireFormatError(f"{name}: length {n} but only {len(buf) - pos} bytes left")


def _unsupported_version(version: int, supported: str) -> WireFormatError:
    return WireFormatError(f"value version {version} is not supported (expected {supported})")


def _check_string(data: bytes) -> bytes:
    if len(data) > MAX_STRING_LENGTH:
        raise RecordEncodeError(
            f"string of {len(data)} UTF-8 bytes exceeds Kafka's limit of {MAX_STRING_LENGTH}"
        )
    return data


# --- keys ---------------------------------------------------------------------------------------
# Every key is non-flexible: int16 record type, then int16-length strings (and, for offset
# commits, an int32 partition).


def _decode_offset_commit_key(buf: bytes) -> OffsetCommitKey:
    # OffsetCommitKey.json v0/v1 (identical): group string, topic string, partition int32
    size = len(buf)
    (n,) = _unpack_i16(buf, 2)
    end = 4 + n
    if n < 0 or end > size:
        raise _bad_length("group", n, 4, buf)
    group = buf[4:end].decode()
    (n,) = _unpack_i16(buf, end)
    start = end + 2
    end = start + n
    if n < 0 or end > size:
        raise _bad_length("topic", n, start, buf)
    topic = buf[start:end].decode()
    (partition,) = _unpack_i32(buf, end)
    if end + 4 != size:
        raise _trailing(end + 4, buf)
    return OffsetCommitKey(group, topic, partition)


def _decode_one_string(buf: bytes, name: str) -> str:
    size = len(buf)
    (n,) = _unpack_i16(buf, 2)
    end = 4 + n
    if n < 0 or end > size:
        raise _bad_length(name, n, 4, buf)
    if end != size:
        raise _trailing(end, buf)
    return buf[4:end].decode()


def _decode_two_strings(buf: bytes, first: str, second: str) -> tuple[str, str]:
    size = len(buf)
    (n,) = _unpack_i16(buf, 2)
    end = 4 + n
    if n < 0 or end > size:
        raise _bad_length(first, n, 4, buf)
    a = buf[4:end].decode()
    (n,) = _unpack_i16(buf, end)
    start = end + 2
    end = start + n
    if n < 0 or end > size:
        raise _bad_length(second, n, start, buf)
    if end != size:
        raise _trailing(end, buf)
    return a, buf[start:end].decode()


def _decode_group_metadata_key(buf: bytes) -> GroupMetadataKey:
    return GroupMetadataKey(_decode_one_string(buf, "group"))


def _decode_consumer_group_metadata_key(buf: bytes) -> ConsumerGroupMetadataKey:
    return ConsumerGroupMetadataKey(_decode_one_string(buf, "GroupId"))


def _decode_partition_metadata_key(buf: bytes) -> ConsumerGroupPartitionMetadataKey:
    return ConsumerGroupPartitionMetadataKey(_decode_one_string(buf, "GroupId"))


def _decode_member_metadata_key(buf: bytes) -> ConsumerGroupMemberMetadataKey:
    return ConsumerGroupMemberMetadataKey(*_decode_two_strings(buf, "GroupId", "MemberId"))


def _decode_target_metadata_key(buf: bytes) -> ConsumerGroupTargetAssignmentMetadataKey:
    return ConsumerGroupTargetAssignmentMetadataKey(_decode_one_string(buf, "GroupId"))


def _decode_target_member_key(buf: bytes) -> ConsumerGroupTargetAssignmentMemberKey:
    return ConsumerGroupTargetAssignmentMemberKey(*_decode_two_strings(buf, "GroupId", "MemberId"))


def _decode_current_assignment_key(buf: bytes) -> ConsumerGroupCurrentMemberAssignmentKey:
    return ConsumerGroupCurrentMemberAssignmentKey(*_decode_two_strings(buf, "GroupId", "MemberId"))


def _decode_regex_key(buf: bytes) -> ConsumerGroupRegularExpressionKey:
    return ConsumerGroupRegularExpressionKey(
        *_decode_two_strings(buf, "GroupId", "RegularExpression")
    )


def _encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    group = _check_string(key.group.encode())
    topic = _check_string(key.topic.encode())
    # Kafka writes key version 1; version 0 has the same fields and is read too.
    return (
        _I16_I16.pack(1, len(group))
        + group
        + _pack_i16(len(topic))
        + topic
        + _pack_i32(key.partition)
    )


def _one_string_key(record_type: int, value: str) -> bytes:
    data = _check_string(value.encode())
    return _I16_I16.pack(record_type, len(data)) + data


def _two_string_key(record_type: int, first: str, second: str) -> bytes:
    a = _check_string(first.encode())
    b = _check_string(second.encode())
    return _I16_I16.pack(record_type, len(a)) + a + _pack_i16(len(b)) + b


def _encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    return _one_string_key(2, key.group)


def _encode_consumer_group_metadata_key(key: ConsumerGroupMetadataKey) -> bytes:
    return _one_string_key(3, key.group_id)


def _encode_partition_metadata_key(key: ConsumerGroupPartitionMetadataKey) -> bytes:
    return _one_string_key(4, key.group_id)


def _encode_member_metadata_key(key: ConsumerGroupMemberMetadataKey) -> bytes:
    return _two_string_key(5, key.group_id, key.member_id)


def _encode_target_metadata_key(key: ConsumerGroupTargetAssignmentMetadataKey) -> bytes:
    return _one_string_key(6, key.group_id)


def _encode_target_member_key(key: ConsumerGroupTargetAssignmentMemberKey) -> bytes:
    return _two_string_key(7, key.group_id, key.member_id)


def _encode_current_assignment_key(key: ConsumerGroupCurrentMemberAssignmentKey) -> bytes:
    return _two_string_key(8, key.group_id, key.member_id)


def _encode_regex_key(key: ConsumerGroupRegularExpressionKey) -> bytes:
    return _two_string_key(16, key.group_id, key.regular_expression)


# --- type 0/1 value: OffsetCommitValue v0-v4 ----------------------------------------------------


def _decode_offset_commit_value(buf: bytes) -> OffsetCommitValue:
    size = len(buf)
    (version,) = _unpack_i16(buf, 0)
    if version == 3:
        # v3: offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
        offset, leader_epoch, n = _I64_I32_I16.unpack_from(buf, 2)
        end = 16 + n
        if n < 0 or end > size:
            raise _bad_length("metadata", n, 16, buf)
        metadata = buf[16:end].decode()
        (commit_timestamp,) = _unpack_i64(buf, end)
        if end + 8 != size:
            raise _trailing(end + 8, buf)
        return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, -1)
    if version == 1:
        # v1: offset int64, metadata string, commitTimestamp int64, expireTimestamp int64
        offset, n = _I64_I16.unpack_from(buf, 2)
        end = 12 + n
        if n < 0 or end > size:
            raise _bad_length("metadata", n, 12, buf)
        metadata = buf[12:end].decode()
        commit_timestamp, expire_timestamp = _I64_I64.unpack_from(buf, end)
        if end + 16 != size:
            raise _trailing(end + 16, buf)
        return OffsetCommitValue(offset, -1, metadata, commit_timestamp, expire_timestamp)
    if version == 0 or version == 2:
        # v0, v2: offset int64, metadata string, commitTimestamp int64
        offset, n = _I64_I16.unpack_from(buf, 2)
        end = 12 + n
        if n < 0 or end > size:
            raise _bad_length("metadata", n, 12, buf)
        metadata = buf[12:end].decode()
        (commit_timestamp,) = _unpack_i64(buf, end)
        if end + 8 != size:
            raise _trailing(end + 8, buf)
        return OffsetCommitValue(offset, -1, metadata, commit_timestamp, -1)
    if version == 4:
        # v4 (flexible): v3's fields, metadata a compact string, then tagged fields
        offset, leader_epoch = _I64_I32.unpack_from(buf, 2)
        metadata, pos = read_compact_string(buf, 14, "metadata")
        (commit_timestamp,) = _unpack_i64(buf, pos)
        pos = skip_tagged_fields(buf, pos + 8)
        if pos != size:
            raise _trailing(pos, buf)
        return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, -1)
    raise _unsupported_version(version, "0-4")


def _encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    metadata = _check_string(value.metadata.encode())
    if value.expire_timestamp != -1:
        return (
            _I16_I64_I16.pack(1, value.offset, len(metadata))
            + metadata
            + _I64_I64.pack(value.commit_timestamp, value.expire_timestamp)
        )
    return (
        _I16_I64_I32_I16.pack(3, value.offset, value.leader_epoch, len(metadata))
        + metadata
        + _pack_i64(value.commit_timestamp)
    )


# --- type 2 value: GroupMetadataValue v0-v4 -----------------------------------------------------


def _decode_group_metadata_value(buf: bytes) -> GroupMetadataValue:
    (version,) = _unpack_i16(buf, 0)
    if not 0 <= version <= 4:
        raise _unsupported_version(version, "0-4")
    flexible = version >= 4
    if flexible:
        read_str, read_nstr, read_byt = (
            read_compact_string,
            read_compact_nullable_string,
            read_compact_bytes,
        )
    else:
        read_str, read_nstr, read_byt = read_string, read_nullable_string, read_bytes
    protocol_type, pos = read_str(buf, 2, "protocolType")
    (generation,) = _unpack_i32(buf, pos)
    protocol, pos = read_nstr(buf, pos + 4, "protocol")
    leader, pos = read_nstr(buf, pos, "leader")
    current_state_timestamp = -1
    if version >= 2:
        (current_state_timestamp,) = _unpack_i64(buf, pos)
        pos += 8
    # A member takes at least 4 string/bytes lengths even when compact.
    if flexible:
        count, pos = read_compact_array_length(buf, pos, "members", 4)
    else:
        count, pos = read_array_length(buf, pos, "members", 12)
    members = []
    for _ in range(count):
        member_id, pos = read_str(buf, pos, "memberId")
        group_instance_id = None
        if version >= 3:
            group_instance_id, pos = read_nstr(buf, pos, "groupInstanceId")
        client_id, pos = read_str(buf, pos, "clientId")
        client_host, pos = read_str(buf, pos, "clientHost")
        rebalance_timeout = -1
        if version >= 1:
            rebalance_timeout, session_timeout = _I32_I32.unpack_from(buf, pos)
            pos += 8
        else:
            (session_timeout,) = _unpack_i32(buf, pos)
            pos += 4
        subscription, pos = read_byt(buf, pos, "subscription")
        assignment, pos = read_byt(buf, pos, "assignment")
        if flexible:
            pos = skip_tagged_fields(buf, pos)
        members.append(
            GroupMemberMetadata(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    if flexible:
        pos = skip_tagged_fields(buf, pos)
    if pos != len(buf):
        raise _trailing(pos, buf)
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members)
    )


def _encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    # GroupMetadataValue.json v3
    parts = [
        _pack_i16(3),
        string(value.protocol_type),
        _pack_i32(value.generation),
        nullable_string(value.protocol),
        nullable_string(value.leader),
        _pack_i64(value.current_state_timestamp),
        _pack_i32(len(value.members)),
    ]
    for m in value.members:
        parts += (
            string(m.member_id),
            nullable_string(m.group_instance_id),
            string(m.client_id),
            string(m.client_host),
            _I32_I32.pack(m.rebalance_timeout, m.session_timeout),
            wire_bytes(m.subscription),
            wire_bytes(m.assignment),
        )
    return b"".join(parts)


# --- KIP-848 values (all v0, flexible) ----------------------------------------------------------


def _check_v0(buf: bytes) -> None:
    (version,) = _unpack_i16(buf, 0)
    if version != 0:
        raise _unsupported_version(version, "0")


def _end_of_struct(buf: bytes, pos: int) -> None:
    """Skip the message's tagged fields and require that nothing follows them."""
    if buf[pos] == 0:
        pos += 1
    else:
        pos = read_tagged_fields(buf, pos)[1]
    if pos != len(buf):
        raise _trailing(pos, buf)


def _decode_consumer_group_metadata_value(buf: bytes) -> ConsumerGroupMetadataValue:
    # ConsumerGroupMetadataValue.json v0: Epoch int32
    version, epoch = _I16_I32.unpack_from(buf, 0)
    if version != 0:
        raise _unsupported_version(version, "0")
    _end_of_struct(buf, 6)
    return ConsumerGroupMetadataValue(epoch)


def _decode_target_metadata_value(buf: bytes) -> ConsumerGroupTargetAssignmentMetadataValue:
    # ConsumerGroupTargetAssignmentMetadataValue.json v0: AssignmentEpoch int32
    version, epoch = _I16_I32.unpack_from(buf, 0)
    if version != 0:
        raise _unsupported_version(version, "0")
    _end_of_struct(buf, 6)
    return ConsumerGroupTargetAssignmentMetadataValue(epoch)


def _decode_partition_metadata_value(buf: bytes) -> ConsumerGroupPartitionMetadataValue:
    # ConsumerGroupPartitionMetadataValue.json v0 (3.8+; 3.7 had a leading Epoch int32)
    _check_v0(buf)
    # A topic takes at least uuid(16) + name(1) + int32(4) + array(1) + tags(1) bytes.
    count, pos = read_compact_array_length(buf, 2, "Topics", 23)
    topics = []
    for _ in range(count):
        topic_id, pos = read_uuid(buf, pos)
        topic_name, pos = read_compact_string(buf, pos, "TopicName")
        (num_partitions,) = _unpack_i32(buf, pos)
        n, pos = read_compact_array_length(buf, pos + 4, "PartitionMetadata", 6)
        partition_metadata = []
        for _ in range(n):
            (partition,) = _unpack_i32(buf, pos)
            racks, pos = read_compact_string_array(buf, pos + 4, "Racks")
            pos = skip_tagged_fields(buf, pos)
            partition_metadata.append(PartitionMetadata(partition, racks))
        pos = skip_tagged_fields(buf, pos)
        topics.append(
            TopicMetadata(topic_id, topic_name, num_partitions, tuple(partition_metadata))
        )
    _end_of_struct(buf, pos)
    return ConsumerGroupPartitionMetadataValue(tuple(topics))


def _read_classic_member_metadata(buf: bytes, start: int, end: int) -> ClassicMemberMetadata | None:
    # Tag 0 of ConsumerGroupMemberMetadataValue.json v0: a nullable struct in a tagged field is
    # `uvarint presence (0 = null)` + {SessionTimeoutMs int32,
    # SupportedProtocols []{Name string, Metadata bytes, tags}, tags}. Read from a copy bounded
    # by the tag's size, so that the struct cannot run into the bytes after it.
    data = buf[start:end]
    present, pos = read_uvarint(data, 0)
    if present == 0:
        result = None
    else:
        (session_timeout_ms,) = _unpack_i32(data, pos)
        count, pos = read_compact_array_length(data, pos + 4, "SupportedProtocols", 3)
        protocols = []
        for _ in range(count):
            name, pos = read_compact_string(data, pos, "SupportedProtocols.Name")
            metadata, pos = read_compact_bytes(data, pos, "SupportedProtocols.Metadata")
            pos = skip_tagged_fields(data, pos)
            protocols.append(ClassicProtocol(name, metadata))
        pos = skip_tagged_fields(data, pos)
        result = ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
    if pos != len(data):
        raise WireFormatError(
            f"tagged field 0 (ClassicMemberMetadata) has size {len(data)} "
            f"but its struct ends after {pos} bytes"
        )
    return result


def _decode_member_metadata_value(buf: bytes) -> ConsumerGroupMemberMetadataValue:
    # ConsumerGroupMemberMetadataValue.json v0
    _check_v0(buf)
    instance_id, pos = read_compact_nullable_string(buf, 2, "InstanceId")
    rack_id, pos = read_compact_nullable_string(buf, pos, "RackId")
    client_id, pos = read_compact_string(buf, pos, "ClientId")
    client_host, pos = read_compact_string(buf, pos, "ClientHost")
    topic_names, pos = read_compact_string_array(buf, pos, "SubscribedTopicNames")
    regex, pos = read_compact_nullable_string(buf, pos, "SubscribedTopicRegex")
    (rebalance_timeout_ms,) = _unpack_i32(buf, pos)
    server_assignor, pos = read_compact_nullable_string(buf, pos + 4, "ServerAssignor")
    classic = None
    if buf[pos] == 0:
        pos += 1
    else:
        fields, pos = read_tagged_fields(buf, pos)
        for tag, start, end in fields:
            if tag == 0:
                classic = _read_classic_member_metadata(buf, start, end)
    if pos != len(buf):
        raise _trailing(pos, buf)
    return ConsumerGroupMemberMetadataValue(
        instance_id,
        rack_id,
        client_id,
        client_host,
        topic_names,
        regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    )


def _read_topic_partitions(
    buf: bytes, pos: int, name: str
) -> tuple[tuple[TopicPartitions, ...], int]:
    """`[]TopicPartitions` (flexible): {TopicId uuid, Partitions []int32, tags} per element."""
    # An element takes at least uuid(16) + empty array(1) + tags(1) bytes.
    count, pos = read_compact_array_length(buf, pos, name, 18)
    out = []
    for _ in range(count):
        topic_id, pos = read_uuid(buf, pos)
        partitions, pos = read_int32_compact_array(buf, pos, name)
        if buf[pos] == 0:
            pos += 1
        else:
            pos = read_tagged_fields(buf, pos)[1]
        out.append(TopicPartitions(topic_id, partitions))
    return tuple(out), pos


def _decode_target_member_value(buf: bytes) -> ConsumerGroupTargetAssignmentMemberValue:
    # ConsumerGroupTargetAssignmentMemberValue.json v0: TopicPartitions []{TopicId, Partitions}
    _check_v0(buf)
    topic_partitions, pos = _read_topic_partitions(buf, 2, "TopicPartitions")
    _end_of_struct(buf, pos)
    return ConsumerGroupTargetAssignmentMemberValue(topic_partitions)


def _decode_current_assignment_value(buf: bytes) -> ConsumerGroupCurrentMemberAssignmentValue:
    # ConsumerGroupCurrentMemberAssignmentValue.json v0: MemberEpoch int32,
    # PreviousMemberEpoch int32, State int8, AssignedPartitions, PartitionsPendingRevocation
    version, member_epoch, previous_member_epoch, state = _I16_I32_I32_I8.unpack_from(buf, 0)
    if version != 0:
        raise _unsupported_version(version, "0")
    assigned, pos = _read_topic_partitions(buf, 11, "AssignedPartitions")
    pending, pos = _read_topic_partitions(buf, pos, "PartitionsPendingRevocation")
    _end_of_struct(buf, pos)
    return ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch, previous_member_epoch, state, assigned, pending
    )


def _decode_regex_value(buf: bytes) -> ConsumerGroupRegularExpressionValue:
    # ConsumerGroupRegularExpressionValue v0: Topics []string, Version int64, Timestamp int64
    _check_v0(buf)
    topics, pos = read_compact_string_array(buf, 2, "Topics")
    version, timestamp = _I64_I64.unpack_from(buf, pos)
    _end_of_struct(buf, pos + 16)
    return ConsumerGroupRegularExpressionValue(topics, version, timestamp)


_V0_I32_TAGLESS = struct.Struct(">hib")


def _encode_consumer_group_metadata_value(value: ConsumerGroupMetadataValue) -> bytes:
    return _V0_I32_TAGLESS.pack(0, value.epoch, 0)


def _encode_target_metadata_value(value: ConsumerGroupTargetAssignmentMetadataValue) -> bytes:
    return _V0_I32_TAGLESS.pack(0, value.assignment_epoch, 0)


def _encode_partition_metadata_value(value: ConsumerGroupPartitionMetadataValue) -> bytes:
    parts = [b"\x00\x00", uvarint(len(value.topics) + 1)]
    for t in value.topics:
        parts += (
            t.topic_id.bytes,
            compact_string(t.topic_name),
            _pack_i32(t.num_partitions),
            uvarint(len(t.partition_metadata) + 1),
        )
        for pm in t.partition_metadata:
            parts += (_pack_i32(pm.partition), compact_string_array(pm.racks), b"\x00")
        parts.append(b"\x00")
    parts.append(b"\x00")
    return b"".join(parts)


def _classic_member_metadata_tag(classic: ClassicMemberMetadata) -> bytes:
    body = [
        b"\x01",
        _pack_i32(classic.session_timeout_ms),
        uvarint(len(classic.supported_protocols) + 1),
    ]
    for p in classic.supported_protocols:
        body += (compact_string(p.name), compact_bytes(p.metadata), b"\x00")
    body.append(b"\x00")
    data = b"".join(body)
    # one tagged field, tag 0, size (presence byte included), data
    return b"\x01\x00" + uvarint(len(data)) + data


def _encode_member_metadata_value(value: ConsumerGroupMemberMetadataValue) -> bytes:
    classic = value.classic_member_metadata
    return b"".join(
        (
            b"\x00\x00",
            compact_nullable_string(value.instance_id),
            compact_nullable_string(value.rack_id),
            compact_string(value.client_id),
            compact_string(value.client_host),
            compact_string_array(value.subscribed_topic_names),
            compact_nullable_string(value.subscribed_topic_regex),
            _pack_i32(value.rebalance_timeout_ms),
            compact_nullable_string(value.server_assignor),
            b"\x00" if classic is None else _classic_member_metadata_tag(classic),
        )
    )


def _topic_partitions(parts: list[bytes], items: Sequence[TopicPartitions]) -> None:
    parts.append(uvarint(len(items) + 1))
    for tp in items:
        parts += (tp.topic_id.bytes, int32_compact_array(tp.partitions), b"\x00")


def _encode_target_member_value(value: ConsumerGroupTargetAssignmentMemberValue) -> bytes:
    parts = [b"\x00\x00"]
    _topic_partitions(parts, value.topic_partitions)
    parts.append(b"\x00")
    return b"".join(parts)


def _encode_current_assignment_value(value: ConsumerGroupCurrentMemberAssignmentValue) -> bytes:
    parts = [_I16_I32_I32_I8.pack(0, value.member_epoch, value.previous_member_epoch, value.state)]
    _topic_partitions(parts, value.assigned_partitions)
    _topic_partitions(parts, value.partitions_pending_revocation)
    parts.append(b"\x00")
    return b"".join(parts)


def _encode_regex_value(value: ConsumerGroupRegularExpressionValue) -> bytes:
    return (
        b"\x00\x00"
        + compact_string_array(value.topics)
        + _I64_I64.pack(value.version, value.timestamp)
        + b"\x00"
    )


# --- dispatch -----------------------------------------------------------------------------------

_KEY_DECODERS: dict[int, Callable[[bytes], RecordKey]] = {
    0: _decode_offset_commit_key,
    1: _decode_offset_commit_key,
    2: _decode_group_metadata_key,
    3: _decode_consumer_group_metadata_key,
    4: _decode_partition_metadata_key,
    5: _decode_member_metadata_key,
    6: _decode_target_metadata_key,
    7: _decode_target_member_key,
    8: _decode_current_assignment_key,
    16: _decode_regex_key,
}

_VALUE_DECODERS: dict[int, Callable[[bytes], RecordValue]] = {
    0: _decode_offset_commit_value,
    1: _decode_offset_commit_value,
    2: _decode_group_metadata_value,
    3: _decode_consumer_group_metadata_value,
    4: _decode_partition_metadata_value,
    5: _decode_member_metadata_value,
    6: _decode_target_metadata_value,
    7: _decode_target_member_value,
    8: _decode_current_assignment_value,
    16: _decode_regex_value,
}

# Encoders are looked up by the object's exact class; `Any` because each takes its own class.
_KEY_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    OffsetCommitKey: _encode_offset_commit_key,
    GroupMetadataKey: _encode_group_metadata_key,
    ConsumerGroupMetadataKey: _encode_consumer_group_metadata_key,
    ConsumerGroupPartitionMetadataKey: _encode_partition_metadata_key,
    ConsumerGroupMemberMetadataKey: _encode_member_metadata_key,
    ConsumerGroupTargetAssignmentMetadataKey: _encode_target_metadata_key,
    ConsumerGroupTargetAssignmentMemberKey: _encode_target_member_key,
    ConsumerGroupCurrentMemberAssignmentKey: _encode_current_assignment_key,
    ConsumerGroupRegularExpressionKey: _encode_regex_key,
}

_VALUE_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    OffsetCommitValue: _encode_offset_commit_value,
    GroupMetadataValue: _encode_group_metadata_value,
    ConsumerGroupMetadataValue: _encode_consumer_group_metadata_value,
    ConsumerGroupPartitionMetadataValue: _encode_partition_metadata_value,
    ConsumerGroupMemberMetadataValue: _encode_member_metadata_value,
    ConsumerGroupTargetAssignmentMetadataValue: _encode_target_metadata_value,
    ConsumerGroupTargetAssignmentMemberValue: _encode_target_member_value,
    ConsumerGroupCurrentMemberAssignmentValue: _encode_current_assignment_value,
    ConsumerGroupRegularExpressionValue: _encode_regex_value,
}

_VALUE_CLASS_OF_KEY: dict[type, type] = {
    OffsetCommitKey: OffsetCommitValue,
    GroupMetadataKey: GroupMetadataValue,
    ConsumerGroupMetadataKey: ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey: ConsumerGroupPartitionMetadataValue,
    ConsumerGroupMemberMetadataKey: ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataKey: ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey: ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentKey: ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupRegularExpressionKey: ConsumerGroupRegularExpressionValue,
}

# What a failed fixed-width read or string decode looks like, and what it means.
_DECODE_FAILURES = (WireFormatError, struct.error, IndexError, UnicodeDecodeError)
_ENCODE_FAILURES = (struct.error, ValueError, TypeError, AttributeError, OverflowError)


def _describe(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 in a string ({exc.reason} at byte {exc.start} of the string)"
    if isinstance(exc, (struct.error, IndexError)):
        return "truncated: a field runs past the end of the bytes"
    return str(exc)


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    return data if type(data) is bytes else bytes(data)


# --- public API ---------------------------------------------------------------------------------


def _record_type(key_bytes: bytes) -> int:
    if len(key_bytes) < 2:
        raise RecordDecodeError(None, f"key of {len(key_bytes)} bytes has no record type")
    (record_type,) = _unpack_i16(key_bytes, 0)
    return int(record_type)


def decode_key(key_bytes: bytes | bytearray | memoryview) -> RecordKey:
    """Decode a key; raises UnknownRecordTypeError or RecordDecodeError."""
    key_bytes = _as_bytes(key_bytes)
    record_type = _record_type(key_bytes)
    decoder = _KEY_DECODERS.get(record_type)
    if decoder is None:
        raise UnknownRecordTypeError(record_type)
    try:
        return decoder(key_bytes)
    except _DECODE_FAILURES as exc:
        raise RecordDecodeError(record_type, f"key: {_describe(exc)}") from exc


def decode_value(
    record_type: int, value_bytes: bytes | bytearray | memoryview | None
) -> RecordValue | None:
    """Decode the value of a record of `record_type` (None stays None: a tombstone)."""
    if value_bytes is None:
        return None
    value_bytes = _as_bytes(value_bytes)
    decoder = _VALUE_DECODERS.get(record_type)
    if decoder is None:
        raise UnknownRecordTypeError(record_type)
    try:
        return decoder(value_bytes)
    except _DECODE_FAILURES as exc:
        description = f"value: {_describe(exc)}"
        if record_type in _EARLY_ACCESS_TYPES:
            description += _EARLY_ACCESS_HINT
        raise RecordDecodeError(record_type, description) from exc


def decode_record(
    key_bytes: bytes | bytearray | memoryview,
    value_bytes: bytes | bytearray | memoryview | None,
) -> CoordinatorRecord:
    """Decode one `__consumer_offsets` record; a None value is a tombstone.

    Raises UnknownRecordTypeError (skip the record) or RecordDecodeError (stop the load).
    """
    key_bytes = _as_bytes(key_bytes)
    record_type = _record_type(key_bytes)
    key_decoder = _KEY_DECODERS.get(record_type)
    if key_decoder is None:
        raise UnknownRecordTypeError(record_type)
    try:
        key = key_decoder(key_bytes)
    except _DECODE_FAILURES as exc:
        raise RecordDecodeError(record_type, f"key: {_describe(exc)}") from exc
    if value_bytes is None:
        return CoordinatorRecord(key, None)
    value_bytes = _as_bytes(value_bytes)
    try:
        value = _VALUE_DECODERS[record_type](value_bytes)
    except _DECODE_FAILURES as exc:
        description = f"value: {_describe(exc)}"
        if record_type in _EARLY_ACCESS_TYPES:
            description += _EARLY_ACCESS_HINT
        raise RecordDecodeError(record_type, description) from exc
    return CoordinatorRecord(key, value)


def encode_key(key: RecordKey) -> bytes:
    """`int16 record type` + key message (offset commits as key version 1, as Kafka writes)."""
    encoder = _KEY_ENCODERS.get(type(key))
    if encoder is None:
        raise RecordEncodeError(f"{type(key).__name__} is not a coordinator record key")
    try:
        return encoder(key)
    except RecordEncodeError:
        raise
    except _ENCODE_FAILURES as exc:
        raise RecordEncodeError(f"cannot encode {key!r}: {exc}") from exc


def encode_value(value: RecordValue | None) -> bytes | None:
    """`int16 value version` + value message; None (a tombstone) stays None."""
    if value is None:
        return None
    encoder = _VALUE_ENCODERS.get(type(value))
    if encoder is None:
        raise RecordEncodeError(f"{type(value).__name__} is not a coordinator record value")
    try:
        return encoder(value)
    except RecordEncodeError:
        raise
    except _ENCODE_FAILURES as exc:
        raise RecordEncodeError(f"cannot encode {type(value).__name__}: {exc}") from exc


def encode_record(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    """Encode key and value; refuses a value that belongs to another record type, since the
    log would then hold a record no reader can decode."""
    key, value = record.key, record.value
    if value is not None and _VALUE_CLASS_OF_KEY.get(type(key)) is not type(value):
        raise RecordEncodeError(f"{type(key).__name__} cannot have a {type(value).__name__} value")
    return encode_key(key), encode_value(value)
