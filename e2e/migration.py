"""Live migration e2e support: real consumers of three client libraries that log everything, a
continuous producer that remembers what was acknowledged, group observers over the wire, and
the checkers that judge a run.

A test opens `scenario(gateways, name, sets)`: a `groupshift serve` with fast group settings, a
12-partition topic written continuously by a `ContinuousProducer`, and a `Cast` that starts
members: `KafkaPythonMember` (eager `range`/`roundrobin` or `cooperative-sticky`),
`ConfluentMember` (classic, or KIP-848 with `group.protocol=consumer`), `AiokafkaMember` (eager),
each in a thread of the test process (aiokafka: tasks on one loop thread), and `RemoteMember`, the
same in a child process (`python -m e2e.migration`) so that it can be SIGKILLed. `Scenario.step`
waits (polling, bounded) until the group has the expected type, is stable and evenly split, and
has consumed everything acknowledged so far; `Scenario.finish` drains, waits for the commits to
reach the log end, stops everyone and runs the checkers below.

Everything a member does lands in one `Timeline`, stamped with `time.time()` (the wall clock,
so that client events and the gateway's ISO-UTC log timestamps share one axis):

* `Read`: (time, member, partition, offset, value) for every record a member consumed;
* `Callback`: every assign / revoke / lost callback, with the moments it was entered and left;
* `Commit`: every offset commit the coordinator acknowledged (time of the acknowledgement);
* `Mark`: lifecycle marks (`started`, `member_id`, `closing`, `closed`).

The producer logs (partition, offset) -> value for every acknowledged record.

`scenario(..., secured=True)` runs the same on SASL_SSL: the gateway gets a SASL_SSL listener
(SCRAM-SHA-512, a certificate made for the run) and every client of the scenario (the members of
each library, the producer, the observers, `create_topic`) reaches it there with a SCRAM user,
found through `SECURED`, keyed by the gateway's plaintext address the scenario hands around.
`scenario(..., secured=True, upstream=UpstreamTarget(...))` puts that gateway in upstream mode
in front of a (secured) cluster: groupshift answers the group APIs, forwards the data plane, and
authorizes every client with its own StandardAuthorizer (the `gateway` identity of issue 29;
the scenario's user, PLAIN there, is a super user, so the checkers judge the migration, not the
ACLs).

Checkers (`analyse` runs them all):

**Ownership windows** (`ownership_windows`, `check_no_overlap`). A member M owns partition p
over a window [start, end]:
  * start = the moment M's assign callback for p was entered (the client hands p to the app);
  * end = the earliest of: the moment M's revoke or lost callback for p returned (the app has
    committed and let go), M's `closing` mark (it stopped polling to close, so it reads nothing
    more), the moment the gateway fenced or removed M (a `member.fenced` event for M's member
    id: expiry or timeout; or `member.left`: its leave): from then on the server may hand p to
    someone else, and whatever a zombie does afterwards is no longer ownership), or the end of
    the run for a live member.
  A SIGKILLed member has neither a revoke callback nor a closing mark: its windows end only
  when the gateway fences it (its session expires), so a partition handed to someone else before
  that fence is an overlap. Two windows of *different* members on one partition must not
  overlap: overlap means two live members held the partition at once.
  Separately, every record M read from p must lie inside one of M's own windows computed from
  the client's callbacks alone (before fence truncation): a member never processes a record of
  a partition it was not assigned, or after it revoked it.

**Every acknowledged record consumed** (`check_all_consumed`): every (partition, offset) the
producer saw acknowledged was read at least once, with the value that was produced.

**Duplicates only in the at-least-once window** (`check_duplicates`): when (p, o) is read more
than once, each re-read happened in an ownership window that began after the previous read (a
hand-over of p came in between; the same owner never reads an offset twice within one window),
and o is at or beyond the highest offset committed for p before that window began (records
already committed are never delivered again; only what the previous owner read after its last
commit is).

**Commits advance** (`check_commits_advance`): per partition the acknowledged commits never go
backwards in time order; `wait_committed` then waits for the group's committed offsets to reach
the log end.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from gateway.groups.routing import partition_for
from harness.matrix.checks import Window, commits_going_back
from harness.matrix.checks import check_no_overlap as overlapping_windows
from protocol.client import WireClient, make_request
from protocol.client_security import ClientSecurity, SaslAuthenticationFailed

PARTITIONS = 12
OFFSETS_TOPIC_PARTITIONS = 50  # the coordinator shards when a scenario does not set them
ALL = frozenset(range(PARTITIONS))

# Fast groups: no initial rebalance delay; KIP-848 members heartbeat every 250 ms (the gateway's
# setting, the bounds lowered to allow it); classic members heartbeat every 250 ms with a 6 s
# session (their own settings; the classic minimum session lowered to 1 s).
FAST_GROUP_SETTINGS = (
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=1000",
    "group.consumer.min.heartbeat.interval.ms=100",
    "group.consumer.heartbeat.interval.ms=250",
    "group.consumer.min.session.timeout.ms=1000",
    "group.consumer.session.timeout.ms=6000",
)
CLASSIC_SESSION_MS = 6000
CLASSIC_HEARTBEAT_MS = 250
REBALANCE_TIMEOUT_MS = 20000  # max.poll.interval.ms: JoinGroup / CGH rebalance timeout
COMMIT_INTERVAL = 0.25  # seconds between a member's periodic commits
SETTLE_TIMEOUT = 45.0
CATCH_UP_TIMEOUT = 45.0


@dataclass
class SecuredListener:
    """Where and how a scenario's clients reach a secured gateway: the listener's address and the
    Kafka client properties (security.protocol, PEM truststore, sasl.mechanism, sasl.jaas.config)
    that every library's settings are made from."""

    address: str
    properties: dict[str, str]

    @property
    def security(self) -> ClientSecurity:
        return ClientSecurity.from_properties(self.properties)

    def librdkafka(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.address, **self.security.librdkafka_config()}

    def python_clients(self) -> dict[str, Any]:
        """kafka-python's and aiokafka's settings (the two libraries share the names)."""
        sec = self.security
        return {
            "bootstrap_servers": self.address,
            "security_protocol": sec.protocol,
            "ssl_context": sec.ssl_context,
            "sasl_mechanism": sec.sasl_mechanism,
            "sasl_plain_username": sec.username,
            "sasl_plain_password": sec.password,
        }

    def wire(self) -> WireClient:
        host, _, port = self.address.rpartition(":")
        return self.security.connect(host, int(port))


#: a gateway's plaintext bootstrap address -> its secured listener, for scenarios run secured.
SECURED: dict[str, SecuredListener] = {}


def librdkafka_config(bootstrap: str) -> dict[str, Any]:
    secured = SECURED.get(bootstrap)
    return secured.librdkafka() if secured else {"bootstrap.servers": bootstrap}


def python_client_config(bootstrap: str) -> dict[str, Any]:
    secured = SECURED.get(bootstrap)
    return secured.python_clients() if secured else {"bootstrap_servers": bootstrap}


def observer(gw: GatewayProcess) -> WireClient:
    """A wire client for the scenario's observers: on the secured listener when there is one."""
    secured = SECURED.get(gw.bootstrap)
    return secured.wire() if secured else WireClient(gw.port)


def _observer_at(gw: GatewayProcess, host: str, port: int) -> WireClient:
    """An observer on another broker of the gateway's cluster (a worker of `serve --workers N`),
    with the security of the listener the address came from."""
    secured = SECURED.get(gw.bootstrap)
    return secured.security.connect(host, port) if secured else WireClient(port, host)


