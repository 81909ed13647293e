"""Golden bytes of every coordinator record key and value version we read or write.

Each expected byte string is built by hand, field by field, from Kafka's JSON schema named in
the comment above it (`group-coordinator/src/main/resources/common/message/`; the regular
expression record, type 16, is newer than our Kafka snapshot and follows its 4.0 schema). The
helpers below are deliberately independent of `records.wire`: a mistake shared by the codec and
its test would otherwise go unnoticed.

Conventions: a key is `int16 record type` + the key message; a value is `int16 value version` +
the value message. Non-flexible strings are int16 length + UTF-8 (-1 = null), bytes and arrays
int32 length. In flexible versions strings, bytes and arrays are `uvarint(length + 1)` (0 = null)
and every struct ends with a tagged-fields section (0x00 when empty).
"""

from __future__ import annotations

import struct
import uuid

import pytest

from records import (
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
    CoordinatorRecord,
    GroupMemberMetadata,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionMetadata,
    RecordKey,
    RecordValue,
    TopicMetadata,
    TopicPartitions,
)
from records.codec import decode_record, decode_value, encode_key, encode_record, encode_value


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(text: str) -> bytes:
    """Non-flexible string: int16 length + UTF-8."""
    data = text.encode()
    return i16(len(data)) + data


NULL_S16 = b"\xff\xff"


def b32(data: bytes) -> bytes:
    """Non-flexible bytes: int32 length + data."""
    return i32(len(data)) + data


def cs(text: str) -> bytes:
    """Compact string of fewer than 127 UTF-8 bytes: one length+1 byte + UTF-8."""
    data = text.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


NULL_CS = b"\x00"


def cb(data: bytes) -> bytes:
    """Compact bytes of fewer than 127 bytes."""
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def carr(n: int) -> bytes:
    """Compact array length (n + 1) for fewer than 127 elements."""
    assert n < 127
    return bytes([n + 1])


NO_TAGS = b"\x00"

TOPIC_A = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
TOPIC_A_BYTES = bytes.fromhex("0f1e2d3c4b5a69788796a5b4c3d2e1f0")
TOPIC_B = uuid.UUID("00000000-0000-0000-0000-000000000001")
TOPIC_B_BYTES = bytes(15) + b"\x01"


# --- keys ---------------------------------------------------------------------------------------

KEYS: list[tuple[str, bytes, RecordKey]] = [
    (
        # OffsetCommitKey.json v1: group, topic, partition
        "offset_commit_v1",
        b"\x00\x01" + b"\x00\x05" + b"group" + b"\x00\x06" + b"orders" + b"\x00\x00\x00\x07",
        OffsetCommitKey("group", "orders", 7),
    ),
    (
        # GroupMetadataKey.json v2: group
        "group_metadata",
        b"\x00\x02" + b"\x00\x08" + b"my-group",
        GroupMetadataKey("my-group"),
    ),
    (
        # ConsumerGroupMetadataKey.json v3: GroupId
        "consumer_group_metadata",
        i16(3) + s16("cg"),
        ConsumerGroupMetadataKey("cg"),
    ),
    (
        # ConsumerGroupPartitionMetadataKey.json v4: GroupId
        "partition_metadata",
        i16(4) + s16("cg"),
        ConsumerGroupPartitionMetadataKey("cg"),
    ),
    (
        # ConsumerGroupMemberMetadataKey.json v5: GroupId, MemberId
        "member_metadata",
        i16(5) + s16("cg") + s16("member-1"),
        ConsumerGroupMemberMetadataKey("cg", "member-1"),
    ),
    (
        # ConsumerGroupTargetAssignmentMetadataKey.json v6: GroupId
        "target_assignment_metadata",
        i16(6) + s16("cg"),
        ConsumerGroupTargetAssignmentMetadataKey("cg"),
    ),
    (
        # ConsumerGroupTargetAssignmentMemberKey.json v7: GroupId, MemberId
        "target_assignment_member",
        i16(7) + s16("cg") + s16("m"),
        ConsumerGroupTargetAssignmentMemberKey("cg", "m"),
    ),
    (
        # ConsumerGroupCurrentMemberAssignmentKey.json v8: GroupId, MemberId (empty is valid)
        "current_member_assignment",
        i16(8) + s16("cg") + s16(""),
        ConsumerGroupCurrentMemberAssignmentKey("cg", ""),
    ),
    (
        # ConsumerGroupRegularExpressionKey (4.0) v16: GroupId, RegularExpression
        "regular_expression",
        i16(16) + s16("cg") + s16("orders-.*"),
        ConsumerGroupRegularExpressionKey("cg", "orders-.*"),
    ),
    (
        # Non-ASCII strings count UTF-8 bytes, not characters.
        "utf8_lengths_in_bytes",
        i16(3) + b"\x00\x06" + "gé€".encode(),  # 1 + 2 + 3 bytes
        ConsumerGroupMetadataKey("gé€"),
    ),
]


