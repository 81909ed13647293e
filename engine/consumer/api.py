"""ConsumerGroupHeartbeat and ConsumerGroupDescribe data (API keys 68 and 69, KIP-848).

Engine-side shapes of the requests and responses; the gateway maps them to and from the wire.
Topic partitions are by topic id, as on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.metadata import TopicId
from records.consumer_group import ClientAssignmentMetadata, ClientAssignorMetadata, TopicPartitions

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
JOIN_GROUP_MEMBER_EPOCH = 0


@dataclass(slots=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str = ""
    member_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: Sequence[TopicPartitions] | None = None
    # groupshift's tagged field (docs/client-side-assignors.md): None = unchanged / not sent.
    client_assignors: tuple[ClientAssignorMetadata, ...] | None = None


@dataclass(slots=True)
class ConsumerGroupHeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple[TopicPartitions, ...] | None = None
    # COMPUTE_ASSIGNMENT (docs/client-side-assignors.md): the group epoch to compute for.
    compute_assignment_epoch: int | None = None
    # What the client-side assignor computed for this member besides its partitions, sent with
    # an assignment (docs/client-side-assignors.md).
    assignment_metadata: ClientAssignmentMetadata | None = None


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: TopicId
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int  # ConsumerGroupDescribe v1 MemberType: 0 classic, 1 consumer (KIP-1099)
    state: str = ""


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    error_code: int = 0
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedMember, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str
