"""The hand-written readers of steady heartbeats (`protocol.heartbeat_wire`) against kio, and the
dispatcher's steady path against its kio path.

Readers: over generated ConsumerGroupHeartbeat v0-1 and Heartbeat v0-4 requests encoded by kio's
writer, a reader returns exactly kio's decoded fields for a steady shape and None for anything
else; over arbitrarily damaged frames it returns None or kio's own decode of those bytes, never
something kio would reject or read differently.

Dispatch: two gateways of the same configuration, one serving heartbeats through the steady
entries and one with them removed (every request through kio), fed the same frames in the
same order, answer byte for byte the same, at every served version.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
import tempfile
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema

import gateway.groups.group_apis as group_apis_module
from gateway.config import build_config
from gateway.connection import KafkaConnection
from gateway.dispatch import Dispatcher
from gateway.groups.group_apis import GroupApis
from gateway.groups.service import install_group_layer
from gateway.metrics import MetricsRegistry
from gateway.registry import HandlerRegistry, RequestContext
from gateway.server import GatewayServer
from protocol import heartbeat_wire
from protocol.codec import DecodeFailure, api_schema, decode, decode_response, encode_request
from protocol.entity_builder import build
from tests.fake_transport import FakeTransport

INT32 = st.integers(-(2**31), 2**31 - 1)
SHORT = st.text(max_size=40)  # one length byte when compact: the steady readers' range
ANY_TEXT = st.text(max_size=200)  # sometimes past it: the readers must then decline


def frame_of(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """The request frame after its size prefix, written by kio."""
    return encode_request(request, correlation_id=correlation_id, client_id=client_id)[4:]


def kio_decode(frame: bytes) -> tuple[Any, Any] | None:
    api_key, version = struct.unpack_from(">hh", frame)
    schema = api_schema(api_key, version)
    assert schema is not None
    try:
        return decode(schema, frame)
    except DecodeFailure:
        return None


def compact_len(value: str | None) -> int:
    return 0 if value is None else len(value.encode()) + 1


@st.composite
def cgh_requests(draw: st.DrawFn, steady_only: bool = False) -> Any:
    version = draw(st.sampled_from([0, 1]))
    text = SHORT if steady_only else ANY_TEXT
    topics = st.none() if steady_only else st.none() | st.lists(SHORT, max_size=3)
    owned = (
        st.none()
        if steady_only
        else st.none()
        | st.lists(
            st.fixed_dictionaries({"topic_id": st.uuids(), "partitions": st.lists(INT32, max_size=3)}),
            max_size=2,
        )
    )
    values: dict[str, Any] = {
        "group_id": draw(text),
        "member_id": draw(text),
        "member_epoch": draw(INT32),
        "instance_id": draw(st.none() | text),
        "rack_id": draw(st.none() | text),
        "rebalance_timeout": datetime.timedelta(milliseconds=draw(INT32)),
        "subscribed_topic_names": draw(topics),
        "server_assignor": draw(st.none() | text),
        "topic_partitions": draw(owned),
    }
    if version >= 1:
        values["subscribed_topic_regex"] = draw(st.none() if steady_only else st.none() | SHORT)
    return build(load_request_schema(68, version), values)


@st.composite
def heartbeat_requests(draw: st.DrawFn) -> Any:
    version = draw(st.integers(0, 4))
    values: dict[str, Any] = {
        "group_id": draw(ANY_TEXT),
        "generation_id": draw(INT32),
        "member_id": draw(ANY_TEXT),
    }
    if version >= 3:
        values["group_instance_id"] = draw(st.none() | ANY_TEXT)
    return build(load_request_schema(12, version), values)


def cgh_is_steady(req: Any) -> bool:
    strings = (req.group_id, req.member_id, req.instance_id, req.rack_id, req.server_assignor)
    return (
        req.subscribed_topic_names is None
        and getattr(req, "subscribed_topic_regex", None) is None
        and req.topic_partitions is None
        and all(compact_len(s) < 0x80 for s in strings)
    )


def assert_cgh_fields(steady: Any, header: Any, req: Any) -> None:
    assert steady.version == req.__version__
    assert steady.correlation_id == header.correlation_id
    assert steady.client_id == header.client_id
    assert steady.group_id == req.group_id
    assert steady.member_id == req.member_id
    assert steady.member_epoch == req.member_epoch
    assert steady.instance_id == req.instance_id
    assert steady.rack_id == req.rack_id
    assert steady.rebalance_timeout_ms == req.rebalance_timeout // datetime.timedelta(milliseconds=1)
    assert steady.server_assignor == req.server_assignor


def assert_heartbeat_fields(steady: Any, header: Any, req: Any) -> None:
    assert steady.version == req.__version__
    assert steady.correlation_id == header.correlation_id
    assert steady.client_id == header.client_id
    assert steady.group_id == req.group_id
    assert steady.generation_id == req.generation_id
    assert steady.member_id == req.member_id
    assert steady.group_instance_id == getattr(req, "group_instance_id", None)


@given(req=cgh_requests(), correlation_id=INT32, client_id=st.none() | ANY_TEXT)
def test_consumer_group_heartbeat_reader_agrees_with_kio(
    req: Any, correlation_id: int, client_id: str | None
) -> None:
    frame = frame_of(req, correlation_id, client_id)
    steady = heartbeat_wire.read_consumer_group_heartbeat(frame)
    if not cgh_is_steady(req):
        assert steady is None
        return
    assert steady is not None
    header, decoded = decode(api_schema(68, req.__version__), frame)  # type: ignore[arg-type]
    assert decoded == req
    assert_cgh_fields(steady, header, req)


@given(req=heartbeat_requests(), correlation_id=INT32, client_id=st.none() | ANY_TEXT)
def test_heartbeat_reader_agrees_with_kio(req: Any, correlation_id: int, client_id: str | None) -> None:
    frame = frame_of(req, correlation_id, client_id)
    steady = heartbeat_wire.read_heartbeat(frame)
    flexible = req.__version__ >= 4
    strings = (req.group_id, req.member_id, getattr(req, "group_instance_id", None))
    if flexible and any(compact_len(s) >= 0x80 for s in strings):
        assert steady is None
        return
    assert steady is not None
    header, decoded = decode(api_schema(12, req.__version__), frame)  # type: ignore[arg-type]
    assert_heartbeat_fields(steady, header, decoded)


@st.composite
def damaged(draw: st.DrawFn, frame: bytes) -> bytes:
    """`frame` cut short, extended, or with some bytes replaced."""
    data = bytearray(frame)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cut", "extend", "replace"]))
        if op == "cut" and data:
            del data[draw(st.integers(0, len(data) - 1)) :]
        elif op == "extend":
            data += draw(st.binary(min_size=1, max_size=4))
        elif data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xC3, 0xFF]))
    return bytes(data)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), req=cgh_requests(steady_only=True) | heartbeat_requests(), client_id=st.none() | SHORT)
def test_damaged_frames_read_as_kio_reads_them_or_not_at_all(
    data: st.DataObject, req: Any, client_id: str | None
) -> None:
    frame = data.draw(damaged(frame_of(req, 7, client_id)))
    if len(frame) < 4:
        return
    api_key, version = struct.unpack_from(">hh", frame)
    if api_key == 68:
        steady: Any = heartbeat_wire.read_consumer_group_heartbeat(frame)
    elif api_key == 12:
        steady = heartbeat_wire.read_heartbeat(frame)
    else:
        return
    if steady is None:
        return
    # The reader accepted it: kio must decode the same bytes to the same fields.
    assert api_schema(api_key, version) is not None
    decoded = kio_decode(frame)
    assert decoded is not None, "the steady reader accepted a frame kio rejects"
    header, body = decoded
    if api_key == 68:
        assert cgh_is_steady(body)
        assert_cgh_fields(steady, header, body)
    else:
        assert_heartbeat_fields(steady, header, body)


def test_non_steady_shapes_are_declined() -> None:
    """Each thing a steady reader does not handle, one at a time, on an otherwise steady frame."""
    base = {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 3,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": datetime.timedelta(milliseconds=-1),
        "subscribed_topic_names": None,
        "server_assignor": None,
        "topic_partitions": None,
        "subscribed_topic_regex": None,
    }
    rtype = load_request_schema(68, 1)
    steady = frame_of(build(rtype, base), 1, "c")
    assert heartbeat_wire.read_consumer_group_heartbeat(steady) is not None
    for change in (
        {"subscribed_topic_names": ["t"]},
        {"subscribed_topic_names": []},
        {"subscribed_topic_regex": "t.*"},
        {"topic_partitions": []},
        {"group_id": "g" * 127},  # a two-byte length
    ):
        frame = frame_of(build(rtype, {**base, **change}), 1, "c")
        assert heartbeat_wire.read_consumer_group_heartbeat(frame) is None, change
        assert kio_decode(frame) is not None
    # a tagged field in the body (groupshift's ClientAssignors is one): kio's path reads it
    tagged = steady[:-1] + b"\x01\x00\x00"
    assert heartbeat_wire.read_consumer_group_heartbeat(tagged) is None
    # a tagged field in the header
    header_end = 8 + 2 + 1
    assert steady[header_end - 1 : header_end + 1] == b"c\x00"
    assert (
        heartbeat_wire.read_consumer_group_heartbeat(
            steady[:header_end] + b"\x01\x00\x00" + steady[header_end + 1 :]
        )
        is None
    )
    # another API's frame, or a version not served
    assert heartbeat_wire.read_heartbeat(steady) is None
    assert heartbeat_wire.read_consumer_group_heartbeat(b"\x00\x44\x00\x02" + steady[4:]) is None


def test_response_frames_are_the_codecs() -> None:
    from protocol.codec import encode_response

    body = b"\x00\x00\x00\x00\x00\x19"
    for key, version in ((12, 3), (12, 4), (68, 0), (68, 1)):
        schema = api_schema(key, version)
        assert schema is not None
        parts = [
            struct.pack(">iB", 99, 0) if schema.flexible_response_header else struct.pack(">i", 99),
            body,
        ]
        expected = struct.pack(">i", sum(map(len, parts))) + b"".join(parts)
        assert heartbeat_wire.response_frame(99, schema.flexible_response_header, body) == expected
        assert encode_response(schema, 99, body) == expected
        assert encode_response(schema, 99, bytearray(body)) == expected


# --- the group layer: the steady entries ask the engine what the kio entries ask ------------------


class _Shard:
    """Records what the group layer asks of the engine, and answers a steady heartbeat."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any, Any]] = []

    def consumer_group_heartbeat(self, ereq: Any, ectx: Any, now: int) -> Any:
        self.asked.append(("consumer_group_heartbeat", ereq, ectx))
        response = types.SimpleNamespace(
            compute_assignment_epoch=None,
            assignment_metadata=None,
            assignment=None,
            error_message=None,
            error_code=0,
            member_id=ereq.member_id,
            member_epoch=ereq.member_epoch,
            heartbeat_interval_ms=5000,
        )
        return types.SimpleNamespace(events=(), response=response)

    def heartbeat(self, ereq: Any, ectx: Any, now: int) -> Any:
        self.asked.append(("heartbeat", ereq, ectx))
        return types.SimpleNamespace(events=(), response=types.SimpleNamespace(error_code=27))


