"""KIP-848 consumer group values: record types 3-8 and 16, value version 0, flexible.

Layouts of Kafka 3.8+/4.0 (`ConsumerGroup*Value.json`; type 16 is Kafka 4.0's
`ConsumerGroupRegularExpressionValue`). Every struct ends with a tagged-fields section; we write
it empty, except for tag 0 of the member value, `ClassicMemberMetadata`, and skip the tags we do
not know on read, as Kafka's generated readers do (later Kafka adds some: `MetadataHash` in
type 3, ...). Tag 0 of type 8's partitions, `AssignmentEpochs` (Kafka 4.3+), is read and written.

    3  ConsumerGroupMetadataValue                  Epoch int32
    4  ConsumerGroupPartitionMetadataValue         Topics [TopicId uuid, TopicName,
                                                   NumPartitions int32,
                                                   PartitionMetadata [Partition int32,
                                                   Racks []string]]
    5  ConsumerGroupMemberMetadataValue            InstanceId?, RackId?, ClientId, ClientHost,
                                                   SubscribedTopicNames []string,
                                                   SubscribedTopicRegex?, RebalanceTimeoutMs
                                                   int32, ServerAssignor?,
                                                   tag 0: ClassicMemberMetadata?
    6  ConsumerGroupTargetAssignmentMetadataValue  AssignmentEpoch int32
    7  ConsumerGroupTargetAssignmentMemberValue    TopicPartitions [TopicId, Partitions []int32]
    8  ConsumerGroupCurrentMemberAssignmentValue   MemberEpoch int32, PreviousMemberEpoch int32,
                                                   State int8, AssignedPartitions,
                                                   PartitionsPendingRevocation (both
                                                   [TopicId, Partitions []int32,
                                                   tag 0: AssignmentEpochs []int32?])
    16 ConsumerGroupRegularExpressionValue         Topics []string, Version int64,
                                                   Timestamp int64

Kafka 3.7's early-access versions of types 4, 5, 7 and 8 have other fields in the same version
0 (see `records.codec`); they are not supported and fail to decode (a null array, trailing
bytes or a truncation) rather than parse into something else.

Member and assignment records (5, 7, 8) are written for every member on every change, so their
topic-partition lists are decoded with inlined steps.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from records.construct import positional_constructor
from records.consumer_group import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ClientAssignmentMetadata,
    ClientAssignorMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
)
from records.coordinator import RecordValue
from records.wire import (
    WireFormatError,
    cached_uuid,
    compact_bytes,
    compact_nullable_string,
    compact_string,
    compact_string_array,
    int32_array_struct,
    int32_compact_array,
    read_compact_array_length,
    read_compact_bytes,
    read_compact_nullable_string,
    read_compact_string,
    read_compact_string_array,
    read_tagged_fields,
    read_uuid,
    read_uvarint,
    skip_tagged_fields,
    trailing_bytes_error,
    unsupported_version_error,
    uvarint,
)

__all__ = ["VALUE_DECODERS", "VALUE_ENCODERS"]

_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i32 = struct.Struct(">i").unpack_from
_pack_i32 = struct.Struct(">i").pack
_V0_I32 = struct.Struct(">hi")  # version, int32
_V0_I32_TAGLESS = struct.Struct(">hib")  # version, int32, empty tagged fields
_V0_I32_I32_I8 = struct.Struct(">hiib")
_I64_I64 = struct.Struct(">qq")

_new_topic_partitions = positional_constructor(TopicPartitions)
_new_member_value = positional_constructor(ConsumerGroupMemberMetadataValue)
_new_current_assignment = positional_constructor(ConsumerGroupCurrentMemberAssignmentValue)
_new_target_member = positional_constructor(ConsumerGroupTargetAssignmentMemberValue)
_new_topic_metadata = positional_constructor(TopicMetadata)
_new_partition_metadata_value = positional_constructor(ConsumerGroupPartitionMetadataValue)
_new_regex_value = positional_constructor(ConsumerGroupRegularExpressionValue)
_new_partition_metadata = positional_constructor(PartitionMetadata)
_new_classic_member_metadata = positional_constructor(ClassicMemberMetadata)
_new_classic_protocol = positional_constructor(ClassicProtocol)


def _check_v0(buf: bytes) -> None:
    (version,) = _unpack_i16(buf, 0)
    if version != 0:
        raise unsupported_version_error(version, "0")


def _end_of_message(buf: bytes, pos: int) -> None:
    """Skip the message's tagged fields and require that nothing follows them."""
    if buf[pos] == 0:
        pos += 1
    else:
        pos = read_tagged_fields(buf, pos)[1]
    if pos != len(buf):
        raise trailing_bytes_error(pos, buf)


