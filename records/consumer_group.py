"""KIP-848 consumer-group records (KIP-848 "Records"; Kafka `group-coordinator/.../message/`).

Record types 3-8 as in Kafka 3.8+/4.0 (the 3.7 early-access layout is incompatible and not
supported), plus type 16 (ConsumerGroupRegularExpression, Kafka 4.0). Every value is version 0
and flexible. Field names are Kafka's, in snake_case. Partition lists keep the order the engine
gives them (the order a member acquired them); Kafka readers treat them as sets.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """`TopicPartitions` common struct: a topic id and partition numbers.

    In record type 8 (a member's current assignment) Kafka 4.3+ adds tagged field 0,
    `AssignmentEpochs`: the epoch at which each partition was assigned to the member, one per
    partition in the same order. The coordinator accepts an offset commit with an older member
    epoch for a partition assigned at or before it. None means absent (records of older Kafka
    and of type 7, which has no such field); the replay then uses the member epoch.
    """

    topic_id: uuid.UUID
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None


# --- type 3: ConsumerGroupMetadata -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    RECORD_TYPE: ClassVar[int] = 3
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    VERSION: ClassVar[int] = 0
    epoch: int


# --- type 4: ConsumerGroupPartitionMetadata (subscription metadata) ---------------------------


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    racks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    # Deprecated in Kafka ("not used after 4.0"); written as an empty list, as Kafka does.
    partition_metadata: tuple[PartitionMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    RECORD_TYPE: ClassVar[int] = 4
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    VERSION: ClassVar[int] = 0
    topics: tuple[TopicMetadata, ...]


# --- type 5: ConsumerGroupMemberMetadata -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """Tagged field 0 of the member value: set only for members using the classic protocol."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True, slots=True)
class ClientAssignorMetadata:
    """One client-side assignor of a member (KIP-848 as designed, never shipped by Kafka): kept
    in tagged field 10000 of the member value, which Kafka's readers skip
    (docs/client-side-assignors.md)."""

    name: str
    minimum_version: int
    maximum_version: int
    reason: int
    metadata_version: int
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    RECORD_TYPE: ClassVar[int] = 5
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    VERSION: ClassVar[int] = 0
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None
    client_assignors: tuple[ClientAssignorMetadata, ...] = ()


# --- type 6: ConsumerGroupTargetAssignmentMetadata ---------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    RECORD_TYPE: ClassVar[int] = 6
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    VERSION: ClassVar[int] = 0
    assignment_epoch: int


# --- type 7: ConsumerGroupTargetAssignmentMember -----------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    RECORD_TYPE: ClassVar[int] = 7
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ClientAssignmentMetadata:
    """What a client-side assignor computed for one member besides its partitions (KIP-848's
    Assignment `MetadataVersion` / `MetadataBytes`): tagged field 10000 of the target member
    value, which Kafka's readers skip (docs/client-side-assignors.md)."""

    version: int
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    VERSION: ClassVar[int] = 0
    topic_partitions: tuple[TopicPartitions, ...]
    client_metadata: ClientAssignmentMetadata | None = None


# --- type 8: ConsumerGroupCurrentMemberAssignment ----------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    RECORD_TYPE: ClassVar[int] = 8
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    VERSION: ClassVar[int] = 0
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState byte: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...] = field(default=())


# --- type 16: ConsumerGroupRegularExpression (Kafka 4.0) ---------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    RECORD_TYPE: ClassVar[int] = 16
    group_id: str
    regular_expression: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    VERSION: ClassVar[int] = 0
    topics: tuple[str, ...]
    version: int  # the metadata image version the regex was resolved against
    timestamp: int  # when the resolution started (ms)
