"""Streams-group record values that exercise every field of Kafka 4.4's layouts: nulls and
non-nulls, tagged fields at and off their defaults, empty and multi-element lists, non-ASCII
strings and the edges of the integer types. Shared by the codec's unit tests and its Kafka
oracle (e2e/test_streams_records_kafka.py)."""

from __future__ import annotations

from records.consumer_group import ClassicMemberMetadata, ClassicProtocol
from records.coordinator import RecordValue
from records.streams_group import (
    CopartitionGroup,
    Endpoint,
    KeyValue,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyValue,
    Subtopology,
    TaskIds,
    TopicInfo,
)

WORD_COUNT_TOPOLOGY = StreamsGroupTopologyValue(
    epoch=0,
    subtopologies=(
        Subtopology(
            subtopology_id="0",
            source_topics=("words-in",),
            source_topic_regex=(),
            state_changelog_topics=(),
            repartition_sink_topics=("app-counts-repartition",),
            repartition_source_topics=(),
            copartition_groups=(),
        ),
        Subtopology(
            subtopology_id="1",
            source_topics=(),
            source_topic_regex=(),
            state_changelog_topics=(
                TopicInfo("app-counts-changelog", 0, 0, (KeyValue("cleanup.policy", "compact"),)),
            ),
            repartition_sink_topics=(),
            repartition_source_topics=(
                TopicInfo("app-counts-repartition", 0, 0, (KeyValue("cleanup.policy", "delete"),)),
            ),
            copartition_groups=(CopartitionGroup((0, 1), (), (0,)),),
        ),
    ),
)

SAMPLES: list[tuple[int, RecordValue]] = [
    (17, StreamsGroupMetadataValue(0, 0)),
    (17, StreamsGroupMetadataValue(7, -(2**63), 3, (KeyValue("num.standby.replicas", "1"),), 5, -2)),
    (17, StreamsGroupMetadataValue(2**31 - 1, 2**63 - 1, -1, None)),
    (19, StreamsGroupMemberMetadataValue(None, None, "c", "/127.0.0.1", -1, 0, "p", None, ())),
    (
        19,
        StreamsGroupMemberMetadataValue(
            "instance-é",
            "rack-1",
            "app-StreamThread-1-consumer",
            "/10.0.0.1",
            300000,
            4,
            "2f1c7a9e-0000-4000-8000-000000000001",
            Endpoint("host.example", 65535),
            (KeyValue("zone", "a"), KeyValue("k", "")),
        ),
    ),
    (
        19,
        StreamsGroupMemberMetadataValue(
            None,
            None,
            "app-StreamThread-1-consumer",
            "/10.0.0.2",
            300000,
            0,
            "00000000-0000-0000-0000-000000000007",
            Endpoint("h1", 7001),
            (),
            ClassicMemberMetadata(45000, (ClassicProtocol("stream", b"\x00\x03meta"),)),
        ),
    ),
    (20, StreamsGroupTargetAssignmentMetadataValue(5)),
    (20, StreamsGroupTargetAssignmentMetadataValue(5, 1_760_000_000_123)),
    (21, StreamsGroupTargetAssignmentMemberValue((), (), ())),
    (
        21,
        StreamsGroupTargetAssignmentMemberValue(
            (TaskIds("0", (0, 1, 2)), TaskIds("1", (5,))), (TaskIds("1", (0,)),), (TaskIds("0", ()),)
        ),
    ),
    (22, StreamsGroupCurrentMemberAssignmentValue(1, 0, 1, (), (), ())),
    (
        22,
        StreamsGroupCurrentMemberAssignmentValue(
            9,
            8,
            2,
            (TaskIds("0", (0, 3), (8, 9)), TaskIds("1", (1,))),
            (TaskIds("1", (2,)),),
            (),
            (TaskIds("0", (1,), (4,)),),
            (TaskIds("1", (0,)),),
            (TaskIds("2", (7,)),),
        ),
    ),
    (23, StreamsGroupTopologyValue(1, ())),
    (23, WORD_COUNT_TOPOLOGY),
    (
        23,
        StreamsGroupTopologyValue(
            2,
            (
                Subtopology(
                    "x",
                    ("a", "b"),
                    ("in-.*",),
                    (TopicInfo("t", 8, 3, ()),),
                    ("r1", "r2"),
                    (TopicInfo("r0", -1, -1, (KeyValue("k", "v"), KeyValue("k2", "v2"))),),
                    (CopartitionGroup((0,), (0,), (0,)), CopartitionGroup((), (), ())),
                ),
            ),
        ),
    ),
]
"""(record type, value)."""

# The word count as a heartbeat sends it: WORD_COUNT_TOPOLOGY's copartition group names source
# topic indices 0 and 1 of a subtopology without source topics, which a record may hold but Kafka
# 4.4 fails a join with (UNKNOWN_SERVER_ERROR, e2e/test_streams_differential.py).
WORD_COUNT_APP_TOPOLOGY = StreamsGroupTopologyValue(
    epoch=WORD_COUNT_TOPOLOGY.epoch,
    subtopologies=(
        WORD_COUNT_TOPOLOGY.subtopologies[0],
        Subtopology(
            **{
                **{
                    f: getattr(WORD_COUNT_TOPOLOGY.subtopologies[1], f)
                    for f in Subtopology.__dataclass_fields__
                },
                "copartition_groups": (CopartitionGroup((), (), (0,)),),
            }
        ),
    ),
)
