"""Every served request has an error response (Kafka `AbstractRequest.getErrorResponse`): a
top-level error code where the response has one, one entry per requested topic / partition /
group / resource / key otherwise, and it encodes and decodes as the negotiated version."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import tempfile
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field

from gateway.config import build_config
from gateway.error_response import error_response, failure_error
from gateway.groups.service import install_group_layer
from gateway.server import GatewayServer
from protocol.codec import api_schema, decode_response, encode_response
from protocol.kafka_schemas import request_schema

_SAMPLE: dict[str, Any] = {
    "bool": True,
    "bytes": b"x",
    "string": "s",
    "int8": 1,
    "int16": 1,
    "uint16": 1,
    "int32": 7,
    "int64": 7,
    "float64": 1.0,
    "timedelta_i32": datetime.timedelta(milliseconds=5),
    "timedelta_i64": datetime.timedelta(milliseconds=5),
    "uuid": uuid.UUID(int=42),
    "records": None,
    "error_code": ErrorCode.none,
}


def sample(cls: type) -> Any:
    """A request with two items in every array and a value in every field."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            values[f.name] = (sample(kind.type_), sample(kind.type_))
        elif isinstance(kind, EntityField):
            values[f.name] = sample(kind.type_)
        elif isinstance(kind, PrimitiveTupleField):
            t = f.metadata.get("kafka_type")
            values[f.name] = ("a", "b") if t == "string" else (1, 2)
        elif f.metadata.get("kafka_type") == "datetime_i64":
            values[f.name] = datetime.datetime.fromtimestamp(1, tz=datetime.UTC)
        else:
            values[f.name] = _SAMPLE[f.metadata["kafka_type"]]
    return cls(**values)


def served() -> list[tuple[int, int]]:
    """Every (api key, version) `groupshift serve` answers, from its own registry."""
    with tempfile.TemporaryDirectory() as d:
        cfg = build_config({"log.dirs": d, "offsets.topic.num.partitions": "1"})
        server = GatewayServer(cfg, extensions=[install_group_layer])
        try:
            return [
                (k, v)
                for k in server.registry
                for v in range(server.registry[k].min_version, server.registry[k].max_version + 1)
            ]
        finally:
            for hook in server.on_stop:
                hook()
            asyncio.run(server.plane.close())


def error_codes(entity: Any) -> list[int]:
    out = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.name == "error_code":
            out.append(int(value))
        elif isinstance(value, tuple):
            for v in value:
                if dataclasses.is_dataclass(v):
                    out += error_codes(v)
        elif dataclasses.is_dataclass(value):
            out += error_codes(value)
    return out


SERVED = served()


def test_coordinator_apis_fail_with_a_retriable_error_the_others_with_unknown_server_error() -> None:
    assert failure_error(68) == ErrorCode.coordinator_not_available  # ConsumerGroupHeartbeat
    assert failure_error(8) == ErrorCode.coordinator_not_available  # OffsetCommit
    assert failure_error(0) == ErrorCode.unknown_server_error  # Produce
    assert failure_error(19) == ErrorCode.unknown_server_error  # CreateTopics


def test_the_served_apis_are_all_covered() -> None:
    keys = {k for k, _ in SERVED}
    assert {0, 1, 3, 8, 9, 11, 12, 14, 68, 69} <= keys and len(SERVED) > 100


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_every_served_request_has_an_error_response(api_key: int, version: int) -> None:
    schema = api_schema(api_key, version)
    assert schema is not None
    request = sample(request_schema(api_key, version))
    response = error_response(api_key, schema.response_type, request, ErrorCode.unknown_server_error)
    data = encode_response(schema, 99, response)
    correlation_id, decoded = decode_response(schema.response_type, data[4:])
    assert correlation_id == 99
    codes = error_codes(decoded)
    assert codes, "no error code anywhere in the response"
    assert set(codes) == {int(ErrorCode.unknown_server_error)}


def _error(api_key: int, version: int) -> Any:
    schema = api_schema(api_key, version)
    assert schema is not None
    request = sample(request_schema(api_key, version))
    data = encode_response(
        schema, 1, error_response(api_key, schema.response_type, request, ErrorCode.unknown_server_error)
    )
    return decode_response(schema.response_type, data[4:])[1]


def test_entries_mirror_what_was_requested_as_kafka_does() -> None:
    produce = _error(0, 9)
    assert [t.name for t in produce.responses] == ["s", "s"]
    assert [(p.index, p.base_offset) for p in produce.responses[0].partition_responses] == [(7, -1), (7, -1)]
    fetch = _error(1, 16)
    assert [t.topic_id for t in fetch.responses] == [uuid.UUID(int=42)] * 2
    assert fetch.error_code == ErrorCode.unknown_server_error
    assert [p.partition_index for p in fetch.responses[0].partitions] == [7, 7]
    offset_fetch = _error(9, 1)  # partitions named by index only
    assert [p.partition_index for p in offset_fetch.topics[0].partitions] == [1, 2]
    assert offset_fetch.topics[0].partitions[0].committed_offset == -1
    assert [g.group_id for g in _error(9, 9).groups] == ["s", "s"]
    assert [g.group_id for g in _error(15, 5).groups] == ["a", "b"]
    assert [r.group_id for r in _error(42, 2).results] == ["a", "b"]
    assert [g.group_id for g in _error(69, 1).groups] == ["a", "b"]
    assert [c.key for c in _error(10, 6).coordinators] == ["a", "b"]
    assert [r.name for r in _error(20, 5).responses] == ["a", "b"]
    assert [(r.resource_type, r.resource_name) for r in _error(44, 1).responses] == [(1, "s")] * 2
    leave = _error(13, 5)
    assert [m.member_id for m in leave.members] == ["s", "s"]
    join = _error(11, 9)  # the top level names nothing: an unknown member, generation -1
    assert (join.member_id, join.generation_id, join.leader) == ("", -1, "")
    heartbeat = _error(68, 1)
    assert (heartbeat.member_id, heartbeat.member_epoch) == (None, -1)
