"""Builders for consumer-group records (Kafka `GroupCoordinatorRecordHelpers`), one per type."""

from __future__ import annotations

from collections.abc import Iterable

from engine.assignment import Assignment, to_records
from engine.consumer.member import ConsumerGroupMember
from records.consumer_group import (
    ClientAssignmentMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicMetadata,
)
from records.coordinator import CoordinatorRecord


def member_metadata(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupMemberMetadataKey(group_id, member.member_id), member.metadata_value()
    )


def member_metadata_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMemberMetadataKey(group_id, member_id), None)


def group_epoch(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch))


def group_epoch_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMetadataKey(group_id), None)


def subscription_metadata(group_id: str, topics: Iterable[TopicMetadata]) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupPartitionMetadataKey(group_id),
        ConsumerGroupPartitionMetadataValue(tuple(topics)),
    )


def subscription_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupPartitionMetadataKey(group_id), None)


def target_member(
    group_id: str,
    member_id: str,
    assignment: Assignment,
    client_metadata: ClientAssignmentMetadata | None = None,
) -> CoordinatorRecord:
    """`client_metadata`: what a client-side assignor computed for the member besides its
    partitions (docs/client-side-assignors.md); None for every server-computed target."""
    return CoordinatorRecord(
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(to_records(assignment), client_metadata),
    )


def target_member_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None)


def target_epoch(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupTargetAssignmentMetadataKey(group_id),
        ConsumerGroupTargetAssignmentMetadataValue(epoch),
    )


def target_epoch_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id), None)


def current_assignment(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        member.assignment_value(),
    )


def current_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None)


def regex(
    group_id: str, pattern: str, topics: Iterable[str], version: int, timestamp: int
) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupRegularExpressionKey(group_id, pattern),
        ConsumerGroupRegularExpressionValue(tuple(sorted(topics)), version, timestamp),
    )


def regex_tombstone(group_id: str, pattern: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupRegularExpressionKey(group_id, pattern), None)