@pytest.mark.parametrize(("name", "golden", "key"), KEYS, ids=[k[0] for k in KEYS])
def test_key_golden_bytes_encode_and_decode(name: str, golden: bytes, key: RecordKey) -> None:
    assert encode_key(key) == golden
    assert decode_record(golden, None) == CoordinatorRecord(key, None)


def test_offset_commit_key_v0_decodes_to_the_same_key_and_is_rewritten_as_v1() -> None:
    # OffsetCommitKey.json v0: same fields as v1
    v0 = i16(0) + s16("group") + s16("orders") + i32(7)
    record = decode_record(v0, None)
    assert record.key == OffsetCommitKey("group", "orders", 7)
    assert encode_key(record.key) == i16(1) + v0[2:]


# --- tombstones ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "golden", "key"), KEYS, ids=[k[0] for k in KEYS])
def test_tombstone_is_a_key_without_value_bytes(name: str, golden: bytes, key: RecordKey) -> None:
    record = CoordinatorRecord(key, None)
    assert encode_record(record) == (golden, None)
    assert encode_value(None) is None
    decoded = decode_record(golden, None)
    assert decoded.is_tombstone and decoded.key == key


# --- values -------------------------------------------------------------------------------------

OFFSET = 0x0102030405060708
COMMIT_TS = 1_700_000_000_123
EXPIRE_TS = 1_700_086_400_123

