"""groupshift in front of Tansu, a non-Apache Kafka-compatible broker (harness/tansu.py).

Tansu has no KIP-848 (no ConsumerGroupHeartbeat) and its own classic group coordinator. With
groupshift in front of it:

* clients see groupshift's listener only; ApiVersions is the documented mix;
* a KIP-848 member (librdkafka `group.protocol=consumer`) and a classic one consume everything
  produced through groupshift, and their commits are mirrored to Tansu;
* a fleet that committed directly on Tansu resumes from those commits behind groupshift;
* the rolling upgrade then downgrade with mixed clients (the embedded migration test's checks);
* groupshift SIGKILLed and restarted under a mixed group while records flow;
* a streams group (KIP-1071), which Tansu lacks, served by groupshift, its internal topics
  created on Tansu.

What Tansu does differently is pinned here too (README, "In front of your cluster";
docs/deviations.md): a fetch from an offset inside a record batch returns no records (so the
cut-over here commits at batch boundaries); Tansu's OffsetCommit checks neither generation
nor member id, so a live group of the same id on Tansu does not refuse groupshift's mirrored
commits (no conflict is detected; the mirror overwrites that group's offsets), and Tansu's
storage here is in-memory, so a restarted Tansu starts empty and the "broker killed and
restarted" check does not apply.
One Tansu broker and one gateway per module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.expected import PARTITIONS
from e2e.groups import create_topic, wait_until
from e2e.harness import GatewayProcess
from e2e.migration import poll_unstranded
from e2e.upstream import (
    FAST_UPSTREAM_SETTINGS,
    Backend,
    Endpoint,
    check_cutover,
    check_delete_group,
    check_gateway_killed,
    check_metadata_and_versions,
    check_rolling_upgrade_then_downgrade,
    check_roundtrip,
    metric,
    start_fixed_gateway,
    upstream_offsets,
)
from e2e.upstream_streams import check_streams_group_on_upstream
from harness.kafka_dist import free_port


def _cannot_restart(i: int) -> None:
    raise AssertionError("Tansu with in-memory storage loses everything on a restart")


@pytest.fixture(scope="module")
def tansu(
    tansu_factory: Any, module_gateways: Gateways, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, Backend]]:
    broker = tansu_factory("upstream-tansu")
    backend = Backend("tansu", broker.bootstrap, 1, _cannot_restart, _cannot_restart)
    gw = GatewayProcess.start(
        Path(tmp_path_factory.mktemp("gw-tansu")) / "gw",
        sets=FAST_UPSTREAM_SETTINGS,
        extra_args=("--upstream", backend.bootstrap),
    )
    module_gateways.started.append(gw)
    yield gw, backend
    assert broker.is_running(), f"Tansu exited:\n{broker.log_tail()}"


def test_tansu_metadata_and_api_versions(tansu: tuple[GatewayProcess, Backend]) -> None:
    check_metadata_and_versions(*tansu)


def test_tansu_kip848_and_classic_consumers(tansu: tuple[GatewayProcess, Backend]) -> None:
    check_roundtrip(*tansu, "tansu-roundtrip")


def test_tansu_cutover_imports_upstream_commits(tansu: tuple[GatewayProcess, Backend]) -> None:
    # One record per batch: Tansu cannot fetch from inside a batch (the next test).
    check_cutover(*tansu, "tansu-cutover", one_record_per_batch=True)


def test_tansu_fetches_nothing_from_inside_a_record_batch(tansu: tuple[GatewayProcess, Backend]) -> None:
    """Kafka answers a fetch at an offset inside a batch with that batch (the client skips the
    records before it); Tansu 0.6 answers with no records, directly and so through groupshift,
    so a consumer whose committed offset falls inside a batch makes no progress on Tansu."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    gw, backend = tansu
    topic = "tansu-midbatch"
    create_topic(Endpoint(gw.bootstrap), topic)  # type: ignore[arg-type]
    producer = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 100})
    for i in range(20):
        producer.produce(topic, value=str(i).encode(), partition=0)
    assert producer.flush(10) == 0
    for bootstrap in (backend.bootstrap, gw.bootstrap):
        got = {}
        for start in (0, 7):
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tansu-midbatch-reader"})
            try:
                c.assign([TopicPartition(topic, 0, start)])
                got[start] = [m.offset() for m in c.consume(100, 3) if not m.error()]
            finally:
                c.close()
        assert got[0] == list(range(20)), got  # one batch of 20 (linger)
        assert got[7] == [], got


def test_tansu_delete_group_deletes_the_upstream_copy(tansu: tuple[GatewayProcess, Backend]) -> None:
    check_delete_group(*tansu, "tansu-delete")


def test_tansu_rolling_upgrade_then_downgrade(tansu: tuple[GatewayProcess, Backend]) -> None:
    check_rolling_upgrade_then_downgrade(tansu[0], "tansu-rolling")


def test_tansu_gateway_sigkilled_and_restarted(
    tansu: tuple[GatewayProcess, Backend], module_gateways: Gateways, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, backend = tansu
    base = Path(tmp_path_factory.mktemp("gwkill-tansu")) / "gw"
    port = free_port()

    def start() -> GatewayProcess:
        gw = start_fixed_gateway(base, backend, port)
        module_gateways.started.append(gw)
        return gw

    check_gateway_killed(start, backend, "tansu-gwkill")


def test_tansu_accepts_the_mirror_while_its_own_group_is_live(tansu: tuple[GatewayProcess, Backend]) -> None:
    """Kafka refuses a simple-group commit for a group with live members (the mirror then waits:
    `check_conflict`); Tansu's OffsetCommit does not check generation or member id, so the
    mirrored commit lands at once and no conflict is counted."""
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer

    gw, backend = tansu
    topic = "tansu-noconflict"
    group = f"{topic}-group"
    create_topic(Endpoint(gw.bootstrap), topic)  # type: ignore[arg-type]
    direct = KafkaConsumer(
        topic, bootstrap_servers=backend.bootstrap, group_id=group, enable_auto_commit=False,
        heartbeat_interval_ms=200, session_timeout_ms=6000,
    )  # fmt: skip
    try:
        wait_until(
            lambda: poll_unstranded(direct, 200) is not None and direct.assignment(), 30, "live Tansu group"
        )
        before = metric(gw, "groupshift_upstream_mirror_conflicts_total")
        c = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition(topic, p, 3) for p in range(PARTITIONS)], asynchronous=False)
        finally:
            c.close()
        wait_until(
            lambda: upstream_offsets(backend, group, topic) == {p: 3 for p in range(PARTITIONS)},
            20,
            "the mirror landing on Tansu while its group is live",
            0.5,
        )
        direct.poll(timeout_ms=200)
        assert direct.assignment(), "the Tansu group's member lost its assignment"
        assert metric(gw, "groupshift_upstream_mirror_conflicts_total") == before
    finally:
        direct.close()


def test_tansu_streams_group(tansu: tuple[GatewayProcess, Backend]) -> None:
    """Tansu has no streams groups: groupshift serves one and creates its internal topics on
    Tansu (e2e/upstream_streams.py). Tansu 0.6 creates a topic whatever its configs say
    (`cleanup.policy=bogus` too), so the refusal case is Kafka's and groupshift's only."""
    check_streams_group_on_upstream(*tansu, "tansu-streams", validates_configs=False)
