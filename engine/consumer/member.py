"""A consumer-group member (KIP-848 "Consumer Group Member"; Kafka `ConsumerGroupMember`).

Immutable: every change builds a new member, which is what lets a handler compute an operation's
records from the old state before anything is applied. The subscription half is persisted by
record type 5, the assignment half by record type 8.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

from engine.assignment import EMPTY, EMPTY_EPOCHS, Assignment, PartitionEpochs, carry_epochs, to_records
from engine.metadata import TopicId
from records.consumer_group import (
    ClassicMemberMetadata,
    ClientAssignorMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
)


class MemberState(IntEnum):
    """Kafka `MemberState` (the byte stored in record type 8)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None
    # Client-side assignors in the member's priority order (docs/client-side-assignors.md);
    # empty unless `group.consumer.client.assignors.enable` and the member sent them.
    client_assignors: tuple[ClientAssignorMetadata, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = EMPTY
    partitions_pending_revocation: Assignment = EMPTY
    # The epoch at which each held partition (assigned or pending revocation) was given to the
    # member (Kafka 4.3+): a commit with an older member epoch is still accepted for a partition
    # given at or before it. Kept in step by `__post_init__`: a partition the member held keeps
    # its epoch, a new one gets `member_epoch`.
    assignment_epochs: PartitionEpochs = EMPTY_EPOCHS

    def __post_init__(self) -> None:
        epochs = carry_epochs(
            self.assignment_epochs,
            self.assigned_partitions,
            self.partitions_pending_revocation,
            self.member_epoch,
        )
        if epochs is not self.assignment_epochs:
            object.__setattr__(self, "assignment_epochs", epochs)

    def with_changes(self, **changes: Any) -> ConsumerGroupMember:
        return replace(self, **changes)

    def assignment_epoch(self, topic_id: TopicId, partition: int) -> int | None:
        """Kafka `assignmentEpoch` then `pendingRevocationEpoch`: None if not held."""
        return self.assignment_epochs.get(topic_id, {}).get(partition)

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def subscription_equals(self, other: ConsumerGroupMember) -> bool:
        """Equality of everything record type 5 persists."""
        return (
            self.instance_id == other.instance_id
            and self.rack_id == other.rack_id
            and self.client_id == other.client_id
            and self.client_host == other.client_host
            and self.subscribed_topic_names == other.subscribed_topic_names
            and self.subscribed_topic_regex == other.subscribed_topic_regex
            and self.rebalance_timeout_ms == other.rebalance_timeout_ms
            and self.server_assignor == other.server_assignor
            and self.classic_member_metadata == other.classic_member_metadata
            and self.client_assignors == other.client_assignors
        )

    def assignment_equals(self, other: ConsumerGroupMember) -> bool:
        """Equality of everything record type 8 persists."""
        return (
            self.member_epoch == other.member_epoch
            and self.previous_member_epoch == other.previous_member_epoch
            and self.state == other.state
            and self.assigned_partitions == other.assigned_partitions
            and self.partitions_pending_revocation == other.partitions_pending_revocation
            and self.assignment_epochs == other.assignment_epochs
        )

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic_member_metadata=self.classic_member_metadata,
            client_assignors=self.client_assignors,
        )

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=int(self.state),
            assigned_partitions=to_records(self.assigned_partitions, self.assignment_epochs),
            partitions_pending_revocation=to_records(
                self.partitions_pending_revocation, self.assignment_epochs
            ),
        )


def normalize_topic_names(names: Iterable[str]) -> tuple[str, ...]:
    """Subscriptions are sets; Kafka writes them sorted. Duplicates and order never matter."""
    return tuple(sorted(set(names)))
