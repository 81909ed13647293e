"""Version probing above SubscriptionInfo 11 (KIP-268) for a classic Kafka Streams instance inside
a streams group, against Kafka Streams 4.4.0's own SubscriptionInfo and AssignmentInfo classes.

A newer Streams (one whose latest SubscriptionInfo is above 11) joins with the two version
fields and bytes Kafka Streams 4.4 cannot read, as Kafka's StreamsPartitionAssignorTest encodes a
future subscription. Kafka 4.4's StreamsPartitionAssignor, as leader, reads the two fields
(`SubscriptionInfo.decode`: version 12, process FUTURE_ID), assigns the instance like any other
and answers every instance at the lowest version received, at most 11; the newer Streams, seeing
an AssignmentInfo below the version it sent, downgrades and rejoins. groupshift, which plays that
leader for a streams group's classic instances (translation/streams_classic_member.py), must do
the same: Kafka's `SubscriptionInfo.decode` reads the probe as groupshift does, Kafka's
`AssignmentInfo.decode` reads groupshift's SyncGroup answer as version 11 (commonly supported 11,
no error) with the tasks groupshift placed, and the instance's rejoin with a version-11
SubscriptionInfo written by Kafka's own class is taken under its real process id.

No broker: the engine runs in process (the harness of tests/test_streams_online_migration.py),
and a small Java program (java_programs/StreamsSubscriptionOracle.java) runs Kafka's classes.
"""

from __future__ import annotations

import struct
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.java_compile import Program
from engine.classic.member import Protocol
from engine.errors import Errors
from engine.streams.group import StreamsGroup
from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
from harness.kafka_dist.maven import resolve_component
from tests.test_streams_online_migration import ALL_TASKS, REPARTITION, SUBSCRIBED, WORDS, Roll, partitions_of
from translation.embedded_protocol import Subscription, parse_assignment, serialize_subscription
from translation.streams_classic_protocol import decode_assignment_info

pytestmark = pytest.mark.e2e

SOURCE = Path(__file__).parent / "java_programs" / "StreamsSubscriptionOracle.java"


class Oracle:
    """One JVM running StreamsSubscriptionOracle, asked one line at a time."""

    def __init__(self, program: Program) -> None:
        self.proc = subprocess.Popen(
            ["java", *TOOL_JVM_OPTS, "-cp", program.classpath(), "StreamsSubscriptionOracle"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            _, err = self.proc.communicate(timeout=30)
            raise AssertionError(f"the oracle ended on {line!r}: {err[-3000:]}")
        return answer.rstrip("\n")

    def close(self) -> None:
        _, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err[-3000:]


@pytest.fixture
def oracle(tmp_path: Path) -> Iterator[Oracle]:
    dist = resolve_component("4.4.0", "streams")
    o = Oracle(Program(SOURCE, dist.classpath, dist.home, tmp_path / "classes"))
    try:
        yield o
    finally:
        if o.proc.poll() is None:
            o.close()


def metadata(info: bytes, owned: set[tuple[str, int]] = frozenset()) -> bytes:  # type: ignore[assignment]
    """The ConsumerProtocolSubscription v3 a Streams consumer joins with, `info` as user data."""
    owned_parts = tuple((t, tuple(ps)) for t, ps in sorted(partitions_of(set(owned)).items()))
    return serialize_subscription(Subscription(3, SUBSCRIBED, info, owned_parts))


def test_a_future_subscription_is_answered_at_11_as_kafkas_leader_answers_it(oracle: Oracle) -> None:
    # Kafka's StreamsPartitionAssignorTest.encodeFutureSubscription, with a newer Streams' tail.
    future = struct.pack(">ii", 12, 12) + b"\x00" * 16 + b"a newer Streams' fields"
    h = Roll()
    h.seed({"a": ALL_TASKS})
    h.streams_join("s")
    h.settle()
    j = h.join("", protocols=(Protocol("stream", metadata(future)),), group="app", version=9)
    assert j.error_code == int(Errors.MEMBER_ID_REQUIRED)
    member = j.member_id
    j = h.join(member, protocols=(Protocol("stream", metadata(future)),), group="app", version=9)
    assert j.error_code == 0, j
    s = h.sync(member, j.generation_id, group="app", protocol_name="stream")
    assert s.error_code == 0
    answer = parse_assignment(s.assignment)
    assert answer.user_data is not None
    ours = decode_assignment_info(answer.user_data)
    process = uuid.uuid4()
    decoded_sub = oracle.ask(f"decsub {future.hex()}")
    decoded_asg = oracle.ask(f"decasg {answer.user_data.hex()}")
    # Kafka's leader reads the probe as groupshift does: version 12, process FUTURE_ID.
    assert decoded_sub == f"12 12 {uuid.UUID(int=0)}"
    group = h.shard.groups["app"]
    assert isinstance(group, StreamsGroup)
    assert group.members[member].process_id == str(uuid.UUID(int=0))
    # Kafka Streams reads groupshift's answer as version 11, commonly supported 11, no error,
    # the active tasks groupshift placed, one per assigned partition in Streams' order.
    version, common, err, active, standby, _hosts = decoded_asg.split(" ")
    assert (version, common, err, standby) == ("11", "11", "0", "-")
    ours_active = ",".join(f"{t.subtopology}_{t.partition}" for t in ours.active_tasks) or "-"
    assert active == ours_active
    partitions = [(t, p) for t, ps in answer.partitions for p in ps]
    assert len(partitions) == len(ours.active_tasks)
    assert set(partitions) == {
        (WORDS if t.subtopology == 0 else REPARTITION, t.partition) for t in ours.active_tasks
    }
    # The downgraded rejoin: a version-11 SubscriptionInfo written by Kafka Streams' own class
    # for the tasks it was given, taken under its real process id.
    tasks = ",".join(f"{t.subtopology}_{t.partition}" for t in ours.active_tasks) or "-"
    v11 = oracle.ask(f"encsub 11 {process} {tasks}")
    owned = {(str(t.subtopology), t.partition) for t in ours.active_tasks}
    j = h.join(
        member, protocols=(Protocol("stream", metadata(bytes.fromhex(v11), owned)),), group="app", version=9
    )
    assert j.error_code == 0, j
    assert group.members[member].process_id == str(process)
    h.assert_replay_equals_live()
