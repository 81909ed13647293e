"""The record envelope: one key, one value (None = tombstone), as in `__consumer_offsets`.

Kafka (`CoordinatorRecordSerde`) writes a key as `int16 record type` + key message and a value as
`int16 value version` + value message; the record type of a key is its schema's only version
(offset commits accept 0 and 1). A null value deletes the key under log compaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from records.classic_group import GroupMetadataKey, GroupMetadataValue
    from records.connect_group import (
        ConnectGroupCurrentMemberAssignmentKey,
        ConnectGroupCurrentMemberAssignmentValue,
        ConnectGroupDelayedWorkKey,
        ConnectGroupDelayedWorkValue,
        ConnectGroupMemberMetadataKey,
        ConnectGroupMemberMetadataValue,
        ConnectGroupMetadataKey,
        ConnectGroupMetadataValue,
        ConnectGroupTargetAssignmentMemberKey,
        ConnectGroupTargetAssignmentMemberValue,
        ConnectGroupTargetAssignmentMetadataKey,
        ConnectGroupTargetAssignmentMetadataValue,
    )
    from records.consumer_group import (
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
    )
    from records.offsets import OffsetCommitKey, OffsetCommitValue
    from records.streams_group import (
        StreamsGroupCurrentMemberAssignmentKey,
        StreamsGroupCurrentMemberAssignmentValue,
        StreamsGroupMemberMetadataKey,
        StreamsGroupMemberMetadataValue,
        StreamsGroupMetadataKey,
        StreamsGroupMetadataValue,
        StreamsGroupTargetAssignmentMemberKey,
        StreamsGroupTargetAssignmentMemberValue,
        StreamsGroupTargetAssignmentMetadataKey,
        StreamsGroupTargetAssignmentMetadataValue,
        StreamsGroupTopologyKey,
        StreamsGroupTopologyValue,
    )

RecordKey = Union[
    "OffsetCommitKey",
    "GroupMetadataKey",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupRegularExpressionKey",
    "StreamsGroupMetadataKey",
    "StreamsGroupMemberMetadataKey",
    "StreamsGroupTargetAssignmentMetadataKey",
    "StreamsGroupTargetAssignmentMemberKey",
    "StreamsGroupCurrentMemberAssignmentKey",
    "StreamsGroupTopologyKey",
    "ConnectGroupMetadataKey",
    "ConnectGroupMemberMetadataKey",
    "ConnectGroupTargetAssignmentMetadataKey",
    "ConnectGroupTargetAssignmentMemberKey",
    "ConnectGroupCurrentMemberAssignmentKey",
    "ConnectGroupDelayedWorkKey",
]
RecordValue = Union[
    "OffsetCommitValue",
    "GroupMetadataValue",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupRegularExpressionValue",
    "StreamsGroupMetadataValue",
    "StreamsGroupMemberMetadataValue",
    "StreamsGroupTargetAssignmentMetadataValue",
    "StreamsGroupTargetAssignmentMemberValue",
    "StreamsGroupCurrentMemberAssignmentValue",
    "StreamsGroupTopologyValue",
    "ConnectGroupMetadataValue",
    "ConnectGroupMemberMetadataValue",
    "ConnectGroupTargetAssignmentMetadataValue",
    "ConnectGroupTargetAssignmentMemberValue",
    "ConnectGroupCurrentMemberAssignmentValue",
    "ConnectGroupDelayedWorkValue",
]


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """A key and its new value; `value is None` is a tombstone (the key is deleted)."""

    key: RecordKey
    value: RecordValue | None

    @property
    def is_tombstone(self) -> bool:
        return self.value is None
