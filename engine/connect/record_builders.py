"""The Connect-group records an operation writes (types 10000-10005, `records.connect_group`)."""

from __future__ import annotations

from engine.connect.group import ConnectWorker, Delayed, Target
from records.connect_group import (
    ConnectGroupCurrentMemberAssignmentKey,
    ConnectGroupDelayedWorkKey,
    ConnectGroupMemberMetadataKey,
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    ConnectGroupTargetAssignmentMemberKey,
    ConnectGroupTargetAssignmentMetadataKey,
    ConnectGroupTargetAssignmentMetadataValue,
)
from records.coordinator import CoordinatorRecord


def group_epoch(gid: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupMetadataKey(gid), ConnectGroupMetadataValue(epoch))


def group_tombstone(gid: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupMetadataKey(gid), None)


def member(gid: str, m: ConnectWorker) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupMemberMetadataKey(gid, m.member_id), m.metadata_value())


def member_tombstone(gid: str, mid: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupMemberMetadataKey(gid, mid), None)


def current(gid: str, m: ConnectWorker) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupCurrentMemberAssignmentKey(gid, m.member_id), m.current_value())


def current_tombstone(gid: str, mid: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupCurrentMemberAssignmentKey(gid, mid), None)


def target(gid: str, mid: str, t: Target) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupTargetAssignmentMemberKey(gid, mid), t.value())


def target_tombstone(gid: str, mid: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupTargetAssignmentMemberKey(gid, mid), None)


def assignment_epoch(gid: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConnectGroupTargetAssignmentMetadataKey(gid), ConnectGroupTargetAssignmentMetadataValue(epoch)
    )


def assignment_epoch_tombstone(gid: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupTargetAssignmentMetadataKey(gid), None)


def delayed(gid: str, mid: str, d: Delayed) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupDelayedWorkKey(gid, mid), d.value())


def delayed_tombstone(gid: str, mid: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConnectGroupDelayedWorkKey(gid, mid), None)
