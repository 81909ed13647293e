"""Cross-check of the record codec against an independent implementation: kafka-python's
generic, JSON-schema-driven message codec (`kafka.protocol.schemas.fields.StructField`).

kafka-python ships Kafka's *client* schemas, not the coordinator records, but its codec takes
any schema in Kafka's JSON form. `SCHEMAS` below is our transcription of the coordinator record
schemas into that form (field names, types, versions, nullability and tags; the descriptions
left out), checked against the JSON files Kafka ships in its `kafka-group-coordinator` jar (fetched by
`harness.kafka_dist`; skipped, with the reason, only where Java or Maven is absent).
The two codecs share nothing but the schemas, so agreement on random records checks our
hand-written layouts: field order, compact vs. classic encodings, where tagged-field sections
go, how a nullable struct sits in a tagged field.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from records import CoordinatorRecord, GroupMemberMetadata, GroupMetadataValue, OffsetCommitValue
from records.codec import decode_value, encode_record
from tests.record_strategies import (
    coordinator_records,
    group_members,
    int32,
    int64,
    optional_text,
    text,
    tuples,
)

kafka_fields = pytest.importorskip("kafka.protocol.schemas.fields.struct")
StructField = kafka_fields.StructField


# --- our transcription of the schemas -----------------------------------------------------------


def f(name: str, type_: str, versions: str = "0+", **extra: Any) -> dict[str, Any]:
    field: dict[str, Any] = {"name": name, "type": type_, "versions": versions}
    if "nullable" in extra:
        field["nullableVersions"] = extra.pop("nullable")
    if "fields" in extra:
        field["fields"] = extra.pop("fields")
    field.update(extra)
    return field


def message(name: str, valid: str, flexible: str, *fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "type": "data",
        "validVersions": valid,
        "flexibleVersions": flexible,
        "fields": list(fields),
    }


def topic_partitions(name: str, type_: str, epochs: bool = False) -> dict[str, Any]:
    """Type 7's `TopicPartition`, or type 8's `TopicPartitions` with (Kafka 4.3+) tag 0."""
    fields = [f("TopicId", "uuid"), f("Partitions", "[]int32")]
    if epochs:
        # Kafka's JSON says `default: null`, but its generated code starts from an empty list
        # and leaves the tag out only for that; null (our None) is "absent" on our side.
        fields.append(f("AssignmentEpochs", "[]int32", nullable="0+", default=[], taggedVersions="0+", tag=0))
    return f(name, type_, fields=fields)


SCHEMAS: dict[str, dict[str, Any]] = {
    "OffsetCommitKey": message(
        "OffsetCommitKey",
        "0-1",
        "none",
        f("group", "string", "0-1"),
        f("topic", "string", "0-1"),
        f("partition", "int32", "0-1"),
    ),
    "OffsetCommitValue": message(
        "OffsetCommitValue",
        "0-4",
        "4+",
        f("offset", "int64"),
        f("leaderEpoch", "int32", "3+"),
        f("metadata", "string"),
        f("commitTimestamp", "int64"),
        f("expireTimestamp", "int64", "1"),
    ),
    "GroupMetadataKey": message("GroupMetadataKey", "2", "none", f("group", "string", "2")),
    "GroupMetadataValue": message(
        "GroupMetadataValue",
        "0-4",
        "4+",
        f("protocolType", "string"),
        f("generation", "int32"),
        f("protocol", "string", nullable="0+"),
        f("leader", "string", nullable="0+"),
        f("currentStateTimestamp", "int64", "2+"),
        f(
            "members",
            "[]MemberMetadata",
            fields=[
                f("memberId", "string"),
                f("groupInstanceId", "string", "3+", nullable="3+"),
                f("clientId", "string"),
                f("clientHost", "string"),
                f("rebalanceTimeout", "int32", "1+"),
                f("sessionTimeout", "int32"),
                f("subscription", "bytes"),
                f("assignment", "bytes"),
            ],
        ),
    ),
    "ConsumerGroupMetadataKey": message("ConsumerGroupMetadataKey", "3", "none", f("GroupId", "string", "3")),
    "ConsumerGroupMetadataValue": message("ConsumerGroupMetadataValue", "0", "0+", f("Epoch", "int32")),
    "ConsumerGroupPartitionMetadataKey": message(
        "ConsumerGroupPartitionMetadataKey", "4", "none", f("GroupId", "string", "4")
    ),
    "ConsumerGroupPartitionMetadataValue": message(
        "ConsumerGroupPartitionMetadataValue",
        "0",
        "0+",
        f(
            "Topics",
            "[]TopicMetadata",
            fields=[
                f("TopicId", "uuid"),
                f("TopicName", "string"),
                f("NumPartitions", "int32"),
                f(
                    "PartitionMetadata",
                    "[]PartitionMetadata",
                    fields=[
                        f("Partition", "int32"),
                        f("Racks", "[]string"),
                    ],
                ),
            ],
        ),
    ),
    "ConsumerGroupMemberMetadataKey": message(
        "ConsumerGroupMemberMetadataKey",
        "5",
        "none",
        f("GroupId", "string", "5"),
        f("MemberId", "string", "5"),
    ),
    "ConsumerGroupMemberMetadataValue": message(
        "ConsumerGroupMemberMetadataValue",
        "0",
        "0+",
        f("InstanceId", "string", nullable="0+"),
        f("RackId", "string", nullable="0+"),
        f("ClientId", "string"),
        f("ClientHost", "string"),
        f("SubscribedTopicNames", "[]string"),
        f("SubscribedTopicRegex", "string", nullable="0+"),
        f("RebalanceTimeoutMs", "int32"),
        f("ServerAssignor", "string", nullable="0+"),
        f(
            "ClassicMemberMetadata",
            "ClassicMemberMetadata",
            nullable="0+",
            default=None,
            taggedVersions="0+",
            tag=0,
            fields=[
                f("SessionTimeoutMs", "int32"),
                f(
                    "SupportedProtocols",
                    "[]ClassicProtocol",
                    fields=[
                        f("Name", "string"),
                        f("Metadata", "bytes"),
                    ],
                ),
            ],
        ),
    ),
    "ConsumerGroupTargetAssignmentMetadataKey": message(
        "ConsumerGroupTargetAssignmentMetadataKey", "6", "none", f("GroupId", "string", "6")
    ),
    "ConsumerGroupTargetAssignmentMetadataValue": message(
        "ConsumerGroupTargetAssignmentMetadataValue", "0", "0+", f("AssignmentEpoch", "int32")
    ),
    "ConsumerGroupTargetAssignmentMemberKey": message(
        "ConsumerGroupTargetAssignmentMemberKey",
        "7",
        "none",
        f("GroupId", "string", "7"),
        f("MemberId", "string", "7"),
    ),
    "ConsumerGroupTargetAssignmentMemberValue": message(
        "ConsumerGroupTargetAssignmentMemberValue",
        "0",
        "0+",
        topic_partitions("TopicPartitions", "[]TopicPartition"),
    ),
    "ConsumerGroupCurrentMemberAssignmentKey": message(
        "ConsumerGroupCurrentMemberAssignmentKey",
        "8",
        "none",
        f("GroupId", "string", "8"),
        f("MemberId", "string", "8"),
    ),
    "ConsumerGroupCurrentMemberAssignmentValue": message(
        "ConsumerGroupCurrentMemberAssignmentValue",
        "0",
        "0+",
        f("MemberEpoch", "int32"),
        f("PreviousMemberEpoch", "int32"),
        f("State", "int8"),
        topic_partitions("AssignedPartitions", "[]TopicPartitions", epochs=True),
        topic_partitions("PartitionsPendingRevocation", "[]TopicPartitions", epochs=True),
    ),
    # Kafka 4.0: the value is checked against the newest 4.x jar (see NEWER_RECORDS).
    "ConsumerGroupRegularExpressionKey": message(
        "ConsumerGroupRegularExpressionKey",
        "16",
        "none",
        f("GroupId", "string", "16"),
        f("RegularExpression", "string", "16"),
    ),
    "ConsumerGroupRegularExpressionValue": message(
        "ConsumerGroupRegularExpressionValue",
        "0",
        "0+",
        f("Topics", "[]string"),
        f("Version", "int64"),
        f("Timestamp", "int64"),
    ),
}

CODECS = {name: StructField(schema) for name, schema in SCHEMAS.items()}
FLEXIBLE_FROM = {"OffsetCommitValue": 4, "GroupMetadataValue": 4}  # others: keys never, values 0+


def _flexible(schema_name: str, version: int) -> bool:
    if schema_name.endswith("Key"):
        return False
    return version >= FLEXIBLE_FROM.get(schema_name, 0)


def _epochs_absent_as_empty(value: dict[str, Any]) -> dict[str, Any]:
    """Type 8: our None `assignment_epochs` (absent) is kafka-python's default, the empty list."""
    for key in ("assigned_partitions", "partitions_pending_revocation"):
        for tp in value.get(key, ()):
            if tp.get("assignment_epochs") is None:
                tp["assignment_epochs"] = []
    return value


