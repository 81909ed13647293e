"""Shared scenarios of the upstream-mode e2e tests (`serve --upstream`).

Each scenario takes the gateway (a `GatewayProcess` started with `--upstream`) and a backend
(`Backend`: the upstream's bootstrap plus kill/restart of one of its brokers) and drives real
clients: kafka-python (classic protocol) and confluent-kafka (librdkafka, `group.protocol`
classic or consumer). The same scenarios run against a second groupshift process in embedded
mode (always available) and against real Apache Kafka clusters (`test_upstream_kafka.py`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from e2e.expected import PARTITIONS, record
from e2e.groups import ConfluentMember, KafkaPythonMember, Ledger, create_topic, produce, wait_until
from e2e.harness import GatewayProcess
from protocol.client import WireClient, make_request

FAST_UPSTREAM_SETTINGS = (
    "group.initial.rebalance.delay.ms=0",
    "group.streams.initial.rebalance.delay.ms=0",
    "group.streams.assignment.interval.ms=0",
    "group.min.session.timeout.ms=1000",
    "group.consumer.min.heartbeat.interval.ms=100",
    "group.consumer.heartbeat.interval.ms=250",
    "group.consumer.min.session.timeout.ms=2000",
    "group.consumer.session.timeout.ms=10000",
    "group.streams.heartbeat.interval.ms=1000",
    "group.streams.session.timeout.ms=6000",
    "upstream.metadata.max.age.ms=1000",
    "upstream.request.timeout.ms=10000",
    "upstream.socket.connection.setup.timeout.ms=2000",
    "metrics.listen=127.0.0.1:0",
)


@dataclass
class Endpoint:
    """Anything with a `bootstrap` (what the shared e2e helpers need of a server)."""

    bootstrap: str


@dataclass
class Backend:
    name: str
    bootstrap: str
    brokers: int
    kill_broker: Callable[[int], None]
    start_broker: Callable[[int], None]

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.bootstrap)


def upstream_ports(backend: Backend) -> set[int]:
    return {int(a.rsplit(":", 1)[1]) for a in backend.bootstrap.split(",")}


def metric(gw: GatewayProcess, name: str) -> float:
    total = 0.0
    for line in gw.metrics().splitlines():
        if line.startswith(name) and (len(line) == len(name) or line[len(name)] in " {"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def upstream_offsets(backend: Backend, group: str, topic: str) -> dict[int, int]:
    """The group's offsets as the upstream cluster itself reports them (OffsetFetch there)."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=backend.bootstrap, request_timeout_ms=10000)
    try:
        # Java's Admin retries a retriable group error (COORDINATOR_LOAD_IN_PROGRESS while a
        # shard reloads after a fleet rebalance, NOT_COORDINATOR) until default.api.timeout.ms,
        # 60 s; kafka-python's raises at once, so this asks again as Java's would.
        deadline = time.monotonic() + 60
        while True:
            try:
                offsets = admin.list_group_offsets({group: None})
                break
            except KafkaError as e:
                if not e.retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.get(group, {}).items() if tp.topic == topic}


def gateway_offsets(gw: GatewayProcess, group: str, topic: str) -> dict[int, int]:
    return upstream_offsets(Backend("gw", gw.bootstrap, 1, lambda i: None, lambda i: None), group, topic)


def create_replicated_topic(bootstrap: str, topic: str, replicas: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, min(replicas, 3))])[topic].result(30)


def run_until(members: list[Any], ledger: Ledger, want: int, timeout: float) -> None:
    def done() -> bool:
        for m in members:
            assert not m.errors, f"{m.name}: {m.errors}"
        return ledger.distinct() >= want

    wait_until(done, timeout, f"{want} distinct records consumed", interval=0.2)


# -- scenarios ---------------------------------------------------------------------------------