def coordinator_observer(gw: GatewayProcess, group: str) -> WireClient:
    """An observer on `group`'s coordinator, found as a Kafka client finds it (FindCoordinator at
    the bootstrap broker): the gateway itself, or with `--workers N` the worker that owns the
    group's shard, which alone answers the group APIs for it."""
    with observer(gw) as c:
        found = c.request(make_request(10, 3, key=group, key_type=0))
    assert found.error_code == 0, found
    return _observer_at(gw, found.host, found.port)


def broker_addresses(gw: GatewayProcess) -> list[tuple[str, int]]:
    """Every broker of the gateway's cluster, from Metadata (one, or the workers)."""
    with observer(gw) as c:
        resp = c.request(make_request(3, 1, topics=[]))
    return [(b.host, b.port) for b in resp.brokers]


def env_seconds(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


def wait_until(
    condition: Callable[[], Any], timeout: float, what: str | Callable[[], str], interval: float = 0.05
) -> Any:
    """Poll `condition` until it is truthy (returned) or `timeout` seconds pass (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            text = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {text}")
        time.sleep(interval)


# -- the timeline ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    t: float
    member: str
    partition: int
    offset: int
    value: bytes | None


@dataclass(frozen=True)
class Callback:
    t: float  # entered
    t_end: float  # returned
    member: str
    kind: str  # assigned | revoked | lost
    partitions: frozenset[int]


@dataclass(frozen=True)
class Commit:
    t: float  # acknowledged
    member: str
    offsets: dict[int, int]


@dataclass(frozen=True)
class Mark:
    t: float
    member: str
    what: str  # started | member_id | closing | closed
    detail: str = ""


@dataclass
class Timeline:
    topic: str
    reads: list[Read] = field(default_factory=list)
    callbacks: list[Callback] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)
    _seen: set[tuple[int, int]] = field(default_factory=set)

    def read(self, member: str, partition: int, offset: int, value: bytes | None) -> None:
        self.add(Read(time.time(), member, partition, offset, value))

    def callback(self, member: str, kind: str, partitions: Iterable[int], t: float) -> None:
        self.add(Callback(t, time.time(), member, kind, frozenset(partitions)))

    def commit(self, member: str, offsets: dict[int, int]) -> None:
        self.add(Commit(time.time(), member, dict(offsets)))

    def mark(self, member: str, what: str, detail: str = "") -> None:
        self.add(Mark(time.time(), member, what, detail))

    def add(self, event: Read | Callback | Commit | Mark) -> None:
        with self.lock:
            if isinstance(event, Read):
                self.reads.append(event)
                self._seen.add((event.partition, event.offset))
            elif isinstance(event, Callback):
                self.callbacks.append(event)
            elif isinstance(event, Commit):
                self.commits.append(event)
            else:
                self.marks.append(event)

    def missing(self, acked: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        with self.lock:
            return sorted(po for po in acked if po not in self._seen)

    def callbacks_of(self, member: str, since: float = 0.0) -> list[Callback]:
        with self.lock:
            return [c for c in self.callbacks if c.member == member and c.t >= since]

    def member_ids(self) -> dict[str, str]:
        """server member id -> member name, for every id a member reported."""
        with self.lock:
            return {m.detail: m.member for m in self.marks if m.what == "member_id" and m.detail}


# -- the producer ------------------------------------------------------------------------------


class ContinuousProducer(threading.Thread):
    """Writes `rate` records a second round-robin over the topic's partitions until `stop()`,
    remembering every acknowledged (partition, offset) and its value."""

    def __init__(self, gw: GatewayProcess, topic: str, rate: float = 150.0) -> None:
        super().__init__(daemon=True, name=f"producer-{topic}")
        self.bootstrap, self.topic, self.rate = gw.bootstrap, topic, rate
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failures: list[str] = []
        self.sent = 0
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self._halt = threading.Event()
        self._done = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        def delivered(err: Any, msg: Any) -> None:
            with self.lock:
                if err is not None:
                    self.failures.append(str(err))
                else:
                    self.acked[(msg.partition(), msg.offset())] = msg.value()

        try:
            producer = Producer(
                {
                    **librdkafka_config(self.bootstrap),
                    "linger.ms": 5,
                    "acks": "all",
                    "client.id": "mig-producer",
                }
            )
            start = time.monotonic()
            while not self._halt.is_set():
                due = int((time.monotonic() - start) * self.rate) + 1
                while self.sent < due:
                    value = f"{self.topic}-{self.sent}".encode()
                    producer.produce(
                        self.topic, value=value, partition=self.sent % PARTITIONS, on_delivery=delivered
                    )
                    self.sent += 1
                producer.poll(0.02)
            remaining = producer.flush(60)
            if remaining:
                self.failures.append(f"{remaining} records still unacknowledged after 60 s")
        except BaseException as e:
            self.error = e
        finally:
            self._done.set()

    def stop(self) -> dict[tuple[int, int], bytes]:
        """Stop producing, wait for every acknowledgement; returns the acked records."""
        self._halt.set()
        assert self._done.wait(90), "producer did not finish flushing"
        assert self.error is None, f"producer failed: {self.error!r}"
        assert not self.failures, f"produce failures: {self.failures[:5]}"
        return self.snapshot()

    def snapshot(self) -> dict[tuple[int, int], bytes]:
        with self.lock:
            return dict(self.acked)

    def end_offsets(self) -> dict[int, int]:
        out = dict.fromkeys(range(PARTITIONS), 0)
        for p, o in self.snapshot():
            out[p] = max(out[p], o + 1)
        return out


def wait_caught_up(
    timeline: Timeline, producer: ContinuousProducer, what: str, timeout: float = CATCH_UP_TIMEOUT
) -> None:
    """Every record acknowledged so far is consumed within `timeout` (no partition is stuck)."""
    target = list(producer.snapshot())
    wait_until(
        lambda: not timeline.missing(target),
        timeout,
        lambda: (
            f"{what}: {len(timeline.missing(target))} acknowledged records unconsumed, "
            f"e.g. {timeline.missing(target)[:5]}"
        ),
    )


# -- members -----------------------------------------------------------------------------------


class Member:
    """One consumer in a group, run in its own thread (aiokafka: a task on a shared loop).

    It reads records, commits its positions every COMMIT_INTERVAL and in its revoke callback,
    and logs everything into the timeline. `stop()` closes it the normal way: a last commit,
    the `closing` mark, then the client's close (a dynamic member leaves the group; a static
    one does not, per its library)."""

    kind = "?"
    protocol = "classic"

    def __init__(
        self, name: str, timeline: Timeline, bootstrap: str, group: str, instance_id: str | None = None
    ) -> None:
        self.name, self.timeline, self.bootstrap, self.group = name, timeline, bootstrap, group
        self.instance_id = instance_id
        self.topic = timeline.topic
        self.errors: list[str] = []  # unexpected exceptions of the member's loop
        self.client_errors: list[tuple[str, bool, str]] = []  # (code name, fatal, text) from the client
        self.member_id = ""
        self.running = threading.Event()
        self.stopped = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._owned: set[int] = set()
        self._positions: dict[int, int] = {}
        self._committed: dict[int, int] = {}
        self._last_commit = 0.0

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name} owns {sorted(self.owned)}>"

    # -- shared bookkeeping (called from the member's own thread or task)
    @property
    def owned(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._owned)

    @property
    def live(self) -> bool:
        return self.running.is_set() and not self._stop.is_set() and not self.stopped.is_set()

    def _record(self, partition: int, offset: int, value: bytes | None) -> None:
        self.timeline.read(self.name, partition, offset, value)
        with self._lock:
            self._positions[partition] = offset + 1

    def _to_commit(self, partitions: Iterable[int] | None = None) -> dict[int, int]:
        with self._lock:
            ps = self._owned if partitions is None else set(partitions)
            return {p: o for p, o in self._positions.items() if p in ps and o > self._committed.get(p, -1)}

    def _committed_ok(self, offsets: dict[int, int]) -> None:
        if offsets:
            self.timeline.commit(self.name, offsets)
            with self._lock:
                for p, o in offsets.items():
                    self._committed[p] = max(o, self._committed.get(p, -1))

    def _periodic_commit_due(self) -> bool:
        now = time.monotonic()
        if now - self._last_commit < COMMIT_INTERVAL:
            return False
        self._last_commit = now
        return True

    def _assigned(self, partitions: Iterable[int], t: float) -> None:
        ps = [p for p in partitions]
        with self._lock:
            self._owned.update(ps)
        self.timeline.callback(self.name, "assigned", ps, t)

    def _released(self, kind: str, partitions: Iterable[int], t: float) -> None:
        ps = [p for p in partitions]
        with self._lock:
            self._owned.difference_update(ps)
            for p in ps:
                self._positions.pop(p, None)
                self._committed.pop(p, None)
        self.timeline.callback(self.name, kind, ps, t)

    def _note_member_id(self, member_id: str | None) -> None:
        if member_id and member_id != self.member_id:
            self.member_id = member_id
            self.timeline.mark(self.name, "member_id", member_id)

    def _fail(self, e: BaseException) -> None:
        where = traceback.extract_tb(e.__traceback__)[-3:]
        self.errors.append(f"{type(e).__name__}: {e} at {traceback.format_list(where)}")

    # -- lifecycle
    def start(self) -> Member:
        threading.Thread(target=self._main, daemon=True, name=self.name).start()
        return self

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as e:
            self._fail(e)
        finally:
            self.stopped.set()

    def run(self) -> None:
        raise NotImplementedError

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        assert self.stopped.wait(timeout), f"{self.name} did not close within {timeout}s"

    def reported(self, code: str, text: str = "") -> bool:
        """The client reported error `code` (or a fatal error whose text holds `text`)."""
        return any(c == code or (c == "_FATAL" and text and text in t) for c, _, t in self.client_errors)


def _tp_partitions(tps: Iterable[Any], topic: str) -> list[int]:
    return sorted(tp.partition for tp in tps if tp.topic == topic)


def unstrand_kafka_python_join(coordinator: Any) -> bool:
    """kafka-python 3.0.12: a rejoin its leader starts because the topic's metadata changed
    (`need_rejoin`: the assignment snapshot differs from the metadata snapshot) is left in
    flight when poll()'s timeout expires; if the metadata changes back before the next poll (a
    broker that briefly does not know the topic, in front of a 3-broker cluster; or the leader's
    own assignment in that join, which sets the assignment snapshot to the new metadata), the
    next poll sees no rejoin needed, never awaits the join again, and the member stays unsynced and
    silent for good: no heartbeat, no rejoin, its partitions given to the others once its
    session expires while it still believes it holds them. A join in flight while no rejoin is
    needed is asked for again here, so the next poll awaits it (or, if it ended unseen, joins
    anew). True when it did (e2e/test_kafka_python_stranded_join.py puts a real client in that
    state)."""
    if coordinator._join_task is not None and not coordinator.need_rejoin():
        coordinator.request_rejoin()
        return True
    return False


def poll_unstranded(consumer: Any, timeout_ms: int) -> dict[Any, Any]:
    """One kafka-python `poll`, then `unstrand_kafka_python_join`: for the tests' own poll loops
    of a kafka-python group member, so a join left in flight is awaited by the next poll."""
    batches: dict[Any, Any] = consumer.poll(timeout_ms=timeout_ms)
    unstrand_kafka_python_join(consumer._coordinator)
    return batches


class KafkaPythonMember(Member):
    """kafka-python 3.x: eager `range` or `cooperative-sticky` (KIP-429), optionally static.

    Its rebalance listener runs on the client's IO loop, where a blocking commit is refused, so
    the listener is an AsyncConsumerRebalanceListener that awaits `commit_async`."""

    def __init__(
        self,
        name: str,
        timeline: Timeline,
        bootstrap: str,
        group: str,
        assignor: str = "range",
        instance_id: str | None = None,
        session_timeout_ms: int = CLASSIC_SESSION_MS,
    ) -> None:
        super().__init__(name, timeline, bootstrap, group, instance_id)
        self.assignor = assignor
        self.kind = f"kafka-python-{assignor}"
        self.session_timeout_ms = session_timeout_ms

    def run(self) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.structs import OffsetAndMetadata

        assignors = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "cooperative-sticky": CooperativeStickyAssignor,
        }
        member, topic = self, self.topic
        consumer: Any = None

        def offsets_of(offsets: dict[int, int]) -> dict[Any, Any]:
            return {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}

        class Listener(AsyncConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                t = time.time()
                ps = _tp_partitions(revoked, topic)
                offsets = member._to_commit(ps)
                if offsets:
                    try:
                        await consumer.commit_async(offsets_of(offsets))
                        member._committed_ok(offsets)
                    except Exception as e:
                        member.client_errors.append((type(e).__name__, False, f"revoke commit: {e}"))
                member._released("revoked", ps, t)

            async def on_partitions_assigned(self, assigned: Any) -> None:
                member._assigned(_tp_partitions(assigned, topic), time.time())

            async def on_partitions_lost(self, lost: Any) -> None:
                member._released("lost", _tp_partitions(lost, topic), time.time())

        config: dict[str, Any] = {
            **python_client_config(self.bootstrap),
            "group_id": self.group,
            "client_id": self.name,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "fetch_max_wait_ms": 100,
            "heartbeat_interval_ms": CLASSIC_HEARTBEAT_MS,
            "session_timeout_ms": self.session_timeout_ms,
            "max_poll_interval_ms": REBALANCE_TIMEOUT_MS,
            "reconnect_backoff_max_ms": 500,
            "partition_assignment_strategy": [assignors[self.assignor]],
        }
        if self.instance_id is not None:
            config["group_instance_id"] = self.instance_id
        consumer = KafkaConsumer(**config)
        try:
            consumer.subscribe([topic], listener=Listener())
            # kafka-python 3.0.12 quirk: a leader whose first join preceded the coordinator's
            # metadata snapshot of the topic rejoins once the snapshot arrives; if a poll()
            # timeout expires during that join, need_rejoin() turns False as soon as the leader's
            # new assignment matches the metadata, the in-flight join task is never awaited again
            # and the member stays unsynced and silent for good (no heartbeat, no rejoin). Waiting
            # for the snapshot (the client's IO thread refreshes metadata on subscribe) before the
            # first poll makes that metadata-triggered rejoin never happen.
            coordinator = consumer._coordinator
            wait_until(
                lambda: coordinator._metadata_snapshot.get(topic), 30, f"{self.name}: metadata of {topic}"
            )
            self.timeline.mark(self.name, "started", self.kind)
            self.running.set()
            while not self._stop.is_set():
                try:
                    batches = consumer.poll(timeout_ms=100, max_records=500)
                except Exception as e:  # a group error surfaced by poll: log it, keep going
                    self.client_errors.append((type(e).__name__, False, str(e)))
                    time.sleep(0.1)
                    continue
                self._note_member_id(consumer._coordinator._generation.member_id)
                self._unstrand_join(consumer._coordinator)
                for tp, msgs in batches.items():
                    for m in msgs:
                        self._record(tp.partition, m.offset, m.value)
                if self._periodic_commit_due():
                    self._commit(consumer, offsets_of)
            self._commit(consumer, offsets_of)
        finally:
            self.timeline.mark(self.name, "closing")
            consumer.close(autocommit=False)
            self.timeline.mark(self.name, "closed")

    def _unstrand_join(self, coordinator: Any) -> None:
        if unstrand_kafka_python_join(coordinator):
            self.client_errors.append(("STRANDED_JOIN", False, "join left in flight; rejoin requested"))

    def _commit(self, consumer: Any, offsets_of: Callable[[dict[int, int]], Any]) -> None:
        offsets = self._to_commit()
        if not offsets:
            return
        try:
            consumer.commit(offsets_of(offsets))
        except Exception as e:  # e.g. REBALANCE_IN_PROGRESS: the revoke callback commits
            self.client_errors.append((type(e).__name__, False, f"commit: {e}"))
            return
        self._committed_ok(offsets)


class ConfluentMember(Member):
    """confluent-kafka (librdkafka): classic (`range` eager or `cooperative-sticky`) or the
    KIP-848 consumer protocol (`group.protocol=consumer`, server-side assignment)."""

    def __init__(
        self,
        name: str,
        timeline: Timeline,
        bootstrap: str,
        group: str,
        protocol: str = "consumer",
        assignor: str = "cooperative-sticky",
        instance_id: str | None = None,
        **config: Any,
    ) -> None:
        super().__init__(name, timeline, bootstrap, group, instance_id)
        self.protocol = protocol
        self.kind = "confluent-consumer" if protocol == "consumer" else f"confluent-{assignor}"
        self.config: dict[str, Any] = {
            **librdkafka_config(bootstrap),
            "group.id": group,
            "client.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "max.poll.interval.ms": REBALANCE_TIMEOUT_MS,
            "reconnect.backoff.max.ms": 500,
            "error_cb": self._on_error,
            **config,
        }
        if protocol == "consumer":
            self.config["group.protocol"] = "consumer"
        else:
            self.config.update(
                {
                    "partition.assignment.strategy": assignor,
                    "session.timeout.ms": CLASSIC_SESSION_MS,
                    "heartbeat.interval.ms": CLASSIC_HEARTBEAT_MS,
                }
            )
        if instance_id is not None:
            self.config["group.instance.id"] = instance_id

    def _on_error(self, err: Any) -> None:
        self.client_errors.append((err.name(), bool(err.fatal()), err.str()))

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

        topic = self.topic

        def commit(consumer: Any, offsets: dict[int, int]) -> None:
            if not offsets:
                return
            try:
                result = consumer.commit(
                    offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
                )
            except KafkaException as e:
                self.client_errors.append((e.args[0].name(), bool(e.args[0].fatal()), f"commit: {e}"))
                return
            ok = {tp.partition: tp.offset for tp in result or [] if tp.error is None}
            self._committed_ok({p: o for p, o in offsets.items() if ok.get(p) == o})

        def on_assign(consumer: Any, tps: Any) -> None:
            self._assigned(_tp_partitions(tps, topic), time.time())

        def on_revoke(consumer: Any, tps: Any) -> None:
            t = time.time()
            ps = _tp_partitions(tps, topic)
            commit(consumer, self._to_commit(ps))
            self._released("revoked", ps, t)

        def on_lost(consumer: Any, tps: Any) -> None:
            self._released("lost", _tp_partitions(tps, topic), time.time())

        consumer = Consumer(self.config)
        try:
            consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
            self.timeline.mark(self.name, "started", self.kind)
            self.running.set()
            while not self._stop.is_set():
                for m in consumer.consume(num_messages=500, timeout=0.1):
                    err = m.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            self.client_errors.append((err.name(), bool(err.fatal()), err.str()))
                        continue
                    if m.topic() == topic:
                        self._record(m.partition(), m.offset(), m.value())
                self._note_member_id(consumer.memberid())
                if self._periodic_commit_due():
                    commit(consumer, self._to_commit())
            commit(consumer, self._to_commit())
        finally:
            self.timeline.mark(self.name, "closing")
            consumer.close()
            self.timeline.mark(self.name, "closed")


class AsyncLoop:
    """One background asyncio loop thread for the aiokafka members of a test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="aio-loop")
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class AiokafkaMember(Member):
    """aiokafka 0.14 (eager only; default assignor roundrobin). Its rebalance runs in a
    background task concurrently with `getmany`, so an asyncio lock makes the loop's commit and
    the revoke callback's commit exclusive (a late periodic commit can never overwrite the
    commit of the partition's next owner)."""

    def __init__(
        self,
        name: str,
        timeline: Timeline,
        bootstrap: str,
        group: str,
        aio: AsyncLoop,
        assignor: str = "roundrobin",
        instance_id: str | None = None,
    ) -> None:
        super().__init__(name, timeline, bootstrap, group, instance_id)
        self.aio, self.assignor = aio, assignor
        self.kind = f"aiokafka-{assignor}"

    def start(self) -> Member:
        self.aio.submit(self._amain())
        return self

    async def _amain(self) -> None:
        try:
            await self.arun()
        except BaseException as e:
            self._fail(e)
        finally:
            self.stopped.set()

    async def arun(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        member, topic = self, self.topic
        lock = asyncio.Lock()
        assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}

        async def commit(consumer: Any, offsets: dict[int, int]) -> None:
            if not offsets:
                return
            try:
                await consumer.commit({TopicPartition(topic, p): o for p, o in offsets.items()})
            except Exception as e:
                member.client_errors.append((type(e).__name__, False, f"commit: {e}"))
                return
            member._committed_ok(offsets)

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                t = time.time()
                ps = _tp_partitions(revoked, topic)
                async with lock:
                    await commit(consumer, member._to_commit(ps))
                    member._released("revoked", ps, t)

            async def on_partitions_assigned(self, assigned: Any) -> None:
                member._assigned(_tp_partitions(assigned, topic), time.time())

        config: dict[str, Any] = {
            **python_client_config(self.bootstrap),
            "group_id": self.group,
            "client_id": self.name,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "fetch_max_wait_ms": 100,
            "heartbeat_interval_ms": CLASSIC_HEARTBEAT_MS,
            "session_timeout_ms": CLASSIC_SESSION_MS,
            "max_poll_interval_ms": REBALANCE_TIMEOUT_MS,
            "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
            "partition_assignment_strategy": (assignors[self.assignor],),
        }
        if self.instance_id is not None:
            config["group_instance_id"] = self.instance_id
        consumer = AIOKafkaConsumer(**config)
        await consumer.start()
        try:
            consumer.subscribe([topic], listener=Listener())
            self.timeline.mark(self.name, "started", self.kind)
            self.running.set()
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=100, max_records=500)
                async with lock:
                    for tp, msgs in batches.items():
                        if tp.partition not in self.owned:
                            continue  # fetched before a revocation that has since completed
                        for m in msgs:
                            self._record(tp.partition, m.offset, m.value)
                    self._note_member_id(consumer._coordinator.member_id)
                    if self._periodic_commit_due():
                        await commit(consumer, self._to_commit())
            async with lock:
                await commit(consumer, self._to_commit())
        finally:
            self.timeline.mark(self.name, "closing")
            await consumer.stop()
            self.timeline.mark(self.name, "closed")


