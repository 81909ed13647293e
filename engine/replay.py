"""Applying committed changes to a shard's state: records (Kafka `GroupMetadataManager.replay`,
`OffsetMetadataManager.replay`; KIP-848 "Records") and an operation's group changes.

This is the only module that writes a shard's groups map (tests/test_one_way_to_change_state.py
pins it). It runs in two situations, which must end in the same state:
* loading a shard: every record of its log, in order (`Shard.replay`);
* committing an operation: once the journal accepted its records, `Shard.commit` replays them
  (operations with `replay=True`) and then applies the operation's group changes
  (`Operation.put_group`: a new classic group, the classic group replacing an empty consumer
  group, the live classic group a downgrade installs over its replayed copy). Groups are
  removed by tombstones, replayed like any record.

`apply_record` is also used by the translation layer to build the consumer group an upgrade
produces from the very records it writes, so the converted group is exactly what a restart would
load.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.assignment import Assignment, from_records
from engine.classic.group import ClassicGroup
from engine.classic.records import group_from_record
from engine.connect.group import ConnectGroup
from engine.consumer.group import ConsumerGroup, ReplayError
from engine.operation import NamedGroup
from engine.state import ShardState
from engine.streams.group import StreamsGroup, tasks_from
from records.classic_group import GroupMetadataKey, GroupMetadataValue
from records.connect_group import (
    ConnectGroupCurrentMemberAssignmentKey,
    ConnectGroupDelayedWorkKey,
    ConnectGroupMemberMetadataKey,
    ConnectGroupMetadataKey,
    ConnectGroupTargetAssignmentMemberKey,
    ConnectGroupTargetAssignmentMetadataKey,
)
from records.consumer_group import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from records.coordinator import CoordinatorRecord
from records.offsets import OffsetCommitKey
from records.streams_group import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMetadataKey,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
)

CONSUMER_GROUP_KEYS = (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)

STREAMS_GROUP_KEYS = (
    StreamsGroupMetadataKey,
    StreamsGroupMemberMetadataKey,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupTopologyKey,
)

CONNECT_GROUP_KEYS = (
    ConnectGroupMetadataKey,
    ConnectGroupMemberMetadataKey,
    ConnectGroupTargetAssignmentMetadataKey,
    ConnectGroupTargetAssignmentMemberKey,
    ConnectGroupCurrentMemberAssignmentKey,
    ConnectGroupDelayedWorkKey,
)

# Replay anomalies tolerated on load (KAFKA-21117): (event name, fields).
Warnings = list[tuple[str, dict[str, Any]]]


# --- records -----------------------------------------------------------------------------------


def replay(st: ShardState, record: CoordinatorRecord, warnings: Warnings) -> None:
    """Apply one record of the shard's log to its state."""
    key: Any = record.key
    kt = type(key)
    if kt is OffsetCommitKey:
        # Inlined (most of a log is offset commits): a key's value is of its own type, as
        # records.codec decodes and encodes it.
        value: Any = record.value
        if value is not None and key.group not in st.groups:
            # Offsets of a group that has no group record: a "simple" classic group.
            st.groups[key.group] = ClassicGroup(key.group, st.now_ms)
        st.offsets.replay(key, value)
    elif kt is GroupMetadataKey:
        _replay_group_metadata(st, key.group, record.value)
    elif kt in CONSUMER_GROUP_KEYS:
        _replay_consumer_record(st, record, warnings)
    elif kt in STREAMS_GROUP_KEYS:
        _replay_streams_record(st, record)
    elif kt in CONNECT_GROUP_KEYS:
        _replay_connect_record(st, record)
    else:
        raise ReplayError(f"no replay rule for record key {kt.__name__}")


def _replay_group_metadata(st: ShardState, group_id: str, value: Any) -> None:
    groups = st.groups
    if value is None:
        groups.pop(group_id, None)
        return
    assert isinstance(value, GroupMetadataValue)
    if isinstance(groups.get(group_id), ConsumerGroup):
        # A downgrade deletes the consumer group (tombstones) before writing this record.
        raise ReplayError(
            f"Group {group_id} is a consumer group: a GroupMetadata record cannot replace it "
            "without the consumer group's tombstones before it."
        )
    groups[group_id] = group_from_record(group_id, value, st.now_ms)