# Values we write: encode(object) == golden and decode(golden) == object.
WRITTEN_VALUES: list[tuple[str, int, bytes, RecordValue]] = [
    (
        # OffsetCommitValue.json v3: offset, leaderEpoch, metadata, commitTimestamp
        "offset_commit_v3",
        1,
        i16(3) + i64(OFFSET) + i32(5) + s16("meta") + i64(COMMIT_TS),
        OffsetCommitValue(OFFSET, 5, "meta", COMMIT_TS),
    ),
    (
        # OffsetCommitValue.json v3 with no leader epoch (-1) and empty metadata
        "offset_commit_v3_no_epoch",
        1,
        b"\x00\x03" + i64(0) + b"\xff\xff\xff\xff" + b"\x00\x00" + i64(COMMIT_TS),
        OffsetCommitValue(0, -1, "", COMMIT_TS),
    ),
    (
        # OffsetCommitValue.json v1: offset, metadata, commitTimestamp, expireTimestamp
        "offset_commit_v1_with_expire_timestamp",
        1,
        i16(1) + i64(OFFSET) + s16("meta") + i64(COMMIT_TS) + i64(EXPIRE_TS),
        OffsetCommitValue(OFFSET, -1, "meta", COMMIT_TS, EXPIRE_TS),
    ),
    (
        # GroupMetadataValue.json v3: protocolType, generation, protocol?, leader?,
        # currentStateTimestamp, members [memberId, groupInstanceId?, clientId, clientHost,
        # rebalanceTimeout, sessionTimeout, subscription, assignment]
        "group_metadata_v3_two_members",
        2,
        b"\x00\x03"
        + b"\x00\x08"
        + b"consumer"
        + i32(12)
        + s16("range")
        + s16("m-1")
        + i64(COMMIT_TS)
        + i32(2)
        + (s16("m-1") + s16("static-1") + s16("client") + s16("/10.0.0.1"))
        + (i32(300_000) + i32(45_000) + b32(b"\x00\x01sub") + b32(b"\x00\x01asg"))
        + (s16("m-2") + NULL_S16 + s16("client") + s16("/10.0.0.2"))
        + (i32(60_000) + i32(10_000) + b32(b"") + b32(b"")),
        GroupMetadataValue(
            "consumer",
            12,
            "range",
            "m-1",
            COMMIT_TS,
            (
                GroupMemberMetadata(
                    "m-1",
                    "static-1",
                    "client",
                    "/10.0.0.1",
                    300_000,
                    45_000,
                    b"\x00\x01sub",
                    b"\x00\x01asg",
                ),
                GroupMemberMetadata("m-2", None, "client", "/10.0.0.2", 60_000, 10_000, b"", b""),
            ),
        ),
    ),
    (
        # GroupMetadataValue.json v3, an Empty group: null protocol and leader, no members
        "group_metadata_v3_empty_group",
        2,
        i16(3) + s16("consumer") + i32(0) + NULL_S16 + NULL_S16 + i64(-1) + i32(0),
        GroupMetadataValue("consumer", 0, None, None, -1, ()),
    ),
    (
        # ConsumerGroupMetadataValue.json v0: Epoch, tags
        "consumer_group_metadata_v0",
        3,
        i16(0) + i32(42) + NO_TAGS,
        ConsumerGroupMetadataValue(42),
    ),
    (
        # ConsumerGroupPartitionMetadataValue.json v0: Topics [TopicId, TopicName,
        # NumPartitions, PartitionMetadata [Partition, Racks []string, tags], tags], tags
        "partition_metadata_v0_two_topics",
        4,
        i16(0)
        + carr(2)
        + (TOPIC_A_BYTES + cs("orders") + i32(3) + carr(0) + NO_TAGS)
        + TOPIC_B_BYTES
        + cs("audit")
        + i32(2)
        + carr(2)
        + (i32(0) + carr(2) + cs("rack-a") + cs("rack-b") + NO_TAGS)
        + (i32(1) + carr(0) + NO_TAGS)
        + NO_TAGS
        + NO_TAGS,
        ConsumerGroupPartitionMetadataValue(
            (
                TopicMetadata(TOPIC_A, "orders", 3),
                TopicMetadata(
                    TOPIC_B,
                    "audit",
                    2,
                    (PartitionMetadata(0, ("rack-a", "rack-b")), PartitionMetadata(1, ())),
                ),
            )
        ),
    ),
    (
        # ConsumerGroupPartitionMetadataValue.json v0 with no topics
        "partition_metadata_v0_empty",
        4,
        i16(0) + carr(0) + NO_TAGS,
        ConsumerGroupPartitionMetadataValue(()),
    ),
    (
        # ConsumerGroupMemberMetadataValue.json v0: InstanceId?, RackId?, ClientId, ClientHost,
        # SubscribedTopicNames, SubscribedTopicRegex?, RebalanceTimeoutMs, ServerAssignor?, tags
        "member_metadata_v0_nulls_no_classic",
        5,
        i16(0)
        + NULL_CS
        + NULL_CS
        + cs("consumer-1")
        + cs("/127.0.0.1")
        + carr(0)
        + NULL_CS
        + i32(-1)
        + NULL_CS
        + NO_TAGS,
        ConsumerGroupMemberMetadataValue(None, None, "consumer-1", "/127.0.0.1", (), None),
    ),
    (
        # ConsumerGroupMemberMetadataValue.json v0, every nullable field set, no tagged field
        "member_metadata_v0_all_set",
        5,
        b"\x00\x00"
        + b"\x09instance"
        + b"\x07rack-a"
        + b"\x0bconsumer-1"
        + b"\x0b/127.0.0.1"
        + b"\x03"
        + b"\x02a"
        + b"\x07orders"
        + b"\x03.*"
        + i32(300_000)
        + b"\x08uniform"
        + b"\x00",
        ConsumerGroupMemberMetadataValue(
            "instance",
            "rack-a",
            "consumer-1",
            "/127.0.0.1",
            ("a", "orders"),
            ".*",
            300_000,
            "uniform",
        ),
    ),
    (
        # ConsumerGroupMemberMetadataValue.json v0 with tagged field 0, ClassicMemberMetadata:
        # tags = count 1, tag 0, size, then the nullable struct: uvarint 1 (present),
        # SessionTimeoutMs int32, SupportedProtocols [Name, Metadata bytes, tags], tags
        "member_metadata_v0_classic_member",
        5,
        i16(0)
        + NULL_CS
        + NULL_CS
        + cs("c")
        + cs("h")
        + carr(1)
        + cs("orders")
        + NULL_CS
        + i32(300_000)
        + NULL_CS
        + b"\x01"  # one tagged field
        + b"\x00"  # tag 0
        + bytes([1 + 4 + 1 + (6 + 3 + 1) + (7 + 1 + 1) + 1])  # size: 26
        + b"\x01"  # present
        + i32(45_000)
        + carr(2)
        + (cs("range") + cb(b"\x00\x03") + NO_TAGS)
        + (cs("sticky") + cb(b"") + NO_TAGS)
        + NO_TAGS,
        ConsumerGroupMemberMetadataValue(
            None,
            None,
            "c",
            "h",
            ("orders",),
            None,
            300_000,
            None,
            ClassicMemberMetadata(
                45_000, (ClassicProtocol("range", b"\x00\x03"), ClassicProtocol("sticky", b""))
            ),
        ),
    ),
    (
        # ConsumerGroupMemberMetadataValue.json v0, ClassicMemberMetadata with no protocols
        "member_metadata_v0_classic_member_no_protocols",
        5,
        i16(0)
        + NULL_CS
        + NULL_CS
        + cs("c")
        + cs("h")
        + carr(0)
        + NULL_CS
        + i32(1)
        + NULL_CS
        + b"\x01\x00\x07"
        + b"\x01"
        + i32(10_000)
        + carr(0)
        + NO_TAGS,
        ConsumerGroupMemberMetadataValue(
            None, None, "c", "h", (), None, 1, None, ClassicMemberMetadata(10_000, ())
        ),
    ),
    (
        # ConsumerGroupTargetAssignmentMetadataValue.json v0: AssignmentEpoch, tags
        "target_assignment_metadata_v0",
        6,
        i16(0) + i32(-1) + NO_TAGS,
        ConsumerGroupTargetAssignmentMetadataValue(-1),
    ),
    (
        # ConsumerGroupTargetAssignmentMemberValue.json v0: TopicPartitions [TopicId,
        # Partitions []int32, tags], tags
        "target_assignment_member_v0",
        7,
        i16(0)
        + carr(2)
        + (TOPIC_A_BYTES + carr(3) + i32(0) + i32(2) + i32(4) + NO_TAGS)
        + (TOPIC_B_BYTES + carr(0) + NO_TAGS)
        + NO_TAGS,
        ConsumerGroupTargetAssignmentMemberValue(
            (TopicPartitions(TOPIC_A, (0, 2, 4)), TopicPartitions(TOPIC_B, ()))
        ),
    ),
    (
        # ConsumerGroupTargetAssignmentMemberValue.json v0, nothing assigned
        "target_assignment_member_v0_empty",
        7,
        i16(0) + carr(0) + NO_TAGS,
        ConsumerGroupTargetAssignmentMemberValue(()),
    ),
    (
        # ConsumerGroupCurrentMemberAssignmentValue.json v0: MemberEpoch, PreviousMemberEpoch,
        # State int8, AssignedPartitions [TopicPartitions], PartitionsPendingRevocation, tags
        "current_member_assignment_v0",
        8,
        i16(0)
        + i32(11)
        + i32(10)
        + i8(1)
        + carr(1)
        + (TOPIC_A_BYTES + carr(2) + i32(1) + i32(0) + NO_TAGS)
        + carr(1)
        + (TOPIC_B_BYTES + carr(1) + i32(5) + NO_TAGS)
        + NO_TAGS,
        ConsumerGroupCurrentMemberAssignmentValue(
            11, 10, 1, (TopicPartitions(TOPIC_A, (1, 0)),), (TopicPartitions(TOPIC_B, (5,)),)
        ),
    ),
    (
        # ConsumerGroupCurrentMemberAssignmentValue.json v0 as Kafka 4.3+ writes it: each
        # TopicPartitions carries tag 0, AssignmentEpochs (a compact []int32, one per partition)
        "current_member_assignment_v0_with_assignment_epochs",
        8,
        i16(0)
        + i32(7)
        + i32(5)
        + i8(1)
        + carr(1)
        + (TOPIC_A_BYTES + carr(2) + i32(1) + i32(0) + b"\x01\x00\x09" + carr(2) + i32(5) + i32(7))
        + carr(1)
        + (TOPIC_B_BYTES + carr(1) + i32(5) + b"\x01\x00\x05" + carr(1) + i32(3))
        + NO_TAGS,
        ConsumerGroupCurrentMemberAssignmentValue(
            7,
            5,
            1,
            (TopicPartitions(TOPIC_A, (1, 0), (5, 7)),),
            (TopicPartitions(TOPIC_B, (5,), (3,)),),
        ),
    ),
    (
        # ConsumerGroupCurrentMemberAssignmentValue.json v0, a fenced member: epochs -1, no
        # partitions, state STABLE (0)
        "current_member_assignment_v0_empty",
        8,
        i16(0) + i32(-1) + i32(-1) + i8(0) + carr(0) + carr(0) + NO_TAGS,
        ConsumerGroupCurrentMemberAssignmentValue(-1, -1, 0, (), ()),
    ),
    (
        # ConsumerGroupRegularExpressionValue (4.0) v0: Topics []string, Version, Timestamp, tags
        "regular_expression_v0",
        16,
        i16(0) + carr(2) + cs("orders-eu") + cs("orders-us") + i64(1234) + i64(COMMIT_TS) + NO_TAGS,
        ConsumerGroupRegularExpressionValue(("orders-eu", "orders-us"), 1234, COMMIT_TS),
    ),
    (
        # ConsumerGroupRegularExpressionValue (4.0) v0 matching no topic
        "regular_expression_v0_no_topics",
        16,
        i16(0) + carr(0) + i64(-1) + i64(0) + NO_TAGS,
        ConsumerGroupRegularExpressionValue((), -1, 0),
    ),
]