# -- members in their own process (so that they can be SIGKILLed) ------------------------------


def _event_to_json(event: Read | Callback | Commit | Mark) -> dict[str, Any]:
    if isinstance(event, Read):
        value = None if event.value is None else event.value.decode("latin-1")
        return {
            "e": "read",
            "t": event.t,
            "m": event.member,
            "p": event.partition,
            "o": event.offset,
            "v": value,
        }
    if isinstance(event, Callback):
        return {
            "e": "callback",
            "t": event.t,
            "t_end": event.t_end,
            "m": event.member,
            "kind": event.kind,
            "ps": sorted(event.partitions),
        }
    if isinstance(event, Commit):
        return {
            "e": "commit",
            "t": event.t,
            "m": event.member,
            "offsets": {str(p): o for p, o in event.offsets.items()},
        }
    return {"e": "mark", "t": event.t, "m": event.member, "what": event.what, "detail": event.detail}


def _event_from_json(d: dict[str, Any]) -> Read | Callback | Commit | Mark:
    if d["e"] == "read":
        return Read(d["t"], d["m"], d["p"], d["o"], None if d["v"] is None else d["v"].encode("latin-1"))
    if d["e"] == "callback":
        return Callback(d["t"], d["t_end"], d["m"], d["kind"], frozenset(d["ps"]))
    if d["e"] == "commit":
        return Commit(d["t"], d["m"], {int(p): o for p, o in d["offsets"].items()})
    return Mark(d["t"], d["m"], d["what"], d["detail"])


