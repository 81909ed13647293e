"""A start-up that cannot destroy, checked as an operator would break it, with real clients.

Kafka's `LogManager` rules (gateway.dataplane.datadir): the data directory's `.lock` comes first,
so a second `groupshift serve` on a live directory stops before reading or changing anything; a
lost or damaged `topics.json` or `meta.properties` stops the server with the file named; a
partition directory no topic owns is renamed aside as `<name>.<id>-stray` with a warning, never
deleted. Each test produces with acks=all, breaks the directory, and reads every acknowledged
record back afterwards. A 20 MB config value gives a short error line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from e2e.conftest import Gateways
from e2e.expected import COUNT, PARTITIONS, assert_exactly_once, record
from e2e.harness import REPO, GatewayProcess
from e2e.test_durability import consume_all

SHARDS = ("offsets.topic.num.partitions=3",)


def serve_refused(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`groupshift serve` that is expected to stop before listening (a timeout: it started)."""
    done = subprocess.run(
        [sys.executable, "-m", "groupshift", "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir)]
        + [a for s in SHARDS for a in ("--set", s)]
        + list(args),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode != 0, done.stderr
    assert "gateway.listening" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    return done


def refusal(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """The one error event a refused start logs (and nothing at error level besides)."""
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    errors = [e for e in events if e.get("level") == "error"]
    assert len(errors) == 1 and errors[0]["event"] == "gateway.start_failed", done.stderr
    return errors[0]


def produce(bootstrap: str, topic: str) -> None:
    """The COUNT records of `e2e.expected`, acks=all; every one acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(COUNT):
        p, k, v = record(i)
        producer.produce(topic, key=k, value=v, partition=p)
    assert producer.flush(30) == 0


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def original_name(directory: str) -> str:
    """`orders-0` of `orders-0.<32 hex>-stray` (topic names may hold dots: the last one counts)."""
    return re.sub(r"\.[0-9a-f]{32}-stray$", "", directory)


def partition_files(data_dir: Path) -> dict[str, int]:
    """Every file under the partition directories (strays included), by path below the
    directory name, with its size: what 'nothing deleted' compares."""
    out = {}
    for d in data_dir.iterdir():
        if d.is_dir() and (d / "partition.metadata").exists():
            for f in d.iterdir():
                if f.name != ".lock":
                    out[f"{original_name(d.name)}/{f.name}"] = f.stat().st_size
    return out


def take_strays_back(data_dir: Path) -> list[str]:
    """docs/robustness.md's recovery: each `<name>.<id>-stray` back to `<name>`."""
    back = []
    for stray in sorted(data_dir.glob("*-stray")):
        original = data_dir / original_name(stray.name)
        if original.exists():
            shutil.rmtree(original)  # an empty partition made while the registry was wrong
        stray.rename(original)
        back.append(original.name)
    return back


def test_a_second_server_on_a_live_data_directory_is_refused_and_deletes_nothing(
    gateways: Gateways,
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    gw = gateways.start("live", sets=SHARDS)
    acked: dict[str, list[tuple[int, bytes]]] = {}
    failures: list[str] = []
    stop = threading.Event()

    def create_and_produce() -> None:
        """Topics being created and written while second servers start (the issue's attack)."""
        admin = AdminClient({"bootstrap.servers": gw.bootstrap})
        producer = Producer({"bootstrap.servers": gw.bootstrap, "acks": "all", "linger.ms": 2})

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                acked.setdefault(msg.topic(), []).append((msg.partition(), msg.value()))

        n = 0
        while not stop.is_set():
            name = f"busy-{n}"
            admin.create_topics([NewTopic(name, 4, 1)])[name].result(10)
            for i in range(200):
                producer.produce(name, value=f"{name}-{i}".encode(), partition=i % 4, on_delivery=delivered)
            producer.flush(30)
            n += 1
        producer.flush(30)

    writer = threading.Thread(target=create_and_produce)
    writer.start()
    try:
        for _ in range(8):
            done = serve_refused(gw.data_dir)
            error = refusal(done)["error"]
            assert (
                f"data directory {gw.data_dir} is in use by another open log: process {gw.proc.pid} holds"
                in error
            ), error
            assert gw.alive()
    finally:
        stop.set()
        writer.join(60)
    assert not failures and len(acked) >= 2, (failures[:3], len(acked))
    assert gw.stop() == 0

    restarted = gateways.restart(gw)
    assert restarted.events("partition.strays_renamed") == []
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=restarted.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        # Every partition of every topic in one assignment: the writer makes a few hundred topics,
        # and reading them one by one took a poll round trip each (about 20 s in CI).
        consumer.assign([TopicPartition(topic, p) for topic in acked for p in range(4)])
        consumer.seek_to_beginning()
        got: dict[str, list[tuple[int, bytes]]] = {topic: [] for topic in acked}
        expected = sum(len(want) for want in acked.values())
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < expected and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=300).items():
                got[tp.topic] += [(tp.partition, m.value) for m in msgs]
        for topic, want in acked.items():
            assert sorted(got[topic]) == sorted(want), (
                f"{topic}: {len(got[topic])} of {len(want)} acknowledged records"
            )
    finally:
        consumer.close()


def test_a_lost_or_damaged_topics_json_is_refused_and_a_changed_name_deletes_nothing(
    gateways: Gateways,
) -> None:
    gw = gateways.start("topics", sets=SHARDS)
    create_topic(gw.bootstrap, "orders", PARTITIONS)
    produce(gw.bootstrap, "orders")
    assert gw.stop() == 0
    data = gw.data_dir
    registry = data / "topics.json"
    backup = registry.read_bytes()
    files = partition_files(data)
    assert len({f.partition("/")[0] for f in files}) == PARTITIONS

    registry.unlink()
    error = refusal(serve_refused(data))["error"]
    assert f"{registry} is missing but data directory {data} holds {PARTITIONS} partition" in error
    assert "restore topics.json from a backup, or start with --ignore-topics-file" in error
    for damage, problem in (
        (b'{"version": 1, "topics": [', "is damaged (not JSON"),
        (b'{"version": 1, "topics": {}}', 'is damaged (expected an object with a "topics" list)'),
        (b"\xff\xfe", "is damaged (not UTF-8 text"),
    ):
        registry.write_bytes(damage)
        error = refusal(serve_refused(data))["error"]
        assert f"{registry} {problem}" in error and "--ignore-topics-file" in error, error
    assert partition_files(data) == files  # refused: nothing moved, nothing deleted

    # One letter changed: the server starts, the orders partitions are unowned, kept aside.
    registry.write_bytes(backup.replace(b'"orders"', b'"ordars"'))
    changed = gateways.restart(gw)
    strays = changed.events("partition.strays_renamed")
    assert len(strays) == 1 and strays[0]["level"] == "warning" and strays[0]["count"] == PARTITIONS
    assert sorted(original_name(n) for n in strays[0]["renamed_to"]) == [
        f"orders-{p}" for p in range(PARTITIONS)
    ]
    assert changed.stop() == 0
    kept = {k: v for k, v in partition_files(data).items() if k.startswith("orders-")}
    assert kept == files  # every segment of every orders partition, same sizes

    # The documented recovery: restore topics.json, take the strays back; every record is there.
    registry.write_bytes(backup)
    assert take_strays_back(data) == [f"orders-{p}" for p in range(PARTITIONS)]
    recovered = gateways.restart(changed)
    assert recovered.events("partition.strays_renamed")[-1]["count"] == PARTITIONS  # the ordars ones
    assert_exactly_once(consume_all(recovered, "orders"))


def test_ignore_topics_file_starts_with_no_topics_and_keeps_everything_aside(gateways: Gateways) -> None:
    gw = gateways.start("ignored", sets=SHARDS)
    create_topic(gw.bootstrap, "orders", PARTITIONS)
    produce(gw.bootstrap, "orders")
    assert gw.stop() == 0
    data = gw.data_dir
    backup = (data / "topics.json").read_bytes()
    (data / "topics.json").write_bytes(b"garbage")
    files = partition_files(data)

    started = GatewayProcess.start(data, sets=SHARDS, extra_args=("--ignore-topics-file",))
    try:
        ignored = started.events("topics.file_ignored")
        assert len(ignored) == 1 and ignored[0]["level"] == "warning", ignored
        assert (data / ignored[0]["kept_as"]).read_bytes() == b"garbage"
        assert started.events("partition.strays_renamed")[0]["count"] == PARTITIONS
    finally:
        assert started.stop() == 0
    assert partition_files(data) == files
    (data / "topics.json").write_bytes(backup)
    take_strays_back(data)
    recovered = gateways.restart(gw)
    assert_exactly_once(consume_all(recovered, "orders"))


def test_a_damaged_meta_properties_is_refused_naming_the_file(gateways: Gateways) -> None:
    gw = gateways.start("meta", sets=SHARDS)
    create_topic(gw.bootstrap, "orders", PARTITIONS)
    produce(gw.bootstrap, "orders")
    assert gw.stop() == 0
    meta = gw.data_dir / "meta.properties"
    original = meta.read_text()
    for damage, problem in (
        ("version=1\nnode.id=0\n", "is damaged (no cluster.id)"),
        (original.replace("node.id=0", "node.id=zero"), "is damaged (node.id is not a number"),
    ):
        meta.write_text(damage)
        error = refusal(serve_refused(gw.data_dir))["error"]
        assert f"{meta} {problem}" in error and "restore it from a backup" in error, error
    meta.unlink()
    done = serve_refused(gw.data_dir)
    assert done.returncode == 2
    assert f"{meta} is missing, but data directory {gw.data_dir} holds groupshift's" in done.stderr
    meta.write_text(original)
    restarted = gateways.restart(gw)
    assert_exactly_once(consume_all(restarted, "orders"))


def test_a_20_mb_config_value_gives_a_short_error_line(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("num.partitions=2\ngroup.max.size=" + "9x" * 10_000_000 + "\n")
    done = serve_refused(tmp_path / "data", "--config", str(config))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"groupshift serve: error: {config}:2: group.max.size: Input should be")
    assert line.endswith("...(20000000 characters))") and len(line) < 600, line[:300]
    assert not (tmp_path / "data").exists()
