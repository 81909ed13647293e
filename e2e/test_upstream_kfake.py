"""groupshift in front of kfake, franz-go's fake Kafka cluster, emulating Kafka 2.4 (harness/kfake.py).

kfake is a Kafka-compatible broker from the Go module proxy; started with `-as-version 2.4` it
advertises Metadata up to v9 (no topic ids) and no ConsumerGroupHeartbeat, so KIP-848 clients
work on it only through groupshift, with groupshift's own topic ids
(gateway/upstream/topic_ids.py). Checked here:

* the ids: served in Metadata v10+, looked up by id, derived from kfake's cluster id;
* a KIP-848 member (librdkafka `group.protocol=consumer`) and a classic one consume everything
  produced through groupshift; their commits are mirrored to kfake;
* a fleet that committed directly on kfake resumes from those commits behind groupshift;
* the rolling upgrade then downgrade with mixed clients (e2e/migration.py's checkers).

kfake keeps everything in memory, so no broker restart is checked. One kfake and one gateway
per module.
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
)
from harness.kfake import KfakeCluster, KfakeUnavailable


def _in_memory(i: int) -> None:
    raise AssertionError("kfake keeps everything in memory: a restarted broker starts empty")


@pytest.fixture(scope="module")
def kfake(
    module_gateways: Gateways, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, Backend, KfakeCluster]]:
    cluster = KfakeCluster(Path(tmp_path_factory.mktemp("kfake")), as_version="2.4")
    try:
        cluster.start()
    except KfakeUnavailable as exc:
        if exc.tool_missing:
            pytest.skip(f"kfake unavailable: {exc}")
        raise
    try:
        backend = Backend("kfake-2.4", cluster.bootstrap, 1, _in_memory, _in_memory)
        gw = GatewayProcess.start(
            Path(tmp_path_factory.mktemp("gw-kfake")) / "gw",
            sets=FAST_UPSTREAM_SETTINGS,
            extra_args=("--upstream", backend.bootstrap),
        )
        module_gateways.started.append(gw)
        yield gw, backend, cluster
        assert cluster.is_running(), f"kfake exited:\n{cluster.log_tail()}"
    finally:
        cluster.stop()


def test_kfake_emulates_a_cluster_without_ids_or_kip848(
    kfake: tuple[GatewayProcess, Backend, KfakeCluster],
) -> None:
    gw, _, cluster = kfake
    direct = cluster.api_versions()
    assert direct[3][1] == 9 and 68 not in direct
    create_topic(gw, "kfake-ids")
    check_derived_topic_ids(gw, cluster.cluster_id, "kfake-ids")


def test_kfake_kip848_and_classic_consumers(kfake: tuple[GatewayProcess, Backend, KfakeCluster]) -> None:
    check_roundtrip(kfake[0], kfake[1], "kfake-roundtrip")


def test_kfake_cutover_imports_upstream_commits(kfake: tuple[GatewayProcess, Backend, KfakeCluster]) -> None:
    check_cutover(kfake[0], kfake[1], "kfake-cutover")


def test_kfake_rolling_upgrade_then_downgrade(kfake: tuple[GatewayProcess, Backend, KfakeCluster]) -> None:
    check_rolling_upgrade_then_downgrade(kfake[0], "kfake-rolling")
