"""What the record codec does with bytes and objects it cannot handle.

The loader relies on two distinct signals: `UnknownRecordTypeError` (skip the record, as Kafka
>= 3.5 does) and `RecordDecodeError` (stop: the bytes are corrupt or not in a layout we know).
Nothing else may escape a decode, or a corrupt log would crash the replay with a bare
`struct.error` instead of naming the record type.
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest

from records import (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    CoordinatorRecord,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    TopicPartitions,
)
from records.codec import (
    RecordDecodeError,
    RecordEncodeError,
    UnknownRecordTypeError,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from records.consumer_group import ConsumerGroupTargetAssignmentMemberValue


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(text: str) -> bytes:
    data = text.encode()
    return i16(len(data)) + data


OFFSET_KEY = i16(1) + s16("g") + s16("t") + i32(0)
OFFSET_VALUE_V3 = i16(3) + i64(10) + i32(-1) + s16("m") + i64(20)
MEMBER_KEY = i16(5) + s16("g") + s16("m")


# --- unknown record types -----------------------------------------------------------------------


@pytest.mark.parametrize("record_type", [9, 12, 15, 18, 24, 1000, -1])
def test_unknown_record_type_is_reported_with_its_number(record_type: int) -> None:
    with pytest.raises(UnknownRecordTypeError) as info:
        decode_record(i16(record_type) + s16("g"), b"\x00\x00anything")
    assert info.value.record_type == record_type


def test_unknown_record_type_is_not_a_decode_error() -> None:
    # The loader skips one and stops on the other: they must not be caught by the same clause.
    assert not issubclass(UnknownRecordTypeError, RecordDecodeError)
    assert not issubclass(RecordDecodeError, UnknownRecordTypeError)


def test_unknown_record_type_tombstone_is_also_unknown() -> None:
    with pytest.raises(UnknownRecordTypeError):
        decode_record(i16(11) + s16("share-group"), None)


# --- malformed keys -----------------------------------------------------------------------------


@pytest.mark.parametrize("key", [b"", b"\x00"])
def test_key_too_short_for_a_record_type(key: bytes) -> None:
    with pytest.raises(RecordDecodeError) as info:
        decode_record(key, None)
    assert info.value.record_type is None


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("truncated_partition", OFFSET_KEY[:-1]),
        ("truncated_string", i16(2) + i16(5) + b"abc"),
        ("missing_string_length", i16(3) + b"\x00"),
        ("trailing_garbage", i16(2) + s16("g") + b"\x00"),
        ("null_non_nullable_string", i16(3) + i16(-1)),
        ("negative_string_length", i16(5) + s16("g") + i16(-7)),
        ("invalid_utf8", i16(3) + i16(2) + b"\xc3\x28"),
        ("offset_key_trailing_garbage", OFFSET_KEY + b"\x01"),
    ],
)
def test_malformed_key_raises_decode_error_naming_the_record_type(name: str, key: bytes) -> None:
    with pytest.raises(RecordDecodeError) as info:
        decode_record(key, None)
    assert info.value.record_type == struct.unpack(">h", key[:2])[0]
    assert "key" in str(info.value)


# --- malformed values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "key", "value", "expected"),
    [
        ("empty_value", OFFSET_KEY, b"", "truncated"),
        ("truncated_offset_value", OFFSET_KEY, OFFSET_VALUE_V3[:-3], "truncated"),
        ("trailing_offset_value", OFFSET_KEY, OFFSET_VALUE_V3 + b"\x00", "trailing"),
        ("offset_value_v5", OFFSET_KEY, i16(5) + OFFSET_VALUE_V3[2:], "version 5"),
        ("offset_value_negative_version", OFFSET_KEY, i16(-1) + OFFSET_VALUE_V3[2:], "version -1"),
        ("metadata_past_end", OFFSET_KEY, i16(3) + i64(1) + i32(0) + i16(100) + b"x", "length"),
        ("group_metadata_v5", i16(2) + s16("g"), i16(5) + s16("consumer"), "version 5"),
        ("kip848_value_v1", i16(3) + s16("g"), i16(1) + i32(1) + b"\x00", "version 1"),
        (
            "group_metadata_member_count_too_large",
            i16(2) + s16("g"),
            i16(3) + s16("c") + i32(1) + i16(-1) + i16(-1) + i64(-1) + i32(0x7FFFFFFF),
            "cannot fit",
        ),
        (
            "group_metadata_negative_member_count",
            i16(2) + s16("g"),
            i16(3) + s16("c") + i32(1) + i16(-1) + i16(-1) + i64(-1) + i32(-2),
            "length -2",
        ),
        (
            "group_metadata_negative_bytes_length",
            i16(2) + s16("g"),
            i16(0)
            + s16("c")
            + i32(1)
            + i16(-1)
            + i16(-1)
            + i32(1)
            + s16("m")
            + s16("c")
            + s16("h")
            + i32(1)
            + i32(-5)
            + i32(0),
            "length -5",
        ),
        (
            "null_protocol_type",
            i16(2) + s16("g"),
            i16(3) + i16(-1) + i32(1),
            "length -1",
        ),
        (
            "invalid_utf8_in_compact_string",
            MEMBER_KEY,
            i16(0) + b"\x00\x00" + b"\x03\xff\xfe",
            "UTF-8",
        ),
        (
            "null_non_nullable_compact_string",
            MEMBER_KEY,
            i16(0) + b"\x00\x00\x00",
            "ClientId",
        ),
        (
            "varint_longer_than_five_bytes",
            MEMBER_KEY,
            i16(0) + b"\x80\x80\x80\x80\x80\x01",
            "varint",
        ),
        (
            "varint_over_32_bits",
            MEMBER_KEY,
            i16(0) + b"\xff\xff\xff\xff\x7f",
            "32 bits",
        ),
        (
            "unterminated_varint",
            MEMBER_KEY,
            i16(0) + b"\x80\x80",
            "truncated",
        ),
        (
            "tagged_field_past_end",
            i16(3) + s16("g"),
            i16(0) + i32(1) + b"\x01\x05\x10\x00",
            "tagged field 5",
        ),
        (
            "tagged_field_count_too_large",
            i16(3) + s16("g"),
            i16(0) + i32(1) + b"\x7f",
            "cannot fit",
        ),
        (
            "partition_array_too_large",
            i16(7) + s16("g") + s16("m"),
            i16(0) + b"\x02" + bytes(16) + b"\x7f" + i32(1),
            "cannot fit",
        ),
        (
            "topic_partitions_count_past_end",
            i16(7) + s16("g") + s16("m"),
            i16(0) + b"\x02" + bytes(10),
            "cannot fit",
        ),
        (
            "classic_member_metadata_size_mismatch",
            MEMBER_KEY,
            i16(0)
            + b"\x00\x00\x02c\x02h\x01\x00"
            + i32(1)
            + b"\x00"
            + b"\x01\x00\x09"
            + b"\x01"
            + i32(1)
            + b"\x01\x00"
            + b"\xee\xee",
            "ClassicMemberMetadata",
        ),
        (
            "classic_member_metadata_truncated_inside_its_tag",
            MEMBER_KEY,
            i16(0) + b"\x00\x00\x02c\x02h\x01\x00" + i32(1) + b"\x00" + b"\x01\x00\x03" + b"\x01" + i32(1),
            "truncated",
        ),
    ],
)
def test_malformed_value_raises_decode_error_with_a_description(
    name: str, key: bytes, value: bytes, expected: str
) -> None:
    with pytest.raises(RecordDecodeError) as info:
        decode_record(key, value)
    assert info.value.record_type == struct.unpack(">h", key[:2])[0]
    assert str(info.value).startswith(f"malformed record type {info.value.record_type}: value")
    assert expected in str(info.value)


def test_huge_array_count_fails_fast_without_allocating() -> None:
    value = i16(0) + b"\xff\xff\xff\xff\x0f" + bytes(64)  # 2**32 - 2 topics
    start = time.perf_counter()
    with pytest.raises(RecordDecodeError):
        decode_record(i16(4) + s16("g"), value)
    assert time.perf_counter() - start < 0.1


# --- Kafka 3.7 early-access layouts -------------------------------------------------------------

TOPIC = bytes.fromhex("0f1e2d3c4b5a69788796a5b4c3d2e1f0")


@pytest.mark.parametrize("epoch", [5, 0x01000000])
def test_kafka_3_7_partition_metadata_layout_is_rejected_with_a_hint(epoch: int) -> None:
    # 3.7.0 ConsumerGroupPartitionMetadataValue v0: Epoch int32 before Topics.
    value = i16(0) + i32(epoch) + b"\x02" + TOPIC + b"\x02t" + i32(1) + b"\x01\x00" + b"\x00"
    with pytest.raises(RecordDecodeError) as info:
        decode_record(i16(4) + s16("g"), value)
    assert info.value.record_type == 4
    assert "3.7" in str(info.value)


def test_kafka_3_7_target_assignment_member_layout_is_rejected() -> None:
    # 3.7.0 ConsumerGroupTargetAssignmentMemberValue v0: Error int8, TopicPartitions,
    # MetadataVersion int16, MetadataBytes bytes.
    value = i16(0) + b"\x00" + b"\x02" + TOPIC + b"\x02" + i32(0) + b"\x00" + i16(0) + b"\x01"
    value += b"\x00"
    with pytest.raises(RecordDecodeError) as info:
        decode_record(i16(7) + s16("g") + s16("m"), value)
    assert "3.7" in str(info.value)


def test_kafka_3_7_current_assignment_layout_is_rejected() -> None:
    # 3.7.0 ConsumerGroupCurrentMemberAssignmentValue v0: MemberEpoch, PreviousMemberEpoch,
    # TargetMemberEpoch int32, three partition lists, Error int8, MetadataVersion, MetadataBytes.
    value = i16(0) + i32(3) + i32(2) + i32(3) + b"\x01\x01\x01" + b"\x00" + i16(0) + b"\x01"
    value += b"\x00"
    with pytest.raises(RecordDecodeError) as info:
        decode_record(i16(8) + s16("g") + s16("m"), value)
    assert "3.7" in str(info.value)


def test_kafka_3_7_member_metadata_layout_is_rejected() -> None:
    # 3.7.0 ConsumerGroupMemberMetadataValue v0 ends with an Assignors array (not tagged).
    value = i16(0) + b"\x00\x00\x02c\x02h\x01\x00" + i32(1) + b"\x00" + b"\x01" + b"\x00"
    with pytest.raises(RecordDecodeError):
        decode_record(MEMBER_KEY, value)


# --- objects we cannot encode -------------------------------------------------------------------


def test_key_and_value_of_different_record_types_are_refused() -> None:
    with pytest.raises(RecordEncodeError, match="OffsetCommitKey cannot have"):
        encode_record(CoordinatorRecord(OffsetCommitKey("g", "t", 0), ConsumerGroupMetadataValue(1)))


def test_string_over_kafkas_limit_is_refused_on_encode() -> None:
    with pytest.raises(RecordEncodeError, match="32767"):
        encode_key(GroupMetadataKey("g" * 0x8000))
    assert len(encode_key(GroupMetadataKey("g" * 0x7FFF))) == 2 + 2 + 0x7FFF


@pytest.mark.parametrize(
    "value",
    [
        OffsetCommitValue(2**63, -1, "", 0),
        OffsetCommitValue(0, 2**31, "", 0),
        ConsumerGroupMetadataValue(-(2**31) - 1),
        ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(uuid.UUID(int=1), (2**31,)),)),
    ],
)
def test_integer_out_of_its_fields_range_is_refused_on_encode(value: object) -> None:
    with pytest.raises(RecordEncodeError):
        encode_value(value)  # type: ignore[arg-type]


def test_objects_that_are_not_records_are_refused() -> None:
    with pytest.raises(RecordEncodeError):
        encode_key("group")  # type: ignore[arg-type]
    with pytest.raises(RecordEncodeError):
        encode_value(OffsetCommitKey("g", "t", 0))  # type: ignore[arg-type]


def test_non_nullable_field_set_to_none_is_refused_on_encode() -> None:
    with pytest.raises(RecordEncodeError):
        encode_key(ConsumerGroupMemberMetadataKey("g", None))  # type: ignore[arg-type]
    with pytest.raises(RecordEncodeError):
        encode_key(ConsumerGroupMetadataKey(None))  # type: ignore[arg-type]


def test_decode_value_of_unknown_type_is_unknown() -> None:
    with pytest.raises(UnknownRecordTypeError):
        decode_value(9, b"\x00\x00")
