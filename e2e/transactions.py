"""Exactly-once copying through groupshift in upstream mode (issue 29, docs/transactions.md).

`check_exactly_once_copy` runs two Java transactional copiers (e2e/java_programs/
TransactionalCopier.java: a read_committed consumer, a transactional producer,
`sendOffsetsToTransaction` with the consumer's group metadata) in one group through a
groupshift in front of real Kafka: one KIP-848 member and one classic member, so the group is a
consumer group with a classic member inside. Every few transactions a copier aborts on purpose
and rewinds to the group's committed offsets. While they copy, the KIP-848 copier is SIGKILLed
twice (restarted with the same transactional id, which aborts its open transaction) and
groupshift is SIGKILLed once (restarted on the same port and data directory). Judged:

* the output topic read with read_committed holds every input record exactly once;
* an OffsetFetch poller on groupshift never sees an offset before a copier asked to commit the
  transaction that carried it: offsets of aborted transactions (deliberate, or cut by a kill)
  are never returned; with `require_stable` it is answered UNSTABLE_OFFSET_COMMIT while
  transactions are open.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e.expected import PARTITIONS
from e2e.groups import wait_until
from e2e.harness import GatewayProcess
from e2e.java_compile import Program
from e2e.upstream import Backend, create_replicated_topic
from harness.kafka_dist.java_clients import TOOL_JVM_OPTS, JavaClients, VerifiableProcess
from protocol.client import WireClient, make_request

SOURCE = Path(__file__).parent / "java_programs" / "TransactionalCopier.java"
UNSTABLE_OFFSET_COMMIT = 88


def compile_copier(clients: JavaClients, into: Path) -> Program:
    """The copier's classes: cached beside the jars, else a javac started in the background (it
    runs while the input is produced) into `into`."""
    return Program(SOURCE, clients.dist.classpath, clients.dist.home, into)


class Copier:
    """One TransactionalCopier process; restartable with the same transactional id."""

    def __init__(
        self,
        clients: JavaClients,
        classes: Path,
        bootstrap: str,
        topics: tuple[str, str],
        group: str,
        **kw: str,
    ) -> None:
        self.clients = clients
        self.classes = classes
        self.args = [bootstrap, topics[0], topics[1], group, kw["txn_id"], kw["protocol"], kw["abort_every"]]
        if "properties" in kw:  # a client properties file (security settings)
            self.args.append(kw["properties"])
        self.name = kw["txn_id"]
        self.runs: list[VerifiableProcess] = []

    def start(self) -> Copier:
        self.launch()
        self.runs[-1].wait_for("ready", timeout=60)
        return self

    def launch(self) -> None:
        command = [
            "java",
            *TOOL_JVM_OPTS,
            *self.clients.logging_props,
            "-cp",
            f"{self.classes}:{self.clients.dist.classpath}",
            "TransactionalCopier",
            *self.args,
        ]
        n = len(self.runs)
        self.runs.append(VerifiableProcess(command, self.clients.workdir / f"{self.name}-{n}.stderr"))

    def kill(self) -> None:
        self.runs[-1].kill()

    def stop(self) -> None:
        for run in self.runs:
            run.kill()

    def events(self) -> list[dict[str, Any]]:
        out = []
        for run in self.runs:
            run.drain()
            out.extend(run.events)
        return out

    def errors(self) -> list[Any]:
        """Fatal events, or the exit of the running process (a copier never exits by itself)."""
        fatal: list[Any] = [e for e in self.events() if e.get("name") == "fatal"]
        run = self.runs[-1]
        if run.process.poll() is not None:
            fatal.append(f"exited {run.process.returncode}: {run.stderr_tail(5)}")
        return fatal


class OffsetPoller(threading.Thread):
    """OffsetFetch on groupshift every 20 ms, alternating `require_stable` off and on; every
    offset answered kept as (time ms, partition, offset), UNSTABLE_OFFSET_COMMIT answers
    counted. Connection errors (groupshift killed) are retried."""

    def __init__(self, port: int, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.port, self.group, self.topic = port, group, topic
        self.seen: list[tuple[int, int, int]] = []
        self.latest: dict[int, int] = {}
        self.unstable = 0
        self.halt = threading.Event()

    def _request(self, require_stable: bool) -> Any:
        return make_request(
            9,
            8,
            groups=[
                {
                    "group_id": self.group,
                    "topics": [{"name": self.topic, "partition_indexes": list(range(PARTITIONS))}],
                }
            ],
            require_stable=require_stable,
        )

    def run(self) -> None:
        requests = (self._request(False), self._request(True))
        n = 0
        while not self.halt.is_set():
            try:
                with WireClient(self.port) as c:
                    while not self.halt.is_set():
                        n += 1
                        resp = c.request(requests[n % 2])
                        now = int(time.time() * 1000)
                        for t in resp.groups[0].topics:
                            for p in t.partitions:
                                o, code = int(p.committed_offset), int(p.error_code)
                                if code == UNSTABLE_OFFSET_COMMIT:
                                    self.unstable += 1
                                elif code == 0 and o >= 0:
                                    self.seen.append((now, int(p.partition_index), o))
                                    self.latest[int(p.partition_index)] = o
                        time.sleep(0.02)
            except (OSError, EOFError, ConnectionError, TimeoutError):
                time.sleep(0.1)


def _produce_input(bootstrap: str, topic: str, count: int) -> collections.Counter[bytes]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values: collections.Counter[bytes] = collections.Counter()
    for i in range(count):
        value = f"record-{i}".encode()
        p.produce(topic, value=value, partition=i % PARTITIONS)
        values[value] += 1
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return values


def _read_committed(bootstrap: str, topic: str) -> collections.Counter[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-verifier",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: collections.Counter[bytes] = collections.Counter()
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(m.partition())
                    continue
                raise AssertionError(str(m.error()))
            got[m.value() or b""] += 1
    finally:
        c.close()
    assert len(at_end) == PARTITIONS, "output not read to its end"
    return got


def check_exactly_once_copy(
    start_gateway: Callable[[], GatewayProcess],
    backend: Backend,
    clients: JavaClients,
    workdir: Path,
    name: str,
    records: int = 3000,
) -> GatewayProcess:
    source, sink, group = f"{name}-in", f"{name}-out", f"{name}-copier"
    program = compile_copier(clients, workdir / "copier-classes")
    gw = start_gateway()
    for topic in (source, sink):
        create_replicated_topic(backend.bootstrap, topic, backend.brokers)
    expected = _produce_input(backend.bootstrap, source, records)
    per_partition = {p: len(range(p, records, PARTITIONS)) for p in range(PARTITIONS)}
    classes = program.classes()
    poller = OffsetPoller(gw.port, group, source)
    poller.start()

    def copier(txn_id: str, protocol: str) -> Copier:
        return Copier(
            clients,
            classes,
            gw.bootstrap,
            (source, sink),
            group,
            txn_id=txn_id,
            protocol=protocol,
            abort_every="7",
        )

    kip848 = copier(f"{name}-848", "consumer")
    classic = copier(f"{name}-classic", "classic")
    copiers = (kip848, classic)
    for c in copiers:  # the two JVMs start side by side
        c.launch()
    for c in copiers:
        c.runs[-1].wait_for("ready", timeout=60)

    def progressed(fraction: float) -> Callable[[], bool]:
        def check() -> bool:
            for c in copiers:
                assert not c.errors(), f"{c.name}: {c.errors()}"
            return sum(poller.latest.values()) >= fraction * records

        return check

    try:
        for fraction in (0.2, 0.4):
            wait_until(progressed(fraction), 60, f"{fraction:.0%} copied", interval=0.1)
            kip848.kill()
            kip848.start()
        wait_until(progressed(0.6), 60, "60% copied", interval=0.1)
        gw.kill()
        time.sleep(0.5)
        gw = start_gateway()
        wait_until(progressed(1.0), 90, "every input offset committed", interval=0.2)
        assert poller.latest == per_partition
    finally:
        poller.halt.set()
        for c in copiers:
            c.stop()
    poller.join(5)

    # 1. exactly once in the output, read_committed
    got = _read_committed(backend.bootstrap, sink)
    missing = expected - got
    duplicated = {v: n for v, n in got.items() if n > 1}
    assert not missing and not duplicated and set(got) == set(expected), (
        f"missing {sum(missing.values())}, duplicated {len(duplicated)} (e.g. {list(duplicated)[:3]})"
    )
    # 2. no offset returned before a transaction carrying it was asked to commit
    events = [e for c in copiers for e in c.events()]
    committing: dict[tuple[int, int], int] = {}
    aborted = 0
    for e in events:
        if e.get("name") == "aborted":
            aborted += 1
        if e.get("name") == "committing":
            for p, o in e["offsets"].items():
                key = (int(p), int(o))
                committing[key] = min(committing.get(key, e["time"]), e["time"])
    assert aborted >= 3, "the copiers aborted too few transactions to judge"
    early = [(t, p, o) for t, p, o in poller.seen if committing.get((p, o), t + 1) > t]
    assert not early, f"OffsetFetch returned offsets no committed transaction carried: {early[:5]}"
    assert len(poller.seen) > 100
    # 3. require_stable saw transactions open (Kafka's UNSTABLE_OFFSET_COMMIT)
    assert poller.unstable > 0, "OffsetFetch with require_stable never answered UNSTABLE_OFFSET_COMMIT"
    return gw
