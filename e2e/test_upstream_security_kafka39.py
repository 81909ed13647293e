"""Scale-out over SASL_SSL (issue 29, point 1): three groupshift nodes in front of a three-broker
Kafka 3.9 whose only listener is SASL_SSL with StandardAuthorizer, coordinator shards kept on
the cluster (`upstream.coordinator.storage=kafka`), every upstream connection authenticated with
SCRAM-SHA-256 over TLS (a PEM truststore): the per-broker links and metadata (asyncio), the fleet
membership (its own thread and loop), and the shard log's transactional producers, readers and
topic admin (librdkafka, the same settings in its names).

The fleet settles on three nodes (each loaded its shards: read_committed reader and fenced
transactional producer over SASL_SSL); a KIP-848 consumer (librdkafka) and a classic one
(kafka-python), each in a group coordinated by a different node, consume what was produced
through groupshift and commit (transactions on the shard partitions); node 1002 is SIGKILLed,
the others take its shards over (reading them back from the cluster) and the classic group,
restarted, resumes from its commit. About 1.5 minutes here, half of it the three JVMs.

On the same cluster, the `gateway` identity (issue 29): one groupshift with a SASL_SSL listener
(PLAIN users, its own StandardAuthorizer) in front of it; a principal without READ on a group is
refused the group, without READ on a topic cannot fetch it, with both consumes, for librdkafka
(KIP-848 and classic), Kafka's Java consumer and kafka-python
(e2e/test_upstream_gateway_acls.py's cases, run there against Kafka 4.4). Then the same cases
in the `passthrough` identity: groupshift's listener is SSL only, every client logs in to the
cluster through it (users admin, alice, bob, carol), and the cluster's ACLs decide.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.expected import PARTITIONS
from e2e.groups import ConfluentMember, KafkaPythonMember, Ledger, produce
from e2e.harness import GatewayProcess
from e2e.scaleout import fleet_settings, group_on, wait_fleet
from e2e.secured_pair import USERS, plain_login, sasl_groupshift_sets
from e2e.test_upstream_gateway_acls import Setup, three_cases
from e2e.test_upstream_passthrough import passthrough_sets
from e2e.upstream import FAST_UPSTREAM_SETTINGS, Endpoint, create_replicated_topic, gateway_offsets, run_until
from harness.kafka_dist import KafkaCluster
from harness.kafka_dist.java_clients import JavaClients
from harness.kafka_dist.security import password_of
from tests.plugins.kafka import skip_without_tools

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
SHARDS = 6
NODES = (1001, 1002, 1003)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    skip_without_tools()
    base = tmp_path_factory.mktemp("upsec39")
    configs = {
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1000",
        "offsets.topic.num.partitions": "4",
        "auto.create.topics.enable": "false",
        "min.insync.replicas": "1",
        "transaction.state.log.num.partitions": "4",
    }
    cluster = KafkaCluster(
        "3.9", brokers=3, configs=configs, workdir=base / "kafka", security="sasl_ssl", users=USERS
    )
    try:
        yield cluster.start()
    finally:
        cluster.stop(graceful=False)  # thrown away: a 3-node controlled shutdown takes seconds


def upstream_settings(cluster: KafkaCluster) -> list[str]:
    """SCRAM-SHA-256 over TLS (a PEM truststore) as the cluster's super user `admin`."""
    security = cluster.security
    assert security is not None
    jaas = f'{SCRAM} required username="admin" password="{password_of("admin")}";'
    return [
        "upstream.security.protocol=SASL_SSL",
        f"upstream.ssl.truststore.location={security.ca.pem}",
        "upstream.ssl.truststore.type=PEM",
        "upstream.sasl.mechanism=SCRAM-SHA-256",
        f"upstream.sasl.jaas.config={jaas}",
    ]


def _node(cluster: KafkaCluster, base: Path, node_id: int) -> GatewayProcess:
    sets = [
        *fleet_settings(node_id, SHARDS, topic="gs-coordinator", fleet="gs-fleet"),
        *upstream_settings(cluster),
    ]
    return GatewayProcess.start(
        base / f"n{node_id}", sets=sets, extra_args=("--upstream", cluster.bootstrap), start_timeout=60
    )


