"""Upstream mode's `passthrough` identity (issue 29, point 2): the cluster authenticates each
client (its SASL exchange relayed by groupshift) and the cluster's ACLs alone decide, for the
forwarded data plane and for the group APIs groupshift answers itself (probes,
gateway/upstream/passthrough.py).

One Kafka 4.4 node with a SASL_SSL listener and StandardAuthorizer (e2e/secured_pair.py,
`super.users=User:admin`, PLAIN and SCRAM users admin, alice, bob); the ACLs exist only on the cluster.
In front of it a groupshift with an SSL listener (no SASL, no authorizer of its own),
`upstream.identity=passthrough`. librdkafka KIP-848 consumers log in through groupshift:

* alice without READ on a group is refused it (GROUP_AUTHORIZATION_FAILED, from a probe);
* bob (SCRAM-SHA-512) with READ on his group but only DESCRIBE on the topic is refused every fetch
  (TOPIC_AUTHORIZATION_FAILED, the cluster's own answer on bob's link);
* alice with READ on group and topic consumes everything and commits, as a KIP-848 member
  and as a classic one (refused a classic group without READ too);
* a wrong password gets the cluster's authentication error; the others are unaffected;
* the same three cases (e2e/test_upstream_gateway_acls.py's `three_cases`) with Kafka's Java
  consumer (KIP-848) and kafka-python (classic);
* alice, no super user, with WRITE on her transactional id and READ and DELETE on her group,
  commits offsets in a transaction (TxnOffsetCommit, answered by groupshift), deletes a
  partition's offsets (OffsetDelete) and her group (DeleteGroups); bob without those ACLs is
  refused each with Kafka's error, from probes on his own link;
* a streams group's internal topics are created on the cluster for alice, who may CREATE
  them, and not for bob, who may not (a validate-only CreateTopics probe on each one's link);
* a Java 4.x exactly-once copier as alice keeps to transaction version 1 through groupshift
  (docs/transactions.md), though the cluster has version 2 finalized.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.librdkafka_polling import poll_records
from e2e.secured_pair import USERS, plain_login, start_kafka
from e2e.test_upstream_gateway_acls import Setup as AclSetup
from e2e.test_upstream_gateway_acls import three_cases
from e2e.tls_certs import PASSWORD, Authority
from e2e.upstream import FAST_UPSTREAM_SETTINGS
from e2e.upstream_streams import partitions_of, run_member, streams_join, word_count_topology
from harness.kafka_dist.cluster import KafkaCluster
from harness.kafka_dist.java_clients import JavaClients
from harness.kafka_dist.security import password_of

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
ADMIN_PASSWORD = password_of("admin")


@dataclass(frozen=True)
class Setup:
    cluster: KafkaCluster
    ca: Authority
    groupshift: GatewayProcess
    topic: str
    suffix: str


def _conf(
    bootstrap: str, ca: Authority, user: str, password: str | None = None, mechanism: str = "PLAIN"
) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca.pem),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password if password is not None else password_of(user),
    }


def _allow(admin: Any, principal: str, rtype: Any, name: str, *ops: Any) -> None:
    from confluent_kafka.admin import AclBinding, AclPermissionType, ResourcePatternType

    acls = [
        AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW)
        for op in ops
    ]
    for f in admin.create_acls(acls).values():
        f.result(timeout=30)


def passthrough_sets(ca: Authority) -> list[str]:
    """groupshift's side of passthrough: an SSL listener (a certificate of the cluster's CA, so
    the clients' one truststore serves both), no SASL and no authorizer of its own."""
    server = ca.issue("groupshift", "localhost", server=True)
    props = {
        "listeners": "SSL://127.0.0.1:0",
        "listener.security.protocol.map": "SSL:SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(server.p12),
        "ssl.keystore.password": PASSWORD,
        "upstream.identity": "passthrough",
    }
    return [f"{k}={v}" for k, v in props.items()]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

    base = Path(tmp_path_factory.mktemp("upstream-passthrough"))
    cluster = start_kafka(base / "upstream")
    gateways = Gateways(base / "groupshift")
    try:
        assert cluster.security is not None
        ca = cluster.security.ca
        suffix = uuid.uuid4().hex[:6]
        topic = f"orders-{suffix}"
        direct = AdminClient(_conf(cluster.bootstrap, ca, "admin"))
        direct.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=60)
        # the cluster's ACLs, the only ones
        _allow(direct, "User:alice", ResourceType.TOPIC, topic, AclOperation.READ)
        for g in (f"alice-{suffix}", f"alice-classic-{suffix}"):
            _allow(direct, "User:alice", ResourceType.GROUP, g, AclOperation.READ)
        # the transactional copier's: its group (READ, DELETE) and transactional id (WRITE)
        _allow(
            direct,
            "User:alice",
            ResourceType.GROUP,
            f"alice-txn-{suffix}",
            AclOperation.READ,
            AclOperation.DELETE,
        )
        _allow(direct, "User:alice", ResourceType.TRANSACTIONAL_ID, f"alice-tx-{suffix}", AclOperation.WRITE)
        _allow(direct, "User:bob", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
        _allow(direct, "User:bob", ResourceType.GROUP, f"bob-{suffix}", AclOperation.READ)
        seed = Producer(_conf(cluster.bootstrap, ca, "admin"))
        for i in range(10):
            seed.produce(topic, f"v{i}".encode())
        assert seed.flush(30) == 0

        own = {
            "upstream.security.protocol": "SASL_SSL",
            "upstream.ssl.truststore.location": str(ca.pem),
            "upstream.ssl.truststore.type": "PEM",
            "upstream.sasl.mechanism": "PLAIN",
            "upstream.sasl.jaas.config": f'{PLAIN} required username="admin" password="{ADMIN_PASSWORD}";',
        }
        sets = [*FAST_UPSTREAM_SETTINGS, *(f"{k}={v}" for k, v in own.items()), *passthrough_sets(ca)]
        gw = GatewayProcess.start(
            gateways.base / "gw", sets=tuple(sets), extra_args=("--upstream", cluster.bootstrap)
        )
        gateways.started.append(gw)
        yield Setup(cluster, ca, gw, topic, suffix)
    finally:
        cluster.stop()
        problems = gateways.finish()
        if problems:
            raise AssertionError("\n\n".join(problems))


def _consume(
    s: Setup,
    user: str,
    group: str,
    want: int,
    seconds: float,
    password: str | None = None,
    mechanism: str = "PLAIN",
    protocol: str = "consumer",
) -> tuple[int, list[str]]:
    from confluent_kafka import Consumer

    read, errors = 0, []
    c = Consumer(
        {
            **_conf(s.groupshift.bootstrap, s.ca, user, password, mechanism),
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "error_cb": lambda e: errors.append(e.name()),  # a failed login is reported here
        }
    )
    c.subscribe([s.topic])
    try:
        read, errors = poll_records(c, want, seconds, max_errors=10, errors=errors)
        if read:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return read, errors


def test_the_clusters_acls_decide_through_groupshift(setup: Setup) -> None:
    """The refused consumers each poll for a fixed time (no record may arrive in it), on groups
    of their own: they run at once, beside alice's reads, which go one after the other (the
    second resumes at the offsets the first committed)."""
    s = setup
    refused = {
        # alice may not READ the group
        "other": lambda: _consume(s, "alice", f"other-{s.suffix}", 10, 8),
        # bob logs in with SCRAM-SHA-512: a two-round exchange, relayed
        "bob": lambda: _consume(s, "bob", f"bob-{s.suffix}", 10, 10, mechanism="SCRAM-SHA-512"),
        # the cluster's refusal of a wrong password, relayed
        "wrong": lambda: _consume(s, "alice", f"alice-{s.suffix}", 1, 6, password="wrong"),
        # a classic member (JoinGroup, SyncGroup, Heartbeat: READ on the group, probed)
        "other-classic": lambda: _consume(s, "alice", f"other-classic-{s.suffix}", 1, 6, protocol="classic"),
    }
    with ThreadPoolExecutor(max_workers=len(refused)) as pool:
        futures = {name: pool.submit(probe) for name, probe in refused.items()}
        read, errors = _consume(s, "alice", f"alice-{s.suffix}", 10, 40)
        assert read == 10, (read, errors)
        # alice's committed offsets (groupshift's) are read back: the group resumes at the end
        read, errors = _consume(s, "alice", f"alice-{s.suffix}", 1, 5)
        assert read == 0 and not errors, errors
        read, errors = _consume(s, "alice", f"alice-classic-{s.suffix}", 10, 40, protocol="classic")
        assert read == 10, (read, errors)
        got = {name: f.result() for name, f in futures.items()}
    read, errors = got["other"]
    assert read == 0 and "GROUP_AUTHORIZATION_FAILED" in errors, errors
    read, errors = got["bob"]
    assert read == 0 and "TOPIC_AUTHORIZATION_FAILED" in errors, errors
    read, errors = got["wrong"]
    assert read == 0 and "_AUTHENTICATION" in errors, errors
    read, errors = got["other-classic"]
    assert read == 0 and "GROUP_AUTHORIZATION_FAILED" in errors, errors


@pytest.mark.parametrize("client", ["java-kip848", "kafka-python-classic"])
def test_the_three_cases_with_java_and_kafka_python(
    setup: Setup, client: str, request: pytest.FixtureRequest
) -> None:
    """Issue 29's three cases with Kafka's Java consumer (KIP-848) and kafka-python (classic),
    each logging in to the cluster through groupshift; the ACLs, created through groupshift by
    admin, are the cluster's (e2e/test_upstream_gateway_acls.py's `three_cases`)."""
    java: JavaClients | None = (
        request.getfixturevalue("kafka_clients4") if client.startswith("java") else None
    )
    identities = {u: plain_login(setup.ca, u) for u in USERS}
    three_cases(AclSetup("", setup.groupshift, setup.ca, identities), client, java)


def test_transactional_commits_and_deletes_by_the_clusters_acls(setup: Setup) -> None:
    """TxnOffsetCommit, OffsetDelete and DeleteGroups, which groupshift answers itself, for a
    principal that is no super user: alice, with WRITE on her transactional id and READ and
    DELETE on her group, commits offsets in a transaction (librdkafka's
    `send_offsets_to_transaction`), deletes a partition's offsets and then the group; bob,
    without those ACLs, gets Kafka's refusals (TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED), proved by the probes on his own link."""
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import AdminClient

    from protocol.client import make_request

    s = setup
    group, txn = f"alice-txn-{s.suffix}", f"alice-tx-{s.suffix}"
    c = Consumer(
        {
            **_conf(s.groupshift.bootstrap, s.ca, "alice"),
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([s.topic])
    try:
        read, deadline = 0, time.monotonic() + 40
        while read < 10 and time.monotonic() < deadline:
            m = c.poll(0.5)
            read += m is not None and m.error() is None
        assert read == 10
        producer = Producer({**_conf(s.groupshift.bootstrap, s.ca, "alice"), "transactional.id": txn})
        producer.init_transactions(30)
        producer.begin_transaction()
        positions = c.position(c.assignment())
        assert sum(tp.offset for tp in positions) == 10, positions
        producer.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        committed: list[int] = []
        deadline = time.monotonic() + 20
        while sum(committed) != 10 and time.monotonic() < deadline:
            committed = [max(tp.offset, 0) for tp in c.committed(c.assignment(), timeout=10)]
        assert sum(committed) == 10, committed
    finally:
        c.close()

    def raw(user: str, api_key: int, version: int, **body: Any) -> Any:
        with plain_login(s.ca, user).connect("127.0.0.1", s.groupshift.port, timeout=30) as wire:
            return wire.request(make_request(api_key, version, **body))

    txn_commit = {
        "group_id": f"bob-{s.suffix}",  # bob may READ it: the transactional id decides
        "producer_id": 0,
        "producer_epoch": 0,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": s.topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    }
    r = raw("bob", 28, 3, transactional_id=f"bob-tx-{s.suffix}", **txn_commit)
    assert [p.error_code for t in r.topics for p in t.partitions] == [53], r
    deletion = {"group_id": group, "topics": [{"name": s.topic, "partitions": [{"partition_index": 0}]}]}
    r = raw("bob", 47, 0, **deletion)
    assert r.error_code == 30, r
    r = raw("alice", 47, 0, **deletion)
    assert r.error_code == 0, r
    assert [p.error_code for t in r.topics for p in t.partitions] == [0], r

    def delete_group(user: str) -> str | None:
        admin = AdminClient(_conf(s.groupshift.bootstrap, s.ca, user))
        try:
            admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=40)
        except KafkaException as e:
            return str(e.args[0].name())
        return None

    assert delete_group("bob") == "GROUP_AUTHORIZATION_FAILED"
    assert delete_group("alice") is None


def test_java_transactional_copier_uses_transaction_version_1(
    setup: Setup, kafka_clients4: JavaClients, tmp_path: Path
) -> None:
    """A Java 4.x exactly-once copier (e2e/java_programs/TransactionalCopier.java, KIP-848 group,
    read_committed, `sendOffsetsToTransaction`, every third transaction aborted) as alice
    through groupshift, in front of a Kafka 4.4 whose finalized `transaction.version` is 2
    (KIP-890 part 2). groupshift's ApiVersions carries no finalized features, so the client
    keeps to transaction version 1 (AddOffsetsToTxn and TxnOffsetCommit v4; docs/transactions.md):
    the producer epoch stays where InitProducerId left it (version 2 bumps it at every EndTxn),
    the output holds each input record exactly once and the group's offsets cover the input."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

    from e2e.transactions import Copier, compile_copier
    from protocol.client import make_request

    s = setup
    group, txn, output = f"alice-eos-{s.suffix}", f"alice-eos-tx-{s.suffix}", f"copied-{s.suffix}"
    program = compile_copier(kafka_clients4, tmp_path / "classes")
    direct = AdminClient(_conf(s.cluster.bootstrap, s.ca, "admin"))
    direct.create_topics([NewTopic(output, 2, 1)])[output].result(timeout=60)
    _allow(direct, "User:alice", ResourceType.GROUP, group, AclOperation.READ)
    _allow(direct, "User:alice", ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE)
    _allow(direct, "User:alice", ResourceType.TOPIC, output, AclOperation.WRITE)
    with plain_login(s.ca, "admin").connect("127.0.0.1", s.cluster.port(), timeout=30) as wire:
        features = wire.request(make_request(18, 3, client_software_name="t", client_software_version="1"))
        finalized = {f.name: int(f.max_version_level) for f in features.finalized_features}
    assert finalized.get("transaction.version", 0) >= 2, finalized
    with plain_login(s.ca, "alice").connect("127.0.0.1", s.groupshift.port, timeout=30) as wire:
        ours = wire.request(make_request(18, 3, client_software_name="t", client_software_version="1"))
    assert not ours.finalized_features, ours.finalized_features
    props = tmp_path / "alice.properties"
    jaas = f'{PLAIN} required username="alice" password="{password_of("alice")}";'
    props.write_text(
        "security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={s.ca.pem}\nsasl.mechanism=PLAIN\nsasl.jaas.config={jaas}\n"
    )
    copier = Copier(
        kafka_clients4,
        program.classes(),
        s.groupshift.bootstrap,
        (s.topic, output),
        group,
        txn_id=txn,
        protocol="consumer",
        abort_every="3",
        properties=str(props),
    )
    reader = Consumer(
        {
            **_conf(s.cluster.bootstrap, s.ca, "admin"),
            "group.id": f"reader-{s.suffix}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    reader.subscribe([output])
    values: list[bytes] = []
    try:
        copier.start()
        deadline = time.monotonic() + 60
        while len(values) < 10 and time.monotonic() < deadline and not copier.errors():
            m = reader.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
        for _ in range(4):  # a duplicate would come right after
            m = reader.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(10)), (values, copier.errors())
        events = copier.events()
        assert any(e["name"] == "committed" for e in events), events
    finally:
        copier.stop()
        reader.close()
    with plain_login(s.ca, "admin").connect("127.0.0.1", s.cluster.port(), timeout=30) as wire:
        described = wire.request(make_request(65, 0, transactional_ids=[txn]))
    (state,) = described.transaction_states
    assert int(state.error_code) == 0 and int(state.producer_epoch) == 0, state


def test_streams_group_internal_topics_by_the_clusters_acls(setup: Setup) -> None:
    """A streams group (KIP-1071) served by groupshift in passthrough: its heartbeat needs READ
    on the group and DESCRIBE on the topology's topics, and a missing internal topic is
    created (by groupshift, on the cluster) only when the member's principal may CREATE it,
    which the cluster's ACLs decide (a validate-only CreateTopics on the member's own link).
    alice may: her topics appear on the cluster and she gets every task; bob may not: his
    heartbeats say so and his topics are never created."""
    from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

    s = setup
    direct = AdminClient(_conf(s.cluster.bootstrap, s.ca, "admin"))
    topics = {}
    for user, ops in (
        ("alice", (AclOperation.DESCRIBE, AclOperation.CREATE)),
        ("bob", (AclOperation.DESCRIBE,)),
    ):
        group = f"{user}-streams-{s.suffix}"
        topics[user] = (group, f"{group}-counts-repartition", f"{group}-counts-changelog")
        _allow(direct, f"User:{user}", ResourceType.GROUP, group, AclOperation.READ)
        for t in topics[user][1:]:
            _allow(direct, f"User:{user}", ResourceType.TOPIC, t, *ops)
    admin_conf = _conf(s.cluster.bootstrap, s.ca, "admin")

    for user in ("alice", "bob"):
        group, repartition, changelog = topics[user]
        topology = word_count_topology(s.topic, repartition, changelog, {"cleanup.policy": "compact"})
        with plain_login(s.ca, user).connect("127.0.0.1", s.groupshift.port, timeout=30) as wire:
            member, r = streams_join(wire, group, topology)
            r, owned = run_member(wire, group, member, int(r.member_epoch), 4, 20 if user == "alice" else 4)
        details = [d.status_detail for d in r.status or ()]
        if user == "alice":
            assert not r.status and owned == 4, (r, s.groupshift.log_tail())
            assert partitions_of(s.cluster.bootstrap, repartition, **admin_conf) == 2
            assert partitions_of(s.cluster.bootstrap, changelog, **admin_conf) == 2
        else:
            assert owned == 0 and any("Unauthorized to CREATE" in d for d in details), r
            assert partitions_of(s.cluster.bootstrap, repartition, **admin_conf) is None
            assert partitions_of(s.cluster.bootstrap, changelog, **admin_conf) is None
