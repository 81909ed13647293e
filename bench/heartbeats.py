"""Steady group heartbeats over real TCP: ConsumerGroupHeartbeat (KIP-848), classic Heartbeat and
StreamsGroupHeartbeat (KIP-1071).

Used by `bench.gateway` (`python -m bench.gateway --heartbeats`). Setup is untimed and happens
over the wire like real clients would do it:

* CGH: `members` consumer-protocol members join `groups` groups (epoch 0, subscribed to a topic
  that does not exist yet, so each join only bumps the epoch), then the topic is created with one
  partition per member of a group and every member heartbeats once with its epoch, which makes
  the group compute one target assignment and hands every member its partition at the group
  epoch. A second round checks that everybody is stable.
* SGH (streams groups): `members` members join `groups` groups with StreamsGroupHeartbeat v0
  (epoch 0, a client-made member id, one process per member, a stateless topology of one
  subtopology reading a source topic that does not exist yet, so each join only bumps the epoch
  and the group answers MISSING_SOURCE_TOPICS), then the topic is created with one partition per
  member of a group and every member heartbeats with its epoch until each has its one active
  task at the group epoch and a round changes nothing. The steady heartbeat is epoch = current,
  every other field null (unchanged), as a Kafka Streams client sends between assignments.
* Classic: each group's members get their member ids (JoinGroup v9 answered MEMBER_ID_REQUIRED),
  JoinGroup again (completed together after `group.initial.rebalance.delay.ms`), and SyncGroup
  (the leader sends one partition per member).

The timed part is the load generator: `connections` TCP connections, each owning a slice of the
members and keeping `depth` pre-encoded heartbeats in flight (pipelined, written in batches),
cycling through its members: steady heartbeats with epoch/generation = current and null fields.
Every answer's error code is checked (any non-zero fails the run); latency is from write to the
answer's arrival. The gateway should run on one core and this process on the other.
"""

from __future__ import annotations

import asyncio
import functools
import os
import struct
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from protocol.codec import decode_response, encode_request, response_type_of
from protocol.entity_builder import build

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]

from kio.index import load_request_schema

CGH_TOPIC, CLASSIC_TOPIC = "bench-heartbeat-cgh", "bench-heartbeat-classic"
STREAMS_TOPIC = "bench-heartbeat-streams"
# The kinds `setup` and `run_load` take, by the name of the heartbeat request.
KINDS = ("ConsumerGroupHeartbeat", "Heartbeat", "StreamsGroupHeartbeat")
MEMBER_ID_REQUIRED = 79
CLIENT_ID = "bench"
_SIZE = struct.Struct(">i")
_ERROR_AT = 9  # size-less frame: correlation id (4) + header tags (1) + throttle time (4)

# Gateway settings for the heartbeat runs: no fsync, sessions far longer than the run.
SETTINGS = (
    "coordinator.fsync.policy=none",
    "group.consumer.max.session.timeout.ms=3600000",
    "group.consumer.session.timeout.ms=1800000",
    "group.consumer.heartbeat.interval.ms=15000",
    "group.streams.session.timeout.ms=1800000",
    "group.streams.heartbeat.interval.ms=15000",
    # Each streams target in the heartbeat that needs it (the setup, not the steady load, waits
    # for targets), as the Kafka reference computes them (bench.kafka_reference).
    "group.streams.assignment.interval.ms=0",
    "group.initial.rebalance.delay.ms=5000",
    "group.max.session.timeout.ms=3600000",
)


def request(api_key: int, version: int, **values: Any) -> Any:
    return build(load_request_schema(api_key, version), values)


# -- connecting: plain TCP here; bench.secure_listeners passes one that does TLS and SASL first --

_P = TypeVar("_P", bound=asyncio.BaseProtocol)


class Connector(Protocol):
    """Opens a connection to 127.0.0.1:`port` ready for Kafka requests and hands it to a new
    `factory()` protocol: every connection of the setup and of the load goes through one, so a
    secured listener (TLS handshake, SASL login) is measured with the same code as PLAINTEXT."""

    def __call__(self, port: int, factory: Callable[[], _P]) -> Awaitable[_P]: ...


async def connect_plain(port: int, factory: Callable[[], _P]) -> _P:
    _, proto = await asyncio.get_running_loop().create_connection(factory, "127.0.0.1", port)
    return proto


# -- a small pipelined client for the untimed setup ----------------------------------------