@pytest.mark.parametrize(
    ("name", "record_type", "golden", "value"), WRITTEN_VALUES, ids=[v[0] for v in WRITTEN_VALUES]
)
def test_written_value_golden_bytes_encode_and_decode(
    name: str, record_type: int, golden: bytes, value: RecordValue
) -> None:
    assert encode_value(value) == golden
    assert decode_value(record_type, golden) == value


# Versions we only read: decode(golden) == object, and the object is written in our version.
READ_ONLY_VALUES: list[tuple[str, int, bytes, RecordValue]] = [
    (
        # OffsetCommitValue.json v0: offset, metadata, commitTimestamp
        "offset_commit_v0",
        1,
        i16(0) + i64(OFFSET) + s16("meta") + i64(COMMIT_TS),
        OffsetCommitValue(OFFSET, -1, "meta", COMMIT_TS),
    ),
    (
        # OffsetCommitValue.json v2: offset, metadata, commitTimestamp (as v0)
        "offset_commit_v2",
        0,
        i16(2) + i64(OFFSET) + s16("") + i64(COMMIT_TS),
        OffsetCommitValue(OFFSET, -1, "", COMMIT_TS),
    ),
    (
        # OffsetCommitValue.json v4 (flexible): offset, leaderEpoch, metadata (compact),
        # commitTimestamp, tags
        "offset_commit_v4",
        1,
        i16(4) + i64(OFFSET) + i32(5) + cs("meta") + i64(COMMIT_TS) + NO_TAGS,
        OffsetCommitValue(OFFSET, 5, "meta", COMMIT_TS),
    ),
    (
        # OffsetCommitValue.json v4 with a 200-byte metadata: its length+1 (201) is the
        # two-byte varint c9 01; plus an unknown tagged field (tag 3, 2 bytes) to skip
        "offset_commit_v4_long_metadata_unknown_tag",
        1,
        i16(4)
        + i64(1)
        + i32(-1)
        + b"\xc9\x01"
        + b"x" * 200
        + i64(COMMIT_TS)
        + b"\x01"
        + b"\x03"
        + b"\x02"
        + b"\xab\xcd",
        OffsetCommitValue(1, -1, "x" * 200, COMMIT_TS),
    ),
    (
        # GroupMetadataValue.json v0: protocolType, generation, protocol?, leader?,
        # members [memberId, clientId, clientHost, sessionTimeout, subscription, assignment]
        "group_metadata_v0",
        2,
        i16(0)
        + s16("consumer")
        + i32(3)
        + s16("range")
        + s16("m-1")
        + i32(1)
        + s16("m-1")
        + s16("client")
        + s16("/h")
        + i32(30_000)
        + b32(b"sub")
        + b32(b"asg"),
        GroupMetadataValue(
            "consumer",
            3,
            "range",
            "m-1",
            -1,
            (GroupMemberMetadata("m-1", None, "client", "/h", -1, 30_000, b"sub", b"asg"),),
        ),
    ),
    (
        # GroupMetadataValue.json v1: v0 + member rebalanceTimeout (before sessionTimeout)
        "group_metadata_v1",
        2,
        i16(1)
        + s16("consumer")
        + i32(3)
        + NULL_S16
        + NULL_S16
        + i32(1)
        + s16("m-1")
        + s16("client")
        + s16("/h")
        + i32(60_000)
        + i32(30_000)
        + b32(b"")
        + b32(b"a"),
        GroupMetadataValue(
            "consumer",
            3,
            None,
            None,
            -1,
            (GroupMemberMetadata("m-1", None, "client", "/h", 60_000, 30_000, b"", b"a"),),
        ),
    ),
    (
        # GroupMetadataValue.json v2: v1 + currentStateTimestamp (before members)
        "group_metadata_v2",
        2,
        i16(2) + s16("connect") + i32(7) + s16("sessioned") + s16("w-1") + i64(COMMIT_TS) + i32(0),
        GroupMetadataValue("connect", 7, "sessioned", "w-1", COMMIT_TS, ()),
    ),
    (
        # GroupMetadataValue.json v4 (flexible): v3 in compact form, tags after each member and
        # after the message; the member carries an unknown tagged field (tag 7) to skip
        "group_metadata_v4",
        2,
        i16(4)
        + cs("consumer")
        + i32(5)
        + cs("range")
        + NULL_CS
        + i64(COMMIT_TS)
        + carr(1)
        + cs("m-1")
        + cs("static")
        + cs("client")
        + cs("/h")
        + i32(60_000)
        + i32(30_000)
        + cb(b"s")
        + cb(b"")
        + b"\x01\x07\x01\x00"  # one tagged field: tag 7, size 1, data 00
        + NO_TAGS,
        GroupMetadataValue(
            "consumer",
            5,
            "range",
            None,
            COMMIT_TS,
            (GroupMemberMetadata("m-1", "static", "client", "/h", 60_000, 30_000, b"s", b""),),
        ),
    ),
    (
        # ConsumerGroupMemberMetadataValue.json v0 with an unknown tagged field (tag 1) after
        # ClassicMemberMetadata (tag 0): the unknown one is skipped, the known one kept
        "member_metadata_v0_classic_and_unknown_tag",
        5,
        i16(0)
        + NULL_CS
        + NULL_CS
        + cs("c")
        + cs("h")
        + carr(0)
        + NULL_CS
        + i32(1)
        + NULL_CS
        + b"\x02"
        + (b"\x00\x07" + b"\x01" + i32(10_000) + carr(0) + NO_TAGS)
        + (b"\x01\x03" + b"\xff\xff\xff"),
        ConsumerGroupMemberMetadataValue(
            None, None, "c", "h", (), None, 1, None, ClassicMemberMetadata(10_000, ())
        ),
    ),
    (
        # ConsumerGroupMemberMetadataValue.json v0 whose tag 0 holds a null struct (presence
        # varint 0): Kafka reads that as ClassicMemberMetadata = null
        "member_metadata_v0_classic_member_null_in_tag",
        5,
        i16(0)
        + NULL_CS
        + NULL_CS
        + cs("c")
        + cs("h")
        + carr(0)
        + NULL_CS
        + i32(1)
        + NULL_CS
        + b"\x01\x00\x01\x00",
        ConsumerGroupMemberMetadataValue(None, None, "c", "h", (), None, 1, None, None),
    ),
    (
        # ConsumerGroupMetadataValue v0 as Kafka 4.1 writes it: tagged MetadataHash (tag 0,
        # int64) that our schema does not have, so it is skipped
        "consumer_group_metadata_v0_with_later_metadata_hash_tag",
        3,
        i16(0) + i32(42) + b"\x01\x00\x08" + i64(0x1122334455667788),
        ConsumerGroupMetadataValue(42),
    ),
    (
        # ConsumerGroupCurrentMemberAssignmentValue v0 with a tag we do not know (tag 1) inside
        # a TopicPartitions element: skipped, as Kafka's generated readers skip unknown tags
        "current_member_assignment_v0_with_nested_unknown_tag",
        8,
        i16(0)
        + i32(3)
        + i32(2)
        + i8(0)
        + carr(1)
        + (TOPIC_A_BYTES + carr(1) + i32(9) + b"\x01\x01\x05" + carr(1) + i32(3))
        + carr(0)
        + NO_TAGS,
        ConsumerGroupCurrentMemberAssignmentValue(3, 2, 0, (TopicPartitions(TOPIC_A, (9,)),), ()),
    ),
]


