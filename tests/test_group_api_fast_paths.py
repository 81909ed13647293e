"""The hand-encoded heartbeat answers of the group layer are byte-identical to the compiled
response writer (itself pinned to kio's writer): the steady ConsumerGroupHeartbeat body and the
cached classic Heartbeat bodies."""

from __future__ import annotations

import types

from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from gateway.groups.group_apis import GroupApis, steady_cgh_body
from protocol.codec import api_schema
from protocol.entity_builder import build

ERROR_CODES = st.sampled_from([int(c) for c in ErrorCode])
INT32 = st.integers(-(2**31), 2**31 - 1)


def written(rtype: type, values: dict) -> bytes:
    schema = api_schema(rtype.__api_key__, rtype.__version__)
    assert schema is not None
    parts: list[bytes] = []
    schema.write_body(parts.append, build(rtype, values))
    return b"".join(parts)


@given(
    version=st.sampled_from([0, 1]),
    error_code=ERROR_CODES,
    member_id=st.none() | st.text(max_size=300),
    member_epoch=INT32,
    interval=st.integers(0, 2**31 - 1),
)
def test_steady_consumer_group_heartbeat_body(
    version: int, error_code: int, member_id: str | None, member_epoch: int, interval: int
) -> None:
    rtype = load_response_schema(68, version)
    expected = written(
        rtype,
        {
            "throttle_time": 0,
            "error_code": error_code,
            "error_message": None,
            "member_id": member_id,
            "member_epoch": member_epoch,
            "heartbeat_interval": interval,
            "assignment": None,
        },
    )
    assert steady_cgh_body(error_code, member_id, member_epoch, interval) == expected


def test_classic_heartbeat_bodies_are_the_writers_and_cached() -> None:
    service = types.SimpleNamespace(
        config=types.SimpleNamespace(consumer_protocol_enabled=True, consumer_client_assignors_enable=False)
    )
    apis = GroupApis(service)  # type: ignore[arg-type]
    for version in range(5):
        rtype = load_response_schema(12, version)
        for code in (0, 25, 27, 22, 16):
            body = apis._heartbeat_body(rtype, code)
            assert body == written(rtype, {"throttle_time": 0, "error_code": code})
            assert apis._heartbeat_body(rtype, code) is body
