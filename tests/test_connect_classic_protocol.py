"""The classic Kafka Connect protocol codec (translation/connect_classic_protocol.py): worker
metadata and assignments of every version round-trip byte for byte (Hypothesis), arbitrary bytes
decode or are refused with ConnectProtocolError (never another exception), hand-laid bytes decode
to their fields, and each malformation has its reason. Kafka's own classes are the oracle in
e2e/test_connect_protocol_kafka.py; real workers' bytes in e2e/test_connect_runtime.py."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from translation.connect_classic_protocol import (
    CONNECTOR_TASK,
    ConnectAssignment,
    ConnectorEntry,
    ConnectProtocolError,
    ConnectWorkerMetadata,
    build_assignment,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    java_hash_set_order,
    java_string_hash,
)
from translation.embedded_protocol import SchemaError

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=12)
entries = st.lists(st.builds(ConnectorEntry, names, st.lists(int32, max_size=5).map(tuple)), max_size=5).map(
    tuple
)


@st.composite
def assignments(draw: st.DrawFn, version: int | None = None) -> ConnectAssignment:
    v = draw(st.integers(0, 5)) if version is None else version
    head = (v, draw(int16), draw(names), draw(names), draw(int64))
    if v == 0:
        return ConnectAssignment(*head, draw(entries))
    nullable = st.one_of(st.none(), entries)
    return ConnectAssignment(*head, draw(nullable), draw(nullable), draw(int32))


@st.composite
def metadatas(draw: st.DrawFn) -> ConnectWorkerMetadata:
    v = draw(st.integers(0, 5))
    if v == 0:
        return ConnectWorkerMetadata(0, draw(names), draw(int64))
    allocation = draw(st.one_of(st.none(), assignments(draw(st.integers(1, 5)))))
    return ConnectWorkerMetadata(v, draw(names), draw(int64), allocation)


@given(assignments())
def test_assignments_round_trip(a: ConnectAssignment) -> None:
    raw = encode_assignment(a)
    assert decode_assignment(raw) == a
    assert encode_assignment(decode_assignment(raw)) == raw


@given(metadatas())
def test_metadata_round_trips(m: ConnectWorkerMetadata) -> None:
    raw = encode_metadata(m)
    assert decode_metadata(raw) == m
    assert encode_metadata(decode_metadata(raw)) == raw


@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_are_refused(raw: bytes) -> None:
    try:
        a = decode_assignment(raw)
    except ConnectProtocolError as e:
        assert isinstance(e, SchemaError) and "at byte" in str(e)
    else:
        assert encode_assignment(a) == raw
    try:
        m = decode_metadata(raw)
    except ConnectProtocolError as e:
        assert isinstance(e, SchemaError) and "at byte" in str(e)
    else:
        assert encode_metadata(m) == raw


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def test_hand_laid_sessioned_metadata_decodes_to_its_fields() -> None:
    # ExtendedAssignment v2: error 0, leader, leader-url, offset 7, assignment [src: -1, 0],
    # revoked [], delay 0
    alloc = struct.pack(">hh", 2, 0) + _s("connect-1") + _s("http://w1:8083/") + struct.pack(">q", 7)
    alloc += struct.pack(">i", 1) + _s("src") + struct.pack(">iii", 2, CONNECTOR_TASK, 0)
    alloc += struct.pack(">ii", 0, 0)
    raw = (
        struct.pack(">h", 2)
        + _s("http://w2:8083/")
        + struct.pack(">q", 9)
        + struct.pack(">i", len(alloc))
        + alloc
    )
    m = decode_metadata(raw)
    assert (m.version, m.url, m.config_offset) == (2, "http://w2:8083/", 9)
    assert m.allocation is not None and m.allocation.leader == "connect-1"
    assert m.connectors == ("src",) and m.tasks == (("src", 0),)
    assert m.allocation.revoked == () and m.allocation.delay == 0


def test_a_v0_assignment_has_no_revoked_or_delay() -> None:
    raw = struct.pack(">hh", 0, 1) + _s("l") + _s("u") + struct.pack(">q", -1) + struct.pack(">i", 0)
    a = decode_assignment(raw)
    assert a == ConnectAssignment(0, 1, "l", "u", -1, ())
    assert encode_assignment(a) == raw


def test_a_fresh_worker_sends_a_null_allocation() -> None:
    raw = struct.pack(">h", 1) + _s("http://w:1/") + struct.pack(">qi", -1, -1)
    assert decode_metadata(raw) == ConnectWorkerMetadata(1, "http://w:1/", -1, None)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (struct.pack(">h", -1), "Unsupported subscription version: -1"),
        (struct.pack(">hh", 0, -2), "string length -2"),
        (struct.pack(">h", 0) + _s("u") + struct.pack(">q", 1) + b"\x00", "1 trailing bytes"),
        (struct.pack(">h", 1) + _s("u") + struct.pack(">q", 1), "no allocation field"),
        (struct.pack(">hh", 0, 2) + b"\xff\xfe", "is not UTF-8"),
        (struct.pack(">h", 2) + _s("u") + struct.pack(">qi", 1, 50), "truncated"),
        (struct.pack(">h", 2) + _s("u") + struct.pack(">qi", 1, -5), "bytes length -5"),
    ],
)
def test_malformed_metadata_says_why(raw: bytes, reason: str) -> None:
    with pytest.raises(ConnectProtocolError, match=reason):
        decode_metadata(raw)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (struct.pack(">hh", 1, 0) + _s("l") + _s("u") + struct.pack(">qi", 0, 0), "no revoked field"),
        (struct.pack(">hh", 0, 0) + _s("l") + _s("u") + struct.pack(">qi", 0, -1), "array count -1"),
        (
            struct.pack(">hh", 1, 0) + _s("l") + _s("u") + struct.pack(">qi", 0, 10**6),
            "exceeds the remaining",
        ),
        (
            struct.pack(">hh", 1, 0)
            + _s("l")
            + _s("u")
            + struct.pack(">qi", 0, 1)
            + _s("c")
            + struct.pack(">i", 9),
            "task count 9",
        ),
    ],
)
def test_malformed_assignments_say_why(raw: bytes, reason: str) -> None:
    with pytest.raises(ConnectProtocolError, match=reason):
        decode_assignment(raw)


def test_an_allocation_inside_metadata_is_never_version_0() -> None:
    inner = encode_assignment(ConnectAssignment(0, 0, "l", "u", 0, ()))
    raw = struct.pack(">h", 1) + _s("u") + struct.pack(">qi", 0, len(inner)) + inner
    with pytest.raises(ConnectProtocolError, match="version 0 allocation"):
        decode_metadata(raw)


def test_java_string_hash_matches_javas() -> None:
    # "hello".hashCode() == 99162322, "".hashCode() == 0, "\U0001f600" is two UTF-16 units
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("\U0001f600") == (0xD83D * 31 + 0xDE00) & 0xFFFFFFFF
    assert java_string_hash("polygenelubricants") == (-(2**31)) & 0xFFFFFFFF  # Integer.MIN_VALUE


def test_hash_set_order_is_bucket_order() -> None:
    # single characters hash to their code point: buckets 'a'=97&15=1, 'b'=2, 'q'=113&15=1
    assert java_hash_set_order(["b", "q", "a", "b"]) == ["q", "a", "b"]


def test_build_assignment_lists_connectors_then_tasks_as_asmap_does() -> None:
    a = build_assignment(
        2, "l", "u", 3, ["b", "a"], [("c", 1), ("a", 0)], ["z", "y", "z"], [("y", 2)], delay=5
    )
    assert a.assigned == (
        ConnectorEntry("a", (-1, 0)),
        ConnectorEntry("b", (-1,)),
        ConnectorEntry("c", (1,)),
    )
    assert a.revoked == (ConnectorEntry("z", (-1,)), ConnectorEntry("y", (-1, 2)))
    assert a.connectors == ("a", "b") and a.tasks == (("a", 0), ("c", 1)) and a.delay == 5