def kafka_python_encode(schema_name: str, obj: Any, version: int) -> bytes:
    flexible = _flexible(schema_name, version)
    data: bytes = CODECS[schema_name].encode(
        _epochs_absent_as_empty(dataclasses.asdict(obj)), version=version, compact=flexible, tagged=flexible
    )
    return data


def kafka_python_decode(schema_name: str, data: bytes, version: int) -> Any:
    flexible = _flexible(schema_name, version)
    stream = io.BytesIO(data)
    decoded = CODECS[schema_name].decode(stream, version=version, compact=flexible, tagged=flexible)
    assert stream.tell() == len(data), "kafka-python left bytes unread"
    return decoded


def plain(obj: Any) -> Any:
    """Our object as kafka-python's decoder returns it: dicts and lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {field.name: plain(getattr(obj, field.name)) for field in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [plain(item) for item in obj]
    return obj


def kafka_python_plain(decoded: Any) -> Any:
    """kafka-python's decoded message, with its one convention that differs from ours: it reads
    the all-zero uuid (Kafka's `Uuid.ZERO_UUID`) as None."""
    if isinstance(decoded, dict):
        return {
            k: uuid.UUID(int=0) if k == "topic_id" and v is None else kafka_python_plain(v)
            for k, v in decoded.items()
        }
    if isinstance(decoded, list):
        return [kafka_python_plain(item) for item in decoded]
    return decoded


# groupshift's extension fields of Kafka's record schemas and their absent values
GROUPSHIFT_TAGGED_FIELDS: dict[str, Any] = {"client_assignors": (), "client_metadata": None}


def written_value_version(value: Any) -> int:
    if isinstance(value, OffsetCommitValue):
        return 1 if value.expire_timestamp != -1 else 3
    if isinstance(value, GroupMetadataValue):
        return 3
    return 0


# --- what we write ------------------------------------------------------------------------------


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(coordinator_records)
def test_our_bytes_equal_kafka_pythons_for_the_versions_we_write(record: CoordinatorRecord) -> None:
    key_bytes, value_bytes = encode_record(record)
    key_schema = type(record.key).__name__
    (record_type,) = struct.unpack(">h", key_bytes[:2])
    assert record_type == type(record.key).RECORD_TYPE
    assert key_bytes[2:] == kafka_python_encode(key_schema, record.key, record_type)
    assert kafka_python_decode(key_schema, key_bytes[2:], record_type) == plain(record.key)
    if record.value is None:
        assert value_bytes is None
        return
    assert value_bytes is not None
    value_schema = type(record.value).__name__
    (version,) = struct.unpack(">h", value_bytes[:2])
    assert version == written_value_version(record.value)
    # groupshift's own tagged fields (docs/client-side-assignors.md: tag 10000 of type 5, of type
    # 7) are not in Kafka's schemas: a record carrying one is Kafka's bytes plus that tag, which
    # kafka-python, like Kafka, skips when it reads.
    extensions = {
        name: getattr(record.value, name)
        for name in GROUPSHIFT_TAGGED_FIELDS
        if getattr(record.value, name, None) not in (None, ())
    }
    kafka_value = record.value
    if extensions:
        kafka_value = dataclasses.replace(
            record.value, **{name: GROUPSHIFT_TAGGED_FIELDS[name] for name in extensions}
        )
        assert value_bytes[2:] != kafka_python_encode(value_schema, kafka_value, version)
    else:
        assert value_bytes[2:] == kafka_python_encode(value_schema, record.value, version)
    decoded = kafka_python_plain(kafka_python_decode(value_schema, value_bytes[2:], version))
    # kafka-python keeps a tag its schema lacks as raw bytes under "_<tag>": ours, and only ours.
    unknown_tags = {k: decoded.pop(k) for k in list(decoded) if k.startswith("_")}
    assert set(unknown_tags) == ({"_10000"} if extensions else set())
    expected = {k: v for k, v in plain(kafka_value).items() if k not in GROUPSHIFT_TAGGED_FIELDS}
    if isinstance(record.value, OffsetCommitValue):
        # kafka-python omits the fields that the version lacks ...
        expected = {k: v for k, v in expected.items() if k in decoded}
    if "classic_member_metadata" in expected:
        # ... and tagged fields that are absent.
        decoded.setdefault("classic_member_metadata", None)
    for key in ("assigned_partitions", "partitions_pending_revocation"):
        for tp in decoded.get(key, ()):
            tp["assignment_epochs"] = tp.get("assignment_epochs") or None
    for tp in expected.get("topic_partitions", ()):
        del tp["assignment_epochs"]  # type 7's partitions have no such field
    assert decoded == expected


# --- every version we read ----------------------------------------------------------------------


def _as_read_in(value: OffsetCommitValue, version: int) -> OffsetCommitValue:
    """The value with the fields that `version` lacks at their defaults."""
    return dataclasses.replace(
        value,
        leader_epoch=value.leader_epoch if version >= 3 else -1,
        expire_timestamp=value.expire_timestamp if version == 1 else -1,
    )


@settings(max_examples=200)
@given(st.integers(0, 4), int64, int32, text, int64, int64)
def test_we_read_kafka_pythons_offset_commit_values_of_every_version(
    version: int, offset: int, leader_epoch: int, metadata: str, commit: int, expire: int
) -> None:
    value = _as_read_in(OffsetCommitValue(offset, leader_epoch, metadata, commit, expire), version)
    data = struct.pack(">h", version) + kafka_python_encode("OffsetCommitValue", value, version)
    assert decode_value(1, data) == value


def _group_as_read_in(value: GroupMetadataValue, version: int) -> GroupMetadataValue:
    def member(m: GroupMemberMetadata) -> GroupMemberMetadata:
        return dataclasses.replace(
            m,
            group_instance_id=m.group_instance_id if version >= 3 else None,
            rebalance_timeout=m.rebalance_timeout if version >= 1 else -1,
        )

    return dataclasses.replace(
        value,
        current_state_timestamp=value.current_state_timestamp if version >= 2 else -1,
        members=tuple(member(m) for m in value.members),
    )


group_metadata_values = st.builds(
    GroupMetadataValue, text, int32, optional_text, optional_text, int64, tuples(group_members)
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 4), group_metadata_values)
def test_we_read_kafka_pythons_group_metadata_values_of_every_version(
    version: int, value: GroupMetadataValue
) -> None:
    value = _group_as_read_in(value, version)
    data = struct.pack(">h", version) + kafka_python_encode("GroupMetadataValue", value, version)
    assert decode_value(2, data) == value


