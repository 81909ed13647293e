"""Kafka Streams' SubscriptionInfo / AssignmentInfo codec (translation/streams_classic_protocol):
every version 1-11 and version probing round-trip byte for byte, arbitrary bytes decode or are
refused with StreamsProtocolError (never another exception), and hand-built bytes laid out as
Kafka's SubscriptionInfoData / AssignmentInfo.encode write them decode to the fields they hold.
The real bytes of a Kafka Streams 3.9 application are checked live in
e2e/test_streams_classic_groups.py."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from translation.embedded_protocol import SchemaError, parse_assignment
from translation.streams_classic_protocol import (
    LATEST_OFFSET,
    NO_NEXT_REBALANCE,
    AssignmentInfo,
    HostPartitions,
    StreamsProtocolError,
    SubscriptionInfo,
    TaskId,
    TaskOffsetSum,
    decode_assignment_info,
    decode_subscription_info,
    encode_assignment_info,
    encode_subscription_info,
    parse_streams_member_metadata,
)

int32 = st.integers(-(2**31), 2**31 - 1)
small = st.integers(0, 64)
text = st.text(max_size=12)
topics = st.text(max_size=10)


def task_ids(named: bool) -> st.SearchStrategy[TaskId]:
    topology = st.one_of(st.none(), st.text(min_size=1, max_size=6)) if named else st.none()
    return st.builds(TaskId, small, small, topology)


@st.composite
def subscriptions(draw: st.DrawFn) -> SubscriptionInfo:
    version = draw(st.integers(1, 13))
    latest = -1 if version <= 2 else draw(st.integers(version, 14))
    if version > 11:
        return SubscriptionInfo(version, latest, uuid.UUID(int=0), future=draw(st.binary(max_size=40)))
    sums: tuple[TaskOffsetSum, ...] = ()
    if version >= 10:
        sums = tuple(
            draw(st.lists(st.builds(TaskOffsetSum, task_ids(True), st.integers(-3, 2**40)), max_size=6))
        )
    elif version >= 7:
        # Kafka writes one group per subtopology; the flat list keeps that order.
        by_sub = draw(
            st.dictionaries(
                small, st.lists(st.tuples(small, st.integers(-3, 2**40)), min_size=1, max_size=3), max_size=3
            )
        )
        sums = tuple(TaskOffsetSum(TaskId(s, p), o) for s, parts in by_sub.items() for p, o in parts)
    return SubscriptionInfo(
        version,
        latest,
        uuid.UUID(int=draw(st.integers(0, 2**128 - 1))),
        tuple(draw(st.lists(task_ids(False), max_size=4))) if version <= 6 else (),
        tuple(draw(st.lists(task_ids(False), max_size=4))) if version <= 6 else (),
        draw(st.binary(max_size=20)) if version >= 2 else b"",
        sums,
        draw(st.integers(-128, 127)) if version >= 8 else 0,
        draw(int32) if version >= 9 else 0,
        tuple(draw(st.lists(st.tuples(st.binary(max_size=5), st.binary(max_size=5)), max_size=3)))
        if version >= 11
        else (),
    )


def hosts(draw: st.DrawFn, names: list[str] | None) -> tuple[HostPartitions, ...]:
    topic = st.sampled_from(names) if names else topics
    return tuple(
        draw(
            st.lists(
                st.builds(
                    HostPartitions, topics, int32, st.lists(st.tuples(topic, small), max_size=3).map(tuple)
                ),
                max_size=3,
            )
        )
    )


@st.composite
def assignments(draw: st.DrawFn) -> AssignmentInfo:
    version = draw(st.integers(1, 13))
    common = -1 if version <= 2 else draw(int32)
    if version > 11:
        return AssignmentInfo(version, common, future=draw(st.binary(max_size=40)))
    named = version >= 10
    standby = tuple(
        (t, tuple(draw(st.lists(st.tuples(topics, small), max_size=3))))
        for t in draw(st.lists(task_ids(named), max_size=3))
    )
    names = draw(st.lists(topics, min_size=1, max_size=4, unique=True)) if version >= 5 else None
    dictionary: tuple[tuple[int, str], ...] = ()
    if names is not None:
        indexes = draw(st.lists(int32, min_size=len(names), max_size=len(names), unique=True))
        dictionary = tuple(zip(indexes, names, strict=True))
    return AssignmentInfo(
        version,
        common,
        tuple(draw(st.lists(task_ids(named), max_size=4))),
        standby,
        hosts(draw, names) if version >= 2 else (),
        hosts(draw, names) if version >= 6 else (),
        draw(int32) if version >= 4 else 0,
        draw(st.integers(-(2**63), 2**63 - 1)) if version >= 7 else NO_NEXT_REBALANCE,
        dictionary,
    )


@given(subscriptions())
@settings(max_examples=100, deadline=None)
def test_subscription_info_round_trips(info: SubscriptionInfo) -> None:
    raw = encode_subscription_info(info)
    back = decode_subscription_info(raw)
    assert back == info
    assert encode_subscription_info(back) == raw


@given(assignments())
@settings(max_examples=60, deadline=None)
def test_assignment_info_round_trips(info: AssignmentInfo) -> None:
    raw = encode_assignment_info(info)
    back = decode_assignment_info(raw)
    assert back == info
    assert encode_assignment_info(back) == raw


@given(st.binary(max_size=200))
@settings(max_examples=200, deadline=None)
def test_arbitrary_bytes_decode_or_are_refused(raw: bytes) -> None:
    try:
        sub = decode_subscription_info(raw)
    except StreamsProtocolError as e:
        assert str(e)
    else:
        assert encode_subscription_info(sub) == raw
    try:
        assignment = decode_assignment_info(raw)
    except StreamsProtocolError as e:
        assert str(e)
    else:
        assert encode_assignment_info(assignment) == raw


@given(subscriptions(), st.data())
@settings(max_examples=50, deadline=None)
def test_truncated_subscription_is_refused(info: SubscriptionInfo, data: st.DataObject) -> None:
    raw = encode_subscription_info(info)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(SchemaError):
        decoded = decode_subscription_info(raw[:cut])
        # A future version's opaque tail may be cut anywhere past the two version fields.
        if decoded.is_future:
            raise StreamsProtocolError("future")


def _i(*vs: int) -> bytes:
    return b"".join(struct.pack(">i", v) for v in vs)


def _utf(s: str) -> bytes:
    return struct.pack(">H", len(s)) + s.encode()


PID = uuid.UUID("0c5a3b8e-6f1e-4d9a-9d7e-2b1f3e4a5c6d")


def test_subscription_v2_fields_as_kafka_lays_them_out() -> None:
    raw = _i(2) + PID.bytes + _i(1, 0, 3) + _i(1, 1, 0) + _i(9) + b"host:8080"
    info = decode_subscription_info(raw)
    assert info.latest_supported_version == -1
    assert info.process_id == PID
    assert info.active_tasks == (TaskId(0, 3),)
    assert info.standby_or_state_tasks == (TaskId(1, 0),)
    assert info.endpoint == "host:8080"


def test_subscription_v9_offset_sums_name_active_and_standby_tasks() -> None:
    # version, latest, pid, endpoint, [sub 0: (0, LATEST), (1, 42)], unique, error
    raw = (
        _i(9, 11)
        + PID.bytes
        + _i(0)
        + _i(1, 0, 2)
        + _i(0)
        + struct.pack(">q", LATEST_OFFSET)
        + _i(1)
        + struct.pack(">q", 42)
        + b"\x07"
        + _i(0)
    )
    info = decode_subscription_info(raw)
    assert info.active_tasks == (TaskId(0, 0),)
    assert info.standby_or_state_tasks == (TaskId(0, 1),)
    assert info.endpoint is None and info.unique_field == 7
    assert encode_subscription_info(info) == raw


def test_version_probing_subscription_keeps_only_the_two_version_fields() -> None:
    raw = _i(12, 12) + b"anything a newer Streams writes"
    info = decode_subscription_info(raw)
    assert info.is_future and info.version == 12 and info.latest_supported_version == 12
    assert encode_subscription_info(info) == raw


def test_assignment_v6_dictionary_and_hosts() -> None:
    raw = (
        _i(6, 6)
        + _i(1, 0, 1)
        + _i(0)  # active 0_1, no standby
        + _i(1)
        + _i(5)
        + _utf("words")  # dictionary {5: words}
        + _i(1)
        + _utf("h")
        + _i(7)
        + _i(1, 5, 1)  # h:7 -> words-1
        + _i(0)
        + _i(0)  # no standby hosts, error 0
    )
    info = decode_assignment_info(raw)
    assert info.active_tasks == (TaskId(0, 1),)
    assert info.partitions_by_host == (HostPartitions("h", 7, (("words", 1),)),)
    assert encode_assignment_info(info) == raw


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "truncated"),
        (_i(0), "below 1"),
        (_i(3, -1), "without a latest supported version"),
        (_i(5, 4), "above its own latest"),
        (_i(1) + PID.bytes + _i(-1), "negative prevTasks count"),
        (_i(1) + PID.bytes + _i(0, 0) + b"x", "1 trailing bytes"),
        (_i(1) + PID.bytes + _i(2**30), "exceeds the remaining"),
    ],
)
def test_malformed_subscription_reasons(raw: bytes, reason: str) -> None:
    with pytest.raises(StreamsProtocolError, match=reason):
        decode_subscription_info(raw)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (_i(5, 5, 0, 0) + _i(1) + _i(1) + _utf("a") + _i(0), "truncated"),
        (_i(5, 5, 0, 0) + _i(2) + _i(1) + _utf("a") + _i(1) + _utf("b"), "repeated index"),
        (_i(5, 5, 0, 0) + _i(0) + _i(1) + _utf("h") + _i(1) + _i(1, 9, 0) + _i(0), "not in the dictionary"),
        (_i(2, 0, 0, 1) + struct.pack(">H", 1) + b"\x00" + _i(7, 0), "modified UTF-8"),
    ],
)
def test_malformed_assignment_reasons(raw: bytes, reason: str) -> None:
    with pytest.raises(StreamsProtocolError, match=reason):
        decode_assignment_info(raw)


# A Kafka Streams 3.9.2 instance's real JoinGroup metadata and SyncGroup assignment, as
# DescribeGroups returned them from groupshift (e2e/test_streams_classic_groups.py's word count:
# endpoint localhost:7101, one standby replica), captured once: 265 and 510 bytes.
REAL_METADATA = bytes.fromhex(
    "0003000000020023776f7264636f756e742d636c61737369632d776f7264732d7265706172746974696f6e00"
    "08776f7264732d696e0000007f0000000b0000000b8bc81155738b4de2ab6b5e4b4b1b89c00000000e6c6f63"
    "616c686f73743a37313031000000040000000100000000fffffffffffffffeffff0000000100000003000000"
    "0000000000ffff0000000100000002fffffffffffffffeffff00000001000000010000000000000000ffff03"
    "0000000000000000000000020023776f7264636f756e742d636c61737369632d776f7264732d726570617274"
    "6974696f6e0000000200000000000000020008776f7264732d696e00000002000000000000000200000001ff"
    "ff"
)
REAL_ASSIGNMENT = bytes.fromhex(
    "0003000000020023776f7264636f756e742d636c61737369632d776f7264732d7265706172746974696f6e00"
    "00000200000000000000020008776f7264732d696e000000020000000000000002000001ad0000000b000000"
    "0b00000004000000010000000000000000000000010000000200000000000000000000000000000000000000"
    "00000000020000000000000002000000010000000300000000000000010023776f7264636f756e742d636c61"
    "737369632d776f7264732d7265706172746974696f6e00000003000000010000000100000000000000010023"
    "776f7264636f756e742d636c61737369632d776f7264732d7265706172746974696f6e000000010000000200"
    "0000000008776f7264732d696e000000010023776f7264636f756e742d636c61737369632d776f7264732d72"
    "65706172746974696f6e0000000200096c6f63616c686f737400001bbe000000040000000100000003000000"
    "00000000010000000000000003000000010000000100096c6f63616c686f737400001bbd0000000400000000"
    "000000000000000100000002000000000000000200000001000000000000000200096c6f63616c686f737400"
    "001bbe000000020000000100000002000000010000000000096c6f63616c686f737400001bbd000000020000"
    "0001000000030000000100000001000000007fffffffffffffff"
)


def test_real_kafka_streams_39_bytes() -> None:
    member = parse_streams_member_metadata(REAL_METADATA)
    assert member.subscription.topics == ("wordcount-classic-words-repartition", "words-in")
    info = member.info
    assert (info.version, info.latest_supported_version, info.endpoint) == (11, 11, "localhost:7101")
    assert info.process_id == uuid.UUID("8bc81155-738b-4de2-ab6b-5e4b4b1b89c0")
    # Only stateful tasks have offset sums: the counting subtopology 1, active where -2.
    assert sorted(map(str, info.active_tasks)) == ["1_0", "1_2"]
    assert sorted(map(str, info.standby_or_state_tasks)) == ["1_1", "1_3"]
    assert encode_subscription_info(info) == member.subscription.user_data
    assignment = parse_assignment(REAL_ASSIGNMENT)
    assert assignment.user_data is not None
    a = decode_assignment_info(assignment.user_data)
    assert sorted(map(str, a.active_tasks)) == ["0_0", "0_2", "1_0", "1_2"]
    assert sorted(str(t) for t, _ in a.standby_tasks) == ["1_1", "1_3"]
    assert {h.endpoint for h in a.partitions_by_host} == {"localhost:7101", "localhost:7102"}
    assert (a.error_code, a.next_rebalance_ms) == (0, NO_NEXT_REBALANCE)
    assert encode_assignment_info(a) == assignment.user_data
