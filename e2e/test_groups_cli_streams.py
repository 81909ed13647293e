"""`groupshift groups list/describe` of a streams group (KIP-1071), on groupshift embedded and on
a real Apache Kafka 4.4 node, compared; and against Kafka's own `kafka-streams-groups.sh`
(StreamsGroupCommand) on both servers.

The same scenario runs on both: the Kafka Streams 4.4 word count (e2e/streams_wordcount.py:
groupBy writes a repartition topic, count a changelog; 2 subtopologies x 4 tasks) with two
instances started with `group.protocol=streams`, its input counted to the end. Then:

- `list` shows the group with type `Streams` (and `--type streams` / `--type consumer` filter it
  in and out, through ListGroups v5's types filter on both servers);
- `describe --members --verbose` gives the same shape on both servers (two streams-protocol
  members, each with a disjoint half of the 8 active tasks, one task of each subtopology per
  partition, settled epochs), and on each server the same members, processes, client ids and
  tasks as Kafka's tool prints;
- `describe` (offsets) lists the partitions the active tasks read (the input topic and the
  repartition topic, 4 partitions each) with lag 0 on both, as Kafka's tool does on groupshift;
  `--state --verbose`, `--json` and `--all-groups` say Stable, 2 members, type Streams (and
  Kafka's tool the same coordinator, state and member count on groupshift);
- `migration` shows the members with their tasks (Kafka Streams' task ids), nothing pending.

Last, Kafka 4.4's refusal of an online roll is pinned: a Kafka Streams 3.9.2 (classic) instance runs
the word count on the Kafka node, and a StreamsGroupHeartbeat join with the same topology (what a
4.4 instance with `group.protocol=streams` sends first) is refused with GROUP_ID_NOT_FOUND "Group X
is not a streams group."; the group stays classic and the instance keeps its tasks (groupshift
converts it instead: e2e/test_streams_online_migration.py, docs/deviations.md).

Last, issue 31's real-application scenario on Kafka 4.4 itself (e2e/streams_wordcount.py's
`three_instances_one_killed`, which e2e/test_streams_groups.py runs on groupshift embedded and
e2e/test_upstream_kafka.py through groupshift in front of Kafka 3.9): three instances of the word
count on a group of its own with one standby replica, one SIGKILLed and restarted on its state
directory, the output counts equal to the truth at every step, and Kafka's tool showing three
members with the same task and standby shape the embedded run checks.

One Kafka node, one groupshift, nine application JVMs for the module.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from e2e.conftest import Gateways
from e2e.groups_cli import groups, groups_json, ok, table
from e2e.java_compile import Program
from e2e.streams_wordcount import (
    ALL_TASKS,
    APP,
    INPUT,
    LINES,
    OUTPUT,
    SOURCE,
    Instance,
    WordCountApp,
    check_three_members_with_standbys,
    described_members,
    process_id,
    produce,
    read_counts,
    tasks_of,
    three_instances_one_killed,
    truth,
    wait_for_disjoint_shares,
)
from e2e.upstream_streams import streams_heartbeat, word_count_topology
from harness.kafka_dist import resolve_component
from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
from protocol.client import WireClient
from tools.groups.wire import AdminWire, parse_bootstrap

pytestmark = pytest.mark.e2e

REPARTITION = f"{APP}-words-repartition"
CLASSIC_SOURCE = Path(__file__).parent / "java_programs" / "StreamsWordCountClassic.java"
GROUP_ID_NOT_FOUND = 69
# Kafka assigns a new streams group's tasks after 3 s and recomputes at most once a second by
# default; groupshift assigns in the heartbeat. These make Kafka do the same (as the
# differential suite runs it); the rest keeps one node's internal topics small.
KAFKA_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.assignment.interval.ms": "0",
    "group.streams.assignor.offload.enable": "false",
    # A SIGKILLed instance's tasks move once its session expires: 6 s, not 45 s (the last test).
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.heartbeat.interval.ms": "1000",
    "group.streams.heartbeat.interval.ms": "1000",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    # KIP-1331: Kafka's own in-memory store of the descriptions the instances push (none by
    # default); groupshift has none, as a default Kafka (test_topology_view).
    "group.streams.topology.description.plugin.class": (
        "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin"
    ),
}


@dataclass
class Server:
    name: str
    bootstrap: str
    instances: list[Instance]
    data_dir: Path  # groupshift's data dir, Kafka's log dir: what `groupshift fleet` reads


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """kafka-streams + kafka-tools 4.4.0 (Maven), the word count compiled against them (the
    classes cached beside the jars)."""
    dist = resolve_component("4.4.0", "streams")
    yield Program(SOURCE, dist.classpath, dist.home, tmp_path_factory.mktemp("streams-classes")).classpath()


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory,
    kafka_cluster_factory: Any,
    module_gateways: Gateways,
    classpath: str,
) -> Iterator[list[Server]]:
    """groupshift and Kafka 4.4, each running the word count with two instances that have
    shared out every task and counted every input line."""
    gw = module_gateways.start(
        "groupshift",
        sets=[
            "group.initial.rebalance.delay.ms=0",
            "group.streams.initial.rebalance.delay.ms=0",
            "group.streams.assignment.interval.ms=0",
        ],
    )
    kafka = kafka_cluster_factory("4.4", configs=KAFKA_SETTINGS, name="groups-cli-streams")
    work = tmp_path_factory.mktemp("streams-apps")
    out = []
    dirs = {"groupshift": gw.data_dir, "kafka": kafka.nodes[0].data_dir}
    for name, bootstrap in (("groupshift", gw.bootstrap), ("kafka", kafka.bootstrap)):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic(INPUT, 4, 1), NewTopic(OUTPUT, 2, 1)]).values():
            f.result()
        p = Producer({"bootstrap.servers": bootstrap})
        for i, line in enumerate(LINES):
            p.produce(INPUT, key=str(i), value=line)
        p.flush(30)
        instances = [
            Instance(classpath, bootstrap, work / f"{name}-state-{i}", work / f"{name}-{i}.log")
            for i in (1, 2)
        ]
        out.append(Server(name, bootstrap, instances, Path(dirs[name])))
    try:
        for s in out:
            shares = wait_for_disjoint_shares(s.instances, 60)
            assert set().union(*shares) == ALL_TASKS and all(shares), (s.name, [i.lines for i in s.instances])
            want = truth()
            assert read_counts(s.bootstrap, want, 40) == want, s.name
        yield out
    finally:
        for s in out:
            for i in s.instances:
                i.stop()


def kafka_tool(classpath: str, bootstrap: str, *args: str) -> str:
    """Kafka 4.4's kafka-streams-groups.sh (StreamsGroupCommand) against `bootstrap`: its stdout."""
    r = kafka_tool_result(classpath, bootstrap, *args)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return r.stdout


