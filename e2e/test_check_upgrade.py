"""Proof of `groupshift check upgrade`: the verdicts are what really happens.

The same classic groups are built, member by member over the wire, on a real Apache Kafka 4.3
node and on a groupshift server with the same settings: a plain `range` group, a static one, one
whose assignment carries userData (a client-side assignor, KAFKA-18134), a Kafka Connect-style
group (protocol type `connect`), one whose embedded subscription does not parse, one whose
clients are said (`--regex`) to subscribe with a lookahead, and a group with committed offsets
only. Then:

1. `groupshift check upgrade --json` reads them four ways: live from Kafka and from groupshift
   (admin APIs only), from groupshift's data dir and from Kafka's `__consumer_offsets` partition
   directories. All four give the same verdict, reason and predicted refusal for every group.
2. The verdicts are carried out: a confluent-kafka consumer with `group.protocol=consumer`
   joins each READY group, which becomes a consumer group, on both servers; a KIP-848
   ConsumerGroupHeartbeat to each NOT-READY group is refused with exactly the predicted message.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import (
    DIFFERENTIAL_GROUP_SETTINGS,
    DIFFERENTIAL_KAFKA_VERSION,
    KAFKA_ONLY,
    DifferentialServers,
    Gateways,
)
from e2e.differential import Session
from e2e.differential_classic import coordinator_loaded, join, sync
from e2e.harness import REPO
from translation.embedded_protocol import Subscription, serialize_assignment, serialize_subscription

pytestmark = pytest.mark.e2e

SESSION_MS = 120_000  # the raw members never heartbeat: they must outlive the test
REGEX = "(?=x)orders.*"


class Pair:
    def __init__(self, kafka: Any, gateway: Any) -> None:
        self.kafka = kafka
        self.gateway = gateway
        self.names = {"run": uuid.uuid4().hex[:6]}

    def session(self, backend: str) -> Session:
        bootstrap = self.kafka.bootstrap if backend == "kafka" else self.gateway.bootstrap
        return Session(backend, bootstrap, self.names)


@pytest.fixture(scope="module")
def pair(
    differential_servers: DifferentialServers,
    kafka_cluster_factory: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Pair]:
    """The session's differential Kafka 4.3 node and groupshift server (these settings exactly;
    every check here names this run's groups); its own pair only when DIFFERENTIAL_KAFKA names a
    node whose log dir is not here."""
    if differential_servers.cluster is not None:
        yield Pair(differential_servers.cluster, differential_servers.gateway)
        return
    kafka = kafka_cluster_factory(
        DIFFERENTIAL_KAFKA_VERSION,
        configs={**DIFFERENTIAL_GROUP_SETTINGS, **KAFKA_ONLY},
        name="check-upgrade",
    )
    gateways = Gateways(tmp_path_factory.mktemp("check-upgrade"))
    gw = gateways.start("groupshift", sets=[f"{k}={v}" for k, v in DIFFERENTIAL_GROUP_SETTINGS.items()])
    yield Pair(kafka, gw)
    problems = gateways.finish()
    if problems:
        pytest.fail("\n\n".join(problems))


def solo(
    s: Session,
    name: str,
    *,
    protocol_type: str = "consumer",
    protocol: str = "range",
    metadata: bytes | None = None,
    assignment: bytes | None = None,
    instance: str | None = None,
) -> None:
    """A classic group with one member that joined and synced (never heartbeats)."""
    gid = s.group(name)
    topic = s.topic("orders")
    coordinator_loaded(s, gid)
    meta = metadata if metadata is not None else serialize_subscription(Subscription(1, (topic,)))
    over: dict[str, Any] = {
        "group_id": gid,
        "protocol_type": protocol_type,
        "protocols": [{"name": protocol, "metadata": meta}],
        "session_timeout": SESSION_MS,
        "group_instance_id": instance,
    }
    r = join(s, **over)
    if r.error_code.name == "member_id_required":
        r = join(s, member_id=r.member_id, **over)
    assert r.error_code.name == "none", (s.backend, name, r)
    mid = r.member_id
    data = assignment if assignment is not None else serialize_assignment({topic: [0, 1, 2]}, 1)
    sr = sync(
        s,
        r.generation_id,
        mid,
        group_id=gid,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocol_name=protocol,
        assignments=[{"member_id": mid, "assignment": data}],
    )
    assert sr.error_code.name == "none", (s.backend, name, sr)


def offsets_only(s: Session, name: str) -> None:
    gid = s.group(name)
    coordinator_loaded(s, gid)
    r = s.raw(
        8,
        9,
        group_id=gid,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": s.topic("orders"),
                "partitions": [
                    {
                        "partition_index": 1,
                        "committed_offset": 7,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    )
    assert r.topics[0].partitions[0].error_code.name == "none", r


GROUPS = ("ready", "static", "userdata", "connect", "malformed", "regex", "offsets", "rdk", "rx")
# A consumer group whose KIP-848 member subscribes with a regex that the server matches against
# whole topic names: `^orders` matches no `orders-<run>` topic there, where a classic librdkafka
# client (a partial search) subscribed to them.
RX = "^orders"


def librdkafka_cooperative_sticky(s: Session, name: str) -> list[Any]:
    """Two confluent-kafka classic members with cooperative-sticky, until the leader has copied
    a member's sticky userData into its assignment (from that member's second generation on)."""
    from confluent_kafka import Consumer

    from tools.groups.snapshot import describe
    from tools.groups.wire import AdminWire

    gid = s.group(name)
    consumers: list[Any] = []

    def settled(members: int, user_data: bool) -> None:
        deadline = time.monotonic() + 60
        while True:
            for c in consumers:
                c.poll(0.1)
            with AdminWire(f"127.0.0.1:{s.port}") as admin:
                g = describe(admin, gid)
            if (
                g.state == "Stable"
                and len(g.members) == members
                and all(m.assignment for m in g.members)
                and (not user_data or any(m.user_data for m in g.members))
            ):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{s.backend}: {gid} not settled ({members}, {user_data}): {g}")

    for n in (1, 2):  # the second member joins a stable group: the first one's 2nd generation
        c = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{s.port}",
                "group.id": gid,
                "group.protocol": "classic",
                "partition.assignment.strategy": "cooperative-sticky",
                "heartbeat.interval.ms": 500,
                "session.timeout.ms": 45000,
                "enable.auto.commit": False,
            }
        )
        c.subscribe([s.topic("orders")])
        consumers.append(c)
        try:
            settled(n, user_data=n == 2)
        except BaseException:
            for c in consumers:
                c.close()
            raise
    return consumers


def build(s: Session) -> list[Any]:
    topic = s.topic("orders")
    s.create_topic(topic, 3)
    solo(s, "ready")
    solo(s, "static", instance="host-1")
    solo(
        s,
        "userdata",
        protocol="cooperative-sticky",
        assignment=serialize_assignment({topic: [0, 1, 2]}, 1, b"\x00\x00\x00\x01"),
    )
    solo(s, "connect", protocol_type="connect", protocol="default", metadata=b"\x00\x01connect-config")
    # v1 whose v0 prefix (topics, userData) is whole but whose owned partitions are missing: the
    # classic join reads the prefix only, the conversion reads it all
    v0 = serialize_subscription(Subscription(0, (topic,)))
    solo(s, "malformed", metadata=b"\x00\x01" + v0[2:])
    solo(s, "regex")
    offsets_only(s, "offsets")
    rdk = librdkafka_cooperative_sticky(s, "rdk")
    return [*rdk, regex_member(s, "rx")]


def regex_member(s: Session, name: str) -> Any:
    from confluent_kafka import Consumer

    gid = s.group(name)
    c = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{s.port}",
            "group.id": gid,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([RX])
    deadline = time.monotonic() + 60
    while True:
        c.poll(0.2)
        try:
            wait_type(s, gid, "consumer", timeout=0.1)
            return c
        except AssertionError:
            if time.monotonic() > deadline:
                c.close()
                raise


def check(args: list[str], command: str = "upgrade") -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "groupshift", "check", command, "--json", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, 1, 2), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def checks(*each: list[str], command: str = "upgrade") -> list[tuple[int, dict[str, Any]]]:
    """`check` of each argument list, the processes side by side (independent reads of the same
    groups; one after the other they were a good part of this module's time in CI)."""
    with ThreadPoolExecutor(len(each)) as pool:
        return list(pool.map(lambda args: check(args, command), each))


def verdicts(doc: dict[str, Any]) -> dict[str, tuple[str, str, str | None]]:
    """{group: (verdict, reason, predicted refusal)}, member ids (each server's own) and the count
    of further refusals masked."""
    mask = re.compile(r"member \S+ \(client")
    # how many librdkafka members carry userData yet depends on each server's rebalance history
    more = re.compile(r" \(\+\d+ more\)$")
    return {
        g["group"]: (
            g["verdict"],
            more.sub("", mask.sub("member <id> (client", g["reason"])),
            g["kafka_message"],
        )
        for g in doc["groups"]
    }


def regex_details(doc: dict[str, Any], group: str) -> list[dict[str, Any]]:
    (g,) = [g for g in doc["groups"] if g["group"] == group]
    return [c for c in g["details"] if c["name"] == "regex"]


EXPECTED = {
    "ready": "READY",
    "static": "READY",
    "offsets": "READY",
    "userdata": "NOT-READY",
    "connect": "NOT-READY",
    "malformed": "NOT-READY",
    "regex": "NOT-READY",
    "rdk": "NOT-READY",
    "rx": "READY",
}


def wait_type(s: Session, gid: str, want: str, timeout: float = 60.0) -> None:
    from tools.groups.snapshot import describe
    from tools.groups.wire import AdminWire

    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        with AdminWire(f"127.0.0.1:{s.port}") as admin:
            g = describe(admin, gid)
            got = g.group_type
            if got == want:
                return
        time.sleep(0.3)
    raise AssertionError(f"{s.backend}: group {gid} is {got}, not {want}")


@contextmanager
def consumer_protocol_member(s: Session, gid: str, instance: str | None = None) -> Iterator[Any]:
    """confluent-kafka with group.protocol=consumer joins `gid` and stays until the block ends
    (librdkafka heartbeats from its own thread); the group must have become a consumer group."""
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{s.port}",
        "group.id": gid,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if instance:
        conf["group.instance.id"] = instance
    c = Consumer(conf)
    try:
        c.subscribe([s.topic("orders")])
        deadline = time.monotonic() + 60
        while True:
            c.poll(0.2)
            try:
                wait_type(s, gid, "consumer", timeout=0.1)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
        yield c
    finally:
        c.close()


def heartbeat_refusal(s: Session, gid: str, regex: str | None = None) -> tuple[str, str | None]:
    r = s.raw(
        68,
        1,
        group_id=gid,
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=30000,
        subscribed_topic_names=None if regex else [s.topic("orders")],
        subscribed_topic_regex=regex,
        server_assignor=None,
        topic_partitions=[],
    )
    return r.error_code.name, r.error_message


def test_check_upgrade_verdicts_agree_across_inputs_and_come_true(pair: Pair, tmp_path: Path) -> None:
    sessions = {b: pair.session(b) for b in ("kafka", "groupshift")}
    clients: list[Any] = []
    try:
        for s in sessions.values():
            clients += build(s)
        k = sessions["kafka"]
        names = [k.group(n) for n in GROUPS]
        regex_arg = ["--regex", f"{k.group('regex')}={REGEX}"]

        # 1. four inputs, one set of verdicts
        t0 = time.monotonic()
        live_kafka, live_gs, data_dir, log_dir = checks(
            ["--bootstrap-server", pair.kafka.bootstrap, *regex_arg, *names],
            ["--bootstrap-server", pair.gateway.bootstrap, *regex_arg, *names],
            ["--data-dir", str(pair.gateway.data_dir), *regex_arg, *names],
            ["--log-dir", str(pair.kafka.nodes[0].data_dir), *regex_arg, *names],
        )
        print(f"four checks in {time.monotonic() - t0:.1f}s")
        reference = verdicts(live_kafka[1])
        assert {g: v[0] for g, v in reference.items()} == {k.group(n): EXPECTED[n] for n in GROUPS}
        rx = k.group("rx")
        regex_findings = regex_details(live_kafka[1], rx)
        assert [c["status"] for c in regex_findings] == ["warning"], regex_findings
        assert regex_findings[0]["reason"].startswith(
            # librdkafka sends its regexes joined as one, each in parentheses
            f"regex '({RX})': the server (RE2, full match) subscribes to 0 topic(s); clients that search "
            f"partially had 1 (lost: {k.topic('orders')})"
        ), regex_findings
        for label, got in (
            ("groupshift live", live_gs),
            ("groupshift data dir", data_dir),
            ("kafka log dir", log_dir),
        ):
            assert verdicts(got[1]) == reference, label
            assert regex_details(got[1], rx) == regex_findings, label
            assert got[0] == live_kafka[0] == 1, label  # some NOT-READY: exit status 1
        # a rollback to classic clients, judged from the four inputs alike
        inputs = (
            ["--bootstrap-server", pair.kafka.bootstrap],
            ["--bootstrap-server", pair.gateway.bootstrap],
            ["--data-dir", str(pair.gateway.data_dir)],
            ["--log-dir", str(pair.kafka.nodes[0].data_dir)],
        )
        rollback = checks(*(["--to", "classic-protocol", *i, *names] for i in inputs), command="downgrade")
        assert verdicts(rollback[0][1])[rx][:2] == (
            "SAFE",
            "converts back to a classic group when the last of its 1 consumer-protocol member(s) leaves",
        )
        assert all(verdicts(r[1]) == verdicts(rollback[0][1]) and r[0] == 0 for r in rollback), rollback

        # 2. the verdicts come true on both servers
        bootstrap = {"kafka": pair.kafka.bootstrap, "groupshift": pair.gateway.bootstrap}
        for backend, s in sessions.items():
            for name in GROUPS:
                gid = s.group(name)
                verdict, reason, message = reference[gid]
                if name == "rx":
                    continue  # a consumer group already
                if verdict == "READY":
                    if name == "offsets":
                        code, _ = heartbeat_refusal(s, gid)
                        assert code == "none", (backend, name)
                        wait_type(s, gid, "consumer")
                    elif name == "static":
                        # replaces the classic static member in place
                        with consumer_protocol_member(s, gid, instance="host-1"):
                            pass
                    else:
                        with consumer_protocol_member(s, gid):
                            # converted, with its classic member left: a rollback to classic
                            # clients is SAFE and happens when the consumer-protocol member leaves
                            code, doc = check(["--bootstrap-server", bootstrap[backend], gid], "upgrade")
                            assert verdicts(doc)[gid][:2] == (
                                "READY",
                                "already a consumer group (1 classic member(s) left: roll them to "
                                "group.protocol=consumer)",
                            ), backend
                            code, doc = check(
                                ["--to", "classic-protocol", "--bootstrap-server", bootstrap[backend], gid],
                                "downgrade",
                            )
                            assert code == 0 and verdicts(doc)[gid][:2] == (
                                "SAFE",
                                "converts back to a classic group when the last of its 1 "
                                "consumer-protocol member(s) leaves",
                            ), (backend, doc)
                        wait_type(s, gid, "classic")
                else:
                    code, got = heartbeat_refusal(s, gid, REGEX if name == "regex" else None)
                    want_code = "invalid_regular_expression" if name == "regex" else "group_id_not_found"
                    assert (code, got) == (want_code, message), (backend, name, reason)
                    wait_type(s, gid, "classic", timeout=5)
    finally:
        # librdkafka consumers left open block the interpreter's exit
        for c in clients:
            c.close()
    for s in sessions.values():
        s.close()


def test_check_reads_a_kafka_3_cluster_before_its_upgrade(kafka_cluster_factory: Any) -> None:
    """The operator's starting point: a Kafka 3.9 cluster with classic groups only. The broker's
    log directory gives the verdicts Kafka 4.3 and groupshift proved above for the same groups;
    the live read (DescribeGroups; no consumer groups there) knows the server does not serve
    KIP-848 and makes every group NOT-READY for that."""
    kafka = kafka_cluster_factory(
        "3.9",
        configs={
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
        },
        name="check-kafka-3.9",
    )
    s = Session("kafka-3.9", kafka.bootstrap, {"run": uuid.uuid4().hex[:6]})
    topic = s.topic("orders")
    s.create_topic(topic, 3)
    solo_groups = [n for n in GROUPS if n not in ("rdk", "rx")]
    solo(s, "ready")
    solo(s, "static", instance="host-1")
    solo(
        s,
        "userdata",
        protocol="cooperative-sticky",
        assignment=serialize_assignment({topic: [0, 1, 2]}, 1, b"\x00\x00\x00\x01"),
    )
    solo(s, "connect", protocol_type="connect", protocol="default", metadata=b"\x00\x01connect-config")
    v0 = serialize_subscription(Subscription(0, (topic,)))
    solo(s, "malformed", metadata=b"\x00\x01" + v0[2:])
    solo(s, "regex")
    offsets_only(s, "offsets")
    names = [s.group(n) for n in solo_groups]
    regex_arg = ["--regex", f"{s.group('regex')}={REGEX}"]
    live, logs = checks(
        ["--bootstrap-server", kafka.bootstrap, *regex_arg, *names],
        ["--log-dir", str(kafka.nodes[0].data_dir), *regex_arg, *names],
    )
    # The log dir says what each group itself allows (what Kafka 4.3 and groupshift proved); the
    # live read also knows the server: Kafka 3.9 without `consumer` in
    # group.coordinator.rebalance.protocols serves no KIP-848 member, so every group is NOT-READY
    # there for that reason first (e2e/test_check_server.py proves the server verdicts).
    got = verdicts(logs[1])
    assert {g: v[0] for g, v in got.items()} == {s.group(n): EXPECTED[n] for n in solo_groups}
    assert {g: v[0] for g, v in verdicts(live[1]).items()} == {g: "NOT-READY" for g in got}
    for g in live[1]["groups"]:
        assert g["reason"].startswith("the server does not serve the KIP-848 consumer protocol"), g
        assert g["details"][0]["name"] == "server", g
    assert live[1]["server"]["serves_consumer_protocol"] is False, live[1]["server"]
    assert live[0] == logs[0] == 1
    s.close()
