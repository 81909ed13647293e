"""protocol.connect_wire and the Connect-group records: the shapes of docs/connect-groups.md
round-trip, a whole frame decodes through the server's codec, and malformed bytes (truncated,
corrupted, random, lengths larger than the frame) are refused as malformed, never read past the
frame and never raised as another error."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import connect_wire as cw
from protocol.codec import DecodeFailure, api_schema, decode
from records.codec import RecordDecodeError, decode_record, encode_record
from records.connect_group import (
    ConnectClassicWorker,
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
from records.consumer_group import ClassicProtocol
from records.coordinator import CoordinatorRecord

WORK = cw.WireWork(("c1", "c2"), (cw.WireTask("c1", 0), cw.WireTask("c2", 3)))
ASSIGNORS = (
    cw.WireConnectAssignor("incremental", -1, 2, 1, 2, b"\x00meta"),
    cw.WireConnectAssignor("x", 0, 0, 0, 0, b""),
)
HEARTBEAT = cw.ConnectHeartbeatRequest("g", "m", 3, 30000, "http://w:8083", 42, ASSIGNORS, WORK)
INSTALL = cw.ConnectInstallRequest("g", "m", 3, 4, 0, (cw.InstalledWorker("m", WORK, 1, b"md"),))


def frame(api_key: int, body: bytes, client_id: bytes = b"cli") -> bytes:
    """A request frame (without its size prefix), header v2."""
    return struct.pack(">hhih", api_key, 0, 7, len(client_id)) + client_id + b"\x00" + body


def test_requests_and_responses_round_trip() -> None:
    assert cw.read_heartbeat_request(cw.write_heartbeat_request(HEARTBEAT), 0) == HEARTBEAT
    unchanged = cw.ConnectHeartbeatRequest("g", "m", 3)
    assert cw.read_heartbeat_request(cw.write_heartbeat_request(unchanged), 0) == unchanged
    prepare = cw.ConnectPrepareRequest("g", "m", 3)
    assert cw.read_prepare_request(cw.write_prepare_request(prepare), 0) == prepare
    assert cw.read_install_request(cw.write_install_request(INSTALL), 0) == INSTALL
    hb = cw.ConnectHeartbeatResponse(0, None, "m", 3, 5000, 4, cw.WireConnectAssignment(WORK, 2, b"a"))
    assert cw.read_heartbeat_response(cw.write_heartbeat_response(hb)) == hb
    bare = cw.ConnectHeartbeatResponse(25, "who?")
    assert cw.read_heartbeat_response(cw.write_heartbeat_response(bare)) == bare
    prep = cw.ConnectPrepareResponse(
        0,
        None,
        4,
        "incremental",
        (cw.PreparedWorker("m", 3, "http://w:8083", 42, 1, 2, b"md", WORK),),
        (cw.DelayedWork("gone", "http://g:8083", 900, WORK),),
    )
    assert cw.read_prepare_response(cw.write_prepare_response(prep)) == prep
    done = cw.ConnectInstallResponse(42, "Invalid assignment: no")
    assert cw.read_install_response(cw.write_install_response(done)) == done


@pytest.mark.parametrize(
    ("key", "body", "expected"),
    [
        (cw.CONNECT_HEARTBEAT_KEY, cw.write_heartbeat_request(HEARTBEAT), HEARTBEAT),
        (cw.CONNECT_PREPARE_KEY, cw.write_prepare_request(cw.ConnectPrepareRequest("g", "m", 1)), None),
        (cw.CONNECT_INSTALL_KEY, cw.write_install_request(INSTALL), INSTALL),
    ],
)
def test_whole_frames_decode_through_the_server_codec(key: int, body: bytes, expected: object) -> None:
    schema = api_schema(key, 0)
    assert schema is not None and schema.flexible_response_header
    header, req = decode(schema, frame(key, body))
    assert header.correlation_id == 7
    if expected is not None:
        assert req == expected
    with pytest.raises(DecodeFailure):
        decode(schema, frame(key, body + b"\x01"))  # trailing bytes
    with pytest.raises(DecodeFailure):
        decode(schema, frame(key, body[:-3]))
    assert api_schema(key, 1) is None


def test_a_count_larger_than_the_frame_is_malformed_not_allocated() -> None:
    body = bytearray(cw.write_prepare_request(cw.ConnectPrepareRequest("g", "m", 1)))
    # GroupId claims 2**31 bytes
    huge = b"\x80\x80\x80\x80\x08" + bytes(body[2:])
    with pytest.raises(cw.MalformedExtension):
        cw.read_prepare_request(huge, 0)
    hb = cw.write_heartbeat_request(cw.ConnectHeartbeatRequest("g", "m", 1))
    # the assignor array (after g, m, epoch, timeout, url=null, offset) claims 10**6 entries
    at = 2 + 2 + 4 + 4 + 1 + 8
    bad = hb[:at] + b"\xc1\x84\x3d" + hb[at + 1 :]
    with pytest.raises(cw.MalformedExtension):
        cw.read_heartbeat_request(bad, 0)


@given(st.binary(max_size=200))
def test_garbage_bodies_are_refused_as_malformed(data: bytes) -> None:
    for read in (cw.read_heartbeat_request, cw.read_install_request, cw.read_prepare_request):
        with contextlib.suppress(cw.MalformedExtension):
            read(data, 0)


@given(st.integers(0, 120), st.binary(min_size=1, max_size=8))
def test_truncated_or_corrupted_requests_never_escape_as_other_errors(cut: int, junk: bytes) -> None:
    for body, read in (
        (cw.write_heartbeat_request(HEARTBEAT), cw.read_heartbeat_request),
        (cw.write_install_request(INSTALL), cw.read_install_request),
    ):
        for data in (body[:cut], body[:cut] + junk, body[:cut] + junk + body[cut:]):
            with contextlib.suppress(cw.MalformedExtension):
                read(data, 0)


RECORDS = [
    CoordinatorRecord(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(5)),
    CoordinatorRecord(
        ConnectGroupMemberMetadataKey("g", "m"),
        ConnectGroupMemberMetadataValue("cli", "/10.0.0.1", "http://w:8083", 30000, 42, ASSIGNORS),
    ),
    # a classic Kafka Connect worker living in the group: tag 0 of the member value
    CoordinatorRecord(
        ConnectGroupMemberMetadataKey("g", "classic"),
        ConnectGroupMemberMetadataValue(
            "connect-1",
            "/10.0.0.2",
            "http://c:8083",
            60000,
            7,
            (),
            ConnectClassicWorker(
                10000,
                6,
                5,
                (ClassicProtocol("sessioned", b"\x00\x02meta"), ClassicProtocol("compatible", b"")),
            ),
        ),
    ),
    CoordinatorRecord(
        ConnectGroupTargetAssignmentMetadataKey("g"), ConnectGroupTargetAssignmentMetadataValue(4)
    ),
    CoordinatorRecord(
        ConnectGroupTargetAssignmentMemberKey("g", "m"),
        ConnectGroupTargetAssignmentMemberValue(WORK, 1, b"x"),
    ),
    CoordinatorRecord(
        ConnectGroupCurrentMemberAssignmentKey("g", "m"),
        ConnectGroupCurrentMemberAssignmentValue(4, 3, 1, WORK, cw.WireWork(("c9",), ())),
    ),
    CoordinatorRecord(
        ConnectGroupDelayedWorkKey("g", "gone"), ConnectGroupDelayedWorkValue("http://g", 10**12, WORK)
    ),
]


@pytest.mark.parametrize(
    "record",
    RECORDS,
    ids=lambda r: type(r.key).__name__ + ("-classic" if getattr(r.value, "classic", None) else ""),
)
def test_connect_records_round_trip_and_tombstones(record: CoordinatorRecord) -> None:
    key, value = encode_record(record)
    assert struct.unpack_from(">h", key)[0] == type(record.key).RECORD_TYPE >= 10000
    assert decode_record(key, value) == record
    assert decode_record(key, None) == CoordinatorRecord(record.key, None)
    assert value is not None
    for bad in (value[:-1], value + b"\x00", b"\x00\x01" + value[2:]):
        with pytest.raises(RecordDecodeError):
            decode_record(key, bad)


@given(st.binary(max_size=80))
def test_garbage_connect_values_are_record_decode_errors(data: bytes) -> None:
    for record in RECORDS:
        key, _ = encode_record(record)
        with contextlib.suppress(RecordDecodeError):
            decode_record(key, data)