# --- types 3 and 6: one int32 -------------------------------------------------------------------


def _int32_value_decoder(cls: type[Any]) -> Callable[[bytes], Any]:
    make = positional_constructor(cls)

    def decode(buf: bytes) -> Any:
        version, epoch = _V0_I32.unpack_from(buf, 0)
        if version != 0:
            raise unsupported_version_error(version, "0")
        _end_of_message(buf, 6)
        return make(epoch)

    decode.__name__ = f"decode_{cls.__name__}"
    return decode


def _encode_consumer_group_metadata_value(value: ConsumerGroupMetadataValue) -> bytes:
    return _V0_I32_TAGLESS.pack(0, value.epoch, 0)


def _encode_target_metadata_value(value: ConsumerGroupTargetAssignmentMetadataValue) -> bytes:
    return _V0_I32_TAGLESS.pack(0, value.assignment_epoch, 0)


# --- type 4: subscription metadata --------------------------------------------------------------


def _decode_partition_metadata_value(buf: bytes) -> ConsumerGroupPartitionMetadataValue:
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
            partition_metadata.append(_new_partition_metadata(partition, racks))
        pos = skip_tagged_fields(buf, pos)
        topics.append(_new_topic_metadata(topic_id, topic_name, num_partitions, tuple(partition_metadata)))
    _end_of_message(buf, pos)
    return _new_partition_metadata_value(tuple(topics))


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


# --- type 5: member metadata --------------------------------------------------------------------


def _read_classic_member_metadata(buf: bytes, start: int, end: int) -> ClassicMemberMetadata | None:
    """Tag 0 of the member value. A nullable struct in a tagged field is `uvarint presence`
    (0 = null, as Kafka's reader has it) + {SessionTimeoutMs int32, SupportedProtocols
    []{Name string, Metadata bytes, tags}, tags}. Read from a copy bounded by the tag's size so
    that a corrupt struct cannot run into the bytes after it, and must fill the tag exactly."""
    data = buf[start:end]
    present, pos = read_uvarint(data, 0)
    result = None
    if present != 0:
        (session_timeout_ms,) = _unpack_i32(data, pos)
        count, pos = read_compact_array_length(data, pos + 4, "SupportedProtocols", 3)
        protocols = []
        for _ in range(count):
            name, pos = read_compact_string(data, pos, "SupportedProtocols.Name")
            metadata, pos = read_compact_bytes(data, pos, "SupportedProtocols.Metadata")
            pos = skip_tagged_fields(data, pos)
            protocols.append(_new_classic_protocol(name, metadata))
        pos = skip_tagged_fields(data, pos)
        result = _new_classic_member_metadata(session_timeout_ms, tuple(protocols))
    if pos != len(data):
        raise WireFormatError(
            f"tagged field 0 (ClassicMemberMetadata) has size {len(data)} "
            f"but its struct ends after {pos} bytes"
        )
    return result


def _decode_member_metadata_value(buf: bytes) -> ConsumerGroupMemberMetadataValue:
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
    client_assignors: tuple[ClientAssignorMetadata, ...] = ()
    if buf[pos] == 0:
        pos += 1
    else:
        fields, pos = read_tagged_fields(buf, pos)
        for tag, start, end in fields:
            if tag == 0:
                classic = _read_classic_member_metadata(buf, start, end)
            elif tag == CLIENT_ASSIGNORS_TAG:
                client_assignors = _read_client_assignors(buf, start, end)
    if pos != len(buf):
        raise trailing_bytes_error(pos, buf)
    return _new_member_value(
        instance_id,
        rack_id,
        client_id,
        client_host,
        topic_names,
        regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
        client_assignors,
    )