def _consumer_group_for_replay(
    st: ShardState, group_id: str, create: bool, warnings: Warnings
) -> ConsumerGroup | None:
    """Kafka `getOrMaybeCreatePersistedConsumerGroup`, made lenient for KAFKA-21117: log
    compaction can drop the GroupMetadata tombstone an upgrade wrote, so a consumer-group
    record may follow a classic group's record. Such a record turns the group into a consumer
    group, and consumer tombstones for a classic group are ignored."""
    groups = st.groups
    group = groups.get(group_id)
    if group is None:
        if not create:
            return None
        group = groups[group_id] = ConsumerGroup(group_id)
        return group
    if isinstance(group, ConsumerGroup):
        return group
    if isinstance(group, ClassicGroup):
        if not create:
            if not group.is_simple():
                warnings.append(
                    (
                        "replay.tombstone_ignored",
                        {"group": group_id, "reason": "consumer-group tombstone for a classic group"},
                    )
                )
            return None
        if not group.is_simple():
            warnings.append(
                (
                    "replay.group_type_replaced",
                    {
                        "group": group_id,
                        "from_type": "classic",
                        "to_type": "consumer",
                        "reason": "consumer-group record after a classic group (KAFKA-21117)",
                    },
                )
            )
        group = groups[group_id] = ConsumerGroup(group_id)
        return group
    raise ReplayError(f"Group {group_id} is not a consumer group.")


def _replay_consumer_record(st: ShardState, record: CoordinatorRecord, warnings: Warnings) -> None:
    key: Any = record.key
    value: Any = record.value
    group = _consumer_group_for_replay(st, key.group_id, value is not None, warnings)
    if group is None:
        return
    if value is None and type(key) is ConsumerGroupMetadataKey:
        if not group.can_be_deleted():
            raise ReplayError(
                f"cannot delete consumer group {key.group_id}: members, targets and the "
                "assignment metadata must be deleted first"
            )
        del st.groups[key.group_id]
        return
    if value is None and type(key) is ConsumerGroupMemberMetadataKey:
        # The member is gone: its bound ids go too (`engine.binding`), once the operation is
        # applied (`Shard.commit`).
        gone = group.members.get(key.member_id)
        if gone is not None:
            st.bindings.member_left(key.group_id, key.member_id, gone.instance_id)
    apply_record(group, record)


def apply_record(group: ConsumerGroup, record: CoordinatorRecord) -> None:
    """Apply a consumer-group record other than the group's own deletion (a k3 tombstone,
    which removes the group from its owner and is handled there)."""
    key: Any = record.key
    value: Any = record.value
    kt = type(key)
    if kt is ConsumerGroupCurrentMemberAssignmentKey:
        group.replay_current_assignment(key.member_id, value)
    elif kt is ConsumerGroupMemberMetadataKey:
        group.replay_member_metadata(key.member_id, value)
    elif kt is ConsumerGroupTargetAssignmentMemberKey:
        target: Assignment | None = None
        client_metadata = None
        if value is not None:
            assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
            target = from_records(value.topic_partitions)
            client_metadata = value.client_metadata
        group.replay_target_member(key.member_id, target, client_metadata)
    elif kt is ConsumerGroupMetadataKey:
        assert value is not None, "a group deletion is applied by the group's owner"
        group.replay_group_epoch(value.epoch)
    elif kt is ConsumerGroupTargetAssignmentMetadataKey:
        group.replay_assignment_epoch(None if value is None else value.assignment_epoch)
    elif kt is ConsumerGroupPartitionMetadataKey:
        group.replay_subscription_metadata(None if value is None else value.topics)
    elif kt is ConsumerGroupRegularExpressionKey:
        group.replay_regex(key.regular_expression, value)
    else:
        raise TypeError(f"{kt.__name__} is not a consumer-group record")


def _replay_streams_record(st: ShardState, record: CoordinatorRecord) -> None:
    """Kafka `GroupMetadataManager.replay` of the streams-group records: a record with a value
    creates the group (replacing an empty classic group, as the offline migration writes it:
    the classic group's tombstone, if it had a record, comes first); a tombstone of a group that
    is gone is ignored; the group's own tombstone (type 17) deletes it."""
    key: Any = record.key
    value: Any = record.value
    gid = key.group_id
    group = st.groups.get(gid)
    if not isinstance(group, StreamsGroup):
        if value is None:
            return
        if isinstance(group, ConsumerGroup):
            raise ReplayError(f"Group {gid} is a consumer group: a streams-group record cannot replace it.")
        group = StreamsGroup(gid)
        st.groups[gid] = group
    if type(key) is StreamsGroupMetadataKey and value is None:
        if not group.can_be_deleted():
            raise ReplayError(f"cannot delete streams group {gid}: members and targets must be deleted first")
        del st.groups[gid]
        return
    apply_streams_record(group, record)


