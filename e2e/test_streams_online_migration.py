"""Online migration of a Kafka Streams application (issue 31, part 3; beyond Kafka, which only
migrates offline): the word count started as three Kafka Streams 3.9.2 instances on the classic
protocol, then rolled one instance at a time to Kafka Streams 4.4.0 with
`group.protocol=streams` and back to 3.9.2, with no stop, on one groupshift (embedded).

- The first 4.4 instance converts the classic group to a streams group while the two other 3.9
  instances keep running inside it (their JoinGroup/SyncGroup answered with Streams'
  AssignmentInfo from the streams group's target: docs/streams-classic-groups.md); the next 3.9
  instance then leaves and a second 4.4 instance joins, then the last 3.9 instance and a third.
- And back (Kafka has no such thing either): a 3.9 instance replaces a 4.4 instance (it joins the
  streams group as a classic member), then a second; when the last 4.4 instance leaves the group
  becomes a classic group again for the 3.9 instances (translation/streams_downgrade.py).
- The group type (ListGroups) is recorded at each step: classic, then streams for the five
  steps with a 4.4 instance in the group, then classic.
- No task is active on two instances at once: every instance's own state listener reports its
  active tasks each time it is RUNNING (e2e/streams_wordcount.py's `TASKS` lines), sampled all
  along the roll; two RUNNING instances never report the same task, and each step ends with
  every task active on exactly one running instance.
- Mid-roll, DescribeGroups gives the 3.9 instances (one or two) with the tasks they run, and
  Kafka 4.4's `kafka-consumer-groups.sh` lists them.
- The counts in the output topic equal the truth of the input (a third produced before the
  roll, a third after each of the first two steps) after the roll and at the end.

Each step's new JVM is started ahead, while the step before settles, and held before it joins
(e2e/streams_wordcount.py's `held`): at its step the old instance gets SIGTERM (out of the
sample from then on) and the new one is let go, so a step waits for the group, not for a JVM's
start (seconds on a loaded machine). Kafka 4.4 refusing the same roll is
pinned by e2e/test_groups_cli_streams.py::test_kafka_refuses_the_online_roll_of_a_classic_streams_group.
The counts catch a refused stale-epoch commit of a 4.4 instance (it rejoins and counts its
input again): about one run in four did before streams groups kept per-task assignment epochs
(docs/streams-groups.md, "Commits with an older member epoch").

Programs: e2e/java_programs/StreamsWordCountClassic.java against the kafka-streams 3.9.2 jars
and e2e/java_programs/StreamsWordCount.java against 4.4.0, their classes cached beside the jars
(as e2e/test_streams_classic_groups.py keeps them).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from e2e.conftest import Gateways
from e2e.java_compile import Program
from e2e.streams_wordcount import ALL_TASKS, INPUT, LINES, OUTPUT, SOURCE, Instance, read_counts, truth
from harness.kafka_dist import resolve_component
from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
from tools.groups.wire import AdminWire
from translation.embedded_protocol import parse_assignment
from translation.streams_classic_protocol import decode_assignment_info, parse_streams_member_metadata

pytestmark = pytest.mark.e2e

APP = "wordcount-roll"
CLASSIC_SOURCE = Path(__file__).parent / "java_programs" / "StreamsWordCountClassic.java"


class Watch:
    """The instances of the roll, sampled: each RUNNING instance's last reported active tasks."""

    def __init__(self) -> None:
        self.instances: dict[str, Instance] = {}
        self.overlaps: list[str] = []

    def shares(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for name, i in self.instances.items():
            states = [line for line in i.lines if line.startswith("STATE")]
            if states and states[-1] == "STATE RUNNING" and i.proc.poll() is None:
                out[name] = i.tasks() or set()
        return out

    def sample(self) -> dict[str, set[str]]:
        shares = self.shares()
        seen: dict[str, str] = {}
        for name, tasks in shares.items():
            for t in tasks:
                if t in seen:
                    self.overlaps.append(f"task {t} active on {seen[t]} and {name}")
                seen[t] = name
        return shares

    def wait_all_running(self, names: set[str], timeout: float) -> dict[str, set[str]]:
        """Until exactly `names` run, with every task once among them."""
        deadline = time.monotonic() + timeout
        shares: dict[str, set[str]] = {}
        while time.monotonic() < deadline:
            shares = self.sample()
            if (
                set(shares) == names
                and all(shares.values())
                and set().union(*shares.values()) == ALL_TASKS
                and sum(map(len, shares.values())) == len(ALL_TASKS)
            ):
                return shares
            time.sleep(0.2)
        raise AssertionError((shares, {n: i.lines[-6:] for n, i in self.instances.items()}, self.overlaps))

    def replace(self, old: str, new: str, instance: Instance) -> None:
        """One roll step: SIGTERM to `old` (out of the sample from now on), the held `instance`
        let go at once (it joins while `old` shuts down, as in an operator's roll once the new
        instance is up), then `old` waited for."""
        i = self.instances.pop(old)
        i.proc.terminate()
        instance.go()
        self.instances[new] = instance
        try:
            i.proc.wait(20)
        except subprocess.TimeoutExpired:
            i.proc.kill()
            i.proc.wait()


def _group_type(wire: AdminWire) -> str | None:
    for g in wire.list_groups():
        if g["group"] == APP:
            return str(g["type"]).lower()
    return None


def _described_tasks(assignment: bytes) -> set[str]:
    """The active tasks of a described member's AssignmentInfo, as the instances name them."""
    user_data = parse_assignment(assignment).user_data
    assert user_data is not None
    return {f"{t.subtopology}_{t.partition}" for t in decode_assignment_info(user_data).active_tasks}


def _endpoint(n: int) -> str:
    """The `application.server` of classic instance n."""
    return f"localhost:{7200 + n}"


def _check_described(wire: AdminWire, shares: dict[str, set[str]]) -> list[Any]:
    """DescribeGroups mid-roll (Kafka answers any streams group Dead): exactly the running
    classic instances, as a classic consumer group describes them, each with the tasks it runs;
    the members in the order of the classic instances' names."""
    described = wire.describe_group(APP)
    assert (described.error_code, described.protocol_type, described.protocol_data) == (
        0,
        "consumer",
        "stream",
    ), described
    by_endpoint = {
        parse_streams_member_metadata(m.member_metadata).info.endpoint: m for m in described.members
    }
    classic = sorted(name for name in shares if name.startswith("classic-"))
    want = {_endpoint(int(name.removeprefix("classic-"))): name for name in classic}
    assert sorted(map(str, by_endpoint)) == sorted(want) and len(described.members) == len(want), described
    for endpoint, name in want.items():
        member = by_endpoint[endpoint]
        assert member.client_id.startswith(APP) and "StreamThread" in member.client_id, member
        assert _described_tasks(member.member_assignment) == shares[name], (name, member)
    return [by_endpoint[_endpoint(int(name.removeprefix("classic-")))] for name in classic]


def test_roll_classic_streams_to_streams_protocol(module_gateways: Gateways, tmp_path: Path) -> None:
    classic_dist = resolve_component("3.9.2", "streams")
    streams_dist = resolve_component("4.4.0", "streams")
    classic_program = Program(CLASSIC_SOURCE, classic_dist.classpath, classic_dist.home, tmp_path / "c39")
    streams_program = Program(SOURCE, streams_dist.classpath, streams_dist.home, tmp_path / "c44")
    # Streams members learn of released tasks at their next heartbeat: every second, not 5 s.
    gw = module_gateways.start(
        "streams-roll",
        sets=[
            "group.initial.rebalance.delay.ms=0",
            "group.streams.initial.rebalance.delay.ms=0",
            "group.streams.assignment.interval.ms=0",
            "group.streams.heartbeat.interval.ms=1000",
        ],
    )
    bootstrap = gw.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(INPUT, 4, 1), NewTopic(OUTPUT, 2, 1)]).values():
        f.result()
    producer = Producer({"bootstrap.servers": bootstrap})
    third = len(LINES) // 3

    def produce(start: int, end: int) -> None:
        for n in range(start, end):
            producer.produce(INPUT, key=str(n), value=LINES[n])
        producer.flush(30)

    produce(0, third)
    classic_cp = classic_program.classpath()
    streams_cp = streams_program.classpath()

    def classic(n: int) -> Callable[[], Instance]:
        return lambda: Instance(
            classic_cp,
            bootstrap,
            tmp_path / f"state-c{n}",
            tmp_path / f"classic-{n}.log",
            app=APP,
            main_class="StreamsWordCountClassic",
            # A short session (the broker's minimum): a stopped 3.9 instance sends no LeaveGroup,
            # its tasks move once its session expires; a heartbeat every second, as the 4.4
            # instances', so a 3.9 instance hears of a rebalance within a second, not three.
            extra_args=(_endpoint(n), "6000", "1000"),
            held=n > 3,
        )

    def streams(n: int) -> Callable[[], Instance]:
        return lambda: Instance(
            streams_cp, bootstrap, tmp_path / f"state-s{n}", tmp_path / f"streams-{n}.log", app=APP, held=True
        )

    # The roll, one instance at a time: forward to 4.4, then back to 3.9.
    plan = [
        ("classic-1", "streams-1", streams(1)),
        ("classic-2", "streams-2", streams(2)),
        ("classic-3", "streams-3", streams(3)),
        ("streams-1", "classic-4", classic(4)),
        ("streams-2", "classic-5", classic(5)),
        ("streams-3", "classic-6", classic(6)),
    ]
    # Each step's new JVM is started (held) while the step before settles, and joins at its step:
    # what a step waits for is the group, not a JVM's start (seconds on a loaded machine).
    held: dict[str, Instance] = {}
    watch = Watch()
    marks = [("start", time.monotonic())]
    wire = AdminWire(bootstrap)
    types: list[str | None] = []

    def prestart(k: int) -> None:
        if k < len(plan):
            held[plan[k][1]] = plan[k][2]()

    def step(k: int) -> dict[str, set[str]]:
        """Roll step k; the shares once every task runs once on the instances now up, and the
        group type then."""
        old, new, _ = plan[k]
        watch.replace(old, new, held.pop(new))
        prestart(k + 1)
        shares = watch.wait_all_running({*watch.instances}, 60)
        types.append(_group_type(wire))
        marks.append((f"{old} -> {new}", time.monotonic()))
        return shares

    try:
        # The three JVMs start at once, and the first 4.4 one, held.
        watch.instances = {f"classic-{n}": classic(n)() for n in (1, 2, 3)}
        prestart(0)
        watch.wait_all_running({"classic-1", "classic-2", "classic-3"}, 90)
        types.append(_group_type(wire))
        marks.append(("classic running", time.monotonic()))

        # Roll the first instance: the 4.4 one converts the group, classic-2 and classic-3 keep
        # running in it.
        shares = step(0)
        members = _check_described(wire, shares)
        assert len(members) == 2, members
        # ... and so Kafka's own kafka-consumer-groups.sh (4.4), which falls back to it.
        tool = subprocess.run(
            [
                "java",
                *TOOL_JVM_OPTS,
                "-cp",
                streams_cp,
                "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                "--bootstrap-server",
                bootstrap,
                "--describe",
                "--group",
                APP,
                "--members",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert tool.returncode == 0, tool.stdout + tool.stderr[-3000:]
        for name, member in zip(("classic-2", "classic-3"), members, strict=True):
            rows = [line.split() for line in tool.stdout.splitlines() if member.member_id in line]
            assert len(rows) == 1 and int(rows[0][-1]) == len(shares[name]), tool.stdout
        marks.append(("described", time.monotonic()))
        produce(third, 2 * third)

        # Roll the second: one 3.9 instance is left among two 4.4 ones.
        shares = step(1)
        assert len(_check_described(wire, shares)) == 1
        produce(2 * third, len(LINES))
        # Roll the third: the last classic instance leaves, a third 4.4 instance joins.
        step(2)

        assert types == ["classic", "streams", "streams", "streams"], types
        assert not watch.overlaps, watch.overlaps
        want = truth()
        assert read_counts(bootstrap, want, 40) == want
        marks.append(("counts", time.monotonic()))

        # And back: 3.9 instances join the streams group as classic members, one at a time...
        shares = step(3)
        assert len(_check_described(wire, shares)) == 1
        shares = step(4)
        assert len(_check_described(wire, shares)) == 2
        # ... and when the last 4.4 instance leaves, the group is classic again for them.
        step(5)

        assert types == ["classic", "streams", "streams", "streams", "streams", "streams", "classic"], types
        assert not watch.overlaps, watch.overlaps
        # No input was processed twice on the way (a count above the truth would show it).
        assert read_counts(bootstrap, want, 20) == want
        marks.append(("counts again", time.monotonic()))
        print(time.strftime("%H:%M:%S", time.gmtime(time.time() - (time.monotonic() - marks[0][1]))), end=" ")
        print({name: round(t - marks[0][1], 1) for name, t in marks})
    finally:
        wire.close()
        # The JVMs close at once (each Kafka Streams close takes seconds under load).
        left = [*watch.instances.values(), *held.values()]
        for i in left:
            i.proc.terminate()
        for i in left:
            i.stop()


def test_a_static_classic_instance_restarts_into_its_tasks_inside_a_streams_group(
    module_gateways: Gateways, tmp_path: Path
) -> None:
    """KIP-345 inside a converted group (translation/streams_classic_member.py): two 3.9
    instances with `group.instance.id` and one 4.4 instance share the word count in a streams
    group; one 3.9 instance is SIGKILLed and started again on its state directory with the same
    instance id. It takes its place back at once: the same tasks, the group epoch unchanged
    (no rebalance: the others keep theirs), the old member replaced."""
    classic_dist = resolve_component("3.9.2", "streams")
    streams_dist = resolve_component("4.4.0", "streams")
    classic_cp = Program(CLASSIC_SOURCE, classic_dist.classpath, classic_dist.home, tmp_path / "c39")
    streams_cp = Program(SOURCE, streams_dist.classpath, streams_dist.home, tmp_path / "c44")
    gw = module_gateways.start(
        "streams-static",
        sets=[
            "group.initial.rebalance.delay.ms=0",
            "group.streams.initial.rebalance.delay.ms=0",
            "group.streams.heartbeat.interval.ms=1000",
        ],
    )
    app = "wordcount-static"
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    for f in admin.create_topics([NewTopic(INPUT, 4, 1), NewTopic(OUTPUT, 2, 1)]).values():
        f.result()
    producer = Producer({"bootstrap.servers": gw.bootstrap})
    for n, line in enumerate(LINES):
        producer.produce(INPUT, key=str(n), value=line)
    producer.flush(30)

    def classic(n: int) -> Instance:
        # A session long enough for a JVM restart on a loaded machine: a static member back
        # within it is not a new member.
        return Instance(
            classic_cp.classpath(),
            gw.bootstrap,
            tmp_path / f"state-c{n}",
            tmp_path / f"classic-{n}-{time.monotonic_ns()}.log",
            app=app,
            main_class="StreamsWordCountClassic",
            extra_args=(_endpoint(n), "60000", "1000", f"wc-static-{n}"),
        )

    watch = Watch()
    wire = AdminWire(gw.bootstrap)
    try:
        watch.instances = {"classic-1": classic(1), "classic-2": classic(2)}
        watch.wait_all_running({"classic-1", "classic-2"}, 90)
        watch.instances["streams-1"] = Instance(
            streams_cp.classpath(), gw.bootstrap, tmp_path / "state-s1", tmp_path / "streams-1.log", app=app
        )
        before = watch.wait_all_running({"classic-1", "classic-2", "streams-1"}, 90)
        described = wire.streams_group_describe(app)
        assert described is not None and described.error_code == 0, described
        epoch = described.group_epoch
        ids = {m.member_id for m in described.members}
        assert len(ids) == 3, described

        old = watch.instances.pop("classic-1")
        old.proc.kill()
        old.proc.wait()
        watch.instances["classic-1"] = classic(1)
        after = watch.wait_all_running({"classic-1", "classic-2", "streams-1"}, 90)
        assert after == before, (before, after)
        again = wire.streams_group_describe(app)
        assert again is not None and again.group_epoch == epoch, (epoch, again)
        new_ids = {m.member_id for m in again.members}
        assert len(new_ids) == 3 and len(new_ids - ids) == 1, (ids, new_ids)
        [replaced] = gw.events("member.replaced")  # Streams names its consumer's instance id
        assert replaced["instance_id"].startswith("wc-static-1"), replaced  # "<id>-<thread>"
        assert not watch.overlaps, watch.overlaps
    finally:
        wire.close()
        for i in watch.instances.values():  # nothing left to check: no graceful close needed
            i.proc.kill()
            i.proc.wait()
