"""KIP-1071 streams-group records (Kafka 4.4 `group-coordinator/.../message/StreamsGroup*.json`).

Record types 17 and 19-23, every value version 0 and flexible. Kafka 4.4 has no type 18 (the
partition metadata record of early previews was dropped: the group keeps a metadata hash in
type 17 instead). Field names are Kafka's, in snake_case; tagged fields carry Kafka's defaults
and are written only when they differ from them, as Kafka's generated writers do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from records.consumer_group import ClassicMemberMetadata


@dataclass(frozen=True, slots=True)
class KeyValue:
    """`KeyValue` / `LastAssignmentConfig` / `TopicConfig`: two strings."""

    key: str
    value: str


@dataclass(frozen=True, slots=True)
class TaskIds:
    """`TaskIds`: one subtopology's task (= input partition) numbers. In type 22, tagged field
    0 `AssignmentEpochs` (active tasks only) gives the epoch each was assigned at; None means
    absent (and is what types 21 and the standby/warm-up lists always hold)."""

    subtopology_id: str
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None


# --- type 17: StreamsGroupMetadata -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamsGroupMetadataKey:
    RECORD_TYPE: ClassVar[int] = 17
    group_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupMetadataValue:
    VERSION: ClassVar[int] = 0
    epoch: int
    metadata_hash: int
    validated_topology_epoch: int = -1  # tag 0
    last_assignment_configs: tuple[KeyValue, ...] | None = None  # tag 1
    stored_description_topology_epoch: int = -1  # tag 2
    failed_description_topology_epoch: int = -1  # tag 3


# --- type 19: StreamsGroupMemberMetadata -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int  # uint16


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataKey:
    RECORD_TYPE: ClassVar[int] = 19
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataValue:
    VERSION: ClassVar[int] = 0
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: Endpoint | None
    client_tags: tuple[KeyValue, ...]
    # groupshift's tagged field 10000 (docs/streams-classic-groups.md): set only for a classic
    # Kafka Streams instance living inside the streams group (its session timeout and JoinGroup
    # protocols); Kafka's readers skip it as an unknown tag.
    classic_member_metadata: ClassicMemberMetadata | None = None


# --- type 20: StreamsGroupTargetAssignmentMetadata ---------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMetadataKey:
    RECORD_TYPE: ClassVar[int] = 20
    group_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMetadataValue:
    VERSION: ClassVar[int] = 0
    assignment_epoch: int
    assignment_timestamp: int = 0  # tag 0


# --- type 21: StreamsGroupTargetAssignmentMember -----------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMemberKey:
    RECORD_TYPE: ClassVar[int] = 21
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMemberValue:
    VERSION: ClassVar[int] = 0
    active_tasks: tuple[TaskIds, ...]
    standby_tasks: tuple[TaskIds, ...]
    warmup_tasks: tuple[TaskIds, ...]


# --- type 22: StreamsGroupCurrentMemberAssignment ----------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentKey:
    RECORD_TYPE: ClassVar[int] = 22
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentValue:
    VERSION: ClassVar[int] = 0
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState byte: 1 STABLE, 2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS, 127 UNKNOWN
    active_tasks: tuple[TaskIds, ...]
    standby_tasks: tuple[TaskIds, ...]
    warmup_tasks: tuple[TaskIds, ...]
    active_tasks_pending_revocation: tuple[TaskIds, ...] = ()
    standby_tasks_pending_revocation: tuple[TaskIds, ...] = ()
    warmup_tasks_pending_revocation: tuple[TaskIds, ...] = ()


# --- type 23: StreamsGroupTopology -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic the topology needs: partitions 0 = "derive it", replication factor
    0 = "the cluster's default"."""

    name: str
    partitions: int
    replication_factor: int
    topic_configs: tuple[KeyValue, ...]


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Indexes into the subtopology's source topics, source regexes and repartition sources."""

    source_topics: tuple[int, ...]
    source_topic_regex: tuple[int, ...]
    repartition_source_topics: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    state_changelog_topics: tuple[TopicInfo, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[TopicInfo, ...]
    copartition_groups: tuple[CopartitionGroup, ...]


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyKey:
    RECORD_TYPE: ClassVar[int] = 23
    group_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyValue:
    VERSION: ClassVar[int] = 0
    epoch: int
    subtopologies: tuple[Subtopology, ...]
