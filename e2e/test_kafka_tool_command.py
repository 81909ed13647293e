"""`groupshift kafka tool NAME ARGS...` and `groupshift kafka start --workdir/--port` on real
inputs: Kafka's `kafka-consumer-groups --list` against a running `groupshift serve`, Kafka's
`kafka-dump-log --offsets-decoder` on a coordinator segment that groupshift wrote, and a Kafka
cluster stopped and started again from its work directory, on its ports, with its data.

Kafka 3.9's tools (cached by the other e2e tests); one Kafka at a time. About 60 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from e2e.conftest import Gateways
from harness.kafka_dist.cluster import free_port
from harness.kafka_dist.wire import api_versions
from tests.plugins.kafka import skip_without_tools

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parent.parent
VERSION = "3.9"


def groupshift(*args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "groupshift", *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def commit_offsets(bootstrap: str, group: str, topic: str) -> None:
    """A group with committed offsets (confluent-kafka: produce, then commit explicitly)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, value=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    finally:
        consumer.close()


def test_consumer_groups_list_and_dump_log_on_groupshift(gateways: Gateways) -> None:
    skip_without_tools()
    gw = gateways.start()
    group, topic = f"tool-{uuid.uuid4().hex[:8]}", f"tool-topic-{uuid.uuid4().hex[:8]}"
    commit_offsets(gw.bootstrap, group, topic)

    listed = groupshift("kafka", "tool", "--version", VERSION, "kafka-consumer-groups",
                        "--bootstrap-server", gw.bootstrap, "--list")  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert group in listed.stdout.split(), listed.stdout

    gw.stop()
    segments = [
        p for p in (gw.data_dir / "coordinator").glob("__consumer_offsets-*/*.log") if p.stat().st_size > 0
    ]
    assert segments, sorted(str(p) for p in gw.data_dir.rglob("*"))
    dumped = groupshift("kafka", "tool", "--version", VERSION, "kafka-dump-log",
                        "--files", ",".join(map(str, segments)), "--offsets-decoder")  # fmt: skip
    assert dumped.returncode == 0, dumped.stderr
    # the decoder names the group and the topic of the committed offset in each record's payload
    assert f'"group":"{group}"' in dumped.stdout.replace(" ", ""), dumped.stdout[-3000:]
    assert topic in dumped.stdout


def test_unknown_tool_is_bad_input() -> None:
    r = groupshift("kafka", "tool", "kafka-nope")
    assert r.returncode == 2
    assert "kafka-consumer-groups" in r.stderr


def _start(workdir: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "groupshift", "kafka", "start", "--version", VERSION,
         "--workdir", str(workdir), *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    bootstrap = proc.stdout.readline().strip()
    if not bootstrap:
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"kafka start printed no address: {err}")
    return proc, bootstrap


def _stop(proc: subprocess.Popen[str]) -> str:
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


def test_kafka_start_workdir_restarts_on_its_ports(tmp_path: Path) -> None:
    skip_without_tools()
    port = free_port()
    workdir = tmp_path / "kafka"
    proc, bootstrap = _start(workdir, "--port", str(port))
    try:
        assert bootstrap == f"127.0.0.1:{port}"
        topic = f"kept-{uuid.uuid4().hex[:8]}"
        made = groupshift("kafka", "tool", "--version", VERSION, "kafka-topics", "--bootstrap-server",
                          bootstrap, "--create", "--topic", topic)  # fmt: skip
        assert made.returncode == 0, made.stderr
    finally:
        _stop(proc)
    began = time.monotonic()
    proc, again = _start(workdir)
    try:
        assert again == bootstrap, (again, bootstrap)
        assert api_versions("127.0.0.1", port)
        listed = groupshift("kafka", "tool", "--version", VERSION, "kafka-topics", "--bootstrap-server",
                            again, "--list")  # fmt: skip
        assert topic in listed.stdout.split(), (listed.stdout, listed.stderr)
    finally:
        err = _stop(proc)
    assert "again" in err, err
    assert time.monotonic() - began < 180
