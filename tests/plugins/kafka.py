"""pytest plugin: reference Apache Kafka clusters as session fixtures (registered from the root
conftest.py).

- `kafka4`: one newest-4.x node with both group protocols on (`KAFKA4_TEST_CONFIGS`: short
  KIP-848 heartbeat and session bounds, no initial rebalance delay, a small `__consumer_offsets`).
- `kafka39_classic`: one Kafka 3.9 node (`KAFKA39_CLASSIC_CONFIGS`: classic groups only, as 3.9 ships).
- `kafka37_classic`: one Kafka 3.7 node (`KAFKA37_CLASSIC_CONFIGS`), for the oldest API paths.
- `kafka_cluster_factory`: `factory(version="4", brokers=1, configs={...})` starts more clusters;
  each is killed (SIGKILL: its data is thrown away) at the end of the test module that started
  it (an idle node still takes about 3% of a core, and CI has two), or at the end of the session
  if started with `for_session=True` (by a session fixture), and its work directory (with each
  node's `server.log`) is kept under pytest's basetemp for post-mortems.
- `kafka_clients4`: Kafka's own Java tools (newest 4.x) for `VerifiableConsumer`,
  `VerifiableProducer` and `ConsumerGroupCommand`.

Without `java` or `mvn` on PATH these fixtures skip with the reason; any other failure to fetch
or start Kafka is an error, not a skip.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.kafka_dist import KafkaCluster, KafkaUnavailable, tools_missing
from harness.kafka_dist.java_clients import JavaClients, java_clients

#: Broker settings for fast group tests against Kafka 4.x (both protocols, KIP-848 bounds low).
KAFKA4_TEST_CONFIGS: dict[str, str] = {
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
}


#: A node started again after a SIGKILL registers only once its killed incarnation's broker
#: session is over: the restarted controller replays that incarnation's registration, unfenced,
#: and counts its session from its own activation, answering DUPLICATE_BROKER_REGISTRATION
#: ("Another broker is registered with that broker id") until `broker.session.timeout.ms`
#: (9 s by default) has passed; the broker asks again every `broker.heartbeat.interval.ms` (2 s).
#: Seen in a 3.9 node's server.log: 10 s of each kill-and-restart cycle. A 3 s session with a
#: heartbeat every 500 ms (the multi-node tests' settings, e2e/test_scale_out.py) makes that 3 s.
QUICK_RESTART_CONFIGS = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}


def skip_without_tools() -> None:
    reason = tools_missing()
    if reason:
        pytest.skip(f"reference Kafka unavailable: {reason}")


class KafkaClusterFactory:
    """Starts clusters for a test session and stops them all at its end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.clusters: list[KafkaCluster] = []
        self.for_session: set[int] = set()
        """ids of the clusters that live until the session ends (started by session fixtures)."""

    def __call__(
        self,
        version: str = "4",
        brokers: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        proxied_listener: bool = False,
        for_session: bool = False,
    ) -> KafkaCluster:
        skip_without_tools()
        label = name or f"kafka-{version}-{brokers}n-{len(self.clusters)}"
        # Names repeat across modules (module-scoped fixtures number their clusters from 0) while
        # this factory lives for the session: never format a node over another cluster's data.
        workdir, n = self.base / label, 1
        while workdir.exists():
            n += 1
            workdir = self.base / f"{label}-{n}"
        try:
            cluster = KafkaCluster(
                version,
                brokers=brokers,
                configs=configs,
                workdir=workdir,
                proxied_listener=proxied_listener,
            )
        except KafkaUnavailable as exc:
            if exc.tool_missing:
                pytest.skip(f"reference Kafka unavailable: {exc}")
            raise
        self.clusters.append(cluster)
        if for_session:
            self.for_session.add(id(cluster))
        return cluster.start()

    def stop_all(self) -> None:
        """Every cluster at once (one after the other, they took 26-29 s at the end of a CI
        run: the last test's teardown)."""
        self._stop(self.clusters)

    def stop_module_clusters(self) -> None:
        """Every running cluster not started for the session (a module's): at the end of each
        module, so that no idle cluster runs beside the rest of the session."""
        self._stop([c for c in self.clusters if id(c) not in self.for_session and c.started])

    @staticmethod
    def _stop(clusters: list[KafkaCluster]) -> None:
        """Killed, not shut down (KafkaCluster.stop, graceful=False): nothing reads their data
        again, and their logs (kept under basetemp) are whole either way."""
        with ThreadPoolExecutor(max_workers=max(1, len(clusters))) as pool:
            for stopped in [pool.submit(cluster.stop, graceful=False) for cluster in clusters]:
                stopped.result()


