"""The wire schemas groupshift adds beside kio (protocol/kafka_schemas.py) against the bytes
Kafka 4.4.0's own generated classes write (tests/streams_wire_samples.py; the e2e oracle
e2e/test_streams_wire_kafka.py asks Kafka again): each sample encodes to Kafka's bytes and
Kafka's bytes decode to the sample, request and response alike, through the same codec paths
the server and the clients use."""

from __future__ import annotations

import io
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from gateway.registry import api_name, request_schema_path
from protocol import kafka_schemas
from protocol.client import make_request
from protocol.codec import api_schema, decode, encode_request, encode_response
from protocol.entity_builder import build
from tests.streams_wire_samples import SAMPLES, api_of


def _write(cls: type, value: Any, *, response: bool, api_key: int, version: int) -> bytes:
    if response:
        schema = api_schema(api_key, version)
        assert schema is not None
        frame = encode_response(schema, 1, value)
        return frame[4 + 5 :]  # size, correlation id, empty header tags
    buf = io.BytesIO()
    entity_writer(cls)(buf, value)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "version", "values", "kafka_hex"),
    SAMPLES,
    ids=[f"{s[0]}-v{s[1]}-{i}" for i, s in enumerate(SAMPLES)],
)
def test_the_bytes_are_kafkas_both_ways(
    name: str, version: int, values: dict[str, Any], kafka_hex: str
) -> None:
    api_key, is_request = api_of(name)
    cls = (kafka_schemas.request_schema if is_request else kafka_schemas.response_schema)(api_key, version)
    ours = build(cls, values)
    assert _write(cls, ours, response=not is_request, api_key=api_key, version=version).hex() == kafka_hex
    decoded, end = entity_reader(cls)(bytes.fromhex(kafka_hex), 0)
    assert decoded == ours
    assert end == len(kafka_hex) // 2


def test_a_request_frame_of_each_new_version_decodes_through_the_server_codec() -> None:
    for name, version, values, _ in SAMPLES:
        api_key, is_request = api_of(name)
        if not is_request:
            continue
        request = make_request(api_key, version, **values)
        schema = api_schema(api_key, version)
        assert schema is not None and schema.request_type is type(request)
        header, body = decode(schema, encode_request(request, correlation_id=9)[4:])
        assert (header.request_api_key, header.request_api_version, header.correlation_id) == (
            api_key,
            version,
            9,
        )
        assert body == request


def test_v0_stays_kios_and_the_new_versions_are_named_as_kafka_names_them() -> None:
    assert api_schema(88, 0).request_type.__module__.startswith("kio.")  # type: ignore[union-attr]
    assert api_schema(88, 2) is None and api_schema(93, 1) is None
    assert request_schema_path(93, 0) == "protocol.kafka_schemas:StreamsGroupTopologyDescriptionUpdateRequest"
    assert request_schema_path(94, 0) is None
    assert api_name(93, 0) == "StreamsGroupTopologyDescriptionUpdate"
    assert api_name(88, 1) == "StreamsGroupHeartbeat"
    assert api_name(89, 1) == "StreamsGroupDescribe"


def test_the_v1_heartbeat_answer_moves_the_recovery_lag_and_adds_the_description_flag() -> None:
    """v0 carries an int32 lag before TaskOffsetIntervalMs; v1 an int64 after it, and
    TopologyDescriptionRequired after WarmupTasks (Kafka 4.4's StreamsGroupHeartbeatResponse.json)."""
    v1 = [f for f in kafka_schemas.StreamsGroupHeartbeatResponseV1.__dataclass_fields__]
    assert v1.index("acceptable_recovery_lag") == v1.index("task_offset_interval") + 1
    assert v1.index("topology_description_required") == v1.index("warmup_tasks") + 1