@pytest.mark.parametrize(
    ("name", "record_type", "golden", "value"),
    READ_ONLY_VALUES,
    ids=[v[0] for v in READ_ONLY_VALUES],
)
def test_read_only_value_version_decodes_and_reencodes_in_the_written_version(
    name: str, record_type: int, golden: bytes, value: RecordValue
) -> None:
    assert decode_value(record_type, golden) == value
    reencoded = encode_value(value)
    assert reencoded is not None and reencoded != golden
    assert decode_value(record_type, reencoded) == value


def test_offset_commit_value_v1_drops_the_leader_epoch_as_kafka_does() -> None:
    # Version 1 is the only one with expireTimestamp and has no leaderEpoch ("ignorable").
    value = OffsetCommitValue(OFFSET, 9, "meta", COMMIT_TS, EXPIRE_TS)
    golden = i16(1) + i64(OFFSET) + s16("meta") + i64(COMMIT_TS) + i64(EXPIRE_TS)
    assert encode_value(value) == golden
    assert decode_value(1, golden) == OffsetCommitValue(OFFSET, -1, "meta", COMMIT_TS, EXPIRE_TS)


def test_offset_commit_value_v0_and_v2_give_the_schema_defaults_for_missing_fields() -> None:
    for version in (0, 2):
        decoded = decode_value(1, i16(version) + i64(1) + s16("") + i64(2))
        assert isinstance(decoded, OffsetCommitValue)
        assert (decoded.leader_epoch, decoded.expire_timestamp) == (-1, -1)


