"""The wire codec: kio round trips, header versions, the array-length guard, and the
version-superset response builder."""

from __future__ import annotations

import contextlib
import io
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import Records

from protocol.codec import (
    DecodeFailure,
    api_schema,
    decode,
    decode_response,
    encode_request,
    encode_response,
    peek,
)
from protocol.entity_builder import build, field_names
from protocol.kafka_schemas import request_schema
from protocol.length_guard import MalformedLength, check_lengths, guard_for

st.register_type_strategy(Records, st.binary(max_size=64))


def request_frame(request: object, correlation_id: int = 5) -> bytes:
    return encode_request(request, correlation_id=correlation_id, client_id="unit")[4:]


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(3, 0), (3, 13), (1, 4), (1, 16), (0, 9), (68, 1), (11, 5), (18, 4), (88, 1), (89, 1), (93, 0)],
)
def test_requests_round_trip_through_kio(api_key: int, version: int) -> None:
    req_type = request_schema(api_key, version)  # kio's, or protocol.kafka_schemas' (88/89 v1, 93)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(req_type))
    def check(request: object) -> None:
        frame = request_frame(request)
        assert peek(frame) == (api_key, version, 5)
        schema = api_schema(api_key, version)
        assert schema is not None
        header, body = decode(schema, frame)
        assert (header.request_api_key, header.correlation_id, header.client_id) == (
            api_key,
            5,
            "unit",
        )
        assert body == request

    check()


def test_responses_use_header_v1_when_flexible_except_api_versions() -> None:
    metadata = api_schema(3, 12)
    api_versions = api_schema(18, 4)
    assert metadata is not None and api_versions is not None
    body = build(metadata.response_type, {"throttle_time": 0, "brokers": [], "topics": []})
    frame = encode_response(metadata, 77, body)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    assert frame[4:9] == struct.pack(">iB", 77, 0)  # correlation id + empty tagged fields
    assert decode_response(metadata.response_type, frame[4:]) == (77, body)

    av = build(api_versions.response_type, {"error_code": 0, "api_keys": [], "throttle_time": 0})
    frame = encode_response(api_versions, 78, av)
    assert frame[4:8] == struct.pack(">i", 78) and frame[8:10] == b"\x00\x00"  # v0 header


def test_pre_encoded_response_bodies_are_framed_as_is() -> None:
    schema = api_schema(12, 4)
    assert schema is not None
    assert encode_response(schema, 9, b"\x00\x00\x00\x00\x00\x00\x00") == (
        struct.pack(">iiB", 12, 9, 0) + b"\x00" * 7
    )


def test_truncated_and_garbled_bodies_raise_decode_failure() -> None:
    schema = api_schema(3, 1)
    assert schema is not None
    good = request_frame(build(schema.request_type, {"topics": [{"name": "abc"}]}))
    for cut in range(len(good) - 1, 14, -1):
        with pytest.raises(DecodeFailure):
            decode(schema, good[:cut])
    with pytest.raises(DecodeFailure):
        peek(b"\x00\x03")


def test_array_lengths_beyond_the_frame_are_refused_before_kio_allocates() -> None:
    v13 = api_schema(3, 13)
    v1 = api_schema(3, 1)
    assert v13 is not None and v1 is not None
    header13 = struct.pack(">hhih", 3, 13, 1, 0) + b"\x00"  # header v2, no tagged fields
    with pytest.raises(DecodeFailure, match="exceeds"):
        decode(v13, header13 + b"\xff\xff\xff\xff\x0f")
    header1 = struct.pack(">hhih", 3, 1, 1, 0)
    with pytest.raises(DecodeFailure, match="exceeds"):
        decode(v1, header1 + struct.pack(">i", 2**31 - 1))
    # Exactly as many elements as could fit is fine for the guard (kio then reads them).
    guard = guard_for(v1.request_type)
    assert guard is not None
    body = struct.pack(">i", 1) + struct.pack(">h", 1) + b"a"
    assert check_lengths(guard, body, 0) == len(body)
    with pytest.raises(MalformedLength):
        check_lengths(guard, struct.pack(">i", 3) + b"\x00\x00", 0)


def test_schemas_without_arrays_skip_the_guard() -> None:
    assert guard_for(load_request_schema(12, 4)) is None  # classic Heartbeat
    assert guard_for(load_request_schema(68, 1)) is not None  # ConsumerGroupHeartbeat


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_random_bodies_never_escape_as_anything_but_decode_failure(noise: bytes) -> None:
    for key, version in ((3, 13), (1, 16), (0, 9), (68, 1), (19, 7)):
        schema = api_schema(key, version)
        assert schema is not None
        head = struct.pack(">hhih", key, version, 1, 0) + b"\x00"
        with contextlib.suppress(DecodeFailure):
            decode(schema, head + noise)


def test_build_keeps_only_the_fields_of_the_target_version() -> None:
    v0 = load_response_schema(3, 0)
    v13 = load_response_schema(3, 13)
    topic = {
        "error_code": 0,
        "name": "t",
        "topic_id": uuid.uuid4(),
        "is_internal": False,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": 0,
                "leader_id": 0,
                "leader_epoch": 0,
                "replica_nodes": [0],
                "isr_nodes": [0],
            }
        ],
    }
    values = {"throttle_time": 0, "brokers": [], "cluster_id": "c", "topics": [topic], "error_code": 0}
    old, new = build(v0, values), build(v13, values)
    assert "cluster_id" not in field_names(v0) and new.cluster_id == "c"
    assert old.topics[0].partitions[0].replica_nodes == (0,)
    assert new.topics[0].error_code is ErrorCode.none
    assert new.throttle_time.total_seconds() == 0
    buf = io.BytesIO()
    entity_writer(v0)(buf, old)  # encodable as is
    with pytest.raises(TypeError, match="needs field 'topics'"):
        build(v13, {"throttle_time": 0, "brokers": []})
