"""Online migration of a Kafka Streams application (issue 31, part 3; beyond Kafka, which only
migrates offline): the word count started as two Kafka Streams 3.9.2 instances on the classic
protocol, then rolled one instance at a time to Kafka Streams 4.4.0 with
`group.protocol=streams` and back to 3.9.2, with no stop, on one groupshift (embedded).

- The first 4.4 instance converts the classic group to a streams group while the other 3.9
  instance keeps running inside it (its JoinGroup/SyncGroup answered with Streams'
  AssignmentInfo from the streams group's target: docs/streams-classic-groups.md); the last 3.9
  instance then leaves and a second 4.4 instance joins.
- And back (Kafka has no such thing either): a 3.9 instance replaces one 4.4 instance (it joins
  the streams group as a classic member), then the last 4.4 instance leaves and the group becomes
  a classic group again for the 3.9 instances (translation/streams_downgrade.py).
- The group type (ListGroups) is recorded at each step: classic, streams, streams, streams,
  classic.
- No task is active on two instances at once: every instance's own state listener reports its
  active tasks each time it is RUNNING (e2e/streams_wordcount.py's `TASKS` lines), sampled all
  along the roll; two RUNNING instances never report the same task.
- The counts in the output topic equal the truth of the input after the roll and at the end.

Programs: e2e/java_programs/StreamsWordCountClassic.java against the kafka-streams 3.9.2 jars
and e2e/java_programs/StreamsWordCount.java against 4.4.0, their classes cached beside the jars
(as e2e/test_streams_classic_groups.py keeps them).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

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

    def stop(self, name: str) -> None:
        i = self.instances.pop(name)
        i.stop()


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


def test_roll_classic_streams_to_streams_protocol(module_gateways: Gateways, tmp_path: Path) -> None:
    classic_dist = resolve_component("3.9.2", "streams")
    streams_dist = resolve_component("4.4.0", "streams")
    classic_program = Program(CLASSIC_SOURCE, classic_dist.classpath, classic_dist.home, tmp_path / "c39")
    streams_program = Program(SOURCE, streams_dist.classpath, streams_dist.home, tmp_path / "c44")
    # Streams members learn of released tasks at their next heartbeat: every second, not 5 s.
    gw = module_gateways.start(
        "streams-roll",
        sets=["group.initial.rebalance.delay.ms=0", "group.streams.heartbeat.interval.ms=1000"],
    )
    bootstrap = gw.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(INPUT, 4, 1), NewTopic(OUTPUT, 2, 1)]).values():
        f.result()
    producer = Producer({"bootstrap.servers": bootstrap})
    half = len(LINES) // 2

    def produce(lines: list[str], start: int) -> None:
        for n, line in enumerate(lines, start=start):
            producer.produce(INPUT, key=str(n), value=line)
        producer.flush(30)

    produce(LINES[:half], 0)
    classic_cp = classic_program.classpath()

    def classic(n: int) -> Instance:
        return Instance(
            classic_cp,
            bootstrap,
            tmp_path / f"state-c{n}",
            tmp_path / f"classic-{n}.log",
            app=APP,
            main_class="StreamsWordCountClassic",
            # A short session: a stopped 3.9 instance sends no LeaveGroup, its tasks move once
            # its session expires.
            extra_args=(f"localhost:{7200 + n}", "8000"),
        )

    def streams(n: int) -> Instance:
        return Instance(
            streams_program.classpath(),
            bootstrap,
            tmp_path / f"state-s{n}",
            tmp_path / f"streams-{n}.log",
            app=APP,
        )

    watch = Watch()
    marks = [("start", time.monotonic())]
    wire = AdminWire(bootstrap)
    types: list[str | None] = []
    try:
        watch.instances = {"classic-1": classic(1), "classic-2": classic(2)}
        watch.wait_all_running({"classic-1", "classic-2"}, 60)
        types.append(_group_type(wire))
        marks.append(("classic running", time.monotonic()))

        # Roll the first instance: the 4.4 one converts the group, classic-2 keeps running in it.
        watch.stop("classic-1")
        watch.instances["streams-1"] = streams(1)
        shares = watch.wait_all_running({"classic-2", "streams-1"}, 60)
        types.append(_group_type(wire))
        marks.append(("mixed running", time.monotonic()))
        # DescribeGroups mid-roll (Kafka answers any streams group Dead): the classic instance,
        # as a classic consumer group describes it, with the tasks it runs.
        described = wire.describe_group(APP)
        assert (described.error_code, described.protocol_type, described.protocol_data) == (
            0,
            "consumer",
            "stream",
        ), described
        [member] = described.members
        assert member.client_id.startswith(APP) and "StreamThread" in member.client_id, member
        assert parse_streams_member_metadata(member.member_metadata).info.endpoint == "localhost:7202"
        assert _described_tasks(member.member_assignment) == shares["classic-2"]
        # ... and so Kafka's own kafka-consumer-groups.sh (4.4), which falls back to it.
        tool = subprocess.run(
            [
                "java",
                *TOOL_JVM_OPTS,
                "-cp",
                streams_program.classpath(),
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
        rows = [line.split() for line in tool.stdout.splitlines() if member.member_id in line]
        assert len(rows) == 1 and int(rows[0][-1]) == len(shares["classic-2"]), tool.stdout
        marks.append(("described", time.monotonic()))
        produce(LINES[half:], half)

        # Roll the second: the last classic instance leaves, a second 4.4 instance joins.
        watch.stop("classic-2")
        watch.instances["streams-2"] = streams(2)
        watch.wait_all_running({"streams-1", "streams-2"}, 60)
        types.append(_group_type(wire))
        marks.append(("streams running", time.monotonic()))

        assert types == ["classic", "streams", "streams"], types
        assert not watch.overlaps, watch.overlaps
        want = truth()
        assert read_counts(bootstrap, want, 40) == want
        marks.append(("counts", time.monotonic()))

        # And back: a 3.9 instance joins the streams group as a classic member...
        watch.stop("streams-1")
        watch.instances["classic-3"] = classic(3)
        watch.wait_all_running({"streams-2", "classic-3"}, 60)
        types.append(_group_type(wire))
        marks.append(("mixed again", time.monotonic()))
        # ... and when the last 4.4 instance leaves, the group is classic again for it.
        watch.stop("streams-2")
        watch.instances["classic-4"] = classic(4)
        watch.wait_all_running({"classic-3", "classic-4"}, 60)
        types.append(_group_type(wire))
        marks.append(("classic again", time.monotonic()))

        assert types == ["classic", "streams", "streams", "streams", "classic"], types
        assert not watch.overlaps, watch.overlaps
        # No input was processed twice on the way (a count above the truth would show it).
        assert read_counts(bootstrap, want, 20) == want
        print({name: round(t - marks[0][1], 1) for name, t in marks})
    finally:
        wire.close()
        for i in watch.instances.values():
            i.stop()
