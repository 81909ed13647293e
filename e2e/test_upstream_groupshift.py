"""groupshift in front of another groupshift (embedded mode) as the upstream cluster.

The upstream is a second `groupshift serve` process: a Kafka-compatible single-node backend
that is always available, so these tests run everywhere (the same scenarios run against real
Apache Kafka in `test_upstream_kafka.py`). One upstream and one gateway per module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.upstream import (
    FAST_UPSTREAM_SETTINGS,
    Backend,
    check_broker_restart,
    check_conflict,
    check_cutover,
    check_delete_group,
    check_gateway_killed,
    check_metadata_and_versions,
    check_own_group_settings,
    check_roundtrip,
    start_fixed_gateway,
)
from e2e.upstream_streams import check_streams_group_on_upstream
from harness.kafka_dist import free_port


class GroupshiftBackend:
    def __init__(self, gateways: Gateways) -> None:
        self.gateways = gateways
        self.proc = gateways.start("upstream", sets=["num.partitions=6", "coordinator.fsync.policy=none"])
        self.port = self.proc.port

    def kill(self, i: int) -> None:
        self.proc.kill()

    def start(self, i: int) -> None:
        self.proc = GatewayProcess.start(
            self.proc.data_dir,
            sets=self.proc.sets,
            log_path=self.proc.log_path,
            extra_args=("--listen", f"127.0.0.1:{self.port}"),
        )
        self.gateways.started.append(self.proc)

    def backend(self) -> Backend:
        return Backend("groupshift", f"127.0.0.1:{self.port}", 1, self.kill, self.start)


@pytest.fixture(scope="module")
def setup(
    module_gateways: Gateways, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, Backend]]:
    upstream = GroupshiftBackend(module_gateways)
    backend = upstream.backend()
    gw = GatewayProcess.start(
        Path(tmp_path_factory.mktemp("gw")) / "gw",
        sets=FAST_UPSTREAM_SETTINGS,
        extra_args=("--upstream", backend.bootstrap),
    )
    module_gateways.started.append(gw)
    yield gw, backend


def test_metadata_and_api_versions(setup: tuple[GatewayProcess, Backend]) -> None:
    check_metadata_and_versions(*setup)


def test_produce_consume_both_protocols_and_mirror(setup: tuple[GatewayProcess, Backend]) -> None:
    check_roundtrip(*setup, "us-roundtrip")


def test_cutover_imports_upstream_commits(setup: tuple[GatewayProcess, Backend]) -> None:
    check_cutover(*setup, "us-cutover")


def test_mirror_conflict_with_live_upstream_group(setup: tuple[GatewayProcess, Backend]) -> None:
    check_conflict(*setup, "us-conflict")


def test_upstream_killed_and_restarted(setup: tuple[GatewayProcess, Backend]) -> None:
    check_broker_restart(*setup, "us-faults", victim=0)


def test_delete_group_deletes_the_upstream_copy(setup: tuple[GatewayProcess, Backend]) -> None:
    check_delete_group(*setup, "us-delete")


def test_gateway_sigkilled_and_restarted(
    setup: tuple[GatewayProcess, Backend], module_gateways: Gateways, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, backend = setup
    base = Path(tmp_path_factory.mktemp("gwkill")) / "gw"
    port = free_port()

    def start() -> GatewayProcess:
        gw = start_fixed_gateway(base, backend, port)
        module_gateways.started.append(gw)  # stopped (and checked) at the module's end
        return gw

    check_gateway_killed(start, backend, "us-gwkill")


def test_migration_view_shows_groupshift_config_policy(
    setup: tuple[GatewayProcess, Backend], tmp_path_factory: pytest.TempPathFactory
) -> None:
    check_own_group_settings(setup[1], Path(tmp_path_factory.mktemp("gwpolicy")) / "gw")


def test_streams_group_served_and_internal_topics_created_upstream(
    setup: tuple[GatewayProcess, Backend],
) -> None:
    check_streams_group_on_upstream(*setup, "us-streams")