class _StreamTimeline(Timeline):
    """The child's timeline: every event goes to stdout as one JSON line."""

    def add(self, event: Read | Callback | Commit | Mark) -> None:
        _emit(_event_to_json(event))


_emit_lock = threading.Lock()


def _emit(obj: dict[str, Any]) -> None:
    line = json.dumps(obj)
    with _emit_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class _EchoList(list):  # type: ignore[type-arg]
    """A member's error list in the child: every entry also goes to the parent."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def append(self, item: Any) -> None:
        super().append(item)
        _emit({"e": self.kind, "x": item})


# `python -m e2e.migration`, without hypothesis: kio (imported through protocol.client) registers a
# hypothesis strategy for each of its types when it can import hypothesis, a third of a second of
# every member's start, and a scenario starts many (groupshift/__main__.py does the same).
_MEMBER_ENTRY = (
    "import runpy, sys; sys.modules.setdefault('hypothesis', None); "
    "runpy.run_module('e2e.migration', run_name='__main__', alter_sys=True)"
)


def _child_main(config: dict[str, Any]) -> None:
    """`python -m e2e.migration '<json>'`: run one member, report on stdout, stop on "stop"."""
    timeline = _StreamTimeline(config["topic"])
    if config.get("secured"):
        SECURED[config["bootstrap"]] = SecuredListener(**config["secured"])
    cls = {"kafka-python": KafkaPythonMember, "confluent": ConfluentMember}[config["library"]]
    member = cls(config["name"], timeline, config["bootstrap"], config["group"], **config["kwargs"])
    member.errors = _EchoList("error")
    member.client_errors = _EchoList("client_error")
    member.start()
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    member.stop()


class RemoteMember(Member):
    """A member of `library` ("kafka-python" or "confluent") run in its own Python process, its
    events streamed into the parent's timeline. `kill()` is a SIGKILL: no leave, no callback."""

    def __init__(
        self, name: str, timeline: Timeline, bootstrap: str, group: str, library: str, **kwargs: Any
    ) -> None:
        super().__init__(name, timeline, bootstrap, group, kwargs.get("instance_id"))
        self.library = library
        self.protocol = kwargs.get("protocol", "classic") if library == "confluent" else "classic"
        self.kind = f"remote-{library}-{self.protocol}"
        self.config = {
            "library": library,
            "name": name,
            "bootstrap": bootstrap,
            "group": group,
            "topic": timeline.topic,
            "kwargs": kwargs,
            "secured": vars(SECURED[bootstrap]) if bootstrap in SECURED else None,
        }
        self.killed_at: float | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Member:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _MEMBER_ENTRY, json.dumps(self.config)],
            cwd=Path(__file__).resolve().parent.parent,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        threading.Thread(target=self._pump, daemon=True, name=f"pump-{self.name}").start()
        return self

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                d = json.loads(line)
                if d["e"] == "error":
                    self.errors.append(d["x"])
                    continue
                if d["e"] == "client_error":
                    self.client_errors.append(tuple(d["x"]))
                    continue
                event = _event_from_json(d)
                self.timeline.add(event)
                if isinstance(event, Callback):
                    with self._lock:
                        if event.kind == "assigned":
                            self._owned.update(event.partitions)
                        else:
                            self._owned.difference_update(event.partitions)
                elif isinstance(event, Mark):
                    if event.what == "started":
                        self.running.set()
                    elif event.what == "member_id":
                        self.member_id = event.detail
        except Exception as e:
            self._fail(e)
        finally:
            self.stopped.set()

    def stop(self, timeout: float = 30.0) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self._stop.set()
        self.proc.stdin.write(b"stop\n")
        self.proc.stdin.flush()
        assert self.stopped.wait(timeout), f"{self.name} did not close within {timeout}s"
        self.proc.wait(10)

    def kill(self) -> None:
        """SIGKILL the member's process: it neither leaves nor runs any callback."""
        assert self.proc is not None
        self._stop.set()
        self.killed_at = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        assert self.stopped.wait(10)
        with self._lock:
            self._owned.clear()  # gone from the client side; the server decides when it is fenced


