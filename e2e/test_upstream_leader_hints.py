"""KIP-951 leader hints through groupshift, end to end, on a real three-broker Kafka 4.x.

A broker that is not a partition's leader answers Produce (v10+) and Fetch (v16+) with
NOT_LEADER_OR_FOLLOWER, `CurrentLeader` and the leader's `NodeEndpoints`, so that a client can
go straight to the new leader without a Metadata round trip. groupshift rewrites those
endpoints to its own listeners (`gateway/upstream/proxy.py`); this module checks it over the
wire, with raw requests sent to followers' listeners before and after the leader is killed,
while a librdkafka producer keeps producing through groupshift with nothing lost
(`e2e/upstream.py`, `check_leader_hints`). Without java/mvn the cluster fixture skips with the
reason; `tests/test_upstream.py` pins the rewrite itself everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.upstream import FAST_UPSTREAM_SETTINGS, Backend, check_leader_hints


def test_kafka4_leader_hints_point_at_groupshift(
    kafka_cluster_factory: Any, gateways: Gateways, tmp_path: Path
) -> None:
    cluster = kafka_cluster_factory(
        "4",
        brokers=3,
        configs={
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "4",
            "auto.create.topics.enable": "false",
            # Leadership must stay where the kill moved it while the test looks at the hints.
            "auto.leader.rebalance.enable": "false",
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            "min.insync.replicas": "1",
        },
        name="upstream-kafka4-3n",
    )
    backend = Backend(
        f"kafka-{cluster.version}", cluster.bootstrap, 3, cluster.kill_broker, cluster.start_broker
    )
    gw = GatewayProcess.start(
        tmp_path / "gw", sets=FAST_UPSTREAM_SETTINGS, extra_args=("--upstream", backend.bootstrap)
    )
    gateways.started.append(gw)
    check_leader_hints(gw, backend, "leader-hints")
