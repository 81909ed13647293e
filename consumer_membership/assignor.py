"""The client-side assignor interface (KIP-848 as designed, "Client-Side Assignor": the
`PartitionAssignor` a member plugs in, which the coordinator asks to compute the whole group's
target assignment). groupshift implements the coordinator's side (docs/client-side-assignors.md);
this is the member's.

An assignor has a name (the same on every member that may compute), the range of metadata
versions it can read and the version and bytes of the metadata this member sends; `assign` gets
the group as ConsumerGroupPrepareAssignment returned it and gives each member its partitions,
plus metadata bytes the coordinator hands that member with its assignment (heartbeat response
tag 10001). A member left out of the result gets nothing; an exception is the assignor's error,
which keeps the group's current target.
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from membership.client_assignment import ClientAssignorError

CLASSIC_METADATA_VERSION = -1
"""The metadata version of a classic member's protocol metadata (its ConsumerProtocolSubscription,
KIP-848's online upgrade)."""

TopicPartitions = Mapping[uuid.UUID, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic some member subscribes to. `partition_racks[p]`: the racks of partition p's
    replicas, when known (a Metadata request; `None` when the assignor did not ask for them or
    the cluster names no rack)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: tuple[frozenset[str], ...] | None = None


@dataclass(frozen=True, slots=True)
class MemberInfo:
    """One member as PrepareAssignment lists it. `target` is its current target assignment (what
    the previous computation gave it: stickiness); `metadata_version` is -1 for a classic member,
    whose `metadata` is then its ConsumerProtocolSubscription."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    metadata_version: int
    metadata: bytes
    target: TopicPartitions = field(default_factory=dict)
    reason: int = 0

    @property
    def is_classic(self) -> bool:
        return self.metadata_version == CLASSIC_METADATA_VERSION


@dataclass(frozen=True, slots=True)
class GroupState:
    """What an assignor computes from: the group at `group_epoch` (PrepareAssignment's answer)."""

    group_id: str
    group_epoch: int
    assignor_name: str
    members: tuple[MemberInfo, ...]
    topics: Mapping[uuid.UUID, TopicInfo]


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """One member's share of the computed target."""

    partitions: TopicPartitions
    metadata_version: int = 0
    metadata: bytes = b""


GroupAssignment = Mapping[str, MemberAssignment]


class AssignorError(ClientAssignorError):
    """Raised by `assign` to report an error code of its own (the install's `Error`, 1..127);
    any other exception reports `ASSIGNOR_FAILED`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        if not 1 <= code <= 127:
            raise ValueError("an assignor error code is an int8 above 0")
        self.code = code


ASSIGNOR_FAILED = 1
"""The install's `Error` when the assignor raised something other than AssignorError."""


class Assignor(abc.ABC):
    """A client-side assignor. Subclasses set `name` and implement `assign`; the version range
    and the member's own metadata default to version 0 with no bytes.

    `uses_partition_racks`: the driver fills `TopicInfo.partition_racks` (a Metadata request)
    before calling `assign`."""

    name: str = ""
    minimum_version: int = 0
    maximum_version: int = 0
    metadata_version: int = 0
    uses_partition_racks: bool = False

    def metadata(self) -> bytes:
        """This member's metadata (sent in its heartbeat; asked before every heartbeat, a change
        is sent and makes the coordinator compute a new assignment)."""
        return b""

    @abc.abstractmethod
    def assign(self, group: GroupState) -> GroupAssignment:
        """The target of every member (runs on the driver's loop; keep it short, the group waits
        up to the member's rebalance timeout)."""

    def check(self) -> None:
        if not self.name:
            raise ValueError(f"{type(self).__name__} has no name")
        for v in (self.minimum_version, self.maximum_version, self.metadata_version):
            if not -(2**15) <= v < 2**15:
                raise ValueError(f"assignor {self.name}: version {v} is not an int16")
        if self.minimum_version > self.maximum_version:
            raise ValueError(f"assignor {self.name}: minimum version above maximum")
