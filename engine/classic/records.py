"""GroupMetadata records (type 2) for classic groups: writing and replaying them (Kafka's
`__consumer_offsets` records;
Kafka `newGroupMetadataRecord`, `newEmptyGroupMetadataRecord`, `replay(GroupMetadataKey, ...)`).

The record is a snapshot of the group's stable part. Replay rebuilds a group Stable when the
record has members, Empty otherwise; each member's only supported protocol becomes the group's
selected one with the stored subscription, as Kafka does. A tombstone removes the group.
"""

from __future__ import annotations

from engine.classic.group import ClassicGroup
from engine.classic.member import ClassicGroupMember, Protocol
from engine.classic.state import ClassicGroupState
from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.coordinator import CoordinatorRecord


def group_metadata_record(group: ClassicGroup, assignment: dict[str, bytes]) -> CoordinatorRecord:
    members = []
    for m in group.members.values():
        if group.protocol_name is None:
            raise ValueError(
                f"Attempted to write non-empty group metadata with no defined protocol ({group.group_id})."
            )
        if m.member_id not in assignment:
            raise ValueError(
                f"Attempted to write member {m.member_id} of group {group.group_id} with no assignment."
            )
        members.append(
            GroupMemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name),
                assignment=assignment[m.member_id],
            )
        )
    return CoordinatorRecord(
        GroupMetadataKey(group.group_id),
        GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=_timestamp(group),
            members=tuple(members),
        ),
    )


def empty_group_metadata_record(group: ClassicGroup) -> CoordinatorRecord:
    """Written when a JoinGroup creates a group and nothing else was written, so the group is
    committed (Kafka `newEmptyGroupMetadataRecord`)."""
    return CoordinatorRecord(
        GroupMetadataKey(group.group_id),
        GroupMetadataValue(
            protocol_type="",
            generation=0,
            protocol=None,
            leader=None,
            current_state_timestamp=_timestamp(group),
            members=(),
        ),
    )


def _timestamp(group: ClassicGroup) -> int:
    return -1 if group.current_state_timestamp is None else group.current_state_timestamp


def group_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(GroupMetadataKey(group_id), None)


def group_from_record(group_id: str, value: GroupMetadataValue, now_ms: int) -> ClassicGroup:
    members = []
    for mm in value.members:
        rebalance = mm.session_timeout if mm.rebalance_timeout == -1 else mm.rebalance_timeout
        members.append(
            ClassicGroupMember(
                mm.member_id,
                mm.group_instance_id,
                mm.client_id,
                mm.client_host,
                rebalance,
                mm.session_timeout,
                value.protocol_type,
                (Protocol(value.protocol or "", mm.subscription),),
                mm.assignment,
            )
        )
    group = ClassicGroup(
        group_id,
        now_ms,
        state=ClassicGroupState.STABLE if members else ClassicGroupState.EMPTY,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        leader_id=value.leader,
    )
    group.current_state_timestamp = (
        None if value.current_state_timestamp == -1 else value.current_state_timestamp
    )
    for m in members:
        group.add(m)
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def persisted_view(group: ClassicGroup) -> tuple[object, ...]:
    """What a GroupMetadata record of this group would restore (replay-equality checks)."""
    return (
        group.generation_id,
        group.protocol_type,
        group.protocol_name if group.members else None,
        group.leader_id if group.members else None,
        tuple(
            (
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol_name) if group.protocol_name else b"",
                m.assignment,
            )
            for m in group.members.values()
        ),
    )
