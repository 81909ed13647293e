"""Connect-group records (groupshift's own: the Connect draft, in docs/connect-groups.md, has none).

Record types 10000-10005, far above Kafka's (below 30 today), so a Kafka broker that loads a
groupshift log skips them with a warning as it skips any unknown type (Kafka >= 3.5), and no
future Kafka type collides with them. Each value is version 0, flexible (compact strings, a tag
section per struct), written by `records.connect_group_codec`. They mirror KIP-848's consumer
group records (types 3, 5, 6, 7, 8), with connectors and tasks in place of partitions, plus one
record Kafka has no equivalent for: the work of a departed worker held for it during
`scheduled.rebalance.max.delay.ms` (type 10005). docs/connect-groups.md lists every field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from protocol.connect_wire import WireConnectAssignor, WireWork
from records.consumer_group import ClassicProtocol

CONNECT_GROUP_RECORD_TYPES = range(10000, 10006)


@dataclass(frozen=True, slots=True)
class ConnectGroupMetadataKey:
    RECORD_TYPE: ClassVar[int] = 10000
    group_id: str


@dataclass(frozen=True, slots=True)
class ConnectGroupMetadataValue:
    VERSION: ClassVar[int] = 0
    epoch: int


@dataclass(frozen=True, slots=True)
class ConnectGroupMemberMetadataKey:
    RECORD_TYPE: ClassVar[int] = 10001
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConnectClassicWorker:
    """Tagged field 0 of the member value: set only for a classic Kafka Connect worker (Connect's
    WorkerCoordinator on JoinGroup/SyncGroup) living inside the connect group
    (translation/connect_classic_worker.py). `protocols` are its JoinGroup protocols (Connect's
    sub-protocols with their metadata) in its order of preference; `joined_group_epoch` the
    group epoch its latest JoinGroup was answered at (a later epoch tells it to rejoin);
    `since_epoch` orders the classic workers by how long they have been in the group (the
    first is the Connect leader: kept across compaction, which reorders records)."""

    session_timeout_ms: int
    joined_group_epoch: int
    since_epoch: int
    protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True, slots=True)
class ConnectGroupMemberMetadataValue:
    VERSION: ClassVar[int] = 0
    client_id: str
    client_host: str
    url: str
    rebalance_timeout_ms: int
    config_offset: int
    assignors: tuple[WireConnectAssignor, ...]
    classic: ConnectClassicWorker | None = None  # tag 0


@dataclass(frozen=True, slots=True)
class ConnectGroupTargetAssignmentMetadataKey:
    RECORD_TYPE: ClassVar[int] = 10002
    group_id: str


@dataclass(frozen=True, slots=True)
class ConnectGroupTargetAssignmentMetadataValue:
    VERSION: ClassVar[int] = 0
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConnectGroupTargetAssignmentMemberKey:
    RECORD_TYPE: ClassVar[int] = 10003
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConnectGroupTargetAssignmentMemberValue:
    VERSION: ClassVar[int] = 0
    work: WireWork
    metadata_version: int = 0
    metadata: bytes = b""


@dataclass(frozen=True, slots=True)
class ConnectGroupCurrentMemberAssignmentKey:
    RECORD_TYPE: ClassVar[int] = 10004
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConnectGroupCurrentMemberAssignmentValue:
    VERSION: ClassVar[int] = 0
    member_epoch: int
    previous_member_epoch: int
    state: int  # engine.connect.group.WorkerState's value
    assigned: WireWork
    pending_revocation: WireWork


@dataclass(frozen=True, slots=True)
class ConnectGroupDelayedWorkKey:
    RECORD_TYPE: ClassVar[int] = 10005
    group_id: str
    member_id: str  # the departed worker


@dataclass(frozen=True, slots=True)
class ConnectGroupDelayedWorkValue:
    VERSION: ClassVar[int] = 0
    url: str
    deadline_ms: int  # wall-clock ms at which the work is released to the others
    work: WireWork
