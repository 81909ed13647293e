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

* `test_fleet_streams_group_failover`: a streams group (KIP-1071) on a two-node fleet, served to
  a real Kafka Streams 4.4 word count (`group.protocol=streams`, two instances with standbys):
  routing, the internal topics on the cluster, the group's records in the shard's partition,
  the owner SIGKILLed while input flows, the survivor's replay equal to the dead owner's live
  state, the members going on with their epochs and tasks, the counts exact.

One cluster for the module (`proxied_listener=True` gives it the forwarders' listeners). Takes
about 3-4 minutes here. Without java/mvn the cluster fixture skips with the reason.
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


# -- a streams group (KIP-1071) on the fleet -----------------------------------------------------

STREAMS_NODE_IDS = (3001, 3002)
STREAMS_SHARDS = 4
# The streams group's session on the nodes (FAST_UPSTREAM_SETTINGS) is 6 s: the failover (the
# fleet session, the rebalance, the fence, the load) must fit in it, or the members would be
# fenced at the new owner before their first heartbeat there.
STREAMS_SETTINGS = ("group.streams.num.standby.replicas=1",)
STREAMS_SESSION_MS = 6000  # group.streams.session.timeout.ms of FAST_UPSTREAM_SETTINGS


def _streams_describe(port: int, group: str) -> Any:
    """StreamsGroupDescribe v1 of `group` at the node on `port`: the group's entry."""
    with WireClient(port, timeout=15) as c:
        (described,) = c.request(
            make_request(
                89,
                1,
                group_ids=[group],
                include_authorized_operations=False,
                include_topology_description=False,
            )
        ).groups
    return described


def _streams_state(d: Any) -> dict[str, Any]:
    """What a describe says of the group and its members that the records determine (the
    members' task offsets are reported in heartbeats, not recorded, so they are left out)."""

    def tasks(a: Any) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
        return {
            kind: sorted((str(t.subtopology_id), tuple(t.partitions)) for t in getattr(a, kind) or ())
            for kind in ("active_tasks", "standby_tasks", "warmup_tasks")
        }

    topology = None
    if d.topology is not None:
        topology = (
            int(d.topology.epoch),
            sorted(
                (
                    str(s.subtopology_id),
                    tuple(s.source_topics),
                    tuple(s.repartition_sink_topics),
                    tuple((str(i.name), int(i.partitions)) for i in s.state_changelog_topics),
                    tuple((str(i.name), int(i.partitions)) for i in s.repartition_source_topics),
                )
                for s in d.topology.subtopologies
            ),
        )
    return {
        "error": int(d.error_code),
        "state": d.group_state,
        "group_epoch": int(d.group_epoch),
        "assignment_epoch": int(d.assignment_epoch),
        "topology": topology,
        "members": {
            str(m.member_id): {
                "epoch": int(m.member_epoch),
                "process": str(m.process_id),
                "client_id": str(m.client_id),
                "topology_epoch": int(m.topology_epoch),
                "assignment": tasks(m.assignment),
                "target": tasks(m.target_assignment),
            }
            for m in d.members
        },
    }


def _times_listed(port: int, group: str) -> int:
    """How often an admin client bootstrapped at the node on `port` sees `group` listed: it
    asks every broker of the node's Metadata answer (ListGroups v5, type `streams`) and puts
    the answers together, as Kafka's Admin.listGroups and kafka-python do."""
    with WireClient(port) as c:
        md = c.request(
            make_request(
                3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
    seen = 0
    for b in md.brokers:
        with WireClient(int(b.port), host=str(b.host)) as c:
            listed = c.request(make_request(16, 5, states_filter=[], types_filter=["streams"]))
        assert int(listed.error_code) == 0, (b, listed)
        seen += sum(1 for g in listed.groups if g.group_id == group)
    return seen


def _shard_record_types(bootstrap: str, topic: str, shard: int, group: str) -> dict[str, int]:
    """Record key type -> count of the records of `group` in the shard's partition, read
    committed (what a new owner loads)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from records.codec import UnknownRecordTypeError

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "scaleout-e2e-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    out: dict[str, int] = {}
    try:
        c.assign([TopicPartition(topic, shard, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(str(msg.error()))
            try:
                key = decode_record(msg.key(), msg.value()).key
            except UnknownRecordTypeError:
                continue
            if getattr(key, "group_id", getattr(key, "group", None)) == group:
                name = type(key).__name__
                out[name] = out.get(name, 0) + 1
    finally:
        c.close()
    return out


def test_fleet_streams_group_failover(cluster: Any, started: list[GatewayProcess], tmp_path: Path) -> None:
    """Issue 31 point 4: a Kafka Streams 4.4 word count (`group.protocol=streams`, two
    instances, one standby replica per stateful task) against a two-node fleet in front of
    Kafka 3.9. The group is routed to its shard's owner (FindCoordinator at every node; a
    StreamsGroupHeartbeat or Describe at the other node is answered NOT_COORDINATOR); its
    internal topics are created on the cluster; its records are in the shard's partition; an
    admin client bootstrapped at either node sees it listed once. The
    owner is SIGKILLed while the application runs: the other node loads the shard, and what it
    describes from the replayed records equals what the dead owner described live; the members
    keep their ids, epochs and tasks (no rebalance: neither instance leaves RUNNING), the input
    produced across the failover is counted exactly."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from e2e.java_compile import Program
    from e2e.streams_wordcount import (
        LINES,
        SOURCE,
        WHILE_KILLED,
        Feeder,
        WordCountApp,
        described_members,
        expect_disjoint_cover,
        produce,
        read_counts,
        tasks_of,
        truth,
        uncommitted,
    )
    from e2e.upstream_streams import streams_heartbeat, word_count_topology
    from harness.kafka_dist import resolve_component

    began = time.monotonic()
    dist = resolve_component("4.4.0", "streams")
    program = Program(SOURCE, dist.classpath, dist.home, tmp_path / "classes")  # javac overlaps
    kw: dict[str, Any] = {"topic": "gs-fleet-c", "fleet": "fleet-c", "settings": STREAMS_SETTINGS}
    nodes = [
        start_node(tmp_path, f"s{i}", cluster.bootstrap, nid, STREAMS_SHARDS, **kw)
        for i, nid in enumerate(STREAMS_NODE_IDS)
    ]
    started.extend(nodes)
    app = "fleet-wc"
    shard = partition_for(app, STREAMS_SHARDS)
    source, output = f"{app}-in", f"{app}-out"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic(source, 4, 3), NewTopic(output, 2, 3)]).values():
        f.result(30)
    produce(cluster.bootstrap, source, LINES, "first")
    bootstrap = ",".join(gw.bootstrap for gw in nodes)
    wc = WordCountApp(program.classpath(), bootstrap, tmp_path, app, source, output)
    phases: dict[str, float] = {}
    try:
        # The JVMs start while the fleet settles; the instances join once it has.
        running = [wc.start(n, held=True) for n in (1, 2)]
        shards_of = wait_fleet(nodes, STREAMS_NODE_IDS, STREAMS_SHARDS)
        owner_id = next(n for n, owned in shards_of.items() if shard in owned)
        other_id = next(n for n in STREAMS_NODE_IDS if n != owner_id)
        owner, other = (nodes[STREAMS_NODE_IDS.index(n)] for n in (owner_id, other_id))

        # Routing: every node names the owner; the other node refuses the group's requests.
        for gw in nodes:
            with WireClient(gw.port) as c:
                fc = c.request(make_request(10, 3, key=app, key_type=0))
                assert (int(fc.error_code), int(fc.node_id), int(fc.port)) == (0, owner_id, owner.port), fc
        with WireClient(other.port) as c:
            topology = word_count_topology(
                source, f"{app}-words-repartition", f"{app}-counts-changelog", {"cleanup.policy": "compact"}
            )
            hb = streams_heartbeat(c, app, "not-here", 0, topology=topology, process_id="p", active_tasks=[])
            assert int(hb.error_code) == 16, hb  # NOT_COORDINATOR
        assert int(_streams_describe(other.port, app).error_code) == 16
        assert int(_streams_describe(owner.port, app).error_code) == 69  # GROUP_ID_NOT_FOUND, yet
        phases["fleet and input"] = time.monotonic() - began

        for instance in running:
            instance.go()
        seen = owner.log_tail
        shares = expect_disjoint_cover(running, 90, seen)
        want = truth(LINES)
        assert read_counts(cluster.bootstrap, want, 60, output) == want, seen()
        # The internal topics are the cluster's, created by the owner.
        listed = admin.list_topics(timeout=10).topics
        for internal in (f"{app}-words-repartition", f"{app}-counts-changelog"):
            assert internal in listed and len(listed[internal].partitions) == 4, sorted(listed)
        # Settled: every member at its target (standbys included), every input line committed.
        live = wait_until(
            lambda: (
                s
                if (s := _streams_state(_streams_describe(owner.port, app)))["state"] == "Stable"
                and len(s["members"]) == 2
                and all(m["assignment"] == m["target"] for m in s["members"].values())
                else None
            ),
            30,
            lambda: f"the streams group to settle: {_streams_describe(owner.port, app)}",
        )
        wait_until(
            lambda: not uncommitted(bootstrap, app, [source, f"{app}-words-repartition"]),
            30,
            "every input and repartition record committed",
        )
        records = _shard_record_types(cluster.bootstrap, "gs-fleet-c", shard, app)
        for kind in (
            "StreamsGroupMetadataKey",
            "StreamsGroupTopologyKey",
            "StreamsGroupMemberMetadataKey",
            "StreamsGroupTargetAssignmentMetadataKey",
            "StreamsGroupTargetAssignmentMemberKey",
            "StreamsGroupCurrentMemberAssignmentKey",
            "OffsetCommitKey",
        ):
            assert records.get(kind), f"no {kind} of {app} in shard {shard}'s partition: {records}"
        # Listed once, by its coordinator, whichever node an admin client asks.
        assert [_times_listed(gw.port, app) for gw in nodes] == [1, 1]
        lines_before = [len(i.lines) for i in running]
        phases["two instances counting"] = time.monotonic() - began - sum(phases.values())

        # The owner dies while the application runs: input is flowing (a feeder appends it in
        # small batches) and the instances are processing and committing it.
        feeder = Feeder(cluster.bootstrap, source, WHILE_KILLED, "killed", batch=10, pause=0.1)
        while feeder.sent < len(WHILE_KILLED) // 4:
            time.sleep(0.02)
        killed_at = time.time()
        owner.kill()
        assert feeder.sent < len(WHILE_KILLED), "the input stopped flowing before the kill"
        wait_until(
            lambda: shard in loaded_after(other, killed_at),
            SESSION_MS / 1000 + FAILOVER_SLACK_SECONDS,
            lambda: f"the survivor to load shard {shard}: {latest_view(other)}",
            interval=0.1,
        )
        loaded_at = time.monotonic()
        replayed = _streams_state(_streams_describe(other.port, app))
        assert replayed == live, f"replayed at the new owner:\n{replayed}\nlive at the old one:\n{live}"
        with WireClient(other.port) as c:
            fc = c.request(make_request(10, 3, key=app, key_type=0))
            assert (int(fc.error_code), int(fc.node_id)) == (0, other_id), fc
        feeder.join(60)
        want = truth(LINES + WHILE_KILLED)
        assert read_counts(cluster.bootstrap, want, 60, output) == want, other.log_tail()
        wait_until(
            lambda: not uncommitted(bootstrap, app, [source, f"{app}-words-repartition"]),
            30,
            "the input produced across the failover committed at the new owner",
        )
        phases["failover, counted"] = time.monotonic() - began - sum(phases.values())
        assert _times_listed(other.port, app) == 1
        # Kafka's own tool finds the new owner through the fleet and describes the same tasks
        # (its JVM's start overlaps the wait for the members' sessions below).
        rows, text = described_members(dist.classpath, bootstrap, app)
        assert sorted(r["MEMBER"] for r in rows) == sorted(live["members"]), text
        assert [tasks_of(r["ASSIGNMENTS"]).get("ACTIVE") for r in rows] == [
            {f"{s}_{p}" for s, ps in live["members"][r["MEMBER"]]["assignment"]["active_tasks"] for p in ps}
            for r in rows
        ], text
        # The new owner armed every member's session when it loaded the shard: once that
        # session has passed, members still there heartbeat at the new owner.
        time.sleep(max(0.0, loaded_at + STREAMS_SESSION_MS / 1000 + 1 - time.monotonic()))
        # The group went on as it was: same members, epochs and tasks, no instance rebalanced.
        after = _streams_state(_streams_describe(other.port, app))
        assert after == live, f"after the failover:\n{after}\nbefore:\n{live}"
        assert [i.tasks() for i in running] == shares
        assert [len(i.lines) for i in running] == lines_before, [i.lines[-4:] for i in running]
        phases["tool, sessions passed"] = time.monotonic() - began - sum(phases.values())
    finally:
        wc.stop()
    print(
        f"streams group {app} on shard {shard}: shard loaded at the survivor; "
        f"phases { ({k: round(v, 1) for k, v in phases.items()}) }"
    )
