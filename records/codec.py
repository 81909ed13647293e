"""Byte codecs of the coordinator records in Kafka's `__consumer_offsets` topic.

Implements Kafka's `CoordinatorRecordSerde` format for the group coordinator's records
(`group-coordinator/src/main/resources/common/message/*.json`, Kafka 3.8+ / 4.0 layouts):

    key   = int16 record type  + key message   (non-flexible; key schema version = record type)
    value = int16 value version + value message, or no value at all (a tombstone)

so that the log groupshift writes is read by Kafka's own loader and tools, and the other way
round. Primitive layouts are in `records.wire`.

Versions written, and why (each is what Kafka >= 3.5 writes, so that brokers older than 3.5 can
still read the offset and classic group records of our log):

* `OffsetCommitValue` **v1** when an expire timestamp is set (v1 is the only version with
  `expireTimestamp`; like Kafka we then drop `leaderEpoch`, which v1 lacks), else **v3**: the
  highest non-flexible version. v4 (flexible) would only be needed for a tagged field, and we set
  none; pre-3.5 brokers cannot read v4.
* `GroupMetadataValue` **v3**, for the same reason (KIP-915: v4 only once a tagged field exists).
* KIP-848 values (types 3-8, 16) and KIP-1071 streams-group values (17, 19-23) **v0**, their
  only version; flexible. groupshift's own Connect-group records (types 10000-10005,
  `records.connect_group`, docs/connect-groups.md) v0, flexible.

Read side: `OffsetCommitValue` and `GroupMetadataValue` v0-v4, KIP-848 values v0. Fields a
version lacks take the schema default: `leaderEpoch` -1, `expireTimestamp` -1,
`currentStateTimestamp` -1, `groupInstanceId` null, and `rebalanceTimeout` -1 in
GroupMetadataValue v0, which the classic group replay reads as "same as the session timeout".
Unknown tagged fields are skipped (later Kafka versions add some: `MetadataHash` in type 3,
`AssignmentEpochs` inside type 8's partitions); tag 0 of the member value,
`ClassicMemberMetadata`, is kept.

Errors: a key whose record type we do not know raises `UnknownRecordTypeError` (Kafka >= 3.5
skips such records with a warning: they may be left over from a newer version or an aborted
upgrade; share-group types 9-15 are among them since groupshift has no share groups; so is type 18, the
streams partition metadata of Kafka 4.0/4.1's early access, which 4.4 no longer has). Bytes of a
known type that the schema cannot produce raise `RecordDecodeError` naming the record type. We are
stricter than Kafka, which never writes such bytes either: trailing bytes after a message are an
error (Kafka ignores them), since they mean the bytes were not written with the schema we read
them with (a Kafka 3.7 early-access KIP-848 record, whose layouts are incompatible and not
supported, typically fails that way); so are a length below -1 and a varint over 32 bits.

Layout of the code: `records.wire` holds the primitive encodings, `records.key_codec` every
key, `records.offsets_codec`, `records.classic_group_codec` and `records.consumer_group_codec`
the values of the record objects' three modules; this module dispatches on the record type and
turns every failure into one of the errors below. Decoding runs on every record of a replay
(target: a million records in a few seconds), so the hot decoders inline their steps, use
precompiled `struct.Struct` objects and build objects with `records.construct`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from records.classic_group import GroupMetadataKey, GroupMetadataValue
from records.classic_group_codec import decode_group_metadata_value, encode_group_metadata_value
from records.connect_group import (
    ConnectGroupCurrentMemberAssignmentKey,
    ConnectGroupCurrentMemberAssignmentValue,
    ConnectGroupDelayedWorkKey,
    ConnectGroupDelayedWorkValue,
    ConnectGroupMemberMetadataKey,
    ConnectGroupMemberMetadataValue,
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    ConnectGroupTargetAssignmentMemberKey,
    ConnectGroupTargetAssignmentMemberValue,
    ConnectGroupTargetAssignmentMetadataKey,
    ConnectGroupTargetAssignmentMetadataValue,
)
from records.connect_group_codec import VALUE_DECODERS as CONNECT_GROUP_VALUE_DECODERS
from records.connect_group_codec import VALUE_ENCODERS as CONNECT_GROUP_VALUE_ENCODERS
from records.construct import positional_constructor
from records.consumer_group import (
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
)
from records.consumer_group_codec import VALUE_DECODERS as CONSUMER_GROUP_VALUE_DECODERS
from records.consumer_group_codec import VALUE_ENCODERS as CONSUMER_GROUP_VALUE_ENCODERS
from records.coordinator import CoordinatorRecord, RecordKey, RecordValue
from records.key_codec import KEY_DECODERS, KEY_ENCODERS
from records.offsets import OffsetCommitKey, OffsetCommitValue
from records.offsets_codec import decode_offset_commit_value, encode_offset_commit_value
from records.streams_group import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
)
from records.streams_group_codec import VALUE_DECODERS as STREAMS_GROUP_VALUE_DECODERS
from records.streams_group_codec import VALUE_ENCODERS as STREAMS_GROUP_VALUE_ENCODERS
from records.wire import WireFormatError

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


# --- dispatch tables ----------------------------------------------------------------------------

_VALUE_DECODERS: dict[int, Callable[[bytes], RecordValue]] = {
    0: decode_offset_commit_value,
    1: decode_offset_commit_value,
    2: decode_group_metadata_value,
    **CONSUMER_GROUP_VALUE_DECODERS,
    **STREAMS_GROUP_VALUE_DECODERS,
    **CONNECT_GROUP_VALUE_DECODERS,
}

_SCHEMAS: dict[int, tuple[Callable[[bytes], RecordKey], Callable[[bytes], RecordValue]]] = {
    record_type: (key_decoder, _VALUE_DECODERS[record_type])
    for record_type, key_decoder in KEY_DECODERS.items()
}
"""Record type -> (key decoder, value decoder); both take the whole bytes, prefix included."""

# Encoders are looked up by the object's exact class; `Any` because each takes its own class.
_VALUE_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    OffsetCommitValue: encode_offset_commit_value,
    GroupMetadataValue: encode_group_metadata_value,
    **CONSUMER_GROUP_VALUE_ENCODERS,
    **STREAMS_GROUP_VALUE_ENCODERS,
    **CONNECT_GROUP_VALUE_ENCODERS,
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
    StreamsGroupMetadataKey: StreamsGroupMetadataValue,
    StreamsGroupMemberMetadataKey: StreamsGroupMemberMetadataValue,
    StreamsGroupTargetAssignmentMetadataKey: StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTargetAssignmentMemberKey: StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupCurrentMemberAssignmentKey: StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupTopologyKey: StreamsGroupTopologyValue,
    ConnectGroupMetadataKey: ConnectGroupMetadataValue,
    ConnectGroupMemberMetadataKey: ConnectGroupMemberMetadataValue,
    ConnectGroupTargetAssignmentMetadataKey: ConnectGroupTargetAssignmentMetadataValue,
    ConnectGroupTargetAssignmentMemberKey: ConnectGroupTargetAssignmentMemberValue,
    ConnectGroupCurrentMemberAssignmentKey: ConnectGroupCurrentMemberAssignmentValue,
    ConnectGroupDelayedWorkKey: ConnectGroupDelayedWorkValue,
}

_EARLY_ACCESS_TYPES = frozenset({4, 5, 7, 8})
"""Record types whose Kafka 3.7 value layout differs from 3.8+."""
_EARLY_ACCESS_HINT = " (if Kafka 3.7 wrote this log: its early-access KIP-848 layouts are not supported)"

# What a failed read looks like: our own checks, a fixed-width read or a byte index past the
# end (left to `struct` and indexing rather than checked field by field), bad UTF-8.
_DECODE_FAILURES = (WireFormatError, struct.error, IndexError, UnicodeDecodeError)
# What an unencodable object raises: a string too long (ValueError), an integer out of its
# field's range (struct.error), a wrong type where a str/bytes/int/tuple belongs.
_ENCODE_FAILURES = (struct.error, ValueError, TypeError, AttributeError, OverflowError)

_unpack_i16 = struct.Struct(">h").unpack_from
_new_record = positional_constructor(CoordinatorRecord)


def _describe(exc: Exception, data: bytes) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 in a string ({exc.reason} at byte {exc.start} of the string)"
    if isinstance(exc, (struct.error, IndexError)):
        return f"truncated: a field runs past the end of the {len(data)} bytes"
    return str(exc)


def _key_error(record_type: int, exc: Exception, data: bytes) -> RecordDecodeError:
    return RecordDecodeError(record_type, f"key: {_describe(exc, data)}")


def _value_error(record_type: int, exc: Exception, data: bytes) -> RecordDecodeError:
    description = f"value: {_describe(exc, data)}"
    if record_type in _EARLY_ACCESS_TYPES:
        description += _EARLY_ACCESS_HINT
    return RecordDecodeError(record_type, description)


def _short_key_error(key_bytes: bytes) -> RecordDecodeError:
    return RecordDecodeError(None, f"key of {len(key_bytes)} bytes is too short for a record type")


# --- public API ---------------------------------------------------------------------------------


def decode_record(
    key_bytes: bytes | bytearray | memoryview,
    value_bytes: bytes | bytearray | memoryview | None,
) -> CoordinatorRecord:
    """Decode one `__consumer_offsets` record; a None value is a tombstone.

    Raises UnknownRecordTypeError (skip the record) or RecordDecodeError (stop the load), and
    nothing else whatever the bytes.
    """
    if type(key_bytes) is not bytes:
        key_bytes = bytes(key_bytes)
    try:
        (record_type,) = _unpack_i16(key_bytes, 0)
    except struct.error:
        raise _short_key_error(key_bytes) from None
    schema = _SCHEMAS.get(record_type)
    if schema is None:
        raise UnknownRecordTypeError(record_type)
    try:
        key = schema[0](key_bytes)
    except _DECODE_FAILURES as exc:
        raise _key_error(record_type, exc, key_bytes) from exc
    if value_bytes is None:
        return _new_record(key, None)
    if type(value_bytes) is not bytes:
        value_bytes = bytes(value_bytes)
    try:
        value = schema[1](value_bytes)
    except _DECODE_FAILURES as exc:
        raise _value_error(record_type, exc, value_bytes) from exc
    return _new_record(key, value)


def decode_key(key_bytes: bytes | bytearray | memoryview) -> RecordKey:
    """Decode a key alone; raises UnknownRecordTypeError or RecordDecodeError."""
    return decode_record(key_bytes, None).key


def decode_value(record_type: int, value_bytes: bytes | bytearray | memoryview | None) -> RecordValue | None:
    """Decode the value of a record of `record_type` (None stays None: a tombstone)."""
    schema = _SCHEMAS.get(record_type)
    if schema is None:
        raise UnknownRecordTypeError(record_type)
    if value_bytes is None:
        return None
    data = bytes(value_bytes)
    try:
        return schema[1](data)
    except _DECODE_FAILURES as exc:
        raise _value_error(record_type, exc, data) from exc


def encode_key(key: RecordKey) -> bytes:
    """`int16 record type` + key message (offset commits as key version 1, as Kafka writes)."""
    encoder = KEY_ENCODERS.get(type(key))
    if encoder is None:
        raise RecordEncodeError(f"{type(key).__name__} is not a coordinator record key")
    try:
        return encoder(key)
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
    except _ENCODE_FAILURES as exc:
        raise RecordEncodeError(f"cannot encode {type(value).__name__}: {exc}") from exc


def encode_record(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    """Encode key and value. Refuses a value that belongs to another record type: the log would
    hold a record that no reader can decode."""
    key, value = record.key, record.value
    if value is not None and _VALUE_CLASS_OF_KEY.get(type(key)) is not type(value):
        raise RecordEncodeError(f"{type(key).__name__} cannot have a {type(value).__name__} value")
    return encode_key(key), encode_value(value)