def test_group_metadata_value_v0_leaves_rebalance_timeout_minus_one_for_session_timeout() -> None:
    golden = next(v[2] for v in READ_ONLY_VALUES if v[0] == "group_metadata_v0")
    decoded = decode_value(2, golden)
    assert isinstance(decoded, GroupMetadataValue)
    member = decoded.members[0]
    assert (member.rebalance_timeout, member.group_instance_id) == (-1, None)
    assert decoded.current_state_timestamp == -1


def test_full_record_golden_pairs_decode_together() -> None:
    key = i16(5) + s16("cg") + s16("member-1")
    value = i16(0) + NULL_CS + NULL_CS + cs("c") + cs("h") + carr(0) + NULL_CS + i32(-1)
    value += NULL_CS + NO_TAGS
    record = CoordinatorRecord(
        ConsumerGroupMemberMetadataKey("cg", "member-1"),
        ConsumerGroupMemberMetadataValue(None, None, "c", "h", (), None),
    )
    assert decode_record(key, value) == record
    assert encode_record(record) == (key, value)


def test_offset_commit_key_version_0_takes_an_offset_commit_value() -> None:
    key = i16(0) + s16("g") + s16("t") + i32(0)
    value = i16(3) + i64(10) + i32(-1) + s16("") + i64(20)
    assert decode_record(key, value) == CoordinatorRecord(
        OffsetCommitKey("g", "t", 0), OffsetCommitValue(10, -1, "", 20)
    )


def test_decoding_accepts_memoryview_and_bytearray_buffers() -> None:
    key = bytearray(i16(3) + s16("cg"))
    value = memoryview(b"junk" + i16(0) + i32(1) + NO_TAGS)[4:]
    assert decode_record(key, value) == CoordinatorRecord(
        ConsumerGroupMetadataKey("cg"), ConsumerGroupMetadataValue(1)
    )
