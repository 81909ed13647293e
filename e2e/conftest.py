"""e2e fixtures: real `groupshift serve` subprocesses on free 127.0.0.1 ports.

`gateways` (per test) and `module_gateways` (per module, for tests that share one server) start
processes with `.start(name, sets=[...])` and restart them on the same data directory with
`.restart(gw)`. `shared_gateways` (per module) hands every test that asks for the same settings
the same running server: for tests whose topics and groups are their own and that never stop,
kill or restart the server (each start costs seconds of CI time). At teardown every gateway
that was not deliberately killed must still be alive (else the test fails with the gateway's
log tail) and must exit 0 on SIGTERM.

GROUPSHIFT_E2E_WORKERS=N (opt-in, default 1) makes `gateways`, `module_gateways` and
`shared_gateways` start every server as `serve --workers N` (docs/workers.md); it is meant for
the migration suite (e2e/test_migration_*.py), whose helpers find each group's coordinator.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import GatewayProcess, e2e_workers


class Gateways:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.started: list[GatewayProcess] = []
        self.workers = e2e_workers()

    def start(
        self,
        name: str = "gw",
        *,
        sets: tuple[str, ...] | list[str] = (),
        extra_args: tuple[str, ...] = (),
        workers: int | None = None,
    ) -> GatewayProcess:
        """`workers`: `serve --workers N` whatever GROUPSHIFT_E2E_WORKERS says (None: as it says)."""
        gw = GatewayProcess.start(
            self.base / name, sets=tuple(sets), extra_args=extra_args, workers=workers or self.workers
        )
        self.started.append(gw)
        return gw

    def restart(self, gw: GatewayProcess) -> GatewayProcess:
        new = gw.restart()
        self.started.append(new)
        return new

    def finish(self) -> list[str]:
        problems = []
        for gw in self.started:
            if gw.expected_exit:
                continue
            if not gw.alive():
                problems.append(
                    f"gateway on port {gw.port} died unexpectedly (exit code "
                    f"{gw.proc.returncode}):\n{gw.log_tail()}"
                )
                continue
            try:
                code = gw.stop()
            except RuntimeError as e:
                problems.append(f"gateway on port {gw.port}: {e}\n{gw.log_tail()}")
                continue
            if code != 0:
                problems.append(f"gateway on port {gw.port} exited {code} on SIGTERM")
        return problems


class SharedGateways(Gateways):
    """`start` returns the running gateway started earlier with the same settings, if any (the
    name of the first caller names its data directory)."""

    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self._by_settings: dict[tuple[tuple[str, ...], tuple[str, ...], int | None], GatewayProcess] = {}

    def start(
        self,
        name: str = "gw",
        *,
        sets: tuple[str, ...] | list[str] = (),
        extra_args: tuple[str, ...] = (),
        workers: int | None = None,
    ) -> GatewayProcess:
        key = (tuple(sets), tuple(extra_args), workers)
        gw = self._by_settings.get(key)
        if gw is None or not gw.alive():
            gw = super().start(name, sets=sets, extra_args=extra_args, workers=workers)
            self._by_settings[key] = gw
        return gw


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def gateways(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Gateways]:
    g = Gateways(tmp_path)
    yield g
    if request.node.stash.get(_FAILED, False):
        for gw in g.started:  # shown with the failure report (captured output)
            print(f"--- gateway on port {gw.port}, log tail ---\n{gw.log_tail()}")
    problems = g.finish()
    if problems:
        pytest.fail("\n\n".join(problems))


def _finished(g: Gateways) -> None:
    """Stop a module's gateways; any that died or did not exit 0 fails the module's last test."""
    problems = g.finish()
    if problems:
        pytest.fail("\n\n".join(problems))


@pytest.fixture(scope="module")
def module_gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateways]:
    g = Gateways(tmp_path_factory.mktemp("gateways"))
    yield g
    _finished(g)


@pytest.fixture(scope="module")
def shared_gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedGateways]:
    g = SharedGateways(tmp_path_factory.mktemp("shared-gateways"))
    yield g
    _finished(g)


@pytest.fixture
def gateway(gateways: Gateways) -> GatewayProcess:
    """One gateway with default settings and metrics on a free port."""
    return gateways.start(sets=["metrics.listen=127.0.0.1:0"])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3.0.12 loads its schemas with deprecated importlib.resources calls.
    config.addinivalue_line("filterwarnings", "ignore:.*is deprecated. Use files:DeprecationWarning")


# Group settings given to both sides of a differential pair (Kafka's names; groupshift takes them
# as they are). `KAFKA_ONLY` settings go to Kafka alone: replication factors, and the assignment
# interval (Kafka 4.3 computes target assignments in the background every
# `group.consumer.assignment.interval.ms`; 0 makes it compute them in the heartbeat, which is what
# groupshift always does).
DIFFERENTIAL_GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.migration.policy": "bidirectional",
}
# The release the suite settles against: 4.3 (4.4 computes every target assignment in the
# background whatever `group.consumer.assignment.interval.ms` says, so a member's first answer
# carries no partitions; comparing with 4.4 would compare timing, not rules).
DIFFERENTIAL_KAFKA_VERSION = "4.3"
KAFKA_ONLY = {
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.assignment.interval.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


class DifferentialServers:
    """The session's differential Kafka node and groupshift server (the same group settings).
    `cluster` is None when DIFFERENTIAL_KAFKA names a node started elsewhere (no log dir here)."""

    def __init__(self, cluster: Any, kafka_bootstrap: str, gateway: GatewayProcess) -> None:
        self.cluster = cluster
        self.kafka_bootstrap = kafka_bootstrap
        self.gateway = gateway


@pytest.fixture(scope="session")
def differential_servers(
    tmp_path_factory: pytest.TempPathFactory, kafka_cluster_factory: Any
) -> Iterator[DifferentialServers]:
    """A real Apache Kafka 4.x node and a groupshift server with the same group settings, once
    per session: every module whose scenarios name their own groups and topics shares them (each
    Kafka start is tens of seconds of CI). DIFFERENTIAL_KAFKA=HOST:PORT uses a running node
    instead (started with the same settings)."""
    import os

    cluster = None
    kafka = os.environ.get("DIFFERENTIAL_KAFKA")
    if not kafka:
        cluster = kafka_cluster_factory(
            DIFFERENTIAL_KAFKA_VERSION,
            configs={**DIFFERENTIAL_GROUP_SETTINGS, **KAFKA_ONLY},
            name="differential",
            for_session=True,
        )
        kafka = cluster.bootstrap
    g = Gateways(tmp_path_factory.mktemp("differential"))
    gw = g.start("groupshift", sets=[f"{k}={v}" for k, v in DIFFERENTIAL_GROUP_SETTINGS.items()])
    yield DifferentialServers(cluster, kafka, gw)
    problems = g.finish()
    if problems:
        pytest.fail("\n\n".join(problems))


@pytest.fixture(scope="session")
def differential_pair(differential_servers: DifferentialServers) -> tuple[str, str]:
    """(kafka bootstrap, groupshift bootstrap) of `differential_servers`."""
    return differential_servers.kafka_bootstrap, differential_servers.gateway.bootstrap


@pytest.fixture(scope="module")
def differential_pair_factory(
    tmp_path_factory: pytest.TempPathFactory, kafka_cluster_factory: Any
) -> Iterator[Any]:
    """`factory(name, **settings)`: a Kafka 4.x node and a groupshift server with
    DIFFERENTIAL_GROUP_SETTINGS plus `settings` (Kafka's names, given to both sides), for
    scenarios that need a setting the shared pair cannot have (e.g. `group.max.size`). Pairs live
    for the module (the cluster factory stops the Kafka nodes when the module ends)."""
    g = Gateways(tmp_path_factory.mktemp("differential-custom"))

    def factory(name: str, **settings: str) -> tuple[str, str]:
        group_settings = {**DIFFERENTIAL_GROUP_SETTINGS, **settings}
        cluster = kafka_cluster_factory(
            DIFFERENTIAL_KAFKA_VERSION, configs={**group_settings, **KAFKA_ONLY}, name=name
        )
        gw = g.start(name, sets=[f"{k}={v}" for k, v in group_settings.items()])
        return cluster.bootstrap, gw.bootstrap

    yield factory
    problems = g.finish()
    if problems:
        pytest.fail("\n\n".join(problems))


class DifferentialPairs:
    """Differential pairs with other group settings (migration policies, size limits), each a
    Kafka node and a groupshift server given `DIFFERENTIAL_GROUP_SETTINGS` overridden by the
    caller's; one pair per distinct setting set, stopped when the session ends."""

    def __init__(self, kafka_cluster_factory: Any, base: Path) -> None:
        self.factory = kafka_cluster_factory
        self.gateways = Gateways(base)
        self.pairs: dict[tuple[tuple[str, str], ...], tuple[str, str]] = {}
        self.clusters: list[Any] = []

    def __call__(self, **settings: str) -> tuple[str, str]:
        """(kafka bootstrap, groupshift bootstrap); settings are Kafka names with `_` for `.`."""
        group = {**DIFFERENTIAL_GROUP_SETTINGS, **{k.replace("_", "."): v for k, v in settings.items()}}
        key = tuple(sorted(group.items()))
        if key not in self.pairs:
            cluster = self.factory(
                DIFFERENTIAL_KAFKA_VERSION,
                configs={**group, **KAFKA_ONLY},
                name=f"differential-{len(self.pairs)}",
                for_session=True,
            )
            self.clusters.append(cluster)
            gw = self.gateways.start(
                f"groupshift-{len(self.pairs)}", sets=[f"{k}={v}" for k, v in group.items()]
            )
            self.pairs[key] = (cluster.bootstrap, gw.bootstrap)
        return self.pairs[key]

    def finish(self) -> list[str]:
        for cluster in self.clusters:
            cluster.stop()
        return self.gateways.finish()


@pytest.fixture(scope="session")
def differential_pairs(
    tmp_path_factory: pytest.TempPathFactory, kafka_cluster_factory: Any
) -> Iterator[DifferentialPairs]:
    """A factory of differential pairs with given group settings, e.g.
    `differential_pairs(group_consumer_migration_policy="disabled")`; session-scoped so that each
    setting set costs one Kafka start per session (e2e/test_check_settings.py and
    e2e/test_differential_classic_in_consumer.py both use the `disabled` policy; their scenarios
    name their own groups and topics)."""
    pairs = DifferentialPairs(kafka_cluster_factory, tmp_path_factory.mktemp("differential-pairs"))
    yield pairs
    problems = pairs.finish()
    if problems:
        pytest.fail("\n\n".join(problems))
