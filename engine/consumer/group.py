"""Consumer group state, changed only by replaying records (KIP-848 "Group State", "Records").

Kafka `ConsumerGroup` / `ModernGroup`. A handler computes records from this state without touching
it; the shard then replays the records here. That one path is what makes a restart (replay from
the log) and a live run end in the same state.

Replay rules (Kafka `GroupMetadataManager.replay`, Kafka's `__consumer_offsets` records):
* k5 value creates or updates a member's subscription; k5 tombstone needs the k8 and k7
  tombstones first (member epoch -1, no target).
* k8 value sets the member's epochs, state and partitions and moves partition ownership; a k8
  tombstone releases the member's partitions and sets its epochs to -1.
* k7 sets or deletes one member's target; k6 sets the assignment epoch (tombstone: -1, needs an
  empty target); k4 sets or clears the subscription metadata; k3 sets the group epoch, and its
  tombstone deletes the group (needs no members, no target and assignment epoch -1).
* k16 sets or deletes a resolved regular expression.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import TypeVar

from engine.assignment import (
    EMPTY,
    EMPTY_EPOCHS,
    Assignment,
    PartitionEpochs,
    epochs_from_records,
    from_records,
    shared,
    shared_epoch,
    shared_epochs,
)
from engine.consumer.member import ConsumerGroupMember, MemberState
from engine.metadata import TopicId
from records.consumer_group import (
    ClientAssignmentMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupRegularExpressionValue,
    TopicMetadata,
)


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


class ReplayError(Exception):
    """A record that cannot apply to the current state (a corrupt or misordered log)."""


class ConsumerGroup:
    GROUP_TYPE = "consumer"

    __slots__ = (
        "_inverted_target",
        "_partition_epochs",
        "_server_assignors",
        "_subscribed_names",
        "assignment_epoch",
        "classic_protocol_counts",
        "group_epoch",
        "group_id",
        "members",
        "metadata_refresh_needed",
        "num_classic_members",
        "resolved_regexes",
        "static_members",
        "subscribed_regexes",
        "subscription_metadata",
        "target_assignment",
        "target_client_metadata",
    )

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # A new group starts at epoch 1 (Kafka 4.3 `ModernGroup`), so its first member gets 2.
        self.group_epoch = 1
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target_assignment: dict[str, Assignment] = {}
        # member id -> what a client-side assignor computed for it besides its partitions
        # (tagged field 10000 of k7; docs/client-side-assignors.md)
        self.target_client_metadata: dict[str, ClientAssignmentMetadata] = {}
        self._inverted_target: dict[TopicId, dict[int, str]] = {}
        self._partition_epochs: dict[TopicId, dict[int, int]] = {}
        # topic name -> number of members subscribed to it by name
        self._subscribed_names: dict[str, int] = {}
        # regex -> number of members subscribed with it
        self.subscribed_regexes: dict[str, int] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self._server_assignors: dict[str, int] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.num_classic_members = 0
        # protocol name -> number of classic members supporting it (Kafka
        # `classicProtocolMembersSupportedProtocols`)
        self.classic_protocol_counts: dict[str, int] = {}
        # Not persisted: set when the metadata image changed a topic this group subscribes to.
        self.metadata_refresh_needed = False

    # --- reads -------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, epoch={self.group_epoch}, "
            f"assignment_epoch={self.assignment_epoch}, members={list(self.members)})"
        )

    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self.members.get(member_id)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        mid = self.static_members.get(instance_id)
        return None if mid is None else self.members.get(mid)

    def target(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, EMPTY)

    def current_partition_epoch(self, topic_id: TopicId, partition: int) -> int:
        """The epoch of the member that owns the partition now, or -1 when it is free."""
        parts = self._partition_epochs.get(topic_id)
        if parts is None:
            return -1
        return parts.get(partition, -1)

    def partition_owner_epochs(self) -> dict[TopicId, dict[int, int]]:
        return {t: dict(p) for t, p in self._partition_epochs.items()}

    def inverted_target(self) -> dict[TopicId, dict[int, str]]:
        return self._inverted_target

    @property
    def num_members(self) -> int:
        return len(self.members)

    def is_empty(self) -> bool:
        return not self.members

    def state(self) -> ConsumerGroupState:
        """Kafka `maybeUpdateGroupState`, computed on demand (it is never on the hot path)."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        epoch = self.assignment_epoch
        for m in self.members.values():
            if not m.is_reconciled_to(epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topic_counts(self) -> dict[str, int]:
        """Topic name -> subscriber count, names plus topics resolved from regexes."""
        counts = dict(self._subscribed_names)
        for regex, n in self.subscribed_regexes.items():
            resolved = self.resolved_regexes.get(regex)
            if resolved is None:
                continue
            for t in resolved.topics:
                counts[t] = counts.get(t, 0) + n
        return counts

    def subscribed_name_counts(self) -> dict[str, int]:
        """Topic name -> number of members subscribed to it by name (regexes not included)."""
        return dict(self._subscribed_names)

    def subscribed_topic_names(self) -> set[str]:
        return set(self.subscribed_topic_counts())

    def subscribes_to_any(self, names: frozenset[str]) -> bool:
        """Is any of `names` among the topics the members subscribe to, by name or through a
        resolved regex? (`subscribed_topic_names` without building the set: a metadata update
        asks every group of every shard.)"""
        by_name = self._subscribed_names
        if len(names) <= len(by_name):
            if any(n in by_name for n in names):
                return True
        elif any(n in names for n in by_name):
            return True
        resolved = self.resolved_regexes
        for regex in self.subscribed_regexes:
            r = resolved.get(regex)
            if r is not None and not r.topics.isdisjoint(names):
                return True
        return False

    def server_assignor_counts(self) -> dict[str, int]:
        return dict(self._server_assignors)

    def preferred_server_assignor(self) -> str | None:
        """The assignor named by most members (Kafka `computePreferredServerAssignor`).

        Ties go to the name first seen in member order, which keeps the choice deterministic
        (Kafka breaks ties by HashMap order)."""
        best: str | None = None
        best_n = 0
        for name, n in self._server_assignors.items():
            if n > best_n:
                best, best_n = name, n
        return best

    def member_subscribed_topics(self, member: ConsumerGroupMember) -> set[str]:
        """Topic names a member subscribes to: its names plus its regex's resolved topics."""
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                topics |= resolved.topics
        return topics

    def describe_members(self) -> Iterator[ConsumerGroupMember]:
        return iter(self.members.values())

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_topic_counts()

    def persisted_state(self) -> dict[str, object]:
        """Everything the records determine, in a comparable form (replay-equality checks).

        Member order and partition order inside a topic are included: both are restored by
        replay and both influence later assignments."""
        return {
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "members": [(mid, m) for mid, m in self.members.items()],
            "static_members": dict(self.static_members),
            "target": {mid: dict(a) for mid, a in self.target_assignment.items()},
            "target_client_metadata": dict(self.target_client_metadata),
            "inverted": {t: dict(p) for t, p in self._inverted_target.items()},
            "partition_epochs": {t: dict(p) for t, p in self._partition_epochs.items()},
            "subscription_metadata": dict(self.subscription_metadata),
            "subscribed_names": dict(self._subscribed_names),
            "subscribed_regexes": dict(self.subscribed_regexes),
            "resolved_regexes": dict(self.resolved_regexes),
            "server_assignors": dict(self._server_assignors),
            "num_classic_members": self.num_classic_members,
            "classic_protocol_counts": dict(self.classic_protocol_counts),
        }

    # --- replay ------------------------------------------------------------------------------

    def replay_group_epoch(self, epoch: int) -> None:
        self.group_epoch = shared_epoch(epoch)

    def can_be_deleted(self) -> bool:
        return not self.members and not self.target_assignment and self.assignment_epoch == -1

    def replay_subscription_metadata(self, topics: Iterable[TopicMetadata] | None) -> None:
        self.subscription_metadata = {} if topics is None else {t.topic_name: t for t in topics}

    def replay_member_metadata(self, member_id: str, value: ConsumerGroupMemberMetadataValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is None:
                return
            if old.member_epoch != -1 or member_id in self.target_assignment:
                raise ReplayError(
                    f"cannot delete member {member_id} of group {self.group_id}: its current "
                    "assignment and target must be deleted first (k8 and k7 tombstones)"
                )
            self._remove_member(old)
            return
        base = old if old is not None else ConsumerGroupMember(member_id=member_id)
        new = base.with_changes(
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
            classic_member_metadata=value.classic_member_metadata,
            client_assignors=value.client_assignors,
        )
        self._put_member(old, new)

    def replay_current_assignment(
        self, member_id: str, value: ConsumerGroupCurrentMemberAssignmentValue | None
    ) -> None:
        old = self.members.get(member_id)
        if old is None:
            if value is None:
                return
            # Kafka creates the member when a k8 arrives before its k5 (compaction order).
            old = ConsumerGroupMember(member_id=member_id)
        if value is None:
            new = old.with_changes(
                member_epoch=-1,
                previous_member_epoch=-1,
                state=MemberState.STABLE,
                assigned_partitions=EMPTY,
                partitions_pending_revocation=EMPTY,
            )
        else:
            try:
                state = MemberState(value.state)
            except ValueError:
                state = MemberState.UNKNOWN
            # Epochs as the process's one int object per value (`shared_epoch`).
            member_epoch = shared_epoch(value.member_epoch)
            decoded = epochs_from_records(
                (*value.assigned_partitions, *value.partitions_pending_revocation), member_epoch
            )
            epochs: PartitionEpochs = (
                old.assignment_epochs if decoded == old.assignment_epochs else shared_epochs(decoded)
            )
            new = old.with_changes(
                member_epoch=member_epoch,
                previous_member_epoch=shared_epoch(value.previous_member_epoch),
                state=state,
                assigned_partitions=shared(
                    from_records(value.assigned_partitions),
                    old.assigned_partitions,
                    self.target_assignment.get(member_id, EMPTY),
                ),
                partitions_pending_revocation=shared(
                    from_records(value.partitions_pending_revocation), old.partitions_pending_revocation
                ),
                assignment_epochs=(
                    old.assignment_epochs
                    if epochs == old.assignment_epochs
                    else (epochs if epochs else EMPTY_EPOCHS)
                ),
            )
        self._put_member(old if old.member_id in self.members else None, new)

    def replay_target_member(
        self,
        member_id: str,
        assignment: Assignment | None,
        client_metadata: ClientAssignmentMetadata | None = None,
    ) -> None:
        if client_metadata is None:
            self.target_client_metadata.pop(member_id, None)
        else:
            self.target_client_metadata[member_id] = client_metadata
        old = self.target_assignment.get(member_id)
        if assignment is not None and old is not None and assignment == old:
            return  # the same target again: keep the object members may share
        if assignment is not None:
            assignment = shared(assignment)
        if old is not None:
            for t, parts in old.items():
                inv = self._inverted_target.get(t)
                if inv is None:
                    continue
                for p in parts:
                    if inv.get(p) == member_id:
                        del inv[p]
                if not inv:
                    del self._inverted_target[t]
        if assignment is None:
            self.target_assignment.pop(member_id, None)
            self.target_assignment = compacted(self.target_assignment)
            return
        self.target_assignment[member_id] = assignment
        for t, parts in assignment.items():
            inv = self._inverted_target.get(t)
            if inv is None:
                inv = self._inverted_target[t] = {}
            for p in parts:
                inv[p] = member_id

    def replay_assignment_epoch(self, epoch: int | None) -> None:
        if epoch is None:
            if self.target_assignment:
                raise ReplayError(
                    f"cannot delete the target assignment metadata of group {self.group_id}: "
                    "member targets must be deleted first (k7 tombstones)"
                )
            self.assignment_epoch = -1
        else:
            self.assignment_epoch = shared_epoch(epoch)

    def replay_regex(self, regex: str, value: ConsumerGroupRegularExpressionValue | None) -> None:
        if value is None:
            self.resolved_regexes.pop(regex, None)
        else:
            self.resolved_regexes[regex] = ResolvedRegex(
                frozenset(value.topics), value.version, value.timestamp
            )

    # --- bookkeeping -------------------------------------------------------------------------

    def _put_member(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember) -> None:
        if old is not None:
            self._unindex_subscription(old)
            self._release_partitions(old)
        self.members[new.member_id] = new
        self._index_subscription(new)
        self._claim_partitions(new)

    def _remove_member(self, old: ConsumerGroupMember) -> None:
        self._unindex_subscription(old)
        self._release_partitions(old)
        del self.members[old.member_id]
        self.members = compacted(self.members)

    def _index_subscription(self, m: ConsumerGroupMember) -> None:
        for t in m.subscribed_topic_names:
            self._subscribed_names[t] = self._subscribed_names.get(t, 0) + 1
        if m.subscribed_topic_regex:
            r = m.subscribed_topic_regex
            self.subscribed_regexes[r] = self.subscribed_regexes.get(r, 0) + 1
        if m.server_assignor is not None:
            a = m.server_assignor
            self._server_assignors[a] = self._server_assignors.get(a, 0) + 1
        if m.instance_id is not None:
            self.static_members[m.instance_id] = m.member_id
        if m.classic_member_metadata is not None:
            self.num_classic_members += 1
            for p in m.classic_member_metadata.supported_protocols:
                self.classic_protocol_counts[p.name] = self.classic_protocol_counts.get(p.name, 0) + 1

    def _unindex_subscription(self, m: ConsumerGroupMember) -> None:
        for t in m.subscribed_topic_names:
            n = self._subscribed_names[t] - 1
            if n:
                self._subscribed_names[t] = n
            else:
                del self._subscribed_names[t]
        if m.subscribed_topic_regex:
            r = m.subscribed_topic_regex
            n = self.subscribed_regexes[r] - 1
            if n:
                self.subscribed_regexes[r] = n
            else:
                del self.subscribed_regexes[r]
        if m.server_assignor is not None:
            a = m.server_assignor
            n = self._server_assignors[a] - 1
            if n:
                self._server_assignors[a] = n
            else:
                del self._server_assignors[a]
        if m.instance_id is not None and self.static_members.get(m.instance_id) == m.member_id:
            del self.static_members[m.instance_id]
        if m.classic_member_metadata is not None:
            self.num_classic_members -= 1
            for p in m.classic_member_metadata.supported_protocols:
                n = self.classic_protocol_counts[p.name] - 1
                if n:
                    self.classic_protocol_counts[p.name] = n
                else:
                    del self.classic_protocol_counts[p.name]

    def _claim_partitions(self, m: ConsumerGroupMember) -> None:
        epoch = m.member_epoch
        for source in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, parts in source.items():
                owners = self._partition_epochs.get(t)
                if owners is None:
                    owners = self._partition_epochs[t] = {}
                for p in parts:
                    if p in owners:
                        raise ReplayError(
                            f"partition {t}-{p} of group {self.group_id} is already owned at "
                            f"epoch {owners[p]}; member {m.member_id} cannot take it"
                        )
                    owners[p] = epoch

    def _release_partitions(self, m: ConsumerGroupMember) -> None:
        epoch = m.member_epoch
        for source in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, parts in source.items():
                owners = self._partition_epochs.get(t)
                if owners is None:
                    continue
                for p in parts:
                    if owners.get(p) == epoch:
                        del owners[p]
                    else:
                        raise ReplayError(
                            f"partition {t}-{p} of group {self.group_id} is owned at epoch "
                            f"{owners.get(p)}, not by member {m.member_id} at epoch {epoch}"
                        )
                if not owners:
                    del self._partition_epochs[t]


_K = TypeVar("_K")
_V = TypeVar("_V")


@lru_cache(maxsize=1024)
def _grown_size(n: int) -> int:
    """The size of a dict of `n` string keys grown by insertion alone (as a new group's tables
    are)."""
    return sys.getsizeof({str(i): None for i in range(n)})


def compacted(d: dict[_K, _V]) -> dict[_K, _V]:
    """`d`, or a copy of it in insertion order when its table has outgrown its entries by half.

    Why (issue 27, the soak): CPython never shrinks a dict on deletion, and under churn (a member
    leaves, another joins) a group's table of 100 members resizes to fit 3 x 100 entries and
    stays there: 512 slots where 256 hold them. Every group of a long-running server took that
    step once, minutes apart, which read as a rising RSS. A copy brings the table back to what
    insertions alone would have grown; it happens about once per table-size worth of joins, so
    its cost per removal stays constant. The order is kept: it is the member order the assignor
    is given (engine/consumer/target.py)."""
    if sys.getsizeof(d) * 2 <= _grown_size(len(d)) * 3:
        return d
    return {k: v for k, v in d.items()}