# -- the gateway, over the wire ----------------------------------------------------------------


def create_topic(gw: GatewayProcess, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(librdkafka_config(gw.bootstrap))
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def list_groups(gw: GatewayProcess) -> dict[str, tuple[str, str]]:
    """group id -> (type, state), from ListGroups v5 asked of every broker (a broker lists the
    groups it coordinates; Kafka's admin client asks them all, so do the observers)."""
    out: dict[str, tuple[str, str]] = {}
    for host, port in broker_addresses(gw):
        with _observer_at(gw, host, port) as c:
            resp = c.request(make_request(16, 5, states_filter=[], types_filter=[]))
        assert resp.error_code == 0, resp
        out |= {g.group_id: (g.group_type, g.group_state) for g in resp.groups}
    return out


def group_type(gw: GatewayProcess, group: str) -> str | None:
    listed = list_groups(gw).get(group)
    return listed[0] if listed else None


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    client_id: str
    member_epoch: int
    member_type: int  # 0 classic, 1 consumer (KIP-1099)
    assigned: frozenset[int]
    target: frozenset[int]


@dataclass(frozen=True)
class ConsumerGroupView:
    error_code: int
    state: str
    group_epoch: int
    assignment_epoch: int
    members: dict[str, DescribedMember]  # by client id

    @property
    def settled(self) -> bool:
        return (
            self.error_code == 0
            and self.state == "Stable"
            and all(
                m.assigned == m.target and m.member_epoch == self.group_epoch for m in self.members.values()
            )
        )


def describe_consumer_group(gw: GatewayProcess, group: str) -> ConsumerGroupView:
    """ConsumerGroupDescribe v1 (GROUP_ID_NOT_FOUND for a classic group, as Kafka)."""
    with coordinator_observer(gw, group) as c:
        resp = c.request(make_request(69, 1, group_ids=[group], include_authorized_operations=False))
    g = resp.groups[0]

    def parts(a: Any) -> frozenset[int]:
        return frozenset(p for t in a.topic_partitions for p in t.partitions)

    members = {
        m.client_id: DescribedMember(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.member_epoch,
            m.member_type,
            parts(m.assignment),
            parts(m.target_assignment),
        )
        for m in g.members
    }
    return ConsumerGroupView(int(g.error_code), g.group_state, g.group_epoch, g.assignment_epoch, members)


def committed_offsets(gw: GatewayProcess, group: str, topic: str) -> dict[int, int]:
    with coordinator_observer(gw, group) as c:
        resp = c.request(
            make_request(
                9,
                8,
                require_stable=False,
                groups=[
                    {
                        "group_id": group,
                        "topics": [{"name": topic, "partition_indexes": list(range(PARTITIONS))}],
                    }
                ],
            )
        )
    g = resp.groups[0]
    assert g.error_code == 0, g
    return {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions}


def log_end_offsets(gw: GatewayProcess, topic: str) -> dict[int, int]:
    with observer(gw) as c:
        resp = c.request(
            make_request(
                2,
                7,
                replica_id=-1,
                isolation_level=0,
                topics=[
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                            for p in range(PARTITIONS)
                        ],
                    }
                ],
            )
        )
    return {p.partition_index: p.offset for t in resp.topics for p in t.partitions}