def _group_apis(client_assignors: bool) -> tuple[GroupApis, _Shard]:
    shard = _Shard()
    runtime = types.SimpleNamespace(run=lambda op: op(shard, 0).response)
    service = types.SimpleNamespace(
        config=types.SimpleNamespace(
            consumer_protocol_enabled=True, consumer_client_assignors_enable=client_assignors
        ),
        runtime_for=lambda group_id: runtime,
    )
    return GroupApis(service), shard  # type: ignore[arg-type]


def _context(frame: bytes) -> RequestContext:
    return RequestContext(connection_id=1, peer=("10.0.0.1", 1234), listener=("", 0), frame=frame)


# The compiled build (mypyc) checks that `runtime_for` returns a ShardRuntime, which a fake is not
# (and no interpreted class may subclass a compiled one): this test runs in the pure build; the
# two-gateway test below runs in both.
COMPILED = not group_apis_module.__file__.endswith(".py")


@pytest.mark.skipif(COMPILED, reason="a fake ShardRuntime cannot cross into compiled code")
@given(
    req=cgh_requests(steady_only=True) | heartbeat_requests(),
    client_id=st.none() | SHORT,
    client_assignors=st.booleans(),
)
def test_steady_entries_ask_the_engine_what_the_kio_entries_ask(
    req: Any, client_id: str | None, client_assignors: bool
) -> None:
    frame = frame_of(req, 5, client_id)
    key = req.__api_key__
    steady: Any = (
        heartbeat_wire.read_consumer_group_heartbeat(frame)
        if key == 68
        else heartbeat_wire.read_heartbeat(frame)
    )
    if steady is None:  # a long string in a flexible Heartbeat: kio's path only
        return
    header, decoded = decode(api_schema(key, req.__version__), frame)  # type: ignore[arg-type]
    kio_apis, kio_shard = _group_apis(client_assignors)
    fast_apis, fast_shard = _group_apis(client_assignors)
    if key == 68:
        kio_answer = kio_apis.consumer_group_heartbeat(_context(frame), header, decoded)
        fast_answer = fast_apis.steady_consumer_group_heartbeat(_context(frame), steady)
    else:
        kio_answer = kio_apis.heartbeat(_context(frame), header, decoded)
        fast_answer = fast_apis.steady_heartbeat(_context(frame), steady)
    assert len(kio_shard.asked) == 1
    assert fast_shard.asked == kio_shard.asked
    assert type(fast_answer) is bytes
    assert fast_answer == kio_answer


