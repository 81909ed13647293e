"""Coordinator records: Kafka's `__consumer_offsets` key/value schemas as Python objects.

Every state change of the engine is one of these records; replaying them rebuilds the state.
Byte codecs live in `records.codec`; the log (segments of v2 record batches) in `records.log`.
"""

from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.consumer_group import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ClientAssignmentMetadata,
    ClientAssignorMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
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
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
)
from records.coordinator import CoordinatorRecord, RecordKey, RecordValue
from records.offsets import OffsetCommitKey, OffsetCommitValue

__all__ = [
    "ClassicMemberMetadata",
    "ClassicProtocol",
    "ClientAssignmentMetadata",
    "ClientAssignorMetadata",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupRegularExpressionKey",
    "ConsumerGroupRegularExpressionValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "CoordinatorRecord",
    "GroupMemberMetadata",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "PartitionMetadata",
    "RecordKey",
    "RecordValue",
    "TopicMetadata",
    "TopicPartitions",
]