def kafka_tool_result(classpath: str, bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Kafka's tool run to its end, whatever its exit status."""
    return subprocess.run(
        [
            "java",
            *TOOL_JVM_OPTS,
            "-cp",
            classpath,
            "org.apache.kafka.tools.streams.StreamsGroupCommand",
            "--bootstrap-server",
            bootstrap,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def settled(bootstrap: str, *args: str, timeout: float = 30) -> list[dict[str, str]]:
    """`groups describe APP ARGS` rows once every member's epoch is the target's (a fresh group
    can still be reconciling when the applications report RUNNING)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = table(ok(bootstrap, "describe", APP, "--members", "--verbose", *args))
        if rows and all(r["MEMBER-EPOCH"] == r["TARGET-ASSIGNMENT-EPOCH"] for r in rows):
            return rows
        if time.monotonic() > deadline:
            raise AssertionError(rows)
        time.sleep(0.5)


def test_list_shows_the_streams_group_with_its_type(servers: list[Server]) -> None:
    for s in servers:
        assert APP in ok(s.bootstrap, "list").split(), s.name
        rows = {r["GROUP"]: r for r in table(ok(s.bootstrap, "list", "--type", "--state"))}
        assert rows[APP]["TYPE"] == "Streams" and rows[APP]["STATE"] == "Stable", (s.name, rows)
        streams = table(ok(s.bootstrap, "list", "--type", "streams"))
        assert [r["GROUP"] for r in streams] == [APP], (s.name, streams)
        consumer = table(ok(s.bootstrap, "list", "--type", "consumer,classic"))
        assert APP not in {r["GROUP"] for r in consumer}, (s.name, consumer)
        listed = groups_json(s.bootstrap, "list", "--type", "streams")
        assert listed == [{"group": APP, "type": "Streams", "state": "Stable", "kafka_streams": False}], (
            s.name
        )


def test_members_have_the_same_shape_on_both_servers_and_match_kafkas_tool(
    servers: list[Server], classpath: str
) -> None:
    shapes = []
    for s in servers:
        rows = settled(s.bootstrap)
        assert len(rows) == 2, (s.name, rows)
        tasks = [tasks_of(r["ASSIGNMENTS"]) for r in rows]
        for r, t in zip(rows, tasks, strict=True):
            assert r["MEMBER-PROTOCOL"] == "streams" and r["HOST"].startswith("/"), (s.name, r)
            assert t["ACTIVE"] == t["TARGET-ACTIVE"] and set(t) == {"ACTIVE", "TARGET-ACTIVE"}, (s.name, r)
        assert tasks[0]["ACTIVE"] | tasks[1]["ACTIVE"] == ALL_TASKS, (s.name, rows)
        assert not tasks[0]["ACTIVE"] & tasks[1]["ACTIVE"], (s.name, rows)
        assert rows[0]["PROCESS"] != rows[1]["PROCESS"], (s.name, rows)
        # the shape: per member, how many tasks of each subtopology it runs
        shapes.append(sorted(sorted(t.split("_")[0] for t in m["ACTIVE"]) for m in tasks))

        # Kafka's own tool prints the same members, processes, client ids and tasks.
        members = ("--describe", "--group", APP, "--members", "--verbose")
        theirs = table(kafka_tool(classpath, s.bootstrap, *members))
        assert {r["MEMBER"]: (r["PROCESS"], r["CLIENT-ID"], tasks_of(r["ASSIGNMENTS"])) for r in theirs} == {
            r["MEMBER"]: (r["PROCESS"], r["CLIENT-ID"], t) for r, t in zip(rows, tasks, strict=True)
        }, (s.name, theirs, rows)
        assert {r["MEMBER-EPOCH"] for r in theirs} == {r["MEMBER-EPOCH"] for r in rows}, s.name

        described = groups_json(s.bootstrap, "describe", APP, "--members")
        assert described["type"] == "streams" and described["state"] == "Stable", (s.name, described)
        assert [len(m["assignment"]["active"]) for m in described["members"]] == [2, 2], (s.name, described)
        assert {sub["subtopology"]: sub["input_topics"] for sub in described["subtopologies"]} == {
            "0": [INPUT],
            "1": [REPARTITION],
        }, (s.name, described)
    assert shapes[0] == shapes[1] == [["0", "0", "1", "1"]] * 2, shapes


def test_topology_view(servers: list[Server], classpath: str) -> None:
    """`describe --topology` prints what Kafka's `--describe --topology` prints: on Kafka (with
    its in-memory topology description plugin) the description the word count's instances pushed
    (StreamsGroupTopologyDescriptionUpdate, asked for by the heartbeat), in Kafka's layout; on
    groupshift, which stores none, Kafka's "No topology description is stored" error."""
    for s in servers:
        deadline = time.monotonic() + 30
        while True:
            ours = groups(s.bootstrap, "describe", APP, "--topology")
            if s.name != "kafka" or ours.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # the instances push once a heartbeat answer asks them to
        theirs = kafka_tool_result(classpath, s.bootstrap, "--describe", "--group", APP, "--topology")
        assert ours.stdout == theirs.stdout, (s.name, ours.stdout, theirs.stdout, theirs.stderr[-2000:])
        if s.name == "kafka":
            assert ours.returncode == 0 and ours.stdout.startswith("Topologies:\n"), ours.stdout
            assert f"Source: KSTREAM-SOURCE-0000000000 (topics: [{INPUT}])" in ours.stdout, ours.stdout
        else:
            assert ours.returncode == 1, ours
            assert ours.stdout == f"\nError: No topology description is stored for streams group '{APP}'.\n"
        described = groups_json(s.bootstrap, "describe", APP, "--topology", expect=ours.returncode)
        assert described["topology_description_status"] == (
            "AVAILABLE" if s.name == "kafka" else "NOT_STORED"
        )


def test_offsets_and_state_views(servers: list[Server], classpath: str) -> None:
    want = {(INPUT, p) for p in range(4)} | {(REPARTITION, p) for p in range(4)}
    for s in servers:
        deadline = time.monotonic() + 30
        while True:  # the repartition topic's last commit follows its last record by a commit interval
            rows = table(ok(s.bootstrap, "describe", APP, "--verbose"))
            if all(r["OFFSET-LAG"] == "0" for r in rows) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert {(r["TOPIC"], int(r["PARTITION"])) for r in rows} == want, (s.name, rows)
        assert all(r["OFFSET-LAG"] == "0" and r["CURRENT-OFFSET"] == r["LOG-END-OFFSET"] for r in rows), rows
        assert sum(int(r["CURRENT-OFFSET"]) for r in rows if r["TOPIC"] == INPUT) == len(LINES), rows
        if s.name == "groupshift":  # Kafka's tool reads the same lag from groupshift's answers
            theirs = table(kafka_tool(classpath, s.bootstrap, "--describe", "--group", APP))
            assert {(r["TOPIC"], int(r["PARTITION"]), r["OFFSET-LAG"]) for r in theirs} == {
                (r["TOPIC"], int(r["PARTITION"]), r["OFFSET-LAG"]) for r in rows
            }, theirs

        (state,) = table(ok(s.bootstrap, "describe", APP, "--state", "--verbose"))
        assert (state["STATE"], state["#MEMBERS"], state["TYPE"]) == ("Stable", "2", "Streams"), state
        assert int(state["GROUP-EPOCH"]) >= int(state["TARGET-ASSIGNMENT-EPOCH"]) > 0, (s.name, state)
        # StreamsGroupDescribe v1's AssignorName (Kafka 4.4's only task assignor)
        assert state["ASSIGNOR"] == "sticky", (s.name, state)
        summary = groups_json(s.bootstrap, "describe", APP, "--state")
        assert (summary["num_members"], summary["topology_epoch"]) == (2, 0), (s.name, summary)
        every = {r["GROUP"]: r for r in table(ok(s.bootstrap, "describe", "--all-groups", "--state"))}
        assert every[APP]["TYPE"] == "Streams", (s.name, every)
        if s.name == "groupshift":
            (theirs_state,) = table(
                kafka_tool(classpath, s.bootstrap, "--describe", "--group", APP, "--state")
            )
            for column in ("COORDINATOR (ID)", "ASSIGNOR", "STATE", "#MEMBERS"):
                assert theirs_state[column] == state[column], (column, theirs_state, state)


def test_migration_view_shows_tasks(servers: list[Server]) -> None:
    for s in servers:
        text = ok(s.bootstrap, "migration", APP)
        assert "type streams, state Stable, phase streams" in text, (s.name, text)
        assert "Members by protocol: streams 2" in text and "Next step: Done" in text, (s.name, text)
        rep = groups_json(s.bootstrap, "migration", APP)
        assert {t for m in rep["members"] for t in m["active"]} == ALL_TASKS, (s.name, rep)
        assert [len(m["active"]) for m in rep["members"]] == [4, 4], (s.name, rep)
        assert not rep["pending_revocation"] and all(not m["awaiting"] for m in rep["members"]), rep


def test_fleet_report_counts_and_shows_the_streams_group(servers: list[Server]) -> None:
    """`groupshift fleet`'s rows (its plain-Python reference: the same facts and report rows the
    Spark job computes) from groupshift's data dir and Kafka 4.4's log dir, read while the
    application runs: the streams group with its type, members, active tasks and state, counted
    per cluster, shown in report.html, its upgrade verdict 'streams group already'."""
    from tools.fleet.inputs import discover
    from tools.fleet.reference import facts_and_verdicts
    from tools.fleet.report import from_rows, render

    for s in servers:
        deadline = time.monotonic() + 20
        while True:  # the coordinator's records reach the log as they are written
            facts, verdicts = facts_and_verdicts(discover([f"{s.name}={s.data_dir}"]), ["classic-protocol"])
            row = next((f for f in facts if f["group"] == APP), None)
            got = None if row is None else (row["type"], row["size"], row["tasks"], row["state"])
            if got == ("streams", 2, len(ALL_TASKS), "Stable") or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert got == ("streams", 2, len(ALL_TASKS), "Stable") and row and row["kafka_streams"], (s.name, row)
        data = from_rows(facts, verdicts, [])
        (cluster,) = data.clusters
        assert (cluster["streams_groups"], cluster["classic_streams_groups"]) == (1, 0), (s.name, cluster)
        assert data.streams == [
            {
                "cluster": s.name,
                "group": APP,
                "type": "streams",
                "size": 2,
                "tasks": len(ALL_TASKS),
                "state": "Stable",
            }
        ], s.name
        assert {"cluster": s.name, "status": "streams group already", "count": 1} in data.readiness, (
            data.readiness
        )
        down = next(v for v in verdicts if v["group"] == APP and v["direction"] == "downgrade")
        assert down["verdict"] == "NEEDS-ACTION" and down["blocker"] == "streams-empty", (s.name, down)
        page = render(data)
        assert 'id="streams-groups"' in page and f"<td>{APP}</td>" in page, s.name


def test_reset_offsets_refused_while_running_then_done_as_kafkas_tool_does(
    servers: list[Server], classpath: str
) -> None:
    """`reset-offsets` of a streams group: refused with Kafka's message while the application
    runs; once its instances are gone, the dry run plans what Kafka's tool plans on the same
    server (the input topic's committed partitions; the repartition topic is internal) and
    --execute commits it. Last in the module: it stops the applications."""
    refused_text = f"Assignments can only be reset if the group '{APP}' is inactive, but the current state is"
    reset = ("--reset-offsets", "--group", APP, "--all-input-topics", "--to-earliest")
    for s in servers:
        r = groups(s.bootstrap, "reset-offsets", APP, "--all-input-topics", "--to-earliest", "--execute")
        assert r.returncode == 4 and refused_text in r.stderr, (s.name, r.stdout, r.stderr)
        theirs = kafka_tool_result(classpath, s.bootstrap, *reset, "--execute")
        assert refused_text in theirs.stdout + theirs.stderr, (s.name, theirs)
    for s in servers:
        for i in s.instances:
            i.stop()
    for s in servers:
        deadline = time.monotonic() + 30
        while groups_json(s.bootstrap, "describe", APP, "--state")["state"] != "Empty":
            assert time.monotonic() < deadline, s.name
            time.sleep(0.5)
        ours = table(ok(s.bootstrap, "reset-offsets", APP, "--all-input-topics", "--to-earliest"))
        plan = {(r["TOPIC"], int(r["PARTITION"])): int(r["NEW-OFFSET"]) for r in ours}
        # the input topic's partitions, not the repartition topic's (internal), as Kafka's tool
        assert plan == {(INPUT, p): 0 for p in range(4)}, (s.name, plan)
        theirs_plan = table(kafka_tool(classpath, s.bootstrap, *reset, "--dry-run"))
        assert {(r["TOPIC"], int(r["PARTITION"])): int(r["NEW-OFFSET"]) for r in theirs_plan} == plan, (
            s.name,
            theirs_plan,
        )
        done = groups_json(
            s.bootstrap, "reset-offsets", APP, "--all-input-topics", "--to-earliest", "--execute"
        )
        assert done["executed"] and all(o["error"] is None for o in done["offsets"]), (s.name, done)
        after = groups_json(s.bootstrap, "describe", APP)["offsets"]
        now = {(r["topic"], r["partition"]): r["current_offset"] for r in after}
        assert {tp: o for tp, o in now.items() if tp[0] == INPUT} == plan, (s.name, after)
        # the empty streams group deletes (DeleteGroups), as Kafka's tool's --delete does
        assert f"Deletion of requested consumer groups ('{APP}') was successful." in ok(
            s.bootstrap, "delete", APP
        ), s.name
        assert groups(s.bootstrap, "describe", APP).returncode == 3, s.name


def test_kafka_refuses_the_online_roll_of_a_classic_streams_group(
    servers: list[Server], tmp_path: Path
) -> None:
    """Kafka 4.4 has only the offline migration: a `group.protocol=streams` instance joining a
    running classic Kafka Streams group is refused, and the group stays classic with its
    instance undisturbed. Pinned with the first StreamsGroupHeartbeat such an instance sends
    (the same topology, on the wire: a second JVM would only add its retries)."""
    kafka = next(s for s in servers if s.name == "kafka")
    app, output = "wordcount-roll-refused", "counts-out-refused"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for f in admin.create_topics([NewTopic(output, 2, 1)]).values():
        f.result()
    dist = resolve_component("3.9.2", "streams")
    program = Program(CLASSIC_SOURCE, dist.classpath, dist.home, tmp_path / "classes")
    classic = Instance(
        program.classpath(),
        kafka.bootstrap,
        tmp_path / "state",
        tmp_path / "classic.log",
        app=app,
        output_topic=output,
        main_class="StreamsWordCountClassic",
        extra_args=("localhost:7301", "10000"),
    )
    wire = AdminWire(kafka.bootstrap)
    host, port = parse_bootstrap(kafka.bootstrap)[0]
    client = WireClient(port, host)
    try:
        [share] = wait_for_disjoint_shares([classic], 60)
        assert share == ALL_TASKS, classic.lines[-6:]
        topology = word_count_topology(
            INPUT, f"{app}-words-repartition", f"{app}-counts-changelog", {"cleanup.policy": "compact"}
        )
        r = streams_heartbeat(
            client,
            app,
            str(uuid.uuid4()),
            0,
            topology=topology,
            process_id=str(uuid.uuid4()),
            active_tasks=[],
            standby_tasks=[],
            warmup_tasks=[],
            client_tags=[],
        )
        assert (r.error_code, r.error_message) == (
            GROUP_ID_NOT_FOUND,
            f"Group {app} is not a streams group.",
        ), r
        # Still the classic group it was, its instance running every task.
        [listed] = [g for g in wire.list_groups() if g["group"] == app]
        assert str(listed["type"]).lower() == "classic", listed
        described = wire.describe_group(app)
        assert (described.group_state, described.protocol_type, described.protocol_data) == (
            "Stable",
            "consumer",
            "stream",
        ), described
        assert len(described.members) == 1
        assert classic.proc.poll() is None and classic.tasks() == ALL_TASKS, classic.lines[-6:]
    finally:
        client.close()
        wire.close()
        classic.stop()


def test_three_instances_one_killed_and_restarted_on_kafka(
    servers: list[Server], classpath: str, tmp_path: Path
) -> None:
    """Issue 31's real application on Kafka 4.4 itself, as groupshift runs it (embedded:
    e2e/test_streams_groups.py; in front of Kafka 3.9: e2e/test_upstream_kafka.py): the same
    three-instance scenario, the same describe checks. A group of its own (this module's other
    groups are done), with Kafka's group config `streams.num.standby.replicas=1` as the
    embedded run has `group.streams.num.standby.replicas=1`."""
    kafka = next(s for s in servers if s.name == "kafka")
    app, source, output = "wordcount-kill", "words-in-kill", "counts-out-kill"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for f in admin.create_topics([NewTopic(source, 4, 1), NewTopic(output, 2, 1)]).values():
        f.result()
    standby = ConfigResource(
        ConfigResource.Type.GROUP,
        app,
        incremental_configs=[
            ConfigEntry("streams.num.standby.replicas", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([standby])[standby].result(30)
    produce(kafka.bootstrap, source, LINES, "first")
    wc = WordCountApp(classpath, kafka.bootstrap, tmp_path, app, source, output)
    try:
        three_instances_one_killed(wc, list(LINES), lambda: "on Kafka 4.4")
        rows, text = described_members(classpath, kafka.bootstrap, app)
        check_three_members_with_standbys(rows, text, process_id(wc.state_dir(1), app))
    finally:
        wc.stop()
