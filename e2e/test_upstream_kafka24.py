"""groupshift in front of Apache Kafka 2.4 (ZooKeeper mode, no topic ids: harness.kafka_dist.zookeeper).

Kafka 2.4 serves Metadata up to v9, which carries no topic id, and no KIP-848. Behind groupshift
(gateway/upstream/topic_ids.py):

* Metadata is served up to groupshift's version with ids derived from the cluster id and the
  topic name; a Metadata request by id is answered by name; Fetch stays at the broker's
  by-name versions; the same id comes back after groupshift restarts and from a second
  groupshift in front of the same cluster;
* a KIP-848 member (librdkafka `group.protocol=consumer`) resolves its assignment and consumes,
  as a classic member does, and their commits are mirrored to Kafka 2.4;
* a fleet that committed directly on Kafka 2.4 resumes from those commits behind groupshift;
* the rolling upgrade then downgrade with mixed clients (e2e/migration.py's checkers).

One Kafka 2.4 (one broker and its ZooKeeper) and one gateway per module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.conftest import Gateways
from e2e.groups import create_topic
from e2e.harness import GatewayProcess
from e2e.upstream import (
    FAST_UPSTREAM_SETTINGS,
    Backend,
    check_cutover,
    check_derived_topic_ids,
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
    backend = Backend(f"kafka-{VERSION}", kafka24.bootstrap, 1, _unrestartable, _unrestartable)
    gw = GatewayProcess.start(
        Path(tmp_path_factory.mktemp("gw-kafka24")) / "gw",
        sets=FAST_UPSTREAM_SETTINGS,
        extra_args=("--upstream", backend.bootstrap),
    )
    module_gateways.started.append(gw)
    return gw, backend


def test_kafka24_topics_get_ids_of_groupshifts_own(
    kafka24: ZooKeeperKafkaCluster,
    upstream24: tuple[GatewayProcess, Backend],
    module_gateways: Gateways,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    gw, backend = upstream24
    topic = "k24-ids"
    create_topic(gw, topic)
    direct = kafka24.api_versions()
    assert direct[3][1] == 9 and direct[1][1] == 11, "Kafka 2.4 serves Metadata v9 (no ids), Fetch v11"
    cluster_id = metadata(kafka24.port(), 9, topics=None).cluster_id
    ids = check_derived_topic_ids(gw, cluster_id, topic)

    # The same id from a restarted groupshift and from a second one in front of the same cluster.
    base = Path(tmp_path_factory.mktemp("gw-kafka24-restart")) / "gw"
    port = free_port()
    other = start_fixed_gateway(base, backend, port)
    module_gateways.started.append(other)
    assert served_topic_ids(other.port, topic) == ids
    assert other.stop() == 0
    again = start_fixed_gateway(base, backend, port)
    module_gateways.started.append(again)
    assert served_topic_ids(again.port, topic) == ids


def test_kafka24_kip848_and_classic_consumers(upstream24: tuple[GatewayProcess, Backend]) -> None:
    check_roundtrip(*upstream24, "k24-roundtrip")


def test_kafka24_cutover_imports_upstream_commits(upstream24: tuple[GatewayProcess, Backend]) -> None:
    check_cutover(*upstream24, "k24-cutover")


def test_kafka24_rolling_upgrade_then_downgrade(upstream24: tuple[GatewayProcess, Backend]) -> None:
    check_rolling_upgrade_then_downgrade(upstream24[0], "k24-rolling")
