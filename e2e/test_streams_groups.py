"""A Kafka Streams 4.4 application with `group.protocol=streams` (KIP-1071) on groupshift in
embedded mode: a word count with a repartition topic (groupBy) and a changelog topic (count),
two instances with one standby replica each (`group.streams.num.standby.replicas=1`: each
instance keeps a standby of the counting tasks the other runs), its internal topics created by
groupshift, the output counts equal to the truth, and the group seen by Kafka's own
`kafka-streams-groups.sh` (StreamsGroupCommand, through Admin's StreamsGroupDescribe and
ListGroups), standby tasks included.

The application is e2e/java_programs/StreamsWordCount.java, compiled against the kafka-streams
4.4.0 jars from Maven Central (`harness.kafka_dist.maven`, component "streams")."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from e2e.conftest import Gateways
from e2e.java_compile import finish_javac, start_javac
from e2e.streams_wordcount import ALL_TASKS, APP, INPUT, LINES, OUTPUT, SOURCE, Instance, read_counts, truth
from harness.kafka_dist import resolve_component
from harness.kafka_dist.java_clients import TOOL_JVM_OPTS

pytestmark = pytest.mark.e2e


def test_word_count_with_two_instances(module_gateways: Gateways, tmp_path: Path) -> None:
    dist = resolve_component("4.4.0", "streams")
    classes = tmp_path / "classes"
    javac = start_javac(dist.classpath, SOURCE, classes)
    gw = module_gateways.start("streams", sets=["group.streams.num.standby.replicas=1"])
    bootstrap = gw.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(INPUT, 4, 1), NewTopic(OUTPUT, 2, 1)]).values():
        f.result()
    p = Producer({"bootstrap.servers": bootstrap})
    for i, line in enumerate(LINES):
        p.produce(INPUT, key=str(i), value=line)
    p.flush(30)
    finish_javac(javac)

    classpath = f"{classes}:{dist.classpath}"
    instances = [
        Instance(classpath, bootstrap, tmp_path / f"state-{i}", tmp_path / f"instance-{i}.log")
        for i in (1, 2)
    ]
    try:
        # Both instances end up running with disjoint, non-empty shares of all 8 tasks (2
        # subtopologies x 4 partitions): revoke-before-assign seen from the application.
        deadline = time.monotonic() + 45
        shares: list[set[str]] = [set(), set()]
        while time.monotonic() < deadline:
            shares = [i.tasks() or set() for i in instances]
            if all(shares) and shares[0] | shares[1] == ALL_TASKS and not shares[0] & shares[1]:
                break
            time.sleep(0.5)
        assert all(shares) and shares[0] | shares[1] == ALL_TASKS, (
            [i.lines for i in instances],
            gw.log_tail(),
        )
        assert not shares[0] & shares[1]

        # groupshift created the internal topics the topology names.
        listed = admin.list_topics(timeout=10).topics
        assert len(listed[f"{APP}-words-repartition"].partitions) == 4
        assert len(listed[f"{APP}-counts-changelog"].partitions) == 4

        want = truth()
        assert read_counts(bootstrap, want, 40) == want

        # Kafka's own tool sees the streams group, its two members and their tasks.
        tool = [
            "java",
            *TOOL_JVM_OPTS,
            "-cp",
            dist.classpath,
            "org.apache.kafka.tools.streams.StreamsGroupCommand",
        ]
        described = subprocess.run(
            [*tool, "--bootstrap-server", bootstrap, "--describe", "--group", APP, "--members", "--verbose"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert described.returncode == 0, described.stderr[-2000:]
        rows = [line.split() for line in described.stdout.splitlines() if line.startswith(APP)]
        assert len(rows) == 2, described.stdout
        for row in rows:
            assert "streams" in row and "ACTIVE:" in row, described.stdout
        assert "1:[" in described.stdout and "0:[" in described.stdout
        # Each instance holds a standby of the stateful subtopology (1, the count) for the
        # partitions the other runs, never of the stateless one (0).
        for row in rows:
            line = " ".join(row)
            active = re.search(r"(?<!TARGET-)ACTIVE: .*?1:\[([\d,]*)\]", line)
            standby = re.search(r"(?<!TARGET-)STANDBY: 1:\[([\d,]*)\];", line)
            assert active and standby, described.stdout
            assert set(standby[1].split(",")) == {"0", "1", "2", "3"} - set(active[1].split(",")), line
        assert "STANDBY: 0:[" not in described.stdout, described.stdout
    finally:
        for i in instances:
            i.stop()
