"""OffsetCommit (8), OffsetFetch (9), OffsetDelete (47), DeleteGroups (42): engine-side shapes."""

from __future__ import annotations

from dataclasses import dataclass, field

# OffsetCommit v2-v4 carry a retention time; -1 means "the broker default".
DEFAULT_RETENTION_TIME = -1


@dataclass(slots=True)
class CommitPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""


@dataclass(slots=True)
class CommitTopic:
    name: str
    partitions: list[CommitPartition]


@dataclass(slots=True)
class OffsetCommitRequest:
    group_id: str
    generation_id_or_member_epoch: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = DEFAULT_RETENTION_TIME
    topics: list[CommitTopic] = field(default_factory=list)


@dataclass(slots=True)
class PartitionResult:
    partition_index: int
    error_code: int = 0


@dataclass(slots=True)
class TopicResult:
    name: str
    partitions: list[PartitionResult]


@dataclass(slots=True)
class OffsetCommitResponse:
    topics: list[TopicResult]
    error_code: int = 0  # whole-request errors are reported on every partition by the gateway


@dataclass(slots=True)
class FetchTopic:
    name: str
    partition_indexes: list[int]


@dataclass(slots=True)
class OffsetFetchGroupRequest:
    group_id: str
    topics: list[FetchTopic] | None  # None: all committed offsets of the group
    member_id: str | None = None
    member_epoch: int = -1


@dataclass(slots=True)
class FetchedPartition:
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str = ""
    error_code: int = 0


@dataclass(slots=True)
class FetchedTopic:
    name: str
    partitions: list[FetchedPartition]


@dataclass(slots=True)
class OffsetFetchGroupResponse:
    group_id: str
    topics: list[FetchedTopic]
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class OffsetDeleteRequest:
    group_id: str
    topics: list[FetchTopic]


@dataclass(slots=True)
class OffsetDeleteResponse:
    error_code: int = 0
    topics: list[TopicResult] = field(default_factory=list)


@dataclass(slots=True)
class DeleteGroupResult:
    group_id: str
    error_code: int = 0
