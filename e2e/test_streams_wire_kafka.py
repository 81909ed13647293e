"""groupshift's schemas of the streams-group APIs kio lacks (protocol/kafka_schemas.py:
StreamsGroupHeartbeat and StreamsGroupDescribe v1, StreamsGroupTopologyDescriptionUpdate v0)
against Kafka 4.4.0's own generated message classes.

A small Java program (java_programs/StreamsWireOracle.java) does two things per sample of
tests/streams_wire_samples.py: Kafka's JsonConverter reads the sample's values and its generated
class writes them (the bytes must be the sample's pinned bytes, and groupshift's encoding of the
same values); and Kafka's class parses the bytes groupshift writes and writes them back (the
same bytes), its JSON view equal to the values groupshift encoded. A field misplaced, mistyped
or version-gated wrongly cannot survive both.
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_writer

from e2e.java_compile import Program
from harness.kafka_dist import resolve
from harness.kafka_dist.java_clients import TOOL_JVM_OPTS
from protocol import kafka_schemas
from protocol.codec import api_schema, encode_response
from protocol.entity_builder import build
from tests.streams_wire_samples import SAMPLES, api_of, as_kafka_json

pytestmark = pytest.mark.e2e

SOURCE = Path(__file__).parent / "java_programs" / "StreamsWireOracle.java"


def ours(name: str, version: int, values: dict[str, Any]) -> bytes:
    """The body groupshift writes for the sample (the server's response writer, kio's request
    writer)."""
    api_key, is_request = api_of(name)
    if is_request:
        cls = kafka_schemas.request_schema(api_key, version)
        buf = io.BytesIO()
        entity_writer(cls)(buf, build(cls, values))
        return buf.getvalue()
    schema = api_schema(api_key, version)
    assert schema is not None
    return encode_response(schema, 0, build(schema.response_type, values))[4 + 5 :]


def test_kafka_writes_and_reads_the_new_streams_versions_as_groupshift_does(tmp_path: Path) -> None:
    dist = resolve("4.4.0")
    program = Program(SOURCE, dist.classpath, dist.home, tmp_path / "classes")
    lines = []
    for name, version, values, _ in SAMPLES:
        lines.append(f"write {name} {version} {json.dumps(as_kafka_json(values), ensure_ascii=False)}")
        lines.append(f"read {name} {version} {ours(name, version, values).hex()}")
    proc = subprocess.run(
        ["java", *TOOL_JVM_OPTS, "-cp", program.classpath(), "StreamsWireOracle"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = proc.stdout.splitlines()
    assert len(answers) == 2 * len(SAMPLES)
    for i, (name, version, values, pinned) in enumerate(SAMPLES):
        written, read = answers[2 * i], answers[2 * i + 1]
        mine = ours(name, version, values).hex()
        assert written == pinned, f"{name} v{version}: Kafka writes other bytes than the pinned ones"
        assert written == mine, f"{name} v{version}: groupshift writes other bytes than Kafka"
        kafka_hex, kafka_json = read.split(" ", 1)
        assert kafka_hex == mine, f"{name} v{version}: Kafka rewrote groupshift's bytes differently"
        assert json.loads(kafka_json) == as_kafka_json(values), f"{name} v{version}"
