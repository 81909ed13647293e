"""groupshift in front of real Apache Kafka (harness.kafka_dist's reference clusters).

* Kafka 3.9, three brokers, classic coordinator only: clients see three groupshift listeners;
  KIP-848 (librdkafka `group.protocol=consumer`) and classic consumers share the gateway's
  groups while the cluster has no KIP-848; a fleet that committed directly on the cluster
  resumes from those commits behind the gateway; one broker is SIGKILLed and restarted while
  records flow.
* Kafka 3.9 (no streams groups): a Kafka Streams 4.4 word count with `group.protocol=streams`
  served by groupshift, its internal topics created on the cluster, three instances with one
  SIGKILLed and restarted on its state directory (e2e/upstream_streams.py); the same with
  `processing.guarantee=exactly_once_v2` on the streams and the classic protocol, the kill in
  the middle of a transaction, every count read committed exact.
* exactly once through groupshift (e2e/transactions.py): two Java transactional copiers (a
  KIP-848 member and a classic member of one group) copy a topic while the KIP-848 copier is
  SIGKILLed twice and groupshift once; Kafka 3.9 is the upstream transaction coordinator.
* Kafka 4.x, one broker, consumer protocol disabled on the broker
  (`group.coordinator.rebalance.protocols=classic`): the same round trip, and a live group of
  the same id on the cluster refusing the mirror.

One cluster per module (started once, by the session's cluster factory). Without java/mvn the
fixtures skip with the reason; `test_upstream_groupshift.py` runs the same scenarios against a
groupshift backend everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.transactions import check_exactly_once_copy
from e2e.upstream import (
    FAST_UPSTREAM_SETTINGS,
    Backend,
    check_broker_leaves_and_returns,
    check_broker_restart,
    check_conflict,
    check_cutover,
    check_delete_group,
    check_gateway_killed,
    check_java_consumer_and_lag_tool,
    check_metadata_and_versions,
    check_own_group_settings,
    check_rolling_upgrade_then_downgrade,
    check_roundtrip,
    start_fixed_gateway,
)
from e2e.upstream_streams import check_streams_word_count, check_streams_word_count_exactly_once
from harness.kafka_dist import free_port
from harness.kafka_dist.java_clients import JavaClients

FAST_BROKER = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "4",
    "auto.create.topics.enable": "false",
}


def _gateway(gateways: Gateways, base: Path, name: str, cluster: Any) -> tuple[GatewayProcess, Backend]:
    backend = Backend(
        f"kafka-{cluster.version}",
        cluster.bootstrap,
        cluster.size,
        cluster.kill_broker,
        cluster.start_broker,
    )
    gw = GatewayProcess.start(
        base / name, sets=FAST_UPSTREAM_SETTINGS, extra_args=("--upstream", backend.bootstrap)
    )
    gateways.started.append(gw)
    return gw, backend


@pytest.fixture(scope="module")
def kafka39(
    kafka_cluster_factory: Any, module_gateways: Gateways, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, Backend]]:
    cluster = kafka_cluster_factory(
        "3.9",
        brokers=3,
        configs={
            **FAST_BROKER,
            "min.insync.replicas": "1",
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            # A killed transactional producer's open transaction is aborted within 1 s of its
            # timeout (10 s by default), not 10 s: the exactly-once word count's takeover.
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
        },
        name="upstream-kafka39",
    )
    yield _gateway(module_gateways, tmp_path_factory.mktemp("gw39"), "gw", cluster)


@pytest.fixture(scope="module")
def kafka4_classic(
    kafka_cluster_factory: Any, module_gateways: Gateways, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, Backend]]:
    cluster = kafka_cluster_factory(
        "4",
        brokers=1,
        configs={**FAST_BROKER, "group.coordinator.rebalance.protocols": "classic"},
        name="upstream-kafka4-classic",
    )
    yield _gateway(module_gateways, tmp_path_factory.mktemp("gw4"), "gw", cluster)


def test_kafka39_metadata_and_api_versions(kafka39: tuple[GatewayProcess, Backend]) -> None:
    check_metadata_and_versions(*kafka39)


def test_kafka39_kip848_and_classic_consumers(kafka39: tuple[GatewayProcess, Backend]) -> None:
    check_roundtrip(*kafka39, "k39-roundtrip")


def test_kafka39_cutover_imports_upstream_commits(kafka39: tuple[GatewayProcess, Backend]) -> None:
    check_cutover(*kafka39, "k39-cutover")


def test_kafka39_broker_killed_and_restarted(kafka39: tuple[GatewayProcess, Backend]) -> None:
    check_broker_restart(*kafka39, "k39-faults", victim=1)


def test_kafka39_exactly_once_copy_through_groupshift(
    kafka39: tuple[GatewayProcess, Backend],
    kafka_clients4: JavaClients,
    module_gateways: Gateways,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Issue 29's exactly-once scenario, on its own groupshift (killed and restarted on a fixed
    port): the output holds every input record once, and no aborted offset is ever fetched."""
    _, backend = kafka39
    base = tmp_path_factory.mktemp("gw39-txn")
    port = free_port()

    def start() -> GatewayProcess:
        gw = GatewayProcess.start(
            base / "gw",
            sets=(*FAST_UPSTREAM_SETTINGS, "group.consumer.session.timeout.ms=3000"),
            log_path=base / "gw-gateway.log",
            extra_args=("--upstream", backend.bootstrap, "--listen", f"127.0.0.1:{port}"),
            start_timeout=90,  # a restart on a loaded CI machine
        )
        module_gateways.started.append(gw)
        return gw

    check_exactly_once_copy(start, backend, kafka_clients4, base, "k39-eos")