def wait_committed(
    gw: GatewayProcess,
    group: str,
    topic: str,
    timeout: float = CATCH_UP_TIMEOUT,
    context: Callable[[], str] = lambda: "",
) -> None:
    """The group's committed offsets reach the log end on every partition. `context` adds to
    the timeout's message (the members' client errors: a failed commit is the usual cause)."""
    end = log_end_offsets(gw, topic)
    wait_until(
        lambda: committed_offsets(gw, group, topic) == end,
        timeout,
        lambda: f"commits to reach the log end {end}, have {committed_offsets(gw, group, topic)}{context()}",
    )


def restart_same_port(gateways: Gateways, gw: GatewayProcess) -> GatewayProcess:
    """A new gateway process on the same data directory, settings and port (after kill/stop), so
    that clients reconnect to the address they bootstrapped from."""
    assert not gw.alive()
    new = wait_until(lambda: _try_start(gw), 20, f"the gateway to restart on port {gw.port}", interval=0.2)
    gateways.started.append(new)
    return new


def _try_start(gw: GatewayProcess) -> GatewayProcess | None:
    try:
        return GatewayProcess.start(
            gw.data_dir,
            sets=gw.sets,
            log_path=gw.log_path,
            extra_args=("--listen", f"127.0.0.1:{gw.port}"),
            workers=gw.workers,
        )
    except RuntimeError as e:
        if "Address already in use" in str(e) or "address already in use" in str(e):
            return None
        raise


def server_time(event: dict[str, Any]) -> float:
    return datetime.datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()


def group_events(gw: GatewayProcess, group: str, name: str) -> list[dict[str, Any]]:
    return [e for e in gw.events(name) if e.get("group") == group]


def fences(gw: GatewayProcess, group: str) -> list[tuple[float, str]]:
    """(time, member id) of every member the gateway fenced or removed from `group`."""
    return [
        (server_time(e), str(e["member"]))
        for name in ("member.fenced", "member.left")
        for e in group_events(gw, group, name)
    ]


# -- settling ----------------------------------------------------------------------------------


def balanced(members: Iterable[Member]) -> bool:
    """The live members' own views split the partitions exactly, as evenly as possible."""
    live = [m for m in members if m.live]
    if not live:
        return False
    owned = [m.owned for m in live]
    if sum(len(o) for o in owned) != PARTITIONS or frozenset().union(*owned) != ALL:
        return False
    lo = PARTITIONS // len(live)
    return all(lo <= len(o) <= lo + (1 if PARTITIONS % len(live) else 0) for o in owned)


def settle(
    gw: GatewayProcess,
    group: str,
    members: Iterable[Member],
    expect_type: str,
    what: str,
    timeout: float = SETTLE_TIMEOUT,
) -> None:
    """Wait until the group has the expected type, is stable on the server, and the live
    members' own assignments split the partitions evenly; fail early on member errors."""
    members = list(members)

    def done() -> bool:
        for m in members:
            assert not m.errors, f"{what}: {m.name} failed: {m.errors}"
        if not balanced(members):
            return False
        listed = list_groups(gw).get(group)
        if listed is None or listed[0] != expect_type or listed[1] != "Stable":
            return False
        if expect_type == "consumer":
            view = describe_consumer_group(gw, group)
            live = {m.name for m in members if m.live}
            if not view.settled or set(view.members) != live:
                return False
            return all(view.members[m.name].assigned == m.owned for m in members if m.live)
        return True

    def state() -> str:
        live = [m for m in members if m.live]
        return (
            f"{what}: group {group} {list_groups(gw).get(group)}, members "
            f"{[(m.name, sorted(m.owned)) for m in live]}"
        )

    wait_until(done, timeout, state, interval=0.1)


# -- analysis ----------------------------------------------------------------------------------


def _client_windows(tl: Timeline, end_of_run: float) -> dict[tuple[str, int], list[Window]]:
    """Windows from each member's callbacks and closing mark alone."""
    events: list[tuple[float, int, str, str, frozenset[int]]] = []
    for c in tl.callbacks:
        # An assign starts when entered, a revoke/lost ends when it returned.
        events.append((c.t if c.kind == "assigned" else c.t_end, 0, c.member, c.kind, c.partitions))
    for mk in tl.marks:
        if mk.what == "closing":
            events.append((mk.t, 1, mk.member, "closing", ALL))
    events.sort(key=lambda e: (e[0], e[1]))
    open_: dict[tuple[str, int], float] = {}
    out: dict[tuple[str, int], list[Window]] = defaultdict(list)
    for t, _, member, kind, parts in events:
        for p in parts:
            key = (member, p)
            if kind == "assigned":
                if key not in open_:
                    open_[key] = t
            elif key in open_:
                out[key].append(Window(member, p, open_.pop(key), t))
    for (member, p), start in open_.items():
        out[(member, p)].append(Window(member, p, start, end_of_run))
    return out


def ownership_windows(
    tl: Timeline, fenced: Iterable[tuple[float, str]] = (), end_of_run: float | None = None
) -> dict[int, list[Window]]:
    """partition -> ownership windows of every member (see the module docstring for the rule)."""
    end_of_run = end_of_run if end_of_run is not None else time.time()
    names = tl.member_ids()
    fenced_at: dict[str, float] = {}
    for t, member_id in fenced:
        name = names.get(member_id)
        if name is not None:
            fenced_at[name] = min(t, fenced_at.get(name, t))
    out: dict[int, list[Window]] = defaultdict(list)
    for (member, p), windows in _client_windows(tl, end_of_run).items():
        cut = fenced_at.get(member)
        for w in windows:
            end = w.end if cut is None or cut < w.start else min(w.end, cut)
            out[p].append(Window(member, p, w.start, end))
    for ws in out.values():
        ws.sort(key=lambda w: w.start)
    return out


def check_no_overlap(windows: dict[int, list[Window]]) -> None:
    bad = overlapping_windows(windows)
    if bad:
        raise AssertionError(bad[0])


def check_reads_within_windows(tl: Timeline, end_of_run: float) -> None:
    windows = _client_windows(tl, end_of_run)
    for r in tl.reads:
        ws = windows.get((r.member, r.partition), [])
        if not any(w.start <= r.t <= w.end for w in ws):
            raise AssertionError(
                f"{r.member} read partition {r.partition} offset {r.offset} at {r.t:.3f} outside its "
                f"ownership windows {[(round(w.start, 3), round(w.end, 3)) for w in ws]}"
            )