class _Client(asyncio.Protocol):
    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiting: deque[tuple[asyncio.Future[Any], type]] = deque()
        self.transport: asyncio.Transport | None = None
        self.correlation = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def call(self, req: Any) -> asyncio.Future[Any]:
        assert self.transport is not None
        self.correlation += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting.append((fut, response_type_of(req)))
        self.transport.write(encode_request(req, correlation_id=self.correlation, client_id=CLIENT_ID))
        return fut

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            (size,) = _SIZE.unpack_from(self.buf)
            if len(self.buf) < 4 + size:
                return
            frame = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            fut, rtype = self.waiting.popleft()
            if not fut.done():
                fut.set_result(decode_response(rtype, frame)[1])

    def connection_lost(self, exc: Exception | None) -> None:
        for fut, _ in self.waiting:
            if not fut.done():
                fut.set_exception(ConnectionError(f"gateway closed the connection: {exc}"))


async def _clients(port: int, n: int, connect: Connector = connect_plain) -> list[_Client]:
    return [await connect(port, _Client) for _ in range(n)]


async def _call_all(clients: list[_Client], reqs: Iterable[Any], window: int = 2000) -> list[Any]:
    """Send `reqs` round-robin over `clients`, at most `window` outstanding; answers in order."""
    pending: list[asyncio.Future[Any]] = []
    answers: list[Any] = []
    for i, req in enumerate(reqs):
        pending.append(clients[i % len(clients)].call(req))
        if len(pending) >= window:
            answers += await asyncio.gather(*pending)
            pending = []
    answers += await asyncio.gather(*pending)
    return answers


def _check(answers: list[Any], what: str, ok: Callable[[Any], bool] = lambda a: a.error_code == 0) -> None:
    bad = [a for a in answers if not ok(a)]
    if bad:
        raise RuntimeError(f"{what}: {len(bad)} of {len(answers)} failed, e.g. {bad[0]}")


def _member_ids(groups: int, members: int) -> list[tuple[str, str]]:
    per = members // groups
    return [
        (f"bench-hb-{g}", f"member-{g:02d}-{i:05d}-xxxxxxxx"[:22]) for g in range(groups) for i in range(per)
    ]


