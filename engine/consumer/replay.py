"""Applying one consumer-group record to a group (KIP-848 "Records"; Kafka GMM `replay`).

Used by the shard for its groups, and by the translation layer to build the consumer group an
upgrade produces from the very records it writes, so the converted group is exactly what a
restart would load.
"""

from __future__ import annotations

from typing import Any

from engine.assignment import Assignment, from_records
from engine.consumer.group import ConsumerGroup
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

CONSUMER_GROUP_KEYS = (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)


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
        if value is not None:
            assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
            target = from_records(value.topic_partitions)
        group.replay_target_member(key.member_id, target)
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
