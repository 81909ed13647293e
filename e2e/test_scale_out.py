"""Scale-out (docs/scale-out.md): three groupshift nodes in front of a three-broker Apache Kafka
3.9 cluster, coordinator shards kept on the cluster.

* `test_fleet_failover_and_return`: a KIP-848 group, a classic group and a mixed group (classic
  members, then a KIP-848 member joins: the group converts while classic members stay), each
  coordinated by a different node; real clients (confluent-kafka classic and
  `group.protocol=consumer`, kafka-python) consume a topic written continuously. The node of the
  mixed group is SIGKILLed right after the KIP-848 member joined: its shards move to the others
  within the fleet session timeout (plus the rebalance and a shard load), every group keeps
  consuming, no commit acknowledged before the kill is lost, no partition is held by two members
  at once (e2e/migration.py's checkers over the whole run); the killed node restarts on its port
  and takes its share of the shards back.
* `test_partitioned_node_is_fenced`: a node reaching the cluster only through TCP forwarders is
  cut off: a commit sent to it is never acknowledged, the other node takes the shard (fencing its
  transactional id), and after the cut heals no record of the cut-off node lands in the shard's
  partition: the only commits there are the one from before the cut and the new owner's. Then
  the upstream broker leading the shard's partition is SIGKILLed: the fleet keeps committing
  (3 replicas, min.insync.replicas=2) once leadership moved.

One cluster for the module (`proxied_listener=True` gives it the forwarders' listeners). Takes
about 2-3 minutes here. Without java/mvn the cluster fixture skips with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from e2e import harness
from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.migration import (
    PARTITIONS,
    ConfluentMember,
    ContinuousProducer,
    KafkaPythonMember,
    Member,
    Timeline,
    analyse,
    fences,
    server_time,
    wait_caught_up,
    wait_until,
)
from e2e.scaleout import (
    SESSION_MS,
    Forwarder,
    committed,
    create_topic,
    group_on,
    latest_view,
    loaded_after,
    start_node,
    wait_fleet,
)
from gateway.groups.routing import partition_for
from protocol.client import WireClient, make_request
from records.codec import decode_record
from records.offsets import OffsetCommitKey, OffsetCommitValue

BROKER_CONFIGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "4",
    "auto.create.topics.enable": "false",
    "min.insync.replicas": "1",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}
SHARDS = 6
NODE_IDS = (1001, 1002, 1003)
# Failover bound asserted: the fleet session timeout, plus the rebalance, the fence and the load
# of the dead node's shards on a loaded two-core machine.
FAILOVER_SLACK_SECONDS = 12.0


@pytest.fixture(scope="module")
def cluster(kafka_cluster_factory: Any) -> Any:
    return kafka_cluster_factory(
        "3.9", brokers=3, configs=BROKER_CONFIGS, name="scaleout", proxied_listener=True
    )


@pytest.fixture
def started(module_gateways: Gateways) -> Iterator[list[GatewayProcess]]:
    # A node starts several librdkafka clients besides the interpreter: on a loaded two-core
    # machine that can take longer than the harness's usual 30 s.
    saved, harness.START_TIMEOUT = harness.START_TIMEOUT, max(harness.START_TIMEOUT, 90.0)
    nodes: list[GatewayProcess] = []
    try:
        yield nodes
    finally:
        harness.START_TIMEOUT = saved
        module_gateways.started.extend(nodes)


def _add(member: Member) -> Member:
    member.start()
    wait_until(lambda: member.running.is_set() or member.errors, 30, f"{member.name} to start")
    assert not member.errors, f"{member.name}: {member.errors}"
    return member


def test_fleet_failover_and_return(cluster: Any, started: list[GatewayProcess], tmp_path: Path) -> None:
    kw = {"topic": "gs-fleet-a", "fleet": "fleet-a"}
    nodes = [
        start_node(tmp_path, f"n{i}", cluster.bootstrap, nid, SHARDS, **kw) for i, nid in enumerate(NODE_IDS)
    ]
    started.extend(nodes)
    shards_of = wait_fleet(nodes, NODE_IDS, SHARDS)
    assert all(shards_of[n] for n in NODE_IDS), shards_of

    topic = "fleet-a-data"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    groups = {
        "consumer": group_on(shards_of[1001], "fa-consumer", SHARDS),
        "classic": group_on(shards_of[1002], "fa-classic", SHARDS),
        "mixed": group_on(shards_of[1003], "fa-mixed", SHARDS),
    }
    bootstrap = ",".join(n.bootstrap for n in nodes)
    _check_routing(nodes, groups, shards_of)
    timelines = {kind: Timeline(topic) for kind in groups}
    producer = ContinuousProducer(SimpleNamespace(bootstrap=cluster.bootstrap), topic, rate=60)  # type: ignore[arg-type]
    producer.start()
    members: list[Member] = []
    victim = nodes[2]
    try:
        g, tl = groups["consumer"], timelines["consumer"]
        first = _add(ConfluentMember("cons-0", tl, bootstrap, g, protocol="consumer"))
        members.append(first)
        # The second member joins once the first has been handed every partition by its
        # application callback: a librdkafka member asked to give partitions up before its
        # `on_assign` was served can report them as already released (README, client
        # behaviours), which is a formation race of the client, not what this test is about.
        wait_until(
            lambda: first.owned == frozenset(range(PARTITIONS)) or bool(first.errors),
            60,
            lambda: f"cons-0 to own every partition (owns {sorted(first.owned)})",
        )
        members.append(_add(ConfluentMember("cons-1", tl, bootstrap, g, protocol="consumer")))
        g, tl = groups["classic"], timelines["classic"]
        members.append(_add(KafkaPythonMember("classic-kp", tl, bootstrap, g, assignor="range")))
        members.append(
            _add(ConfluentMember("classic-ck", tl, bootstrap, g, protocol="classic", assignor="range"))
        )
        g, tl = groups["mixed"], timelines["mixed"]
        members.append(_add(KafkaPythonMember("mixed-kp", tl, bootstrap, g, assignor="range")))
        members.append(
            _add(ConfluentMember("mixed-ck", tl, bootstrap, g, protocol="classic", assignor="range"))
        )
        for kind, tl in timelines.items():
            wait_caught_up(tl, producer, f"{kind} group before the migration", timeout=90)

        # Mid-migration: a KIP-848 member joins the classic group, and its coordinator dies.
        members.append(_add(ConfluentMember("mixed-cons", timelines["mixed"], bootstrap, groups["mixed"])))
        wait_until(
            lambda: any(e.get("group") == groups["mixed"] for e in victim.events("member.joined")[-5:]),
            30,
            "the KIP-848 member to reach the mixed group's coordinator",
        )
        before_kill = {kind: _last_acked_commits(tl) for kind, tl in timelines.items()}
        killed_at = time.time()
        victim.kill()

        survivors = nodes[:2]
        moved = wait_until(
            lambda: _moved(survivors, shards_of[1003], killed_at),
            SESSION_MS / 1000 + FAILOVER_SLACK_SECONDS,
            lambda: "the killed node's shards to move: " + "; ".join(str(latest_view(n)) for n in survivors),
            interval=0.1,
        )
        view_at, loaded_at = moved
        # The upstream coordinator expires the dead member one session timeout after its last
        # heartbeat; the new view follows at once (a slack for a loaded machine).
        assert view_at - killed_at <= SESSION_MS / 1000 + 4.0, (
            f"new fleet view after {view_at - killed_at:.2f}s"
        )
        for kind, tl in timelines.items():
            wait_caught_up(tl, producer, f"{kind} group after the node was killed", timeout=90)
        for kind, offsets in before_kill.items():
            now = committed(bootstrap, groups[kind], topic, PARTITIONS)
            lost = {p: (o, now.get(p)) for p, o in offsets.items() if now.get(p, -1) < o}
            assert not lost, f"{kind}: commits acknowledged before the kill are gone: {lost}"

        # The killed node comes back on its port and takes its share back.
        back = start_node(tmp_path, "n2", cluster.bootstrap, 1003, SHARDS, port=victim.port, **kw)
        started.append(back)
        nodes = [*survivors, back]
        final = wait_fleet(nodes, NODE_IDS, SHARDS, timeout=60)
        assert len(final[1003]) == SHARDS // 3, final
        for kind, tl in timelines.items():
            wait_caught_up(tl, producer, f"{kind} group after the node returned", timeout=90)

        acked = producer.stop()
        end = producer.end_offsets()
        for kind, tl in timelines.items():
            wait_caught_up(tl, producer, f"{kind} group's final drain", timeout=90)
            wait_until(
                lambda g=groups[kind]: committed(bootstrap, g, topic, PARTITIONS) == end,
                60,
                lambda g=groups[kind]: (
                    f"{g}'s commits to reach {end}: {committed(bootstrap, g, topic, PARTITIONS)}"
                ),
            )
    finally:
        producer._halt.set()
        for m in sorted(members, key=lambda m: m.protocol == "consumer"):
            if not m.stopped.is_set():
                m.stop()
        producer.join(90)
    logs = [*nodes, victim]
    for kind, tl in timelines.items():
        fenced = [f for gw in logs for f in fences(gw, groups[kind])]
        report = analyse(tl, acked, fenced)
        print(f"{kind} ({groups[kind]}): {report}")
        assert report.commits > 0
    print(
        f"failover: new view {view_at - killed_at:.2f}s, "
        f"shards loaded {loaded_at - killed_at:.2f}s after SIGKILL"
    )


def _check_routing(
    nodes: list[GatewayProcess], groups: dict[str, str], shards_of: dict[int, set[int]]
) -> None:
    """Every node names each group's owner (FindCoordinator), lists every fleet node as a
    broker (Metadata), and answers NOT_COORDINATOR for a group whose shard it does not own."""
    port_of = dict(zip(NODE_IDS, (n.port for n in nodes), strict=True))
    for node_id, gw in zip(NODE_IDS, nodes, strict=True):
        with WireClient(gw.port) as c:
            md = c.request(
                make_request(
                    3,
                    12,
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
            listed = {int(b.node_id): int(b.port) for b in md.brokers}
            assert all(listed.get(n) == p for n, p in port_of.items()), listed
            for g in groups.values():
                owner = next(n for n, ss in shards_of.items() if partition_for(g, SHARDS) in ss)
                fc = c.request(make_request(10, 3, key=g, key_type=0))
                assert (int(fc.error_code), int(fc.node_id), int(fc.port)) == (0, owner, port_of[owner]), fc
                of = c.request(make_request(9, 7, group_id=g, topics=None, require_stable=False))
                assert int(of.error_code) == (0 if owner == node_id else 16), (node_id, g, of)


def _last_acked_commits(tl: Timeline) -> dict[int, int]:
    out: dict[int, int] = {}
    with tl.lock:
        for c in tl.commits:
            for p, o in c.offsets.items():
                out[p] = max(out.get(p, -1), o)
    return out


def _moved(survivors: list[GatewayProcess], lost: set[int], since: float) -> tuple[float, float] | None:
    """(time of the first view without the dead node, time its last shard was loaded)."""
    view_at: float | None = None
    loaded: dict[int, float] = {}
    for gw in survivors:
        for e in gw.events():
            t = server_time(e)
            if t < since:
                continue
            if e.get("event") == "scaleout.fleet_view" and 1003 not in e["nodes"]:
                view_at = t if view_at is None else min(view_at, t)
            elif e.get("event") == "scaleout.shard_loaded" and int(e["shard"]) in lost:
                loaded[int(e["shard"])] = t
    if view_at is None or set(loaded) != lost:
        return None
    return view_at, max(loaded.values())


# -- the partitioned node ----------------------------------------------------------------------


def _commit(port: int, group: str, topic: str, offset: int, timeout: float = 15.0) -> str:
    """OffsetCommit v8 (simple, generation -1) straight to a node: "ok", an error code name, or
    "closed" when the node closed the connection instead of answering."""
    req = make_request(
        8,
        8,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    )
    try:
        with WireClient(port, timeout=timeout) as c:
            resp = c.request(req)
    except (ConnectionError, TimeoutError, OSError) as e:
        return f"closed: {type(e).__name__}"
    code = resp.topics[0].partitions[0].error_code
    return "ok" if int(code) == 0 else code.name


def _shard_commits(bootstrap: str, topic: str, shard: int, group: str, data_topic: str) -> list[int]:
    """Every committed offset of (group, data_topic, 0) in the shard's partition, in log order,
    read_uncommitted: aborted or fenced writes would show too."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "scaleout-e2e-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "enable.partition.eof": True,
        }
    )
    out: list[int] = []
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, shard), timeout=10)
        c.assign([TopicPartition(topic, shard, 0)])
        deadline = time.monotonic() + 30
        while high and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(str(msg.error()))
            record = decode_record(msg.key(), msg.value())
            key, value = record.key, record.value
            if (
                isinstance(key, OffsetCommitKey)
                and key.group == group
                and key.topic == data_topic
                and isinstance(value, OffsetCommitValue)
            ):
                out.append(value.offset)
            if (msg.offset() or 0) >= high - 1:
                break
    finally:
        c.close()
    return out