# --- the dispatcher: steady path against kio path, byte for byte ----------------------------------


class _Side:
    """One gateway's registry behind a dispatcher and a connection over a fake transport."""

    def __init__(self, registry: HandlerRegistry) -> None:
        self.dispatcher = Dispatcher(registry, MetricsRegistry(), unsupported_api_versions=lambda c: b"")
        self.transport = FakeTransport()
        self.conn = KafkaConnection(
            connection_id=1, on_frame=self.dispatcher.on_frame, max_frame_bytes=1 << 20
        )
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]
        self.classic_member = ""
        self.classic_generation = 0

    async def ask(self, frame: bytes) -> bytes:
        before = len(self.transport.frames())
        self.conn.data_received(struct.pack(">i", len(frame)) + frame)
        for _ in range(5000):
            frames = self.transport.frames()
            if len(frames) > before:
                assert len(frames) == before + 1
                return frames[-1]
            await asyncio.sleep(0.001)
        raise AssertionError("no answer")

    async def join_classic(self) -> None:
        """One stable member of the classic group `CLASSIC` (JoinGroup v3, SyncGroup v3): its
        member id is the server's (random), so each side keeps its own."""
        join = {
            "group_id": CLASSIC,
            "session_timeout": datetime.timedelta(milliseconds=30000),
            "rebalance_timeout": datetime.timedelta(milliseconds=30000),
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        }
        answer = await self.ask(frame_of(build(load_request_schema(11, 3), join), 900, "client"))
        _, joined = decode_response(load_response_schema(11, 3), answer[4:])
        assert joined.error_code == 0
        self.classic_member, self.classic_generation = joined.member_id, joined.generation_id
        sync = {
            "group_id": CLASSIC,
            "generation_id": self.classic_generation,
            "member_id": self.classic_member,
            "assignments": [{"member_id": self.classic_member, "assignment": b""}],
        }
        answer = await self.ask(frame_of(build(load_request_schema(14, 3), sync), 901, "client"))
        assert decode_response(load_response_schema(14, 3), answer[4:])[1].error_code == 0

    def heartbeat(self, spec: tuple[int, dict[str, Any], int, str | None]) -> bytes:
        """A Heartbeat frame of `heartbeat_specs`, naming this side's classic member."""
        version, values, correlation_id, client = spec
        values = dict(values)
        if values["member_id"] == CLASSIC_MEMBER:
            values["member_id"] = self.classic_member
        values["generation_id"] += self.classic_generation
        return frame_of(build(load_request_schema(12, version), values), correlation_id, client)