def check_all_consumed(tl: Timeline, acked: dict[tuple[int, int], bytes]) -> None:
    read: dict[tuple[int, int], bytes | None] = {}
    for r in tl.reads:
        read.setdefault((r.partition, r.offset), r.value)
    missing = sorted(po for po in acked if po not in read)
    assert not missing, f"{len(missing)} acknowledged records never consumed, e.g. {missing[:5]}"
    wrong = [po for po, v in acked.items() if read[po] != v]
    assert not wrong, f"records consumed with other values than produced at {wrong[:5]}"


def check_duplicates(tl: Timeline, end_of_run: float) -> int:
    """Returns the number of duplicate reads; raises if one lies outside the at-least-once
    window (see the module docstring)."""
    windows = _client_windows(tl, end_of_run)
    commits: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for c in tl.commits:
        for p, o in c.offsets.items():
            commits[p].append((c.t, o))
    by_offset: dict[tuple[int, int], list[Read]] = defaultdict(list)
    for r in sorted(tl.reads, key=lambda r: r.t):
        by_offset[(r.partition, r.offset)].append(r)
    duplicates = 0
    for (p, o), rs in by_offset.items():
        for before, again in itertools.pairwise(rs):
            duplicates += 1
            w = next((w for w in windows.get((again.member, p), []) if w.start <= again.t <= w.end), None)
            assert w is not None, f"{again.member} re-read {p}/{o} outside any ownership window"
            assert w.start > before.t, (
                f"partition {p} offset {o} read twice by {again.member} within one ownership "
                f"window (first by {before.member} at {before.t:.3f}, again at {again.t:.3f})"
            )
            committed = max((off for t, off in commits[p] if t < w.start), default=0)
            assert o >= committed, (
                f"partition {p} offset {o} re-read by {again.member} although offset {committed} "
                f"was committed before its window began at {w.start:.3f}"
            )
    return duplicates


def check_commits_advance(tl: Timeline) -> int:
    """Acknowledged commits never go backwards per partition; returns how many there were."""
    commits = [
        (c.t, c.member, p, o) for c in sorted(tl.commits, key=lambda c: c.t) for p, o in c.offsets.items()
    ]
    bad = commits_going_back(commits)
    assert not bad, bad[0]
    return len(commits)


@dataclass(frozen=True)
class Report:
    records: int
    reads: int
    duplicates: int
    commits: int
    handovers: int

    def __str__(self) -> str:
        return (
            f"{self.records} records acknowledged, {self.reads} reads ({self.duplicates} duplicates), "
            f"{self.commits} partition commits, {self.handovers} partition hand-overs"
        )


def analyse(
    tl: Timeline, acked: dict[tuple[int, int], bytes], fenced: Iterable[tuple[float, str]] = ()
) -> Report:
    """Run every checker over a finished run (all members stopped)."""
    end = time.time()
    with tl.lock:
        windows = ownership_windows(tl, fenced, end)
        check_no_overlap(windows)
        check_reads_within_windows(tl, end)
        check_all_consumed(tl, acked)
        duplicates = check_duplicates(tl, end)
        commits = check_commits_advance(tl)
        handovers = sum(max(len(ws) - 1, 0) for ws in windows.values())
        return Report(len(acked), len(tl.reads), duplicates, commits, handovers)


# -- a scenario's cast -------------------------------------------------------------------------


class Cast:
    """The members of one scenario: starts them, stops them, and stops everyone at the end."""

    def __init__(self, gw: GatewayProcess, group: str, timeline: Timeline) -> None:
        self.gw, self.group, self.timeline = gw, group, timeline
        self.members: list[Member] = []
        self.aio: AsyncLoop | None = None
        self._n = 0

    @property
    def live(self) -> list[Member]:
        return [m for m in self.members if m.live]

    def _name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}-{self._n}"

    def add(self, member: Member) -> Member:
        self.members.append(member)
        member.start()
        wait_until(
            lambda: member.running.is_set() or member.errors or member.stopped.is_set(),
            30,
            f"{member.name} to start",
        )
        assert not member.errors, f"{member.name}: {member.errors}"
        return member

    def kafka_python(self, assignor: str = "range", **kw: Any) -> Member:
        prefix = "kp-coop" if assignor == "cooperative-sticky" else f"kp-{assignor}"
        return self.add(
            KafkaPythonMember(
                self._name(prefix), self.timeline, self.gw.bootstrap, self.group, assignor=assignor, **kw
            )
        )

    def confluent(
        self, protocol: str = "consumer", assignor: str = "cooperative-sticky", **kw: Any
    ) -> Member:
        prefix = (
            "ck-cons"
            if protocol == "consumer"
            else ("ck-coop" if assignor == "cooperative-sticky" else f"ck-{assignor}")
        )
        return self.add(
            ConfluentMember(
                self._name(prefix),
                self.timeline,
                self.gw.bootstrap,
                self.group,
                protocol=protocol,
                assignor=assignor,
                **kw,
            )
        )

    def aiokafka(self, assignor: str = "roundrobin", **kw: Any) -> Member:
        if self.aio is None:
            self.aio = AsyncLoop()
        return self.add(
            AiokafkaMember(
                self._name(f"aio-{assignor}"),
                self.timeline,
                self.gw.bootstrap,
                self.group,
                self.aio,
                assignor=assignor,
                **kw,
            )
        )

    def remote(self, library: str, **kw: Any) -> RemoteMember:
        """A member in its own process (see RemoteMember); kw as for the in-process classes."""
        prefix = "rk" if library == "confluent" else "rp"
        member = RemoteMember(self._name(prefix), self.timeline, self.gw.bootstrap, self.group, library, **kw)
        self.add(member)
        return member

    def classic(self, kind: str, **kw: Any) -> Member:
        """A classic member by kind: kafka-python-range, kafka-python-cooperative-sticky,
        aiokafka-roundrobin, confluent-range, confluent-cooperative-sticky."""
        library, _, assignor = kind.partition("-")
        if library == "kafka":
            return self.kafka_python(assignor.removeprefix("python-"), **kw)
        if library == "aiokafka":
            return self.aiokafka(assignor, **kw)
        return self.confluent("classic", assignor, **kw)

    def stop_all(self) -> None:
        """Stop every member: classic members first, then KIP-848 ones, so that the end of a run
        never downgrades the group. (Stopping the KIP-848 members first converts the group while
        the classic members may still be one epoch behind; their next heartbeat then gets
        ILLEGAL_GENERATION, as in Kafka, and a client closing right after that sends no LeaveGroup
        (kafka-python and the Java client skip it once unjoined), so the group's last rebalance
        waits for that member's session to expire.)"""
        errors = []
        for m in sorted(self.members, key=lambda m: m.protocol == "consumer"):
            if not m.stopped.is_set():
                try:
                    m.stop()
                except (AssertionError, OSError) as e:
                    errors.append(f"{m.name}: {e}")
            if isinstance(m, RemoteMember) and m.proc is not None and m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait(10)
        if self.aio is not None:
            self.aio.close()
            self.aio = None
        assert not errors, errors

    def errors(self) -> dict[str, list[str]]:
        return {m.name: m.errors for m in self.members if m.errors}


# -- a whole scenario --------------------------------------------------------------------------