# groupshift's tag for a member's client-side assignors (docs/client-side-assignors.md): far
# above Kafka's tags, so Kafka's generated reader keeps it as an unknown tagged field.
CLIENT_ASSIGNORS_TAG = 10000
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")


def _read_client_assignors(buf: bytes, start: int, end: int) -> tuple[ClientAssignorMetadata, ...]:
    """Tag 10000: compact []{Name string, MinimumVersion int16, MaximumVersion int16, Reason
    int8, MetadataVersion int16, Metadata bytes, tags}, filling the tag exactly."""
    data = buf[start:end]
    try:
        count, pos = read_compact_array_length(data, 0, "ClientAssignors", 9)
        out = []
        for _ in range(count):
            name, pos = read_compact_string(data, pos, "ClientAssignors.Name")
            (lo,) = _I16.unpack_from(data, pos)
            (hi,) = _I16.unpack_from(data, pos + 2)
            (reason,) = _I8.unpack_from(data, pos + 4)
            (version,) = _I16.unpack_from(data, pos + 5)
            metadata, pos = read_compact_bytes(data, pos + 7, "ClientAssignors.Metadata")
            pos = skip_tagged_fields(data, pos)
            out.append(ClientAssignorMetadata(name, lo, hi, reason, version, metadata))
    except struct.error as e:
        raise WireFormatError(f"tagged field {CLIENT_ASSIGNORS_TAG} (ClientAssignors) is truncated") from e
    if pos != len(data):
        raise WireFormatError(
            f"tagged field {CLIENT_ASSIGNORS_TAG} (ClientAssignors) has size {len(data)} "
            f"but its array ends after {pos} bytes"
        )
    return tuple(out)


def _client_assignors_data(assignors: tuple[ClientAssignorMetadata, ...]) -> bytes:
    body = [uvarint(len(assignors) + 1)]
    for a in assignors:
        body += (
            compact_string(a.name),
            _I16.pack(a.minimum_version),
            _I16.pack(a.maximum_version),
            _I8.pack(a.reason),
            _I16.pack(a.metadata_version),
            compact_bytes(a.metadata),
            b"\x00",
        )
    return b"".join(body)


def _member_tags(value: ConsumerGroupMemberMetadataValue) -> bytes:
    """The tag section: tag 0 (classic metadata) and tag 10000 (client assignors), ascending."""
    classic = value.classic_member_metadata
    if not value.client_assignors:
        return b"\x00" if classic is None else _classic_member_metadata_tag(classic)
    data = _client_assignors_data(value.client_assignors)
    tail = uvarint(CLIENT_ASSIGNORS_TAG) + uvarint(len(data)) + data
    if classic is None:
        return b"\x01" + tail
    return b"\x02" + _classic_member_metadata_tag(classic)[1:] + tail


def _classic_member_metadata_tag(classic: ClassicMemberMetadata) -> bytes:
    body = [
        b"\x01",  # present
        _pack_i32(classic.session_timeout_ms),
        uvarint(len(classic.supported_protocols) + 1),
    ]
    for p in classic.supported_protocols:
        body += (compact_string(p.name), compact_bytes(p.metadata), b"\x00")
    body.append(b"\x00")
    data = b"".join(body)
    return b"\x01\x00" + uvarint(len(data)) + data  # 1 tagged field: tag 0, size, data


def _encode_member_metadata_value(value: ConsumerGroupMemberMetadataValue) -> bytes:
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
            _member_tags(value),
        )
    )


# --- types 7 and 8: assignments -----------------------------------------------------------------


def _read_assignment_epochs(buf: bytes, start: int, end: int, name: str) -> tuple[int, ...] | None:
    """Tag 0 of type 8's `TopicPartitions`: a compact nullable `[]int32` filling the tag exactly."""
    if start >= end:
        raise WireFormatError(f"tagged field 0 ({name}.AssignmentEpochs) is empty")
    n = buf[start]
    if n < 0x80:
        pos = start + 1
    else:
        n, pos = read_uvarint(buf, start)
    if n == 0:
        stop = pos
        epochs = None
    else:
        stop = pos + 4 * (n - 1)
        if stop > end:
            raise WireFormatError(f"{name}.AssignmentEpochs: {n - 1} epochs cannot fit in {end - pos} bytes")
        epochs = int32_array_struct(n - 1).unpack_from(buf, pos)
    if stop != end:
        raise WireFormatError(
            f"tagged field 0 ({name}.AssignmentEpochs) has size {end - start} "
            f"but its array ends after {stop - start} bytes"
        )
    return epochs