def apply_streams_record(group: StreamsGroup, record: CoordinatorRecord) -> None:
    """One streams-group record (not the group's own tombstone) applied to `group`: also how a
    conversion builds the streams group it continues with (translation/streams_upgrade.py), so
    that it is what a restart would load."""
    key: Any = record.key
    value: Any = record.value
    kt = type(key)
    if kt is StreamsGroupMetadataKey:
        assert value is not None
        group.replay_metadata(
            value.epoch,
            value.metadata_hash,
            value.validated_topology_epoch,
            value.last_assignment_configs,
        )
    elif kt is StreamsGroupTopologyKey:
        group.replay_topology(value)
    elif kt is StreamsGroupMemberMetadataKey:
        group.replay_member_metadata(key.member_id, value)
    elif kt is StreamsGroupCurrentMemberAssignmentKey:
        group.replay_current_assignment(key.member_id, value)
    elif kt is StreamsGroupTargetAssignmentMemberKey:
        if value is None:
            group.replay_target_member(key.member_id, None)
        else:
            assert isinstance(value, StreamsGroupTargetAssignmentMemberValue)
            group.replay_target_member(
                key.member_id,
                tasks_from(value.active_tasks),
                tasks_from(value.standby_tasks),
                tasks_from(value.warmup_tasks),
            )
    elif value is None:
        group.replay_assignment_epoch(None)
    else:
        assert isinstance(value, StreamsGroupTargetAssignmentMetadataValue)
        group.replay_assignment_epoch(value.assignment_epoch, value.assignment_timestamp)


def _replay_connect_record(st: ShardState, record: CoordinatorRecord) -> None:
    """groupshift's Connect-group records (docs/connect-groups.md): a record with a value creates
    the group; a tombstone of a group that is gone is ignored; the group's own tombstone (type
    10000) deletes it. A connect group never replaces a group of another type."""
    key: Any = record.key
    value: Any = record.value
    gid = key.group_id
    group = st.groups.get(gid)
    if not isinstance(group, ConnectGroup):
        if value is None:
            return
        if group is not None and not (isinstance(group, ClassicGroup) and group.is_simple()):
            raise ReplayError(
                f"Group {gid} is not a connect group: a connect-group record cannot replace it."
            )
        group = st.groups[gid] = ConnectGroup(gid)
    kt = type(key)
    if kt is ConnectGroupMetadataKey and value is None:
        if not group.can_be_deleted():
            raise ReplayError(f"cannot delete connect group {gid}: members, targets and held work first")
        del st.groups[gid]
        return
    if kt is ConnectGroupMemberMetadataKey and value is None and key.member_id in group.members:
        st.bindings.member_left(gid, key.member_id, None)
    apply_connect_record(group, record)


def apply_connect_record(group: ConnectGroup, record: CoordinatorRecord) -> None:
    """One connect-group record (not the group's own tombstone) applied to `group`: also how a
    conversion builds the connect group it continues with (translation/connect_upgrade.py), so
    that it is what a restart would load."""
    key: Any = record.key
    value: Any = record.value
    kt = type(key)
    if kt is ConnectGroupMetadataKey:
        group.group_epoch = value.epoch
    elif kt is ConnectGroupMemberMetadataKey:
        group.replay_member_metadata(key.member_id, value)
    elif kt is ConnectGroupCurrentMemberAssignmentKey:
        group.replay_current_assignment(key.member_id, value)
    elif kt is ConnectGroupTargetAssignmentMemberKey:
        group.replay_target_member(key.member_id, value)
    elif kt is ConnectGroupTargetAssignmentMetadataKey:
        group.assignment_epoch = 0 if value is None else value.assignment_epoch
    else:
        group.replay_delayed(key.member_id, value)


# --- an operation's group changes --------------------------------------------------------------


def apply_group_changes(st: ShardState, changes: Sequence[tuple[str, NamedGroup]]) -> None:
    """Install the groups a committed operation created or replaced, in order (after its
    records)."""
    groups = st.groups
    for group_id, group in changes:
        assert isinstance(group, ConsumerGroup | ClassicGroup | StreamsGroup | ConnectGroup), group
        groups[group_id] = group