@dataclass
class Scenario:
    """One gateway, one 12-partition topic written continuously, one group, its members."""

    gw: GatewayProcess
    topic: str
    group: str
    timeline: Timeline
    producer: ContinuousProducer
    cast: Cast

    def settle(self, expect_type: str, what: str, timeout: float = SETTLE_TIMEOUT) -> None:
        settle(self.gw, self.group, self.cast.members, expect_type, what, timeout)

    def caught_up(self, what: str) -> None:
        wait_caught_up(self.timeline, self.producer, what)

    def step(self, expect_type: str, what: str) -> None:
        """Settle with the expected group type, then consume everything produced so far."""
        self.settle(expect_type, what)
        assert group_type(self.gw, self.group) == expect_type, what
        self.caught_up(what)

    def conversions(self) -> list[tuple[str, str]]:
        return [(e["from_type"], e["to_type"]) for e in group_events(self.gw, self.group, "group.converted")]

    def _client_errors(self) -> str:
        errors = {m.name: m.client_errors for m in self.cast.members if m.client_errors}
        return f"; client errors: {errors}" if errors else "; no client errors"

    def finish(self) -> Report:
        """Stop producing, let the members consume and commit everything, stop them all and run
        every checker over the run."""
        acked = self.producer.stop()
        wait_caught_up(self.timeline, self.producer, "the final drain")
        wait_committed(self.gw, self.group, self.topic, context=self._client_errors)
        self.cast.stop_all()
        return analyse(self.timeline, acked, fences(self.gw, self.group))


@dataclass(frozen=True)
class UpstreamTarget:
    """A cluster for a scenario's gateway to front (`groupshift serve --upstream`): its bootstrap
    address and the `upstream.*` settings that reach it (TLS and SASL, issue 29)."""

    bootstrap: str
    settings: tuple[str, ...] = ()


def scenario_group(name: str, gw: GatewayProcess) -> str:
    """`<name>-group`; with `serve --workers N` the first of `<name>-group`, `<name>-group-1`, ...
    that the last worker coordinates, so that every scenario's clients bootstrap at worker 0,
    find their coordinator elsewhere, and produce and fetch at worker 0 while the group lives
    on another process (a group of worker 0 would exercise nothing a single process does not)."""
    group = f"{name}-group"
    if gw.workers == 1:
        return group
    shards = next(
        (int(v) for k, _, v in (s.partition("=") for s in gw.sets) if k == "offsets.topic.num.partitions"),
        OFFSETS_TOPIC_PARTITIONS,
    )
    candidates = itertools.chain([group], (f"{group}-{i}" for i in itertools.count(1)))
    return next(g for g in candidates if partition_for(g, shards) % gw.workers == gw.workers - 1)


@contextmanager
def scenario(
    gateways: Gateways,
    name: str,
    sets: Iterable[str] = (),
    rate: float = 150.0,
    *,
    secured: bool = False,
    upstream: UpstreamTarget | None = None,
    workers: int | None = None,
) -> Iterator[Scenario]:
    """`secured`: every client of the scenario on a SASL_SSL listener with SCRAM-SHA-512 (see
    `start_secured`); otherwise on the gateway's plaintext listener. `upstream`: the gateway
    fronts that cluster (with `secured` only: see `start_secured`). `workers`: `serve --workers
    N` whatever GROUPSHIFT_E2E_WORKERS says (plaintext only)."""
    if upstream is not None and not secured:
        raise ValueError("scenario(upstream=...) is implemented for secured=True only")
    if secured:
        gw = start_secured(gateways, name, [*FAST_GROUP_SETTINGS, *sets], upstream)
    else:
        gw = gateways.start(name, sets=[*FAST_GROUP_SETTINGS, *sets], workers=workers)
    topic, group = f"{name}-topic", scenario_group(name, gw)
    if gw.workers > 1:  # the group really is another process's: its coordinator is not worker 0
        secured_at = SECURED.get(gw.bootstrap)
        port = int(secured_at.address.rpartition(":")[2]) if secured_at else gw.port
        with coordinator_observer(gw, group) as c:
            assert c.sock.getpeername()[1] == port + gw.workers - 1, (c.sock.getpeername(), port)
    create_topic(gw, topic)
    timeline = Timeline(topic)
    producer = ContinuousProducer(gw, topic, rate)
    producer.start()
    cast = Cast(gw, group, timeline)
    try:
        yield Scenario(gw, topic, group, timeline, producer, cast)
    finally:
        producer._halt.set()
        try:
            cast.stop_all()
        finally:
            producer.join(90)
            SECURED.pop(gw.bootstrap, None)


SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_USER, SCRAM_PASSWORD = "migration", "migration-secret"


def start_secured(
    gateways: Gateways, name: str, sets: list[str], upstream: UpstreamTarget | None = None
) -> GatewayProcess:
    """A gateway with a PLAINTEXT listener (first, so `gw.port` stays the plaintext one) and a
    SASL_SSL listener offering SCRAM-SHA-512 with a certificate of a CA made for the run; the
    scenario's SCRAM user is created over the plaintext listener, then registered in `SECURED`.

    With `upstream` the gateway fronts that cluster, and its only listener is SASL_SSL with PLAIN
    (the user in the JAAS entry) and groupshift's StandardAuthorizer, the scenario's user a super
    user: in upstream mode every upstream broker gets a listener of the main listener's protocol,
    so a client on a second listener would be sent to brokers of the first one's protocol; and
    with PLAINTEXT gone there is no listener to create a SCRAM user on."""
    from harness.certificates import Authority

    ca = Authority(gateways.base / f"{name}-certs", "migration")
    server = ca.issue("server", "localhost", server=True)
    tls = ["ssl.keystore.type=PEM", f"ssl.keystore.location={server.pem}"]
    if upstream is not None:
        users = f'username="{SCRAM_USER}" password="{SCRAM_PASSWORD}" user_{SCRAM_USER}="{SCRAM_PASSWORD}"'
        gw = gateways.start(
            name,
            sets=[
                *sets,
                *upstream.settings,
                *tls,
                "listeners=SASL_SSL://127.0.0.1:0",
                "listener.security.protocol.map=SASL_SSL:SASL_SSL",
                "sasl.enabled.mechanisms=PLAIN",
                f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_MODULE} required {users};",
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                f"super.users=User:{SCRAM_USER}",
            ],
            extra_args=("--upstream", upstream.bootstrap),
        )
        mechanism, module = "PLAIN", PLAIN_MODULE
    else:
        gw = gateways.start(
            name,
            sets=[
                *sets,
                *tls,
                "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
                "sasl.enabled.mechanisms=SCRAM-SHA-512",
                f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_MODULE} required;",
            ],
        )
        create_scram_user(gw)
        mechanism, module = "SCRAM-SHA-512", SCRAM_MODULE
    # The last start's (a restart appends to the log), of worker 0 when there are workers.
    port = int([e for e in gw.events("gateway.listening") if e["port"] == gw.port][-1]["ports"]["SASL_SSL"])
    SECURED[gw.bootstrap] = SecuredListener(
        f"127.0.0.1:{port}",
        {
            "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.pem),
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{module} required username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";',
        },
    )
    if upstream is None:
        # The user reaches the other workers of `--workers N` within their file check (as a
        # Kafka broker applies a SCRAM record after the controller committed it): until every
        # broker takes the login, a client sent there would fail for good.
        for host, port in broker_addresses(gw):
            logged_in = functools.partial(_logs_in, gw, host, port)
            wait_until(logged_in, 10, f"the SCRAM user to log in at {host}:{port}")
    return gw


def _logs_in(gw: GatewayProcess, host: str, port: int) -> bool:
    try:
        _observer_at(gw, host, port).close()
    except SaslAuthenticationFailed:
        return False
    return True


def create_scram_user(gw: GatewayProcess) -> None:
    """The scenario's SCRAM-SHA-512 user, created over the gateway's plaintext listener."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    upsert = UserScramCredentialUpsertion(
        SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), SCRAM_PASSWORD.encode()
    )
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(timeout=30)


if __name__ == "__main__":
    _child_main(json.loads(sys.argv[1]))