def _without_steady(registry: HandlerRegistry) -> HandlerRegistry:
    plain = HandlerRegistry()
    for key in registry:
        spec = registry[key]
        plain.register(key, spec.min_version, spec.max_version, spec.fn, enabled=spec.enabled)
    return plain


@contextmanager
def _gateway(directory: str) -> Iterator[GatewayServer]:
    cfg = build_config(
        {
            "log.dirs": directory,
            "offsets.topic.num.partitions": "2",
            "coordinator.fsync.policy": "none",
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    server = GatewayServer(cfg, extensions=[install_group_layer])
    try:
        yield server
    finally:
        for hook in server.on_stop:
            hook()


GROUPS = ("g-a", "g-b")
MEMBERS = ("m-1", "m-2")


def _join(key: int, version: int, group: str, member: str, correlation_id: int) -> bytes:
    if key == 68:
        values: dict[str, Any] = {
            "group_id": group,
            "member_id": member,
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": datetime.timedelta(milliseconds=30000),
            "subscribed_topic_names": ["no-such-topic"],
            "server_assignor": None,
            "topic_partitions": [],
        }
        if version >= 1:
            values["subscribed_topic_regex"] = None
        return frame_of(build(load_request_schema(68, version), values), correlation_id, "client")
    return b""


@st.composite
def steady_cgh_frames(draw: st.DrawFn) -> bytes:
    """Mostly heartbeats of the joined members at epochs they may hold (answered without an
    error, or with a new assignment after an assignor change), some of strangers."""
    version = draw(st.sampled_from([0, 1]))
    values: dict[str, Any] = {
        "group_id": draw(st.sampled_from([*GROUPS, *GROUPS, "g-unknown"])),
        "member_id": draw(st.sampled_from([*MEMBERS, *MEMBERS, "m-unknown", ""])),
        "member_epoch": draw(st.sampled_from([1, 2, 3, 1, 2, 3, 0, 17]) | st.integers(1, 2**31 - 1)),
        "instance_id": None,
        "rack_id": draw(st.sampled_from([None, None, None, "rack-a"])),
        "rebalance_timeout": datetime.timedelta(milliseconds=draw(st.sampled_from([-1, 30000]))),
        "subscribed_topic_names": None,
        "server_assignor": draw(st.sampled_from([None, None, None, None, "uniform", "range", "no-such"])),
        "topic_partitions": None,
    }
    if version >= 1:
        values["subscribed_topic_regex"] = None
    client = draw(st.sampled_from(["client", "other", None, ""]))
    return frame_of(build(load_request_schema(68, version), values), draw(INT32), client)


CLASSIC = "g-classic"
CLASSIC_MEMBER = "<the classic member>"


@st.composite
def heartbeat_specs(draw: st.DrawFn) -> tuple[int, dict[str, Any], int, str | None]:
    """A Heartbeat, mostly of the classic member at its generation (a generation offset here),
    some of strangers, of a consumer group and of a group that does not exist."""
    version = draw(st.integers(0, 4))
    values: dict[str, Any] = {
        "group_id": draw(st.sampled_from([CLASSIC, CLASSIC, CLASSIC, *GROUPS, "g-unknown", ""])),
        "generation_id": draw(st.sampled_from([0, 0, 0, 1, -1])),
        "member_id": draw(st.sampled_from([CLASSIC_MEMBER, CLASSIC_MEMBER, "m-unknown", ""])),
    }
    if version >= 3:
        values["group_instance_id"] = draw(st.sampled_from([None, None, "i-1"]))
    client = draw(st.sampled_from(["client", None, ""]))
    return version, values, draw(INT32), client


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests=st.lists(steady_cgh_frames() | heartbeat_specs(), min_size=1, max_size=25))
def test_the_steady_path_answers_byte_for_byte_as_the_kio_path(requests: list[Any]) -> None:
    async def scenario() -> None:
        with (
            tempfile.TemporaryDirectory() as a,
            tempfile.TemporaryDirectory() as b,
            _gateway(a) as fast_server,
            _gateway(b) as kio_server,
        ):
            loop = asyncio.get_running_loop()
            for server in (fast_server, kio_server):
                for hook in server.on_start:
                    hook(loop)
            assert fast_server.registry[68].steady is not None
            assert fast_server.registry[12].steady is not None
            fast = _Side(fast_server.registry)
            slow = _Side(_without_steady(kio_server.registry))
            # members joined through kio on both, so the steady heartbeats find a group
            n = 0
            for group in GROUPS:
                for member in MEMBERS:
                    n += 1
                    join = _join(68, 1, group, member, n)
                    assert await fast.ask(join) == await slow.ask(join)
            await fast.join_classic()
            await slow.join_classic()
            for request in requests:
                if isinstance(request, bytes):
                    fast_frame = slow_frame = request
                else:
                    fast_frame, slow_frame = fast.heartbeat(request), slow.heartbeat(request)
                assert await fast.ask(fast_frame) == await slow.ask(slow_frame), request
            await fast_server.plane.close()
            await kio_server.plane.close()

    asyncio.run(scenario())


def test_steady_heartbeats_keep_a_member_and_its_session_expires_when_they_stop() -> None:
    """The runtime leaves its event-loop timer armed while steady heartbeats only push session
    timers later (`Timers.none_set_before`): the timer then fires early and re-arms, and a member
    that stops heartbeating is still removed one session timeout after its last heartbeat."""

    async def scenario() -> None:
        with tempfile.TemporaryDirectory() as d:
            cfg = build_config(
                {
                    "log.dirs": d,
                    "offsets.topic.num.partitions": "1",
                    "coordinator.fsync.policy": "none",
                    "group.consumer.session.timeout.ms": "400",
                    "group.consumer.min.session.timeout.ms": "400",
                    "group.consumer.heartbeat.interval.ms": "50",
                    "group.consumer.min.heartbeat.interval.ms": "50",
                }
            )
            server = GatewayServer(cfg, extensions=[install_group_layer])
            try:
                loop = asyncio.get_running_loop()
                for hook in server.on_start:
                    hook(loop)
                side = _Side(server.registry)
                rtype = load_response_schema(68, 1)
                epochs = {}
                for member in MEMBERS:
                    answer = await side.ask(_join(68, 1, "g-a", member, 1))
                    epochs[member] = decode_response(rtype, answer[4:])[1].member_epoch

                def steady(member: str) -> bytes:
                    values: dict[str, Any] = {
                        "group_id": "g-a",
                        "member_id": member,
                        "member_epoch": epochs[member],
                        "instance_id": None,
                        "rack_id": None,
                        "rebalance_timeout": datetime.timedelta(milliseconds=-1),
                        "subscribed_topic_names": None,
                        "subscribed_topic_regex": None,
                        "server_assignor": None,
                        "topic_partitions": None,
                    }
                    return frame_of(build(load_request_schema(68, 1), values), 2, "client")

                async def beat(member: str) -> int:
                    frame = steady(member)
                    assert heartbeat_wire.read_consumer_group_heartbeat(frame) is not None
                    _, answer = decode_response(rtype, (await side.ask(frame))[4:])
                    if answer.error_code == 0:
                        epochs[member] = answer.member_epoch
                    return int(answer.error_code)

                # both heartbeat for 1.2 s (three session timeouts): neither expires
                started = loop.time()
                while loop.time() - started < 1.2:
                    for member in MEMBERS:
                        assert await beat(member) == 0
                    await asyncio.sleep(0.05)
                # m-1 stops; m-2 goes on: m-1 is gone a session timeout later, not m-2
                stopped = loop.time()
                while loop.time() - stopped < 0.8:
                    assert await beat("m-2") == 0
                    await asyncio.sleep(0.05)
                assert await beat("m-1") == 25  # UNKNOWN_MEMBER_ID: its session expired
            finally:
                for hook in server.on_stop:
                    hook()
                await server.plane.close()

    asyncio.run(scenario())


def test_a_failing_steady_entry_is_answered_as_a_failing_handler_is() -> None:
    """A bug in a steady entry gets the request's error response (COORDINATOR_NOT_AVAILABLE for
    the group APIs, as Kafka's `KafkaApis.handle` answers), and the connection stays open."""
    registry = HandlerRegistry()

    def fail(ctx: RequestContext, req: Any) -> Any:
        raise RuntimeError("a bug")

    registry.register(12, 0, 4, lambda ctx, header, req: b"\x00\x00\x00\x00\x00\x00", steady=fail)
    side = _Side(registry)
    for version in range(5):
        values: dict[str, Any] = {"group_id": "g", "generation_id": 1, "member_id": "m"}
        if version >= 3:
            values["group_instance_id"] = None
        frame = frame_of(build(load_request_schema(12, version), values), 40 + version, "c")
        assert heartbeat_wire.read_heartbeat(frame) is not None
        answer = asyncio.run(side.ask(frame))
        correlation_id, response = decode_response(load_response_schema(12, version), answer[4:])
        assert correlation_id == 40 + version
        assert response.error_code == 15  # COORDINATOR_NOT_AVAILABLE
    assert not side.transport.closed
