"""The KIP-1071 streams-group record codec (records/streams_group_codec.py): round trips, bytes
Kafka 4.4 writes, and refusals of bytes no Kafka writer produces. The Kafka oracle for every
sample is e2e/test_streams_records_kafka.py."""

from __future__ import annotations

import pytest

from records.codec import (
    RecordDecodeError,
    RecordEncodeError,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from records.coordinator import CoordinatorRecord
from records.streams_group import (
    Endpoint,
    KeyValue,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTopologyKey,
)
from tests.streams_record_samples import SAMPLES, WORD_COUNT_TOPOLOGY

# StreamsGroupTopologyValue of WORD_COUNT_TOPOLOGY as Kafka 4.4's generated class writes it
# (printed by e2e/java_programs/StreamsRecordsOracle.java).
KAFKA_WORD_COUNT_TOPOLOGY = bytes.fromhex(
    "0000000000000302300209776f7264732d696e010102176170702d636f756e74732d7265706172746974696f6e0101000231010102156170702d636f756e74732d6368616e67656c6f67000000000000020f636c65616e75702e706f6c69637908636f6d7061637400000102176170702d636f756e74732d7265706172746974696f6e000000000000020f636c65616e75702e706f6c6963790764656c657465000002030000000101020000000000"
)


@pytest.mark.parametrize(("record_type", "value"), SAMPLES)
def test_every_sample_round_trips(record_type: int, value: object) -> None:
    data = encode_value(value)  # type: ignore[arg-type]
    assert data is not None and data[:2] == b"\x00\x00"
    assert decode_value(record_type, data) == value


def test_topology_bytes_are_kafkas() -> None:
    assert encode_value(WORD_COUNT_TOPOLOGY) == KAFKA_WORD_COUNT_TOPOLOGY
    assert decode_value(23, KAFKA_WORD_COUNT_TOPOLOGY) == WORD_COUNT_TOPOLOGY


@pytest.mark.parametrize(
    ("key", "record_type"),
    [
        (StreamsGroupMetadataKey("g"), 17),
        (StreamsGroupMemberMetadataKey("g", "m"), 19),
        (StreamsGroupTargetAssignmentMetadataKey("g"), 20),
        (StreamsGroupTargetAssignmentMemberKey("g", "m"), 21),
        (StreamsGroupCurrentMemberAssignmentKey("g", "m"), 22),
        (StreamsGroupTopologyKey("g"), 23),
    ],
)
def test_keys_carry_their_record_type_and_tombstones_decode(key: object, record_type: int) -> None:
    data = encode_key(key)  # type: ignore[arg-type]
    assert int.from_bytes(data[:2], "big") == record_type
    assert decode_record(data, None) == CoordinatorRecord(key, None)  # type: ignore[arg-type]


def test_empty_tagged_array_is_left_out_as_kafka_does() -> None:
    # Kafka's writer omits an empty LastAssignmentConfigs; it reads back as null.
    assert encode_value(StreamsGroupMetadataValue(1, 2, -1, ())) == encode_value(
        StreamsGroupMetadataValue(1, 2)
    )
    tagged = encode_value(StreamsGroupMetadataValue(1, 2, 4))
    assert tagged is not None and tagged.endswith(bytes.fromhex("01000400000004"))


def test_unknown_tags_are_skipped() -> None:
    plain = encode_value(StreamsGroupMetadataValue(1, 2))
    assert plain is not None and plain[-1] == 0
    with_unknown_tag = plain[:-1] + bytes([1, 9, 2, 0xAB, 0xCD])
    assert decode_value(17, with_unknown_tag) == StreamsGroupMetadataValue(1, 2)


def test_a_key_cannot_take_another_types_value() -> None:
    with pytest.raises(RecordEncodeError):
        encode_record(CoordinatorRecord(StreamsGroupTopologyKey("g"), StreamsGroupMetadataValue(1, 2)))


def test_port_outside_uint16_is_refused() -> None:
    member = StreamsGroupMemberMetadataValue(None, None, "c", "h", -1, 0, "p", Endpoint("h", 65536), ())
    with pytest.raises(RecordEncodeError):
        encode_value(member)


@pytest.mark.parametrize(
    ("record_type", "data", "says"),
    [
        (17, b"\x00\x01" + bytes(13), "version 1"),
        (17, bytes(14) + b"\x00\x00", "trailing"),
        (23, KAFKA_WORD_COUNT_TOPOLOGY[:-3], "truncated"),
        (22, bytes.fromhex("000000000001000000000000"), "null"),
        (19, bytes.fromhex("000000000263"), "truncated"),
        (17, bytes.fromhex("000000000001000000000000000201000800000004"), "tagged field 0"),
    ],
)
def test_bytes_no_writer_produces_are_refused(record_type: int, data: bytes, says: str) -> None:
    with pytest.raises(RecordDecodeError) as caught:
        decode_value(record_type, data)
    assert caught.value.record_type == record_type
    assert says in str(caught.value)


def test_client_tags_keep_their_order() -> None:
    tags = (KeyValue("b", "1"), KeyValue("a", "2"))
    member = StreamsGroupMemberMetadataValue("i", "r", "c", "h", 1, 2, "p", None, tags)
    data = encode_value(member)
    assert data is not None
    decoded = decode_value(19, data)
    assert isinstance(decoded, StreamsGroupMemberMetadataValue) and decoded.client_tags == tags