def test_scale_out_fleet_over_sasl_ssl(cluster: KafkaCluster, tmp_path: Path) -> None:
    nodes = [_node(cluster, tmp_path, n) for n in NODES]
    try:
        shards_of = wait_fleet(nodes, list(NODES), SHARDS, timeout=90)
        topic = "sec39"
        try:
            create_replicated_topic(nodes[0].bootstrap, topic, 3)
        except Exception as e:
            # Once in CI the connection dropped during CreateTopics (librdkafka: "Broker transport
            # failure"); say why each node closed a connection, to find out next time.
            closed = [(n.bootstrap, ev) for n in nodes for ev in n.events("connection.closed")]
            raise AssertionError(
                f"CreateTopics through node 1001 failed: {e!r}; closed: {closed[-8:]}"
            ) from e
        count = 240
        produce(Endpoint(nodes[0].bootstrap), topic, range(count))  # type: ignore[arg-type]
        groups = {
            "kip848": group_on(shards_of[1001], "s39-kip848", SHARDS),
            "classic": group_on(shards_of[1002], "s39-classic", SHARDS),
        }
        makers: dict[str, Any] = {
            "kip848": lambda led, g: ConfluentMember(
                "ck", led, nodes[0].bootstrap, g, **{"group.protocol": "consumer"}
            ),
            "classic": lambda led, g: KafkaPythonMember("kp", led, nodes[0].bootstrap, g),
        }
        expected = {p: count // PARTITIONS for p in range(PARTITIONS)}
        for name, group in groups.items():
            ledger = Ledger(topic)
            member = makers[name](ledger, group).start()
            try:
                run_until([member], ledger, count, 90)
                ledger.check_consumed(range(count))
            finally:
                member.stop()
            assert gateway_offsets(nodes[0], group, topic) == expected, name
        # Node 1002 dies: 1001 reads its shards back from the cluster and serves the group.
        nodes[1].kill()
        wait_fleet([nodes[0], nodes[2]], [1001, 1003], SHARDS, timeout=60)
        assert gateway_offsets(nodes[0], groups["classic"], topic) == expected
        ledger = Ledger(topic)
        member = makers["classic"](ledger, groups["classic"]).start()
        try:
            produce(Endpoint(nodes[0].bootstrap), topic, range(count, count + 60))  # type: ignore[arg-type]
            run_until([member], ledger, 60, 60)
            ledger.check_consumed(range(count, count + 60))  # only what came after the commit
        finally:
            member.stop()
        for gw in nodes:
            assert not gw.events("upstream.authentication_failed")
    finally:
        for gw in nodes:
            if gw.alive():
                gw.stop()


def test_gateway_identity_acls_on_kafka39(
    cluster: KafkaCluster, tmp_path: Path, kafka_clients4: JavaClients
) -> None:
    """The three cases of issue 29 in the `gateway` identity, groupshift's ACLs deciding, with
    every client library, in front of the three-broker SASL_SSL Kafka 3.9."""
    security = cluster.security
    assert security is not None
    server = security.ca.issue("groupshift", "localhost", server=True)
    sets = [*FAST_UPSTREAM_SETTINGS, *upstream_settings(cluster), *sasl_groupshift_sets(security.ca, server)]
    gw = GatewayProcess.start(tmp_path / "gw", sets=sets, extra_args=("--upstream", cluster.bootstrap))
    try:
        identities = {u: plain_login(security.ca, u) for u in USERS}
        setup = Setup("", gw, security.ca, identities)
        for client in ("librdkafka-kip848", "librdkafka-classic", "kafka-python-classic", "java-kip848"):
            three_cases(setup, client, kafka_clients4 if client.startswith("java") else None)
        assert not gw.events("upstream.authentication_failed")
    finally:
        assert gw.stop() == 0, gw.log_tail()


def test_passthrough_identity_acls_on_kafka39(
    cluster: KafkaCluster, tmp_path: Path, kafka_clients4: JavaClients
) -> None:
    """The same three cases in the `passthrough` identity: groupshift's listener is SSL only,
    each client's SASL login is relayed to the cluster (to each of the three brokers, through
    its per-broker listener), and the ACLs, created through groupshift by admin, are the
    cluster's: CreateAcls is relayed as admin's own request."""
    security = cluster.security
    assert security is not None
    sets = [*FAST_UPSTREAM_SETTINGS, *upstream_settings(cluster), *passthrough_sets(security.ca)]
    gw = GatewayProcess.start(tmp_path / "gw", sets=sets, extra_args=("--upstream", cluster.bootstrap))
    try:
        identities = {u: plain_login(security.ca, u) for u in USERS}
        setup = Setup("", gw, security.ca, identities)
        for client in ("librdkafka-kip848", "librdkafka-classic", "kafka-python-classic", "java-kip848"):
            three_cases(setup, client, kafka_clients4 if client.startswith("java") else None)
        assert not gw.events("upstream.authentication_failed")
    finally:
        assert gw.stop() == 0, gw.log_tail()