def test_partitioned_node_is_fenced(cluster: Any, started: list[GatewayProcess], tmp_path: Path) -> None:
    shards, kw = 4, {"topic": "gs-fleet-b", "fleet": "fleet-b"}
    fwd = Forwarder((n.proxy_port, n.proxied_port) for n in cluster.nodes)
    try:
        direct = start_node(tmp_path, "direct", cluster.bootstrap, 2001, shards, **kw)
        started.append(direct)
        cut = start_node(tmp_path, "cut", cluster.proxied_bootstrap, 2002, shards, **kw)
        started.append(cut)
        owners = wait_fleet([direct, cut], [2001, 2002], shards)
        group = group_on(owners[2002], "cut-off", shards)
        shard = partition_for(group, shards)
        data_topic = "fleet-b-data"
        create_topic(cluster.bootstrap, data_topic, 1)
        wait_until(lambda: _commit(cut.port, group, data_topic, 111) == "ok", 30, "a commit through the node")

        fwd.cut()
        cut_at = time.time()
        outcome = _commit(cut.port, group, data_topic, 777, timeout=20)
        assert outcome != "ok", "a node cut off from the cluster acknowledged a commit"

        # The other node takes the shard once the cut node's fleet session expired.
        wait_until(
            lambda: shard in loaded_after(direct, cut_at),
            SESSION_MS / 1000 + FAILOVER_SLACK_SECONDS,
            "the other node to take the shard",
        )
        wait_until(
            lambda: _commit(direct.port, group, data_topic, 888) == "ok", 30, "a commit at the new owner"
        )
        assert cut.events("scaleout.lease_expired"), "the cut-off node did not give up its shards"
        # Its Kafka append (the transaction holding offset 777) fails rather than lingers.
        wait_until(
            lambda: any(int(e["shard"]) == shard for e in cut.events("scaleout.shard_commit_failed")),
            30,
            "the cut-off node's append to fail",
        )

        # Heal: whatever the cut-off node still holds must not land after the new owner's write.
        fwd.heal()
        time.sleep(SESSION_MS / 1000 + 2)
        history = _shard_commits(cluster.bootstrap, "gs-fleet-b", shard, group, data_topic)
        assert 777 not in history, f"the cut-off node's commit reached the shard's partition: {history}"
        assert history[:1] == [111] and 888 in history, history
        assert history.index(888) > history.index(111)
        print(f"cut-off node's commit outcome: {outcome}; shard {shard} history {history}")

        # An upstream broker dies: the shard topic (3 replicas, min.insync.replicas=2) keeps
        # taking the fleet's appends once leadership moved; the commit is readable afterwards.
        victim = _leader(cluster.bootstrap, "gs-fleet-b", shard)  # broker ids are 0..2
        cluster.kill_broker(victim)
        try:
            wait_until(
                lambda: _commit_via_fleet(direct.port, group, data_topic, 999) == "ok",
                90,
                "a commit after a broker died",
            )
            assert committed(f"127.0.0.1:{direct.port}", group, data_topic, 1) == {0: 999}
        finally:
            cluster.start_broker(victim)
    finally:
        fwd.close()


def _leader(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return int(md.topics[topic].partitions[partition].leader)


def _commit_via_fleet(port: int, group: str, topic: str, offset: int) -> str:
    """A commit sent where FindCoordinator at `port` says the group's coordinator is."""
    try:
        with WireClient(port) as c:
            fc = c.request(make_request(10, 3, key=group, key_type=0))
    except (ConnectionError, OSError) as e:
        return f"closed: {type(e).__name__}"
    if int(fc.error_code) != 0:
        return fc.error_code.name
    return _commit(int(fc.port), group, topic, offset)