@pytest.fixture(scope="session")
def kafka_cluster_factory(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[KafkaClusterFactory]:
    factory = KafkaClusterFactory(tmp_path_factory.mktemp("kafka"))
    request.config.stash[_FACTORY] = factory
    try:
        yield factory
    finally:
        factory.stop_all()


_FACTORY = pytest.StashKey[KafkaClusterFactory]()


@pytest.fixture(scope="module", autouse=True)
def _stop_module_kafka_clusters(request: pytest.FixtureRequest) -> Iterator[None]:
    """Autouse, so set up before a module's own module fixtures and torn down after them (after
    the gateways that front a module's cluster have stopped)."""
    yield
    factory = request.config.stash.get(_FACTORY, None)
    if factory is not None:
        factory.stop_module_clusters()


@pytest.fixture(scope="session")
def kafka4(kafka_cluster_factory: KafkaClusterFactory) -> KafkaCluster:
    """A running single-node newest Kafka 4.x with both group protocols enabled."""
    return kafka_cluster_factory("4", configs=KAFKA4_TEST_CONFIGS, name="kafka4", for_session=True)


#: Broker settings of `kafka39_classic`: Kafka's defaults (classic groups only) but no initial rebalance
#: delay and a small single-replica `__consumer_offsets`.
KAFKA39_CLASSIC_CONFIGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
}


@pytest.fixture(scope="session")
def kafka39_classic(kafka_cluster_factory: KafkaClusterFactory) -> KafkaCluster:
    """A running single-node Kafka 3.9 (the release an operator upgrades from), started once for
    the session's 3.9 users (a start is tens of seconds of CI). e2e/test_fleet_kafka.py reads its
    whole log dir and expects only its own groups there: other users must not make groups on it
    (tests/test_kafka_dist.py only asks ApiVersions and a refused ConsumerGroupHeartbeat)."""
    return kafka_cluster_factory(
        "3.9", configs=KAFKA39_CLASSIC_CONFIGS, name="kafka39-classic", for_session=True
    )


#: Broker settings of `kafka37_classic`: Kafka's defaults (classic groups only) but no initial
#: rebalance delay, a small single-replica `__consumer_offsets` and a 1 s minimum session.
KAFKA37_CLASSIC_CONFIGS: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


@pytest.fixture(scope="session")
def kafka37_classic(kafka_cluster_factory: KafkaClusterFactory) -> KafkaCluster:
    """A running single-node Kafka 3.7 (no ConsumerGroupDescribe, ListGroups up to v4), started
    once for tests/test_kafka_dist.py's refusal check and e2e/test_groups_cli_kafka.py's 3.7
    transcript (which compares only its own groups)."""
    return kafka_cluster_factory(
        "3.7", configs=KAFKA37_CLASSIC_CONFIGS, name="kafka37-classic", for_session=True
    )


@pytest.fixture(scope="session")
def kafka_clients4(tmp_path_factory: pytest.TempPathFactory) -> JavaClients:
    """Kafka's Java tools of the newest 4.x release that publishes them (each tool's stderr is
    kept under pytest's basetemp)."""
    skip_without_tools()
    try:
        return java_clients("4", workdir=tmp_path_factory.mktemp("kafka-clients4"))
    except KafkaUnavailable as exc:
        if exc.tool_missing:
            pytest.skip(f"reference Kafka unavailable: {exc}")
        raise