async def _create_topic(port: int, topic: str, partitions: int, connect: Connector = connect_plain) -> None:
    [c] = await _clients(port, 1, connect)
    created = await c.call(
        request(
            19,
            5,
            topics=[
                {
                    "name": topic,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            timeout=60000,
            validate_only=False,
        )
    )
    assert created.topics[0].error_code == 0, created
    assert c.transport is not None
    c.transport.close()


def _cgh(group: str, member: str, epoch: int, **fields: Any) -> Any:
    values = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": -1,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": None,
    }
    return request(68, 1, **{**values, **fields})


async def _join_consumer_members(clients: list[_Client], ids: list[tuple[str, str]]) -> list[int]:
    """Each (group, member) joins with its first ConsumerGroupHeartbeat (epoch 0, subscribed to
    CGH_TOPIC); their member epochs, from which the steady heartbeats go on."""
    joins = await _call_all(
        clients,
        (
            _cgh(g, m, 0, rebalance_timeout=300000, subscribed_topic_names=[CGH_TOPIC], topic_partitions=[])
            for g, m in ids
        ),
        window=500,
    )
    _check(joins, "CGH joins")
    return [a.member_epoch for a in joins]


async def settle_cgh_members(
    clients: list[_Client], ids: list[tuple[str, str]], epochs: list[int], rounds: int, what: str
) -> list[int]:
    """Heartbeat every member until each has received an assignment and then a round with none
    (all reconciled); the members' epochs. RuntimeError after `rounds` rounds."""
    assigned = [False] * len(ids)
    for _ in range(rounds):
        answers = await _call_all(clients, (_cgh(g, m, e) for (g, m), e in zip(ids, epochs, strict=True)))
        _check(answers, what)
        epochs = [a.member_epoch for a in answers]
        if all(assigned) and all(a.assignment is None for a in answers):
            return epochs
        assigned = [done or a.assignment is not None for done, a in zip(assigned, answers, strict=True)]
        if not all(assigned):
            await asyncio.sleep(0.25)
    raise RuntimeError(f"CGH members never settled on their assignments ({what})")


async def setup_consumer_groups(
    port: int, groups: int, members: int, connect: Connector = connect_plain
) -> list[Any]:
    """Join the members; the steady ConsumerGroupHeartbeat requests, one per member."""
    clients = await _clients(port, 16, connect)
    ids = _member_ids(groups, members)
    epochs = await _join_consumer_members(clients, ids)
    await _create_topic(port, CGH_TOPIC, members // groups, connect)
    # Heartbeat everyone until each member has had its assignment and a whole round changes
    # nothing (groupshift: two rounds; Kafka sees the new topic asynchronously, so its first
    # rounds may answer without an assignment).
    epochs = await settle_cgh_members(clients, ids, epochs, 120, "CGH heartbeats after the topic was created")
    steady = [_cgh(g, m, e) for (g, m), e in zip(ids, epochs, strict=True)]
    for c in clients:
        assert c.transport is not None
        c.transport.close()
    return steady


# -- streams groups (KIP-1071) ------------------------------------------------------------------


def streams_group_ids(groups: int) -> list[str]:
    return [f"bench-streams-{g}" for g in range(groups)]


def _streams_member_ids(groups: int, members: int) -> list[tuple[str, str]]:
    """(group, member id); a Streams client makes its member id, a UUID."""
    per = members // groups
    return [
        (group, str(uuid.UUID(int=(g << 32) + i)))
        for g, group in enumerate(streams_group_ids(groups))
        for i in range(per)
    ]


STREAMS_TOPOLOGY = {
    "epoch": 0,
    "subtopologies": [
        {
            "subtopology_id": "0",
            "source_topics": [STREAMS_TOPIC],
            "source_topic_regex": [],
            "state_changelog_topics": [],
            "repartition_sink_topics": [],
            "repartition_source_topics": [],
            "copartition_groups": [],
        }
    ],
}


def _sgh(group: str, member: str, epoch: int, endpoint_epoch: int = 0, **fields: Any) -> Any:
    """StreamsGroupHeartbeat v0: `fields` set, every other field null (unchanged)."""
    values = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "endpoint_information_epoch": endpoint_epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": -1,
        "topology": None,
        "active_tasks": None,
        "standby_tasks": None,
        "warmup_tasks": None,
        "process_id": None,
        "user_endpoint": None,
        "client_tags": None,
        "task_offsets": None,
        "task_end_offsets": None,
        "shutdown_application": False,
    }
    return request(88, 0, **{**values, **fields})


async def setup_streams_groups(
    port: int, groups: int, members: int, connect: Connector = connect_plain
) -> list[Any]:
    """Join the streams members, then create their source topic; the steady
    StreamsGroupHeartbeat requests, one per member."""
    clients = await _clients(port, 16, connect)
    ids = _streams_member_ids(groups, members)
    joins = await _call_all(
        clients,
        (
            _sgh(
                g,
                m,
                0,
                rebalance_timeout=300000,
                topology=STREAMS_TOPOLOGY,
                process_id=str(uuid.uuid5(uuid.NAMESPACE_OID, m)),
                client_tags=[],
                active_tasks=[],
                standby_tasks=[],
                warmup_tasks=[],
            )
            for g, m in ids
        ),
        window=500,
    )
    _check(joins, "SGH joins")
    epochs = [a.member_epoch for a in joins]
    endpoint_epochs = [a.endpoint_information_epoch for a in joins]
    await _create_topic(port, STREAMS_TOPIC, members // groups, connect)
    # As for CGH: until every member has had its task and a whole round changes nothing (Kafka
    # sees the new topic asynchronously, so its first rounds may assign nothing yet).
    assigned = [False] * len(ids)
    for _ in range(120):
        answers = await _call_all(
            clients, (_sgh(g, m, e, x) for (g, m), e, x in zip(ids, epochs, endpoint_epochs, strict=True))
        )
        _check(answers, "SGH heartbeats after the source topic was created")
        epochs = [a.member_epoch for a in answers]
        endpoint_epochs = [a.endpoint_information_epoch for a in answers]
        if all(assigned) and all(a.active_tasks is None for a in answers):
            break
        assigned = [done or bool(a.active_tasks) for done, a in zip(assigned, answers, strict=True)]
        if not all(assigned):
            await asyncio.sleep(0.25)
    else:
        raise RuntimeError("SGH members never settled on their tasks")
    steady = [_sgh(g, m, e, x) for (g, m), e, x in zip(ids, epochs, endpoint_epochs, strict=True)]
    for c in clients:
        assert c.transport is not None
        c.transport.close()
    return steady


def _subscription() -> bytes:
    name = CLASSIC_TOPIC.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


def _assignment(partition: int) -> bytes:
    name = CLASSIC_TOPIC.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">iii", 1, partition, -1)


def _join(group: str, member_id: str) -> Any:
    return request(
        11,
        9,
        group_id=group,
        session_timeout=1800000,
        rebalance_timeout=60000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": _subscription()}],
        reason=None,
    )


async def setup_classic_groups(
    port: int,
    groups: int,
    members: int,
    join_connections: int | None = None,
    connect: Connector = connect_plain,
) -> list[Any]:
    """Join and sync the members; the steady Heartbeat v4 requests, one per member.
    `join_connections`: how many connections carry the JoinGroups (Kafka reads no further
    request on a connection whose JoinGroup is parked: give it one per member)."""
    per = members // groups
    await _create_topic(port, CLASSIC_TOPIC, per, connect)
    # Parked JoinGroups count against the gateway's per-connection in-flight limit (32), past
    # which it stops reading that connection: spread them, 16 at most per connection, so that
    # none waits unread.
    clients = await _clients(port, join_connections or max(16, -(-members // 16)), connect)
    # Interleaved over the groups, so that every group's members arrive well within the initial
    # rebalance delay (5 s, extended while members keep coming): a group whose first generation
    # started without some members would wait a rebalance timeout for rejoins that never come.
    names = [f"bench-classic-{i % groups}" for i in range(per * groups)]
    first = await _call_all(clients, (_join(g, "") for g in names))
    _check(first, "JoinGroup for member ids", lambda a: a.error_code == MEMBER_ID_REQUIRED)
    ids = [(g, a.member_id) for g, a in zip(names, first, strict=True)]
    joined = await _call_all(clients, (_join(g, m) for g, m in ids), window=len(ids))
    _check(joined, "JoinGroup", lambda a: a.error_code == 0 and a.generation_id == 1)
    leaders = [a for (_, m), a in zip(ids, joined, strict=True) if a.leader == m]
    if len(leaders) != groups or any(len(a.members) != per for a in leaders):
        raise RuntimeError("a classic group started its first generation without all its members")
    syncs = []
    for (g, m), a in zip(ids, joined, strict=True):
        assignments = []
        if a.leader == m:
            assignments = [
                {"member_id": jm.member_id, "assignment": _assignment(k)} for k, jm in enumerate(a.members)
            ]
        syncs.append(
            request(
                14,
                5,
                group_id=g,
                generation_id=a.generation_id,
                member_id=m,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=assignments,
            )
        )
    synced = await _call_all(clients, syncs, window=len(syncs))
    _check(synced, "SyncGroup", lambda a: a.error_code == 0 and len(a.assignment) > 0)
    steady = [
        request(12, 4, group_id=g, generation_id=a.generation_id, member_id=m, group_instance_id=None)
        for (g, m), a in zip(ids, joined, strict=True)
    ]
    _check(await _call_all(clients, steady), "Heartbeat steady check")
    for c in clients:
        assert c.transport is not None
        c.transport.close()
    return steady


# -- the load generator -----------------------------------------------------------------------


class _Load(asyncio.Protocol):
    """Keeps `depth` heartbeats in flight, cycling through its own pre-encoded frames."""

    def __init__(self, frames: list[bytes], depth: int, run: _Run) -> None:
        self.frames = frames
        self.next = 0
        self.depth = depth
        self.run = run
        self.sent: deque[float] = deque()
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        self._send(self.depth)

    def _send(self, n: int) -> None:
        frames, k, count = self.frames, self.next, len(self.frames)
        out = []
        now = time.perf_counter()
        for _ in range(n):
            out.append(frames[k])
            k = k + 1 if k + 1 < count else 0
            self.sent.append(now)
        self.next = k
        assert self.transport is not None
        self.transport.write(b"".join(out))

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end = 0, len(buf)
        answered = 0
        now = time.perf_counter()
        latencies, sent = self.run.latencies, self.sent
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            if buf[pos + 4 + _ERROR_AT] or buf[pos + 4 + _ERROR_AT + 1]:
                self.run.errors += 1
                if self.run.first_error is None:
                    self.run.first_error = int.from_bytes(
                        buf[pos + 4 + _ERROR_AT : pos + 6 + _ERROR_AT], signed=True
                    )
            pos += 4 + size
            latencies.append(now - sent.popleft())
            answered += 1
        del buf[:pos]
        if self.run.running:
            self._send(answered)
        elif not sent and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"gateway closed the connection: {exc}"))


class _Run:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0
        self.first_error: int | None = None  # the first error code answered, for the message
        self.running = True


async def _drive(
    port: int,
    frames: list[bytes],
    connections: int,
    depth: int,
    seconds: float,
    connect: Connector = connect_plain,
    on_start: Callable[[], None] = lambda: None,
) -> tuple[list[float], int, float, int | None]:
    """`on_start` is called once the connections are open (and logged in), just before the
    load starts: CPU counted from there is the load's, not the TLS handshakes'."""
    run = _Run()
    slices = [frames[i::connections] for i in range(connections)]
    protos = [await connect(port, functools.partial(_Load, s, depth, run)) for s in slices]
    on_start()
    started = time.perf_counter()
    for p in protos:
        p.start()
    await asyncio.sleep(seconds)
    run.running = False
    elapsed = time.perf_counter() - started
    await asyncio.wait_for(asyncio.gather(*(p.done for p in protos)), 30)
    for p in protos:
        if p.transport is not None:
            p.transport.close()
    return run.latencies, run.errors, elapsed, run.first_error


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class HeartbeatResult:
    scenario: str
    members: int
    groups: int
    connections: int
    depth: int
    requests_per_s: int
    p50_ms: float
    p99_ms: float
    errors: int
    gateway_cpu_share: float | None  # gateway CPU seconds per wall second of the run
    requests_per_gateway_cpu_s: int | None  # throughput per second of gateway CPU: load-independent
    # this process's CPU seconds per wall second of the load (connections already open): near
    # 1.0, the load generator, not the server, set the rate
    load_cpu_share: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (Linux /proc), None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_shape(text: str) -> tuple[int, int]:
    """A `--load`/`--hb-load` argument, "CONNxDEPTH" (connections x heartbeats in flight on
    each; "CONN" alone: one in flight), as the (connections, depth) that `run_load` takes."""
    conns, _, depth = text.partition("x")
    return int(conns), int(depth or 1)


def run_load(
    port: int,
    name: str,
    steady: list[Any],
    groups: int,
    connections: int,
    depth: int,
    seconds: float,
    warmup: float = 1.0,
    gateway_pid: int | None = None,
    connect: Connector = connect_plain,
) -> HeartbeatResult:
    # the client id the members joined with: another one would change every member (a write)
    frames = [encode_request(r, correlation_id=i, client_id=CLIENT_ID) for i, r in enumerate(steady)]
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None)
    with runner:
        runner.run(_drive(port, frames, connections, depth, warmup, connect))
        before: list[float | None] = []

        def on_start() -> None:
            before[:] = [None if gateway_pid is None else cpu_seconds(gateway_pid), time.process_time()]

        latencies, errors, elapsed, first_error = runner.run(
            _drive(port, frames, connections, depth, seconds, connect, on_start)
        )
        cpu_after = None if gateway_pid is None else cpu_seconds(gateway_pid)
        cpu_before, load_before = before
        assert load_before is not None
        load_cpu = time.process_time() - load_before
    if errors:
        raise RuntimeError(f"{name}: {errors} heartbeats answered with an error (the first: {first_error})")
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return HeartbeatResult(
        scenario=f"{name} steady heartbeats",
        members=len(steady),
        groups=groups,
        connections=connections,
        depth=depth,
        requests_per_s=round(len(latencies) / elapsed),
        p50_ms=round(percentile(latencies, 0.50) * 1000, 3),
        p99_ms=round(percentile(latencies, 0.99) * 1000, 3),
        errors=errors,
        gateway_cpu_share=None if cpu is None else round(cpu / elapsed, 2),
        requests_per_gateway_cpu_s=None if not cpu else round(len(latencies) / cpu),
        load_cpu_share=round(load_cpu / elapsed, 2),
    )


def setup(
    port: int,
    kind: str,
    groups: int,
    members: int,
    join_connections: int | None = None,
    connect: Connector = connect_plain,
) -> list[Any]:
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None)
    with runner:
        if kind == "ConsumerGroupHeartbeat":
            return runner.run(setup_consumer_groups(port, groups, members, connect))
        if kind == "StreamsGroupHeartbeat":
            return runner.run(setup_streams_groups(port, groups, members, connect))
        return runner.run(setup_classic_groups(port, groups, members, join_connections, connect))
