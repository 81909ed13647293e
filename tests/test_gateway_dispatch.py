"""Handler registry and dispatch: what is advertised, what closes a connection (as Kafka closes
it), and how sync, future-returning and async handlers are answered in order."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from gateway.api_versions import ApiVersionsApi
from gateway.connection import KafkaConnection
from gateway.dispatch import Dispatcher
from gateway.metrics import MetricsRegistry
from gateway.registry import NO_RESPONSE, CloseConnection, HandlerRegistry, HandlerSpec
from protocol.codec import decode_response, encode_request, response_type_of
from protocol.entity_builder import build
from tests.fake_transport import FakeTransport


def heartbeat_response(request: Any) -> Any:
    return build(response_type_of(request), {"throttle_time": 0, "error_code": 0})


class Gateway:
    """A registry + dispatcher + one connection over a fake transport."""

    def __init__(self) -> None:
        self.registry = HandlerRegistry()
        self.metrics = MetricsRegistry()
        self.api_versions = ApiVersionsApi(self.registry)
        self.api_versions.register()
        self.dispatcher = Dispatcher(
            self.registry,
            self.metrics,
            unsupported_api_versions=self.api_versions.unsupported_version_response,
        )
        self.transport = FakeTransport()
        self.conn = KafkaConnection(
            connection_id=1, on_frame=self.dispatcher.on_frame, max_frame_bytes=1 << 20
        )
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]

    def send(self, request: Any, correlation_id: int = 1) -> None:
        self.conn.data_received(encode_request(request, correlation_id=correlation_id))

    def send_raw(self, payload: bytes) -> None:
        self.conn.data_received(struct.pack(">i", len(payload)) + payload)

    def answers(self, response_type: type) -> list[tuple[int, Any]]:
        return [decode_response(response_type, w[4:]) for w in self.transport.frames()]


def heartbeat(version: int = 4) -> Any:
    return build(
        load_request_schema(12, version),
        {
            "group_id": "g",
            "generation_id": 1,
            "member_id": "m",
            "group_instance_id": None,
        },
    )


def test_api_versions_lists_exactly_the_registered_and_enabled_apis() -> None:
    gw = Gateway()
    switch = {"on": False}
    gw.registry.register(12, 0, 4, lambda ctx, h, r: heartbeat_response(r))
    gw.registry.register(68, 0, 1, lambda ctx, h, r: None, enabled=lambda: switch["on"])
    request = build(
        load_request_schema(18, 3), {"client_software_name": "unit", "client_software_version": "1.0"}
    )
    gw.send(request, correlation_id=1)
    switch["on"] = True
    gw.send(request, correlation_id=2)
    (c1, off), (c2, on) = gw.answers(response_type_of(request))
    assert (c1, c2) == (1, 2)
    assert [(k.api_key, k.min_version, k.max_version) for k in off.api_keys] == [(12, 0, 4), (18, 0, 4)]
    assert [k.api_key for k in on.api_keys] == [12, 18, 68]
    assert gw.conn.ctx.client_software_name == "unit"


def test_api_versions_above_the_maximum_gets_a_v0_unsupported_version_answer() -> None:
    gw = Gateway()
    gw.send_raw(struct.pack(">hhih", 18, 7, 99, 0) + b"\x00whatever")
    ((correlation_id, body),) = gw.answers(response_type_of(build(load_request_schema(18, 0), {})))
    assert correlation_id == 99 and body.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
    assert not gw.transport.closed


def test_invalid_client_software_names_get_invalid_request() -> None:
    gw = Gateway()
    request = build(
        load_request_schema(18, 3), {"client_software_name": "bad name!", "client_software_version": "1"}
    )
    gw.send(request)
    ((_, body),) = gw.answers(response_type_of(request))
    assert body.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">hhih", 999, 0, 1, 0),  # unknown api key
        struct.pack(">hhih", 12, 0, 1, 0) + b"\x00",  # registered key, version not served
        struct.pack(">hhih", 32, 1, 1, 0),  # known to Kafka, not implemented here
        struct.pack(">hhi", 18, 0, 1),  # header cut before the client id
        b"\x00\x12",  # not even a header
    ],
)
def test_requests_kafka_would_not_parse_close_the_connection(payload: bytes) -> None:
    gw = Gateway()
    gw.registry.register(12, 3, 4, lambda ctx, h, r: heartbeat_response(r))
    gw.send_raw(payload)
    assert gw.transport.closed and gw.transport.written == []
    assert 'groupshift_requests_rejected_total{reason="' in gw.metrics.render()


def test_sync_future_and_async_handlers_are_answered_in_request_order() -> None:
    async def scenario() -> None:
        gw = Gateway()
        loop = asyncio.get_running_loop()
        release = asyncio.Event()
        pending: asyncio.Future[Any] = loop.create_future()

        async def slow(ctx: Any, header: Any, request: Any) -> Any:
            await release.wait()
            return heartbeat_response(request)

        gw.registry.register(12, 4, 4, slow)
        gw.registry.register(13, 0, 5, lambda ctx, h, r: pending)
        gw.send(heartbeat(), correlation_id=1)  # async, waits for `release`
        leave = build(load_request_schema(13, 5), {"group_id": "g", "members": []})
        gw.send(leave, correlation_id=2)  # returns a future
        api_versions = build(load_request_schema(18, 0), {})
        gw.send(api_versions, correlation_id=3)  # answered inline
        await asyncio.sleep(0)
        assert gw.transport.written == []
        pending.set_result(
            build(response_type_of(leave), {"throttle_time": 0, "error_code": 0, "members": []})
        )
        await asyncio.sleep(0)
        assert gw.transport.written == []
        release.set()
        for _ in range(5):
            await asyncio.sleep(0)
        ids = [struct.unpack_from(">i", w, 4)[0] for w in gw.transport.frames()]
        assert ids == [1, 2, 3]

    asyncio.run(scenario())


def test_no_response_sends_nothing_and_close_connection_closes() -> None:
    gw = Gateway()
    calls = []

    def handler(ctx: Any, header: Any, request: Any) -> Any:
        calls.append(header.correlation_id)
        if header.correlation_id == 2:
            raise CloseConnection("test.close")
        return NO_RESPONSE

    gw.registry.register(12, 0, 4, handler)
    gw.send(heartbeat(), correlation_id=1)
    assert gw.transport.written == [] and not gw.transport.closed
    gw.send(heartbeat(), correlation_id=2)
    assert calls == [1, 2] and gw.transport.closed


def test_a_handler_that_fails_answers_an_error_and_keeps_the_connection() -> None:
    """Kafka `KafkaApis.handle`: a handler bug answers the request's error response (for a
    coordinator API such as Heartbeat the retriable COORDINATOR_NOT_AVAILABLE)."""
    gw = Gateway()
    calls = []

    def flaky(ctx: Any, header: Any, request: Any) -> Any:
        calls.append(header.correlation_id)
        if len(calls) == 1:
            raise KeyError("a bug")
        return heartbeat_response(request)

    gw.registry.register(12, 0, 4, flaky)
    gw.send(heartbeat(), correlation_id=1)
    gw.send(heartbeat(), correlation_id=2)
    assert not gw.transport.closed
    answers = gw.answers(response_type_of(heartbeat()))
    assert [(cid, r.error_code) for cid, r in answers] == [
        (1, ErrorCode.coordinator_not_available),
        (2, ErrorCode.none),
    ]
    assert 'groupshift_requests_failed_total{api="Heartbeat"} 1' in gw.metrics.render()


def test_a_failing_async_handler_and_a_bad_response_are_answered_too() -> None:
    gw = Gateway()

    async def failing(ctx: Any, header: Any, request: Any) -> Any:
        await asyncio.sleep(0)
        raise RuntimeError("later")

    async def scenario() -> None:
        gw.registry.register(12, 0, 4, failing)
        gw.send(heartbeat(), correlation_id=1)
        for _ in range(5):
            await asyncio.sleep(0)
        gw.registry.register(12, 0, 4, lambda ctx, h, r: None, replace=True)  # None: a bug
        gw.send(heartbeat(), correlation_id=2)
        for _ in range(5):
            await asyncio.sleep(0)

    asyncio.run(scenario())
    assert not gw.transport.closed
    answers = gw.answers(response_type_of(heartbeat()))
    assert [(cid, r.error_code) for cid, r in answers] == [
        (1, ErrorCode.coordinator_not_available),
        (2, ErrorCode.coordinator_not_available),
    ]


def test_registry_refuses_telemetry_unknown_versions_and_silent_replacement() -> None:
    registry = HandlerRegistry()
    with pytest.raises(ValueError, match="telemetry"):
        registry.register(71, 0, 0, lambda ctx, h, r: None)
    with pytest.raises(ValueError, match="no request schema"):
        registry.register(12, 0, 99, lambda ctx, h, r: None)
    registry.register(12, 0, 4, lambda ctx, h, r: None)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(12, 0, 4, lambda ctx, h, r: None)
    assert registry[12].name == "Heartbeat"

    async def group_layer_heartbeat(ctx: Any, header: Any, request: Any) -> Any:
        return heartbeat_response(request)

    registry[12] = HandlerSpec(3, 4, group_layer_heartbeat)  # an explicit takeover
    assert (registry[12].min_version, registry[12].is_coroutine) == (3, True)
    assert registry.advertised() == [(12, 3, 4)]