def _read_topic_partitions(
    buf: bytes, pos: int, name: str, with_epochs: bool = False
) -> tuple[tuple[TopicPartitions, ...], int]:
    """`[]TopicPartitions`: {TopicId uuid, Partitions []int32, tags} per element, inlined.
    `with_epochs` (type 8): tag 0 is `AssignmentEpochs`; other tags are skipped."""
    size = len(buf)
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    count = n - 1
    if count < 0:
        raise WireFormatError(f"{name}: non-nullable array was serialized as null")
    # An element takes at least uuid(16) + empty array(1) + tags(1) bytes.
    if count * 18 > size - pos:
        raise WireFormatError(f"{name}: {count} elements cannot fit in {size - pos} bytes")
    out = []
    for _ in range(count):
        end = pos + 16
        topic_id = cached_uuid(buf[pos:end])
        if topic_id is None:
            topic_id = read_uuid(buf, pos)[0]
        n = buf[end]
        if n < 0x80:
            pos = end + 1
        else:
            n, pos = read_uvarint(buf, end)
        n -= 1
        end = pos + 4 * n
        if n < 0 or end > size:
            if n < 0:
                raise WireFormatError(f"{name}: non-nullable Partitions serialized as null")
            raise WireFormatError(f"{name}: {n} partitions cannot fit in {size - pos} bytes")
        partitions = int32_array_struct(n).unpack_from(buf, pos)
        epochs = None
        tags = buf[end]
        if tags == 0:
            pos = end + 1
        elif with_epochs and tags == 1 and end + 2 < size and buf[end + 1] == 0 and buf[end + 2] < 0x80:
            # The usual case of type 8 (Kafka 4.3+ and groupshift): tag 0 alone, a short one.
            start = end + 3
            pos = start + buf[end + 2]
            if pos > size:
                raise WireFormatError(f"tagged field 0: size {buf[end + 2]} but {size - start} bytes left")
            epochs = _read_assignment_epochs(buf, start, pos, name)
        else:
            fields, pos = read_tagged_fields(buf, end)
            if with_epochs:
                for tag, start, stop in fields:
                    if tag == 0:
                        epochs = _read_assignment_epochs(buf, start, stop, name)
        out.append(_new_topic_partitions(topic_id, partitions, epochs))
    return tuple(out), pos


def _decode_target_member_value(buf: bytes) -> ConsumerGroupTargetAssignmentMemberValue:
    _check_v0(buf)
    topic_partitions, pos = _read_topic_partitions(buf, 2, "TopicPartitions")
    client_metadata = None
    if buf[pos] != 0:
        fields, end = read_tagged_fields(buf, pos)
        for tag, start, stop in fields:
            if tag == CLIENT_ASSIGNORS_TAG:
                client_metadata = _read_client_assignment_metadata(buf, start, stop)
        if end != len(buf):
            raise trailing_bytes_error(end, buf)
        return _new_target_member(topic_partitions, client_metadata)
    _end_of_message(buf, pos)
    return _new_target_member(topic_partitions, client_metadata)


def _read_client_assignment_metadata(buf: bytes, start: int, end: int) -> ClientAssignmentMetadata:
    """Tag 10000 of the target member value: {Version int16, Metadata compact bytes}, exactly."""
    data = buf[start:end]
    try:
        (version,) = _I16.unpack_from(data, 0)
    except struct.error as e:
        raise WireFormatError(f"tagged field {CLIENT_ASSIGNORS_TAG} (ClientMetadata) is truncated") from e
    metadata, pos = read_compact_bytes(data, 2, "ClientMetadata.Metadata")
    if pos != len(data):
        raise WireFormatError(
            f"tagged field {CLIENT_ASSIGNORS_TAG} (ClientMetadata) has size {len(data)} "
            f"but its struct ends after {pos} bytes"
        )
    return ClientAssignmentMetadata(version, metadata)


