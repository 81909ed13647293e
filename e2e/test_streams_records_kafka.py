"""The streams-group record codec (records/streams_group_codec.py) against Kafka 4.4's own
generated record classes (KIP-1071 record types 17, 19-23), and against the log a real Kafka 4.4
writes for a Kafka Streams application.

A small Java program (java_programs/StreamsRecordsOracle.java) parses the bytes groupshift
writes with Kafka's `StreamsGroup*Value` classes and writes them back: the bytes must be the
same (Kafka would write exactly what groupshift wrote), and Kafka's JSON view of every field
must equal the value groupshift encoded (a misplaced field cannot survive both checks).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from e2e.java_compile import Program
from engine.config import CoordinatorConfig
from engine.ids import SeededIds
from engine.metadata import MetadataImage
from engine.shard import Shard
from engine.streams.group import MemberState, StreamsGroup
from harness.kafka_dist import KafkaCluster, resolve, resolve_component
from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
from records.codec import decode_record, decode_value, encode_record, encode_value
from tests.streams_record_samples import SAMPLES
from tools.kafka_logs import list_partitions, read_partition

pytestmark = pytest.mark.e2e

SOURCE = Path(__file__).parent / "java_programs" / "StreamsRecordsOracle.java"
WORD_COUNT = Path(__file__).parent / "java_programs" / "StreamsWordCount.java"

# Tagged fields Kafka's JSON leaves out when they hold their default.
# groupshift's own tag (10000) on type 19, for classic Kafka Streams instances inside a streams
# group: Kafka keeps it as an unknown tag (the test compares the bytes it writes back) and its
# JSON converter does not show it.
GROUPSHIFT_TAGS = {"classicMemberMetadata"}

TAGGED_DEFAULTS: dict[str, Any] = {
    "validatedTopologyEpoch": -1,
    "lastAssignmentConfigs": None,
    "storedDescriptionTopologyEpoch": -1,
    "failedDescriptionTopologyEpoch": -1,
    "assignmentTimestamp": 0,
    "assignmentEpochs": None,
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def as_kafka_json(value: Any) -> Any:
    """Our record object in the shape of Kafka's `*JsonConverter.write` (camelCase names,
    tagged fields at their default left out)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            name = _camel(f.name)
            item = getattr(value, f.name)
            if name in GROUPSHIFT_TAGS or (name in TAGGED_DEFAULTS and item == TAGGED_DEFAULTS[name]):
                continue
            out[name] = as_kafka_json(item)
        return out
    if isinstance(value, tuple):
        return [as_kafka_json(v) for v in value]
    return value


def test_kafka_reads_and_rewrites_every_streams_record_byte_for_byte(tmp_path: Path) -> None:
    dist = resolve("4.4.0")
    program = Program(SOURCE, dist.classpath, dist.home, tmp_path / "classes")
    lines = [f"{record_type} {(encode_value(value) or b'').hex()}" for record_type, value in SAMPLES]
    proc = subprocess.run(
        ["java", *TOOL_JVM_OPTS, "-cp", program.classpath(), "StreamsRecordsOracle"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = proc.stdout.splitlines()
    assert len(answers) == len(SAMPLES)
    for (record_type, value), sent, answer in zip(SAMPLES, lines, answers, strict=True):
        kafka_hex, kafka_json = answer.split(" ", 1)
        assert kafka_hex == sent.split(" ")[1], f"type {record_type}: Kafka rewrote {value!r} differently"
        assert json.loads(kafka_json) == as_kafka_json(value), f"type {record_type}"
        assert decode_value(record_type, bytes.fromhex(kafka_hex)) == value


def test_records_a_kafka_44_streams_application_writes_decode_and_replay(tmp_path: Path) -> None:
    """Kafka 4.4 itself runs a streams group (the word count of e2e/test_streams_groups.py, one
    instance that joins and leaves); groupshift reads its `__consumer_offsets` off disk: every
    streams record decodes, re-encodes to Kafka's exact bytes, and replays into a shard."""
    streams_dist = resolve_component("4.4.0", "streams")
    program = Program(WORD_COUNT, streams_dist.classpath, streams_dist.home, tmp_path / "classes")
    cluster = KafkaCluster(
        "4.4.0",
        configs={"offsets.topic.num.partitions": "1", "group.streams.initial.rebalance.delay.ms": "0"},
        workdir=tmp_path / "kafka",
    )
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for f in admin.create_topics([NewTopic("words-in", 2, 1), NewTopic("counts-out", 1, 1)]).values():
            f.result()
        p = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(20):
            p.produce("words-in", key=str(i), value=f"a b c {i % 4}")
        p.flush(30)
        classpath = program.classpath()
        app = subprocess.Popen(
            [
                "java",
                *TOOL_JVM_OPTS,
                "-cp",
                classpath,
                "StreamsWordCount",
                cluster.bootstrap,
                "kafkaapp",
                "words-in",
                "counts-out",
                str(tmp_path / "state"),
            ],
            stdout=subprocess.PIPE,
            stderr=(tmp_path / "app.log").open("wb"),
            text=True,
        )
        try:
            assert app.stdout is not None
            seen = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                line = app.stdout.readline().strip()
                seen.append(line)
                if line.startswith("TASKS") and line != "TASKS":
                    break
            assert seen and seen[-1].startswith("TASKS 0_0"), seen
        finally:
            app.terminate()  # closes the application: the member leaves (epoch -1)
            app.wait(30)
    partition = list_partitions(cluster.nodes[0].data_dir)[0]
    records = [decode_record(r.key, r.value) for r in read_partition(partition)]
    raw = {(r.key, r.value) for r in read_partition(partition)}
    streams = [r for r in records if type(r.key).__name__.startswith("StreamsGroup")]
    kinds = {r.key.RECORD_TYPE for r in streams}  # type: ignore[union-attr]
    assert kinds == {17, 19, 20, 21, 22, 23}, kinds
    for r in streams:
        assert encode_record(r) in raw, r  # Kafka's bytes, exactly
    states = {r.value.state for r in streams if r.key.RECORD_TYPE == 22 and r.value is not None}  # type: ignore[union-attr]
    assert states and states <= {int(s) for s in MemberState} - {int(MemberState.UNKNOWN)}, states
    shard = Shard(CoordinatorConfig(), SeededIds(1), MetadataImage())
    shard.apply(records)
    group = shard.groups["kafkaapp"]
    assert isinstance(group, StreamsGroup)
    assert group.topology is not None and {s.subtopology_id for s in group.topology.subtopologies} == {
        "0",
        "1",
    }
    assert group.members == {}  # the instance left
    assert group.group_epoch >= 2
