"""A Kafka Streams 4.4 application with `group.protocol=streams` (KIP-1071) on groupshift in
embedded mode: a word count with a repartition topic (groupBy) and a changelog topic (count),
three instances with one standby replica per stateful task (`group.streams.num.standby.replicas=1`),
its internal topics created by groupshift, one instance SIGKILLed and restarted on its state
directory with the output counts equal to the truth at every step (e2e/streams_wordcount.py's
`three_instances_one_killed`), and the group seen by Kafka's own `kafka-streams-groups.sh`
(StreamsGroupCommand, through Admin's StreamsGroupDescribe and ListGroups), standby tasks
included.

The application is e2e/java_programs/StreamsWordCount.java, compiled against the kafka-streams
4.4.0 jars from Maven Central (`harness.kafka_dist.maven`, component "streams"; the classes are
cached beside the jars)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from e2e.conftest import Gateways
from e2e.java_compile import Program
from e2e.streams_wordcount import (
    APP,
    INPUT,
    LINES,
    OUTPUT,
    SOURCE,
    WordCountApp,
    check_three_members_with_standbys,
    described_members,
    process_id,
    produce,
    three_instances_one_killed,
)
from harness.kafka_dist import resolve_component

pytestmark = pytest.mark.e2e


def test_word_count_three_instances_one_killed_and_restarted(
    module_gateways: Gateways, tmp_path: Path
) -> None:
    dist = resolve_component("4.4.0", "streams")
    program = Program(SOURCE, dist.classpath, dist.home, tmp_path / "classes")
    # A killed member's tasks move once its session expires: 6 s, not Kafka's 45 s default.
    gw = module_gateways.start(
        "streams",
        sets=[
            "group.streams.num.standby.replicas=1",
            "group.streams.session.timeout.ms=6000",
            "group.streams.heartbeat.interval.ms=1000",
        ],
    )
    bootstrap = gw.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(INPUT, 4, 1), NewTopic(OUTPUT, 2, 1)]).values():
        f.result()
    produce(bootstrap, INPUT, LINES, "first")

    wc = WordCountApp(program.classpath(), bootstrap, tmp_path)
    try:
        three_instances_one_killed(wc, list(LINES), gw.log_tail)

        # groupshift created the internal topics the topology names.
        listed = admin.list_topics(timeout=10).topics
        assert len(listed[f"{APP}-words-repartition"].partitions) == 4
        assert len(listed[f"{APP}-counts-changelog"].partitions) == 4

        # Kafka's own tool sees the streams group, its three members and their tasks, standbys
        # included, once every member has reached its target.
        rows, text = described_members(dist.classpath, bootstrap, APP)
        check_three_members_with_standbys(rows, text, process_id(wc.state_dir(1), APP))
        assert "1:[" in text and "0:[" in text
    finally:
        wc.stop()
