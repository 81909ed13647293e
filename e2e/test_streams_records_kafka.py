"""The streams-group record codec (records/streams_group_codec.py) against Kafka 4.4's own
generated record classes (KIP-1071 record types 17, 19-23).

A small Java program (java_programs/StreamsRecordsOracle.java) parses the bytes groupshift
writes with Kafka's `StreamsGroup*Value` classes and writes them back: the bytes must be the
same (Kafka would write exactly what groupshift wrote), and Kafka's JSON view of every field
must equal the value groupshift encoded (a misplaced field cannot survive both checks).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.kafka_dist import resolve
from records.codec import decode_value, encode_value
from tests.streams_record_samples import SAMPLES

pytestmark = pytest.mark.e2e

SOURCE = Path(__file__).parent / "java_programs" / "StreamsRecordsOracle.java"

# Tagged fields Kafka's JSON leaves out when they hold their default.
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
            if name in TAGGED_DEFAULTS and item == TAGGED_DEFAULTS[name]:
                continue
            out[name] = as_kafka_json(item)
        return out
    if isinstance(value, tuple):
        return [as_kafka_json(v) for v in value]
    return value


def test_kafka_reads_and_rewrites_every_streams_record_byte_for_byte(tmp_path: Path) -> None:
    dist = resolve("4.4.0")
    classes = tmp_path / "classes"
    classes.mkdir()
    subprocess.run(
        ["javac", "-nowarn", "-cp", dist.classpath, "-d", str(classes), str(SOURCE)],
        check=True,
        capture_output=True,
        timeout=180,
    )
    lines = [f"{record_type} {(encode_value(value) or b'').hex()}" for record_type, value in SAMPLES]
    proc = subprocess.run(
        ["java", "-cp", f"{classes}:{dist.classpath}", "StreamsRecordsOracle"],
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
