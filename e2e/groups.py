"""Shared machinery of the consumer-group e2e tests.

A group scenario (`run_group_scenario`) drives real consumers of one client library through the
same story: three members form a group on a 6-partition topic, a paced producer writes 3,000
records, one member leaves and another joins while records are still flowing, and the group
must end up having consumed every record, committed the end offsets, and split the partitions
exactly among its live members.

Members run in threads (kafka-python, confluent-kafka) or as asyncio tasks on one background
loop (aiokafka); all of them report into one `Ledger`: every record consumed (with the member
and a monotonic timestamp), every assignment callback, and a snapshot of the client's own
`assignment()` after each poll. `Ledger.check_consumed` then asserts at-least-once delivery
with duplicates only where a rebalance handed a partition over between the two reads.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from e2e.expected import COUNT, PARTITIONS, PER_PARTITION, record
from e2e.harness import GatewayProcess

# Fast groups: classic members heartbeat every 200 ms (their own setting), KIP-848 members get
# 250 ms from the gateway; no initial rebalance delay. Session timeouts stay generous.
FAST_GROUP_SETTINGS = (
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=1000",
    "group.consumer.min.heartbeat.interval.ms=100",
    "group.consumer.heartbeat.interval.ms=250",
    "group.consumer.min.session.timeout.ms=2000",
    "group.consumer.session.timeout.ms=10000",
)
ALL = frozenset(range(PARTITIONS))
STABLE_TIMEOUT = 45.0
CONSUME_TIMEOUT = 60.0


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


# -- topics and records ------------------------------------------------------------------------


def create_topic(gw: GatewayProcess, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def produce(gw: GatewayProcess, topic: str, indexes: Iterable[int]) -> None:
    from confluent_kafka import Producer

    failures: list[Any] = []
    producer = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 5, "acks": "all"})
    for i in indexes:
        p, k, v = record(i)
        producer.produce(
            topic, key=k, value=v, partition=p, on_delivery=lambda err, _m: err and failures.append(err)
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert failures == []


class PacedProducer(threading.Thread):
    """Produces records 0..COUNT-1 in small steps over `seconds` once `go()` is called."""

    def __init__(self, gw: GatewayProcess, topic: str, seconds: float = 4.0, steps: int = 40) -> None:
        super().__init__(daemon=True, name=f"producer-{topic}")
        self.gw, self.topic, self.seconds, self.steps = gw, topic, seconds, steps
        self.sent = 0
        self.error: BaseException | None = None
        self._go = threading.Event()

    def go(self) -> None:
        self._go.set()

    def run(self) -> None:
        try:
            self._go.wait()
            per_step = COUNT // self.steps
            for step in range(self.steps):
                produce(self.gw, self.topic, range(step * per_step, (step + 1) * per_step))
                self.sent = (step + 1) * per_step
                time.sleep(self.seconds / self.steps)
            assert self.sent == COUNT
        except BaseException as e:
            self.error = e

    @property
    def finished(self) -> bool:
        return self.sent == COUNT


# -- what the members report -------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    member: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    at: float


@dataclass
class Ledger:
    topic: str
    reads: list[Read] = field(default_factory=list)
    # (member, partition) -> times the partition was handed to that member (assign callbacks)
    handed: dict[tuple[str, int], list[float]] = field(default_factory=lambda: defaultdict(list))
    callbacks: list[tuple[float, str, str, frozenset[int]]] = field(default_factory=list)
    commit_failures: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, member: str, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        with self.lock:
            self.reads.append(Read(member, partition, offset, key, value, time.monotonic()))

    def callback(self, member: str, kind: str, partitions: Iterable[tuple[str, int]]) -> None:
        parts = frozenset(p for t, p in partitions if t == self.topic)
        now = time.monotonic()
        with self.lock:
            self.callbacks.append((now, member, kind, parts))
            if kind == "assigned":
                for p in parts:
                    self.handed[(member, p)].append(now)

    def callbacks_of(self, member: str, since: float = 0.0) -> list[tuple[str, frozenset[int]]]:
        with self.lock:
            return [(k, ps) for t, m, k, ps in self.callbacks if m == member and t >= since]

    def distinct(self) -> int:
        with self.lock:
            return len({(r.partition, r.offset) for r in self.reads})

    def check_consumed(self, expected: Iterable[int] = range(COUNT)) -> int:
        """Every expected record read at least once, nothing else, and every duplicate read
        after a rebalance handed that partition (again) to the member that re-read it.
        Returns the number of duplicate reads."""
        with self.lock:
            reads = sorted(self.reads, key=lambda r: r.at)
        want = {record(i) for i in expected}
        have = Counter((r.partition, r.key, r.value) for r in reads)
        missing = want - set(have)
        extra = set(have) - want
        assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:3]}"
        assert not extra, f"{len(extra)} unexpected records consumed, e.g. {sorted(extra)[:3]}"
        by_offset: dict[tuple[int, int], list[Read]] = defaultdict(list)
        for r in reads:
            by_offset[(r.partition, r.offset)].append(r)
        duplicates = 0
        for (p, o), rs in by_offset.items():
            assert len({(r.key, r.value) for r in rs}) == 1, f"partition {p} offset {o} changed"
            for before, again in itertools.pairwise(rs):
                duplicates += 1
                handed = self.handed.get((again.member, p), [])
                assert any(before.at < t <= again.at for t in handed), (
                    f"partition {p} offset {o} read by {before.member} and again by {again.member}"
                    " with no rebalance handing the partition over in between"
                )
        return duplicates


# -- members -----------------------------------------------------------------------------------


class Member:
    """One consumer of a group, driven in its own thread (or task); see the subclasses."""

    def __init__(self, name: str, ledger: Ledger) -> None:
        self.name = name
        self.ledger = ledger
        self.assignment: frozenset[int] | None = None  # the client's own view, after each poll
        self.errors: list[str] = []
        self.running = threading.Event()
        self.stopped = threading.Event()
        self._stop = threading.Event()
        self.polls = 0

    # -- lifecycle, shared
    def start(self) -> Member:
        threading.Thread(target=self._main, daemon=True, name=self.name).start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Close the consumer the normal way (a dynamic member leaves the group)."""
        self._stop.set()
        assert self.stopped.wait(timeout), f"{self.name} did not close within {timeout}s"

    @property
    def live(self) -> bool:
        return not self._stop.is_set()

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as e:
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            self.assignment = None
            self.stopped.set()

    def run(self) -> None:
        raise NotImplementedError