def test_kafka4_without_consumer_protocol(kafka4_classic: tuple[GatewayProcess, Backend]) -> None:
    gw, backend = kafka4_classic
    check_metadata_and_versions(gw, backend)
    check_roundtrip(gw, backend, "k4-roundtrip")


def test_kafka4_mirror_conflict(kafka4_classic: tuple[GatewayProcess, Backend]) -> None:
    check_conflict(*kafka4_classic, "k4-conflict")


def test_kafka4_delete_group_deletes_the_upstream_copy(
    kafka4_classic: tuple[GatewayProcess, Backend],
) -> None:
    check_delete_group(*kafka4_classic, "k4-delete")


def test_kafka4_gateway_sigkilled_and_restarted(
    kafka4_classic: tuple[GatewayProcess, Backend],
    module_gateways: Gateways,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    _, backend = kafka4_classic
    base = Path(tmp_path_factory.mktemp("gwkill")) / "gw"
    port = free_port()

    def start() -> GatewayProcess:
        gw = start_fixed_gateway(base, backend, port)
        module_gateways.started.append(gw)  # stopped (and checked) at the module's end
        return gw

    check_gateway_killed(start, backend, "k4-gwkill")


def test_kafka39_java_kip848_consumer_and_lag_tool(
    kafka39: tuple[GatewayProcess, Backend], kafka_clients4: Any
) -> None:
    check_java_consumer_and_lag_tool(*kafka39, kafka_clients4, "k39-java")


def test_kafka39_rolling_upgrade_then_downgrade(kafka39: tuple[GatewayProcess, Backend]) -> None:
    check_rolling_upgrade_then_downgrade(kafka39[0], "k39-rolling")


def test_kafka39_broker_leaves_and_returns(kafka39: tuple[GatewayProcess, Backend]) -> None:
    check_broker_leaves_and_returns(*kafka39, victim=2)


def test_kafka39_migration_view_shows_groupshift_config_policy(
    kafka39: tuple[GatewayProcess, Backend], tmp_path_factory: pytest.TempPathFactory
) -> None:
    check_own_group_settings(kafka39[1], Path(tmp_path_factory.mktemp("gwpolicy")) / "gw")


def test_kafka39_streams_word_count(
    kafka39: tuple[GatewayProcess, Backend], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 31: a Kafka Streams 4.4 application with `group.protocol=streams` on a Kafka 3.9
    cluster, which has no streams groups: groupshift serves the group and creates the internal
    topics on the cluster; three instances, one SIGKILLed and restarted, the counts exact."""
    check_streams_word_count(*kafka39, Path(tmp_path_factory.mktemp("k39-streams")), "k39")


@pytest.mark.parametrize("protocol", ["streams", "classic"])
def test_kafka39_streams_word_count_exactly_once(
    kafka39: tuple[GatewayProcess, Backend], tmp_path_factory: pytest.TempPathFactory, protocol: str
) -> None:
    """Issue 31 with `processing.guarantee=exactly_once_v2`: the word count's transactions on
    Kafka 3.9, its group (`group.protocol` streams, or classic) and transactional offset
    commits on groupshift; one of three instances SIGKILLed in the middle of processing and
    restarted, every count read committed exactly the truth."""
    cut = check_streams_word_count_exactly_once(
        *kafka39, Path(tmp_path_factory.mktemp(f"k39-eos-{protocol}")), f"k39eos-{protocol}", protocol
    )
    print(f"what the kill cut ({protocol}): {cut}")
