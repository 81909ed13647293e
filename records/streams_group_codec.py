"""KIP-1071 streams group values: record types 17 and 19-23, value version 0, flexible.

Layouts of Kafka 4.4's `StreamsGroup*Value.json`:

    17 StreamsGroupMetadataValue           Epoch int32, MetadataHash int64, tag 0
                                           ValidatedTopologyEpoch int32 (-1), tag 1
                                           LastAssignmentConfigs [Key, Value]? (null), tag 2
                                           StoredDescriptionTopologyEpoch int32 (-1), tag 3
                                           FailedDescriptionTopologyEpoch int32 (-1)
    19 StreamsGroupMemberMetadataValue     InstanceId?, RackId?, ClientId, ClientHost,
                                           RebalanceTimeoutMs int32, TopologyEpoch int32,
                                           ProcessId, UserEndpoint {Host, Port uint16}?,
                                           ClientTags [Key, Value], groupshift's tag
                                           10000 ClassicMemberMetadata? (a classic member)
    20 StreamsGroupTargetAssignmentMetadataValue  AssignmentEpoch int32, tag 0
                                           AssignmentTimestamp int64 (0)
    21 StreamsGroupTargetAssignmentMemberValue    ActiveTasks, StandbyTasks, WarmupTasks
                                           (each [SubtopologyId, Partitions []int32])
    22 StreamsGroupCurrentMemberAssignmentValue   MemberEpoch int32, PreviousMemberEpoch
                                           int32, State int8, the three task lists and the
                                           three lists pending revocation (TaskIds with tag 0
                                           AssignmentEpochs []int32?)
    23 StreamsGroupTopologyValue           Epoch int32, Subtopologies [SubtopologyId,
                                           SourceTopics, SourceTopicRegex []string,
                                           StateChangelogTopics, RepartitionSourceTopics
                                           ([Name, Partitions int32, ReplicationFactor int16,
                                           TopicConfigs [key, value]]), RepartitionSinkTopics
                                           []string, CopartitionGroups [three []int16]]

Unlike the consumer-group codec these are read and written by a small schema interpreter: a
streams group's records are few (one topology, a handful of members per application) next to
the offset commits that dominate a log, so declaring each layout once beats inlined speed here.
The interpreter follows Kafka's generated code: compact lengths (n + 1, 0 = null), a nullable
struct as an int8 -1 (null) or 1 before it, a tagged field written only when it differs from
its default (or is an empty array), unknown tags skipped on read, and nothing may follow the message.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from records.consumer_group import ClassicMemberMetadata, ClassicProtocol
from records.coordinator import RecordValue
from records.streams_group import (
    CopartitionGroup,
    Endpoint,
    KeyValue,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyValue,
    Subtopology,
    TaskIds,
    TopicInfo,
)
from records.wire import (
    WireFormatError,
    compact_bytes,
    compact_nullable_string,
    compact_string,
    read_compact_bytes,
    read_compact_nullable_string,
    read_compact_string,
    read_uvarint,
    trailing_bytes_error,
    unsupported_version_error,
    uvarint,
)

__all__ = ["VALUE_DECODERS", "VALUE_ENCODERS"]


class _Type:
    """One field type: appends its bytes to a list, reads itself at a position."""

    def write(self, value: Any, out: list[bytes]) -> None:
        raise NotImplementedError

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        raise NotImplementedError


class _Fixed(_Type):
    def __init__(self, fmt: str) -> None:
        self._struct = struct.Struct(fmt)

    def write(self, value: Any, out: list[bytes]) -> None:
        out.append(self._struct.pack(value))

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        return self._struct.unpack_from(buf, pos)[0], pos + self._struct.size


class _String(_Type):
    def __init__(self, name: str, nullable: bool = False) -> None:
        self._name = name
        self._nullable = nullable

    def write(self, value: Any, out: list[bytes]) -> None:
        out.append(compact_nullable_string(value) if self._nullable else compact_string(value))

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        if self._nullable:
            return read_compact_nullable_string(buf, pos, self._name)
        return read_compact_string(buf, pos, self._name)


class _Bytes(_Type):
    def __init__(self, name: str) -> None:
        self._name = name

    def write(self, value: Any, out: list[bytes]) -> None:
        out.append(compact_bytes(value))

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        return read_compact_bytes(buf, pos, self._name)


class _Array(_Type):
    """A compact array; read as a tuple. `min_size` bounds the count by the bytes left."""

    def __init__(self, name: str, element: _Type, min_size: int, nullable: bool = False) -> None:
        self._name = name
        self._element = element
        self._min_size = min_size
        self._nullable = nullable

    def write(self, value: Any, out: list[bytes]) -> None:
        if value is None:
            if not self._nullable:
                raise ValueError(f"{self._name} cannot be null")
            out.append(b"\x00")
            return
        out.append(uvarint(len(value) + 1))
        for element in value:
            self._element.write(element, out)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        n, pos = read_uvarint(buf, pos)
        if n == 0:
            if not self._nullable:
                raise WireFormatError(f"{self._name}: non-nullable array was serialized as null")
            return None, pos
        n -= 1
        if n * self._min_size > len(buf) - pos:
            raise WireFormatError(f"{self._name}: {n} elements cannot fit in {len(buf) - pos} bytes")
        items = []
        for _ in range(n):
            item, pos = self._element.read(buf, pos)
            items.append(item)
        return tuple(items), pos


class _Struct(_Type):
    """A struct: its fields in order, then its tagged fields (tag -> type and default); the
    dataclass takes the plain fields then the tagged ones by tag, positionally."""

    def __init__(
        self,
        cls: type[Any],
        fields: list[tuple[str, _Type]],
        tagged: dict[int, tuple[str, _Type, Any]] | None = None,
        nullable: bool = False,
    ) -> None:
        self._cls = cls
        self._fields = fields
        self._tagged = dict(sorted((tagged or {}).items()))
        self._nullable = nullable

    def write(self, value: Any, out: list[bytes]) -> None:
        if self._nullable:
            if value is None:
                out.append(b"\xff")
                return
            out.append(b"\x01")
        for name, kind in self._fields:
            kind.write(getattr(value, name), out)
        present = []
        for tag, (name, kind, default) in self._tagged.items():
            field_value = getattr(value, name)
            # Kafka's generated writers also leave out an empty tagged array (read back as
            # the default, null).
            if field_value != default and field_value != ():
                data: list[bytes] = []
                kind.write(field_value, data)
                present.append((tag, b"".join(data)))
        out.append(uvarint(len(present)))
        for tag, data_bytes in present:
            out += (uvarint(tag), uvarint(len(data_bytes)), data_bytes)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        if self._nullable:
            marker = struct.unpack_from(">b", buf, pos)[0]
            pos += 1
            if marker < 0:
                return None, pos
        args = []
        for _name, kind in self._fields:
            field_value, pos = kind.read(buf, pos)
            args.append(field_value)
        tagged_values = {tag: default for tag, (_n, _k, default) in self._tagged.items()}
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise WireFormatError(f"tagged field {tag}: size {size} but {len(buf) - pos} bytes left")
            known = self._tagged.get(tag)
            if known is not None:
                # Read from a copy bounded by the tag's size: the field must fill it exactly.
                field_value, used = known[1].read(buf[pos:end], 0)
                if used != size:
                    raise WireFormatError(f"tagged field {tag}: {size - used} bytes left unread")
                tagged_values[tag] = field_value
            pos = end
        return self._cls(*args, *tagged_values.values()), pos


_INT8 = _Fixed(">b")
_INT16 = _Fixed(">h")
_INT32 = _Fixed(">i")
_INT64 = _Fixed(">q")
_UINT16 = _Fixed(">H")


def _key_value(cls: type[Any] = KeyValue) -> _Struct:
    return _Struct(cls, [("key", _String("Key")), ("value", _String("Value"))])


def _task_ids(with_epochs: bool) -> _Array:
    """`[]TaskIds`; type 22 has the tagged AssignmentEpochs, type 21 does not (the dataclass's
    third field then stays None)."""
    tagged: dict[int, tuple[str, _Type, Any]] = {
        0: ("assignment_epochs", _Array("AssignmentEpochs", _INT32, 4, nullable=True), None)
    }
    element = _Struct(
        TaskIds,
        [("subtopology_id", _String("SubtopologyId")), ("partitions", _Array("Partitions", _INT32, 4))],
        tagged if with_epochs else None,
    )
    return _Array("TaskIds", element, 3)


_STRINGS = _Array("[]string", _String("string"), 1)
_INT16S = _Array("[]int16", _INT16, 2)
_TOPIC_INFO = _Struct(
    TopicInfo,
    [
        ("name", _String("Name")),
        ("partitions", _INT32),
        ("replication_factor", _INT16),
        ("topic_configs", _Array("TopicConfigs", _key_value(), 3)),
    ],
)
_TOPIC_INFOS = _Array("TopicInfo", _TOPIC_INFO, 9)

# groupshift's tag for a classic Kafka Streams instance inside a streams group
# (docs/streams-classic-groups.md): far above Kafka's tags, as the consumer group's client
# assignors tag is, so Kafka's generated reader keeps it as an unknown tagged field. The struct
# is the consumer group's ClassicMemberMetadata: {SessionTimeoutMs int32, SupportedProtocols
# []{Name string, Metadata bytes}}.
CLASSIC_MEMBER_TAG = 10000
_CLASSIC_MEMBER = _Struct(
    ClassicMemberMetadata,
    [
        ("session_timeout_ms", _INT32),
        (
            "supported_protocols",
            _Array(
                "SupportedProtocols",
                _Struct(ClassicProtocol, [("name", _String("Name")), ("metadata", _Bytes("Metadata"))]),
                3,
            ),
        ),
    ],
    nullable=True,
)

_SCHEMAS: dict[type, _Struct] = {
    StreamsGroupMetadataValue: _Struct(
        StreamsGroupMetadataValue,
        [("epoch", _INT32), ("metadata_hash", _INT64)],
        {
            0: ("validated_topology_epoch", _INT32, -1),
            1: (
                "last_assignment_configs",
                _Array("LastAssignmentConfigs", _key_value(), 3, nullable=True),
                None,
            ),
            2: ("stored_description_topology_epoch", _INT32, -1),
            3: ("failed_description_topology_epoch", _INT32, -1),
        },
    ),
    StreamsGroupMemberMetadataValue: _Struct(
        StreamsGroupMemberMetadataValue,
        [
            ("instance_id", _String("InstanceId", nullable=True)),
            ("rack_id", _String("RackId", nullable=True)),
            ("client_id", _String("ClientId")),
            ("client_host", _String("ClientHost")),
            ("rebalance_timeout_ms", _INT32),
            ("topology_epoch", _INT32),
            ("process_id", _String("ProcessId")),
            (
                "user_endpoint",
                _Struct(Endpoint, [("host", _String("Host")), ("port", _UINT16)], nullable=True),
            ),
            ("client_tags", _Array("ClientTags", _key_value(), 3)),
        ],
        {CLASSIC_MEMBER_TAG: ("classic_member_metadata", _CLASSIC_MEMBER, None)},
    ),
    StreamsGroupTargetAssignmentMetadataValue: _Struct(
        StreamsGroupTargetAssignmentMetadataValue,
        [("assignment_epoch", _INT32)],
        {0: ("assignment_timestamp", _INT64, 0)},
    ),
    StreamsGroupTargetAssignmentMemberValue: _Struct(
        StreamsGroupTargetAssignmentMemberValue,
        [
            ("active_tasks", _task_ids(False)),
            ("standby_tasks", _task_ids(False)),
            ("warmup_tasks", _task_ids(False)),
        ],
    ),
    StreamsGroupCurrentMemberAssignmentValue: _Struct(
        StreamsGroupCurrentMemberAssignmentValue,
        [
            ("member_epoch", _INT32),
            ("previous_member_epoch", _INT32),
            ("state", _INT8),
            ("active_tasks", _task_ids(True)),
            ("standby_tasks", _task_ids(True)),
            ("warmup_tasks", _task_ids(True)),
            ("active_tasks_pending_revocation", _task_ids(True)),
            ("standby_tasks_pending_revocation", _task_ids(True)),
            ("warmup_tasks_pending_revocation", _task_ids(True)),
        ],
    ),
    StreamsGroupTopologyValue: _Struct(
        StreamsGroupTopologyValue,
        [
            ("epoch", _INT32),
            (
                "subtopologies",
                _Array(
                    "Subtopologies",
                    _Struct(
                        Subtopology,
                        [
                            ("subtopology_id", _String("SubtopologyId")),
                            ("source_topics", _STRINGS),
                            ("source_topic_regex", _STRINGS),
                            ("state_changelog_topics", _TOPIC_INFOS),
                            ("repartition_sink_topics", _STRINGS),
                            ("repartition_source_topics", _TOPIC_INFOS),
                            (
                                "copartition_groups",
                                _Array(
                                    "CopartitionGroups",
                                    _Struct(
                                        CopartitionGroup,
                                        [
                                            ("source_topics", _INT16S),
                                            ("source_topic_regex", _INT16S),
                                            ("repartition_source_topics", _INT16S),
                                        ],
                                    ),
                                    4,
                                ),
                            ),
                        ],
                    ),
                    8,
                ),
            ),
        ],
    ),
}


def _decoder(schema: _Struct) -> Callable[[bytes], RecordValue]:
    def decode(buf: bytes) -> Any:
        (version,) = struct.unpack_from(">h", buf, 0)
        if version != 0:
            raise unsupported_version_error(version, "0")
        value, pos = schema.read(buf, 2)
        if pos != len(buf):
            raise trailing_bytes_error(pos, buf)
        return value

    return decode


def _encoder(schema: _Struct) -> Callable[[Any], bytes]:
    def encode(value: Any) -> bytes:
        out = [b"\x00\x00"]
        schema.write(value, out)
        return b"".join(out)

    return encode


_RECORD_TYPES: dict[int, type] = {
    17: StreamsGroupMetadataValue,
    19: StreamsGroupMemberMetadataValue,
    20: StreamsGroupTargetAssignmentMetadataValue,
    21: StreamsGroupTargetAssignmentMemberValue,
    22: StreamsGroupCurrentMemberAssignmentValue,
    23: StreamsGroupTopologyValue,
}

VALUE_DECODERS: dict[int, Callable[[bytes], RecordValue]] = {
    record_type: _decoder(_SCHEMAS[cls]) for record_type, cls in _RECORD_TYPES.items()
}
"""Record type -> decoder of the whole value bytes (version prefix included)."""

VALUE_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    cls: _encoder(schema) for cls, schema in _SCHEMAS.items()
}
"""Value class -> encoder (version prefix included)."""