# --- the transcription matches Kafka's JSON files -----------------------------------------------

SCHEMA_KEYS = ("name", "type", "versions", "nullableVersions", "tag", "taggedVersions")
#: The release whose `kafka-group-coordinator` jar is the reference for the transcription: the
#: last line before 4.0, which rewrote the key schemas (`"type": "coordinator-key"` with an
#: `apiKey` and version 0, the same bytes) and so reads differently, not encodes differently.
REFERENCE_RELEASE = "3.9"
#: Record types that 4.0 introduced, checked against the newest 4.x (values only: the keys use
#: the 4.0 key form described above).
NEWER_RECORDS = {"ConsumerGroupRegularExpressionValue": "4", "ConsumerGroupCurrentMemberAssignmentValue": "4"}


def _kafka_json(name: str) -> dict[str, Any]:
    from harness.kafka_dist import KafkaUnavailable, resolve
    from harness.kafka_dist.schemas import message_schema

    try:
        dist = resolve(NEWER_RECORDS.get(name, REFERENCE_RELEASE))
    except KafkaUnavailable as exc:
        if exc.tool_missing:
            pytest.skip(f"Kafka's schemas come from its jars: {exc}")
        raise
    schema = message_schema(dist, name)
    assert schema is not None, f"Kafka {dist.version} ships no {name}.json"
    return schema


def _normalise(fields: list[dict[str, Any]], common: dict[str, Any]) -> list[Any]:
    out = []
    for field in fields:
        entry = {k: field[k] for k in SCHEMA_KEYS if k in field}
        element = field["type"].removeprefix("[]")
        nested = field.get("fields") or common.get(element)
        if nested:
            entry["fields"] = _normalise(nested, common)
        out.append(entry)
    return out


@pytest.mark.parametrize("name", [n for n in SCHEMAS if n != "ConsumerGroupRegularExpressionKey"])
def test_transcribed_schema_matches_kafkas_json(name: str) -> None:
    kafka = _kafka_json(name)
    common = {s["name"]: s["fields"] for s in kafka.get("commonStructs", [])}
    ours = SCHEMAS[name]
    assert (ours["validVersions"], ours["flexibleVersions"]) == (
        kafka["validVersions"],
        kafka["flexibleVersions"],
    )
    assert _normalise(ours["fields"], {}) == _normalise(kafka["fields"], common)
