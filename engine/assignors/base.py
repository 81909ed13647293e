"""Server-side assignor interface (KIP-848 "Assignment Process"; Kafka's
`ConsumerGroupPartitionAssignor`, `GroupSpec`, `SubscribedTopicDescriber`).

An assignor is a pure function `(group spec, topic metadata) -> target assignment`, where the
group spec carries each member's subscription and its *previous target* (so assignors can be
sticky). Contract every assignor keeps:

* the result has an entry for every member of the spec (an empty dict when nothing is assigned);
* a member whose assignment does not change gets the very object it came in with (callers
  detect "unchanged" by identity first, and big groups avoid rebuilding 10,000 dicts);
* within a topic, partitions a member keeps stay in their previous order and new ones are
  appended, so the oldest-held partitions are the ones kept when a member must give some up;
* `PartitionAssignorError` when a subscribed topic is missing from the metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from engine.assignment import Assignment
from engine.metadata import TopicId


class SubscriptionType(Enum):
    """HOMOGENEOUS: every member subscribes to exactly the same topics."""

    HOMOGENEOUS = "HOMOGENEOUS"
    HETEROGENEOUS = "HETEROGENEOUS"


class PartitionAssignorError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[TopicId]
    assignment: Assignment  # the member's previous target assignment (never mutate)


@dataclass(frozen=True, slots=True)
class GroupSpec:
    # Members in the group's member order (assignors iterate in this order).
    members: Mapping[str, MemberSubscription]
    subscription_type: SubscriptionType
    # Previous target, inverted: topic id -> partition -> member id.
    inverted: Mapping[TopicId, Mapping[int, str]]

    def is_partition_assigned(self, topic_id: TopicId, partition: int) -> bool:
        parts = self.inverted.get(topic_id)
        return parts is not None and partition in parts


class TopicDescriber(Protocol):
    def num_partitions(self, topic_id: TopicId) -> int:
        """Partition count, or -1 when the topic is not in the metadata."""
        ...

    def racks_for_partition(self, topic_id: TopicId, partition: int) -> frozenset[str]: ...


class Assignor(Protocol):
    name: str

    def assign(self, spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]: ...


class MapTopicDescriber:
    """A `TopicDescriber` over `topic id -> partition count` (plus optional racks)."""

    __slots__ = ("_counts", "_racks")

    def __init__(
        self,
        counts: Mapping[TopicId, int],
        racks: Mapping[TopicId, Mapping[int, frozenset[str]]] | None = None,
    ) -> None:
        self._counts = counts
        self._racks = racks or {}

    def num_partitions(self, topic_id: TopicId) -> int:
        return self._counts.get(topic_id, -1)

    def racks_for_partition(self, topic_id: TopicId, partition: int) -> frozenset[str]:
        return self._racks.get(topic_id, {}).get(partition, frozenset())