class KafkaPythonMember(Member):
    def __init__(self, name: str, ledger: Ledger, bootstrap: str, group: str, **config: Any) -> None:
        super().__init__(name, ledger)
        self.config = {
            "bootstrap_servers": bootstrap,
            "group_id": group,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "fetch_max_wait_ms": 100,
            "heartbeat_interval_ms": 200,
            "session_timeout_ms": 6000,
            "max_poll_interval_ms": 30000,
            "client_id": name,
            **config,
        }

    def run(self) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.errors import CommitFailedError, KafkaError

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.ledger.callback(member.name, "revoked", [(tp.topic, tp.partition) for tp in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.ledger.callback(member.name, "assigned", [(tp.topic, tp.partition) for tp in assigned])

            def on_partitions_lost(self, lost: Any) -> None:
                member.ledger.callback(member.name, "lost", [(tp.topic, tp.partition) for tp in lost])

        consumer = KafkaConsumer(**self.config)
        try:
            # kafka-python 3.0.12 can wedge a leader for good: when its metadata arrives after
            # it assigned (no partitions known yet), it rejoins because its assignment snapshot
            # differs from the metadata; if that join outlives one poll() call, the next poll()
            # sees the snapshots equal, never collects the finished join, and never re-enables
            # heartbeats (the session expires). Knowing the topic before subscribing, and polls
            # long enough for a whole join, keep the tests clear of that client bug.
            assert consumer.partitions_for_topic(self.ledger.topic), "topic metadata unknown"
            consumer.subscribe([self.ledger.topic], listener=Listener())
            self.running.set()
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=1000, max_records=50)
                self.polls += 1
                for tp, msgs in batches.items():
                    for m in msgs:
                        self.ledger.read(self.name, tp.partition, m.offset, m.key, m.value)
                if batches:
                    try:
                        consumer.commit()
                    except (CommitFailedError, KafkaError) as e:
                        self.ledger.commit_failures.append((self.name, type(e).__name__))
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()


class ConfluentMember(Member):
    def __init__(
        self,
        name: str,
        ledger: Ledger,
        bootstrap: str,
        group: str,
        subscription: list[str] | None = None,
        **config: Any,
    ) -> None:
        super().__init__(name, ledger)
        self.subscription = subscription or [ledger.topic]
        self.all_topics: frozenset[str] = frozenset()  # every topic assigned (regex subscriptions)
        self.config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "client.id": name,
            **config,
        }
        if self.config.get("group.protocol") != "consumer":
            self.config.setdefault("heartbeat.interval.ms", 200)
            self.config.setdefault("session.timeout.ms", 6000)
            self.config.setdefault("max.poll.interval.ms", 30000)

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaError, KafkaException

        def tps(parts: Any) -> list[tuple[str, int]]:
            return [(tp.topic, tp.partition) for tp in parts]

        consumer = Consumer(self.config)
        try:
            consumer.subscribe(
                self.subscription,
                on_assign=lambda _c, ps: self.ledger.callback(self.name, "assigned", tps(ps)),
                on_revoke=lambda _c, ps: self.ledger.callback(self.name, "revoked", tps(ps)),
                on_lost=lambda _c, ps: self.ledger.callback(self.name, "lost", tps(ps)),
            )
            self.running.set()
            while not self._stop.is_set():
                msgs = consumer.consume(num_messages=50, timeout=0.1)
                self.polls += 1
                got = False
                for m in msgs:
                    if m.error():
                        if m.error().code() != KafkaError._PARTITION_EOF:
                            self.errors.append(str(m.error()))
                        continue
                    if m.topic() != self.ledger.topic:
                        self.errors.append(f"record of unexpected topic {m.topic()}")
                        continue
                    got = True
                    self.ledger.read(self.name, m.partition(), m.offset(), m.key(), m.value())
                if got:
                    try:
                        consumer.commit(asynchronous=False)
                    except KafkaException as e:
                        self.ledger.commit_failures.append((self.name, str(e.args[0])))
                self.assignment = frozenset(
                    tp.partition for tp in consumer.assignment() if tp.topic == self.ledger.topic
                )
                self.all_topics = frozenset(tp.topic for tp in consumer.assignment())
        finally:
            consumer.close()


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
    def __init__(
        self, name: str, ledger: Ledger, loop: AsyncLoop, bootstrap: str, group: str, **config: Any
    ) -> None:
        super().__init__(name, ledger)
        self.aio = loop
        self.config = {
            "bootstrap_servers": bootstrap,
            "group_id": group,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "fetch_max_wait_ms": 100,
            "heartbeat_interval_ms": 200,
            "session_timeout_ms": 6000,
            "max_poll_interval_ms": 30000,
            "client_id": name,
            **config,
        }

    def start(self) -> Member:
        self.future = self.aio.submit(self._amain())
        return self

    async def _amain(self) -> None:
        try:
            await self.arun()
        except BaseException as e:
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            self.assignment = None
            self.stopped.set()

    async def arun(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.errors import CommitFailedError, KafkaError

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.ledger.callback(member.name, "revoked", [(tp.topic, tp.partition) for tp in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.ledger.callback(member.name, "assigned", [(tp.topic, tp.partition) for tp in assigned])

        consumer = AIOKafkaConsumer(**self.config)
        await consumer.start()
        try:
            consumer.subscribe([self.ledger.topic], listener=Listener())
            self.running.set()
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=100, max_records=50)
                self.polls += 1
                for tp, msgs in batches.items():
                    for m in msgs:
                        self.ledger.read(self.name, tp.partition, m.offset, m.key, m.value)
                if batches:
                    try:
                        await consumer.commit()
                    except (CommitFailedError, KafkaError) as e:
                        self.ledger.commit_failures.append((self.name, type(e).__name__))
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            await consumer.stop()


# -- the scenario ------------------------------------------------------------------------------


def partitioned_exactly(members: Iterable[Member], per_member: int | None = PARTITIONS // 3) -> bool:
    """The members' own views split the 6 partitions exactly (no overlap, nothing missing)."""
    views = [m.assignment for m in members]
    if any(v is None for v in views):
        return False
    if per_member is not None and any(len(v) != per_member for v in views):  # type: ignore[arg-type]
        return False
    union: set[int] = set()
    for v in views:
        if union & v:  # type: ignore[operator]
            return False
        union |= v  # type: ignore[operator]
    return union == ALL


def wait_partitioned(
    members: list[Member], what: str, *, settle: float = 0.6, per_member: int | None = PARTITIONS // 3
) -> dict[str, frozenset[int]]:
    """Wait until the members split the partitions exactly, and stay so for `settle` seconds."""

    def check() -> bool:
        for m in members:
            assert not m.errors, f"{m.name}: {m.errors}"
        return partitioned_exactly(members, per_member)

    deadline = time.monotonic() + STABLE_TIMEOUT
    while True:
        try:
            wait_until(check, max(0.1, deadline - time.monotonic()), what)
        except AssertionError as e:
            views = {m.name: sorted(m.assignment) if m.assignment is not None else None for m in members}
            raise AssertionError(f"{e}; the members see {views}") from None
        views = {m.name: m.assignment for m in members}
        time.sleep(settle)
        if check() and {m.name: m.assignment for m in members} == views:
            return views  # type: ignore[return-value]
        assert time.monotonic() < deadline, f"{what}: assignments kept changing"


@dataclass
class ScenarioResult:
    ledger: Ledger
    first: dict[str, frozenset[int]]
    second: dict[str, frozenset[int]]
    duplicates: int
    members: list[Member]


def run_group_scenario(
    gw: GatewayProcess,
    topic: str,
    group: str,
    make_member: Callable[[str, Ledger], Member],
    *,
    per_member: int | None = PARTITIONS // 3,
    committed: Callable[[], dict[int, int]] | None = None,
) -> ScenarioResult:
    """The common group story; see the module docstring. `committed()` returns the group's
    committed offsets per partition of `topic` (default: kafka-python's admin client)."""
    ledger = Ledger(topic)
    producer = PacedProducer(gw, topic)
    producer.start()
    a, b, c = (make_member(n, ledger).start() for n in ("m1", "m2", "m3"))
    members: list[Member] = [a, b, c]
    try:
        first = wait_partitioned([a, b, c], "three members to split the partitions", per_member=per_member)
        producer.go()
        wait_until(
            lambda: producer.sent >= COUNT // 3 and ledger.distinct() >= COUNT // 4,
            CONSUME_TIMEOUT,
            "a third of the records produced and a quarter consumed",
        )
        assert producer.error is None, producer.error
        # mid-stream: m1 leaves, m4 joins, while the producer still has records to write
        assert not producer.finished, "the producer finished before the membership change"
        a.stop()
        d = make_member("m4", ledger).start()
        members.append(d)
        second = wait_partitioned([b, c, d], "m2, m3 and m4 to split the partitions", per_member=per_member)
        assert not a.errors, a.errors
        wait_until(lambda: producer.finished or producer.error, CONSUME_TIMEOUT, "the producer")
        assert producer.error is None, producer.error
        wait_until(lambda: ledger.distinct() >= COUNT, CONSUME_TIMEOUT, "every record to be consumed")
        fetch = committed or (lambda: committed_offsets(gw, group, topic))
        wait_until(
            lambda: fetch() == dict.fromkeys(range(PARTITIONS), PER_PARTITION),
            20,
            "the committed offsets to reach the end offsets",
            interval=0.3,
        )
        for m in (b, c, d):
            assert not m.errors, f"{m.name}: {m.errors}"
        # the membership did not change again while the rest of the stream was consumed
        assert {m.name: m.assignment for m in (b, c, d)} == second
        duplicates = ledger.check_consumed()
    finally:
        for m in members:
            if m.live:
                m.stop()
    for m in members:
        assert not m.errors, f"{m.name}: {m.errors}"
    return ScenarioResult(ledger, first, second, duplicates, members)


def read_all(gw: GatewayProcess, topic: str) -> list[tuple[int, int, bytes, bytes]]:
    """Every record of `topic` as (partition, offset, key, value), by manual assignment."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": gw.bootstrap,
            "group.id": "e2e-read-all",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        lo_hi = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(PARTITIONS)
        ]
        total = sum(hi - lo for lo, hi in lo_hi)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got: list[tuple[int, int, bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < total and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                assert not m.error(), m.error()
                got.append((m.partition(), m.offset(), m.key(), m.value()))
    finally:
        consumer.close()
    return sorted(got)


def requests_seen(gw: GatewayProcess, api: str) -> set[str]:
    """Versions of `api` the gateway has answered (its Prometheus endpoint must be on)."""
    prefix = f'groupshift_requests_total{{api="{api}",version="'
    return {
        line[len(prefix) :].split('"', 1)[0] for line in gw.metrics().splitlines() if line.startswith(prefix)
    }


def committed_offsets(gw: GatewayProcess, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets of `topic` through kafka-python's admin client (OffsetFetch)."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap, request_timeout_ms=10000)
    try:
        offsets = admin.list_group_offsets({group: None})
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets[group].items() if tp.topic == topic}
