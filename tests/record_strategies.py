"""Hypothesis strategies for every coordinator record key, value and whole record.

Values span each field's full range (int8 to int64, any 128-bit uuid, any Unicode text) and,
now and then, lengths of 127 or more so that compact lengths need a two-byte varint.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from records import (
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
    CoordinatorRecord,
    GroupMemberMetadata,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
)

int8 = st.integers(-(2**7), 2**7 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.one_of(st.text(max_size=12), st.text(min_size=127, max_size=160))
optional_text = st.none() | text
blobs = st.one_of(st.binary(max_size=16), st.binary(min_size=127, max_size=300))
uuids = st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))


def tuples(elements: st.SearchStrategy[Any], long: bool = False) -> st.SearchStrategy[Any]:
    """Tuples of 0-4 elements, or with `long` sometimes 127-130 (a two-byte compact length)."""
    short = st.lists(elements, max_size=4).map(tuple)
    if not long:
        return short
    return st.one_of(short, st.lists(elements, min_size=127, max_size=130).map(tuple))


@st.composite
def offset_commit_values(draw: st.DrawFn) -> OffsetCommitValue:
    expire_timestamp = draw(st.just(-1) | int64)
    # Version 1, the only one with an expire timestamp, has no leader epoch.
    leader_epoch = -1 if expire_timestamp != -1 else draw(int32)
    return OffsetCommitValue(draw(int64), leader_epoch, draw(text), draw(int64), expire_timestamp)


group_members = st.builds(GroupMemberMetadata, text, optional_text, text, text, int32, int32, blobs, blobs)
topic_partitions = st.builds(TopicPartitions, uuids, tuples(int32, long=True))


@st.composite
def assigned_topic_partitions(draw: st.DrawFn) -> TopicPartitions:
    """Type 8's partitions: with one assignment epoch per partition (Kafka 4.3+), or without
    (older Kafka); Kafka never writes an empty epoch list, nor one of another length."""
    tp = draw(topic_partitions)
    if not tp.partitions or draw(st.booleans()):
        return tp
    epochs = draw(st.lists(int32, min_size=len(tp.partitions), max_size=len(tp.partitions)))
    return TopicPartitions(tp.topic_id, tp.partitions, tuple(epochs))


classic_member_metadata = st.builds(
    ClassicMemberMetadata, int32, tuples(st.builds(ClassicProtocol, text, blobs))
)
int16 = st.integers(-(2**15), 2**15 - 1)
# groupshift's tagged field 10000 of the member value (docs/client-side-assignors.md)
client_assignors = tuples(st.builds(ClientAssignorMetadata, text, int16, int16, int8, int16, blobs))

KEYS_AND_VALUES: list[tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = [
    (st.builds(OffsetCommitKey, text, text, int32), offset_commit_values()),
    (
        st.builds(GroupMetadataKey, text),
        st.builds(
            GroupMetadataValue,
            text,
            int32,
            optional_text,
            optional_text,
            int64,
            tuples(group_members),
        ),
    ),
    (st.builds(ConsumerGroupMetadataKey, text), st.builds(ConsumerGroupMetadataValue, int32)),
    (
        st.builds(ConsumerGroupPartitionMetadataKey, text),
        st.builds(
            ConsumerGroupPartitionMetadataValue,
            tuples(
                st.builds(
                    TopicMetadata,
                    uuids,
                    text,
                    int32,
                    tuples(st.builds(PartitionMetadata, int32, tuples(text))),
                )
            ),
        ),
    ),
    (
        st.builds(ConsumerGroupMemberMetadataKey, text, text),
        st.builds(
            ConsumerGroupMemberMetadataValue,
            optional_text,
            optional_text,
            text,
            text,
            tuples(text, long=True),
            optional_text,
            int32,
            optional_text,
            st.none() | classic_member_metadata,
            client_assignors,
        ),
    ),
    (
        st.builds(ConsumerGroupTargetAssignmentMetadataKey, text),
        st.builds(ConsumerGroupTargetAssignmentMetadataValue, int32),
    ),
    (
        st.builds(ConsumerGroupTargetAssignmentMemberKey, text, text),
        st.builds(
            ConsumerGroupTargetAssignmentMemberValue,
            tuples(topic_partitions),
            st.none() | st.builds(ClientAssignmentMetadata, int16, blobs),
        ),
    ),
    (
        st.builds(ConsumerGroupCurrentMemberAssignmentKey, text, text),
        st.builds(
            ConsumerGroupCurrentMemberAssignmentValue,
            int32,
            int32,
            int8,
            tuples(assigned_topic_partitions()),
            tuples(assigned_topic_partitions()),
        ),
    ),
    (
        st.builds(ConsumerGroupRegularExpressionKey, text, text),
        st.builds(ConsumerGroupRegularExpressionValue, tuples(text, long=True), int64, int64),
    ),
]
"""(key strategy, value strategy) for every record type we support."""


def records_of(keys: st.SearchStrategy[Any], values: st.SearchStrategy[Any]) -> Any:
    """Records of one type: a value, or now and then a tombstone."""
    return st.builds(CoordinatorRecord, keys, st.none() | values)


coordinator_records = st.one_of([records_of(k, v) for k, v in KEYS_AND_VALUES])
