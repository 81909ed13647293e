"""protocol.client_assignment_wire: the shapes of docs/client-side-assignors.md round-trip, a
heartbeat carrying groupshift's tag decodes as the same request without it (Kafka's readers skip
unknown tags; kio alone would refuse the frame), and malformed bytes are refused as malformed,
never read past the frame."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import client_assignment_wire as caw
from protocol.client import make_request
from protocol.codec import DecodeFailure, api_schema, decode, encode_request

T = uuid.UUID(int=7)
ASSIGNORS = (
    caw.WireClientAssignor("sticky", -1, 3, 2, 2, b"\x00\x01meta"),
    caw.WireClientAssignor("rack", 0, 0, 0, 0, b""),
)


def heartbeat(version: int) -> object:
    values = {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": "r",
        "rebalance_timeout": 30000,
        "subscribed_topic_names": ["a", "b"],
        "server_assignor": None,
        "topic_partitions": [{"topic_id": T, "partitions": [1, 2]}],
    }
    if version >= 1:
        values["subscribed_topic_regex"] = None
    return make_request(68, version, **values)


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_tag_round_trips_and_kio_decodes_the_rest(version: int) -> None:
    req = heartbeat(version)
    plain = encode_request(req, correlation_id=3, client_id="c")[4:]
    tagged = caw.with_top_level_tag(plain, caw.CLIENT_ASSIGNORS_TAG, caw.client_assignors_field(ASSIGNORS))
    assert caw.read_client_assignors(tagged, caw.body_offset(tagged), version) == ASSIGNORS
    assert caw.read_client_assignors(plain, caw.body_offset(plain), version) is None
    schema = api_schema(68, version)
    assert schema is not None
    assert decode(schema, tagged) == decode(schema, plain)


def test_a_malformed_tag_section_is_a_decode_failure() -> None:
    plain = encode_request(heartbeat(1), correlation_id=3, client_id="c")[4:]
    broken = plain[:-1] + b"\x01\x90\x4e\x7f\x00"  # one tag claiming 127 bytes, 1 present
    schema = api_schema(68, 1)
    assert schema is not None
    with pytest.raises(DecodeFailure):
        decode(schema, broken)
    with pytest.raises(caw.MalformedExtension):
        caw.read_client_assignors(broken, caw.body_offset(broken), 1)


def test_extension_requests_and_responses_round_trip() -> None:
    install = caw.InstallAssignmentRequest(
        "g", "m", 4, 9, 0, (caw.InstalledMember("m", (caw.WireTopicPartitions(T, (0, 5)),), 2, b"x"),)
    )
    body = caw.write_install_request(install)
    assert caw.read_install_request(body, 0) == install
    prepare = caw.PrepareAssignmentRequest("g", "m", 4)
    assert caw.read_prepare_request(caw.write_prepare_request(prepare), 0) == prepare
    resp = caw.PrepareAssignmentResponse(
        0,
        None,
        9,
        "sticky",
        (caw.PreparedMember("m", 4, None, "r", (T,), 1, 2, b"md", (caw.WireTopicPartitions(T, (3,)),)),),
        (caw.PreparedTopic(T, "t", 6),),
    )
    assert caw.read_prepare_response(caw.write_prepare_response(resp)) == resp
    done = caw.InstallAssignmentResponse(42, "no")
    assert caw.read_install_response(caw.write_install_response(done)) == done


@given(st.binary(max_size=200))
def test_garbage_extension_bodies_are_refused_as_malformed(data: bytes) -> None:
    for read in (caw.read_install_request, caw.read_prepare_request):
        with contextlib.suppress(caw.MalformedExtension):
            read(data, 0)


@given(st.integers(0, 60), st.binary(min_size=1, max_size=8))
def test_truncated_or_corrupted_install_requests_never_escape_as_other_errors(cut: int, junk: bytes) -> None:
    body = caw.write_install_request(
        caw.InstallAssignmentRequest(
            "g", "m", 1, 2, 0, (caw.InstalledMember("m", (caw.WireTopicPartitions(T, (0, 1)),), 0, b""),)
        )
    )
    for data in (body[:cut], body[:cut] + junk):
        with contextlib.suppress(caw.MalformedExtension):
            caw.read_install_request(data, 0)
