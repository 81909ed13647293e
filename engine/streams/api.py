"""The engine's StreamsGroupHeartbeat request and response (KIP-1071; Kafka 4.4's
`StreamsGroupHeartbeatRequest/Response.json` v0), free of the wire library: the gateway turns
kio's objects into these. The topology arrives as the record it is stored as."""

from __future__ import annotations

from dataclasses import dataclass, field

from records.streams_group import Endpoint, KeyValue, StreamsGroupTopologyValue, TaskIds

# StreamsGroupHeartbeatResponse.Status codes (Kafka `StreamsGroupHeartbeatResponse.Status`).
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5
MISSING_CLIENT_TAGS = 6  # Kafka 4.4, StreamsGroupHeartbeat v1 and later


@dataclass(frozen=True, slots=True)
class Status:
    code: int
    detail: str


@dataclass(frozen=True, slots=True)
class TaskOffset:
    """A task's changelog offset sum as a member reports it (`TaskOffsets` / `TaskEndOffsets`)."""

    subtopology_id: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class StreamsGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: StreamsGroupTopologyValue | None = None
    active_tasks: tuple[TaskIds, ...] | None = None
    standby_tasks: tuple[TaskIds, ...] | None = None
    warmup_tasks: tuple[TaskIds, ...] | None = None
    process_id: str | None = None
    user_endpoint: Endpoint | None = None
    client_tags: tuple[KeyValue, ...] | None = None
    shutdown_application: bool = False
    # The last endpoint information epoch the member saw.
    endpoint_information_epoch: int = 0
    # The changelog offsets of the tasks whose state the member has (None: unchanged).
    task_offsets: tuple[TaskOffset, ...] | None = None
    task_end_offsets: tuple[TaskOffset, ...] | None = None


@dataclass(frozen=True, slots=True)
class StreamsGroupHeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    status: tuple[Status, ...] | None = None
    # None: unchanged since the last heartbeat, as Kafka answers.
    active_tasks: tuple[TaskIds, ...] | None = None
    standby_tasks: tuple[TaskIds, ...] | None = None
    warmup_tasks: tuple[TaskIds, ...] | None = None
    internal_topics_to_create: tuple[InternalTopic, ...] = field(default=())
    # Interactive-query metadata (Kafka `EndpointToPartitionsManager`): None when the member's
    # endpoint information epoch is the group's.
    endpoint_information_epoch: int = 0
    partitions_by_user_endpoint: tuple[EndpointPartitions, ...] | None = None


@dataclass(frozen=True, slots=True)
class EndpointPartitions:
    """One member's user endpoint and the source partitions of its active and standby tasks."""

    endpoint: Endpoint
    active: tuple[tuple[str, tuple[int, ...]], ...]
    standby: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """A repartition or changelog topic the topology needs and the cluster lacks: what the
    gateway creates (Kafka's coordinator asks its controller through `AutoTopicCreationManager`)."""

    name: str
    partitions: int
    replication_factor: int
    configs: tuple[KeyValue, ...]
