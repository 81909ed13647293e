"""groupshift in front of Apache Kafka 2.4 (ZooKeeper mode, no topic ids: harness.kafka_dist.zookeeper).

Kafka 2.4 serves Metadata up to v9, which carries no topic id, and no KIP-848. Behind groupshift
(gateway/upstream/topic_ids.py):

* Metadata is served up to groupshift's version with ids derived from the cluster id and the
  topic name; a Metadata request by id is answered by name; Fetch stays at the broker's
  by-name versions; the same ids come back after groupshift restarts (the module's last test);
* a KIP-848 member (librdkafka `group.protocol=consumer`, and Kafka's Java consumer) resolves its
  assignment and consumes, as a classic member does, and their commits are mirrored to Kafka 2.4
  (Kafka 4's `kafka-consumer-groups` against Kafka 2.4 shows them with no lag);
* a fleet that committed directly on Kafka 2.4 resumes from those commits behind groupshift;
* the rolling upgrade then downgrade with mixed clients (e2e/migration.py's checkers).

One Kafka 2.4 (one broker and its ZooKeeper) and one gateway per module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.groups import create_topic
from e2e.harness import GatewayProcess
from e2e.upstream import (
    Backend,
    check_cutover,
    check_derived_topic_ids,
    check_java_consumer_and_lag_tool,
    check_rolling_upgrade_then_downgrade,
    check_roundtrip,
    metadata,
    served_topic_ids,
    start_fixed_gateway,
)
from harness.kafka_dist import KafkaUnavailable, free_port, tools_missing
from harness.kafka_dist.zookeeper import ZooKeeperKafkaCluster

VERSION = "2.4.1"


@pytest.fixture(scope="module")
def kafka24(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperKafkaCluster]:
    reason = tools_missing()
    if reason:
        pytest.skip(f"reference Kafka unavailable: {reason}")
    try:
        cluster = ZooKeeperKafkaCluster(
            VERSION,
            configs={"auto.create.topics.enable": "false", "offsets.topic.num.partitions": "4"},
            workdir=tmp_path_factory.mktemp("kafka24"),
        )
    except KafkaUnavailable as exc:
        if exc.tool_missing:
            pytest.skip(f"reference Kafka unavailable: {exc}")
        raise
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _unrestartable(i: int) -> None:
    raise AssertionError("not used by this module's checks")


@pytest.fixture(scope="module")
def upstream24(
    kafka24: ZooKeeperKafkaCluster, module_gateways: Gateways, tmp_path_factory: pytest.TempPathFactory
) -> tuple[GatewayProcess, Backend]:
    """The gateway on a fixed port, so the module's last test can restart it where it was."""
    backend = Backend(f"kafka-{VERSION}", kafka24.bootstrap, 1, _unrestartable, _unrestartable)
    gw = start_fixed_gateway(Path(tmp_path_factory.mktemp("gw-kafka24")) / "gw", backend, free_port())
    module_gateways.started.append(gw)
    return gw, backend


def test_kafka24_topics_get_ids_of_groupshifts_own(
    kafka24: ZooKeeperKafkaCluster, upstream24: tuple[GatewayProcess, Backend]
) -> None:
    gw, _ = upstream24
    create_topic(gw, "k24-ids")
    direct = kafka24.api_versions()
    assert direct[3][1] == 9 and direct[1][1] == 11, "Kafka 2.4 serves Metadata v9 (no ids), Fetch v11"
    cluster_id = metadata(kafka24.port(), 9, topics=None).cluster_id
    check_derived_topic_ids(gw, cluster_id, "k24-ids")


def test_kafka24_kip848_and_classic_consumers(upstream24: tuple[GatewayProcess, Backend]) -> None:
    check_roundtrip(*upstream24, "k24-roundtrip")


def test_kafka24_java_kip848_consumer_and_lag_tool(
    upstream24: tuple[GatewayProcess, Backend], kafka_clients4: Any
) -> None:
    """Kafka's own Java consumer (4.x, `group.protocol=consumer`) resolves groupshift's ids too;
    Kafka 4's `kafka-consumer-groups` run against Kafka 2.4 shows the mirrored offsets."""
    check_java_consumer_and_lag_tool(*upstream24, kafka_clients4, "k24-java")


def test_kafka24_cutover_imports_upstream_commits(upstream24: tuple[GatewayProcess, Backend]) -> None:
    check_cutover(*upstream24, "k24-cutover")


def test_kafka24_rolling_upgrade_then_downgrade(upstream24: tuple[GatewayProcess, Backend]) -> None:
    check_rolling_upgrade_then_downgrade(upstream24[0], "k24-rolling")


def test_kafka24_the_same_ids_after_a_restart(
    upstream24: tuple[GatewayProcess, Backend], module_gateways: Gateways
) -> None:
    """Last in the module: the gateway restarted on its data directory and port serves the same
    ids (derived, not stored: a second node in front of the same cluster computes them alike,
    tests/test_upstream_topic_ids.py)."""
    gw, backend = upstream24
    before = {t: served_topic_ids(gw.port, t)[t] for t in ("k24-ids", "k24-roundtrip", "k24-rolling")}
    assert gw.stop() == 0
    again = start_fixed_gateway(gw.data_dir, backend, gw.port)
    module_gateways.started.append(again)
    assert {t: served_topic_ids(again.port, t)[t] for t in before} == before
