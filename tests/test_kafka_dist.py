"""The reference Kafka launcher (harness.kafka_dist): resolution from Maven Central into the cache,
KRaft clusters of 4.x, 3.9 and 3.7, and Kafka's own Java tools against them.

These start real JVMs (a node takes ~3-8 s on two cores); the jars come from the user cache,
which CI pre-warms, so no test here waits for a Maven Central download after the first run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.kafka_dist import KafkaCluster, cache_root, cached_versions, resolve
from harness.kafka_dist.java_clients import JavaClients, java_clients
from harness.kafka_dist.wire import (
    API_CONSUMER_GROUP_HEARTBEAT,
    broker_ids,
    consumer_group_heartbeat_error,
)
from tests.plugins.kafka import QUICK_RESTART_CONFIGS, skip_without_tools

UNSUPPORTED_VERSION = 35
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", autouse=True)
def _tools() -> None:
    skip_without_tools()


def _heartbeat_error(cluster: KafkaCluster) -> int:
    return consumer_group_heartbeat_error(
        "127.0.0.1", cluster.port(0), f"probe-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:22], ["probe"]
    )


# --- resolution ----------------------------------------------------------------------------------


def test_resolve_is_cached_and_second_call_does_not_download() -> None:
    first = resolve("4")
    marker = first.lib / "dist.json"
    stamp = marker.stat().st_mtime_ns
    began = time.monotonic()
    second = resolve("4")
    elapsed = time.monotonic() - began
    assert second == first
    assert marker.stat().st_mtime_ns == stamp  # not rewritten: nothing was downloaded again
    assert elapsed < 1.0, f"cached resolve took {elapsed:.2f}s"
    assert first.lib.is_relative_to(cache_root())
    assert first.version_tuple >= (4, 0, 0)
    assert first.version in cached_versions()
    assert first.jar("kafka_2.13").exists()
    assert first.jar("kafka-clients").exists()
    assert any(j.name.startswith("log4j-slf4j-impl") for j in first.jars())  # 4.x: log4j2 binding


def test_lines_resolve_within_their_line_and_exact_releases_to_themselves() -> None:
    for line in ("3.9", "3.7"):
        dist = resolve(line)
        assert dist.version.startswith(line + "."), dist.version
        assert resolve(dist.version) == dist
        assert any(j.name.startswith("slf4j-reload4j") for j in dist.jars())  # 3.x logging binding


def test_bad_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="bad Kafka version spec"):
        resolve("four")


@pytest.mark.e2e
def test_two_processes_resolving_at_once_share_one_download(tmp_path: Path) -> None:
    """A fresh cache, two processes resolving the same release at once: the file lock lets one
    run Maven (from ~/.m2, no network) while the other waits and then reads the result."""
    version = resolve("3.9").version
    env = {**os.environ, "GROUPSHIFT_KAFKA_CACHE": str(tmp_path / "cache")}
    code = (
        "from harness.kafka_dist import resolve; "
        f"d = resolve({version!r}); print(d.lib, d.info['resolved_at'])"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs[0] == outputs[1]  # same directory, same (single) download
    release_dir = tmp_path / "cache" / version
    assert sorted(p.name for p in release_dir.iterdir()) == ["broker"]  # no staging left behind


# --- clusters --------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_kafka4_runs_kip848_groups(kafka4: KafkaCluster) -> None:
    apis = kafka4.api_versions()
    assert API_CONSUMER_GROUP_HEARTBEAT in apis
    assert _heartbeat_error(kafka4) != UNSUPPORTED_VERSION
    assert kafka4.log_path(0).exists()
    assert kafka4.bootstrap == f"127.0.0.1:{kafka4.port(0)}"


@pytest.mark.e2e
@pytest.mark.parametrize("line", ["3.9", "3.7"])
def test_3x_node_refuses_consumer_group_heartbeat_by_default(
    line: str, request: pytest.FixtureRequest
) -> None:
    """3.7-3.9 advertise ConsumerGroupHeartbeat v0 in ApiVersions but answer it with
    UNSUPPORTED_VERSION until `group.coordinator.rebalance.protocols` includes `consumer`. The
    session's nodes are asked (`kafka39_classic`, `kafka37_classic`: that setting at its default)."""
    cluster = request.getfixturevalue({"3.9": "kafka39_classic", "3.7": "kafka37_classic"}[line])
    assert cluster.version.startswith(line + ".")
    assert cluster.api_versions().get(API_CONSUMER_GROUP_HEARTBEAT) == (0, 0)
    assert _heartbeat_error(cluster) == UNSUPPORTED_VERSION