def _decode_current_assignment_value(buf: bytes) -> ConsumerGroupCurrentMemberAssignmentValue:
    version, member_epoch, previous_member_epoch, state = _V0_I32_I32_I8.unpack_from(buf, 0)
    if version != 0:
        raise unsupported_version_error(version, "0")
    assigned, pos = _read_topic_partitions(buf, 11, "AssignedPartitions", True)
    pending, pos = _read_topic_partitions(buf, pos, "PartitionsPendingRevocation", True)
    _end_of_message(buf, pos)
    return _new_current_assignment(member_epoch, previous_member_epoch, state, assigned, pending)


def _topic_partitions(parts: list[bytes], items: Sequence[TopicPartitions]) -> None:
    """Type 7's and type 8's `[]TopicPartitions`; tag 0 (`AssignmentEpochs`) when the element
    carries epochs (only type 8's do), written as Kafka does: absent when None or empty."""
    parts.append(uvarint(len(items) + 1))
    for tp in items:
        parts += (tp.topic_id.bytes, int32_compact_array(tp.partitions))
        epochs = tp.assignment_epochs
        if not epochs:
            parts.append(b"\x00")
        else:
            array = int32_compact_array(epochs)
            parts += (b"\x01\x00", uvarint(len(array)), array)


def _encode_target_member_value(value: ConsumerGroupTargetAssignmentMemberValue) -> bytes:
    parts = [b"\x00\x00"]
    _topic_partitions(parts, value.topic_partitions)
    meta = value.client_metadata
    if meta is None:
        parts.append(b"\x00")
    else:
        data = _I16.pack(meta.version) + compact_bytes(meta.metadata)
        parts += (b"\x01", uvarint(CLIENT_ASSIGNORS_TAG), uvarint(len(data)), data)
    return b"".join(parts)


def _encode_current_assignment_value(value: ConsumerGroupCurrentMemberAssignmentValue) -> bytes:
    parts = [_V0_I32_I32_I8.pack(0, value.member_epoch, value.previous_member_epoch, value.state)]
    _topic_partitions(parts, value.assigned_partitions)
    _topic_partitions(parts, value.partitions_pending_revocation)
    parts.append(b"\x00")
    return b"".join(parts)


# --- type 16: resolved regular expression -------------------------------------------------------


def _decode_regex_value(buf: bytes) -> ConsumerGroupRegularExpressionValue:
    _check_v0(buf)
    topics, pos = read_compact_string_array(buf, 2, "Topics")
    version, timestamp = _I64_I64.unpack_from(buf, pos)
    _end_of_message(buf, pos + 16)
    return _new_regex_value(topics, version, timestamp)


def _encode_regex_value(value: ConsumerGroupRegularExpressionValue) -> bytes:
    return (
        b"\x00\x00"
        + compact_string_array(value.topics)
        + _I64_I64.pack(value.version, value.timestamp)
        + b"\x00"
    )


VALUE_DECODERS: dict[int, Callable[[bytes], RecordValue]] = {
    3: _int32_value_decoder(ConsumerGroupMetadataValue),
    4: _decode_partition_metadata_value,
    5: _decode_member_metadata_value,
    6: _int32_value_decoder(ConsumerGroupTargetAssignmentMetadataValue),
    7: _decode_target_member_value,
    8: _decode_current_assignment_value,
    16: _decode_regex_value,
}
"""Record type -> decoder of the whole value bytes (version included)."""

VALUE_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    ConsumerGroupMetadataValue: _encode_consumer_group_metadata_value,
    ConsumerGroupPartitionMetadataValue: _encode_partition_metadata_value,
    ConsumerGroupMemberMetadataValue: _encode_member_metadata_value,
    ConsumerGroupTargetAssignmentMetadataValue: _encode_target_metadata_value,
    ConsumerGroupTargetAssignmentMemberValue: _encode_target_member_value,
    ConsumerGroupCurrentMemberAssignmentValue: _encode_current_assignment_value,
    ConsumerGroupRegularExpressionValue: _encode_regex_value,
}
"""Value class -> encoder (version included)."""