def check_metadata_and_versions(gw: GatewayProcess, backend: Backend) -> None:
    """Clients see only groupshift's listeners; ApiVersions is the documented mix."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": gw.bootstrap}).list_topics(timeout=10)
    ports = {b.port for b in md.brokers.values()}
    assert len(md.brokers) == backend.brokers
    assert not ports & upstream_ports(backend), "an upstream address leaked to the client"
    assert all(b.host == "127.0.0.1" for b in md.brokers.values())
    with WireClient(gw.port) as c:
        resp = c.request(make_request(18, 3, client_software_name="e2e", client_software_version="1"))
    keys = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys}
    for forwarded in (0, 1, 2, 3, 19):
        assert forwarded in keys, f"api {forwarded} not advertised"
    for terminated in (11, 12, 13, 14, 8, 9, 68):
        assert terminated in keys, f"group api {terminated} not advertised"
    # Transactional offset commits: advertised exactly when the cluster serves AddOffsetsToTxn
    # and TxnOffsetCommit (docs/transactions.md); a groupshift backend serves neither.
    with WireClient(min(upstream_ports(backend))) as c:
        up = c.request(make_request(18, 3, client_software_name="e2e", client_software_version="1"))
    served = {25, 28} <= {int(a.api_key) for a in up.api_keys}
    assert (28 in keys and 25 in keys) == served, f"AddOffsetsToTxn/TxnOffsetCommit advertised: {keys}"
    request = make_request(
        28,
        3,
        transactional_id="t",
        group_id="g",
        producer_id=1,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": "x",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 5,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    )
    with WireClient(gw.port) as c:
        txn = c.request(request)
    # topic "x" does not exist: Kafka's UNKNOWN_TOPIC_OR_PARTITION; not served: UNSUPPORTED_VERSION
    assert [p.error_code for t in txn.topics for p in t.partitions] == [3 if served else 35]
    # Group listings are groupshift's own: a group that exists only on the cluster is not shown.
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    create_replicated_topic(backend.bootstrap, "upstream-only-topic", backend.brokers)
    direct = KafkaConsumer(
        bootstrap_servers=backend.bootstrap, group_id="upstream-only", enable_auto_commit=False
    )
    try:
        direct.commit({TopicPartition("upstream-only-topic", 0): OffsetAndMetadata(0, "", -1)})
    finally:
        direct.close()
    admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap, request_timeout_ms=10000)
    try:
        assert "upstream-only" not in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()
    check_group_listing(gw, backend)


def check_group_listing(gw: GatewayProcess, backend: Backend) -> None:
    """Each broker listener lists the groups FindCoordinator sends to it, as a Kafka broker
    lists those it coordinates: an admin client asks every broker, and kafka-python puts the
    answers together as they come, so a group listed everywhere would be listed once per
    broker."""
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    create_replicated_topic(gw.bootstrap, "listing-topic", backend.brokers)
    names = [f"listing-{i}" for i in range(8)]
    for name in names:
        c = KafkaConsumer(bootstrap_servers=gw.bootstrap, group_id=name, enable_auto_commit=False)
        try:
            c.commit({TopicPartition("listing-topic", 0): OffsetAndMetadata(1, "", -1)})
        finally:
            c.close()
    admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap, request_timeout_ms=10000)
    try:
        listed = [g["group_id"] for g in admin.list_groups() if g["group_id"] in names]
    finally:
        admin.close()
    assert sorted(listed) == names, listed
    brokers = AdminClient({"bootstrap.servers": gw.bootstrap}).list_topics(timeout=10).brokers
    assert len(brokers) == backend.brokers
    per_listener: dict[int, set[str]] = {}
    for node, b in brokers.items():
        with WireClient(b.port) as c:
            resp = c.request(make_request(16, 4, states_filter=[]))
        per_listener[node] = {g.group_id for g in resp.groups} & set(names)
    with WireClient(gw.port) as c:
        found = c.request(make_request(10, 4, key_type=0, coordinator_keys=names))
    coordinator = {e.key: int(e.node_id) for e in found.coordinators}
    assert sum(len(gs) for gs in per_listener.values()) == len(names), per_listener
    assert {g: n for n, gs in per_listener.items() for g in gs} == coordinator
    with WireClient(gw.port) as c:  # the main listener is no broker of the metadata: all of them
        assert set(names) <= {g.group_id for g in c.request(make_request(16, 4, states_filter=[])).groups}


def check_roundtrip(gw: GatewayProcess, backend: Backend, topic: str) -> None:
    """Produce through the gateway; a KIP-848 and a classic group both consume everything;
    their commits are mirrored to the upstream."""
    create_replicated_topic(gw.bootstrap, topic, backend.brokers)
    count = 600
    produce(Endpoint(gw.bootstrap), topic, range(count))  # type: ignore[arg-type]
    for name, member_of in (
        (
            "kip848",
            lambda led, g: ConfluentMember("ck848", led, gw.bootstrap, g, **{"group.protocol": "consumer"}),
        ),
        ("classic", lambda led, g: KafkaPythonMember("kp", led, gw.bootstrap, g)),
    ):
        group = f"{topic}-{name}"
        ledger = Ledger(topic)
        member = member_of(ledger, group).start()
        try:
            run_until([member], ledger, count, 60)
            ledger.check_consumed(range(count))
        finally:
            member.stop()
        expected = {p: count // PARTITIONS for p in range(PARTITIONS)}
        assert gateway_offsets(gw, group, topic) == expected

        def mirrored(group: str = group, expected: dict[int, int] = expected) -> bool:
            return upstream_offsets(backend, group, topic) == expected

        wait_until(mirrored, 20, f"{group} mirrored upstream", interval=0.5)


def check_cutover(
    gw: GatewayProcess, backend: Backend, topic: str, one_record_per_batch: bool = False
) -> None:
    """A classic fleet committed directly on the upstream; restarted against groupshift it
    resumes from those commits (imported on the group's first appearance).

    `one_record_per_batch`: for backends that cannot fetch from an offset inside a record batch
    (Tansu 0.6 answers such a fetch with no records, directly as through groupshift)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    group = f"{topic}-cutover"
    create_topic(backend.endpoint, topic)  # type: ignore[arg-type]
    if one_record_per_batch:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": backend.bootstrap, "linger.ms": 0})
        for i in range(120):
            part, k, v = record(i)
            producer.produce(topic, key=k, value=v, partition=part)
            assert producer.flush(10) == 0
    else:
        produce(backend.endpoint, topic, range(120))  # type: ignore[arg-type]
    direct = KafkaConsumer(bootstrap_servers=backend.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        direct.commit({TopicPartition(topic, p): OffsetAndMetadata(7 + p, "", -1) for p in range(PARTITIONS)})
    finally:
        direct.close()
    assert upstream_offsets(backend, group, topic) == {p: 7 + p for p in range(PARTITIONS)}
    ledger = Ledger(topic)
    member = KafkaPythonMember("kp-cutover", ledger, gw.bootstrap, group).start()
    try:
        run_until([member], ledger, 120 - sum(7 + p for p in range(PARTITIONS)), 60)
    finally:
        member.stop()
    first = {}
    for r in sorted(ledger.reads, key=lambda r: r.offset):
        first.setdefault(r.partition, r.offset)
    assert first == {p: 7 + p for p in range(PARTITIONS)}, "did not resume from the upstream commits"
    assert ledger.distinct() == 120 - sum(7 + p for p in range(PARTITIONS))
    events = gw.events("upstream.offsets_imported")
    assert any(e["group_id"] == group and e["partitions"] == PARTITIONS for e in events)


def check_conflict(gw: GatewayProcess, backend: Backend, topic: str) -> None:
    """A live classic group of the same id on the upstream refuses the mirror: counted and
    logged; groupshift's commits are unaffected; once that group is gone the mirror lands."""
    from confluent_kafka import Consumer, TopicPartition

    group = f"{topic}-conflict"
    create_topic(Endpoint(gw.bootstrap), topic)  # type: ignore[arg-type]
    produce(Endpoint(gw.bootstrap), topic, range(60))  # type: ignore[arg-type]
    # First appearance through the gateway (nothing to import), then a live group upstream.
    gateway_offsets(gw, group, topic)
    # The live upstream member is librdkafka's classic consumer, polled by one thread only.
    # kafka-python 3.0.12 sometimes stalls here: after a first generation with an empty
    # assignment (its metadata not yet holding the just-created topic) it rejoins, gets every
    # partition, and then sends nothing more (no OffsetFetch, no Fetch) for 30 s.
    direct = Consumer(
        {
            "bootstrap.servers": backend.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    assigned = threading.Event()
    direct.subscribe([topic], on_assign=lambda _c, parts: assigned.set() if parts else None)
    stop = threading.Event()

    def keep_alive() -> None:
        while not stop.is_set():
            direct.poll(0.2)

    t = threading.Thread(target=keep_alive, daemon=True)
    t.start()
    wait_until(assigned.is_set, 30, "live upstream group")
    before = metric(gw, "groupshift_upstream_mirror_conflicts_total")
    c = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, 3) for p in range(PARTITIONS)], asynchronous=False)
        assert {
            tp.partition: tp.offset
            for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        } == {p: 3 for p in range(PARTITIONS)}
        wait_until(
            lambda: metric(gw, "groupshift_upstream_mirror_conflicts_total") > before, 20, "conflict counted"
        )
        assert any(e["group_id"] == group for e in gw.events("upstream.mirror_conflict"))
        assert upstream_offsets(backend, group, topic).get(0) != 3
    finally:
        c.close()
        stop.set()
        t.join(5)
        direct.close()  # LeaveGroup: the upstream group becomes empty
    wait_until(
        lambda: upstream_offsets(backend, group, topic) == {p: 3 for p in range(PARTITIONS)},
        30,
        "the mirror landing once the upstream group left",
        interval=0.5,
    )


def check_broker_restart(
    gw: GatewayProcess, backend: Backend, topic: str, victim: int, down_seconds: float = 4.0
) -> None:
    """A KIP-848 and a classic member consume through the gateway while records are produced;
    one upstream broker is killed and restarted; every acknowledged record is consumed."""
    from confluent_kafka import Producer

    create_replicated_topic(gw.bootstrap, topic, backend.brokers)
    group = f"{topic}-faults"
    ledger = Ledger(topic)
    members = [
        ConfluentMember("ck848", ledger, gw.bootstrap, group, **{"group.protocol": "consumer"}).start(),
        KafkaPythonMember("kp", ledger, gw.bootstrap, group).start(),
    ]
    acked: set[int] = set()
    errors: list[str] = []
    stop = threading.Event()

    def produce_loop() -> None:
        p = Producer(
            {"bootstrap.servers": gw.bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000}
        )
        i = 0
        while not stop.is_set():
            part, k, v = record(i)

            def cb(err: Any, _m: Any, i: int = i) -> None:
                if err is None:
                    acked.add(i)
                else:
                    errors.append(str(err))

            p.produce(topic, key=k, value=v, partition=part, on_delivery=cb)
            p.poll(0)
            i += 1
            time.sleep(0.005)
        p.flush(60)

    producer = threading.Thread(target=produce_loop, daemon=True)
    producer.start()
    try:
        wait_until(lambda: ledger.distinct() >= 100, 60, "consumption under way", interval=0.2)
        backend.kill_broker(victim)
        time.sleep(down_seconds)
        backend.start_broker(victim)
        time.sleep(3)
    finally:
        stop.set()
        producer.join(90)
    want = set(acked)
    assert len(want) >= 200
    try:
        wait_until(
            lambda: {int(re.sub(rb"\D", b"", r.key or b"0")) for r in ledger.reads} >= want,
            90,
            "every acked record consumed",
            interval=0.5,
        )
    finally:
        for m in members:
            m.stop()
    keys = {int(re.sub(rb"\D", b"", r.key or b"0")) for r in ledger.reads}
    assert want <= keys
    assert gw.alive()


def check_delete_group(gw: GatewayProcess, backend: Backend, topic: str) -> None:
    """DeleteGroups through the gateway deletes the mirrored copy on the upstream too, so the
    next group of that id starts fresh instead of importing the deleted offsets."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    group = f"{topic}-delete"
    create_replicated_topic(gw.bootstrap, topic, backend.brokers)
    c = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, 2) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        c.close()
    wait_until(
        lambda: upstream_offsets(backend, group, topic) == {p: 2 for p in range(PARTITIONS)},
        20,
        "mirrored",
        0.3,
    )
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})  # kept alive until the answer
    admin.delete_consumer_groups([group])[group].result(15)
    assert gateway_offsets(gw, group, topic) == {}
    wait_until(lambda: upstream_offsets(backend, group, topic) == {}, 20, "the upstream copy deleted", 0.3)
    assert any(e["group_id"] == group for e in gw.events("upstream.group_deleted"))


def start_fixed_gateway(base: Any, backend: Backend, port: int) -> GatewayProcess:
    """A gateway on a fixed port (its broker listeners at port + 1 + node id), so a restarted
    process is found where clients left it."""
    return GatewayProcess.start(
        base,
        sets=FAST_UPSTREAM_SETTINGS,
        log_path=base.parent / f"{base.name}-gateway.log",
        extra_args=("--upstream", backend.bootstrap, "--listen", f"127.0.0.1:{port}"),
    )


def check_gateway_killed(start: Callable[[], GatewayProcess], backend: Backend, topic: str) -> GatewayProcess:
    """groupshift SIGKILLed and restarted under a mixed group (one KIP-848 member, one classic)
    while records are produced through the cluster: every acknowledged record is consumed,
    the group resumes from groupshift's own log, and the mirror catches up afterwards."""
    from confluent_kafka import Producer

    gw = start()
    create_replicated_topic(backend.bootstrap, topic, backend.brokers)
    group = f"{topic}-gwkill"
    ledger = Ledger(topic)
    members = [
        ConfluentMember("ck848", ledger, gw.bootstrap, group, **{"group.protocol": "consumer"}).start(),
        # librdkafka for the classic member too: kafka-python 3.0.12 raises ECONNREFUSED out of
        # poll() when its only bootstrap server is down, which ends the member's loop.
        ConfluentMember("ckclassic", ledger, gw.bootstrap, group).start(),
    ]
    acked: set[int] = set()
    stop = threading.Event()

    def produce_loop() -> None:
        p = Producer({"bootstrap.servers": backend.bootstrap, "acks": "all", "linger.ms": 5})
        i = 0
        while not stop.is_set():
            part, k, v = record(i)
            p.produce(topic, key=k, value=v, partition=part, on_delivery=lambda e, _m, i=i: e or acked.add(i))
            p.poll(0)
            i += 1
            time.sleep(0.005)
        p.flush(60)

    producer = threading.Thread(target=produce_loop, daemon=True)
    producer.start()
    try:
        wait_until(lambda: ledger.distinct() >= 100, 60, "consumption under way", interval=0.2)
        gw.kill()
        time.sleep(1)
        gw = start()
        before = ledger.distinct()
        wait_until(lambda: ledger.distinct() >= before + 100, 60, "consumption after the restart", 0.2)
    finally:
        stop.set()
        producer.join(60)

    def keys() -> set[int]:
        return {int((r.key or b"key-0").split(b"-")[1]) for r in ledger.reads}

    try:
        wait_until(lambda: keys() >= acked, 90, "every acked record consumed", interval=0.5)
    finally:
        for m in members:
            m.stop()
    for m in members:
        assert not m.errors, f"{m.name}: {m.errors}"
    committed = gateway_offsets(gw, group, topic)
    assert sum(committed.values()) >= len(acked) - 50 * PARTITIONS
    wait_until(lambda: upstream_offsets(backend, group, topic) == committed, 30, "mirror caught up", 0.5)
    return gw


def check_java_consumer_and_lag_tool(gw: GatewayProcess, backend: Backend, clients: Any, topic: str) -> None:
    """Kafka's Java consumer with `group.protocol=consumer` (KIP-848) consumes everything
    through groupshift from a cluster without KIP-848; `kafka-consumer-groups --describe` run
    against the cluster itself then shows the group's mirrored offsets with no lag."""
    group = f"{topic}-java"
    count = 300
    create_replicated_topic(gw.bootstrap, topic, backend.brokers)
    produce(Endpoint(gw.bootstrap), topic, range(count))  # type: ignore[arg-type]
    consumed = 0
    with clients.verifiable_consumer(gw.bootstrap, topic, group, group_protocol="consumer") as consumer:
        deadline = time.monotonic() + 90
        while consumed < count:
            event = consumer.wait_for("records_consumed", timeout=max(1.0, deadline - time.monotonic()))
            consumed += int(event["count"])
        consumer.wait_for("offsets_committed", timeout=30, predicate=lambda e: bool(e.get("success")))
        consumer.stop()
    assert consumed >= count
    expected = {p: count // PARTITIONS for p in range(PARTITIONS)}
    wait_until(lambda: gateway_offsets(gw, group, topic) == expected, 30, "Java commits in groupshift", 0.5)
    wait_until(lambda: upstream_offsets(backend, group, topic) == expected, 30, "mirrored upstream", 0.5)
    result = clients.consumer_groups(backend.bootstrap, "--describe", "--group", group)
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.split()[:2] == [group, topic]]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
    assert {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in rows} == {
        p: (n, n, 0) for p, n in expected.items()
    }, result.stdout


def log_end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-watermarks"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        }
    finally:
        c.close()


def check_rolling_upgrade_then_downgrade(
    gw: GatewayProcess, topic: str, kind: str = "kafka-python-cooperative-sticky"
) -> None:
    """The embedded migration test's rolling upgrade then downgrade (e2e/test_migration_rolling.py)
    through groupshift in front of a cluster: four classic members replaced one at a time by
    KIP-848 members and back, with a producer writing continuously; after each step the group
    is stable and evenly split and every acknowledged record is consumed; at the end no
    partition was held twice at once, duplicates stay within the at-least-once window and
    commits reached the log end (e2e/migration.py's checkers)."""
    from e2e import migration

    group = f"{topic}-group"
    migration.create_topic(gw, topic)
    timeline = migration.Timeline(topic)
    producer = migration.ContinuousProducer(gw, topic, 150.0)
    producer.start()
    cast = migration.Cast(gw, group, timeline)
    sc = migration.Scenario(gw, topic, group, timeline, producer, cast)
    try:
        classic = [cast.classic(kind) for _ in range(4)]
        sc.step("classic", f"four {kind} members")
        upgraded = []
        for i, old in enumerate(classic):
            upgraded.append(cast.confluent("consumer"))
            sc.step("consumer", f"upgrade {i + 1}/4: {upgraded[-1].name} joined")
            old.stop()
            sc.step("consumer", f"upgrade {i + 1}/4: {old.name} left")
        downgraded = []
        for i, old in enumerate(upgraded):
            downgraded.append(cast.classic(kind))
            sc.step("consumer", f"downgrade {i + 1}/4: {downgraded[-1].name} joined")
            old.stop()
            sc.step("classic" if i == 3 else "consumer", f"downgrade {i + 1}/4: {old.name} left")
        assert sc.conversions() == [("classic", "consumer"), ("consumer", "classic")]
        # Scenario.finish, with the log end read from each partition's leader (the gateway's
        # main listener forwards ListOffsets to one broker, which answers only for its own).
        acked = producer.stop()
        migration.wait_caught_up(timeline, producer, "the final drain")
        end = log_end_offsets(gw.bootstrap, topic, migration.PARTITIONS)
        wait_until(
            lambda: migration.committed_offsets(gw, group, topic) == end, 45, "commits at the log end", 0.3
        )
        cast.stop_all()
        report = migration.analyse(timeline, acked, migration.fences(gw, group))
        print(f"upstream rolling {kind}: {report}")
        assert report.handovers >= 16
    finally:
        producer._halt.set()
        try:
            cast.stop_all()
        finally:
            producer.join(90)


def check_broker_leaves_and_returns(gw: GatewayProcess, backend: Backend, victim: int) -> None:
    """A broker that leaves the cluster's metadata disappears from the gateway's Metadata, and
    reappears (on the same local listener) when it is back: picked up by the periodic refresh."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    def brokers() -> set[int] | None:
        admin = AdminClient({"bootstrap.servers": gw.bootstrap})
        try:
            return set(admin.list_topics(timeout=10).brokers)
        except KafkaException:
            return None  # this connection happened to go to the dead broker: ask again

    everyone = brokers()
    assert everyone is not None and victim in everyone
    port_before = {e["node_id"]: e["port"] for e in gw.events("upstream.listening")}[victim]
    backend.kill_broker(victim)
    try:
        wait_until(
            lambda: (b := brokers()) is not None and victim not in b,
            60,
            f"broker {victim} gone from the metadata",
            1.0,
        )
        # The client may see a forwarded Metadata answer before groupshift's own refresh ran.
        wait_until(
            lambda: metric(gw, "groupshift_upstream_brokers") == len(everyone) - 1,
            30,
            "groupshift's broker gauge updated",
            0.5,
        )
    finally:
        backend.start_broker(victim)
    wait_until(lambda: brokers() == everyone, 60, f"broker {victim} back in the metadata", 1.0)
    assert {e["node_id"]: e["port"] for e in gw.events("upstream.listening")}[victim] == port_before
    assert any(victim in e["removed"] for e in gw.events("upstream.brokers_changed"))


# -- KIP-951 leader hints over the wire ---------------------------------------------------------


def _partition_leader(gw_port: int, topic: str) -> tuple[int, list[int], Any, int]:
    """(leader id, replica ids, topic id, leader epoch) of partition 0, from a Metadata answer
    of the gateway."""
    with WireClient(gw_port, timeout=10) as c:
        md = c.request(
            make_request(
                3, 12, topics=[{"name": topic, "topic_id": None}], allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )  # fmt: skip
    (t,) = md.topics
    found = [p for p in t.partitions if p.partition_index == 0]
    if not found:  # not yet in the answering broker's metadata cache
        return -1, [], t.topic_id, -1
    p = found[0]
    return int(p.leader_id), [int(r) for r in p.replica_nodes], t.topic_id, int(p.leader_epoch)


def _produce_to(port: int, topic: str, value: bytes) -> Any:
    from records.batch import build_batch

    batch = build_batch([(b"hint", value)], timestamp_ms=int(time.time() * 1000))
    with WireClient(port, timeout=15) as c:
        return c.request(
            make_request(
                0, 11, transactional_id=None, acks=-1, timeout=10000,
                topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            )
        )  # fmt: skip


def _fetch_from(port: int, topic_id: Any, leader_epoch: int) -> Any:
    with WireClient(port, timeout=15) as c:
        return c.request(
            make_request(
                1, 16, cluster_id=None, replica_state={"replica_id": -1, "replica_epoch": -1},
                max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, forgotten_topics_data=[], rack_id="",
                topics=[
                    {
                        "topic_id": topic_id,
                        "partitions": [
                            {
                                "partition": 0, "current_leader_epoch": leader_epoch, "fetch_offset": 0,
                                "last_fetched_epoch": -1, "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
            )
        )  # fmt: skip


def _assert_hint(
    resp: Any, partition: Any, leader: int, listeners: dict[int, int], upstream: set[int]
) -> None:
    """A NOT_LEADER_OR_FOLLOWER (6) or FENCED_LEADER_EPOCH (74) answer naming `leader`, whose
    endpoint is groupshift's listener."""
    assert int(partition.error_code) in (6, 74), f"expected a leader hint, got {partition}"
    assert int(partition.current_leader.leader_id) == leader, partition.current_leader
    endpoints = {int(e.node_id): (e.host, int(e.port)) for e in resp.node_endpoints}
    assert leader in endpoints, f"no endpoint for the leader {leader}: {resp.node_endpoints}"
    for node, (host, port) in endpoints.items():
        assert port not in upstream, f"upstream address {host}:{port} of broker {node} reached the client"
        assert (host, port) == ("127.0.0.1", listeners[node]), (node, host, port, listeners)


def check_leader_hints(gw: GatewayProcess, backend: Backend, topic: str) -> None:
    """KIP-951: a broker that is not the leader answers Produce (v10+) and Fetch (v16+) with
    NOT_LEADER_OR_FOLLOWER, the current leader and that leader's endpoint. Through groupshift
    the endpoint must be groupshift's listener for that broker. Checked with raw requests sent
    to followers' listeners before and after the leader is killed (leadership moves), while a
    librdkafka producer keeps producing through groupshift; every record it had acknowledged
    is then read back through groupshift."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    assert backend.brokers == 3
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "1"})])[topic].result(30)
    listeners = {e["node_id"]: e["port"] for e in gw.events("upstream.listening")}
    upstream = upstream_ports(backend)

    def produce_hint(port: int, leader: int) -> None:
        resp = _produce_to(port, topic, b"to-a-follower")
        (part,) = resp.responses[0].partition_responses
        _assert_hint(resp, part, leader, listeners, upstream)

    def fetch_hint(port: int, leader: int, topic_id: Any, stale_epoch: int) -> None:
        # Followers serve consumers' Fetch v11+ (KIP-392), so the Fetch hint comes with
        # FENCED_LEADER_EPOCH: a fetch that names an epoch older than the partition's.
        resp = _fetch_from(port, topic_id, stale_epoch)
        (part,) = resp.responses[0].partitions
        _assert_hint(resp, part, leader, listeners, upstream)

    wait_until(lambda: _partition_leader(gw.port, topic)[0] >= 0, 30, "a leader for the new topic", 0.3)
    leader, replicas, topic_id, first_epoch = _partition_leader(gw.port, topic)
    assert sorted(replicas) == [0, 1, 2]
    for follower in (r for r in replicas if r != leader):
        produce_hint(listeners[follower], leader)

    acked: list[int] = []
    failed: list[str] = []
    stop = threading.Event()

    def produce_loop() -> None:
        p = Producer(
            {"bootstrap.servers": gw.bootstrap, "acks": "all", "linger.ms": 2, "message.timeout.ms": 60000}
        )
        i = 0
        while not stop.is_set():

            def cb(err: Any, _m: Any, i: int = i) -> None:
                (failed.append(str(err)) if err is not None else acked.append(i))

            p.produce(topic, value=str(i).encode(), partition=0, on_delivery=cb)
            p.poll(0)
            i += 1
            time.sleep(0.005)
        assert p.flush(60) == 0

    producer = threading.Thread(target=produce_loop, daemon=True)
    producer.start()
    try:
        wait_until(lambda: len(acked) >= 100, 30, "producing through groupshift", 0.2)
        backend.kill_broker(leader)
        try:

            def moved() -> bool:
                try:
                    return _partition_leader(gw.port, topic)[0] not in (leader, -1)
                except (OSError, ConnectionError):
                    return False

            wait_until(moved, 60, "leadership moved off the killed broker", 0.5)
            new_leader, _, _, epoch = _partition_leader(gw.port, topic)
            assert epoch > first_epoch
            third = next(r for r in replicas if r not in (leader, new_leader))
            produce_hint(listeners[third], new_leader)
            for node in (third, new_leader):
                fetch_hint(listeners[node], new_leader, topic_id, first_epoch)
            before = len(acked)
            wait_until(lambda: len(acked) >= before + 100, 60, "producing to the new leader", 0.2)
        finally:
            backend.start_broker(leader)

        # The old leader is back as a follower: it points clients at the new leader too.
        def old_leader_hints() -> bool:
            try:
                resp = _produce_to(listeners[leader], topic, b"to-the-old-leader")
            except (OSError, ConnectionError):
                return False
            part = resp.responses[0].partition_responses[0]
            return int(part.error_code) == 6 and int(part.current_leader.leader_id) == new_leader

        wait_until(old_leader_hints, 60, "the restarted broker answering as a follower", 0.5)
        produce_hint(listeners[leader], new_leader)
        fetch_hint(listeners[leader], new_leader, topic_id, first_epoch)
        before = len(acked)
        wait_until(lambda: len(acked) >= before + 50, 60, "producing after the restart", 0.2)
    finally:
        stop.set()
        producer.join(90)
    assert not failed, failed[:5]
    c = Consumer(
        {"bootstrap.servers": gw.bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False}
    )
    seen: set[int] = set()
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while not set(acked) <= seen and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=1):
                if not m.error() and m.key() is None:
                    seen.add(int(m.value() or b"-1"))
    finally:
        c.close()
    assert set(acked) <= seen, f"{len(set(acked) - seen)} acknowledged records lost"


def check_own_group_settings(backend: Backend, base: Any) -> None:
    """`groupshift groups migration` through groupshift in upstream mode shows groupshift's own
    migration policy (it enforces it), not the upstream broker's (README "In front of your
    cluster"): a gateway set to `upgrade` in front of brokers left at their default."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from e2e.groups_cli import groups_json

    gw = GatewayProcess.start(
        base,
        sets=(*FAST_UPSTREAM_SETTINGS, "group.consumer.migration.policy=upgrade"),
        extra_args=("--upstream", backend.bootstrap),
    )
    try:
        topic, group = f"own-policy-{time.time_ns() % 10**9}", f"own-policy-group-{time.time_ns() % 10**9}"
        create_replicated_topic(backend.bootstrap, topic, backend.brokers)
        producer = Producer({"bootstrap.servers": gw.bootstrap})
        producer.produce(topic, value=b"x")
        assert producer.flush(30) == 0
        consumer = Consumer(
            {"bootstrap.servers": gw.bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            # groupshift validates commits against the cluster's metadata, refreshed every second
            wait_until(
                lambda: _committed(consumer, TopicPartition(topic, 0, 1)), 30, "the commit is accepted"
            )
        finally:
            consumer.close()
        report = groups_json(gw.bootstrap, "migration", group)
        text = str(report)
        assert "'policy': 'upgrade'" in text, report
        assert "migration.policy (not listed" not in text, report
    finally:
        gw.stop()


def _committed(consumer: Any, offset: Any) -> bool:
    from confluent_kafka import KafkaException

    try:
        consumer.commit(offsets=[offset], asynchronous=False)
    except KafkaException:
        return False
    return True


# -- clusters without topic ids (gateway/upstream/topic_ids.py) -------------------------------------


def metadata(port: int, version: int, **values: Any) -> Any:
    """One Metadata request at `version` to a server (flags off; `topics` as given)."""
    flags = {"include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
    with WireClient(port) as c:
        return c.request(make_request(3, version, allow_auto_topic_creation=False, **flags, **values))


def served_topic_ids(port: int, topic: str) -> dict[str, Any]:
    """{name: topic id} of one topic as a Metadata v12 answer names it."""
    import uuid

    md = metadata(port, 12, topics=[{"name": topic, "topic_id": uuid.UUID(int=0)}])
    return {t.name: t.topic_id for t in md.topics}


def check_derived_topic_ids(gw: GatewayProcess, cluster_id: str | None, topic: str) -> dict[str, Any]:
    """Behind a cluster whose Metadata has no topic ids: ApiVersions offers Metadata with ids and
    by-name Fetch only, the topic's id is groupshift's derived one, a lookup by that id answers
    the name and an unknown id UNKNOWN_TOPIC_ID; v1 and v10 answers agree. Returns {topic: id}."""
    import uuid

    from gateway.upstream.topic_ids import derived_topic_id

    with WireClient(gw.port) as c:
        resp = c.request(make_request(18, 3, client_software_name="e2e", client_software_version="1"))
    advertised = {int(a.api_key): int(a.max_version) for a in resp.api_keys}
    assert advertised[3] >= 12, "Metadata must be served with topic ids (v10+) and lookups by id (v12+)"
    assert advertised[1] <= 12, "Fetch must stay at by-name versions"
    assert 68 in advertised and 75 not in advertised
    ids = served_topic_ids(gw.port, topic)
    assert ids == {topic: derived_topic_id(cluster_id, topic)}
    stranger = uuid.uuid4()
    expected = {ids[topic]: (topic, 0, PARTITIONS), stranger: (None, 100, 0)}  # 100: UNKNOWN_TOPIC_ID
    seen: list[dict[Any, tuple[Any, int, int]]] = []

    def by_id() -> bool:
        # An id groupshift's view of the cluster does not hold yet (a topic created since its last
        # refresh) answers UNKNOWN_TOPIC_ID and asks for a refresh, as a Kafka broker whose
        # metadata lags does; the client asks again.
        md = metadata(
            gw.port, 12, topics=[{"name": None, "topic_id": ids[topic]}, {"name": None, "topic_id": stranger}]
        )
        seen.append({t.topic_id: (t.name, int(t.error_code), len(t.partitions)) for t in md.topics})
        return seen[-1] == expected

    try:
        wait_until(by_id, 15, "the lookup by id", interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: last answers {seen[-3:]}") from None
    assert {t.name for t in metadata(gw.port, 1, topics=[{"name": topic}]).topics} == {topic}
    v10 = metadata(gw.port, 10, topics=[{"name": topic, "topic_id": uuid.UUID(int=0)}])
    assert [t.topic_id for t in v10.topics] == [ids[topic]]
    return ids
