"""`groupshift fleet` on logs written by Apache Kafka 4.x and 3.9: the Spark job reading the
broker's `__consumer_offsets` partition directories gives the facts a live admin-API read of the
same cluster gives (tools.check.facts.facts_from_admin over tools.groups.wire), and the command
line's verdict tables are `groupshift check`'s on the same log dir (upgrade, downgrade to classic
clients and to Kafka 3.9), with the blocked groups listed in report.html.

On Kafka 4.x the groups are made by real clients (confluent-kafka): a classic group of two members
(`group.protocol=classic`, range), a KIP-848 consumer group of two members
(`group.protocol=consumer`), both committing offsets, and a group that committed and left (offsets
only, an empty classic group). The broker keeps running: its segment files are read as they are
(appends reach the file at once; the active segment is read up to its last whole batch).

On Kafka 3.9 (classic groups only, the release an operator upgrades from) the groups are the
ones e2e/test_check_upgrade.py proves blocked or ready (made over the wire: a userData
assignment, a Connect group, a malformed subscription, a plain one, offsets only), two
kafka-python members of a range group, and a group that committed, left and was deleted.

Both log dirs go through one `groupshift fleet report k4=... k39=...` run (a Spark JVM and job
per run is most of the time); each test reads its cluster's rows.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

# Facts both inputs know. Left out, with why: `source`; `state` (only a live read knows it);
# `record_kinds*` (only the log has record versions); per member `assignors` /
# `assignors_complete` / `subscription_version` (a classic group's record keeps only the
# elected protocol, DescribeGroups too, but the log keeps the raw metadata); timeouts and epochs
# (ConsumerGroupDescribe does not show timeouts; the log's member epoch may lag a heartbeat).
MEMBER_FIELDS = ("member_id", "client_id", "instance_id", "protocol", "subscribed_topics", "owned")
GROUP_FIELDS = ("group", "type", "protocol_type", "protocol", "size", "offsets")


def _consumer(bootstrap: str, gid: str, protocol: str, client_id: str) -> Any:
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": gid,
        "group.protocol": protocol,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "classic":
        conf["partition.assignment.strategy"] = "range"
        conf["session.timeout.ms"] = 45000
    return Consumer(conf)


def _poll_until(consumers: list[Any], done: Any, timeout: float = 90.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for c in consumers:
            c.poll(0.1)
        if done():
            return
    raise AssertionError("the consumers did not get their assignments in time")


def _commit_all(c: Any, offset: int) -> None:
    from confluent_kafka import TopicPartition

    parts = [TopicPartition(tp.topic, tp.partition, offset + tp.partition) for tp in c.assignment()]
    if parts:
        c.commit(offsets=parts, asynchronous=False)


def _project(f: Any) -> dict[str, Any]:
    doc = f.to_json()
    out = {k: doc[k] for k in GROUP_FIELDS}
    out["offsets"] = sorted(tuple(x) for x in doc["offsets"])
    out["members"] = sorted(
        ({k: (tuple(tuple(x) for x in m[k]) if k == "owned" else m[k]) for k in MEMBER_FIELDS}
         for m in doc["members"]),
        key=lambda m: m["member_id"],
    )  # fmt: skip
    for m in out["members"]:
        m["subscribed_topics"] = tuple(m["subscribed_topics"])
    return out


@pytest.fixture(scope="module")
def groups_on_kafka(kafka4: Any) -> Iterator[tuple[Any, dict[str, str]]]:
    """The groups once for the module: both Kafka 4 tests only read them (a live admin read, a
    copy of the log dir), and making them (four members settling, then a fifth) is the slow part."""
    from confluent_kafka.admin import AdminClient, NewTopic

    run = uuid.uuid4().hex[:6]
    topic = f"fleet-orders-{run}"
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    names = {k: f"fleet-{k}-{run}" for k in ("classic", "consumer", "offsets")}
    with ExitStack() as stack:
        members: dict[str, list[Any]] = {"classic": [], "consumer": []}
        for kind, protocol in (("classic", "classic"), ("consumer", "consumer")):
            for i in range(2):
                c = _consumer(kafka4.bootstrap, names[kind], protocol, f"{kind}-client-{i}")
                stack.callback(c.close)
                c.subscribe([topic])
                members[kind].append(c)
        everyone = members["classic"] + members["consumer"]

        def settled() -> bool:
            return all(
                sum(len(c.assignment()) for c in members[k]) == 4 and all(c.assignment() for c in members[k])
                for k in members
            )

        _poll_until(everyone, settled)
        for i, c in enumerate(everyone):
            _commit_all(c, 100 * (i + 1))
        lone = _consumer(kafka4.bootstrap, names["offsets"], "classic", "offsets-client")
        lone.subscribe([topic])
        _poll_until([lone], lambda: len(lone.assignment()) == 4)
        _commit_all(lone, 7)
        lone.close()
        _poll_until(everyone, settled, timeout=30)  # still stable after the commits
        yield kafka4, names


def test_kafka_logs_give_the_facts_of_a_live_read(
    spark: Any, groups_on_kafka: tuple[Any, dict[str, str]], tmp_path: Path
) -> None:
    from tools.check.facts import facts_from_admin
    from tools.fleet.inputs import discover
    from tools.fleet.job import build
    from tools.groups.wire import AdminWire

    kafka, names = groups_on_kafka
    with AdminWire(kafka.bootstrap) as admin:
        live, _read = facts_from_admin(admin, sorted(names.values()), cluster="k4")
    log_dir = kafka.nodes[0].data_dir
    [cluster] = discover([f"k4={log_dir}"])
    assert any(Path(p).parent.name.startswith("__consumer_offsets-") for _, p in cluster.segments)
    tables = build(spark, [cluster], ["classic-protocol"])
    rows = tables["facts"].filter(tables["facts"]["group"].isin(*names.values())).collect()
    from_logs = {r["group"]: json.loads(r["facts_json"]) for r in rows}
    assert set(from_logs) == set(names.values()), sorted(from_logs)

    class _Doc:
        def __init__(self, doc: dict[str, Any]) -> None:
            self.doc = doc

        def to_json(self) -> dict[str, Any]:
            return self.doc

    for kind, gid in names.items():
        want, got = _project(live[gid]), _project(_Doc(from_logs[gid]))
        assert got == want, (kind, got, want)
    classic, consumer = _project(live[names["classic"]]), _project(live[names["consumer"]])
    assert (classic["type"], classic["size"], consumer["type"], consumer["size"]) == (
        "classic",
        2,
        "consumer",
        2,
    )
    for g in (classic, consumer):  # every partition owned by one member, named (not a topic id)
        owned = [tp for m in g["members"] for tp in m["owned"]]
        assert len(owned) == 4 and all(t.startswith("fleet-orders-") for t, _ in owned), owned
    assert _project(live[names["offsets"]])["type"] == "empty"
    assert len(_project(live[names["offsets"]])["offsets"]) == 4
    verdicts = {
        r["group"]: r["verdict"]
        for r in tables["verdicts"].filter(tables["verdicts"]["direction"] == "upgrade").collect()
        if r["group"] in names.values()
    }
    assert verdicts == dict.fromkeys(names.values(), "READY")


@pytest.fixture(scope="module")
def groups_on_kafka39(
    kafka39_classic: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, str], Path]]:
    """Groups of every kind on the session's Kafka 3.9 node (no other test makes groups on it),
    made over the wire and by kafka-python members: ({kind: group id}, a snapshot of the log dir
    taken while the members are in their group)."""
    from e2e.differential import Session
    from e2e.test_check_upgrade import offsets_only, solo
    from e2e.test_fleet_real_inputs import (
        assigned,
        close_all,
        commit,
        delete_group,
        kafka_python_member,
        poll_until,
        snapshot,
    )
    from translation.embedded_protocol import Subscription, serialize_assignment, serialize_subscription

    kafka = kafka39_classic
    s = Session("kafka-3.9", kafka.bootstrap, {"run": uuid.uuid4().hex[:6]})
    topic = s.topic("orders")
    s.create_topic(topic, 3)
    solo(s, "ready")
    solo(
        s,
        "userdata",
        protocol="cooperative-sticky",
        assignment=serialize_assignment({topic: [0, 1, 2]}, 1, b"\x00\x00\x00\x01"),
    )
    solo(s, "connect", protocol_type="connect", protocol="default", metadata=b"\x00\x01connect-config")
    v0 = serialize_subscription(Subscription(0, (topic,)))
    solo(s, "malformed", metadata=b"\x00\x01" + v0[2:])
    offsets_only(s, "offsets")  # fmt: skip
    names = {n: s.group(n) for n in ("ready", "userdata", "connect", "malformed", "offsets", "classic")}
    members = [kafka_python_member(kafka.bootstrap, names["classic"], topic) for _ in range(2)]
    try:
        poll_until(members, lambda: all(assigned(c) for c in members))
        commit(members[0], topic, 21)
        deleted = s.group("deleted")
        gone = kafka_python_member(kafka.bootstrap, deleted, topic)
        poll_until([gone], lambda: assigned(gone))
        commit(gone, topic, 5)
        gone.close(autocommit=False)
        delete_group(s, deleted)
        poll_until(members, lambda: all(assigned(c) for c in members), timeout=30)
        log_dir = snapshot(kafka.nodes[0].data_dir, tmp_path_factory.mktemp("kafka39") / "log-dir")
        yield names, log_dir
    finally:
        close_all(members)
        s.close()


@dataclass
class KafkaReport:
    """One `groupshift fleet report k4=LOG_DIR k39=LOG_DIR` (a Spark JVM and job per run is most
    of each test's time, so both log dirs go through one run, as an operator's fleet would) and
    `groupshift check` of each log dir, run while the fleet job does."""

    out: Path
    tables: dict[str, Any]
    checks: dict[str, Any]  # cluster name -> CheckRuns
    names: dict[str, dict[str, str]]  # cluster name -> {kind: group id}

    @functools.cached_property
    def dom(self) -> str:
        """report.html in headless Chromium lists every blocked group of both clusters (asserted
        once for the page both tests read)."""
        from e2e.test_fleet_real_inputs import assert_html_lists_blocked

        return assert_html_lists_blocked(self.out, self.tables, "fleet-kafka-log-dirs.png")


@pytest.fixture(scope="module")
def kafka_report(
    groups_on_kafka: tuple[Any, dict[str, str]],
    groups_on_kafka39: tuple[dict[str, str], Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> KafkaReport:
    from e2e.test_fleet_real_inputs import CheckRuns, fleet_report, snapshot

    kafka, names4 = groups_on_kafka
    names39, log39 = groups_on_kafka39
    base = tmp_path_factory.mktemp("fleet-kafka")
    log4 = snapshot(kafka.nodes[0].data_dir, base / "log-dir-4")
    checks = {name: CheckRuns(["--log-dir", str(d)]) for name, d in (("k4", log4), ("k39", log39))}
    tables = fleet_report([f"k4={log4}", f"k39={log39}"], base / "report")
    return KafkaReport(base / "report", tables, checks, {"k4": names4, "k39": names39})


def test_fleet_report_on_a_kafka_4_log_dir_equals_check(kafka_report: KafkaReport) -> None:
    from e2e.test_fleet_real_inputs import assert_fleet_equals_check

    tables, names = kafka_report.tables, kafka_report.names["k4"]
    assert {names[k] for k in names} <= {f["group"] for f in tables["facts"] if f["cluster"] == "k4"}
    assert_fleet_equals_check(tables, "k4", kafka_report.checks["k4"])
    mine = [v for v in tables["verdicts"] if v["cluster"] == "k4"]
    if any(v["verdict"] != "READY" and v["verdict"] != "SAFE" for v in mine):
        assert kafka_report.dom


def test_fleet_report_on_a_kafka_3_9_log_dir_equals_check(kafka_report: KafkaReport) -> None:
    from e2e.test_fleet_real_inputs import assert_fleet_equals_check

    tables, names = kafka_report.tables, kafka_report.names["k39"]
    facts = {f["group"]: f for f in tables["facts"] if f["cluster"] == "k39"}
    assert set(facts) == set(names.values()), sorted(facts)
    assert (facts[names["classic"]]["type"], facts[names["classic"]]["size"]) == ("classic", 2)
    assert_fleet_equals_check(tables, "k39", kafka_report.checks["k39"])
    upgrade = {
        v["group"]: v["verdict"]
        for v in tables["verdicts"]
        if v["direction"] == "upgrade" and v["cluster"] == "k39"
    }
    assert {g for g, v in upgrade.items() if v == "NOT-READY"} == {
        names[k] for k in ("userdata", "connect", "malformed")
    }, upgrade
    assert kafka_report.dom