@pytest.mark.e2e
def test_three_node_cluster_survives_a_killed_node_and_takes_it_back(tmp_path: Path) -> None:
    with KafkaCluster("4", brokers=3, configs=QUICK_RESTART_CONFIGS, workdir=tmp_path) as cluster:
        assert len(cluster.bootstrap.split(",")) == 3
        assert broker_ids("127.0.0.1", cluster.port(0)) == [0, 1, 2]
        old_pid = cluster.pid(1)
        cluster.kill_broker(1)
        assert not cluster.is_running(1)
        cluster.wait_ready(timeout=30)  # the others still answer; the killed one is not awaited
        cluster.start_broker(1)
        assert cluster.is_running(1)
        assert cluster.pid(1) != old_pid
        assert cluster.api_versions(1)
        assert "starting node 1" in cluster.log_path(1).read_text().split("--- groupshift:")[-1]
        # Killed, not shut down (the data is thrown away): a 3-node controlled shutdown takes
        # seconds, and every node must be gone after it all the same.
        cluster.stop(graceful=False)
        assert not any(cluster.is_running(i) for i in range(3))


@pytest.mark.e2e
def test_a_port_taken_before_the_bind_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process takes the chosen client port before Kafka binds it: one retry on new ports."""
    import harness.kafka_dist.cluster as cluster_module

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real_free_port = cluster_module.free_port
    ports = iter([taken])
    monkeypatch.setattr(cluster_module, "free_port", lambda: next(ports, None) or real_free_port())
    try:
        with KafkaCluster("4", workdir=tmp_path) as cluster:
            assert cluster.port(0) != taken
            assert cluster.api_versions()
    finally:
        squatter.close()


@pytest.mark.e2e
def test_a_node_formatted_like_an_earlier_one_starts_from_its_kept_format(tmp_path: Path) -> None:
    """`kafka-storage format` runs once per set of inputs (here made new by a setting no other
    cluster has); the next node of the same inputs gets a copy, with its own cluster id and a new
    directory id, and starts on it."""
    configs = {"log.retention.ms": str(600_000_000 + uuid.uuid4().int % 100_000_000)}

    def meta(cluster: KafkaCluster) -> dict[str, str]:
        text = (cluster.nodes[0].data_dir / "meta.properties").read_text()
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    first = KafkaCluster("4", configs=configs, workdir=tmp_path / "first")
    node = first.nodes[0]
    node.write_properties()
    formatting = node.format()
    assert formatting is not None and formatting.wait(120) == 0, (node.dir / "format.log").read_text()
    node.keep_format()
    template = node._format_template()
    assert template is not None and template.is_dir()
    try:
        with KafkaCluster("4", configs=configs, workdir=tmp_path / "second") as second:
            assert not (second.nodes[0].dir / "format.log").exists()  # no format JVM ran
            assert meta(second)["cluster.id"] == second.cluster_id != first.cluster_id
            assert meta(second)["node.id"] == "0"
            assert meta(second)["directory.id"] != meta(first)["directory.id"]
            assert broker_ids("127.0.0.1", second.port(0)) == [0]
    finally:
        shutil.rmtree(template)


@pytest.mark.e2e
def test_start_failure_reports_the_log_tail(tmp_path: Path) -> None:
    bad = {"group.consumer.heartbeat.interval.ms": "1", "group.consumer.min.heartbeat.interval.ms": "5"}
    with pytest.raises(RuntimeError, match=r"heartbeat\.interval\.ms"):
        KafkaCluster("4", configs=bad, workdir=tmp_path).start()


# --- Java clients ----------------------------------------------------------------------------------


@pytest.mark.e2e
def test_verifiable_producer_and_kip848_consumer_and_group_command(
    kafka4: KafkaCluster, kafka_clients4: JavaClients
) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with kafka_clients4.verifiable_producer(kafka4.bootstrap, topic, 50) as producer:
        sent = [e for e in producer.iter_events(timeout=60) if e["name"] == "producer_send_success"]
    assert len(sent) == 50
    assert {e["value"] for e in sent} == {str(i) for i in range(50)}

    with kafka_clients4.verifiable_consumer(
        kafka4.bootstrap, topic, group, group_protocol="consumer", max_messages=50
    ) as consumer:
        assigned = consumer.wait_for("partitions_assigned", timeout=60)
        assert assigned["partitions"] == [{"topic": topic, "partition": 0}]
        consumed = 0
        while consumed < 50:
            consumed += consumer.wait_for("records_consumed", timeout=60)["count"]
        committed = consumer.wait_for("offsets_committed", timeout=60)
        assert committed["success"] is True
        groups = kafka_clients4.list_groups(kafka4.bootstrap)
    assert consumed == 50
    assert group in groups
    described = kafka_clients4.consumer_groups(kafka4.bootstrap, "--describe", "--group", group)
    assert described.returncode == 0
    assert topic in described.stdout


@pytest.mark.e2e
def test_java_clients_of_3_7_consume_from_kafka4_with_the_classic_protocol(
    kafka4: KafkaCluster, kafka_clients4: JavaClients
) -> None:
    clients = java_clients("3.7")
    assert clients.version.startswith("3.7.")
    assert clients.main_class("ConsumerGroupCommand") == "kafka.admin.ConsumerGroupCommand"
    assert clients.main_class("VerifiableConsumer") == "org.apache.kafka.tools.VerifiableConsumer"
    topic, group = f"old-{uuid.uuid4().hex[:8]}", f"old-{uuid.uuid4().hex[:8]}"
    with kafka_clients4.verifiable_producer(kafka4.bootstrap, topic, 20) as producer:
        list(producer.iter_events(timeout=60))
    assert producer.process.returncode == 0
    with clients.verifiable_consumer(
        kafka4.bootstrap, topic, group, group_protocol="classic", max_messages=20
    ) as consumer:
        consumed = 0
        while consumed < 20:
            consumed += consumer.wait_for("records_consumed", timeout=60)["count"]
    assert consumed == 20
    assert group in clients.list_groups(kafka4.bootstrap)


# --- the command line ------------------------------------------------------------------------------


@pytest.mark.e2e
def test_kafka_start_prints_bootstrap_and_stops_on_ctrl_c() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.kafka_dist", "start", "--version", "4", "--set", "num.partitions=3"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().strip()
        host, port = bootstrap.split(":")
        assert host == "127.0.0.1"
        assert broker_ids(host, int(port)) == [0]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        with pytest.raises(OSError):
            broker_ids(host, int(port), timeout=1.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.e2e
def test_kafka_versions_lists_the_cache() -> None:
    version = resolve("4").version
    out = subprocess.run(
        [sys.executable, "-m", "harness.kafka_dist", "versions"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert any(line.split()[:2] == [version, "broker"] for line in out.splitlines())


def test_groupshift_kafka_command_parses_start_options() -> None:
    from groupshift.cli import build_parser

    args = build_parser().parse_args(
        ["kafka", "start", "--version", "3.9", "--brokers", "3", "--set", "a.b=1", "--set", "c=x=y"]
    )
    assert (args.kafka_version, args.brokers, args.set) == ("3.9", 3, ["a.b=1", "c=x=y"])
    from harness.kafka_dist.commands import parse_sets

    assert parse_sets(args.set) == {"a.b": "1", "c": "x=y"}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_sets(["novalue"])


def test_cluster_ids_never_start_with_a_dash() -> None:
    """`kafka-storage format --cluster-id -abc...` reads the id as an option (1 id in 64 would)."""
    from harness.kafka_dist.cluster import new_cluster_id

    ids = [new_cluster_id() for _ in range(2000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert any("-" in i for i in ids)  # dashes inside stay: the base64url alphabet
